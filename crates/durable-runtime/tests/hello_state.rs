//! Contract §2–§5: hello and versions, capabilities, the state poll, the
//! program's layout handles, and the error table for malformed requests.
use durable_runtime::test_util as harness;

use durable_runtime::types::exchange::{Caller, Request};
use durable_runtime::types::{Cap, Caps, Item, ItemBody, PaneState, RuleKind};
use durable_runtime::{CallerCheckMode, CoreOptions, ManualClock, PaneOptions};
use harness::{EmptyHistory, Harness};
use serde_json::{Value, json};

fn id(s: &str) -> durable_runtime::types::Id {
    durable_runtime::types::Id::new(s).unwrap()
}

fn reply(item: &str, text: &str) -> Item {
    Item::new(id(item), ItemBody::Reply { text: text.into(), partial: false })
}

fn keys(v: &Value) -> Vec<String> {
    let mut k: Vec<String> = v.as_object().unwrap().keys().cloned().collect();
    k.sort();
    k
}

// ---------------------------------------------------------------------------
// §3 Hello

#[tokio::test]
async fn hello_get_has_the_contract_shape() {
    let h = Harness::new();
    let r = h.get("/hello").await;
    assert_eq!(r.status, 200);
    let j = &r.json;
    assert_eq!(j["ok"], true);
    assert_eq!(j["wire"], json!({"min": 1, "max": 1}));
    assert_eq!(j["sdk"]["name"], "durable-sdk");
    assert_eq!(j["sdk"]["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(j["host"], "desk");
    assert_eq!(j["runtime"], "rust");
    assert_eq!(j["ready"], false);
    assert_eq!(j["epoch"], "0123456789abcdef");
    assert_eq!(j["callerCheck"], "unavailable");
    assert_eq!(
        keys(j),
        ["callerCheck", "caps", "epoch", "host", "ok", "ready", "runtime", "sdk", "wire"].map(String::from)
    );
}

#[tokio::test]
async fn hello_caps_object_names_every_cap_and_terminal_is_false() {
    let h = Harness::without_history();
    let caps = h.get("/hello").await.json["caps"].clone();
    assert_eq!(
        caps,
        json!({"asks": true, "starters": false, "send": false, "steer": false, "abort": false, "rename": false,
               "close": false, "actions": false, "history": false, "reopen": false, "terminal": false})
    );
    // The default store keeps conversations: history is the SDK's own.
    let h = Harness::new();
    assert_eq!(h.get("/hello").await.json["caps"]["history"], true);
    // Even a core given every cap by name says terminal false.
    let h = Harness::with_caps(Caps::all().with(Cap::Terminal));
    assert_eq!(h.get("/hello").await.json["caps"]["terminal"], false);
}

#[tokio::test]
async fn hello_ready_is_false_until_ready_is_called() {
    let h = Harness::new();
    assert_eq!(h.get("/hello").await.json["ready"], false);
    assert_eq!(h.state().await.json["ready"], false);
    h.core.ready();
    assert_eq!(h.get("/hello").await.json["ready"], true);
    assert_eq!(h.state().await.json["ready"], true);
}

#[tokio::test]
async fn hello_caller_check_says_what_the_transport_set() {
    let h = Harness::new();
    for (mode, name) in [
        (CallerCheckMode::On, "on"),
        (CallerCheckMode::Off, "off"),
        (CallerCheckMode::Unavailable, "unavailable"),
        (CallerCheckMode::Token, "token"),
    ] {
        h.core.driver().set_caller_check(mode);
        assert_eq!(h.get("/hello").await.json["callerCheck"], name);
    }
}

#[test]
fn epoch_is_16_lowercase_hex_characters() {
    let build = |epoch: &str| {
        CoreOptions::builder()
            .clock(ManualClock::default())
            .epoch(epoch)
            .build()
            .map(|o| o.epoch().to_owned())
    };
    assert_eq!(build("0123456789abcdef").unwrap(), "0123456789abcdef");
    for bad in ["0123456789ABCDEF", "0123456789abcde", "0123456789abcdef0", "0123456789abcdeg", ""] {
        assert!(build(bad).is_err(), "{bad:?}");
    }
    // Without an epoch the core cannot be built: it reads no random source.
    assert!(CoreOptions::builder().clock(ManualClock::default()).build().is_err());
}

#[tokio::test]
async fn hello_post_compatible_range_answers_compatible_true_and_warns_nothing() {
    let h = Harness::new();
    for wire in [json!({"min": 1, "max": 1}), json!({"min": 1, "max": 2}), json!({"min": 0, "max": 1})] {
        let r = h.post("/hello", json!({"collie": {"version": "1.22.0"}, "wire": wire})).await;
        assert_eq!(r.status, 200);
        assert_eq!(r.json, json!({"ok": true, "wire": {"min": 1, "max": 1}, "compatible": true}));
    }
    assert!(h.warns().is_empty(), "{:?}", h.warns());
}

#[tokio::test]
async fn hello_post_incompatible_warns_once_per_collie_version() {
    let h = Harness::new();
    let body = |v: &str| json!({"collie": {"version": v}, "wire": {"min": 2, "max": 2}});
    let r = h.post("/hello", body("1.22.0")).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json, json!({"ok": true, "wire": {"min": 1, "max": 1}, "compatible": false}));
    h.post("/hello", body("1.22.0")).await;
    assert_eq!(
        h.warns(),
        ["collie: Collie speaks wire v2, this durable agent speaks v1. Update the agent's SDK, or Collie."]
    );
    // Another Collie version warns again, once.
    h.post("/hello", body("1.23.0")).await;
    h.post("/hello", body("1.23.0")).await;
    assert_eq!(h.warns().len(), 2);
}

/// The versions remembered are bounded (64), since any caller may say
/// hello: a flood of made-up versions makes the oldest forgotten, and a
/// real Collie after it is still warned about, once.
#[tokio::test]
async fn a_flood_of_made_up_versions_does_not_silence_the_next_collie() {
    let h = Harness::new();
    let body = |v: &str| json!({"collie": {"version": v}, "wire": {"min": 9, "max": 9}});
    for n in 0..100 {
        h.post("/hello", body(&format!("junk-{n}"))).await;
    }
    assert_eq!(h.warns().len(), 100, "each new version warned about once");
    h.post("/hello", body("1.30.0")).await;
    h.post("/hello", body("1.30.0")).await;
    assert_eq!(h.warns().len(), 101, "the real Collie after the flood: warned about, once");
    // The newest of the flood are still remembered; its oldest are not.
    h.post("/hello", body("junk-99")).await;
    assert_eq!(h.warns().len(), 101);
    h.post("/hello", body("junk-0")).await;
    assert_eq!(h.warns().len(), 102);
}

#[tokio::test]
async fn hello_post_incompatible_range_is_written_v2_dot_dot_3() {
    let h = Harness::new();
    let r = h.post("/hello", json!({"collie": {"version": "2.0.0"}, "wire": {"min": 2, "max": 3}})).await;
    assert_eq!(r.json["compatible"], false);
    assert_eq!(
        h.warns(),
        [
            "collie: Collie speaks wire v2..3, this durable agent speaks v1. Update the agent's SDK, or Collie."
        ]
    );
}

#[tokio::test]
async fn hello_post_malformed_body_is_400() {
    let h = Harness::new();
    for body in [&b"not json"[..], b"{}", b"{\"wire\": {\"min\": \"1\"}}"] {
        let r = h.post_raw("/hello", body).await;
        assert_eq!(r.status, 400, "{body:?}");
        assert_eq!(r.code(), "bad-request");
        assert_eq!(r.json["ok"], false);
        assert!(r.json["message"].as_str().is_some_and(|m| !m.is_empty()));
    }
}

// ---------------------------------------------------------------------------
// §4 Capabilities

#[tokio::test]
async fn caps_omitted_say_what_this_agent_has_set_up_and_nothing_more() {
    use durable_runtime::{ActionHandler, ActionRequest, ChatHandler, HandlerResult, Hooks, Turn};
    struct Chat;
    impl ChatHandler for Chat {
        async fn turn(&self, _turn: Turn) {}
    }
    struct Buttons;
    impl ActionHandler for Buttons {
        async fn action(&self, _req: ActionRequest) -> HandlerResult {
            Ok(())
        }
    }
    struct Layout;
    impl Hooks for Layout {}
    let h = Harness::without_history();
    let on = |caps: &serde_json::Value| -> Vec<String> {
        durable_runtime::types::CAP_NAMES
            .iter()
            .filter(|n| caps[**n] == true)
            .map(|n| n.to_string())
            .collect()
    };
    assert_eq!(
        on(&h.get("/hello").await.json["caps"]),
        ["asks"],
        "an agent with nothing set up and a store that keeps no conversations asks only"
    );
    assert_eq!(
        on(&Harness::new().get("/hello").await.json["caps"]),
        ["asks", "history"],
        "with the default store, which keeps conversations, history is on"
    );
    let r = h.post("/v1/panes/ticket-1/send", json!({"requestId": "s1", "text": "x"})).await;
    assert_eq!((r.status, r.code()), (409, "not-supported"));
    let r = h.get("/v1/history").await;
    assert_eq!((r.status, r.code()), (409, "not-supported"));
    let pane = h.pane();
    pane.on_send(Chat).unwrap();
    assert_eq!(on(&h.get("/hello").await.json["caps"]), ["asks", "send", "steer", "abort"]);
    h.core.on_action(Buttons);
    assert_eq!(on(&h.get("/hello").await.json["caps"]), ["asks", "send", "steer", "abort", "actions"]);
    h.core.set_hooks(Layout);
    h.core.starter("new", "New").unwrap();
    h.core.history(EmptyHistory);
    let caps = h.get("/hello").await.json["caps"].clone();
    for name in durable_runtime::types::CAP_NAMES {
        assert_eq!(caps[name], name != "terminal", "{name}");
    }
    assert_eq!(h.get("/v1/history").await.status, 200);
}

#[tokio::test]
async fn caps_given_are_the_complete_list() {
    let h = Harness::with_caps(Caps::none().with(Cap::Asks));
    h.core.history(EmptyHistory);
    let caps = h.get("/hello").await.json["caps"].clone();
    for name in durable_runtime::types::CAP_NAMES {
        assert_eq!(caps[name], name == "asks", "{name}");
    }
    // A provider does not turn history on when caps were given.
    assert_eq!(h.get("/v1/history").await.code(), "not-supported");
    // The one-line form of {...ALL_CAPS, steer: false}.
    let h = Harness::with_caps(Caps::all().without(Cap::Steer));
    let caps = h.get("/hello").await.json["caps"].clone();
    assert_eq!(caps["steer"], false);
    assert_eq!(caps["send"], true);
    assert_eq!(caps["history"], true);
}

#[tokio::test]
async fn route_whose_cap_is_off_answers_409_not_supported_and_runs_nothing() {
    use durable_runtime::types::{AskOption, AskSpec};
    let h = Harness::with_caps(Caps::all().without(Cap::Asks));
    let pane = h.pane();
    let ask = pane.ask(AskSpec::choice("c-1", "Go?", [AskOption::new("yes", "Yes")])).unwrap();
    let r = h.answer(ask.id(), json!({"requestId": "r-1", "answer": {"optionIds": ["yes"]}})).await;
    assert_eq!(r.status, 409);
    assert_eq!(r.code(), "not-supported");
    assert_eq!(r.json["ok"], false);
    assert_eq!(pane.open_asks(), [ask.id().to_owned()], "the ask stays open");
    // Every other write route with its cap off says the same.
    for (cap, path, body) in [
        (Cap::Send, "/v1/panes/ticket-1/send", json!({"requestId": "r-2", "text": "hi"})),
        (Cap::Steer, "/v1/panes/ticket-1/steer", json!({"requestId": "r-3", "text": "hi"})),
        (Cap::Abort, "/v1/panes/ticket-1/stop", json!({"requestId": "r-4"})),
        (Cap::Actions, "/v1/panes/ticket-1/actions/refund", json!({"requestId": "r-5"})),
        (
            Cap::Rename,
            "/v1/rename",
            json!({"requestId": "r-6", "target": "pane", "id": "ticket-1", "title": "x"}),
        ),
        (Cap::Close, "/v1/close", json!({"requestId": "r-7", "target": "pane", "id": "ticket-1"})),
        (Cap::Reopen, "/v1/reopen", json!({"requestId": "r-8", "id": "ticket-1"})),
        (Cap::Starters, "/v1/starters/new-ticket", json!({"requestId": "r-9"})),
    ] {
        let h = Harness::with_caps(Caps::all().without(cap));
        let pane = h.pane();
        let r = h.post(path, body).await;
        assert_eq!((r.status, r.code()), (409, "not-supported"), "{path}");
        assert!(pane.is_open());
        assert_eq!(h.state().await.json["panes"][0]["title"], "Maria Lopez");
    }
}

// ---------------------------------------------------------------------------
// §5 State

#[tokio::test]
async fn state_has_epoch_and_etag_of_epoch_and_seq() {
    let h = Harness::new();
    h.pane();
    let r = h.state().await;
    assert_eq!(r.status, 200);
    let seq = r.json["seq"].as_u64().unwrap();
    assert!(seq > 0);
    assert_eq!(r.json["epoch"], "0123456789abcdef");
    assert_eq!(r.etag.as_deref(), Some(format!("\"0123456789abcdef-{seq}\"").as_str()));
}

#[tokio::test]
async fn state_with_if_none_match_equal_to_etag_is_304_without_body() {
    let h = Harness::new();
    let pane = h.pane();
    let etag = h.state().await.etag.unwrap();
    let r = h.get_if_none_match("/v1/state", &etag).await;
    assert_eq!(r.status, 304);
    assert_eq!(r.json, Value::Null, "a 304 has no body");
    assert_eq!(r.etag.as_deref(), Some(etag.as_str()));
    // Any change makes the old tag stale.
    pane.write(reply("r1", "hi")).unwrap();
    let r = h.get_if_none_match("/v1/state", &etag).await;
    assert_eq!(r.status, 200);
    assert_ne!(r.etag.as_deref(), Some(etag.as_str()));
    // A tag of another epoch does not match either.
    let seq = r.json["seq"].as_u64().unwrap();
    let other = format!("\"fedcba9876543210-{seq}\"");
    assert_eq!(h.get_if_none_match("/v1/state", &other).await.status, 200);
}

#[tokio::test]
async fn state_since_answer_carries_the_etag_and_honours_if_none_match() {
    let h = Harness::new();
    h.pane();
    let full = h.state().await;
    let seq = full.json["seq"].as_u64().unwrap();
    let r = h.state_since(seq).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.etag, full.etag);
    let r = h.get_if_none_match(&format!("/v1/state?since={seq}"), full.etag.as_deref().unwrap()).await;
    assert_eq!(r.status, 304);
    assert_eq!(r.json, Value::Null);
}

#[tokio::test]
async fn a_delta_kept_between_changes_is_only_served_to_the_same_since_at_the_same_seq() {
    let h = Harness::new();
    let a = h.pane_named("ticket-1");
    let b = h.pane_named("ticket-2");
    let seq = h.state().await.json["seq"].as_u64().unwrap();
    a.write(reply("r-1", "one")).unwrap();
    let first = h.state_since(seq).await;
    let again = h.state_since(seq).await;
    assert_eq!(first.json, again.json, "between changes the same delta is served");
    assert_eq!(first.json["panes"].as_array().unwrap().len(), 1);
    // Another `since` is its own delta, not the kept one.
    let all = h.state_since(seq - 1).await;
    assert_eq!(all.json["seq"], first.json["seq"]);
    assert_ne!(all.json, first.json, "{}", all.json);
    // A change makes the kept delta stale: the same `since` now has both panes.
    b.write(reply("r-2", "two")).unwrap();
    let after = h.state_since(seq).await;
    assert_ne!(after.json["seq"], first.json["seq"]);
    let ids: Vec<_> = after.json["panes"].as_array().unwrap().iter().map(|p| p["id"].clone()).collect();
    assert_eq!(ids, [json!("ticket-1"), json!("ticket-2")]);
    assert_ne!(after.etag, first.etag, "the tag moves with the seq");
}

#[tokio::test]
async fn a_path_with_more_segments_than_any_route_is_not_found() {
    let h = Harness::new();
    h.pane();
    for path in ["/v1/panes/ticket-1/actions/refund/more", "/v1/panes/ticket-1/events/x/y/z"] {
        let r = h.post(path, json!({"requestId": "r-1"})).await;
        assert_eq!((r.status, r.json["code"].clone()), (404, json!("not-found")), "{path}");
    }
}

#[tokio::test]
async fn state_full_answer_has_every_field_with_removed_empty() {
    let h = Harness::new();
    h.pane();
    h.core.starter("new-ticket", "New ticket").unwrap();
    let r = h.state().await;
    let j = &r.json;
    assert_eq!(
        keys(j),
        [
            "asks",
            "closed",
            "epoch",
            "full",
            "ok",
            "panes",
            "ready",
            "removed",
            "seq",
            "starters",
            "workspaces"
        ]
        .map(String::from)
    );
    assert_eq!(j["full"], true);
    assert_eq!(j["removed"], json!([]));
    assert_eq!(j["closed"], json!([]));
    assert_eq!(j["starters"], json!([{"id": "new-ticket", "label": "New ticket"}]));
    assert_eq!(
        j["workspaces"],
        json!([{"id": "support", "title": "Support",
                "tabs": [{"id": "support:main", "title": "Tickets", "panes": ["ticket-1"]}]}])
    );
    assert_eq!(
        j["panes"],
        json!([{"id": "ticket-1", "tab": "support:main", "title": "Maria Lopez", "harness": "desk",
                "sessionId": "ticket-1", "state": "idle", "turnId": null, "lastSeq": 0, "openAsks": [], "actions": []}])
    );
}

#[tokio::test]
async fn state_since_zero_or_newer_than_seq_is_a_full_answer() {
    let h = Harness::new();
    h.pane();
    let seq = h.seq().await;
    for n in [0, seq + 1, seq + 1000] {
        let r = h.state_since(n).await;
        assert_eq!(r.json["full"], true, "since={n}");
        assert_eq!(r.json["panes"].as_array().unwrap().len(), 1);
        assert!(r.json.get("workspaces").is_some() && r.json.get("closed").is_some());
        assert_eq!(r.json["removed"], json!([]));
    }
}

#[tokio::test]
async fn state_since_older_than_remembered_is_a_full_answer() {
    let h = Harness::with(|b| b.tail_limit(1));
    let pane = h.pane();
    let first = h.seq().await;
    for i in 0..10_001u32 {
        pane.write(reply("r", &i.to_string())).unwrap();
    }
    let seq = h.seq().await;
    assert!(seq - first > 10_000);
    let r = h.state_since(first).await;
    assert_eq!(r.json["full"], true);
    assert!(r.json.get("workspaces").is_some());
    // One still remembered is a delta.
    let r = h.state_since(seq - 10_000).await;
    assert_eq!(r.json["full"], false);
}

#[tokio::test]
async fn state_since_returns_only_the_panes_that_changed() {
    let h = Harness::new();
    let a = h.pane_named("a");
    let _b = h.pane_named("b");
    let n = h.seq().await;
    a.write(reply("r1", "hi")).unwrap();
    let r = h.state_since(n).await;
    let j = &r.json;
    assert_eq!(j["full"], false);
    let ids: Vec<&str> = j["panes"].as_array().unwrap().iter().map(|p| p["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["a"]);
    assert_eq!(j["panes"][0]["lastSeq"], 1);
    assert_eq!(j["removed"], json!([]));
    assert_eq!(j["asks"], json!([]), "asks are always there");
    for absent in ["workspaces", "closed", "starters"] {
        assert!(j.get(absent).is_none(), "{absent} without a layout change: {j}");
    }
    for present in ["ok", "epoch", "seq", "ready", "full", "panes", "removed", "asks"] {
        assert!(j.get(present).is_some(), "{present}");
    }
    // Nothing changed since now: no pane.
    let r = h.state_since(r.json["seq"].as_u64().unwrap()).await;
    assert_eq!(r.json["panes"], json!([]));
}

#[tokio::test]
async fn state_since_brings_workspaces_closed_and_starters_together_on_a_layout_change() {
    let h = Harness::new();
    h.pane_named("a");
    let b = h.pane_named("b");
    // A starter added is a layout change.
    let n = h.seq().await;
    h.core.starter("new-ticket", "New ticket").unwrap();
    let j = h.state_since(n).await.json;
    assert_eq!(j["starters"], json!([{"id": "new-ticket", "label": "New ticket"}]));
    assert!(j["workspaces"].is_array() && j["closed"].is_array(), "{j}");
    // A pane closed: removed, and the layout fields together.
    let n = h.seq().await;
    b.close();
    let j = h.state_since(n).await.json;
    assert_eq!(j["removed"], json!(["b"]));
    assert_eq!(j["closed"], json!([{"id": "b", "title": "Maria Lopez", "sessionId": "b"}]));
    assert_eq!(j["workspaces"][0]["tabs"][0]["panes"], json!(["a"]));
    assert!(j["starters"].is_array());
    // A tab renamed is a layout change too.
    let n = h.seq().await;
    h.core
        .workspace("support", "Support")
        .unwrap()
        .tab("main", "Tickets")
        .unwrap()
        .rename("Open tickets")
        .unwrap();
    let j = h.state_since(n).await.json;
    assert_eq!(j["workspaces"][0]["tabs"][0]["title"], "Open tickets");
    assert!(j["closed"].is_array() && j["starters"].is_array());
    // A pane field changing is not.
    let n = h.seq().await;
    h.core.pane("a").unwrap().working("t-1").unwrap();
    let j = h.state_since(n).await.json;
    assert!(j.get("workspaces").is_none() && j.get("closed").is_none() && j.get("starters").is_none());
}

#[tokio::test]
async fn state_seq_grows_on_every_visible_change() {
    use durable_runtime::types::{AskOption, AskSpec};
    let h = Harness::new();
    let mut last = h.seq().await;
    let mut check = |what: &str, seq: u64| {
        assert!(seq > last, "{what}: seq {seq} did not grow past {last}");
        last = seq;
    };
    let pane = h.pane();
    check("pane added", h.seq().await);
    h.core.ready();
    check("ready", h.seq().await);
    pane.write(reply("r1", "hi")).unwrap();
    check("item", h.seq().await);
    pane.working("t-1").unwrap();
    check("state", h.seq().await);
    pane.action("refund", "Refund", Some("check")).unwrap();
    check("action", h.seq().await);
    pane.rename("Maria L.").unwrap();
    check("rename", h.seq().await);
    let ask = pane.ask(AskSpec::choice("c-1", "Go?", [AskOption::new("yes", "Yes")])).unwrap();
    check("ask raised", h.seq().await);
    pane.decide(ask.id(), durable_runtime::types::Answer::option("yes")).unwrap();
    check("ask decided", h.seq().await);
    h.core.starter("s", "Start").unwrap();
    check("starter", h.seq().await);
    pane.close();
    check("pane closed", h.seq().await);
}

#[tokio::test]
async fn state_pane_shows_its_open_asks_and_actions() {
    use durable_runtime::types::{AskOption, AskSpec};
    let h = Harness::new();
    let pane = h.pane();
    pane.action("refund", "Refund", Some("check")).unwrap();
    pane.action("odd", "Odd", Some("unicorn")).unwrap();
    let ask = pane.ask(AskSpec::choice("call-1", "Go?", [AskOption::new("yes", "Yes")])).unwrap();
    let j = h.state().await.json;
    assert_eq!(j["panes"][0]["openAsks"], json!([ask.id()]));
    assert_eq!(
        j["panes"][0]["actions"],
        json!([{"id": "refund", "label": "Refund", "icon": "check"}, {"id": "odd", "label": "Odd", "icon": "unicorn"}])
    );
    assert_eq!(j["asks"][0]["id"], ask.id());
    assert_eq!(j["panes"][0]["state"], "idle", "an open ask leaves the pane idle");
}

#[tokio::test]
async fn state_pane_turn_id_is_the_running_or_the_last_turn() {
    let h = Harness::new();
    let pane = h.pane();
    pane.working("t-7").unwrap();
    let j = h.state().await.json;
    assert_eq!(
        (j["panes"][0]["state"].clone(), j["panes"][0]["turnId"].clone()),
        (json!("working"), json!("t-7"))
    );
    pane.state(PaneState::Idle, None).unwrap();
    let j = h.state().await.json;
    assert_eq!(
        (j["panes"][0]["state"].clone(), j["panes"][0]["turnId"].clone()),
        (json!("idle"), json!("t-7"))
    );
    assert_eq!(pane.turn_id().as_deref(), Some("t-7"));
}

// ---------------------------------------------------------------------------
// §5 Pane fields: sessionId, cwd, titles

fn tab(h: &Harness) -> durable_runtime::Tab {
    h.core.workspace("support", "Support").unwrap().tab("main", "Tickets").unwrap()
}

async fn pane_json(h: &Harness, id: &str) -> Value {
    let j = h.state().await.json;
    j["panes"].as_array().unwrap().iter().find(|p| p["id"] == id).cloned().unwrap()
}

#[tokio::test]
async fn session_id_is_null_without_a_provider_unless_given() {
    let h = Harness::without_history();
    let t = tab(&h);
    t.pane("plain", PaneOptions::new("Plain")).unwrap();
    t.pane("named", PaneOptions::new("Named").session_id("conv-9")).unwrap();
    t.pane("none", PaneOptions::new("None").no_session_id()).unwrap();
    assert_eq!(pane_json(&h, "plain").await["sessionId"], Value::Null);
    assert_eq!(pane_json(&h, "named").await["sessionId"], "conv-9");
    assert_eq!(pane_json(&h, "none").await["sessionId"], Value::Null);
}

#[tokio::test]
async fn session_id_is_the_pane_id_with_a_store_that_keeps_conversations_unless_named_or_null() {
    // The default store keeps conversations: history is the SDK's, no
    // provider set.
    let h = Harness::new();
    let t = tab(&h);
    t.pane("plain", PaneOptions::new("Plain")).unwrap();
    t.pane("named", PaneOptions::new("Named").session_id("conv-9")).unwrap();
    t.pane("none", PaneOptions::new("None").no_session_id()).unwrap();
    assert_eq!(pane_json(&h, "plain").await["sessionId"], "plain");
    assert_eq!(pane_json(&h, "named").await["sessionId"], "conv-9");
    assert_eq!(pane_json(&h, "none").await["sessionId"], Value::Null);
}

#[tokio::test]
async fn session_id_is_the_pane_id_once_a_provider_is_set_unless_named_or_null() {
    let h = Harness::new();
    let t = tab(&h);
    let plain = t.pane("plain", PaneOptions::new("Plain")).unwrap();
    t.pane("named", PaneOptions::new("Named").session_id("conv-9")).unwrap();
    t.pane("none", PaneOptions::new("None").no_session_id()).unwrap();
    h.core.history(EmptyHistory);
    assert_eq!(pane_json(&h, "plain").await["sessionId"], "plain");
    assert_eq!(plain.session_id().as_deref(), Some("plain"));
    assert_eq!(pane_json(&h, "named").await["sessionId"], "conv-9");
    assert_eq!(pane_json(&h, "none").await["sessionId"], Value::Null);
    // A pane added after the provider too.
    t.pane("later", PaneOptions::new("Later")).unwrap();
    assert_eq!(pane_json(&h, "later").await["sessionId"], "later");
}

#[tokio::test]
async fn cwd_is_sent_only_when_absolute() {
    let h = Harness::new();
    let t = tab(&h);
    t.pane("abs", PaneOptions::new("A").cwd("/srv/desk")).unwrap();
    t.pane("rel", PaneOptions::new("R").cwd("srv/desk")).unwrap();
    t.pane("dot", PaneOptions::new("D").cwd("./desk")).unwrap();
    t.pane("unset", PaneOptions::new("U")).unwrap();
    assert_eq!(pane_json(&h, "abs").await["cwd"], "/srv/desk");
    for id in ["rel", "dot", "unset"] {
        assert!(pane_json(&h, id).await.get("cwd").is_none(), "{id}");
    }
}

#[tokio::test]
async fn titles_are_cut_at_256_bytes_and_harness_at_64_on_a_utf8_boundary() {
    let h = Harness::new();
    let long_title = format!("a{}", "é".repeat(200)); // 401 bytes
    let long_harness = format!("b{}", "é".repeat(40)); // 81 bytes
    let t = h.core.workspace("ws", &long_title).unwrap().tab("tab", &long_title).unwrap();
    t.pane("p", PaneOptions::new(long_title.clone()).harness(long_harness)).unwrap();
    let j = h.state().await.json;
    let cut_title = format!("a{}", "é".repeat(127)); // 255 bytes: 256 would split an é
    let p = &j["panes"][0];
    assert_eq!(p["title"], cut_title.as_str());
    assert_eq!(p["harness"], format!("b{}", "é".repeat(31)).as_str()); // 63 bytes
    assert_eq!(j["workspaces"][0]["title"], cut_title.as_str());
    assert_eq!(j["workspaces"][0]["tabs"][0]["title"], cut_title.as_str());
    // Exactly 256 bytes stays whole.
    let exact = "x".repeat(256);
    h.core.pane("p").unwrap().rename(&exact).unwrap();
    assert_eq!(pane_json(&h, "p").await["title"], exact.as_str());
    h.core.pane("p").unwrap().rename(&format!("{exact}y")).unwrap();
    assert_eq!(pane_json(&h, "p").await["title"], exact.as_str());
}

#[tokio::test]
async fn titles_lose_control_and_invisible_characters() {
    let h = Harness::new();
    tab(&h).pane("p", PaneOptions::new("Maria\u{200B} \u{202E}Lopez\n\u{7}")).unwrap();
    assert_eq!(pane_json(&h, "p").await["title"], "Maria Lopez");
}

#[tokio::test]
async fn tab_pane_returns_the_existing_pane_for_a_known_id() {
    let h = Harness::new();
    let first = h.pane();
    first.write(reply("r1", "hi")).unwrap();
    let again = tab(&h).pane("ticket-1", PaneOptions::new("Another title").harness("other")).unwrap();
    assert_eq!(again.id(), "ticket-1");
    let j = h.state().await.json;
    assert_eq!(j["panes"].as_array().unwrap().len(), 1);
    assert_eq!(j["workspaces"][0]["tabs"][0]["panes"], json!(["ticket-1"]));
    assert_eq!(j["panes"][0]["title"], "Maria Lopez");
    assert_eq!(j["panes"][0]["lastSeq"], 1, "the existing pane keeps its events");
    // core.pane finds it as well; an unknown id is None.
    assert_eq!(h.core.pane("ticket-1").map(|p| p.id().to_owned()).as_deref(), Some("ticket-1"));
    assert!(h.core.pane("nope").is_none());
}

#[tokio::test]
async fn layout_ids_breaking_the_id_rule_are_invalid_argument_errors() {
    let h = Harness::new();
    for bad in ["", "a b", "a/b", "a:b", "a?b", "a#b", &"x".repeat(129)] {
        let e = h.core.workspace(bad, "W").unwrap_err();
        assert_eq!(e.kind(), RuleKind::InvalidArgument, "{bad:?}");
    }
    let ws = h.core.workspace("ws", "W").unwrap();
    assert!(ws.tab("a:b", "T").unwrap_err().is_invalid_argument());
    let t = ws.tab("t", "T").unwrap();
    assert!(t.pane("a b", PaneOptions::new("P")).unwrap_err().is_invalid_argument());
    // A pane id may hold ':'.
    assert!(t.pane("a:b", PaneOptions::new("P")).is_ok());
}

// ---------------------------------------------------------------------------
// §2 Malformed input, callers

#[tokio::test]
async fn unknown_route_is_404_not_found() {
    let h = Harness::new();
    for path in ["/", "/v1", "/v2/state", "/v1/state/x", "/v1/panes/ticket-1", "/hello/x", "/v1/asks"] {
        let r = h.get(path).await;
        assert_eq!((r.status, r.code()), (404, "not-found"), "{path}");
        assert_eq!(r.json["ok"], false);
    }
}

#[tokio::test]
async fn wrong_method_on_a_known_route_is_405_with_allow() {
    let h = Harness::new();
    h.pane();
    for (method, path, allow) in [
        ("POST", "/v1/state", "GET"),
        ("DELETE", "/v1/state", "GET"),
        ("POST", "/v1/panes/ticket-1/events", "GET"),
        ("GET", "/v1/asks/abc", "POST"),
        ("PUT", "/v1/panes/ticket-1/send", "POST"),
        ("GET", "/v1/rename", "POST"),
        ("DELETE", "/hello", "GET, POST"),
    ] {
        let r = h.method(method, path).await;
        assert_eq!((r.status, r.code()), (405, "method-not-allowed"), "{method} {path}");
        assert_eq!(r.allow, Some(allow), "{method} {path}");
    }
}

#[tokio::test]
async fn bad_ids_in_paths_are_400_bad_request() {
    let h = Harness::new();
    h.pane();
    for path in
        ["/v1/panes/a%20b/events", "/v1/panes/a%2Fb/events", "/v1/panes/%00/events", "/v1/panes//events"]
    {
        let r = h.get(path).await;
        assert_eq!((r.status, r.code()), (400, "bad-request"), "{path}");
    }
    let body = json!({"requestId": "r-1", "answer": {"optionIds": ["yes"]}});
    for path in ["/v1/asks/a%20b", "/v1/asks/a%3Fb", &format!("/v1/asks/{}", "x".repeat(129))] {
        let r = h.post(path, body.clone()).await;
        assert_eq!((r.status, r.code()), (400, "bad-request"), "{path}");
    }
    // A percent-encoded valid id is decoded first.
    assert_eq!(h.get("/v1/panes/ticket%2D1/events").await.status, 200);
}

#[tokio::test]
async fn bad_query_numbers_are_400() {
    let h = Harness::new();
    h.pane();
    for q in ["since=-1", "since=abc", "since=", "since=99999999999999999999999"] {
        let r = h.get(&format!("/v1/state?{q}")).await;
        assert_eq!((r.status, r.code()), (400, "bad-request"), "{q}");
    }
    for q in ["after=-1", "after=x"] {
        let r = h.get(&format!("/v1/panes/ticket-1/events?{q}")).await;
        assert_eq!((r.status, r.code()), (400, "bad-request"), "{q}");
    }
}

#[tokio::test]
async fn body_over_1_mib_is_413_only_after_route_caller_and_cap_checks() {
    let h = Harness::new();
    h.pane();
    let r = h.post_too_large("/v1/asks/abc").await;
    assert_eq!((r.status, r.code()), (413, "too-large"));
    // Route first.
    assert_eq!(h.post_too_large("/v1/nowhere").await.status, 404);
    let mut req = Request::post("/v1/state", "", Caller::OtherProcess);
    req.body = durable_runtime::types::exchange::Body::TooLarge;
    assert_eq!(h.request(req).await.status, 405);
    // Caller next.
    let mut req = Request::post("/v1/asks/abc", "", Caller::SelfOrDescendant);
    req.body = durable_runtime::types::exchange::Body::TooLarge;
    assert_eq!(h.request(req).await.code(), "caller-refused");
    // Then the cap.
    let h = Harness::with_caps(Caps::all().without(Cap::Asks));
    assert_eq!(h.post_too_large("/v1/asks/abc").await.code(), "not-supported");
}

#[tokio::test]
async fn write_from_self_or_descendant_is_403_caller_refused_while_reads_stay_open() {
    use durable_runtime::types::{AskOption, AskSpec};
    let h = Harness::new();
    let pane = h.pane();
    let ask = pane.ask(AskSpec::choice("c-1", "Go?", [AskOption::new("yes", "Yes")])).unwrap();
    let me = Caller::SelfOrDescendant;
    let r = h
        .post_as(
            &format!("/v1/asks/{}", ask.id()),
            json!({"requestId": "r-1", "answer": {"optionIds": ["yes"]}}),
            me,
        )
        .await;
    assert_eq!((r.status, r.code()), (403, "caller-refused"));
    assert_eq!(pane.open_asks(), [ask.id().to_owned()], "nothing ran");
    for (path, body) in [
        ("/v1/panes/ticket-1/send", json!({"requestId": "r-2", "text": "hi"})),
        ("/v1/panes/ticket-1/steer", json!({"requestId": "r-3", "text": "hi"})),
        ("/v1/panes/ticket-1/stop", json!({"requestId": "r-4"})),
        ("/v1/panes/ticket-1/actions/refund", json!({"requestId": "r-5"})),
        ("/v1/rename", json!({"requestId": "r-6", "target": "pane", "id": "ticket-1", "title": "x"})),
        ("/v1/close", json!({"requestId": "r-7", "target": "pane", "id": "ticket-1"})),
        ("/v1/reopen", json!({"requestId": "r-8", "id": "ticket-1"})),
        ("/v1/starters/s", json!({"requestId": "r-9"})),
    ] {
        let r = h.post_as(path, body, me).await;
        assert_eq!((r.status, r.code()), (403, "caller-refused"), "{path}");
    }
    assert!(pane.is_open());
    for path in ["/hello", "/v1/state", "/v1/panes/ticket-1/events"] {
        assert_eq!(h.get_as(path, me).await.status, 200, "{path}");
    }
    // Announcing itself is not a write either.
    let r = h.post_as("/hello", json!({"wire": {"min": 1, "max": 1}}), me).await;
    assert_eq!(r.status, 200);
}

#[tokio::test]
async fn other_user_is_403_caller_refused_on_everything() {
    let h = Harness::new();
    h.pane();
    let them = Caller::OtherUser;
    for path in ["/hello", "/v1/state", "/v1/panes/ticket-1/events", "/v1/history", "/v1/nowhere"] {
        let r = h.get_as(path, them).await;
        assert_eq!((r.status, r.code()), (403, "caller-refused"), "{path}");
    }
    for path in ["/hello", "/v1/asks/abc", "/v1/panes/ticket-1/send", "/v1/state"] {
        let r = h.post_as(path, json!({"requestId": "r-1"}), them).await;
        assert_eq!((r.status, r.code()), (403, "caller-refused"), "{path}");
    }
}

#[tokio::test]
async fn every_failure_body_has_ok_false_code_and_message() {
    let h = Harness::new();
    for r in
        [h.get("/nowhere").await, h.method("PUT", "/v1/state").await, h.post_raw("/v1/asks/x", b"{").await]
    {
        assert_eq!(r.json["ok"], false);
        assert!(r.json["code"].is_string());
        assert!(r.json["message"].as_str().is_some_and(|m| !m.is_empty()));
    }
}

#[tokio::test]
async fn ready_does_not_move_seq_twice() {
    let h = Harness::new();
    h.core.ready();
    let seq = h.seq().await;
    h.core.ready();
    assert_eq!(h.seq().await, seq);
    // And with nothing changed, the ETag holds.
    let etag = h.state().await.etag.unwrap();
    assert_eq!(h.get_if_none_match("/v1/state", &etag).await.status, 304);
}

#[tokio::test]
async fn state_since_lists_a_removed_pane_once() {
    let h = Harness::new();
    h.pane_named("keep");
    let b = h.pane_named("b");
    let c = h.pane_named("c");
    let n = h.seq().await;
    b.close();
    c.close();
    // The same id comes back and goes again.
    let b = h.pane_named("b");
    b.close();
    let j = h.state_since(n).await.json;
    let mut removed: Vec<String> =
        j["removed"].as_array().unwrap().iter().map(|v| v.as_str().unwrap().to_owned()).collect();
    removed.sort();
    assert_eq!(removed, ["b", "c"]);
    // A pane that came back and stays is not removed; it is in panes.
    let n = h.seq().await;
    h.pane_named("c");
    let j = h.state_since(n).await.json;
    assert_eq!(j["removed"], json!([]));
    assert_eq!(j["panes"][0]["id"], "c");
}

#[tokio::test]
async fn hello_post_ignores_unknown_fields() {
    let h = Harness::new();
    let r = h.post("/hello", json!({"collie": {"version": "1.22.0", "build": "x"}, "wire": {"min": 1, "max": 1}, "phone": true})).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json["compatible"], true);
}
