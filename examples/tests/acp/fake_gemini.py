#!/usr/bin/env python3
"""A scripted Gemini API on 127.0.0.1, for Gemini CLI in the tests: it
answers `POST /v1beta/models/<model>:streamGenerateContent?alt=sse` with a
streamed (SSE) answer chosen by keyword from the last content, and writes
each request's path and last content to the log named on the command line.
It prints `port <n>` once it listens.

- a `functionResponse` in the last content: "Done: <the output>";
- "run bash": a `run_shell_command` call that makes the folder
  `made-by-gemini`;
- anything else: "Echo: <the text>" (the first prompt's
  `<session_context>` part left out).

A `:generateContent` (Gemini CLI's side questions, such as whether the
model or the user speaks next) gets a JSON text that says the user does;
`:countTokens` a count.
"""

import json
import sys

# The shared part sits beside this file; no bytecode is written in the repository.
sys.dont_write_bytecode = True
from scripted_model import log, serve  # noqa: E402

USAGE = {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15}


def chunk(parts, last):
    candidate = {"content": {"role": "model", "parts": parts}, "index": 0}
    if last:
        candidate["finishReason"] = "STOP"
    return f"data: {json.dumps({'candidates': [candidate], 'usageMetadata': USAGE})}\r\n\r\n"


def answer(parts):
    """Each part a chunk of its own, the last one saying STOP."""
    return "".join(chunk([p], i == len(parts) - 1) for i, p in enumerate(parts)).encode()


def user_text(content):
    return " ".join(p.get("text", "") for p in content.get("parts") or []
                    if "text" in p and not p["text"].lstrip().startswith("<session_context>")).strip()


def function_responses(content):
    out = []
    for p in content.get("parts") or []:
        response = p.get("functionResponse")
        if response:
            r = response.get("response") or {}
            out.append(str(r.get("output", r.get("error", r))))
    return out


def script(body):
    contents = body.get("contents") or [{}]
    last = contents[-1]
    results = function_responses(last)
    if results:
        return answer([{"text": "Done: " + results[-1].strip()}])
    said = user_text(last)
    if "run bash" in said:
        return answer([{"functionCall": {"name": "run_shell_command", "args": {
            "command": "mkdir -p made-by-gemini && echo made", "description": "Make a folder"}}}])
    return answer([{"text": "Echo: " + said}])


def answer_request(path, body):
    contents = body.get("contents") or [{}]
    log(f"{path} last={json.dumps(contents[-1])[:300]}")
    if ":streamGenerateContent" in path:
        return 200, "text/event-stream", script(body)
    if ":generateContent" in path:
        text = json.dumps({"reasoning": "The model has answered.", "next_speaker": "user"})
        out = {"candidates": [{"content": {"role": "model", "parts": [{"text": text}]},
                               "finishReason": "STOP", "index": 0}], "usageMetadata": USAGE}
        return 200, "application/json", json.dumps(out).encode()
    if ":countTokens" in path:
        return 200, "application/json", b'{"totalTokens": 10}'
    return 404, "application/json", b"{}"


if __name__ == "__main__":
    serve(answer_request)
