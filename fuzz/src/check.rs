//! What every answer of the core must be (`docs/wire.md` §2): a status of
//! the contract, a JSON object with `ok`, a failure's `code` matching its
//! status, an `ETag` only on state answers, `Allow` on every `405`, and
//! never a `5xx` (with the memory receipt store nothing can fail inside).

use std::collections::HashMap;

use durable_runtime::types::ErrorCode;
use durable_runtime::types::exchange::{Caller, Request, Response};
use serde_json::Value;

/// The statuses the core may answer with, but for `5xx`.
const STATUSES: [u16; 9] = [200, 202, 304, 400, 403, 404, 405, 409, 413];

/// Checks one answer of the core to `req`; panics (a finding) when it
/// breaks the contract.
pub fn response(req: &Request, resp: &Response) {
    let s = resp.status;
    assert!(STATUSES.contains(&s), "status {s} is not in the contract (or a 5xx) for {req:?}: {resp:?}");
    if req.caller == Caller::OtherUser {
        assert_eq!(s, 403, "another user's request must be refused: {req:?}");
    }
    if s == 304 {
        assert!(resp.body.is_empty(), "a 304 has no body: {resp:?}");
        assert!(req.if_none_match.is_some(), "a 304 without If-None-Match: {req:?}");
        assert!(resp.etag.is_some(), "a 304 carries its ETag: {resp:?}");
        return;
    }
    let body: Value = serde_json::from_slice(&resp.body)
        .unwrap_or_else(|e| panic!("the body of {s} is not JSON ({e}) for {req:?}: {resp:?}"));
    let obj = body.as_object().unwrap_or_else(|| panic!("the body is not an object: {body}"));
    let ok = obj.get("ok").and_then(Value::as_bool);
    match s {
        200 | 202 => assert_eq!(ok, Some(true), "a {s} says ok: true: {body}"),
        _ => {
            assert_eq!(ok, Some(false), "a {s} says ok: false: {body}");
            let code: ErrorCode = serde_json::from_value(obj.get("code").cloned().unwrap_or(Value::Null))
                .unwrap_or_else(|e| panic!("a failure without a known code ({e}): {body}"));
            assert_eq!(code.status(), s, "code {code:?} goes with another status: {body}");
            assert!(obj.get("message").is_some_and(Value::is_string), "a failure has a message: {body}");
            let extra = |k: &str| assert!(obj.contains_key(k), "{code:?} lists {k}: {body}");
            match code {
                ErrorCode::Refused => extra("reason"),
                ErrorCode::AskOpen => extra("askId"),
                ErrorCode::TurnMoved => extra("turnId"),
                ErrorCode::AskClosed => {
                    extra("decidedBy");
                    extra("decidedAt");
                }
                ErrorCode::HashMismatch => extra("ask"),
                _ => {}
            }
        }
    }
    if s == 405 {
        assert!(resp.allow.is_some(), "a 405 names what is allowed: {resp:?}");
    }
    if resp.etag.is_some() {
        assert!(req.path == "/v1/state" && s == 200, "an ETag on another answer than the state: {req:?}");
    }
}

/// The first answer to each request id, to check that a replay (`replayed:
/// true`) gives it again (`docs/wire.md` §9).
#[derive(Debug, Default)]
pub struct Receipts {
    first: HashMap<String, (u16, Value)>,
}

impl Receipts {
    /// Notes an answer and checks a replay against the first answer.
    pub fn note(&mut self, resp: &Response) {
        let Ok(Value::Object(mut body)) = serde_json::from_slice::<Value>(&resp.body) else { return };
        let Some(Value::String(id)) = body.get("requestId").cloned() else { return };
        match body.remove("replayed") {
            Some(Value::Bool(true)) => {
                let Some((status, first)) = self.first.get(&id) else {
                    panic!("request id {id} replayed, but no first answer was given: {body:?}");
                };
                if *status == 200 {
                    assert_eq!(resp.status, 200, "a replay of {id} has the first status");
                    assert_eq!(&Value::Object(body), first, "a replay of {id} is the first answer");
                }
            }
            Some(Value::Bool(false)) => {
                self.first.entry(id).or_insert((resp.status, Value::Object(body)));
            }
            _ => {}
        }
    }
}
