//! Round-trip fixtures: one JSON file per wire message under
//! `tests/fixtures/`.
//!
//! For each response and card message: the file deserializes into its Rust
//! type, serializes back to the same JSON (compared as `serde_json::Value`,
//! so an absent optional field must stay absent and a `null` stay `null`),
//! and every field name it serializes is camelCase. Request bodies that the
//! SDK parses with functions rather than serde (`AnswerRequest::parse`,
//! `WriteBody::parse_*`) are parsed and their fields checked. Every file in
//! the folder is covered by exactly one of these lists.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use durable_types::{
    AnswerRequest, Ask, AskKind, ConversationPage, DecidedBy, ErrorBody, ErrorCode, Event, EventBody,
    EventsPage, HelloPostResponse, HelloRequest, HelloResponse, HistoryPage, Item, ItemBody, PaneSnapshot,
    PaneState, StateResponse, Target, WireRange, WriteBody, WriteResponse, ask_hash, ask_hash_input,
    ask_id_for, is_hash,
};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

// ---------------------------------------------------------------------------
// Helpers

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests").join("fixtures")
}

fn text(name: &str) -> String {
    let path = dir().join(format!("{name}.json"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn value(name: &str) -> Value {
    serde_json::from_str(&text(name)).unwrap_or_else(|e| panic!("{name}.json is not JSON: {e}"))
}

/// `^[a-z][a-zA-Z0-9]*$`: the wire's field-name style.
fn is_camel_case(key: &str) -> bool {
    let mut chars = key.chars();
    chars.next().is_some_and(|c| c.is_ascii_lowercase()) && chars.all(|c| c.is_ascii_alphanumeric())
}

/// Every object key at every level of `v`, with its path, that is not camelCase.
fn non_camel_keys(v: &Value, path: &str, out: &mut Vec<String>) {
    match v {
        Value::Object(map) => {
            for (k, v) in map {
                if !is_camel_case(k) {
                    out.push(format!("{path}.{k}"));
                }
                non_camel_keys(v, &format!("{path}.{k}"), out);
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                non_camel_keys(v, &format!("{path}[{i}]"), out);
            }
        }
        _ => {}
    }
}

/// Deserializes the fixture into `T`, serializes it back, and checks that the
/// JSON is the same and that its field names are camelCase.
fn round_trip<T: Serialize + DeserializeOwned>(name: &str) -> T {
    let file = value(name);
    let typed: T = serde_json::from_str(&text(name)).unwrap_or_else(|e| {
        panic!("{name}.json does not deserialize as {}: {e}", std::any::type_name::<T>())
    });
    let back = serde_json::to_value(&typed).unwrap();
    assert_eq!(
        back,
        file,
        "{name}.json does not round-trip as {}:\n  file: {file}\n  back: {back}",
        std::any::type_name::<T>()
    );
    let mut bad = Vec::new();
    non_camel_keys(&back, "$", &mut bad);
    assert!(bad.is_empty(), "{name}.json: field names not camelCase: {bad:?}");
    typed
}

/// Checks the rules a wire ask carries in itself: its id is
/// `ask_id_for(pane, toolCallId)`, its hash is the hash of what it shows,
/// and `readable` says "a choice without an always option".
fn check_ask(ask: &Ask, what: &str) {
    assert_eq!(ask.id, ask_id_for(ask.pane.as_str(), ask.tool_call_id.as_str()), "{what}: id");
    assert!(is_hash(&ask.hash), "{what}: hash shape");
    assert_eq!(ask.compute_hash(), ask.hash, "{what}: hash");
    assert_eq!(ask_hash(&serde_json::to_value(ask).unwrap()), ask.hash, "{what}: hash of the wire object");
    let readable = matches!(ask.kind, AskKind::Choice { .. }) && !ask.kind.has_always();
    assert_eq!(ask.readable, readable, "{what}: readable");
}

// ---------------------------------------------------------------------------
// The lists

type Check = fn(&str);
type Parse = fn(&[u8]) -> Result<(), String>;

/// [`round_trip`] as a [`Check`].
fn rt<T: Serialize + DeserializeOwned>(name: &str) {
    round_trip::<T>(name);
}

/// Responses and cards: deserialized and serialized with serde.
const ROUND_TRIPS: &[(&str, Check)] = &[
    ("hello", rt::<HelloResponse>),
    ("hello_post_request", rt::<HelloRequest>),
    ("hello_post_response", rt::<HelloPostResponse>),
    ("state_full", rt::<StateResponse>),
    ("state_since", rt::<StateResponse>),
    ("events_page", rt::<EventsPage>),
    ("pane_snapshot", rt::<PaneSnapshot>),
    ("item_user", rt::<Item>),
    ("item_reply_partial", rt::<Item>),
    ("item_markdown", rt::<Item>),
    ("item_thinking", rt::<Item>),
    ("item_notice", rt::<Item>),
    ("item_code", rt::<Item>),
    ("item_tool", rt::<Item>),
    ("item_link", rt::<Item>),
    ("item_progress", rt::<Item>),
    ("ask_choice", rt::<Ask>),
    ("ask_choice_always", rt::<Ask>),
    ("ask_multi", rt::<Ask>),
    ("ask_text", rt::<Ask>),
    ("ask_form", rt::<Ask>),
    ("ask_hash_vector", rt::<Ask>),
    ("answer_answered", rt::<WriteResponse>),
    ("answer_held", rt::<WriteResponse>),
    ("write_sent", rt::<WriteResponse>),
    ("write_sent_first_turn", rt::<WriteResponse>),
    ("write_queued", rt::<WriteResponse>),
    ("write_steered", rt::<WriteResponse>),
    ("write_stopped", rt::<WriteResponse>),
    ("write_done", rt::<WriteResponse>),
    ("write_renamed", rt::<WriteResponse>),
    ("write_closed", rt::<WriteResponse>),
    ("write_reopened", rt::<WriteResponse>),
    ("write_started", rt::<WriteResponse>),
    ("error_bad_request", rt::<ErrorBody>),
    ("error_token_refused", rt::<ErrorBody>),
    ("error_caller_refused", rt::<ErrorBody>),
    ("error_not_found", rt::<ErrorBody>),
    ("error_method_not_allowed", rt::<ErrorBody>),
    ("error_not_supported", rt::<ErrorBody>),
    ("error_refused", rt::<ErrorBody>),
    ("error_ask_open", rt::<ErrorBody>),
    ("error_turn_moved", rt::<ErrorBody>),
    ("error_ask_closed", rt::<ErrorBody>),
    ("error_hash_mismatch", rt::<ErrorBody>),
    ("error_confirm_required", rt::<ErrorBody>),
    ("error_busy", rt::<ErrorBody>),
    ("error_too_large", rt::<ErrorBody>),
    ("error_receipt_dropped", rt::<ErrorBody>),
    ("error_internal", rt::<ErrorBody>),
    ("history_page", rt::<HistoryPage>),
    ("history_page_last", rt::<HistoryPage>),
    ("conversation_page", rt::<ConversationPage>),
];

/// Request bodies parsed by functions: each must parse.
const REQUESTS: &[(&str, Parse)] = &[
    ("answer_request", |b| AnswerRequest::parse(b).map(drop)),
    ("answer_request_form", |b| AnswerRequest::parse(b).map(drop)),
    ("send_request", |b| WriteBody::parse_send(b).map(drop)),
    ("steer_request", |b| WriteBody::parse_steer(b).map(drop)),
    ("stop_request", |b| WriteBody::parse_plain(b).map(drop)),
    ("action_request", |b| WriteBody::parse_plain(b).map(drop)),
    ("rename_request", |b| WriteBody::parse_rename(b).map(drop)),
    ("close_request", |b| WriteBody::parse_close(b).map(drop)),
    ("reopen_request", |b| WriteBody::parse_reopen(b).map(drop)),
    ("starter_request", |b| WriteBody::parse_starter(b).map(drop)),
];

#[test]
fn every_fixture_file_is_checked_exactly_once() {
    let on_disk: BTreeSet<String> = std::fs::read_dir(dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .map(|f| f.strip_suffix(".json").unwrap_or_else(|| panic!("not a .json fixture: {f}")).to_owned())
        .collect();
    let listed: Vec<&str> =
        ROUND_TRIPS.iter().map(|(n, _)| *n).chain(REQUESTS.iter().map(|(n, _)| *n)).collect();
    let listed_set: BTreeSet<String> = listed.iter().map(|s| s.to_string()).collect();
    assert_eq!(listed.len(), listed_set.len(), "a fixture is listed twice");
    assert_eq!(on_disk, listed_set, "fixture files and lists differ");
}

#[test]
fn every_message_round_trips_with_camel_case_fields() {
    let mut failures = Vec::new();
    for (name, check) in ROUND_TRIPS {
        if let Err(e) = std::panic::catch_unwind(|| check(name)) {
            let msg = e
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            failures.push(format!("{name}: {msg}"));
        }
    }
    assert!(failures.is_empty(), "{} fixture(s) failed:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn every_request_fixture_parses_with_camel_case_fields() {
    for (name, parse) in REQUESTS {
        parse(text(name).as_bytes()).unwrap_or_else(|e| panic!("{name}.json: {e}"));
        let mut bad = Vec::new();
        non_camel_keys(&value(name), "$", &mut bad);
        // Form answer values are keyed by field ids, which are not field names.
        bad.retain(|p| !p.starts_with("$.answer.values."));
        assert!(bad.is_empty(), "{name}.json: field names not camelCase: {bad:?}");
    }
}

#[test]
fn camel_case_check_refuses_other_styles() {
    for good in ["ok", "requestId", "openAsks", "maxBytes", "lastSeq"] {
        assert!(is_camel_case(good), "{good}");
    }
    for bad in ["request_id", "RequestId", "request-id", "", "turn id"] {
        assert!(!is_camel_case(bad), "{bad}");
    }
}

// ---------------------------------------------------------------------------
// Per message

#[test]
fn hello_fixture_declares_wire_v1_and_every_cap_but_terminal() {
    let hello: HelloResponse = round_trip("hello");
    assert!(hello.ok);
    assert_eq!(hello.wire, WireRange::SDK);
    assert_eq!(hello.sdk.name, durable_types::SDK_NAME);
    assert_eq!(hello.epoch.len(), 16);
    assert!(hello.epoch.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)));
    assert!(["on", "off", "unavailable", "token"].contains(&hello.caller_check.as_str()));
    assert_eq!(durable_types::Caps::from(hello.caps), durable_types::Caps::all());
    assert!(!hello.caps.terminal);

    let req: HelloRequest = round_trip("hello_post_request");
    assert_eq!(req.collie.map(|c| c.version).as_deref(), Some("1.22.0"));
    let resp: HelloPostResponse = round_trip("hello_post_response");
    assert_eq!(resp.compatible, resp.wire.overlaps(req.wire));
}

#[test]
fn state_fixtures_full_has_every_field_and_since_only_the_changes() {
    let full: StateResponse = round_trip("state_full");
    assert!(full.full);
    assert!(full.removed.is_empty(), "a full answer has `removed` empty");
    assert!(full.workspaces.is_some() && full.closed.is_some() && full.starters.is_some());
    let ws = &full.workspaces.as_ref().unwrap()[0];
    for tab in &ws.tabs {
        assert!(tab.id.starts_with(&format!("{}:", ws.id)), "tab wire id is <workspace>:<tab>");
    }
    let nullable = &full.panes[1];
    assert_eq!(nullable.session_id, None);
    assert_eq!(nullable.turn_id, None);
    assert_eq!(nullable.cwd, None);
    let file = value("state_full");
    assert_eq!(file["panes"][1]["sessionId"], Value::Null, "sessionId is null, not absent");
    assert!(file["panes"][1].get("cwd").is_none(), "cwd is absent unless absolute");
    for ask in &full.asks {
        check_ask(ask, "state_full ask");
        assert!(full.panes.iter().any(|p| p.open_asks.contains(&ask.id)));
    }

    let since: StateResponse = round_trip("state_since");
    assert!(!since.full);
    assert!(since.workspaces.is_none() && since.closed.is_none() && since.starters.is_none());
    let file = value("state_since");
    for key in ["workspaces", "closed", "starters"] {
        assert!(file.get(key).is_none(), "state_since has no {key}");
    }
    for key in ["ok", "epoch", "seq", "ready", "full", "panes", "removed", "asks"] {
        assert!(file.get(key).is_some(), "every state answer has {key}");
    }
    assert_eq!(since.epoch, full.epoch);
    assert!(since.seq > full.seq);
}

#[test]
fn events_page_fixture_has_one_event_of_each_type_in_seq_order() {
    let page: EventsPage = round_trip("events_page");
    assert!(!page.snapshot);
    let types: Vec<&str> = page
        .events
        .iter()
        .map(|e| match &e.body {
            EventBody::Item { .. } => "item",
            EventBody::State { .. } => "state",
            EventBody::Ask { .. } => "ask",
            EventBody::AskClosed { .. } => "ask-closed",
            EventBody::Title { .. } => "title",
            _ => "other",
        })
        .collect();
    assert_eq!(types, ["item", "state", "ask", "ask-closed", "title"]);
    let file = value("events_page");
    for (i, e) in page.events.iter().enumerate() {
        assert_eq!(file["events"][i]["type"], types[i], "the wire `type` of event {i}");
        if i > 0 {
            assert_eq!(e.seq, page.events[i - 1].seq + 1);
        }
    }
    assert_eq!(page.next, page.events.last().unwrap().seq, "next is the seq of the last event");
    let Event { body: EventBody::Ask { ask }, .. } = &page.events[2] else { unreachable!() };
    check_ask(ask, "events_page ask");
    let Event { body: EventBody::AskClosed { ask_id, decided_by, .. }, .. } = &page.events[3] else {
        unreachable!()
    };
    assert_eq!(ask_id, &ask.id);
    assert_eq!(*decided_by, DecidedBy::Phone);
}

#[test]
fn pane_snapshot_fixture_has_the_view_and_null_stays_null() {
    let snap: PaneSnapshot = round_trip("pane_snapshot");
    assert!(snap.snapshot);
    assert!(snap.dropped);
    assert_eq!(snap.state, PaneState::Working);
    assert!(snap.items.len() <= durable_types::VIEW_LIMIT);
    for ask in &snap.asks {
        check_ask(ask, "pane_snapshot ask");
    }
}

#[test]
fn item_fixtures_one_per_kind_with_their_optional_fields() {
    let kinds = [
        ("item_user", "user"),
        ("item_reply_partial", "reply"),
        ("item_markdown", "markdown"),
        ("item_thinking", "thinking"),
        ("item_notice", "notice"),
        ("item_code", "code"),
        ("item_tool", "tool"),
        ("item_link", "link"),
        ("item_progress", "progress"),
    ];
    for (name, kind) in kinds {
        let item: Item = round_trip(name);
        assert_eq!(item.body.kind(), kind, "{name}");
        assert_eq!(value(name)["kind"], kind, "{name}");
        // Every fixture follows the item rules as it is.
        let (clean, changed) = item.clone().sanitized().unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(!changed, "{name} is not clean");
        assert_eq!(clean, item);
    }
    let user: Item = round_trip("item_user");
    assert!(matches!(user.body, ItemBody::User { request_id: Some(ref r), .. } if r == "r-10"));
    let reply: Item = round_trip("item_reply_partial");
    assert!(reply.body.is_partial());
    let notice: Item = round_trip("item_notice");
    assert!(matches!(notice.body, ItemBody::Notice { tone: Some(durable_types::NoticeTone::Warn), .. }));
    let code: Item = round_trip("item_code");
    assert!(matches!(code.body, ItemBody::Code { lang: Some(ref l), .. } if l == "json"));
    let tool: Item = round_trip("item_tool");
    assert!(matches!(tool.body, ItemBody::Tool { output: Some(_), badge: Some(_), .. }));
    let progress: Item = round_trip("item_progress");
    assert!(matches!(progress.body, ItemBody::Progress { value, badge: Some(_), .. } if value == 0.4));
    // Absent optional fields stay absent.
    let markdown = value("item_markdown");
    assert!(markdown.get("partial").is_none() && markdown.get("ts").is_none());
}

#[test]
fn ask_fixtures_carry_their_id_hash_and_readable_rules() {
    for name in ["ask_choice", "ask_choice_always", "ask_multi", "ask_text", "ask_form", "ask_hash_vector"] {
        check_ask(&round_trip::<Ask>(name), name);
    }
    let choice: Ask = round_trip("ask_choice");
    assert_eq!(choice.id, "970f8a0b30368fbbcab73013d31d2d51", "the contract's first id vector");
    let tool = choice.tool.as_ref().unwrap();
    assert_eq!(tool.call, durable_types::call_summary("refund", &json!({"order": "5521", "amount": 40})));
    assert!(choice.push.as_ref().is_some_and(|p| p.title.is_some() && p.line.is_some()));
    assert!(choice.readable);

    let always: Ask = round_trip("ask_choice_always");
    assert!(!always.readable && always.is_always_option("allow-always"));

    let multi: Ask = round_trip("ask_multi");
    assert!(matches!(multi.kind, AskKind::Multi { min: Some(1), max: Some(2), .. }));

    let text: Ask = round_trip("ask_text");
    assert!(matches!(
        text.kind,
        AskKind::Text { placeholder: Some(_), multiline: Some(true), max_bytes: Some(4096) }
    ));

    let form: Ask = round_trip("ask_form");
    assert_eq!(form.id, "f5286b923e30e7081ee2a5464db467ec", "the contract's second id vector");
    let AskKind::Form { fields } = &form.kind else { panic!("ask_form is not a form") };
    let types: Vec<_> = fields.iter().map(|f| serde_json::to_value(f.field_type).unwrap()).collect();
    assert_eq!(types, [json!("text"), json!("number"), json!("bool"), json!("select")]);
}

#[test]
fn ask_hash_rule_fixture_gives_the_contract_vector() {
    const VECTOR: &str = "cb8b64234d06250d254d479dcdd28c57083cae57ba257f035c7f409be9de57ce";
    let file = value("ask_hash_vector");
    assert_eq!(
        ask_hash_input(&file),
        r#"{"kind":"choice","options":[{"id":"allow","label":"Allow"},{"id":"deny","label":"Deny"}],"push":{"title":"refund needs a yes"},"title":"refund wants to run","tool":{"args":[["order","\"5521\""],["amount","40"]],"call":"refund(order: \"5521\", amount: 40)","name":"refund"}}"#
    );
    assert_eq!(ask_hash(&file), VECTOR);
    let ask: Ask = round_trip("ask_hash_vector");
    assert_eq!(ask.hash, VECTOR);
    assert_eq!(ask.compute_hash(), VECTOR);
    assert_eq!(ask.id, "970f8a0b30368fbbcab73013d31d2d51");
}

#[test]
fn write_response_fixtures_carry_result_request_id_and_route_fields() {
    let cases: &[(&str, &str, &[&str])] = &[
        ("answer_answered", "answered", &["askId", "decidedBy", "decidedAt"]),
        ("answer_held", "held", &[]),
        ("write_sent", "sent", &["turnId"]),
        ("write_sent_first_turn", "sent", &["turnId"]),
        ("write_queued", "queued", &["turnId"]),
        ("write_steered", "steered", &[]),
        ("write_stopped", "stopped", &[]),
        ("write_done", "done", &[]),
        ("write_renamed", "renamed", &[]),
        ("write_closed", "closed", &[]),
        ("write_reopened", "reopened", &[]),
        ("write_started", "started", &["pane"]),
    ];
    for (name, result, extra) in cases {
        let w: WriteResponse = round_trip(name);
        assert!(w.ok, "{name}");
        assert_eq!(w.result, *result, "{name}");
        let mut keys: Vec<&str> = w.extra.keys().map(String::as_str).collect();
        keys.sort_unstable();
        let mut want = extra.to_vec();
        want.sort_unstable();
        assert_eq!(keys, want, "{name}: route fields");
        for key in ["ok", "result", "requestId", "replayed"] {
            assert!(value(name).get(key).is_some(), "{name}: every write answer has {key}");
        }
    }
    assert_eq!(value("write_sent_first_turn")["turnId"], Value::Null, "turnId is null before any turn");
    let answered: WriteResponse = round_trip("answer_answered");
    assert_eq!(answered.extra["decidedBy"], "phone");
}

#[test]
fn error_fixtures_one_per_code_with_the_fields_it_lists() {
    let cases: &[(&str, &[&str])] = &[
        ("bad-request", &[]),
        ("token-refused", &[]),
        ("caller-refused", &[]),
        ("not-found", &[]),
        ("method-not-allowed", &[]),
        ("not-supported", &[]),
        ("refused", &["reason"]),
        ("ask-open", &["askId"]),
        ("turn-moved", &["turnId"]),
        ("ask-closed", &["decidedAt", "decidedBy"]),
        ("hash-mismatch", &["ask"]),
        ("confirm-required", &[]),
        ("busy", &[]),
        ("too-large", &[]),
        ("receipt-dropped", &[]),
        ("internal", &[]),
    ];
    for (code, extra) in cases {
        let name = format!("error_{}", code.replace('-', "_"));
        let e: ErrorBody = round_trip(&name);
        assert!(!e.ok, "{name}");
        assert_eq!(e.code.as_str(), *code, "{name}");
        assert!(!e.message.is_empty(), "{name}");
        let mut keys: Vec<&str> = e.extra.keys().map(String::as_str).collect();
        keys.sort_unstable();
        assert_eq!(keys, *extra, "{name}: the fields its code lists");
    }
    let mismatch: ErrorBody = round_trip("error_hash_mismatch");
    assert_eq!(mismatch.code, ErrorCode::HashMismatch);
    assert_eq!(mismatch.status(), 409);
    let ask: Ask = serde_json::from_value(mismatch.extra["ask"].clone()).unwrap();
    check_ask(&ask, "error_hash_mismatch ask");
    let closed: ErrorBody = round_trip("error_ask_closed");
    let by: DecidedBy = serde_json::from_value(closed.extra["decidedBy"].clone()).unwrap();
    assert_eq!(by, DecidedBy::Timeout);
    durable_types::Timestamp::parse(closed.extra["decidedAt"].as_str().unwrap()).unwrap();
}

#[test]
fn history_fixtures_next_is_present_or_absent() {
    let page: HistoryPage = round_trip("history_page");
    assert!(page.next.is_some());
    durable_types::Cursor::new(page.next.clone().unwrap()).expect("next follows the cursor rule");
    assert!(page.rows.len() <= 200);
    let last: HistoryPage = round_trip("history_page_last");
    assert!(last.next.is_none());
    assert!(value("history_page_last").get("next").is_none(), "no next ends the list");
    let conv: ConversationPage = round_trip("conversation_page");
    assert!(!conv.dropped);
    assert!(conv.next.is_some());
    assert_eq!(conv.row.id, "ticket-0");
}

// ---------------------------------------------------------------------------
// Requests parsed by functions

#[test]
fn answer_request_fixtures_parse_by_the_step_one_rules() {
    let r = AnswerRequest::parse(text("answer_request").as_bytes()).unwrap();
    assert_eq!(r.request_id, "r-1");
    assert_eq!(r.answer.option_ids.as_deref(), Some(&["allow".to_owned()][..]));
    assert_eq!(r.answer.text, None);
    assert_eq!(r.answer.values, None);
    assert!(!r.confirm_always);
    let choice: Ask = round_trip("ask_choice");
    assert_eq!(r.hash.as_deref(), Some(choice.hash.as_str()));
    let answer = r.answer.fit(&choice.kind).unwrap();
    assert_eq!(answer.option_id(), Some("allow"));

    // The form answer gives its hash in uppercase: it is lowercased.
    let r = AnswerRequest::parse(text("answer_request_form").as_bytes()).unwrap();
    assert_eq!(r.request_id, "r-30");
    let form: Ask = round_trip("ask_form");
    assert_eq!(r.hash.as_deref(), Some(form.hash.as_str()));
    assert!(!r.confirm_always, "confirmAlways defaults to false");
    let answer = r.answer.fit(&form.kind).unwrap();
    let values = answer.values().unwrap();
    assert_eq!(values["replicas"], 3);
    assert_eq!(values["migrate"], true);
    assert_eq!(values["region"], "eu-west");
}

#[test]
fn write_request_fixtures_parse_into_their_fields() {
    match WriteBody::parse_send(text("send_request").as_bytes()).unwrap() {
        WriteBody::Send { request_id, text, turn_id } => {
            assert_eq!(request_id, "r-10");
            assert_eq!(text, "Yes, refund it please — the whole 40 €.");
            assert_eq!(turn_id.clone().flatten().as_deref(), Some("t-7"));
        }
        other => panic!("send: {other:?}"),
    }
    match WriteBody::parse_steer(text("steer_request").as_bytes()).unwrap() {
        WriteBody::Steer { request_id, text } => {
            assert_eq!(request_id, "r-11");
            assert_eq!(text, "Only refund the mug, not the shipping.");
        }
        other => panic!("steer: {other:?}"),
    }
    for (name, id) in [("stop_request", "r-12"), ("action_request", "r-13")] {
        match WriteBody::parse_plain(text(name).as_bytes()).unwrap() {
            WriteBody::Plain { request_id } => assert_eq!(request_id, id, "{name}"),
            other => panic!("{name}: {other:?}"),
        }
    }
    match WriteBody::parse_rename(text("rename_request").as_bytes()).unwrap() {
        WriteBody::Rename { request_id, target, id, title } => {
            assert_eq!(request_id, "r-14");
            assert_eq!(target, Target::Tab);
            assert_eq!(id, "support:main");
            assert_eq!(title, "Open tickets");
        }
        other => panic!("rename: {other:?}"),
    }
    match WriteBody::parse_close(text("close_request").as_bytes()).unwrap() {
        WriteBody::Close { request_id, target, id } => {
            assert_eq!(request_id, "r-15");
            assert_eq!(target, Target::Pane);
            assert_eq!(id, "ticket-0");
        }
        other => panic!("close: {other:?}"),
    }
    match WriteBody::parse_reopen(text("reopen_request").as_bytes()).unwrap() {
        WriteBody::Reopen { request_id, id } => {
            assert_eq!(request_id, "r-16");
            assert_eq!(id, "ticket-0");
        }
        other => panic!("reopen: {other:?}"),
    }
    match WriteBody::parse_starter(text("starter_request").as_bytes()).unwrap() {
        WriteBody::Starter { request_id, text } => {
            assert_eq!(request_id, "r-17");
            assert_eq!(text.as_deref(), Some("Jonas asks about a late parcel"));
        }
        other => panic!("starter: {other:?}"),
    }
}
