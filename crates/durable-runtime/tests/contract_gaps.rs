//! Rules of the contract (`docs/wire.md`) that no other test
//! checked, found by the coverage audit. Each test names the rule (and its
//! section) it checks.
use durable_runtime::test_util as harness;

use std::sync::{Arc, Mutex};

use durable_runtime::types::{AskOption, AskSpec, FieldType, FormField};
use durable_runtime::{Lookup, MemoryReceiptStore, PaneOptions, Receipt, ReceiptStore, StoreError};
use harness::recorder::{Log, PaneExt, Recorder};
use harness::{Harness, Reply};
use serde_json::{Value, json};

const SEND: &str = "/v1/panes/ticket-1/send";
const STEER: &str = "/v1/panes/ticket-1/steer";
const STOP: &str = "/v1/panes/ticket-1/stop";
const REFUND: &str = "/v1/panes/ticket-1/actions/refund";

/// A harness with pane `ticket-1` (action `refund`), a recording pane
/// handler and recording layout hooks, all accepting.
fn setup_with(h: Harness) -> (Harness, durable_runtime::Pane, Log) {
    let pane = h.pane();
    pane.action("refund", "Refund", Some("check")).unwrap();
    let log = Log::default();
    pane.handlers(Recorder::new("pane", &log)).unwrap();
    h.core.set_hooks(Recorder::new("hook", &log));
    (h, pane, log)
}

fn setup() -> (Harness, durable_runtime::Pane, Log) {
    setup_with(Harness::new())
}

fn assert_success(r: &Reply, result: &str, request_id: &str) {
    assert_eq!(r.status, 200, "{:?}", r.json);
    assert_eq!(r.json["ok"], true, "{:?}", r.json);
    assert_eq!(r.json["result"], result, "{:?}", r.json);
    assert_eq!(r.json["requestId"], request_id, "{:?}", r.json);
    assert_eq!(r.json["replayed"], false, "a first run, not a replay: {:?}", r.json);
}

fn assert_bad_request(r: &Reply, what: &str) {
    assert_eq!((r.status, r.code()), (400, "bad-request"), "{what}: {:?}", r.json);
    assert_eq!(r.json["ok"], false, "{what}");
}

fn ids(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap_or_else(|| panic!("an array: {v}"))
        .iter()
        .map(|x| x["id"].as_str().or(x.as_str()).unwrap().to_owned())
        .collect()
}

// ---------------------------------------------------------------------------
// §3 Hello and versions

/// §3: `GET /hello` has no version prefix; every other route is under `/v1/`.
#[tokio::test]
async fn versions_rule_every_route_but_hello_is_under_v1() {
    let (h, _pane, log) = setup();
    for path in ["/state", "/panes/ticket-1/events", "/history", "/v1/hello"] {
        let r = h.get(path).await;
        assert_eq!((r.status, r.code()), (404, "not-found"), "GET {path}");
    }
    for path in [
        "/asks/970f8a0b30368fbbcab73013d31d2d51",
        "/panes/ticket-1/send",
        "/rename",
        "/close",
        "/reopen",
        "/starters/new",
    ] {
        let r = h.post(path, json!({"requestId": "r-1", "text": "hi"})).await;
        assert_eq!((r.status, r.code()), (404, "not-found"), "POST {path}");
    }
    assert!(log.calls().is_empty(), "nothing ran: {:?}", log.calls());
    assert_eq!(h.get("/hello").await.status, 200);
    assert_eq!(h.get("/v1/state").await.status, 200);
}

// ---------------------------------------------------------------------------
// §5 State: what a `since` answer carries

/// Applies `change` and returns the `since` answer, checked to be a layout
/// change: not full, `seq` grown, `workspaces`, `closed` and `starters` there.
async fn layout_change(h: &Harness, what: &str, change: impl FnOnce()) -> Value {
    let n = h.seq().await;
    change();
    let j = h.state_since(n).await.json;
    assert_eq!(j["full"], false, "{what}: {j}");
    assert!(j["seq"].as_u64().unwrap() > n, "{what}: seq did not grow");
    for field in ["workspaces", "closed", "starters"] {
        assert!(j[field].is_array(), "{what}: `{field}` missing in {j}");
    }
    j
}

/// §5: a layout change (a workspace or tab added, removed or renamed, a pane
/// added to a tab, the closed list, the starters) brings all three of
/// `workspaces`, `closed` and `starters`, and moves `seq`.
#[tokio::test]
async fn state_since_layout_change_brings_workspaces_closed_and_starters_for_every_kind_of_change() {
    let h = Harness::with_caps(durable_runtime::types::Caps::all());
    h.pane_named("a");
    let c = h.pane_named("c");
    h.core.starter("s", "Start").unwrap();
    let j = layout_change(&h, "workspace added", || {
        h.core.workspace("ops", "Ops").unwrap();
    })
    .await;
    assert_eq!(ids(&j["workspaces"]), ["support", "ops"]);
    let j = layout_change(&h, "tab added", || {
        h.core.workspace("ops", "Ops").unwrap().tab("night", "Night").unwrap();
    })
    .await;
    assert_eq!(ids(&j["workspaces"][1]["tabs"]), ["ops:night"]);
    let j = layout_change(&h, "pane added to a tab", || {
        h.core
            .workspace("ops", "Ops")
            .unwrap()
            .tab("night", "Night")
            .unwrap()
            .pane("b", PaneOptions::new("B"))
            .unwrap();
    })
    .await;
    assert_eq!(j["workspaces"][1]["tabs"][0]["panes"], json!(["b"]));
    let j = layout_change(&h, "workspace renamed", || {
        h.core.workspace("ops", "Ops").unwrap().rename("Operations").unwrap()
    })
    .await;
    assert_eq!(j["workspaces"][1]["title"], "Operations");
    let j = layout_change(&h, "tab removed", || {
        h.core.workspace("ops", "Ops").unwrap().tab("night", "Night").unwrap().close();
    })
    .await;
    assert_eq!(j["workspaces"][1]["tabs"], json!([]));
    assert_eq!(j["removed"], json!(["b"]));
    let j = layout_change(&h, "workspace removed", || h.core.workspace("ops", "Ops").unwrap().close()).await;
    assert_eq!(ids(&j["workspaces"]), ["support"]);
    let j = layout_change(&h, "starter removed", || h.core.remove_starter("s")).await;
    assert_eq!(j["starters"], json!([]));
    // The closed list changes when a closed pane is reopened.
    c.close();
    let n = h.seq().await;
    let r = h.post("/v1/reopen", json!({"requestId": "o-1", "id": "c"})).await;
    assert_eq!(r.status, 200, "{:?}", r.json);
    let j = h.state_since(n).await.json;
    for field in ["workspaces", "closed", "starters"] {
        assert!(j[field].is_array(), "reopen: `{field}` missing in {j}");
    }
    assert!(!ids(&j["closed"]).contains(&"c".to_owned()), "{j}");
}

/// What changed, the pane field it shows in, and how to change it.
type Change<'a> = (&'static str, &'static str, Box<dyn Fn() + 'a>);

/// §5: `since` returns `panes` of which any field changed (title, state,
/// turnId, openAsks, actions, lastSeq), and only those.
#[tokio::test]
async fn state_since_lists_a_pane_when_any_of_its_fields_changed() {
    let h = Harness::new();
    let a = h.pane_named("a");
    h.pane_named("b");
    let ask_id = std::cell::RefCell::new(String::new());
    let changes: Vec<Change<'_>> = vec![
        ("title", "title", Box::new(|| a.rename("Renamed").unwrap())),
        ("working", "state", Box::new(|| a.working("t-1").unwrap())),
        ("idle", "state", Box::new(|| a.idle().unwrap())),
        ("action added", "actions", Box::new(|| a.action("go", "Go", None).unwrap())),
        ("action removed", "actions", Box::new(|| a.remove_action("go"))),
        (
            "ask raised",
            "openAsks",
            Box::new(|| {
                let ask = a.ask(AskSpec::choice("c-1", "Go?", [AskOption::new("yes", "Yes")])).unwrap();
                *ask_id.borrow_mut() = ask.id().to_owned();
            }),
        ),
        (
            "ask decided",
            "openAsks",
            Box::new(|| {
                a.decide(&ask_id.borrow(), durable_runtime::types::Answer::option("yes")).unwrap();
            }),
        ),
    ];
    for (what, field, change) in changes {
        let before = h.state().await.json["panes"][0].clone();
        let n = h.seq().await;
        change();
        let j = h.state_since(n).await.json;
        assert_eq!(ids(&j["panes"]), ["a"], "{what}: {j}");
        assert_ne!(j["panes"][0][field], before[field], "{what}: `{field}` did not change");
        // The pane is sent whole, not as a patch.
        assert_eq!(j["panes"][0]["id"], "a");
        assert!(j["panes"][0]["tab"].is_string() && j["panes"][0]["lastSeq"].is_u64(), "{what}: {j}");
    }
}

/// §5: a `since` answer carries `asks`: all open asks, always, oldest first,
/// even those raised before `since` and on panes that did not change.
#[tokio::test]
async fn state_since_carries_every_open_ask_always() {
    let h = Harness::new();
    let a = h.pane_named("a");
    let b = h.pane_named("b");
    let first = b.ask(AskSpec::choice("c-1", "First?", [AskOption::new("yes", "Yes")])).unwrap();
    h.clock.advance(1);
    let second = a.ask(AskSpec::choice("c-2", "Second?", [AskOption::new("yes", "Yes")])).unwrap();
    let n = h.seq().await;
    a.write(durable_runtime::types::Item::new(
        durable_runtime::types::Id::new("r1").unwrap(),
        durable_runtime::types::ItemBody::Reply { text: "hi".into(), partial: false },
    ))
    .unwrap();
    let j = h.state_since(n).await.json;
    assert_eq!(ids(&j["panes"]), ["a"]);
    assert_eq!(ids(&j["asks"]), [first.id(), second.id()], "all open asks, oldest first: {j}");
    assert_eq!(j["asks"][0]["hash"].as_str().map(str::len), Some(64), "full ask objects");
    // Nothing changed at all: still every open ask.
    let now = h.seq().await;
    let j = h.state_since(now).await.json;
    assert_eq!(j["panes"], json!([]));
    assert_eq!(ids(&j["asks"]), [first.id(), second.id()]);
}

// ---------------------------------------------------------------------------
// §7 Asks: card limits

/// §7: `multi` takes 1 to 16 options, `form` 1 to 16 fields, and a `text`
/// ask's `maxBytes` is at most 64 KiB; beyond is an `Err`, never sent.
#[tokio::test]
async fn ask_multi_1_to_16_options_form_1_to_16_fields_text_max_bytes_at_most_64_kib() {
    let h = Harness::new();
    let pane = h.pane();
    let opts = |n: usize| (0..n).map(|i| AskOption::new(format!("o{i}"), "x")).collect::<Vec<_>>();
    let fields =
        |n: usize| (0..n).map(|i| FormField::new(format!("f{i}"), "F", FieldType::Text)).collect::<Vec<_>>();
    assert!(pane.ask(AskSpec::multi("m16", "t", opts(16))).is_ok());
    assert!(pane.ask(AskSpec::multi("m17", "t", opts(17))).is_err(), "17 options");
    assert!(pane.ask(AskSpec::multi("m0", "t", opts(0))).is_err(), "no option");
    assert!(pane.ask(AskSpec::form("f16", "t", fields(16))).is_ok());
    assert!(pane.ask(AskSpec::form("f17", "t", fields(17))).is_err(), "17 fields");
    assert!(pane.ask(AskSpec::text("t64", "t").text_field(None, None, Some(64 * 1024))).is_ok());
    assert!(
        pane.ask(AskSpec::text("t65", "t").text_field(None, None, Some(64 * 1024 + 1))).is_err(),
        "maxBytes over 64 KiB"
    );
    let open = h.open_ask_ids().await;
    assert_eq!(open.len(), 3, "only the three valid asks were raised: {open:?}");
}

/// §7: `reason` is cut at 2 KiB, an option label at 64 bytes, a push line at
/// 120 characters (on a UTF-8 boundary), and the ask says `cleaned`.
#[tokio::test]
async fn ask_reason_2_kib_option_label_64_bytes_push_line_120_characters() {
    let h = Harness::new();
    let pane = h.pane();
    let spec = AskSpec::choice("c-1", "Go?", [AskOption::new("yes", format!("Y{}", "é".repeat(40)))])
        .reason(format!("r{}", "é".repeat(2000)))
        .push_line("é".repeat(130));
    let ask = pane.ask(spec).unwrap();
    let j = h.state().await.json;
    let a = j["asks"].as_array().unwrap().iter().find(|a| a["id"] == ask.id()).unwrap().clone();
    let reason = a["reason"].as_str().unwrap();
    assert_eq!(reason.len(), 2047, "2048 would split an é: {}", reason.len());
    let label = a["options"][0]["label"].as_str().unwrap();
    assert_eq!(label.len(), 63, "64 would split an é");
    assert_eq!(a["push"]["line"].as_str().unwrap().chars().count(), 120);
    assert_eq!(a["cleaned"], true);
    // Within the limits nothing is cut.
    let spec = AskSpec::choice("c-2", "Go?", [AskOption::new("yes", "Y".repeat(64))])
        .reason("r".repeat(2048))
        .push_line("l".repeat(120));
    let ask = pane.ask(spec).unwrap();
    let j = h.state().await.json;
    let a = j["asks"].as_array().unwrap().iter().find(|a| a["id"] == ask.id()).unwrap().clone();
    assert_eq!(a["reason"].as_str().unwrap().len(), 2048);
    assert_eq!(a["options"][0]["label"].as_str().unwrap().len(), 64);
    assert_eq!(a["push"]["line"].as_str().unwrap().chars().count(), 120);
    assert_eq!(a["cleaned"], false);
}

// ---------------------------------------------------------------------------
// §2 The ID rule for action, starter and request ids

/// §2: an action or starter id breaking the ID rule is an invalid-argument
/// `Err` in the SDK's API.
#[tokio::test]
async fn id_rule_in_the_api_action_and_starter_ids_are_invalid_argument_errs() {
    let h = Harness::new();
    let pane = h.pane();
    let long = "x".repeat(129);
    for bad in ["", "a b", "a/b", "a?b", "a#b", "a\u{7}b", long.as_str()] {
        let e = pane.action(bad, "Label", None).unwrap_err();
        assert!(e.is_invalid_argument(), "action {bad:?}: {e:?}");
        let e = h.core.starter(bad, "Label").unwrap_err();
        assert!(e.is_invalid_argument(), "starter {bad:?}: {e:?}");
        let e = pane.ask(AskSpec::choice("c-1", "t", [AskOption::new("y", "Y")]).item_id(bad)).unwrap_err();
        assert!(e.is_invalid_argument(), "ask itemId {bad:?}: {e:?}");
    }
    let j = h.state().await.json;
    assert_eq!(j["panes"][0]["actions"], json!([]));
    assert_eq!(j["starters"], json!([]));
    assert_eq!(j["asks"], json!([]));
}

/// §2: in a request, an action or starter id (path, percent-decoded) or a
/// request id (body) breaking the ID rule is `400 bad-request`, on every
/// write route, and nothing runs.
#[tokio::test]
async fn id_rule_in_requests_action_starter_and_request_ids_are_400() {
    let (h, _pane, log) = setup();
    h.core.starter("new", "New").unwrap();
    for path in ["/v1/panes/ticket-1/actions/a%20b", "/v1/panes/ticket-1/actions/a%2Fb"] {
        assert_bad_request(&h.post(path, json!({"requestId": "r-1"})).await, path);
    }
    for path in ["/v1/starters/a%3Fb", "/v1/starters/a%23b", "/v1/starters/a%0Ab"] {
        assert_bad_request(&h.post(path, json!({"requestId": "r-1"})).await, path);
    }
    let long = "r".repeat(129);
    for rid in [json!(""), json!("a b"), json!("a/b"), json!("a\tb"), json!(long), json!(7), Value::Null] {
        for (path, mut body) in [
            (SEND, json!({"text": "hi"})),
            (STEER, json!({"text": "hi"})),
            (STOP, json!({})),
            (REFUND, json!({})),
            ("/v1/rename", json!({"target": "pane", "id": "ticket-1", "title": "x"})),
            ("/v1/close", json!({"target": "pane", "id": "ticket-1"})),
            ("/v1/reopen", json!({"id": "ticket-1"})),
            ("/v1/starters/new", json!({})),
        ] {
            body["requestId"] = rid.clone();
            assert_bad_request(&h.post(path, body).await, &format!("{path} requestId {rid}"));
        }
    }
    assert!(log.calls().is_empty(), "nothing ran: {:?}", log.calls());
}

// ---------------------------------------------------------------------------
// §2 Request bodies

/// §2: unknown fields in a request are ignored (forward compatibility), on
/// every write route.
#[tokio::test]
async fn unknown_fields_are_ignored_in_every_write_request() {
    let (h, pane, log) = setup();
    h.core.starter("new", "New").unwrap();
    let extra = |mut body: Value| {
        body["fromTheFuture"] = json!({"anything": [1, 2]});
        body["x"] = Value::Null;
        body
    };
    assert_success(&h.post(SEND, extra(json!({"requestId": "w-1", "text": "hi"}))).await, "sent", "w-1");
    pane.working("t-1").unwrap();
    assert_success(
        &h.post(STEER, extra(json!({"requestId": "w-2", "text": "more"}))).await,
        "steered",
        "w-2",
    );
    assert_success(&h.post(STOP, extra(json!({"requestId": "w-3"}))).await, "stopped", "w-3");
    pane.idle().unwrap();
    assert_success(&h.post(REFUND, extra(json!({"requestId": "w-4"}))).await, "done", "w-4");
    let body = json!({"requestId": "w-5", "target": "pane", "id": "ticket-1", "title": "New"});
    assert_success(&h.post("/v1/rename", extra(body)).await, "renamed", "w-5");
    let body = json!({"requestId": "w-6", "target": "pane", "id": "ticket-1"});
    assert_success(&h.post("/v1/close", extra(body)).await, "closed", "w-6");
    let body = json!({"requestId": "w-7", "id": "ticket-1"});
    assert_success(&h.post("/v1/reopen", extra(body)).await, "reopened", "w-7");
    let body = json!({"requestId": "w-8", "text": "go"});
    assert_success(&h.post("/v1/starters/new", extra(body)).await, "started", "w-8");
    for rid in ["w-1", "w-2", "w-3", "w-4", "w-5", "w-6", "w-7", "w-8"] {
        assert_eq!(log.count(rid), 1, "{rid} ran once: {:?}", log.calls());
    }
}

/// §2: a write body with a missing field or a field of the wrong JSON type
/// is `400 bad-request` and runs nothing.
#[tokio::test]
async fn write_body_with_a_missing_or_mistyped_field_is_400_bad_request() {
    let (h, pane, log) = setup();
    h.core.starter("new", "New").unwrap();
    pane.working("t-1").unwrap();
    let cases: Vec<(&str, Value)> = vec![
        (SEND, json!({"requestId": "b-1", "text": 5})),
        (SEND, json!({"requestId": "b-2", "text": "hi", "turnId": 5})),
        (STEER, json!({"requestId": "b-4"})),
        (STEER, json!({"requestId": "b-5", "text": ["x"]})),
        ("/v1/rename", json!({"requestId": "b-6", "target": "pane", "id": "ticket-1"})),
        ("/v1/rename", json!({"requestId": "b-7", "target": "pane", "id": "ticket-1", "title": 5})),
        ("/v1/rename", json!({"requestId": "b-8", "id": "ticket-1", "title": "x"})),
        ("/v1/rename", json!({"requestId": "b-9", "target": "pane", "title": "x"})),
        ("/v1/close", json!({"requestId": "b-10", "id": "ticket-1"})),
        ("/v1/close", json!({"requestId": "b-11", "target": "pane"})),
        ("/v1/close", json!({"requestId": "b-12", "target": 1, "id": "ticket-1"})),
        ("/v1/close", json!({"requestId": "b-13", "target": "pane", "id": 1})),
        ("/v1/reopen", json!({"requestId": "b-14"})),
        ("/v1/reopen", json!({"requestId": "b-15", "id": 1})),
        ("/v1/starters/new", json!({"requestId": "b-16", "text": 5})),
        (SEND, json!(["requestId", "b-17"])),
        (STOP, json!("b-18")),
    ];
    for (path, body) in cases {
        assert_bad_request(&h.post(path, body.clone()).await, &format!("{path} {body}"));
    }
    assert!(log.calls().is_empty(), "nothing ran: {:?}", log.calls());
    assert!(pane.is_open());
    assert_eq!(h.state().await.json["panes"][0]["title"], "Maria Lopez");
}

// ---------------------------------------------------------------------------
// §9 Receipts

/// A store that records the group of every `put`.
#[derive(Clone, Default)]
struct GroupStore {
    inner: Arc<MemoryReceiptStore>,
    puts: Arc<Mutex<Vec<(String, String)>>>,
}

impl ReceiptStore for GroupStore {
    async fn get(&self, request_id: &str) -> Result<Lookup, StoreError> {
        self.inner.get(request_id).await
    }
    async fn put(&self, request_id: &str, receipt: Receipt, group: &str) -> Result<(), StoreError> {
        self.puts.lock().unwrap().push((request_id.to_owned(), group.to_owned()));
        self.inner.put(request_id, receipt, group).await
    }
}

/// §9: groups are `pane:<paneId>` for sends, steers, stops and actions, and
/// `starters`, `renames`, `closes`, `reopens` for the layout writes.
#[tokio::test]
async fn receipt_groups_are_pane_for_pane_writes_and_named_groups_for_layout_writes() {
    let store = GroupStore::default();
    let puts = store.puts.clone();
    let (h, pane, _log) = setup_with(Harness::with(|b| b.receipts(store)));
    h.core.starter("new", "New").unwrap();
    assert_eq!(h.post(SEND, json!({"requestId": "g-1", "text": "hi"})).await.status, 200);
    pane.working("t-1").unwrap();
    assert_eq!(h.post(STEER, json!({"requestId": "g-2", "text": "more"})).await.status, 200);
    assert_eq!(h.post(STOP, json!({"requestId": "g-3"})).await.status, 200);
    pane.idle().unwrap();
    assert_eq!(h.post(REFUND, json!({"requestId": "g-4"})).await.status, 200);
    let r = h
        .post("/v1/rename", json!({"requestId": "g-5", "target": "pane", "id": "ticket-1", "title": "New"}))
        .await;
    assert_eq!(r.status, 200);
    let r = h.post("/v1/close", json!({"requestId": "g-6", "target": "pane", "id": "ticket-1"})).await;
    assert_eq!(r.status, 200);
    assert_eq!(h.post("/v1/reopen", json!({"requestId": "g-7", "id": "ticket-1"})).await.status, 200);
    assert_eq!(h.post("/v1/starters/new", json!({"requestId": "g-8"})).await.status, 200);
    let puts = puts.lock().unwrap().clone();
    let expected: Vec<(String, String)> = [
        ("g-1", "pane:ticket-1"),
        ("g-2", "pane:ticket-1"),
        ("g-3", "pane:ticket-1"),
        ("g-4", "pane:ticket-1"),
        ("g-5", "renames"),
        ("g-6", "closes"),
        ("g-7", "reopens"),
        ("g-8", "starters"),
    ]
    .iter()
    .map(|(a, b)| (a.to_string(), b.to_string()))
    .collect();
    assert_eq!(puts, expected);
}

/// §9: every refusal (4xx) stores nothing, so the same request id may be
/// tried again later and then runs (`replayed: false`) — on the write routes
/// (the answer route is checked in `receipts.rs`).
#[tokio::test]
async fn receipts_every_write_refusal_stores_nothing_so_the_same_request_id_runs_later() {
    let (h, pane, log) = setup();
    // 400: text over 64 KiB, then the same id with a text that fits.
    let big = "x".repeat(64 * 1024 + 1);
    assert_eq!(h.post(SEND, json!({"requestId": "q-1", "text": big})).await.status, 400);
    assert_success(&h.post(SEND, json!({"requestId": "q-1", "text": "hi"})).await, "sent", "q-1");
    // 404: an unknown pane, which then appears.
    let ghost = "/v1/panes/ghost/send";
    assert_eq!(h.post(ghost, json!({"requestId": "q-2", "text": "hi"})).await.status, 404);
    let g = h.pane_named("ghost");
    g.handlers(Recorder::new("ghost", &log)).unwrap();
    assert_success(&h.post(ghost, json!({"requestId": "q-2", "text": "hi"})).await, "sent", "q-2");
    // 409 turn-moved: a turn id that is not the pane's, then without it.
    pane.working("t-1").unwrap();
    pane.idle().unwrap();
    let r = h.post(SEND, json!({"requestId": "q-3", "text": "hi", "turnId": "t-0"})).await;
    assert_eq!((r.status, r.code()), (409, "turn-moved"), "{:?}", r.json);
    assert_success(
        &h.post(SEND, json!({"requestId": "q-3", "text": "hi", "turnId": "t-1"})).await,
        "sent",
        "q-3",
    );
    // 409 not-supported: a pane with no handler, then given one.
    let bare = h.pane_named("bare");
    let path = "/v1/panes/bare/send";
    let r = h.post(path, json!({"requestId": "q-4", "text": "hi"})).await;
    assert_eq!((r.status, r.code()), (409, "not-supported"));
    bare.handlers(Recorder::new("bare", &log)).unwrap();
    assert_success(&h.post(path, json!({"requestId": "q-4", "text": "hi"})).await, "sent", "q-4");
    // 404: rename of an unknown pane, then of a known one.
    let rename = |id: &str| json!({"requestId": "q-5", "target": "pane", "id": id, "title": "T"});
    assert_eq!(h.post("/v1/rename", rename("nobody")).await.status, 404);
    assert_success(&h.post("/v1/rename", rename("ticket-1")).await, "renamed", "q-5");
    // 404: an unknown action id, then a known one.
    assert_eq!(h.post("/v1/panes/ticket-1/actions/later", json!({"requestId": "q-6"})).await.status, 404);
    pane.action("later", "Later", None).unwrap();
    let r = h.post("/v1/panes/ticket-1/actions/later", json!({"requestId": "q-6"})).await;
    assert_success(&r, "done", "q-6");
    for rid in ["q-1", "q-2", "q-3", "q-4", "q-6"] {
        assert_eq!(log.count(rid), 1, "{rid} ran once: {:?}", log.calls());
    }
}

// ---------------------------------------------------------------------------
// §2 Conventions, over real responses

/// Walks every key of `v`: checks it is camelCase, and that every time field
/// (`ts`, `…At`) is an RFC 3339 UTC string with milliseconds.
fn check_conventions(v: &Value, at: &str, times: &mut usize) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                let camel = k.chars().next().is_some_and(|c| c.is_ascii_lowercase())
                    && k.chars().all(|c| c.is_ascii_alphanumeric());
                assert!(camel, "{at}: key {k:?} is not camelCase");
                if (k == "ts" || k.ends_with("At")) && !x.is_null() {
                    let t = x.as_str().unwrap_or_else(|| panic!("{at}.{k}: a string, got {x}"));
                    let b = t.as_bytes();
                    let shape = b.len() == 24
                        && b.iter().enumerate().all(|(i, c)| match i {
                            4 | 7 => *c == b'-',
                            10 => *c == b'T',
                            13 | 16 => *c == b':',
                            19 => *c == b'.',
                            23 => *c == b'Z',
                            _ => c.is_ascii_digit(),
                        });
                    assert!(shape, "{at}.{k}: {t:?} is not RFC 3339 UTC with milliseconds");
                    *times += 1;
                }
                check_conventions(x, &format!("{at}.{k}"), times);
            }
        }
        Value::Array(a) => {
            a.iter().enumerate().for_each(|(i, x)| check_conventions(x, &format!("{at}[{i}]"), times))
        }
        _ => {}
    }
}

/// §2 "Field names are camelCase" and "Times are RFC 3339 UTC strings with
/// milliseconds", checked on the responses the core really sends (hello,
/// state, events, the snapshot, answers, writes, failures, history).
#[tokio::test]
async fn conventions_rule_response_keys_are_camel_case_and_times_rfc3339_utc_with_milliseconds() {
    use durable_runtime::types::{Badge, BadgeTone, Id, Item, ItemBody, ToolInfo, ToolStatus};
    let (h, pane, _log) = setup();
    h.core.history(harness::EmptyHistory);
    h.core.starter("new", "New").unwrap();
    h.clock.advance(1_234);
    let item = |id: &str, body| Item::new(Id::new(id).unwrap(), body);
    pane.write(item(
        "t",
        ItemBody::Tool {
            name: "refund".into(),
            call: "refund()".into(),
            status: ToolStatus::Ok,
            output: Some("done".into()),
            badge: Some(Badge::new("ok", BadgeTone::Good)),
        },
    ))
    .unwrap();
    pane.write(item("p", ItemBody::Progress { label: "half".into(), value: 0.5, badge: None })).unwrap();
    let open = pane
        .ask(
            AskSpec::choice("c-1", "Go?", [AskOption::new("yes", "Yes")])
                .tool(ToolInfo::from_call("refund", &json!({"orderId": "5521"})))
                .push_title("Go")
                .expires_in_ms(60_000),
        )
        .unwrap();
    let answered = pane.ask(AskSpec::choice("c-2", "Now?", [AskOption::new("yes", "Yes")])).unwrap();
    let expiring = pane.ask(AskSpec::text("c-3", "Why?").expires_in_ms(10)).unwrap();
    let mut replies = Vec::new();
    replies
        .push(h.answer(answered.id(), json!({"requestId": "a-1", "answer": {"optionIds": ["yes"]}})).await);
    replies
        .push(h.answer(answered.id(), json!({"requestId": "a-2", "answer": {"optionIds": ["yes"]}})).await);
    let stale = json!({"requestId": "a-3", "answer": {"optionIds": ["yes"]}, "hash": "0".repeat(64)});
    replies.push(h.answer(open.id(), stale).await);
    h.advance(20).await;
    drop(expiring);
    replies.push(h.post(SEND, json!({"requestId": "s-1", "text": "hi"})).await);
    replies.push(h.post("/v1/starters/new", json!({"requestId": "s-2"})).await);
    replies.push(h.get("/hello").await);
    replies
        .push(h.post("/hello", json!({"collie": {"version": "1.0.0"}, "wire": {"min": 1, "max": 1}})).await);
    replies.push(h.state().await);
    replies.push(h.events("ticket-1", 0).await);
    replies.push(h.events("ticket-1", 999).await);
    replies.push(h.get("/v1/history").await);
    replies.push(h.get("/v1/nowhere").await);
    let mut times = 0;
    for r in &replies {
        check_conventions(&r.json, &format!("{} {}", r.status, r.json), &mut times);
    }
    // decidedAt (answer, ask-closed, 409 ask-closed), createdAt, expiresAt, ts.
    assert!(times >= 10, "only {times} time fields seen");
}
