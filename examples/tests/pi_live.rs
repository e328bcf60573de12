//! `cargo run --example pi` driven the way Collie would (curl over the
//! socket), against the real Pi with the scripted model of
//! `crates/durable-pi/tests/pi/faux.ts`: streaming, cards for `bash`
//! calls (Allow, Deny, a stop while one is open), steer and stop, Pi
//! crashing, and a restart on the same data after `SIGKILL`. (What Pi's
//! tools start, after the agent's death: `pi_tools.rs`.)
//!
//! It needs node 22 and Pi in `<repo>/.tools` (`cargo xtask install-pi`);
//! without them it fails and says so: it never skips.
mod agent;

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use agent::example;
use durable_sdk::ask_id_for;
use serde_json::{Value, json};

const PI_CLI: &str = "node_modules/@earendil-works/pi-coding-agent/dist/bundle/cli.js";

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("examples sits in the repository")
}

/// Pi's command line with the scripted model (`faux`, or `faux-slow`).
fn pi_command(provider: &str) -> String {
    let tools = repo().join(".tools");
    let (node, cli) = (tools.join("bin/node"), tools.join(PI_CLI));
    assert!(
        node.exists() && cli.exists(),
        "Pi is not installed: run `cargo xtask install-pi` (node 22 and Pi 1.6.0 into {}); \
         the live tests need it and never skip",
        tools.display()
    );
    let faux = repo().join("crates/durable-pi/tests/pi/faux.ts");
    format!(
        "'{}' '{}' --offline --no-extensions --no-skills --no-prompt-templates --no-themes \
         --no-context-files --no-mcp --provider {provider} --model scripted -e '{}'",
        node.display(),
        cli.display(),
        faux.display()
    )
}

/// Waits up to 30 s (Pi starts in up to 1.5 s; a slow machine does worse).
fn eventually<T>(what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(v) = check() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The example in a process of its own, on a data folder of the test's.
struct PiAgent {
    child: Child,
    socket: String,
    /// Runs as this user (the example and its callers), when not us.
    user: Option<u32>,
}

impl PiAgent {
    fn start(dir: &Path, pi: &str) -> PiAgent {
        PiAgent::start_with(dir, &["--pi", pi])
    }

    fn start_with(dir: &Path, args: &[&str]) -> PiAgent {
        PiAgent::start_as(dir, args, None)
    }

    /// Starts the example as `user` (through `setpriv`), its folders theirs.
    fn start_as(dir: &Path, args: &[&str], user: Option<u32>) -> PiAgent {
        PiAgent::start_full(dir, args, user, &[])
    }

    /// Starts the example with `envs` added to its environment.
    fn start_full(dir: &Path, args: &[&str], user: Option<u32>, envs: &[(&str, &str)]) -> PiAgent {
        std::fs::create_dir_all(dir.join("agent")).unwrap();
        std::fs::create_dir_all(dir.join("project")).unwrap();
        if let Some(uid) = user {
            for sub in ["", "agent", "project"] {
                std::os::unix::fs::chown(dir.join(sub), Some(uid), Some(uid)).unwrap();
            }
        }
        let socket = dir.join("sock").join("app.sock").to_str().unwrap().to_owned();
        let mut child = as_user(user, &example("pi"))
            .args(["--data", dir.join("data").to_str().unwrap(), "--socket", &socket])
            .args(args)
            .current_dir(dir.join("project"))
            // Pi's own folder and settings stay in the test's folder.
            .env("PI_CODING_AGENT_DIR", dir.join("agent"))
            .env("PI_OFFLINE", "1")
            .env("PI_SKIP_VERSION_CHECK", "1")
            .env("PI_TELEMETRY", "0")
            .env("FAUX_TOKENS_PER_SECOND", "150")
            .envs(envs.iter().copied())
            // A group of its own (the agent and its Pi): a test may kill it whole.
            .process_group(0)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("the example was built by cargo test");
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let first = lines.next().expect("a line").expect("utf-8");
        assert_eq!(first, format!("listening {socket}"));
        PiAgent { child, socket, user }
    }

    /// `curl` over the socket, as the agent's user: the status and the JSON body.
    fn curl(&self, args: &[&str]) -> (u16, Value) {
        let out = as_user(self.user, Path::new("curl"))
            .args(["-sS", "--unix-socket", &self.socket, "-w", "\n%{http_code}"])
            .args(args)
            .output()
            .expect("curl runs");
        let text = String::from_utf8_lossy(&out.stdout);
        let (body, code) = text.rsplit_once('\n').expect("status line");
        (code.trim().parse().expect("status"), serde_json::from_str(body).unwrap_or(Value::Null))
    }

    fn post(&self, path: &str, body: Value) -> (u16, Value) {
        let url = format!("http://collie{path}");
        self.curl(&["-H", "Content-Type: application/json", "-d", &body.to_string(), &url])
    }

    fn state(&self) -> Value {
        self.curl(&["http://collie/v1/state"]).1
    }

    fn panes(&self) -> Vec<String> {
        let s = self.state();
        s["panes"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|p| p["id"].as_str().map(str::to_owned))
            .collect()
    }

    fn title(&self, pane: &str) -> Value {
        let s = self.state();
        s["panes"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|p| p["id"] == pane)
            .map_or(Value::Null, |p| p["title"].clone())
    }

    fn history_row(&self, id: &str) -> Value {
        let (_, rows) = self.curl(&["http://collie/v1/history"]);
        rows["rows"].as_array().into_iter().flatten().find(|r| r["id"] == id).cloned().unwrap_or(Value::Null)
    }

    fn write(&self, path: &str, body: Value) -> Value {
        let (status, r) = self.post(path, body);
        assert_eq!(status, 200, "{path}: {r}");
        r
    }

    fn pane(&self) -> String {
        self.state()["panes"][0]["id"].as_str().expect("a pane").to_owned()
    }

    fn items(&self, pane: &str) -> Vec<Value> {
        let (_, events) = self.curl(&[&format!("http://collie/v1/panes/{pane}/events?after=0")]);
        if events["snapshot"] == true {
            // A pane restored after a restart over items written first (§9.2).
            return events["items"].as_array().cloned().unwrap_or_default();
        }
        let mut latest: Vec<Value> = Vec::new();
        for e in events["events"].as_array().into_iter().flatten().filter(|e| e["type"] == "item") {
            match latest.iter_mut().find(|i| i["id"] == e["item"]["id"]) {
                Some(i) => *i = e["item"].clone(),
                None => latest.push(e["item"].clone()),
            }
        }
        latest
    }

    fn item(&self, pane: &str, id: &str) -> Value {
        self.items(pane).into_iter().find(|i| i["id"] == id).unwrap_or(Value::Null)
    }

    fn send(&self, pane: &str, request_id: &str, text: &str) {
        let (status, r) =
            self.post(&format!("/v1/panes/{pane}/send"), json!({"requestId": request_id, "text": text}));
        assert_eq!((status, r["result"].clone()), (200, json!("sent")), "{r}");
    }

    fn idle(&self, pane: &str) {
        eventually("the pane idle", || {
            let s = self.state();
            let p = s["panes"].as_array()?.iter().find(|p| p["id"] == pane)?.clone();
            (p["state"] == "idle").then_some(())
        });
    }

    /// The one open ask.
    fn open_ask(&self) -> Value {
        eventually("an open card", || self.state()["asks"].as_array()?.first().cloned())
    }

    fn answer(&self, ask: &Value, request_id: &str, option: &str) -> (u16, Value) {
        let body = json!({"requestId": request_id, "answer": {"optionIds": [option]}, "hash": ask["hash"]});
        self.post(&format!("/v1/asks/{}", ask["id"].as_str().unwrap()), body)
    }

    fn kill(mut self) {
        // SIGKILL: nothing is flushed or closed on the way out.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for PiAgent {
    fn drop(&mut self) {
        if let Ok(Some(_)) = self.child.try_wait() {
            return;
        }
        // SIGTERM first: the example ends its Pis on the way out.
        let _ = Command::new("kill").arg(self.child.id().to_string()).status();
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The processes whose parent is `pid` (from `/proc`).
fn children_of(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(child) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else { continue };
        // `pid (comm) state ppid …`: the name may hold spaces, so read after its `)`.
        let ppid = stat.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().nth(1));
        if ppid == Some(pid.to_string().as_str()) {
            out.push(child);
        }
    }
    out
}

/// A command run as `user` (through `setpriv`), or as this process.
fn as_user(user: Option<u32>, program: &Path) -> Command {
    match user {
        None => Command::new(program),
        Some(uid) => {
            let mut c = Command::new("setpriv");
            c.arg(format!("--reuid={uid}")).arg(format!("--regid={uid}")).arg("--clear-groups").arg("--");
            c.arg(program);
            c
        }
    }
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("durable-pi-live-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn tool_of(agent: &PiAgent, pane: &str, ask: &Value) -> Value {
    let id = ask["itemId"].as_str().expect("the card names its tool item");
    eventually("the tool item's result", || {
        let item = agent.item(pane, id);
        (item["status"] != "running" && !item.is_null()).then_some(item)
    })
}

#[test]
fn a_send_streams_a_bash_call_waits_for_its_card_and_a_restart_brings_it_all_back() {
    let dir = scratch("cards");
    let pi = pi_command("faux");
    let agent = PiAgent::start(&dir, &pi);
    let pane = agent.pane();
    let (_, hello) = agent.curl(&["http://collie/hello"]);
    for cap in ["send", "steer", "abort", "rename", "close", "reopen", "starters", "history"] {
        assert_eq!(hello["caps"][cap], true, "{cap}: {hello}");
    }

    agent.send(&pane, "r-1", "hello pi");
    let reply = eventually("the reply", || {
        let item = agent.item(&pane, "pi-r-1-0-0");
        (item["text"] == "You said: hello pi" && item.get("partial").is_none()).then_some(item)
    });
    assert_eq!(reply["kind"], "reply");
    agent.idle(&pane);

    // Allow: the call runs.
    agent.send(&pane, "r-2", "use bash: echo allowed");
    let ask = agent.open_ask();
    let call_id = ask["toolCallId"].as_str().unwrap();
    assert_eq!(ask["id"], ask_id_for(&pane, call_id), "the card's id comes from Pi's tool call id");
    assert_eq!(ask["title"], "bash wants to run");
    assert_eq!(ask["tool"]["call"], r#"bash(command: "echo allowed")"#);
    assert_eq!(agent.item(&pane, ask["itemId"].as_str().unwrap())["status"], "running");
    let (status, r) = agent.answer(&ask, "a-1", "allow");
    assert_eq!((status, r["result"].clone()), (200, json!("answered")), "{r}");
    let tool = tool_of(&agent, &pane, &ask);
    assert_eq!((tool["status"].clone(), tool["output"].clone()), (json!("ok"), json!("allowed\n")));
    eventually("the reply after the tool", || {
        agent.items(&pane).iter().any(|i| i["text"] == "The tool said: allowed").then_some(())
    });
    agent.idle(&pane);

    // Deny: the call is blocked with the reason, and the model reads it.
    agent.send(&pane, "r-3", "use bash: echo denied");
    let ask = agent.open_ask();
    agent.answer(&ask, "a-2", "deny");
    let tool = tool_of(&agent, &pane, &ask);
    assert_eq!(tool["status"], "error");
    let output = tool["output"].as_str().unwrap_or("");
    assert!(output.contains(durable_sdk::pi::DEFAULT_DENIED_REASON), "{output}");
    eventually("the model's answer to the refusal", || {
        agent
            .items(&pane)
            .iter()
            .any(|i| i["text"].as_str().is_some_and(|t| t.starts_with("The tool failed")))
            .then_some(())
    });
    agent.idle(&pane);

    // The history lists the session, titled by its first text.
    let (_, rows) = agent.curl(&["http://collie/v1/history"]);
    assert_eq!(rows["rows"][0]["id"], pane.as_str(), "{rows}");
    assert_eq!(rows["rows"][0]["title"], "hello pi", "{rows}");

    // SIGKILL, then the same data: the conversation is back from Pi's file.
    agent.kill();
    let agent = PiAgent::start(&dir, &pi);
    assert_eq!(agent.pane(), pane, "the same conversation, the same pane");
    let texts: Vec<String> =
        agent.items(&pane).iter().filter_map(|i| i["text"].as_str().map(str::to_owned)).collect();
    for want in ["hello pi", "You said: hello pi", "use bash: echo allowed", "The tool said: allowed"] {
        assert!(texts.iter().any(|t| t == want), "{want:?} not in {texts:?}");
    }
    // And Pi goes on with the same session.
    agent.send(&pane, "r-4", "again");
    eventually("a reply after the restart", || {
        agent.items(&pane).iter().any(|i| i["text"] == "You said: again").then_some(())
    });
    let (_, rows) = agent.curl(&["http://collie/v1/history"]);
    assert_eq!(rows["rows"].as_array().map(Vec::len), Some(1), "{rows}");
}

#[test]
fn stop_keeps_the_partial_text_steer_joins_the_run_and_a_stopped_card_closes() {
    let dir = scratch("stop");
    let agent = PiAgent::start(&dir, &pi_command("faux-slow"));
    let pane = agent.pane();

    agent.send(&pane, "r-1", "long");
    eventually("a partial reply", || agent.item(&pane, "pi-r-1-0-0")["partial"].as_bool());
    let (_, r) = agent.post(&format!("/v1/panes/{pane}/stop"), json!({"requestId": "x-1"}));
    assert_eq!(r["result"], "stopped", "{r}");
    let reply = eventually("the stopped reply", || {
        let item = agent.item(&pane, "pi-r-1-0-0");
        item.get("partial").is_none().then_some(item)
    });
    let text = reply["text"].as_str().unwrap();
    assert!(text.starts_with("word1 ") && !text.ends_with("word300"), "{text}");
    assert_eq!(agent.item(&pane, "pi-r-1-0-1")["text"], "Stopped.");
    agent.idle(&pane);

    agent.send(&pane, "r-2", "long again");
    eventually("a partial reply", || agent.item(&pane, "pi-r-2-0-0")["partial"].as_bool());
    let (_, r) =
        agent.post(&format!("/v1/panes/{pane}/steer"), json!({"requestId": "s-1", "text": "and then"}));
    assert_eq!(r["result"], "steered", "{r}");
    let steer = eventually("the steer in the chat", || {
        let item = agent.item(&pane, "pi-r-2-u1-0");
        (!item.is_null()).then_some(item)
    });
    assert_eq!((steer["kind"].clone(), steer["text"].clone()), (json!("user"), json!("and then")));
    eventually("the answer to the steer, in the same run", || {
        (agent.item(&pane, "pi-r-2-1-0")["text"] == "You said: and then").then_some(())
    });
    let long = agent.item(&pane, "pi-r-2-0-0");
    assert!(long["text"].as_str().unwrap().ends_with("word300"), "the steer did not cut the reply");
    agent.idle(&pane);

    // A card open when the turn stops is closed, and Pi is told no.
    agent.send(&pane, "r-3", "use bash: echo never");
    let ask = agent.open_ask();
    agent.post(&format!("/v1/panes/{pane}/stop"), json!({"requestId": "x-2"}));
    agent.idle(&pane);
    assert_eq!(agent.state()["asks"], json!([]));
    let (status, r) = agent.answer(&ask, "a-1", "allow");
    assert_eq!((status, r["code"].clone()), (409, json!("ask-closed")), "{r}");
    let tool = agent.item(&pane, ask["itemId"].as_str().unwrap());
    assert_eq!(tool["status"], "error", "{tool}");
}

#[test]
fn a_pi_that_fails_or_dies_leaves_a_notice_and_an_idle_pane() {
    let dir = scratch("crash");
    // A "Pi" that exits at once.
    let agent = PiAgent::start(&dir, "sh -c 'echo cannot find the model >&2; exit 3'");
    let pane = agent.pane();
    agent.send(&pane, "r-1", "hello");
    agent.idle(&pane);
    let notice = eventually("a notice", || agent.items(&pane).into_iter().find(|i| i["kind"] == "notice"));
    let text = notice["text"].as_str().unwrap();
    assert!(text.contains("exit code 3") && text.contains("cannot find the model"), "{text}");
    assert_eq!(notice["tone"], "error");
    drop(agent);

    // The real Pi, killed mid-reply.
    let dir = scratch("killed");
    let agent = PiAgent::start(&dir, &pi_command("faux-slow"));
    let pane = agent.pane();
    agent.send(&pane, "r-1", "long");
    eventually("a partial reply", || agent.item(&pane, "pi-r-1-0-0")["partial"].as_bool());
    // Pi, beside the watcher of its run's tools.
    let pis: Vec<u32> = children_of(agent.child.id())
        .into_iter()
        .filter(|pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            !String::from_utf8_lossy(&cmdline).contains("durable-agent-watcher")
        })
        .collect();
    assert_eq!(pis.len(), 1, "one Pi runs for the one conversation: {pis:?}");
    let killed = Command::new("kill").args(["-KILL", &pis[0].to_string()]).status().unwrap();
    assert!(killed.success());
    agent.idle(&pane);
    let items = agent.items(&pane);
    let reply = items.iter().find(|i| i["id"] == "pi-r-1-0-0").unwrap();
    assert!(reply.get("partial").is_none(), "the text so far stays, final: {reply}");
    let notice = items.iter().find(|i| i["kind"] == "notice").expect("a notice");
    assert!(notice["text"].as_str().unwrap().contains("signal 9"), "{notice}");
    // The next send starts Pi again, on the same session.
    agent.send(&pane, "r-2", "still there?");
    eventually("a reply from the new Pi", || {
        agent.items(&pane).iter().any(|i| i["text"] == "You said: still there?").then_some(())
    });
}

#[test]
fn rename_starter_close_and_reopen_reach_pi_and_no_pi_serves_the_sessions_read_only() {
    let dir = scratch("layout");
    let pi = pi_command("faux");
    let agent = PiAgent::start(&dir, &pi);
    let first = agent.pane();
    agent.send(&first, "r-1", "first words");
    eventually("the reply", || {
        (agent.item(&first, "pi-r-1-0-0")["text"] == "You said: first words").then_some(())
    });
    agent.idle(&first);

    // Rename: the pane's title, and Pi's session name (the history's title).
    let r = agent
        .write("/v1/rename", json!({"requestId": "n-1", "target": "pane", "id": first, "title": "Deploy"}));
    assert_eq!(r["result"], "renamed");
    assert_eq!(agent.title(&first), "Deploy");
    eventually("the session named in Pi's file", || {
        (agent.history_row(&first)["title"] == "Deploy").then_some(())
    });

    // The starter opens a new conversation and sends its first text.
    let r = agent
        .write("/v1/starters/new-conversation", json!({"requestId": "st-1", "text": "from the starter"}));
    assert_eq!(r["result"], "started", "{r}");
    let second = r["pane"].as_str().expect("the new pane").to_owned();
    assert_ne!(second, first);
    eventually("the starter's text answered", || {
        agent.items(&second).iter().any(|i| i["text"] == "You said: from the starter").then_some(())
    });
    agent.idle(&second);

    // Close, then reopen in the same process: the SDK restores the pane.
    agent.write("/v1/close", json!({"requestId": "c-1", "target": "pane", "id": first}));
    assert!(!agent.panes().contains(&first));
    agent.write("/v1/reopen", json!({"requestId": "o-1", "id": first}));
    assert!(agent.panes().contains(&first));
    agent.send(&first, "r-2", "back again");
    eventually("a reply after the reopen", || {
        agent.items(&first).iter().any(|i| i["text"] == "You said: back again").then_some(())
    });
    agent.idle(&first);

    // A conversation closed stays closed across a restart, and still is history.
    agent.write("/v1/close", json!({"requestId": "c-2", "target": "pane", "id": second}));
    agent.kill();
    let agent = PiAgent::start(&dir, &pi);
    assert_eq!(agent.panes(), vec![first.clone()]);
    assert_eq!(agent.title(&first), "Deploy");
    assert!(!agent.history_row(&second).is_null(), "the closed conversation is history");
    // Reopened after the restart, it comes back from Pi's file.
    agent.write("/v1/reopen", json!({"requestId": "o-2", "id": second}));
    assert!(agent.panes().contains(&second));
    assert!(agent.items(&second).iter().any(|i| i["text"] == "You said: from the starter"));
    agent.kill();

    // --no-pi: the same sessions, read-only.
    let agent = PiAgent::start_with(&dir, &["--no-pi"]);
    let (_, hello) = agent.curl(&["http://collie/hello"]);
    assert_eq!(
        (hello["caps"]["send"].clone(), hello["caps"]["history"].clone()),
        (json!(false), json!(true))
    );
    let mut panes = agent.panes();
    panes.sort();
    let mut want = vec![first.clone(), second.clone()];
    want.sort();
    assert_eq!(panes, want);
    eventually("the conversation read from its file", || {
        agent.items(&first).iter().any(|i| i["text"] == "You said: back again").then_some(())
    });
    let (status, _) =
        agent.post(&format!("/v1/panes/{first}/send"), json!({"requestId": "r-9", "text": "x"}));
    assert_ne!(status, 200, "no Pi, no send");
    agent.kill();

    // --open 1: only the conversation active last is a pane; the other is a
    // closed row in history, and the phone's reopen brings it back.
    let agent = PiAgent::start_with(&dir, &["--no-pi", "--open", "1"]);
    assert_eq!(agent.panes(), vec![first.clone()], "the one active last");
    assert_eq!(agent.history_row(&second)["state"], "closed", "{}", agent.history_row(&second));
    assert_eq!(agent.history_row(&first)["state"], "open");
    agent.write("/v1/reopen", json!({"requestId": "o-3", "id": second}));
    assert!(agent.panes().contains(&second));
    eventually("the reopened conversation read from its file", || {
        agent.items(&second).iter().any(|i| i["text"] == "You said: from the starter").then_some(())
    });
}

#[test]
fn the_agent_and_its_pi_run_as_an_unprivileged_user() {
    // As root (CI), the example runs as `nobody`; otherwise as this user,
    // who is unprivileged already.
    let euid = nix::unistd::geteuid().as_raw();
    let user = (euid == 0).then_some(65534);
    let dir = scratch("nobody");
    let pi = pi_command("faux");
    let agent = PiAgent::start_as(&dir, &["--pi", &pi], user);
    let pane = agent.pane();
    agent.send(&pane, "r-1", "use bash: id -u");
    let ask = agent.open_ask();
    agent.answer(&ask, "a-1", "allow");
    let tool = tool_of(&agent, &pane, &ask);
    let uid = user.unwrap_or(euid);
    assert_eq!((tool["status"].clone(), tool["output"].clone()), (json!("ok"), json!(format!("{uid}\n"))));
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let data = std::fs::metadata(dir.join("data")).unwrap();
    assert_eq!(
        (data.uid(), data.permissions().mode() & 0o777),
        (uid, 0o700),
        "the data folder is the user's alone"
    );
}

#[test]
fn a_tool_the_gate_does_not_name_runs_without_a_card() {
    let dir = scratch("gate");
    let agent = PiAgent::start_with(&dir, &["--pi", &pi_command("faux"), "--gate", "write,edit"]);
    let pane = agent.pane();
    agent.send(&pane, "r-1", "use bash: echo free");
    eventually("the tool's result", || {
        agent
            .items(&pane)
            .into_iter()
            .find(|i| i["kind"] == "tool" && i["status"] == "ok" && i["output"] == "free\n")
    });
    agent.idle(&pane);
    let (_, events) = agent.curl(&[&format!("http://collie/v1/panes/{pane}/events?after=0")]);
    assert!(events["events"].as_array().unwrap().iter().all(|e| e["type"] != "ask"), "no card was raised");
}

/// The agent's tokens never reach Pi: a tool its model runs cannot read
/// them (with one, it could answer its own card over HTTPS, where the
/// token is the only barrier). The rest of the environment still does.
#[test]
fn pi_and_its_tools_never_see_the_agents_tokens() {
    let dir = scratch("token");
    let (token, next) = ("t".repeat(40), "n".repeat(40));
    let args = ["--pi", &pi_command("faux"), "--gate", "write,edit"];
    let envs = [
        ("COLLIE_TOKEN", token.as_str()),
        ("COLLIE_TOKEN_NEXT", next.as_str()),
        ("DURABLE_TEST_MARK", "kept"),
    ];
    let agent = PiAgent::start_full(&dir, &args, None, &envs);
    let pane = agent.pane();
    agent.send(
        &pane,
        "r-1",
        "use bash: echo ${COLLIE_TOKEN:-none} ${COLLIE_TOKEN_NEXT:-none} ${DURABLE_TEST_MARK:-none}",
    );
    let tool = eventually("the tool's result", || {
        agent.items(&pane).into_iter().find(|i| i["kind"] == "tool" && i["status"] == "ok")
    });
    assert_eq!(tool["output"], "none none kept\n", "{tool}");
    agent.idle(&pane);
}

/// A gated `bash` call's card open when the agent is killed (`SIGKILL`):
/// the phone's Allow is refused while the agent is down, and sent again
/// (same request id) once it is back, where the card is up again with the
/// same id; Pi is told, makes the same call again, and it runs — once,
/// without a second card. A Deny the same way: Pi is told, nothing runs.
/// A `SIGTERM` keeps the card as well.
#[test]
fn a_gated_calls_card_survives_a_sigkill_and_the_answer_sent_meanwhile_reaches_pi() {
    // A SIGTERM (a service restarted) keeps the card too: a stop is not an answer.
    // HELD: the restarted agent raises the card 3 s after it serves; the
    // answer sent in between is held (202), then lands when it is raised.
    for (option, signal) in [("allow", "KILL"), ("deny", "KILL"), ("allow", "TERM"), ("allow", "HELD")] {
        let dir = scratch(&format!("resume-{option}-{signal}"));
        let args = ["--pi", &pi_command("faux")];
        let agent = PiAgent::start_with(&dir, &args);
        let pane = agent.pane();
        let file = dir.join(format!("ran-{option}"));
        agent.send(&pane, "r-1", &format!("use bash: echo ran >> {}", file.display()));
        let card = agent.open_ask();
        let socket = agent.socket.clone();
        match signal {
            "KILL" | "HELD" => agent.kill(),
            _ => {
                // SIGTERM: the example waits its shutdown grace for the turn
                // (held by the card), stops Pi and ends by itself.
                let mut agent = agent;
                let _ = Command::new("kill").arg(agent.child.id().to_string()).status();
                let deadline = Instant::now() + Duration::from_secs(30);
                let status = loop {
                    if let Ok(Some(status)) = agent.child.try_wait() {
                        break status;
                    }
                    assert!(Instant::now() < deadline, "the agent ends by itself after SIGTERM");
                    std::thread::sleep(Duration::from_millis(50));
                };
                assert!(status.success(), "{status}");
            }
        }
        let answer = json!({"requestId": "a-1", "answer": {"optionIds": [option]}, "hash": card["hash"]});
        let refused = Command::new("curl")
            .args(["-sS", "--unix-socket", &socket, "-H", "Content-Type: application/json"])
            .args([
                "-d",
                &answer.to_string(),
                &format!("http://collie/v1/asks/{}", card["id"].as_str().unwrap()),
            ])
            .output()
            .unwrap();
        assert!(!refused.status.success(), "nobody listens while the agent is down");

        if signal == "HELD" {
            let agent = PiAgent::start_with(&dir, &[args[0], args[1], "--raise-delay-ms", "3000"]);
            let (status, r) =
                agent.post(&format!("/v1/asks/{}", card["id"].as_str().unwrap()), answer.clone());
            assert_eq!((status, r["result"].clone()), (202, json!("held")), "{r}");
            // Raised again with its id; the held answer applies at once.
            let ran = eventually("the held answer's call", || {
                let text = std::fs::read_to_string(&file).unwrap_or_default();
                (!text.is_empty()).then_some(text)
            });
            assert_eq!(ran, "ran\n");
            let (status, r) = agent.post(&format!("/v1/asks/{}", card["id"].as_str().unwrap()), answer);
            assert_eq!(
                (status, r["replayed"].clone()),
                (200, json!(true)),
                "the held answer was applied: {r}"
            );
            continue;
        }
        let agent = PiAgent::start_with(&dir, &args);
        let again = agent.open_ask();
        assert_eq!((again["id"].clone(), again["hash"].clone()), (card["id"].clone(), card["hash"].clone()));
        let (status, r) = agent.post(&format!("/v1/asks/{}", card["id"].as_str().unwrap()), answer);
        assert_eq!((status, r["result"].clone()), (200, json!("answered")), "{r}");
        agent.idle(&pane);
        eventually("Pi's turn after the answer", || {
            let items = agent.items(&pane);
            let told = items.iter().any(|i| {
                i["kind"] == "user" && i["text"].as_str().is_some_and(|t| t.contains("[durable-pi]"))
            });
            (told && agent.state()["panes"][0]["state"] == "idle").then_some(())
        });
        let ran = std::fs::read_to_string(&file).unwrap_or_default();
        let items = agent.items(&pane);
        if option == "allow" {
            assert_eq!(ran, "ran\n", "the approved call ran once: {items:?}");
            assert!(
                agent.state()["asks"].as_array().unwrap().is_empty(),
                "no second card for the approved call"
            );
        } else {
            assert_eq!(ran, "", "a refused call never runs");
            assert!(
                items.iter().any(|i| i["text"] == "Understood: I will not run it."),
                "Pi was told: {items:?}"
            );
        }
    }
}
