//! `durable-agent acp` (`crates/durable-agents`) driven the way Collie would (curl over the
//! socket), with the real pi-acp 0.0.34 driving the real Pi 1.6.0 offline:
//! the scripted model and tool gate of `faux.ts` (this folder), Pi started
//! through pi-acp's `PI_ACP_PI_COMMAND` by `.tools/bin/pi-faux`.
//!
//! Everything comes from `cargo xtask install-pi`; without it the tests
//! fail and say so: they never skip.
#![allow(dead_code, unreachable_pub)]

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

#[path = "../agent/mod.rs"]
mod agent;
#[allow(unused_imports)] // each test binary uses what it needs
pub use agent::{alive, as_user, curl_as, descendants, durable_agent, unprivileged};

/// The text of the scripted model's "long" reply.
pub fn long_text() -> String {
    (1..=300).map(|i| format!("word{i}")).collect::<Vec<_>>().join(" ")
}

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("examples sits in the repository")
}

/// `.tools/bin/pi-acp` and `.tools/bin/pi-faux`, or a failure naming the
/// command that installs them.
fn tools() -> (PathBuf, PathBuf) {
    let bin = repo().join(".tools/bin");
    let (acp, faux) = (bin.join("pi-acp"), bin.join("pi-faux"));
    assert!(
        acp.exists() && faux.exists(),
        "pi-acp and Pi are not installed: run `cargo xtask install-pi` (node 22, Pi 1.6.0 and \
         pi-acp 0.0.34 into {}); the ACP tests need them and never skip",
        bin.display()
    );
    (acp, faux)
}

/// `PATH` without a `pi` on it: with one, pi-acp asks it and npm for
/// versions at every new session (a network attempt, and 2 s).
fn path_without_pi() -> String {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let dirs: Vec<PathBuf> = std::env::split_paths(&path).filter(|d| !d.join("pi").exists()).collect();
    std::env::join_paths(dirs).expect("PATH entries").to_string_lossy().into_owned()
}

/// Waits up to 30 s (pi-acp starts in ~0.3 s, a session in ~0.5 s; a
/// loaded machine does worse), polling every 20 ms.
pub fn eventually<T>(what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(v) = check() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A fresh folder for one test: `home` (pi-acp's `HOME`), `pi` (Pi's
/// folder, with quiet start-up), `project` (the sessions' cwd); the
/// example makes `data` and `sock` itself.
pub fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("durable-acp-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    for sub in ["home", "pi", "project"] {
        std::fs::create_dir_all(dir.join(sub)).unwrap();
    }
    // Without it pi-acp sends a start-up chunk, often inside the first turn.
    std::fs::write(dir.join("pi/settings.json"), "{\"quietStartup\": true}\n").unwrap();
    dir
}

/// How to start durable-agent.
#[derive(Default)]
pub struct Start {
    /// Runs it as this user (through `setpriv`), its folders theirs.
    pub user: Option<u32>,
    /// Added to its environment (the agent's too).
    pub envs: Vec<(String, String)>,
    /// The scripted model's streaming rate (tokens a second; unset: at once).
    pub tokens_per_second: Option<u32>,
}

/// durable-agent in a process of its own.
pub struct Acp {
    pub child: Child,
    pub socket: String,
    pub user: Option<u32>,
}

impl Acp {
    /// durable-agent on `dir` (a [`scratch`] folder), with the scripted model
    /// answering at once.
    pub fn start(dir: &Path) -> Acp {
        Acp::start_with(dir, Start::default())
    }

    pub fn start_with(dir: &Path, start: Start) -> Acp {
        let (pi_acp, pi_faux) = tools();
        if let Some(uid) = start.user {
            for sub in ["", "home", "pi", "pi/settings.json", "project"] {
                std::os::unix::fs::chown(dir.join(sub), Some(uid), Some(uid)).unwrap();
            }
        }
        let socket = dir.join("sock").join("app.sock").to_str().unwrap().to_owned();
        let mut cmd = as_user(start.user, durable_agent());
        cmd.args(["acp", "--agent"])
            .arg(&pi_acp)
            .arg("--cwd")
            .arg(dir.join("project"))
            .arg("--data")
            .arg(dir.join("data"))
            .args(["--socket", &socket])
            .env("HOME", dir.join("home"))
            .env("PI_CODING_AGENT_DIR", dir.join("pi"))
            .env("PI_ACP_PI_COMMAND", &pi_faux)
            .env("PI_FAUX_EXTENSION", repo().join("examples/tests/acp/faux.ts"))
            .env("PI_OFFLINE", "1")
            .env("PI_SKIP_VERSION_CHECK", "1")
            .env("PI_TELEMETRY", "0")
            .env("PATH", path_without_pi())
            .env_remove("COLLIE_TOKEN")
            .env_remove("COLLIE_TOKEN_NEXT")
            .env_remove("FAUX_TOKENS_PER_SECOND");
        if let Some(rate) = start.tokens_per_second {
            cmd.env("FAUX_TOKENS_PER_SECOND", rate.to_string());
        }
        let mut child = cmd
            .envs(start.envs.iter().map(|(k, v)| (k, v)))
            .current_dir(dir.join("project"))
            // A group of its own: the test ends whatever of it is left.
            .process_group(0)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("durable-agent was built for this test");
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let first = lines.next().expect("a line").expect("utf-8");
        assert_eq!(first, format!("listening {socket}"));
        Acp { child, socket, user: start.user }
    }

    /// `curl` over the socket, as durable-agent's user.
    pub fn curl(&self, args: &[&str]) -> (u16, Value) {
        curl_as(self.user, &self.socket, args)
    }

    pub fn get(&self, path: &str) -> Value {
        let (status, r) = self.curl(&[&format!("http://collie{path}")]);
        assert_eq!(status, 200, "GET {path}: {r}");
        r
    }

    pub fn post(&self, path: &str, body: Value) -> (u16, Value) {
        let url = format!("http://collie{path}");
        self.curl(&["-H", "Content-Type: application/json", "-d", &body.to_string(), &url])
    }

    /// A write that must succeed.
    pub fn write(&self, path: &str, body: Value) -> Value {
        let (status, r) = self.post(path, body);
        assert_eq!(status, 200, "{path}: {r}");
        r
    }

    pub fn state(&self) -> Value {
        self.get("/v1/state")
    }

    pub fn panes(&self) -> Vec<String> {
        let s = self.state();
        s["panes"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|p| p["id"].as_str().map(str::to_owned))
            .collect()
    }

    /// The starter `new-conversation` with `text`: the new pane's id.
    pub fn new_conversation(&self, request_id: &str, text: &str) -> String {
        let r = self.write("/v1/starters/new-conversation", json!({"requestId": request_id, "text": text}));
        assert_eq!(r["result"], "started", "{r}");
        r["pane"].as_str().expect("the starter names its pane").to_owned()
    }

    pub fn send(&self, pane: &str, request_id: &str, text: &str) {
        let (status, r) =
            self.post(&format!("/v1/panes/{pane}/send"), json!({"requestId": request_id, "text": text}));
        assert_eq!((status, r["result"].clone()), (200, json!("sent")), "{r}");
    }

    pub fn stop(&self, pane: &str, request_id: &str) {
        let r = self.write(&format!("/v1/panes/{pane}/stop"), json!({"requestId": request_id}));
        assert_eq!(r["result"], "stopped", "{r}");
    }

    /// Every event of the pane still in its tail.
    pub fn events(&self, pane: &str) -> Vec<Value> {
        let r = self.get(&format!("/v1/panes/{pane}/events?after=0"));
        r["events"].as_array().cloned().unwrap_or_default()
    }

    /// The pane's items, each as last written, in order of first appearance.
    /// A snapshot (a pane restored after a restart over items written
    /// first, §9.2) gives them as they stand.
    pub fn items(&self, pane: &str) -> Vec<Value> {
        let page = self.get(&format!("/v1/panes/{pane}/events?after=0"));
        if page["snapshot"] == true {
            return page["items"].as_array().cloned().unwrap_or_default();
        }
        let mut latest: Vec<Value> = Vec::new();
        for e in page["events"].as_array().into_iter().flatten().filter(|e| e["type"] == "item") {
            match latest.iter_mut().find(|i| i["id"] == e["item"]["id"]) {
                Some(i) => *i = e["item"].clone(),
                None => latest.push(e["item"].clone()),
            }
        }
        latest
    }

    /// The first item of `kind` whose text is `text`, once there and final.
    pub fn wait_text(&self, pane: &str, kind: &str, text: &str) -> Value {
        eventually(&format!("{kind} {text:?} in {pane}"), || {
            self.items(pane)
                .into_iter()
                .find(|i| i["kind"] == kind && i["text"] == text && i.get("partial").is_none())
        })
    }

    pub fn idle(&self, pane: &str) {
        eventually(&format!("{pane} idle"), || {
            let s = self.state();
            let p = s["panes"].as_array()?.iter().find(|p| p["id"] == pane)?.clone();
            (p["state"] == "idle").then_some(())
        });
    }

    /// The one open ask.
    pub fn open_ask(&self) -> Value {
        eventually("an open card", || self.state()["asks"].as_array()?.first().cloned())
    }

    pub fn answer(&self, ask: &Value, request_id: &str, option: &str) -> (u16, Value) {
        let body = json!({"requestId": request_id, "answer": {"optionIds": [option]}, "hash": ask["hash"]});
        self.post(&format!("/v1/asks/{}", ask["id"].as_str().unwrap()), body)
    }

    /// The `tool` item whose call holds `needle`, once it is no longer running.
    pub fn finished_tool(&self, pane: &str, needle: &str) -> Value {
        eventually(&format!("the tool call {needle:?} finished"), || {
            self.items(pane).into_iter().find(|i| {
                i["kind"] == "tool"
                    && i["call"].as_str().is_some_and(|c| c.contains(needle))
                    && i["status"] != "running"
            })
        })
    }

    /// The agent processes (pi-acp) running under durable-agent now.
    pub fn agents(&self) -> Vec<u32> {
        descendants(self.child.id()).into_iter().filter(|&pid| cmdline(pid).contains("pi-acp")).collect()
    }

    /// Ends durable-agent with `SIGKILL`, as a crash would: nothing of it
    /// runs on the way out. Its agents are left to notice.
    pub fn kill9(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Acp {
    fn drop(&mut self) {
        let left = descendants(self.child.id());
        if !matches!(self.child.try_wait(), Ok(Some(_))) {
            // SIGTERM first: durable-agent stops its agents on the way out.
            let _ = Command::new("kill").arg(self.child.id().to_string()).status();
            let deadline = Instant::now() + Duration::from_secs(5);
            while Instant::now() < deadline && !matches!(self.child.try_wait(), Ok(Some(_))) {
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        // Whatever it started and left behind ends with the test.
        for pid in left {
            let _ = Command::new("kill").args(["-KILL", &pid.to_string()]).stderr(Stdio::null()).status();
        }
    }
}

/// `/proc/<pid>/cmdline`, its NULs as spaces.
pub fn cmdline(pid: u32) -> String {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    String::from_utf8_lossy(&raw).replace('\0', " ")
}

/// The `NAME=value` pairs of `/proc/<pid>/environ`.
pub fn environ(pid: u32) -> Vec<String> {
    let raw = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
    raw.split(|b| *b == 0)
        .filter(|s| !s.is_empty())
        .map(|s| String::from_utf8_lossy(s).into_owned())
        .collect()
}
