//! Any core on any transport: [`create_core`] with the system's defaults,
//! and [`serve`] on the private socket or over HTTPS, with one [`Server`]
//! handle for both.

use std::fmt;

use durable_core::{CallerCheckMode, Core, CoreOptionsBuilder};
use durable_types::RuleError;

/// The warn sink the facade installs by default: each line once on standard
/// error, and as a `tracing` event (target `durable`) for programs that
/// have a subscriber.
pub fn default_warn() -> impl Fn(&str) + Send + Sync + Clone + 'static {
    |line: &str| {
        tracing::warn!(target: "durable", "{line}");
        write_stderr(line);
    }
}

fn write_stderr(line: &str) {
    use std::io::Write;
    let mut out: String = line.chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
    out.push('\n');
    let _ = std::io::stderr().lock().write_all(out.as_bytes());
}

/// The seed's `createCore`, with what a running program needs filled in:
/// the system clock, a fresh random epoch, and warn lines on standard error
/// (and `tracing`) — each only where the options leave it unset. Use it for
/// a core with its own receipt store or with `allow_always` off, then
/// [`serve`] it.
///
/// ```no_run
/// use durable_sdk::{CoreOptions, MemoryReceiptStore, create_core};
///
/// # fn run() -> Result<(), durable_sdk::RuleError> {
/// let core = create_core(
///     CoreOptions::builder().host_name("desk").allow_always(false).receipts(MemoryReceiptStore::new()),
/// )?;
/// # Ok(()) }
/// ```
#[cfg(any(feature = "socket", feature = "tls"))]
pub fn create_core(options: CoreOptionsBuilder) -> Result<Core, RuleError> {
    let options = options.or_system(durable_http::SystemClock, durable_http::random_epoch, default_warn());
    Ok(durable_core::create_core(options.build()?))
}

/// Where [`serve`] puts a core: the private Unix socket, or HTTPS with a
/// bearer token. Built from the transport's options with `.into()`.
#[non_exhaustive]
pub enum Transport {
    /// The private Unix socket (Linux, macOS).
    #[cfg(all(feature = "socket", unix))]
    #[cfg_attr(docsrs, doc(cfg(all(feature = "socket", unix))))]
    Socket(durable_socket::SocketOptions),
    /// HTTPS (or loopback plain HTTP) with a bearer token.
    #[cfg(feature = "tls")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tls")))]
    Tls(durable_tls::TlsOptions),
}

impl fmt::Debug for Transport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            #[cfg(all(feature = "socket", unix))]
            Transport::Socket(ref o) => f.debug_tuple("Socket").field(o).finish(),
            #[cfg(feature = "tls")]
            Transport::Tls(ref o) => f.debug_tuple("Tls").field(o).finish(),
        }
    }
}

#[cfg(all(feature = "socket", unix))]
impl From<durable_socket::SocketOptions> for Transport {
    fn from(o: durable_socket::SocketOptions) -> Self {
        Transport::Socket(o)
    }
}

#[cfg(all(feature = "socket", unix))]
impl From<durable_socket::SocketOptionsBuilder> for Transport {
    fn from(o: durable_socket::SocketOptionsBuilder) -> Self {
        Transport::Socket(o.build())
    }
}

#[cfg(feature = "tls")]
impl From<durable_tls::TlsOptions> for Transport {
    fn from(o: durable_tls::TlsOptions) -> Self {
        Transport::Tls(o)
    }
}

/// Why [`serve`] could not start.
#[derive(thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// The socket could not be served (path, privacy, in use, IO).
    #[cfg(all(feature = "socket", unix))]
    #[error(transparent)]
    Socket(#[from] durable_socket::SocketError),
    /// HTTPS could not be served (certificate, token, address, allow-always).
    #[cfg(feature = "tls")]
    #[error(transparent)]
    Tls(#[from] durable_tls::TlsError),
}

/// The message, also for `Debug`: a `main` returning this error prints it
/// with `Debug`, and the message names the rule broken.
impl fmt::Debug for ServeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ServeError: {self}")
    }
}

/// A core being served: on the socket or over HTTPS.
pub struct Server {
    inner: Inner,
}

enum Inner {
    #[cfg(all(feature = "socket", unix))]
    Socket(durable_socket::SocketServer),
    #[cfg(feature = "tls")]
    Tls(durable_tls::TlsServer),
}

impl fmt::Debug for Server {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Server").field("address", &self.address()).finish_non_exhaustive()
    }
}

/// Serves `core` on a transport: `serve(&core, SocketOptions::builder().path(p)).await?`
/// or `serve(&core, TlsOptions::builder().listen(addr).self_signed().build()?).await?`.
/// One core may be served on both at once (call twice). Must be awaited
/// inside a tokio runtime.
#[cfg(any(all(feature = "socket", unix), feature = "tls"))]
pub async fn serve(core: &Core, transport: impl Into<Transport>) -> Result<Server, ServeError> {
    let inner = match transport.into() {
        #[cfg(all(feature = "socket", unix))]
        Transport::Socket(o) => Inner::Socket(durable_socket::serve(core.clone(), o).await?),
        #[cfg(feature = "tls")]
        Transport::Tls(o) => Inner::Tls(durable_tls::serve(core.clone(), o).await?),
    };
    let server = Server { inner };
    tracing::info!(target: "durable", address = %server.address(), "serving");
    Ok(server)
}

impl Server {
    /// What Collie attaches to: the socket path, or `https://host:port`
    /// (`http://` for loopback plain HTTP).
    pub fn address(&self) -> String {
        match self.inner {
            #[cfg(all(feature = "socket", unix))]
            Inner::Socket(ref s) => s.address().display().to_string(),
            #[cfg(feature = "tls")]
            Inner::Tls(ref s) => s.address(),
        }
    }

    /// The SHA-256 fingerprint of a self-signed certificate (HTTPS only), for
    /// Collie to pin.
    pub fn fingerprint(&self) -> Option<String> {
        match self.inner {
            #[cfg(all(feature = "socket", unix))]
            Inner::Socket(_) => None,
            #[cfg(feature = "tls")]
            Inner::Tls(ref s) => s.fingerprint(),
        }
    }

    /// Who may answer: the socket's caller check, or `token` over HTTPS.
    pub fn caller_check(&self) -> CallerCheckMode {
        match self.inner {
            #[cfg(all(feature = "socket", unix))]
            Inner::Socket(ref s) => s.caller_check(),
            #[cfg(feature = "tls")]
            Inner::Tls(_) => CallerCheckMode::Token,
        }
    }

    /// Stops serving: no new connection, requests in flight finish (within
    /// a grace), a socket file is removed. Open asks stay open: a shutdown
    /// is not an answer.
    pub async fn close(self) {
        match self.inner {
            #[cfg(all(feature = "socket", unix))]
            Inner::Socket(s) => s.close().await,
            #[cfg(feature = "tls")]
            Inner::Tls(s) => s.close().await,
        }
    }
}
