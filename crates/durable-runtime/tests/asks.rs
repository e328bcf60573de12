//! Contract §7 on the program's side: raising asks of every kind, their flags,
//! closing (timeout, abort, program, pane close), allow-always, and
//! `require_approval` (§7.3).
use durable_runtime::test_util as harness;

use durable_runtime::types::{
    Answer, AskOption, AskSpec, DecidedBy, FieldType, FormField, Outcome, ToolInfo, ask_hash_input,
    ask_id_for,
};
use durable_runtime::{AbortController, ApprovalOptions, AskClosed, require_approval};
use harness::{Harness, poll_once};
use serde_json::{Value, json};

fn yes_no(call: &str, title: &str) -> AskSpec {
    AskSpec::choice(call, title, [AskOption::new("yes", "Yes"), AskOption::new("no", "No")])
}

fn approve_spec(call: &str) -> AskSpec {
    AskSpec::choice(
        call,
        "deploy wants to run",
        [
            AskOption::new("allow", "Allow"),
            AskOption::new("allow-always", "Allow always").always(),
            AskOption::new("deny", "Deny"),
        ],
    )
    .tool(ToolInfo::from_call("deploy", &json!({"env": "staging"})))
}

fn form_spec() -> AskSpec {
    AskSpec::form(
        "form-1",
        "Order details",
        [
            FormField::new("name", "Name", FieldType::Text).required(),
            FormField::new("qty", "Quantity", FieldType::Number),
            FormField::new("gift", "Gift", FieldType::Bool),
            FormField::new("size", "Size", FieldType::Select).options([
                ("s", "Small"),
                ("m", "Medium"),
                ("l", "Large"),
            ]),
        ],
    )
}

async fn state_ask(h: &Harness, ask_id: &str) -> Option<Value> {
    h.state().await.json["asks"].as_array().unwrap().iter().find(|a| a["id"] == ask_id).cloned()
}

fn ask_closed_events(events: &[Value]) -> Vec<Value> {
    events.iter().filter(|e| e["type"] == "ask-closed").cloned().collect()
}

// ---------------------------------------------------------------------------
// Raising

#[tokio::test]
async fn ask_id_is_ask_id_for_pane_and_tool_call() {
    let h = Harness::new();
    let pane = h.pane();
    let ask = pane.ask(yes_no("call-1", "Go?")).unwrap();
    assert_eq!(ask.id(), "970f8a0b30368fbbcab73013d31d2d51");
    assert_eq!(ask.id(), ask_id_for("ticket-1", "call-1"));
    let deploy = h.pane_named("deploy").ask(yes_no("deploy-1", "Deploy?")).unwrap();
    assert_eq!(deploy.id(), "f5286b923e30e7081ee2a5464db467ec");
}

#[tokio::test]
async fn ask_raises_at_once_with_its_wire_object_in_state_and_events() {
    let h = Harness::new();
    let pane = h.pane();
    let _ask = pane
        .ask(
            yes_no("call-1", "Go?")
                .reason("Because")
                .push_title("Needs a yes")
                .push_line("Maria asks")
                .item_id("item-9"),
        )
        .unwrap();
    let a = state_ask(&h, "970f8a0b30368fbbcab73013d31d2d51").await.expect("raised before being awaited");
    assert_eq!(a["pane"], "ticket-1");
    assert_eq!(a["kind"], "choice");
    assert_eq!(a["title"], "Go?");
    assert_eq!(a["reason"], "Because");
    assert_eq!(a["itemId"], "item-9");
    assert_eq!(a["toolCallId"], "call-1");
    assert_eq!(a["push"], json!({"title": "Needs a yes", "line": "Maria asks"}));
    assert_eq!(a["options"], json!([{"id": "yes", "label": "Yes"}, {"id": "no", "label": "No"}]));
    assert_eq!(a["createdAt"], "2026-11-30T05:00:00.000Z");
    assert!(a.get("expiresAt").is_none());
    assert!(a.get("tool").is_none());
    assert_eq!(a["hash"].as_str().unwrap().len(), 64);
    let events = h.all_events("ticket-1").await;
    assert_eq!(events[0]["type"], "ask");
    assert_eq!(events[0]["ask"], a);
    assert_eq!(pane.open_asks(), ["970f8a0b30368fbbcab73013d31d2d51"]);
}

#[tokio::test]
async fn raising_an_ask_id_that_is_open_is_an_err() {
    let h = Harness::new();
    let pane = h.pane();
    let _first = pane.ask(yes_no("call-1", "Go?")).unwrap();
    let seq = h.seq().await;
    let e = pane.ask(yes_no("call-1", "Go again?")).unwrap_err();
    assert!(e.is_invalid_argument(), "the seed's TypeError: {e:?}");
    assert_eq!(e.rule(), "ask-open");
    assert_eq!(h.seq().await, seq, "nothing was raised");
    assert_eq!(state_ask(&h, "970f8a0b30368fbbcab73013d31d2d51").await.unwrap()["title"], "Go?");
    // Once decided, the id may be raised again.
    pane.decide("970f8a0b30368fbbcab73013d31d2d51", Answer::option("yes")).unwrap();
    assert!(pane.ask(yes_no("call-1", "Go again?")).is_ok());
}

#[tokio::test]
async fn bad_asks_are_errs_of_the_right_kind() {
    let h = Harness::new();
    let pane = h.pane();
    let nine = (0..9).map(|i| AskOption::new(format!("o{i}"), "x"));
    assert!(pane.ask(AskSpec::choice("c", "t", nine)).unwrap_err().is_out_of_range());
    assert!(pane.ask(AskSpec::choice("c", "t", [])).is_err());
    assert!(pane.ask(yes_no("call 1", "t")).unwrap_err().is_invalid_argument());
    assert!(pane.ask(yes_no("c", "t").expires_at_iso("2026-11-30T05:00:00")).is_err(), "no offset");
    assert!(pane.ask(AskSpec::form("c", "t", [])).is_err());
    assert_eq!(h.open_ask_ids().await, Vec::<String>::new());
    // An ask on a closed pane.
    pane.close();
    assert!(pane.ask(yes_no("c", "t")).unwrap_err().is_invalid_state());
}

#[tokio::test]
async fn readable_is_true_only_for_a_choice_without_an_always_option() {
    let h = Harness::new();
    let pane = h.pane();
    let cases = [
        (yes_no("c1", "t"), true),
        (approve_spec("c2"), false),
        (AskSpec::multi("c3", "t", [AskOption::new("a", "A")]), false),
        (AskSpec::text("c4", "t"), false),
        (form_spec(), false),
    ];
    for (spec, readable) in cases {
        let kind = format!("{:?}", spec.kind).chars().take(8).collect::<String>();
        let ask = pane.ask(spec).unwrap();
        let a = state_ask(&h, ask.id()).await.unwrap();
        assert_eq!(a["readable"], readable, "{kind}");
        assert_eq!(a["cleaned"], false);
    }
}

#[tokio::test]
async fn cleaned_is_true_when_any_text_was_truncated_or_sanitized() {
    let h = Harness::new();
    let pane = h.pane();
    let cases = [
        yes_no("c1", "Go\u{202E}?"),
        yes_no("c2", &"x".repeat(300)),
        yes_no("c3", "Go?").reason("r\u{200B}"),
        yes_no("c4", "Go?").push_title("p".repeat(61)),
        AskSpec::choice("c5", "Go?", [AskOption::new("yes", "Y".repeat(65))]),
    ];
    for spec in cases {
        let ask = pane.ask(spec).unwrap();
        assert_eq!(state_ask(&h, ask.id()).await.unwrap()["cleaned"], true, "{}", ask.id());
    }
    let a = state_ask(&h, &ask_id_for("ticket-1", "c2")).await.unwrap();
    assert_eq!(a["title"].as_str().unwrap().len(), 256);
    let a = state_ask(&h, &ask_id_for("ticket-1", "c4")).await.unwrap();
    assert_eq!(a["push"]["title"].as_str().unwrap().chars().count(), 60);
}

#[tokio::test]
async fn ask_with_tool_carries_name_call_and_args() {
    let h = Harness::new();
    let pane = h.pane();
    let ask = pane.ask(approve_spec("c1")).unwrap();
    let a = state_ask(&h, ask.id()).await.unwrap();
    assert_eq!(
        a["tool"],
        json!({"name": "deploy", "call": "deploy(env: \"staging\")", "args": [["env", "\"staging\""]]})
    );
    let ask = pane.ask(yes_no("c2", "t").tool(ToolInfo::from_call("ping", &json!({})))).unwrap();
    assert_eq!(state_ask(&h, ask.id()).await.unwrap()["tool"]["args"], json!([]));
}

// ---------------------------------------------------------------------------
// Each kind raised and answered

#[tokio::test]
async fn choice_ask_resolves_with_the_picked_option() {
    let h = Harness::new();
    let ask = h.pane().ask(yes_no("c1", "Go?")).unwrap();
    let id = ask.id().to_owned();
    let r = h.answer(&id, json!({"requestId": "r-1", "answer": {"optionIds": ["no"]}})).await;
    assert_eq!(r.status, 200, "{:?}", r.json);
    assert_eq!(ask.await.unwrap(), Answer::option("no"));
}

#[tokio::test]
async fn multi_ask_takes_min_to_max_distinct_known_options() {
    let h = Harness::new();
    let spec =
        AskSpec::multi("c1", "Colours?", ["red", "green", "blue", "grey"].map(|c| AskOption::new(c, c)))
            .picks(2, 3);
    let ask = h.pane().ask(spec).unwrap();
    let id = ask.id().to_owned();
    let a = state_ask(&h, &id).await.unwrap();
    assert_eq!((a["min"].clone(), a["max"].clone()), (json!(2), json!(3)));
    for bad in [
        json!(["red"]),
        json!(["red", "green", "blue", "grey"]),
        json!(["red", "pink"]),
        json!(["red", "red"]),
        json!([]),
    ] {
        let r = h.answer(&id, json!({"requestId": "r-1", "answer": {"optionIds": bad}})).await;
        assert_eq!((r.status, r.code()), (400, "bad-request"), "{bad}");
    }
    let r = h.answer(&id, json!({"requestId": "r-1", "answer": {"optionIds": ["blue", "red"]}})).await;
    assert_eq!(r.status, 200, "{:?}", r.json);
    assert_eq!(ask.await.unwrap().option_ids(), ["blue", "red"]);
}

#[tokio::test]
async fn multi_ask_defaults_min_1_and_max_the_number_of_options() {
    let h = Harness::new();
    let spec = AskSpec::multi("c1", "Colours?", ["red", "green", "blue"].map(|c| AskOption::new(c, c)));
    let id = h.pane().ask(spec).unwrap().id().to_owned();
    let r = h.answer(&id, json!({"requestId": "r-0", "answer": {"optionIds": []}})).await;
    assert_eq!(r.status, 400);
    let r =
        h.answer(&id, json!({"requestId": "r-1", "answer": {"optionIds": ["red", "green", "blue"]}})).await;
    assert_eq!(r.status, 200);
}

#[tokio::test]
async fn text_ask_refuses_text_over_max_bytes() {
    let h = Harness::new();
    let spec = AskSpec::text("c1", "Why?").text_field(Some("because…".into()), Some(true), Some(5));
    let ask = h.pane().ask(spec).unwrap();
    let id = ask.id().to_owned();
    let a = state_ask(&h, &id).await.unwrap();
    assert_eq!(
        (a["placeholder"].clone(), a["multiline"].clone(), a["maxBytes"].clone()),
        (json!("because…"), json!(true), json!(5))
    );
    for bad in [json!({"text": "abcdef"}), json!({"text": "ééé"}), json!({"optionIds": ["a"]}), json!({})]
    {
        let r = h.answer(&id, json!({"requestId": "r-1", "answer": bad})).await;
        assert_eq!((r.status, r.code()), (400, "bad-request"), "{bad}");
    }
    let r = h.answer(&id, json!({"requestId": "r-1", "answer": {"text": "é ab"}})).await;
    assert_eq!(r.status, 200, "{:?}", r.json);
    assert_eq!(ask.await.unwrap().text(), Some("é ab"));
}

#[tokio::test]
async fn form_ask_checks_required_number_bool_and_select_fields() {
    let h = Harness::new();
    let ask = h.pane().ask(form_spec()).unwrap();
    let id = ask.id().to_owned();
    let a = state_ask(&h, &id).await.unwrap();
    assert_eq!(
        a["fields"][3],
        json!({"id": "size", "label": "Size", "type": "select",
        "options": [{"id": "s", "label": "Small"}, {"id": "m", "label": "Medium"}, {"id": "l", "label": "Large"}]})
    );
    assert_eq!(a["fields"][0]["required"], true);
    for bad in [
        json!({"qty": 2}),                       // name missing
        json!({"name": null}),                   // name null
        json!({"name": 5}),                      // name not a string
        json!({"name": "Ann", "qty": "2"}),      // qty not a number
        json!({"name": "Ann", "gift": "yes"}),   // gift not a bool
        json!({"name": "Ann", "size": "xl"}),    // unknown select option
        json!({"name": "Ann", "size": 1}),       // select not by id
        json!({"name": "Ann", "colour": "red"}), // unknown field
    ] {
        let r = h.answer(&id, json!({"requestId": "r-1", "answer": {"values": bad}})).await;
        assert_eq!((r.status, r.code()), (400, "bad-request"), "{bad}");
    }
    let values = json!({"name": "Ann", "qty": 2.5, "gift": false, "size": "m"});
    let r = h.answer(&id, json!({"requestId": "r-1", "answer": {"values": values}})).await;
    assert_eq!(r.status, 200, "{:?}", r.json);
    assert_eq!(Value::Object(ask.await.unwrap().values().unwrap().clone()), values);
}

// ---------------------------------------------------------------------------
// Closing: timeout

#[tokio::test]
async fn ask_past_expiry_closes_with_timeout_and_leaves_one_chat_line() {
    let h = Harness::new();
    let pane = h.pane();
    let ask = pane.ask(yes_no("c1", "refund wants to run").expires_in_ms(5_000)).unwrap();
    let id = ask.id().to_owned();
    assert_eq!(state_ask(&h, &id).await.unwrap()["expiresAt"], "2026-11-30T05:00:05.000Z");
    assert_eq!(
        h.core.driver().next_deadline().map(|t| t.to_rfc3339()).as_deref(),
        Some("2026-11-30T05:00:05.000Z")
    );
    let mut ask = Box::pin(ask.decided());
    h.advance(4_999).await;
    assert!(poll_once(&mut ask).is_none(), "not yet");
    assert!(state_ask(&h, &id).await.is_some());
    h.advance(1).await;
    let closed = poll_once(&mut ask).expect("closed at expiry").unwrap_err();
    assert_eq!(closed.decided_by, DecidedBy::Timeout);
    assert_eq!(closed.outcome, Outcome::Timeout);
    assert_eq!(closed.decided_at.to_rfc3339(), "2026-11-30T05:00:05.000Z");
    assert!(state_ask(&h, &id).await.is_none());
    assert!(pane.open_asks().is_empty());
    let events = h.all_events("ticket-1").await;
    assert_eq!(
        ask_closed_events(&events),
        [json!({"seq": 2, "ts": "2026-11-30T05:00:05.000Z", "type": "ask-closed", "askId": id,
                "decidedBy": "timeout", "decidedAt": "2026-11-30T05:00:05.000Z", "outcome": "timeout"})]
    );
    assert_eq!(h.notices("ticket-1").await, ["Timed out before an answer: refund wants to run"]);
    // More ticks add nothing.
    h.advance(60_000).await;
    assert_eq!(h.notices("ticket-1").await.len(), 1);
    assert_eq!(ask_closed_events(&h.all_events("ticket-1").await).len(), 1);
    // A later answer is ask-closed, decided by timeout.
    let r = h.answer(&id, json!({"requestId": "r-1", "answer": {"optionIds": ["yes"]}})).await;
    assert_eq!((r.status, r.code()), (409, "ask-closed"));
    assert_eq!(r.json["decidedBy"], "timeout");
    assert_eq!(r.json["decidedAt"], "2026-11-30T05:00:05.000Z");
}

#[tokio::test]
async fn ask_awaitable_fails_with_ask_closed_timeout() {
    let h = Harness::new();
    let ask = h.pane().ask(yes_no("c1", "Go?").expires_in_ms(1_000)).unwrap();
    h.advance(1_000).await;
    let err: AskClosed = ask.await.unwrap_err();
    assert_eq!(err.decided_by, DecidedBy::Timeout);
}

#[tokio::test]
async fn ask_raised_with_expiry_already_past_closes_at_once_as_timeout() {
    let h = Harness::new();
    let ask = h.pane().ask(yes_no("c1", "Go?").expires_at_iso("2026-11-30T04:59:00.000Z")).unwrap();
    assert_eq!(ask.await.unwrap_err().decided_by, DecidedBy::Timeout);
    assert_eq!(h.open_ask_ids().await, Vec::<String>::new());
    assert_eq!(h.notices("ticket-1").await, ["Timed out before an answer: Go?"]);
}

#[tokio::test]
async fn ask_expiry_takes_an_iso_time_with_offset() {
    let h = Harness::new();
    let ask = h.pane().ask(yes_no("c1", "Go?").expires_at_iso("2026-11-30T06:00:10.000+01:00")).unwrap();
    let a = state_ask(&h, ask.id()).await.unwrap();
    assert_eq!(a["expiresAt"], "2026-11-30T05:00:10.000Z");
}

// ---------------------------------------------------------------------------
// Closing: abort, drop, program, pane close

#[tokio::test]
async fn aborted_signal_closes_the_ask_as_program_aborted_with_one_chat_line() {
    let h = Harness::new();
    let pane = h.pane();
    let ctl = AbortController::new();
    let ask = pane.ask_with(yes_no("c1", "refund wants to run"), Some(ctl.signal())).unwrap();
    let id = ask.id().to_owned();
    h.settle().await;
    assert!(state_ask(&h, &id).await.is_some());
    ctl.abort();
    h.settle().await;
    let err = ask.await.unwrap_err();
    assert_eq!((err.decided_by, err.outcome), (DecidedBy::Program, Outcome::Aborted));
    assert!(state_ask(&h, &id).await.is_none());
    let closed = ask_closed_events(&h.all_events("ticket-1").await);
    assert_eq!(closed.len(), 1);
    assert_eq!(
        (closed[0]["decidedBy"].clone(), closed[0]["outcome"].clone()),
        (json!("program"), json!("aborted"))
    );
    assert_eq!(h.notices("ticket-1").await, ["Stopped before an answer: refund wants to run"]);
}

#[tokio::test]
async fn signal_already_aborted_closes_the_ask_right_after_raising() {
    let h = Harness::new();
    let ctl = AbortController::new();
    ctl.abort();
    let ask = h.pane().ask_with(yes_no("c1", "Go?"), Some(ctl.signal())).unwrap();
    h.settle().await;
    assert_eq!(ask.await.unwrap_err().decided_by, DecidedBy::Program);
}

#[tokio::test]
async fn dropping_the_awaitable_leaves_the_ask_open() {
    let h = Harness::new();
    let pane = h.pane();
    let ctl = AbortController::new();
    let ask = pane.ask_with(yes_no("c1", "Go?"), Some(ctl.signal())).unwrap();
    let id = ask.id().to_owned();
    drop(ask);
    h.settle().await;
    assert!(state_ask(&h, &id).await.is_some());
    assert_eq!(pane.open_asks(), std::slice::from_ref(&id));
    assert!(ask_closed_events(&h.all_events("ticket-1").await).is_empty());
    assert!(h.notices("ticket-1").await.is_empty());
    // The phone can still answer it.
    let r = h.answer(&id, json!({"requestId": "r-1", "answer": {"optionIds": ["yes"]}})).await;
    assert_eq!(r.status, 200);
    assert!(h.notices("ticket-1").await.is_empty(), "a phone answer leaves no notice");
}

#[tokio::test]
async fn program_deciding_an_ask_resolves_it_with_the_answer_and_one_chat_line() {
    let h = Harness::new();
    let pane = h.pane();
    let ask = pane.ask(yes_no("c1", "refund wants to run")).unwrap();
    let id = ask.id().to_owned();
    pane.decide(&id, Answer::option("yes")).unwrap();
    let decided = ask.decided().await.unwrap();
    assert_eq!(decided.answer, Answer::option("yes"));
    assert_eq!(decided.decided_by, DecidedBy::Program);
    let closed = ask_closed_events(&h.all_events("ticket-1").await);
    assert_eq!(
        (closed[0]["decidedBy"].clone(), closed[0]["outcome"].clone()),
        (json!("program"), json!("answered"))
    );
    assert_eq!(h.notices("ticket-1").await, ["Answered in the agent: refund wants to run"]);
    let r = h.answer(&id, json!({"requestId": "r-1", "answer": {"optionIds": ["yes"]}})).await;
    assert_eq!((r.status, r.code(), r.json["decidedBy"].clone()), (409, "ask-closed", json!("program")));
}

#[tokio::test]
async fn program_decide_with_an_answer_that_does_not_fit_is_an_err_and_leaves_the_ask_open() {
    let h = Harness::new();
    let pane = h.pane();
    let ask = pane.ask(yes_no("c1", "Go?")).unwrap();
    assert!(pane.decide(ask.id(), Answer::option("maybe")).is_err());
    assert!(pane.decide(ask.id(), Answer::Text { text: "yes".into() }).is_err());
    assert!(
        pane.decide("00000000000000000000000000000000", Answer::option("yes"))
            .unwrap_err()
            .is_invalid_state()
    );
    assert_eq!(pane.open_asks(), [ask.id().to_owned()]);
    // Another pane cannot decide it.
    let other = h.pane_named("other");
    assert!(other.decide(ask.id(), Answer::option("yes")).is_err());
    assert_eq!(pane.open_asks().len(), 1);
}

#[tokio::test]
async fn pane_close_closes_its_asks_as_aborted() {
    let h = Harness::new();
    let pane = h.pane();
    let other = h.pane_named("other");
    let a1 = pane.ask(yes_no("c1", "Go?")).unwrap();
    let a2 = pane.ask(AskSpec::text("c2", "Why?")).unwrap();
    let keep = other.ask(yes_no("c3", "Keep?")).unwrap();
    let (id1, id2) = (a1.id().to_owned(), a2.id().to_owned());
    pane.close();
    for ask in [a1, a2] {
        let err = ask.await.unwrap_err();
        assert_eq!((err.decided_by, err.outcome), (DecidedBy::Program, Outcome::Aborted));
    }
    assert_eq!(h.open_ask_ids().await, [keep.id().to_owned()]);
    for id in [id1, id2] {
        let r = h.answer(&id, json!({"requestId": format!("r-{id}"), "answer": {"text": "x"}})).await;
        assert_eq!((r.status, r.code(), r.json["decidedBy"].clone()), (409, "ask-closed", json!("program")));
    }
}

#[tokio::test]
async fn core_asks_oldest_first_in_state() {
    let h = Harness::new();
    let pane = h.pane();
    let ids: Vec<String> =
        ["c3", "c1", "c2"].iter().map(|c| pane.ask(yes_no(c, "t")).unwrap().id().to_owned()).collect();
    assert_eq!(h.open_ask_ids().await, ids);
    assert_eq!(pane.open_asks(), ids);
}

// ---------------------------------------------------------------------------
// Allow-always

#[tokio::test]
async fn always_option_is_an_err_when_allow_always_is_false() {
    let h = Harness::with(|b| b.allow_always(false));
    let pane = h.pane();
    let e = pane.ask(approve_spec("c1")).unwrap_err();
    assert!(e.is_invalid_argument(), "{e:?}");
    assert_eq!(h.open_ask_ids().await, Vec::<String>::new());
    assert!(pane.ask(yes_no("c1", "Go?")).is_ok());
}

#[tokio::test]
async fn always_pick_without_confirm_always_is_409_confirm_required_and_with_it_200() {
    let h = Harness::new();
    let ask = h.pane().ask(approve_spec("c1")).unwrap();
    let id = ask.id().to_owned();
    let r = h.answer(&id, json!({"requestId": "r-1", "answer": {"optionIds": ["allow-always"]}})).await;
    assert_eq!((r.status, r.code()), (409, "confirm-required"));
    let r = h
        .answer(
            &id,
            json!({"requestId": "r-1", "answer": {"optionIds": ["allow-always"]}, "confirmAlways": false}),
        )
        .await;
    assert_eq!((r.status, r.code()), (409, "confirm-required"));
    assert!(state_ask(&h, &id).await.is_some());
    let r = h
        .answer(
            &id,
            json!({"requestId": "r-1", "answer": {"optionIds": ["allow-always"]}, "confirmAlways": true}),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.json);
    assert_eq!(ask.await.unwrap(), Answer::option("allow-always"));
}

#[tokio::test]
async fn non_always_pick_on_an_allow_always_ask_needs_no_confirmation() {
    let h = Harness::new();
    let id = h.pane().ask(approve_spec("c1")).unwrap().id().to_owned();
    let r = h.answer(&id, json!({"requestId": "r-1", "answer": {"optionIds": ["deny"]}})).await;
    assert_eq!(r.status, 200);
}

#[tokio::test]
async fn always_pick_on_a_cleaned_ask_or_one_without_tool_is_400() {
    let h = Harness::new();
    let pane = h.pane();
    let always = [AskOption::new("allow", "Allow"), AskOption::new("allow-always", "Allow always").always()];
    let no_tool = pane.ask(AskSpec::choice("c1", "Go?", always.clone())).unwrap().id().to_owned();
    let cleaned = pane
        .ask(AskSpec::choice("c2", "Go\u{202E}?", always).tool(ToolInfo::from_call("deploy", &json!({}))))
        .unwrap()
        .id()
        .to_owned();
    assert_eq!(state_ask(&h, &cleaned).await.unwrap()["cleaned"], true);
    for id in [&no_tool, &cleaned] {
        for confirm in [true, false] {
            let r = h
                .answer(id, json!({"requestId": "r-1", "answer": {"optionIds": ["allow-always"]}, "confirmAlways": confirm}))
                .await;
            assert_eq!((r.status, r.code()), (400, "bad-request"), "{id} confirm={confirm}");
        }
        // The plain option is fine.
        let r =
            h.answer(id, json!({"requestId": format!("ok-{id}"), "answer": {"optionIds": ["allow"]}})).await;
        assert_eq!(r.status, 200);
    }
}

// ---------------------------------------------------------------------------
// §7.3 require_approval

#[tokio::test]
async fn require_approval_raises_the_contract_vector_ask() {
    let h = Harness::new();
    let pane = h.pane();
    let args = json!({"order": "5521", "amount": 40});
    let _approval = require_approval("refund", &args, ApprovalOptions::new(&pane, "call-1")).unwrap();
    let a = state_ask(&h, "970f8a0b30368fbbcab73013d31d2d51").await.expect("raised at once");
    assert_eq!(a["hash"], "cb8b64234d06250d254d479dcdd28c57083cae57ba257f035c7f409be9de57ce");
    assert_eq!(
        ask_hash_input(&a),
        r#"{"kind":"choice","options":[{"id":"allow","label":"Allow"},{"id":"deny","label":"Deny"}],"push":{"title":"refund needs a yes"},"title":"refund wants to run","tool":{"args":[["order","\"5521\""],["amount","40"]],"call":"refund(order: \"5521\", amount: 40)","name":"refund"}}"#
    );
    assert_eq!(a["title"], "refund wants to run");
    assert_eq!(a["tool"]["call"], "refund(order: \"5521\", amount: 40)");
    assert_eq!(a["readable"], true);
    assert!(a.get("expiresAt").is_none());
}

#[tokio::test]
async fn require_approval_allow_is_approved() {
    let h = Harness::new();
    let pane = h.pane();
    let approval = require_approval(
        "refund",
        &json!({"order": "5521", "amount": 40}),
        ApprovalOptions::new(&pane, "call-1"),
    )
    .unwrap();
    h.advance(2_000).await;
    let r = h
        .answer(
            "970f8a0b30368fbbcab73013d31d2d51",
            json!({"requestId": "r-1", "answer": {"optionIds": ["allow"]}}),
        )
        .await;
    assert_eq!(r.status, 200);
    let a = approval.await;
    assert!(a.approved);
    assert_eq!(a.outcome, durable_runtime::types::Outcome::Answered);
    assert_eq!(a.decided_by, DecidedBy::Phone);
    assert_eq!(a.decided_at.to_rfc3339(), "2026-11-30T05:00:02.000Z");
    assert_eq!(a.ask_id, "970f8a0b30368fbbcab73013d31d2d51");
}

#[tokio::test]
async fn require_approval_deny_is_not_approved_decided_by_phone() {
    let h = Harness::new();
    let pane = h.pane();
    let approval =
        require_approval("refund", &json!({"amount": 40}), ApprovalOptions::new(&pane, "call-1")).unwrap();
    let r = h
        .answer(
            &ask_id_for("ticket-1", "call-1"),
            json!({"requestId": "r-1", "answer": {"optionIds": ["deny"]}}),
        )
        .await;
    assert_eq!(r.status, 200);
    let a = approval.await;
    assert_eq!((a.approved, a.decided_by), (false, DecidedBy::Phone));
    assert_eq!(a.outcome, durable_runtime::types::Outcome::Answered, "a deny is an answer");
}

#[tokio::test]
async fn require_approval_timeout_is_not_approved_decided_by_timeout() {
    let h = Harness::new();
    let pane = h.pane();
    let approval = require_approval(
        "refund",
        &json!({"order": "5521", "amount": 40}),
        ApprovalOptions::new(&pane, "call-1").timeout_ms(10_000),
    )
    .unwrap();
    let a = state_ask(&h, &ask_id_for("ticket-1", "call-1")).await.unwrap();
    assert_eq!(a["expiresAt"], "2026-11-30T05:00:10.000Z");
    assert_eq!(
        a["hash"], "cb8b64234d06250d254d479dcdd28c57083cae57ba257f035c7f409be9de57ce",
        "the expiry is not hashed"
    );
    h.advance(10_000).await;
    let a = approval.await;
    assert_eq!((a.approved, a.decided_by), (false, DecidedBy::Timeout));
    assert_eq!(a.outcome, durable_runtime::types::Outcome::Timeout);
    assert_eq!(h.notices("ticket-1").await, ["Timed out before an answer: refund wants to run"]);
}

#[tokio::test]
async fn require_approval_abort_is_not_approved_decided_by_program() {
    let h = Harness::new();
    let pane = h.pane();
    let ctl = AbortController::new();
    let approval = require_approval(
        "refund",
        &json!({"amount": 40}),
        ApprovalOptions::new(&pane, "call-1").signal(ctl.signal()),
    )
    .unwrap();
    h.settle().await;
    ctl.abort();
    h.settle().await;
    let a = approval.await;
    assert_eq!((a.approved, a.decided_by), (false, DecidedBy::Program));
    assert_eq!(a.outcome, durable_runtime::types::Outcome::Aborted);
    assert_eq!(h.notices("ticket-1").await, ["Stopped before an answer: refund wants to run"]);
}

#[tokio::test]
async fn require_approval_pane_close_is_not_approved_decided_by_program() {
    let h = Harness::new();
    let pane = h.pane();
    let approval =
        require_approval("refund", &json!({"amount": 40}), ApprovalOptions::new(&pane, "call-1")).unwrap();
    pane.close();
    let a = approval.await;
    assert_eq!((a.approved, a.decided_by), (false, DecidedBy::Program));
    assert_eq!(a.outcome, durable_runtime::types::Outcome::Aborted);
}

#[tokio::test]
async fn require_approval_stop_from_the_phone_is_not_approved_decided_by_program() {
    use durable_runtime::{ChatHandler, Turn};
    struct Chat;
    impl ChatHandler for Chat {
        async fn turn(&self, _turn: Turn) {}
    }
    let h = Harness::new();
    let pane = h.pane();
    pane.on_send(Chat).unwrap();
    let approval =
        require_approval("refund", &json!({"amount": 40}), ApprovalOptions::new(&pane, "call-1")).unwrap();
    let r = h.post("/v1/panes/ticket-1/stop", json!({"requestId": "s-1"})).await;
    assert_eq!(r.status, 200, "{:?}", r.json);
    let a = approval.await;
    assert_eq!((a.approved, a.decided_by), (false, DecidedBy::Program));
    assert_eq!(a.outcome, durable_runtime::types::Outcome::Aborted);
}

#[tokio::test]
async fn require_approval_of_a_bad_call_is_an_err() {
    let h = Harness::new();
    let pane = h.pane();
    assert!(require_approval("refund", &json!({}), ApprovalOptions::new(&pane, "bad id")).is_err());
    // A card must say which tool it asks about: an empty name (or one that
    // is only white space or control characters) names the rule and the value.
    for name in ["", "  ", "\u{1b}\u{202e}"] {
        let err = require_approval(name, &json!({"order": "5521"}), ApprovalOptions::new(&pane, "call-0"))
            .expect_err("an empty tool name is refused");
        assert_eq!(err.rule(), "tool", "{err}");
        assert!(err.to_string().contains("empty name") && err.to_string().contains("call-0"), "{err}");
    }
    let _first = require_approval("refund", &json!({}), ApprovalOptions::new(&pane, "call-1")).unwrap();
    assert!(
        require_approval("refund", &json!({}), ApprovalOptions::new(&pane, "call-1")).is_err(),
        "already open"
    );
}

#[tokio::test]
async fn close_from_the_phone_closes_the_panes_asks_as_program_aborted() {
    let h = Harness::with_caps(durable_runtime::types::Caps::all());
    let pane = h.pane();
    let ask = pane.ask(yes_no("c1", "Go?")).unwrap();
    let r = h.post("/v1/close", json!({"requestId": "k-1", "target": "pane", "id": "ticket-1"})).await;
    assert_eq!(r.status, 200, "{:?}", r.json);
    let err = ask.await.unwrap_err();
    assert_eq!((err.decided_by, err.outcome), (DecidedBy::Program, Outcome::Aborted));
    assert_eq!(h.open_ask_ids().await, Vec::<String>::new());
}

#[tokio::test]
async fn program_decided_ask_reports_when_it_was_decided() {
    let h = Harness::new();
    let pane = h.pane();
    let ask = pane.ask(AskSpec::text("c1", "Why?")).unwrap();
    h.advance(2_500).await;
    pane.decide(ask.id(), Answer::Text { text: "because".into() }).unwrap();
    let d = ask.decided().await.unwrap();
    assert_eq!(d.decided_at.to_rfc3339(), "2026-11-30T05:00:02.500Z");
    assert_eq!(d.answer.text(), Some("because"));
}
