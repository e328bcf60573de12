//! What a route reads from a request: path ids, query parameters and the
//! body. A leaf: it knows the wire types and nothing else of the crate, so
//! a handler reads its request without the router.

use durable_types::exchange::{Body, Request};
use durable_types::{
    AnswerRequest, CloseBody, ErrorCode, HelloRequest, Id, PlainBody, RenameBody, ReopenBody, RuleError,
    SendBody, StarterBody, SteerBody,
};

/// Why a request is malformed in itself (`400`, or `413` for the body's
/// size), before any handler looks at it. Its `Display` is the message the
/// phone gets.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    /// A path segment breaks the ID rule.
    #[error("{what}: {source}")]
    Id { what: &'static str, source: RuleError },
    /// A query parameter that should be a count is not one.
    #[error("{key} must be a non-negative integer")]
    NotAnInteger { key: &'static str },
    /// A count too large for the core.
    #[error("{key} is out of range")]
    OutOfRange { key: &'static str },
    /// A count outside what the route takes.
    #[error("{key} is {min} to {max}, not {value}")]
    OutOfBounds { key: &'static str, min: u64, max: u64, value: u64 },
    /// A query value that does not percent-decode to text.
    #[error("{key}: a `%` must start an escape of two hex digits (%XX), and the value must decode to UTF-8")]
    Undecodable { key: &'static str },
    /// A cursor parameter breaks the cursor rule.
    #[error("{key}: {source}")]
    Cursor { key: &'static str, source: RuleError },
    /// The body went over 1 MiB while it streamed in.
    #[error("the request body is over 1 MiB")]
    TooLarge,
    /// The body breaks the route's body rules (the message says which).
    #[error("{0}")]
    Body(String),
}

impl RequestError {
    /// The error code the phone gets.
    pub fn code(&self) -> ErrorCode {
        match self {
            RequestError::TooLarge => ErrorCode::TooLarge,
            _ => ErrorCode::BadRequest,
        }
    }
}

/// A request's query parameters, percent-decoded. Unknown ones are ignored;
/// a value that does not decode (a `%` starting no escape, or bytes that are
/// not UTF-8) is kept as such, so that reading it is a `400` rather than the
/// raw text passed on.
#[derive(Debug)]
pub struct Query(Vec<(String, Option<String>)>);

impl Query {
    pub fn parse(query: Option<&str>) -> Query {
        let Some(query) = query else {
            // Most polls have none: nothing to split.
            return Query(Vec::new());
        };
        let pairs = query
            .split('&')
            .filter(|p| !p.is_empty())
            .map(|p| {
                let (k, v) = p.split_once('=').unwrap_or((p, ""));
                // `+` stays `+`: cursors may hold it, and Collie percent-encodes.
                // A key that does not decode names no parameter we read.
                let key = durable_types::decode_path_segment(k).unwrap_or_else(|_| k.to_owned());
                (key, durable_types::decode_path_segment(v).ok())
            })
            .collect();
        Query(pairs)
    }

    /// The query of a request.
    pub fn of(req: &Request) -> Query {
        Query::parse(req.query.as_deref())
    }

    /// A parameter's decoded value (the first, if repeated).
    pub fn get(&self, key: &'static str) -> Result<Option<&str>, RequestError> {
        match self.0.iter().find(|(k, _)| k == key) {
            None => Ok(None),
            Some((_, Some(v))) => Ok(Some(v)),
            Some((_, None)) => Err(RequestError::Undecodable { key }),
        }
    }

    /// A non-negative integer parameter.
    pub fn u64(&self, key: &'static str) -> Result<Option<u64>, RequestError> {
        match self.get(key)? {
            None => Ok(None),
            Some(v) if !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()) => {
                v.parse().map(Some).map_err(|_| RequestError::OutOfRange { key })
            }
            Some(_) => Err(RequestError::NotAnInteger { key }),
        }
    }
}

/// A path segment percent-decoded and checked against the ID rule.
pub fn path_id(segment: &str, what: &'static str) -> Result<Id, RequestError> {
    Id::from_path_segment(segment).map_err(|source| RequestError::Id { what, source })
}

/// The body bytes, or [`RequestError::TooLarge`] when it went over the limit
/// while streaming.
fn body_bytes(req: &Request) -> Result<&[u8], RequestError> {
    match &req.body {
        Body::Complete(b) => Ok(b),
        _ => Err(RequestError::TooLarge),
    }
}

/// A route's body, parsed by its rules before the handler runs: the
/// handler gets it typed.
pub trait FromBody: Sized {
    fn from_body(bytes: &[u8]) -> Result<Self, RequestError>;

    /// The write's request id, for the request span.
    fn request_id(&self) -> Option<&Id> {
        None
    }
}

/// The request's body, as the route's type. Its request id, once it passed
/// the body's rules, goes to the request span (the one entered: the
/// request's future runs inside it).
pub fn body<T: FromBody>(req: &Request) -> Result<T, RequestError> {
    let body = T::from_body(body_bytes(req)?)?;
    if let Some(id) = body.request_id() {
        tracing::Span::current().record("request_id", id.as_str());
    }
    Ok(body)
}

macro_rules! write_bodies {
    ($($body:ty),*) => {$(
        impl FromBody for $body {
            fn from_body(bytes: &[u8]) -> Result<Self, RequestError> {
                <$body>::parse(bytes).map_err(RequestError::Body)
            }

            fn request_id(&self) -> Option<&Id> {
                Some(&self.request_id)
            }
        }
    )*};
}

write_bodies!(SendBody, SteerBody, PlainBody, RenameBody, CloseBody, ReopenBody, StarterBody);

impl FromBody for AnswerRequest {
    fn from_body(bytes: &[u8]) -> Result<Self, RequestError> {
        AnswerRequest::parse(bytes).map_err(|why| RequestError::Body(format!("answer: {why}")))
    }

    fn request_id(&self) -> Option<&Id> {
        Some(&self.request_id)
    }
}

impl FromBody for HelloRequest {
    fn from_body(bytes: &[u8]) -> Result<Self, RequestError> {
        serde_json::from_slice(bytes).map_err(|e| {
            RequestError::Body(format!("POST /hello needs {{\"wire\": {{\"min\", \"max\"}}}}: {e}"))
        })
    }
}
