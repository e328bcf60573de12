// The node baseline of `cargo xtask bench`: node:http alone, serving the
// bytes of --body FILE on the Unix socket --socket PATH, with an ETag and a
// 304 on a match (as the bare hyper server does): what an agent written on
// node would pay at least for the same answers.
"use strict";
const fs = require("node:fs");
const http = require("node:http");
const path = require("node:path");

const args = process.argv.slice(2);
const opt = {};
for (let i = 0; i + 1 < args.length; i += 2) opt[args[i]] = args[i + 1];
const body = fs.readFileSync(opt["--body"]);
const socket = opt["--socket"];
const etag = '"bench-1"';

fs.mkdirSync(path.dirname(socket), { recursive: true });
try {
  fs.unlinkSync(socket);
} catch {}
const server = http.createServer((req, res) => {
  if (req.headers["if-none-match"] === etag) {
    res.writeHead(304, { etag });
    res.end();
    return;
  }
  res.writeHead(200, { "content-type": "application/json", etag, "content-length": body.length });
  res.end(body);
});
server.keepAliveTimeout = 60000;
server.listen(socket, () => {
  console.log(`listening ${socket}`);
  console.log("seq 0");
});
