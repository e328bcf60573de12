//! The TLS server in a process of its own — this test executable run again
//! in "fixture" mode — spoken to by real clients: curl, Python's `ssl`, and
//! `openssl s_client`.
//!
//! The fixture's settings, tokens included, reach it only through its own
//! environment (`Command::env`); the test process never changes its own.

use std::fs;
use std::io::{BufRead, BufReader, Read};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use durable_core::{CoreOptions, create_core};
use durable_http::{SystemClock, random_epoch, stderr_warn};
use durable_tls::{TlsOptions, serve};

const FIXTURE: &str = "DURABLE_TLS_FIXTURE";
const FIXTURE_LISTEN: &str = "DURABLE_TLS_FIXTURE_LISTEN";
const FIXTURE_PLAIN: &str = "DURABLE_TLS_FIXTURE_PLAIN";
const FIXTURE_CERT: &str = "DURABLE_TLS_FIXTURE_CERT";
const FIXTURE_KEY: &str = "DURABLE_TLS_FIXTURE_KEY";
const FIXTURE_CORE_ALLOW_ALWAYS: &str = "DURABLE_TLS_FIXTURE_CORE_ALLOW_ALWAYS";
const FIXTURE_ALLOW_ALWAYS: &str = "DURABLE_TLS_FIXTURE_ALLOW_ALWAYS";
const FIXTURE_HANDSHAKE_MS: &str = "DURABLE_TLS_FIXTURE_HANDSHAKE_MS";
const FIXTURE_VARS: [&str; 8] = [
    FIXTURE,
    FIXTURE_LISTEN,
    FIXTURE_PLAIN,
    FIXTURE_CERT,
    FIXTURE_KEY,
    FIXTURE_CORE_ALLOW_ALWAYS,
    FIXTURE_ALLOW_ALWAYS,
    FIXTURE_HANDSHAKE_MS,
];

/// 64 hex characters, like `openssl rand -hex 32`.
const TOKEN: &str = "3f9a1c07d2b84e6fa5c31d9e0b7f42a86e1d5c09b3a7f2e48d6c0b19a5e3f7d2";
const TOKEN_NEXT: &str = "next-7b2e9d41c6a05f83e1d74b9a2c60f5e8d3b17a4c9e02f6d8";

/// Not a test of its own: the agent's body when this executable runs as a
/// fixture (`DURABLE_TLS_FIXTURE` set); otherwise it returns at once.
///
/// It serves a small core (allow-always off unless asked) with the TLS
/// server, prints `fixture: listening <address>` (and `fixture: fingerprint
/// <fp>` when self-signed) on stdout, and closes when its stdin closes. A
/// start-up failure is printed on stderr and exits with status 2.
#[test]
fn fixture_agent_process() {
    if std::env::var_os(FIXTURE).is_none() {
        return;
    }
    let var = |name| std::env::var(name).ok();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.block_on(async {
        let core = create_core(
            CoreOptions::builder()
                .host_name("tls-test")
                .clock(SystemClock)
                .epoch(random_epoch())
                .warn(stderr_warn())
                .allow_always(var(FIXTURE_CORE_ALLOW_ALWAYS).is_some())
                .build()
                .unwrap(),
        );
        let mut builder =
            TlsOptions::builder().listen(var(FIXTURE_LISTEN).unwrap_or_else(|| "127.0.0.1:0".to_owned()));
        builder = match (var(FIXTURE_PLAIN), var(FIXTURE_CERT), var(FIXTURE_KEY)) {
            (Some(_), _, _) => builder.plain_http(),
            (None, Some(cert), Some(key)) => builder.cert_pem_files(cert, key),
            _ => builder.self_signed(),
        };
        if var(FIXTURE_ALLOW_ALWAYS).is_some() {
            builder = builder.allow_always(true);
        }
        if let Some(ms) = var(FIXTURE_HANDSHAKE_MS) {
            builder = builder.handshake_timeout(Duration::from_millis(ms.parse().unwrap()));
        }
        let started = match builder.build() {
            Ok(options) => serve(core.clone(), options).await,
            Err(e) => Err(e),
        };
        let server = match started {
            Ok(server) => server,
            Err(e) => {
                eprintln!("fixture: error {e}");
                std::process::exit(2);
            }
        };
        core.ready();
        println!("fixture: listening {}", server.address());
        if let Some(fingerprint) = server.fingerprint() {
            println!("fixture: fingerprint {fingerprint}");
        }
        tokio::task::spawn_blocking(|| {
            let _ = std::io::stdin().read_to_end(&mut Vec::new());
        })
        .await
        .unwrap();
        server.close().await;
        println!("fixture: closed");
    });
}

/// An agent running in a child process.
struct Agent {
    child: Child,
    lines: Receiver<String>,
    seen: Vec<String>,
    stderr: Arc<Mutex<String>>,
    stderr_reader: Option<JoinHandle<()>>,
}

impl Agent {
    fn spawn(envs: &[(&str, &str)]) -> Agent {
        let mut cmd = Command::new(std::env::current_exe().unwrap());
        cmd.args(["--exact", "fixture_agent_process", "--nocapture", "--test-threads=1"])
            .env_remove("COLLIE_TOKEN")
            .env_remove("COLLIE_TOKEN_NEXT")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for name in FIXTURE_VARS {
            cmd.env_remove(name);
        }
        cmd.env(FIXTURE, "1");
        for (k, v) in envs {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                // The harness may print `test … ... ` on the same line first.
                if let Some((_, rest)) = line.split_once("fixture: ") {
                    let _ = tx.send(rest.to_owned());
                }
            }
        });
        let stderr = Arc::new(Mutex::new(String::new()));
        let mut pipe = child.stderr.take().unwrap();
        let sink = stderr.clone();
        let stderr_reader = std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = pipe.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock().unwrap().push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        Agent { child, lines, seen: Vec::new(), stderr, stderr_reader: Some(stderr_reader) }
    }

    /// Waits for a line starting with `prefix`; returns the rest of it.
    fn expect(&mut self, prefix: &str) -> String {
        let end = Instant::now() + Duration::from_secs(30);
        loop {
            match self.lines.recv_timeout(end.saturating_duration_since(Instant::now())) {
                Ok(line) => {
                    self.seen.push(line.clone());
                    if let Some(rest) = line.strip_prefix(prefix) {
                        return rest.trim().to_owned();
                    }
                }
                Err(RecvTimeoutError::Timeout) => panic!("no {prefix:?} from the agent; saw {:?}", self.seen),
                Err(RecvTimeoutError::Disconnected) => {
                    let _ = self.child.wait();
                    panic!("the agent exited; saw {:?}; stderr: {}", self.seen, self.stderr.lock().unwrap())
                }
            }
        }
    }

    /// Waits until the agent serves; returns its address.
    fn listening(&mut self) -> String {
        self.expect("listening ")
    }

    /// Waits for the agent to exit by itself: its status, stdout lines and
    /// stderr.
    fn exit(mut self) -> (ExitStatus, Vec<String>, String) {
        let end = Instant::now() + Duration::from_secs(30);
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            assert!(Instant::now() < end, "the agent did not exit");
            std::thread::sleep(Duration::from_millis(10));
        };
        if let Some(reader) = self.stderr_reader.take() {
            reader.join().unwrap();
        }
        self.seen.extend(self.lines.try_iter());
        let stderr = self.stderr.lock().unwrap().clone();
        (status, std::mem::take(&mut self.seen), stderr)
    }

    /// Closes the agent (its stdin); asserts it closed cleanly and returns
    /// everything it wrote, stdout lines and stderr.
    fn finish(mut self) -> String {
        drop(self.child.stdin.take());
        let end = Instant::now() + Duration::from_secs(30);
        while let Ok(line) = self.lines.recv_timeout(end.saturating_duration_since(Instant::now())) {
            self.seen.push(line);
        }
        let status = self.child.wait().unwrap();
        if let Some(reader) = self.stderr_reader.take() {
            reader.join().unwrap();
        }
        let stderr = self.stderr.lock().unwrap().clone();
        assert!(status.success(), "the agent failed: {status}; saw {:?}; stderr: {stderr}", self.seen);
        assert_eq!(self.seen.last().map(String::as_str), Some("closed"), "{:?}", self.seen);
        format!("{}\n{stderr}", self.seen.join("\n"))
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn token_env() -> (&'static str, &'static str) {
    ("COLLIE_TOKEN", TOKEN)
}

/// One request with curl: (status, body). Status 0 when curl got no HTTP
/// answer. `extra` comes before the URL (`-k`, `-H …`, `--cacert …`).
fn curl(url: &str, extra: &[&str]) -> (u16, String) {
    let out = Command::new("curl")
        .args(["-s", "-S", "--max-time", "10", "-o", "-", "-w", "\n%{http_code}"])
        .args(extra)
        .arg(url)
        .output()
        .expect("curl runs");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, status) = text.rsplit_once('\n').unwrap_or(("", text.as_str()));
    (status.trim().parse().unwrap_or(0), body.to_owned())
}

fn bearer(token: &str) -> String {
    format!("Authorization: Bearer {token}")
}

/// `GET path` over HTTPS (certificate not checked) with these headers.
fn get(address: &str, path: &str, headers: &[&str]) -> (u16, String) {
    let mut extra = vec!["-k"];
    for h in headers {
        extra.extend(["-H", h]);
    }
    curl(&format!("{address}{path}"), &extra)
}

fn json(body: &str) -> serde_json::Value {
    serde_json::from_str(body).unwrap_or_else(|e| panic!("not JSON ({e}): {body}"))
}

fn port_of(address: &str) -> u16 {
    address.rsplit_once(':').unwrap().1.parse().unwrap()
}

/// Runs a Python snippet with arguments; returns its stdout.
fn python(script: &str, args: &[&str]) -> String {
    let out = Command::new("python3").arg("-c").arg(script).args(args).output().expect("python3 runs");
    assert!(out.status.success(), "python failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Python `ssl`: a handshake offering `protocols` by ALPN, then `GET /hello`
/// with the token. Prints `alpn …`, `fingerprint …`, `status …`, or
/// `ssl-error …` when the handshake fails.
const PY_TLS_CLIENT: &str = r#"
import hashlib, socket, ssl, sys
port, protocols, token = int(sys.argv[1]), sys.argv[2].split(","), sys.argv[3]
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
ctx.check_hostname = False
ctx.verify_mode = ssl.CERT_NONE
ctx.set_alpn_protocols(protocols)
try:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        with ctx.wrap_socket(raw, server_hostname="localhost") as tls:
            print("alpn", tls.selected_alpn_protocol())
            print("fingerprint", hashlib.sha256(tls.getpeercert(binary_form=True)).hexdigest())
            tls.sendall(("GET /hello HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer "
                         + token + "\r\nConnection: close\r\n\r\n").encode())
            data = b""
            while True:
                chunk = tls.recv(65536)
                if not chunk:
                    break
                data += chunk
            print("status", data.split(b" ")[1].decode())
except (ssl.SSLError, ConnectionError) as e:
    print("ssl-error", e)
"#;

fn py_field<'a>(out: &'a str, key: &str) -> Option<&'a str> {
    out.lines().find_map(|l| l.strip_prefix(key).and_then(|r| r.strip_prefix(' ')))
}

/// A fresh folder under the system temp folder, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> Self {
        static N: AtomicUsize = AtomicUsize::new(0);
        let n = N.fetch_add(1, Ordering::SeqCst);
        let path = std::env::temp_dir().join(format!("dtls-{}-{n}", std::process::id()));
        let _ = fs::remove_dir_all(&path);
        fs::create_dir(&path).unwrap();
        TempDir(path)
    }

    fn join(&self, rest: &str) -> PathBuf {
        self.0.join(rest)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// A free TCP port on 127.0.0.1 (bound with port 0, then released).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn path_str(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn with_the_token_get_hello_is_200_and_says_caller_check_token() {
    let mut agent = Agent::spawn(&[token_env()]);
    let address = agent.listening();
    assert!(address.starts_with("https://127.0.0.1:"), "{address}");
    assert_ne!(port_of(&address), 0, "the real port is reported");
    let (status, body) = get(&address, "/hello", &[&bearer(TOKEN)]);
    assert_eq!(status, 200, "{body}");
    let hello = json(&body);
    assert_eq!(hello["ok"], true);
    assert_eq!(hello["callerCheck"], "token");
    assert_eq!(hello["host"], "tls-test");
    let (status, body) = get(&address, "/v1/state", &[&bearer(TOKEN)]);
    assert_eq!(status, 200, "{body}");
    let output = agent.finish();
    assert!(!output.contains(TOKEN), "the token was written out: {output}");
}

#[test]
fn without_an_accepted_bearer_token_every_request_is_401_token_refused_and_nothing_else() {
    let wrong = "0000000000000000000000000000000000000000000000000000000000000000";
    let mut agent = Agent::spawn(&[token_env()]);
    let address = agent.listening();
    let cases: Vec<(&str, Vec<String>)> = vec![
        ("no Authorization header", vec![]),
        ("a wrong token", vec![bearer(wrong)]),
        ("`Bearer ` with nothing after it", vec!["Authorization: Bearer ".to_owned()]),
        ("`Bearer` alone", vec!["Authorization: Bearer".to_owned()]),
        ("Basic credentials", vec!["Authorization: Basic dXNlcjpwYXNzd29yZA==".to_owned()]),
        ("the token under another scheme", vec![format!("Authorization: Token {TOKEN}")]),
        ("the token less its last byte", vec![bearer(&TOKEN[..TOKEN.len() - 1])]),
        ("the token and one byte more", vec![bearer(&format!("{TOKEN}0"))]),
        ("the token in upper case", vec![bearer(&TOKEN.to_uppercase())]),
        ("the token in another header", vec![format!("X-Token: {TOKEN}")]),
        ("two Authorization headers", vec![bearer(TOKEN), bearer(wrong)]),
    ];
    for path in ["/hello", "/v1/state", "/v1/no-such-route"] {
        for (case, headers) in &cases {
            let headers: Vec<&str> = headers.iter().map(String::as_str).collect();
            let (status, body) = get(&address, path, &headers);
            assert_eq!(status, 401, "{case} on {path}: {body}");
            let v = json(&body);
            assert_eq!(v["ok"], false, "{case}");
            assert_eq!(v["code"], "token-refused", "{case}");
            let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
            assert_eq!(keys, ["ok", "code", "message"], "{case}: no other detail");
            assert!(!body.contains(TOKEN) && !body.contains(wrong), "{case}: {body}");
        }
    }
    // A write without the token does not reach the core either.
    let (status, body) = curl(
        &format!("{address}/v1/asks/970f8a0b30368fbbcab73013d31d2d51"),
        &["-k", "-X", "POST", "-H", "Content-Type: application/json", "--data-binary", "{}"],
    );
    assert_eq!(status, 401, "{body}");
    assert_eq!(json(&body)["code"], "token-refused");
    let output = agent.finish();
    assert!(!output.contains(TOKEN), "the token was written out: {output}");
}

#[test]
fn collie_token_next_is_accepted_beside_collie_token() {
    let mut agent = Agent::spawn(&[token_env(), ("COLLIE_TOKEN_NEXT", TOKEN_NEXT)]);
    let address = agent.listening();
    for token in [TOKEN, TOKEN_NEXT] {
        let (status, body) = get(&address, "/hello", &[&bearer(token)]);
        assert_eq!(status, 200, "{body}");
        assert_eq!(json(&body)["callerCheck"], "token");
    }
    let (status, _) = get(&address, "/hello", &[&bearer(&TOKEN_NEXT.replace('7', "8"))]);
    assert_eq!(status, 401);
    let output = agent.finish();
    assert!(!output.contains(TOKEN) && !output.contains(TOKEN_NEXT), "{output}");
}

#[test]
fn an_empty_collie_token_next_is_unset() {
    let mut agent = Agent::spawn(&[token_env(), ("COLLIE_TOKEN_NEXT", "")]);
    let address = agent.listening();
    assert_eq!(get(&address, "/hello", &[&bearer(TOKEN)]).0, 200);
    assert_eq!(get(&address, "/hello", &["Authorization: Bearer "]).0, 401);
    agent.finish();
}

/// Asserts the agent refused to start; returns its stderr.
fn refused_at_start(envs: &[(&str, &str)]) -> String {
    let (status, stdout, stderr) = Agent::spawn(envs).exit();
    assert!(!status.success(), "the agent started: {stdout:?}");
    assert!(!stdout.iter().any(|l| l.starts_with("listening")), "{stdout:?}");
    assert!(stderr.contains("fixture: error"), "{stderr}");
    stderr
}

#[test]
fn a_31_byte_collie_token_is_refused_at_start() {
    let short = &TOKEN[..31];
    let stderr = refused_at_start(&[("COLLIE_TOKEN", short)]);
    assert!(stderr.contains("COLLIE_TOKEN is 31 bytes"), "{stderr}");
    assert!(stderr.contains("at least 32"), "{stderr}");
    assert!(!stderr.contains(short), "the token's value was written out: {stderr}");
    // 32 bytes is enough.
    let mut agent = Agent::spawn(&[("COLLIE_TOKEN", &TOKEN[..32])]);
    let address = agent.listening();
    assert_eq!(get(&address, "/hello", &[&bearer(&TOKEN[..32])]).0, 200);
    agent.finish();
}

#[test]
fn a_31_byte_collie_token_next_is_refused_at_start() {
    let short = &TOKEN_NEXT[..31];
    let stderr = refused_at_start(&[token_env(), ("COLLIE_TOKEN_NEXT", short)]);
    assert!(stderr.contains("COLLIE_TOKEN_NEXT is 31 bytes"), "{stderr}");
    assert!(!stderr.contains(short) && !stderr.contains(TOKEN), "{stderr}");
}

#[test]
fn no_token_at_all_is_refused_at_start() {
    let stderr = refused_at_start(&[]);
    assert!(stderr.contains("no token: set COLLIE_TOKEN"), "{stderr}");
}

#[test]
fn plain_http_on_0_0_0_0_is_refused_at_start() {
    let port = free_port().to_string();
    let listen = format!("0.0.0.0:{port}");
    let stderr = refused_at_start(&[token_env(), (FIXTURE_PLAIN, "1"), (FIXTURE_LISTEN, &listen)]);
    assert!(stderr.contains("plain HTTP rule"), "{stderr}");
    assert!(stderr.contains(&listen), "{stderr}");
    // Nothing was bound.
    assert!(TcpStream::connect(("127.0.0.1", port.parse::<u16>().unwrap())).is_err());
}

#[test]
fn plain_http_on_127_0_0_1_with_a_port_is_served() {
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let mut agent = Agent::spawn(&[token_env(), (FIXTURE_PLAIN, "1"), (FIXTURE_LISTEN, &listen)]);
    let address = agent.listening();
    assert_eq!(address, format!("http://127.0.0.1:{port}"));
    let (status, body) = curl(&format!("{address}/hello"), &["-H", &bearer(TOKEN)]);
    assert_eq!(status, 200, "{body}");
    assert_eq!(json(&body)["callerCheck"], "token");
    let (status, body) = curl(&format!("{address}/hello"), &[]);
    assert_eq!(status, 401, "plain HTTP still needs the token: {body}");
    assert_eq!(json(&body)["code"], "token-refused");
    agent.finish();
}

#[test]
fn plain_http_on_localhost_with_a_port_is_served() {
    let port = free_port();
    let listen = format!("localhost:{port}");
    let mut agent = Agent::spawn(&[token_env(), (FIXTURE_PLAIN, "1"), (FIXTURE_LISTEN, &listen)]);
    let address = agent.listening();
    assert_eq!(address, format!("http://localhost:{port}"));
    let (status, body) = curl(&format!("http://127.0.0.1:{port}/hello"), &["-H", &bearer(TOKEN)]);
    assert_eq!(status, 200, "{body}");
    agent.finish();
}

#[test]
fn a_core_with_allow_always_is_refused_unless_allowed() {
    let stderr = refused_at_start(&[token_env(), (FIXTURE_CORE_ALLOW_ALWAYS, "1")]);
    assert!(stderr.contains("allow-always rule"), "{stderr}");
    assert!(stderr.contains("token is the only barrier"), "{stderr}");
    let mut agent =
        Agent::spawn(&[token_env(), (FIXTURE_CORE_ALLOW_ALWAYS, "1"), (FIXTURE_ALLOW_ALWAYS, "1")]);
    let address = agent.listening();
    assert_eq!(get(&address, "/hello", &[&bearer(TOKEN)]).0, 200);
    agent.finish();
}

#[test]
fn alpn_negotiates_http_1_1() {
    let mut agent = Agent::spawn(&[token_env()]);
    let port = port_of(&agent.listening()).to_string();

    // Python's ssl, offering h2 first: the server picks http/1.1.
    let out = python(PY_TLS_CLIENT, &[&port, "h2,http/1.1", TOKEN]);
    assert_eq!(py_field(&out, "alpn"), Some("http/1.1"), "{out}");
    assert_eq!(py_field(&out, "status"), Some("200"), "{out}");
    // Offering only h2: no protocol in common, the handshake fails.
    let out = python(PY_TLS_CLIENT, &[&port, "h2", TOKEN]);
    assert!(py_field(&out, "ssl-error").is_some(), "{out}");

    // openssl s_client.
    let mut child = Command::new("openssl")
        .args(["s_client", "-connect", &format!("127.0.0.1:{port}"), "-alpn", "http/1.1"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("openssl runs");
    let end = Instant::now() + Duration::from_secs(10);
    while child.try_wait().unwrap().is_none() {
        assert!(Instant::now() < end, "openssl s_client did not finish");
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("ALPN protocol: http/1.1"), "{text}");
    agent.finish();
}

#[test]
fn the_printed_fingerprint_is_the_certificate_the_server_presents() {
    let mut agent = Agent::spawn(&[token_env()]);
    let port = port_of(&agent.listening()).to_string();
    let printed = agent.expect("fingerprint ");
    assert_eq!(printed.len(), 95, "{printed}");
    assert!(printed.bytes().all(|b| b == b':' || b.is_ascii_digit() || (b'A'..=b'F').contains(&b)));
    let out = python(PY_TLS_CLIENT, &[&port, "http/1.1", TOKEN]);
    let seen = py_field(&out, "fingerprint").unwrap().to_uppercase();
    assert_eq!(printed.replace(':', ""), seen);
    // The warn sink (stderr) says it too.
    let output = agent.finish();
    assert!(output.contains(&format!("SHA-256 fingerprint {printed}")), "{output}");
}

#[test]
fn a_certificate_from_pem_files_is_verified_by_curl_and_python_with_the_ca_file() {
    let dir = TempDir::new();
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()])
        .unwrap()
        .self_signed(&key)
        .unwrap();
    let (cert_path, key_path) = (dir.join("cert.pem"), dir.join("key.pem"));
    fs::write(&cert_path, cert.pem()).unwrap();
    fs::write(&key_path, key.serialize_pem()).unwrap();

    let mut agent = Agent::spawn(&[
        token_env(),
        (FIXTURE_LISTEN, "localhost:0"),
        (FIXTURE_CERT, path_str(&cert_path)),
        (FIXTURE_KEY, path_str(&key_path)),
    ]);
    let address = agent.listening();
    let port = port_of(&address);
    assert_eq!(address, format!("https://localhost:{port}"));
    // No -k: curl checks the chain and the name.
    let auth = bearer(TOKEN);
    for url in [format!("https://localhost:{port}/hello"), format!("https://127.0.0.1:{port}/hello")] {
        let (status, body) = curl(&url, &["--cacert", path_str(&cert_path), "-H", &auth]);
        assert_eq!(status, 200, "{url}: {body}");
    }
    // Without the CA file the certificate is not trusted.
    let (status, _) = curl(&format!("https://127.0.0.1:{port}/hello"), &["-H", &auth]);
    assert_eq!(status, 0);
    let out = python(
        r#"
import ssl, sys, urllib.request
ctx = ssl.create_default_context(cafile=sys.argv[2])
req = urllib.request.Request("https://localhost:%s/hello" % sys.argv[1],
                             headers={"Authorization": "Bearer " + sys.argv[3]})
print(urllib.request.urlopen(req, context=ctx, timeout=10).read().decode())
"#,
        &[&port.to_string(), path_str(&cert_path), TOKEN],
    );
    assert_eq!(json(out.trim())["callerCheck"], "token", "{out}");
    assert!(agent.seen.iter().all(|l| !l.starts_with("fingerprint")), "no fingerprint for PEM files");
    agent.finish();
}

#[test]
fn a_missing_certificate_file_is_refused_at_start_naming_it() {
    let dir = TempDir::new();
    let cert = dir.join("missing-cert.pem");
    let key = dir.join("missing-key.pem");
    let stderr =
        refused_at_start(&[token_env(), (FIXTURE_CERT, path_str(&cert)), (FIXTURE_KEY, path_str(&key))]);
    assert!(stderr.contains("missing-cert.pem"), "{stderr}");
}

#[test]
fn a_client_stalled_in_its_handshake_holds_up_no_one_and_is_dropped() {
    let mut agent = Agent::spawn(&[token_env(), (FIXTURE_HANDSHAKE_MS, "500")]);
    let address = agent.listening();
    // Connects and never says hello.
    let mut stalled = TcpStream::connect(("127.0.0.1", port_of(&address))).unwrap();
    let started = Instant::now();
    let (status, body) = get(&address, "/hello", &[&bearer(TOKEN)]);
    assert_eq!(status, 200, "{body}");
    assert!(started.elapsed() < Duration::from_secs(5));
    // Past the handshake timeout the server drops it.
    stalled.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut buf = [0u8; 16];
    let read = stalled.read(&mut buf);
    assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
    assert!(started.elapsed() < Duration::from_secs(8), "dropped after {:?}", started.elapsed());
    agent.finish();
}

#[test]
fn close_stops_the_server_and_the_agent_exits_cleanly() {
    let mut agent = Agent::spawn(&[token_env()]);
    let port = port_of(&agent.listening());
    // A connection still in its handshake (with the default 10 s timeout)
    // does not hold the close up.
    let _stalled = TcpStream::connect(("127.0.0.1", port)).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    let started = Instant::now();
    agent.finish();
    assert!(started.elapsed() < Duration::from_secs(3), "close took {:?}", started.elapsed());
    assert!(TcpStream::connect(("127.0.0.1", port)).is_err());
}
