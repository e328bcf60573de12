//! Wire errors: the `code` table of contract §2, as data.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// A failure code on the wire, with its HTTP status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum ErrorCode {
    /// 400: malformed JSON, missing field, invalid id/cursor/answer shape.
    BadRequest,
    /// 401: HTTPS without the right bearer token.
    TokenRefused,
    /// 403: a write from the agent itself or a descendant; another uid.
    CallerRefused,
    /// 404: unknown route, pane, action, starter, session, ask.
    NotFound,
    /// 405: known route, wrong method.
    MethodNotAllowed,
    /// 409: capability off, or no handler and no hook.
    NotSupported,
    /// 409: a handler or hook refused; `reason` says why.
    Refused,
    /// 409: plain send while the pane has an open ask; `askId`.
    AskOpen,
    /// 409: send whose `turnId` is not the pane's current turn; `turnId`.
    TurnMoved,
    /// 409: answer to an ask already decided; `decidedBy`, `decidedAt`.
    AskClosed,
    /// 409: answer whose `hash` is not the ask's current hash; `ask`.
    HashMismatch,
    /// 409: allow-always pick without `confirmAlways: true`.
    ConfirmRequired,
    /// 409: a write waited 5 s for the pane's lock.
    Busy,
    /// 413: request body over 1 MiB.
    TooLarge,
    /// 500: a replayed request id whose receipt was evicted.
    ReceiptDropped,
    /// 500: a bug.
    Internal,
}

impl ErrorCode {
    /// The HTTP status this code is sent with.
    pub fn status(self) -> u16 {
        use ErrorCode::*;
        match self {
            BadRequest => 400,
            TokenRefused => 401,
            CallerRefused => 403,
            NotFound => 404,
            MethodNotAllowed => 405,
            NotSupported | Refused | AskOpen | TurnMoved | AskClosed | HashMismatch | ConfirmRequired
            | Busy => 409,
            TooLarge => 413,
            ReceiptDropped | Internal => 500,
        }
    }

    /// The code as written on the wire.
    pub fn as_str(self) -> &'static str {
        use ErrorCode::*;
        match self {
            BadRequest => "bad-request",
            TokenRefused => "token-refused",
            CallerRefused => "caller-refused",
            NotFound => "not-found",
            MethodNotAllowed => "method-not-allowed",
            NotSupported => "not-supported",
            Refused => "refused",
            AskOpen => "ask-open",
            TurnMoved => "turn-moved",
            AskClosed => "ask-closed",
            HashMismatch => "hash-mismatch",
            ConfirmRequired => "confirm-required",
            Busy => "busy",
            TooLarge => "too-large",
            ReceiptDropped => "receipt-dropped",
            Internal => "internal",
        }
    }
}

/// A failure body: `{"ok": false, "code", "message", …fields of its code}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorBody {
    /// Always false.
    pub ok: bool,
    /// The code.
    pub code: ErrorCode,
    /// A human sentence; not a contract.
    pub message: String,
    /// The fields the code lists (`reason`, `askId`, `turnId`, `decidedBy`,
    /// `decidedAt`, `ask`).
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl ErrorBody {
    /// A failure with no extra field.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        ErrorBody { ok: false, code, message: message.into(), extra: Map::new() }
    }

    /// Adds a field the code lists.
    pub fn with(mut self, key: &str, value: impl Into<Value>) -> Self {
        self.extra.insert(key.to_owned(), value.into());
        self
    }

    /// The HTTP status.
    pub fn status(&self) -> u16 {
        self.code.status()
    }
}
