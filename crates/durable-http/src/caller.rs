//! Who sent a request: a caller fixed for the whole connection (the socket's
//! peer), or a bearer-token check made on every request (HTTPS).

use std::fmt;
use std::sync::Arc;

use bytes::Bytes;
use hyper::HeaderMap;
use hyper::header::AUTHORIZATION;

use durable_types::exchange::{Caller, Response};
use durable_types::{ErrorBody, ErrorCode};

/// A token check: true when the presented bearer token is accepted. The TLS
/// server supplies it (a constant-time comparison); the token is never
/// logged or echoed.
pub type TokenCheck = Arc<dyn Fn(&[u8]) -> bool + Send + Sync>;

/// How [`serve_connection`](crate::serve_connection) finds the caller of
/// each request on a connection.
#[derive(Clone)]
#[non_exhaustive]
pub enum CallerSource {
    /// The transport knows the caller for the whole connection (the Unix
    /// socket's peer). Every request is handed to the core with this value.
    Fixed(Caller),
    /// Every request must carry `Authorization: Bearer <token>` that the
    /// check accepts: it then reaches the core as [`Caller::Token`];
    /// otherwise it is answered `401 token-refused` at once, its body unread,
    /// and the core never sees it (contract §1.2).
    Bearer(TokenCheck),
}

impl CallerSource {
    /// A bearer-token source from a check function.
    pub fn bearer(check: impl Fn(&[u8]) -> bool + Send + Sync + 'static) -> Self {
        CallerSource::Bearer(Arc::new(check))
    }

    /// The caller of one request, or the response that refuses it (with a
    /// `tracing` warning, target `durable`, naming the check).
    pub fn admit(&self, headers: &HeaderMap) -> Result<Caller, Response> {
        match self {
            CallerSource::Fixed(caller) => Ok(*caller),
            CallerSource::Bearer(check) => {
                let reason = match bearer_token(headers) {
                    Some(token) if check(token) => return Ok(Caller::Token),
                    Some(_) => "not accepted",
                    None => "missing",
                };
                // Says which check and why, never the token or the header.
                tracing::warn!(target: "durable", check = "bearer-token", reason, "caller refused");
                Err(token_refused())
            }
        }
    }
}

impl fmt::Debug for CallerSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CallerSource::Fixed(caller) => f.debug_tuple("Fixed").field(caller).finish(),
            CallerSource::Bearer(_) => f.write_str("Bearer(..)"),
        }
    }
}

/// The token of a request's single `Authorization: Bearer <token>` header
/// (scheme case-insensitive), or `None` when there is no such header, more
/// than one, another scheme, or an empty token.
pub fn bearer_token(headers: &HeaderMap) -> Option<&[u8]> {
    let mut values = headers.get_all(AUTHORIZATION).iter();
    let value = values.next()?;
    if values.next().is_some() {
        return None;
    }
    let raw = value.as_bytes();
    let (scheme, rest) = raw.split_at(raw.iter().position(|&b| b == b' ')?);
    if !scheme.eq_ignore_ascii_case(b"bearer") {
        return None;
    }
    let start = rest.iter().position(|&b| b != b' ')?;
    let token = rest[start..].trim_ascii_end();
    (!token.is_empty()).then_some(token)
}

/// The `401 token-refused` answer (contract §1.2); it names no token.
pub fn token_refused() -> Response {
    let body = ErrorBody::new(ErrorCode::TokenRefused, "a valid bearer token is required");
    let bytes = serde_json::to_vec(&body).unwrap_or_else(|_| {
        br#"{"ok":false,"code":"token-refused","message":"a valid bearer token is required"}"#.to_vec()
    });
    Response::json(ErrorCode::TokenRefused.status(), Bytes::from(bytes))
}

#[cfg(test)]
mod tests {
    use hyper::header::HeaderValue;

    use super::*;

    fn headers(values: &[&str]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for v in values {
            h.append(AUTHORIZATION, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn a_bearer_token_is_read_from_one_authorization_header() {
        assert_eq!(bearer_token(&headers(&["Bearer abc"])), Some(&b"abc"[..]));
        assert_eq!(bearer_token(&headers(&["bearer   abc  "])), Some(&b"abc"[..]));
        assert_eq!(bearer_token(&headers(&["Basic abc"])), None);
        assert_eq!(bearer_token(&headers(&["Bearer"])), None);
        assert_eq!(bearer_token(&headers(&["Bearer   "])), None);
        assert_eq!(bearer_token(&headers(&["Bearer a", "Bearer a"])), None);
        assert_eq!(bearer_token(&headers(&[])), None);
    }

    #[test]
    fn an_accepted_token_makes_the_caller_token() {
        let source = CallerSource::bearer(|t| t == b"good");
        assert_eq!(source.admit(&headers(&["Bearer good"])), Ok(Caller::Token));
    }

    #[test]
    fn a_missing_or_wrong_token_is_401_token_refused() {
        let source = CallerSource::bearer(|t| t == b"good");
        for h in [headers(&[]), headers(&["Bearer bad"])] {
            let refused = source.admit(&h).unwrap_err();
            assert_eq!(refused.status, 401);
            let body = refused.body_json();
            assert_eq!(body["ok"], false);
            assert_eq!(body["code"], "token-refused");
            assert!(!String::from_utf8_lossy(&refused.body).contains("bad"));
        }
    }

    #[test]
    fn a_fixed_caller_is_used_for_every_request() {
        let source = CallerSource::Fixed(Caller::OtherUser);
        assert_eq!(source.admit(&headers(&["Bearer x"])), Ok(Caller::OtherUser));
        assert_eq!(format!("{:?}", CallerSource::bearer(|_| true)), "Bearer(..)");
    }
}
