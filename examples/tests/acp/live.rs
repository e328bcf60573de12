//! A real coding agent through `durable-agent acp`, offline against a
//! scripted model server of the tests' own, driven the way Collie would
//! (curl over the socket): what `acp_claude`, `acp_codex` and `acp_gemini`
//! share. Each of them says only where its agent is, what command line and
//! environment it runs with, and what it is asked.

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::agent::{alive, as_user, curl_as, descendants, durable, durable_agent, unprivileged};

/// The repository's root (`.tools`, the scripts in `examples/tests/acp`).
pub(crate) fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("examples sits in the repository")
}

/// A scripted model server (`examples/tests/acp/<script>`, run by python3)
/// on a free port of 127.0.0.1, writing what it was sent to `log`; killed
/// on drop.
struct ScriptedModel {
    child: Child,
    port: u16,
}

impl Drop for ScriptedModel {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl ScriptedModel {
    fn start(script: &str, log: &Path) -> ScriptedModel {
        let mut child = Command::new("python3")
            .arg(repo().join("examples/tests/acp").join(script))
            .arg(log)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("python3 runs the scripted model {script}: {e}"));
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).expect("`port <n>`");
        let port = line.trim().strip_prefix("port ").and_then(|p| p.parse().ok()).expect("`port <n>`");
        ScriptedModel { child, port }
    }
}

/// What one agent needs of its private folder.
pub(crate) struct Setup<'a> {
    /// The agent's short name, in its folder's: `durable-agent-<agent>-<test>-<pid>`.
    pub(crate) agent: &'a str,
    /// Its scripted model server, a script in `examples/tests/acp`.
    pub(crate) model: &'a str,
    /// Sub-folders it needs besides `home` and `project` (its config
    /// folder, a temporary folder), made and owned by the user it runs as.
    pub(crate) folders: &'a [&'a str],
    /// Files written (path in the folder, contents) before it starts, owned
    /// by that user too.
    pub(crate) files: &'a [(&'a str, &'a str)],
}

/// durable-agent on a real agent, as `user`, in the private folder `dir`:
/// its home (`home`), its working folder (`project`), the scripted model's
/// log (`api.log`).
pub(crate) struct LiveAgent {
    child: Child,
    pub(crate) socket: String,
    pub(crate) user: Option<u32>,
    pub(crate) dir: PathBuf,
    model: ScriptedModel,
}

impl Drop for LiveAgent {
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

impl LiveAgent {
    /// The bridge for the test `test` on the agent `setup` describes;
    /// `agent` puts the agent's command line (what follows `--`) and its
    /// own environment on durable-agent's command, given the private folder
    /// and the scripted model's port.
    pub(crate) fn start(
        setup: &Setup<'_>,
        test: &str,
        agent: impl FnOnce(&mut Command, &Path, u16),
    ) -> LiveAgent {
        let dir =
            std::env::temp_dir().join(format!("durable-agent-{}-{test}-{}", setup.agent, std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let folders: Vec<&str> =
            ["", "home", "project"].into_iter().chain(setup.folders.iter().copied()).collect();
        for sub in &folders {
            std::fs::create_dir_all(dir.join(sub)).unwrap();
        }
        for (path, contents) in setup.files {
            std::fs::write(dir.join(path), contents).unwrap();
        }
        let user = unprivileged();
        if let Some(uid) = user {
            for sub in folders.iter().chain(setup.files.iter().map(|(path, _)| path)) {
                std::os::unix::fs::chown(dir.join(sub), Some(uid), Some(uid)).unwrap();
            }
        }
        let model = ScriptedModel::start(setup.model, &dir.join("api.log"));
        let socket = dir.join("sock/app.sock").to_str().unwrap().to_owned();
        let child = spawn(&dir, user, &socket, model.port, agent);
        LiveAgent { child, socket, user, dir, model }
    }

    /// Ends durable-agent with `SIGKILL`, as a crash would (nothing of it
    /// runs on the way out), waits until what it started is gone, and
    /// starts it again at once on the same folder, data and socket;
    /// `agent` as for [`start`](Self::start).
    #[allow(dead_code)] // only acp_gemini restarts its agent
    pub(crate) fn crash_and_start_again(&mut self, agent: impl FnOnce(&mut Command, &Path, u16)) {
        let started = descendants(self.child.id());
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.eventually("the agents gone with durable-agent", || {
            started.iter().all(|&pid| !alive(pid)).then_some(())
        });
        self.child = spawn(&self.dir, self.user, &self.socket, self.model.port, agent);
    }

    pub(crate) fn get(&self, path: &str) -> Value {
        curl_as(self.user, &self.socket, &[&format!("http://collie{path}")]).1
    }

    pub(crate) fn post(&self, path: &str, body: Value) -> (u16, Value) {
        let body = body.to_string();
        let url = format!("http://collie{path}");
        curl_as(
            self.user,
            &self.socket,
            &["-X", "POST", "-H", "Content-Type: application/json", "--data-binary", &body, &url],
        )
    }

    /// A new conversation whose first prompt is `text`: its pane.
    pub(crate) fn new_conversation(&self, text: &str) -> String {
        let (status, r) =
            self.post("/v1/starters/new-conversation", json!({"requestId": "s-1", "text": text}));
        assert_eq!(status, 200, "{r}");
        r["pane"].as_str().expect("the new pane").to_owned()
    }

    /// The pane's items, each at its last version.
    pub(crate) fn items(&self, pane: &str) -> Vec<Value> {
        let page = self.get(&format!("/v1/panes/{pane}/events?after=0"));
        if page["snapshot"] == true {
            // A pane restored after a restart over items written first (§9.2).
            return page["items"].as_array().cloned().unwrap_or_default();
        }
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

    pub(crate) fn open_ask(&self) -> Option<Value> {
        self.get("/v1/state")["asks"].as_array().and_then(|a| a.first().cloned())
    }

    /// Answers `ask` with its option `id` (one of `ids`, the first offered).
    pub(crate) fn answer(&self, ask: &Value, ids: &[&str], request: &str) {
        let option = ids
            .iter()
            .find(|id| ask["options"].as_array().into_iter().flatten().any(|o| o["id"] == **id))
            .unwrap_or_else(|| panic!("an option of {ids:?}: {ask}"));
        let answer = json!({"requestId": request, "answer": {"optionIds": [option]}, "hash": ask["hash"]});
        let (status, r) = self.post(&format!("/v1/asks/{}", ask["id"].as_str().unwrap()), answer);
        assert_eq!(status, 200, "{r}");
    }

    pub(crate) fn idle(&self, pane: &str) -> bool {
        let state = self.get("/v1/state");
        state["panes"].as_array().into_iter().flatten().any(|p| p["id"] == pane && p["state"] == "idle")
    }

    /// What the scripted model was sent, for a failure to show.
    pub(crate) fn api_log(&self) -> String {
        std::fs::read_to_string(self.dir.join("api.log")).unwrap_or_default()
    }

    /// Polls `check` every 50 ms for up to 60 s (cold starts on a loaded
    /// machine take seconds).
    pub(crate) fn eventually<T>(&self, what: &str, mut check: impl FnMut() -> Option<T>) -> T {
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

    /// `durable conformance --writes` against the bridge, as its user,
    /// passes (`N passed, 0 failed`, N not 0); `agent` names it in a failure.
    pub(crate) fn assert_passes_conformance(&self, agent: &str) {
        // A conversation first: a fresh bridge shows no pane, and the sends'
        // cases need one.
        let pane = self.new_conversation("hello");
        self.eventually("the first turn's end", || self.idle(&pane).then_some(()));
        let out = as_user(self.user, durable())
            .args(["conformance", "--writes", "--socket", &self.socket])
            .env_remove("COLLIE_TOKEN")
            .env_remove("COLLIE_DURABLE_SOCKET")
            .output()
            .expect("durable conformance runs");
        let text =
            format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        let last = String::from_utf8_lossy(&out.stdout).lines().last().unwrap_or_default().to_owned();
        assert!(
            out.status.success() && last.ends_with(" passed, 0 failed") && !last.starts_with("0 passed"),
            "durable conformance --writes against {agent} ({:?}):\n{text}",
            out.status.code()
        );
    }
}

/// durable-agent as `user` on the private folder `dir`, serving `socket`,
/// the agent's command and environment put on by `agent` (given `dir` and
/// the scripted model's `port`); returns once it listens.
fn spawn(
    dir: &Path,
    user: Option<u32>,
    socket: &str,
    port: u16,
    agent: impl FnOnce(&mut Command, &Path, u16),
) -> Child {
    let mut command = as_user(user, durable_agent());
    command
        .args(["acp", "--socket", socket, "--data"])
        .arg(dir.join("data"))
        .arg("--cwd")
        .arg(dir.join("project"))
        .arg("--")
        // Nothing of the user's is read or written: a private home, the
        // system's PATH (an agent may put its own in front), no token.
        .env("HOME", dir.join("home"))
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env_remove("COLLIE_TOKEN")
        .env_remove("COLLIE_TOKEN_NEXT")
        .current_dir(dir.join("project"))
        // A group of its own: the test ends whatever of it is left.
        .process_group(0)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    agent(&mut command, dir, port);
    let mut child = command.spawn().expect("durable-agent was built for this test");
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut first).expect("a line");
    assert_eq!(first.trim(), format!("listening {socket}"));
    child
}

/// Whether `items` hold a reply with `text` in it.
pub(crate) fn has_reply(items: &[Value], text: &str) -> bool {
    items.iter().any(|i| i["kind"] == "reply" && i["text"].as_str().is_some_and(|t| t.contains(text)))
}
