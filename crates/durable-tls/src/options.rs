//! The TLS server's options: [`TlsOptions`], built with a builder that
//! checks every start-up rule it can before anything is bound.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use durable_http::Limits;

use crate::error::TlsError;
use crate::token::{self, Secret, TOKEN_ENV, TOKEN_NEXT_ENV};

/// How the server speaks on its address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Mode {
    /// TLS with a certificate chain and key from PEM files.
    CertFiles { cert: PathBuf, key: PathBuf },
    /// TLS with a certificate generated at start (development).
    SelfSigned,
    /// No TLS (loopback with an explicit port only).
    PlainHttp,
}

/// The host of a listen address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Host {
    Ip(IpAddr),
    Name(String),
}

/// A parsed `HOST:PORT` listen address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ListenAddr {
    pub(crate) given: String,
    pub(crate) host: Host,
    pub(crate) port: u16,
}

impl ListenAddr {
    pub(crate) fn parse(given: &str) -> Result<ListenAddr, TlsError> {
        let bad = |reason| TlsError::BadListen { addr: given.to_owned(), reason };
        let (host, port) = if let Some(rest) = given.strip_prefix('[') {
            let (inside, after) = rest.split_once(']').ok_or_else(|| bad("has an unclosed '['"))?;
            let ip: Ipv6Addr = inside.parse().map_err(|_| bad("has no IPv6 address inside [ ]"))?;
            let port = after.strip_prefix(':').ok_or_else(|| bad("needs a port: HOST:PORT"))?;
            (Host::Ip(IpAddr::V6(ip)), port)
        } else {
            let (host, port) = given.rsplit_once(':').ok_or_else(|| bad("needs a port: HOST:PORT"))?;
            if host.contains(':') {
                return Err(bad("puts an IPv6 address without brackets: write [::1]:8443"));
            }
            if host.is_empty() {
                return Err(bad("has no host: write 127.0.0.1:8443, localhost:8443 or 0.0.0.0:8443"));
            }
            let host = match host.parse::<Ipv4Addr>() {
                Ok(ip) => Host::Ip(IpAddr::V4(ip)),
                Err(_) if is_host_name(host) => Host::Name(host.to_owned()),
                Err(_) => return Err(bad("has a host that is neither an IP address nor a host name")),
            };
            (host, port)
        };
        let port = port.parse::<u16>().map_err(|_| bad("needs a port from 0 to 65535: HOST:PORT"))?;
        Ok(ListenAddr { given: given.to_owned(), host, port })
    }

    /// `127.0.0.1` or `localhost`: the only hosts plain HTTP may use.
    pub(crate) fn is_plain_http_host(&self) -> bool {
        match &self.host {
            Host::Ip(ip) => *ip == IpAddr::V4(Ipv4Addr::LOCALHOST),
            Host::Name(name) => name.eq_ignore_ascii_case("localhost"),
        }
    }

    /// What to bind: an IP address as is; `localhost` as `127.0.0.1`
    /// (never what a resolver says); another name through the resolver.
    pub(crate) fn bind_target(&self) -> BindTarget {
        match &self.host {
            Host::Ip(ip) => BindTarget::Addr(SocketAddr::new(*ip, self.port)),
            Host::Name(name) if name.eq_ignore_ascii_case("localhost") => {
                BindTarget::Addr(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), self.port))
            }
            Host::Name(name) => BindTarget::Name(name.clone(), self.port),
        }
    }

    /// The host as it goes in a URL (an IPv6 address in brackets).
    pub(crate) fn url_host(&self) -> String {
        match &self.host {
            Host::Ip(IpAddr::V6(ip)) => format!("[{ip}]"),
            Host::Ip(ip) => ip.to_string(),
            Host::Name(name) => name.clone(),
        }
    }

    /// The names a development certificate covers: this host (unless it is
    /// `0.0.0.0` or `::`), `localhost`, `127.0.0.1` and `::1`.
    pub(crate) fn certificate_names(&self) -> Vec<String> {
        let mut names = Vec::new();
        match &self.host {
            Host::Ip(ip) if !ip.is_unspecified() => names.push(ip.to_string()),
            Host::Ip(_) => {}
            Host::Name(name) => names.push(name.to_ascii_lowercase()),
        }
        for default in ["localhost", "127.0.0.1", "::1"] {
            if !names.iter().any(|n| n == default) {
                names.push(default.to_owned());
            }
        }
        names
    }
}

pub(crate) enum BindTarget {
    Addr(SocketAddr),
    Name(String, u16),
}

fn is_host_name(host: &str) -> bool {
    host.len() <= 253
        && host.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}

/// Options of [`serve`](crate::serve). Built with [`TlsOptions::builder`],
/// whose [`build`](TlsOptionsBuilder::build) checks the start-up rules and
/// reads the tokens (from the options, else from `COLLIE_TOKEN` and
/// `COLLIE_TOKEN_NEXT`, once).
///
/// `Debug` shows no token: each is printed as `"<redacted>"`.
#[derive(Clone)]
pub struct TlsOptions {
    pub(crate) listen: ListenAddr,
    pub(crate) mode: Mode,
    pub(crate) token: Secret,
    pub(crate) next_token: Option<Secret>,
    pub(crate) allow_always: bool,
    pub(crate) http: Limits,
    pub(crate) handshake_timeout: Duration,
}

impl fmt::Debug for TlsOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsOptions")
            .field("listen", &self.listen.given)
            .field("mode", &self.mode)
            .field("token", &"<redacted>")
            .field("next_token", &self.next_token.as_ref().map(|_| "<redacted>"))
            .field("allow_always", &self.allow_always)
            .field("http", &self.http)
            .field("handshake_timeout", &self.handshake_timeout)
            .finish()
    }
}

impl TlsOptions {
    /// The default time a client has to finish the TLS handshake: 10 s.
    pub const DEFAULT_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

    /// A builder.
    pub fn builder() -> TlsOptionsBuilder {
        TlsOptionsBuilder::default()
    }

    /// The listen address, as given.
    pub fn listen(&self) -> &str {
        &self.listen.given
    }

    /// Whether the server speaks plain HTTP (loopback only).
    pub fn is_plain_http(&self) -> bool {
        self.mode == Mode::PlainHttp
    }

    /// Whether the server generates a self-signed certificate at start.
    pub fn is_self_signed(&self) -> bool {
        self.mode == Mode::SelfSigned
    }

    /// The certificate and key files, when they come from PEM files.
    pub fn cert_pem_files(&self) -> Option<(&Path, &Path)> {
        match &self.mode {
            Mode::CertFiles { cert, key } => Some((cert, key)),
            _ => None,
        }
    }

    /// How many tokens are accepted: 1, or 2 during a rotation.
    pub fn token_count(&self) -> usize {
        1 + usize::from(self.next_token.is_some())
    }

    /// Whether a core built with `allow_always = true` may be served.
    pub fn allow_always(&self) -> bool {
        self.allow_always
    }

    /// The connection limits in force.
    pub fn limits(&self) -> &Limits {
        &self.http
    }

    /// The TLS handshake timeout in force.
    pub fn handshake_timeout(&self) -> Duration {
        self.handshake_timeout
    }
}

/// Builds [`TlsOptions`]. A listen address, one of
/// [`cert_pem_files`](Self::cert_pem_files), [`self_signed`](Self::self_signed)
/// or [`plain_http`](Self::plain_http), and a token (given, or in
/// `COLLIE_TOKEN`) are required.
#[derive(Default)]
pub struct TlsOptionsBuilder {
    listen: Option<String>,
    mode: Option<Mode>,
    conflicting_modes: bool,
    token: Option<Secret>,
    next_token: Option<Secret>,
    allow_always: bool,
    http: Limits,
    handshake_timeout: Option<Duration>,
}

impl fmt::Debug for TlsOptionsBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsOptionsBuilder")
            .field("listen", &self.listen)
            .field("mode", &self.mode)
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("next_token", &self.next_token.as_ref().map(|_| "<redacted>"))
            .field("allow_always", &self.allow_always)
            .field("http", &self.http)
            .field("handshake_timeout", &self.handshake_timeout)
            .finish()
    }
}

impl TlsOptionsBuilder {
    /// The address to listen on, `HOST:PORT`: `127.0.0.1:8443`,
    /// `localhost:8443` (bound as `127.0.0.1`), `0.0.0.0:8443` (every
    /// interface), `[::1]:8443`, or a host name. Port 0 binds any free port
    /// ([`TlsServer::address`](crate::TlsServer::address) tells which) — with
    /// TLS only.
    pub fn listen(mut self, addr: impl Into<String>) -> Self {
        self.listen = Some(addr.into());
        self
    }

    /// Serve TLS with the certificate chain (the server's certificate first,
    /// then its intermediates) and the private key (PKCS#8, PKCS#1 or SEC1)
    /// from these PEM files, read at [`serve`](crate::serve).
    pub fn cert_pem_files(mut self, cert: impl Into<PathBuf>, key: impl Into<PathBuf>) -> Self {
        self.set_mode(Mode::CertFiles { cert: cert.into(), key: key.into() });
        self
    }

    /// Development: serve TLS with a self-signed certificate generated at
    /// start for the listen host, `localhost`, `127.0.0.1` and `::1`. Its
    /// SHA-256 fingerprint is written through the core's warn sink and given
    /// by [`TlsServer::fingerprint`](crate::TlsServer::fingerprint), to
    /// check what a client sees. A new certificate each start: not for
    /// production.
    pub fn self_signed(mut self) -> Self {
        self.set_mode(Mode::SelfSigned);
        self
    }

    /// No TLS: plain `http://`. Allowed only on `127.0.0.1` or `localhost`
    /// with an explicit, non-zero port (the seed's rule, which Collie
    /// enforces too); any other address fails [`build`](Self::build) with
    /// [`TlsError::PlainHttpNotLoopback`], as the token would cross the
    /// network unencrypted.
    pub fn plain_http(mut self) -> Self {
        self.set_mode(Mode::PlainHttp);
        self
    }

    /// The token every request must carry (`Authorization: Bearer
    /// <token>`), at least 32 bytes of printable ASCII. Given, the
    /// environment is not read.
    pub fn token(mut self, token: impl Into<String>) -> Self {
        self.token = Some(Secret::new(token.into()));
        self
    }

    /// A second accepted token, for a rotation without lock-out. Requires
    /// [`token`](Self::token).
    pub fn next_token(mut self, token: impl Into<String>) -> Self {
        self.next_token = Some(Secret::new(token.into()));
        self
    }

    /// Take the tokens from `COLLIE_TOKEN` and, when set and not empty,
    /// `COLLIE_TOKEN_NEXT`, read once by [`build`](Self::build). This is
    /// the default when no [`token`](Self::token) is given; it forgets a
    /// token given before it.
    pub fn tokens_from_env(mut self) -> Self {
        self.token = None;
        self
    }

    /// Keep the core's allow-always options over HTTPS. Default false:
    /// [`serve`](crate::serve) turns allow-always off on the core it serves
    /// (asks raised from then on offer no `always: true` option). Over
    /// HTTPS the token is the only barrier: anyone who holds it can answer
    /// every card, so an agent served this way should offer only Allow and
    /// Deny, never a permanent permission (contract §1.2).
    pub fn allow_always(mut self, allow: bool) -> Self {
        self.allow_always = allow;
        self
    }

    /// The connection limits: timeouts, the cap on connections (TLS
    /// handshakes included), the shutdown grace ([`Limits`] says each one's
    /// default and rule). Past the cap a new connection displaces one that
    /// has not yet made a request with an accepted token — from the peer
    /// address holding the most such connections, its oldest — so a flood
    /// without the token never takes Collie's place.
    pub fn limits(mut self, limits: Limits) -> Self {
        self.http = limits;
        self
    }

    /// How long a client may take to finish the TLS handshake; past it the
    /// connection is dropped. Default 10 s. The handshake runs on the
    /// connection's own task, so a slow client never holds up others.
    pub fn handshake_timeout(mut self, timeout: Duration) -> Self {
        self.handshake_timeout = Some(timeout);
        self
    }

    fn set_mode(&mut self, mode: Mode) {
        let other = |old: &Mode| std::mem::discriminant(old) != std::mem::discriminant(&mode);
        if self.mode.as_ref().is_some_and(other) {
            self.conflicting_modes = true;
        }
        self.mode = Some(mode);
    }

    /// Checks the rules and builds the options: the listen address parses;
    /// exactly one of certificate files, self-signed or plain HTTP; plain
    /// HTTP only on `127.0.0.1`/`localhost` with a port; the token (given,
    /// or read now from `COLLIE_TOKEN`, with `COLLIE_TOKEN_NEXT` when set)
    /// is at least 32 bytes of printable ASCII. Errors name the rule and
    /// the token's source, never a token.
    pub fn build(self) -> Result<TlsOptions, TlsError> {
        let listen = ListenAddr::parse(self.listen.as_deref().ok_or(TlsError::NoListen)?)?;
        if self.conflicting_modes {
            return Err(TlsError::ConflictingModes);
        }
        let mode = self.mode.ok_or(TlsError::NoCertificate)?;
        if mode == Mode::PlainHttp {
            if !listen.is_plain_http_host() {
                return Err(TlsError::PlainHttpNotLoopback { addr: listen.given });
            }
            if listen.port == 0 {
                return Err(TlsError::PlainHttpNeedsPort { addr: listen.given });
            }
        }
        let (token, next_token) = match self.token {
            Some(token) => {
                token::check_rules("token", &token)?;
                if let Some(next) = &self.next_token {
                    token::check_rules("next_token", next)?;
                }
                (token, self.next_token)
            }
            None => {
                if self.next_token.is_some() {
                    return Err(TlsError::NextTokenWithoutToken);
                }
                let token = token::from_env(TOKEN_ENV)?.ok_or(TlsError::NoToken)?;
                token::check_rules(TOKEN_ENV, &token)?;
                let next = token::from_env(TOKEN_NEXT_ENV)?;
                if let Some(next) = &next {
                    token::check_rules(TOKEN_NEXT_ENV, next)?;
                }
                (token, next)
            }
        };
        Ok(TlsOptions {
            listen,
            mode,
            token,
            next_token,
            allow_always: self.allow_always,
            http: self.http,
            handshake_timeout: self.handshake_timeout.unwrap_or(TlsOptions::DEFAULT_HANDSHAKE_TIMEOUT),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOKEN: &str = "tok-0123456789abcdef0123456789abcdef";
    const NEXT: &str = "nxt-fedcba9876543210fedcba9876543210";

    fn parse(s: &str) -> Result<ListenAddr, TlsError> {
        ListenAddr::parse(s)
    }

    #[test]
    fn listen_addresses_parse_as_host_and_port() {
        let a = parse("127.0.0.1:8443").unwrap();
        assert_eq!((a.host.clone(), a.port), (Host::Ip("127.0.0.1".parse().unwrap()), 8443));
        assert!(a.is_plain_http_host());
        let a = parse("localhost:0").unwrap();
        assert_eq!((a.host.clone(), a.port), (Host::Name("localhost".into()), 0));
        assert!(a.is_plain_http_host());
        assert!(matches!(a.bind_target(), BindTarget::Addr(s) if s.ip() == Ipv4Addr::LOCALHOST));
        let a = parse("[::1]:8443").unwrap();
        assert_eq!(a.url_host(), "[::1]");
        assert!(!a.is_plain_http_host());
        let a = parse("0.0.0.0:8443").unwrap();
        assert!(!a.is_plain_http_host());
        assert_eq!(a.certificate_names(), ["localhost", "127.0.0.1", "::1"]);
        let a = parse("agent.example.com:443").unwrap();
        assert_eq!(a.certificate_names(), ["agent.example.com", "localhost", "127.0.0.1", "::1"]);
        for bad in
            ["", "8443", "127.0.0.1", ":8443", "::1:8443", "[::1]8443", "[::1", "host:99999", "a b:1", "h:x"]
        {
            assert!(matches!(parse(bad), Err(TlsError::BadListen { .. })), "{bad:?}");
        }
    }

    fn base() -> TlsOptionsBuilder {
        TlsOptions::builder().token(TOKEN)
    }

    #[test]
    fn plain_http_on_0_0_0_0_is_refused() {
        let e = base().listen("0.0.0.0:8080").plain_http().build().unwrap_err();
        assert!(matches!(&e, TlsError::PlainHttpNotLoopback { addr } if addr == "0.0.0.0:8080"), "{e}");
        assert!(e.to_string().contains("plain HTTP rule"), "{e}");
        for other in ["[::1]:8080", "192.0.2.1:8080", "example.com:8080"] {
            let e = base().listen(other).plain_http().build().unwrap_err();
            assert!(matches!(e, TlsError::PlainHttpNotLoopback { .. }), "{other}");
        }
    }

    #[test]
    fn plain_http_needs_an_explicit_port_on_loopback() {
        let e = base().listen("127.0.0.1:0").plain_http().build().unwrap_err();
        assert!(matches!(e, TlsError::PlainHttpNeedsPort { .. }));
        let e = base().listen("localhost").plain_http().build().unwrap_err();
        assert!(matches!(e, TlsError::BadListen { .. }));
        assert!(base().listen("127.0.0.1:8080").plain_http().build().unwrap().is_plain_http());
        assert!(base().listen("LocalHost:8080").plain_http().build().is_ok());
        // TLS may bind any free port.
        assert!(base().listen("0.0.0.0:0").self_signed().build().is_ok());
    }

    #[test]
    fn exactly_one_mode_and_a_listen_address_are_required() {
        assert!(matches!(base().self_signed().build(), Err(TlsError::NoListen)));
        assert!(matches!(base().listen("127.0.0.1:1").build(), Err(TlsError::NoCertificate)));
        let e = base().listen("127.0.0.1:1").self_signed().plain_http().build().unwrap_err();
        assert!(matches!(e, TlsError::ConflictingModes));
        let o = base().listen("127.0.0.1:1").cert_pem_files("a.pem", "b.pem").build().unwrap();
        assert_eq!(o.cert_pem_files(), Some((Path::new("a.pem"), Path::new("b.pem"))));
    }

    #[test]
    fn explicit_tokens_follow_the_token_rule_and_name_the_option() {
        let e = TlsOptions::builder().listen("127.0.0.1:1").self_signed().token("short").build().unwrap_err();
        assert!(matches!(e, TlsError::TokenTooShort { which: "token", len: 5 }));
        assert!(!format!("{e} {e:?}").contains("short"));
        let e = base().listen("127.0.0.1:1").self_signed().next_token("x".repeat(31)).build().unwrap_err();
        assert!(matches!(e, TlsError::TokenTooShort { which: "next_token", len: 31 }));
        let e = TlsOptions::builder()
            .listen("127.0.0.1:1")
            .self_signed()
            .tokens_from_env()
            .next_token(NEXT)
            .build()
            .unwrap_err();
        assert!(matches!(e, TlsError::NextTokenWithoutToken));
        let o = base().listen("127.0.0.1:1").self_signed().next_token(NEXT).build().unwrap();
        assert_eq!(o.token_count(), 2);
    }

    #[test]
    fn a_debug_print_of_the_options_shows_no_token() {
        let builder = base()
            .listen("127.0.0.1:8443")
            .self_signed()
            .next_token(NEXT)
            .limits(Limits::new().header_read_timeout(Duration::from_secs(5)));
        let shown = format!("{builder:?} {builder:#?}");
        assert!(!shown.contains(TOKEN) && !shown.contains(NEXT), "{shown}");
        assert!(shown.contains("<redacted>"), "{shown}");
        let options = builder.build().unwrap();
        let shown = format!("{options:?} {options:#?}");
        assert!(!shown.contains(TOKEN) && !shown.contains(NEXT), "{shown}");
        assert!(shown.contains(r#"token: "<redacted>""#), "{shown}");
        assert!(shown.contains(r#"next_token: Some("<redacted>")"#), "{shown}");
        assert!(shown.contains("127.0.0.1:8443"), "{shown}");
    }

    #[test]
    fn the_defaults() {
        let o = base().listen("127.0.0.1:1").self_signed().build().unwrap();
        assert!(!o.allow_always());
        assert!(o.is_self_signed());
        assert_eq!(o.token_count(), 1);
        assert_eq!(o.handshake_timeout(), Duration::from_secs(10));
        assert_eq!(o.limits().header_read_timeout_value(), Duration::from_secs(30));
        assert_eq!(o.limits().body_read_timeout_value(), Duration::from_secs(30));
        assert_eq!(o.limits().write_timeout_value(), Duration::from_secs(30));
        assert_eq!(o.limits().max_connections_value(), 64);
        assert_eq!(o.listen(), "127.0.0.1:1");
    }

    #[test]
    fn the_connection_limits_are_set_by_the_builder() {
        let o = base()
            .listen("127.0.0.1:1")
            .self_signed()
            .limits(
                Limits::new()
                    .header_read_timeout(Duration::from_millis(1))
                    .body_read_timeout(Duration::from_millis(2))
                    .write_timeout(Duration::from_millis(3))
                    .max_connections(5)
                    .shutdown_grace(Duration::from_millis(4)),
            )
            .build()
            .unwrap();
        assert_eq!(o.limits().header_read_timeout_value(), Duration::from_millis(1));
        assert_eq!(o.limits().body_read_timeout_value(), Duration::from_millis(2));
        assert_eq!(o.limits().write_timeout_value(), Duration::from_millis(3));
        assert_eq!(o.limits().max_connections_value(), 5);
        assert_eq!(o.limits().shutdown_grace_value(), Duration::from_millis(4));
    }
}
