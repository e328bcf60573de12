//! What a send comes to (§8, §9.1), decided by the machine alone — no
//! runtime, no store: the test holds the pane's write as the runtime
//! would, asks `look_at_send`, records the send as asked (the store's
//! part, played here) and asks again, as the runtime's loop does.

mod standard;

use standard::{NOW, desk, id};

use durable_core::SendState;
use durable_core::machine::Machine;
use durable_core::types::{AskOption, AskSpec, Id, PaneState};
use durable_core::writes::{QUEUE_MAX, SendLook};
use serde_json::Value;

/// A send looked at, recorded as the machine asks, until it passes or is
/// refused; returns what it came to and the states it was recorded in.
fn send(
    m: &mut Machine,
    pane: &Id,
    request_id: &str,
    seen: Option<Option<&str>>,
) -> (SendLook, Vec<SendState>) {
    let seen = seen.map(|s| s.map(str::to_owned));
    let mut recorded = Vec::new();
    loop {
        match m.look_at_send(pane, &id(request_id), "hello", seen.as_ref(), recorded.last().copied(), true) {
            SendLook::Record(state) => {
                assert!(recorded.len() < 3, "recorded again and again: {recorded:?}");
                recorded.push(state);
            }
            look => return (look, recorded),
        }
    }
}

fn code(look: &SendLook) -> (u16, Value) {
    let SendLook::Refused(r) = look else { panic!("expected a refusal, got {look:?}") };
    let body: Value = serde_json::from_slice(&r.body).unwrap();
    (r.status, body["code"].clone())
}

fn queued(m: &Machine, pane: &Id) -> usize {
    m.state.pane(pane).map_or(0, |p| p.queued_len())
}

#[test]
fn an_idle_pane_runs_the_send_now_recorded_running_once() {
    let (mut m, pane) = desk();
    let (look, recorded) = send(&mut m, &pane, "s-1", Some(None));
    assert_eq!(look, SendLook::RunNow { turn_id: None });
    assert_eq!(recorded, [SendState::Running]);
    assert_eq!(queued(&m, &pane), 0);
}

#[test]
fn a_working_pane_queues_the_send_behind_its_turn_and_an_idle_one_with_a_queue_delivers_it() {
    let (mut m, pane) = desk();
    m.set_pane_state(&pane, PaneState::Working, Some("t-1"), NOW).unwrap();
    let (look, recorded) = send(&mut m, &pane, "s-1", Some(Some("t-1")));
    assert_eq!(look, SendLook::Queued { turn_id: Some("t-1".into()), deliver_now: false });
    assert_eq!((recorded, queued(&m, &pane)), (vec![SendState::Queued], 1));
    // The turn ends with the send still queued: the next one goes behind
    // it, and the queue is to be delivered now.
    m.set_pane_state(&pane, PaneState::Idle, None, NOW).unwrap();
    let (look, _) = send(&mut m, &pane, "s-2", None);
    assert_eq!(
        look,
        SendLook::Queued { turn_id: Some("t-1".into()), deliver_now: true },
        "the last turn's id"
    );
    assert_eq!(queued(&m, &pane), 2);
}

#[test]
fn a_turn_that_moves_while_the_send_is_recorded_is_looked_at_again() {
    let (mut m, pane) = desk();
    let look = m.look_at_send(&pane, &id("s-1"), "hello", None, None, true);
    assert_eq!(look, SendLook::Record(SendState::Running));
    // While the store records it, the program begins a turn of its own.
    m.set_pane_state(&pane, PaneState::Working, Some("t-9"), NOW).unwrap();
    let look = m.look_at_send(&pane, &id("s-1"), "hello", None, Some(SendState::Running), true);
    assert_eq!(look, SendLook::Record(SendState::Queued), "recorded again as it now waits");
    assert_eq!(queued(&m, &pane), 0, "queued only once recorded so");
    let look = m.look_at_send(&pane, &id("s-1"), "hello", None, Some(SendState::Queued), true);
    assert_eq!(look, SendLook::Queued { turn_id: Some("t-9".into()), deliver_now: false });
    assert_eq!(queued(&m, &pane), 1);
}

#[test]
fn refusals_come_before_any_record() {
    let (mut m, pane) = desk();
    // A turn the phone did not see: turn-moved, naming the turn.
    m.set_pane_state(&pane, PaneState::Working, Some("t-2"), NOW).unwrap();
    let (look, recorded) = send(&mut m, &pane, "s-1", Some(Some("t-1")));
    assert_eq!((code(&look), recorded.len()), ((409, "turn-moved".into()), 0));
    let SendLook::Refused(r) = &look else { unreachable!() };
    assert_eq!(serde_json::from_slice::<Value>(&r.body).unwrap()["turnId"], "t-2");
    let (look, _) = send(&mut m, &pane, "s-1", Some(None));
    assert_eq!(code(&look), (409, "turn-moved".into()), "null: the phone saw no turn");
    // A pane that is not open.
    assert_eq!(code(&send(&mut m, &id("ticket-9"), "s-2", None).0), (404, "not-found".into()));
    // A full queue: busy.
    for n in 0..QUEUE_MAX {
        assert!(matches!(send(&mut m, &pane, &format!("q-{n}"), None).0, SendLook::Queued { .. }));
    }
    let (look, recorded) = send(&mut m, &pane, "s-3", None);
    assert_eq!((code(&look), recorded.len()), ((409, "busy".into()), 0));
    assert_eq!(queued(&m, &pane), QUEUE_MAX);
    // An open ask on the pane: ask-open, naming it.
    let spec =
        AskSpec::choice("call-1", "Refund?", [AskOption::new("yes", "Yes"), AskOption::new("no", "No")]);
    let raised = m.raise_ask(&pane, spec, 77, NOW).unwrap();
    let (look, _) = send(&mut m, &pane, "s-4", None);
    assert_eq!(code(&look), (409, "ask-open".into()));
    let SendLook::Refused(r) = &look else { unreachable!() };
    assert_eq!(serde_json::from_slice::<Value>(&r.body).unwrap()["askId"], raised.id.as_str());
    // A graceful stop: nothing is acknowledged that would not run.
    let (mut m, pane) = desk();
    m.begin_stop();
    let (look, recorded) = send(&mut m, &pane, "s-5", None);
    assert_eq!((code(&look), recorded.len()), ((409, "busy".into()), 0));
}

#[test]
fn a_pane_with_no_taker_is_not_supported_before_anything_is_recorded_and_a_closed_one_is_404() {
    let (mut m, pane) = desk();
    let look = m.look_at_send(&pane, &id("s-1"), "hello", None, None, false);
    assert_eq!(code(&look), (409, "not-supported".into()));
    // Recorded already (its takers went meanwhile): its delivery decides.
    let look = m.look_at_send(&pane, &id("s-1"), "hello", None, Some(SendState::Running), false);
    assert_eq!(look, SendLook::RunNow { turn_id: None });
    m.close_pane(&pane, NOW);
    let look = m.look_at_send(&pane, &id("s-2"), "hello", None, None, false);
    assert_eq!(code(&look).0, 404, "a closed pane is 404 before anything else");
}
