//! One HTTP/1.1 connection: keep-alive, a header-read timeout, graceful
//! shutdown, and every request carried to the core.

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
}

impl Default for HttpOptions {
    fn default() -> Self {
        HttpOptions { header_read_timeout: Self::DEFAULT_HEADER_READ_TIMEOUT }
    }
}

impl HttpOptions {
    /// The default header-read timeout: 30 s.
    pub const DEFAULT_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);

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
}

/// Serves HTTP/1.1 on one connection until the client closes it, it times
/// out, or `shutdown` fires.
///
/// - Keep-alive is on: a client sends request after request on one
///   connection.
/// - Each request's caller comes from `callers` ([`CallerSource`]); a
///   request it refuses gets that answer (`401`, with
///   `WWW-Authenticate: Bearer`) and never reaches `handler`.
/// - The body is read under the 1 MiB limit
///   ([`to_core_request`]); the handler's future runs on a task of its own,
///   so a client that goes away cannot cut the core's work in half.
/// - When `shutdown` fires, a request in flight finishes and its answer is
///   written; then the connection closes instead of waiting for another.
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
    let service = service_fn(move |request: hyper::Request<hyper::body::Incoming>| {
        let handler = handler.clone();
        let callers = callers.clone();
        async move {
            let caller = match callers.admit(request.headers()) {
                Ok(caller) => caller,
                Err(refusal) => {
                    let mut out = to_hyper_response(refusal);
                    out.headers_mut().insert(WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
                    return Ok(out);
                }
            };
            let request = to_core_request(request, caller).await?;
            let response = tokio::spawn(handler.handle(request)).await.unwrap_or_else(|_| internal());
            Ok::<_, hyper::Error>(to_hyper_response(response))
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
    conn.await
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
    fn an_internal_failure_is_500_internal() {
        let r = internal();
        assert_eq!(r.status, 500);
        assert_eq!(r.body_json()["code"], "internal");
    }
}
