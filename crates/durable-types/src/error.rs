//! The Rust error for a rule broken by the program (never a wire error).

use std::fmt;

/// Which family of mistake a [`RuleError`] is: the JS SDK throws `TypeError`
/// for the first and `RangeError` for the second.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RuleKind {
    /// A value of the wrong shape: an invalid id, a bad `lang`, `href` or
    /// `badge`, an `always` option where allow-always is off (JS `TypeError`).
    InvalidArgument,
    /// A value outside its allowed range: a `progress` value outside 0..=1,
    /// too many options, `min > max` (JS `RangeError`).
    OutOfRange,
    /// A call that is not allowed in the current state: raising an ask whose
    /// id is already open.
    InvalidState,
    /// The pane (or the tab, or the workspace) was closed — by the program or
    /// from the phone. Not a mistake of the program: a turn that outlives
    /// its pane meets it.
    Closed,
}

/// A rule of the contract that a value given by the program breaks.
///
/// The message names the rule; [`RuleError::rule`] gives a stable short name
/// for it (e.g. `"id"`, `"lang"`, `"progress"`) for programs that branch.
#[derive(Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct RuleError {
    kind: RuleKind,
    rule: &'static str,
    message: String,
}

impl RuleError {
    /// A type-error-like rule break.
    pub fn invalid(rule: &'static str, message: impl Into<String>) -> Self {
        Self { kind: RuleKind::InvalidArgument, rule, message: message.into() }
    }

    /// A range-error-like rule break.
    pub fn out_of_range(rule: &'static str, message: impl Into<String>) -> Self {
        Self { kind: RuleKind::OutOfRange, rule, message: message.into() }
    }

    /// A call made in a state that does not allow it.
    pub fn invalid_state(rule: &'static str, message: impl Into<String>) -> Self {
        Self { kind: RuleKind::InvalidState, rule, message: message.into() }
    }

    /// The pane, tab or workspace it names was closed.
    pub fn closed(rule: &'static str, message: impl Into<String>) -> Self {
        Self { kind: RuleKind::Closed, rule, message: message.into() }
    }

    /// The same error with `context` (e.g. the field it came from) put in
    /// front of its message, as `<context>: <message>`. The kind and the rule
    /// stay as they were: a range error stays a range error.
    #[must_use]
    pub fn with_context(self, context: &str) -> Self {
        Self { kind: self.kind, rule: self.rule, message: format!("{context}: {}", self.message) }
    }

    /// The family of mistake.
    pub fn kind(&self) -> RuleKind {
        self.kind
    }

    /// The short name of the rule broken, e.g. `"id"` or `"href"`.
    pub fn rule(&self) -> &'static str {
        self.rule
    }

    /// True for a value of the wrong shape (JS `TypeError`).
    pub fn is_invalid_argument(&self) -> bool {
        self.kind == RuleKind::InvalidArgument
    }

    /// True for a value out of its range (JS `RangeError`).
    pub fn is_out_of_range(&self) -> bool {
        self.kind == RuleKind::OutOfRange
    }

    /// True for a call not allowed in the current state.
    pub fn is_invalid_state(&self) -> bool {
        self.kind == RuleKind::InvalidState
    }

    /// Whether what the call named was closed ([`RuleKind::Closed`]).
    pub fn is_closed(&self) -> bool {
        self.kind == RuleKind::Closed
    }
}

impl fmt::Debug for RuleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RuleError")
            .field("kind", &self.kind)
            .field("rule", &self.rule)
            .field("message", &self.message)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rule_error_with_context_keeps_kind_and_rule() {
        for e in [
            RuleError::invalid("id", "bad"),
            RuleError::out_of_range("time", "bad"),
            RuleError::invalid_state("ask", "bad"),
        ] {
            let kind = e.kind();
            let rule = e.rule();
            let c = e.with_context("ask expiresAt");
            assert_eq!(c.kind(), kind);
            assert_eq!(c.rule(), rule);
            assert_eq!(c.to_string(), "ask expiresAt: bad");
        }
    }
}
