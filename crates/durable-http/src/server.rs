//! A running server: an accept loop, its connections and the core's driver,
//! closed together.

use std::fmt;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::task::{JoinHandle, JoinSet};

use durable_core::Core;

use crate::caller::CallerSource;
use crate::connection::{HttpOptions, serve_connection};
use crate::driver::spawn_driver;
use crate::shutdown::Shutdown;

/// The slow part of taking a connection — reading who the peer is, or a TLS
/// handshake — run on the connection's own task, so the accept loop never
/// waits on one client. It yields the stream and the connection's
/// [`CallerSource`]; an error drops the connection quietly.
pub type Incoming<Io> = Pin<Box<dyn Future<Output = io::Result<(Io, CallerSource)>> + Send>>;

/// A source of connections for [`Server::start`] (a Unix listener, a TCP
/// listener with TLS).
pub trait Listen: Send + 'static {
    /// The stream a connection is served over.
    type Io: AsyncRead + AsyncWrite + Unpin + Send + 'static;

    /// Waits for the next connection. Return quickly after the accept
    /// itself; put the slow part in the returned [`Incoming`]. An error here
    /// is an accept failure (out of file descriptors, …): the loop writes a
    /// warn line, pauses briefly and goes on.
    ///
    /// The loop may drop this future before it completes (when it wakes for
    /// something else) and call `accept` again: it must be cancel-safe, as
    /// tokio's `accept` is.
    fn accept(&mut self) -> impl Future<Output = io::Result<Incoming<Self::Io>>> + Send;
}

/// Pause after a failed accept, so that running out of file descriptors
/// does not spin the loop or flood the warn sink.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(200);

/// A server serving one core: its accept loop, its connections and the
/// core's driver ([`spawn_driver`]).
///
/// [`close`](Self::close) stops accepting, lets the requests in flight
/// finish (idle keep-alive connections close at once), then stops the driver
/// and returns. Dropping a `Server` without closing it stops accepting too,
/// but nothing waits for the rest.
#[must_use = "dropping a Server stops it"]
pub struct Server {
    shutdown: Shutdown,
    task: Option<JoinHandle<()>>,
}

impl fmt::Debug for Server {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Server").field("closing", &self.shutdown.is_triggered()).finish_non_exhaustive()
    }
}

impl Server {
    /// Starts serving `core` on the connections `listener` yields, and
    /// starts the core's driver. Must be called inside a tokio runtime.
    pub fn start<L: Listen>(core: Core, listener: L, options: HttpOptions) -> Server {
        let shutdown = Shutdown::new();
        let task = tokio::spawn(run(core, listener, options, shutdown.clone()));
        Server { shutdown, task: Some(task) }
    }

    /// The signal [`close`](Self::close) fires, for a caller that wants to
    /// start the shutdown from elsewhere.
    pub fn shutdown_signal(&self) -> Shutdown {
        self.shutdown.clone()
    }

    /// Stops accepting, lets the requests in flight finish, stops the
    /// driver, and returns once all of that is done. The listener is dropped
    /// before this returns.
    pub async fn close(mut self) {
        self.shutdown.trigger();
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.shutdown.trigger();
    }
}

async fn run<L: Listen>(core: Core, mut listener: L, options: HttpOptions, shutdown: Shutdown) {
    let driver_stop = Shutdown::new();
    let driver = spawn_driver(core.clone(), driver_stop.clone());
    let mut connections = JoinSet::new();
    loop {
        let incoming = tokio::select! {
            () = shutdown.triggered() => break,
            Some(_) = connections.join_next(), if !connections.is_empty() => continue,
            accepted = listener.accept() => accepted,
        };
        match incoming {
            Ok(incoming) => {
                let core = core.clone();
                let options = options.clone();
                let shutdown = shutdown.clone();
                connections.spawn(async move {
                    if let Ok((io, callers)) = incoming.await {
                        let _ = serve_connection(core, io, callers, &options, shutdown).await;
                    }
                });
            }
            Err(e) => {
                core.warn(&format!("durable: accepting a connection failed: {e}"));
                tokio::time::sleep(ACCEPT_BACKOFF).await;
            }
        }
    }
    drop(listener);
    while connections.join_next().await.is_some() {}
    driver_stop.trigger();
    let _ = driver.await;
}
