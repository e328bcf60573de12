#!/usr/bin/env python3
"""A scripted OpenAI Responses API on 127.0.0.1, for Codex (codex-acp) in
the tests: it answers `POST /v1/responses` with a streamed (SSE) answer
chosen by keyword from the last input item, and writes each request's
path and last input item to the log named on the command line. It prints
`port <n>` once it listens.

- a `function_call_output` last (a developer message may follow it):
  "Done: <the output>";
- "run bash": an `exec_command` call that makes the folder `made-by-codex`;
- "run slow": an `exec_command` call that writes `slow-started`, sleeps
  30 s, then writes `slow-finished` (to see whether a stop ends it);
- anything else: "Echo: <the text>".
"""

import json
import sys

# The shared part sits beside this file; no bytecode is written in the repository.
sys.dont_write_bytecode = True
from scripted_model import LOCK, log, serve  # noqa: E402

CALLS = [0]


def next_number():
    with LOCK:
        CALLS[0] += 1
        return CALLS[0]


def event(data):
    return f"event: {data['type']}\ndata: {json.dumps(data)}\n\n"


def answer(item):
    """One output item, streamed as the Responses API streams it."""
    n = next_number()
    response_id = f"resp_fake{n:04d}"
    out = [event({"type": "response.created", "response": {"id": response_id}})]
    out.append(event({"type": "response.output_item.added", "output_index": 0, "item": item}))
    if item["type"] == "message":
        out.append(event({"type": "response.output_text.delta", "output_index": 0, "content_index": 0,
                          "item_id": item["id"], "delta": item["content"][0]["text"]}))
    out.append(event({"type": "response.output_item.done", "output_index": 0, "item": item}))
    out.append(event({"type": "response.completed", "response": {
        "id": response_id,
        "usage": {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 5,
                  "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 15}}}))
    return "".join(out).encode()


def message(text):
    return answer({"type": "message", "role": "assistant", "id": f"msg_fake{next_number():04d}",
                   "status": "completed", "content": [{"type": "output_text", "text": text,
                                                       "annotations": []}]})


def exec_command(cmd):
    n = next_number()
    return answer({"type": "function_call", "id": f"fc_fake{n:04d}", "call_id": f"call_fake{n:04d}",
                   "name": "exec_command", "status": "completed", "arguments": json.dumps({"cmd": cmd})})


def texts(item):
    content = item.get("content")
    if isinstance(content, str):
        return [content]
    return [c.get("text", "") for c in content or [] if isinstance(c, dict)]


def last_turn(items):
    """The last input item that is not a developer message (Codex may add
    one after a call's output)."""
    for item in reversed(items):
        if item.get("role") != "developer":
            return item
    return {}


def script(body):
    items = body.get("input") or []
    last = last_turn(items)
    if last.get("type") == "function_call_output":
        output = last.get("output")
        if isinstance(output, list):
            output = " ".join(o.get("text", "") for o in output if isinstance(o, dict))
        return message("Done: " + str(output).strip())
    said = " ".join(texts(last)).strip()
    if "run bash" in said:
        return exec_command("mkdir -p made-by-codex && echo made")
    if "run slow" in said:
        return exec_command("touch slow-started && sleep 30 && touch slow-finished")
    return message("Echo: " + said)


def answer_request(path, body):
    if not path.startswith("/v1/responses"):
        log(f"{path} (answered 404)")
        return 404, "application/json", b"{}"
    items = body.get("input") or [{}]
    log(f"{path} stream={body.get('stream')} last={json.dumps(last_turn(items))[:300]}")
    return 200, "text/event-stream", script(body)


if __name__ == "__main__":
    serve(answer_request)
