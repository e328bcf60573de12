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
use durable_http::{CancellationToken, SystemClock, random_epoch, spawn_driver};
use durable_runtime::types::ask_id_for;
use durable_runtime::types::exchange::{Caller, Request};
use durable_runtime::{Collie, CoreOptions, ReceiptStore, create_core};
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
            run(
                &runtime,
                "open_cards_are_bounded_and_a_stop_closes_them_with_a_notice_each_way",
                bounded_cards(),
            );
            run(&runtime, "claude_code_s_items_tell_what_happened_on_a_pane_named_dot_dot", claude_items());
            run(
                &runtime,
                "an_agent_whose_output_closes_is_stopped_and_the_next_send_starts_it",
                mute_agent(),
            );
            run(&runtime, "a_close_during_a_starter_s_first_turn_leaves_a_notice", close_first_turn());
            run(
                &runtime,
                "the_sdk_s_store_keeps_the_items_and_records_written_before_move_theirs_onto_it",
                items_in_the_sdk_store(),
            );
            run(
                &runtime,
                "a_card_taken_up_after_a_restart_does_not_show_the_session_s_replay_again",
                replay_not_shown_again(),
            );
        }
    }
}

/// Runs one scenario and says how long it took (only those whose name
/// holds `DURABLE_ACP_ONLY`, when it is set).
fn run(runtime: &tokio::runtime::Runtime, name: &str, test: impl std::future::Future<Output = ()>) {
    if std::env::var("DURABLE_ACP_ONLY").is_ok_and(|only| !name.contains(&only)) {
        return;
    }
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
            // Claude Code's session id may be anything the ID rule allows: `..`.
            "session/new" if role == "claude" => {
                send(&mut out, json!({"jsonrpc": "2.0", "id": id, "result": {"sessionId": ".."}}));
            }
            "session/new" => {
                send(&mut out, json!({"jsonrpc": "2.0", "id": id, "result": {"sessionId": SESSION}}));
            }
            // Turn 1, as Claude Code through claude-agent-acp: a request of
            // 23 options (no card holds them), a reply with message ids and
            // an informational chunk without one, a Bash call whose content
            // describes it and whose rawOutput is its output, a refused call
            // (its content fenced), a reply past 256 KiB. Turn 2: a plan.
            "session/prompt" if role == "claude" => {
                let s = "..";
                let text = msg["params"]["prompt"][0]["text"].as_str().unwrap_or("").to_owned();
                if text == "plan" {
                    send(
                        &mut out,
                        update(
                            s,
                            json!({"sessionUpdate": "plan", "entries": [
                        {"content": "Read the code", "status": "in_progress", "priority": "medium"}]}),
                        ),
                    );
                    send(&mut out, json!({"jsonrpc": "2.0", "id": id, "result": {"stopReason": "end_turn"}}));
                    continue;
                }
                send(
                    &mut out,
                    update(
                        s,
                        json!({"sessionUpdate": "plan", "entries": [
                    {"content": "Say hello", "status": "completed", "priority": "medium"}]}),
                    ),
                );
                let mut many = permission(s, 300, "toolu_many");
                many["params"]["options"] = (0..23)
                    .map(|n| json!({"optionId": format!("o{n}"), "name": format!("Option {n}"), "kind": "allow_once"}))
                    .collect();
                send(&mut out, many);
                let refused = next().unwrap_or(Value::Null);
                let msg_chunk = |text: &str, mid: &str| {
                    update(
                        s,
                        json!({"sessionUpdate": "agent_message_chunk",
                    "messageId": mid, "content": {"type": "text", "text": text}}),
                    )
                };
                send(&mut out, msg_chunk("Echo: ", "msg_1"));
                send(
                    &mut out,
                    msg_chunk(
                        &format!(
                            "hello ({})",
                            refused["result"]["outcome"]["outcome"].as_str().unwrap_or("?")
                        ),
                        "msg_1",
                    ),
                );
                send(
                    &mut out,
                    update(
                        s,
                        json!({"sessionUpdate": "agent_message_chunk",
                    "content": {"type": "text", "text": "**Warning:** We're changing auto mode"},
                    "_meta": {"claudeCode": {"kind": "informational"}}}),
                    ),
                );
                let described =
                    |text: &str| json!([{"type": "content", "content": {"type": "text", "text": text}}]);
                send(
                    &mut out,
                    update(
                        s,
                        json!({"sessionUpdate": "tool_call", "toolCallId": "toolu_bash",
                    "title": "mkdir -p x", "kind": "execute", "status": "pending",
                    "rawInput": {"command": "mkdir -p x", "description": "Make a folder"}}),
                    ),
                );
                send(
                    &mut out,
                    update(
                        s,
                        json!({"sessionUpdate": "tool_call_update", "toolCallId": "toolu_bash",
                    "status": "completed", "content": described("Make a folder"), "rawOutput": "made x\n"}),
                    ),
                );
                send(
                    &mut out,
                    update(
                        s,
                        json!({"sessionUpdate": "tool_call", "toolCallId": "toolu_no",
                    "title": "rm -rf /", "kind": "execute", "status": "failed",
                    "content": described("```\nUser refused permission to run tool\n```")}),
                    ),
                );
                let big = "z".repeat(100 * 1024);
                for _ in 0..3 {
                    send(&mut out, msg_chunk(&big, "msg_2"));
                }
                send(&mut out, json!({"jsonrpc": "2.0", "id": id, "result": {"stopReason": "end_turn"}}));
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
            // Asks for one card after another, never waiting for an
            // answer (`DURABLE_ACP_FAKE_CARDS` of them, 200 by default),
            // then answers the prompt once it is cancelled and every
            // request has its answer; tells the test `<selected> <cancelled>`.
            "session/prompt" if role == "cards" => {
                let cards: u64 =
                    std::env::var("DURABLE_ACP_FAKE_CARDS").ok().and_then(|n| n.parse().ok()).unwrap_or(200);
                for k in 0..cards {
                    let call = format!("card-{k}");
                    send(
                        &mut out,
                        update(
                            SESSION,
                            json!({"sessionUpdate": "tool_call", "toolCallId": call, "title": format!("run {call}"),
                                "kind": "execute", "status": "pending", "rawInput": {"command": "x".repeat(1000)}}),
                        ),
                    );
                    send(&mut out, permission(SESSION, 1000 + k, &call));
                }
                let (mut selected, mut cancelled, mut stopped) = (0u64, 0u64, false);
                while selected + cancelled < cards || !stopped {
                    let Some(msg) = next() else { break };
                    match msg["result"]["outcome"]["outcome"].as_str() {
                        Some("selected") => selected += 1,
                        Some("cancelled") => cancelled += 1,
                        _ => {}
                    }
                    stopped |= msg["method"] == "session/cancel";
                    std::fs::write(&log, format!("{selected} {cancelled}")).unwrap();
                }
                send(&mut out, json!({"jsonrpc": "2.0", "id": id, "result": {"stopReason": "cancelled"}}));
            }
            // The first prompt: it exits, and the shell that ran it (the
            // agent's process, see `mute_agent`) closes the output and lives
            // on. Started again (a file says so), it answers.
            "session/prompt" if role == "mute" => {
                if !log.with_extension("muted").exists() {
                    std::fs::write(log.with_extension("muted"), "").unwrap();
                    std::process::exit(0);
                }
                let text = msg["params"]["prompt"][0]["text"].as_str().unwrap_or("").to_owned();
                send(&mut out, chunk(SESSION, &format!("Echo: {text}")));
                send(&mut out, json!({"jsonrpc": "2.0", "id": id, "result": {"stopReason": "end_turn"}}));
            }
            // A first prompt answers, a second asks for a card; a load
            // replays the first answer, as ACP asks of `session/load`.
            "session/prompt" if role == "replays" => {
                let text = msg["params"]["prompt"][0]["text"].as_str().unwrap_or("").to_owned();
                send(&mut out, chunk(SESSION, &format!("Echo: {text}")));
                if text == "hi" {
                    send(&mut out, json!({"jsonrpc": "2.0", "id": id, "result": {"stopReason": "end_turn"}}));
                } else {
                    send(&mut out, permission(SESSION, 101, "keep/1"));
                }
            }
            "session/load" if role == "replays" => {
                send(&mut out, chunk(SESSION, "Echo: hi"));
                send(&mut out, json!({"jsonrpc": "2.0", "id": id, "result": {}}));
            }
            "session/load" if role == "mute" => {
                send(&mut out, json!({"jsonrpc": "2.0", "id": id, "result": {}}));
            }
            // Takes its time: the prompt is answered only when the input closes.
            "session/prompt" if role == "slow" => {
                while next().is_some() {}
                return;
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

fn core() -> Collie {
    let core = core_with(None);
    core.ready();
    core
}

/// A core not yet ready, on `store` (else in memory).
fn core_with(store: Option<SqliteReceiptStore>) -> Collie {
    let mut options = CoreOptions::builder().host_name("fake").clock(SystemClock).epoch(random_epoch());
    if let Some(store) = store {
        options = options.receipts(store);
    }
    let core = create_core(options.build().unwrap());
    spawn_driver(core.driver(), CancellationToken::new());
    core
}

fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("durable-acp-fake-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn conversations(
    core: &Collie,
    role: &str,
    name: &str,
    init_timeout: Duration,
) -> std::sync::Arc<AcpConversations> {
    conversations_in(core, role, &scratch(name), init_timeout)
}

/// [`conversations`] in `dir`, kept as it is (its data folder is `dir/data`).
fn conversations_in(
    core: &Collie,
    role: &str,
    dir: &std::path::Path,
    init_timeout: Duration,
) -> std::sync::Arc<AcpConversations> {
    conversations_in_with(core, role, dir, |o| o.init_timeout(init_timeout))
}

/// [`conversations_in`] with options of the test's own.
fn conversations_in_with(
    core: &Collie,
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

async fn get(core: &Collie, path: &str) -> Value {
    core.driver().handle(Request::get(path, Caller::OtherProcess)).await.body_json()
}

/// The pane's items as the phone shows them (each at its last version).
async fn items(core: &Collie, pane: &str) -> Vec<Value> {
    let page = get(core, &format!("/v1/panes/{pane}/events?after=0")).await;
    if page["snapshot"] == true {
        // Past the tail of events: the view, each item at its last version.
        return page["items"].as_array().cloned().unwrap_or_default();
    }
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

async fn idle(core: &Collie, pane: &str) {
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
    assert_eq!(ask["id"], durable_runtime::types::ask_id_for(&pane_id, &durable_acp::call_id_for("call/1")));
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
    let answered = core.driver().handle(Request::post(&path, answer, Caller::OtherProcess)).await;
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
    assert!(text.contains("exit code 3") && text.contains("fake agent: boom"), "{text}");
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
    let answer = core.driver().handle(Request::post("/v1/reopen", body, Caller::OtherProcess)).await;
    let json = answer.body_json();
    assert_eq!((answer.status, json["code"].as_str()), (404, Some("not-found")), "{json}");
    acp.shutdown().await;
}

/// The asks open on `core`.
async fn open_asks(core: &Collie) -> Vec<Value> {
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
        core.driver().handle(Request::post(&format!("/v1/asks/{ask}"), body, Caller::OtherProcess))
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

/// CPU seconds this process has used (user and system), from `/proc`.
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // The fields after the command's closing parenthesis; utime and stime
    // are the 14th and 15th of the line, in clock ticks (100 a second).
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |n: usize| fields.get(n).and_then(|f| f.parse::<f64>().ok()).unwrap_or(0.0);
    (ticks(11) + ticks(12)) / 100.0
}

/// A hostile agent asks for card after card without waiting: past the
/// limit each is refused back to it (`cancelled`) and the pane says so;
/// the phone's stop closes the open ones, each tool item saying it was
/// stopped before an answer. `DURABLE_ACP_FAKE_CARDS=20000` measures a
/// large flood (the stop's time is printed, not asserted).
async fn bounded_cards() {
    let cards: usize =
        std::env::var("DURABLE_ACP_FAKE_CARDS").ok().and_then(|n| n.parse().ok()).unwrap_or(200);
    let core = core();
    let dir = scratch("cards");
    let acp = conversations_in(&core, "cards", &dir, Duration::from_secs(30));
    let pane = acp.start(Some("go".into())).await.unwrap();
    let pane_id = pane.id().to_owned();
    let open = cards.min(durable_acp::CARDS_OPEN_MAX);
    let told = || {
        let text = std::fs::read_to_string(dir.join("agent.log")).unwrap_or_default();
        let mut n = text.split_whitespace().map(|n| n.parse::<usize>().unwrap_or(0));
        (n.next().unwrap_or(0), n.next().unwrap_or(0))
    };
    eventually("the cards past the limit refused back", || async {
        (told() == (0, cards - open)).then_some(())
    })
    .await;
    eventually("the cards within the limit open", || async {
        (pane.open_asks().len() == open).then_some(())
    })
    .await;
    // A flood's own items push the notice out of the view's 2000: it is
    // looked for in the default flood only.
    let measuring = cards > 1000;
    let shown = items(&core, &pane_id).await;
    let notices: Vec<&Value> = shown
        .iter()
        .filter(|i| {
            i["kind"] == "notice" && i["text"].as_str().is_some_and(|t| t.contains("cards open at once"))
        })
        .collect();
    if !measuring {
        assert_eq!(notices.len(), 1, "one notice for the burst: {notices:?}");
        let text = notices[0]["text"].as_str().unwrap();
        assert!(
            text.contains(&format!("{}", durable_acp::CARDS_OPEN_MAX)) && text.contains("refused"),
            "{text}"
        );
        assert_eq!(notices[0]["tone"], "warn");
    }

    let (cpu, wall) = (cpu_seconds(), Instant::now());
    let stop = json!({"requestId": "stop-1"}).to_string();
    let stopped = core
        .driver()
        .handle(Request::post(&format!("/v1/panes/{pane_id}/stop"), stop, Caller::OtherProcess))
        .await;
    assert_eq!(stopped.status, 200, "{}", stopped.body_json());
    eventually("every request answered", || async { (told() == (0, cards)).then_some(()) }).await;
    idle(&core, &pane_id).await;
    println!(
        "  {cards} requests, {open} cards open: the stop took {:.2} s, {:.2} s of CPU",
        wall.elapsed().as_secs_f32(),
        cpu_seconds() - cpu
    );
    assert!(pane.open_asks().is_empty());
    if measuring {
        acp.shutdown().await;
        return;
    }
    let shown = items(&core, &pane_id).await;
    let tool = shown
        .iter()
        .find(|i| i["kind"] == "tool" && i["call"] == "run card-0")
        .expect("the first call's item");
    assert_eq!(tool["status"], "error", "nobody answered: not denied: {tool}");
    assert!(tool["output"].as_str().is_some_and(|o| o.contains("Stopped before an answer")), "{tool}");
    acp.shutdown().await;
}

/// Claude Code's shapes through the bridge, as the phone reads them.
async fn claude_items() {
    let core = core();
    let acp = conversations(&core, "claude", "claude", Duration::from_secs(30));
    let pane = acp.start(Some("hello".into())).await.unwrap();
    let pane_id = pane.id().to_owned();
    assert_eq!(pane_id, pane_id_for(".."));
    assert!(pane_id.starts_with("acp-"), "`..` is mapped as `/` is: {pane_id}");
    // The events route works for the pane (a `..` in the path would not).
    eventually("the turn's end", || async {
        items(&core, &pane_id)
            .await
            .into_iter()
            .find(|i| i["kind"] == "notice" && i["text"].as_str().is_some_and(|t| t.contains("cut at")))
    })
    .await;
    idle(&core, &pane_id).await;
    let shown = items(&core, &pane_id).await;
    let text = |i: &Value| i["text"].as_str().unwrap_or("").to_owned();
    let of = |kind: &str| shown.iter().filter(|i| i["kind"] == kind).cloned().collect::<Vec<_>>();
    let notices: Vec<String> = of("notice").iter().map(text).collect();
    assert!(
        notices
            .iter()
            .any(|n| n.contains("cannot show as a card") && n.contains("23") && n.contains("run toolu_many")),
        "a request the phone cannot show leaves a notice: {notices:?}"
    );
    let replies: Vec<String> = of("reply").iter().map(text).collect();
    assert_eq!(replies[0], "Echo: hello (cancelled)", "the informational chunk is not glued to the reply");
    assert!(notices.iter().any(|n| n == "Warning: We're changing auto mode"), "{notices:?}");
    assert_eq!(replies[1].len(), 256 * 1024);
    assert!(notices.iter().any(|n| n.contains("cut at 256 KiB")), "the cut reply says so: {notices:?}");
    let tools = of("tool");
    let bash = tools.iter().find(|t| t["call"] == "mkdir -p x").expect("the Bash call");
    assert_eq!(
        (&bash["status"], &bash["output"]),
        (&json!("ok"), &json!("made x\n")),
        "its rawOutput, not its description"
    );
    let refused = tools.iter().find(|t| t["call"] == "rm -rf /").expect("the refused call");
    assert_eq!(refused["output"], "User refused permission to run tool", "no fences in a plain output");
    // A plan in a later turn shows in that turn: a new item after its user item.
    let send = json!({"requestId": "s-2", "text": "plan"}).to_string();
    let sent = core
        .driver()
        .handle(Request::post(&format!("/v1/panes/{pane_id}/send"), send, Caller::OtherProcess))
        .await;
    assert_eq!(sent.status, 200, "{}", sent.body_json());
    eventually("the second turn's plan", || async {
        let shown = items(&core, &pane_id).await;
        let user = shown.iter().position(|i| i["kind"] == "user" && i["text"] == "plan")?;
        let plans: Vec<usize> =
            shown.iter().enumerate().filter(|(_, i)| i["kind"] == "markdown").map(|(n, _)| n).collect();
        (plans.len() == 2 && plans[1] > user).then_some(())
    })
    .await;
    let shown = items(&core, &pane_id).await;
    let first_plan = shown.iter().find(|i| i["kind"] == "markdown").unwrap();
    assert!(
        text(first_plan).contains("[x] Say hello"),
        "the first turn's plan is left as it was: {first_plan}"
    );
    acp.shutdown().await;
}

/// The agent closes its output and stays alive (a shell around the fake
/// agent: it runs it, then closes its output and sleeps).
async fn mute_agent() {
    let core = core();
    let dir = scratch("mute");
    let me = std::env::current_exe().unwrap();
    let pid_file = dir.join("agent.pid");
    let script = format!("echo $$ >> '{}'; \"$0\"; exec >&-; exec sleep 600", pid_file.display());
    let command = AgentCommand::new("sh")
        .arg("-c")
        .arg(script)
        .arg(me)
        .env("DURABLE_ACP_FAKE", "mute")
        .env("DURABLE_ACP_FAKE_LOG", dir.join("agent.log"));
    let options = AcpOptions::builder(command, &dir, dir.join("data")).build().unwrap();
    let tab = core.workspace("w", "W").unwrap().tab("t", "T").unwrap();
    let acp = AcpConversations::new(tab, options).unwrap();
    let pane_id = acp.start(Some("go".into())).await.unwrap().id().to_owned();
    let notice = eventually("the notice of the closed output", || async {
        items(&core, &pane_id).await.into_iter().find(|i| i["kind"] == "notice")
    })
    .await;
    idle(&core, &pane_id).await;
    let text = notice["text"].as_str().unwrap();
    assert!(text.contains("closed its output") && text.contains("next message starts it again"), "{text}");
    assert_eq!(notice["tone"], "error");
    let first: u32 = std::fs::read_to_string(&pid_file).unwrap().lines().next().unwrap().parse().unwrap();
    eventually("the silent agent gone", || async {
        (!std::path::Path::new(&format!("/proc/{first}")).exists()).then_some(())
    })
    .await;
    // The next send starts it again.
    let send = json!({"requestId": "s-1", "text": "again"}).to_string();
    let sent = core
        .driver()
        .handle(Request::post(&format!("/v1/panes/{pane_id}/send"), send, Caller::OtherProcess))
        .await;
    assert_eq!(sent.status, 200, "{}", sent.body_json());
    eventually("the answer of the agent started again", || async {
        items(&core, &pane_id).await.into_iter().find(|i| i["kind"] == "reply" && i["text"] == "Echo: again")
    })
    .await;
    acp.shutdown().await;
}

/// The phone closes a new conversation while its starter's text is the
/// agent's first turn: the pane, reopened, says the turn was cut.
async fn close_first_turn() {
    let core = core_with(None);
    let acp = conversations(&core, "slow", "close-first", Duration::from_secs(30));
    core.starter(durable_acp::NEW_CONVERSATION, "New conversation").unwrap();
    core.set_hooks(acp.hooks());
    core.ready();
    let body = json!({"requestId": "st-1", "text": "first words"}).to_string();
    let started = core
        .driver()
        .handle(Request::post("/v1/starters/new-conversation", body, Caller::OtherProcess))
        .await;
    let json = started.body_json();
    assert_eq!(started.status, 200, "{json}");
    let pane_id = json["pane"].as_str().unwrap().to_owned();
    eventually("the first turn under way", || async {
        let state = get(&core, "/v1/state").await;
        let panes = state["panes"].as_array().cloned().unwrap_or_default();
        panes.iter().any(|p| p["id"] == pane_id.as_str() && p["state"] == "working").then_some(())
    })
    .await;
    let close = json!({"requestId": "c-1", "target": "pane", "id": pane_id}).to_string();
    let closed = core.driver().handle(Request::post("/v1/close", close, Caller::OtherProcess)).await;
    assert_eq!(closed.status, 200, "{}", closed.body_json());
    let reopen = json!({"requestId": "r-1", "id": pane_id}).to_string();
    let reopened = core.driver().handle(Request::post("/v1/reopen", reopen, Caller::OtherProcess)).await;
    assert_eq!(reopened.status, 200, "{}", reopened.body_json());
    let shown = items(&core, &pane_id).await;
    assert!(shown.iter().any(|i| i["kind"] == "user" && i["text"] == "first words"), "{shown:?}");
    let notice = shown.iter().find(|i| i["kind"] == "notice").expect("a notice of the cut turn");
    assert!(notice["text"].as_str().unwrap().starts_with("Closed during a turn"), "{notice}");
    // The record says it too (what the history shows once this process is gone).
    let record =
        std::fs::read_to_string(acp.options().data_dir().join(format!("conversations/{pane_id}.json")))
            .unwrap();
    assert!(record.contains("Closed during a turn"), "{record}");
    acp.shutdown().await;
}

/// A record as an earlier version wrote it: its items in it.
fn old_record(session: &str, title: &str, closed: bool, texts: [&str; 2]) -> Value {
    let pane = pane_id_for(session);
    json!({
        "sessionId": session, "paneId": pane, "title": title, "startedAt": 1_700_000_000_000_u64,
        "updatedAt": 1_700_000_100_000_u64, "closed": closed,
        "items": [
            {"id": format!("{}-u", pane.len()), "kind": "user", "text": texts[0]},
            {"id": format!("{}-r", pane.len()), "kind": "reply", "text": texts[1]},
        ],
    })
}

/// The items a record on disk holds.
fn record_items(dir: &std::path::Path, pane: &str) -> usize {
    let path = dir.join(format!("data/conversations/{pane}.json"));
    let record: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    record["items"].as_array().map_or(0, Vec::len)
}

/// The (kind, text) of items, in order.
fn texts(items: &[Value]) -> Vec<(String, String)> {
    items
        .iter()
        .map(|i| (i["kind"].as_str().unwrap_or("").to_owned(), i["text"].as_str().unwrap_or("").to_owned()))
        .collect()
}

fn pairs(want: &[(&str, &str)]) -> Vec<(String, String)> {
    want.iter().map(|(k, t)| ((*k).to_owned(), (*t).to_owned())).collect()
}

/// With a store that keeps conversations across restarts (SQLite), a
/// pane's items are the store's alone: the records an earlier version
/// wrote with items move them onto it (an open conversation's and a closed
/// one's), the records keep none after, and a second start shows and reads
/// them from the store.
async fn items_in_the_sdk_store() {
    let dir = scratch("sdk-items");
    let db = dir.join("receipts.sqlite3");
    let open_session = "fake/session one";
    let open = pane_id_for(open_session);
    let closed = pane_id_for("old/closed");
    std::fs::create_dir_all(dir.join("data/conversations")).unwrap();
    for (pane, record) in [
        (&open, old_record(open_session, "Old open", false, ["hi", "hello"])),
        (&closed, old_record("old/closed", "Old closed", true, ["bye", "see you"])),
    ] {
        std::fs::write(dir.join(format!("data/conversations/{pane}.json")), record.to_string()).unwrap();
    }
    // The agent answers at once (role `mute`, past its first run).
    std::fs::write(dir.join("agent.muted"), "").unwrap();

    // Run 1: the records' items move.
    let first = core_with(Some(SqliteReceiptStore::open(&db).unwrap()));
    let acp = conversations_in(&first, "mute", &dir, Duration::from_secs(30));
    // History as `durable-agent acp` serves it: the crate's provider.
    first.history(acp.history());
    assert_eq!(acp.restore().unwrap(), 1);
    first.ready();
    // Shown once the store has them.
    let want = pairs(&[("user", "hi"), ("reply", "hello")]);
    eventually("the record's items on its pane", || async {
        (texts(&items(&first, &open).await) == want).then_some(())
    })
    .await;
    eventually("both records without items", || async {
        (record_items(&dir, &open) == 0 && record_items(&dir, &closed) == 0).then_some(())
    })
    .await;
    let kept = first.kept_conversation(&closed).await.unwrap().expect("the closed one in the store");
    assert_eq!(
        texts(&kept.items.iter().map(|i| serde_json::to_value(i).unwrap()).collect::<Vec<_>>()),
        pairs(&[("user", "bye"), ("reply", "see you")])
    );
    let page = get(&first, &format!("/v1/history/{closed}")).await;
    assert_eq!(
        texts(page["items"].as_array().unwrap()),
        pairs(&[("user", "bye"), ("reply", "see you")]),
        "{page}"
    );
    assert_eq!((&page["row"]["title"], &page["row"]["items"]), (&json!("Old closed"), &json!(2)), "{page}");
    // A turn: its items go to the store, not the record.
    let send = json!({"requestId": "s-1", "text": "again"}).to_string();
    let sent = first
        .driver()
        .handle(Request::post(&format!("/v1/panes/{open}/send"), send, Caller::OtherProcess))
        .await;
    assert_eq!(sent.status, 200, "{}", sent.body_json());
    eventually("the answer", || async {
        items(&first, &open).await.into_iter().find(|i| i["kind"] == "reply" && i["text"] == "Echo: again")
    })
    .await;
    idle(&first, &open).await;
    first.conversations_kept().await;
    let rows = get(&first, "/v1/history").await;
    let count = |id: &str| {
        rows["rows"].as_array().unwrap().iter().find(|r| r["id"] == id).map(|r| r["items"].clone())
    };
    assert_eq!((count(&open), count(&closed)), (Some(json!(4)), Some(json!(2))), "{rows}");
    acp.shutdown().await;
    assert_eq!((record_items(&dir, &open), record_items(&dir, &closed)), (0, 0));
    let conversations = std::fs::read_dir(dir.join("data/conversations")).unwrap().count();
    assert_eq!(conversations, 2, "no record added");
    drop(acp);
    std::mem::forget(first);

    // Run 2 on the same store and data folder: the store gives them back.
    let core = core_with(Some(SqliteReceiptStore::open(&db).unwrap()));
    let acp = conversations_in(&core, "mute", &dir, Duration::from_secs(30));
    core.history(acp.history());
    assert_eq!(acp.restore().unwrap(), 1);
    core.ready();
    let want = pairs(&[("user", "hi"), ("reply", "hello"), ("user", "again"), ("reply", "Echo: again")]);
    eventually("the open conversation back from the store", || async {
        (texts(&items(&core, &open).await) == want).then_some(())
    })
    .await;
    let page = get(&core, &format!("/v1/history/{closed}")).await;
    assert_eq!(
        texts(page["items"].as_array().unwrap()),
        pairs(&[("user", "bye"), ("reply", "see you")]),
        "{page}"
    );
    assert_eq!((record_items(&dir, &open), record_items(&dir, &closed)), (0, 0));
    // The store no longer has the closed one (its bound forgot it, or the
    // program deleted it): its record has no items either, so history
    // serves it with none and says older ones were dropped.
    core.forget_conversation(&closed);
    core.conversations_kept().await;
    let page = get(&core, &format!("/v1/history/{closed}")).await;
    assert_eq!((&page["items"], &page["dropped"]), (&json!([]), &json!(true)), "{page}");
    acp.shutdown().await;
}

/// With the SDK's store keeping the items (the record none), a card kept
/// across a crash is taken up by loading the session: the agent's replay
/// of what the pane shows already (restored from the store) is not shown
/// again. (Found by review: the record's empty items read as "the pane
/// shows nothing", and the replay came back under new ids.)
async fn replay_not_shown_again() {
    let dir = scratch("replay-once");
    let db = dir.join("receipts.sqlite3");
    let first = core_with(Some(SqliteReceiptStore::open(&db).unwrap()));
    let acp = conversations_in(&first, "replays", &dir, Duration::from_secs(30));
    first.ready();
    let pane = acp.start(Some("hi".into())).await.unwrap().id().to_owned();
    eventually("the answer", || async {
        items(&first, &pane).await.into_iter().find(|i| i["text"] == "Echo: hi")
    })
    .await;
    idle(&first, &pane).await;
    let send = json!({"requestId": "s-2", "text": "ask"}).to_string();
    let sent = first
        .driver()
        .handle(Request::post(&format!("/v1/panes/{pane}/send"), send, Caller::OtherProcess))
        .await;
    assert_eq!(sent.status, 200, "{}", sent.body_json());
    eventually("the card in the store", || async {
        let store = SqliteReceiptStore::open(&db).ok()?;
        (store.kept_asks().await.ok()?.len() == 1).then_some(())
    })
    .await;
    first.conversations_kept().await;
    assert_eq!(record_items(&dir, &pane), 0, "the store keeps the items");
    // Gone as in a crash.
    std::mem::forget(acp);
    std::mem::forget(first);

    let core = core_with(Some(SqliteReceiptStore::open(&db).unwrap()));
    let acp = conversations_in(&core, "replays", &dir, Duration::from_secs(30));
    assert_eq!(acp.restore().unwrap(), 1);
    acp.take_up_kept_asks(core.kept_asks().await.unwrap());
    core.ready();
    // The take-up loads the session; the card is not asked again, so it closes.
    eventually("the card closed", || async {
        items(&core, &pane).await.into_iter().find(|i| {
            i["kind"] == "notice"
                && i["text"].as_str().is_some_and(|t| t.starts_with("Stopped before an answer"))
        })
    })
    .await;
    core.conversations_kept().await;
    let shown = items(&core, &pane).await;
    let echoes: Vec<&Value> = shown.iter().filter(|i| i["text"] == "Echo: hi").collect();
    assert_eq!(echoes.len(), 1, "the replay is not shown again: {shown:?}");
    let kept = core.kept_conversation(&pane).await.unwrap().unwrap();
    let kept_echoes =
        kept.items.iter().filter(|i| serde_json::to_value(i).unwrap()["text"] == "Echo: hi").count();
    assert_eq!(kept_echoes, 1, "nor kept twice");
    acp.shutdown().await;
}
