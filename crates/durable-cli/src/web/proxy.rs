//! The wire, proxied: `/<secret>/wire/<path>` is the agent's `/<path>`
//! (`hello` and paths under `v1/` only), asked over the CLI's own link with
//! the token added here, so that it never reaches the page. Several
//! connections to the agent at once: the page polls every 2 s while a
//! write may wait 5 s for a pane's lock (docs/wire.md §8).

use std::sync::Mutex;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::client::conn::http1::SendRequest;
use hyper::header::{
    ALLOW, AUTHORIZATION, CONTENT_LENGTH, CONTENT_TYPE, ETAG, HOST, HeaderName, HeaderValue, IF_NONE_MATCH,
};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::json;
use tokio::sync::Semaphore;

use crate::link::{Link, LinkError, Token};

/// The largest body the page may send: the wire's 1 MiB (`BODY_MAX`, which
/// the agent enforces with its own `413`) and a little; more is refused
/// before it is read whole.
pub(crate) const REQUEST_MAX: usize = durable_types::BODY_MAX + 64 * 1024;

/// How the page writes a path segment that is the id `.` or `..`, which a
/// browser would resolve away (`%2E` too): a space, which no id holds (the
/// ID rule), then the dots; and how it goes on to the agent.
pub(crate) const DOT_IDS: [(&str, &str); 2] = [("%20.", "%2E"), ("%20..", "%2E%2E")];

/// How long a read may take (as the phone's link: an agent answers a poll
/// from memory).
const READ_TIMEOUT: Duration = Duration::from_secs(5);

/// How long a write may take: 5 s for a pane's lock, then its handler.
const WRITE_TIMEOUT: Duration = Duration::from_secs(15);

/// At most this many requests to the agent at once (it serves 64
/// connections per transport, Collie's among them).
const AT_ONCE: usize = 8;

/// Kept-alive connections kept for the next requests.
const IDLE_MAX: usize = 4;

/// The request headers passed on to the agent.
const PASSED_ON: [HeaderName; 2] = [IF_NONE_MATCH, CONTENT_TYPE];

/// The answer headers passed back to the page. Not the agent's
/// `Content-Type`: every wire answer reaches the page as JSON, so none
/// can run as a script or a page of the page's own origin.
const PASSED_BACK: [HeaderName; 2] = [ETAG, ALLOW];

type Sender = SendRequest<Full<Bytes>>;

/// The agent, with a few kept-alive connections to it.
#[derive(Debug)]
pub(crate) struct Agent {
    link: Link,
    token: Option<Token>,
    idle: Mutex<Vec<Sender>>,
    at_once: Semaphore,
}

/// What the agent answered, read whole.
struct Answer {
    status: StatusCode,
    headers: hyper::HeaderMap,
    body: Bytes,
}

impl Agent {
    /// `token` goes with every request as `Authorization: Bearer` (HTTPS
    /// and plain loopback HTTP; none on the socket).
    pub(crate) fn new(link: Link, token: Option<Token>) -> Agent {
        Agent { link, token, idle: Mutex::new(Vec::new()), at_once: Semaphore::new(AT_ONCE) }
    }

    fn take_idle(&self) -> Option<Sender> {
        self.idle.lock().unwrap_or_else(|e| e.into_inner()).pop()
    }

    fn put_back(&self, sender: Sender) {
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        if idle.len() < IDLE_MAX {
            idle.push(sender);
        }
    }

    /// A connection ready for a request: a kept one, or a new one; whether
    /// it was kept.
    async fn sender(&self) -> Result<(Sender, bool), LinkError> {
        while let Some(mut sender) = self.take_idle() {
            if sender.ready().await.is_ok() {
                return Ok((sender, true));
            }
        }
        let io = self.link.connect().await?;
        let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(io))
            .await
            .map_err(|e| LinkError::Http(format!("HTTP handshake: {e}")))?;
        tokio::spawn(async move {
            let _ = connection.await;
        });
        Ok((sender, false))
    }

    fn build(
        &self,
        method: &Method,
        target: &str,
        headers: &[(HeaderName, HeaderValue)],
        body: &Bytes,
    ) -> Result<Request<Full<Bytes>>, LinkError> {
        let mut b =
            Request::builder().method(method.clone()).uri(target).header(HOST, self.link.host_header());
        if let Some(token) = &self.token {
            b = b.header(AUTHORIZATION, format!("Bearer {}", token.secret()));
        }
        for (name, value) in headers {
            b = b.header(name, value.clone());
        }
        // The message names no header: the token must never reach it.
        b.body(Full::new(body.clone()))
            .map_err(|_| LinkError::Http("the request could not be written".into()))
    }

    /// One exchange; on a kept connection the agent closed meanwhile, tried
    /// once more on a new one (a write is safe to repeat: its request id
    /// makes the agent replay it, §9).
    async fn exchange(
        &self,
        method: &Method,
        target: &str,
        headers: &[(HeaderName, HeaderValue)],
        body: Bytes,
    ) -> Result<Answer, LinkError> {
        let exchange = async {
            let _turn =
                self.at_once.acquire().await.map_err(|_| LinkError::Http("the server is stopping".into()))?;
            let mut retried = false;
            loop {
                let (mut sender, kept) = self.sender().await?;
                let request = self.build(method, target, headers, &body)?;
                match sender.send_request(request).await {
                    Ok(response) => {
                        let (parts, incoming) = response.into_parts();
                        // The link's limit (`--max-answer-mib`), as for every
                        // answer `durable` reads.
                        let (limit, what) =
                            (self.link.answer_limit(), format!("{method} {}", path_of(target)));
                        let body = limit.read_body(incoming, &what).await?;
                        self.put_back(sender);
                        return Ok(Answer { status: parts.status, headers: parts.headers, body });
                    }
                    Err(_) if kept && !retried => retried = true,
                    Err(e) => return Err(LinkError::Http(format!("{method} {}: {e}", path_of(target)))),
                }
            }
        };
        let limit = if *method == Method::GET { READ_TIMEOUT } else { WRITE_TIMEOUT };
        match tokio::time::timeout(limit, exchange).await {
            Ok(answer) => answer,
            Err(_) => Err(LinkError::Http(format!(
                "{method} {}: no answer in {} s",
                path_of(target),
                limit.as_secs()
            ))),
        }
    }

    /// The agent's path for `/wire{path}`, or `None` when the page may not
    /// reach it: `/hello`, or a path under `/v1/` with no `.` or `..`
    /// segment (plain or percent-encoded) and no encoded slash. A segment
    /// the page marked as the id `.` or `..` ([`DOT_IDS`]) goes to the agent
    /// percent-encoded, and only where the path stays under `/v1/` even
    /// for a proxy that resolves dot segments.
    pub(crate) fn agent_path(path: &str) -> Option<String> {
        if path == "/hello" {
            return Some(path.to_owned());
        }
        let rest = path.strip_prefix("/v1/")?;
        // No encoded slash either (no id holds one: the ID rule): an agent
        // behind a proxy that decodes it must not be reached outside
        // /hello and /v1/.
        if path.to_ascii_lowercase().contains("%2f") {
            return None;
        }
        let mut out = String::from("/v1");
        // Segments under /v1/ once dot segments are resolved.
        let mut depth = 0usize;
        for segment in rest.split('/') {
            let decoded = segment.to_ascii_lowercase().replace("%2e", ".");
            if decoded == "." || decoded == ".." {
                return None;
            }
            let segment = match DOT_IDS.iter().find(|(marked, _)| *marked == segment) {
                Some((_, "%2E")) => "%2E",
                Some((_, encoded)) => {
                    depth = depth.checked_sub(1)?;
                    encoded
                }
                None => {
                    depth += 1;
                    segment
                }
            };
            out.push('/');
            out.push_str(segment);
        }
        Some(out)
    }

    /// Passes `request` (whose path after the secret is `/wire{path}`) on
    /// to the agent and its answer back.
    pub(crate) async fn forward(&self, request: Request<Incoming>, path: &str) -> Response<Full<Bytes>> {
        let Some(path) = Agent::agent_path(path) else {
            return wire_error(StatusCode::NOT_FOUND, "not-found", "the page reaches /hello and /v1/… only");
        };
        let method = request.method().clone();
        if method != Method::GET && method != Method::POST {
            let mut answer =
                wire_error(StatusCode::METHOD_NOT_ALLOWED, "method-not-allowed", "GET or POST only");
            answer.headers_mut().insert(ALLOW, HeaderValue::from_static("GET, POST"));
            return answer;
        }
        let target = match request.uri().query() {
            Some(query) => format!("{path}?{query}"),
            None => path,
        };
        let headers: Vec<(HeaderName, HeaderValue)> = PASSED_ON
            .iter()
            .flat_map(|name| request.headers().get_all(name).iter().map(move |v| (name.clone(), v.clone())))
            .collect();
        let body = if method == Method::POST {
            match read_body(request).await {
                Ok(body) => body,
                Err(refusal) => return refusal,
            }
        } else {
            Bytes::new()
        };
        match self.exchange(&method, &target, &headers, body).await {
            Ok(answer) => {
                let mut response = Response::new(Full::new(answer.body));
                *response.status_mut() = answer.status;
                for name in PASSED_BACK {
                    for value in answer.headers.get_all(&name) {
                        response.headers_mut().append(name.clone(), value.clone());
                    }
                }
                response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
                response
            }
            // It answered, with more than `durable` reads: the message names
            // the limit and `--max-answer-mib`.
            Err(LinkError::TooLarge(message)) => {
                wire_error(StatusCode::BAD_GATEWAY, "answer-too-large", &message)
            }
            Err(e) => wire_error(
                StatusCode::BAD_GATEWAY,
                "unreachable",
                &format!("the agent at {} could not be reached: {e}", self.link.target()),
            ),
        }
    }
}

/// The request's body, at most [`REQUEST_MAX`] bytes: a longer one (said by
/// its `Content-Length` or found while reading) is `413`.
async fn read_body(request: Request<Incoming>) -> Result<Bytes, Response<Full<Bytes>>> {
    let too_large = || {
        wire_error(
            StatusCode::PAYLOAD_TOO_LARGE,
            "too-large",
            &format!("the request body is over {REQUEST_MAX} bytes"),
        )
    };
    let declared = request.headers().get(CONTENT_LENGTH).and_then(|v| v.to_str().ok());
    if let Some(length) = declared {
        match length.trim().parse::<u64>() {
            Ok(n) if n <= REQUEST_MAX as u64 => {}
            _ => return Err(too_large()),
        }
    }
    match Limited::new(request.into_body(), REQUEST_MAX).collect().await {
        Ok(body) => Ok(body.to_bytes()),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => Err(too_large()),
        Err(_) => {
            Err(wire_error(StatusCode::BAD_REQUEST, "bad-request", "the request body could not be read"))
        }
    }
}

/// The path of a request target, without its query (for messages).
fn path_of(target: &str) -> &str {
    target.split('?').next().unwrap_or(target)
}

/// An answer in the wire's error shape (docs/wire.md §2).
pub(crate) fn wire_error(status: StatusCode, code: &str, message: &str) -> Response<Full<Bytes>> {
    let body = json!({"ok": false, "code": code, "message": message}).to_string();
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_hello_and_v1_reach_the_agent() {
        for ok in ["/hello", "/v1/state", "/v1/panes/ticket-1/send", "/v1/panes/a%5Cb/events", "/v1/"] {
            assert_eq!(Agent::agent_path(ok).as_deref(), Some(ok), "{ok}");
        }
        for bad in [
            "/",
            "",
            "/hello/",
            "/hellox",
            "/v1",
            "/v2/state",
            "/admin",
            "/v1/../admin",
            "/v1/%2e%2e/admin",
            "/v1/%2E./admin",
            "/v1/.%2e/admin",
            "/v1/./state",
            "/v1/%2e/state",
            "/v1/state/..",
            "//v1/state",
            "/v1/panes/x/..%2f..%2fadmin",
            "/v1/panes/x%2F..%2Fadmin",
            "/v1/panes/a%2Fb/events",
        ] {
            assert_eq!(Agent::agent_path(bad), None, "{bad}");
        }
    }

    #[test]
    fn the_ids_dot_and_dot_dot_pass_as_whole_segments_that_stay_under_v1() {
        for (page, agent) in [
            ("/v1/panes/%20../events", "/v1/panes/%2E%2E/events"),
            ("/v1/panes/%20./send", "/v1/panes/%2E/send"),
            ("/v1/panes/%20../actions/%20..", "/v1/panes/%2E%2E/actions/%2E%2E"),
            ("/v1/asks/%20..", "/v1/asks/%2E%2E"),
            ("/v1/history/%20.", "/v1/history/%2E"),
            ("/v1/%20.", "/v1/%2E"),
            // Not the mark: a segment of its own or nothing.
            ("/v1/panes/x%20../events", "/v1/panes/x%20../events"),
            ("/v1/panes/%20...", "/v1/panes/%20..."),
        ] {
            assert_eq!(Agent::agent_path(page).as_deref(), Some(agent), "{page}");
        }
        for escape in [
            "/v1/%20../state",
            "/v1/%20../%20../admin",
            "/v1/panes/%20../%20../admin",
            "/v1/panes/%20../%20../%20../admin",
            "/v1/panes/%20../%2e%2e/admin",
            "/v1/panes/%20../../admin",
            "/v1/panes/%20.%2F%20../admin",
        ] {
            assert_eq!(Agent::agent_path(escape), None, "{escape}");
        }
    }
}
