//! What the program answers to a write from the phone: taken, refused
//! (with a reason, or "not mine"), and what a reopen did.

use std::fmt;

use durable_types::RuleError;

use super::decided::AskClosed;

/// A handler's "no" to a write.
///
/// [`Refusal::new`] answers `409 refused` with the reason; nothing is
/// stored, so the phone may try the same request id again.
/// [`Refusal::not_supported`] says "not mine": the agent-wide handler is
/// asked next, and when none takes the write the answer is `409
/// not-supported`.
#[derive(Clone, PartialEq, Eq)]
pub struct Refusal {
    reason: Option<String>,
}

impl Refusal {
    /// Refused, with a reason the phone shows (`409 refused`).
    pub fn new(reason: impl Into<String>) -> Self {
        Refusal { reason: Some(reason.into()) }
    }

    /// Not taken by this handler (`409 not-supported` when no other takes it).
    pub fn not_supported() -> Self {
        Refusal { reason: None }
    }

    /// The reason, for a refusal made with [`Refusal::new`].
    pub fn reason(&self) -> Option<&str> {
        self.reason.as_deref()
    }

    /// Whether this says "not mine" rather than "no".
    pub fn is_not_supported(&self) -> bool {
        self.reason.is_none()
    }
}

impl fmt::Debug for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.reason {
            Some(r) => write!(f, "Refusal({r:?})"),
            None => f.write_str("Refusal(not-supported)"),
        }
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.reason {
            Some(r) => write!(f, "refused: {r}"),
            None => f.write_str("not supported here"),
        }
    }
}

impl std::error::Error for Refusal {}

/// A rule the program broke inside a handler (`?` on the SDK's own calls)
/// refuses the write with the rule's words: `409 refused`, nothing stored,
/// so the phone may try the same request id again (the wire, §8:
/// [`durable_sdk::wire`](https://docs.rs/durable-sdk/latest/durable_sdk/wire/index.html)).
impl From<RuleError> for Refusal {
    fn from(e: RuleError) -> Self {
        Refusal::new(e.to_string())
    }
}

/// An ask that closed without an answer, awaited inside a handler, refuses
/// the write with how it closed.
impl From<AskClosed> for Refusal {
    fn from(e: AskClosed) -> Self {
        Refusal::new(e.to_string())
    }
}

/// What a handler answers: `Ok` takes the write, `Err` refuses it.
pub type HandlerResult<T = ()> = Result<T, Refusal>;

/// What `Hooks::on_reopen` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Reopen {
    /// The SDK restores the pane, if this process closed it (else `404`).
    Restore,
    /// The hook reopened the conversation itself (typically with
    /// `tab.pane(..)` again).
    Reopened,
}
