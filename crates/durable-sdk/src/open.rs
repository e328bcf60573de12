//! `open_collie`: the private socket, the core, and the layout handle.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use durable_core::{ActionHandler, ChatHandler, Core, CoreOptions, HistoryProvider, Hooks, Workspace};
use durable_socket::{CallerCheck, SocketOptions};
use durable_types::{Caps, RuleError};

use crate::serve::{ServeError, Server, create_core, serve};

/// Options of [`open_collie`]. `receipts` and `allow_always` exist only on
/// [`create_core`](durable_core::create_core): `open_collie` keeps receipts
/// in memory and offers allow-always options (the socket is private).
#[derive(Clone)]
pub struct OpenOptions {
    host_name: String,
    socket: Option<PathBuf>,
    caps: Option<Caps>,
    caller_check: CallerCheck,
    tail_limit: Option<usize>,
    hold_ms: Option<u64>,
    warn: Option<durable_core::WarnSink>,
    max_connections: Option<usize>,
    header_read_timeout: Option<Duration>,
    body_read_timeout: Option<Duration>,
    write_timeout: Option<Duration>,
    shutdown_grace: Option<Duration>,
}

impl fmt::Debug for OpenOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenOptions")
            .field("host_name", &self.host_name)
            .field("socket", &self.socket)
            .field("caps", &self.caps)
            .field("caller_check", &self.caller_check)
            .field("max_connections", &self.max_connections)
            .field("header_read_timeout", &self.header_read_timeout)
            .field("body_read_timeout", &self.body_read_timeout)
            .field("write_timeout", &self.write_timeout)
            .field("shutdown_grace", &self.shutdown_grace)
            .finish_non_exhaustive()
    }
}

impl OpenOptions {
    /// A builder.
    pub fn builder() -> OpenOptionsBuilder {
        OpenOptionsBuilder(OpenOptions {
            host_name: "durable".into(),
            socket: None,
            caps: None,
            caller_check: CallerCheck::default(),
            tail_limit: None,
            hold_ms: None,
            warn: None,
            max_connections: None,
            header_read_timeout: None,
            body_read_timeout: None,
            write_timeout: None,
            shutdown_grace: None,
        })
    }
}

/// Builds [`OpenOptions`].
#[derive(Debug, Clone)]
pub struct OpenOptionsBuilder(OpenOptions);

impl OpenOptionsBuilder {
    /// The agent's name on the phone (`host` in `GET /hello`).
    pub fn host_name(mut self, name: impl Into<String>) -> Self {
        self.0.host_name = name.into();
        self
    }

    /// The socket path. Default: `$COLLIE_DURABLE_SOCKET`.
    pub fn socket(mut self, path: impl Into<PathBuf>) -> Self {
        self.0.socket = Some(path.into());
        self
    }

    /// The complete list of capabilities (default: all the SDK can do, plus
    /// `history` once [`Collie::history`] sets a provider).
    pub fn caps(mut self, caps: Caps) -> Self {
        self.0.caps = Some(caps);
        self
    }

    /// The caller check (default: on where the platform can tell).
    pub fn caller_check(mut self, check: CallerCheck) -> Self {
        self.0.caller_check = check;
        self
    }

    /// Raw events each pane keeps (default 500).
    pub fn tail_limit(mut self, n: usize) -> Self {
        self.0.tail_limit = Some(n);
        self
    }

    /// How long an answer to an unknown ask is held, in ms (default 10 min).
    pub fn hold_ms(mut self, ms: u64) -> Self {
        self.0.hold_ms = Some(ms);
        self
    }

    /// How many connections the socket holds at once (default 64). Past the
    /// cap a new connection displaces the oldest one that has not yet made a
    /// request (the agent's own processes never count as having made one);
    /// when every connection has, the new one is closed at once.
    pub fn max_connections(mut self, max: usize) -> Self {
        self.0.max_connections = Some(max);
        self
    }

    /// How long a client may take to send a request's headers, and how
    /// long an idle connection stays open (default 30 s).
    pub fn header_read_timeout(mut self, timeout: Duration) -> Self {
        self.0.header_read_timeout = Some(timeout);
        self
    }

    /// How long a client may take to send a request's whole body, counted
    /// from the end of its headers; past it the connection is closed and
    /// the request never runs (default 30 s).
    pub fn body_read_timeout(mut self, timeout: Duration) -> Self {
        self.0.body_read_timeout = Some(timeout);
        self
    }

    /// How long the write of an answer may make no progress (the client
    /// reads nothing) before the connection is closed (default 30 s).
    pub fn write_timeout(mut self, timeout: Duration) -> Self {
        self.0.write_timeout = Some(timeout);
        self
    }

    /// How long [`Collie::close`] waits for the requests in flight before
    /// dropping what is left (default 10 s).
    pub fn shutdown_grace(mut self, grace: Duration) -> Self {
        self.0.shutdown_grace = Some(grace);
        self
    }

    /// Where warn lines go (default: one line on standard error).
    pub fn warn(mut self, sink: impl Fn(&str) + Send + Sync + 'static) -> Self {
        self.0.warn = Some(std::sync::Arc::new(sink));
        self
    }

    /// The options.
    pub fn build(self) -> OpenOptions {
        self.0
    }
}

impl From<OpenOptionsBuilder> for OpenOptions {
    fn from(b: OpenOptionsBuilder) -> OpenOptions {
        b.build()
    }
}

/// Why [`open_collie`] could not start.
#[derive(thiserror::Error)]
#[non_exhaustive]
pub enum OpenError {
    /// An option breaks a rule.
    #[error(transparent)]
    Options(#[from] RuleError),
    /// The socket could not be served (path, privacy, in use, IO).
    #[error(transparent)]
    Serve(#[from] ServeError),
}

impl OpenError {
    /// Whether another process already serves the socket path.
    pub fn is_in_use(&self) -> bool {
        matches!(self, OpenError::Serve(ServeError::Socket(durable_socket::SocketError::InUse { .. })))
    }
}

/// The message, also for `Debug`: a `main` that returns this error prints it
/// with `Debug`, and the message names the rule (and the folder, in octal).
impl fmt::Debug for OpenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "OpenError: {self}")
    }
}

/// A durable agent served on its private socket: the seed's `collie`.
pub struct Collie {
    core: Core,
    server: Server,
}

impl fmt::Debug for Collie {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Collie").field("address", &self.server.address()).finish_non_exhaustive()
    }
}

/// Creates the private socket, serves a core on it, and returns the handle
/// that sets the layout the phone shows. Must be awaited inside a tokio
/// runtime.
pub async fn open_collie(options: impl Into<OpenOptions>) -> Result<Collie, OpenError> {
    let o = options.into();
    let mut b = CoreOptions::builder().host_name(o.host_name).allow_always(true);
    if let Some(w) = o.warn {
        b = b.warn(move |line| w(line));
    }
    if let Some(c) = o.caps {
        b = b.caps(c);
    }
    if let Some(n) = o.tail_limit {
        b = b.tail_limit(n);
    }
    if let Some(ms) = o.hold_ms {
        b = b.hold_ms(ms);
    }
    let core = create_core(b)?;
    let mut socket = SocketOptions::builder().caller_check(o.caller_check);
    if let Some(p) = o.socket {
        socket = socket.path(p);
    }
    if let Some(n) = o.max_connections {
        socket = socket.max_connections(n);
    }
    if let Some(t) = o.header_read_timeout {
        socket = socket.header_read_timeout(t);
    }
    if let Some(t) = o.body_read_timeout {
        socket = socket.body_read_timeout(t);
    }
    if let Some(t) = o.write_timeout {
        socket = socket.write_timeout(t);
    }
    if let Some(grace) = o.shutdown_grace {
        socket = socket.shutdown_grace(grace);
    }
    let server = serve(&core, socket).await?;
    Ok(Collie { core, server })
}

impl Collie {
    /// The socket path Collie attaches to.
    pub fn address(&self) -> String {
        self.server.address()
    }

    /// The workspace with this id, created with `title` if it does not exist.
    pub fn workspace(&self, id: &str, title: &str) -> Result<Workspace, RuleError> {
        self.core.workspace(id, title)
    }

    /// Marks the agent ready (Collie shows "starting" until then).
    pub fn ready(&self) {
        self.core.ready();
    }

    /// Serves history from the agent's own store; turns the `history` cap on
    /// when caps were omitted.
    pub fn history(&self, provider: impl HistoryProvider) {
        self.core.history(provider);
    }

    /// Sets the agent-wide hooks of layout writes: rename, close, reopen,
    /// starters.
    pub fn set_hooks(&self, hooks: impl Hooks) {
        self.core.set_hooks(hooks);
    }

    /// Sets what runs when the phone sends text to a pane without a chat
    /// handler of its own ([`Pane::on_send`](durable_core::Pane::on_send)).
    pub fn on_send(&self, handler: impl ChatHandler) {
        self.core.on_send(handler);
    }

    /// Sets what runs when the phone presses an action button on a pane
    /// without an action handler of its own.
    pub fn on_action(&self, handler: impl ActionHandler) {
        self.core.on_action(handler);
    }

    /// Adds a starter button.
    pub fn starter(&self, id: &str, label: &str) -> Result<(), RuleError> {
        self.core.starter(id, label)
    }

    /// The core, for everything else.
    pub fn core(&self) -> &Core {
        &self.core
    }

    /// Stops serving: no new connection, requests in flight finish, the
    /// socket file is removed. Open asks stay open: a shutdown is not an
    /// answer.
    pub async fn close(self) {
        self.server.close().await;
    }
}

/// The conventional socket path of an agent named `app`:
/// `$COLLIE_DURABLE_SOCKET`, else `$XDG_RUNTIME_DIR/<app>/app.sock`, else
/// `/tmp/durable-<uid>/<app>/app.sock`.
///
/// The last one comes with a warn line on standard error: Collie's Linux
/// service runs with a private `/tmp` and cannot see a socket there. Set
/// `XDG_RUNTIME_DIR` (a login session has it) or `COLLIE_DURABLE_SOCKET`.
pub fn socket_path_for(app: &str) -> PathBuf {
    if let Some(p) = std::env::var_os(durable_socket::SOCKET_ENV).filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    match std::env::var_os("XDG_RUNTIME_DIR").filter(|p| !p.is_empty()) {
        Some(dir) => PathBuf::from(dir).join(app).join("app.sock"),
        None => {
            let path = PathBuf::from(format!("/tmp/durable-{}", nix::unistd::geteuid().as_raw()))
                .join(app)
                .join("app.sock");
            crate::serve::default_warn()(&format!(
                "collie: neither COLLIE_DURABLE_SOCKET nor XDG_RUNTIME_DIR is set, so the socket goes to {}; Collie's service runs with a private /tmp and will not see it. Set XDG_RUNTIME_DIR or COLLIE_DURABLE_SOCKET.",
                path.display()
            ));
            path
        }
    }
}
