//! The phone's and the doctor's way to an agent: HTTP/1.1 over the private
//! Unix socket (docs/wire.md §1.1), or over HTTPS with a bearer token and a
//! pinned certificate (§1.2), or plain HTTP on loopback. One kept-alive
//! connection, opened again when the agent closed it.

use std::fmt;
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, LengthLimitError, Limited};
use hyper::client::conn::http1::SendRequest;
use hyper::{HeaderMap, Method, Request};
use hyper_util::rt::TokioIo;
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
#[cfg(unix)]
use tokio::net::UnixStream;

use crate::pin::Pinned;

/// How long a read may take: an agent answers a poll from memory, so one
/// that is silent this long is stuck (the phone says so, and tries again).
const READ_TIMEOUT: Duration = Duration::from_secs(5);

/// How long a write may take: it may wait 5 s for a pane's lock (§8), then
/// for the agent's handler.
const WRITE_TIMEOUT: Duration = Duration::from_secs(15);

/// The largest answer `durable` reads from an agent unless told otherwise
/// (`--max-answer-mib`): a conforming snapshot or history page can be large,
/// but an agent that streams without end must not take the machine's memory.
pub(crate) const ANSWER_MAX_MIB: u64 = 64;

/// The most `durable` reads of one answer (its body), in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct AnswerLimit {
    mib: u64,
}

impl Default for AnswerLimit {
    fn default() -> AnswerLimit {
        AnswerLimit { mib: ANSWER_MAX_MIB }
    }
}

impl AnswerLimit {
    /// A limit of `mib` MiB (at least 1).
    pub(crate) fn from_mib(mib: u64) -> AnswerLimit {
        AnswerLimit { mib: mib.max(1) }
    }

    /// The limit in bytes.
    pub(crate) fn bytes(self) -> usize {
        usize::try_from(self.mib.saturating_mul(1024 * 1024)).unwrap_or(usize::MAX)
    }

    /// The message for an answer that passed the limit: it names the limit
    /// and the option that raises it.
    pub(crate) fn passed(self, what: &str) -> String {
        format!(
            "{what}: the answer is larger than {} MiB, the most durable reads \
             (--max-answer-mib raises it)",
            self.mib
        )
    }

    /// Reads a body whole, but never more than the limit: past it, the
    /// error of [`AnswerLimit::passed`] (a `Content-Length` past it is
    /// refused before a byte of the body is read).
    pub(crate) async fn read<B>(self, body: B, what: &str) -> Result<Bytes, String>
    where
        B: hyper::body::Body,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        // A link error's text is its message.
        self.read_body(body, what).await.map_err(|e| e.to_string())
    }

    /// [`AnswerLimit::read`], with the kind of failure kept.
    pub(crate) async fn read_body<B>(self, body: B, what: &str) -> Result<Bytes, LinkError>
    where
        B: hyper::body::Body,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        // A `Content-Length` past the limit: refused before a byte is read.
        if body.size_hint().lower() > self.bytes() as u64 {
            return Err(LinkError::TooLarge(self.passed(what)));
        }
        match Limited::new(body, self.bytes()).collect().await {
            Ok(collected) => Ok(collected.to_bytes()),
            Err(e) if e.downcast_ref::<LengthLimitError>().is_some() => {
                Err(LinkError::TooLarge(self.passed(what)))
            }
            Err(e) => Err(LinkError::Http(format!("{what}: reading the answer: {e}"))),
        }
    }
}

/// A bearer token: never printed, not even by `Debug`.
#[derive(Clone)]
pub(crate) struct Token(String);

impl Token {
    pub(crate) fn new(token: String) -> Token {
        Token(token)
    }

    /// The token itself, for an `Authorization` header written by hand
    /// (conformance's raw exchanges); never for a message.
    pub(crate) fn secret(&self) -> &str {
        &self.0
    }

    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }

    /// Printable ASCII without spaces, as the agent requires (§1.2).
    pub(crate) fn is_printable(&self) -> bool {
        self.0.bytes().all(|b| b.is_ascii_graphic())
    }

    /// `COLLIE_TOKEN`, when set and not empty.
    pub(crate) fn from_env() -> Option<Token> {
        std::env::var("COLLIE_TOKEN").ok().filter(|t| !t.is_empty()).map(Token)
    }
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Token(<not shown>)")
    }
}

/// An agent's address given as a URL: `https://host[:port]` or
/// `http://127.0.0.1:port` (loopback only, with a port).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Url {
    pub(crate) https: bool,
    pub(crate) host: String,
    pub(crate) port: u16,
    /// Whether the port was written.
    pub(crate) explicit_port: bool,
}

impl Url {
    /// Parses `scheme://host[:port][/]`. The rules of §1.2 are the doctor's
    /// to check ([`Url::rule`]); this only reads the shape.
    pub(crate) fn parse(text: &str) -> Result<Url, String> {
        let (scheme, rest) =
            text.split_once("://").ok_or_else(|| format!("{text:?} is not a URL (https://host:port)"))?;
        let https = match scheme.to_ascii_lowercase().as_str() {
            "https" => true,
            "http" => false,
            other => return Err(format!("the scheme {other:?} is neither https nor http")),
        };
        let authority = rest.strip_suffix('/').unwrap_or(rest);
        if authority.contains(['/', '?', '#', '@']) {
            return Err(format!("{text:?}: give the agent's address only, without a path or user"));
        }
        let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
            let (host, after) = v6.split_once(']').ok_or_else(|| format!("{text:?}: an unclosed [ ]"))?;
            (host.to_owned(), after.strip_prefix(':'))
        } else {
            match authority.rsplit_once(':') {
                Some((h, p)) => (h.to_owned(), Some(p)),
                None => (authority.to_owned(), None),
            }
        };
        if host.is_empty() {
            return Err(format!("{text:?} names no host"));
        }
        let explicit_port = port.is_some();
        let port = match port {
            Some(p) => p.parse().map_err(|_| format!("{text:?}: the port {p:?} is not a port number"))?,
            None if https => 443,
            None => 80,
        };
        Ok(Url { https, host, port, explicit_port })
    }

    /// Whether the host is the loopback address or `localhost`.
    pub(crate) fn is_loopback(&self) -> bool {
        self.host.eq_ignore_ascii_case("localhost")
            || self.host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
    }

    /// The rule of §1.2: HTTPS anywhere, plain HTTP only on `127.0.0.1` or
    /// `localhost` with an explicit port.
    pub(crate) fn rule(&self) -> Result<(), String> {
        if self.https {
            return Ok(());
        }
        let loopback = self.host == "127.0.0.1" || self.host.eq_ignore_ascii_case("localhost");
        match (loopback, self.explicit_port) {
            (true, true) => Ok(()),
            (true, false) => Err("plain http needs an explicit port (http://127.0.0.1:PORT)".into()),
            (false, _) => Err(format!("plain http is only for 127.0.0.1 or localhost, not {}", self.host)),
        }
    }

    fn authority(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

impl fmt::Display for Url {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}://{}", if self.https { "https" } else { "http" }, self.authority())
    }
}

/// What every command line says of the agent: where it is (`--socket
/// PATH`, `--url URL`, else `COLLIE_DURABLE_SOCKET`), a certificate pin
/// (`--fingerprint`) and `--insecure`.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct AgentArgs {
    /// The agent's private socket (without --socket and --url:
    /// $COLLIE_DURABLE_SOCKET).
    #[arg(long, value_name = "PATH", conflicts_with = "url")]
    socket: Option<PathBuf>,
    /// The agent's address: https://HOST:PORT, or http://127.0.0.1:PORT; the
    /// token comes from COLLIE_TOKEN.
    #[arg(long, value_name = "URL")]
    url: Option<String>,
    /// The SHA-256 fingerprint of the agent's certificate (64 hex digits,
    /// pairs with `:` allowed; the agent prints it with --self-signed).
    #[arg(long, value_name = "SHA256", value_parser = fingerprint_arg)]
    pub(crate) fingerprint: Option<[u8; 32]>,
    /// Trust the certificate the agent shows (loopback only).
    #[arg(long)]
    pub(crate) insecure: bool,
    /// The largest answer read from the agent, in MiB: past it, the answer
    /// is an error that says so.
    #[arg(long, value_name = "MIB", default_value_t = ANSWER_MAX_MIB,
          value_parser = clap::value_parser!(u64).range(1..=65536))]
    max_answer_mib: u64,
}

fn fingerprint_arg(text: &str) -> Result<[u8; 32], String> {
    crate::pin::fingerprint_in(text)
        .ok_or_else(|| "the certificate's SHA-256: 64 hex digits, pairs with `:` allowed".to_owned())
}

impl AgentArgs {
    /// The most `durable` reads of one answer (`--max-answer-mib`).
    pub(crate) fn answer_limit(&self) -> AnswerLimit {
        AnswerLimit::from_mib(self.max_answer_mib)
    }

    /// The socket path, or the URL as given (each command reads it); `Err`
    /// when neither is said.
    pub(crate) fn place(&self) -> Result<Result<PathBuf, String>, String> {
        // The variable is read only when no flag says where: an agent's
        // socket exported for the terminal never turns a --url into a conflict.
        let from_env =
            || std::env::var_os("COLLIE_DURABLE_SOCKET").filter(|s| !s.is_empty()).map(PathBuf::from);
        match (&self.socket, &self.url) {
            (Some(path), None) if !path.as_os_str().is_empty() => Ok(Ok(path.clone())),
            (_, Some(url)) => Ok(Err(url.clone())),
            (None, None) => from_env()
                .map(Ok)
                .ok_or_else(|| "say where the agent is: --socket PATH or --url URL".to_owned()),
            (Some(_), None) => Err("--socket needs a path".into()),
        }
    }
}

#[derive(Clone, Debug)]
pub(crate) enum Target {
    Socket(PathBuf),
    Url(Url),
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Socket(p) => write!(f, "{}", p.display()),
            Target::Url(u) => write!(f, "{u}"),
        }
    }
}

/// Why a request got no answer.
#[derive(Debug)]
pub(crate) enum LinkError {
    /// The connection could not be made (the io error's kind is kept:
    /// `ConnectionRefused` on a socket file is a stale socket, §1.1).
    Connect {
        // Read by the doctor's socket checks (Unix only).
        #[cfg_attr(not(unix), allow(dead_code))]
        kind: std::io::ErrorKind,
        message: String,
    },
    /// The TLS handshake failed (a certificate that does not match the pin).
    Tls(String),
    /// The HTTP exchange failed or timed out.
    Http(String),
    /// The agent answered, but with more than the answer limit
    /// (`--max-answer-mib`): the message names the limit and the option.
    TooLarge(String),
}

impl fmt::Display for LinkError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LinkError::Connect { message, .. }
            | LinkError::Tls(message)
            | LinkError::Http(message)
            | LinkError::TooLarge(message) => f.write_str(message),
        }
    }
}

/// One answer, read whole.
#[derive(Debug)]
pub(crate) struct Answer {
    pub(crate) status: u16,
    pub(crate) headers: HeaderMap,
    /// The body as JSON; `None` when it is empty or not JSON.
    pub(crate) json: Option<Value>,
}

impl Answer {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// A connection to an agent, over either transport.
pub(crate) trait Io: AsyncRead + AsyncWrite + Unpin + Send + 'static {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send + 'static> Io for T {}

/// A client for one agent.
pub(crate) struct Link {
    target: Target,
    token: Option<Token>,
    tls: Option<(Arc<Pinned>, Arc<rustls::ClientConfig>)>,
    conn: Option<SendRequest<Full<Bytes>>>,
    answer_limit: AnswerLimit,
}

impl fmt::Debug for Link {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Link")
            .field("target", &self.target)
            .field("token", &self.token)
            .finish_non_exhaustive()
    }
}

impl Link {
    /// A client; over HTTPS the certificate must match `pin`, or with
    /// `pin = None` the first leaf seen is trusted (the caller decides when
    /// that is allowed).
    pub(crate) fn new(target: Target, token: Option<Token>, pin: Option<[u8; 32]>) -> Link {
        let tls = match &target {
            Target::Url(u) if u.https => {
                let verifier = Pinned::verifier(pin);
                Some((verifier.clone(), verifier.client_config_for()))
            }
            _ => None,
        };
        Link { target, token, tls, conn: None, answer_limit: AnswerLimit::default() }
    }

    /// The same link, reading answers up to `limit`.
    pub(crate) fn with_answer_limit(mut self, limit: AnswerLimit) -> Link {
        self.answer_limit = limit;
        self
    }

    /// The most this link reads of one answer.
    pub(crate) fn answer_limit(&self) -> AnswerLimit {
        self.answer_limit
    }

    pub(crate) fn target(&self) -> &Target {
        &self.target
    }

    /// The fingerprint of the certificate the last handshake showed.
    pub(crate) fn seen_fingerprint(&self) -> Option<[u8; 32]> {
        self.tls.as_ref().and_then(|(v, _)| v.seen())
    }

    /// The `Host` header for this agent.
    pub(crate) fn host_header(&self) -> String {
        match &self.target {
            Target::Socket(_) => "localhost".to_owned(),
            Target::Url(u) => u.authority(),
        }
    }

    /// Opens a new connection to the agent (the TLS handshake, checked
    /// against the pin, included): the one way to reach an agent, which
    /// conformance's raw exchanges use too.
    pub(crate) async fn connect(&self) -> Result<Box<dyn Io>, LinkError> {
        let connect_error = |what: String, e: std::io::Error| LinkError::Connect {
            kind: e.kind(),
            message: format!("{what}: {e}"),
        };
        match &self.target {
            #[cfg(unix)]
            Target::Socket(path) => {
                let stream = UnixStream::connect(path)
                    .await
                    .map_err(|e| connect_error(format!("connecting to {}", path.display()), e))?;
                Ok(Box::new(stream))
            }
            // The private socket is a Unix socket (docs/wire.md §1.1).
            #[cfg(not(unix))]
            Target::Socket(path) => Err(connect_error(
                format!("connecting to {}", path.display()),
                std::io::Error::new(
                    std::io::ErrorKind::Unsupported,
                    "the private socket is Unix-only: give the agent's --url",
                ),
            )),
            Target::Url(url) => {
                let tcp = TcpStream::connect((url.host.as_str(), url.port))
                    .await
                    .map_err(|e| connect_error(format!("connecting to {}", url.authority()), e))?;
                let Some((_, config)) = &self.tls else { return Ok(Box::new(tcp)) };
                let name = match url.host.parse::<IpAddr>() {
                    Ok(ip) => rustls::pki_types::ServerName::IpAddress(ip.into()),
                    Err(_) => rustls::pki_types::ServerName::try_from(url.host.clone())
                        .map_err(|_| LinkError::Tls(format!("{:?} is not a host name", url.host)))?,
                };
                let tls = tokio_rustls::TlsConnector::from(config.clone())
                    .connect(name, tcp)
                    .await
                    .map_err(|e| LinkError::Tls(format!("TLS with {}: {e}", url.authority())))?;
                Ok(Box::new(tls))
            }
        }
    }

    /// A connection ready for a request: the kept one, or a new one.
    async fn sender(&mut self) -> Result<(SendRequest<Full<Bytes>>, bool), LinkError> {
        if let Some(mut sender) = self.conn.take() {
            if sender.ready().await.is_ok() {
                return Ok((sender, true));
            }
        }
        let io = self.connect().await?;
        let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(io))
            .await
            .map_err(|e| LinkError::Http(format!("HTTP handshake: {e}")))?;
        tokio::spawn(async move {
            let _ = connection.await;
        });
        Ok((sender, false))
    }

    pub(crate) async fn get(&mut self, path: &str, headers: &[(&str, &str)]) -> Result<Answer, LinkError> {
        self.request(Method::GET, path, None, headers).await
    }

    pub(crate) async fn post(&mut self, path: &str, body: &Value) -> Result<Answer, LinkError> {
        self.request(Method::POST, path, Some(Bytes::from(body.to_string())), &[]).await
    }

    /// One request; on a kept connection the agent closed meanwhile, tried
    /// once more on a new one (a write is safe to repeat: its request id
    /// makes the agent replay it, §9).
    pub(crate) async fn request(
        &mut self,
        method: Method,
        path: &str,
        body: Option<Bytes>,
        headers: &[(&str, &str)],
    ) -> Result<Answer, LinkError> {
        let exchange = async {
            let mut retried = false;
            loop {
                let (mut sender, reused) = self.sender().await?;
                let request = self.build(method.clone(), path, body.clone(), headers)?;
                match sender.send_request(request).await {
                    Ok(response) => {
                        let (parts, body) = response.into_parts();
                        let bytes = match self.answer_limit.read_body(body, &format!("{method} {path}")).await
                        {
                            Ok(bytes) => bytes,
                            Err(e) => {
                                // The rest of a cut answer is still on the
                                // connection: it is not used again.
                                self.conn = None;
                                return Err(e);
                            }
                        };
                        self.conn = Some(sender);
                        let json = serde_json::from_slice(&bytes).ok();
                        return Ok(Answer { status: parts.status.as_u16(), headers: parts.headers, json });
                    }
                    Err(e) if reused && !retried => {
                        retried = true;
                        let _ = e;
                    }
                    Err(e) => return Err(LinkError::Http(format!("{method} {path}: {e}"))),
                }
            }
        };
        let limit = if method == Method::GET { READ_TIMEOUT } else { WRITE_TIMEOUT };
        let result = tokio::time::timeout(limit, exchange).await;
        match result {
            Ok(answer) => answer,
            Err(_) => {
                self.conn = None;
                Err(LinkError::Http(format!("{method} {path}: no answer in {} s", limit.as_secs())))
            }
        }
    }

    fn build(
        &self,
        method: Method,
        path: &str,
        body: Option<Bytes>,
        headers: &[(&str, &str)],
    ) -> Result<Request<Full<Bytes>>, LinkError> {
        let mut b = Request::builder().method(method).uri(path).header("host", self.host_header());
        if body.is_some() {
            b = b.header("content-type", "application/json");
        }
        if let (Some(token), Target::Url(_)) = (&self.token, &self.target) {
            b = b.header("authorization", format!("Bearer {}", token.0));
        }
        for (name, value) in headers {
            b = b.header(*name, *value);
        }
        // The message names the path only: the token must never reach it.
        b.body(Full::new(body.unwrap_or_default()))
            .map_err(|_| LinkError::Http(format!("a request to {path} could not be written")))
    }
}

/// Percent-encodes an id or cursor for a URL path or query (§2: Collie
/// percent-encodes, the agent decodes).
pub(crate) fn enc(text: &str) -> String {
    let mut out = String::new();
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_read_and_their_rule_checked() {
        let u = Url::parse("https://127.0.0.1:8443").unwrap();
        assert_eq!((u.https, u.host.as_str(), u.port), (true, "127.0.0.1", 8443));
        assert!(u.rule().is_ok() && u.is_loopback());
        let u = Url::parse("https://agent.example/").unwrap();
        assert_eq!((u.port, u.explicit_port), (443, false));
        assert!(!u.is_loopback());
        assert!(Url::parse("http://127.0.0.1:9000").unwrap().rule().is_ok());
        assert!(Url::parse("http://localhost").unwrap().rule().unwrap_err().contains("explicit port"));
        assert!(Url::parse("http://10.0.0.2:80").unwrap().rule().unwrap_err().contains("only for"));
        let v6 = Url::parse("https://[::1]:8443").unwrap();
        assert_eq!((v6.host.as_str(), v6.port), ("::1", 8443));
        assert!(v6.is_loopback());
        assert_eq!(v6.to_string(), "https://[::1]:8443");
        for bad in
            ["127.0.0.1:8443", "ftp://x", "https://", "https://h:port", "https://h/v1/state", "https://u@h"]
        {
            assert!(Url::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn tokens_never_show_in_debug() {
        let token = Token::new("s3cret-s3cret-s3cret-s3cret-s3cret".into());
        let link =
            Link::new(Target::Url(Url::parse("https://127.0.0.1:1").unwrap()), Some(token.clone()), None);
        assert!(!format!("{token:?} {link:?}").contains("s3cret"));
        assert!(token.is_printable() && token.len() >= 32);
    }

    #[test]
    fn ids_are_percent_encoded() {
        assert_eq!(enc("ticket-1"), "ticket-1");
        assert_eq!(enc("a b/c?d#é+"), "a%20b%2Fc%3Fd%23%C3%A9%2B");
    }
}
