//! Codex on the phone, out of the box: `durable-agent acp -- codex-acp`
//! (0.16.0, Codex 0.137.0, the native binary from `cargo xtask
//! install-pi`), offline against a scripted OpenAI Responses API of the
//! tests' own (`acp/fake_openai.py`), driven the way Collie would (curl
//! over the socket). The model provider is given on codex-acp's command
//! line (`-c key=value`): no config file is written anywhere.
//!
//! Codex asks nothing by default: its sessions start in `read-only`, in
//! which a command runs in its sandbox without a card. With
//! `-c approval_policy="untrusted"` on its command line (for this process
//! only) a command waits for a card; Allow runs it, Deny refuses it, and a
//! stop ends the turn at once, card open or command running.
//!
//! Codex's sandbox needs `bwrap` (Debian's `bubblewrap`) and user
//! namespaces. The agent runs as `nobody` when the tests run as root, as
//! users run it.
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

/// codex-acp's option that makes Codex ask before any command it does not
/// know to be safe: a setting of this process only.
const ASK_FIRST: [&str; 2] = ["-c", "approval_policy=\"untrusted\""];

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("examples sits in the repository")
}

/// codex-acp's native binary in `.tools/node_modules`, or a failure naming
/// the command that installs it (and bubblewrap, which its sandbox needs).
fn codex_acp() -> PathBuf {
    let arch = match std::env::consts::ARCH {
        "aarch64" => "arm64",
        _ => "x64",
    };
    let bin =
        repo().join(format!(".tools/node_modules/@zed-industries/codex-acp-linux-{arch}/bin/codex-acp"));
    assert!(
        bin.exists(),
        "codex-acp is not installed: run `cargo xtask install-pi` (it puts @zed-industries/codex-acp \
         0.16.0 in {}); this test needs it and never skips",
        repo().join(".tools/node_modules").display()
    );
    let bwrap = Command::new("bwrap").arg("--version").output();
    assert!(
        bwrap.is_ok_and(|o| o.status.success()),
        "bwrap is not installed: Codex's sandbox needs it (`apt-get install bubblewrap`)"
    );
    bin
}

/// The scripted Responses API, on a free port of 127.0.0.1.
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
            .arg(repo().join("examples/tests/acp/fake_openai.py"))
            .arg(log)
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3 runs the scripted Responses API");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).expect("`port <n>`");
        let port = line.trim().strip_prefix("port ").and_then(|p| p.parse().ok()).expect("`port <n>`");
        FakeApi { child, port }
    }
}

/// durable-agent on codex-acp, as `user`, in `dir`.
struct Codex {
    child: Child,
    socket: String,
    user: Option<u32>,
    dir: PathBuf,
    _api: FakeApi,
}

impl Drop for Codex {
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

impl Codex {
    /// The bridge on codex-acp with `extra` on its command line.
    fn start(name: &str, extra: &[&str]) -> Codex {
        let agent = codex_acp();
        let dir = std::env::temp_dir().join(format!("durable-agent-codex-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let subs = ["", "home", "codex", "tmp", "project"];
        for sub in subs {
            std::fs::create_dir_all(dir.join(sub)).unwrap();
        }
        let user = unprivileged();
        if let Some(uid) = user {
            for sub in subs {
                std::os::unix::fs::chown(dir.join(sub), Some(uid), Some(uid)).unwrap();
            }
        }
        let api = FakeApi::start(&dir.join("api.log"));
        let socket = dir.join("sock/app.sock").to_str().unwrap().to_owned();
        let provider = format!("model_providers.fake.base_url=\"http://127.0.0.1:{}/v1\"", api.port);
        let mut child = as_user(user, durable_agent())
            .args(["acp", "--socket", &socket, "--data"])
            .arg(dir.join("data"))
            .arg("--cwd")
            .arg(dir.join("project"))
            .arg("--")
            .arg(agent)
            // The scripted model as a provider of the command line's own:
            // nothing of Codex's config is read from or written to a file.
            .args(["-c", "model=\"gpt-5.4\"", "-c", "model_provider=\"fake\""])
            .args(["-c", "model_providers.fake.name=\"fake\"", "-c", &provider])
            .args(["-c", "model_providers.fake.wire_api=\"responses\""])
            .args(["-c", "model_providers.fake.env_key=\"FAKE_API_KEY\""])
            .args(extra)
            // Nothing of the user's is read or written: a private home,
            // Codex home and temporary folder (outside the Codex home, or
            // its sandbox helper cannot be linked).
            .env("HOME", dir.join("home"))
            .env("CODEX_HOME", dir.join("codex"))
            .env("TMPDIR", dir.join("tmp"))
            .env("FAKE_API_KEY", "scripted-model-key")
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env_remove("OPENAI_API_KEY")
            .env_remove("CODEX_API_KEY")
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
        Codex { child, socket, user, dir, _api: api }
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
fn codex_asked_to_approve_commands_shows_a_card_and_allow_and_deny_reach_it() {
    let codex = Codex::start("cards", &ASK_FIRST);
    let made = codex.dir.join("project/made-by-codex");

    let pane = codex.new_conversation("please run bash");
    let ask = codex.eventually("the card for the command", || codex.open_ask());
    assert_eq!(ask["pane"], pane.as_str(), "{ask}");
    let call = ask["tool"]["call"].as_str().unwrap_or_default();
    assert!(call.contains("mkdir -p made-by-codex"), "the card shows the command: {ask}");
    assert!(!made.exists(), "the command ran before the card was answered");
    codex.answer(&ask, &["approved"], "a-1");
    codex.eventually("the folder the command makes", || made.exists().then_some(()));
    codex.eventually("the turn's end", || codex.idle(&pane).then_some(()));
    let items = codex.items(&pane);
    assert!(has_reply(&items, "Done:"), "the reply after the command: {items:?}");

    // The same once more, denied: nothing runs.
    std::fs::remove_dir(&made).unwrap();
    let (status, r) =
        codex.post(&format!("/v1/panes/{pane}/send"), json!({"requestId": "s-2", "text": "please run bash"}));
    assert_eq!(status, 200, "{r}");
    let ask = codex.eventually("the second card", || codex.open_ask());
    codex.answer(&ask, &["abort"], "a-2");
    codex.eventually("the denied turn's end", || codex.idle(&pane).then_some(()));
    assert!(!made.exists(), "a denied command ran");
    // The approval policy was the command line's: no config file was written for it.
    assert!(!codex.dir.join("codex/config.toml").exists(), "a Codex config file was written");
}

#[test]
fn codex_stopped_with_a_card_open_or_a_command_running_ends_its_turn() {
    let codex = Codex::start("stop", &ASK_FIRST);

    // A stop while the card is open: the card closes, the turn ends.
    let pane = codex.new_conversation("please run bash");
    let ask = codex.eventually("the card for the command", || codex.open_ask());
    let (status, r) = codex.post(&format!("/v1/panes/{pane}/stop"), json!({"requestId": "x-1"}));
    assert_eq!(status, 200, "{r}");
    codex.eventually("the turn's end after the stop", || codex.idle(&pane).then_some(()));
    assert!(codex.open_ask().is_none(), "the card stayed open after the stop: {ask}");
    assert!(!codex.dir.join("project/made-by-codex").exists(), "the command ran after a stop");

    // A stop while an allowed command runs: the turn ends.
    let (status, r) =
        codex.post(&format!("/v1/panes/{pane}/send"), json!({"requestId": "s-2", "text": "please run slow"}));
    assert_eq!(status, 200, "{r}");
    let ask = codex.eventually("the card for the slow command", || codex.open_ask());
    codex.answer(&ask, &["approved"], "a-2");
    let started = codex.dir.join("project/slow-started");
    codex.eventually("the slow command's start", || started.exists().then_some(()));
    let (status, r) = codex.post(&format!("/v1/panes/{pane}/stop"), json!({"requestId": "x-2"}));
    assert_eq!(status, 200, "{r}");
    codex.eventually("the turn's end after the stop", || codex.idle(&pane).then_some(()));
    let items = codex.items(&pane);
    assert!(
        items.iter().any(|i| i["kind"] == "notice" && i["text"] == "Stopped."),
        "the stop is told: {items:?}"
    );
}

#[test]
fn codex_by_default_runs_a_command_in_its_read_only_sandbox_without_a_card() {
    let codex = Codex::start("sandbox", &[]);
    let pane = codex.new_conversation("please run bash");
    codex.eventually("the turn's end", || codex.idle(&pane).then_some(()));
    let items = codex.items(&pane);
    // Its `read-only` mode is one the bridge leaves as it is; the sandbox,
    // not a card, kept the command from writing.
    assert!(has_reply(&items, "Read-only file system"), "the command's failure: {items:?}");
    // (A card would have kept the turn from ending.)
    assert!(!codex.dir.join("project/made-by-codex").exists(), "the read-only sandbox let a command write");
}

#[test]
fn codex_through_the_bridge_passes_conformance_with_writes() {
    let codex = Codex::start("conformance", &ASK_FIRST);
    // A conversation first: a fresh bridge shows no pane, and the sends'
    // cases need one.
    let pane = codex.new_conversation("hello");
    codex.eventually("the first turn's end", || codex.idle(&pane).then_some(()));
    let out = as_user(codex.user, durable())
        .args(["conformance", "--writes", "--socket", &codex.socket])
        .env_remove("COLLIE_TOKEN")
        .env_remove("COLLIE_DURABLE_SOCKET")
        .output()
        .expect("durable conformance runs");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    let last = String::from_utf8_lossy(&out.stdout).lines().last().unwrap_or_default().to_owned();
    assert!(
        out.status.success() && last.ends_with(" passed, 0 failed") && !last.starts_with("0 passed"),
        "durable conformance --writes against Codex ({:?}):\n{text}",
        out.status.code()
    );
}
