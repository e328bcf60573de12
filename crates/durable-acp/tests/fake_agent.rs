//! `AcpConversations` on a core of its own, against a small fake ACP agent
//! that misbehaves in the ways the crate must survive: output that is not
//! JSON or not UTF-8, a 100 MiB line, a response to an unknown id, requests
//! the client does not serve (`fs/*`), an update for another session, a
//! flood of updates, a session id that breaks the ID rule, an exit with a
//! last word on standard error, and an agent that never answers
//! `initialize`.
//!
//! The fake agent is this test binary itself, run again with
//! `DURABLE_ACP_FAKE` set (no harness: `main` picks the role).

use std::io::{BufRead, Write};
use std::time::{Duration, Instant};

use durable_acp::{AcpConversations, AcpOptions, AgentCommand, pane_id_for};
use durable_core::types::exchange::{Caller, Request};
use durable_core::{Core, CoreOptions, create_core};
use durable_http::{CancellationToken, SystemClock, random_epoch, spawn_driver};
use serde_json::{Value, json};

const DEADLINE: Duration = Duration::from_secs(60);
/// Updates in the flood.
const FLOOD: usize = 20_000;

fn main() {
    match std::env::var("DURABLE_ACP_FAKE").ok().as_deref() {
        Some(role) => fake_agent(role),
        None => {
            let runtime =
                tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
            run(&runtime, "a_hostile_agent_is_survived_and_its_turn_still_shows", hostile());
            run(&runtime, "an_agent_that_exits_leaves_its_status_and_last_words", exits());
            run(&runtime, "an_agent_that_never_answers_initialize_times_out", silent());
        }
    }
}

/// Runs one scenario and says how long it took.
fn run(runtime: &tokio::runtime::Runtime, name: &str, test: impl std::future::Future<Output = ()>) {
    let started = Instant::now();
    runtime.block_on(test);
    println!("test {name} ... ok ({:.1} s)", started.elapsed().as_secs_f32());
}

// ---------------------------------------------------------------------------
// The fake agent.

fn send(out: &mut impl Write, v: Value) {
    writeln!(out, "{v}").unwrap();
    out.flush().unwrap();
}

fn update(session: &str, update: Value) -> Value {
    json!({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": session, "update": update}})
}

fn chunk(session: &str, text: &str) -> Value {
    update(
        session,
        json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}),
    )
}

fn fake_agent(role: &str) {
    const SESSION: &str = "fake/session one";
    let stdin = std::io::stdin();
    let mut out = std::io::stdout().lock();
    let mut lines = stdin.lock().lines();
    // Answers to our own requests, by id.
    let mut next = move || -> Option<Value> {
        let line = lines.next()?.ok()?;
        serde_json::from_str(&line).ok()
    };
    while let Some(msg) = next() {
        let id = msg.get("id").cloned().unwrap_or(Value::Null);
        let method = msg.get("method").and_then(Value::as_str).unwrap_or("").to_owned();
        match method.as_str() {
            "initialize" => {
                if role == "silent" {
                    continue;
                }
                if role == "hostile" {
                    out.write_all(b"this is not json\n\xff\xfe\xfd not utf-8\n\n").unwrap();
                    // A 100 MiB line, written in pieces.
                    let piece = vec![b'x'; 1024 * 1024];
                    out.write_all(b"{\"jsonrpc\":\"2.0\",\"method\":\"session/update\",\"params\":\"")
                        .unwrap();
                    for _ in 0..100 {
                        out.write_all(&piece).unwrap();
                    }
                    out.write_all(b"\"}\n").unwrap();
                    send(&mut out, json!({"jsonrpc": "2.0", "id": 9999, "result": {}}));
                }
                send(
                    &mut out,
                    json!({"jsonrpc": "2.0", "id": id, "result": {"protocolVersion": 1,
                    "agentCapabilities": {"loadSession": true}}}),
                );
            }
            "session/new" => {
                send(&mut out, json!({"jsonrpc": "2.0", "id": id, "result": {"sessionId": SESSION}}));
            }
            "session/prompt" => {
                if role == "exits" {
                    send(&mut out, chunk(SESSION, "Halfway"));
                    eprintln!("fake agent: something broke");
                    eprintln!("fake agent: boom");
                    std::process::exit(3);
                }
                // A request the client does not serve.
                send(
                    &mut out,
                    json!({"jsonrpc": "2.0", "id": 100, "method": "fs/read_text_file",
                    "params": {"sessionId": SESSION, "path": "/etc/hostname"}}),
                );
                let fs = next().unwrap_or(Value::Null);
                let fs_code = fs["error"]["code"].as_i64().unwrap_or(0);
                send(&mut out, chunk("another-session", "not for this pane"));
                for _ in 0..FLOOD {
                    send(&mut out, chunk(SESSION, "."));
                }
                send(
                    &mut out,
                    update(
                        SESSION,
                        json!({"sessionUpdate": "tool_call", "toolCallId": "call/1",
                    "title": "rm -rf build", "kind": "execute", "status": "pending",
                    "rawInput": {"command": "rm -rf build"}}),
                    ),
                );
                send(
                    &mut out,
                    json!({"jsonrpc": "2.0", "id": 101, "method": "session/request_permission",
                    "params": {"sessionId": SESSION,
                        "toolCall": {"toolCallId": "call/1", "title": "rm -rf build"},
                        "options": [
                            {"optionId": "allow-once", "name": "Yes", "kind": "allow_once"},
                            {"optionId": "allow always!", "name": "Always", "kind": "allow_always"},
                            {"optionId": "reject", "name": "No", "kind": "reject_once"}]}}),
                );
                let answer = next().unwrap_or(Value::Null);
                let picked = answer["result"]["outcome"]["optionId"].as_str().unwrap_or("none").to_owned();
                send(
                    &mut out,
                    update(
                        SESSION,
                        json!({"sessionUpdate": "tool_call_update", "toolCallId": "call/1",
                    "status": "completed", "content": [{"type": "content", "content": {"type": "text", "text": "removed"}}]}),
                    ),
                );
                send(&mut out, chunk(SESSION, &format!(" fs:{fs_code} permission:{picked}")));
                send(&mut out, json!({"jsonrpc": "2.0", "id": id, "result": {"stopReason": "end_turn"}}));
            }
            _ if !id.is_null() => {
                send(
                    &mut out,
                    json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "no"}}),
                );
            }
            _ => {}
        }
    }
}

// ---------------------------------------------------------------------------
// The tests.

fn core() -> Core {
    let options = CoreOptions::builder().host_name("fake").clock(SystemClock).epoch(random_epoch());
    let core = create_core(options.build().unwrap());
    spawn_driver(core.clone(), CancellationToken::new());
    core.ready();
    core
}

fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("durable-acp-fake-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn conversations(
    core: &Core,
    role: &str,
    name: &str,
    init_timeout: Duration,
) -> std::sync::Arc<AcpConversations> {
    let dir = scratch(name);
    let me = std::env::current_exe().unwrap();
    let command = AgentCommand::new(me).env("DURABLE_ACP_FAKE", role);
    let options =
        AcpOptions::builder(command, &dir, dir.join("data")).init_timeout(init_timeout).build().unwrap();
    let tab = core.workspace("w", "W").unwrap().tab("t", "T").unwrap();
    AcpConversations::new(tab, options).unwrap()
}

async fn get(core: &Core, path: &str) -> Value {
    core.handle(Request::get(path, Caller::OtherProcess)).await.body_json()
}

/// The pane's items as the phone shows them (each at its last version).
async fn items(core: &Core, pane: &str) -> Vec<Value> {
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

async fn eventually<T, F: std::future::Future<Output = Option<T>>>(
    what: &str,
    mut check: impl FnMut() -> F,
) -> T {
    let started = Instant::now();
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(started.elapsed() < DEADLINE, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn idle(core: &Core, pane: &str) {
    let started = Instant::now();
    loop {
        let state = get(core, "/v1/state").await;
        let panes = state["panes"].as_array().cloned().unwrap_or_default();
        if panes.iter().any(|p| p["id"] == pane && p["state"] == "idle") {
            return;
        }
        assert!(started.elapsed() < DEADLINE, "timed out waiting for the pane to go idle: {state}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn hostile() {
    let core = core();
    let acp = conversations(&core, "hostile", "hostile", Duration::from_secs(30));
    let pane = acp.start(Some("go".into())).await.expect("the agent starts in spite of its output");
    let pane_id = pane.id().to_owned();
    assert_eq!(pane_id, pane_id_for("fake/session one"));
    assert!(pane_id.starts_with("acp-"), "a session id with a `/` is mapped: {pane_id}");
    let ask =
        eventually("the card", || async { get(&core, "/v1/state").await["asks"].get(0).cloned() }).await;
    assert_eq!(ask["id"], durable_core::types::ask_id_for(&pane_id, &durable_acp::call_id_for("call/1")));
    assert_eq!(ask["title"], "rm -rf build");
    let options: Vec<(&str, &str)> = ask["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| (o["id"].as_str().unwrap(), o["label"].as_str().unwrap()))
        .collect();
    // The core allows allow-always here (no HTTPS): the agent's option is
    // offered under an id of the rule's.
    assert_eq!(options, [("allow-once", "Yes"), ("option-1", "Always"), ("reject", "No")]);
    let tool_item = ask["itemId"].as_str().unwrap().to_owned();
    let answer = json!({"requestId": "a-1", "answer": {"optionIds": ["allow-once"]}}).to_string();
    let path = format!("/v1/asks/{}", ask["id"].as_str().unwrap());
    let answered = core.handle(Request::post(&path, answer, Caller::OtherProcess)).await;
    assert_eq!(answered.status, 200, "{}", answered.body_json());
    idle(&core, &pane_id).await;
    let shown = items(&core, &pane_id).await;
    let user = shown.iter().position(|i| i["kind"] == "user" && i["text"] == "go");
    let reply = shown.iter().rev().find(|i| i["kind"] == "reply").expect("a reply");
    let text = reply["text"].as_str().unwrap();
    assert!(
        text.ends_with(" fs:-32601 permission:allow-once"),
        "fs/* is method not found; the option went back: …{}",
        &text[text.len().saturating_sub(60)..]
    );
    assert!(reply.get("partial").is_none(), "final: {}", reply["id"]);
    // The flood's text, before the call: every update of it, final.
    let flood =
        shown.iter().find(|i| i["kind"] == "reply" && i["text"].as_str().is_some_and(|t| t.starts_with('.')));
    let flood = flood.expect("the flood's reply");
    assert_eq!(
        flood["text"].as_str().unwrap().matches('.').count(),
        FLOOD,
        "every update of the flood was shown"
    );
    assert!(flood.get("partial").is_none());
    assert!(user.is_some(), "the starter's text is a user item");
    assert!(!shown.iter().any(|i| i["text"] == "not for this pane"), "another session's update is dropped");
    let tool =
        shown.iter().find(|i| i["id"] == tool_item.as_str()).expect("the card sits by its call's item");
    assert_eq!(
        (&tool["status"], &tool["output"], &tool["call"]),
        (&json!("ok"), &json!("removed"), &json!("rm -rf build"))
    );
    acp.shutdown().await;
    // The record keeps the conversation.
    let record =
        std::fs::read_to_string(acp.options().data_dir().join(format!("conversations/{pane_id}.json")))
            .unwrap();
    let record: Value = serde_json::from_str(&record).unwrap();
    assert_eq!(record["sessionId"], "fake/session one");
    assert!(record["items"].as_array().unwrap().len() >= 3, "{record}");
}

async fn exits() {
    let core = core();
    let acp = conversations(&core, "exits", "exits", Duration::from_secs(30));
    let pane = acp.start(Some("go".into())).await.unwrap();
    let pane_id = pane.id().to_owned();
    let notice = eventually("the notice of the exit", || async {
        items(&core, &pane_id).await.into_iter().find(|i| i["kind"] == "notice")
    })
    .await;
    idle(&core, &pane_id).await;
    let text = notice["text"].as_str().unwrap();
    assert!(text.contains("exit status: 3") && text.contains("fake agent: boom"), "{text}");
    assert_eq!(notice["tone"], "error");
    let shown = items(&core, &pane_id).await;
    let reply = shown.iter().find(|i| i["kind"] == "reply").expect("the text so far");
    assert_eq!((&reply["text"], reply.get("partial")), (&json!("Halfway"), None));
    acp.shutdown().await;
}

async fn silent() {
    let core = core();
    let acp = conversations(&core, "silent", "silent", Duration::from_millis(500));
    let err = acp.start(Some("go".into())).await.expect_err("no answer to initialize");
    assert!(err.to_string().contains("did not answer initialize"), "{err}");
    acp.shutdown().await;
}
