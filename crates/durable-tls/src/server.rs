//! `serve`: bind, and serve the core over TLS (or plain HTTP on loopback)
//! with bearer tokens; `TlsServer`: the running server and its `close`.

use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

use durable_http::{Accepted, CallerSource, CancellationToken, Listen, Server};
use durable_runtime::Driver;

use crate::cert;
use crate::error::TlsError;
use crate::options::{BindTarget, Mode, TlsOptions};
use crate::token::TokenSet;

/// Serves `core` over HTTPS with bearer tokens (contract §1.2), or over
/// plain HTTP on `127.0.0.1`/`localhost`.
///
/// In order: the certificate
/// is read from its PEM files or generated (self-signed: its SHA-256
/// fingerprint is written through the core's warn sink); the address is
/// bound; unless the options keep it
/// ([`allow_always`](crate::TlsOptionsBuilder::allow_always)), allow-always
/// is turned off on the core (the asks it raises from then on offer only
/// Allow and Deny, contract §1.2) — a start that fails leaves it as it was;
/// the core is told its caller check is `token` (so `GET /hello`
/// says `"callerCheck": "token"`). Then every connection does its TLS
/// handshake (ALPN `http/1.1`, within the handshake timeout) on its own
/// task, and every request on it must carry `Authorization: Bearer
/// <token>` with one of the accepted tokens — else `401 token-refused`,
/// and the core never sees it. The core's deadlines and jobs are driven
/// until [`TlsServer::close`].
///
/// Must be awaited inside a tokio runtime (it spawns the server's tasks).
pub async fn serve(core: Driver, options: TlsOptions) -> Result<TlsServer, TlsError> {
    let (acceptor, fingerprint) = match &options.mode {
        Mode::PlainHttp => (None, None),
        Mode::CertFiles { cert, key } => {
            (Some(TlsAcceptor::from(cert::server_config(cert::from_pem_files(cert, key)?)?)), None)
        }
        Mode::SelfSigned => {
            let identity = cert::self_signed(options.listen.certificate_names())?;
            let fingerprint = cert::fingerprint(&identity.chain[0]);
            (Some(TlsAcceptor::from(cert::server_config(identity)?)), Some(fingerprint))
        }
    };
    let bind_error = |source| TlsError::Bind { addr: options.listen.given.clone(), source };
    let listener = match options.listen.bind_target() {
        BindTarget::Addr(addr) => TcpListener::bind(addr).await,
        BindTarget::Name(name, port) => TcpListener::bind((name.as_str(), port)).await,
    }
    .map_err(bind_error)?;
    let local_addr = listener.local_addr().map_err(bind_error)?;
    // Only once serving cannot fail any more: a failed start leaves the
    // core as it was (an agent may fall back to another transport).
    if !options.allow_always {
        core.forbid_allow_always();
    }
    let scheme = if acceptor.is_some() { "https" } else { "http" };
    let address = format!("{scheme}://{}:{}", options.listen.url_host(), local_addr.port());

    if let Some(fingerprint) = &fingerprint {
        core.collie().warn(&format!(
            "durable: serving {address} with a self-signed certificate (development only), SHA-256 fingerprint {fingerprint}"
        ));
    }
    let tokens = TokenSet::new(std::iter::once(&options.token).chain(options.next_token.as_ref()));
    let callers = CallerSource::bearer(move |presented| tokens.accepts(presented));
    let closing = CancellationToken::new();
    let server = match acceptor {
        Some(acceptor) => Server::start(
            core,
            TlsListen {
                listener,
                acceptor,
                callers,
                handshake_timeout: options.handshake_timeout,
                closing: closing.clone(),
            },
            options.http,
        ),
        None => Server::start(core, PlainListen { listener, callers }, options.http),
    };
    Ok(TlsServer { address, local_addr, fingerprint, closing, server: Some(server) })
}

/// A running TLS server. [`close`](Self::close) it to stop; dropping it
/// stops accepting without waiting for the requests in flight.
#[must_use = "dropping a TlsServer stops it"]
pub struct TlsServer {
    address: String,
    local_addr: SocketAddr,
    fingerprint: Option<String>,
    /// Fired first at close: handshakes still under way are dropped (they
    /// carry no request in flight).
    closing: CancellationToken,
    server: Option<Server>,
}

impl fmt::Debug for TlsServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsServer")
            .field("address", &self.address)
            .field("fingerprint", &self.fingerprint)
            .finish_non_exhaustive()
    }
}

impl TlsServer {
    /// The server's URL, the seed's `collie.address`: `https://HOST:PORT`
    /// (or `http://` for plain HTTP), with the listen host as given and the
    /// port actually bound (the real one when port 0 was asked).
    pub fn address(&self) -> String {
        self.address.clone()
    }

    /// The socket address actually bound.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// With [`self_signed`](crate::TlsOptionsBuilder::self_signed): the
    /// SHA-256 fingerprint of the generated certificate's DER bytes, as
    /// `AB:CD:…` (upper-case hex pairs). `None` otherwise.
    pub fn fingerprint(&self) -> Option<String> {
        self.fingerprint.clone()
    }

    /// Stops accepting, lets the requests in flight finish (idle keep-alive
    /// connections close at once), stops driving the core, and returns.
    /// Open asks stay open: a shutdown is not an answer.
    pub async fn close(mut self) {
        self.closing.cancel();
        if let Some(server) = self.server.take() {
            server.close().await;
        }
    }
}

/// `collie.serve(options)`: [`Collie::serve`](durable_runtime::Collie::serve)
/// starts [`serve`] with these options, and `close` stops it.
impl durable_runtime::Serve for TlsOptions {
    type Error = TlsError;

    fn shutdown_grace(&self) -> Duration {
        self.limits().shutdown_grace_value()
    }

    async fn serve(self, driver: Driver) -> Result<Box<dyn durable_runtime::Served>, TlsError> {
        Ok(Box::new(serve(driver, self).await?))
    }
}

impl durable_runtime::Served for TlsServer {
    fn address(&self) -> String {
        TlsServer::address(self)
    }

    fn fingerprint(&self) -> Option<String> {
        TlsServer::fingerprint(self)
    }

    fn caller_check(&self) -> durable_runtime::CallerCheckMode {
        durable_runtime::CallerCheckMode::Token
    }

    fn close(self: Box<Self>) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> {
        Box::pin(TlsServer::close(*self))
    }
}

impl Drop for TlsServer {
    fn drop(&mut self) {
        self.closing.cancel();
    }
}

/// Accepts TCP connections and does each one's TLS handshake on the
/// connection's own task.
struct TlsListen {
    listener: TcpListener,
    acceptor: TlsAcceptor,
    callers: CallerSource,
    handshake_timeout: Duration,
    closing: CancellationToken,
}

impl Listen for TlsListen {
    type Io = TlsStream<TcpStream>;

    async fn accept(&mut self) -> io::Result<Accepted<Self::Io>> {
        let (stream, peer) = self.listener.accept().await?;
        let _ = stream.set_nodelay(true);
        let acceptor = self.acceptor.clone();
        let callers = self.callers.clone();
        let limit = self.handshake_timeout;
        let closing = self.closing.clone();
        let incoming = Box::pin(async move {
            let handshake = tokio::time::timeout(limit, acceptor.accept(stream));
            let tls = tokio::select! {
                done = handshake => {
                    done.map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "TLS handshake timed out"))??
                }
                () = closing.cancelled() => {
                    return Err(io::Error::new(io::ErrorKind::ConnectionAborted, "the server is closing"));
                }
            };
            Ok((tls, callers))
        });
        Ok(Accepted::new(incoming).peer(peer.ip()))
    }

    fn transport(&self) -> &'static str {
        "https"
    }
}

/// Accepts plain TCP connections (loopback only: the options refused any
/// other address).
struct PlainListen {
    listener: TcpListener,
    callers: CallerSource,
}

impl Listen for PlainListen {
    type Io = TcpStream;

    async fn accept(&mut self) -> io::Result<Accepted<Self::Io>> {
        let (stream, peer) = self.listener.accept().await?;
        let _ = stream.set_nodelay(true);
        let callers = self.callers.clone();
        Ok(Accepted::new(Box::pin(async move { Ok((stream, callers)) })).peer(peer.ip()))
    }

    fn transport(&self) -> &'static str {
        "http"
    }
}

#[cfg(test)]
mod tests {
    use durable_http::{SystemClock, random_epoch};
    use durable_runtime::{Collie, CoreOptions, create_core};

    use super::*;

    const TOKEN: &str = "tok-0123456789abcdef0123456789abcdef";

    fn core(allow_always: bool) -> Collie {
        create_core(
            CoreOptions::builder()
                .clock(SystemClock)
                .epoch(random_epoch())
                .allow_always(allow_always)
                .build()
                .unwrap(),
        )
    }

    fn options() -> crate::TlsOptionsBuilder {
        TlsOptions::builder().listen("127.0.0.1:0").self_signed().token(TOKEN)
    }

    #[tokio::test]
    async fn serving_turns_allow_always_off_unless_the_options_keep_it() {
        let c = core(true);
        let server = serve(c.driver(), options().build().unwrap()).await.unwrap();
        assert!(!c.allow_always(), "HTTPS turns allow-always off");
        assert!(c.options().allow_always(), "the options the core was built with are kept");
        server.close().await;
        let c = core(true);
        let server = serve(c.driver(), options().allow_always(true).build().unwrap()).await.unwrap();
        assert!(c.allow_always(), "kept when the options say so");
        server.close().await;
        let c = core(false);
        let server = serve(c.driver(), options().allow_always(true).build().unwrap()).await.unwrap();
        assert!(!c.allow_always(), "the transport never turns it on");
        server.close().await;
        let c = core(true);
        let missing = TlsOptions::builder()
            .listen("127.0.0.1:0")
            .cert_pem_files("/nonexistent/cert.pem", "/nonexistent/key.pem")
            .token(TOKEN);
        assert!(serve(c.driver(), missing.build().unwrap()).await.is_err());
        assert!(c.allow_always(), "a start that failed leaves allow-always as it was");
    }

    #[tokio::test]
    async fn the_address_has_the_real_port_and_the_fingerprint_is_set_when_self_signed() {
        let c = core(false);
        let server = serve(c.driver(), options().build().unwrap()).await.unwrap();
        let port = server.local_addr().port();
        assert_ne!(port, 0);
        assert_eq!(server.address(), format!("https://127.0.0.1:{port}"));
        assert_eq!(server.fingerprint().map(|f| f.len()), Some(95));
        assert!(!format!("{server:?}").contains(TOKEN));
        server.close().await;
        // Closed: nothing listens on the port any more.
        assert!(TcpStream::connect(("127.0.0.1", port)).await.is_err());
    }

    /// The options as a transport value: `collie.serve(options)` starts
    /// the server, the agent says its address, fingerprint and check, and
    /// `close` stops it.
    #[tokio::test]
    async fn collie_serves_tls_options_and_close_stops_listening() {
        let c = core(true);
        c.serve(options().build().unwrap()).await.unwrap();
        let address = c.address();
        let port: u16 = address.rsplit(':').next().unwrap().parse().unwrap();
        assert_eq!(address, format!("https://127.0.0.1:{port}"));
        assert_eq!(c.fingerprint().map(|f| f.len()), Some(95));
        assert_eq!(c.caller_check(), Some(durable_runtime::CallerCheckMode::Token));
        assert!(!c.allow_always(), "HTTPS turns allow-always off");
        assert!(TcpStream::connect(("127.0.0.1", port)).await.is_ok());
        c.close().await;
        assert!(TcpStream::connect(("127.0.0.1", port)).await.is_err());
        assert!(c.addresses().is_empty());
    }

    #[tokio::test]
    async fn a_port_in_use_is_a_bind_error_naming_the_address() {
        let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = format!("127.0.0.1:{}", taken.local_addr().unwrap().port());
        let e =
            serve(core(false).driver(), options().listen(addr.clone()).build().unwrap()).await.unwrap_err();
        assert!(matches!(&e, TlsError::Bind { addr: a, .. } if *a == addr), "{e}");
    }
}
