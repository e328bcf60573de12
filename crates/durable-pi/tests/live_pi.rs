//! The real Pi, run once in RPC mode with the scripted model
//! (`tests/pi/faux.ts`): this test follows the session file while Pi writes
//! it, then reads it back whole and through the history.
//!
//! It needs node 22 and Pi in `<repo>/.tools` (`cargo xtask install-pi`);
//! without them it fails and says so: it never skips.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use durable_pi::{ConversationStore, Follower, PiHistory, Session, SessionFolder, items_since, pane_view};
use durable_types::{Item, ItemBody, ToolStatus};
use serde_json::{Value, json};

const PI_CLI: &str = "node_modules/@earendil-works/pi-coding-agent/dist/bundle/cli.js";
const DEADLINE: Duration = Duration::from_secs(60);

fn manifest_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// node and Pi's CLI from `<repo>/.tools`; a missing install fails the test.
fn installed_pi() -> (PathBuf, PathBuf) {
    let tools = manifest_dir().ancestors().nth(2).expect("the crate sits in <repo>/crates").join(".tools");
    let (node, cli) = (tools.join("bin/node"), tools.join(PI_CLI));
    assert!(
        node.exists() && cli.exists(),
        "Pi is not installed: run `cargo xtask install-pi` (it puts node 22 and Pi 1.6.0 in {}); \
         the live tests need it and never skip",
        tools.display()
    );
    (node, cli)
}

/// Pi in RPC mode: commands in, responses and events out (one JSON a line).
struct Pi {
    child: Child,
    stdin: Option<ChildStdin>,
    out: Receiver<Value>,
}

impl Pi {
    fn start(work: &Path) -> Pi {
        let (node, cli) = installed_pi();
        for dir in ["agent", "sessions", "project"] {
            std::fs::create_dir_all(work.join(dir)).unwrap();
        }
        let mut child = Command::new(node)
            .arg(cli)
            .args(["--mode", "rpc", "--offline", "--no-extensions", "--no-skills", "--no-prompt-templates"])
            .args([
                "--no-themes",
                "--no-context-files",
                "--no-mcp",
                "--provider",
                "faux",
                "--model",
                "scripted",
            ])
            .arg("-e")
            .arg(manifest_dir().join("tests/pi/faux.ts"))
            .arg("--session-dir")
            .arg(work.join("sessions"))
            .current_dir(work.join("project"))
            .env("PI_CODING_AGENT_DIR", work.join("agent"))
            .env("PI_OFFLINE", "1")
            .env("PI_SKIP_VERSION_CHECK", "1")
            .env("PI_TELEMETRY", "0")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("node runs Pi");
        let stdout = child.stdout.take().unwrap();
        let (tx, out) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Ok(v) = serde_json::from_str::<Value>(&line) {
                    if tx.send(v).is_err() {
                        break;
                    }
                }
            }
        });
        Pi { stdin: child.stdin.take(), child, out }
    }

    fn send(&mut self, command: Value) {
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{command}").unwrap();
        stdin.flush().unwrap();
    }

    /// The next message from Pi, or a failure after the deadline.
    fn next(&self, started: Instant) -> Value {
        let left = DEADLINE.checked_sub(started.elapsed()).unwrap_or_default();
        match self.out.recv_timeout(left) {
            Ok(v) => v,
            Err(RecvTimeoutError::Timeout) => panic!("Pi said nothing for {DEADLINE:?}"),
            Err(RecvTimeoutError::Disconnected) => panic!("Pi exited"),
        }
    }

    /// Closes stdin (Pi exits) and waits for the process.
    fn stop(mut self) {
        drop(self.stdin.take());
        let started = Instant::now();
        while self.child.try_wait().unwrap().is_none() {
            if started.elapsed() > Duration::from_secs(10) {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!("Pi did not exit when its stdin closed");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

fn write(pane: &mut Vec<Item>, items: Vec<Item>) {
    for item in items {
        match pane.iter_mut().find(|i| i.id == item.id) {
            Some(old) => *old = item,
            None => pane.push(item),
        }
    }
}

#[test]
fn live_pi_session_is_followed_while_written_and_read_back() {
    let work = std::env::temp_dir().join(format!("durable-pi-live-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&work);
    let started = Instant::now();
    let mut pi = Pi::start(&work);

    // Pi names the session file before it writes it.
    pi.send(json!({"id": "state", "type": "get_state"}));
    let path = loop {
        let v = pi.next(started);
        if v["id"] == "state" {
            break PathBuf::from(
                v["data"]["sessionFile"].as_str().expect("get_state names the session file"),
            );
        }
    };
    let mut follower = Follower::new(&path);
    assert!(follower.poll().unwrap().is_empty(), "no file before the first message");

    // One turn with a tool call; the file is polled at every event Pi sends.
    pi.send(json!({"id": "p", "type": "prompt", "message": "please use bash: echo live from pi"}));
    let mut pane = Vec::new();
    let mut growths = 0;
    loop {
        let v = pi.next(started);
        let progress = follower.poll().unwrap();
        assert!(!progress.reset && !progress.branch_moved && progress.malformed == 0, "{progress:?}");
        if !progress.new_entries.is_empty() {
            growths += 1;
        }
        write(&mut pane, items_since(follower.session(), progress.new_entries.start));
        if v["type"] == "agent_settled" {
            break;
        }
    }
    pi.stop();
    let progress = follower.poll().unwrap();
    write(&mut pane, items_since(follower.session(), progress.new_entries.start));
    assert!(growths >= 2, "the file was read as it grew ({growths} polls saw new entries)");

    // What was followed is what the whole file gives.
    let session = Session::read(&path).unwrap();
    assert_eq!(session.malformed(), 0);
    let view = pane_view(&session);
    assert_eq!(pane, view.items);
    let kinds: Vec<&str> = view.items.iter().map(|i| i.body.kind()).collect();
    assert_eq!(kinds, ["user", "thinking", "reply", "tool", "reply"]);
    match &view.items[3].body {
        ItemBody::Tool { name, call, status, output, .. } => {
            assert_eq!(name, "bash");
            assert_eq!(call, r#"bash(command: "echo live from pi")"#);
            assert_eq!(*status, ToolStatus::Ok);
            assert_eq!(output.as_deref().map(str::trim_end), Some("live from pi"));
        }
        other => panic!("{other:?}"),
    }

    // The sessions folder as history.
    let history = PiHistory::new(SessionFolder::new(work.join("sessions")));
    let rows = history.rows_page(None, 10).unwrap().rows;
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].id, session.header().unwrap().id);
    assert_eq!(rows[0].title, "please use bash: echo live from pi");
    assert_eq!(rows[0].items, 5);
    assert_eq!(history.store().conversation(&rows[0].id).unwrap().unwrap().items, view.items);
    std::fs::remove_dir_all(&work).unwrap();
}
