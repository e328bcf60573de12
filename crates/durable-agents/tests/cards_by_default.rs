//! Cards by default, the way Collie meets them: an agent that starts its
//! sessions in a mode that never asks (as Claude Code starts in `auto`;
//! `modes_agent.py` here does the same) is switched to one that asks, so
//! the phone gets a card before the tool runs; `--mode auto`, the user's
//! choice, keeps it acting without one; a mode the agent does not offer
//! is refused with the modes it offers.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

struct Agent {
    child: Child,
    socket: String,
    dir: PathBuf,
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Agent {
    fn start(name: &str, extra: &[&str]) -> Agent {
        Agent::start_with(name, extra, &[])
    }

    /// [`Agent::start`] with these variables in its (and the agent's) environment.
    fn start_with(name: &str, extra: &[&str], env: &[(&str, &str)]) -> Agent {
        let dir = std::env::temp_dir().join(format!("durable-agent-modes-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("project")).unwrap();
        let socket = dir.join("sock/app.sock").to_str().unwrap().to_owned();
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/modes_agent.py");
        let mut child = Command::new(env!("CARGO_BIN_EXE_durable-agent"))
            .args(["acp", "--socket", &socket, "--data"])
            .arg(dir.join("data"))
            .arg("--cwd")
            .arg(dir.join("project"))
            .args(extra)
            .args(["--", "python3"])
            .arg(script)
            .env("MODES_AGENT_LOG", dir.join("agent.log"))
            .envs(env.iter().copied())
            .env_remove("COLLIE_TOKEN")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("durable-agent runs");
        let mut first = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut first).expect("a line");
        assert_eq!(first.trim(), format!("listening {socket}"));
        Agent { child, socket, dir }
    }

    fn curl(&self, args: &[&str], path: &str) -> (u16, Value) {
        let out = Command::new("curl")
            .args(["-sS", "--max-time", "20", "-w", "\n%{http_code}", "--unix-socket", &self.socket])
            .args(args)
            .arg(format!("http://collie{path}"))
            .output()
            .expect("curl runs");
        let text = String::from_utf8_lossy(&out.stdout);
        let (body, code) = text.rsplit_once('\n').unwrap_or(("", "0"));
        (code.trim().parse().unwrap_or(0), serde_json::from_str(body).unwrap_or_default())
    }

    fn post(&self, path: &str, body: Value) -> (u16, Value) {
        let body = body.to_string();
        self.curl(&["-X", "POST", "-H", "Content-Type: application/json", "--data-binary", &body], path)
    }

    fn state(&self) -> Value {
        self.curl(&[], "/v1/state").1
    }

    /// The pane's items, each at its last version.
    fn items(&self, pane: &str) -> Vec<Value> {
        let (_, page) = self.curl(&[], &format!("/v1/panes/{pane}/events?after=0"));
        let mut shown: Vec<Value> = Vec::new();
        for item in page["events"].as_array().into_iter().flatten().filter(|e| e["type"] == "item") {
            let item = &item["item"];
            match shown.iter_mut().find(|i| i["id"] == item["id"]) {
                Some(old) => *old = item.clone(),
                None => shown.push(item.clone()),
            }
        }
        shown
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("agent.log")).unwrap_or_default()
    }
}

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

/// A new conversation (the starter, text "hello"), once its first reply
/// came: its pane.
fn conversation(agent: &Agent) -> String {
    let (status, r) =
        agent.post("/v1/starters/new-conversation", json!({"requestId": "s-1", "text": "hello"}));
    assert_eq!(status, 200, "{r}");
    let pane = r["pane"].as_str().expect("the new pane").to_owned();
    reply_of(agent, &pane);
    pane
}

fn reply_of(agent: &Agent, pane: &str) -> String {
    eventually("the reply", || {
        agent
            .items(pane)
            .into_iter()
            .find(|i| i["kind"] == "reply")
            .and_then(|i| i["text"].as_str().map(str::to_owned))
    })
}

#[test]
fn a_session_started_in_a_mode_that_never_asks_asks_before_its_tool_runs() {
    let agent = Agent::start("default", &[]);
    let (status, r) =
        agent.post("/v1/starters/new-conversation", json!({"requestId": "s-1", "text": "please run"}));
    assert_eq!(status, 200, "{r}");
    let pane = r["pane"].as_str().expect("the new pane").to_owned();
    let ask = eventually("a card", || agent.state()["asks"].as_array().and_then(|a| a.first().cloned()));
    assert_eq!(ask["pane"], pane.as_str(), "{ask}");
    assert!(agent.log().contains("set_mode default"), "the agent's log: {}", agent.log());
    // Nothing ran before the answer.
    assert!(!agent.items(&pane).iter().any(|i| i["kind"] == "reply"), "{:?}", agent.items(&pane));
    let answer = json!({"requestId": "a-1", "answer": {"optionIds": ["allow"]}, "hash": ask["hash"]});
    let (status, r) = agent.post(&format!("/v1/asks/{}", ask["id"].as_str().unwrap()), answer);
    assert_eq!(status, 200, "{r}");
    assert_eq!(reply_of(&agent, &pane), "tool made");
}

#[test]
fn the_users_mode_wins_and_one_the_agent_does_not_offer_is_refused_with_those_it_does() {
    let agent = Agent::start("auto", &["--mode", "auto"]);
    let (status, r) =
        agent.post("/v1/starters/new-conversation", json!({"requestId": "s-1", "text": "please run"}));
    assert_eq!(status, 200, "{r}");
    let pane = r["pane"].as_str().unwrap().to_owned();
    assert_eq!(reply_of(&agent, &pane), "tool made");
    assert_eq!(agent.state()["asks"], json!([]));
    assert!(!agent.log().contains("set_mode"), "auto was the session's mode already: {}", agent.log());
    drop(agent);

    let agent = Agent::start("yolo", &["--mode", "yolo"]);
    let (status, r) =
        agent.post("/v1/starters/new-conversation", json!({"requestId": "s-1", "text": "please run"}));
    let message = r["message"].as_str().unwrap_or_default();
    assert_eq!(status, 409, "{r}");
    assert!(message.contains("\"yolo\"") && message.contains("default, acceptEdits, plan, auto"), "{r}");
}

/// The pane's buttons, as `id=label`.
fn buttons(agent: &Agent, pane: &str) -> Vec<String> {
    let state = agent.state();
    let pane = state["panes"].as_array().into_iter().flatten().find(|p| p["id"] == pane).cloned();
    pane.map(|p| p["actions"].clone())
        .and_then(|a| a.as_array().cloned())
        .unwrap_or_default()
        .iter()
        .map(|a| format!("{}={}", a["id"].as_str().unwrap_or(""), a["label"].as_str().unwrap_or("")))
        .collect()
}

fn notices(agent: &Agent, pane: &str) -> Vec<String> {
    agent
        .items(pane)
        .into_iter()
        .filter(|i| i["kind"] == "notice")
        .filter_map(|i| i["text"].as_str().map(str::to_owned))
        .collect()
}

#[test]
fn the_phone_sees_the_sessions_mode_and_changes_it_and_hears_when_the_agent_does() {
    let agent = Agent::start("buttons", &[]);
    let pane = conversation(&agent);
    // Its modes as buttons, the one it runs in marked.
    assert_eq!(
        buttons(&agent, &pane),
        [
            "mode-default=Mode: default (now)",
            "mode-acceptEdits=Mode: acceptEdits",
            "mode-plan=Mode: plan",
            "mode-auto=Mode: auto"
        ]
    );
    // A mode that asks: one tap.
    let (status, r) =
        agent.post(&format!("/v1/panes/{pane}/actions/mode-acceptEdits"), json!({"requestId": "b-1"}));
    assert_eq!(status, 200, "{r}");
    assert!(agent.log().contains("set_mode acceptEdits"), "{}", agent.log());
    eventually("the button marked", || {
        buttons(&agent, &pane).contains(&"mode-acceptEdits=Mode: acceptEdits (now)".to_owned()).then_some(())
    });
    assert!(
        notices(&agent, &pane).contains(&"Mode: acceptEdits.".to_owned()),
        "{:?}",
        notices(&agent, &pane)
    );

    // A mode that never asks: a card whose option takes the second tap.
    let (status, r) = agent.post(&format!("/v1/panes/{pane}/actions/mode-auto"), json!({"requestId": "b-2"}));
    assert_eq!(status, 200, "{r}");
    let ask =
        eventually("the card for auto", || agent.state()["asks"].as_array().and_then(|a| a.first().cloned()));
    assert!(!agent.log().contains("set_mode auto"), "auto before the card was answered");
    let always = ask["options"].as_array().unwrap().iter().find(|o| o["id"] == "switch").cloned().unwrap();
    assert_eq!(always["always"], true, "{ask}");
    let path = format!("/v1/asks/{}", ask["id"].as_str().unwrap());
    let answer = |id: &str, confirm: bool| json!({"requestId": id, "answer": {"optionIds": ["switch"]}, "hash": ask["hash"], "confirmAlways": confirm});
    let (status, r) = agent.post(&path, answer("a-1", false));
    assert_eq!((status, r["code"].as_str()), (409, Some("confirm-required")), "{r}");
    let (status, r) = agent.post(&path, answer("a-2", true));
    assert_eq!(status, 200, "{r}");
    eventually("auto set", || agent.log().contains("set_mode auto").then_some(()));
    // Now it acts without a card, as the phone chose.
    let (status, r) =
        agent.post(&format!("/v1/panes/{pane}/send"), json!({"requestId": "s-2", "text": "please run"}));
    assert_eq!(status, 200, "{r}");
    eventually("the tool's reply", || {
        agent.items(&pane).iter().any(|i| i["kind"] == "reply" && i["text"] == "tool made").then_some(())
    });
    assert_eq!(agent.state()["asks"], json!([]));

    // Back to asking; then the agent switches on its own: the chat says so.
    let (status, r) =
        agent.post(&format!("/v1/panes/{pane}/actions/mode-default"), json!({"requestId": "b-3"}));
    assert_eq!(status, 200, "{r}");
    let (status, r) =
        agent.post(&format!("/v1/panes/{pane}/send"), json!({"requestId": "s-3", "text": "switch yourself"}));
    assert_eq!(status, 200, "{r}");
    let said = eventually("the notice of the agent's own switch", || {
        notices(&agent, &pane).into_iter().find(|n| n.starts_with("The agent switched"))
    });
    assert_eq!(said, "The agent switched to the auto mode: it no longer asks before it acts.");
    eventually("the button follows", || {
        buttons(&agent, &pane).contains(&"mode-auto=Mode: auto (now)".to_owned()).then_some(())
    });
}

/// Over HTTPS allow-always is off, and a mode that never asks is
/// allow-always by another name: no button for it.
#[test]
fn over_https_a_mode_that_never_asks_is_not_offered() {
    const TOKEN: &str = "cards-by-default-token-0123456789abcdef";
    let dir = std::env::temp_dir().join(format!("durable-agent-modes-https-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("project")).unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/modes_agent.py");
    let child = Command::new(env!("CARGO_BIN_EXE_durable-agent"))
        .args(["acp", "--listen", "127.0.0.1:0", "--self-signed", "--data"])
        .arg(dir.join("data"))
        .arg("--cwd")
        .arg(dir.join("project"))
        .args(["--", "python3"])
        .arg(script)
        .env("COLLIE_TOKEN", TOKEN)
        .env_remove("COLLIE_TOKEN_NEXT")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("durable-agent runs");
    // Reached over HTTPS below, not through a socket.
    let mut agent = Agent { child, socket: String::new(), dir };
    let mut first = String::new();
    BufReader::new(agent.child.stdout.take().unwrap()).read_line(&mut first).expect("a line");
    let base = first.trim().strip_prefix("listening ").expect("listening <url>").to_owned();
    let curl = |args: &[&str], path: &str| -> (u16, Value) {
        let out = Command::new("curl")
            .args(["-sS", "-k", "--max-time", "20", "-w", "\n%{http_code}"])
            .args(["-H", &format!("Authorization: Bearer {TOKEN}")])
            .args(args)
            .arg(format!("{base}{path}"))
            .output()
            .expect("curl runs");
        let text = String::from_utf8_lossy(&out.stdout);
        let (body, code) = text.rsplit_once('\n').unwrap_or(("", "0"));
        (code.trim().parse().unwrap_or(0), serde_json::from_str(body).unwrap_or_default())
    };
    let post = |path: &str, body: Value| {
        let body = body.to_string();
        curl(&["-X", "POST", "-H", "Content-Type: application/json", "--data-binary", &body], path)
    };
    let (status, r) = post("/v1/starters/new-conversation", json!({"requestId": "s-1", "text": "hello"}));
    assert_eq!(status, 200, "{r}");
    let pane = r["pane"].as_str().unwrap().to_owned();
    let ids = eventually("the mode buttons", || {
        let state = curl(&[], "/v1/state").1;
        let pane =
            state["panes"].as_array().into_iter().flatten().find(|p| p["id"] == pane.as_str()).cloned()?;
        let ids: Vec<String> =
            pane["actions"].as_array()?.iter().filter_map(|a| a["id"].as_str().map(str::to_owned)).collect();
        (!ids.is_empty()).then_some(ids)
    });
    assert_eq!(ids, ["mode-default", "mode-acceptEdits", "mode-plan"], "no auto over HTTPS");
    // No such button: the wire's answer for an action the pane does not have.
    let (status, r) = post(&format!("/v1/panes/{pane}/actions/mode-auto"), json!({"requestId": "b-1"}));
    assert_eq!((status, r["code"].as_str()), (404, Some("not-found")), "{r}");
    assert!(!agent.log().contains("set_mode auto"), "{}", agent.log());
}

/// A close, a reopen and a send, and what the agent was asked.
fn close_reopen_send(agent: &Agent) -> String {
    let pane = conversation(agent);
    let (status, r) = agent.post("/v1/close", json!({"requestId": "c-1", "target": "pane", "id": pane}));
    assert_eq!(status, 200, "{r}");
    let (status, r) = agent.post("/v1/reopen", json!({"requestId": "o-1", "id": pane}));
    assert_eq!(status, 200, "{r}");
    let (status, r) =
        agent.post(&format!("/v1/panes/{pane}/send"), json!({"requestId": "s-2", "text": "again"}));
    assert_eq!(status, 200, "{r}");
    eventually("the second reply", || {
        agent.items(&pane).iter().any(|i| i["kind"] == "reply" && i["text"] == "Echo: again").then_some(())
    });
    // What the pane shows: the conversation once, no replay of it.
    let users: Vec<String> = agent
        .items(&pane)
        .iter()
        .filter(|i| i["kind"] == "user")
        .filter_map(|i| i["text"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(users, ["hello", "again"], "{:?}", agent.items(&pane));
    agent.log().replace(&pane, "<session>")
}

#[test]
fn a_close_frees_the_session_and_the_next_send_resumes_it_where_the_agent_offers_both() {
    let agent = Agent::start_with("resume", &[], &[("MODES_AGENT_RESUME", "1")]);
    let log = close_reopen_send(&agent);
    assert!(log.contains("session/close <session>"), "{log}");
    assert!(log.contains("session/resume <session>") && !log.contains("session/load"), "{log}");
    drop(agent);
    // An agent that offers neither: no close, and a load (its replay not shown twice).
    let agent = Agent::start("load", &[]);
    let log = close_reopen_send(&agent);
    assert!(!log.contains("session/close") && !log.contains("session/resume"), "{log}");
    assert!(log.contains("session/load <session>"), "{log}");
}

/// The reply of a turn sent on `pane` (the last reply once it is idle).
fn turn(agent: &Agent, pane: &str, request_id: &str, text: &str) {
    let (status, r) =
        agent.post(&format!("/v1/panes/{pane}/send"), json!({"requestId": request_id, "text": text}));
    assert_eq!(status, 200, "{r}");
}

fn last_reply(agent: &Agent, pane: &str, starts: &str) -> String {
    eventually(&format!("a reply starting {starts:?}"), || {
        agent
            .items(pane)
            .iter()
            .rev()
            .filter(|i| i["kind"] == "reply")
            .filter_map(|i| i["text"].as_str())
            .find(|t| t.starts_with(starts))
            .map(str::to_owned)
    })
}

/// ACP elicitation: a form the agent asks for is a form card, and its
/// answer goes back typed; a page to open is a card that shows the host
/// and opens nothing; a form no card can show is declined with a notice.
#[test]
fn the_agents_forms_and_pages_to_open_are_cards() {
    let agent = Agent::start("elicit", &[]);
    let pane = conversation(&agent);

    turn(&agent, &pane, "s-2", "fill a form");
    let form =
        eventually("the form card", || agent.state()["asks"].as_array().and_then(|a| a.first().cloned()));
    assert_eq!(
        (form["kind"].as_str(), form["title"].as_str()),
        (Some("form"), Some("Order details")),
        "{form}"
    );
    let fields: Vec<(String, String)> = form["fields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["id"].as_str().unwrap().to_owned(), f["type"].as_str().unwrap().to_owned()))
        .collect();
    let kinds: Vec<(&str, &str)> = fields.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
    // By name: the protocol crate keeps the schema's properties sorted.
    assert_eq!(
        kinds,
        [("count", "number"), ("gift", "bool"), ("name", "text"), ("size", "select")],
        "{form}"
    );
    let answer = json!({"requestId": "a-1", "hash": form["hash"],
        "answer": {"values": {"name": "Ana", "count": 2, "size": "m", "gift": true}}});
    let (status, r) = agent.post(&format!("/v1/asks/{}", form["id"].as_str().unwrap()), answer);
    assert_eq!(status, 200, "{r}");
    let got = last_reply(&agent, &pane, "got ");
    let got: Value = serde_json::from_str(got.trim_start_matches("got ")).unwrap();
    assert_eq!(
        got,
        json!({"action": "accept", "content": {"count": 2, "gift": true, "name": "Ana", "size": "m"}})
    );

    turn(&agent, &pane, "s-3", "open a page");
    let page =
        eventually("the page card", || agent.state()["asks"].as_array().and_then(|a| a.first().cloned()));
    assert_eq!(page["title"], "The agent asks you to open a page on login.example.com", "{page}");
    assert!(
        page["reason"].as_str().unwrap_or_default().contains("https://login.example.com/auth?state=x"),
        "{page}"
    );
    let answer = json!({"requestId": "a-2", "hash": page["hash"], "answer": {"optionIds": ["decline"]}});
    let (status, r) = agent.post(&format!("/v1/asks/{}", page["id"].as_str().unwrap()), answer);
    assert_eq!(status, 200, "{r}");
    let got = last_reply(&agent, &pane, "got {\"action\": \"decline\"");
    assert_eq!(got, "got {\"action\": \"decline\"}");

    turn(&agent, &pane, "s-4", "fill tags");
    eventually("the third answer", || {
        let replies = agent.items(&pane).iter().filter(|i| i["kind"] == "reply").count();
        (replies == 4).then_some(())
    });
    assert_eq!(
        last_reply(&agent, &pane, "got "),
        "got {\"action\": \"decline\"}",
        "{:?}",
        agent.items(&pane)
    );
    let said = notices(&agent, &pane);
    assert!(said.iter().any(|n| n.contains("a form no card can show") && n.contains("\"tags\"")), "{said:?}");
    assert_eq!(agent.state()["asks"], json!([]));

    // A stop closes a form card as it does a permission card: the agent hears `cancel`.
    turn(&agent, &pane, "s-5", "fill a form");
    eventually("the second form", || agent.state()["asks"].as_array().and_then(|a| a.first().cloned()));
    let (status, r) = agent.post(&format!("/v1/panes/{pane}/stop"), json!({"requestId": "x-1"}));
    assert_eq!(status, 200, "{r}");
    let got = last_reply(&agent, &pane, "got {\"action\": \"cancel\"");
    assert_eq!(got, "got {\"action\": \"cancel\"}");
    eventually("no card left", || (agent.state()["asks"] == json!([])).then_some(()));
}

/// An agent that ends a stopped turn but leaves its command running (as
/// Codex does) is stopped, and what it started with it: the command does
/// not finish; the next message starts the agent again.
#[test]
fn a_command_left_running_by_a_stopped_turn_does_not_outlive_the_stop() {
    let agent = Agent::start("stop-long", &[]);
    let pane = conversation(&agent);
    turn(&agent, &pane, "s-2", "please run long");
    eventually("the running call", || {
        agent.items(&pane).iter().any(|i| i["kind"] == "tool" && i["status"] == "running").then_some(())
    });
    let (status, r) = agent.post(&format!("/v1/panes/{pane}/stop"), json!({"requestId": "x-1"}));
    assert_eq!(status, 200, "{r}");
    eventually("the turn's end", || {
        let state = agent.state();
        state["panes"]
            .as_array()?
            .iter()
            .any(|p| p["id"] == pane.as_str() && p["state"] == "idle")
            .then_some(())
    });
    // Past the command's 3 s: it was ended with its agent.
    std::thread::sleep(Duration::from_secs(4));
    let late = agent.dir.join("project/late");
    assert!(!late.exists(), "the command outlived the stop");
    let said = notices(&agent, &pane).into_iter().find(|n| n.starts_with("A call was still running"));
    assert!(said.is_some_and(|s| s.contains("the agent was stopped")), "{:?}", notices(&agent, &pane));
    turn(&agent, &pane, "s-3", "again");
    assert_eq!(last_reply(&agent, &pane, "Echo: again"), "Echo: again");
}

/// The mode the phone chose is set again when the agent, stopped while
/// idle, loads the session at the next message (the load starts it in the
/// agent's own mode).
#[test]
fn the_phones_mode_is_set_again_after_the_agent_loads_the_session() {
    let agent = Agent::start("mode-again", &["--idle-stop-secs", "1"]);
    let pane = conversation(&agent);
    let (status, r) =
        agent.post(&format!("/v1/panes/{pane}/actions/mode-acceptEdits"), json!({"requestId": "b-1"}));
    assert_eq!(status, 200, "{r}");
    // Stopped while idle; the next message loads the session.
    std::thread::sleep(Duration::from_secs(3));
    turn(&agent, &pane, "s-2", "again");
    assert_eq!(last_reply(&agent, &pane, "Echo: again"), "Echo: again");
    let log = agent.log();
    let after_load = log.split("session/load").nth(1).unwrap_or_else(|| panic!("no load: {log}"));
    assert!(after_load.contains("set_mode acceptEdits"), "{log}");
    eventually("the button marked", || {
        buttons(&agent, &pane).contains(&"mode-acceptEdits=Mode: acceptEdits (now)".to_owned()).then_some(())
    });
}

/// The same call asked about twice while its card is open: one card, the
/// second request refused with a notice, and a stop still closes the card.
#[test]
fn a_call_asked_about_twice_keeps_one_card_that_a_stop_closes() {
    let agent = Agent::start("twice", &[]);
    let pane = conversation(&agent);
    turn(&agent, &pane, "s-2", "please ask twice");
    eventually("the refusal of the second request", || {
        agent.log().contains("twice {\"outcome\": \"cancelled\"}").then_some(())
    });
    assert_eq!(agent.state()["asks"].as_array().map(Vec::len), Some(1), "{}", agent.state());
    assert!(notices(&agent, &pane).iter().any(|n| n.contains("asked again about a call whose card is open")));
    let (status, r) = agent.post(&format!("/v1/panes/{pane}/stop"), json!({"requestId": "x-1"}));
    assert_eq!(status, 200, "{r}");
    eventually("the card closed by the stop", || {
        (agent.log().matches("twice {\"outcome\": \"cancelled\"}").count() == 2).then_some(())
    });
    eventually("no card left", || (agent.state()["asks"] == json!([])).then_some(()));
}
