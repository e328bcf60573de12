//! Contract §6: a pane's events, the snapshot view, and the item rules (§6.1).
use durable_runtime::test_util as harness;

use durable_runtime::types::{
    AskOption, AskSpec, Badge, BadgeTone, Item, ItemBody, NoticeTone, PaneState, ToolStatus,
};
use harness::Harness;
use serde_json::{Value, json};

fn id(s: &str) -> durable_runtime::types::Id {
    durable_runtime::types::Id::new(s).unwrap()
}

fn reply(item: &str, text: &str) -> Item {
    Item::new(id(item), ItemBody::Reply { text: text.into(), partial: false })
}

fn partial(item: &str, text: &str) -> Item {
    Item::new(id(item), ItemBody::Reply { text: text.into(), partial: true })
}

fn keys(v: &Value) -> Vec<String> {
    let mut k: Vec<String> = v.as_object().unwrap().keys().cloned().collect();
    k.sort();
    k
}

fn item_ids(view: &Value) -> Vec<String> {
    view["items"].as_array().unwrap().iter().map(|i| i["id"].as_str().unwrap().to_owned()).collect()
}

// ---------------------------------------------------------------------------
// Reading events

#[tokio::test]
async fn events_after_defaults_to_zero_and_seq_counts_from_one() {
    let h = Harness::new();
    let pane = h.pane();
    pane.write(reply("r1", "one")).unwrap();
    pane.write(reply("r2", "two")).unwrap();
    let r = h.get("/v1/panes/ticket-1/events").await;
    assert_eq!(r.status, 200);
    assert_eq!(keys(&r.json), ["events", "next", "ok", "pane", "snapshot"].map(String::from));
    assert_eq!(r.json["ok"], true);
    assert_eq!(r.json["pane"], "ticket-1");
    assert_eq!(r.json["snapshot"], false);
    assert_eq!(r.json["next"], 2);
    let seqs: Vec<u64> =
        r.json["events"].as_array().unwrap().iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs, [1, 2]);
}

#[tokio::test]
async fn events_next_is_the_last_seq_returned_or_after_when_none_is() {
    let h = Harness::new();
    let pane = h.pane();
    for i in 0..3 {
        pane.write(reply(&format!("r{i}"), "x")).unwrap();
    }
    let r = h.events("ticket-1", 1).await;
    assert_eq!(r.json["next"], 3);
    let seqs: Vec<u64> =
        r.json["events"].as_array().unwrap().iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs, [2, 3]);
    let r = h.events("ticket-1", 3).await;
    assert_eq!(r.json["snapshot"], false);
    assert_eq!(r.json["events"], json!([]));
    assert_eq!(r.json["next"], 3);
    // An empty pane: after 0, nothing, next 0.
    h.pane_named("empty");
    let r = h.events("empty", 0).await;
    assert_eq!(
        (r.json["snapshot"].clone(), r.json["next"].clone(), r.json["events"].clone()),
        (json!(false), json!(0), json!([]))
    );
}

#[tokio::test]
async fn events_tail_keeps_the_last_tail_limit_events() {
    let h = Harness::with(|b| b.tail_limit(5));
    let pane = h.pane();
    for i in 1..=10 {
        pane.write(reply(&format!("r{i}"), &i.to_string())).unwrap();
    }
    // after=5: events 6..10 are all retained.
    let r = h.events("ticket-1", 5).await;
    assert_eq!(r.json["snapshot"], false);
    let seqs: Vec<u64> =
        r.json["events"].as_array().unwrap().iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs, [6, 7, 8, 9, 10]);
    // after=4 would need event 5, which is gone: the snapshot.
    let r = h.events("ticket-1", 4).await;
    assert_eq!(r.json["snapshot"], true);
}

#[tokio::test]
async fn events_default_tail_limit_is_500() {
    let h = Harness::new();
    let pane = h.pane();
    for i in 1..=501 {
        pane.write(reply("r", &i.to_string())).unwrap();
    }
    assert_eq!(h.events("ticket-1", 1).await.json["snapshot"], false);
    assert_eq!(h.events("ticket-1", 1).await.json["events"].as_array().unwrap().len(), 500);
    assert_eq!(h.events("ticket-1", 0).await.json["snapshot"], true);
}

#[tokio::test]
async fn events_reader_behind_the_tail_gets_the_snapshot_view() {
    let h = Harness::with(|b| b.tail_limit(3));
    let pane = h.pane();
    pane.write(reply("a", "a1")).unwrap();
    pane.write(reply("b", "b1")).unwrap();
    pane.write(reply("c", "c1")).unwrap();
    pane.write(reply("a", "a2")).unwrap(); // replaces in place
    pane.working("t-1").unwrap();
    let ask = pane.ask(AskSpec::choice("call-1", "Go?", [AskOption::new("yes", "Yes")])).unwrap();
    let r = h.events("ticket-1", 0).await;
    let j = &r.json;
    assert_eq!(
        keys(j),
        ["asks", "dropped", "items", "next", "ok", "pane", "snapshot", "state", "turnId"].map(String::from)
    );
    assert_eq!(j["snapshot"], true);
    assert_eq!(j["pane"], "ticket-1");
    assert_eq!(item_ids(j), ["a", "b", "c"]);
    assert_eq!(j["items"][0]["text"], "a2");
    assert_eq!(j["state"], "working");
    assert_eq!(j["turnId"], "t-1");
    assert_eq!(j["next"], 6, "next is the pane's last seq");
    assert_eq!(j["dropped"], false);
    assert_eq!(j["asks"].as_array().unwrap().len(), 1);
    assert_eq!(j["asks"][0]["id"], ask.id());
}

#[tokio::test]
async fn events_after_beyond_the_last_seq_gets_the_snapshot() {
    let h = Harness::new();
    let pane = h.pane();
    pane.write(reply("a", "a")).unwrap();
    let r = h.events("ticket-1", 2).await;
    assert_eq!(r.json["snapshot"], true);
    assert_eq!(r.json["next"], 1);
    assert_eq!(item_ids(&r.json), ["a"]);
    assert_eq!(h.events("ticket-1", 1).await.json["snapshot"], false);
}

#[tokio::test]
async fn snapshot_view_is_items_in_order_of_first_appearance_replaced_in_place() {
    let h = Harness::new();
    let pane = h.pane();
    for (item, text) in [("x", "1"), ("y", "2"), ("z", "3"), ("y", "4"), ("x", "5"), ("w", "6")] {
        pane.write(reply(item, text)).unwrap();
    }
    let view = h.view("ticket-1").await;
    assert_eq!(item_ids(&view), ["x", "y", "z", "w"]);
    let texts: Vec<&str> =
        view["items"].as_array().unwrap().iter().map(|i| i["text"].as_str().unwrap()).collect();
    assert_eq!(texts, ["5", "4", "3", "6"]);
}

#[tokio::test]
async fn snapshot_keeps_2000_items_and_says_dropped_after_more() {
    let h = Harness::with(|b| b.tail_limit(1));
    let pane = h.pane();
    for i in 0..2000 {
        pane.write(reply(&format!("i{i}"), "x")).unwrap();
    }
    let view = h.view("ticket-1").await;
    assert_eq!(view["items"].as_array().unwrap().len(), 2000);
    assert_eq!(view["dropped"], false, "exactly 2000 items lose nothing");
    pane.write(reply("i2000", "x")).unwrap();
    let view = h.view("ticket-1").await;
    let ids = item_ids(&view);
    assert_eq!(ids.len(), 2000);
    assert_eq!(ids.first().map(String::as_str), Some("i1"), "the oldest went");
    assert_eq!(ids.last().map(String::as_str), Some("i2000"));
    assert_eq!(view["dropped"], true);
    // Rewriting a kept item does not bring the dropped one back.
    pane.write(reply("i5", "y")).unwrap();
    let view = h.view("ticket-1").await;
    assert_eq!(item_ids(&view)[4], "i5");
    assert_eq!(view["items"][4]["text"], "y");
    assert_eq!(view["dropped"], true);
}

#[tokio::test]
async fn events_of_an_unknown_or_closed_pane_are_404() {
    let h = Harness::new();
    let r = h.events("nope", 0).await;
    assert_eq!((r.status, r.code()), (404, "not-found"));
    let pane = h.pane();
    assert_eq!(h.events("ticket-1", 0).await.status, 200);
    pane.close();
    let r = h.events("ticket-1", 0).await;
    assert_eq!((r.status, r.code()), (404, "not-found"));
}

#[tokio::test]
async fn event_shapes_are_item_state_ask_ask_closed_and_title() {
    let h = Harness::new();
    let pane = h.pane();
    pane.write(reply("r1", "hi")).unwrap();
    pane.working("t-7").unwrap();
    let ask = pane.ask(AskSpec::choice("call-1", "Go?", [AskOption::new("yes", "Yes")])).unwrap();
    let r = h.answer(ask.id(), json!({"requestId": "r-1", "answer": {"optionIds": ["yes"]}})).await;
    assert_eq!(r.status, 200);
    pane.rename("Maria L.").unwrap();
    let events = h.all_events("ticket-1").await;
    let types: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(types, ["item", "state", "ask", "ask-closed", "title"]);
    let ts = "2026-11-30T05:00:00.000Z";
    assert_eq!(
        events[0],
        json!({"seq": 1, "ts": ts, "type": "item", "item": {"id": "r1", "kind": "reply", "text": "hi"}})
    );
    assert_eq!(events[1], json!({"seq": 2, "ts": ts, "type": "state", "state": "working", "turnId": "t-7"}));
    assert_eq!(keys(&events[2]), ["ask", "seq", "ts", "type"].map(String::from));
    assert_eq!(events[2]["ask"]["id"], ask.id());
    assert_eq!(events[2]["ask"]["kind"], "choice");
    assert_eq!(
        events[3],
        json!({"seq": 4, "ts": ts, "type": "ask-closed", "askId": ask.id(), "decidedBy": "phone", "decidedAt": ts, "outcome": "answered"})
    );
    assert_eq!(events[4], json!({"seq": 5, "ts": ts, "type": "title", "title": "Maria L."}));
}

#[tokio::test]
async fn state_event_before_any_turn_has_turn_id_null() {
    let h = Harness::new();
    let pane = h.pane();
    pane.state(PaneState::Idle, None).unwrap();
    let events = h.all_events("ticket-1").await;
    assert_eq!(events[0]["type"], "state");
    assert_eq!(events[0]["turnId"], Value::Null);
    assert!(events[0].as_object().unwrap().contains_key("turnId"));
}

#[tokio::test]
async fn event_ts_comes_from_the_injected_clock() {
    let h = Harness::new();
    let pane = h.pane();
    h.advance(1234).await;
    pane.write(reply("r1", "hi")).unwrap();
    assert_eq!(h.all_events("ticket-1").await[0]["ts"], "2026-11-30T05:00:01.234Z");
}

// ---------------------------------------------------------------------------
// §6.1 Items

async fn last_item(h: &Harness) -> Value {
    let view = h.view("ticket-1").await;
    view["items"].as_array().unwrap().last().cloned().unwrap()
}

#[tokio::test]
async fn item_text_loses_control_and_invisible_characters_but_keeps_newline_and_tab() {
    let h = Harness::new();
    let pane = h.pane();
    pane.write(reply("r1", "a\u{7}b\u{200B}c\u{202E}d\u{FEFF}e\u{AD}f\n\tg\r")).unwrap();
    assert_eq!(last_item(&h).await["text"], "abcdef\n\tg");
    // A line (a link's text, a tool name) keeps no newline either.
    pane.write(Item::new(
        id("l1"),
        ItemBody::Link { text: "see\nthis\u{2066}".into(), href: "https://example.com/a".into() },
    ))
    .unwrap();
    let link = last_item(&h).await;
    assert!(!link["text"].as_str().unwrap().contains('\n'), "{link}");
    assert!(!link["text"].as_str().unwrap().contains('\u{2066}'), "{link}");
}

#[tokio::test]
async fn item_text_over_its_kind_limit_is_truncated_on_a_utf8_boundary() {
    let h = Harness::new();
    let pane = h.pane();
    let big = |n: usize| format!("a{}", "é".repeat(n));
    let cases: Vec<(ItemBody, &str, usize)> = vec![
        (ItemBody::User { text: big(40_000), request_id: None }, "text", 64 * 1024),
        (ItemBody::Reply { text: big(140_000), partial: false }, "text", 256 * 1024),
        (ItemBody::Markdown { text: big(140_000), partial: false }, "text", 256 * 1024),
        (ItemBody::Thinking { text: big(40_000), partial: false }, "text", 64 * 1024),
        (ItemBody::Notice { text: big(2000), partial: false, tone: None }, "text", 2 * 1024),
        (ItemBody::Code { text: big(140_000), lang: None }, "text", 256 * 1024),
        (ItemBody::Link { text: big(1000), href: "https://e.com".into() }, "text", 1024),
        (ItemBody::Progress { label: big(200), value: 0.5, badge: None }, "label", 256),
    ];
    for (i, (body, field, limit)) in cases.into_iter().enumerate() {
        let kind = body.kind();
        pane.write(Item::new(id(&format!("i{i}")), body)).unwrap();
        let item = last_item(&h).await;
        let text = item[field].as_str().unwrap();
        // 'a' + 'é'*k: an odd number of bytes; the cut lands one byte short
        // of the limit, never inside an 'é'.
        assert_eq!(text.len(), limit - 1, "{kind}");
        assert!(text.starts_with('a') && text[1..].chars().all(|c| c == 'é'), "{kind}");
    }
    // A tool: name 64, call 512, output 64 KiB.
    pane.write(Item::new(
        id("t"),
        ItemBody::Tool {
            name: "n".repeat(100),
            call: "c".repeat(600),
            status: ToolStatus::Running,
            output: Some("o".repeat(70_000)),
            badge: None,
        },
    ))
    .unwrap();
    let tool = last_item(&h).await;
    assert_eq!(tool["name"].as_str().unwrap().len(), 64);
    assert_eq!(tool["call"].as_str().unwrap().len(), 512);
    assert_eq!(tool["output"].as_str().unwrap().len(), 64 * 1024);
    // Text within its limit stays whole.
    pane.write(Item::new(id("n"), ItemBody::Notice { text: "x".repeat(2048), partial: false, tone: None }))
        .unwrap();
    assert_eq!(last_item(&h).await["text"].as_str().unwrap().len(), 2048);
}

#[tokio::test]
async fn bad_lang_href_badge_or_progress_is_an_err_that_writes_nothing() {
    let h = Harness::new();
    let pane = h.pane();
    let seq = h.seq().await;
    let bad: Vec<(ItemBody, &str)> = vec![
        (ItemBody::Code { text: "x".into(), lang: Some("Rust".into()) }, "lang"),
        (ItemBody::Code { text: "x".into(), lang: Some("".into()) }, "lang"),
        (ItemBody::Link { text: "x".into(), href: "javascript:alert(1)".into() }, "href"),
        (ItemBody::Link { text: "x".into(), href: "/relative".into() }, "href"),
        (ItemBody::Link { text: "x".into(), href: format!("https://e.com/{}", "a".repeat(2048)) }, "href"),
        (
            ItemBody::Tool {
                name: "t".into(),
                call: "t()".into(),
                status: ToolStatus::Ok,
                output: None,
                badge: Some(Badge::new("x".repeat(25), BadgeTone::Good)),
            },
            "badge",
        ),
        (
            ItemBody::Progress {
                label: "p".into(),
                value: 0.5,
                badge: Some(Badge::new("", BadgeTone::Neutral)),
            },
            "badge",
        ),
        (ItemBody::Progress { label: "p".into(), value: 1.5, badge: None }, "progress"),
        (ItemBody::Progress { label: "p".into(), value: -0.01, badge: None }, "progress"),
        (ItemBody::Progress { label: "p".into(), value: f64::NAN, badge: None }, "progress"),
        (ItemBody::Progress { label: "p".into(), value: f64::INFINITY, badge: None }, "progress"),
    ];
    for (body, rule) in bad {
        let e = pane.write(Item::new(id("bad"), body)).unwrap_err();
        assert_eq!(e.rule(), rule, "{e}");
        assert!(e.is_invalid_argument() || e.is_out_of_range(), "{e:?}");
    }
    assert_eq!(h.seq().await, seq, "nothing was written");
    assert_eq!(h.all_events("ticket-1").await, Vec::<Value>::new());
    // The good forms go through.
    pane.write(Item::new(id("c"), ItemBody::Code { text: "x".into(), lang: Some("c++".into()) })).unwrap();
    pane.write(Item::new(
        id("l"),
        ItemBody::Link { text: "x".into(), href: "http://127.0.0.1:8080/a".into() },
    ))
    .unwrap();
    pane.write(Item::new(
        id("p"),
        ItemBody::Progress {
            label: "p".into(),
            value: 1.0,
            badge: Some(Badge::new("done", BadgeTone::Good)),
        },
    ))
    .unwrap();
    assert_eq!(h.all_events("ticket-1").await.len(), 3);
}

#[tokio::test]
async fn items_serialize_with_their_kind_fields_and_omit_absent_ones() {
    let h = Harness::new();
    let pane = h.pane();
    pane.write(Item::new(id("u"), ItemBody::User { text: "hi".into(), request_id: Some(id("r-1")) }))
        .unwrap();
    pane.write(Item::new(
        id("n"),
        ItemBody::Notice { text: "careful".into(), partial: false, tone: Some(NoticeTone::Warn) },
    ))
    .unwrap();
    pane.write(Item::new(
        id("t"),
        ItemBody::Tool {
            name: "refund".into(),
            call: "refund()".into(),
            status: ToolStatus::Denied,
            output: None,
            badge: Some(Badge::new("no", BadgeTone::Bad)),
        },
    ))
    .unwrap();
    let view = h.view("ticket-1").await;
    assert_eq!(
        view["items"],
        json!([
            {"id": "u", "kind": "user", "text": "hi", "requestId": "r-1"},
            {"id": "n", "kind": "notice", "text": "careful", "tone": "warn"},
            {"id": "t", "kind": "tool", "name": "refund", "call": "refund()", "status": "denied", "badge": {"text": "no", "tone": "bad"}}
        ])
    );
}

#[tokio::test]
async fn item_written_to_a_closed_pane_is_an_err() {
    let h = Harness::new();
    let pane = h.pane();
    pane.close();
    assert!(pane.write(reply("r", "x")).unwrap_err().is_closed());
}

#[tokio::test]
async fn partial_items_are_finalized_when_the_pane_goes_idle_with_exactly_one_warning() {
    let h = Harness::new();
    let pane = h.pane();
    pane.working("t-1").unwrap();
    pane.write(partial("r1", "Got")).unwrap();
    pane.write(Item::new(id("th"), ItemBody::Thinking { text: "hmm".into(), partial: true })).unwrap();
    pane.write(reply("done", "final")).unwrap();
    let view = h.view("ticket-1").await;
    assert_eq!(view["items"][0]["partial"], true);
    pane.idle().unwrap();
    let view = h.view("ticket-1").await;
    for item in view["items"].as_array().unwrap() {
        assert!(item.get("partial").is_none(), "{item}");
    }
    assert_eq!(view["items"][0]["text"], "Got", "the text stays as it was");
    let warns = h.warns();
    assert_eq!(warns.len(), 1, "{warns:?}");
    assert!(warns[0].contains("r1") && warns[0].contains("th"), "{warns:?}");
    // The finalized items reach an event reader before the state event.
    let events = h.all_events("ticket-1").await;
    let tail: Vec<(&str, Option<&str>)> =
        events[4..].iter().map(|e| (e["type"].as_str().unwrap(), e["item"]["id"].as_str())).collect();
    assert_eq!(tail.last(), Some(&("state", None)));
    assert!(tail.contains(&("item", Some("r1"))) && tail.contains(&("item", Some("th"))), "{tail:?}");
    assert!(events[4..].iter().all(|e| e["item"].get("partial").is_none()));
}

#[tokio::test]
async fn partial_item_finalized_by_the_program_gives_no_warning() {
    let h = Harness::new();
    let pane = h.pane();
    pane.working("t-1").unwrap();
    pane.write(partial("r1", "Go")).unwrap();
    pane.write(reply("r1", "Got it")).unwrap();
    pane.idle().unwrap();
    assert!(h.warns().is_empty(), "{:?}", h.warns());
    assert_eq!(h.view("ticket-1").await["items"][0]["text"], "Got it");
}

#[tokio::test]
async fn events_after_at_the_largest_number_gets_the_snapshot_and_never_panics() {
    let h = Harness::new();
    let pane = h.pane();
    pane.write(reply("a", "a")).unwrap();
    let r = h.events("ticket-1", u64::MAX).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json["snapshot"], true);
    assert_eq!(item_ids(&r.json), ["a"]);
    let r = h.get("/v1/state?since=18446744073709551615").await;
    assert_eq!((r.status, r.json["full"].clone()), (200, json!(true)));
}
