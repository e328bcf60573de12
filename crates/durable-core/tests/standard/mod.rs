//! The machine the sequence tests start from (no runtime, no store): one
//! test config, which each test changes where its case needs.

use durable_core::machine::MachineConfig;

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
