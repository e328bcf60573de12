//! Where an agent is served: [`Transport`], a value — the private socket or
//! HTTPS with a token — carrying its connection [`Limits`].

use std::fmt;
#[cfg(any(all(feature = "socket", unix), feature = "tls"))]
use std::path::PathBuf;
use std::time::Duration;

pub use durable_http::Limits;
use durable_runtime::{Driver, Serve, Served};

use crate::error::Error;

/// Where [`Collie::serve`](crate::Collie::serve) and
/// [`open_collie`](crate::open_collie) put the agent: the private Unix
/// socket (feature `socket`, the default; Linux and macOS), or HTTPS with a
/// bearer token (feature `tls`). Switching is one line:
///
/// ```no_run
/// use durable_sdk::{Limits, Transport};
///
/// let socket = Transport::socket(); // $COLLIE_DURABLE_SOCKET, else a path named after the agent
/// let small = Transport::socket().limits(Limits::new().max_connections(8));
/// # #[cfg(feature = "tls")]
/// let https = Transport::https("0.0.0.0:8443").self_signed(); // token from COLLIE_TOKEN
/// ```
///
/// An option that belongs to the other transport (a caller check on HTTPS,
/// a certificate on the socket) is not ignored: serving fails with
/// [`Error::Misapplied`] naming it.
///
/// Over HTTPS the token is the only barrier, so serving there turns the
/// agent's allow-always options off (only Allow and Deny, contract §1.2)
/// unless `allow_always(true)` (feature `tls`) keeps them.
#[cfg_attr(feature = "tls", doc = "")]
#[cfg_attr(feature = "tls", doc = "See [`Transport::allow_always`].")]
pub struct Transport {
    kind: Kind,
    limits: Option<Limits>,
    misapplied: Option<&'static str>,
}

enum Kind {
    #[cfg(all(feature = "socket", unix))]
    Socket { path: Option<PathBuf>, caller_check: durable_socket::CallerCheck },
    #[cfg(feature = "tls")]
    Https(Box<durable_tls::TlsOptionsBuilder>),
}

impl fmt::Debug for Transport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("Transport");
        // By place, not by reference: with neither transport compiled in
        // (the socket feature on Windows) the enum is empty.
        match self.kind {
            #[cfg(all(feature = "socket", unix))]
            Kind::Socket { ref path, ref caller_check } => {
                d.field("socket", path).field("caller_check", caller_check);
            }
            // The builder's Debug hides the tokens.
            #[cfg(feature = "tls")]
            Kind::Https(ref b) => {
                d.field("https", b);
            }
        }
        d.field("limits", &self.limits).finish_non_exhaustive()
    }
}

impl Transport {
    fn new(kind: Kind) -> Self {
        Transport { kind, limits: None, misapplied: None }
    }

    /// The private Unix socket at the conventional path of the agent:
    /// `$COLLIE_DURABLE_SOCKET`, else `$XDG_RUNTIME_DIR/<host name>/app.sock`,
    /// else `/tmp/durable-<uid>/<host name>/app.sock` ([`socket_path_for`]).
    /// Linux and macOS.
    #[cfg(all(feature = "socket", unix))]
    #[cfg_attr(docsrs, doc(cfg(all(feature = "socket", unix))))]
    pub fn socket() -> Self {
        Transport::new(Kind::Socket { path: None, caller_check: durable_socket::CallerCheck::default() })
    }

    /// The private Unix socket at `path`.
    #[cfg(all(feature = "socket", unix))]
    #[cfg_attr(docsrs, doc(cfg(all(feature = "socket", unix))))]
    pub fn socket_at(path: impl Into<PathBuf>) -> Self {
        Transport::new(Kind::Socket {
            path: Some(path.into()),
            caller_check: durable_socket::CallerCheck::default(),
        })
    }

    /// HTTPS on `listen` (`HOST:PORT`: `127.0.0.1:8443`, `0.0.0.0:8443`,
    /// `[::1]:8443`; port 0 binds any free port), with the token from
    /// `COLLIE_TOKEN` (and `COLLIE_TOKEN_NEXT` during a rotation) unless
    /// [`token`](Self::token) gives one. Needs a certificate:
    /// [`cert_pem_files`](Self::cert_pem_files) or
    /// [`self_signed`](Self::self_signed) (or, on loopback only,
    /// [`plain_http`](Self::plain_http)).
    #[cfg(feature = "tls")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tls")))]
    pub fn https(listen: impl Into<String>) -> Self {
        Transport::new(Kind::Https(Box::new(durable_tls::TlsOptionsBuilder::default().listen(listen))))
    }

    /// The connection limits: timeouts, the cap on connections, the
    /// shutdown grace (each one's default is on [`Limits`]).
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = Some(limits);
        self
    }

    /// Socket only: whether writes from the agent's own processes are
    /// refused (default [`CallerCheck::On`](crate::transport::CallerCheck::On)).
    #[cfg(all(feature = "socket", unix))]
    #[cfg_attr(docsrs, doc(cfg(all(feature = "socket", unix))))]
    pub fn caller_check(mut self, check: durable_socket::CallerCheck) -> Self {
        match &mut self.kind {
            Kind::Socket { caller_check, .. } => *caller_check = check,
            #[cfg(feature = "tls")]
            Kind::Https(_) => self.misapplied = Some("caller_check"),
        }
        self
    }

    #[cfg(feature = "tls")]
    fn tls(
        mut self,
        option: &'static str,
        f: impl FnOnce(durable_tls::TlsOptionsBuilder) -> durable_tls::TlsOptionsBuilder,
    ) -> Self {
        match self.kind {
            Kind::Https(b) => self.kind = Kind::Https(Box::new(f(*b))),
            #[cfg(all(feature = "socket", unix))]
            Kind::Socket { .. } => self.misapplied = Some(option),
        }
        let _ = option;
        self
    }

    /// HTTPS only: the certificate chain and private key from these PEM
    /// files (read when served).
    #[cfg(feature = "tls")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tls")))]
    pub fn cert_pem_files(self, cert: impl Into<PathBuf>, key: impl Into<PathBuf>) -> Self {
        let (cert, key) = (cert.into(), key.into());
        self.tls("cert_pem_files", |b| b.cert_pem_files(cert, key))
    }

    /// HTTPS only, for development: a self-signed certificate made at
    /// start; [`Collie::fingerprint`](crate::Collie::fingerprint) gives its
    /// SHA-256 fingerprint for Collie to pin.
    #[cfg(feature = "tls")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tls")))]
    pub fn self_signed(self) -> Self {
        self.tls("self_signed", |b| b.self_signed())
    }

    /// HTTPS only: plain `http://`, allowed only on `127.0.0.1` or
    /// `localhost` with an explicit port (the token still required).
    #[cfg(feature = "tls")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tls")))]
    pub fn plain_http(self) -> Self {
        self.tls("plain_http", |b| b.plain_http())
    }

    /// HTTPS only: the token every request must carry, at least 32 bytes
    /// of printable ASCII (instead of `COLLIE_TOKEN`).
    #[cfg(feature = "tls")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tls")))]
    pub fn token(self, token: impl Into<String>) -> Self {
        let token = token.into();
        self.tls("token", |b| b.token(token))
    }

    /// HTTPS only: a second accepted token, for a rotation without
    /// lock-out. Requires [`token`](Self::token).
    #[cfg(feature = "tls")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tls")))]
    pub fn next_token(self, token: impl Into<String>) -> Self {
        let token = token.into();
        self.tls("next_token", |b| b.next_token(token))
    }

    /// HTTPS only: keep the agent's allow-always options (default false:
    /// serving over HTTPS turns them off, as anyone holding the token could
    /// grant a permanent permission).
    #[cfg(feature = "tls")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tls")))]
    pub fn allow_always(self, allow: bool) -> Self {
        self.tls("allow_always", |b| b.allow_always(allow))
    }

    /// HTTPS only: how long a client may take to finish the TLS handshake
    /// (default 10 s).
    #[cfg(feature = "tls")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tls")))]
    pub fn handshake_timeout(self, timeout: Duration) -> Self {
        self.tls("handshake_timeout", |b| b.handshake_timeout(timeout))
    }
}

/// [`Collie::serve`](crate::Collie::serve) takes a transport.
impl Serve for Transport {
    type Error = Error;

    /// The shutdown grace of its limits.
    fn shutdown_grace(&self) -> Duration {
        self.limits.as_ref().map_or(Limits::DEFAULT_SHUTDOWN_GRACE, Limits::shutdown_grace_value)
    }

    /// Starts serving `driver`'s agent (its host name names the default
    /// socket path).
    async fn serve(self, driver: Driver) -> Result<Box<dyn Served>, Error> {
        if let Some(option) = self.misapplied {
            return Err(Error::Misapplied { option, transport: self.kind.name() });
        }
        let limits = self.limits.unwrap_or_default();
        let served: Box<dyn Served> = match self.kind {
            #[cfg(all(feature = "socket", unix))]
            Kind::Socket { path, caller_check } => {
                let collie = driver.collie();
                let host = collie.options().host_name();
                let path = path.unwrap_or_else(|| socket_path_with(host, &|line| collie.warn(line)));
                let options = durable_socket::SocketOptions::builder()
                    .path(path)
                    .caller_check(caller_check)
                    .limits(limits);
                Box::new(durable_socket::serve(driver, options.build()).await?)
            }
            #[cfg(feature = "tls")]
            Kind::Https(b) => Box::new(durable_tls::serve(driver, b.limits(limits).build()?).await?),
        };
        Ok(served)
    }
}

impl Kind {
    fn name(&self) -> &'static str {
        match *self {
            #[cfg(all(feature = "socket", unix))]
            Kind::Socket { .. } => "the socket",
            #[cfg(feature = "tls")]
            Kind::Https(_) => "HTTPS",
        }
    }
}

/// The conventional socket path of an agent named `app`:
/// `$COLLIE_DURABLE_SOCKET`, else `$XDG_RUNTIME_DIR/<app>/app.sock`, else
/// `/tmp/durable-<uid>/<app>/app.sock`.
///
/// The last one comes with a warn line on standard error: Collie's Linux
/// service runs with a private `/tmp` and cannot see a socket there. Set
/// `XDG_RUNTIME_DIR` (a login session has it) or `COLLIE_DURABLE_SOCKET`.
#[cfg(all(feature = "socket", unix))]
#[cfg_attr(docsrs, doc(cfg(all(feature = "socket", unix))))]
pub fn socket_path_for(app: &str) -> PathBuf {
    socket_path_with(app, &crate::warn::default_warn())
}

/// [`socket_path_for`], its warn line through `warn` (an agent's own sink).
#[cfg(all(feature = "socket", unix))]
fn socket_path_with(app: &str, warn: &dyn Fn(&str)) -> PathBuf {
    if let Some(p) = std::env::var_os(durable_socket::SOCKET_ENV).filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    match std::env::var_os("XDG_RUNTIME_DIR").filter(|p| !p.is_empty()) {
        Some(dir) => PathBuf::from(dir).join(app).join("app.sock"),
        None => {
            let path = PathBuf::from(format!("/tmp/durable-{}", nix::unistd::geteuid().as_raw()))
                .join(app)
                .join("app.sock");
            warn(&format!(
                "collie: neither COLLIE_DURABLE_SOCKET nor XDG_RUNTIME_DIR is set, so the socket goes to {}; Collie's service runs with a private /tmp and will not see it. Set XDG_RUNTIME_DIR or COLLIE_DURABLE_SOCKET.",
                path.display()
            ));
            path
        }
    }
}

#[cfg(all(test, feature = "tls"))]
mod tests {
    use super::*;

    #[test]
    fn a_transport_s_debug_shows_no_token() {
        let (token, next) = ("tok-0123456789abcdef0123456789abcdef", "nxt-0123456789abcdef0123456789abcdef");
        let t = Transport::https("127.0.0.1:0").self_signed().token(token).next_token(next);
        let shown = format!("{t:?} {t:#?}");
        assert!(!shown.contains(token) && !shown.contains(next), "{shown}");
        assert!(shown.contains("<redacted>") && shown.contains("127.0.0.1:0"), "{shown}");
    }
}
