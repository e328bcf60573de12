//! The protocol machine of a durable agent (Collie's durable wire v1):
//! plain data changed through `&mut self`, with no IO, no lock, no channel,
//! no future and no async runtime.
//!
//! # The contract of this crate
//!
//! The machine holds a durable agent's layout, panes, items, events, asks,
//! receipts and deadlines, and every rule of the wire about them. Requests
//! and the time go in as plain values; responses and what the machine
//! needs done (resolve an ask, stop or steer a turn, write a warn line,
//! wake the driver at a deadline) come out as plain values, in order. It
//! does no IO — no sockets, no files, no clock, no spawning — and holds no
//! interior mutability: whoever drives it owns it.
//!
//! The driver around it is [`durable-runtime`](https://docs.rs/durable-runtime):
//! the machine behind one lock, the program's handles (`Collie`'s
//! workspaces, tabs, panes, asks and turns), the jobs that run the
//! program's handlers and its receipt store, and the timers. An agent's
//! author depends on [`durable-sdk`](https://docs.rs/durable-sdk); a
//! transport of its own takes `durable-runtime`.
//!
//! # What is public
//!
//! The plain values the runtime and the stores exchange with the machine
//! ([`Receipt`], [`Lookup`], [`PendingSend`], [`SendState`],
//! [`KeptAskRecord`], [`StoreError`], [`Refusal`], [`Decided`], …),
//! [`PaneOptions`] and [`ItemCadence`]. The machine itself (`Machine` and
//! its modules) is public but hidden: its sequences — the receipt step, a
//! send's delivery, the phone's other writes, the recovery of the sends,
//! history's reads, the deadlines — are `durable-runtime`'s to drive (each
//! starts with a call, names what it needs done next, and takes the
//! outcome back), and their paths are no promise between releases.
//!
//! # Tracing
//!
//! `tracing` events and spans are under `durable_core::…` targets, the
//! runtime's included (`RUST_LOG=durable_core=debug`): a `request` span per
//! request ending in a `DEBUG` `answered` event with its status, a `turn`
//! span per send's turn and an `ask` span per ask; `INFO` events for
//! Collie's hello, refused callers, asks raised and decided.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

#[doc(hidden)]
pub mod asks;
mod cadence;
#[doc(hidden)]
pub mod data;
#[doc(hidden)]
pub mod delivery;
#[doc(hidden)]
pub mod history;
#[doc(hidden)]
pub mod layout;
#[doc(hidden)]
pub mod machine;
#[doc(hidden)]
pub mod once;
#[doc(hidden)]
pub mod phone_writes;
#[doc(hidden)]
pub mod poll;
#[doc(hidden)]
pub mod recovery;
#[doc(hidden)]
pub mod request;
#[doc(hidden)]
pub mod respond;
#[doc(hidden)]
pub mod routes;
#[doc(hidden)]
pub mod state;
#[doc(hidden)]
pub mod timers;
#[doc(hidden)]
pub mod writes;

pub use cadence::ItemCadence;
pub use data::answer::{HandlerResult, Refusal, Reopen};
pub use data::caller_check::CallerCheckMode;
pub use data::conversation::{
    ConversationOp, KEPT_CONVERSATIONS, KEPT_ITEMS_PER_CONVERSATION, KeptConversation, KeptConversationRow,
    RowPlace,
};
pub use data::decided::{AskClosed, Decided};
pub use data::item_ids::user_item_id;
pub use data::receipt::{KeptAskRecord, Lookup, PendingSend, Receipt, SendState, StoreError};
pub use layout::PaneOptions;

/// The wire types and rules, re-exported.
pub use durable_types as types;
