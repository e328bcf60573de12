//! `AcpConversations` on a core of its own, against a small fake ACP agent
//! that misbehaves in the ways the crate must survive: output that is not
//! JSON or not UTF-8, a 100 MiB line, a response to an unknown id, requests
//! the client does not serve (`fs/*`), an update for another session, a
//! flood of updates, a session id that breaks the ID rule, an exit with a
//! last word on standard error, and an agent that never answers
//! `initialize`; and cards kept across a crash, which an agent asks for
//! again after `session/load`.
//!
//! The fake agent is this test binary itself, run again with
//! `DURABLE_ACP_FAKE` set (no harness: `main` picks the role).

use std::io::{BufRead, Write};
use std::time::{Duration, Instant};

use durable_acp::{AcpConversations, AcpOptions, AcpOptionsBuilder, AgentCommand, call_id_for, pane_id_for};
use durable_core::types::ask_id_for;
use durable_core::types::exchange::{Caller, Request};
use durable_core::{Core, CoreOptions, ReceiptStore, create_core};
use durable_http::{CancellationToken, SystemClock, random_epoch, spawn_driver};
use durable_sdk::stores::SqliteReceiptStore;
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
            run(&runtime, "reopening_an_id_nobody_knows_answers_404_not_found", reopen_unknown());
            run(&runtime, "a_card_kept_across_a_crash_comes_back_when_the_agent_asks_again", kept_cards());
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

/// A permission request for `call` with two options.
fn permission(session: &str, id: u64, call: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "session/request_permission",
        "params": {"sessionId": session, "toolCall": {"toolCallId": call, "title": format!("run {call}")},
            "options": [
                {"optionId": "allow-once", "name": "Yes", "kind": "allow_once"},
                {"optionId": "reject", "name": "No", "kind": "reject_once"}]}})
}

fn fake_agent(role: &str) {
    const SESSION: &str = "fake/session one";
    let stdin = std::io::stdin();
    let mut out = std::io::stdout().lock();
    let mut lines = stdin.lock().lines();
    // Where the test reads what the agent was told (role `reasks`).
    let log = std::path::PathBuf::from(std::env::var_os("DURABLE_ACP_FAKE_LOG").unwrap_or_default());
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
            // Two calls wait on cards; no answer comes (the client crashes).
            "session/prompt" if role == "reasks" => {
                send(&mut out, permission(SESSION, 101, "keep/1"));
                send(&mut out, permission(SESSION, 102, "drop/2"));
                send(&mut out, permission(SESSION, 103, "change/3"));
            }
            // Loaded again: it asks again for keep/1 as before and for
            // change/3 with one option more, before it answers, once the
            // test says so (a file next to the log).
            "session/load" if role == "reasks" => {
                let waited = Instant::now();
                while !log.with_extension("go").exists() && waited.elapsed() < DEADLINE {
                    std::thread::sleep(Duration::from_millis(20));
                }
                send(&mut out, permission(SESSION, 201, "keep/1"));
                let mut changed = permission(SESSION, 202, "change/3");
                changed["params"]["options"]
                    .as_array_mut()
                    .unwrap()
                    .push(json!({"optionId": "reject-always", "name": "Never", "kind": "reject_always"}));
                send(&mut out, changed);
                send(&mut out, json!({"jsonrpc": "2.0", "id": id, "result": {}}));
            }
            // The answers to the cards asked again, told to the test: a
            // line `<request id>:<option id>` each.
            "" if role == "reasks" => {
                let picked = msg["result"]["outcome"]["optionId"].as_str().unwrap_or("none");
                let mut told = std::fs::OpenOptions::new().create(true).append(true).open(&log).unwrap();
                writeln!(told, "{id}:{picked}").unwrap();
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
    if role == "reasks" {
        std::fs::write(log.with_extension("ended"), "").unwrap();
    }
}

// ---------------------------------------------------------------------------
// The tests.

fn core() -> Core {
    let core = core_with(None);
    core.ready();
    core
}

/// A core not yet ready, on `store` (else in memory).
fn core_with(store: Option<SqliteReceiptStore>) -> Core {
    let mut options = CoreOptions::builder().host_name("fake").clock(SystemClock).epoch(random_epoch());
    if let Some(store) = store {
        options = options.receipts(store);
    }
    let core = create_core(options.build().unwrap());
    spawn_driver(core.clone(), CancellationToken::new());
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
    conversations_in(core, role, &scratch(name), init_timeout)
}

/// [`conversations`] in `dir`, kept as it is (its data folder is `dir/data`).
fn conversations_in(
    core: &Core,
    role: &str,
    dir: &std::path::Path,
    init_timeout: Duration,
) -> std::sync::Arc<AcpConversations> {
    conversations_in_with(core, role, dir, |o| o.init_timeout(init_timeout))
}

/// [`conversations_in`] with options of the test's own.
fn conversations_in_with(
    core: &Core,
    role: &str,
    dir: &std::path::Path,
    options: impl FnOnce(AcpOptionsBuilder) -> AcpOptionsBuilder,
) -> std::sync::Arc<AcpConversations> {
    let me = std::env::current_exe().unwrap();
    let command = AgentCommand::new(me)
        .env("DURABLE_ACP_FAKE", role)
        .env("DURABLE_ACP_FAKE_LOG", dir.join("agent.log"));
    let options = options(AcpOptions::builder(command, dir, dir.join("data"))).build().unwrap();
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

/// The phone reopens an id neither the records nor the agent's sessions
/// know: `404 not-found`, the wire's answer for an unknown id (§8), not a
/// refusal.
async fn reopen_unknown() {
    let core = core();
    let acp = conversations(&core, "silent", "reopen-unknown", Duration::from_millis(500));
    core.set_hooks(acp.hooks());
    let body = json!({"requestId": "r-1", "id": "nobody-knows"}).to_string();
    let answer = core.handle(Request::post("/v1/reopen", body, Caller::OtherProcess)).await;
    let json = answer.body_json();
    assert_eq!((answer.status, json["code"].as_str()), (404, Some("not-found")), "{json}");
    acp.shutdown().await;
}

/// The asks open on `core`.
async fn open_asks(core: &Core) -> Vec<Value> {
    get(core, "/v1/state").await["asks"].as_array().cloned().unwrap_or_default()
}

async fn kept_cards() {
    let dir = scratch("reasks");
    let db = dir.join("receipts.sqlite3");
    // Run 1: three cards open, kept by the store; then it is gone without a
    // word, as in a crash (left as it is: nothing of it stops or closes).
    let first = core_with(Some(SqliteReceiptStore::open(&db).unwrap()));
    first.ready();
    let acp = conversations_in(&first, "reasks", &dir, Duration::from_secs(30));
    let pane_id = acp.start(Some("go".into())).await.unwrap().id().to_owned();
    let keep_id = ask_id_for(&pane_id, &call_id_for("keep/1"));
    let drop_id = ask_id_for(&pane_id, &call_id_for("drop/2"));
    let change_id = ask_id_for(&pane_id, &call_id_for("change/3"));
    let raised = eventually("the three cards", || async {
        let asks = open_asks(&first).await;
        (asks.len() == 3).then_some(asks)
    })
    .await;
    let hash =
        raised.iter().find(|a| a["id"] == keep_id.as_str()).expect("the card of keep/1")["hash"].clone();
    eventually("the three cards in the store", || async {
        let store = SqliteReceiptStore::open(&db).ok()?;
        (store.kept_asks().await.ok()?.len() == 3).then_some(())
    })
    .await;
    std::mem::forget(acp);
    std::mem::forget(first);

    // Run 2 on the same store and data folder; an idle agent stops after
    // 300 ms (one with a card open is not idle).
    let core = core_with(Some(SqliteReceiptStore::open(&db).unwrap()));
    let acp = conversations_in_with(&core, "reasks", &dir, |o| o.idle_stop(Duration::from_millis(300)));
    assert_eq!(acp.restore().unwrap(), 1);
    let kept = core.kept_asks().await.unwrap();
    let mut ids: Vec<&str> = kept.iter().map(|k| k.id()).collect();
    ids.sort_unstable();
    let mut want = [keep_id.as_str(), drop_id.as_str(), change_id.as_str()];
    want.sort_unstable();
    assert_eq!(ids, want);
    acp.take_up_kept_asks(kept);
    core.ready();
    // The phone answers keep/1 before the agent asks again: held.
    let answer = |request: &str, option: &str| {
        json!({"requestId": request, "answer": {"optionIds": [option]}, "hash": hash}).to_string()
    };
    let post = |ask: &str, body: String| {
        core.handle(Request::post(&format!("/v1/asks/{ask}"), body, Caller::OtherProcess))
    };
    let held = post(&keep_id, answer("a-0", "allow-once")).await;
    let held_body = held.body_json();
    assert_eq!((held.status, &held_body["result"]), (202, &json!("held")), "{held_body}");
    assert!(open_asks(&core).await.is_empty(), "no card before the agent asks again");
    // The agent asks again for keep/1: the card kept is raised by its id
    // and hash, and the answer held for it goes to the agent (no other
    // answer is sent).
    std::fs::write(dir.join("agent.go"), "").unwrap();
    let told = || std::fs::read_to_string(dir.join("agent.log")).unwrap_or_default();
    eventually("the agent told the held answer", || async { (!told().is_empty()).then_some(()) }).await;
    assert_eq!(told(), "201:allow-once\n");
    // drop/2 is not asked again: closed, with its line, once the grace is
    // over; keep/1 was answered and has none.
    let closing_lines = |items: Vec<Value>| -> Vec<String> {
        let texts = items.into_iter().filter(|i| i["kind"] == "notice");
        let texts = texts.filter_map(|i| i["text"].as_str().map(str::to_owned));
        texts.filter(|t| t.starts_with("Stopped before an answer")).collect()
    };
    let lines = eventually("the closing line of the card not asked again", || async {
        let found = closing_lines(items(&core, &pane_id).await);
        (!found.is_empty()).then_some(found)
    })
    .await;
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(lines[0].contains("run drop/2"), "{lines:?}");
    let refused = post(&drop_id, answer("a-1", "allow-once")).await;
    assert_eq!((refused.status, refused.body_json()["code"].clone()), (409, json!("ask-closed")));
    // change/3, asked again with one option more: the new card, by the
    // kept card's id.
    let open = open_asks(&core).await;
    assert_eq!(open.len(), 1, "{open:?}");
    assert_eq!(open[0]["id"], change_id.as_str());
    let options: Vec<&str> =
        open[0]["options"].as_array().unwrap().iter().map(|o| o["id"].as_str().unwrap()).collect();
    assert_eq!(options, ["allow-once", "reject", "reject-always"]);
    // The agent asked again and a card is open: it is stopped neither as
    // one loaded for nothing nor as idle (a stop closes its input).
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(!dir.join("agent.ended").exists(), "the agent with a card open was stopped");
    let changed = json!({"requestId": "a-2", "answer": {"optionIds": ["reject-always"]}}).to_string();
    let answered = post(&change_id, changed).await;
    assert_eq!(answered.status, 200, "{}", answered.body_json());
    eventually("the agent told the second answer", || async { (told().lines().count() == 2).then_some(()) })
        .await;
    assert_eq!(told(), "201:allow-once\n202:reject-always\n");
    acp.shutdown().await;
}
