//! `PiConversation` on a core of its own, with the real Pi and the scripted
//! model (`tests/pi/faux.ts`): the gate's card for a call, and a session
//! resumed when the agent runs from another folder than the one it began
//! in. (`examples/tests/pi_live.rs` drives the same through the example,
//! over the socket, as Collie does.)
//!
//! It needs node 22 and Pi in `<repo>/.tools` (`cargo xtask install-pi`);
//! without them it fails and says so: it never skips.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use durable_http::{CancellationToken, SystemClock, random_epoch, spawn_driver};
use durable_pi::{Block, GateOptions, Message, PiCommand, PiConversation, PiOptions, SessionFolder};
use durable_runtime::types::ask_id_for;
use durable_runtime::types::exchange::{Caller, Request};
use durable_runtime::{Collie, CoreOptions, Pane, PaneOptions, create_core};
use serde_json::{Value, json};

const PI_CLI: &str = "node_modules/@earendil-works/pi-coding-agent/dist/bundle/cli.js";
const DEADLINE: Duration = Duration::from_secs(60);

fn manifest_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// A folder of the test's own, with Pi's folder and two project folders.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("durable-pi-live-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    for sub in ["agent", "sessions", "project-a", "project-b"] {
        std::fs::create_dir_all(dir.join(sub)).unwrap();
    }
    dir
}

/// Pi with the scripted model, running in `dir/<project>`.
fn pi(dir: &Path, project: &str) -> PiCommand {
    let tools = manifest_dir().ancestors().nth(2).expect("the crate sits in <repo>/crates").join(".tools");
    let (node, cli) = (tools.join("bin/node"), tools.join(PI_CLI));
    assert!(
        node.exists() && cli.exists(),
        "Pi is not installed: run `cargo xtask install-pi` (it puts node 22 and Pi in {}); \
         the live tests need it and never skip",
        tools.display()
    );
    PiCommand::new(node)
        .arg(cli)
        .args(["--offline", "--no-extensions", "--no-skills", "--no-prompt-templates", "--no-themes"])
        .args(["--no-context-files", "--no-mcp", "--provider", "faux", "--model", "scripted", "-e"])
        .arg(manifest_dir().join("tests/pi/faux.ts"))
        .env("PI_CODING_AGENT_DIR", dir.join("agent"))
        .env("PI_OFFLINE", "1")
        .env("PI_SKIP_VERSION_CHECK", "1")
        .env("PI_TELEMETRY", "0")
        .current_dir(dir.join(project))
}

/// A core served by nothing but its driver (jobs, timers), as a server
/// runs it: the test plays Collie through `handle`.
fn core() -> Collie {
    let options = CoreOptions::builder().host_name("live").clock(SystemClock).epoch(random_epoch());
    let core = create_core(options.build().unwrap());
    spawn_driver(core.driver(), CancellationToken::new());
    core.ready();
    core
}

/// Pi behind pane `id` of `core`, running in `dir/<project>`.
fn attach(core: &Collie, dir: &Path, project: &str, id: &str, gate: GateOptions) -> PiConversation {
    let options = PiOptions::builder(pi(dir, project), dir.join("sessions")).gate(gate).build().unwrap();
    PiConversation::attach(&pane(core, id), id, options).unwrap()
}

fn pane(core: &Collie, id: &str) -> Pane {
    core.workspace("w", "W").unwrap().tab("t", "T").unwrap().pane(id, PaneOptions::new("Pi")).unwrap()
}

async fn get(core: &Collie, path: &str) -> Value {
    core.driver().handle(Request::get(path, Caller::OtherProcess)).await.body_json()
}

/// The pane's items as the phone shows them (each at its last version).
async fn items(core: &Collie, pane: &str) -> Vec<Value> {
    let page = get(core, &format!("/v1/panes/{pane}/events?after=0")).await;
    let mut shown: Vec<Value> = Vec::new();
    for item in page["events"].as_array().unwrap().iter().filter(|e| e["type"] == "item").map(|e| &e["item"])
    {
        match shown.iter_mut().find(|i| i["id"] == item["id"]) {
            Some(old) => *old = item.clone(),
            None => shown.push(item.clone()),
        }
    }
    shown
}

/// The user messages of the session file Pi keeps for `id`.
fn user_texts(sessions: &Path, id: &str) -> Vec<String> {
    let session = SessionFolder::new(sessions).read(id).unwrap().expect("the session's file");
    session
        .entries()
        .iter()
        .filter_map(|e| match e.message() {
            Some(Message::User { content }) => Some(Block::text_of(content)),
            _ => None,
        })
        .collect()
}

/// A gated call raises its card under the id `ask_id_for(pane, call id)`;
/// Allow runs it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gated_call_waits_for_its_card_and_allow_runs_it() {
    let dir = scratch("gate");
    let core = core();
    let id = PiConversation::new_session_id();
    let conversation = attach(&core, &dir, "project-a", &id, GateOptions::default());
    let turn = tokio::spawn({
        let conversation = conversation.clone();
        async move { conversation.prompt("use bash: echo allowed-run").await }
    });
    let started = Instant::now();
    let ask = loop {
        if let Some(ask) = get(&core, "/v1/state").await["asks"].get(0).cloned() {
            break ask;
        }
        assert!(started.elapsed() < DEADLINE, "no card came");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let call = ask["toolCallId"].as_str().unwrap();
    assert_eq!(ask["id"], ask_id_for(&id, call), "{ask}");
    let answer = json!({"requestId": "r-1", "answer": {"optionIds": ["allow"]}}).to_string();
    let path = format!("/v1/asks/{}", ask["id"].as_str().unwrap());
    let answered = core.driver().handle(Request::post(&path, answer, Caller::OtherProcess)).await;
    assert_eq!(answered.status, 200, "{}", answered.body_json());
    tokio::time::timeout(DEADLINE, turn).await.expect("the turn ended").unwrap().unwrap();
    let shown = items(&core, &id).await;
    let tool = shown.iter().find(|i| i["kind"] == "tool").expect("a tool item");
    assert_eq!((&tool["status"], &tool["output"]), (&json!("ok"), &json!("allowed-run\n")), "{tool}");
    conversation.shutdown().await;
}

/// The agent starts again from another folder: Pi opens the session it
/// began, by its file, rather than a new empty one under the same id
/// (`--session-id` finds only the sessions of Pi's current folder).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_begun_in_another_folder_is_resumed_not_begun_again() {
    let dir = scratch("folder");
    let id = PiConversation::new_session_id();
    {
        let core = core();
        let conversation = attach(&core, &dir, "project-a", &id, GateOptions::none());
        conversation.prompt("remember the word pineapple").await.unwrap();
        conversation.shutdown().await;
    }
    let core = core();
    let conversation = attach(&core, &dir, "project-b", &id, GateOptions::none());
    assert!(items(&core, &id).await.len() >= 2, "attach shows the conversation so far");
    conversation.prompt("what was the word?").await.unwrap();
    conversation.shutdown().await;
    let files = std::fs::read_dir(dir.join("sessions")).unwrap().flatten().count();
    assert_eq!(files, 1, "one session file for one session id");
    assert_eq!(user_texts(&dir.join("sessions"), &id), ["remember the word pineapple", "what was the word?"]);
}
