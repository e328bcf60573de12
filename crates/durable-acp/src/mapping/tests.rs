//! The mapping fed with updates as pi-acp and claude-agent-acp send them
//! (shapes from their traces), on an injected clock.

use super::*;
use serde_json::json;

fn update(v: Value) -> SessionUpdate {
    serde_json::from_value(v).expect("a session update")
}

fn mapper() -> Mapper {
    let mut m = Mapper::new(Duration::from_millis(250));
    m.begin("t1", false);
    m
}

fn chunk(kind: &str, text: &str) -> SessionUpdate {
    update(json!({"sessionUpdate": kind, "content": {"type": "text", "text": text}}))
}

fn ids(items: &[Item]) -> Vec<&str> {
    items.iter().map(|i| i.id.as_str()).collect()
}

fn tool_of(item: &Item) -> (ToolStatus, String, Option<String>) {
    match &item.body {
        ItemBody::Tool { status, call, output, .. } => (*status, call.clone(), output.clone()),
        other => panic!("not a tool: {other:?}"),
    }
}

#[test]
fn chunks_are_partials_at_most_every_250_ms_then_final_when_the_turn_ends() {
    let t0 = Instant::now();
    let ms = |n| t0 + Duration::from_millis(n);
    let mut m = mapper();
    let first = m.on_update(&chunk("agent_message_chunk", "Hel"), t0);
    assert_eq!(ids(&first), ["t1-0"]);
    assert_eq!(first[0].body, ItemBody::Reply { text: "Hel".into(), partial: true });
    assert!(
        m.on_update(&chunk("agent_message_chunk", "lo"), ms(100)).is_empty(),
        "held: 100 ms since the last"
    );
    assert_eq!(m.flush_at(), Some(ms(250)));
    assert!(m.flush(ms(249)).is_empty());
    let due = m.flush(ms(250));
    assert_eq!(due[0].body, ItemBody::Reply { text: "Hello".into(), partial: true });
    assert_eq!(m.flush_at(), None, "nothing held");
    assert!(m.on_update(&chunk("agent_message_chunk", "!"), ms(300)).is_empty());
    let end = m.finish(false);
    assert_eq!(ids(&end), ["t1-0"]);
    assert_eq!(end[0].body, ItemBody::Reply { text: "Hello!".into(), partial: false });
    assert!(m.finish(false).is_empty(), "nothing written twice");
}

#[test]
fn thinking_then_text_are_two_items_and_the_first_is_final_when_the_second_begins() {
    let t0 = Instant::now();
    let mut m = mapper();
    let a = m.on_update(&chunk("agent_thought_chunk", "Hmm."), t0);
    assert_eq!(a[0].body, ItemBody::Thinking { text: "Hmm.".into(), partial: true });
    let b = m.on_update(&chunk("agent_message_chunk", "Sure."), t0 + Duration::from_millis(10));
    assert_eq!(ids(&b), ["t1-0"], "the thought closes at once; the reply's partial is not due yet");
    assert_eq!(b[0].body, ItemBody::Thinking { text: "Hmm.".into(), partial: false });
    let end = m.finish(false);
    assert_eq!(end.len(), 1);
    assert_eq!(
        (end[0].id.as_str(), &end[0].body),
        ("t1-1", &ItemBody::Reply { text: "Sure.".into(), partial: false })
    );
}

#[test]
fn a_pi_acp_bash_call_runs_with_terminal_output_then_completes() {
    let t0 = Instant::now();
    let ms = |n| t0 + Duration::from_millis(n);
    let mut m = mapper();
    m.on_update(&chunk("agent_message_chunk", "Running it."), t0);
    let call =
        update(json!({"sessionUpdate": "tool_call", "toolCallId": "call_1", "title": "echo hello-from-tool",
        "kind": "execute", "status": "pending", "rawInput": {"command": "echo hello-from-tool"},
        "content": [{"type": "terminal", "terminalId": "call_1"}]}));
    let out = m.on_update(&call, ms(10));
    assert_eq!(ids(&out), ["t1-0", "t1-tool-0"], "the text before the call is final first");
    assert_eq!(out[0].body, ItemBody::Reply { text: "Running it.".into(), partial: false });
    assert_eq!(tool_of(&out[1]), (ToolStatus::Running, "echo hello-from-tool".into(), None));
    match &out[1].body {
        ItemBody::Tool { name, .. } => assert_eq!(name, "execute"),
        _ => unreachable!(),
    }
    let progress =
        update(json!({"sessionUpdate": "tool_call_update", "toolCallId": "call_1", "status": "in_progress"}));
    let running = m.on_update(&progress, ms(20));
    assert!(running.is_empty(), "still running, nothing new: {running:?}");
    let output = update(json!({"sessionUpdate": "tool_call_update", "toolCallId": "call_1",
        "_meta": {"terminal_output": {"terminalId": "call_1", "data": "hello-from-tool\n"}}}));
    let streamed = m.on_update(&output, ms(300));
    assert_eq!(tool_of(&streamed[0]).2.as_deref(), Some("hello-from-tool\n"));
    let done =
        update(json!({"sessionUpdate": "tool_call_update", "toolCallId": "call_1", "status": "completed",
        "_meta": {"terminal_exit": {"terminalId": "call_1", "exit_code": 0}}}));
    let done = m.on_update(&done, ms(310));
    assert_eq!(
        tool_of(&done[0]),
        (ToolStatus::Ok, "echo hello-from-tool".into(), Some("hello-from-tool\n".into()))
    );
}

#[test]
fn a_refused_call_that_fails_is_denied_and_another_failure_is_an_error() {
    let t0 = Instant::now();
    let mut m = mapper();
    for id in ["a", "b"] {
        m.on_update(&update(json!({"sessionUpdate": "tool_call", "toolCallId": id, "title": "rm -rf x", "kind": "execute"})), t0);
    }
    m.deny("a");
    let failed = |id: &str| {
        update(json!({"sessionUpdate": "tool_call_update", "toolCallId": id, "status": "failed",
            "content": [{"type": "content", "content": {"type": "text", "text": "Denied by user"}}]}))
    };
    let a = m.on_update(&failed("a"), t0);
    assert_eq!(tool_of(&a[0]), (ToolStatus::Denied, "rm -rf x".into(), Some("Denied by user".into())));
    let b = m.on_update(&failed("b"), t0);
    assert_eq!(tool_of(&b[0]).0, ToolStatus::Error);
}

#[test]
fn a_write_s_diff_is_a_code_item_in_diff_and_a_read_s_text_is_its_output() {
    let t0 = Instant::now();
    let mut m = mapper();
    m.on_update(
        &update(json!({"sessionUpdate": "tool_call", "toolCallId": "w", "title": "write notes.txt",
        "kind": "edit", "status": "pending", "locations": [{"path": "/tmp/notes.txt"}],
        "rawInput": {"path": "notes.txt", "content": "one\ntwo\n"}})),
        t0,
    );
    let done = m.on_update(&update(json!({"sessionUpdate": "tool_call_update", "toolCallId": "w", "status": "completed",
        "content": [{"type": "diff", "path": "/tmp/notes.txt", "oldText": "one\n", "newText": "one\ntwo\n"}]})), t0);
    assert_eq!(ids(&done), ["t1-tool-0", "t1-tool-0-diff-0"]);
    assert_eq!(
        done[1].body,
        ItemBody::Code {
            text: "--- /tmp/notes.txt\n+++ /tmp/notes.txt\n-one\n+one\n+two\n".into(),
            lang: Some("diff".into())
        }
    );
    m.on_update(
        &update(json!({"sessionUpdate": "tool_call", "toolCallId": "r", "title": "", "kind": "read",
        "rawInput": {"path": "a.txt"}})),
        t0,
    );
    let read = m.on_update(
        &update(json!({"sessionUpdate": "tool_call_update", "toolCallId": "r", "status": "completed",
        "content": [{"type": "content", "content": {"type": "text", "text": "file body"}}]})),
        t0,
    );
    assert_eq!(
        tool_of(&read[0]),
        (ToolStatus::Ok, r#"read(path: "a.txt")"#.into(), Some("file body".into()))
    );
}

#[test]
fn a_plan_is_one_item_per_turn_rewritten_in_place_and_a_title_is_taken_not_shown() {
    let t0 = Instant::now();
    let mut m = mapper();
    let plan = |s: &str| {
        update(json!({"sessionUpdate": "plan", "entries": [
            {"content": "Read the code", "status": "completed", "priority": "high"},
            {"content": "Fix the bug", "status": s, "priority": "medium"}]}))
    };
    let a = m.on_update(&plan("pending"), t0);
    let b = m.on_update(&plan("in_progress"), t0);
    assert_eq!((ids(&a), ids(&b)), (vec!["t1-plan-1"], vec!["t1-plan-1"]));
    match &b[0].body {
        ItemBody::Markdown { text, .. } => {
            assert!(text.contains("- [x] Read the code\n- [ ] ▶ Fix the bug"), "{text}")
        }
        other => panic!("{other:?}"),
    }
    m.begin("t2", false);
    assert_eq!(
        ids(&m.on_update(&plan("completed"), t0)),
        ["t2-plan-1"],
        "a later turn's plan shows in that turn"
    );
    // A replay: each turn's plan is its own item.
    m.begin("load-1", true);
    let mut replay = Vec::new();
    replay.extend(m.on_update(&chunk("user_message_chunk", "one"), t0));
    replay.extend(m.on_update(&plan("pending"), t0));
    replay.extend(m.on_update(&plan("completed"), t0));
    replay.extend(m.on_update(&chunk("agent_message_chunk", "Done."), t0));
    replay.extend(m.on_update(&chunk("user_message_chunk", "two"), t0));
    replay.extend(m.on_update(&plan("pending"), t0));
    let plans: Vec<&str> =
        replay.iter().filter(|i| i.body.kind() == "markdown").map(|i| i.id.as_str()).collect();
    assert_eq!(plans, ["load-1-plan-1", "load-1-plan-1", "load-1-plan-2"]);
    let info = update(
        json!({"sessionUpdate": "session_info_update", "title": "Fix the parser", "updatedAt": "2026-12-03T10:00:00Z"}),
    );
    assert!(m.on_update(&info, t0).is_empty());
    assert_eq!(m.take_title().as_deref(), Some("Fix the parser"));
    assert_eq!(m.take_title(), None);
    let usage = update(json!({"sessionUpdate": "usage_update", "used": 10, "size": 1000}));
    assert!(m.on_update(&usage, t0).is_empty(), "usage changes nothing shown");
}

#[test]
fn a_replay_gives_user_items_and_whole_messages_in_order() {
    let t0 = Instant::now();
    let mut m = mapper();
    m.begin("load-1", true);
    let mut out = Vec::new();
    out.extend(m.on_update(&chunk("user_message_chunk", "please run a tool"), t0));
    out.extend(m.on_update(&chunk("agent_message_chunk", "Sure."), t0));
    out.extend(m.on_update(&update(json!({"sessionUpdate": "tool_call", "toolCallId": "call_1", "title": "bash", "kind": "execute", "status": "completed"})), t0));
    out.extend(m.on_update(&chunk("user_message_chunk", "thanks"), t0));
    out.extend(m.finish(false));
    let kinds: Vec<(&str, &str)> = out.iter().map(|i| (i.id.as_str(), i.body.kind())).collect();
    assert_eq!(
        kinds,
        [
            ("load-1-0", "user"),
            ("load-1-1", "reply"),
            ("load-1-1", "reply"),
            ("load-1-tool-0", "tool"),
            ("load-1-2", "user")
        ],
        "the reply's partial, then final"
    );
    assert_eq!(out[2].body, ItemBody::Reply { text: "Sure.".into(), partial: false });
    // In a live turn the send's user item is the SDK's: a user chunk adds none.
    m.begin("t3", false);
    assert!(m.on_update(&chunk("user_message_chunk", "hi"), t0).is_empty());
    assert!(m.finish(false).is_empty());
}

#[test]
fn a_stop_fails_calls_still_running_and_a_flood_stays_bounded() {
    let t0 = Instant::now();
    let mut m = mapper();
    m.on_update(&update(json!({"sessionUpdate": "tool_call", "toolCallId": "x", "title": "sleep 9", "kind": "execute", "status": "in_progress"})), t0);
    let end = m.finish(true);
    assert_eq!(tool_of(&end[0]).0, ToolStatus::Error);
    m.begin("flood", false);
    let big = "x".repeat(64 * 1024);
    for n in 0..40u64 {
        m.on_update(&chunk("agent_message_chunk", &big), t0 + Duration::from_millis(n));
    }
    let held = m.current.as_ref().map_or(0, |b| b.text.len());
    assert_eq!(held, TEXT_MAX, "text past the bound is dropped");
    for n in 0..(BLOCKS_MAX as u64 + 10) {
        let kind = if n % 2 == 0 { "agent_thought_chunk" } else { "agent_message_chunk" };
        m.on_update(&chunk(kind, "y"), t0);
    }
    assert!(m.cadence.remembered_items() <= BLOCKS_MAX + 1, "{}", m.cadence.remembered_items());
}

#[test]
fn a_call_view_merges_the_request_with_the_call_seen_even_one_seen_later() {
    let t0 = Instant::now();
    let mut m = mapper();
    let request: ToolCallUpdate =
        serde_json::from_value(json!({"toolCallId": "toolu_1", "title": "Write a.txt",
        "kind": "edit", "rawInput": {"file_path": "a.txt", "content": "hi"}}))
        .unwrap();
    let before = m.call_view(&request);
    assert_eq!(before.item, None);
    assert_eq!(before.tool.call, "Write a.txt");
    assert_eq!(before.tool.name, "edit");
    assert_eq!(before.tool.args[0].0, "file_path");
    m.on_update(&update(json!({"sessionUpdate": "tool_call", "toolCallId": "toolu_1", "title": "Write a.txt", "kind": "edit"})), t0);
    let after = m.call_view(&request);
    assert_eq!(after.item.as_ref().map(Id::as_str), Some("t1-tool-0"));
    // pi-acp's dialog: a random id, the dialog's text as the title, no call.
    let dialog: ToolCallUpdate =
        serde_json::from_value(json!({"toolCallId": "pi-ui-1b2c", "title": "Allow bash: rm x?",
        "kind": "other", "status": "pending", "rawInput": {"method": "select"}}))
        .unwrap();
    let view = m.call_view(&dialog);
    assert_eq!((view.item, view.tool.call.as_str()), (None, "Allow bash: rm x?"));
}

/// Claude Code's reply chunks carry a `messageId`; its informational
/// message has none and a mark of its own: a notice, never glued to the reply.
#[test]
fn an_informational_chunk_is_a_notice_and_another_message_id_another_item() {
    let t0 = Instant::now();
    let mut m = mapper();
    let with_id = |text: &str, id: &str| {
        update(json!({"sessionUpdate": "agent_message_chunk", "messageId": id,
            "content": {"type": "text", "text": text}}))
    };
    let mut out = Vec::new();
    out.extend(m.on_update(&with_id("Echo: ", "m1"), t0));
    out.extend(m.on_update(&with_id("hello", "m1"), t0));
    out.extend(m.on_update(
        &update(json!({"sessionUpdate": "agent_message_chunk",
        "content": {"type": "text", "text": "**Warning:** We're changing auto mode"},
        "_meta": {"claudeCode": {"kind": "informational"}}})),
        t0,
    ));
    out.extend(m.on_update(&with_id("Next.", "m2"), t0));
    out.extend(m.on_update(&chunk("agent_message_chunk", "no id"), t0));
    out.extend(m.finish(false));
    let last: Vec<(String, ItemBody)> = {
        let mut seen: Vec<(String, ItemBody)> = Vec::new();
        for i in &out {
            match seen.iter_mut().find(|(id, _)| id == i.id.as_str()) {
                Some(s) => s.1 = i.body.clone(),
                None => seen.push((i.id.to_string(), i.body.clone())),
            }
        }
        seen
    };
    let shown: Vec<(&str, &str)> = last
        .iter()
        .map(|(id, b)| {
            let text = match b {
                ItemBody::Reply { text, .. } | ItemBody::Notice { text, .. } => text.as_str(),
                _ => "",
            };
            (id.as_str(), text)
        })
        .collect();
    assert_eq!(
        shown,
        [
            ("t1-0", "Echo: hello"),
            ("t1-n1", "Warning: We're changing auto mode"),
            ("t1-1", "Next."),
            ("t1-2", "no id")
        ]
    );
    assert!(matches!(last[1].1, ItemBody::Notice { tone: Some(NoticeTone::Warn), .. }));
}

#[test]
fn a_reply_cut_at_its_limit_says_so_in_a_notice() {
    let t0 = Instant::now();
    let mut m = mapper();
    let piece = "y".repeat(100 * 1024);
    for _ in 0..3 {
        m.on_update(&chunk("agent_message_chunk", &piece), t0);
    }
    let end = m.finish(false);
    assert_eq!(ids(&end), ["t1-0", "t1-n1"]);
    match (&end[0].body, &end[1].body) {
        (ItemBody::Reply { text, .. }, ItemBody::Notice { text: notice, tone, .. }) => {
            assert_eq!(text.len(), item_limits::REPLY_TEXT);
            assert!(notice.contains("cut at 256 KiB"), "{notice}");
            assert_eq!(*tone, Some(NoticeTone::Warn));
        }
        other => panic!("{other:?}"),
    }
    m.begin("t2", false);
    m.on_update(&chunk("agent_message_chunk", "short"), t0);
    assert_eq!(ids(&m.finish(false)), ["t2-0"], "no notice for a reply that fits");
}

/// Claude Code's `Bash`: `content` describes the call, `rawOutput` is what
/// it printed; a refusal comes fenced; codex-acp's `rawOutput` is an object.
#[test]
fn a_tool_item_shows_raw_output_and_a_fenced_refusal_as_its_sentence() {
    let t0 = Instant::now();
    let mut m = mapper();
    let call = |id: &str| {
        update(
            json!({"sessionUpdate": "tool_call", "toolCallId": id, "title": "mkdir -p x", "kind": "execute",
            "status": "pending", "rawInput": {"command": "mkdir -p x", "description": "Make a folder"}}),
        )
    };
    m.on_update(&call("b"), t0);
    let done = m.on_update(
        &update(json!({"sessionUpdate": "tool_call_update", "toolCallId": "b", "status": "completed",
        "content": [{"type": "content", "content": {"type": "text", "text": "Make a folder"}}],
        "rawOutput": "created x\n"})),
        t0,
    );
    assert_eq!(tool_of(&done[0]).2.as_deref(), Some("created x\n"));
    m.on_update(&call("r"), t0);
    let refused = m.on_update(&update(json!({"sessionUpdate": "tool_call_update", "toolCallId": "r", "status": "failed",
        "content": [{"type": "content", "content": {"type": "text", "text": "```\nUser refused permission to run tool\n```"}}]})), t0);
    assert_eq!(tool_of(&refused[0]).2.as_deref(), Some("User refused permission to run tool"));
    m.on_update(&call("c"), t0);
    let codex = m.on_update(
        &update(json!({"sessionUpdate": "tool_call_update", "toolCallId": "c", "status": "completed",
        "rawOutput": {"stdout": "two\n", "stderr": "", "exit_code": 0, "formatted_output": "two\n"}})),
        t0,
    );
    assert_eq!(tool_of(&codex[0]).2.as_deref(), Some("two\n"));
    // A fence in the middle of text is the agent's Markdown: kept.
    assert_eq!(unfenced("see:\n```\nx\n```"), "see:\n```\nx\n```");
    assert_eq!(unfenced("```sh\nls\n```"), "ls");
}

/// After a crash Claude Code's replay holds its interruption markers: the
/// cut call did not run, and the marker is not the user's message.
#[test]
fn a_replay_s_interruption_markers_are_not_user_messages_and_a_cut_call_did_not_run() {
    let t0 = Instant::now();
    let mut m = mapper();
    m.begin("load-1", true);
    let mut out = Vec::new();
    out.extend(m.on_update(&chunk("user_message_chunk", "make a folder"), t0));
    out.extend(m.on_update(&update(json!({"sessionUpdate": "tool_call", "toolCallId": "b", "title": "mkdir x",
        "kind": "execute", "status": "failed",
        "content": [{"type": "content", "content": {"type": "text", "text": "[Request interrupted by user for tool use]"}}]})), t0));
    out.extend(m.on_update(&chunk("user_message_chunk", "[Request interrupted by user for tool use]"), t0));
    out.extend(m.on_update(&chunk("user_message_chunk", "[Request interrupted by user]"), t0));
    out.extend(m.finish(false));
    let users: Vec<&Item> = out.iter().filter(|i| i.body.kind() == "user").collect();
    assert_eq!(users.len(), 1, "{out:?}");
    let tool = out.iter().rfind(|i| i.body.kind() == "tool").unwrap();
    assert_eq!(tool_of(tool), (ToolStatus::Error, "mkdir x".into(), Some(INTERRUPTED_CALL.into())));
    let notices: Vec<&Item> = out.iter().filter(|i| i.body.kind() == "notice").collect();
    assert_eq!(notices.len(), 2);
    assert!(!is_interruption("[Request interrupted by user] and then [more]"));
}

#[test]
fn a_card_closed_unanswered_leaves_its_call_an_error_not_denied() {
    let t0 = Instant::now();
    let mut m = mapper();
    m.on_update(&update(json!({"sessionUpdate": "tool_call", "toolCallId": "a", "title": "rm x", "kind": "execute", "status": "pending"})), t0);
    let closed = m.unanswered("a");
    assert_eq!(tool_of(&closed[0]), (ToolStatus::Error, "rm x".into(), Some(STOPPED_UNANSWERED.into())));
    let failed = m.on_update(
        &update(json!({"sessionUpdate": "tool_call_update", "toolCallId": "a", "status": "failed",
        "content": [{"type": "content", "content": {"type": "text", "text": "Tool use aborted"}}]})),
        t0,
    );
    assert!(failed.is_empty() || tool_of(&failed[0]).0 == ToolStatus::Error, "{failed:?}");
    assert!(m.finish(true).iter().all(|i| tool_of(i).0 == ToolStatus::Error));
}

#[test]
fn a_turn_s_first_partial_waits_one_interval_and_a_short_reply_goes_out_whole_once() {
    let t0 = Instant::now();
    let ms = |n| t0 + Duration::from_millis(n);
    let mut m = mapper();
    m.hold_first_partial(t0);
    assert!(m.on_update(&chunk("agent_message_chunk", "Hi"), ms(1)).is_empty(), "held");
    assert_eq!(m.flush_at(), Some(ms(250)));
    let end = m.finish(false);
    assert_eq!(ids(&end), ["t1-0"]);
    assert_eq!(end[0].body, ItemBody::Reply { text: "Hi".into(), partial: false }, "one write, final");
    // A longer one still streams: its first part at the interval.
    m.begin("t2", false);
    m.hold_first_partial(ms(1000));
    assert!(m.on_update(&chunk("agent_message_chunk", "Long"), ms(1010)).is_empty());
    let due = m.flush(ms(1250));
    assert_eq!(due[0].body, ItemBody::Reply { text: "Long".into(), partial: true });
}
