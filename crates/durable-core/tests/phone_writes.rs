//! The phone's writes other than a send (§8) as sequences on the machine
//! alone — no runtime, no handlers, no hooks: the test plays the driver,
//! says which handlers the program set, hands back what each one asked
//! said, and reads the answer and what the write changed.

mod standard;

use standard::{NOW, desk, id};

use durable_core::machine::Machine;
use durable_core::phone_writes::{Decider, Deciders, Heard, PhoneWrite, WriteAnswer, WriteNext};
use durable_core::state::{ChatSlot, Effect};
use durable_core::types::{AskOption, AskSpec, PaneState, ScopeId, Target};
use serde_json::Value;

const CHAT_BOTH: Deciders =
    Deciders { pane_chat: true, wide_chat: true, pane_actions: false, wide_actions: false, hooks: false };
const HOOKS: Deciders =
    Deciders { pane_chat: false, wide_chat: false, pane_actions: false, wide_actions: false, hooks: true };
const NONE: Deciders =
    Deciders { pane_chat: false, wide_chat: false, pane_actions: false, wide_actions: false, hooks: false };

/// Drives `write` to its answer: each decider asked says what `say`
/// gives for it. Returns the deciders asked, in order, and the answer.
fn drive(
    m: &mut Machine,
    write: &PhoneWrite,
    deciders: Deciders,
    mut say: impl FnMut(Decider) -> Heard,
) -> (Vec<Decider>, WriteAnswer) {
    let mut asked = Vec::new();
    let mut heard = None;
    loop {
        match m.phone_write(&id("r-1"), write, deciders, heard.take(), NOW) {
            WriteNext::Ask(decider) => {
                assert!(asked.len() < 4, "asked again and again: {asked:?}");
                asked.push(decider);
                heard = Some((decider, say(decider)));
            }
            WriteNext::Answer(answer) => return (asked, answer),
        }
    }
}

/// The answer's status, its `code` (or `result` for a `200`), and its group.
fn said(answer: &WriteAnswer) -> (u16, String, Option<&str>) {
    let body: Value = serde_json::from_slice(&answer.response.body).unwrap();
    let word = if answer.response.status == 200 { &body["result"] } else { &body["code"] };
    (answer.response.status, word.as_str().unwrap_or_default().to_owned(), answer.group.as_deref())
}

fn body(answer: &WriteAnswer) -> Value {
    serde_json::from_slice(&answer.response.body).unwrap()
}

fn effects(m: &mut Machine) -> Vec<Effect> {
    m.state.drain_effects().collect()
}

#[test]
fn a_steer_asks_the_pane_s_handler_then_the_wide_one_and_reaches_the_running_turn() {
    let (mut m, pane) = desk();
    let steer = PhoneWrite::Steer { pane: pane.clone(), text: "shorter".into() };
    // Idle: refused, not asked.
    let (asked, answer) = drive(&mut m, &steer, CHAT_BOTH, |_| Heard::Takes);
    assert_eq!((asked.len(), said(&answer)), (0, (409, "refused".into(), None)));
    assert_eq!(body(&answer)["reason"], "not-working");

    m.set_pane_state(&pane, PaneState::Working, Some("t-1"), NOW).unwrap();
    assert!(m.state.install_turn(&pane, 10, 20));
    effects(&mut m);
    let (asked, answer) = drive(&mut m, &steer, CHAT_BOTH, |d| {
        if d == Decider::Chat(ChatSlot::Pane) { Heard::NotSupported } else { Heard::Takes }
    });
    assert_eq!(asked, [Decider::Chat(ChatSlot::Pane), Decider::Chat(ChatSlot::Wide)]);
    assert_eq!(said(&answer), (200, "steered".into(), Some("pane:ticket-1")));
    let steered = effects(&mut m);
    assert!(
        steered.iter().any(|e| matches!(e, Effect::Steer { turn: 20, text } if text == "shorter")),
        "{steered:?}"
    );

    // Refused by the pane's handler: the wide one is not asked, the turn hears nothing.
    let (asked, answer) = drive(&mut m, &steer, CHAT_BOTH, |_| Heard::Refuses("mid-command".into()));
    assert_eq!((asked.len(), said(&answer)), (1, (409, "refused".into(), None)));
    assert!(!effects(&mut m).iter().any(|e| matches!(e, Effect::Steer { .. })));
    // Neither takes it; none at all; only actions; a pane not open.
    let (_, answer) = drive(&mut m, &steer, CHAT_BOTH, |_| Heard::NotSupported);
    assert_eq!(said(&answer).1, "not-supported");
    let (_, answer) = drive(&mut m, &steer, NONE, |_| Heard::Takes);
    assert_eq!(said(&answer).1, "not-supported");
    let actions_only = Deciders { pane_actions: true, ..NONE };
    let (asked, answer) = drive(&mut m, &steer, actions_only, |_| Heard::Takes);
    assert_eq!((asked.len(), said(&answer).1), (0, "not-supported".into()));
    let gone = PhoneWrite::Steer { pane: id("ticket-9"), text: "x".into() };
    assert_eq!(said(&drive(&mut m, &gone, CHAT_BOTH, |_| Heard::Takes).1).0, 404);
}

#[test]
fn a_stop_fires_the_turn_s_signal_and_aborts_the_pane_s_asks_unless_a_handler_refuses() {
    let (mut m, pane) = desk();
    let stop = PhoneWrite::Stop { pane: pane.clone() };
    m.set_pane_state(&pane, PaneState::Working, Some("t-1"), NOW).unwrap();
    assert!(m.state.install_turn(&pane, 10, 20));
    let spec =
        AskSpec::choice("call-1", "Run it?", [AskOption::new("yes", "Yes"), AskOption::new("no", "No")]);
    m.raise_ask(&pane, spec, 77, NOW).unwrap();
    effects(&mut m);

    let (asked, answer) = drive(&mut m, &stop, CHAT_BOTH, |_| Heard::Refuses("cannot stop now".into()));
    assert_eq!((asked.len(), said(&answer)), (1, (409, "refused".into(), None)));
    assert!(effects(&mut m).is_empty(), "a refused stop changes nothing");
    assert_eq!(m.state.open_asks_of(&pane).len(), 1);

    // A pane with only an action handler: no chat handler minds, it stops.
    let actions_only = Deciders { pane_actions: true, ..NONE };
    let (asked, answer) = drive(&mut m, &stop, actions_only, |_| Heard::Refuses("never asked".into()));
    assert_eq!((asked.len(), said(&answer)), (0, (200, "stopped".into(), Some("pane:ticket-1"))));
    let stopped = effects(&mut m);
    assert!(stopped.iter().any(|e| matches!(e, Effect::Abort(10))), "{stopped:?}");
    assert!(m.state.open_asks_of(&pane).is_empty(), "the pane's ask closed as aborted");
    // No handler at all: not-supported (the contract's 409), nothing stopped.
    let (_, answer) = drive(&mut m, &stop, NONE, |_| Heard::Takes);
    assert_eq!(said(&answer).1, "not-supported");
}

#[test]
fn an_action_must_be_the_pane_s_and_is_asked_of_its_action_handlers() {
    let (mut m, pane) = desk();
    m.set_action(&pane, "deploy", "Deploy", None).unwrap();
    let deciders = Deciders { pane_actions: true, wide_actions: true, ..NONE };
    let unknown = PhoneWrite::Action { pane: pane.clone(), action: id("rollback") };
    let (asked, answer) = drive(&mut m, &unknown, deciders, |_| Heard::Takes);
    assert_eq!((asked.len(), said(&answer).0), (0, 404));
    let deploy = PhoneWrite::Action { pane: pane.clone(), action: id("deploy") };
    let (asked, answer) = drive(&mut m, &deploy, deciders, |d| {
        if d == Decider::Actions(ChatSlot::Pane) { Heard::NotSupported } else { Heard::Takes }
    });
    assert_eq!(asked, [Decider::Actions(ChatSlot::Pane), Decider::Actions(ChatSlot::Wide)]);
    assert_eq!(said(&answer), (200, "done".into(), Some("pane:ticket-1")));
    let (_, answer) = drive(&mut m, &deploy, deciders, |_| Heard::NotSupported);
    assert_eq!(said(&answer).1, "not-supported");
    // Chat handlers only: no one takes an action.
    let (asked, answer) = drive(&mut m, &deploy, CHAT_BOTH, |_| Heard::Takes);
    assert_eq!((asked.len(), said(&answer).1), (0, "not-supported".into()));
}

#[test]
fn a_rename_goes_through_the_hook_and_applies_only_what_it_lets_through() {
    let (mut m, pane) = desk();
    let rename =
        PhoneWrite::Rename { target: Target::Pane, id: "ticket-1".into(), title: "Maria (VIP)".into() };
    assert_eq!(m.write_needs_pane(&rename), Some(pane.clone()));
    let (asked, answer) = drive(&mut m, &rename, HOOKS, |_| Heard::Refuses("titles are the desk's".into()));
    assert_eq!((asked, said(&answer).1), (vec![Decider::Hook], "refused".into()));
    assert_eq!(m.state.pane(&pane).unwrap().title(), "Maria");
    let (_, answer) = drive(&mut m, &rename, HOOKS, |_| Heard::NotSupported);
    assert_eq!(said(&answer).1, "not-supported");
    let (_, answer) = drive(&mut m, &rename, HOOKS, |_| Heard::Takes);
    assert_eq!(said(&answer), (200, "renamed".into(), Some("renames")));
    assert_eq!(m.state.pane(&pane).unwrap().title(), "Maria (VIP)");
    // No hooks: the SDK renames it; a tab too.
    let tab = PhoneWrite::Rename { target: Target::Tab, id: "support:main".into(), title: "Open".into() };
    assert_eq!(m.write_needs_pane(&tab), None);
    let (asked, answer) = drive(&mut m, &tab, NONE, |_| Heard::Refuses("never asked".into()));
    assert_eq!((asked.len(), said(&answer).0), (0, 200));
    // Nothing there: 404, the hook not asked.
    let nothing = PhoneWrite::Rename { target: Target::Workspace, id: "sales".into(), title: "S".into() };
    let (asked, answer) = drive(&mut m, &nothing, HOOKS, |_| Heard::Takes);
    assert_eq!((asked.len(), said(&answer).0), (0, 404));
}

#[test]
fn a_close_the_hook_lets_through_closes_and_a_target_closed_meanwhile_is_still_closed_for_the_phone() {
    let (mut m, pane) = desk();
    let close = PhoneWrite::Close { target: Target::Pane, id: "ticket-1".into() };
    assert_eq!(m.phone_write(&id("r-1"), &close, HOOKS, None, NOW), WriteNext::Ask(Decider::Hook));
    // The program closes it itself before its hook answers.
    assert!(m.close_pane(&pane, NOW));
    let WriteNext::Answer(answer) =
        m.phone_write(&id("r-1"), &close, HOOKS, Some((Decider::Hook, Heard::Takes)), NOW)
    else {
        panic!("answered")
    };
    assert_eq!(said(&answer), (200, "closed".into(), Some("closes")));
    // A rename likewise.
    let rename = PhoneWrite::Rename { target: Target::Pane, id: "ticket-1".into(), title: "X".into() };
    let next = m.phone_write(&id("r-2"), &rename, HOOKS, Some((Decider::Hook, Heard::Takes)), NOW);
    assert!(matches!(next, WriteNext::Answer(ref a) if a.response.status == 200), "{next:?}");
    // Now it is not open: a new close is 404 and needs no pane's write.
    assert_eq!(m.write_needs_pane(&close), None);
    assert_eq!(said(&drive(&mut m, &close, NONE, |_| Heard::Takes).1).0, 404);
    // A whole workspace, no hooks.
    let ws = PhoneWrite::Close { target: Target::Workspace, id: "support".into() };
    let (_, answer) = drive(&mut m, &ws, NONE, |_| Heard::Takes);
    assert_eq!(said(&answer).0, 200);
    assert!(!m.state.has_workspace(&ScopeId::new("support").unwrap()));
}

#[test]
fn a_reopen_restores_a_pane_this_process_closed_and_delivers_what_it_had_queued() {
    let (mut m, pane) = desk();
    let reopen = PhoneWrite::Reopen { id: pane.clone() };
    let (_, answer) = drive(&mut m, &reopen, NONE, |_| Heard::Takes);
    assert_eq!(said(&answer).0, 404, "an open pane was not closed by this process");
    m.state.queue_send(&pane, durable_core::state::QueuedSend { request_id: id("s-1"), text: "hi".into() });
    assert!(m.close_pane(&pane, NOW));
    effects(&mut m);
    let (asked, answer) = drive(&mut m, &reopen, HOOKS, |_| Heard::Takes);
    assert_eq!((asked, said(&answer)), (vec![Decider::Hook], (200, "reopened".into(), Some("reopens"))));
    assert!(m.state.is_open(&pane));
    let after = effects(&mut m);
    assert!(after.iter().any(|e| matches!(e, Effect::DeliverQueued(p) if *p == pane)), "{after:?}");
    // The hook reopened it itself: the SDK restores nothing.
    assert!(m.close_pane(&pane, NOW));
    let (_, answer) = drive(&mut m, &reopen, HOOKS, |_| Heard::Reopened);
    assert_eq!(said(&answer).0, 200);
    assert!(!m.state.is_open(&pane));
    let (_, answer) = drive(&mut m, &reopen, HOOKS, |_| Heard::Refuses("archived".into()));
    assert_eq!(said(&answer).1, "refused");
}

#[test]
fn a_starter_needs_a_hook_and_names_the_pane_it_opened() {
    let (mut m, _) = desk();
    m.add_starter("new-ticket", "New ticket").unwrap();
    let start = PhoneWrite::Starter { starter: id("new-ticket"), text: Some("printer".into()) };
    let (_, answer) = drive(&mut m, &start, NONE, |_| Heard::Takes);
    assert_eq!(said(&answer).1, "not-supported");
    let unknown = PhoneWrite::Starter { starter: id("old"), text: None };
    assert_eq!(said(&drive(&mut m, &unknown, HOOKS, |_| Heard::Takes).1).0, 404);
    let (_, answer) = drive(&mut m, &start, HOOKS, |_| Heard::Started(Some(id("ticket-2"))));
    assert_eq!(said(&answer), (200, "started".into(), Some("starters")));
    assert_eq!(body(&answer)["pane"], "ticket-2");
    let (_, answer) = drive(&mut m, &start, HOOKS, |_| Heard::Started(None));
    assert_eq!(body(&answer)["pane"], Value::Null);
    m.begin_stop();
    let (asked, answer) = drive(&mut m, &start, HOOKS, |_| Heard::Takes);
    assert_eq!((asked.len(), said(&answer)), (0, (409, "busy".into(), None)));
}

#[test]
fn a_close_the_hook_refuses_closes_nothing_and_stores_nothing() {
    let (mut m, pane) = desk();
    let close = PhoneWrite::Close { target: Target::Pane, id: "ticket-1".into() };
    let (asked, answer) = drive(&mut m, &close, HOOKS, |_| Heard::Refuses("still open".into()));
    assert_eq!((asked, said(&answer)), (vec![Decider::Hook], (409, "refused".into(), None)));
    assert!(m.state.is_open(&pane), "the hook refused: nothing closed");
    let (_, answer) = drive(&mut m, &close, HOOKS, |_| Heard::NotSupported);
    assert_eq!(said(&answer), (409, "not-supported".into(), None));
    assert!(m.state.is_open(&pane));
}
