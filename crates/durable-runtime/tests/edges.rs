//! Edge cases an independent review of the core found, each named after the
//! rule it keeps.
use durable_runtime::test_util as harness;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use durable_runtime::types::exchange::{Caller, Request};
use durable_runtime::types::{
    AskOption, AskSpec, ConversationState, HistoryRow, Id, Item, ItemBody, PaneState, Timestamp,
};
use durable_runtime::{ChatHandler, HistoryError, HistoryProvider, ItemsPage, PaneOptions, RowsPage, Turn};
use harness::{Harness, T0};
use serde_json::json;

fn reply(id: &str, text: &str) -> Item {
    Item::new(Id::new(id).unwrap(), ItemBody::Reply { text: text.into(), partial: false })
}

fn yes_no(call: &str) -> AskSpec {
    AskSpec::choice(call, "Go?", [AskOption::new("yes", "Yes"), AskOption::new("no", "No")])
}

#[tokio::test]
async fn a_pane_opened_again_under_a_closed_id_goes_on_counting_its_events() {
    let h = Harness::new();
    let tab = h.core.workspace("support", "Support").unwrap().tab("main", "Tickets").unwrap();
    let p = tab.pane("p", PaneOptions::new("P")).unwrap();
    for i in 0..3 {
        p.write(reply(&format!("old-{i}"), "x")).unwrap();
    }
    let caught_up = h.events("p", 0).await.json["next"].as_u64().unwrap();
    assert_eq!(caught_up, 3);
    p.close();
    // A new conversation under the id: the kept one (the memory store keeps
    // them) would come back first otherwise (docs/wire.md §9.2).
    h.core.forget_conversation("p");
    let p = tab.pane("p", PaneOptions::new("P again")).unwrap();
    for i in 0..5 {
        p.write(reply(&format!("new-{i}"), "y")).unwrap();
    }
    let r = h.events("p", caught_up).await;
    assert_eq!(r.json["snapshot"], false);
    let ids: Vec<_> = r.json["events"].as_array().unwrap().iter().map(|e| e["item"]["id"].clone()).collect();
    assert_eq!(ids, ["new-0", "new-1", "new-2", "new-3", "new-4"], "no event of the new pane is skipped");
    assert_eq!(r.json["events"][0]["seq"], 4);
}

#[tokio::test]
async fn an_answer_held_after_the_ask_expired_does_not_win_when_it_is_raised_again() {
    let h = Harness::new();
    let pane = h.pane();
    let expiry = Timestamp::from_millis(T0 + 1000);
    let spec = || yes_no("call-1").expires_at(expiry);
    // The hash of the ask as the phone saw it before the restart.
    let hash = {
        let other = Harness::new();
        let ask = other.pane().ask(spec()).unwrap();
        let s = other.state().await.json["asks"][0]["hash"].as_str().unwrap().to_owned();
        drop(ask);
        s
    };
    h.advance(2000).await; // the expiry passed while the agent was down
    let held = h
        .answer(
            "970f8a0b30368fbbcab73013d31d2d51",
            json!({"requestId": "late", "answer": {"optionIds": ["yes"]}, "hash": hash}),
        )
        .await;
    assert_eq!(held.status, 202);
    h.advance(1000).await;
    let ask = pane.ask(spec()).unwrap();
    let closed = ask.await.unwrap_err();
    assert_eq!(closed.decided_by, durable_runtime::types::DecidedBy::Timeout);
    let again = h
        .answer(
            "970f8a0b30368fbbcab73013d31d2d51",
            json!({"requestId": "late", "answer": {"optionIds": ["yes"]}, "hash": hash}),
        )
        .await;
    assert_eq!(again.status, 409, "{:?}", again.json);
    assert_eq!(again.code(), "ask-closed");
    assert_eq!(again.json["decidedBy"], "timeout");
}

#[tokio::test]
async fn a_driver_wake_up_may_call_back_into_the_core() {
    let h = Harness::new();
    let pane = h.pane();
    let calls = Arc::new(AtomicUsize::new(0));
    let (core, c) = (h.core.clone(), calls.clone());
    h.core.driver().set_wakeup(move || {
        // A driver that reads the next deadline when woken: this used to
        // lock the state twice on one thread.
        let _ = core.driver().next_deadline();
        while let Some(job) = core.driver().poll_job() {
            tokio::spawn(job);
        }
        c.fetch_add(1, Ordering::SeqCst);
    });
    let _ask = pane.ask(yes_no("c1").expires_in_ms(60_000)).unwrap();
    assert!(calls.load(Ordering::SeqCst) >= 1, "the driver was woken");
    assert_eq!(h.core.driver().next_deadline(), Some(Timestamp::from_millis(T0 + 60_000)));
}

#[tokio::test]
async fn answers_to_ids_that_are_not_ask_ids_are_not_held() {
    let h = Harness::new();
    let hash = "a".repeat(64);
    let r = h
        .answer("not-an-ask-id", json!({"requestId": "r1", "answer": {"optionIds": ["x"]}, "hash": hash}))
        .await;
    assert_eq!(r.status, 404, "{:?}", r.json);
    let r = h
        .answer(
            "0123456789abcdef0123456789abcdef",
            json!({"requestId": "r2", "answer": {"optionIds": ["x"]}, "hash": hash}),
        )
        .await;
    assert_eq!(r.status, 202);
}

#[tokio::test]
async fn held_answers_are_capped_and_the_oldest_goes_first() {
    let h = Harness::new();
    let hash = "b".repeat(64);
    for i in 0..1001u32 {
        let id = format!("{i:032x}");
        let r = h
            .answer(&id, json!({"requestId": format!("h-{i}"), "answer": {"optionIds": ["x"]}, "hash": hash}))
            .await;
        assert_eq!(r.status, 202);
        h.clock.advance(1);
    }
    // The first hold was dropped: its request id is free again and, sent
    // without a hash to its ask id, is simply unknown.
    let first =
        h.answer(&format!("{:032x}", 0), json!({"requestId": "h-0", "answer": {"optionIds": ["x"]}})).await;
    assert_eq!(first.status, 404, "{:?}", first.json);
    let last = h
        .answer(&format!("{:032x}", 1000), json!({"requestId": "h-1000", "answer": {"optionIds": ["x"]}}))
        .await;
    assert_eq!(last.status, 202, "the newest is still held");
}

/// Held answers are bounded in bytes as well as in number (wire.md,
/// *Decisions of this SDK → Bounds*): past the bound the oldest goes first,
/// as past the 1,000; a hold applied or expired makes room again.
#[tokio::test]
async fn held_answers_are_bounded_in_bytes_and_the_oldest_goes_first() {
    // Each filler hold counts 32 (ask id) + 3 (request id) + 64 (hash) +
    // 1,000 (text) = 1,099 bytes: four fit under 4,400, a fifth does not.
    let h = Harness::with(|b| b.held_answer_bytes(4_400).hold_ms(10_000));
    assert_eq!(durable_runtime::HELD_ANSWER_BYTES, 64 * 1024 * 1024, "the documented default");
    let filler_hash = "c".repeat(64);
    let ask_id = |i: u32| format!("{i:032x}");
    let hold = |i: u32| {
        let body =
            json!({"requestId": format!("h-{i}"), "answer": {"text": "t".repeat(1000)}, "hash": filler_hash});
        let id = ask_id(i);
        let h = &h;
        async move {
            let r = h.answer(&id, body).await;
            assert_eq!(r.status, 202, "h-{i}: {:?}", r.json);
            assert_eq!(r.json["result"], "held");
            h.clock.advance(1);
        }
    };
    // Still held: its request id answers `202 held` again; dropped: the
    // request id is free and, without a hash, the ask id is simply unknown.
    let held = |i: u32| {
        let h = &h;
        let id = ask_id(i);
        async move {
            let r = h.answer(&id, json!({"requestId": format!("h-{i}"), "answer": {"text": "x"}})).await;
            match r.status {
                202 => true,
                404 => false,
                other => panic!("h-{i}: {other} {:?}", r.json),
            }
        }
    };
    for i in 0..4 {
        hold(i).await;
    }
    for i in 0..4 {
        assert!(held(i).await, "h-{i} fits under the bound");
    }

    // A real ask's answer, held before the agent raises it: one more hold
    // past the bound, so the oldest filler goes.
    let (real_id, real_hash) = {
        let other = Harness::new();
        let _ask = other.pane().ask(yes_no("call-1")).unwrap();
        let s = other.state().await.json;
        (s["asks"][0]["id"].as_str().unwrap().to_owned(), s["asks"][0]["hash"].as_str().unwrap().to_owned())
    };
    let r = h
        .answer(&real_id, json!({"requestId": "real", "answer": {"optionIds": ["yes"]}, "hash": real_hash}))
        .await;
    assert_eq!(r.status, 202, "{:?}", r.json);
    h.clock.advance(1);
    assert!(!held(0).await, "past the byte bound the oldest hold went");
    for i in 1..4 {
        assert!(held(i).await, "h-{i} is kept");
    }

    // Applied: the ask is raised with the same hash and resolves at once;
    // its bytes are free, so the next hold fits without dropping another.
    let pane = h.pane();
    let ask = pane.ask(yes_no("call-1")).unwrap();
    assert!(h.open_ask_ids().await.is_empty(), "the held answer decided the ask at once");
    ask.await.expect("the held answer was applied");
    hold(4).await;
    for i in 1..5 {
        assert!(held(i).await, "after an applied hold, room for h-4 with h-{i} kept");
    }

    // Expired: h-1 (held at T0 + 1) runs out at T0 + 10,001, h-2 a
    // millisecond later; the clock stands at T0 + 6. h-5 then fits with
    // h-2..h-4 kept.
    h.advance(10_001 - 6).await;
    assert!(!held(1).await, "h-1 expired");
    for i in 2..5 {
        assert!(held(i).await, "h-{i} has not expired yet");
    }
    hold(5).await;
    for i in 2..6 {
        assert!(held(i).await, "after an expired hold, room for h-5 with h-{i} kept");
    }
    // And the bound still holds: one more, and the oldest goes.
    hold(6).await;
    assert!(!held(2).await, "past the byte bound again, the oldest went");
    for i in 3..7 {
        assert!(held(i).await, "h-{i} is kept");
    }
}

/// Takes every send; its turn ends at once.
struct Accept;

impl ChatHandler for Accept {
    async fn turn(&self, _turn: Turn) {}
}

#[tokio::test]
async fn a_pane_queues_at_most_64_sends_then_answers_busy() {
    let h = Harness::new();
    let pane = h.pane();
    pane.on_send(Accept).unwrap();
    pane.working("t-1").unwrap();
    for i in 0..64 {
        let r = h.post("/v1/panes/ticket-1/send", json!({"requestId": format!("q{i}"), "text": "x"})).await;
        assert_eq!(r.json["result"], "queued");
    }
    let r = h.post("/v1/panes/ticket-1/send", json!({"requestId": "q64", "text": "x"})).await;
    assert_eq!((r.status, r.code()), (409, "busy"));
}

#[tokio::test]
async fn a_queued_send_waits_while_an_ask_is_open_and_goes_once_it_closes() {
    let h = Harness::new();
    let pane = h.pane();
    let delivered = Arc::new(AtomicUsize::new(0));
    struct Count(Arc<AtomicUsize>);
    impl ChatHandler for Count {
        async fn turn(&self, _turn: Turn) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
    pane.on_send(Count(delivered.clone())).unwrap();
    pane.working("t-1").unwrap();
    let r = h.post("/v1/panes/ticket-1/send", json!({"requestId": "q1", "text": "after"})).await;
    assert_eq!(r.json["result"], "queued");
    let ask = pane.ask(yes_no("c1")).unwrap();
    pane.idle().unwrap();
    h.settle().await;
    assert_eq!(delivered.load(Ordering::SeqCst), 0, "not delivered over an open ask");
    let r = h.answer(ask.id(), json!({"requestId": "a1", "answer": {"optionIds": ["yes"]}})).await;
    assert_eq!(r.status, 200);
    h.settle().await;
    assert_eq!(delivered.load(Ordering::SeqCst), 1, "delivered once the ask closed");
}

#[tokio::test]
async fn a_session_id_breaking_the_id_rule_is_an_err() {
    let h = Harness::new();
    let tab = h.core.workspace("support", "Support").unwrap().tab("main", "Tickets").unwrap();
    for bad in ["", "a b", "a/b"] {
        let e = tab.pane("p", PaneOptions::new("P").session_id(bad)).unwrap_err();
        assert!(e.is_invalid_argument(), "{bad:?}: {e:?}");
    }
    assert!(tab.pane("p", PaneOptions::new("P").session_id("s-1")).is_ok());
}

#[tokio::test]
async fn a_working_pane_reopened_is_idle_and_its_tail_says_so() {
    let h = Harness::with_caps(durable_runtime::types::Caps::all());
    let pane = h.pane();
    pane.on_send(Accept).unwrap();
    pane.working("t-1").unwrap();
    pane.close();
    let r = h.post("/v1/reopen", json!({"requestId": "re", "id": "ticket-1"})).await;
    assert_eq!(r.json["result"], "reopened");
    let events = h.all_events("ticket-1").await;
    let last_state = events.iter().rev().find(|e| e["type"] == "state").unwrap();
    assert_eq!(last_state["state"], "idle");
    assert_eq!(pane.current_state(), PaneState::Idle);
}

#[tokio::test]
async fn an_ask_decided_again_is_remembered_from_its_latest_decision() {
    let h = Harness::new();
    let pane = h.pane();
    let first = pane.ask(yes_no("c1")).unwrap();
    pane.decide(first.id(), durable_runtime::types::Answer::option("yes")).unwrap();
    let second = pane.ask(yes_no("c1")).unwrap();
    let id = second.id().to_owned();
    pane.decide(&id, durable_runtime::types::Answer::option("no")).unwrap();
    // 9,999 other asks decided: the first decision of `c1` falls out of the
    // memory, the second (newer) must stay.
    for i in 0..9_999 {
        let a = pane.ask(yes_no(&format!("x{i}"))).unwrap();
        pane.decide(a.id(), durable_runtime::types::Answer::option("yes")).unwrap();
    }
    let r = h.answer(&id, json!({"requestId": "late", "answer": {"optionIds": ["yes"]}})).await;
    assert_eq!((r.status, r.code()), (409, "ask-closed"), "{:?}", r.json);
}

struct BadProvider;

impl HistoryProvider for BadProvider {
    async fn rows(
        &self,
        _after: Option<durable_runtime::types::Cursor>,
        _limit: usize,
    ) -> Result<RowsPage, HistoryError> {
        Ok(RowsPage { rows: vec![row("ok", &"t".repeat(300)), row("bad id", "x")], next: None })
    }
    async fn items(
        &self,
        _session: &str,
        _after: Option<durable_runtime::types::Cursor>,
        _limit: usize,
    ) -> Result<Option<ItemsPage>, HistoryError> {
        let bad = Item::new(
            Id::new("p").unwrap(),
            ItemBody::Progress { label: "x".into(), value: 2.0, badge: None },
        );
        let noisy =
            Item::new(Id::new("r").unwrap(), ItemBody::Reply { text: "a\u{202E}b".into(), partial: false });
        Ok(Some(ItemsPage { row: row("ok", "t"), items: vec![bad, noisy], next: None, dropped: false }))
    }
}

fn row(id: &str, title: &str) -> HistoryRow {
    HistoryRow {
        id: id.into(),
        title: title.into(),
        subtitle: None,
        workspace_id: None,
        tab_id: None,
        started_at: Timestamp::from_millis(T0),
        ended_at: None,
        state: ConversationState::Open,
        items: 1,
    }
}

#[tokio::test]
async fn history_from_the_provider_meets_the_item_and_id_rules() {
    let h = Harness::new();
    h.core.history(BadProvider);
    let rows = h.get("/v1/history").await;
    let rows = rows.json["rows"].as_array().unwrap().clone();
    assert_eq!(rows.len(), 1, "the row whose id breaks the ID rule is left out");
    assert_eq!(rows[0]["title"].as_str().unwrap().len(), 256);
    let conv = h.request(Request::get("/v1/history/ok", Caller::OtherProcess)).await;
    let items = conv.json["items"].as_array().unwrap();
    assert_eq!(items.len(), 1, "the progress of 2.0 is left out: {items:?}");
    assert_eq!(items[0]["text"], "ab", "text is sanitized");
    assert!(h.warns().iter().any(|w| w.contains("history left out")));
}

#[tokio::test]
async fn one_core_served_on_two_transports_says_each_transports_caller_check() {
    let h = Harness::new();
    h.core.driver().set_caller_check(durable_runtime::CallerCheckMode::On);
    let socket = h.request(Request::get("/hello", Caller::OtherProcess)).await;
    assert_eq!(socket.json["callerCheck"], "on");
    let https = h.request(Request::get("/hello", Caller::Token)).await;
    assert_eq!(https.json["callerCheck"], "token");
}

#[tokio::test]
async fn every_driver_serving_a_core_is_woken() {
    let h = Harness::new();
    let pane = h.pane();
    let (a, b) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let (a2, b2) = (a.clone(), b.clone());
    h.core.driver().set_wakeup(move || {
        a2.fetch_add(1, Ordering::SeqCst);
    });
    h.core.driver().set_wakeup(move || {
        b2.fetch_add(1, Ordering::SeqCst);
    });
    let _ask = pane.ask(yes_no("c1").expires_in_ms(1_000)).unwrap();
    assert!(
        a.load(Ordering::SeqCst) >= 1 && b.load(Ordering::SeqCst) >= 1,
        "both drivers hear of the deadline"
    );
}

#[tokio::test]
async fn a_turn_keeps_the_pane_working_and_going_out_of_scope_sets_it_idle() {
    let h = Harness::new();
    let pane = h.pane();
    pane.on_send(Accept).unwrap();
    {
        let turn = pane.start_turn("t-1").unwrap();
        assert_eq!(pane.current_state(), PaneState::Working);
        turn.partial("Got");
        let r = h.post("/v1/panes/ticket-1/send", json!({"requestId": "q1", "text": "next"})).await;
        assert_eq!(r.json["result"], "queued", "a send during the turn waits");
        turn.reply("Got it");
    } // dropped: the turn ends
    h.settle().await;
    assert_eq!(pane.current_state(), PaneState::Idle);
    // The queued send ran its own turn, named after its request id.
    assert_eq!(pane.turn_id().as_deref(), Some("q1"));
    let users: Vec<_> =
        h.all_events("ticket-1").await.into_iter().filter(|e| e["item"]["kind"] == "user").collect();
    assert_eq!(users.len(), 1, "the queued send was delivered when the turn ended");
    let item = h.view("ticket-1").await["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["id"] == "reply-t-1")
        .cloned()
        .unwrap();
    assert_eq!((item["text"].clone(), item.get("partial").cloned()), (json!("Got it"), None));
}

#[tokio::test]
async fn ending_a_turn_finalizes_a_partial_reply_with_one_warning() {
    let h = Harness::new();
    let pane = h.pane();
    let turn = pane.start_turn("t-1").unwrap();
    turn.partial("half");
    turn.end();
    assert_eq!(pane.current_state(), PaneState::Idle);
    assert_eq!(h.warns().iter().filter(|w| w.contains("partial")).count(), 1);
}
