//! `http`: bytes on a connection into the hyper glue — `durable-http`'s
//! `serve_connection`, the function both transports serve each connection
//! with — over an in-memory `tokio::io::duplex`, on a current-thread
//! runtime whose time is paused (virtual: the 30 s timeouts pass at once),
//! in front of the same agent as the `request` target. An input is raw
//! bytes, or requests of the contract written out with chosen framing
//! (`Content-Length`, chunked, a wrong length, none) and headers, on the
//! socket's fixed caller or behind the bearer-token check.
//!
//! Asserts: no panic (a panic in the core's task would abort the process);
//! the connection ends — answered or closed — within 10 virtual minutes;
//! what the server wrote is a sequence of well-formed HTTP/1.x responses;
//! no 500 (a core task that failed); every JSON body is an object with
//! `ok`; a `401` carries `WWW-Authenticate: Bearer` and `Connection: close`
//! and is the last answer on its connection.
#![no_main]

use std::cell::RefCell;
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

use arbitrary::Arbitrary;
use durable_fuzz::agent::{self, Agent, Setup, TokioClock};
use durable_fuzz::wire::{Pool, Req};
use durable_http::{
    CallerSource, CancellationToken, DRAIN_MAX, Limits, TaskTracker, serve_connection, spawn_driver,
};
use durable_runtime::types::exchange::Caller;
use libfuzzer_sys::fuzz_target;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The token the bearer check accepts.
const TOKEN: &str = "fuzz-token-0123456789abcdef0123456789";
/// Inputs served by one runtime and agent before fresh ones are built.
const INPUTS_PER_AGENT: usize = 64;
/// How long (virtual) a connection may last in all.
const CONNECTION_MAX: Duration = Duration::from_secs(600);
/// The most a connection's input writes.
const INPUT_MAX: usize = 64 * 1024;

#[derive(Debug, Arbitrary)]
enum Piece {
    /// A request of the contract, framed and with headers as chosen.
    Req(Req, Framing, Vec<Header>),
    /// Any bytes.
    Raw(Vec<u8>),
}

#[derive(Debug, Arbitrary)]
enum Framing {
    /// `Content-Length` of the body.
    Length,
    /// Chunked, in chunks of this size (0: one chunk).
    Chunked(u8),
    /// `Content-Length` off by this much.
    WrongLength(i8),
    /// No length: the body follows the head as it is.
    None,
}

#[derive(Debug, Arbitrary)]
enum Header {
    /// `Authorization: Bearer` with the token.
    Token,
    /// `Authorization` with any value.
    Authorization(String),
    /// `Connection: close`.
    Close,
    /// `Expect: 100-continue`.
    Continue,
    /// Any header.
    Raw(String, String),
}

#[derive(Debug, Arbitrary)]
struct Input {
    /// Bearer-token check (HTTPS) rather than the socket's fixed caller.
    bearer: bool,
    pieces: Vec<Piece>,
    /// The client closes its side once it has written.
    close_write: bool,
}

fn render(pieces: &[Piece], pool: &Pool) -> Vec<u8> {
    let mut out = Vec::new();
    for piece in pieces {
        match piece {
            Piece::Raw(b) => out.extend_from_slice(b),
            Piece::Req(req, framing, headers) => {
                let r = req.render(pool, None);
                let mut head = format!("{} {}", r.method, r.path);
                if let Some(q) = &r.query {
                    let _ = write!(head, "?{q}");
                }
                head.push_str(" HTTP/1.1\r\nHost: agent\r\n");
                if let Some(inm) = &r.if_none_match {
                    let _ = write!(head, "If-None-Match: {inm}\r\n");
                }
                for h in headers {
                    match h {
                        Header::Token => {
                            let _ = write!(head, "Authorization: Bearer {TOKEN}\r\n");
                        }
                        Header::Authorization(v) => {
                            let _ = write!(head, "Authorization: {v}\r\n");
                        }
                        Header::Close => head.push_str("Connection: close\r\n"),
                        Header::Continue => head.push_str("Expect: 100-continue\r\n"),
                        Header::Raw(k, v) => {
                            let _ = write!(head, "{k}: {v}\r\n");
                        }
                    }
                }
                // A body over the limit is declared larger than what
                // durable-http drains (8 MiB): it is refused unread, and
                // no input has to carry megabytes.
                let Some(body) = r.body else {
                    let _ = write!(head, "Content-Length: {}\r\n\r\n", DRAIN_MAX + 1);
                    out.extend_from_slice(head.as_bytes());
                    out.extend_from_slice(b"{\"requestId\":");
                    continue;
                };
                match framing {
                    Framing::Length => {
                        let _ = write!(head, "Content-Length: {}\r\n\r\n", body.len());
                        out.extend_from_slice(head.as_bytes());
                        out.extend_from_slice(&body);
                    }
                    Framing::WrongLength(d) => {
                        let n = (body.len() as i64 + i64::from(*d)).max(0);
                        let _ = write!(head, "Content-Length: {n}\r\n\r\n");
                        out.extend_from_slice(head.as_bytes());
                        out.extend_from_slice(&body);
                    }
                    Framing::Chunked(size) => {
                        head.push_str("Transfer-Encoding: chunked\r\n\r\n");
                        out.extend_from_slice(head.as_bytes());
                        let size = if *size == 0 { body.len().max(1) } else { usize::from(*size) };
                        for chunk in body.chunks(size) {
                            out.extend_from_slice(format!("{:x}\r\n", chunk.len()).as_bytes());
                            out.extend_from_slice(chunk);
                            out.extend_from_slice(b"\r\n");
                        }
                        out.extend_from_slice(b"0\r\n\r\n");
                    }
                    Framing::None => {
                        head.push_str("\r\n");
                        out.extend_from_slice(head.as_bytes());
                        out.extend_from_slice(&body);
                    }
                }
            }
        }
    }
    out
}

/// One response read off the connection.
#[derive(Debug)]
struct Answer {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

/// Splits what the server wrote into responses; panics on anything that
/// is not HTTP/1.x (a request written `HTTP/1.0` hears `HTTP/1.0`).
fn parse_answers(mut out: &[u8]) -> Vec<Answer> {
    let mut answers = Vec::new();
    while !out.is_empty() {
        let end = out
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .unwrap_or_else(|| panic!("a response head without its end: {:?}", String::from_utf8_lossy(out)));
        let head = std::str::from_utf8(&out[..end]).expect("a response head is text");
        out = &out[end + 4..];
        let mut lines = head.split("\r\n");
        let status_line = lines.next().unwrap_or_default();
        let status: u16 = status_line
            .strip_prefix("HTTP/1.1 ")
            .or_else(|| status_line.strip_prefix("HTTP/1.0 "))
            .and_then(|s| s.get(..3))
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("not an HTTP/1.x status line: {status_line:?}"));
        let headers: Vec<(String, String)> = lines
            .map(|l| {
                let (k, v) = l.split_once(':').unwrap_or_else(|| panic!("a header line without ':': {l:?}"));
                (k.trim().to_owned(), v.trim().to_owned())
            })
            .collect();
        let mut answer = Answer { status, headers, body: Vec::new() };
        if let Some(len) = answer.header("content-length") {
            let len: usize = len.parse().unwrap_or_else(|_| panic!("a bad Content-Length: {len:?}"));
            assert!(out.len() >= len, "a body cut short: {len} bytes announced, {} written", out.len());
            answer.body = out[..len].to_vec();
            out = &out[len..];
        } else {
            assert!(
                status < 200 || status == 304 || answer.header("transfer-encoding").is_none(),
                "a chunked answer was not expected: {answer:?}"
            );
        }
        answers.push(answer);
    }
    answers
}

fn check(answers: &[Answer]) {
    for (i, a) in answers.iter().enumerate() {
        assert_ne!(a.status, 500, "a 500: the core's task failed: {a:?}");
        if a.header("content-type") == Some("application/json") {
            let v: serde_json::Value = serde_json::from_slice(&a.body)
                .unwrap_or_else(|e| panic!("a JSON answer that is not JSON ({e}): {a:?}"));
            assert!(v.get("ok").is_some_and(serde_json::Value::is_boolean), "a JSON answer without ok: {v}");
            let ok = v["ok"] == serde_json::Value::Bool(true);
            assert_eq!(ok, a.status < 300, "ok and the status disagree: {a:?}");
        }
        if a.status == 401 {
            assert_eq!(a.header("www-authenticate"), Some("Bearer"), "{a:?}");
            assert_eq!(a.header("connection"), Some("close"), "{a:?}");
            assert_eq!(i + 1, answers.len(), "an answer after a 401 on the same connection");
        }
    }
}

/// A runtime and the agent it serves, for [`INPUTS_PER_AGENT`] inputs: then
/// both go, with every task left on the runtime (turns still waiting for a
/// steer, the driver).
struct World {
    rt: tokio::runtime::Runtime,
    agent: Agent,
    inputs: usize,
}

impl World {
    fn new() -> World {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .expect("a current-thread runtime");
        let agent = {
            let _guard = rt.enter();
            let agent = agent::build(Setup::default(), Arc::new(TokioClock::new()));
            spawn_driver(agent.core.driver(), CancellationToken::new());
            agent
        };
        World { rt, agent, inputs: 0 }
    }
}

thread_local! {
    static WORLD: RefCell<Option<World>> = const { RefCell::new(None) };
}

async fn connection(agent: &Agent, bearer: bool, bytes: Vec<u8>, close_write: bool) -> Vec<u8> {
    let (mut client, server) = tokio::io::duplex(INPUT_MAX);
    let callers = if bearer {
        CallerSource::bearer(|t| t == TOKEN.as_bytes())
    } else {
        CallerSource::Fixed(Caller::OtherProcess)
    };
    let core = agent.core.driver();
    let served = tokio::spawn(async move {
        let options = Limits::new();
        let _ =
            serve_connection(core, server, callers, &options, CancellationToken::new(), TaskTracker::new())
                .await;
    });
    let (mut reader, mut writer) = tokio::io::split(&mut client);
    let write = async move {
        let _ = writer.write_all(&bytes).await;
        if close_write {
            let _ = writer.shutdown().await;
        }
        // Else the side stays open: the server's timeouts end it.
        std::future::pending::<()>().await;
    };
    let mut out = Vec::new();
    let read = reader.read_to_end(&mut out);
    let ended = tokio::time::timeout(CONNECTION_MAX, async {
        tokio::select! {
            r = read => r.map(|_| ()),
            () = write => Ok(()),
        }
    })
    .await;
    assert!(ended.is_ok(), "the connection neither answered nor closed within {CONNECTION_MAX:?}");
    served.abort();
    out
}

/// Whether an input is raw HTTP as it stands: it starts with a method
/// (`GET `, `POST `); the seeds are written so (`fuzz/corpus/http/`).
fn is_raw(data: &[u8]) -> bool {
    data.starts_with(b"GET ") || data.starts_with(b"POST ")
}

fuzz_target!(|data: &[u8]| {
    let input = if is_raw(data) {
        Input { bearer: false, pieces: vec![Piece::Raw(data.to_vec())], close_write: true }
    } else {
        match Input::arbitrary_take_rest(arbitrary::Unstructured::new(data)) {
            Ok(input) => input,
            Err(_) => return,
        }
    };
    let pool = Pool::default();
    let bytes = render(&input.pieces, &pool);
    WORLD.with_borrow_mut(|slot| {
        if slot.as_ref().is_none_or(|w| w.inputs >= INPUTS_PER_AGENT) {
            // The old runtime is dropped first, and its tasks with it.
            *slot = None;
            *slot = Some(World::new());
        }
        let World { rt, agent, inputs } = slot.as_mut().expect("a world was just made");
        *inputs += 1;
        // A `HEAD` answer announces a body it does not carry, so where one
        // may be asked the answers cannot be told apart: only their start is
        // checked.
        let head = bytes.windows(5).any(|w| w == b"HEAD ");
        let out = rt.block_on(connection(agent, input.bearer, bytes, input.close_write));
        if head {
            assert!(out.is_empty() || out.starts_with(b"HTTP/1."), "not HTTP/1.x: {out:?}");
        } else {
            check(&parse_answers(&out));
        }
    });
});
