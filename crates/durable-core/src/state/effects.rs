//! What the state asks the program's side to do, by number: it holds no
//! channel, signal or handler of its own (`Link`s name them).

use crate::data::decided::{AskClosed, Decided};

/// Names one thing on the program's side: an ask's awaitable, a turn's
/// steer inbox, a stop signal, a handler, a waiter. Numbers are handed out
/// by the core's `Links` and never reused, so an old turn cannot end a
/// newer one.
pub(crate) type Link = u64;

/// Something the core does on the program's side once the state changed.
#[derive(Debug)]
pub(crate) enum Effect {
    /// An ask closed: resolve its awaitable, end its abort watcher.
    Decide { ask: Link, result: Result<Decided, AskClosed> },
    /// Fire a stop signal (a stop, or its pane closed).
    Abort(Link),
    /// A stop signal is no longer armed: drop it unfired.
    ForgetStop(Link),
    /// Hand a steer's text to a running turn.
    Steer { turn: Link, text: String },
    /// A pane's handler was replaced or its pane is forgotten.
    ForgetHandler(Link),
}
