//! Running an example as its own process and talking to it with `curl`,
//! the way Collie would.
#![allow(dead_code, unreachable_pub)]

use std::io::{BufRead, BufReader, Lines};
use std::path::PathBuf;
use std::process::{Child, ChildStdout, Stdio};
use std::time::{Duration, Instant};

#[path = "../user/mod.rs"]
mod user;
#[allow(unused_imports)] // each test binary uses what it needs
pub use user::{as_user, unprivileged};

/// `target/<profile>/examples/<name>`, built by `cargo test` beside this test.
pub fn example(name: &str) -> PathBuf {
    let mut dir = std::env::current_exe().expect("test exe");
    dir.pop(); // the test binary
    dir.pop(); // deps
    dir.join("examples").join(name)
}

/// `target/<profile>/durable-agent` (`crates/durable-agents`), built once
/// per test process (cargo knows when nothing changed), so a test never
/// runs an old one.
pub fn durable_agent() -> PathBuf {
    static BUILT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BUILT.get_or_init(|| workspace_bin("durable-agent")).clone()
}

/// `target/<profile>/durable` (`crates/durable-cli`), built once per test process.
pub fn durable() -> PathBuf {
    static BUILT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BUILT.get_or_init(|| workspace_bin("durable")).clone()
}

/// The binary `name` of a workspace crate, built with the workspace's
/// features: those `cargo test` built the dependencies with, so they are
/// not built again.
fn workspace_bin(name: &str) -> PathBuf {
    let mut dir = std::env::current_exe().expect("test exe");
    dir.pop(); // the test binary
    dir.pop(); // deps
    let workspace = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the workspace");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let status = std::process::Command::new(cargo)
        .args(["build", "--workspace", "--all-features", "--bin", name])
        .current_dir(workspace)
        .status()
        .expect("running cargo build");
    assert!(status.success(), "cargo build --bin {name} failed");
    dir.join(name)
}

/// `curl` over the socket: the status and the JSON body.
pub fn curl(socket: &str, args: &[&str]) -> (u16, serde_json::Value) {
    curl_as(None, socket, args)
}

/// `curl` over the socket as `user` (the agent's own user: the caller check
/// refuses every other user).
pub fn curl_as(user: Option<u32>, socket: &str, args: &[&str]) -> (u16, serde_json::Value) {
    let out = as_user(user, "curl")
        .args(["-sS", "--unix-socket", socket, "-w", "\n%{http_code}"])
        .args(args)
        .output()
        .expect("curl runs");
    let text = String::from_utf8_lossy(&out.stdout);
    let (body, code) = text.rsplit_once('\n').expect("status line");
    (code.trim().parse().expect("status"), serde_json::from_str(body).unwrap_or(serde_json::Value::Null))
}

/// A POST of a JSON body over the socket.
pub fn post(socket: &str, path: &str, body: serde_json::Value) -> (u16, serde_json::Value) {
    let url = format!("http://collie{path}");
    let body = body.to_string();
    curl(socket, &["-H", "Content-Type: application/json", "-d", &body, &url])
}

/// Polls `check` every 50 ms for up to 10 s.
pub fn eventually<T>(what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(v) = check() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// An example running in its own process, killed when dropped.
pub struct Agent {
    child: Child,
    pub stdout: Lines<BufReader<ChildStdout>>,
    pub socket: String,
    /// The user the agent runs as (`None`: this process's).
    pub user: Option<u32>,
}

impl Agent {
    /// Starts `name` with its socket in a fresh folder; waits for `listening`.
    pub fn start(name: &str) -> Agent {
        Agent::start_as(name, None)
    }

    /// [`Agent::start`] as `user`: the agent makes its socket folder itself,
    /// as that user, under the temp dir.
    pub fn start_as(name: &str, user: Option<u32>) -> Agent {
        let dir = Agent::fresh_dir(name);
        Agent::start_in(name, user, &dir, &[])
    }

    /// A fresh folder for one test's agent (its socket, its data).
    pub fn fresh_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("durable-{name}-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    /// [`Agent::start_as`] in `dir` (kept as it is: a restart on the same
    /// data), with extra arguments.
    pub fn start_in(name: &str, user: Option<u32>, dir: &std::path::Path, args: &[&str]) -> Agent {
        let socket = dir.join(name).join("app.sock");
        let socket = socket.to_str().unwrap().to_owned();
        let mut child = as_user(user, example(name))
            .args(args)
            .env("COLLIE_DURABLE_SOCKET", &socket)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("the example was built by cargo test");
        let mut stdout = BufReader::new(child.stdout.take().unwrap()).lines();
        let first = stdout.next().expect("a line").expect("utf-8");
        assert_eq!(first, format!("listening {socket}"));
        let owner = std::os::unix::fs::MetadataExt::uid(&std::fs::metadata(&socket).unwrap());
        assert_eq!(
            owner,
            user.unwrap_or_else(|| nix::unistd::geteuid().as_raw()),
            "the agent runs as its user"
        );
        Agent { child, stdout, socket, user }
    }

    /// Ends the agent with `SIGKILL`, as a crash would, and reaps it.
    pub fn kill9(mut self) {
        let _ = self.child.kill(); // SIGKILL on Unix
        let _ = self.child.wait();
    }

    /// `curl` over the agent's socket, as the agent's user.
    pub fn curl(&self, args: &[&str]) -> (u16, serde_json::Value) {
        curl_as(self.user, &self.socket, args)
    }

    /// A POST of a JSON body over the agent's socket, as the agent's user.
    pub fn post(&self, path: &str, body: serde_json::Value) -> (u16, serde_json::Value) {
        let url = format!("http://collie{path}");
        self.curl(&["-H", "Content-Type: application/json", "-d", &body.to_string(), &url])
    }

    /// The pane's item with this id in its view.
    pub fn item(&self, pane: &str, id: &str) -> serde_json::Value {
        let (_, events) = self.curl(&[&format!("http://collie/v1/panes/{pane}/events?after=0")]);
        let items: Vec<_> = events["events"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|e| e["type"] == "item" && e["item"]["id"] == id)
            .map(|e| e["item"].clone())
            .collect();
        items.last().cloned().unwrap_or(serde_json::Value::Null)
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether `pid` runs (a zombie counts as gone).
pub fn alive(pid: u32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let state = stat.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().next());
    matches!(state, Some(s) if s != "Z" && s != "X")
}

/// The processes under `root`, children before grandchildren (from `/proc`).
pub fn descendants(root: u32) -> Vec<u32> {
    let mut parents: Vec<(u32, u32)> = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else { continue };
        // `pid (comm) state ppid …`: the name may hold spaces, so read after its `)`.
        let ppid = stat.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse().ok());
        if let Some(ppid) = ppid {
            parents.push((pid, ppid));
        }
    }
    let mut out = vec![root];
    let mut i = 0;
    while i < out.len() {
        let parent = out[i];
        out.extend(parents.iter().filter(|(_, pp)| *pp == parent).map(|(pid, _)| *pid));
        i += 1;
    }
    out.remove(0);
    out
}
