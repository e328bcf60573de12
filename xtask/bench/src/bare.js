// The node baseline of `cargo xtask bench`: node:http alone, serving the
// bytes of --body FILE on the Unix socket --socket PATH, or node:https on
// --https HOST:PORT with --cert and --key (PEM files), with an ETag and a
// 304 on a match, a small JSON to a POST once its body is read, and over
// HTTPS a 401 without a bearer header (as the bare hyper server does): what
// an agent written on node would pay at least for the same answers.
"use strict";
const fs = require("node:fs");
const http = require("node:http");
const https = require("node:https");
const path = require("node:path");

const args = process.argv.slice(2);
const opt = {};
for (let i = 0; i + 1 < args.length; i += 2) opt[args[i]] = args[i + 1];
const body = fs.readFileSync(opt["--body"]);
const etag = '"bench-1"';
const answered = Buffer.from('{"ok":true,"result":"answered"}');
const tls = opt["--https"] !== undefined;

function handle(req, res) {
  if (tls && req.headers.authorization === undefined) {
    res.writeHead(401, { "content-type": "application/json" });
    res.end('{"ok":false}');
    return;
  }
  if (req.method === "POST") {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => {
      res.writeHead(200, { "content-type": "application/json", etag, "content-length": answered.length });
      res.end(answered);
    });
    return;
  }
  if (req.headers["if-none-match"] === etag) {
    res.writeHead(304, { etag });
    res.end();
    return;
  }
  res.writeHead(200, { "content-type": "application/json", etag, "content-length": body.length });
  res.end(body);
}

if (tls) {
  const [host, port] = opt["--https"].split(":");
  const options = { key: fs.readFileSync(opt["--key"]), cert: fs.readFileSync(opt["--cert"]) };
  const server = https.createServer(options, handle);
  server.keepAliveTimeout = 60000;
  server.listen(Number(port), host, () => {
    console.log(`listening https://${host}:${server.address().port}`);
    console.log("seq 0");
  });
} else {
  const socket = opt["--socket"];
  fs.mkdirSync(path.dirname(socket), { recursive: true });
  try {
    fs.unlinkSync(socket);
  } catch {}
  const server = http.createServer(handle);
  server.keepAliveTimeout = 60000;
  server.listen(socket, () => {
    console.log(`listening ${socket}`);
    console.log("seq 0");
  });
}
