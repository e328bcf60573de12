//! The socket server's options: [`SocketOptions`], built with a builder.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use durable_http::HttpOptions;
use durable_types::exchange::Caller;

/// Whether the server tells the core who each peer is (the seed's
/// `callerCheck`).
///
/// The check guards against accidents, not against a process set on getting
/// around it. On Linux it follows the peer's parent chain in `/proc`; a
/// process whose parent has exited is re-parented to init (or a child
/// subreaper) and is then no longer seen as the agent's. A grandchild
/// orphaned that way escapes the check, and so does whatever a tool starts
/// with `setsid -f`, `nohup … &`, `systemd-run --user` or in a tmux or
/// screen server. Where the chain cannot be read (the peer exited after
/// connecting, a link vanished, a pid was reused, an unseen pid namespace)
/// the check fails closed: writes are refused, reads served.
///
/// To keep the agent's own tools from answering its asks, run them in a
/// sandbox that cannot reach the socket (another user, a mount namespace, a
/// container) — on Linux as elsewhere.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum CallerCheck {
    /// Read each connection's peer where the platform can (Linux): writes
    /// from the agent and its descendants — and from any peer the check
    /// cannot place — are refused, other users refused outright. The
    /// default. See the type's documentation for what escapes it.
    #[default]
    On,
    /// The explicit opt-out: every peer is
    /// [`Caller::Unknown`], and `GET /hello` says `"callerCheck": "off"`.
    Off,
}

pub(crate) type CallerObserver = Arc<dyn Fn(Caller) + Send + Sync>;

/// Options of [`serve`](crate::serve). Built with [`SocketOptions::builder`];
/// the default has no path (so `$COLLIE_DURABLE_SOCKET` is used) and the
/// caller check on.
#[derive(Clone, Default)]
pub struct SocketOptions {
    pub(crate) path: Option<PathBuf>,
    pub(crate) caller_check: CallerCheck,
    pub(crate) http: HttpOptions,
    pub(crate) observer: Option<CallerObserver>,
}

impl fmt::Debug for SocketOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SocketOptions")
            .field("path", &self.path)
            .field("caller_check", &self.caller_check)
            .field("http", &self.http)
            .finish_non_exhaustive()
    }
}

impl SocketOptions {
    /// A builder.
    pub fn builder() -> SocketOptionsBuilder {
        SocketOptionsBuilder::default()
    }

    /// The path set in the options, if any.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// The caller check asked for.
    pub fn caller_check(&self) -> CallerCheck {
        self.caller_check
    }

    /// The header-read timeout in force.
    pub fn header_read_timeout(&self) -> Duration {
        self.http.header_read_timeout_value()
    }

    /// The write-progress timeout in force.
    pub fn write_timeout(&self) -> Duration {
        self.http.write_timeout_value()
    }

    /// The cap on connections in force.
    pub fn max_connections(&self) -> usize {
        self.http.max_connections_value()
    }
}

/// Builds [`SocketOptions`].
#[derive(Debug, Default)]
pub struct SocketOptionsBuilder {
    options: SocketOptions,
}

impl SocketOptionsBuilder {
    /// The socket path (the seed's `socket` option). Overrides
    /// `$COLLIE_DURABLE_SOCKET`.
    pub fn path(mut self, path: impl Into<PathBuf>) -> Self {
        self.options.path = Some(path.into());
        self
    }

    /// The caller check. Default [`CallerCheck::On`].
    pub fn caller_check(mut self, check: CallerCheck) -> Self {
        self.options.caller_check = check;
        self
    }

    /// How long a client may take to send a request's headers, counted from
    /// when the connection waits for one (bytes trickling in do not restart
    /// it); also how long an idle connection stays open. Default 30 s.
    pub fn header_read_timeout(mut self, timeout: Duration) -> Self {
        self.options.http = self.options.http.header_read_timeout(timeout);
        self
    }

    /// How long a client may take to send a request's whole body; past it
    /// the connection is closed and the core never sees the request.
    /// Default 30 s.
    pub fn body_read_timeout(mut self, timeout: Duration) -> Self {
        self.options.http = self.options.http.body_read_timeout(timeout);
        self
    }

    /// How long the write of an answer may make no progress (the client
    /// reads nothing) before the connection is closed. Default 30 s.
    pub fn write_timeout(mut self, timeout: Duration) -> Self {
        self.options.http = self.options.http.write_timeout(timeout);
        self
    }

    /// How many connections the server holds at once (at least 1). Past the
    /// cap a new connection displaces the oldest one that has not yet made
    /// a request from the agent's own user (the agent's own processes never
    /// count as having made one); when every connection has, the new one is
    /// closed at once. Default 64.
    pub fn max_connections(mut self, max: usize) -> Self {
        self.options.http = self.options.http.max_connections(max);
        self
    }

    /// How long [`SocketServer::close`](crate::SocketServer::close) waits for
    /// the requests in flight and the core's work on them before dropping
    /// what is left. Default 10 s.
    pub fn shutdown_grace(mut self, grace: Duration) -> Self {
        self.options.http = self.options.http.shutdown_grace(grace);
        self
    }

    /// Test hook: called with the caller computed for each connection.
    #[doc(hidden)]
    pub fn observe_callers(mut self, observer: impl Fn(Caller) + Send + Sync + 'static) -> Self {
        self.options.observer = Some(Arc::new(observer));
        self
    }

    /// The options.
    pub fn build(self) -> SocketOptions {
        self.options
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_connection_limits_default_to_64_and_30_seconds_and_are_set_by_the_builder() {
        let o = SocketOptions::builder().build();
        assert_eq!(o.max_connections(), 64);
        assert_eq!(o.write_timeout(), Duration::from_secs(30));
        assert_eq!(o.header_read_timeout(), Duration::from_secs(30));
        let o = SocketOptions::builder()
            .max_connections(3)
            .write_timeout(Duration::from_millis(5))
            .header_read_timeout(Duration::from_millis(6))
            .build();
        assert_eq!(o.max_connections(), 3);
        assert_eq!(o.write_timeout(), Duration::from_millis(5));
        assert_eq!(o.header_read_timeout(), Duration::from_millis(6));
    }
}
