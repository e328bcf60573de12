//! Contract §7.1: answering an ask from the phone — the check order (steps
//! 1–7, one test per boundary), the single-use ask id, and held answers
//! across a restart.
use durable_runtime::test_util as harness;

use durable_runtime::types::{Answer, AskOption, AskSpec, DecidedBy, ToolInfo, ask_id_for};
use harness::{Harness, poll_once, without_replayed};
use serde_json::{Value, json};

const ASK: &str = "970f8a0b30368fbbcab73013d31d2d51"; // ask_id_for("ticket-1", "call-1")
const HASH: &str = "cb8b64234d06250d254d479dcdd28c57083cae57ba257f035c7f409be9de57ce";
const STALE: &str = "0000000000000000000000000000000000000000000000000000000000000000";

fn approval() -> AskSpec {
    durable_runtime::approval_spec("refund", &json!({"order": "5521", "amount": 40}), "call-1")
}

fn approval_always() -> AskSpec {
    AskSpec::choice(
        "call-1",
        "refund wants to run",
        [
            AskOption::new("allow", "Allow"),
            AskOption::new("allow-always", "Allow always").always(),
            AskOption::new("deny", "Deny"),
        ],
    )
    .tool(ToolInfo::from_call("refund", &json!({"order": "5521", "amount": 40})))
}

fn pick(request_id: &str, option: &str) -> Value {
    json!({"requestId": request_id, "answer": {"optionIds": [option]}})
}

fn pick_hash(request_id: &str, option: &str, hash: &str) -> Value {
    json!({"requestId": request_id, "answer": {"optionIds": [option]}, "hash": hash})
}

// ---------------------------------------------------------------------------
// The success answer

#[tokio::test]
async fn answer_success_body_has_the_contract_fields() {
    let h = Harness::new();
    let ask = h.pane().ask(approval()).unwrap();
    h.advance(1500).await;
    let r = h.answer(ASK, pick_hash("r-1", "allow", HASH)).await;
    assert_eq!(r.status, 200);
    assert_eq!(
        r.json,
        json!({"ok": true, "result": "answered", "askId": ASK, "decidedBy": "phone",
               "decidedAt": "2026-11-30T05:00:01.500Z", "requestId": "r-1", "replayed": false})
    );
    let d = ask.decided().await.unwrap();
    assert_eq!((d.answer, d.decided_by), (Answer::option("allow"), DecidedBy::Phone));
}

#[tokio::test]
async fn answer_hash_may_be_written_in_upper_case() {
    let h = Harness::new();
    let _ask = h.pane().ask(approval()).unwrap();
    let r = h.answer(ASK, pick_hash("r-1", "allow", &HASH.to_uppercase())).await;
    assert_eq!(r.status, 200, "{:?}", r.json);
}

#[tokio::test]
async fn ask_id_is_single_use_a_second_request_id_gets_409_ask_closed() {
    let h = Harness::new();
    let _ask = h.pane().ask(approval()).unwrap();
    let first = h.answer(ASK, pick("r-1", "allow")).await;
    assert_eq!(first.status, 200);
    h.advance(10).await;
    let r = h.answer(ASK, pick("r-2", "deny")).await;
    assert_eq!((r.status, r.code()), (409, "ask-closed"));
    assert_eq!(r.json["decidedBy"], "phone");
    assert_eq!(r.json["decidedAt"], first.json["decidedAt"]);
    assert_eq!(r.json["ok"], false);
}

// ---------------------------------------------------------------------------
// Step 1: the body malformed in itself

#[tokio::test]
async fn step1_malformed_body_is_400_even_for_an_unknown_ask() {
    let h = Harness::new();
    h.pane();
    let unknown = "ffffffffffffffffffffffffffffffff";
    let bodies: Vec<Value> = vec![
        json!({"answer": {"optionIds": ["a"]}}), // requestId missing
        json!({"requestId": "r 1", "answer": {"optionIds": ["a"]}}), // breaks the ID rule
        json!({"requestId": 7, "answer": {"optionIds": ["a"]}}), // wrong type
        json!({"requestId": "r-1"}),             // answer missing
        json!({"requestId": "r-1", "answer": ["a"]}), // answer not an object
        json!({"requestId": "r-1", "answer": {"optionIds": "a"}}), // optionIds not a list
        json!({"requestId": "r-1", "answer": {"optionIds": [1]}}), // not strings
        json!({"requestId": "r-1", "answer": {"text": 5}}), // wrong type
        json!({"requestId": "r-1", "answer": {"values": []}}), // wrong type
        json!({"requestId": "r-1", "answer": {}, "hash": null}), // null hash
        json!({"requestId": "r-1", "answer": {}, "hash": "abc"}), // short hash
        json!({"requestId": "r-1", "answer": {}, "hash": format!("{HASH}0")}), // long hash
        json!({"requestId": "r-1", "answer": {}, "confirmAlways": "yes"}), // wrong type
        json!(["not", "an", "object"]),
    ];
    for body in bodies {
        let r = h.answer(unknown, body.clone()).await;
        assert_eq!((r.status, r.code()), (400, "bad-request"), "{body}");
    }
    let r = h.post_raw(&format!("/v1/asks/{unknown}"), b"{not json").await;
    assert_eq!((r.status, r.code()), (400, "bad-request"));
    // The same body, well formed, is 404 (no hash) — so step 1 came first.
    assert_eq!(h.answer(unknown, pick("r-1", "a")).await.status, 404);
}

#[tokio::test]
async fn step1_malformed_body_beats_a_receipt_for_its_request_id() {
    let h = Harness::new();
    let _ask = h.pane().ask(approval()).unwrap();
    assert_eq!(h.answer(ASK, pick("r-1", "allow")).await.status, 200);
    let r = h.answer(ASK, json!({"requestId": "r-1", "answer": "allow"})).await;
    assert_eq!((r.status, r.code()), (400, "bad-request"));
    let r =
        h.answer(ASK, json!({"requestId": "r-1", "answer": {"optionIds": ["allow"]}, "hash": null})).await;
    assert_eq!((r.status, r.code()), (400, "bad-request"));
}

// ---------------------------------------------------------------------------
// Step 2: receipts and holds by request id

#[tokio::test]
async fn step2_receipt_beats_an_unknown_ask() {
    let h = Harness::new();
    let _ask = h.pane().ask(approval()).unwrap();
    let first = h.answer(ASK, pick("r-1", "allow")).await;
    let r = h.answer("ffffffffffffffffffffffffffffffff", pick("r-1", "deny")).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json["replayed"], true);
    assert_eq!(without_replayed(&r.json), without_replayed(&first.json));
}

#[tokio::test]
async fn step2_receipt_beats_ask_closed() {
    let h = Harness::new();
    let _ask = h.pane().ask(approval()).unwrap();
    let first = h.answer(ASK, pick("r-1", "allow")).await;
    // Whatever the rest of the body says, even a stale hash or another option.
    for body in [pick("r-1", "allow"), pick("r-1", "deny"), pick_hash("r-1", "nope", STALE)] {
        let r = h.answer(ASK, body).await;
        assert_eq!(r.status, 200);
        assert_eq!(r.json["replayed"], true);
        assert_eq!(without_replayed(&r.json), without_replayed(&first.json));
    }
}

#[tokio::test]
async fn step2_held_request_id_answers_202_held_again_whatever_the_body() {
    let h = Harness::new();
    h.pane();
    let r = h.answer(ASK, pick_hash("r-1", "allow", HASH)).await;
    assert_eq!(r.status, 202);
    for (path_ask, body) in [
        (ASK, pick_hash("r-1", "allow", HASH)),
        (ASK, pick("r-1", "deny")),
        ("ffffffffffffffffffffffffffffffff", pick("r-1", "x")),
    ] {
        let r = h.answer(path_ask, body).await;
        assert_eq!(r.status, 202, "{:?}", r.json);
        assert_eq!(r.json["result"], "held");
        assert_eq!(r.json["askId"], ASK);
    }
}

// ---------------------------------------------------------------------------
// Step 3: unknown ask

#[tokio::test]
async fn step3_unknown_ask_without_hash_is_404() {
    let h = Harness::new();
    h.pane();
    let r = h.answer(ASK, pick("r-1", "allow")).await;
    assert_eq!((r.status, r.code()), (404, "not-found"));
    // Nothing stored: the request id works once the ask is raised.
    let _ask = h.pane().ask(approval()).unwrap();
    let r = h.answer(ASK, pick("r-1", "allow")).await;
    assert_eq!((r.status, r.json["replayed"].clone()), (200, json!(false)));
}

#[tokio::test]
async fn step3_unknown_ask_with_hash_is_held_202() {
    let h = Harness::new();
    h.pane();
    let r = h.answer(ASK, pick_hash("r-1", "allow", HASH)).await;
    assert_eq!(r.status, 202);
    assert_eq!(
        r.json,
        json!({"ok": true, "result": "held", "askId": ASK, "requestId": "r-1", "replayed": false})
    );
}

#[tokio::test]
async fn step3_to_4_a_decided_ask_with_a_hash_is_ask_closed_not_held() {
    let h = Harness::new();
    let pane = h.pane();
    let _ask = pane.ask(approval()).unwrap();
    pane.decide(ASK, Answer::option("deny")).unwrap();
    let r = h.answer(ASK, pick_hash("r-1", "allow", HASH)).await;
    assert_eq!((r.status, r.code()), (409, "ask-closed"));
    assert_eq!(r.json["decidedBy"], "program");
}

// ---------------------------------------------------------------------------
// Step 4/5: decided, stale hash

#[tokio::test]
async fn step4_decided_ask_with_a_stale_hash_is_ask_closed_not_hash_mismatch() {
    let h = Harness::new();
    let _ask = h.pane().ask(approval()).unwrap();
    assert_eq!(h.answer(ASK, pick("r-1", "allow")).await.status, 200);
    let r = h.answer(ASK, pick_hash("r-2", "allow", STALE)).await;
    assert_eq!((r.status, r.code()), (409, "ask-closed"));
    assert_eq!(r.json["decidedBy"], "phone");
    assert!(r.json["decidedAt"].is_string());
}

#[tokio::test]
async fn step5_stale_hash_is_409_hash_mismatch_with_the_current_ask_and_reaches_nothing() {
    let h = Harness::new();
    let mut ask = Box::pin(h.pane().ask(approval()).unwrap());
    let current = h.state().await.json["asks"][0].clone();
    let r = h.answer(ASK, pick_hash("r-1", "allow", STALE)).await;
    assert_eq!((r.status, r.code()), (409, "hash-mismatch"));
    assert_eq!(r.json["ask"], current);
    assert_eq!(r.json["ask"]["hash"], HASH);
    assert!(poll_once(&mut ask).is_none(), "nothing reached the program");
    assert_eq!(h.open_ask_ids().await, [ASK]);
    // Nothing stored: the same request id with the right hash goes through.
    let r = h.answer(ASK, pick_hash("r-1", "allow", HASH)).await;
    assert_eq!((r.status, r.json["replayed"].clone()), (200, json!(false)));
    assert_eq!(ask.await.unwrap(), Answer::option("allow"));
}

#[tokio::test]
async fn step5_to_6_stale_hash_beats_an_answer_that_does_not_fit() {
    let h = Harness::new();
    let _ask = h.pane().ask(approval()).unwrap();
    let r = h.answer(ASK, pick_hash("r-1", "nope", STALE)).await;
    assert_eq!((r.status, r.code()), (409, "hash-mismatch"));
}

// ---------------------------------------------------------------------------
// Step 6/7: fit, confirmation

#[tokio::test]
async fn step6_answer_that_does_not_fit_is_400_and_stores_nothing() {
    let h = Harness::new();
    let ask = h.pane().ask(approval()).unwrap();
    for answer in [
        json!({"optionIds": ["nope"]}),
        json!({"optionIds": ["allow", "deny"]}),
        json!({"optionIds": []}),
        json!({"text": "allow"}),
    ] {
        let r = h.answer(ASK, json!({"requestId": "r-1", "answer": answer, "hash": HASH})).await;
        assert_eq!((r.status, r.code()), (400, "bad-request"), "{answer}");
    }
    assert_eq!(h.open_ask_ids().await, [ASK]);
    let r = h.answer(ASK, pick("r-1", "deny")).await;
    assert_eq!((r.status, r.json["replayed"].clone()), (200, json!(false)));
    assert_eq!(ask.await.unwrap(), Answer::option("deny"));
}

#[tokio::test]
async fn step6_to_7_misfit_with_an_always_option_is_400_not_confirm_required() {
    let h = Harness::new();
    let _ask = h.pane().ask(approval_always()).unwrap();
    let id = ask_id_for("ticket-1", "call-1");
    let r =
        h.answer(&id, json!({"requestId": "r-1", "answer": {"optionIds": ["allow-always", "deny"]}})).await;
    assert_eq!((r.status, r.code()), (400, "bad-request"));
}

#[tokio::test]
async fn step7_always_pick_without_confirm_is_409_confirm_required_and_stores_nothing() {
    let h = Harness::new();
    let ask = h.pane().ask(approval_always()).unwrap();
    let id = ask.id().to_owned();
    let r = h.answer(&id, pick("r-1", "allow-always")).await;
    assert_eq!((r.status, r.code()), (409, "confirm-required"));
    let r = h
        .answer(
            &id,
            json!({"requestId": "r-1", "answer": {"optionIds": ["allow-always"]}, "confirmAlways": true}),
        )
        .await;
    assert_eq!((r.status, r.json["replayed"].clone()), (200, json!(false)));
    assert_eq!(ask.await.unwrap(), Answer::option("allow-always"));
}

// ---------------------------------------------------------------------------
// Held answers (answers across a restart)

#[tokio::test]
async fn held_answer_resolves_the_ask_raised_with_the_same_hash_at_once_decided_by_phone() {
    let h = Harness::new();
    let pane = h.pane();
    let r = h.answer(ASK, pick_hash("r-1", "allow", HASH)).await;
    assert_eq!(r.status, 202);
    h.advance(3_000).await;
    let ask = pane.ask(approval()).unwrap();
    let d = ask.decided().await.unwrap();
    assert_eq!((d.answer, d.decided_by), (Answer::option("allow"), DecidedBy::Phone));
    assert_eq!(d.decided_at.to_rfc3339(), "2026-11-30T05:00:03.000Z");
    assert_eq!(h.open_ask_ids().await, Vec::<String>::new());
    assert!(h.notices("ticket-1").await.is_empty(), "a phone answer leaves no notice");
    // The request id now replays 200 answered.
    let r = h.answer(ASK, pick_hash("r-1", "allow", HASH)).await;
    assert_eq!(r.status, 200, "{:?}", r.json);
    assert_eq!(
        r.json,
        json!({"ok": true, "result": "answered", "askId": ASK, "decidedBy": "phone",
               "decidedAt": "2026-11-30T05:00:03.000Z", "requestId": "r-1", "replayed": true})
    );
    // Another request id is ask-closed.
    let r = h.answer(ASK, pick_hash("r-2", "allow", HASH)).await;
    assert_eq!((r.status, r.code()), (409, "ask-closed"));
}

#[tokio::test]
async fn held_answer_applies_through_require_approval() {
    let h = Harness::new();
    let pane = h.pane();
    assert_eq!(h.answer(ASK, pick_hash("r-1", "allow", HASH)).await.status, 202);
    let approval = durable_runtime::require_approval(
        "refund",
        &json!({"order": "5521", "amount": 40}),
        durable_runtime::ApprovalOptions::new(&pane, "call-1"),
    )
    .unwrap()
    .await;
    assert!(approval.approved);
    assert_eq!(approval.decided_by, DecidedBy::Phone);
}

#[tokio::test]
async fn held_answer_whose_hash_differs_is_discarded_and_the_ask_shows_normally() {
    let h = Harness::new();
    let pane = h.pane();
    assert_eq!(h.answer(ASK, pick_hash("r-1", "allow", STALE)).await.status, 202);
    let mut ask = Box::pin(pane.ask(approval()).unwrap());
    h.settle().await;
    assert!(poll_once(&mut ask).is_none());
    assert_eq!(h.open_ask_ids().await, [ASK]);
    // The request id is free again: it now answers the shown ask.
    let r = h.answer(ASK, pick_hash("r-1", "deny", HASH)).await;
    assert_eq!((r.status, r.json["replayed"].clone()), (200, json!(false)));
    assert_eq!(ask.await.unwrap(), Answer::option("deny"));
}

#[tokio::test]
async fn held_answer_expires_after_hold_ms() {
    let h = Harness::with(|b| b.hold_ms(60_000));
    let pane = h.pane();
    assert_eq!(h.answer(ASK, pick_hash("r-1", "allow", HASH)).await.status, 202);
    assert_eq!(
        h.core.driver().next_deadline().map(|t| t.to_rfc3339()).as_deref(),
        Some("2026-11-30T05:01:00.000Z")
    );
    h.advance(60_000).await;
    let mut ask = Box::pin(pane.ask(approval()).unwrap());
    h.settle().await;
    assert!(poll_once(&mut ask).is_none(), "the hold was gone");
    assert_eq!(h.open_ask_ids().await, [ASK]);
    let r = h.answer(ASK, pick("r-1", "deny")).await;
    assert_eq!((r.status, r.json["replayed"].clone()), (200, json!(false)), "the request id is free");
}

#[tokio::test]
async fn held_answer_still_applies_just_before_hold_ms() {
    let h = Harness::with(|b| b.hold_ms(60_000));
    let pane = h.pane();
    assert_eq!(h.answer(ASK, pick_hash("r-1", "allow", HASH)).await.status, 202);
    h.advance(59_999).await;
    let ask = pane.ask(approval()).unwrap();
    assert_eq!(ask.await.unwrap(), Answer::option("allow"));
}

#[tokio::test]
async fn held_answer_default_hold_is_ten_minutes() {
    let h = Harness::new();
    h.pane();
    assert_eq!(h.answer(ASK, pick_hash("r-1", "allow", HASH)).await.status, 202);
    assert_eq!(
        h.core.driver().next_deadline().map(|t| t.to_rfc3339()).as_deref(),
        Some("2026-11-30T05:10:00.000Z")
    );
}

#[tokio::test]
async fn held_answer_that_does_not_fit_is_discarded() {
    let h = Harness::new();
    let pane = h.pane();
    assert_eq!(h.answer(ASK, pick_hash("r-1", "maybe", HASH)).await.status, 202);
    let mut ask = Box::pin(pane.ask(approval()).unwrap());
    h.settle().await;
    assert!(poll_once(&mut ask).is_none());
    assert_eq!(h.open_ask_ids().await, [ASK]);
}

#[tokio::test]
async fn held_answer_is_not_a_receipt_until_applied() {
    let h = Harness::new();
    h.pane();
    assert_eq!(h.answer(ASK, pick_hash("r-1", "allow", HASH)).await.status, 202);
    // A plain state poll shows no ask: a hold shows nothing.
    assert_eq!(h.open_ask_ids().await, Vec::<String>::new());
    // Another pane's ask answered with the held request id: still held.
    let other = h.pane_named("other").ask(approval()).unwrap();
    let r = h.answer(other.id(), pick("r-1", "allow")).await;
    assert_eq!(r.status, 202);
    assert_eq!(h.open_ask_ids().await, [other.id().to_owned()]);
}

#[tokio::test]
async fn answer_after_expires_at_is_ask_closed_timeout_even_before_the_driver_ticks() {
    let h = Harness::new();
    let pane = h.pane();
    let ask = pane.ask(approval().expires_in_ms(5_000)).unwrap();
    // The clock passes the expiry, but the driver has not called tick yet.
    h.clock.advance(5_000);
    let r = h.answer(ASK, pick("r-1", "allow")).await;
    assert_eq!((r.status, r.code()), (409, "ask-closed"), "{:?}", r.json);
    assert_eq!(r.json["decidedBy"], "timeout");
    assert_eq!(r.json["decidedAt"], "2026-11-30T05:00:05.000Z");
    assert_eq!(ask.await.unwrap_err().decided_by, DecidedBy::Timeout);
    assert_eq!(h.notices("ticket-1").await, ["Timed out before an answer: refund wants to run"]);
    // The late tick adds nothing.
    h.advance(0).await;
    assert_eq!(h.notices("ticket-1").await.len(), 1);
}

#[tokio::test]
async fn unknown_fields_in_an_answer_request_are_ignored() {
    let h = Harness::new();
    let ask = h.pane().ask(approval()).unwrap();
    let body = json!({"requestId": "r-1", "answer": {"optionIds": ["allow"], "note": 1}, "hash": HASH,
                      "confirmAlways": false, "client": {"v": 2}, "extra": null});
    let r = h.answer(ASK, body).await;
    assert_eq!(r.status, 200, "{:?}", r.json);
    assert_eq!(ask.await.unwrap(), Answer::option("allow"));
}

#[tokio::test]
async fn answer_ask_id_is_percent_decoded_before_the_id_rule() {
    let h = Harness::new();
    let pane = h.pane();
    let ask = pane.ask(approval()).unwrap();
    let encoded: String = ASK.bytes().map(|b| format!("%{b:02X}")).collect();
    let r = h.answer(&encoded, pick("r-1", "allow")).await;
    assert_eq!(r.status, 200, "{:?}", r.json);
    assert_eq!(r.json["askId"], ASK);
    assert_eq!(ask.await.unwrap(), Answer::option("allow"));
}
