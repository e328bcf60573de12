//! A running server: an accept loop, its connections (under a cap) and the
//! core's driver, closed together.

use std::fmt;
use std::future::Future;
use std::io;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::task::{JoinHandle, JoinSet};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument;

use durable_runtime::Driver;
use durable_types::exchange::Caller;

use crate::caller::CallerSource;
use crate::connection::{Handler, Limits, serve_in_slot};
use crate::driver::spawn_driver;
use crate::slots::Slots;
use crate::until::until;

/// The slow part of taking a connection — reading who the peer is, or a TLS
/// handshake — run on the connection's own task, so the accept loop never
/// waits on one client. It yields the stream and the connection's
/// [`CallerSource`]; an error drops the connection (a `tracing` warning).
pub type Incoming<Io> = Pin<Box<dyn Future<Output = io::Result<(Io, CallerSource)>> + Send>>;

/// A connection just accepted: the slow part of taking it ([`Incoming`]),
/// and the network address it comes from, when it has one. The address
/// only decides which connection gives way under the cap
/// ([`Limits::max_connections`]): the peer holding the most
/// connections that have not shown a token loses one first.
pub struct Accepted<Io> {
    incoming: Incoming<Io>,
    peer: Option<IpAddr>,
}

impl<Io> Accepted<Io> {
    /// A connection without a network address (a Unix socket's).
    pub fn new(incoming: Incoming<Io>) -> Self {
        Accepted { incoming, peer: None }
    }

    /// The peer's IP address (a TCP connection's).
    pub fn peer(mut self, ip: IpAddr) -> Self {
        self.peer = Some(ip);
        self
    }
}

impl<Io> fmt::Debug for Accepted<Io> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Accepted").field("peer", &self.peer).finish_non_exhaustive()
    }
}

/// A source of connections for [`Server::start`] (a Unix listener, a TCP
/// listener with TLS).
pub trait Listen: Send + 'static {
    /// The stream a connection is served over.
    type Io: AsyncRead + AsyncWrite + Unpin + Send + 'static;

    /// Waits for the next connection. Return quickly after the accept
    /// itself; put the slow part in the returned [`Accepted`]'s
    /// [`Incoming`]. An error here is an accept failure (out of file
    /// descriptors, …): the loop writes a warn line, pauses briefly and goes
    /// on.
    ///
    /// The loop may drop this future before it completes (when it wakes for
    /// something else) and call `accept` again: it must be cancel-safe, as
    /// tokio's `accept` is.
    fn accept(&mut self) -> impl Future<Output = io::Result<Accepted<Self::Io>>> + Send;

    /// The transport's name in each connection's `tracing` span
    /// (`connection`, field `transport`): `socket`, `https`, `http`.
    /// Default `other`.
    fn transport(&self) -> &'static str {
        "other"
    }
}

/// Pause after a failed accept, so that running out of file descriptors
/// does not spin the loop or flood the warn sink.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(200);

/// A server serving one core: its accept loop, its connections and the
/// core's driver ([`spawn_driver`]).
///
/// It holds at most [`Limits::max_connections`] connections at once,
/// each served by [`serve_connection`](crate::serve_connection)'s rules.
/// Past the cap a new connection displaces one that has not made a request
/// its transport accepted (over HTTPS, one with an accepted token: Collie's
/// connection, once it has polled, keeps its place under any flood); when
/// every connection has, the new one is closed at once, before a byte is
/// read. A `tracing` warning says so, at most every
/// 10 s.
///
/// [`close`](Self::close) stops accepting, lets the requests in flight
/// finish (idle keep-alive connections close at once) and the core's work on
/// them end — within [`Limits::shutdown_grace`] — then stops the driver
/// and returns. Dropping a `Server` without closing it stops accepting too,
/// but nothing waits for the rest.
#[must_use = "dropping a Server stops it"]
pub struct Server {
    shutdown: CancellationToken,
    task: Option<JoinHandle<()>>,
}

impl fmt::Debug for Server {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Server").field("closing", &self.shutdown.is_cancelled()).finish_non_exhaustive()
    }
}

impl Server {
    /// Starts serving `core` on the connections `listener` yields, and
    /// starts the core's driver. Must be called inside a tokio runtime.
    pub fn start<L: Listen>(core: Driver, listener: L, options: Limits) -> Server {
        Server::start_with(core.clone(), core, listener, options)
    }

    /// [`start`](Self::start) with requests answered by `handler` (tests use
    /// a stand-in); `core` is driven and gets the warn lines.
    pub(crate) fn start_with<H: Handler, L: Listen>(
        handler: H,
        core: Driver,
        listener: L,
        options: Limits,
    ) -> Server {
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(run(handler, core, listener, options, shutdown.clone()));
        Server { shutdown, task: Some(task) }
    }

    /// The token [`close`](Self::close) cancels: cancelling it elsewhere
    /// starts the same shutdown (stop accepting, finish the requests in
    /// flight), and [`CancellationToken::cancelled`] waits for one.
    pub fn shutdown_token(&self) -> CancellationToken {
        self.shutdown.clone()
    }

    /// Stops accepting, lets the requests in flight finish, waits for the
    /// core's work on every request it took (including those whose client
    /// went away, whose work runs on a task of its own), stops the driver,
    /// and returns once all of that is done. The listener is dropped before
    /// this returns.
    ///
    /// All of that waits at most [`Limits::shutdown_grace`] (default
    /// 10 s): past it, the connections still open (a client stalling its
    /// body, say) are dropped, and the core's work still running is no longer
    /// waited for — it goes on as long as the runtime does.
    pub async fn close(mut self) {
        self.shutdown.cancel();
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

async fn run<H: Handler, L: Listen>(
    handler: H,
    core: Driver,
    mut listener: L,
    options: Limits,
    shutdown: CancellationToken,
) {
    let driver_stop = CancellationToken::new();
    let driver = spawn_driver(core.clone(), driver_stop.clone());
    let slots = Slots::new(options.max_connections_value());
    let mut connections = JoinSet::new();
    // The core's work on the writes of every connection, which outlives a
    // client that went away.
    let in_flight = TaskTracker::new();
    let transport = listener.transport();
    loop {
        let accepted = tokio::select! {
            () = shutdown.cancelled() => break,
            Some(_) = connections.join_next(), if !connections.is_empty() => continue,
            accepted = listener.accept() => accepted,
        };
        match accepted {
            Ok(accepted) => {
                // Refused (every place holds a proven connection): dropped,
                // so closed at once.
                let Some(slot) = slots.admit(accepted.peer) else { continue };
                let slot = Arc::new(slot);
                let span = connection_span(transport, accepted.peer);
                let incoming = accepted.incoming;
                let handler = handler.clone();
                let options = options.clone();
                let shutdown = shutdown.clone();
                let in_flight = in_flight.clone();
                connections.spawn(async move {
                    let serve = async {
                        let (io, callers) = match incoming.await {
                            Ok(accepted) => accepted,
                            Err(e) => {
                                tracing::warn!(error = %e, "a connection failed before its first request");
                                return;
                            }
                        };
                        tracing::Span::current().record("caller", caller_name(&callers));
                        let served = serve_in_slot(handler, io, callers, &options, shutdown, in_flight, Some(slot.clone()));
                        if let Err(e) = served.await {
                            tracing::warn!(error = %e, "a connection failed");
                        }
                    };
                    // Displaced: dropped where it stands (it has made no
                    // request the transport accepted, so no work of the
                    // core's is cut), which closes it.
                    let _ = until(serve, slot.displaced()).await;
                }.instrument(span));
            }
            Err(e) => {
                core.collie().warn(&format!("durable: accepting a connection failed: {e}"));
                tokio::time::sleep(ACCEPT_BACKOFF).await;
            }
        }
    }
    drop(listener);
    // One grace period for all that is left: the connections' requests in
    // flight, then the core's work on requests whose client went away. The
    // driver runs meanwhile (a request may wait on one of its deadlines).
    let deadline = deadline_after(options.shutdown_grace_value());
    let joined =
        tokio::time::timeout_at(deadline, async { while connections.join_next().await.is_some() {} }).await;
    if joined.is_err() {
        // Past the grace: drop the connections still open (a stalled client).
        connections.abort_all();
        while connections.join_next().await.is_some() {}
    }
    // No connection is left to start more work; wait for the work started.
    in_flight.close();
    let _ = tokio::time::timeout_at(deadline, in_flight.wait()).await;
    driver_stop.cancel();
    let _ = driver.await;
}

/// The span of one connection (`connection`, at `DEBUG`): its transport,
/// the peer's address when it has one, and the caller its transport found
/// (`caller`, once known: the socket's check, or `bearer-token`) — never a
/// token. The core's request spans are its children. `DEBUG`, as a poll's
/// request span: an enabled span is entered and left at every poll of the
/// connection's future, which cost a 304 poll about 4 % more instructions
/// at `INFO` (`docs/benchmarks.md`, *Logs*); off, it costs nothing.
fn connection_span(transport: &'static str, peer: Option<IpAddr>) -> tracing::Span {
    let span = tracing::debug_span!(
        "connection",
        transport,
        peer = tracing::field::Empty,
        caller = tracing::field::Empty
    );
    if let Some(peer) = peer {
        span.record("peer", tracing::field::display(peer));
    }
    span
}

/// The caller a connection's transport found, as the connection span names it.
fn caller_name(source: &CallerSource) -> &'static str {
    match source {
        CallerSource::Fixed(Caller::SelfOrDescendant) => "self-or-descendant",
        CallerSource::Fixed(Caller::OtherProcess) => "other-process",
        CallerSource::Fixed(Caller::OtherUser) => "other-user",
        CallerSource::Fixed(Caller::Unknown) => "unknown",
        CallerSource::Fixed(Caller::Token) => "token",
        CallerSource::Bearer(_) => "bearer-token",
        _ => "other",
    }
}

/// `grace` from now (see [`later_by`]).
fn deadline_after(grace: Duration) -> tokio::time::Instant {
    later_by(tokio::time::Instant::now(), grace)
}

/// `from` plus `wait`; a wait too large for the clock (`Duration::MAX`,
/// say, for "never") is about a century, not a panic. Every deadline made
/// from a configured timeout goes through here.
pub(crate) fn later_by(from: tokio::time::Instant, wait: Duration) -> tokio::time::Instant {
    from.checked_add(wait).unwrap_or_else(|| from + Duration::from_secs(100 * 365 * 86_400))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::time::Instant;

    use durable_runtime::{CoreOptions, ManualClock, create_core};
    use durable_types::Timestamp;
    use durable_types::exchange::{Caller, Request, Response};
    use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};
    use tokio::sync::mpsc;

    use super::*;

    /// Connections handed over a channel, as a listener would accept them,
    /// each with the caller its peer is.
    struct ChannelListen(mpsc::UnboundedReceiver<(DuplexStream, Caller)>);

    impl Listen for ChannelListen {
        type Io = DuplexStream;

        async fn accept(&mut self) -> io::Result<Accepted<DuplexStream>> {
            match self.0.recv().await {
                Some((io, caller)) => {
                    Ok(Accepted::new(Box::pin(async move { Ok((io, CallerSource::Fixed(caller))) })))
                }
                None => std::future::pending().await,
            }
        }
    }

    /// A handler that takes `delay` and records when it started and ended.
    #[derive(Clone, Default)]
    struct Slow {
        delay: Duration,
        started: Arc<AtomicUsize>,
        finished: Arc<AtomicBool>,
    }

    impl Handler for Slow {
        fn handle(&self, _request: Request) -> impl Future<Output = Response> + Send + 'static {
            let (delay, started, finished) = (self.delay, self.started.clone(), self.finished.clone());
            async move {
                started.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(delay).await;
                finished.store(true, Ordering::SeqCst);
                Response::json(200, &b"{\"ok\":true}"[..])
            }
        }
    }

    fn test_core() -> Driver {
        let clock = ManualClock::new(Timestamp::from_millis(1));
        create_core(CoreOptions::builder().clock(clock).epoch("0123456789abcdef").build().unwrap()).driver()
    }

    type Connect = mpsc::UnboundedSender<(DuplexStream, Caller)>;

    fn server(handler: Slow, options: Limits) -> (Server, Connect) {
        let (tx, rx) = mpsc::unbounded_channel();
        (Server::start_with(handler, test_core(), ChannelListen(rx), options), tx)
    }

    /// A connection from another process (Collie, on the socket).
    fn connect(tx: &Connect) -> DuplexStream {
        connect_as(tx, Caller::OtherProcess)
    }

    fn connect_as(tx: &Connect, caller: Caller) -> DuplexStream {
        let (client, server) = tokio::io::duplex(64 * 1024);
        tx.send((server, caller)).unwrap();
        client
    }

    /// One request and its answer's status line on `io`.
    async fn status_of_a_poll(io: &mut DuplexStream) -> String {
        io.write_all(b"GET /v1/state HTTP/1.1\r\nHost: x\r\n\r\n").await.unwrap();
        let mut buf = Vec::new();
        let mut byte = [0u8; 1];
        while !buf.ends_with(b"\r\n\r\n") {
            assert_eq!(io.read(&mut byte).await.unwrap(), 1, "closed mid-answer");
            buf.push(byte[0]);
        }
        let mut body = [0u8; 11]; // {"ok":true}
        io.read_exact(&mut body).await.unwrap();
        String::from_utf8_lossy(&buf).lines().next().unwrap().to_owned()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn past_the_cap_a_new_connection_displaces_an_unproven_one_or_is_refused() {
        let (server, tx) = server(Slow::default(), Limits::new().max_connections(2));
        let mut proven = connect(&tx);
        assert_eq!(status_of_a_poll(&mut proven).await, "HTTP/1.1 200 OK");
        let mut silent = connect(&tx);
        let mut newer = connect(&tx);
        // `silent` made no request: `newer` takes its place.
        let mut rest = Vec::new();
        tokio::time::timeout(Duration::from_secs(5), silent.read_to_end(&mut rest))
            .await
            .expect("the unproven connection was not displaced")
            .unwrap();
        assert_eq!(status_of_a_poll(&mut newer).await, "HTTP/1.1 200 OK");
        // Both places now hold proven connections: a third is refused.
        let mut refused = connect(&tx);
        tokio::time::timeout(Duration::from_secs(5), refused.read_to_end(&mut rest))
            .await
            .expect("the connection past the cap was not refused")
            .unwrap();
        assert!(rest.is_empty(), "a refused connection gets no answer");
        assert_eq!(status_of_a_poll(&mut proven).await, "HTTP/1.1 200 OK");
        assert_eq!(status_of_a_poll(&mut newer).await, "HTTP/1.1 200 OK");
        server.close().await;
    }

    /// The agent's own processes are served, but keep no place: however
    /// many connections they hold, Collie's new one takes a place from them
    /// (the oldest first) and is not refused.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_agent_s_own_connections_never_keep_collie_out() {
        let (server, tx) = server(Slow::default(), Limits::new().max_connections(2));
        let mut own = [connect_as(&tx, Caller::SelfOrDescendant), connect_as(&tx, Caller::SelfOrDescendant)];
        for io in &mut own {
            assert_eq!(status_of_a_poll(io).await, "HTTP/1.1 200 OK", "the agent's own reads are served");
        }
        let mut collie = connect(&tx);
        let mut rest = Vec::new();
        tokio::time::timeout(Duration::from_secs(5), own[0].read_to_end(&mut rest))
            .await
            .expect("the oldest own connection kept its place")
            .unwrap();
        assert_eq!(status_of_a_poll(&mut collie).await, "HTTP/1.1 200 OK");
        assert_eq!(status_of_a_poll(&mut own[1]).await, "HTTP/1.1 200 OK", "the other one goes on");
        server.close().await;
    }

    #[tokio::test]
    async fn an_endless_shutdown_grace_does_not_overflow_the_clock() {
        assert!(deadline_after(Duration::MAX) > tokio::time::Instant::now());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn shutdown_grace_bounds_close_while_a_client_stalls_its_body() {
        let handler = Slow::default();
        let options = Limits::new()
            .body_read_timeout(Duration::from_secs(60))
            .shutdown_grace(Duration::from_millis(300));
        let (server, tx) = server(handler.clone(), options);
        let mut io = connect(&tx);
        io.write_all(b"POST /v1/close HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n0123456789")
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        let started = Instant::now();
        tokio::time::timeout(Duration::from_secs(5), server.close())
            .await
            .expect("close() waited past the grace");
        assert!(started.elapsed() < Duration::from_secs(2), "close took {:?}", started.elapsed());
        // The stalled connection was dropped, without an answer.
        let mut rest = Vec::new();
        let read = tokio::time::timeout(Duration::from_secs(2), io.read_to_end(&mut rest)).await;
        assert!(read.is_ok(), "the stalled connection is still open");
        assert_eq!(handler.started.load(Ordering::SeqCst), 0, "the core never saw the stalled request");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn close_waits_for_the_core_work_of_a_request_whose_client_went_away() {
        let handler = Slow { delay: Duration::from_millis(300), ..Slow::default() };
        let (server, tx) = server(handler.clone(), Limits::new());
        let mut io = connect(&tx);
        io.write_all(b"POST /v1/close HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}").await.unwrap();
        while handler.started.load(Ordering::SeqCst) == 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        // The client goes away: its connection ends, the core's work goes on
        // on its own task.
        drop(io);
        tokio::time::sleep(Duration::from_millis(20)).await;
        let started = Instant::now();
        tokio::time::timeout(Duration::from_secs(5), server.close()).await.unwrap();
        assert!(handler.finished.load(Ordering::SeqCst), "close() returned before the handler finished");
        assert!(started.elapsed() < Duration::from_secs(2), "close took {:?}", started.elapsed());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn close_waits_for_the_core_work_only_within_the_shutdown_grace() {
        let handler = Slow { delay: Duration::from_secs(30), ..Slow::default() };
        let (server, tx) = server(handler.clone(), Limits::new().shutdown_grace(Duration::from_millis(200)));
        let mut io = connect(&tx);
        io.write_all(b"POST /v1/close HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}").await.unwrap();
        while handler.started.load(Ordering::SeqCst) == 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        drop(io);
        let started = Instant::now();
        tokio::time::timeout(Duration::from_secs(5), server.close())
            .await
            .expect("close() waited past the grace");
        assert!(started.elapsed() < Duration::from_secs(2), "close took {:?}", started.elapsed());
        assert!(!handler.finished.load(Ordering::SeqCst));
    }
}
