//! The page's HTTP server: connections accepted on 127.0.0.1, each request
//! checked by the guard, then routed to a file of the page, `about`, or the
//! wire; every answer carries the same safety headers.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{
    ALLOW, CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue,
    LOCATION, REFERRER_POLICY, X_CONTENT_TYPE_OPTIONS, X_FRAME_OPTIONS,
};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use serde_json::Value;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use super::assets;
use super::guard::{Guard, Verdict};
use super::proxy::Agent;

/// The page may only load itself: scripts, styles and requests from this
/// origin, images from it or `data:`; no frames, forms or base.
pub(crate) const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// Connections served at once; more wait to be accepted.
const CONNECTIONS_MAX: usize = 64;

/// How long a connection may take to send a request's head.
const HEAD_TIMEOUT: Duration = Duration::from_secs(30);

/// What every request handler shares.
#[derive(Debug)]
pub(crate) struct State {
    pub(crate) guard: Guard,
    pub(crate) agent: Agent,
    /// `GET /<secret>/about`, written once.
    pub(crate) about: Value,
}

/// Accepts and serves connections until the process stops.
pub(crate) async fn accept(listener: TcpListener, state: Arc<State>) {
    let room = Arc::new(Semaphore::new(CONNECTIONS_MAX));
    loop {
        let Ok(place) = room.clone().acquire_owned().await else { return };
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(_) => {
                // Out of file descriptors, or a connection reset before it
                // was accepted: try again shortly.
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let state = state.clone();
        tokio::spawn(async move {
            let service = service_fn(move |request| {
                let state = state.clone();
                async move { Ok::<_, Infallible>(answer(&state, request).await) }
            });
            let _ = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEAD_TIMEOUT)
                .serve_connection(TokioIo::new(stream), service)
                .await;
            drop(place);
        });
    }
}

/// The answer to one request, with the safety headers.
pub(crate) async fn answer(state: &State, request: Request<Incoming>) -> Response<Full<Bytes>> {
    let mut response = route(state, request).await;
    secure(response.headers_mut());
    response
}

/// The headers every answer carries.
pub(crate) fn secure(headers: &mut HeaderMap) {
    let fixed: [(HeaderName, &'static str); 5] = [
        (CONTENT_SECURITY_POLICY, CSP),
        (X_CONTENT_TYPE_OPTIONS, "nosniff"),
        // The secret is in the page's address.
        (REFERRER_POLICY, "no-referrer"),
        (CACHE_CONTROL, "no-store"),
        (X_FRAME_OPTIONS, "DENY"),
    ];
    for (name, value) in fixed {
        headers.insert(name, HeaderValue::from_static(value));
    }
}

async fn route(state: &State, request: Request<Incoming>) -> Response<Full<Bytes>> {
    let rest = match state.guard.check(request.method(), request.uri(), request.headers()) {
        Verdict::Pass(rest) => rest.to_owned(),
        Verdict::NotFound => return plain(StatusCode::NOT_FOUND, "not found\n"),
        Verdict::Forbidden => return plain(StatusCode::FORBIDDEN, "forbidden\n"),
    };
    if let Some(path) = rest.strip_prefix("/wire") {
        if path.starts_with('/') {
            return state.agent.forward(request, path).await;
        }
    }
    if rest.is_empty() {
        // `/<secret>` → `/<secret>/`, so that the page's relative links work.
        let mut response = plain(StatusCode::PERMANENT_REDIRECT, "");
        if let Ok(to) = HeaderValue::from_str(&format!("/{}/", state.guard.secret())) {
            response.headers_mut().insert(LOCATION, to);
        }
        return response;
    }
    let method = request.method();
    let name = match rest.as_str() {
        "/" => "index.html",
        other => &other[1..],
    };
    let found = if name == "about" {
        Some((Bytes::from(state.about.to_string()), "application/json"))
    } else {
        assets::find(name).and_then(|a| Some((Bytes::from_static(a.bytes), assets::content_type(a.name)?)))
    };
    let Some((body, content_type)) = found else { return plain(StatusCode::NOT_FOUND, "not found\n") };
    if method != Method::GET && method != Method::HEAD {
        let mut response = plain(StatusCode::METHOD_NOT_ALLOWED, "GET or HEAD only\n");
        response.headers_mut().insert(ALLOW, HeaderValue::from_static("GET, HEAD"));
        return response;
    }
    let mut response = Response::new(Full::new(body));
    response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

/// A short text answer.
fn plain(status: StatusCode, text: &'static str) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from_static(text.as_bytes())));
    *response.status_mut() = status;
    if !text.is_empty() {
        response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    }
    response
}
