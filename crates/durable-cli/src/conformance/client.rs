//! The HTTP/1.1 client that plays Collie: hyper 1.x over the desk's Unix socket or
//! over rustls to its HTTPS port, one connection per request, nothing else.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::header::HeaderMap;
use hyper::{Method, Request};
use hyper_util::rt::TokioIo;
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpStream, UnixStream};

use super::check::R;

/// How long one request may take before the case fails (the slowest legitimate
/// answer is a `busy` after 5 s, or a write accepted after a 6 s knob delay).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(20);

/// Where the desk listens.
#[derive(Clone)]
pub(crate) enum Endpoint {
    Unix(PathBuf),
    Tls { addr: SocketAddr, config: Arc<rustls::ClientConfig> },
}

/// Which `Authorization` header a request carries (HTTPS only; the socket needs none).
#[derive(Clone, Debug)]
pub(crate) enum Auth {
    /// The desk's token over HTTPS, nothing over the socket.
    Default,
    /// No header at all.
    Missing,
    /// This bearer token.
    Bearer(String),
}

/// A client for one running desk.
#[derive(Clone)]
pub(crate) struct Client {
    endpoint: Endpoint,
    token: Option<String>,
}

/// One answer, read whole.
#[derive(Debug)]
pub(crate) struct Resp {
    pub(crate) what: String,
    pub(crate) status: u16,
    pub(crate) headers: HeaderMap,
    pub(crate) body: Bytes,
    /// The body parsed as JSON, `Null` when it is empty or not JSON.
    pub(crate) json: Value,
}

/// A connection to the desk, over either transport.
trait Io: AsyncRead + AsyncWrite + Unpin + Send + 'static {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send + 'static> Io for T {}

impl Client {
    /// Opens one connection to the desk (the TLS handshake included).
    async fn connect(&self) -> R<Box<dyn Io>> {
        match &self.endpoint {
            Endpoint::Unix(path) => {
                let stream = UnixStream::connect(path)
                    .await
                    .map_err(|e| format!("connecting to {}: {e}", path.display()))?;
                Ok(Box::new(stream))
            }
            Endpoint::Tls { addr, config } => {
                let tcp = TcpStream::connect(addr).await.map_err(|e| format!("connecting to {addr}: {e}"))?;
                let name = rustls::pki_types::ServerName::IpAddress(addr.ip().into());
                let tls = tokio_rustls::TlsConnector::from(config.clone())
                    .connect(name, tcp)
                    .await
                    .map_err(|e| format!("TLS handshake with {addr}: {e}"))?;
                Ok(Box::new(tls))
            }
        }
    }
}

impl Client {
    pub(crate) fn new(endpoint: Endpoint, token: Option<String>) -> Self {
        Client { endpoint, token }
    }

    pub(crate) async fn get(&self, path: &str) -> R<Resp> {
        self.request(Method::GET, path, None, &[], Auth::Default).await
    }

    pub(crate) async fn post(&self, path: &str, body: &Value) -> R<Resp> {
        self.post_raw(path, Bytes::from(serde_json::to_vec(body).expect("a JSON value serializes"))).await
    }

    pub(crate) async fn post_raw(&self, path: &str, body: Bytes) -> R<Resp> {
        self.request(Method::POST, path, Some(body), &[], Auth::Default).await
    }

    pub(crate) async fn request(
        &self,
        method: Method,
        path: &str,
        body: Option<Bytes>,
        headers: &[(&str, &str)],
        auth: Auth,
    ) -> R<Resp> {
        let what = format!("{method} {}", short(path));
        let mut builder = Request::builder().method(method).uri(path).header("host", "localhost");
        if body.is_some() {
            builder = builder.header("content-type", "application/json");
        }
        let token = match auth {
            Auth::Default => self.token.clone(),
            Auth::Missing => None,
            Auth::Bearer(t) => Some(t),
        };
        if let Some(token) = token {
            builder = builder.header("authorization", format!("Bearer {token}"));
        }
        for (name, value) in headers {
            builder = builder.header(*name, *value);
        }
        let request = builder
            .body(Full::new(body.unwrap_or_default()))
            .map_err(|e| format!("{what}: building: {e}"))?;
        let exchange = async { exchange(self.connect().await?, request).await };
        let (status, headers, body) = tokio::time::timeout(REQUEST_TIMEOUT, exchange)
            .await
            .map_err(|_| format!("{what}: no answer in {} s", REQUEST_TIMEOUT.as_secs()))?
            .map_err(|e| format!("{what}: {e}"))?;
        let json = serde_json::from_slice(&body).unwrap_or(Value::Null);
        Ok(Resp { what, status, headers, body, json })
    }
}

impl Client {
    /// GETs on one kept-alive connection, one after the other (Collie's polls).
    pub(crate) async fn get_on_one_connection(&self, paths: &[&str]) -> R<Vec<Resp>> {
        let requests: Vec<Request<Full<Bytes>>> = paths
            .iter()
            .map(|path| {
                let mut b = Request::builder().method(Method::GET).uri(*path).header("host", "localhost");
                if let Some(token) = &self.token {
                    b = b.header("authorization", format!("Bearer {token}"));
                }
                b.body(Full::new(Bytes::new())).map_err(|e| e.to_string())
            })
            .collect::<R<_>>()?;
        let run = async { exchange_many(self.connect().await?, requests).await };
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
    pub(crate) async fn post_early_answer(&self, path: &str, body: Bytes) -> R<Resp> {
        let what = format!("POST {} ({} bytes, answer read while sending)", short(path), body.len());
        let mut head = format!(
            "POST {path} HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n",
            body.len()
        );
        if let Some(token) = &self.token {
            head.push_str(&format!("authorization: Bearer {token}\r\n"));
        }
        head.push_str("\r\n");
        let exchange = async { raw_exchange(self.connect().await?, head, body).await };
        let (status, headers, body) = tokio::time::timeout(REQUEST_TIMEOUT, exchange)
            .await
            .map_err(|_| format!("{what}: no answer in {} s", REQUEST_TIMEOUT.as_secs()))?
            .map_err(|e| format!("{what}: {e}"))?;
        let json = serde_json::from_slice(&body).unwrap_or(Value::Null);
        Ok(Resp { what, status, headers, body, json })
    }
}

async fn raw_exchange<S>(stream: S, head: String, body: Bytes) -> R<(u16, HeaderMap, Bytes)>
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
                if got.len() >= start + length {
                    return Ok((status, headers, Bytes::copy_from_slice(&got[start..start + length])));
                }
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
fn parse_head(got: &[u8]) -> R<Option<(u16, HeaderMap, usize, usize)>> {
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

async fn exchange<S>(stream: S, request: Request<Full<Bytes>>) -> R<(u16, HeaderMap, Bytes)>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let mut answers = exchange_many(stream, vec![request]).await?;
    Ok(answers.pop().expect("one request, one answer"))
}

/// Requests one after the other on one HTTP/1.1 connection.
async fn exchange_many<S>(stream: S, requests: Vec<Request<Full<Bytes>>>) -> R<Vec<(u16, HeaderMap, Bytes)>>
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
        let body = body.collect().await.map_err(|e| format!("reading the body: {e}"))?.to_bytes();
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
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// The body for a message, cut to a readable length.
    pub(crate) fn body_text(&self) -> String {
        let text = String::from_utf8_lossy(&self.body);
        let text = text.trim();
        if text.chars().count() <= 300 {
            text.to_owned()
        } else {
            format!("{}...", text.chars().take(300).collect::<String>())
        }
    }

    /// A `200` with `"ok": true`: the success body.
    pub(crate) fn ok(&self) -> R<&Value> {
        self.ok_with(200)
    }

    /// This status with `"ok": true`.
    pub(crate) fn ok_with(&self, status: u16) -> R<&Value> {
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
    pub(crate) fn refused(&self, status: u16, code: &str) -> R<&Value> {
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
