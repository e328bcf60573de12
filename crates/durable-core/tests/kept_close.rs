//! An ask of the last run that nobody raised again, closed at `ready()`
//! (§7.2) as a sequence on the machine alone: its line on its pane, its id
//! decided, the store's journal told to forget it — and an ask raised
//! again, or raised and decided in this run, left as it stands.

mod standard;

use standard::{NOW, desk, events};

use durable_core::PaneOptions;
use durable_core::machine::{Machine, MachineConfig};
use durable_core::state::AskOp;
use durable_core::types::{Answer, AnswerRequest, AskOption, AskSpec, Id};
use serde_json::json;

fn kept_desk() -> (Machine, Id) {
    let mut m = Machine::new(MachineConfig { keeps_asks: true, ..standard::config() });
    let ws = m.add_workspace("support", "Support").unwrap();
    let tab = m.add_tab(&ws, "main", "Tickets").unwrap();
    let pane = m.add_pane(&tab, "ticket-1", PaneOptions::new("Maria")).unwrap();
    (m, pane)
}

fn deploy() -> AskSpec {
    AskSpec::choice("c1", "Deploy to production?", [AskOption::new("yes", "Yes"), AskOption::new("no", "No")])
}

/// The ops the store's journal holds, as (`keep` | `forget`, ask id).
fn journal(m: &mut Machine) -> Vec<(&'static str, String)> {
    std::iter::from_fn(|| m.state.next_ask_op())
        .map(|op| match op {
            AskOp::Keep(record) => ("keep", record.ask.id.to_string()),
            AskOp::Forget(id) => ("forget", id.to_string()),
        })
        .collect()
}

fn answer(m: &mut Machine, ask_id: &str) -> u16 {
    let body = json!({"requestId": "r-1", "answer": {"optionIds": ["yes"]}});
    let req = AnswerRequest::parse(body.to_string().as_bytes()).unwrap();
    m.answer_ask(&Id::new(ask_id).unwrap(), req, NOW).0.status
}

#[test]
fn an_ask_nobody_raised_again_is_closed_with_its_line_and_forgotten_by_the_store() {
    let (mut m, pane) = desk();
    let ask = deploy().build(&pane, NOW, true).unwrap();
    let id = ask.id.to_string();
    m.close_kept_ask(ask, NOW);
    let shown = events(&mut m, "ticket-1");
    assert!(shown.contains("Stopped before an answer: Deploy to production?"), "{shown}");
    assert!(shown.contains(&format!("ask-closed-{id}")), "the line's id names the ask: {shown}");
    assert_eq!(journal(&mut m), vec![("forget", id.clone())]);
    assert_eq!(answer(&mut m, &id), 409, "an answer to it meets it closed");
}

#[test]
fn an_ask_of_a_pane_no_longer_declared_is_closed_without_a_line() {
    let (mut m, pane) = desk();
    let ask = deploy().build(&pane, NOW, true).unwrap();
    assert!(m.close_pane(&pane, NOW));
    let id = ask.id.to_string();
    m.close_kept_ask(ask, NOW);
    assert_eq!(journal(&mut m), vec![("forget", id.clone())]);
    assert_eq!(answer(&mut m, &id), 409);
}

#[test]
fn an_ask_raised_again_is_left_open_and_one_decided_since_keeps_its_decision() {
    let (mut m, pane) = kept_desk();
    let ask = deploy().build(&pane, NOW, true).unwrap();
    let id = ask.id.to_string();
    m.raise_ask(&pane, deploy(), 7, NOW).unwrap();
    assert_eq!(journal(&mut m), vec![("keep", id.clone())]);
    m.close_kept_ask(ask.clone(), NOW);
    assert!(m.state.is_ask_open(&id), "raised again: open");
    assert!(journal(&mut m).is_empty(), "and still kept");
    assert!(!events(&mut m, "ticket-1").contains("Stopped before an answer"));

    m.decide_by_program(&pane, &id, Answer::option("yes"), NOW).unwrap();
    journal(&mut m);
    m.close_kept_ask(ask, NOW);
    assert_eq!(journal(&mut m), vec![("forget", id)], "its record goes");
    assert!(!events(&mut m, "ticket-1").contains("Stopped before an answer"), "no line for a decided ask");
}
