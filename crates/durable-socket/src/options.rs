//! The socket server's options: [`SocketOptions`], built with a builder.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use durable_http::Limits;
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
    pub(crate) http: Limits,
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

    /// The connection limits in force.
    pub fn limits(&self) -> &Limits {
        &self.http
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

    /// The connection limits: timeouts, the cap on connections, the
    /// shutdown grace ([`Limits`] says each one's default and rule). Past
    /// the cap a new connection displaces the oldest one that has not yet
    /// made a request from the agent's own user (the agent's own processes
    /// never count as having made one).
    pub fn limits(mut self, limits: Limits) -> Self {
        self.options.http = limits;
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
    use std::time::Duration;

    use super::*;

    #[test]
    fn the_connection_limits_default_to_64_and_30_seconds_and_are_set_by_the_builder() {
        let o = SocketOptions::builder().build();
        assert_eq!(o.limits().max_connections_value(), 64);
        assert_eq!(o.limits().write_timeout_value(), Duration::from_secs(30));
        assert_eq!(o.limits().header_read_timeout_value(), Duration::from_secs(30));
        let limits = Limits::new()
            .max_connections(3)
            .write_timeout(Duration::from_millis(5))
            .header_read_timeout(Duration::from_millis(6));
        let o = SocketOptions::builder().limits(limits).build();
        assert_eq!(o.limits().max_connections_value(), 3);
        assert_eq!(o.limits().write_timeout_value(), Duration::from_millis(5));
        assert_eq!(o.limits().header_read_timeout_value(), Duration::from_millis(6));
    }
}
