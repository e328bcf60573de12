//! The HTTP/1.1 client that plays Collie: it reaches the agent the one way
//! the phone and the doctor do (`link.rs`: the private socket, or
//! HTTPS pinned to a fingerprint, or trusting the first leaf on loopback),
//! one connection per request, and keeps the raw exchanges a conformance
//! run needs (another `Authorization`, several requests on one connection,
//! an answer read while the body is still being sent).
//!
//! Every read of what the agent sends is bounded: a body by the link's
//! answer limit (`--max-answer-mib`, 64 MiB by default; an announced
//! `Content-Length` past it is refused before a byte is read), a head by
//! [`HEAD_MAX`]; past them the case fails with an error naming the limit.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Body;
use hyper::header::HeaderMap;
use hyper::{Method, Request};
use hyper_util::rt::TokioIo;
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncWrite};

use super::check::CaseResult;
use crate::link::{AnswerLimit, Io, Link, Target, Token, Url};

/// How long one request may take before the case fails (the slowest legitimate
/// answer is a `busy` after 5 s, or a write accepted after a 6 s knob delay).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(20);

/// The longest answer head the raw readers take (hyper's own reader stops
/// near 400 KiB): a head without end is an error, not a buffer that grows.
pub const HEAD_MAX: usize = 64 * 1024;

/// Which `Authorization` header a request carries (HTTPS only; the socket needs none).
#[derive(Clone, Debug)]
pub enum Auth {
    /// The agent's token over HTTPS, nothing over the socket.
    Default,
    /// No header at all.
    Missing,
    /// This bearer token.
    Bearer(String),
}

/// A client for one running agent (cheap to clone: the clones share the pin).
#[derive(Clone, Debug)]
pub struct Client {
    link: Arc<Link>,
    token: Option<Token>,
}

/// One answer, read whole.
#[derive(Debug)]
pub struct Resp {
    /// `METHOD path`, for messages.
    pub what: String,
    /// The status code.
    pub status: u16,
    /// The answer's headers.
    pub headers: HeaderMap,
    /// The body as sent.
    pub body: Bytes,
    /// The body parsed as JSON, `Null` when it is empty or not JSON.
    pub json: Value,
}

/// The fingerprint (SHA-256 of the leaf certificate) in a line the agent
/// printed, in its usual spellings.
pub fn fingerprint_in(line: &str) -> Option<[u8; 32]> {
    crate::pin::fingerprint_in(line)
}

impl Client {
    /// A client for the agent's private socket.
    pub fn socket(path: PathBuf) -> Client {
        Client::at(Target::Socket(path), None, None, AnswerLimit::default())
    }

    /// A client for an agent served over HTTPS at `addr` with `token`: the
    /// certificate must match `pin`, or, without one, the first leaf seen
    /// is trusted (loopback only: the caller's rule).
    pub fn https(addr: SocketAddr, pin: Option<[u8; 32]>, token: Option<String>) -> Client {
        let url = Url { https: true, host: addr.ip().to_string(), port: addr.port(), explicit_port: true };
        Client::at(Target::Url(url), token.map(Token::new), pin, AnswerLimit::default())
    }

    /// A client reading answers up to `limit`.
    pub(crate) fn at(
        target: Target,
        token: Option<Token>,
        pin: Option<[u8; 32]>,
        limit: AnswerLimit,
    ) -> Client {
        let token = match &target {
            Target::Url(_) => token,
            Target::Socket(_) => None,
        };
        Client { link: Arc::new(Link::new(target, token.clone(), pin).with_answer_limit(limit)), token }
    }

    /// The most this client reads of one answer.
    pub(crate) fn answer_limit(&self) -> AnswerLimit {
        self.link.answer_limit()
    }

    /// Whether requests go over TCP (HTTPS or loopback HTTP) rather than the socket.
    pub fn is_tcp(&self) -> bool {
        matches!(self.link.target(), Target::Url(_))
    }

    /// The fingerprint the last TLS handshake showed.
    pub fn seen_fingerprint(&self) -> Option<[u8; 32]> {
        self.link.seen_fingerprint()
    }

    /// Opens one connection to the agent (the TLS handshake included).
    async fn connect(&self) -> CaseResult<Box<dyn Io>> {
        self.link.connect().await.map_err(|e| e.to_string())
    }

    fn authorization(&self, auth: &Auth) -> Option<String> {
        match auth {
            Auth::Default => self.token.as_ref().map(|t| format!("Bearer {}", t.secret())),
            Auth::Missing => None,
            Auth::Bearer(t) => Some(format!("Bearer {t}")),
        }
    }

    /// `GET path` with the agent's token.
    pub async fn get(&self, path: &str) -> CaseResult<Resp> {
        self.request(Method::GET, path, None, &[], Auth::Default).await
    }

    /// `POST path` with this JSON body.
    pub async fn post(&self, path: &str, body: &Value) -> CaseResult<Resp> {
        self.post_raw(path, Bytes::from(body.to_string())).await
    }

    /// `POST path` with these bytes as the body.
    pub async fn post_raw(&self, path: &str, body: Bytes) -> CaseResult<Resp> {
        self.request(Method::POST, path, Some(body), &[], Auth::Default).await
    }

    /// One request on a connection of its own.
    pub async fn request(
        &self,
        method: Method,
        path: &str,
        body: Option<Bytes>,
        headers: &[(&str, &str)],
        auth: Auth,
    ) -> CaseResult<Resp> {
        let what = format!("{method} {}", short(path));
        let mut builder = Request::builder().method(method).uri(path).header("host", self.link.host_header());
        if body.is_some() {
            builder = builder.header("content-type", "application/json");
        }
        if let Some(value) = self.authorization(&auth) {
            builder = builder.header("authorization", value);
        }
        for (name, value) in headers {
            builder = builder.header(*name, *value);
        }
        // The message names the path only: the token must never reach it.
        let request = builder
            .body(Full::new(body.unwrap_or_default()))
            .map_err(|_| format!("{what}: cannot be written"))?;
        let limit = self.answer_limit();
        let exchange = async { exchange(self.connect().await?, request, limit).await };
        let (status, headers, body) = tokio::time::timeout(REQUEST_TIMEOUT, exchange)
            .await
            .map_err(|_| format!("{what}: no answer in {} s", REQUEST_TIMEOUT.as_secs()))?
            .map_err(|e| format!("{what}: {e}"))?;
        let json = serde_json::from_slice(&body).unwrap_or(Value::Null);
        Ok(Resp { what, status, headers, body, json })
    }

    /// GETs on one kept-alive connection, one after the other (Collie's polls).
    pub async fn get_on_one_connection(&self, paths: &[&str]) -> CaseResult<Vec<Resp>> {
        let requests: Vec<Request<Full<Bytes>>> = paths
            .iter()
            .map(|path| {
                let mut b =
                    Request::builder().method(Method::GET).uri(*path).header("host", self.link.host_header());
                if let Some(value) = self.authorization(&Auth::Default) {
                    b = b.header("authorization", value);
                }
                b.body(Full::new(Bytes::new())).map_err(|_| format!("GET {} cannot be written", short(path)))
            })
            .collect::<CaseResult<_>>()?;
        let limit = self.answer_limit();
        let run = async { exchange_many(self.connect().await?, requests, limit).await };
        let answers = tokio::time::timeout(REQUEST_TIMEOUT, run)
            .await
            .map_err(|_| format!("no answers in {} s on one connection", REQUEST_TIMEOUT.as_secs()))??;
        Ok(answers
            .into_iter()
            .zip(paths)
            .map(|((status, headers, body), path)| {
                let json = serde_json::from_slice(&body).unwrap_or(Value::Null);
                Resp { what: format!("GET {} (kept-alive)", short(path)), status, headers, body, json }
            })
            .collect())
    }

    /// A POST written by hand while the answer is read at the same time, so an
    /// early answer (a `413` before the whole body is sent, then a closed
    /// connection) is still seen. Only `Content-Length` answers are read.
    pub async fn post_early_answer(&self, path: &str, body: Bytes) -> CaseResult<Resp> {
        let what = format!("POST {} ({} bytes, answer read while sending)", short(path), body.len());
        let mut head = format!(
            "POST {path} HTTP/1.1\r\nhost: {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n",
            self.link.host_header(),
            body.len()
        );
        if let Some(value) = self.authorization(&Auth::Default) {
            head.push_str(&format!("authorization: {value}\r\n"));
        }
        head.push_str("\r\n");
        let limit = self.answer_limit();
        let exchange = async { raw_exchange(self.connect().await?, head, body, limit).await };
        let (status, headers, body) = tokio::time::timeout(REQUEST_TIMEOUT, exchange)
            .await
            .map_err(|_| format!("{what}: no answer in {} s", REQUEST_TIMEOUT.as_secs()))?
            .map_err(|e| format!("{what}: {e}"))?;
        let json = serde_json::from_slice(&body).unwrap_or(Value::Null);
        Ok(Resp { what, status, headers, body, json })
    }

    /// Two requests written at once on one connection with this
    /// `Authorization` (or none): the first answer, then whether the agent
    /// closed the connection instead of answering the second (§1.2: nothing
    /// more is served after a `401`).
    pub async fn closes_after_first(&self, auth: Auth) -> CaseResult<(Resp, bool)> {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut one = format!("GET /hello HTTP/1.1\r\nhost: {}\r\n", self.link.host_header());
        if let Some(value) = self.authorization(&auth) {
            one.push_str(&format!("authorization: {value}\r\n"));
        }
        one.push_str("\r\n");
        let what = "GET /hello twice on one connection".to_owned();
        // Two answers and their heads, at most.
        let limit = self.answer_limit();
        let most = limit.bytes().saturating_add(2 * HEAD_MAX);
        let run = async {
            let mut io = self.connect().await?;
            io.write_all(format!("{one}{one}").as_bytes()).await.map_err(|e| format!("writing: {e}"))?;
            let mut got = Vec::new();
            let mut buf = [0u8; 8192];
            loop {
                match io.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => got.extend_from_slice(&buf[..n]),
                }
                if got.len() > most {
                    return Err(limit.passed("the answers"));
                }
            }
            let (status, headers, start, length) =
                parse_head(&got)?.ok_or_else(|| format!("no whole answer in {} bytes", got.len()))?;
            let end = start.saturating_add(length).min(got.len());
            let body = Bytes::copy_from_slice(&got[start..end]);
            let second = got[end..].windows(5).any(|w| w == b"HTTP/");
            Ok::<_, String>(((status, headers, body), !second))
        };
        let ((status, headers, body), closed) = tokio::time::timeout(REQUEST_TIMEOUT, run)
            .await
            .map_err(|_| format!("{what}: the connection stayed open {} s", REQUEST_TIMEOUT.as_secs()))?
            .map_err(|e| format!("{what}: {e}"))?;
        let json = serde_json::from_slice(&body).unwrap_or(Value::Null);
        Ok((Resp { what, status, headers, body, json }, closed))
    }
}

async fn raw_exchange<S>(
    stream: S,
    head: String,
    body: Bytes,
    limit: AnswerLimit,
) -> CaseResult<(u16, HeaderMap, Bytes)>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (mut reader, mut writer) = tokio::io::split(stream);
    // The agent may answer and close before taking the whole body: write errors
    // are expected, and the writer is dropped once the answer is read.
    let writer_task = tokio::spawn(async move {
        if writer.write_all(head.as_bytes()).await.is_ok() && writer.write_all(&body).await.is_ok() {
            let _ = writer.flush().await;
        }
        writer
    });
    let read = async move {
        let mut got = Vec::new();
        let mut buf = [0u8; 8192];
        loop {
            if let Some((status, headers, start, length)) = parse_head(&got)? {
                // A length the agent made up never overflows, nor grows the buffer past the limit.
                if length > limit.bytes() {
                    return Err(limit.passed(&format!("content-length {length}")));
                }
                let end = start + length;
                if got.len() >= end {
                    return Ok((status, headers, Bytes::copy_from_slice(&got[start..end])));
                }
            } else if got.len() > HEAD_MAX {
                return Err(format!("no end of the answer's head in {HEAD_MAX} bytes"));
            }
            match reader.read(&mut buf).await {
                Ok(0) => return Err(format!("the connection closed after {} bytes of answer", got.len())),
                Ok(n) => got.extend_from_slice(&buf[..n]),
                Err(e) => return Err(format!("reading the answer after {} bytes: {e}", got.len())),
            }
        }
    };
    let answer = read.await;
    writer_task.abort();
    answer
}

/// Status, headers, body start and `Content-Length` of a complete answer head.
fn parse_head(got: &[u8]) -> CaseResult<Option<(u16, HeaderMap, usize, usize)>> {
    let Some(end) = got.windows(4).position(|w| w == b"\r\n\r\n") else { return Ok(None) };
    let head = std::str::from_utf8(&got[..end]).map_err(|_| "an answer head that is not UTF-8".to_owned())?;
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or("");
    let status = status_line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("status line {status_line:?}"))?;
    let mut headers = HeaderMap::new();
    let mut length = 0;
    for line in lines {
        if let Some((name, value)) = line.split_once(':') {
            let (name, value) = (name.trim().to_ascii_lowercase(), value.trim());
            if name == "content-length" {
                length = value.parse().map_err(|_| format!("content-length {value:?}"))?;
            }
            if let (Ok(n), Ok(v)) = (
                hyper::header::HeaderName::from_bytes(name.as_bytes()),
                hyper::header::HeaderValue::from_str(value),
            ) {
                headers.append(n, v);
            }
        }
    }
    Ok(Some((status, headers, end + 4, length)))
}

async fn exchange<S>(
    stream: S,
    request: Request<Full<Bytes>>,
    limit: AnswerLimit,
) -> CaseResult<(u16, HeaderMap, Bytes)>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let mut answers = exchange_many(stream, vec![request], limit).await?;
    Ok(answers.pop().expect("one request, one answer"))
}

/// Requests one after the other on one HTTP/1.1 connection.
async fn exchange_many<S>(
    stream: S,
    requests: Vec<Request<Full<Bytes>>>,
    limit: AnswerLimit,
) -> CaseResult<Vec<(u16, HeaderMap, Bytes)>>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| format!("HTTP handshake: {e}"))?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    let mut answers = Vec::new();
    for (n, request) in requests.into_iter().enumerate() {
        sender.ready().await.map_err(|e| format!("the connection closed before request {}: {e}", n + 1))?;
        let response = sender.send_request(request).await.map_err(|e| format!("request {}: {e}", n + 1))?;
        let (parts, body) = response.into_parts();
        // An announced length past the limit is refused before a byte is read.
        if body.size_hint().lower() > limit.bytes() as u64 {
            return Err(limit.passed(&format!("content-length {}", body.size_hint().lower())));
        }
        let body = limit.read(body, "reading the body").await?;
        answers.push((parts.status.as_u16(), parts.headers, body));
    }
    Ok(answers)
}

/// A path short enough for a message (long query strings are cut).
fn short(path: &str) -> String {
    if path.len() <= 80 {
        path.to_owned()
    } else {
        let mut end = 77;
        while !path.is_char_boundary(end) {
            end -= 1;
        }
        format!("{}...", &path[..end])
    }
}

impl Resp {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// The body for a message, cut to a readable length.
    pub fn body_text(&self) -> String {
        let text = String::from_utf8_lossy(&self.body);
        let text = text.trim();
        if text.chars().count() <= 300 {
            text.to_owned()
        } else {
            format!("{}...", text.chars().take(300).collect::<String>())
        }
    }

    /// A `200` with `"ok": true`: the success body.
    pub fn ok(&self) -> CaseResult<&Value> {
        self.ok_with(200)
    }

    /// This status with `"ok": true`.
    pub fn ok_with(&self, status: u16) -> CaseResult<&Value> {
        if self.status != status || self.json.get("ok") != Some(&Value::Bool(true)) {
            return Err(format!(
                "{}: expected {status} ok, got {} {}",
                self.what,
                self.status,
                self.body_text()
            ));
        }
        Ok(&self.json)
    }

    /// A failure: this status, `"ok": false`, this `code` and a `message` sentence.
    pub fn refused(&self, status: u16, code: &str) -> CaseResult<&Value> {
        let got_code = self.json.get("code").and_then(Value::as_str);
        if self.status != status || self.json.get("ok") != Some(&Value::Bool(false)) || got_code != Some(code)
        {
            return Err(format!(
                "{}: expected {status} {code}, got {} {}",
                self.what,
                self.status,
                self.body_text()
            ));
        }
        match self.json.get("message").and_then(Value::as_str) {
            Some(m) if !m.trim().is_empty() => Ok(&self.json),
            _ => Err(format!(
                "{}: {status} {code} without a message sentence: {}",
                self.what,
                self.body_text()
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    /// An agent on a socket of this test that answers every request with
    /// `head`, then `piece` again and again until the reader goes (or
    /// `pieces` were sent).
    fn endless_agent(dir: &Path, head: &'static str, piece: Vec<u8>, pieces: usize) -> PathBuf {
        let _ = std::fs::remove_dir_all(dir);
        std::fs::create_dir_all(dir).unwrap();
        let path = dir.join("a.sock");
        let listener = tokio::net::UnixListener::bind(&path).unwrap();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let piece = piece.clone();
                tokio::spawn(async move {
                    let mut got = Vec::new();
                    let mut buf = [0u8; 4096];
                    while !got.windows(4).any(|w| w == b"\r\n\r\n") {
                        match stream.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => got.extend_from_slice(&buf[..n]),
                        }
                    }
                    if stream.write_all(head.as_bytes()).await.is_err() {
                        return;
                    }
                    for _ in 0..pieces {
                        if stream.write_all(&piece).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        path
    }

    fn client(path: PathBuf, mib: u64) -> Client {
        Client::at(Target::Socket(path), None, None, AnswerLimit::from_mib(mib))
    }

    fn chunk(size: usize) -> Vec<u8> {
        [format!("{size:x}\r\n").into_bytes(), vec![b' '; size], b"\r\n".to_vec()].concat()
    }

    fn scratch(name: &str) -> PathBuf {
        std::env::temp_dir().join(format!("durable-cf-client-{name}-{}", std::process::id()))
    }

    /// The limit and the option that raises it are named.
    fn names_the_limit(why: &str, mib: u64) {
        assert!(why.contains(&format!("larger than {mib} MiB")) && why.contains("--max-answer-mib"), "{why}");
    }

    #[tokio::test]
    async fn an_endless_chunked_answer_is_read_up_to_the_limit() {
        let dir = scratch("chunked");
        let head = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n";
        // 64 MiB at most, 32 times the limit.
        let path = endless_agent(&dir, head, chunk(64 * 1024), 1024);
        let why = client(path.clone(), 2).get("/hello").await.unwrap_err();
        names_the_limit(&why, 2);
        assert!(why.starts_with("GET /hello: "), "{why}");
        let many = client(path, 2).get_on_one_connection(&["/hello", "/v1/state"]).await.unwrap_err();
        names_the_limit(&many, 2);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn an_announced_gigabyte_is_refused_before_it_is_read() {
        let dir = scratch("announced");
        let head = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 1073741824\r\n\r\n";
        // It announces a gigabyte and sends nothing: only the announcement can end the read.
        let path = endless_agent(&dir, head, Vec::new(), 0);
        let started = std::time::Instant::now();
        let why = client(path.clone(), 64).get("/hello").await.unwrap_err();
        names_the_limit(&why, 64);
        assert!(why.contains("content-length 1073741824"), "{why}");
        assert!(started.elapsed() < REQUEST_TIMEOUT, "it waited for the body");
        let raw = client(path, 64).post_early_answer("/hello", Bytes::from_static(b"{}")).await.unwrap_err();
        names_the_limit(&raw, 64);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn the_raw_readers_stop_at_the_limit_and_at_a_head_without_end() {
        let dir = scratch("raw");
        let head = "HTTP/1.1 200 OK\r\nconnection: keep-alive\r\n\r\n";
        let path = endless_agent(&dir, head, vec![b'x'; 64 * 1024], 1024);
        let why = client(path, 1).closes_after_first(Auth::Missing).await.unwrap_err();
        names_the_limit(&why, 1);
        let dir = scratch("head");
        let path = endless_agent(&dir, "HTTP/1.1 200 OK\r\nx: ", vec![b'x'; 64 * 1024], 1024);
        let why = client(path, 1).post_early_answer("/hello", Bytes::from_static(b"{}")).await.unwrap_err();
        assert!(why.contains(&format!("no end of the answer's head in {HEAD_MAX} bytes")), "{why}");
        let _ = std::fs::remove_dir_all(scratch("raw"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
