//! One HTTP/1.1 connection: keep-alive, header- and body-read timeouts, the
//! write-progress timeout, a close after every `401`, graceful shutdown
//! within a grace period, and every request carried to the core.

use std::fmt;
use std::future::{Future, poll_fn};
use std::panic::AssertUnwindSafe;
use std::pin::pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use bytes::Bytes;
use futures_util::FutureExt;
use futures_util::future::{Either, ready};
use hyper::body::Body;
use hyper::header::{CONNECTION, HeaderValue, WWW_AUTHENTICATE};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use durable_runtime::Driver;
use durable_types::exchange::{Caller, Method, Read, Request, Response};
use durable_types::{ErrorBody, ErrorCode};

use crate::caller::{CallerSource, ConnectionCallers};
use crate::header_clock::HeaderClock;
use crate::slots::Slot;
use crate::translate::{read_of, to_core_request, to_core_request_without_body, to_hyper_response};
use crate::until::until;
use crate::write_timeout::WriteTimeout;

/// What answers the requests of a connection: the [`Driver`], or a stand-in in
/// tests.
pub trait Handler: Clone + Send + Sync + 'static {
    /// Answers one request.
    fn handle(&self, request: Request) -> impl Future<Output = Response> + Send + 'static;

    /// Answers a `GET` at once from the request borrowed from hyper's
    /// buffers, or `None` to have it copied into a [`Request`] and carried
    /// to [`Handler::handle`]. The default answers nothing at once. It runs
    /// on the connection's task, inside hyper's call to the service, so it
    /// must not block (the core takes its state lock, briefly).
    fn answer_read(&self, read: &Read<'_>) -> Option<Response> {
        let _ = read;
        None
    }
}

impl Handler for Driver {
    fn handle(&self, request: Request) -> impl Future<Output = Response> + Send + 'static {
        Driver::handle(self, request)
    }

    fn answer_read(&self, read: &Read<'_>) -> Option<Response> {
        Driver::answer_read(self, read)
    }
}

/// Settings of the HTTP layer, shared by both servers: its timeouts and its
/// cap on connections (why each default is what it is: `docs/reliability.md`,
/// "Connections", in the SDK's source repository; the package does not ship it).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Limits {
    header_read_timeout: Duration,
    body_read_timeout: Duration,
    write_timeout: Duration,
    max_connections: usize,
    shutdown_grace: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            header_read_timeout: Self::DEFAULT_HEADER_READ_TIMEOUT,
            body_read_timeout: Self::DEFAULT_BODY_READ_TIMEOUT,
            write_timeout: Self::DEFAULT_WRITE_TIMEOUT,
            max_connections: Self::DEFAULT_MAX_CONNECTIONS,
            shutdown_grace: Self::DEFAULT_SHUTDOWN_GRACE,
        }
    }
}

impl Limits {
    /// The default header-read timeout: 30 s.
    pub const DEFAULT_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);

    /// The default body-read timeout: 30 s for a whole request body.
    pub const DEFAULT_BODY_READ_TIMEOUT: Duration = Duration::from_secs(30);

    /// The default write-progress timeout: 30 s.
    pub const DEFAULT_WRITE_TIMEOUT: Duration = Duration::from_secs(30);

    /// The default cap on a server's connections: 64.
    pub const DEFAULT_MAX_CONNECTIONS: usize = 64;

    /// The default shutdown grace period: 10 s (the runtime's, which
    /// `Collie::close` uses with no transport served).
    pub const DEFAULT_SHUTDOWN_GRACE: Duration = durable_runtime::DEFAULT_SHUTDOWN_GRACE;

    /// The defaults.
    pub fn new() -> Self {
        Self::default()
    }

    /// How long a client may take to send a request's headers. The clock
    /// starts when the connection waits for a request — when it opens, and
    /// when an answer has been written — and bytes trickling in do not
    /// restart it, so this bounds a slow sender (slowloris) and how long an
    /// idle keep-alive connection stays open (Collie polls every 2 to 10 s).
    /// A connection past it is closed without an answer. Default 30 s;
    /// `Duration::MAX` means never.
    pub fn header_read_timeout(mut self, timeout: Duration) -> Self {
        self.header_read_timeout = timeout;
        self
    }

    /// The header-read timeout in force.
    pub fn header_read_timeout_value(&self) -> Duration {
        self.header_read_timeout
    }

    /// How long a client may take to send a request's whole body, counted
    /// from the end of its headers. A body not complete by then (a
    /// `Content-Length` larger than what is sent, a chunked body that stops)
    /// closes the connection without an answer, and the request never
    /// reaches the core. Default 30 s.
    pub fn body_read_timeout(mut self, timeout: Duration) -> Self {
        self.body_read_timeout = timeout;
        self
    }

    /// The body-read timeout in force.
    pub fn body_read_timeout_value(&self) -> Duration {
        self.body_read_timeout
    }

    /// How long a write of an answer may go without progress: when the
    /// client reads nothing (the kernel's buffers and the TLS layer's are
    /// full) for this long, the connection is closed, the rest of the answer
    /// unsent. A slow reader that keeps reading is served whole. Default
    /// 30 s; `Duration::MAX` means never.
    pub fn write_timeout(mut self, timeout: Duration) -> Self {
        self.write_timeout = timeout;
        self
    }

    /// The write-progress timeout in force.
    pub fn write_timeout_value(&self) -> Duration {
        self.write_timeout
    }

    /// How many connections a server holds at once (at
    /// least 1; 0 is taken as 1). A connection counts from its accept, TLS
    /// handshake included. Past the cap a new connection displaces one that
    /// has not yet made a request its transport accepted (over HTTPS: with
    /// an accepted token) — from the peer address holding the most such
    /// connections, its oldest; when every connection has, the new one is
    /// closed at once. Default 64.
    pub fn max_connections(mut self, max: usize) -> Self {
        self.max_connections = max.max(1);
        self
    }

    /// The cap on connections in force.
    pub fn max_connections_value(&self) -> usize {
        self.max_connections
    }

    /// How long closing a server (and a connection told to shut down)
    /// waits for the requests in flight and the core's work on them before
    /// it drops what is left. Default 10 s.
    pub fn shutdown_grace(mut self, grace: Duration) -> Self {
        self.shutdown_grace = grace;
        self
    }

    /// The shutdown grace period in force.
    pub fn shutdown_grace_value(&self) -> Duration {
        self.shutdown_grace
    }
}

/// Serves HTTP/1.1 on one connection until the client closes it, it times
/// out, or `shutdown` is cancelled.
///
/// - Keep-alive is on: a client sends request after request on one
///   connection.
/// - Each request's caller comes from `callers` ([`CallerSource`]); a
///   request it refuses gets that answer (`401`, with
///   `WWW-Authenticate: Bearer` and `Connection: close`), never reaches
///   `handler`, and the connection closes once the answer is written.
/// - The body is read under the 1 MiB limit ([`to_core_request`]) and
///   within the body-read timeout ([`Limits::body_read_timeout`]): a
///   body not complete in time closes the connection without an answer, and
///   the request never reaches `handler`.
/// - A write of an answer that makes no progress for
///   [`Limits::write_timeout`] (the client reads nothing) closes the
///   connection.
/// - A write's future runs on a task of its own, so a client that goes
///   away cannot cut the core's work in half; that task is spawned on
///   `in_flight`, so that a server can close the tracker and
///   [`wait`](TaskTracker::wait) for the work to end. A read changes
///   nothing and is answered on the connection's own task (most at once,
///   through [`Handler::answer_read`]).
/// - When `shutdown` is cancelled, a request in flight finishes and its answer is
///   written; then the connection closes instead of waiting for another.
///   After [`Limits::shutdown_grace`] the connection is dropped as it
///   is (the handler's task, if any, goes on).
///
/// Must run inside a tokio runtime (it spawns and uses tokio time). The
/// error, if any, is the connection's (a timeout, a client gone mid-request)
/// and is usually only worth ignoring.
pub async fn serve_connection<H, I>(
    handler: H,
    io: I,
    callers: CallerSource,
    options: &Limits,
    shutdown: CancellationToken,
    in_flight: TaskTracker,
) -> Result<(), hyper::Error>
where
    H: Handler,
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    serve_in_slot(handler, io, callers, options, shutdown, in_flight, None).await
}

/// [`serve_connection`] for a connection holding `slot` under a server's
/// cap: its first request that the transport accepts proves it (it is then
/// never displaced); one displaced meanwhile closes without an answer.
pub(crate) async fn serve_in_slot<H, I>(
    handler: H,
    io: I,
    callers: CallerSource,
    options: &Limits,
    shutdown: CancellationToken,
    in_flight: TaskTracker,
    slot: Option<Arc<Slot>>,
) -> Result<(), hyper::Error>
where
    H: Handler,
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let body_read_timeout = options.body_read_timeout;
    let clock = HeaderClock::start(options.header_read_timeout);
    let service_clock = clock.clone();
    let callers = ConnectionCallers::new(callers);
    let service = service_fn(move |request: hyper::Request<hyper::body::Incoming>| {
        // The wait for a request stops here and starts again once the
        // answer is written.
        let serving = service_clock.serving();
        // What can be answered at once is answered here, on the
        // connection's task, with a ready future: nothing is cloned for it
        // and no large future is built and moved (a poll, every 2 s from
        // each phone that watches, is such a request). The rest gets a
        // boxed future.
        let caller = match callers.admit(request.headers()) {
            Ok(caller) => caller,
            Err(refusal) => {
                // Nothing more is served on a connection that has not shown
                // a token: it cannot hold a place by sending requests that
                // are refused.
                let mut out = to_hyper_response(refusal);
                out.headers_mut().insert(WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
                out.headers_mut().insert(CONNECTION, HeaderValue::from_static("close"));
                return Either::Left(ready(Ok(out)));
            }
        };
        // Another user never proves itself (it is refused), and neither do
        // the agent's own processes: a runaway tool holding connections
        // must not keep Collie's next one out. They are served all the
        // same, and displaced first.
        let displaced = match &slot {
            Some(slot) => !matches!(caller, Caller::OtherUser | Caller::SelfOrDescendant) && !slot.prove(),
            None => false,
        };
        if displaced {
            return Either::Left(ready(Err(ServiceError::Displaced)));
        }
        let no_body = request.body().is_end_stream();
        if let Some(read) = no_body.then(|| read_of(&request, caller)).flatten() {
            // Most reads (every poll) are answered from hyper's own buffers:
            // nothing is copied, and nothing outlives the connection. A
            // panic (a bug) still gets its `500`.
            match std::panic::catch_unwind(AssertUnwindSafe(|| handler.answer_read(&read))) {
                Ok(Some(response)) => return Either::Left(ready(Ok(to_hyper_response(response)))),
                Ok(None) => {}
                Err(_) => return Either::Left(ready(Ok(to_hyper_response(read_panicked())))),
            }
        }
        let handler = handler.clone();
        let in_flight = in_flight.clone();
        Either::Right(
            async move {
                let _serving = serving;
                // An error out of the service makes hyper close the
                // connection without writing an answer. A request without a
                // body has nothing to wait for: no timer.
                let request = if no_body {
                    to_core_request_without_body(&request, caller)
                } else {
                    // A body that came in with its head (an answer, a send:
                    // a few hundred bytes) is whole at the first poll: the
                    // timer is made only for a body still on its way.
                    let mut read = pin!(to_core_request(request, caller));
                    let read = match poll_fn(|cx| Poll::Ready(read.as_mut().poll(cx))).await {
                        Poll::Ready(read) => read,
                        Poll::Pending => match tokio::time::timeout(body_read_timeout, read).await {
                            Ok(read) => read,
                            Err(_) => return Err(ServiceError::BodyTimeout(body_read_timeout)),
                        },
                    };
                    read.map_err(ServiceError::Body)?
                };
                if request.method == Method::Get {
                    // A read changes nothing, so nothing must outlive the
                    // connection: it is answered on the connection's own
                    // task. A panic (a bug) still gets its `500`.
                    let response = AssertUnwindSafe(handler.handle(request))
                        .catch_unwind()
                        .await
                        .unwrap_or_else(|_| read_panicked());
                    return Ok(to_hyper_response(response));
                }
                // A write runs to its end on a task of its own, even if the
                // client goes away meanwhile, and a shutdown waits for it.
                // Boxed: the core's future holds every route's state (about
                // 2 KB), and a task moves its future in and writes its
                // stages over it several times; a pointer moves for free.
                let work = Box::pin(handler.handle(request));
                let task = in_flight.spawn(work);
                let response = task.await.unwrap_or_else(|e| {
                    tracing::warn!(error = %e, "the core's task failed to answer a request");
                    internal()
                });
                Ok::<_, ServiceError>(to_hyper_response(response))
            }
            .boxed(),
        )
    });
    // No timer for hyper, and its own header-read timeout off (its default
    // would only warn that no timer is set): the timeout is the
    // connection's (`HeaderClock` says why).
    let mut builder = http1::Builder::new();
    builder.keep_alive(true).header_read_timeout(None);
    let io = WriteTimeout::new(io, options.write_timeout).with_clock(clock.clone());
    let mut conn = pin!(builder.serve_connection(TokioIo::new(io), service));
    let stop = async {
        tokio::select! {
            biased;
            () = shutdown.cancelled() => Stop::Shutdown,
            () = clock.expired() => Stop::HeaderTimeout,
        }
    };
    match until(conn.as_mut(), stop).await {
        Ok(done) => return done,
        // Dropped without an answer, as a slow sender's connection is.
        Err(Stop::HeaderTimeout) => {
            tracing::debug!(timeout = ?options.header_read_timeout, "no request within the header-read timeout: the connection is closed");
            return Ok(());
        }
        Err(Stop::Shutdown) => {}
    }
    conn.as_mut().graceful_shutdown();
    // Past the grace, the connection is dropped (closed) as it is.
    tokio::time::timeout(options.shutdown_grace, conn).await.unwrap_or(Ok(()))
}

/// Why a connection stops before its client closes it.
enum Stop {
    /// The server shuts down: the request in flight finishes first.
    Shutdown,
    /// No request came within the header-read timeout.
    HeaderTimeout,
}

/// Why the service gave up on a request: hyper then closes the connection
/// without an answer.
#[derive(Debug)]
enum ServiceError {
    /// The body could not be read (the client went away mid-body).
    Body(hyper::Error),
    /// The body did not arrive whole within the body-read timeout.
    BodyTimeout(Duration),
    /// A newer connection displaced this one under the cap before its
    /// request could be served.
    Displaced,
}

impl fmt::Display for ServiceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ServiceError::Body(e) => write!(f, "reading the request body failed: {e}"),
            ServiceError::BodyTimeout(t) => write!(f, "the request body did not arrive within {t:?}"),
            ServiceError::Displaced => f.write_str("the connection was displaced under the connection cap"),
        }
    }
}

impl std::error::Error for ServiceError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ServiceError::Body(e) => Some(e),
            ServiceError::BodyTimeout(_) | ServiceError::Displaced => None,
        }
    }
}

/// The answer when the core's task failed (a bug): `500 internal`, saying
/// nothing more.
/// The answer to a read the core panicked on (a bug), with its warning.
fn read_panicked() -> Response {
    tracing::warn!("the core panicked while answering a read");
    internal()
}

fn internal() -> Response {
    let body = ErrorBody::new(ErrorCode::Internal, "the agent failed to answer this request");
    let bytes = serde_json::to_vec(&body).unwrap_or_default();
    Response::json(ErrorCode::Internal.status(), Bytes::from(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_header_read_timeout_is_30_seconds() {
        assert_eq!(Limits::new().header_read_timeout_value(), Duration::from_secs(30));
        let o = Limits::new().header_read_timeout(Duration::from_millis(5));
        assert_eq!(o.header_read_timeout_value(), Duration::from_millis(5));
    }

    #[test]
    fn the_default_body_read_timeout_is_30_seconds_and_the_shutdown_grace_10_seconds() {
        let o = Limits::new();
        assert_eq!(o.body_read_timeout_value(), Duration::from_secs(30));
        assert_eq!(o.shutdown_grace_value(), Duration::from_secs(10));
        let o = o.body_read_timeout(Duration::from_millis(7)).shutdown_grace(Duration::from_millis(9));
        assert_eq!(o.body_read_timeout_value(), Duration::from_millis(7));
        assert_eq!(o.shutdown_grace_value(), Duration::from_millis(9));
    }

    #[test]
    fn the_default_write_timeout_is_30_seconds_and_the_cap_64_connections() {
        let o = Limits::new();
        assert_eq!(o.write_timeout_value(), Duration::from_secs(30));
        assert_eq!(o.max_connections_value(), 64);
        let o = o.write_timeout(Duration::from_millis(3)).max_connections(0);
        assert_eq!(o.write_timeout_value(), Duration::from_millis(3));
        assert_eq!(o.max_connections_value(), 1, "a cap of 0 is 1");
    }

    #[test]
    fn an_internal_failure_is_500_internal() {
        let r = internal();
        assert_eq!(r.status, 500);
        assert_eq!(r.body_json()["code"], "internal");
    }
}
