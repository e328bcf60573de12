//! The socket server's options: [`SocketOptions`], built with a builder.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use durable_http::HttpOptions;
use durable_types::exchange::Caller;

/// Whether the server tells the core who each peer is (the seed's
/// `callerCheck`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum CallerCheck {
    /// Read each connection's peer where the platform can (Linux): writes
    /// from the agent and its descendants are refused, other users refused
    /// outright. The default.
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

    /// How long a client may take to send a request's headers (and how long
    /// an idle connection stays open). Default 30 s.
    pub fn header_read_timeout(mut self, timeout: Duration) -> Self {
        self.options.http = self.options.http.header_read_timeout(timeout);
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
