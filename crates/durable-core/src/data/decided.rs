//! How an ask ended, as the program's awaitable hands it over: an answer
//! and who gave it, or a close without one.

use durable_types::{Answer, DecidedBy, Outcome, Timestamp};

/// An ask closed without an answer: it timed out, or was aborted (signal,
/// stop, close).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the ask closed without an answer (decided by {}, {:?})", .decided_by.as_str(), .outcome)]
pub struct AskClosed {
    /// `timeout` or `program`.
    pub decided_by: DecidedBy,
    /// When.
    pub decided_at: Timestamp,
    /// `timeout` or `aborted`.
    pub outcome: Outcome,
}

/// An answer and who gave it.
#[derive(Debug, Clone, PartialEq)]
pub struct Decided {
    /// The answer, typed by the ask's kind.
    pub answer: Answer,
    /// `phone` or `program`.
    pub decided_by: DecidedBy,
    /// When.
    pub decided_at: Timestamp,
}
