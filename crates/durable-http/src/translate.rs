//! Translation between hyper's messages and the core's plain values, with the
//! request body limit enforced while the body streams in.

use std::pin::pin;

use bytes::{Buf, Bytes, BytesMut};
use http_body_util::{BodyExt, Full};
use hyper::header::{ALLOW, CONTENT_LENGTH, CONTENT_TYPE, ETAG, HeaderValue, IF_NONE_MATCH};
use hyper::{HeaderMap, StatusCode};

use durable_types::BODY_MAX;
use durable_types::exchange::{Body, Caller, Method, Read, Request, Response};

/// How much of a too-large body is read and thrown away before answering:
/// a client that sends its whole body before reading the answer (most do)
/// then sees the `413` instead of a connection reset. Past this, reading
/// stops and the connection closes after the answer.
pub const DRAIN_MAX: usize = 8 * BODY_MAX;

/// Reads a request body, keeping at most `max` bytes.
///
/// Past the limit the result is [`Body::TooLarge`]; the core answers `413`
/// once the route, caller and capability checks have passed. The rest of
/// the body is read and discarded up to [`DRAIN_MAX`] bytes in all (a body
/// declared larger than that is not read at all). An error is the body's
/// own (the client went away mid-body).
pub async fn read_body<B>(body: B, declared_len: Option<u64>, max: usize) -> Result<Body, B::Error>
where
    B: hyper::body::Body,
{
    let drain_max = DRAIN_MAX.max(max);
    if declared_len.is_some_and(|n| n > drain_max as u64) {
        return Ok(Body::TooLarge);
    }
    let mut body = pin!(body);
    let mut buf = BytesMut::new();
    let mut seen = 0usize;
    let mut too_large = declared_len.is_some_and(|n| n > max as u64);
    while let Some(frame) = body.frame().await {
        let Ok(mut data) = frame?.into_data() else {
            continue; // trailers carry nothing the core reads
        };
        seen = seen.saturating_add(data.remaining());
        if too_large || seen > max {
            too_large = true;
            buf = BytesMut::new();
            if seen > drain_max {
                break;
            }
            continue;
        }
        while data.has_remaining() {
            let chunk = data.chunk();
            let n = chunk.len();
            buf.extend_from_slice(chunk);
            data.advance(n);
        }
    }
    Ok(if too_large { Body::TooLarge } else { Body::Complete(buf.freeze()) })
}

/// Turns a hyper request into the core's [`Request`]: method, raw
/// (percent-encoded) path, raw query, `If-None-Match`, and the body read
/// under [`BODY_MAX`] (see [`read_body`]).
pub async fn to_core_request<B>(request: hyper::Request<B>, caller: Caller) -> Result<Request, B::Error>
where
    B: hyper::body::Body,
{
    let (parts, body) = request.into_parts();
    let declared = declared_length(&parts.headers);
    let body = read_body(body, declared, BODY_MAX).await?;
    Ok(core_request(&parts.method, &parts.uri, &parts.headers, body, caller))
}

/// [`to_core_request`] for a request whose body is known to be empty
/// (`Body::is_end_stream`, as a poll's is): nothing to wait for, so no
/// read and no future.
pub fn to_core_request_without_body<B>(request: &hyper::Request<B>, caller: Caller) -> Request {
    core_request(request.method(), request.uri(), request.headers(), Body::Complete(Bytes::new()), caller)
}

/// A `GET` as the core's borrowed [`Read`]: its path, query and
/// `If-None-Match` stay in hyper's buffers. `None` for any other method.
pub fn read_of<B>(request: &hyper::Request<B>, caller: Caller) -> Option<Read<'_>> {
    (request.method() == hyper::Method::GET).then(|| Read {
        path: request.uri().path(),
        query: request.uri().query(),
        if_none_match: if_none_match(request.headers()),
        caller,
    })
}

/// The `If-None-Match` header as text; one that is not visible ASCII is
/// taken as absent (it can name no tag of ours).
fn if_none_match(headers: &HeaderMap) -> Option<&str> {
    headers.get(IF_NONE_MATCH).and_then(|v| v.to_str().ok())
}

fn core_request(
    method: &hyper::Method,
    uri: &hyper::Uri,
    headers: &HeaderMap,
    body: Body,
    caller: Caller,
) -> Request {
    Request {
        method: Method::from_name(method.as_str()),
        path: uri.path().to_owned(),
        query: uri.query().map(str::to_owned),
        if_none_match: if_none_match(headers).map(str::to_owned),
        body,
        caller,
    }
}

fn declared_length(headers: &HeaderMap) -> Option<u64> {
    headers.get(CONTENT_LENGTH)?.to_str().ok()?.trim().parse().ok()
}

/// Turns the core's [`Response`] into a hyper response: its status, `ETag`
/// and `Allow` headers, and `Content-Type: application/json` whenever there
/// is a body (a `304` has none).
pub fn to_hyper_response(response: Response) -> hyper::Response<Full<Bytes>> {
    let status = StatusCode::from_u16(response.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let has_body = !response.body.is_empty();
    let mut out = hyper::Response::new(Full::new(response.body));
    *out.status_mut() = status;
    let headers = out.headers_mut();
    if has_body {
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    }
    // The tag's bytes are shared, not copied; the check is the header's.
    if let Some(etag) = response.etag.and_then(|e| HeaderValue::from_maybe_shared(e.bytes().clone()).ok()) {
        headers.insert(ETAG, etag);
    }
    if let Some(allow) = response.allow {
        headers.insert(ALLOW, HeaderValue::from_static(allow));
    }
    if let Some(delivery) = response.delivery {
        headers.insert(DELIVERY, HeaderValue::from_static(delivery));
    }
    out
}

/// Where a replayed send stands (contract §9.1).
const DELIVERY: hyper::header::HeaderName = hyper::header::HeaderName::from_static("durable-delivery");

#[cfg(test)]
mod tests {
    use std::convert::Infallible;
    use std::pin::Pin;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::task::{Context, Poll};

    use hyper::body::Frame;

    use super::*;

    /// An endless body that counts the bytes it has handed out.
    struct Endless {
        chunk: usize,
        served: Arc<AtomicUsize>,
    }

    impl hyper::body::Body for Endless {
        type Data = Bytes;
        type Error = Infallible;
        fn poll_frame(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
            self.served.fetch_add(self.chunk, Ordering::SeqCst);
            Poll::Ready(Some(Ok(Frame::data(Bytes::from(vec![b'x'; self.chunk])))))
        }
    }

    /// A body that must not be read.
    struct Untouchable;

    impl hyper::body::Body for Untouchable {
        type Data = Bytes;
        type Error = &'static str;
        fn poll_frame(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
            Poll::Ready(Some(Err("the body was read")))
        }
    }

    fn full(n: usize) -> Full<Bytes> {
        Full::new(Bytes::from(vec![b'a'; n]))
    }

    #[tokio::test]
    async fn a_body_of_exactly_one_mib_is_complete() {
        let body = read_body(full(BODY_MAX), None, BODY_MAX).await.unwrap();
        assert!(matches!(body, Body::Complete(b) if b.len() == BODY_MAX));
    }

    #[tokio::test]
    async fn a_body_over_one_mib_is_too_large() {
        assert_eq!(read_body(full(BODY_MAX + 1), None, BODY_MAX).await.unwrap(), Body::TooLarge);
    }

    #[tokio::test]
    async fn past_the_limit_the_body_is_discarded_and_reading_stops_at_the_drain_budget() {
        let served = Arc::new(AtomicUsize::new(0));
        let body = Endless { chunk: 64 * 1024, served: served.clone() };
        assert_eq!(read_body(body, None, BODY_MAX).await.unwrap(), Body::TooLarge);
        // Discarded up to DRAIN_MAX, then reading stopped at the next chunk.
        assert_eq!(served.load(Ordering::SeqCst), DRAIN_MAX + 64 * 1024);
    }

    #[tokio::test]
    async fn a_body_over_the_limit_but_within_the_drain_budget_is_read_to_its_end() {
        let served = Arc::new(AtomicUsize::new(0));
        let body = Endless { chunk: 64 * 1024, served: served.clone() };
        let limited = http_body_util::BodyExt::boxed(http_body_util::Limited::new(body, 2 * BODY_MAX));
        let r = read_body(limited, None, BODY_MAX).await;
        // The Limited wrapper ends the stream with an error at 2 MiB: what
        // matters is that the reader kept reading past 1 MiB to drain it.
        assert!(r.is_err() || r.unwrap() == Body::TooLarge);
        assert!(served.load(Ordering::SeqCst) > BODY_MAX + 64 * 1024);
    }

    #[tokio::test]
    async fn a_declared_length_over_the_drain_budget_is_too_large_without_reading() {
        let request = hyper::Request::post("/v1/asks/x")
            .header(CONTENT_LENGTH, (DRAIN_MAX + 1).to_string())
            .body(Untouchable)
            .unwrap();
        let r = to_core_request(request, Caller::OtherProcess).await.unwrap();
        assert_eq!(r.body, Body::TooLarge);
    }

    #[tokio::test]
    async fn a_declared_length_over_one_mib_is_too_large_and_drained() {
        let request = hyper::Request::post("/v1/asks/x")
            .header(CONTENT_LENGTH, (BODY_MAX + 1).to_string())
            .body(full(BODY_MAX + 1))
            .unwrap();
        let r = to_core_request(request, Caller::OtherProcess).await.unwrap();
        assert_eq!(r.body, Body::TooLarge);
    }

    #[tokio::test]
    async fn a_request_keeps_its_raw_path_query_and_if_none_match() {
        let request = hyper::Request::get("/v1/panes/a%2Fb/events?after=3")
            .header(IF_NONE_MATCH, "\"0123456789abcdef-4\"")
            .body(full(0))
            .unwrap();
        let r = to_core_request(request, Caller::SelfOrDescendant).await.unwrap();
        assert_eq!(r.method, Method::Get);
        assert_eq!(r.path, "/v1/panes/a%2Fb/events");
        assert_eq!(r.query.as_deref(), Some("after=3"));
        assert_eq!(r.if_none_match.as_deref(), Some("\"0123456789abcdef-4\""));
        assert_eq!(r.caller, Caller::SelfOrDescendant);
        assert_eq!(r.body, Body::Complete(Bytes::new()));

        let put = hyper::Request::put("/hello").body(full(2)).unwrap();
        let r = to_core_request(put, Caller::Unknown).await.unwrap();
        assert_eq!(r.method, Method::Other("PUT".into()));
        assert_eq!(r.query, None);
        assert_eq!(r.body, Body::Complete(Bytes::from_static(b"aa")));
    }

    #[tokio::test]
    async fn a_get_reads_as_the_request_it_would_have_been() {
        let request = || {
            hyper::Request::get("/v1/panes/a%2Fb/events?after=3")
                .header(IF_NONE_MATCH, "\"0123456789abcdef-4\"")
                .body(full(0))
                .unwrap()
        };
        let borrowed = request();
        let read = read_of(&borrowed, Caller::Token).unwrap();
        assert_eq!(read.path, "/v1/panes/a%2Fb/events");
        assert_eq!(read.query, Some("after=3"));
        assert_eq!(read.if_none_match, Some("\"0123456789abcdef-4\""));
        let owned = to_core_request(request(), Caller::Token).await.unwrap();
        assert_eq!(owned.as_read(), Some(read));
        let post = hyper::Request::post("/v1/state").body(full(0)).unwrap();
        assert_eq!(read_of(&post, Caller::Token), None);
    }

    #[test]
    fn a_response_with_a_body_is_json_with_its_etag_and_allow() {
        let mut response = Response::json(405, &b"{\"ok\":false}"[..]);
        response.etag = Some("\"e-1\"".into());
        response.allow = Some("GET");
        let out = to_hyper_response(response);
        assert_eq!(out.status(), 405);
        assert_eq!(out.headers()[CONTENT_TYPE], "application/json");
        assert_eq!(out.headers()[ETAG], "\"e-1\"");
        assert_eq!(out.headers()[ALLOW], "GET");
    }

    #[test]
    fn a_response_without_a_body_has_no_content_type() {
        let mut response = Response::json(304, Bytes::new());
        response.etag = Some("\"e-1\"".into());
        let out = to_hyper_response(response);
        assert_eq!(out.status(), 304);
        assert!(out.headers().get(CONTENT_TYPE).is_none());
        assert_eq!(out.headers()[ETAG], "\"e-1\"");
        assert_eq!(to_hyper_response(Response::json(1000, Bytes::new())).status(), 500);
    }
}
