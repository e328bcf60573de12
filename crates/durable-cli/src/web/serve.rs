//! The page's HTTP server: connections accepted on 127.0.0.1, each request
//! checked by the guard, then routed to a file of the page, `about`, or the
//! wire; every answer carries the same safety headers.
//!
//! The page is served first: a connection is a stranger until a request
//! of it shows the secret. A stranger is answered once and closed, has 5 s
//! to send that request, and makes way for newer connections past 32 of
//! them; so anyone on the machine can neither fill the server nor keep its
//! connections open. The page's connections are kept (16 at most).

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{
    ALLOW, CACHE_CONTROL, CONNECTION, CONTENT_SECURITY_POLICY, CONTENT_TYPE, HeaderMap, HeaderName,
    HeaderValue, LOCATION, REFERRER_POLICY, X_CONTENT_TYPE_OPTIONS, X_FRAME_OPTIONS,
};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use serde_json::Value;
use tokio::net::TcpListener;
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};

use super::assets;
use super::guard::{Guard, Verdict};
use super::proxy::Agent;

/// The page may only load itself: scripts, styles and requests from this
/// origin, images from it or `data:`; no frames, forms or base.
pub(crate) const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// Connections that have not shown the secret yet, open at once: a new
/// one past this closes the oldest of them, so that strangers never hold
/// the door shut on the page.
const STRANGERS_MAX: usize = 32;

/// How long a new connection has to show the secret (its first request's
/// head, read whole): a browser sends it at once.
const STRANGER_WITHIN: Duration = Duration::from_secs(5);

/// Connections kept alive for the page once they showed the secret (a
/// browser opens six per origin); past this, each is answered and closed.
const KEPT_MAX: usize = 16;

/// How long a kept connection may take to send a request's head, the idle
/// time before it included (the hidden page polls every 10 s).
const HEAD_TIMEOUT: Duration = Duration::from_secs(30);

/// What every request handler shares.
#[derive(Debug)]
pub(crate) struct State {
    pub(crate) guard: Guard,
    pub(crate) agent: Agent,
    /// `GET /<secret>/about`, written once.
    pub(crate) about: Value,
}

/// The connections open now: strangers by age (oldest first), each with
/// the signal that closes it; and the places kept for the page.
#[derive(Debug)]
struct Door {
    strangers: Mutex<BTreeMap<u64, Arc<Notify>>>,
    next: AtomicU64,
    kept: Arc<Semaphore>,
}

impl Door {
    fn new() -> Door {
        Door {
            strangers: Mutex::default(),
            next: AtomicU64::new(0),
            kept: Arc::new(Semaphore::new(KEPT_MAX)),
        }
    }

    fn strangers(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, Arc<Notify>>> {
        self.strangers.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A new connection, a stranger until it shows the secret; the oldest
    /// stranger is told to close when there is no room.
    fn enter(self: &Arc<Door>) -> Visitor {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let evicted = Arc::new(Notify::new());
        let mut strangers = self.strangers();
        while strangers.len() >= STRANGERS_MAX {
            let Some((_, oldest)) = strangers.pop_first() else { break };
            oldest.notify_one();
        }
        strangers.insert(id, evicted.clone());
        drop(strangers);
        Visitor { door: self.clone(), id, evicted, standing: Mutex::new(Standing::Stranger) }
    }
}

/// Where a connection stands.
#[derive(Debug)]
enum Standing {
    /// No request of it has shown the secret yet.
    Stranger,
    /// It showed the secret and holds one of the page's places.
    Kept { _place: OwnedSemaphorePermit },
    /// It showed the secret when every place was taken: answered, then
    /// closed.
    Once,
}

/// One connection, from its accept to its close.
#[derive(Debug)]
pub(crate) struct Visitor {
    door: Arc<Door>,
    id: u64,
    evicted: Arc<Notify>,
    standing: Mutex<Standing>,
}

impl Visitor {
    fn standing(&self) -> std::sync::MutexGuard<'_, Standing> {
        self.standing.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A request of it showed the secret: it is no stranger any more.
    fn proven(&self) {
        let mut standing = self.standing();
        if matches!(*standing, Standing::Stranger) {
            self.door.strangers().remove(&self.id);
            *standing = match self.door.kept.clone().try_acquire_owned() {
                Ok(place) => Standing::Kept { _place: place },
                Err(_) => Standing::Once,
            };
        }
    }

    fn is_stranger(&self) -> bool {
        matches!(*self.standing(), Standing::Stranger)
    }

    /// Whether the connection stays open after this answer: only for the
    /// page, in one of its places.
    fn kept(&self) -> bool {
        matches!(*self.standing(), Standing::Kept { .. })
    }

    /// Ends when the connection must close as a stranger: told to make
    /// room, or no secret shown in time. Never, once it showed it.
    async fn sent_away(&self) {
        tokio::select! {
            () = self.evicted.notified() => {}
            () = tokio::time::sleep(STRANGER_WITHIN) => {}
        }
        if !self.is_stranger() {
            std::future::pending::<()>().await;
        }
    }
}

impl Drop for Visitor {
    fn drop(&mut self) {
        self.door.strangers().remove(&self.id);
    }
}

/// Accepts and serves connections until the process stops. Accepting never
/// waits for room: a stranger's connection is answered once (then closed),
/// and makes way for newer ones; the page's own keep theirs.
pub(crate) async fn accept(listener: TcpListener, state: Arc<State>) {
    let door = Arc::new(Door::new());
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(_) => {
                // Out of file descriptors, or a connection reset before it
                // was accepted: try again shortly.
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let visitor = Arc::new(door.enter());
        let state = state.clone();
        tokio::spawn(async move {
            let for_requests = visitor.clone();
            let service = service_fn(move |request| {
                let (state, visitor) = (state.clone(), for_requests.clone());
                async move { Ok::<_, Infallible>(answer(&state, request, &visitor).await) }
            });
            let connection = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEAD_TIMEOUT)
                .serve_connection(TokioIo::new(stream), service);
            tokio::select! {
                _ = connection => {}
                () = visitor.sent_away() => {}
            }
        });
        // The new connection reads its first request before the next is
        // accepted: a crowd arriving cannot push it out before it spoke.
        tokio::task::yield_now().await;
    }
}

/// The answer to one request, with the safety headers; `Connection: close`
/// unless the connection is one the page keeps.
pub(crate) async fn answer(
    state: &State,
    request: Request<Incoming>,
    visitor: &Visitor,
) -> Response<Full<Bytes>> {
    let mut response = route(state, request, visitor).await;
    if !visitor.kept() {
        response.headers_mut().insert(CONNECTION, HeaderValue::from_static("close"));
    }
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

async fn route(state: &State, request: Request<Incoming>, visitor: &Visitor) -> Response<Full<Bytes>> {
    let rest = match state.guard.check(request.method(), request.uri(), request.headers()) {
        Verdict::Pass(rest) => {
            // Before the answer, which may wait for the agent.
            visitor.proven();
            rest.to_owned()
        }
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
