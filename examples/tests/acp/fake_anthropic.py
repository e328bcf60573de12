#!/usr/bin/env python3
"""A scripted Anthropic Messages API on 127.0.0.1, for Claude Code
(claude-agent-acp) in the tests: it answers `POST /v1/messages` with a
streamed (SSE) answer chosen by keyword from the last user message, and
writes each request's path and last user text to the log named on the
command line. It prints `port <n>` once it listens.

- a `tool_result` in the last user message: "Done: <the result>";
- "run bash": a `Bash` tool call that makes the folder `made-by-claude`;
- "write note": a `Write` tool call of `note.txt` in the folder the
  message names after "in ";
- anything else: "Echo: <the text>".
"""

import json
import sys

# The shared part sits beside this file; no bytecode is written in the repository.
sys.dont_write_bytecode = True
from scripted_model import LOCK, log, serve  # noqa: E402

CALLS = [0]


def texts(content):
    if isinstance(content, str):
        return [content]
    return [b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text"]


def tool_results(content):
    if isinstance(content, str):
        return []
    out = []
    for b in content:
        if isinstance(b, dict) and b.get("type") == "tool_result":
            c = b.get("content")
            out.append(" ".join(texts(c)) if isinstance(c, list) else str(c))
    return out


def event(name, data):
    return f"event: {name}\ndata: {json.dumps(data)}\n\n"


def answer(blocks, stop):
    with LOCK:
        CALLS[0] += 1
        n = CALLS[0]
    out = [event("message_start", {"type": "message_start", "message": {
        "id": f"msg_fake{n:04d}", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
        "content": [], "stop_reason": None, "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 1}}})]
    for i, block in enumerate(blocks):
        if block["type"] == "text":
            out.append(event("content_block_start", {"type": "content_block_start", "index": i,
                                                     "content_block": {"type": "text", "text": ""}}))
            out.append(event("content_block_delta", {"type": "content_block_delta", "index": i,
                                                     "delta": {"type": "text_delta", "text": block["text"]}}))
        else:
            out.append(event("content_block_start", {"type": "content_block_start", "index": i,
                                                     "content_block": {"type": "tool_use", "id": block["id"],
                                                                       "name": block["name"], "input": {}}}))
            out.append(event("content_block_delta", {"type": "content_block_delta", "index": i,
                                                     "delta": {"type": "input_json_delta",
                                                               "partial_json": json.dumps(block["input"])}}))
        out.append(event("content_block_stop", {"type": "content_block_stop", "index": i}))
    out.append(event("message_delta", {"type": "message_delta",
                                       "delta": {"stop_reason": stop, "stop_sequence": None},
                                       "usage": {"output_tokens": 5}}))
    out.append(event("message_stop", {"type": "message_stop"}))
    return "".join(out).encode()


def last_turn(messages):
    """The last message that is not a system one (Claude Code ends its
    list with an environment block of role `system`)."""
    for m in reversed(messages):
        if m.get("role") != "system":
            return m
    return {"content": ""}


def script(body):
    last = last_turn(body.get("messages") or [])
    results = tool_results(last.get("content", ""))
    if results:
        return answer([{"type": "text", "text": "Done: " + results[-1].strip()}], "end_turn")
    said = " ".join(t for t in texts(last.get("content", "")) if not t.startswith("<system-reminder>")).strip()
    with LOCK:
        CALLS[0] += 1
        call_id = f"toolu_fake{CALLS[0]:04d}"
    if "run bash" in said:
        return answer([{"type": "tool_use", "id": call_id, "name": "Bash",
                        "input": {"command": "mkdir -p made-by-claude && echo made",
                                  "description": "Make a folder"}}], "tool_use")
    if "write note in " in said:
        folder = said.split("write note in ", 1)[1].split()[0]
        return answer([{"type": "tool_use", "id": call_id, "name": "Write",
                        "input": {"file_path": folder.rstrip("/") + "/note.txt", "content": "hello\n"}}],
                      "tool_use")
    return answer([{"type": "text", "text": "Echo: " + said}], "end_turn")


def answer_request(path, body):
    if not path.startswith("/v1/messages") or "count_tokens" in path:
        log(f"{path} (answered 404)")
        return 404, "application/json", b"{}"
    messages = body.get("messages") or [{}]
    log(f"{path} stream={body.get('stream')} last={json.dumps(messages[-1])[:300]}")
    if body.get("stream"):
        return 200, "text/event-stream", script(body)
    # A whole message, for a caller that does not stream.
    out = {"id": "msg_fake", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
           "content": [{"type": "text", "text": "Echo"}], "stop_reason": "end_turn", "stop_sequence": None,
           "usage": {"input_tokens": 10, "output_tokens": 1}}
    return 200, "application/json", json.dumps(out).encode()


if __name__ == "__main__":
    serve(answer_request)
