//! The recovery of the sends a restart left (§9.1) as a sequence on the
//! machine alone — no runtime, no store: the test plays the driver, hands
//! the machine what the store said (the unfinished sends, each one's
//! receipt, each close) and reads what it asks next, what it wrote into
//! the panes, what it queued and the warn lines it asked for.

mod standard;

use standard::{NOW, events, id, warnings};

use durable_core::machine::Machine;
use durable_core::recovery::{RecoveryInput, RecoveryNext};
use durable_core::{Lookup, PaneOptions, PendingSend, Receipt, SendState, StoreError};

fn machine() -> Machine {
    let mut m = Machine::new(standard::config());
    let ws = m.add_workspace("support", "Support").unwrap();
    let tab = m.add_tab(&ws, "main", "Tickets").unwrap();
    m.add_pane(&tab, "ticket-1", PaneOptions::new("Maria")).unwrap();
    m.add_pane(&tab, "ticket-2", PaneOptions::new("Ana")).unwrap();
    m
}

fn left(request_id: &str, pane: &str, text: &str, state: SendState) -> PendingSend {
    PendingSend::new(request_id, pane, text, state)
}

fn answered() -> RecoveryInput {
    RecoveryInput::Lookup(Ok(Lookup::Found(Receipt::new(200, r#"{"ok":true,"result":"sent"}"#))))
}

fn step(m: &mut Machine, input: RecoveryInput) -> RecoveryNext {
    m.recovering_sends(input, NOW)
}

fn queued(m: &Machine, pane: &str) -> usize {
    m.state.pane(&id(pane)).map_or(0, |p| p.queued_len())
}

#[test]
fn queued_sends_go_back_running_ones_close_with_a_notice_and_unanswered_ones_close_quietly() {
    let mut m = machine();
    assert_eq!(m.begin_recovering_sends(), RecoveryNext::ReadSends);
    let sends = vec![
        left("s-1", "ticket-1", "first", SendState::Queued),
        left("s-2", "ticket-1", "where is my order", SendState::Running),
        left("s-3", "ticket-2", "never answered", SendState::Queued),
        left("s-4", "ticket-2", "second", SendState::Queued),
        left("s-5", "ticket-1", "third", SendState::Queued),
    ];
    assert_eq!(step(&mut m, RecoveryInput::Sends(Ok(sends))), RecoveryNext::Lookup(id("s-1")));
    assert_eq!(step(&mut m, answered()), RecoveryNext::Lookup(id("s-2")));
    assert_eq!(queued(&m, "ticket-1"), 1, "s-1 is back in its queue");
    // Its turn was running: a notice on its pane, then its close.
    assert_eq!(step(&mut m, answered()), RecoveryNext::Close(id("s-2")));
    let shown = events(&mut m, "ticket-1");
    assert!(
        shown
            .contains("The agent restarted while answering “where is my order”; that answer did not finish."),
        "{shown}"
    );
    assert!(shown.contains(r#""id":"cut-s-2""#), "{shown}");
    assert_eq!(step(&mut m, RecoveryInput::Closed(Ok(()))), RecoveryNext::Lookup(id("s-3")));
    // Never answered: the phone repeats it if it wants; closed, no line.
    assert_eq!(step(&mut m, RecoveryInput::Lookup(Ok(Lookup::Unknown))), RecoveryNext::Close(id("s-3")));
    assert_eq!(step(&mut m, RecoveryInput::Closed(Ok(()))), RecoveryNext::Lookup(id("s-4")));
    assert_eq!(queued(&m, "ticket-2"), 0);
    // An evicted receipt was answered all the same.
    assert_eq!(step(&mut m, RecoveryInput::Lookup(Ok(Lookup::Evicted))), RecoveryNext::Lookup(id("s-5")));
    assert_eq!(
        step(&mut m, answered()),
        RecoveryNext::Over { deliver: vec![id("ticket-1"), id("ticket-2")] },
        "each pane named once, in the order first met"
    );
    assert_eq!((queued(&m, "ticket-1"), queued(&m, "ticket-2")), (2, 1));
    assert_eq!(warnings(&mut m), Vec::<String>::new());
}

#[test]
fn a_send_whose_pane_is_gone_is_closed_then_warned_about() {
    let mut m = machine();
    m.begin_recovering_sends();
    let sends = vec![left("s-1", "ticket-9", "hello", SendState::Queued)];
    assert_eq!(step(&mut m, RecoveryInput::Sends(Ok(sends))), RecoveryNext::Lookup(id("s-1")));
    assert_eq!(step(&mut m, answered()), RecoveryNext::Close(id("s-1")));
    assert_eq!(warnings(&mut m), Vec::<String>::new(), "the line comes once the close is recorded");
    assert_eq!(step(&mut m, RecoveryInput::Closed(Ok(()))), RecoveryNext::Over { deliver: vec![] });
    assert_eq!(
        warnings(&mut m),
        ["send s-1 was acknowledged for pane ticket-9, which was not opened again: closed"]
    );
}

#[test]
fn the_stores_failures_are_warn_lines_and_the_recovery_goes_on() {
    let mut m = machine();
    m.begin_recovering_sends();
    let sends = vec![
        left("s-1", "ticket-1", "a", SendState::Queued),
        left("s-2", "ticket-1", "b", SendState::Running),
        // Ids that do not read: not a send of this agent's, skipped.
        left("bad id!", "ticket-1", "c", SendState::Queued),
        left("s-3", "no pane!", "d", SendState::Queued),
        left("s-4", "ticket-2", "e", SendState::Queued),
    ];
    assert_eq!(step(&mut m, RecoveryInput::Sends(Ok(sends))), RecoveryNext::Lookup(id("s-1")));
    let unread = RecoveryInput::Lookup(Err(StoreError::new("locked")));
    assert_eq!(step(&mut m, unread), RecoveryNext::Lookup(id("s-2")));
    assert_eq!(queued(&m, "ticket-1"), 0, "left as it is");
    assert_eq!(step(&mut m, answered()), RecoveryNext::Close(id("s-2")));
    let unrecorded = RecoveryInput::Closed(Err(StoreError::new("disk full")));
    assert_eq!(step(&mut m, unrecorded), RecoveryNext::Lookup(id("s-4")));
    assert_eq!(step(&mut m, answered()), RecoveryNext::Over { deliver: vec![id("ticket-2")] });
    assert_eq!(
        warnings(&mut m),
        [
            "send s-1: its receipt could not be read (receipt store: locked); left as it is",
            "send s-2: its close could not be recorded (receipt store: disk full)",
        ]
    );
    // The list itself unread: nothing to do, said once.
    m.begin_recovering_sends();
    let failed = RecoveryInput::Sends(Err(StoreError::new("gone")));
    assert_eq!(step(&mut m, failed), RecoveryNext::Over { deliver: vec![] });
    assert_eq!(warnings(&mut m), ["the sends left by the last run could not be read (receipt store: gone)"]);
}

#[test]
fn a_recovery_driven_out_of_order_or_after_its_end_stops_with_a_warn_line() {
    let mut m = machine();
    m.begin_recovering_sends();
    let sends = vec![
        left("s-1", "ticket-1", "a", SendState::Queued),
        left("s-2", "ticket-1", "b", SendState::Queued),
    ];
    assert_eq!(step(&mut m, RecoveryInput::Sends(Ok(sends))), RecoveryNext::Lookup(id("s-1")));
    assert_eq!(step(&mut m, RecoveryInput::Closed(Ok(()))), RecoveryNext::Over { deliver: vec![] });
    let lines = warnings(&mut m);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(lines[0].starts_with("the recovery of the sends was driven out of order"), "{lines:?}");
    assert_eq!(step(&mut m, answered()), RecoveryNext::Over { deliver: vec![] });
    assert_eq!(warnings(&mut m), ["the recovery of the sends was driven after it ended"]);
    // The end of the phone's hold forgets a recovery cut short.
    m.begin_recovering_sends();
    m.state.end_send_recovery();
    assert_eq!(step(&mut m, RecoveryInput::Sends(Ok(vec![]))), RecoveryNext::Over { deliver: vec![] });
    assert_eq!(warnings(&mut m), ["the recovery of the sends was driven after it ended"]);
}
