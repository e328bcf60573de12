//! The machine's deadlines and its panes' writers (§7, §8), as sequences
//! on the machine alone: the driver calls `handle_timeout(now)` at
//! `next_deadline()`, and reads what came due — an ask timed out, a held
//! answer gone, a writer's `busy` wait woken — and who holds a pane.

mod standard;

use standard::{NOW, desk, events};

use durable_core::machine::Machine;
use durable_core::state::{Effect, Link};
use durable_core::timers::Timer;
use durable_core::types::{AnswerRequest, AskOption, AskSpec, BUSY_MS, Id, ask_id_for};
use serde_json::json;

fn woken(m: &mut Machine) -> Vec<Link> {
    m.state.drain_effects().filter_map(|e| if let Effect::Wake(l) = e { Some(l) } else { None }).collect()
}

#[test]
fn a_writer_waiting_for_a_pane_is_woken_when_its_five_seconds_run_out_and_the_pane_goes_to_the_next() {
    let (mut m, pane) = desk();
    assert!(m.state.request_write(&pane, 1, true));
    assert!(!m.state.request_write(&pane, 2, true), "the pane is held: 2 waits");
    assert!(!m.state.request_write(&pane, 3, true));
    // The driver arms 2's `busy` wait at its arrival + 5 s.
    m.add_timer(NOW.plus_millis(BUSY_MS), Timer::Wake(20));
    assert_eq!(m.next_deadline(), Some(NOW.plus_millis(BUSY_MS)));
    m.state.drain_effects().for_each(drop);
    m.handle_timeout(NOW.plus_millis(BUSY_MS - 1));
    assert!(woken(&mut m).is_empty(), "not yet");
    m.handle_timeout(NOW.plus_millis(BUSY_MS));
    assert_eq!(woken(&mut m), [20], "its wait ran out");
    assert!(!m.state.holds_write(&pane, 2), "so it answers 409 busy and leaves the queue");
    m.state.end_write(&pane, 2);
    m.state.end_write(&pane, 1);
    assert_eq!(woken(&mut m), [3], "the pane goes to the next in line, not to the one that left");
    assert_eq!(m.next_deadline(), None);
}

#[test]
fn a_pane_closed_while_writes_wait_for_it_wakes_them_to_a_404() {
    let (mut m, pane) = desk();
    assert!(m.state.request_write(&pane, 1, true));
    assert!(!m.state.request_write(&pane, 2, true));
    assert!(m.close_pane(&pane, NOW));
    assert_eq!(woken(&mut m), [2]);
    assert!(!m.state.holds_write(&pane, 2), "woken without the pane: the driver answers 404");
}

#[test]
fn an_ask_times_out_and_an_answer_held_for_an_ask_never_raised_goes_at_their_deadlines() {
    let (mut m, pane) = desk();
    let spec = AskSpec::choice("c1", "Go?", [AskOption::new("yes", "Yes")]).expires_in_ms(60_000);
    m.raise_ask(&pane, spec, 7, NOW).unwrap();
    m.state.drain_effects().for_each(drop);
    m.handle_timeout(NOW.plus_millis(59_999));
    assert!(m.state.is_ask_open(&ask_id_for("ticket-1", "c1")));
    m.handle_timeout(NOW.plus_millis(60_000));
    let decided = m.state.drain_effects().any(|e| matches!(e, Effect::Decide { ask: 7, result: Err(_) }));
    assert!(decided, "the awaitable hears the timeout");
    assert!(events(&mut m, "ticket-1").contains("\"timeout\""));

    // An answer to an ask not raised yet is held for hold_ms (30 s here).
    let other = AskSpec::choice("c2", "And?", [AskOption::new("yes", "Yes")]);
    let hash = other.clone().build(&pane, NOW, true).unwrap().hash;
    let body = json!({"requestId": "r-2", "answer": {"optionIds": ["yes"]}, "hash": hash});
    let req = AnswerRequest::parse(body.to_string().as_bytes()).unwrap();
    let ask_id = Id::new(ask_id_for("ticket-1", "c2")).unwrap();
    assert_eq!(m.answer_ask(&ask_id, req, NOW).0.status, 202);
    let held = Id::new("r-2").unwrap();
    m.handle_timeout(NOW.plus_millis(29_999));
    assert!(m.state.held_ask_of(&held).is_some());
    m.handle_timeout(NOW.plus_millis(30_000));
    assert!(m.state.held_ask_of(&held).is_none(), "the hold is over");
    m.raise_ask(&pane, other, 8, NOW.plus_millis(30_001)).unwrap();
    assert!(m.state.is_ask_open(ask_id.as_str()), "raised after its hold: the answer no longer applies");
}
