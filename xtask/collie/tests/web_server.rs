//! `durable phone --web`'s server, driven by hand-written HTTP requests:
//! the page and its files with their safety headers, the wire proxied to
//! the desk (ETags, 304, writes answered as the agent answers), the secret,
//! the `Host` and `Origin` checks (refused writes never reach the agent),
//! the token that never reaches the page, and a recording agent that shows
//! what is passed on and what is not.

mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use serde_json::Value;
use support::{Desk, PATIENCE, TestDir, durable, root};

/// The headers every answer carries, exactly.
const SAFETY: [(&str, &str); 5] = [
    (
        "content-security-policy",
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; \
         base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    ),
    ("x-content-type-options", "nosniff"),
    ("referrer-policy", "no-referrer"),
    ("cache-control", "no-store"),
    ("x-frame-options", "DENY"),
];

/// `durable phone --web <args>`, killed when dropped.
struct Web {
    child: Child,
    port: u16,
    secret: String,
    /// Its standard error, line by line.
    err: mpsc::Receiver<String>,
}

impl Web {
    fn start(args: &[String], token: Option<&str>) -> Web {
        Web::try_start(args, token).unwrap_or_else(|e| panic!("durable phone --web {args:?}: {e}"))
    }

    fn try_start(args: &[String], token: Option<&str>) -> Result<Web, String> {
        let mut cmd = Command::new(durable());
        cmd.args(["phone", "--web"]).args(args).env_remove("COLLIE_DURABLE_SOCKET");
        match token {
            Some(t) => cmd.env("COLLIE_TOKEN", t),
            None => cmd.env_remove("COLLIE_TOKEN"),
        };
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("running durable phone --web");
        let (tx, out) = mpsc::channel();
        let stdout = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let (tx, err) = mpsc::channel();
        let stderr = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let Ok(line) = out.recv_timeout(PATIENCE) else {
            let _ = child.kill();
            let status = child.wait().unwrap();
            let mut said = Vec::new();
            while let Ok(line) = err.recv_timeout(PATIENCE) {
                said.push(line);
            }
            return Err(format!("no address printed; {status}, stderr: {}", said.join("\n")));
        };
        // `http://127.0.0.1:<port>/<secret>/`, nothing else on the line.
        let rest =
            line.strip_prefix("http://127.0.0.1:").ok_or_else(|| format!("not the address: {line:?}"))?;
        let (port, path) = rest.split_once('/').ok_or_else(|| format!("no path: {line:?}"))?;
        let secret = path.strip_suffix('/').ok_or_else(|| format!("no final /: {line:?}"))?;
        assert!(
            secret.len() >= 32
                && secret.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
                && !secret.contains('/'),
            "a secret of 128 bits or more, URL-safe: {secret:?}"
        );
        Ok(Web { child, port: port.parse().unwrap(), secret: secret.to_owned(), err })
    }

    /// `/<secret>/<path>`.
    fn at(&self, path: &str) -> String {
        format!("/{}/{path}", self.secret)
    }

    fn origin(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// `GET /<secret>/<path>` with the right `Host`.
    fn get(&self, path: &str, headers: &[(&str, &str)]) -> Reply {
        let host = self.host();
        let mut all = vec![("host", host.as_str())];
        all.extend_from_slice(headers);
        request(self.port, "GET", &self.at(path), &all, b"")
    }

    /// `POST /<secret>/<path>` with the right `Host` and `Origin`.
    fn post(&self, path: &str, body: &str) -> Reply {
        let (host, origin) = (self.host(), self.origin());
        let headers =
            [("host", host.as_str()), ("origin", origin.as_str()), ("content-type", "application/json")];
        request(self.port, "POST", &self.at(path), &headers, body.as_bytes())
    }

    /// Stops it with `signal` and waits for its exit.
    fn stop(mut self, signal: &str) -> ExitStatus {
        let status = Command::new("kill")
            .args([&format!("-{signal}"), &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success(), "kill -{signal}");
        let deadline = Instant::now() + PATIENCE;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(Instant::now() < deadline, "durable phone --web did not stop on {signal}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Everything it wrote on stderr, once it is killed.
    fn stderr_after_stop(mut self) -> String {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let mut lines = Vec::new();
        while let Ok(line) = self.err.recv_timeout(PATIENCE) {
            lines.push(line);
        }
        lines.join("\n")
    }
}

impl Drop for Web {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One answer, read whole.
#[derive(Debug)]
struct Reply {
    status: u16,
    /// The status line and the headers as they came.
    head: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Reply {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    fn headers_named(&self, name: &str) -> usize {
        self.headers.iter().filter(|(n, _)| n.eq_ignore_ascii_case(name)).count()
    }

    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!("not JSON ({e}): {}\n{}", self.head, String::from_utf8_lossy(&self.body))
        })
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The safety headers, each once and exactly.
    fn assert_safe(&self, what: &str) {
        for (name, value) in SAFETY {
            assert_eq!(self.header(name), Some(value), "{what}: {name} in\n{}", self.head);
            assert_eq!(self.headers_named(name), 1, "{what}: {name} twice in\n{}", self.head);
        }
    }
}

/// Writes `raw` on a new connection and reads the answer until the server
/// closes it.
fn exchange(port: u16, raw: &[u8]) -> Reply {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connecting to the page's server");
    stream.set_read_timeout(Some(PATIENCE)).unwrap();
    stream.write_all(raw).unwrap();
    let mut bytes = Vec::new();
    stream.read_to_end(&mut bytes).expect("reading the answer");
    parse(&bytes)
}

fn parse(bytes: &[u8]) -> Reply {
    let end = bytes
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no head in {:?}", String::from_utf8_lossy(bytes)));
    let head = String::from_utf8(bytes[..end].to_vec()).expect("a head in ASCII");
    let mut lines = head.split("\r\n");
    let status = lines.next().unwrap().split(' ').nth(1).unwrap().parse().unwrap();
    let headers: Vec<(String, String)> = lines
        .map(|l| {
            let (n, v) = l.split_once(':').unwrap();
            (n.trim().to_ascii_lowercase(), v.trim().to_owned())
        })
        .collect();
    let mut body = bytes[end + 4..].to_vec();
    if let Some((_, length)) = headers.iter().find(|(n, _)| n == "content-length") {
        body.truncate(length.parse().unwrap());
    }
    Reply { status, head, headers, body }
}

/// `method target` with these headers (a `Host` among them, or none) and
/// body, on a connection of its own.
fn request(port: u16, method: &str, target: &str, headers: &[(&str, &str)], body: &[u8]) -> Reply {
    let mut raw = format!("{method} {target} HTTP/1.1\r\n");
    for (name, value) in headers {
        raw.push_str(&format!("{name}: {value}\r\n"));
    }
    if !body.is_empty() || method == "POST" {
        raw.push_str(&format!("content-length: {}\r\n", body.len()));
    }
    raw.push_str("connection: close\r\n\r\n");
    let mut raw = raw.into_bytes();
    raw.extend_from_slice(body);
    exchange(port, &raw)
}

/// The page's files as they are in `crates/durable-cli/web/`.
fn page_files() -> Vec<(String, Vec<u8>)> {
    let dir = root().join("crates/durable-cli/web");
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_type().unwrap().is_file() && !e.file_name().to_string_lossy().starts_with('.'))
        .map(|e| (e.file_name().to_string_lossy().into_owned(), std::fs::read(e.path()).unwrap()))
        .collect();
    files.sort();
    files
}

/// The desk's state ETag, read through the page's server.
fn state_etag(web: &Web) -> String {
    let state = web.get("wire/v1/state", &[]);
    assert_eq!(state.status, 200, "{}", state.text());
    state.header("etag").expect("the state's ETag").to_owned()
}

#[test]
fn the_page_and_its_files_are_served_with_the_safety_headers() {
    let dir = TestDir::new("web-page");
    let desk = Desk::socket(&dir, &[]);
    let web = Web::start(&desk.args(), None);

    let files = page_files();
    let index = &files.iter().find(|(n, _)| n == "index.html").expect("web/index.html").1;
    let page = web.get("", &[]);
    assert_eq!(page.status, 200);
    assert_eq!(page.header("content-type"), Some("text/html; charset=utf-8"));
    assert_eq!(&page.body, index, "/<secret>/ is index.html");
    page.assert_safe("the page");

    for (name, bytes) in &files {
        let file = web.get(name, &[]);
        assert_eq!(file.status, 200, "{name}");
        assert_eq!(&file.body, bytes, "{name} as it is in web/");
        let wanted = match name.rsplit_once('.').map(|(_, e)| e) {
            Some("html") => "text/html; charset=utf-8",
            Some("js") => "text/javascript; charset=utf-8",
            Some("css") => "text/css; charset=utf-8",
            Some("svg") => "image/svg+xml",
            Some("png") => "image/png",
            Some("json") => "application/json",
            other => panic!("{name}: a file of a type this test does not know ({other:?})"),
        };
        assert_eq!(file.header("content-type"), Some(wanted), "{name}");
        file.assert_safe(name);
    }

    // HEAD: the same head, no body.
    let host = web.host();
    let head = request(web.port, "HEAD", &web.at(""), &[("host", &host)], b"");
    assert_eq!(head.status, 200);
    assert_eq!(head.header("content-length"), Some(index.len().to_string().as_str()));
    assert!(head.body.is_empty(), "a HEAD answer with a body");
    head.assert_safe("HEAD");

    // `/<secret>` leads to `/<secret>/`.
    let bare = request(web.port, "GET", &format!("/{}", web.secret), &[("host", &host)], b"");
    assert_eq!(bare.status, 308);
    assert_eq!(bare.header("location"), Some(web.at("").as_str()));
    bare.assert_safe("the redirect");

    for missing in ["nope.js", "index.htm", "web/index.html", "app.js/x", ".", "..", "%2e%2e", "wire"] {
        let answer = web.get(missing, &[]);
        assert_eq!(answer.status, 404, "{missing}");
        assert_eq!(answer.text(), "not found\n", "{missing}");
        answer.assert_safe(missing);
    }

    // Files are read, never written.
    let written = web.post("index.html", "{}");
    assert_eq!(written.status, 405);
    assert_eq!(written.header("allow"), Some("GET, HEAD"));
    written.assert_safe("a POST to a file");

    // What the wire does not say: where the agent is and how it is reached.
    let about = web.get("about", &[]);
    assert_eq!(about.status, 200);
    assert_eq!(about.header("content-type"), Some("application/json"));
    about.assert_safe("about");
    let about = about.json();
    assert_eq!(about["target"], desk.address.as_str());
    assert_eq!(about["transport"], "socket");
    let version = Command::new(durable()).arg("--version").output().unwrap();
    assert_eq!(about["cli"], String::from_utf8_lossy(&version.stdout).trim());
}

#[test]
fn the_wire_is_proxied_with_etags_and_writes_answered_as_the_agent_answers() {
    let dir = TestDir::new("web-wire");
    let desk = Desk::socket(&dir, &[]);
    let web = Web::start(&desk.args(), None);

    let hello = web.get("wire/hello", &[]);
    assert_eq!(hello.status, 200);
    assert_eq!(hello.header("content-type"), Some("application/json"));
    hello.assert_safe("hello");
    let hello = hello.json();
    assert_eq!(hello["ok"], true);
    assert_eq!(hello["host"], "desk");

    let state = web.get("wire/v1/state", &[]);
    assert_eq!(state.status, 200);
    state.assert_safe("state");
    let etag = state.header("etag").expect("the state's ETag").to_owned();
    let json = state.json();
    assert_eq!(etag, format!("\"{}-{}\"", json["epoch"].as_str().unwrap(), json["seq"]));

    let same = web.get("wire/v1/state", &[("if-none-match", &etag)]);
    assert_eq!(same.status, 304, "{}", same.text());
    assert_eq!(same.header("etag"), Some(etag.as_str()));
    assert!(same.body.is_empty());
    same.assert_safe("304");

    // The query string goes along: the agent refuses a `since` that is no number.
    let since = web.get("wire/v1/state?since=soon", &[]);
    assert_eq!(since.status, 400, "{}", since.text());
    assert_eq!(since.json()["code"], "bad-request");
    let since = web.get(&format!("wire/v1/state?since={}", json["seq"]), &[]);
    assert_eq!(since.status, 200, "{}", since.text());
    assert_eq!(since.json()["full"], false);

    // A write with a fresh request id; its repeat is the agent's replay.
    let send = r#"{"text": "hello from the browser", "requestId": "web-send-1"}"#;
    let sent = web.post("wire/v1/panes/ticket-1/send", send);
    assert_eq!(sent.status, 200, "{}", sent.text());
    sent.assert_safe("send");
    let answer = sent.json();
    assert_eq!((answer["ok"].clone(), answer["result"].clone()), (true.into(), "sent".into()));
    assert_eq!(answer["requestId"], "web-send-1");
    assert_eq!(answer["replayed"], false);
    let again = web.post("wire/v1/panes/ticket-1/send", send).json();
    assert_eq!(again["replayed"], true, "{again}");
    let moved = web.get("wire/v1/state", &[("if-none-match", &etag)]);
    assert_eq!(moved.status, 200, "the send changed the state");
    assert_ne!(moved.header("etag"), Some(etag.as_str()));

    // The agent's own refusals come back as it gave them, `Allow` included.
    let wrong = web.post("wire/v1/state", "{}");
    assert_eq!(wrong.status, 405, "{}", wrong.text());
    assert_eq!(wrong.json()["code"], "method-not-allowed");
    assert!(wrong.header("allow").is_some_and(|a| a.contains("GET")), "{}", wrong.head);
    let unknown = web.get("wire/v1/no-such-route", &[]);
    assert_eq!(unknown.status, 404);
    assert_eq!(unknown.json()["code"], "not-found");
    let not_json = web.post("wire/v1/panes/ticket-1/send", "{not json");
    assert_eq!(not_json.status, 400);
    assert_eq!(not_json.json()["code"], "bad-request");

    // The events of the pane, with the send in them.
    let events = web.get("wire/v1/panes/ticket-1/events?after=0", &[]);
    assert_eq!(events.status, 200, "{}", events.text());
    assert!(events.text().contains("hello from the browser"), "{}", events.text());
}

#[test]
fn without_the_secret_nothing_is_served() {
    let dir = TestDir::new("web-secret");
    let desk = Desk::socket(&dir, &[]);
    let web = Web::start(&desk.args(), None);
    let host = web.host();
    let origin = web.origin();
    let s = web.secret.clone();
    let mut wrong = s.clone().into_bytes();
    wrong[0] = if wrong[0] == b'a' { b'b' } else { b'a' };
    let wrong = String::from_utf8(wrong).unwrap();
    for target in [
        "/".to_owned(),
        "/index.html".to_owned(),
        "/app.js".to_owned(),
        "/about".to_owned(),
        "/wire/hello".to_owned(),
        "/wire/v1/state".to_owned(),
        format!("/{wrong}/"),
        format!("/{wrong}/wire/hello"),
        format!("/{}/", &s[..s.len() - 1]),
        format!("/{s}x/"),
        format!("/{}/", s.to_uppercase()),
        format!("/x/{s}/"),
        format!("//{s}/"),
        format!("/%2F{s}/"),
        format!("/{s}%2Fwire/hello"),
        format!("/?{s}"),
    ] {
        for method in ["GET", "POST", "HEAD"] {
            let answer = request(web.port, method, &target, &[("host", &host), ("origin", &origin)], b"{}");
            assert_eq!(answer.status, 404, "{method} {target}");
            if method != "HEAD" {
                assert_eq!(answer.text(), "not found\n", "{method} {target}: a tiny body and nothing else");
            }
            answer.assert_safe(&target);
        }
    }
    // A foreign host without the secret learns no more.
    let answer = request(web.port, "GET", "/", &[("host", "evil.example")], b"");
    assert_eq!((answer.status, answer.text().as_str()), (404, "not found\n"));
    // The right one still works.
    assert_eq!(web.get("", &[]).status, 200);
}

#[test]
fn a_foreign_host_is_refused() {
    let dir = TestDir::new("web-host");
    let desk = Desk::socket(&dir, &[]);
    let web = Web::start(&desk.args(), None);
    let other_port = format!("127.0.0.1:{}", web.port.wrapping_add(1));
    for host in ["evil.example", &format!("evil.example:{}", web.port), "127.0.0.1", "localhost", &other_port]
    {
        for path in ["", "wire/hello", "about", "app.js"] {
            let answer = request(web.port, "GET", &web.at(path), &[("host", host)], b"");
            assert_eq!(answer.status, 403, "Host {host}, {path:?}");
            assert_eq!(answer.text(), "forbidden\n");
            answer.assert_safe(host);
        }
    }
    // No Host at all.
    let raw = format!("GET {} HTTP/1.1\r\nconnection: close\r\n\r\n", web.at(""));
    let answer = exchange(web.port, raw.as_bytes());
    assert_eq!(answer.status, 403, "no Host");
    // Two of them.
    let host = web.host();
    let answer = request(web.port, "GET", &web.at(""), &[("host", &host), ("host", "evil.example")], b"");
    assert_eq!(answer.status, 403, "two Hosts");
    // The absolute form names a host of its own.
    let target = format!("http://evil.example:{}{}", web.port, web.at(""));
    assert_eq!(request(web.port, "GET", &target, &[("host", &host)], b"").status, 403);
    // `localhost` with the port is this server.
    let local = format!("localhost:{}", web.port);
    assert_eq!(request(web.port, "GET", &web.at(""), &[("host", &local)], b"").status, 200);
}

#[test]
fn writes_from_another_origin_never_reach_the_agent() {
    let dir = TestDir::new("web-origin");
    let desk = Desk::socket(&dir, &[]);
    let web = Web::start(&desk.args(), None);
    let etag = state_etag(&web);
    let host = web.host();
    let send = web.at("wire/v1/panes/ticket-1/send");
    let body = br#"{"text": "from elsewhere", "requestId": "web-cross-1"}"#;
    let other_port = format!("http://127.0.0.1:{}", web.port.wrapping_add(1));
    let lookalike = format!("http://127.0.0.1:{}.evil.example", web.port);
    let foreign: [Option<&str>; 6] = [
        None,
        Some("http://evil.example"),
        Some("null"),
        Some(&other_port),
        Some("https://127.0.0.1"),
        Some(&lookalike),
    ];
    for origin in foreign {
        let mut headers = vec![("host", host.as_str()), ("content-type", "application/json")];
        if let Some(o) = origin {
            headers.push(("origin", o));
        }
        let answer = request(web.port, "POST", &send, &headers, body);
        assert_eq!(answer.status, 403, "Origin {origin:?}");
        assert_eq!(answer.text(), "forbidden\n");
        answer.assert_safe("a cross-site write");
        // Any other method without the page's origin.
        for method in ["PUT", "DELETE", "PATCH", "OPTIONS"] {
            assert_eq!(request(web.port, method, &send, &headers, body).status, 403, "{method} {origin:?}");
        }
    }
    // A GET from a foreign origin is refused too.
    let answer = web.get("wire/v1/state", &[("origin", "http://evil.example")]);
    assert_eq!(answer.status, 403);
    // Nothing reached the agent: the state did not move, and the request id
    // is fresh to it.
    let same = web.get("wire/v1/state", &[("if-none-match", &etag)]);
    assert_eq!(same.status, 304, "the refused writes changed the state: {}", same.text());
    let sent = web.post("wire/v1/panes/ticket-1/send", std::str::from_utf8(body).unwrap());
    assert_eq!(sent.status, 200, "{}", sent.text());
    assert_eq!(sent.json()["replayed"], false, "the request id was seen before");
    // `localhost` is the page's own origin as well.
    let (host, origin) = (format!("localhost:{}", web.port), format!("http://localhost:{}", web.port));
    let again = request(
        web.port,
        "POST",
        &send,
        &[("host", &host), ("origin", &origin), ("content-type", "application/json")],
        body,
    );
    assert_eq!(again.status, 200);
    assert_eq!(again.json()["replayed"], true);
}

#[test]
fn only_hello_and_v1_reach_the_agent() {
    let agent = Recorder::start();
    let token = support::token();
    let web = Web::start(&agent.args(), Some(&token));
    for path in [
        "wire/",
        "wire",
        "wire/v2/state",
        "wire/v1",
        "wire/hello/x",
        "wire/hellox",
        "wire/metrics",
        "wire/v1/../admin",
        "wire/v1/%2e%2e/admin",
        "wire/v1/panes/x%2F..%2F..%2Fadmin",
        "wire/v1/./state",
        "wire//v1/state",
        // The page's mark for the ids `.` and `..` never leaves /v1/.
        "wire/v1/%20../state",
        "wire/v1/%20../%20../admin",
        "wire/v1/panes/%20../%20../admin",
        "wire/v1/panes/%20../%2e%2e/admin",
        "wire/v1/panes/%20../../admin",
        "wire/v1/panes/%2e",
        "wire/v1/panes/.%2E/events",
    ] {
        let answer = web.get(path, &[]);
        assert_eq!(answer.status, 404, "{path}");
        answer.assert_safe(path);
        let answer = web.post(path, "{}");
        assert_eq!(answer.status, 404, "POST {path}");
    }
    // A method the wire does not use.
    let (host, origin) = (web.host(), web.origin());
    let put =
        request(web.port, "PUT", &web.at("wire/v1/state"), &[("host", &host), ("origin", &origin)], b"");
    assert_eq!(put.status, 405);
    assert_eq!(put.header("allow"), Some("GET, POST"));
    assert_eq!(put.json()["code"], "method-not-allowed");
    assert!(agent.seen().is_empty(), "these reached the agent: {:?}", agent.seen());
    // The recorder does answer what is allowed.
    assert_eq!(web.get("wire/hello", &[]).status, 200);
    assert_eq!(agent.seen().len(), 1);
}

#[test]
fn requests_and_answers_pass_through_with_the_token_added_and_kept_from_the_page() {
    let agent = Recorder::start();
    let token = support::token();
    let web = Web::start(&agent.args(), Some(&token));
    let (host, origin) = (web.host(), web.origin());

    let get = web.get(
        "wire/v1/state?since=3&x=%2F",
        &[
            ("if-none-match", "\"e-3\""),
            ("cookie", "a=b"),
            ("authorization", "Bearer from-the-page"),
            ("x-extra", "1"),
            ("referer", "http://127.0.0.1/"),
        ],
    );
    assert_eq!(get.status, 200, "{}", get.text());
    assert_eq!(get.text(), r#"{"ok":true,"from":"recorder"}"#);
    assert_eq!(get.header("etag"), Some("\"e-4\""));
    assert_eq!(get.header("allow"), Some("GET, POST"));
    // The agent said text/javascript: the page gets JSON all the same (a wire
    // answer never runs as a script of the page's origin).
    assert_eq!(get.header("content-type"), Some("application/json"));
    for kept in ["set-cookie", "x-agent", "www-authenticate", "server"] {
        assert_eq!(get.header(kept), None, "{kept} passed back to the page");
    }
    get.assert_safe("a recorded answer");
    let seen = agent.seen();
    let first = &seen[0];
    assert_eq!(first.line, "GET /v1/state?since=3&x=%2F HTTP/1.1");
    assert_eq!(first.header("authorization"), Some(format!("Bearer {token}").as_str()), "the CLI's token");
    assert_eq!(first.header("if-none-match"), Some("\"e-3\""));
    for dropped in ["cookie", "x-extra", "referer", "origin"] {
        assert_eq!(first.header(dropped), None, "{dropped} passed on to the agent");
    }
    assert_eq!(first.headers_named("authorization"), 1);

    // A write's body and content type go as they came.
    let body = "{\"text\": \"caf\u{e9}\", \"requestId\": \"r-1\"}";
    let post = request(
        web.port,
        "POST",
        &web.at("wire/v1/panes/p%5C1/send"),
        &[("host", &host), ("origin", &origin), ("content-type", "application/json; charset=utf-8")],
        body.as_bytes(),
    );
    assert_eq!(post.status, 200);
    let seen = agent.seen();
    let write = seen.last().unwrap();
    assert_eq!(write.line, "POST /v1/panes/p%5C1/send HTTP/1.1");
    assert_eq!(write.header("content-type"), Some("application/json; charset=utf-8"));
    assert_eq!(write.body, body.as_bytes());
    assert_eq!(write.header("origin"), None);

    // The agent's refusals pass as they are: a 401 stays a 401.
    let refused = web.get("wire/v1/refuse", &[]);
    assert_eq!(refused.status, 401);
    assert_eq!(refused.json()["code"], "token-refused");
    assert!(!refused.head.contains(&token) && !refused.text().contains(&token));
    assert!(!get.head.contains(&token) && !get.text().contains(&token));
    let about = web.get("about", &[]).json();
    assert_eq!(about["transport"], "http");
    assert_eq!(about["target"], agent.url());
}

#[test]
fn a_body_too_large_is_refused_before_it_is_read_whole() {
    let agent = Recorder::start();
    let web = Web::start(&agent.args(), Some(&support::token()));
    let (host, origin) = (web.host(), web.origin());
    let target = web.at("wire/v1/panes/p/send");

    // Said by its length: refused on the head alone (no body is ever sent).
    let mut stream = TcpStream::connect(("127.0.0.1", web.port)).unwrap();
    stream.set_read_timeout(Some(PATIENCE)).unwrap();
    let head = format!(
        "POST {target} HTTP/1.1\r\nhost: {host}\r\norigin: {origin}\r\ncontent-type: application/json\r\n\
         content-length: 104857600\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).unwrap();
    let mut answer = Vec::new();
    let mut buf = [0u8; 4096];
    while !answer.windows(4).any(|w| w == b"\r\n\r\n") || !answer.ends_with(b"}") {
        let n = stream.read(&mut buf).expect("an answer before the body (100 MiB) is sent");
        assert!(n > 0, "closed without an answer: {:?}", String::from_utf8_lossy(&answer));
        answer.extend_from_slice(&buf[..n]);
    }
    let reply = parse(&answer);
    assert_eq!(reply.status, 413);
    assert_eq!(reply.json()["code"], "too-large");
    reply.assert_safe("413");

    // Chunked, with no length said: refused once past the bound.
    let mut raw = format!(
        "POST {target} HTTP/1.1\r\nhost: {host}\r\norigin: {origin}\r\ntransfer-encoding: chunked\r\n\
         connection: close\r\n\r\n"
    )
    .into_bytes();
    let chunk = vec![b' '; 64 * 1024];
    for _ in 0..20 {
        raw.extend_from_slice(format!("{:x}\r\n", chunk.len()).as_bytes());
        raw.extend_from_slice(&chunk);
        raw.extend_from_slice(b"\r\n");
    }
    raw.extend_from_slice(b"0\r\n\r\n");
    let reply = exchange_lenient(web.port, &raw);
    assert_eq!(reply.status, 413);

    // 1 MiB and a byte is the agent's to refuse (it answers 413 itself).
    let body = format!("{{\"text\": \"x\", \"pad\": \"{}\"}}", "y".repeat(1024 * 1024));
    let reply = web.post("wire/v1/panes/p/send", &body);
    assert_eq!(reply.status, 200, "the recorder takes it");
    let seen = agent.seen();
    assert_eq!(seen.len(), 1, "only the last one reached the agent");
    assert_eq!(seen[0].body.len(), body.len());
}

/// As [`exchange`], but a connection the server closes or resets while
/// the request is still being written is fine (it answered early).
fn exchange_lenient(port: u16, raw: &[u8]) -> Reply {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream.set_read_timeout(Some(PATIENCE)).unwrap();
    let writer = stream.try_clone().unwrap();
    let raw = raw.to_vec();
    let writing = std::thread::spawn(move || {
        let mut writer = writer;
        let _ = writer.write_all(&raw);
    });
    let mut bytes = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => bytes.extend_from_slice(&buf[..n]),
            Err(_) if !bytes.is_empty() => break,
            Err(e) => panic!("reading the answer: {e}"),
        }
    }
    let _ = stream.shutdown(std::net::Shutdown::Both);
    let _ = writing.join();
    parse(&bytes)
}

#[test]
fn a_poll_does_not_wait_behind_a_slow_write() {
    let agent = Recorder::start();
    let web = Web::start(&agent.args(), Some(&support::token()));
    // Warm the pool: one kept connection, which the slow write takes.
    assert_eq!(web.get("wire/hello", &[]).status, 200);
    let (done_tx, done) = mpsc::channel();
    let (port, target, host, origin) = (web.port, web.at("wire/v1/slow"), web.host(), web.origin());
    std::thread::spawn(move || {
        let reply = request(port, "POST", &target, &[("host", &host), ("origin", &origin)], b"{}");
        let _ = done_tx.send(reply.status);
    });
    agent.wait_for("/v1/slow");
    for _ in 0..3 {
        let poll = web.get("wire/v1/state", &[]);
        assert_eq!(poll.status, 200, "a poll while a write waits");
    }
    assert!(done.try_recv().is_err(), "the slow write was answered: the recorder never answers it");
}

#[test]
fn an_agent_that_cannot_be_reached_is_502_in_the_wires_shape() {
    let dir = TestDir::new("web-gone");
    let socket = dir.socket();
    let web = Web::start(&["--socket".into(), socket.clone()], None);
    let answer = web.get("wire/v1/state", &[]);
    assert_eq!(answer.status, 502);
    assert_eq!(answer.header("content-type"), Some("application/json"));
    answer.assert_safe("502");
    let json = answer.json();
    assert_eq!(json["ok"], false);
    assert_eq!(json["code"], "unreachable");
    let message = json["message"].as_str().unwrap();
    assert!(message.contains(&socket), "{message}");
    // The page itself is served all the same.
    assert_eq!(web.get("", &[]).status, 200);
    assert_eq!(web.get("about", &[]).json()["target"], socket.as_str());

    // Over HTTPS to a port nobody listens on: the message names the
    // address, never the token.
    let closed = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("https://127.0.0.1:{}", closed.local_addr().unwrap().port());
    drop(closed);
    let token = support::token();
    let web = Web::start(&["--url".into(), url.clone(), "--insecure".into()], Some(&token));
    let answer = web.get("wire/hello", &[]);
    assert_eq!(answer.status, 502);
    let json = answer.json();
    assert_eq!(json["code"], "unreachable");
    let message = json["message"].as_str().unwrap();
    assert!(message.contains(url.trim_start_matches("https://")), "{message}");
    assert!(!answer.head.contains(&token) && !message.contains(&token));
}

#[test]
fn the_token_never_reaches_the_page() {
    let dir = TestDir::new("web-token");
    let desk = Desk::https(&dir, &[]);
    let token = desk.token.clone().unwrap();
    let web = Web::start(&desk.args(), Some(&token));
    let mut answers = Vec::new();
    let etag = state_etag(&web);
    for path in ["", "app.js", "about", "wire/hello", "wire/v1/state", "wire/v1/nope", "x", "wire/x"] {
        answers.push(web.get(path, &[]));
    }
    answers.push(web.get("wire/v1/state", &[("if-none-match", &etag)]));
    answers.push(web.post("wire/v1/panes/ticket-1/send", r#"{"text": "hi", "requestId": "web-tok-1"}"#));
    answers.push(web.post("wire/v1/state", "{}"));
    answers.push(request(web.port, "GET", "/", &[("host", &web.host())], b""));
    answers.push(request(web.port, "GET", &web.at(""), &[("host", "evil.example")], b""));
    assert_eq!(answers[3].status, 200, "hello over HTTPS: {}", answers[3].text());
    assert_eq!(answers[8].status, 304);
    assert_eq!(answers[9].status, 200, "{}", answers[9].text());
    for answer in &answers {
        assert!(
            !answer.head.contains(&token) && !answer.text().contains(&token),
            "the token in an answer:\n{}",
            answer.head
        );
    }
    let about = web.get("about", &[]).json();
    assert_eq!(about["transport"], "https");
    assert_eq!(about["target"], desk.address.as_str());
    let said = web.stderr_after_stop();
    assert!(!said.contains(&token), "the token on stderr: {said}");
}

#[test]
fn the_port_is_the_one_asked_and_a_stop_is_a_clean_exit() {
    let dir = TestDir::new("web-port");
    let desk = Desk::socket(&dir, &[]);
    let free = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = free.local_addr().unwrap().port();
    drop(free);
    let mut args = desk.args();
    args.extend(["--port".into(), port.to_string()]);
    let web = Web::start(&args, None);
    assert_eq!(web.port, port);
    assert_eq!(web.get("", &[]).status, 200);
    // The port is taken now: a second server says so and exits 1.
    let second = Web::try_start(&args, None).err().expect("a second server on a taken port");
    assert!(second.contains("exit status: 1") && second.contains(&port.to_string()), "{second}");
    let status = web.stop("TERM");
    assert!(status.success(), "SIGTERM: {status}");

    let web = Web::start(&desk.args(), None);
    assert_ne!(web.port, 0);
    let status = web.stop("INT");
    assert!(status.success(), "SIGINT: {status}");

    // Each run draws its own secret.
    let a = Web::start(&desk.args(), None);
    let b = Web::start(&desk.args(), None);
    assert_ne!(a.secret, b.secret);
    assert_eq!(request(b.port, "GET", &a.at(""), &[("host", &b.host())], b"").status, 404);
}

#[test]
fn web_flags_are_checked() {
    let dir = TestDir::new("web-flags");
    let socket = dir.socket();
    for args in [
        vec!["--port", "8080", "--socket", &socket],
        vec!["--web", "--plain", "--socket", &socket],
        vec!["--web", "--port", "http", "--socket", &socket],
        vec!["--web", "--port", "70000", "--socket", &socket],
        vec!["--web"],
        vec!["--web", "--url", "http://10.0.0.1:80"],
    ] {
        let out = Command::new(durable())
            .arg("phone")
            .args(&args)
            .env_remove("COLLIE_DURABLE_SOCKET")
            .env_remove("COLLIE_TOKEN")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", support::text(&out));
        assert!(out.stdout.is_empty(), "{args:?}: no address printed: {}", support::text(&out));
    }
}

#[test]
fn bad_input_never_breaks_the_server() {
    let agent = Recorder::start();
    let web = Web::start(&agent.args(), Some(&support::token()));
    let (s, host, origin) = (web.secret.clone(), web.host(), web.origin());
    let garbage: Vec<Vec<u8>> = vec![
        b"\r\n\r\n".to_vec(),
        b"NONSENSE\r\n\r\n".to_vec(),
        b"GET\r\n\r\n".to_vec(),
        b"GET / HTTP/9.9\r\n\r\n".to_vec(),
        [format!("GET /{s}/").as_bytes(), b"\xff", format!(" HTTP/1.1\r\nhost: {host}\r\n\r\n").as_bytes()].concat(),
        format!("GET /{s}/wire/v1/%ZZ HTTP/1.1\r\nhost: {host}\r\nconnection: close\r\n\r\n").into_bytes(),
        format!("GET /{s}/wire/v1/state?%ff HTTP/1.1\r\nhost: {host}\r\nconnection: close\r\n\r\n").into_bytes(),
        format!("GET /{s}/ HTTP/1.1\r\nhost: {host}\r\nx: {}\r\n\r\n", "a".repeat(1 << 20)).into_bytes(),
        [format!("GET /{s}/ HTTP/1.1\r\nhost: ").as_bytes(), b"\xff\xfe\r\n\r\n"].concat(),
        [format!("POST /{s}/wire/v1/x HTTP/1.1\r\nhost: {host}\r\norigin: ").as_bytes(), b"\xff\r\n\r\n"].concat(),
        format!(
            "POST /{s}/wire/v1/x HTTP/1.1\r\nhost: {host}\r\norigin: {origin}\r\ncontent-length: -1\r\n\r\n"
        )
        .into_bytes(),
        format!(
            "POST /{s}/wire/v1/x HTTP/1.1\r\nhost: {host}\r\norigin: {origin}\r\ncontent-length: 1\r\n\
             content-length: 2\r\n\r\nab"
        )
        .into_bytes(),
        format!(
            "POST /{s}/wire/v1/x HTTP/1.1\r\nhost: {host}\r\norigin: {origin}\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n"
        )
        .into_bytes(),
        format!("GET /{s}/wire/hello HTTP/1.1\r\nhost: {host}\r\nif-none-match: \"a\"\r\nif-none-match: \"b\"\r\nconnection: close\r\n\r\n")
            .into_bytes(),
    ];
    for raw in &garbage {
        let mut stream = TcpStream::connect(("127.0.0.1", web.port)).unwrap();
        stream.set_read_timeout(Some(PATIENCE)).unwrap();
        let _ = stream.write_all(raw);
        let _ = stream.shutdown(std::net::Shutdown::Write);
        let mut sink = Vec::new();
        let _ = stream.read_to_end(&mut sink);
        // Still serving.
        assert_eq!(web.get("", &[]).status, 200, "after {:?}", String::from_utf8_lossy(raw));
    }
    assert_eq!(web.get("wire/hello", &[]).status, 200);
    let said = web.stderr_after_stop();
    assert!(!said.contains("panicked"), "a panic: {said}");
}

#[test]
fn the_ids_dot_and_dot_dot_reach_the_agent_as_whole_segments() {
    let agent = Recorder::start();
    let web = Web::start(&agent.args(), Some(&support::token()));
    // As the page writes them (app.js `seg`): a space, which no id holds,
    // then the dots; the agent reads them percent-encoded.
    let events = web.get("wire/v1/panes/%20../events?after=0", &[]);
    assert_eq!(events.status, 200, "{}", events.text());
    let sent = web.post("wire/v1/panes/%20./send", r#"{"text": "hi", "requestId": "r-dot"}"#);
    assert_eq!(sent.status, 200, "{}", sent.text());
    let action = web.post("wire/v1/panes/%20../actions/%20..", r#"{"requestId": "r-dotdot"}"#);
    assert_eq!(action.status, 200, "{}", action.text());
    // Not a whole segment: an id of its own, as it came.
    assert_eq!(web.get("wire/v1/panes/x%20../events", &[]).status, 200);
    let lines: Vec<String> = agent.seen().into_iter().map(|s| s.line).collect();
    assert_eq!(
        lines,
        [
            "GET /v1/panes/%2E%2E/events?after=0 HTTP/1.1",
            "POST /v1/panes/%2E/send HTTP/1.1",
            "POST /v1/panes/%2E%2E/actions/%2E%2E HTTP/1.1",
            "GET /v1/panes/x%20../events HTTP/1.1",
        ]
    );
}

#[test]
fn an_answer_past_the_limit_is_an_error_that_names_it_and_its_option() {
    let agent = Recorder::start();
    let token = support::token();
    // The default (64 MiB) takes 1.5 MiB.
    let web = Web::start(&agent.args(), Some(&token));
    let big = web.get("wire/v1/big", &[]);
    assert_eq!(big.status, 200, "{}", big.head);
    assert_eq!(big.json()["pad"].as_str().map(str::len), Some(BIG));
    drop(web);
    // `--max-answer-mib 1` does not.
    let mut args = agent.args();
    args.extend(["--max-answer-mib".into(), "1".into()]);
    let web = Web::start(&args, Some(&token));
    let big = web.get("wire/v1/big", &[]);
    assert_eq!(big.status, 502, "{}", big.head);
    big.assert_safe("too large");
    let json = big.json();
    assert_eq!(json["ok"], false);
    assert_eq!(json["code"], "answer-too-large");
    let message = json["message"].as_str().unwrap();
    assert!(message.contains("1 MiB") && message.contains("--max-answer-mib"), "{message}");
    assert!(message.contains("/v1/big"), "{message}");
    // Smaller answers still pass, and the server goes on.
    assert_eq!(web.get("wire/hello", &[]).status, 200);
}

/// How long the page's request may take while strangers crowd the server:
/// generous (the machines are small); a starved one waited 30 s and more.
const PROMPTLY: Duration = Duration::from_secs(4);

/// Reads one answer (head and its `content-length` body) from `stream`,
/// leaving the connection open.
fn read_one(stream: &mut TcpStream) -> std::io::Result<Reply> {
    let mut bytes = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        if let Some(end) = bytes.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&bytes[..end]).to_ascii_lowercase();
            let length: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .map_or(0, |v| v.trim().parse().unwrap());
            if bytes.len() >= end + 4 + length {
                return Ok(parse(&bytes[..end + 4 + length]));
            }
        }
        let n = stream.read(&mut buf)?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        bytes.extend_from_slice(&buf[..n]);
    }
}

/// Whether the server closed `stream` (end of file or a reset) within `within`.
fn closed_within(stream: &mut TcpStream, within: Duration) -> bool {
    stream.set_read_timeout(Some(within)).unwrap();
    let mut buf = [0u8; 256];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => return false,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => {
                return !matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut);
            }
        }
    }
}

#[test]
fn strangers_cannot_crowd_the_page_out() {
    const IDLE: usize = 48;
    const POLLERS: usize = 64;
    let agent = Recorder::start();
    let web = Web::start(&agent.args(), Some(&support::token()));
    let (port, host) = (web.port, web.host());
    let stranger_get = format!("GET / HTTP/1.1\r\nhost: {host}\r\n\r\n");

    // Strangers that connect and say nothing.
    let mut idle: Vec<TcpStream> =
        (0..IDLE).map(|_| TcpStream::connect(("127.0.0.1", port)).unwrap()).collect();
    // Strangers that ask `GET /` and would stay to ask again (the measured
    // attack), their answers read later.
    let mut pollers: Vec<TcpStream> = (0..POLLERS)
        .map(|_| {
            let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
            stream.write_all(stranger_get.as_bytes()).unwrap();
            stream
        })
        .collect();

    // Meanwhile more strangers keep coming, each asking once a while.
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let crowd: Vec<_> = (0..8)
        .map(|_| {
            let (stop, get) = (stop.clone(), stranger_get.clone());
            std::thread::spawn(move || {
                let deadline = Instant::now() + PATIENCE;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) && Instant::now() < deadline {
                    if let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) {
                        s.set_read_timeout(Some(PROMPTLY)).unwrap();
                        let _ = s.write_all(get.as_bytes());
                        let _ = read_one(&mut s);
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
            })
        })
        .collect();

    // The page's own requests, with the secret: answered at once, on a
    // connection kept for the next.
    let mut page = TcpStream::connect(("127.0.0.1", port)).unwrap();
    page.set_read_timeout(Some(PATIENCE)).unwrap();
    for round in 0..5 {
        let started = Instant::now();
        write!(page, "GET {} HTTP/1.1\r\nhost: {host}\r\n\r\n", web.at("wire/hello")).unwrap();
        let answer = read_one(&mut page).unwrap_or_else(|e| panic!("round {round}: the page's request: {e}"));
        let took = started.elapsed();
        assert_eq!(answer.status, 200, "round {round}");
        assert_eq!(answer.header("connection"), None, "round {round}: the page's connection is kept");
        assert!(took < PROMPTLY, "round {round}: the page's request waited {took:?}");
        // A new connection of the page is served as promptly.
        let started = Instant::now();
        assert_eq!(web.get("", &[]).status, 200);
        assert!(
            started.elapsed() < PROMPTLY,
            "round {round}: a new connection waited {:?}",
            started.elapsed()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for thread in crowd {
        thread.join().unwrap();
    }

    // Each stranger that asked was answered 404, told `Connection: close`,
    // and closed: asking again gets no second answer.
    for (n, stream) in pollers.iter_mut().enumerate() {
        stream.set_read_timeout(Some(PROMPTLY)).unwrap();
        let answer = read_one(stream).unwrap_or_else(|e| panic!("stranger {n}: no answer: {e}"));
        assert_eq!(answer.status, 404, "stranger {n}");
        assert_eq!(answer.header("connection"), Some("close"), "stranger {n}: {}", answer.head);
        let _ = stream.write_all(stranger_get.as_bytes());
        assert!(closed_within(stream, PROMPTLY), "stranger {n} still open after its first request");
    }

    // The strangers that said nothing: closed, pushed out by newer ones or
    // when their time to speak ran out (seconds, not minutes).
    for (n, stream) in idle.iter_mut().enumerate() {
        assert!(closed_within(stream, Duration::from_secs(10)), "idle stranger {n} still open");
    }
    let said = web.stderr_after_stop();
    assert!(!said.contains("panicked"), "{said}");
}

/// One request as the recording agent read it.
#[derive(Clone, Debug)]
struct Seen {
    line: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Seen {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }

    fn headers_named(&self, name: &str) -> usize {
        self.headers.iter().filter(|(n, _)| n == name).count()
    }
}

/// The padding of the recorder's `/v1/big` answer: past 1 MiB, well under
/// the default limit of 64.
const BIG: usize = 3 * 1024 * 1024 / 2;

/// A fake agent over plain HTTP on loopback that records every request
/// and answers each with the same JSON (and headers the page must not
/// see), except `/v1/slow` (never answered), `/v1/refuse` (a 401) and
/// `/v1/big` (1.5 MiB of JSON).
struct Recorder {
    port: u16,
    seen: Arc<Mutex<Vec<Seen>>>,
    arrived: mpsc::Receiver<String>,
}

impl Recorder {
    fn start() -> Recorder {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (tx, arrived) = mpsc::channel();
        let record = seen.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { break };
                let (record, tx) = (record.clone(), tx.clone());
                std::thread::spawn(move || Recorder::serve(stream, &record, &tx));
            }
        });
        Recorder { port, seen, arrived }
    }

    fn serve(stream: TcpStream, record: &Mutex<Vec<Seen>>, tx: &mpsc::Sender<String>) {
        let mut reader = BufReader::new(stream);
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line).unwrap_or(0) == 0 {
                return;
            }
            let mut headers = Vec::new();
            loop {
                let mut h = String::new();
                if reader.read_line(&mut h).unwrap_or(0) == 0 {
                    return;
                }
                if h == "\r\n" {
                    break;
                }
                let (n, v) = h.split_once(':').unwrap();
                headers.push((n.trim().to_ascii_lowercase(), v.trim().to_owned()));
            }
            let length =
                headers.iter().find(|(n, _)| n == "content-length").map_or(0, |(_, v)| v.parse().unwrap());
            let mut body = vec![0; length];
            if reader.read_exact(&mut body).is_err() {
                return;
            }
            let line = line.trim_end().to_owned();
            let path = line.split(' ').nth(1).unwrap_or("").to_owned();
            record.lock().unwrap().push(Seen { line, headers, body });
            let _ = tx.send(path.clone());
            if path == "/v1/slow" {
                // Held, never answered.
                loop {
                    std::thread::park();
                }
            }
            let big;
            let (status, text, body) = if path == "/v1/refuse" {
                (401, "Unauthorized", r#"{"ok":false,"code":"token-refused","message":"no"}"#)
            } else if path == "/v1/big" {
                big = format!(r#"{{"ok":true,"pad":"{}"}}"#, "x".repeat(BIG));
                (200, "OK", big.as_str())
            } else {
                (200, "OK", r#"{"ok":true,"from":"recorder"}"#)
            };
            let answer = format!(
                "HTTP/1.1 {status} {text}\r\ncontent-type: text/javascript\r\netag: \"e-4\"\r\nallow: GET, POST\r\n\
                 set-cookie: s=1\r\nx-agent: yes\r\nwww-authenticate: Bearer\r\nserver: recorder\r\n\
                 content-length: {}\r\n\r\n{body}",
                body.len()
            );
            if reader.get_mut().write_all(answer.as_bytes()).is_err() {
                return;
            }
        }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn args(&self) -> Vec<String> {
        vec!["--url".into(), self.url()]
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    /// Waits until a request for `path` arrived.
    fn wait_for(&self, path: &str) {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let got = self.arrived.recv_timeout(left).unwrap_or_else(|_| panic!("no request for {path}"));
            if got == path {
                return;
            }
        }
    }
}
