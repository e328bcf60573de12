"""What the tests' scripted model servers (fake_anthropic.py,
fake_openai.py, fake_gemini.py) share: a log of what each request asked
(the file named as the first argument), and an HTTP/1.1 server on a free
port of 127.0.0.1 that prints `port <n>` once it listens and answers each
POST with what the script's `answer(path, body)` gives — `(status,
content type, bytes)` — and every GET with 404.
"""

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOG = sys.argv[1] if len(sys.argv) > 1 else None
# Held while a counter of the script's or the log changes.
LOCK = threading.Lock()


def log(line):
    if LOG:
        with LOCK, open(LOG, "a", encoding="utf-8") as f:
            f.write(line + "\n")


def serve(answer):
    """Serves until the test kills the process."""

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
            self.reply(*answer(self.path, body))

        def do_GET(self):
            log(f"GET {self.path} (answered 404)")
            self.reply(404, "application/json", b"{}")

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(f"port {server.server_address[1]}", flush=True)
    server.serve_forever()
