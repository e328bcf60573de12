//! Gemini CLI on the phone, out of the box: `durable-agent acp -- gemini
//! --acp` (0.61.0, run by the node 22 of `cargo xtask install-pi`),
//! offline against a scripted Gemini API of the tests' own
//! (`acp/fake_gemini.py`), driven the way Collie would (curl over the
//! socket). Gemini CLI asks before it runs a command in its `default`
//! mode, the one its sessions start in: a command waits for a card, Allow
//! runs it, Deny refuses it, and a stop with the card open ends the turn
//! at once (Gemini CLI answers a cancel only once its question is
//! answered, which the bridge does with the stop).
//!
//! The agent runs as `nobody` when the tests run as root, as users run it.
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

/// node (`.tools/bin/node`) and Gemini CLI's bundle in `.tools/node_modules`,
/// or a failure naming the command that installs them.
fn gemini_cli() -> (PathBuf, PathBuf) {
    let node = repo().join(".tools/bin/node");
    let bundle = repo().join(".tools/node_modules/@google/gemini-cli/bundle/gemini.js");
    assert!(
        node.exists() && bundle.exists(),
        "Gemini CLI is not installed: run `cargo xtask install-pi` (it puts node 22 and \
         @google/gemini-cli 0.61.0 in {}); this test needs it and never skips",
        repo().join(".tools").display()
    );
    (node, bundle)
}

/// The scripted Gemini API, on a free port of 127.0.0.1.
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
            .arg(repo().join("examples/tests/acp/fake_gemini.py"))
            .arg(log)
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3 runs the scripted Gemini API");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).expect("`port <n>`");
        let port = line.trim().strip_prefix("port ").and_then(|p| p.parse().ok()).expect("`port <n>`");
        FakeApi { child, port }
    }
}

/// durable-agent on Gemini CLI, as `user`, in `dir`.
struct Gemini {
    child: Child,
    socket: String,
    user: Option<u32>,
    dir: PathBuf,
    _api: FakeApi,
}

impl Drop for Gemini {
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

impl Gemini {
    fn start(name: &str) -> Gemini {
        let (node, gemini_js) = gemini_cli();
        let dir = std::env::temp_dir().join(format!("durable-agent-gemini-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let subs = ["", "home", "home/.gemini", "tmp", "project"];
        for sub in subs {
            std::fs::create_dir_all(dir.join(sub)).unwrap();
        }
        // Settings in the private home that keep Gemini CLI off the network
        // (no usage statistics, telemetry or update check) and on one
        // model (its default, "auto", asks the model to route each turn);
        // its sessions are kept, as a clean-up could remove one the bridge
        // loads again.
        let settings = json!({
            "privacy": {"usageStatisticsEnabled": false},
            "telemetry": {"enabled": false},
            "general": {
                "enableAutoUpdate": false,
                "enableAutoUpdateNotification": false,
                "sessionRetention": {"enabled": false}
            },
            "model": {"name": "gemini-2.5-flash"}
        });
        std::fs::write(dir.join("home/.gemini/settings.json"), settings.to_string()).unwrap();
        let user = unprivileged();
        if let Some(uid) = user {
            for sub in subs.into_iter().chain(["home/.gemini/settings.json"]) {
                std::os::unix::fs::chown(dir.join(sub), Some(uid), Some(uid)).unwrap();
            }
        }
        let api = FakeApi::start(&dir.join("api.log"));
        let socket = dir.join("sock/app.sock").to_str().unwrap().to_owned();
        let mut child = as_user(user, durable_agent())
            .args(["acp", "--socket", &socket, "--data"])
            .arg(dir.join("data"))
            .arg("--cwd")
            .arg(dir.join("project"))
            .arg("--")
            .arg(node)
            .arg(gemini_js)
            .arg("--acp")
            // Nothing of the user's is read or written: a private home and
            // temporary folder; the model is the scripted one (with a base
            // URL, Gemini CLI needs no sign-in).
            .env("HOME", dir.join("home"))
            .env("TMPDIR", dir.join("tmp"))
            .env("GOOGLE_GEMINI_BASE_URL", format!("http://127.0.0.1:{}", api.port))
            .env("GEMINI_API_KEY", "scripted-model-key")
            // Else the process the bridge starts is a parent that ignores
            // SIGTERM and runs Gemini CLI again as its child.
            .env("GEMINI_CLI_NO_RELAUNCH", "true")
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env_remove("GOOGLE_API_KEY")
            .env_remove("GOOGLE_CLOUD_PROJECT")
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
        Gemini { child, socket, user, dir, _api: api }
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

    /// A new conversation whose first prompt is `text`: its pane.
    fn new_conversation(&self, text: &str) -> String {
        let (status, r) =
            self.post("/v1/starters/new-conversation", json!({"requestId": "s-1", "text": text}));
        assert_eq!(status, 200, "{r}");
        r["pane"].as_str().expect("the new pane").to_owned()
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

    /// Answers `ask` with its option `id` (one of `ids`, the first offered).
    fn answer(&self, ask: &Value, ids: &[&str], request: &str) {
        let option = ids
            .iter()
            .find(|id| ask["options"].as_array().into_iter().flatten().any(|o| o["id"] == **id))
            .unwrap_or_else(|| panic!("an option of {ids:?}: {ask}"));
        let answer = json!({"requestId": request, "answer": {"optionIds": [option]}, "hash": ask["hash"]});
        let (status, r) = self.post(&format!("/v1/asks/{}", ask["id"].as_str().unwrap()), answer);
        assert_eq!(status, 200, "{r}");
    }

    fn idle(&self, pane: &str) -> bool {
        let state = self.get("/v1/state");
        state["panes"].as_array().into_iter().flatten().any(|p| p["id"] == pane && p["state"] == "idle")
    }

    fn api_log(&self) -> String {
        std::fs::read_to_string(self.dir.join("api.log")).unwrap_or_default()
    }

    /// Polls `check` every 50 ms for up to 60 s (cold starts on a loaded
    /// machine take seconds).
    fn eventually<T>(&self, what: &str, mut check: impl FnMut() -> Option<T>) -> T {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(v) = check() {
                return v;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}; the model saw:\n{}",
                self.api_log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

fn has_reply(items: &[Value], text: &str) -> bool {
    items.iter().any(|i| i["kind"] == "reply" && i["text"].as_str().is_some_and(|t| t.contains(text)))
}

#[test]
fn gemini_asks_before_it_runs_a_command_and_allow_and_deny_reach_it() {
    let gemini = Gemini::start("cards");
    let made = gemini.dir.join("project/made-by-gemini");

    let pane = gemini.new_conversation("please run bash");
    let ask = gemini.eventually("the card for the command", || gemini.open_ask());
    assert_eq!(ask["pane"], pane.as_str(), "{ask}");
    let call = ask["tool"]["call"].as_str().unwrap_or_default();
    assert!(call.contains("mkdir -p made-by-gemini"), "the card shows the command: {ask}");
    assert!(!made.exists(), "the command ran before the card was answered");
    gemini.answer(&ask, &["proceed_once"], "a-1");
    gemini.eventually("the folder the command makes", || made.exists().then_some(()));
    gemini.eventually("the turn's end", || gemini.idle(&pane).then_some(()));
    let items = gemini.items(&pane);
    assert!(has_reply(&items, "Done:"), "the reply after the command: {items:?}");

    // The same once more, denied: nothing runs, the call shows it.
    std::fs::remove_dir(&made).unwrap();
    let (status, r) = gemini
        .post(&format!("/v1/panes/{pane}/send"), json!({"requestId": "s-2", "text": "please run bash"}));
    assert_eq!(status, 200, "{r}");
    let ask = gemini.eventually("the second card", || gemini.open_ask());
    gemini.answer(&ask, &["cancel"], "a-2");
    gemini.eventually("the denied turn's end", || gemini.idle(&pane).then_some(()));
    assert!(!made.exists(), "a denied command ran");
}

#[test]
fn gemini_stopped_with_a_card_open_ends_its_turn_at_once() {
    let gemini = Gemini::start("stop");
    let pane = gemini.new_conversation("please run bash");
    let ask = gemini.eventually("the card for the command", || gemini.open_ask());
    let (status, r) = gemini.post(&format!("/v1/panes/{pane}/stop"), json!({"requestId": "x-1"}));
    assert_eq!(status, 200, "{r}");
    gemini.eventually("the turn's end after the stop", || gemini.idle(&pane).then_some(()));
    assert!(gemini.open_ask().is_none(), "the card stayed open after the stop: {ask}");
    let items = gemini.items(&pane);
    // "Stopped." is the agent's own answer (`cancelled`); a turn the bridge
    // had to end by killing the agent would say so instead.
    assert!(
        items.iter().any(|i| i["kind"] == "notice" && i["text"] == "Stopped."),
        "the agent's answer to the stop: {items:?}"
    );
    assert!(!items.iter().any(|i| i["tone"] == "error"), "the stop went wrong: {items:?}");
    assert!(!gemini.dir.join("project/made-by-gemini").exists(), "the command ran after a stop");

    // The conversation goes on with the same agent.
    let (status, r) =
        gemini.post(&format!("/v1/panes/{pane}/send"), json!({"requestId": "s-2", "text": "hello"}));
    assert_eq!(status, 200, "{r}");
    gemini
        .eventually("the next turn's reply", || has_reply(&gemini.items(&pane), "Echo: hello").then_some(()));
}

#[test]
fn gemini_through_the_bridge_passes_conformance_with_writes() {
    let gemini = Gemini::start("conformance");
    // A conversation first: a fresh bridge shows no pane, and the sends'
    // cases need one.
    let pane = gemini.new_conversation("hello");
    gemini.eventually("the first turn's end", || gemini.idle(&pane).then_some(()));
    let out = as_user(gemini.user, durable())
        .args(["conformance", "--writes", "--socket", &gemini.socket])
        .env_remove("COLLIE_TOKEN")
        .env_remove("COLLIE_DURABLE_SOCKET")
        .output()
        .expect("durable conformance runs");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    let last = String::from_utf8_lossy(&out.stdout).lines().last().unwrap_or_default().to_owned();
    assert!(
        out.status.success() && last.ends_with(" passed, 0 failed") && !last.starts_with("0 passed"),
        "durable conformance --writes against Gemini CLI ({:?}):\n{text}",
        out.status.code()
    );
}
