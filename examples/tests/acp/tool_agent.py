#!/usr/bin/env python3
"""An ACP agent whose one tool starts a long call the way a coding agent's
shell tool does: `session/prompt` runs the prompt's text as a shell
command in a session of its own (`setsid sh -c <text>`, its output
discarded, never waited for), says so as a tool call and a reply
("started <text>"), and ends the turn while the call runs on. JSON-RPC
2.0, one object a line, on stdin and stdout; it ends when its input
closes. For `examples/tests/acp_leftovers.rs`.
"""

import json
import subprocess
import sys
import uuid

sys.dont_write_bytecode = True


def send(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def update(session, body):
    send({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": session, "update": body}})


def main():
    for line in sys.stdin:
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        method, mid, params = msg.get("method"), msg.get("id"), msg.get("params") or {}
        if method == "initialize":
            send({"jsonrpc": "2.0", "id": mid, "result": {
                "protocolVersion": 1, "agentInfo": {"name": "tool-agent", "version": "1"},
                "agentCapabilities": {}, "authMethods": []}})
        elif method == "session/new":
            send({"jsonrpc": "2.0", "id": mid, "result": {"sessionId": str(uuid.uuid4())}})
        elif method == "session/prompt":
            session = params.get("sessionId")
            text = " ".join(b.get("text", "") for b in params.get("prompt", []))
            call = f"call-{mid}"
            update(session, {"sessionUpdate": "tool_call", "toolCallId": call, "title": text,
                             "kind": "execute", "status": "in_progress", "rawInput": {"command": text}})
            # As a coding agent's shell tool does: a session of its own, so
            # neither the agent's group nor its exit reaches the call.
            subprocess.Popen(["setsid", "sh", "-c", text], stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            update(session, {"sessionUpdate": "agent_message_chunk", "messageId": "m-" + str(mid),
                             "content": {"type": "text", "text": "started " + text}})
            send({"jsonrpc": "2.0", "id": mid, "result": {"stopReason": "end_turn"}})
        elif method is not None and mid is not None:
            send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": "method not found"}})


if __name__ == "__main__":
    main()
