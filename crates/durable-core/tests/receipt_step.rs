//! The receipt step (§9) as a sequence on the machine alone — no runtime,
//! no store, no future: each test plays the driver, hands the machine the
//! outcome of what it asked for (the route's check, the store's claim,
//! the write, the put, the release) and reads what it asks next, and what
//! the repeats waiting for the first request hear (`Effect::Settle`).

mod standard;

use durable_core::machine::{Machine, MachineConfig};
use durable_core::once::{ReceiptInput, ReceiptNext};
use durable_core::respond;
use durable_core::state::{Effect, JournalName, Link};
use durable_core::types::exchange::Response;
use durable_core::types::{ErrorCode, Id};
use durable_core::{Lookup, Receipt, SendState, StoreError};
use serde_json::{Value, json};

fn machine(keeps_asks: bool) -> Machine {
    Machine::new(MachineConfig { keeps_asks, ..standard::config() })
}

fn id(s: &str) -> Id {
    Id::new(s).unwrap()
}

/// What a write answered: a `200` whose body is `body`.
fn ok(body: Value) -> Response {
    respond::json(200, &body)
}

fn sent() -> Value {
    json!({ "ok": true, "result": "sent", "requestId": "r-1", "replayed": false })
}

fn body(r: &Response) -> Value {
    serde_json::from_slice(&r.body).unwrap()
}

/// The settles handed out since the last call: (waiter, the receipt's body).
fn settles(m: &mut Machine) -> Vec<(Link, Option<Value>)> {
    m.state
        .drain_effects()
        .filter_map(|e| match e {
            Effect::Settle { waiter, receipt } => Some((waiter, receipt.map(|r| r.parse_body().unwrap()))),
            _ => None,
        })
        .collect()
}

fn step(m: &mut Machine, request: Link, input: ReceiptInput) -> ReceiptNext {
    m.receipt_step(request, input)
}

fn respond(next: ReceiptNext) -> Response {
    match next {
        ReceiptNext::Respond(r) => r,
        other => panic!("expected the answer, the step asked for {other:?}"),
    }
}

/// Drives request `request` from its start to the write: the id is its
/// own, the route's check lets it through and the store knows the id.
fn up_to_run(m: &mut Machine, request: Link, request_id: &str) {
    assert!(matches!(m.begin_receipt_step(request, id(request_id)), ReceiptNext::Check));
    assert!(matches!(step(m, request, ReceiptInput::Checked(None)), ReceiptNext::Claim));
    assert!(matches!(step(m, request, ReceiptInput::Claimed(Ok(Lookup::Unknown))), ReceiptNext::Run));
}

#[test]
fn a_first_write_runs_once_its_receipt_is_put_and_released_before_the_repeat_hears_it() {
    let mut m = machine(false);
    up_to_run(&mut m, 1, "r-1");
    // A repeat that comes meanwhile waits for the first.
    assert!(matches!(m.begin_receipt_step(2, id("r-1")), ReceiptNext::WaitFirst));
    let next = step(&mut m, 1, ReceiptInput::Ran { response: ok(sent()), group: Some("ticket-1".into()) });
    let ReceiptNext::Put { receipt, group } = next else { panic!("expected a put, got {next:?}") };
    assert_eq!((receipt.parse_body().unwrap(), group.as_str()), (sent(), "ticket-1"));
    // Applied: kept in memory while the store puts it.
    assert_eq!(m.state.memory_receipt(&id("r-1")), Some(&receipt));
    assert!(m.receipt_step_holds_store_claim(1));
    assert!(matches!(step(&mut m, 1, ReceiptInput::Put(Ok(()))), ReceiptNext::Release));
    assert_eq!(settles(&mut m), [], "the repeat hears nothing before the store's claim is released");
    let answer = respond(step(&mut m, 1, ReceiptInput::Released));
    assert_eq!((answer.status, body(&answer)), (200, sent()));
    assert_eq!(settles(&mut m), [(2, Some(sent()))]);
    assert_eq!(m.state.memory_receipt(&id("r-1")), None, "the store has it now");
    // The repeat replays it; a send's asks the store where it stands.
    assert!(matches!(step(&mut m, 2, ReceiptInput::Settled(Some(receipt))), ReceiptNext::SendState));
    let replayed = respond(step(&mut m, 2, ReceiptInput::SendState(Ok(Some(SendState::Running)))));
    assert_eq!(replayed.delivery, Some("running"));
    assert_eq!(body(&replayed)["replayed"], json!(true));
    assert_eq!(body(&replayed)["requestId"], json!("r-1"));
}

#[test]
fn a_receipt_in_the_store_is_replayed_without_running_and_settled_after_the_replay() {
    let mut m = machine(false);
    assert!(matches!(m.begin_receipt_step(1, id("r-1")), ReceiptNext::Check));
    assert!(matches!(m.begin_receipt_step(2, id("r-1")), ReceiptNext::WaitFirst));
    assert!(matches!(step(&mut m, 1, ReceiptInput::Checked(None)), ReceiptNext::Claim));
    let found = Receipt::new(200, sent().to_string());
    let next = step(&mut m, 1, ReceiptInput::Claimed(Ok(Lookup::Found(found))));
    assert!(matches!(next, ReceiptNext::SendState), "{next:?}");
    assert_eq!(settles(&mut m), [], "the id is held until the replay is written");
    // A store that cannot say gives the receipt as it was.
    let replayed = respond(step(&mut m, 1, ReceiptInput::SendState(Err(StoreError::new("gone")))));
    assert_eq!((replayed.status, replayed.delivery), (200, None));
    assert_eq!(body(&replayed)["replayed"], json!(true));
    assert_eq!(settles(&mut m), [(2, Some(sent()))]);
    // Not a send's receipt: replayed at once.
    let answered = json!({ "ok": true, "result": "answered", "askId": "a", "replayed": false });
    assert!(matches!(m.begin_receipt_step(3, id("r-2")), ReceiptNext::Check));
    assert!(matches!(step(&mut m, 3, ReceiptInput::Checked(None)), ReceiptNext::Claim));
    let found = Receipt::new(200, answered.to_string());
    let replayed = respond(step(&mut m, 3, ReceiptInput::Claimed(Ok(Lookup::Found(found)))));
    assert_eq!(body(&replayed)["result"], json!("answered"));
    assert_eq!(body(&replayed)["replayed"], json!(true));
}

#[test]
fn a_put_that_fails_answers_500_and_the_write_is_replayed_from_memory_never_run_again() {
    let mut m = machine(false);
    up_to_run(&mut m, 1, "r-1");
    assert!(matches!(m.begin_receipt_step(2, id("r-1")), ReceiptNext::WaitFirst));
    let next = step(&mut m, 1, ReceiptInput::Ran { response: ok(sent()), group: Some("g".into()) });
    assert!(matches!(next, ReceiptNext::Put { .. }));
    assert!(matches!(
        step(&mut m, 1, ReceiptInput::Put(Err(StoreError::new("disk full")))),
        ReceiptNext::Release
    ));
    let failed = respond(step(&mut m, 1, ReceiptInput::Released));
    assert_eq!(failed.status, 500);
    let message = body(&failed)["message"].as_str().unwrap_or_default().to_owned();
    assert!(
        message.contains("applied but its receipt could not be stored (receipt store: disk full)"),
        "{message}"
    );
    // The repeat waiting hears the applied receipt; a later one finds it
    // in memory after the route's check, before the store.
    assert_eq!(settles(&mut m), [(2, Some(sent()))]);
    assert!(matches!(m.begin_receipt_step(3, id("r-1")), ReceiptNext::Check));
    let next = step(&mut m, 3, ReceiptInput::Checked(None));
    assert!(matches!(next, ReceiptNext::SendState), "replayed from memory, not claimed: {next:?}");
    let replayed = respond(step(&mut m, 3, ReceiptInput::SendState(Ok(None))));
    assert_eq!(body(&replayed)["replayed"], json!(true));
}

#[test]
fn nothing_to_keep_lets_the_id_go_and_the_oldest_repeat_claims_it() {
    let mut m = machine(false);
    up_to_run(&mut m, 1, "r-1");
    assert!(matches!(m.begin_receipt_step(2, id("r-1")), ReceiptNext::WaitFirst));
    assert!(matches!(m.begin_receipt_step(3, id("r-1")), ReceiptNext::WaitFirst));
    let refused = respond::error(ErrorCode::Refused, "refused: not now");
    // A `200` with no group is not stored either (a `202 held` is not a 200).
    let next = step(&mut m, 1, ReceiptInput::Ran { response: refused, group: Some("g".into()) });
    assert!(matches!(next, ReceiptNext::Release), "{next:?}");
    assert_eq!(respond(step(&mut m, 1, ReceiptInput::Released)).status, 409);
    assert_eq!(settles(&mut m), [(2, None), (3, None)]);
    assert_eq!(m.state.memory_receipt(&id("r-1")), None);
    // Each hears nothing and claims the id itself: the first to ask has it.
    assert!(matches!(step(&mut m, 2, ReceiptInput::Settled(None)), ReceiptNext::Check));
    assert!(matches!(step(&mut m, 3, ReceiptInput::Settled(None)), ReceiptNext::WaitFirst));
}

#[test]
fn an_evicted_receipt_and_a_failing_claim_answer_500_and_run_nothing() {
    let mut m = machine(false);
    assert!(matches!(m.begin_receipt_step(1, id("r-1")), ReceiptNext::Check));
    assert!(matches!(m.begin_receipt_step(2, id("r-1")), ReceiptNext::WaitFirst));
    assert!(matches!(step(&mut m, 1, ReceiptInput::Checked(None)), ReceiptNext::Claim));
    let dropped = respond(step(&mut m, 1, ReceiptInput::Claimed(Ok(Lookup::Evicted))));
    assert_eq!((dropped.status, body(&dropped)["code"].clone()), (500, json!("receipt-dropped")));
    assert_eq!(settles(&mut m), [(2, None)]);
    assert!(matches!(step(&mut m, 2, ReceiptInput::Settled(None)), ReceiptNext::Check));
    assert!(matches!(step(&mut m, 2, ReceiptInput::Checked(None)), ReceiptNext::Claim));
    let failed = respond(step(&mut m, 2, ReceiptInput::Claimed(Err(StoreError::new("locked")))));
    assert_eq!((failed.status, body(&failed)["code"].clone()), (500, json!("internal")));
    assert!(!m.receipt_step_holds_store_claim(2));
}

#[test]
fn the_routes_own_check_answers_before_the_store_and_lets_the_id_go() {
    let mut m = machine(false);
    assert!(matches!(m.begin_receipt_step(1, id("r-1")), ReceiptNext::Check));
    assert!(matches!(m.begin_receipt_step(2, id("r-1")), ReceiptNext::WaitFirst));
    let held = respond::json(202, &json!({ "ok": true, "result": "held" }));
    assert_eq!(respond(step(&mut m, 1, ReceiptInput::Checked(Some(held)))).status, 202);
    assert_eq!(settles(&mut m), [(2, None)]);
}

#[test]
fn a_write_that_raised_an_ask_waits_for_the_asks_journal_before_its_put() {
    let mut m = machine(true);
    up_to_run(&mut m, 1, "r-1");
    // The write closed an ask: its forget is in the journal, not applied.
    m.state.journal_forget("ask-1".into());
    let target = m.state.journal_pushed(JournalName::Asks);
    let next = step(&mut m, 1, ReceiptInput::Ran { response: ok(sent()), group: Some("g".into()) });
    let ReceiptNext::WaitForAsks { target: waited } = next else { panic!("expected the wait, got {next:?}") };
    assert_eq!(waited, target);
    assert!(m.state.memory_receipt(&id("r-1")).is_some(), "applied before the wait");
    assert!(matches!(step(&mut m, 1, ReceiptInput::AsksWritten), ReceiptNext::Put { .. }));
    // Once the journal is applied, a write goes straight to its put.
    m.state.journal_applied(JournalName::Asks, 1);
    up_to_run(&mut m, 2, "r-2");
    let next = step(&mut m, 2, ReceiptInput::Ran { response: ok(sent()), group: Some("g".into()) });
    assert!(matches!(next, ReceiptNext::Put { .. }), "{next:?}");
}

#[test]
fn a_request_dropped_midway_lets_the_id_go_and_keeps_what_was_applied() {
    let mut m = machine(false);
    // Dropped while the write runs: nothing applied to keep; the step goes
    // on only to release the store's claim, then the repeat runs on its own.
    up_to_run(&mut m, 1, "r-1");
    assert!(matches!(m.begin_receipt_step(2, id("r-1")), ReceiptNext::WaitFirst));
    assert!(m.receipt_step_holds_store_claim(1));
    assert!(matches!(m.drop_receipt_step(1), Some(ReceiptNext::Release)));
    assert_eq!(settles(&mut m), [], "the claim in the store goes first");
    assert_eq!(respond(step(&mut m, 1, ReceiptInput::Released)).status, 500, "an answer sent to no one");
    assert_eq!(settles(&mut m), [(2, None)]);
    assert!(!m.receipt_step_holds_store_claim(1), "the step is over");
    // Dropped while its receipt is being put: the step goes on and puts it
    // (a duplicate at another process would run the write again otherwise),
    // then the repeat replays it.
    assert!(matches!(step(&mut m, 2, ReceiptInput::Settled(None)), ReceiptNext::Check));
    assert!(matches!(step(&mut m, 2, ReceiptInput::Checked(None)), ReceiptNext::Claim));
    assert!(matches!(step(&mut m, 2, ReceiptInput::Claimed(Ok(Lookup::Unknown))), ReceiptNext::Run));
    assert!(matches!(m.begin_receipt_step(3, id("r-1")), ReceiptNext::WaitFirst));
    let next = step(&mut m, 2, ReceiptInput::Ran { response: ok(sent()), group: Some("g".into()) });
    let ReceiptNext::Put { receipt, group } = next else { panic!("expected a put, got {next:?}") };
    let again = m.drop_receipt_step(2);
    let Some(ReceiptNext::Put { receipt: again, group: again_group }) = again else {
        panic!("expected the put again, got {again:?}")
    };
    assert_eq!((again, again_group), (receipt, group));
    assert!(matches!(step(&mut m, 2, ReceiptInput::Put(Ok(()))), ReceiptNext::Release));
    assert_eq!(respond(step(&mut m, 2, ReceiptInput::Released)).status, 200);
    assert_eq!(settles(&mut m), [(3, Some(sent()))]);
    assert_eq!(m.state.memory_receipt(&id("r-1")), None, "the store has it");
    // A detached step whose driver goes away too is abandoned: the id is
    // let go, what was applied stays in memory for the repeats.
    up_to_run(&mut m, 8, "r-7");
    assert!(matches!(m.begin_receipt_step(9, id("r-7")), ReceiptNext::WaitFirst));
    let next = step(&mut m, 8, ReceiptInput::Ran { response: ok(sent()), group: Some("g".into()) });
    assert!(matches!(next, ReceiptNext::Put { .. }));
    assert!(m.drop_receipt_step(8).is_some());
    assert!(m.receipt_step_holds_store_claim(8), "the driver releases it before it abandons the step");
    m.abandon_receipt_step(8);
    assert_eq!(settles(&mut m), [(9, None)]);
    assert!(matches!(step(&mut m, 9, ReceiptInput::Settled(None)), ReceiptNext::Check));
    assert!(matches!(step(&mut m, 9, ReceiptInput::Checked(None)), ReceiptNext::SendState), "from memory");
    // Dropped while it asks the store where a found send stands: the id
    // it still holds is let go, and the repeat finds the receipt itself.
    assert!(matches!(m.begin_receipt_step(6, id("r-5")), ReceiptNext::Check));
    assert!(matches!(m.begin_receipt_step(7, id("r-5")), ReceiptNext::WaitFirst));
    assert!(matches!(step(&mut m, 6, ReceiptInput::Checked(None)), ReceiptNext::Claim));
    let found = Receipt::new(200, sent().to_string());
    assert!(matches!(
        step(&mut m, 6, ReceiptInput::Claimed(Ok(Lookup::Found(found)))),
        ReceiptNext::SendState
    ));
    assert!(!m.receipt_step_holds_store_claim(6), "a found receipt holds no claim in the store");
    assert!(m.drop_receipt_step(6).is_none(), "nothing for the store to hear");
    assert_eq!(settles(&mut m), [(7, None)]);
    assert!(matches!(step(&mut m, 7, ReceiptInput::Settled(None)), ReceiptNext::Check));
    // A repeat dropped while it waits leaves the waiters: the first's end
    // hands it nothing.
    up_to_run(&mut m, 4, "r-9");
    assert!(matches!(m.begin_receipt_step(5, id("r-9")), ReceiptNext::WaitFirst));
    assert!(m.drop_receipt_step(5).is_none());
    assert!(matches!(
        step(&mut m, 4, ReceiptInput::Ran { response: ok(sent()), group: None }),
        ReceiptNext::Release
    ));
    assert_eq!(respond(step(&mut m, 4, ReceiptInput::Released)).status, 200);
    assert_eq!(settles(&mut m), []);
}

#[test]
fn an_input_out_of_order_answers_500_naming_it_and_lets_the_id_and_the_store_claim_go() {
    let mut m = machine(false);
    assert!(matches!(m.begin_receipt_step(1, id("r-1")), ReceiptNext::Check));
    assert!(matches!(m.begin_receipt_step(2, id("r-1")), ReceiptNext::WaitFirst));
    let wrong = respond(step(&mut m, 1, ReceiptInput::Put(Ok(()))));
    let message = body(&wrong)["message"].as_str().unwrap_or_default().to_owned();
    assert_eq!(wrong.status, 500);
    assert!(message.contains("got the store's put while it waited for the route's check"), "{message}");
    assert_eq!(settles(&mut m), [(2, None)]);
    // Holding the store's claim, it is released first.
    assert!(matches!(step(&mut m, 2, ReceiptInput::Settled(None)), ReceiptNext::Check));
    assert!(matches!(step(&mut m, 2, ReceiptInput::Checked(None)), ReceiptNext::Claim));
    assert!(matches!(step(&mut m, 2, ReceiptInput::Claimed(Ok(Lookup::Unknown))), ReceiptNext::Run));
    assert!(matches!(step(&mut m, 2, ReceiptInput::AsksWritten), ReceiptNext::Release));
    assert_eq!(respond(step(&mut m, 2, ReceiptInput::Released)).status, 500);
    // A step that is not under way.
    let none = respond(step(&mut m, 7, ReceiptInput::Released));
    assert!(String::from_utf8_lossy(&none.body).contains("no receipt step is under way"));
}

#[test]
fn a_drivers_mistakes_answer_500_and_leave_no_id_held_nor_claim_unreleased() {
    let mut m = machine(false);
    // A link begun twice: the second is refused, the first goes on.
    up_to_run(&mut m, 1, "r-1");
    let twice = respond(m.begin_receipt_step(1, id("r-2")));
    assert!(String::from_utf8_lossy(&twice.body).contains("under way for this request already"));
    assert!(m.receipt_step_holds_store_claim(1));
    // A repeat handed an input out of order stops waiting: the first's end
    // hands it nothing.
    assert!(matches!(m.begin_receipt_step(2, id("r-1")), ReceiptNext::WaitFirst));
    assert_eq!(respond(step(&mut m, 2, ReceiptInput::Claimed(Ok(Lookup::Unknown)))).status, 500);
    // A detached step dropped again while it holds the store's claim asks
    // for the release before the id goes.
    assert!(matches!(m.begin_receipt_step(3, id("r-1")), ReceiptNext::WaitFirst));
    let next = step(&mut m, 1, ReceiptInput::Ran { response: ok(sent()), group: Some("g".into()) });
    assert!(matches!(next, ReceiptNext::Put { .. }));
    assert!(matches!(m.drop_receipt_step(1), Some(ReceiptNext::Put { .. })));
    assert!(matches!(m.drop_receipt_step(1), Some(ReceiptNext::Release)));
    assert_eq!(settles(&mut m), [], "released first");
    assert_eq!(respond(step(&mut m, 1, ReceiptInput::Released)).status, 500);
    assert_eq!(settles(&mut m), [(3, None)], "the repeat that stopped waiting hears nothing");
}
