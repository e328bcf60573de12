#!/usr/bin/env python3
"""An ACP agent that picks its mode as Claude Code does: each session starts
in `auto`, in which a tool call runs without asking; in `default` it asks
first (`session/request_permission`). JSON-RPC 2.0, one object a line, on
stdin and stdout. Every `session/set_mode` it gets is appended to the file
named by MODES_AGENT_LOG, as `set_mode <mode>`, and every `session/load`,
`session/resume` and `session/close` as the method and the session id.
With MODES_AGENT_RESUME=1 it offers `session/resume` and `session/close`.

A prompt that holds "run" makes a tool call ("touch made"); one that holds
"switch yourself" makes the agent switch its own mode to `auto`; "run
long" starts `sleep 3; touch late` and, cancelled, ends the turn but not
the command (as Codex does); "fill a
form", "open a page" and "fill tags" ask the client (`elicitation/create`)
and say its answer back ("got {…}"); anything else is echoed back.
"""

import json
import os
import subprocess
import sys
import uuid

MODES = ["default", "acceptEdits", "plan", "auto"]
sessions = {}
next_id = [1000]
waiting = {}
elicitations = {}
# The prompt of a turn whose command runs, by session (see "run long").
long_running = {}
# The permission requests of "ask twice", by request id.
twice = {}
# What a prompt asks the client for (`elicitation/create`), by a phrase in it.
ELICITATIONS = {
    "fill a form": {"mode": "form", "message": "Order details", "requestedSchema": {
        "type": "object", "required": ["name"], "properties": {
            "name": {"type": "string", "title": "Your name"},
            "count": {"type": "integer"},
            "size": {"type": "string", "enum": ["s", "m"]},
            "gift": {"type": "boolean"}}}},
    "open a page": {"mode": "url", "elicitationId": "e-1", "message": "Sign in to continue",
                    "url": "https://login.example.com/auth?state=x"},
    "fill tags": {"mode": "form", "message": "Tags", "requestedSchema": {
        "type": "object", "properties": {"tags": {"type": "array", "items": {"type": "string", "enum": ["red", "blue"]}}}}},
}


def send(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def log(line):
    path = os.environ.get("MODES_AGENT_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(line + "\n")


def update(session, body):
    send({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": session, "update": body}})


def modes(current):
    return {"currentModeId": current, "availableModes": [{"id": m, "name": m} for m in MODES]}


def finish_tool(session, call, allowed, prompt_id):
    status = "completed" if allowed else "failed"
    text = "made" if allowed else "refused"
    update(session, {"sessionUpdate": "tool_call_update", "toolCallId": call, "status": status,
                     "content": [{"type": "content", "content": {"type": "text", "text": text}}]})
    update(session, {"sessionUpdate": "agent_message_chunk", "messageId": "m-" + call,
                     "content": {"type": "text", "text": f"tool {text}"}})
    send({"jsonrpc": "2.0", "id": prompt_id, "result": {"stopReason": "end_turn"}})


def main():
    for line in sys.stdin:
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        method, mid, params = msg.get("method"), msg.get("id"), msg.get("params") or {}
        if method is None and mid in twice:
            twice.pop(mid)
            log("twice " + json.dumps((msg.get("result") or {}).get("outcome"), sort_keys=True))
        elif method is None and mid in elicitations:
            # The client's answer to a form or a page: said back as the reply.
            session, prompt_id = elicitations.pop(mid)
            update(session, {"sessionUpdate": "agent_message_chunk", "messageId": "m-e" + str(mid),
                             "content": {"type": "text", "text": "got " + json.dumps(msg.get("result"), sort_keys=True)}})
            send({"jsonrpc": "2.0", "id": prompt_id, "result": {"stopReason": "end_turn"}})
        elif method is None and mid in waiting:
            session, call, prompt_id = waiting.pop(mid)
            outcome = (msg.get("result") or {}).get("outcome") or {}
            allowed = outcome.get("outcome") == "selected" and outcome.get("optionId") == "allow"
            finish_tool(session, call, allowed, prompt_id)
        elif method == "initialize":
            capabilities = {"loadSession": True}
            if os.environ.get("MODES_AGENT_RESUME") == "1":
                capabilities["sessionCapabilities"] = {"resume": {}, "close": {}}
            send({"jsonrpc": "2.0", "id": mid, "result": {
                "protocolVersion": 1, "agentInfo": {"name": "modes-agent", "version": "1"},
                "agentCapabilities": capabilities, "authMethods": []}})
        elif method == "session/new":
            session = str(uuid.uuid4())
            sessions[session] = "auto"
            send({"jsonrpc": "2.0", "id": mid, "result": {"sessionId": session, "modes": modes("auto")}})
        elif method in ("session/load", "session/resume"):
            session = params.get("sessionId")
            log(f"{method} {session}")
            sessions[session] = "auto"
            if method == "session/load":
                # The replay: what was said, again.
                update(session, {"sessionUpdate": "user_message_chunk",
                                 "content": {"type": "text", "text": "replayed"}})
            send({"jsonrpc": "2.0", "id": mid, "result": {"modes": modes("auto")}})
        elif method == "session/close":
            log(f"session/close {params.get('sessionId')}")
            send({"jsonrpc": "2.0", "id": mid, "result": {}})
        elif method == "session/set_mode":
            session, mode = params.get("sessionId"), params.get("modeId")
            log(f"set_mode {mode}")
            if mode not in MODES:
                send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32602, "message": "no such mode"}})
                continue
            sessions[session] = mode
            send({"jsonrpc": "2.0", "id": mid, "result": {}})
            update(session, {"sessionUpdate": "current_mode_update", "currentModeId": mode})
        elif method == "session/prompt":
            session = params.get("sessionId")
            text = " ".join(b.get("text", "") for b in params.get("prompt", []))
            asked = next((k for k in ELICITATIONS if k in text), None)
            if asked:
                next_id[0] += 1
                elicitations[next_id[0]] = (session, mid)
                params = dict(ELICITATIONS[asked], sessionId=session)
                send({"jsonrpc": "2.0", "id": next_id[0], "method": "elicitation/create", "params": params})
                continue
            if "ask twice" in text:
                # The same call asked about twice: each answer is logged.
                for _ in range(2):
                    next_id[0] += 1
                    twice[next_id[0]] = mid
                    send({"jsonrpc": "2.0", "id": next_id[0], "method": "session/request_permission", "params": {
                        "sessionId": session,
                        "toolCall": {"toolCallId": "call-twice", "title": "touch twice", "kind": "execute",
                                     "status": "pending"},
                        "options": [{"optionId": "allow", "name": "Yes", "kind": "allow_once"},
                                    {"optionId": "reject", "name": "No", "kind": "reject_once"}]}})
                long_running[session] = mid
                continue
            if "run long" in text:
                call = f"call-{mid}"
                update(session, {"sessionUpdate": "tool_call", "toolCallId": call, "title": "sleep 3; touch late",
                                 "kind": "execute", "status": "in_progress"})
                subprocess.Popen(["sh", "-c", "sleep 3; touch late"])
                long_running[session] = mid
                continue
            if "switch yourself" in text:
                # As Claude's "allow all edits" option does: the agent
                # changes its own mode, and says so.
                sessions[session] = "auto"
                update(session, {"sessionUpdate": "current_mode_update", "currentModeId": "auto"})
                update(session, {"sessionUpdate": "agent_message_chunk", "messageId": "m-" + str(mid),
                                 "content": {"type": "text", "text": "switched"}})
                send({"jsonrpc": "2.0", "id": mid, "result": {"stopReason": "end_turn"}})
                continue
            if "run" not in text:
                update(session, {"sessionUpdate": "agent_message_chunk", "messageId": "m-" + str(mid),
                                 "content": {"type": "text", "text": "Echo: " + text}})
                send({"jsonrpc": "2.0", "id": mid, "result": {"stopReason": "end_turn"}})
                continue
            call = f"call-{mid}"
            update(session, {"sessionUpdate": "tool_call", "toolCallId": call, "title": "touch made",
                             "kind": "execute", "status": "pending", "rawInput": {"command": "touch made"}})
            if sessions.get(session) == "auto":
                finish_tool(session, call, True, mid)
                continue
            next_id[0] += 1
            waiting[next_id[0]] = (session, call, mid)
            send({"jsonrpc": "2.0", "id": next_id[0], "method": "session/request_permission", "params": {
                "sessionId": session,
                "toolCall": {"toolCallId": call, "title": "touch made", "kind": "execute",
                             "status": "pending", "rawInput": {"command": "touch made"}},
                "options": [{"optionId": "allow", "name": "Yes", "kind": "allow_once"},
                            {"optionId": "reject", "name": "No", "kind": "reject_once"}]}})
        elif method == "session/cancel":
            # As Codex does: the turn ends, the command it started runs on.
            session = params.get("sessionId")
            if session in long_running:
                send({"jsonrpc": "2.0", "id": long_running.pop(session), "result": {"stopReason": "cancelled"}})
        elif mid is not None:
            send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": "method not found"}})


if __name__ == "__main__":
    main()
