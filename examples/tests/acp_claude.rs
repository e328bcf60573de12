//! Claude Code on the phone, out of the box: `durable-agent acp --
//! claude-agent-acp` (0.101.0, with the Claude Code it ships, from `cargo
//! xtask install-pi`), offline against a scripted Anthropic Messages API
//! of the tests' own (`acp/fake_anthropic.py`), driven the way Collie would
//! (curl over the socket). Claude starts its sessions in its `auto` mode,
//! in which it runs tools without asking; through the bridge a tool call
//! waits for a card, Allow runs it and Deny refuses it, with nothing of
//! Claude's settings written.
//!
//! Claude Code refuses its unattended modes as root, and users do not run
//! it as root: the agent runs as `nobody` when the tests run as root.
#![cfg(feature = "acp")]

#[path = "agent/mod.rs"]
mod agent;

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use agent::{as_user, curl_as, durable, durable_agent, unprivileged};
use serde_json::{Value, json};

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("examples sits in the repository")
}

/// `.tools/bin/claude-agent-acp`, or a failure naming the command that installs it.
fn claude_agent_acp() -> PathBuf {
    let bin = repo().join(".tools/bin/claude-agent-acp");
    assert!(
        bin.exists(),
        "claude-agent-acp is not installed: run `cargo xtask install-pi` (it puts node 22, Pi, pi-acp \
         and claude-agent-acp 0.101.0 in {}); this test needs it and never skips",
        bin.parent().unwrap().display()
    );
    bin
}

/// The scripted Messages API, on a free port of 127.0.0.1.
struct FakeApi {
    child: Child,
    port: u16,
}

impl Drop for FakeApi {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl FakeApi {
    fn start(log: &Path) -> FakeApi {
        let mut child = Command::new("python3")
            .arg(repo().join("examples/tests/acp/fake_anthropic.py"))
            .arg(log)
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3 runs the scripted Messages API");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).expect("`port <n>`");
        let port = line.trim().strip_prefix("port ").and_then(|p| p.parse().ok()).expect("`port <n>`");
        FakeApi { child, port }
    }
}

/// durable-agent on Claude Code, as `user`, in `dir`.
struct Claude {
    child: Child,
    socket: String,
    user: Option<u32>,
    dir: PathBuf,
    _api: FakeApi,
}

impl Drop for Claude {
    fn drop(&mut self) {
        // SIGTERM first: durable-agent stops its agents on the way out.
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline && matches!(self.child.try_wait(), Ok(None)) {
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = nix::sys::signal::killpg(pid, nix::sys::signal::Signal::SIGKILL);
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Claude {
    fn start(name: &str) -> Claude {
        let agent = claude_agent_acp();
        let dir = std::env::temp_dir().join(format!("durable-agent-claude-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        for sub in ["home", "claude", "project"] {
            std::fs::create_dir_all(dir.join(sub)).unwrap();
        }
        let user = unprivileged();
        if let Some(uid) = user {
            for sub in ["", "home", "claude", "project"] {
                std::os::unix::fs::chown(dir.join(sub), Some(uid), Some(uid)).unwrap();
            }
        }
        let api = FakeApi::start(&dir.join("api.log"));
        let socket = dir.join("sock/app.sock").to_str().unwrap().to_owned();
        let node_bin = repo().join(".tools/bin");
        let path = format!("{}:/usr/local/bin:/usr/bin:/bin", node_bin.display());
        let mut child = as_user(user, durable_agent())
            .args(["acp", "--socket", &socket, "--data"])
            .arg(dir.join("data"))
            .arg("--cwd")
            .arg(dir.join("project"))
            .arg("--")
            .arg(agent)
            // Nothing of the user's is read or written: a private home and
            // Claude config folder; the model is the scripted one.
            .env("HOME", dir.join("home"))
            .env("CLAUDE_CONFIG_DIR", dir.join("claude"))
            .env("ANTHROPIC_BASE_URL", format!("http://127.0.0.1:{}", api.port))
            .env("ANTHROPIC_API_KEY", "scripted-model-key")
            .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
            .env("DISABLE_TELEMETRY", "1")
            .env("DISABLE_AUTOUPDATER", "1")
            .env("DISABLE_ERROR_REPORTING", "1")
            .env("PATH", path)
            .env_remove("COLLIE_TOKEN")
            .env_remove("COLLIE_TOKEN_NEXT")
            .current_dir(dir.join("project"))
            // A group of its own: the test ends whatever of it is left.
            .process_group(0)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("durable-agent was built for this test");
        let mut first = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut first).expect("a line");
        assert_eq!(first.trim(), format!("listening {socket}"));
        Claude { child, socket, user, dir, _api: api }
    }

    fn get(&self, path: &str) -> Value {
        curl_as(self.user, &self.socket, &[&format!("http://collie{path}")]).1
    }

    fn post(&self, path: &str, body: Value) -> (u16, Value) {
        let body = body.to_string();
        let url = format!("http://collie{path}");
        curl_as(
            self.user,
            &self.socket,
            &["-X", "POST", "-H", "Content-Type: application/json", "--data-binary", &body, &url],
        )
    }

    /// The pane's items, each at its last version.
    fn items(&self, pane: &str) -> Vec<Value> {
        let page = self.get(&format!("/v1/panes/{pane}/events?after=0"));
        let mut shown: Vec<Value> = Vec::new();
        for event in page["events"].as_array().into_iter().flatten().filter(|e| e["type"] == "item") {
            let item = &event["item"];
            match shown.iter_mut().find(|i| i["id"] == item["id"]) {
                Some(old) => *old = item.clone(),
                None => shown.push(item.clone()),
            }
        }
        shown
    }

    fn open_ask(&self) -> Option<Value> {
        self.get("/v1/state")["asks"].as_array().and_then(|a| a.first().cloned())
    }

    fn idle(&self, pane: &str) -> bool {
        let state = self.get("/v1/state");
        state["panes"].as_array().into_iter().flatten().any(|p| p["id"] == pane && p["state"] == "idle")
    }

    fn api_log(&self) -> String {
        std::fs::read_to_string(self.dir.join("api.log")).unwrap_or_default()
    }
}

/// Claude's first runs, cold and on a loaded machine, take a few seconds.
fn eventually<T>(what: &str, claude: &Claude, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(v) = check() {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}; the model saw:\n{}",
            claude.api_log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn claude_code_asks_before_it_runs_a_command_and_allow_and_deny_reach_it() {
    let claude = Claude::start("cards");
    let made = claude.dir.join("project/made-by-claude");

    // A new conversation whose first prompt makes Claude run a command.
    let (status, r) =
        claude.post("/v1/starters/new-conversation", json!({"requestId": "s-1", "text": "please run bash"}));
    assert_eq!(status, 200, "{r}");
    let pane = r["pane"].as_str().expect("the new pane").to_owned();
    let ask = eventually("the card for the command", &claude, || claude.open_ask());
    assert_eq!(ask["pane"], pane.as_str(), "{ask}");
    let call = ask["tool"]["call"].as_str().unwrap_or_default();
    assert!(call.contains("mkdir -p made-by-claude"), "the card shows the command: {ask}");
    assert!(!made.exists(), "the command ran before the card was answered");
    let option = |id: &str| {
        ask["options"].as_array().into_iter().flatten().any(|o| o["id"] == id).then(|| id.to_owned())
    };
    let allow = option("allow").or_else(|| option("allow-once")).expect("an allow-once option");
    let answer = json!({"requestId": "a-1", "answer": {"optionIds": [allow]}, "hash": ask["hash"]});
    let (status, r) = claude.post(&format!("/v1/asks/{}", ask["id"].as_str().unwrap()), answer);
    assert_eq!(status, 200, "{r}");
    eventually("the folder the command makes", &claude, || made.exists().then_some(()));
    eventually("the turn's end", &claude, || claude.idle(&pane).then_some(()));
    let items = claude.items(&pane);
    assert!(
        items.iter().any(|i| i["kind"] == "reply" && i["text"].as_str().is_some_and(|t| t.contains("Done"))),
        "the reply after the command: {items:?}"
    );

    // The same once more, denied: nothing runs, the call shows it.
    std::fs::remove_dir(&made).unwrap();
    let (status, r) = claude
        .post(&format!("/v1/panes/{pane}/send"), json!({"requestId": "s-2", "text": "please run bash"}));
    assert_eq!(status, 200, "{r}");
    let ask = eventually("the second card", &claude, || claude.open_ask());
    let reject = ask["options"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|o| o["id"] == "reject" || o["id"] == "reject-once")
        .map(|o| o["id"].clone())
        .unwrap_or_else(|| panic!("a reject option: {ask}"));
    let answer = json!({"requestId": "a-2", "answer": {"optionIds": [reject]}, "hash": ask["hash"]});
    let (status, r) = claude.post(&format!("/v1/asks/{}", ask["id"].as_str().unwrap()), answer);
    assert_eq!(status, 200, "{r}");
    eventually("the denied turn's end", &claude, || claude.idle(&pane).then_some(()));
    assert!(!made.exists(), "a denied command ran");
    // Nothing of the user's (or of Claude's own settings) was written to make it ask.
    assert!(!claude.dir.join("claude/settings.json").exists(), "the bridge wrote Claude's settings");
}

#[test]
fn claude_code_through_the_bridge_passes_conformance_with_writes() {
    let claude = Claude::start("conformance");
    // A conversation first: a fresh bridge shows no pane, and the sends'
    // cases need one.
    let (status, r) =
        claude.post("/v1/starters/new-conversation", json!({"requestId": "s-1", "text": "hello"}));
    assert_eq!(status, 200, "{r}");
    let pane = r["pane"].as_str().expect("the new pane").to_owned();
    eventually("the first turn's end", &claude, || claude.idle(&pane).then_some(()));
    let out = as_user(claude.user, durable())
        .args(["conformance", "--writes", "--socket", &claude.socket])
        .env_remove("COLLIE_TOKEN")
        .env_remove("COLLIE_DURABLE_SOCKET")
        .output()
        .expect("durable conformance runs");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    let last = String::from_utf8_lossy(&out.stdout).lines().last().unwrap_or_default().to_owned();
    assert!(
        out.status.success() && last.ends_with(" passed, 0 failed") && !last.starts_with("0 passed"),
        "durable conformance --writes against Claude Code ({:?}):\n{text}",
        out.status.code()
    );
}
