//! What the tests that drive `durable` share: the desk (and the shop
//! example) started as a child on a fresh private folder (socket or
//! HTTPS), fake agents that answer fixed bytes from a thread of the test,
//! the phone driven through its line interface (stdin and stdout piped),
//! and the phone on a real pseudo-terminal inside tmux (keys in with
//! `send-keys`, the screen out with `capture-pane`).

#![allow(dead_code, unreachable_pub)]

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, mpsc};
use std::time::{Duration, Instant};

/// How long the tests wait for something the agent does (a poll is 2 s).
pub const PATIENCE: Duration = Duration::from_secs(20);

/// The repository's root.
fn workspace() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR")).ancestors().nth(2).expect("xtask/collie sits two levels down")
}

/// `target/<profile>/<name>`, built with `cargo build <what>` (once per test
/// process) unless `always` is false and it is there already.
fn built(name: &str, what: &[&str], always: bool) -> PathBuf {
    static BUILT: Mutex<()> = Mutex::new(());
    // This test binary is `target/<profile>/deps/<name>-<hash>`.
    let exe = std::env::current_exe().expect("the test binary's path");
    let profile = exe.parent().and_then(Path::parent).expect("the target folder");
    let bin = profile.join(name);
    let _once = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    if always || !bin.exists() {
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let status = Command::new(cargo)
            .arg("build")
            .args(what)
            .current_dir(workspace())
            .status()
            .expect("running cargo build");
        assert!(status.success(), "cargo build {} failed", what.join(" "));
    }
    bin
}

/// The `durable` binary (`crates/durable-cli`), built for these tests: what
/// `durable phone` and `durable doctor` run. Built once per test process
/// (cargo knows when nothing changed), so a test never runs an old one.
pub fn durable() -> PathBuf {
    static ONCE: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    ONCE.get_or_init(|| built("durable", &["-p", "durable-cli", "--bin", "durable"], true)).clone()
}

/// `target/<profile>/examples/desk`: built by `cargo test --workspace`
/// (the examples package's tests need it); built here when it is missing.
pub fn desk_binary() -> PathBuf {
    built("examples/desk", &["--example", "desk", "-p", "durable-examples"], false)
}

/// `target/<profile>/examples/shop` (`examples/shop.rs`): built by `cargo
/// test --workspace` with the other examples; built here when it is missing.
pub fn shop_binary() -> PathBuf {
    built("examples/shop", &["--example", "shop", "-p", "durable-examples"], false)
}

/// The folder cargo builds into (`target`, or `$CARGO_TARGET_DIR`): the
/// one this test binary sits in.
pub fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    // `<target>/<profile>/deps/<name>-<hash>`.
    exe.ancestors().nth(3).expect("the target folder").to_owned()
}

/// The repository's root.
pub fn root() -> &'static Path {
    workspace()
}

/// A fresh private folder (mode 0700) under /tmp, removed when dropped;
/// short, so that socket paths stay far under 103 bytes.
pub struct TestDir(pub PathBuf);

impl TestDir {
    pub fn new(name: &str) -> TestDir {
        use std::os::unix::fs::DirBuilderExt;
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = PathBuf::from("/tmp").join(format!(
            "ph-{}-{}-{name}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::DirBuilder::new().mode(0o700).create(&dir).unwrap();
        TestDir(dir)
    }

    pub fn socket(&self) -> String {
        self.0.join("s").join("app.sock").to_str().unwrap().to_owned()
    }

    pub fn data(&self) -> String {
        self.0.join("data").to_str().unwrap().to_owned()
    }
}

impl Drop for TestDir {
    fn drop(&mut self) {
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(&self.0, std::fs::Permissions::from_mode(0o700));
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A token of 64 hex characters, different per call.
pub fn token() -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    let seed = format!("{:?}-{}-{}", Instant::now(), std::process::id(), N.fetch_add(1, Ordering::SeqCst));
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut out = String::new();
    for round in 0..4u64 {
        for b in seed.bytes().chain(round.to_le_bytes()) {
            h = (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
        }
        out.push_str(&format!("{h:016x}"));
    }
    out
}

/// A running desk, killed when dropped.
pub struct Desk {
    child: Child,
    /// `--socket` path, or the HTTPS URL.
    pub address: String,
    /// HTTPS: the certificate's fingerprint as the desk printed it.
    pub fingerprint: Option<String>,
    pub token: Option<String>,
}

impl Drop for Desk {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Reads lines on a thread; the first arrives through the channel.
fn lines_of(stream: impl std::io::Read + Send + 'static) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stream).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                // Keep draining so the child never blocks on a full pipe.
                continue;
            }
        }
    });
    rx
}

impl Desk {
    /// The desk on `dir`'s socket.
    pub fn socket(dir: &TestDir, extra: &[&str]) -> Desk {
        let socket = dir.socket();
        let mut args = vec!["--socket", &socket, "--data", &dir.data()[..]]
            .into_iter()
            .map(str::to_owned)
            .collect::<Vec<_>>();
        args.extend(extra.iter().map(|a| (*a).to_owned()));
        Desk::on_socket(&desk_binary(), &args, &[], socket.clone())
    }

    /// The desk over HTTPS with a self-signed certificate on a free port.
    pub fn https(dir: &TestDir, extra: &[&str]) -> Desk {
        let mut args: Vec<String> = ["--listen", "127.0.0.1:0", "--self-signed", "--data", &dir.data()]
            .iter()
            .map(|a| (*a).to_owned())
            .collect();
        args.extend(extra.iter().map(|a| (*a).to_owned()));
        Desk::on_https(&desk_binary(), &args)
    }

    /// The shop example (`examples/shop.rs`) on `dir`'s socket, given as
    /// `COLLIE_DURABLE_SOCKET` as an author would.
    pub fn shop_socket(dir: &TestDir) -> Desk {
        let socket = dir.socket();
        Desk::on_socket(&shop_binary(), &[], &[("COLLIE_DURABLE_SOCKET", &socket)], socket.clone())
    }

    /// The shop example over HTTPS (`--https 127.0.0.1:0`, self-signed).
    pub fn shop_https(_dir: &TestDir) -> Desk {
        Desk::on_https(&shop_binary(), &["--https".into(), "127.0.0.1:0".into()])
    }

    /// `bin <args>`, which prints `listening <socket>` once it serves.
    fn on_socket(bin: &Path, args: &[String], env: &[(&str, &str)], socket: String) -> Desk {
        let mut cmd = Command::new(bin);
        cmd.args(args).env_remove("COLLIE_DURABLE_SOCKET");
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("starting {}: {e}", bin.display()));
        let out = lines_of(child.stdout.take().unwrap());
        let line = out.recv_timeout(Duration::from_secs(30)).expect("the agent prints `listening <path>`");
        let desk = Desk { child, address: socket, fingerprint: None, token: None };
        assert_eq!(line, format!("listening {}", desk.address));
        desk
    }

    /// `bin <args>` with a fresh `COLLIE_TOKEN`: it prints `listening <url>`
    /// on stdout and its certificate's fingerprint on stderr.
    fn on_https(bin: &Path, args: &[String]) -> Desk {
        let token = token();
        let mut child = Command::new(bin)
            .args(args)
            .env("COLLIE_TOKEN", &token)
            .env_remove("COLLIE_TOKEN_NEXT")
            .env_remove("COLLIE_DURABLE_SOCKET")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("starting {}: {e}", bin.display()));
        let out = lines_of(child.stdout.take().unwrap());
        let err = lines_of(child.stderr.take().unwrap());
        let mut desk = Desk { child, address: String::new(), fingerprint: None, token: Some(token) };
        let line = out.recv_timeout(Duration::from_secs(30)).expect("the agent prints `listening <url>`");
        desk.address = line.strip_prefix("listening ").expect("listening <url>").to_owned();
        let deadline = Instant::now() + Duration::from_secs(10);
        let fingerprint = loop {
            let line = err
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
                .expect("the agent prints its certificate's fingerprint on stderr");
            if let Some(at) = line.find("fingerprint ") {
                break line[at + "fingerprint ".len()..].trim().to_owned();
            }
        };
        desk.fingerprint = Some(fingerprint);
        desk
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// `SIGKILL`: the socket file stays behind.
    pub fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// The phone's (or the doctor's) arguments that reach this desk.
    pub fn args(&self) -> Vec<String> {
        match &self.fingerprint {
            None => vec!["--socket".into(), self.address.clone()],
            Some(f) => vec!["--url".into(), self.address.clone(), "--fingerprint".into(), f.clone()],
        }
    }
}

/// `durable doctor <args>` with `COLLIE_TOKEN` as given: its output and status.
pub fn doctor(args: &[String], token: Option<&str>) -> Output {
    run_durable(&durable(), "doctor", args, token)
}

/// `<bin> <command> <args>` with `COLLIE_TOKEN` as given and stdin empty:
/// its output and status.
pub fn run_durable(bin: &Path, command: &str, args: &[String], token: Option<&str>) -> Output {
    let mut cmd = Command::new(bin);
    cmd.arg(command).args(args).env_remove("COLLIE_DURABLE_SOCKET").env_remove("COLLIE_TOKEN_NEXT");
    match token {
        Some(t) => cmd.env("COLLIE_TOKEN", t),
        None => cmd.env_remove("COLLIE_TOKEN"),
    };
    cmd.stdin(Stdio::null()).output().unwrap_or_else(|e| panic!("running {} {command}: {e}", bin.display()))
}

/// Standard output then standard error, as text.
pub fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

/// What a fake agent does on every connection, once it has read a request.
#[derive(Clone, Debug)]
pub enum Fake {
    /// Writes these bytes, then closes the connection.
    Bytes(Vec<u8>),
    /// Writes these bytes, then nothing more, the connection held open: an
    /// answer that never ends (or, empty, one that never starts).
    Stall(Vec<u8>),
    /// Writes these bytes as soon as it accepts, reads nothing, and closes
    /// (a server that does not speak TLS, for a TLS client).
    Now(Vec<u8>),
}

impl Fake {
    /// A whole HTTP answer with a JSON content type and this body.
    pub fn answer(status: u16, body: &str) -> Fake {
        Fake::Bytes(
            format!(
                "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            )
            .into_bytes(),
        )
    }

    /// A hello as the SDK writes it, with this wire range and every cap but
    /// `terminal` on.
    pub fn hello(min: u32, max: u32) -> Fake {
        Fake::answer(
            200,
            &format!(
                r#"{{"ok": true, "wire": {{"min": {min}, "max": {max}}}, "sdk": {{"name": "fake", "version": "0"}}, "host": "fake", "runtime": "rust", "ready": true, "epoch": "0123456789abcdef", "callerCheck": "on", "caps": {{"asks": true, "starters": true, "send": true, "steer": true, "abort": true, "rename": true, "close": true, "actions": true, "history": true, "reopen": true, "terminal": false}}}}"#
            ),
        )
    }

    /// Reads one request (its head, then a body of `content-length`
    /// bytes), then answers.
    fn serve<S: std::io::Read + Write>(&self, mut stream: S, held: &mut Vec<S>) {
        if let Fake::Now(bytes) = self {
            let _ = stream.write_all(bytes);
            return;
        }
        let mut reader = BufReader::new(stream);
        let mut length = 0;
        loop {
            // Bytes, not text: what comes may not be HTTP (a TLS hello).
            let mut line = Vec::new();
            match reader.read_until(b'\n', &mut line) {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
            let line = String::from_utf8_lossy(&line).to_ascii_lowercase();
            if let Some(v) = line.strip_prefix("content-length:") {
                length = v.trim().parse().unwrap_or(0);
            }
            if line == "\r\n" {
                break;
            }
        }
        let mut body = vec![0; length];
        let _ = std::io::Read::read_exact(&mut reader, &mut body);
        let mut stream = reader.into_inner();
        match self {
            Fake::Bytes(bytes) => {
                let _ = stream.write_all(bytes);
            }
            Fake::Stall(bytes) => {
                let _ = stream.write_all(bytes);
                let _ = stream.flush();
                held.push(stream);
            }
            Fake::Now(_) => {}
        }
    }

    /// Serves on a Unix socket at `path`, from a thread, until the test
    /// process ends.
    pub fn on_socket(self, path: &Path) {
        use std::os::unix::fs::PermissionsExt;
        let listener = std::os::unix::net::UnixListener::bind(path).expect("binding the fake agent's socket");
        // As private as the SDK makes its own (§1.1): only its answers are bad.
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
        std::thread::spawn(move || {
            let mut held = Vec::new();
            for stream in listener.incoming() {
                let Ok(stream) = stream else { break };
                self.serve(stream, &mut held);
            }
        });
    }

    /// Serves on `127.0.0.1` on a free port, from a thread, until the test
    /// process ends; the port.
    pub fn on_tcp(self) -> u16 {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("binding the fake agent's port");
        let port = listener.local_addr().unwrap().port();
        std::thread::spawn(move || {
            let mut held = Vec::new();
            for stream in listener.incoming() {
                let Ok(stream) = stream else { break };
                self.serve(stream, &mut held);
            }
        });
        port
    }
}

/// The phone's line interface: commands in, lines out.
pub struct Lines {
    child: Child,
    stdin: Option<ChildStdin>,
    out: mpsc::Receiver<String>,
    /// Every line read so far, for failure messages.
    pub seen: Vec<String>,
}

impl Lines {
    pub fn start(desk: &Desk) -> Lines {
        Lines::start_with(&desk.args(), desk.token.as_deref())
    }

    pub fn start_with(args: &[String], token: Option<&str>) -> Lines {
        Lines::start_bin(&durable(), args, token)
    }

    /// `<bin> phone <args>`, for a `durable` other than this build's.
    pub fn start_bin(bin: &Path, args: &[String], token: Option<&str>) -> Lines {
        let mut cmd = Command::new(bin);
        cmd.arg("phone").args(args).env_remove("COLLIE_DURABLE_SOCKET");
        match token {
            Some(t) => cmd.env("COLLIE_TOKEN", t),
            None => cmd.env_remove("COLLIE_TOKEN"),
        };
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("running durable phone");
        let stdin = child.stdin.take();
        let (tx, rx) = mpsc::channel();
        let tx2 = tx.clone();
        let stdout = child.stdout.take().unwrap();
        let stderr = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = tx2.send(format!("stderr: {line}"));
            }
        });
        Lines { child, stdin, out: rx, seen: Vec::new() }
    }

    /// Writes one command line.
    pub fn send(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin is open");
        writeln!(stdin, "{line}").expect("the phone reads stdin");
        stdin.flush().unwrap();
    }

    /// Waits for a line containing `text`, returns it.
    pub fn expect(&mut self, text: &str) -> String {
        self.expect_where(text, |l| l.contains(text))
    }

    /// Waits for a line that `check` takes.
    pub fn expect_where(&mut self, what: &str, check: impl Fn(&str) -> bool) -> String {
        self.expect_within(PATIENCE, what, check)
    }

    /// Waits at most `patience` for a line that `check` takes.
    pub fn expect_within(&mut self, patience: Duration, what: &str, check: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + patience;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.out.recv_timeout(left) {
                Ok(line) => {
                    self.seen.push(line.clone());
                    if check(&line) {
                        return line;
                    }
                }
                Err(_) => panic!(
                    "no line with {what:?} in {} s; the phone printed:\n{}",
                    patience.as_secs(),
                    self.seen.join("\n")
                ),
            }
        }
    }

    /// Closes stdin and waits for the phone to exit.
    pub fn finish(mut self) -> std::process::ExitStatus {
        drop(self.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(Instant::now() < deadline, "the phone did not exit at the end of stdin");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Lines {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// tmux, or a failure saying how to get it.
pub fn tmux_binary() -> String {
    let found = Command::new("tmux").arg("-V").output().map(|o| o.status.success()).unwrap_or(false);
    assert!(
        found,
        "tmux is missing: these tests drive the phone on a real terminal through tmux. \
         Install it (`apt-get install tmux`; .ci/run does so) and run the tests again."
    );
    "tmux".into()
}

/// The phone on a pseudo-terminal inside its own tmux server.
pub struct Tmux {
    server: String,
    config: PathBuf,
}

impl Tmux {
    /// Starts `durable phone <args>` in a detached session of `width`×`height`.
    pub fn phone(dir: &TestDir, desk: &Desk, width: u16, height: u16) -> Tmux {
        let tmux = tmux_binary();
        static N: AtomicUsize = AtomicUsize::new(0);
        let server = format!("phone-{}-{}", std::process::id(), N.fetch_add(1, Ordering::SeqCst));
        // Keep the pane when the phone exits, so a failure still shows its screen.
        let config = dir.0.join("tmux.conf");
        std::fs::write(&config, "set -g remain-on-exit on\nset -g status off\n").unwrap();
        let mut cmd = Command::new(&tmux);
        cmd.args(["-L", &server, "-f", config.to_str().unwrap()])
            .args(["new-session", "-d", "-s", "phone", "-x", &width.to_string(), "-y", &height.to_string()])
            .arg(durable())
            .arg("phone")
            .args(desk.args())
            .env_remove("TMUX")
            .env_remove("COLLIE_DURABLE_SOCKET")
            .env("TERM", "xterm");
        // The server inherits this environment: the token never shows in argv.
        match &desk.token {
            Some(t) => cmd.env("COLLIE_TOKEN", t),
            None => cmd.env_remove("COLLIE_TOKEN"),
        };
        let out = cmd.output().expect("running tmux");
        assert!(out.status.success(), "tmux new-session failed: {}", String::from_utf8_lossy(&out.stderr));
        Tmux { server, config }
    }

    fn tmux(&self, args: &[&str]) -> Output {
        Command::new("tmux").args(["-L", &self.server]).args(args).output().expect("running tmux")
    }

    /// Presses keys by tmux's names (`Enter`, `Tab`, `Down`, `Space`, `C-x`…).
    pub fn keys(&self, keys: &[&str]) {
        for key in keys {
            let out = self.tmux(&["send-keys", "-t", "phone", key]);
            assert!(out.status.success(), "send-keys {key}: {}", String::from_utf8_lossy(&out.stderr));
            // One key at a time, as a person types.
            std::thread::sleep(Duration::from_millis(30));
        }
    }

    /// Types text literally.
    pub fn type_text(&self, text: &str) {
        let out = self.tmux(&["send-keys", "-t", "phone", "-l", text]);
        assert!(out.status.success(), "send-keys -l: {}", String::from_utf8_lossy(&out.stderr));
        std::thread::sleep(Duration::from_millis(50));
    }

    /// The screen as the terminal shows it.
    pub fn screen(&self) -> String {
        String::from_utf8_lossy(&self.tmux(&["capture-pane", "-p", "-t", "phone"]).stdout).into_owned()
    }

    /// Waits for the screen to show `text`; returns the screen.
    pub fn wait_for(&self, text: &str) -> String {
        self.wait_until(text, |s| s.contains(text))
    }

    pub fn wait_until(&self, what: &str, check: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let screen = self.screen();
            if check(&screen) {
                return screen;
            }
            assert!(Instant::now() < deadline, "the screen never showed {what:?}; it shows:\n{screen}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Whether the phone's process ended (the pane is dead).
    pub fn exited(&self) -> bool {
        let out = self.tmux(&["display-message", "-p", "-t", "phone", "#{pane_dead}"]);
        String::from_utf8_lossy(&out.stdout).trim() == "1"
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.tmux(&["kill-server"]);
        let _ = std::fs::remove_file(&self.config);
    }
}
