//! A send delivered (§8, §9.1) as a sequence on the machine alone — no
//! runtime, no handlers, no store: the test plays the driver, hands the
//! machine each handler's verdict, each store write and the turn's start,
//! and reads what it asks next, what it showed on the pane, the turns it
//! counts and the stop signals it armed or let go.

mod standard;

use standard::{NOW, desk, events};

use durable_core::delivery::{ChatSlot, Delivered, DeliveryInput, DeliveryNext, Verdict};
use durable_core::machine::Machine;
use durable_core::state::{Effect, Link, QueuedSend};
use durable_core::types::{Id, PaneState};
use durable_core::{SendState, StoreError};

fn send(request_id: &str, text: &str) -> QueuedSend {
    QueuedSend { request_id: Id::new(request_id).unwrap(), text: text.to_owned() }
}

fn step(m: &mut Machine, link: Link, input: DeliveryInput) -> DeliveryNext {
    m.delivery_step(link, input, NOW)
}

fn checked(verdict: Verdict) -> DeliveryInput {
    DeliveryInput::Checked(verdict)
}

/// The effects asked for since the last call.
fn effects(m: &mut Machine) -> Vec<Effect> {
    m.state.drain_effects().collect()
}

fn forgot_stop(effects: &[Effect], stop: Link) -> bool {
    effects.iter().any(|e| matches!(e, Effect::ForgetStop(s) if *s == stop))
}

fn store_failed() -> StoreError {
    StoreError::new("disk full")
}

#[test]
fn a_send_run_as_it_arrives_asks_the_pane_then_the_wide_handler_and_begins_its_turn_without_a_second_mark() {
    let (mut m, pane) = desk();
    let next = m.begin_delivery(1, &pane, send("s-1", "hello"), SendState::Running, 10);
    assert_eq!(next, DeliveryNext::Check(ChatSlot::Pane));
    assert_eq!(m.state.turns_running(), 1, "counted from the start, before any handler decides");
    // A stop that comes while the handlers decide fires the armed signal.
    effects(&mut m);
    m.state.stop_turn(&pane);
    assert!(effects(&mut m).iter().any(|e| matches!(e, Effect::Abort(10))), "the turn's stop was armed");

    assert_eq!(step(&mut m, 1, checked(Verdict::NotSupported)), DeliveryNext::Check(ChatSlot::Wide));
    // Recorded `Running` as it arrived: no second commit before its turn.
    assert_eq!(step(&mut m, 1, checked(Verdict::Takes)), DeliveryNext::StartTurn);
    assert!(!events(&mut m, pane.as_str()).contains("\"user\""), "no user item before the turn begins");
    assert_eq!(step(&mut m, 1, DeliveryInput::Started(Ok(()))), DeliveryNext::Over(Delivered::Started));
    let shown = events(&mut m, pane.as_str());
    assert!(shown.contains("\"requestId\":\"s-1\"") && shown.contains("hello"), "{shown}");
    assert_eq!(m.state.turns_running(), 1, "the turn runs: the driver says when it ends");
    assert_eq!(m.state.deliveries_under_way(), 0);
}

#[test]
fn a_queued_send_is_taken_from_its_queue_and_marked_running_before_its_turn() {
    let (mut m, pane) = desk();
    m.state.queue_send(&pane, send("s-1", "first"));
    m.state.queue_send(&pane, send("s-2", "second"));
    let (taken, next) = m.begin_queued_delivery(1, &pane, 10).expect("the pane is idle");
    assert_eq!((taken.request_id.as_str(), next), ("s-1", DeliveryNext::Check(ChatSlot::Pane)));
    assert_eq!(step(&mut m, 1, checked(Verdict::Takes)), DeliveryNext::MarkRunning);
    assert_eq!(step(&mut m, 1, DeliveryInput::Marked(Ok(()))), DeliveryNext::StartTurn);
    assert_eq!(step(&mut m, 1, DeliveryInput::Started(Ok(()))), DeliveryNext::Over(Delivered::Started));
    assert_eq!(m.state.pane(&pane).unwrap().queued_len(), 1, "the second waits");
    // The turn the driver began makes the pane work: the next waits for it.
    m.set_pane_state(&pane, PaneState::Working, Some("s-1"), NOW).unwrap();
    assert!(m.begin_queued_delivery(2, &pane, 11).is_none());
    assert!(forgot_stop(&effects(&mut m), 11), "the unused stop signal is let go");
}

#[test]
fn a_queued_send_refused_is_closed_then_noticed_on_its_pane_and_its_turn_no_longer_counts() {
    let (mut m, pane) = desk();
    m.state.queue_send(&pane, send("s-1", "first"));
    let (_, _) = m.begin_queued_delivery(1, &pane, 10).unwrap();
    assert_eq!(step(&mut m, 1, checked(Verdict::Refuses("out of credit".into()))), DeliveryNext::MarkClosed);
    assert_eq!(m.state.turns_running(), 0);
    assert!(!events(&mut m, pane.as_str()).contains("not delivered"), "the notice waits for the close");
    let over = step(&mut m, 1, DeliveryInput::Closed(Ok(())));
    assert_eq!(over, DeliveryNext::Over(Delivered::Refused("out of credit".into())));
    let shown = events(&mut m, pane.as_str());
    assert!(shown.contains("A queued message was not delivered: out of credit"), "{shown}");
}

#[test]
fn a_queued_send_no_handler_takes_is_closed_with_its_notice_even_when_the_close_is_not_recorded() {
    let (mut m, pane) = desk();
    m.state.queue_send(&pane, send("s-1", "first"));
    m.begin_queued_delivery(1, &pane, 10).unwrap();
    step(&mut m, 1, checked(Verdict::NotSupported));
    assert_eq!(step(&mut m, 1, checked(Verdict::NotSupported)), DeliveryNext::MarkClosed);
    effects(&mut m);
    assert_eq!(
        step(&mut m, 1, DeliveryInput::Closed(Err(store_failed()))),
        DeliveryNext::Over(Delivered::NotSupported)
    );
    let warned = effects(&mut m);
    assert!(
        warned.iter().any(
            |e| matches!(e, Effect::Warn(l) if l.contains("s-1") && l.contains("close could not be recorded"))
        ),
        "{warned:?}"
    );
    assert!(events(&mut m, pane.as_str()).contains("not delivered: no handler takes send here"));
}

#[test]
fn a_send_run_as_it_arrives_and_refused_is_the_phone_s_answer_with_nothing_closed_or_shown() {
    let (mut m, pane) = desk();
    m.begin_delivery(1, &pane, send("s-1", "hi"), SendState::Running, 10);
    let over = step(&mut m, 1, checked(Verdict::Refuses("no".into())));
    assert_eq!(over, DeliveryNext::Over(Delivered::Refused("no".into())));
    m.begin_delivery(2, &pane, send("s-2", "hi"), SendState::Running, 11);
    step(&mut m, 2, checked(Verdict::NotSupported));
    assert_eq!(step(&mut m, 2, checked(Verdict::NotSupported)), DeliveryNext::Over(Delivered::NotSupported));
    assert_eq!(m.state.turns_running(), 0);
    let shown = events(&mut m, pane.as_str());
    assert!(!shown.contains("\"user\"") && !shown.contains("notice"), "{shown}");
}

#[test]
fn a_mark_the_store_refuses_or_a_pane_closed_before_the_turn_begins_refuses_the_send() {
    let (mut m, pane) = desk();
    m.state.queue_send(&pane, send("s-1", "first"));
    m.begin_queued_delivery(1, &pane, 10).unwrap();
    step(&mut m, 1, checked(Verdict::Takes));
    // Without the mark a restart would run the turn again: not begun.
    assert_eq!(step(&mut m, 1, DeliveryInput::Marked(Err(store_failed()))), DeliveryNext::MarkClosed);
    let over = step(&mut m, 1, DeliveryInput::Closed(Ok(())));
    let DeliveryNext::Over(Delivered::Refused(reason)) = over else { panic!("{over:?}") };
    assert!(reason.contains("could not be recorded") && reason.contains("disk full"), "{reason}");

    m.begin_delivery(2, &pane, send("s-2", "hi"), SendState::Running, 11);
    step(&mut m, 2, checked(Verdict::Takes));
    let over = step(&mut m, 2, DeliveryInput::Started(Err("pane ticket-1 is closed".into())));
    assert_eq!(over, DeliveryNext::Over(Delivered::Refused("pane ticket-1 is closed".into())));
    assert_eq!(m.state.turns_running(), 0);
}

#[test]
fn in_a_graceful_stop_nothing_is_delivered_and_a_queued_send_stays_queued() {
    let (mut m, pane) = desk();
    m.state.queue_send(&pane, send("s-1", "first"));
    m.begin_stop();
    effects(&mut m);
    assert!(m.begin_queued_delivery(1, &pane, 10).is_none());
    assert!(forgot_stop(&effects(&mut m), 10));
    assert_eq!(
        m.begin_delivery(2, &pane, send("s-2", "hi"), SendState::Running, 11),
        DeliveryNext::Over(Delivered::Stopping)
    );
    // One taken from the queue before the stop was seen goes back first.
    assert_eq!(
        m.begin_delivery(3, &pane, send("s-0", "zero"), SendState::Queued, 12),
        DeliveryNext::Over(Delivered::Stopping)
    );
    let p = m.state.pane(&pane).unwrap();
    assert_eq!(p.queued_len(), 2);
    assert!(forgot_stop(&effects(&mut m), 11));
    assert_eq!((m.state.turns_running(), m.state.deliveries_under_way()), (0, 0));
    assert_eq!(m.state.next_queued_send(&pane).map(|s| s.request_id.to_string()), Some("s-0".to_owned()));
}

#[test]
fn a_stop_that_begins_while_a_handler_decides_waits_for_that_turn() {
    let (mut m, pane) = desk();
    m.begin_delivery(1, &pane, send("s-1", "hi"), SendState::Running, 10);
    m.begin_stop();
    // The stop waits for the turns counted: this one is.
    m.state.wait_for_idle(99);
    assert!(!effects(&mut m).iter().any(|e| matches!(e, Effect::Wake(99))));
    step(&mut m, 1, checked(Verdict::Takes));
    assert_eq!(step(&mut m, 1, DeliveryInput::Started(Ok(()))), DeliveryNext::Over(Delivered::Started));
    m.state.turn_ended();
    assert!(effects(&mut m).iter().any(|e| matches!(e, Effect::Wake(99))), "woken as the turn ends");
}

#[test]
fn a_delivery_dropped_midway_stops_counting_its_turn_once() {
    let (mut m, pane) = desk();
    // A turn running beside it, so that an extra end would show.
    m.begin_delivery(1, &pane, send("s-1", "hi"), SendState::Running, 10);
    step(&mut m, 1, checked(Verdict::Takes));
    step(&mut m, 1, DeliveryInput::Started(Ok(())));
    m.state.queue_send(&pane, send("s-2", "queued"));
    m.set_pane_state(&pane, PaneState::Idle, None, NOW).unwrap();

    m.begin_queued_delivery(2, &pane, 11).unwrap();
    assert_eq!(m.state.turns_running(), 2);
    m.drop_delivery(2);
    assert_eq!(m.state.turns_running(), 1, "the dropped one is no longer counted");
    m.drop_delivery(2);
    assert_eq!(m.state.turns_running(), 1, "dropped twice, counted off once");

    // Dropped while its close is recorded: it no longer counted.
    m.state.queue_send(&pane, send("s-3", "queued"));
    m.begin_queued_delivery(3, &pane, 12).unwrap();
    step(&mut m, 3, checked(Verdict::Refuses("no".into())));
    m.drop_delivery(3);
    assert_eq!(m.state.turns_running(), 1);
}

#[test]
fn an_outcome_the_delivery_does_not_wait_for_ends_it_naming_what_came() {
    let (mut m, pane) = desk();
    m.begin_delivery(1, &pane, send("s-1", "hi"), SendState::Running, 10);
    let over = step(&mut m, 1, DeliveryInput::Marked(Ok(())));
    let DeliveryNext::Over(Delivered::Failed(why)) = over else { panic!("{over:?}") };
    assert!(why.contains("s-1") && why.contains("Marked") && why.contains("Checking"), "{why}");
    assert_eq!((m.state.turns_running(), m.state.deliveries_under_way()), (0, 0));
    let over = step(&mut m, 1, checked(Verdict::Takes));
    assert!(
        matches!(over, DeliveryNext::Over(Delivered::Failed(ref why)) if why.contains("no delivery")),
        "{over:?}"
    );
}

#[test]
fn a_delivery_to_a_closed_pane_lets_its_stop_signal_go() {
    let (mut m, pane) = desk();
    assert!(m.close_pane(&pane, NOW));
    effects(&mut m);
    let first = m.begin_delivery(1, &pane, send("s-1", "hi"), SendState::Running, 10);
    assert_eq!(first, DeliveryNext::Check(ChatSlot::Pane));
    assert!(forgot_stop(&effects(&mut m), 10), "no pane to arm it on");
    assert_eq!(step(&mut m, 1, checked(Verdict::NotSupported)), DeliveryNext::Check(ChatSlot::Wide));
    assert_eq!(step(&mut m, 1, checked(Verdict::NotSupported)), DeliveryNext::Over(Delivered::NotSupported));
    assert_eq!((m.state.turns_running(), m.state.deliveries_under_way()), (0, 0));
}
