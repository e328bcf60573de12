//! One HTTP/1.1 connection: keep-alive, header- and body-read timeouts,
//! graceful shutdown within a grace period, and every request carried to the
//! core.

use std::fmt;
use std::future::Future;
use std::pin::pin;
use std::time::Duration;

use bytes::Bytes;
use hyper::header::{HeaderValue, WWW_AUTHENTICATE};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite};

use durable_core::Core;
use durable_types::exchange::{Request, Response};
use durable_types::{ErrorBody, ErrorCode};

use crate::caller::CallerSource;
use crate::shutdown::Shutdown;
use crate::translate::{to_core_request, to_hyper_response};

/// What answers the requests of a connection: the [`Core`], or a stand-in in
/// tests.
pub trait Handler: Clone + Send + Sync + 'static {
    /// Answers one request.
    fn handle(&self, request: Request) -> impl Future<Output = Response> + Send + 'static;
}

impl Handler for Core {
    fn handle(&self, request: Request) -> impl Future<Output = Response> + Send + 'static {
        Core::handle(self, request)
    }
}

/// Settings of the HTTP layer, shared by both servers.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct HttpOptions {
    header_read_timeout: Duration,
    body_read_timeout: Duration,
    shutdown_grace: Duration,
}

impl Default for HttpOptions {
    fn default() -> Self {
        HttpOptions {
            header_read_timeout: Self::DEFAULT_HEADER_READ_TIMEOUT,
            body_read_timeout: Self::DEFAULT_BODY_READ_TIMEOUT,
            shutdown_grace: Self::DEFAULT_SHUTDOWN_GRACE,
        }
    }
}

impl HttpOptions {
    /// The default header-read timeout: 30 s.
    pub const DEFAULT_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);

    /// The default body-read timeout: 30 s for a whole request body.
    pub const DEFAULT_BODY_READ_TIMEOUT: Duration = Duration::from_secs(30);

    /// The default shutdown grace period: 10 s.
    pub const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

    /// The defaults.
    pub fn new() -> Self {
        Self::default()
    }

    /// How long a client may take to send a request's headers. The clock
    /// starts when the connection waits for a request, so this also bounds
    /// how long an idle keep-alive connection stays open (Collie polls every
    /// 2 to 10 s). A connection past it is closed.
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

    /// How long [`Server::close`](crate::Server::close) (and a connection
    /// told to shut down) waits for the requests in flight and the core's
    /// work on them before it drops what is left. Default 10 s.
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
/// out, or `shutdown` fires.
///
/// - Keep-alive is on: a client sends request after request on one
///   connection.
/// - Each request's caller comes from `callers` ([`CallerSource`]); a
///   request it refuses gets that answer (`401`, with
///   `WWW-Authenticate: Bearer`) and never reaches `handler`.
/// - The body is read under the 1 MiB limit ([`to_core_request`]) and
///   within the body-read timeout ([`HttpOptions::body_read_timeout`]): a
///   body not complete in time closes the connection without an answer, and
///   the request never reaches `handler`.
/// - The handler's future runs on a task of its own, so a client that goes
///   away cannot cut the core's work in half; that task is counted by
///   `shutdown` ([`Shutdown::drained`]) until it ends.
/// - When `shutdown` fires, a request in flight finishes and its answer is
///   written; then the connection closes instead of waiting for another.
///   After [`HttpOptions::shutdown_grace`] the connection is dropped as it
///   is (the handler's task, if any, goes on).
///
/// Must run inside a tokio runtime (it spawns and uses tokio time). The
/// error, if any, is the connection's (a timeout, a client gone mid-request)
/// and is usually only worth ignoring.
pub async fn serve_connection<H, I>(
    handler: H,
    io: I,
    callers: CallerSource,
    options: &HttpOptions,
    shutdown: Shutdown,
) -> Result<(), hyper::Error>
where
    H: Handler,
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let body_read_timeout = options.body_read_timeout;
    let tracker = shutdown.clone();
    let service = service_fn(move |request: hyper::Request<hyper::body::Incoming>| {
        let handler = handler.clone();
        let callers = callers.clone();
        let tracker = tracker.clone();
        async move {
            let caller = match callers.admit(request.headers()) {
                Ok(caller) => caller,
                Err(refusal) => {
                    let mut out = to_hyper_response(refusal);
                    out.headers_mut().insert(WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
                    return Ok(out);
                }
            };
            // An error out of the service makes hyper close the connection
            // without writing an answer.
            let request =
                match tokio::time::timeout(body_read_timeout, to_core_request(request, caller)).await {
                    Ok(read) => read.map_err(ServiceError::Body)?,
                    Err(_) => return Err(ServiceError::BodyTimeout(body_read_timeout)),
                };
            let in_flight = tracker.track();
            let work = handler.handle(request);
            let task = tokio::spawn(async move {
                let response = work.await;
                drop(in_flight);
                response
            });
            let response = task.await.unwrap_or_else(|e| {
                tracing::warn!(target: "durable", error = %e, "the core's task failed to answer a request");
                internal()
            });
            Ok::<_, ServiceError>(to_hyper_response(response))
        }
    });
    let mut builder = http1::Builder::new();
    builder.timer(TokioTimer::new()).keep_alive(true).header_read_timeout(options.header_read_timeout);
    let mut conn = pin!(builder.serve_connection(TokioIo::new(io), service));
    tokio::select! {
        done = conn.as_mut() => return done,
        () = shutdown.triggered() => {}
    }
    conn.as_mut().graceful_shutdown();
    // Past the grace, the connection is dropped (closed) as it is.
    tokio::time::timeout(options.shutdown_grace, conn).await.unwrap_or(Ok(()))
}

/// Why the service gave up on a request: hyper then closes the connection
/// without an answer.
#[derive(Debug)]
enum ServiceError {
    /// The body could not be read (the client went away mid-body).
    Body(hyper::Error),
    /// The body did not arrive whole within the body-read timeout.
    BodyTimeout(Duration),
}

impl fmt::Display for ServiceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ServiceError::Body(e) => write!(f, "reading the request body failed: {e}"),
            ServiceError::BodyTimeout(t) => write!(f, "the request body did not arrive within {t:?}"),
        }
    }
}

impl std::error::Error for ServiceError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ServiceError::Body(e) => Some(e),
            ServiceError::BodyTimeout(_) => None,
        }
    }
}

/// The answer when the core's task failed (a bug): `500 internal`, saying
/// nothing more.
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
        assert_eq!(HttpOptions::new().header_read_timeout_value(), Duration::from_secs(30));
        let o = HttpOptions::new().header_read_timeout(Duration::from_millis(5));
        assert_eq!(o.header_read_timeout_value(), Duration::from_millis(5));
    }

    #[test]
    fn the_default_body_read_timeout_is_30_seconds_and_the_shutdown_grace_10_seconds() {
        let o = HttpOptions::new();
        assert_eq!(o.body_read_timeout_value(), Duration::from_secs(30));
        assert_eq!(o.shutdown_grace_value(), Duration::from_secs(10));
        let o = o.body_read_timeout(Duration::from_millis(7)).shutdown_grace(Duration::from_millis(9));
        assert_eq!(o.body_read_timeout_value(), Duration::from_millis(7));
        assert_eq!(o.shutdown_grace_value(), Duration::from_millis(9));
    }

    #[test]
    fn an_internal_failure_is_500_internal() {
        let r = internal();
        assert_eq!(r.status, 500);
        assert_eq!(r.body_json()["code"], "internal");
    }
}
