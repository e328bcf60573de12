//! The async runtime around `durable-core`'s protocol machine: the Rust
//! form of the seed's `createCore` — the machine behind one lock, the
//! program's handles, the jobs that run its handlers and its receipt store,
//! and the deadlines.
//!
//! # The contract of this crate
//!
//! The core is deterministic and does no IO: no sockets, no files, no
//! spawning, no sleeping, no reading of the clock or of a random source. It
//! holds a durable agent's layout, panes, items, events, asks and receipts:
//! the rules live in [`durable_core`]'s machine, plain data this crate keeps
//! behind one lock. What runs here is what the machine asks for: the
//! program's handles, the calls its steps name (handlers, hooks, the
//! receipt store, the history provider) with their outcomes handed back,
//! the jobs that apply its journals, and its deadlines.
//!
//! **What goes in**
//! - The program's calls, through the handles: [`Collie::workspace`] →
//!   [`Workspace::tab`] → [`Tab::pane`], then [`Pane::write`] (items),
//!   [`Pane::state`], [`Pane::ask`], [`require_approval`], [`Collie::ready`].
//! - Collie's requests, as plain values: [`Driver::handle`] takes a
//!   [`Request`](durable_types::exchange::Request) (method, path, query,
//!   `If-None-Match`, body, and who the caller is) and returns a
//!   [`Response`](durable_types::exchange::Response) (status, `ETag`, JSON body).
//!   A `GET` may instead go to [`Driver::answer_read`] as a borrowed
//!   [`Read`](durable_types::exchange::Read): it answers at once, with no
//!   copy and no future, every read but the history routes (for those it
//!   says `None`, and [`Driver::handle`] answers).
//! - Time, from the [`Clock`] given in [`CoreOptions`], and the driver's
//!   [`Driver::tick`] when a deadline passes.
//!
//! **What comes out**
//! - Responses, from [`Driver::handle`] (and [`Driver::answer_read`]).
//! - Deadlines: [`Driver::next_deadline`] is the earliest time at which the core
//!   wants [`Driver::tick`] called (ask expiry, held answers, the 5 s `busy`
//!   wait).
//! - Jobs: [`Driver::poll_job`] hands out work that belongs to no request: the
//!   turn of a send a [`ChatHandler`] took, a queued send delivered once the
//!   pane goes idle. The driver runs each to completion on its executor.
//! - Warn lines, through the sink given in [`CoreOptions`].
//! - `tracing` events and spans, under `durable_core::…` targets (the
//!   machine's module paths; the runtime's `turn` span and `kept` event
//!   name theirs explicitly), so `RUST_LOG=durable_core=debug` shows them
//!   all: a `request` span per request
//!   (method, route, pane, ask id, request id; `DEBUG` for a read, `INFO`
//!   for a write) ending in a `DEBUG` `answered` event with its status; a
//!   `turn` span around each send's turn ([`Turn::span`]) and an `ask` span
//!   per ask ([`AskHandle::span`]); `INFO` events for Collie's hello (once
//!   per Collie version), refused callers, asks raised and decided.
//!
//! **In what order a driver calls things**
//! 1. Build the core with [`create_core`] and register a wake-up with
//!    [`Driver::set_wakeup`]: the core calls it whenever the next deadline may
//!    have moved earlier or a job is waiting.
//! 2. Loop: run every job from [`Driver::poll_job`]; sleep until
//!    [`Driver::next_deadline`] or until woken; call [`Driver::tick`] with the
//!    clock's time.
//! 3. For each request, await [`Driver::handle`] (concurrently with others: the
//!    future is `Send + 'static`); a `GET` may first go to
//!    [`Driver::answer_read`], and to [`Driver::handle`] only when that says
//!    `None`.
//!
//! The program's handles can be used from any thread at any time.
//!
//! With the `test-util` feature, `test_util` is the test support the
//! runtime's and the SDK's tests share (for tests only; no semver promise).
#![forbid(unsafe_code)]
#![deny(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod answer;
mod clock;
mod conversations;
mod core;
mod dispatch;
mod handlers;
mod handles;
mod history;
mod journals;
mod kept;
mod links;
mod once;
mod options;
mod receipts;
mod select;
mod serve;
mod signal;
mod turn;
mod writes;

pub use clock::{Clock, ManualClock, WarnSink};
pub use core::{Collie, Driver, Job, create_core};
pub use durable_core::user_item_id;
pub use durable_core::{
    AskClosed, CallerCheckMode, ConversationOp, Decided, HandlerResult, ItemCadence, KEPT_CONVERSATIONS,
    KEPT_ITEMS_PER_CONVERSATION, KeptAskRecord, KeptConversation, KeptConversationRow, Lookup, PaneOptions,
    PendingSend, Receipt, Refusal, Reopen, RowPlace, SendState, StoreError,
};
pub use handlers::{
    ActionHandler, ActionRequest, ChatHandler, CloseRequest, Hooks, RenameRequest, ReopenRequest,
    SendRequest, Started, StarterRequest, SteerRequest, StopRequest,
};
pub use handles::asks::{
    Approval, ApprovalFuture, ApprovalOptions, AskHandle, approval_spec, require_approval,
};
pub use handles::layout::{Pane, Tab, Workspace};
pub use history::{HistoryError, HistoryProvider, ItemsPage, RowsPage};
pub use kept::KeptAsk;
pub use options::{CoreOptions, CoreOptionsBuilder, HELD_ANSWER_BYTES};
pub use receipts::{MEMORY_CONVERSATIONS, MemoryReceiptStore, ReceiptStore};
pub use serve::{DEFAULT_SHUTDOWN_GRACE, Serve, Served};
pub use signal::{AbortController, AbortSignal};
pub use turn::Turn;

/// The wire types and rules, re-exported.
pub use durable_types as types;

#[cfg(feature = "test-util")]
#[cfg_attr(docsrs, doc(cfg(feature = "test-util")))]
pub mod test_util;
