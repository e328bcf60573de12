//! The machine the sequence tests start from (no runtime, no store): one
//! test config, which each test changes where its case needs.

#![allow(dead_code)] // each test file uses what it needs

use durable_core::PaneOptions;
use durable_core::machine::{Machine, MachineConfig};
use durable_core::types::exchange::{Caller, Read};
use durable_core::types::{Id, Timestamp};

/// The time the sequence tests give the machine.
pub(crate) const NOW: Timestamp = Timestamp::from_millis(1_000);

/// A desk agent's machine config: allow-always on, a 100-event tail, a
/// 30 s hold and 1 MiB of held answers, no store that keeps asks or
/// conversations.
pub(crate) fn config() -> MachineConfig {
    MachineConfig {
        host_name: "desk".into(),
        runtime: "test".into(),
        caps: None,
        epoch: "0123456789abcdef".into(),
        tail_limit: 100,
        allow_always: true,
        keeps_asks: false,
        keeps_conversations: false,
        shows_items_once_kept: false,
        hold_ms: 30_000,
        held_answer_bytes: 1 << 20,
    }
}

/// A desk: workspace `support`, tab `main`, and pane `ticket-1` ("Maria").
pub(crate) fn desk() -> (Machine, Id) {
    let mut m = Machine::new(config());
    let ws = m.add_workspace("support", "Support").unwrap();
    let tab = m.add_tab(&ws, "main", "Tickets").unwrap();
    let pane = m.add_pane(&tab, "ticket-1", PaneOptions::new("Maria")).unwrap();
    (m, pane)
}

/// An id the test knows follows the rule.
pub(crate) fn id(s: &str) -> Id {
    Id::new(s).unwrap()
}

/// A pane's events, as a reader after 0 reads them.
pub(crate) fn events(m: &mut Machine, pane: &str) -> String {
    let path = format!("/v1/panes/{pane}/events");
    let read =
        Read { path: &path, query: Some("after=0"), if_none_match: None, caller: Caller::OtherProcess };
    String::from_utf8(m.answer_read(&read).expect("the events are a read").body.to_vec()).unwrap()
}

/// The warn lines the machine asked for since the last drain of its effects.
pub(crate) fn warnings(m: &mut Machine) -> Vec<String> {
    m.state
        .drain_effects()
        .filter_map(|e| match e {
            durable_core::state::Effect::Warn(line) => Some(line),
            _ => None,
        })
        .collect()
}
