//! Who sent a request: a caller fixed for the whole connection (the socket's
//! peer), or a bearer token every request must carry (HTTPS), checked once
//! per token a connection shows.

use std::fmt;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use hyper::HeaderMap;
use hyper::header::AUTHORIZATION;
use subtle::ConstantTimeEq;
use zeroize::Zeroizing;

use durable_types::exchange::{Caller, Response};
use durable_types::{ErrorBody, ErrorCode};

/// A token check: true when the presented bearer token is accepted. The TLS
/// server supplies it (a constant-time comparison); the token is never
/// logged or echoed. A connection asks it once for each token it shows and
/// remembers the answer while it lives (see [`CallerSource::Bearer`]), so
/// it must not change its mind about a token while a connection lives.
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
    ///
    /// A connection remembers the token the check last accepted on it and
    /// accepts those same bytes again without asking the check: the check
    /// must not change its mind about a token while a connection lives (the
    /// TLS server's set is fixed at start-up). A token taken back must be
    /// taken back by closing the connections that showed it.
    Bearer(TokenCheck),
}

impl CallerSource {
    /// A bearer-token source from a check function, which must not change
    /// its mind about a token while a connection lives (see
    /// [`CallerSource::Bearer`]).
    pub fn bearer(check: impl Fn(&[u8]) -> bool + Send + Sync + 'static) -> Self {
        CallerSource::Bearer(Arc::new(check))
    }

    /// The caller of one request, or the response that refuses it (with an
    /// `INFO` event `caller refused`, target `durable_http::caller`, naming
    /// the check and never the token).
    pub fn admit(&self, headers: &HeaderMap) -> Result<Caller, Response> {
        match self {
            CallerSource::Fixed(caller) => Ok(*caller),
            CallerSource::Bearer(check) => {
                let reason = match bearer_token(headers) {
                    Some(token) if check(token) => return Ok(Caller::Token),
                    Some(_) => "not accepted",
                    None => "missing",
                };
                refuse(reason)
            }
        }
    }
}

/// The refusal of a request whose token was `reason`, with its event:
/// `INFO`, as the core's refusals (a client without the token hears its
/// `401`; on a public address such clients are many, not an alarm).
fn refuse(reason: &'static str) -> Result<Caller, Response> {
    // Says which check and why, never the token or the header.
    tracing::info!(check = "bearer-token", reason, "caller refused");
    Err(token_refused())
}

impl fmt::Debug for CallerSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CallerSource::Fixed(caller) => f.debug_tuple("Fixed").field(caller).finish(),
            CallerSource::Bearer(_) => f.write_str("Bearer(..)"),
        }
    }
}

/// The callers of one connection: its [`CallerSource`] and, over HTTPS,
/// the token this connection last had accepted.
///
/// Why: the check (the TLS server's) hashes the presented token with
/// SHA-256 to compare it in constant time with every accepted token — about
/// 4,300 instructions, a sixth of a `304` poll's cost over HTTPS, paid on
/// every poll of a kept-alive connection. A later request of the same
/// connection that presents the very bytes accepted before is accepted by a
/// constant-time comparison with them instead; any other token goes through
/// the check again. The accepted set does not change while a server runs,
/// so the answer is the check's. The kept bytes are the connection's own
/// (its peer sent them), are never printed, and are wiped when replaced,
/// after a refusal, or when the connection ends (hyper's and rustls' own
/// buffers of the request are theirs).
pub(crate) struct ConnectionCallers {
    source: CallerSource,
    accepted: Mutex<Option<Zeroizing<Vec<u8>>>>,
}

impl ConnectionCallers {
    pub(crate) fn new(source: CallerSource) -> Self {
        ConnectionCallers { source, accepted: Mutex::new(None) }
    }

    /// [`CallerSource::admit`], with the connection's accepted token kept.
    pub(crate) fn admit(&self, headers: &HeaderMap) -> Result<Caller, Response> {
        let CallerSource::Bearer(check) = &self.source else {
            return self.source.admit(headers);
        };
        let Some(token) = bearer_token(headers) else {
            return self.source.admit(headers);
        };
        let mut accepted = self.accepted.lock().unwrap_or_else(|e| e.into_inner());
        // `ct_eq` on slices of unequal lengths is false at once: only the
        // length of this connection's own token can be told from the time.
        if accepted.as_ref().is_some_and(|kept| bool::from(kept.as_slice().ct_eq(token))) {
            return Ok(Caller::Token);
        }
        if check(token) {
            *accepted = Some(Zeroizing::new(token.to_vec()));
            return Ok(Caller::Token);
        }
        // The connection closes after this refusal; forget the token anyway,
        // so that nothing here leans on that.
        *accepted = None;
        drop(accepted);
        refuse("not accepted")
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
    fn a_connection_checks_its_token_once_and_any_other_token_again() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let checks = Arc::new(AtomicUsize::new(0));
        let counted = checks.clone();
        let source = CallerSource::bearer(move |t| {
            counted.fetch_add(1, Ordering::SeqCst);
            t == b"good" || t == b"next"
        });
        let count = || checks.load(Ordering::SeqCst);
        let conn = ConnectionCallers::new(source.clone());
        for _ in 0..3 {
            assert_eq!(conn.admit(&headers(&["Bearer good"])), Ok(Caller::Token));
        }
        assert_eq!(count(), 1, "the same token on the same connection is checked once");
        // Another token is checked, accepted or not.
        assert_eq!(conn.admit(&headers(&["Bearer goo"])).unwrap_err().status, 401);
        assert_eq!(count(), 2);
        assert_eq!(conn.admit(&headers(&[])).unwrap_err().status, 401, "no token at all");
        // A refusal forgets the kept token (the connection closes after it
        // anyway): the next one is checked again.
        assert_eq!(conn.admit(&headers(&["Bearer good"])), Ok(Caller::Token));
        assert_eq!(count(), 3);
        assert_eq!(conn.admit(&headers(&["Bearer goodx"])).unwrap_err().status, 401);
        assert_eq!(conn.admit(&headers(&["Bearer bad!"])).unwrap_err().status, 401);
        assert_eq!(count(), 5);
        assert_eq!(conn.admit(&headers(&["Bearer next"])), Ok(Caller::Token));
        assert_eq!(conn.admit(&headers(&["Bearer next"])), Ok(Caller::Token));
        assert_eq!(count(), 6);
        assert_eq!(conn.admit(&headers(&["Bearer good"])), Ok(Caller::Token));
        assert_eq!(conn.admit(&headers(&["Bearer good"])), Ok(Caller::Token));
        assert_eq!(count(), 7, "a second accepted token replaces the first");
        // Another connection keeps its own.
        let other = ConnectionCallers::new(source);
        assert_eq!(other.admit(&headers(&["Bearer next"])), Ok(Caller::Token));
        assert_eq!(count(), 8);
        // A fixed caller is the source's, whatever the headers.
        let fixed = ConnectionCallers::new(CallerSource::Fixed(Caller::OtherProcess));
        assert_eq!(fixed.admit(&headers(&["Bearer x"])), Ok(Caller::OtherProcess));
    }

    #[test]
    fn a_fixed_caller_is_used_for_every_request() {
        let source = CallerSource::Fixed(Caller::OtherUser);
        assert_eq!(source.admit(&headers(&["Bearer x"])), Ok(Caller::OtherUser));
        assert_eq!(format!("{:?}", CallerSource::bearer(|_| true)), "Bearer(..)");
    }
}
