//! Building responses: JSON bodies and the error table of §2.

use durable_types::exchange::Response;
use durable_types::{ErrorBody, ErrorCode, Id};
use serde::Serialize;

use crate::request::RequestError;

/// A JSON success (or any serializable body) with a status.
pub fn json<T: Serialize>(status: u16, body: &T) -> Response {
    match serde_json::to_vec(body) {
        Ok(bytes) => Response::json(status, bytes),
        Err(_) => error(ErrorCode::Internal, "the answer could not be written as JSON"),
    }
}

/// [`json`] written into a buffer of `capacity` bytes from the start: a
/// large answer written again (the full state after a change) then grows
/// no buffer step by step, and leaves no trail of freed ones behind.
pub fn json_with_capacity<T: Serialize>(status: u16, body: &T, capacity: usize) -> Response {
    let mut bytes = Vec::with_capacity(capacity);
    match serde_json::to_writer(&mut bytes, body) {
        Ok(()) => {
            // Such an answer is kept until the next change, room and all
            // (the first one, with no size to go by, grew by doubling).
            if bytes.capacity() - bytes.len() > bytes.len() / 8 {
                bytes.shrink_to_fit();
            }
            Response::json(status, bytes)
        }
        Err(_) => error(ErrorCode::Internal, "the answer could not be written as JSON"),
    }
}

/// A failure with no extra field.
pub fn error(code: ErrorCode, message: impl Into<String>) -> Response {
    failure(ErrorBody::new(code, message))
}

/// A failure body with its fields.
pub fn failure(body: ErrorBody) -> Response {
    let status = body.status();
    let bytes = serde_json::to_vec(&body).unwrap_or_else(|_| {
        br#"{"ok":false,"code":"internal","message":"the error could not be written"}"#.to_vec()
    });
    Response::json(status, bytes)
}

/// `400 bad-request` with a sentence saying what is wrong.
pub fn bad_request(message: impl Into<String>) -> Response {
    error(ErrorCode::BadRequest, message)
}

/// `404 not-found`.
pub fn not_found(message: impl Into<String>) -> Response {
    error(ErrorCode::NotFound, message)
}

/// `404 not-found` for a pane that is not open.
pub fn no_pane(pane: &Id) -> Response {
    not_found(format!("no open pane {pane}"))
}

/// `409 refused`: a handler or hook said no, with its reason for the phone.
pub fn refused(reason: String) -> Response {
    failure(ErrorBody::new(ErrorCode::Refused, format!("refused: {reason}")).with("reason", reason))
}

/// `409 not-supported`: no handler and no hook takes `what` here.
pub fn not_supported(what: &str) -> Response {
    error(ErrorCode::NotSupported, format!("no handler and no hook takes {what} here"))
}

/// A malformed request: `400 bad-request` (or `413 too-large`) with its
/// sentence.
impl From<RequestError> for Response {
    fn from(e: RequestError) -> Response {
        error(e.code(), e.to_string())
    }
}
