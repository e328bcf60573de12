//! What the machine asks of its driver, in the order it asked: the state
//! holds no channel, signal, handler or job of its own ([`Link`]s name
//! them), so a change that must reach one comes out as an [`Effect`].

use durable_types::Id;

use crate::data::decided::{AskClosed, Decided};
use crate::data::receipt::Receipt;

/// Names one thing on the program's side: an ask's awaitable, a turn's
/// steer inbox, a stop signal, a handler, a waiter. Numbers are handed out
/// by durable-runtime's `Links` and never reused, so an old turn cannot end a
/// newer one.
pub type Link = u64;

/// Something the driver does once the machine changed. durable-runtime
/// applies them in order when it lets the machine go: all under its lock but
/// [`Effect::Warn`], which runs the program's sink after it.
#[derive(Clone, Debug)]
pub enum Effect {
    /// An ask closed: resolve its awaitable, end its abort watcher.
    Decide { ask: Link, result: Result<Decided, AskClosed> },
    /// Fire a stop signal (a stop, or its pane closed).
    Abort(Link),
    /// A stop signal is no longer armed: drop it unfired.
    ForgetStop(Link),
    /// Hand a steer's text to a running turn.
    Steer { turn: Link, text: String },
    /// A turn is no longer its pane's current one (another replaced it):
    /// its steer inbox ends, so its `next_steer()` says `None`.
    ForgetTurn(Link),
    /// A pane's handler was replaced or its pane is forgotten.
    ForgetHandler(Link),
    /// A line for the program's warn sink.
    Warn(String),
    /// The earliest deadline moved earlier: wake the driver.
    WakeDriver,
    /// The store's journal of asks has ops and no job applies them: start
    /// one (it takes them with `State::next_ask_op`).
    DrainAsks,
    /// The store's journal of conversations has steps and no job applies
    /// them: start one (it takes them with `State::next_conversation_steps`).
    DrainConversations,
    /// A pane declared again got back a kept title other than the one it
    /// was declared with (the phone renamed it in an earlier run): offer
    /// it to the program's rename hook, which decides (a pane whose title
    /// is no longer `instead_of` by then was renamed since: it keeps that).
    /// `restore` numbers the offer (its rename request id).
    OfferKeptTitle { pane: Id, title: String, instead_of: String, restore: u64 },
    /// A pane's last ask closed and sends wait in its queue: deliver them.
    DeliverQueued(Id),
    /// Wake a waiter (no turn runs any more).
    Wake(Link),
    /// The request a repeat waited for ended: hand the waiter its receipt
    /// (to replay), or nothing (it claims the id itself).
    Settle { waiter: Link, receipt: Option<Receipt> },
    /// An answer held before its ask was raised applied: store its receipt.
    PutHeldReceipt { request_id: Id, receipt: Receipt, group: String },
}
