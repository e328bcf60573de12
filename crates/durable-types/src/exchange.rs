//! The plain values the core takes and returns in place of HTTP messages.
//!
//! A server turns each HTTP request into a [`Request`] and writes the
//! [`Response`] back; no hyper type crosses into the core.

use bytes::Bytes;

/// Who sent a request, as the transport could tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Caller {
    /// Socket: the agent's own process or one it launched. Writes are refused.
    SelfOrDescendant,
    /// Socket: another process of the same user.
    OtherProcess,
    /// Socket: a process of another user. Everything is refused.
    OtherUser,
    /// Socket: the platform cannot tell the peer, or the caller check is off.
    Unknown,
    /// HTTPS: the request carried an accepted bearer token.
    Token,
}

/// The request method, as far as the wire cares.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Method {
    /// `GET` (and `HEAD` is not served).
    Get,
    /// `POST`.
    Post,
    /// Any other method, kept for the `405` answer.
    Other(String),
}

impl Method {
    /// Parses a method name as sent on the wire.
    pub fn from_name(name: &str) -> Self {
        match name {
            "GET" => Method::Get,
            "POST" => Method::Post,
            other => Method::Other(other.to_owned()),
        }
    }
}

/// A request body: complete, or cut off because it went over
/// [`BODY_MAX`](crate::BODY_MAX) while it streamed in.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Body {
    /// The whole body, at most `BODY_MAX` bytes.
    Complete(Bytes),
    /// The body went over `BODY_MAX`; the core answers `413 too-large` once
    /// the route, caller and capability checks have passed.
    TooLarge,
}

/// One request, translated from HTTP.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// The method.
    pub method: Method,
    /// The path as sent, still percent-encoded, without the query.
    pub path: String,
    /// The raw query string (after `?`), if any.
    pub query: Option<String>,
    /// The `If-None-Match` header, when present.
    pub if_none_match: Option<String>,
    /// The body.
    pub body: Body,
    /// Who sent it.
    pub caller: Caller,
}

impl Request {
    /// A request with an empty body.
    pub fn new(method: Method, path_and_query: &str, caller: Caller) -> Self {
        let (path, query) = match path_and_query.split_once('?') {
            Some((p, q)) => (p.to_owned(), Some(q.to_owned())),
            None => (path_and_query.to_owned(), None),
        };
        Request { method, path, query, if_none_match: None, body: Body::Complete(Bytes::new()), caller }
    }

    /// A `GET` request.
    pub fn get(path_and_query: &str, caller: Caller) -> Self {
        Self::new(Method::Get, path_and_query, caller)
    }

    /// A `POST` request with a body.
    pub fn post(path_and_query: &str, body: impl Into<Bytes>, caller: Caller) -> Self {
        let mut r = Self::new(Method::Post, path_and_query, caller);
        r.body = Body::Complete(body.into());
        r
    }

    /// Sets the `If-None-Match` header.
    pub fn with_if_none_match(mut self, etag: impl Into<String>) -> Self {
        self.if_none_match = Some(etag.into());
        self
    }

    /// The request as a [`Read`], when it is a `GET` (its body is not
    /// looked at: a read has none that counts).
    pub fn as_read(&self) -> Option<Read<'_>> {
        (self.method == Method::Get).then(|| Read {
            path: &self.path,
            query: self.query.as_deref(),
            if_none_match: self.if_none_match.as_deref(),
            caller: self.caller,
        })
    }
}

/// A `GET` request borrowed from wherever the transport keeps it: what a
/// read needs, nothing copied. The core answers most reads from it at once
/// (the core's `answer_read`); a poll, every 2 s from each
/// phone that watches, then costs no owned copy of its path, query and
/// `If-None-Match`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Read<'a> {
    /// The path as sent, still percent-encoded, without the query.
    pub path: &'a str,
    /// The raw query string (after `?`), if any.
    pub query: Option<&'a str>,
    /// The `If-None-Match` header, when present.
    pub if_none_match: Option<&'a str>,
    /// Who sent it.
    pub caller: Caller,
}

/// One response, to be written back as HTTP.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    /// The status code.
    pub status: u16,
    /// The `ETag` header, for state answers.
    pub etag: Option<Tag>,
    /// The `Allow` header, for `405` answers.
    pub allow: Option<&'static str>,
    /// The `Durable-Delivery` header, on the replay of a send whose store
    /// keeps sends: where the send stands (`queued`, `running`, `done`,
    /// `closed`; contract §9.1). The body stays the first answer's.
    pub delivery: Option<&'static str>,
    /// The JSON body; empty for `304`.
    pub body: Bytes,
}

impl Response {
    /// A JSON response with the given status.
    pub fn json(status: u16, body: impl Into<Bytes>) -> Self {
        Response { status, etag: None, allow: None, delivery: None, body: body.into() }
    }

    /// The body parsed as JSON (for tests and clients); `Null` when empty.
    pub fn body_json(&self) -> serde_json::Value {
        if self.body.is_empty() {
            return serde_json::Value::Null;
        }
        serde_json::from_slice(&self.body).unwrap_or(serde_json::Value::Null)
    }
}

/// An `ETag` value as the core keeps it: shared bytes, so that every answer
/// carrying the same tag hands out the same buffer instead of a copy (the
/// servers put it in the header as it is). Reads as a `&str`.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Tag(Bytes);

impl Tag {
    /// The tag as text, quotes included.
    pub fn as_str(&self) -> &str {
        // Made from a `str` only, so always UTF-8.
        std::str::from_utf8(&self.0).unwrap_or_default()
    }

    /// The tag's bytes, shared.
    pub fn bytes(&self) -> &Bytes {
        &self.0
    }
}

impl std::ops::Deref for Tag {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl From<String> for Tag {
    fn from(tag: String) -> Self {
        Tag(Bytes::from(tag))
    }
}

impl From<&str> for Tag {
    fn from(tag: &str) -> Self {
        Tag(Bytes::copy_from_slice(tag.as_bytes()))
    }
}

impl From<Tag> for String {
    fn from(tag: Tag) -> Self {
        tag.as_str().to_owned()
    }
}

impl PartialEq<str> for Tag {
    fn eq(&self, other: &str) -> bool {
        self.0 == other.as_bytes()
    }
}

impl PartialEq<&str> for Tag {
    fn eq(&self, other: &&str) -> bool {
        self.0 == other.as_bytes()
    }
}

impl std::fmt::Debug for Tag {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self.as_str(), f)
    }
}

impl std::fmt::Display for Tag {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_get_reads_as_a_borrowed_read_and_nothing_else_does() {
        let get = Request::get("/v1/state?since=3", Caller::Token).with_if_none_match("\"e-1\"");
        let read = get.as_read().unwrap();
        assert_eq!(read.path, "/v1/state");
        assert_eq!(read.query, Some("since=3"));
        assert_eq!(read.if_none_match, Some("\"e-1\""));
        assert_eq!(read.caller, Caller::Token);
        assert!(std::ptr::eq(read.path, get.path.as_str()), "borrowed, not copied");
        assert_eq!(Request::post("/v1/state", "{}", Caller::Token).as_read(), None);
        assert_eq!(Request::new(Method::Other("PUT".into()), "/v1/state", Caller::Token).as_read(), None);
    }

    #[test]
    fn a_tag_reads_as_the_text_it_was_made_from_and_shares_its_bytes() {
        let tag = Tag::from(String::from("\"e-1\""));
        assert_eq!(tag.as_str(), "\"e-1\"");
        assert_eq!(&*tag, "\"e-1\"");
        assert!(tag == "\"e-1\"" && tag != "\"e-2\"");
        assert_eq!(Tag::from("\"e-1\""), tag);
        assert_eq!(format!("{tag} {tag:?}"), "\"e-1\" \"\\\"e-1\\\"\"");
        assert_eq!(String::from(tag.clone()), "\"e-1\"");
        let copy = tag.clone();
        assert_eq!(copy.bytes().as_ptr(), tag.bytes().as_ptr(), "a clone shares the buffer");
    }
}
