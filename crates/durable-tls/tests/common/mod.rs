//! What the TLS tests share: the fixture agent (this test executable run
//! again in "fixture" mode, [`fixture_entry`]), the [`Agent`] that
//! spawns and drives it, and the real clients spoken with (curl, Python).
//!
//! The fixture's settings, tokens included, reach it only through its own
//! environment (`Command::env`); the test process never changes its own.
#![allow(dead_code, unreachable_pub)]

use std::fs;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use durable_http::{SystemClock, random_epoch, stderr_warn};
use durable_runtime::{Collie, CoreOptions, PaneOptions, create_core};
use durable_tls::{Limits, TlsOptions, serve};
use durable_types::Item;

pub const FIXTURE: &str = "DURABLE_TLS_FIXTURE";
pub const FIXTURE_LISTEN: &str = "DURABLE_TLS_FIXTURE_LISTEN";
pub const FIXTURE_PLAIN: &str = "DURABLE_TLS_FIXTURE_PLAIN";
pub const FIXTURE_CERT: &str = "DURABLE_TLS_FIXTURE_CERT";
pub const FIXTURE_KEY: &str = "DURABLE_TLS_FIXTURE_KEY";
pub const FIXTURE_CORE_ALLOW_ALWAYS: &str = "DURABLE_TLS_FIXTURE_CORE_ALLOW_ALWAYS";
pub const FIXTURE_ALLOW_ALWAYS: &str = "DURABLE_TLS_FIXTURE_ALLOW_ALWAYS";
pub const FIXTURE_HANDSHAKE_MS: &str = "DURABLE_TLS_FIXTURE_HANDSHAKE_MS";
pub const FIXTURE_HEADER_MS: &str = "DURABLE_TLS_FIXTURE_HEADER_MS";
pub const FIXTURE_WRITE_MS: &str = "DURABLE_TLS_FIXTURE_WRITE_MS";
pub const FIXTURE_MAX_CONNECTIONS: &str = "DURABLE_TLS_FIXTURE_MAX_CONNECTIONS";
/// A pane `big` with this many reply items of 200,000 bytes each, for an
/// answer larger than every socket buffer on the way.
pub const FIXTURE_BIG_PANE: &str = "DURABLE_TLS_FIXTURE_BIG_PANE";
pub const FIXTURE_VARS: [&str; 12] = [
    FIXTURE,
    FIXTURE_LISTEN,
    FIXTURE_PLAIN,
    FIXTURE_CERT,
    FIXTURE_KEY,
    FIXTURE_CORE_ALLOW_ALWAYS,
    FIXTURE_ALLOW_ALWAYS,
    FIXTURE_HANDSHAKE_MS,
    FIXTURE_HEADER_MS,
    FIXTURE_WRITE_MS,
    FIXTURE_MAX_CONNECTIONS,
    FIXTURE_BIG_PANE,
];

/// 64 hex characters, like `openssl rand -hex 32`.
pub const TOKEN: &str = "3f9a1c07d2b84e6fa5c31d9e0b7f42a86e1d5c09b3a7f2e48d6c0b19a5e3f7d2";
pub const TOKEN_NEXT: &str = "next-7b2e9d41c6a05f83e1d74b9a2c60f5e8d3b17a4c9e02f6d8";

/// The `fixture_agent_process` test of each test file. Spawned with
/// `DURABLE_TLS_FIXTURE` set, it is the agent (see [`serve_as_fixture`]);
/// run as a test, it checks what every other test leans on: the fixture
/// serves HTTPS, says where, and closes cleanly when its stdin closes.
pub fn fixture_entry() {
    if std::env::var_os(FIXTURE).is_some() {
        serve_as_fixture();
        return;
    }
    let mut agent = Agent::spawn(&[token_env()]);
    let address = agent.listening();
    assert!(address.starts_with("https://127.0.0.1:"), "{address}");
    let (status, _) = get(&address, "/hello", &[&bearer(TOKEN)]);
    assert_eq!(status, 200);
    agent.finish();
}

/// The agent's body when the test executable runs as a fixture.
///
/// It serves a small core (allow-always off unless asked) with the TLS
/// server, prints `fixture: listening <address>` (and `fixture: fingerprint
/// <fp>` when self-signed) on stdout, and closes when its stdin closes. A
/// start-up failure is printed on stderr and exits with status 2.
fn serve_as_fixture() {
    let var = |name: &str| std::env::var(name).ok();
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
        builder = builder.limits(connection_limits(&var));
        if let Some(n) = var(FIXTURE_BIG_PANE) {
            big_pane(&core, n.parse().unwrap());
        }
        let started = match builder.build() {
            Ok(options) => serve(core.driver(), options).await,
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

/// The connection limits the fixture is given: a header-read and a
/// write-progress timeout, and a cap on connections.
fn connection_limits(var: &dyn Fn(&str) -> Option<String>) -> Limits {
    let mut limits = Limits::new();
    if let Some(ms) = var(FIXTURE_HEADER_MS) {
        limits = limits.header_read_timeout(Duration::from_millis(ms.parse().unwrap()));
    }
    if let Some(ms) = var(FIXTURE_WRITE_MS) {
        limits = limits.write_timeout(Duration::from_millis(ms.parse().unwrap()));
    }
    if let Some(n) = var(FIXTURE_MAX_CONNECTIONS) {
        limits = limits.max_connections(n.parse().unwrap());
    }
    limits
}

/// A pane `big` (workspace `w`, tab `t`) holding `items` reply items of
/// 200,000 bytes: its events view (`GET /v1/panes/big/events?after=0`) is
/// about `items` × 200 kB.
fn big_pane(core: &Collie, items: usize) {
    let pane = core
        .workspace("w", "W")
        .unwrap()
        .tab("t", "T")
        .unwrap()
        .pane("big", PaneOptions::new("Big"))
        .unwrap();
    let text = "x".repeat(200_000);
    for i in 0..items {
        pane.write(Item::reply(&format!("r-{i}"), text.clone()).unwrap()).unwrap();
    }
}

/// An agent running in a child process.
pub struct Agent {
    child: Child,
    lines: Receiver<String>,
    pub seen: Vec<String>,
    stderr: Arc<Mutex<String>>,
    stderr_reader: Option<JoinHandle<()>>,
}

impl Agent {
    pub fn spawn(envs: &[(&str, &str)]) -> Agent {
        Agent::spawn_with(Command::new(std::env::current_exe().unwrap()), envs)
    }

    /// [`spawn`](Self::spawn), with at most `descriptors` open files in the
    /// agent (`ulimit -n`): a machine where a flood of connections runs out
    /// of them.
    pub fn spawn_with_descriptors(descriptors: usize, envs: &[(&str, &str)]) -> Agent {
        let mut cmd = Command::new("sh");
        cmd.arg("-c")
            .arg(format!("ulimit -n {descriptors} && exec \"$0\" \"$@\""))
            .arg(std::env::current_exe().unwrap());
        Agent::spawn_with(cmd, envs)
    }

    fn spawn_with(mut cmd: Command, envs: &[(&str, &str)]) -> Agent {
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
    pub fn expect(&mut self, prefix: &str) -> String {
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
    pub fn listening(&mut self) -> String {
        self.expect("listening ")
    }

    /// Waits for the agent to exit by itself: its status, stdout lines and
    /// stderr.
    pub fn exit(mut self) -> (ExitStatus, Vec<String>, String) {
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
    pub fn finish(mut self) -> String {
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

pub fn token_env() -> (&'static str, &'static str) {
    ("COLLIE_TOKEN", TOKEN)
}

/// One request with curl: (status, body). Status 0 when curl got no HTTP
/// answer. `extra` comes before the URL (`-k`, `-H …`, `--cacert …`).
pub fn curl(url: &str, extra: &[&str]) -> (u16, String) {
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

pub fn bearer(token: &str) -> String {
    format!("Authorization: Bearer {token}")
}

/// `GET path` over HTTPS (certificate not checked) with these headers.
pub fn get(address: &str, path: &str, headers: &[&str]) -> (u16, String) {
    let mut extra = vec!["-k"];
    for h in headers {
        extra.extend(["-H", h]);
    }
    curl(&format!("{address}{path}"), &extra)
}

pub fn json(body: &str) -> serde_json::Value {
    serde_json::from_str(body).unwrap_or_else(|e| panic!("not JSON ({e}): {body}"))
}

pub fn port_of(address: &str) -> u16 {
    address.rsplit_once(':').unwrap().1.parse().unwrap()
}

/// Runs a Python snippet with arguments; returns its stdout.
pub fn python(script: &str, args: &[&str]) -> String {
    let out = Command::new("python3").arg("-c").arg(script).args(args).output().expect("python3 runs");
    assert!(out.status.success(), "python failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Python `ssl`: a handshake offering `protocols` by ALPN, then `GET /hello`
/// with the token. Prints `alpn …`, `fingerprint …`, `status …`, or
/// `ssl-error …` when the handshake fails.
pub const PY_TLS_CLIENT: &str = r#"
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

pub fn py_field<'a>(out: &'a str, key: &str) -> Option<&'a str> {
    out.lines().find_map(|l| l.strip_prefix(key).and_then(|r| r.strip_prefix(' ')))
}

/// A fresh folder under the system temp folder, removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new() -> Self {
        static N: AtomicUsize = AtomicUsize::new(0);
        let n = N.fetch_add(1, Ordering::SeqCst);
        let path = std::env::temp_dir().join(format!("dtls-{}-{n}", std::process::id()));
        let _ = fs::remove_dir_all(&path);
        fs::create_dir(&path).unwrap();
        TempDir(path)
    }

    pub fn join(&self, rest: &str) -> PathBuf {
        self.0.join(rest)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// A free TCP port on 127.0.0.1 (bound with port 0, then released).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

pub fn path_str(p: &Path) -> &str {
    p.to_str().unwrap()
}
