//! The `acp` group's floor (`xtask-bench bench-relay`), driven with curl as
//! the bench drives it, against a small ACP agent in Python: the starter
//! makes a session and sends its text, each send is a committed row of
//! the sends table (`running`) before its prompt, and the turn's reply
//! shows final on the next poll; SIGTERM ends it. A floor that skipped the
//! commit, or showed a reply before its turn ended, would measure less
//! than it says.

mod common;

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{Folder, Served, curl};
use serde_json::Value;

/// Answers `initialize`, `session/new` (session `s1`) and
/// `session/prompt` ("You said: " and the text, in two chunks, then
/// `end_turn`).
const AGENT: &str = r#"#!/usr/bin/env python3
import json, sys
def send(m):
    sys.stdout.write(json.dumps(m) + "\n")
    sys.stdout.flush()
for line in sys.stdin:
    m = json.loads(line)
    method, i = m.get("method"), m.get("id")
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": i, "result": {"protocolVersion": 1}})
    elif method == "session/new":
        send({"jsonrpc": "2.0", "id": i, "result": {"sessionId": "s1"}})
    elif method == "session/prompt":
        for part in ("You said: ", m["params"]["prompt"][0]["text"]):
            send({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s1",
                  "update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": part}}}})
        send({"jsonrpc": "2.0", "id": i, "result": {"stopReason": "end_turn"}})
"#;

/// Polls the pane's events until a reply with `text`.
fn wait_reply(socket: &str, text: &str) -> Value {
    let started = Instant::now();
    loop {
        let page = curl(socket, "/v1/panes/s1/events?after=0", None);
        let found = page["events"].as_array().into_iter().flatten().find(|e| e["item"]["text"] == text);
        if let Some(event) = found {
            return event.clone();
        }
        assert!(started.elapsed() < Duration::from_secs(20), "no reply {text:?}: {page}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn wait_idle(socket: &str) {
    let started = Instant::now();
    while curl(socket, "/v1/state", None)["panes"][0]["state"] != "idle" {
        assert!(started.elapsed() < Duration::from_secs(20), "the turn never ended");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn the_floor_relay_commits_each_send_before_its_turn_and_shows_the_reply() {
    let python = Command::new("python3").arg("-c").arg("pass").status();
    assert!(python.is_ok_and(|s| s.success()), "python3 is needed on the PATH (the test's ACP agent)");
    let dir = Folder::new("relay");
    let agent = dir.0.join("agent.py");
    std::fs::write(&agent, AGENT).unwrap();
    std::fs::set_permissions(&agent, std::fs::Permissions::from_mode(0o755)).unwrap();
    let db = dir.0.join("sends.sqlite3");
    let socket = dir.0.join("s").join("app.sock").to_str().expect("a UTF-8 path").to_owned();
    let mut child = Command::new(env!("CARGO_BIN_EXE_xtask-bench"))
        .arg("bench-relay")
        .arg("--agent")
        .arg(&agent)
        .arg("--cwd")
        .arg(&dir.0)
        .arg("--db")
        .arg(&db)
        .args(["--socket", &socket])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("xtask-bench bench-relay starts");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut served = Served(child);
    assert_eq!(lines.next().expect("a line").expect("stdout"), format!("listening {socket}"));

    let started =
        curl(&socket, "/v1/starters/new-conversation", Some(r#"{"requestId":"st-0","text":"hello"}"#));
    assert_eq!(started["pane"], "s1", "{started}");
    let reply = wait_reply(&socket, "You said: hello");
    assert_eq!((&reply["seq"], &reply["item"]["kind"]), (&Value::from(1), &Value::from("reply")));
    wait_idle(&socket);
    let sent = curl(&socket, "/v1/panes/s1/send", Some(r#"{"requestId":"r-1","text":"again"}"#));
    assert_eq!(sent["result"], "sent", "{sent}");
    wait_reply(&socket, "You said: again");

    let conn = rusqlite::Connection::open(&db).unwrap();
    let mode: String = conn.query_row("PRAGMA journal_mode", [], |r| r.get(0)).unwrap();
    assert_eq!(mode, "wal");
    let mut rows = conn.prepare("SELECT request_id, text, state FROM sends ORDER BY rowid").unwrap();
    let rows: Vec<[String; 3]> =
        rows.query_map([], |r| Ok([r.get(0)?, r.get(1)?, r.get(2)?])).unwrap().map(Result::unwrap).collect();
    assert_eq!(rows, [["st-0", "hello", "running"], ["r-1", "again", "running"]]);

    // SIGTERM, as the bench ends it: it ends its agent and exits cleanly.
    let pid = rustix::process::Pid::from_raw(i32::try_from(served.0.id()).unwrap()).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
    let started = Instant::now();
    let status = loop {
        if let Some(status) = served.0.try_wait().unwrap() {
            break status;
        }
        assert!(started.elapsed() < Duration::from_secs(20), "still running after SIGTERM");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "{status}");
    assert!(!std::path::Path::new(&socket).exists(), "the socket is removed");
}
