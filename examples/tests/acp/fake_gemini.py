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
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOG = sys.argv[1] if len(sys.argv) > 1 else None
LOCK = threading.Lock()

USAGE = {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15}


def log(line):
    if LOG:
        with LOCK, open(LOG, "a", encoding="utf-8") as f:
            f.write(line + "\n")


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


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def reply(self, status, content_type, data):
        self.send_response(status)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self):
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length)
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {}
        contents = body.get("contents") or [{}]
        log(f"{self.path} last={json.dumps(contents[-1])[:300]}")
        if ":streamGenerateContent" in self.path:
            self.reply(200, "text/event-stream", script(body))
        elif ":generateContent" in self.path:
            text = json.dumps({"reasoning": "The model has answered.", "next_speaker": "user"})
            out = {"candidates": [{"content": {"role": "model", "parts": [{"text": text}]},
                                   "finishReason": "STOP", "index": 0}], "usageMetadata": USAGE}
            self.reply(200, "application/json", json.dumps(out).encode())
        elif ":countTokens" in self.path:
            self.reply(200, "application/json", b'{"totalTokens": 10}')
        else:
            self.reply(404, "application/json", b"{}")

    def do_GET(self):
        log(f"GET {self.path} (answered 404)")
        self.reply(404, "application/json", b"{}")


def main():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(f"port {server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
