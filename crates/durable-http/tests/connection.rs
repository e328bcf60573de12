//! `serve_connection` over an in-memory stream, spoken to in raw HTTP/1.1.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use durable_http::{CallerSource, CancellationToken, Handler, Limits, TaskTracker, serve_connection};
use durable_types::exchange::{Body, Caller, Read, Request, Response};
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};
use tokio::sync::Notify;

/// Records every request and answers 200 `{"ok":true}`, after `gate` is
/// opened when it is given.
#[derive(Clone, Default)]
struct Recorder {
    seen: Arc<Mutex<Vec<Request>>>,
    gate: Option<Arc<Notify>>,
}

impl Handler for Recorder {
    fn handle(&self, request: Request) -> impl Future<Output = Response> + Send + 'static {
        let seen = self.seen.clone();
        let gate = self.gate.clone();
        async move {
            seen.lock().unwrap().push(request);
            if let Some(gate) = gate {
                gate.notified().await;
            }
            Response::json(200, &b"{\"ok\":true}"[..])
        }
    }
}

fn start(
    handler: Recorder,
    callers: CallerSource,
    options: Limits,
    shutdown: CancellationToken,
) -> (DuplexStream, tokio::task::JoinHandle<()>) {
    start_tracked(handler, callers, options, shutdown, TaskTracker::new())
}

/// [`start`] with the writes' tasks spawned on `in_flight`.
fn start_tracked(
    handler: Recorder,
    callers: CallerSource,
    options: Limits,
    shutdown: CancellationToken,
    in_flight: TaskTracker,
) -> (DuplexStream, tokio::task::JoinHandle<()>) {
    let (client, server) = tokio::io::duplex(4 * 1024 * 1024);
    let task = tokio::spawn(async move {
        let _ = serve_connection(handler, server, callers, &options, shutdown, in_flight).await;
    });
    (client, task)
}

/// Reads one response (headers and a Content-Length body) as text.
async fn read_response(io: &mut DuplexStream) -> String {
    let mut buf = Vec::new();
    let mut byte = [0u8; 1];
    while !buf.ends_with(b"\r\n\r\n") {
        let n = io.read(&mut byte).await.unwrap();
        assert_eq!(n, 1, "connection closed mid-response: {:?}", String::from_utf8_lossy(&buf));
        buf.push(byte[0]);
    }
    let head = String::from_utf8(buf).unwrap();
    let len: usize = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase().strip_prefix("content-length: ").map(|v| v.trim().parse().unwrap())
        })
        .unwrap_or(0);
    let mut body = vec![0u8; len];
    io.read_exact(&mut body).await.unwrap();
    head + &String::from_utf8(body).unwrap()
}

async fn assert_closed(io: &mut DuplexStream) {
    let mut rest = Vec::new();
    let n = tokio::time::timeout(Duration::from_secs(5), io.read_to_end(&mut rest))
        .await
        .expect("connection stays open");
    assert!(n.is_ok());
}

#[tokio::test]
async fn keep_alive_serves_several_requests_on_one_connection() {
    let rec = Recorder::default();
    let (mut io, _task) = start(
        rec.clone(),
        CallerSource::Fixed(Caller::OtherProcess),
        Limits::new(),
        CancellationToken::new(),
    );
    for path in ["/hello", "/v1/state?since=3"] {
        io.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes()).await.unwrap();
        let r = read_response(&mut io).await;
        assert!(r.starts_with("HTTP/1.1 200"), "{r}");
        assert!(r.to_ascii_lowercase().contains("content-type: application/json"), "{r}");
    }
    let seen = rec.seen.lock().unwrap();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[1].path, "/v1/state");
    assert_eq!(seen[1].query.as_deref(), Some("since=3"));
    assert!(seen.iter().all(|r| r.caller == Caller::OtherProcess));
}

#[tokio::test]
async fn a_body_over_one_mib_reaches_the_core_as_too_large() {
    let rec = Recorder::default();
    let (mut io, _task) = start(
        rec.clone(),
        CallerSource::Fixed(Caller::OtherProcess),
        Limits::new(),
        CancellationToken::new(),
    );
    let body = vec![b'x'; durable_types::BODY_MAX + 1];
    // Chunked, so that no Content-Length gives the size away: the limit is
    // enforced on the stream itself.
    let mut req = b"POST /v1/asks/0123 HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
    for chunk in body.chunks(100_000) {
        req.extend_from_slice(format!("{:x}\r\n", chunk.len()).as_bytes());
        req.extend_from_slice(chunk);
        req.extend_from_slice(b"\r\n");
    }
    req.extend_from_slice(b"0\r\n\r\n");
    io.write_all(&req).await.unwrap();
    let r = read_response(&mut io).await;
    assert!(r.starts_with("HTTP/1.1 200"), "{r}");
    assert_eq!(rec.seen.lock().unwrap()[0].body, Body::TooLarge);
}

#[tokio::test]
async fn a_body_of_one_mib_reaches_the_core_whole() {
    let rec = Recorder::default();
    let (mut io, _task) =
        start(rec.clone(), CallerSource::Fixed(Caller::Unknown), Limits::new(), CancellationToken::new());
    let n = durable_types::BODY_MAX;
    io.write_all(format!("POST /v1/close HTTP/1.1\r\nHost: x\r\nContent-Length: {n}\r\n\r\n").as_bytes())
        .await
        .unwrap();
    io.write_all(&vec![b'y'; n]).await.unwrap();
    read_response(&mut io).await;
    assert!(matches!(&rec.seen.lock().unwrap()[0].body, Body::Complete(b) if b.len() == n));
}

#[tokio::test]
async fn a_client_slow_to_send_headers_is_cut_off_by_the_header_read_timeout() {
    let rec = Recorder::default();
    let options = Limits::new().header_read_timeout(Duration::from_millis(200));
    let (mut io, task) =
        start(rec.clone(), CallerSource::Fixed(Caller::Unknown), options, CancellationToken::new());
    io.write_all(b"GET /hello HTTP/1.1\r\nHost").await.unwrap();
    assert_closed(&mut io).await;
    tokio::time::timeout(Duration::from_secs(5), task).await.unwrap().unwrap();
    assert!(rec.seen.lock().unwrap().is_empty());
}

/// The header-read clock starts again at every request: a connection that
/// keeps asking outlives the timeout many times over, and one that then
/// trickles a head in is cut off as the first request would have been (the
/// timer is re-armed for each request, not made anew).
#[tokio::test]
async fn the_header_read_timeout_starts_again_at_each_request_of_a_kept_alive_connection() {
    let rec = Recorder::default();
    let timeout = Duration::from_millis(300);
    let options = Limits::new().header_read_timeout(timeout);
    let (mut io, task) =
        start(rec.clone(), CallerSource::Fixed(Caller::Unknown), options, CancellationToken::new());
    let started = std::time::Instant::now();
    let mut served = 0;
    while started.elapsed() < timeout * 4 {
        io.write_all(b"GET /hello HTTP/1.1\r\nHost: x\r\n\r\n").await.unwrap();
        let r = read_response(&mut io).await;
        assert!(r.starts_with("HTTP/1.1 200"), "request {served}: {r}");
        served += 1;
        tokio::time::sleep(Duration::from_millis(40)).await;
    }
    io.write_all(b"GET /hello HTTP/1.1\r\nHost").await.unwrap();
    assert_closed(&mut io).await;
    tokio::time::timeout(Duration::from_secs(5), task).await.unwrap().unwrap();
    assert_eq!(rec.seen.lock().unwrap().len(), served, "the trickled head never reached the core");
}

#[tokio::test]
async fn shutdown_lets_the_request_in_flight_finish_then_closes() {
    let gate = Arc::new(Notify::new());
    let rec = Recorder { gate: Some(gate.clone()), ..Recorder::default() };
    let shutdown = CancellationToken::new();
    let (mut io, task) =
        start(rec.clone(), CallerSource::Fixed(Caller::Unknown), Limits::new(), shutdown.clone());
    io.write_all(b"GET /v1/state HTTP/1.1\r\nHost: x\r\n\r\n").await.unwrap();
    while rec.seen.lock().unwrap().is_empty() {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    shutdown.cancel();
    tokio::time::sleep(Duration::from_millis(50)).await;
    gate.notify_one();
    let r = read_response(&mut io).await;
    assert!(r.starts_with("HTTP/1.1 200"), "{r}");
    assert_closed(&mut io).await;
    tokio::time::timeout(Duration::from_secs(5), task).await.unwrap().unwrap();
}

/// A write's work runs on a task of the given tracker: it goes on after
/// its client went away, and the tracker's `wait` returns only once it
/// ended (what `Server::close` waits for).
#[tokio::test]
async fn a_write_whose_client_went_away_is_waited_for_on_the_tracker() {
    let gate = Arc::new(Notify::new());
    let rec = Recorder { gate: Some(gate.clone()), ..Recorder::default() };
    let in_flight = TaskTracker::new();
    let (mut io, task) = start_tracked(
        rec.clone(),
        CallerSource::Fixed(Caller::OtherProcess),
        Limits::new(),
        CancellationToken::new(),
        in_flight.clone(),
    );
    io.write_all(b"POST /v1/close HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}").await.unwrap();
    while rec.seen.lock().unwrap().is_empty() {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    drop(io);
    tokio::time::timeout(Duration::from_secs(5), task).await.unwrap().unwrap();
    assert_eq!(in_flight.len(), 1, "the write's task outlives its connection");
    in_flight.close();
    let mut waiting = std::pin::pin!(in_flight.wait());
    let early = tokio::time::timeout(Duration::from_millis(50), waiting.as_mut()).await;
    assert!(early.is_err(), "wait() returned while the write still ran");
    gate.notify_one();
    tokio::time::timeout(Duration::from_secs(5), waiting).await.expect("wait() never returned");
    assert!(in_flight.is_empty());
}

#[tokio::test]
async fn shutdown_closes_an_idle_keep_alive_connection() {
    let shutdown = CancellationToken::new();
    let (mut io, task) =
        start(Recorder::default(), CallerSource::Fixed(Caller::Unknown), Limits::new(), shutdown.clone());
    io.write_all(b"GET /hello HTTP/1.1\r\nHost: x\r\n\r\n").await.unwrap();
    read_response(&mut io).await;
    shutdown.cancel();
    assert_closed(&mut io).await;
    tokio::time::timeout(Duration::from_secs(5), task).await.unwrap().unwrap();
}

#[tokio::test]
async fn a_request_without_the_token_gets_401_and_never_reaches_the_core() {
    let rec = Recorder::default();
    let callers = CallerSource::bearer(|t| t == b"0123456789abcdef0123456789abcdef");
    let (mut io, task) = start(rec.clone(), callers.clone(), Limits::new(), CancellationToken::new());
    io.write_all(b"GET /hello HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer nope\r\n\r\n").await.unwrap();
    let r = read_response(&mut io).await;
    assert!(r.starts_with("HTTP/1.1 401"), "{r}");
    assert!(r.to_ascii_lowercase().contains("www-authenticate: bearer"), "{r}");
    assert!(r.contains("\"code\":\"token-refused\""), "{r}");
    assert!(!r.contains("nope"));
    assert!(rec.seen.lock().unwrap().is_empty());
    // Nothing more on that connection: it says so, and closes.
    assert!(r.to_ascii_lowercase().contains("connection: close"), "{r}");
    assert_closed(&mut io).await;
    tokio::time::timeout(Duration::from_secs(5), task).await.unwrap().unwrap();

    let (mut io, _task) = start(rec.clone(), callers, Limits::new(), CancellationToken::new());
    io.write_all(
        b"GET /hello HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer 0123456789abcdef0123456789abcdef\r\n\r\n",
    )
    .await
    .unwrap();
    let r = read_response(&mut io).await;
    assert!(r.starts_with("HTTP/1.1 200"), "{r}");
    assert!(!r.to_ascii_lowercase().contains("connection: close"), "{r}");
    assert_eq!(rec.seen.lock().unwrap()[0].caller, Caller::Token);
}

#[tokio::test]
async fn on_a_connection_that_showed_its_token_a_wrong_token_is_still_refused() {
    let rec = Recorder::default();
    let checks = Arc::new(Mutex::new(0usize));
    let counted = checks.clone();
    let callers = CallerSource::bearer(move |t| {
        *counted.lock().unwrap() += 1;
        t == b"0123456789abcdef0123456789abcdef"
    });
    let (mut io, task) = start(rec.clone(), callers, Limits::new(), CancellationToken::new());
    let good = b"GET /v1/state HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer 0123456789abcdef0123456789abcdef\r\n\r\n";
    for _ in 0..3 {
        io.write_all(good).await.unwrap();
        let r = read_response(&mut io).await;
        assert!(r.starts_with("HTTP/1.1 200"), "{r}");
    }
    assert_eq!(*checks.lock().unwrap(), 1, "the connection's token is checked once");
    // The same length, one byte off: refused, and the connection closes.
    io.write_all(b"GET /v1/state HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer 0123456789abcdef0123456789abcdeF\r\n\r\n")
        .await
        .unwrap();
    let r = read_response(&mut io).await;
    assert!(r.starts_with("HTTP/1.1 401"), "{r}");
    assert!(r.contains("\"code\":\"token-refused\""), "{r}");
    assert_closed(&mut io).await;
    tokio::time::timeout(Duration::from_secs(5), task).await.unwrap().unwrap();
    assert_eq!(rec.seen.lock().unwrap().len(), 3, "the refused request never reached the core");
    assert!(rec.seen.lock().unwrap().iter().all(|r| r.caller == Caller::Token));
}

/// A handler answering 200 with a body of `n` bytes.
#[derive(Clone)]
struct Big(usize);

impl Handler for Big {
    fn handle(&self, _request: Request) -> impl Future<Output = Response> + Send + 'static {
        let n = self.0;
        async move { Response::json(200, vec![b' '; n]) }
    }
}

#[tokio::test]
async fn an_answer_the_client_never_reads_is_cut_off_by_the_write_timeout() {
    let (mut io, server) = tokio::io::duplex(4096);
    let options = Limits::new().write_timeout(Duration::from_millis(100));
    let task = tokio::spawn(async move {
        serve_connection(
            Big(1 << 20),
            server,
            CallerSource::Fixed(Caller::Unknown),
            &options,
            CancellationToken::new(),
            TaskTracker::new(),
        )
        .await
    });
    io.write_all(b"GET /v1/state HTTP/1.1\r\nHost: x\r\n\r\n").await.unwrap();
    // Nothing is read: the connection ends with the timeout's error.
    let ended =
        tokio::time::timeout(Duration::from_secs(5), task).await.expect("the write was never cut off");
    let e = ended.unwrap().unwrap_err();
    assert!(format!("{e:?}").contains("made no progress"), "{e:?}");
}

/// A program that wants no timeouts sets them to `Duration::MAX`: a large
/// answer through a small pipe stalls its write many times, and the header
/// clock restarts after each answer; both answers arrive whole.
#[tokio::test]
async fn endless_timeouts_serve_large_answers_through_many_stalls() {
    let (mut io, server) = tokio::io::duplex(4096);
    let options = Limits::new()
        .header_read_timeout(Duration::MAX)
        .body_read_timeout(Duration::MAX)
        .write_timeout(Duration::MAX)
        .shutdown_grace(Duration::MAX);
    let n = 64 * 1024;
    tokio::spawn(async move {
        let _ = serve_connection(
            Big(n),
            server,
            CallerSource::Fixed(Caller::Unknown),
            &options,
            CancellationToken::new(),
            TaskTracker::new(),
        )
        .await;
    });
    for _ in 0..2 {
        io.write_all(b"GET /v1/state HTTP/1.1\r\nHost: x\r\n\r\n").await.unwrap();
        let answer = tokio::time::timeout(Duration::from_secs(10), read_response(&mut io))
            .await
            .expect("the answer never came");
        assert!(answer.starts_with("HTTP/1.1 200"), "{}", &answer[..40]);
        assert!(answer.ends_with(&" ".repeat(n)), "the whole answer");
    }
}

/// The header-read clock waits while an answer is being written: a client
/// that reads a large answer slowly, for longer than the header-read
/// timeout, still gets all of it, and the connection then serves the next
/// request.
#[tokio::test]
async fn a_slow_reader_of_a_large_answer_outlasts_the_header_read_timeout() {
    let (mut io, server) = tokio::io::duplex(4096);
    let options = Limits::new().header_read_timeout(Duration::from_millis(200));
    let n = 256 * 1024;
    tokio::spawn(async move {
        let _ = serve_connection(
            Big(n),
            server,
            CallerSource::Fixed(Caller::Unknown),
            &options,
            CancellationToken::new(),
            TaskTracker::new(),
        )
        .await;
    });
    io.write_all(b"GET /v1/state HTTP/1.1\r\nHost: x\r\n\r\n").await.unwrap();
    let started = std::time::Instant::now();
    let mut got = Vec::new();
    let mut chunk = vec![0u8; 16 * 1024];
    while got.len() < n {
        tokio::time::sleep(Duration::from_millis(40)).await;
        let k = io.read(&mut chunk).await.unwrap();
        assert!(k > 0, "closed after {} bytes, {:?} in", got.len(), started.elapsed());
        got.extend_from_slice(&chunk[..k]);
    }
    assert!(started.elapsed() > Duration::from_millis(400), "the read took longer than the timeout");
    let head_end = got.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    while got.len() < head_end + n {
        let k = io.read(&mut chunk).await.unwrap();
        assert!(k > 0, "closed mid-answer");
        got.extend_from_slice(&chunk[..k]);
    }
    assert_eq!(got.len(), head_end + n, "the whole answer");
    io.write_all(b"GET /v1/state HTTP/1.1\r\nHost: x\r\n\r\n").await.unwrap();
    let mut first = [0u8; 12];
    io.read_exact(&mut first).await.unwrap();
    assert_eq!(&first, b"HTTP/1.1 200", "the next request is served");
}

/// Waits until the server closes `io`, at most `within`; panics if it stays
/// open longer.
async fn assert_closed_within(io: &mut DuplexStream, within: Duration) {
    let mut rest = Vec::new();
    match tokio::time::timeout(within, io.read_to_end(&mut rest)).await {
        Ok(_) => assert!(
            !String::from_utf8_lossy(&rest).contains("HTTP/1.1"),
            "no answer is written: {:?}",
            String::from_utf8_lossy(&rest)
        ),
        Err(_) => panic!("the connection stayed open past {within:?}"),
    }
}

#[tokio::test]
async fn body_read_timeout_closes_a_connection_whose_content_length_body_stalls() {
    let rec = Recorder::default();
    let options = Limits::new().body_read_timeout(Duration::from_millis(200));
    let (mut io, task) =
        start(rec.clone(), CallerSource::Fixed(Caller::OtherProcess), options, CancellationToken::new());
    // Content-Length says 100, 10 bytes come, then nothing (the client stays).
    io.write_all(b"POST /v1/close HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n0123456789")
        .await
        .unwrap();
    let started = std::time::Instant::now();
    assert_closed_within(&mut io, Duration::from_secs(3)).await;
    assert!(started.elapsed() >= Duration::from_millis(150), "closed before the timeout");
    tokio::time::timeout(Duration::from_secs(3), task).await.unwrap().unwrap();
    assert!(rec.seen.lock().unwrap().is_empty(), "the core never sees a request whose body stalled");
}

#[tokio::test]
async fn body_read_timeout_closes_a_connection_whose_chunked_body_stops() {
    let rec = Recorder::default();
    let options = Limits::new().body_read_timeout(Duration::from_millis(200));
    let (mut io, task) =
        start(rec.clone(), CallerSource::Fixed(Caller::OtherProcess), options, CancellationToken::new());
    io.write_all(b"POST /v1/close HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n")
        .await
        .unwrap();
    // A trickle that never ends the body does not keep it alive either: the
    // timeout is for the whole body.
    for _ in 0..6 {
        tokio::time::sleep(Duration::from_millis(50)).await;
        if io.write_all(b"1\r\nx\r\n").await.is_err() {
            break;
        }
    }
    assert_closed_within(&mut io, Duration::from_secs(3)).await;
    tokio::time::timeout(Duration::from_secs(3), task).await.unwrap().unwrap();
    assert!(rec.seen.lock().unwrap().is_empty(), "the core never sees a request whose body stalled");
}

#[tokio::test]
async fn body_read_timeout_leaves_a_body_sent_in_time_alone() {
    let rec = Recorder::default();
    let options = Limits::new().body_read_timeout(Duration::from_millis(300));
    let (mut io, _task) =
        start(rec.clone(), CallerSource::Fixed(Caller::OtherProcess), options, CancellationToken::new());
    io.write_all(b"POST /v1/close HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\nab").await.unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    io.write_all(b"cd").await.unwrap();
    let r = read_response(&mut io).await;
    assert!(r.starts_with("HTTP/1.1 200"), "{r}");
    // Keep-alive goes on, and an idle wait longer than the body timeout is
    // the header timeout's business, not the body's.
    tokio::time::sleep(Duration::from_millis(400)).await;
    io.write_all(b"GET /hello HTTP/1.1\r\nHost: x\r\n\r\n").await.unwrap();
    assert!(read_response(&mut io).await.starts_with("HTTP/1.1 200"));
    assert!(matches!(&rec.seen.lock().unwrap()[0].body, Body::Complete(b) if &b[..] == b"abcd"));
}

#[tokio::test]
async fn shutdown_grace_bounds_how_long_a_shutting_down_connection_waits_for_a_stalled_body() {
    let rec = Recorder::default();
    let shutdown = CancellationToken::new();
    let options =
        Limits::new().body_read_timeout(Duration::from_secs(60)).shutdown_grace(Duration::from_millis(200));
    let (mut io, task) =
        start(rec.clone(), CallerSource::Fixed(Caller::OtherProcess), options, shutdown.clone());
    io.write_all(b"POST /v1/close HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n0123456789")
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    shutdown.cancel();
    tokio::time::timeout(Duration::from_secs(3), task)
        .await
        .expect("the connection outlived the grace")
        .unwrap();
    assert!(rec.seen.lock().unwrap().is_empty());
}

/// Panics on every request: a bug in the core. `GET /hello` panics in the
/// borrowed read, every other request in `handle`.
#[derive(Clone)]
struct Panicker;

impl Handler for Panicker {
    fn handle(&self, request: Request) -> impl Future<Output = Response> + Send + 'static {
        let path = request.path;
        async move { panic!("a bug answering {path}") }
    }

    fn answer_read(&self, read: &Read<'_>) -> Option<Response> {
        if read.path == "/hello" {
            panic!("a bug answering {} at once", read.path);
        }
        None
    }
}

#[tokio::test]
async fn a_core_that_panics_on_a_read_or_a_write_answers_500_internal() {
    let (mut io, server) = tokio::io::duplex(1024 * 1024);
    let options = Limits::new();
    tokio::spawn(async move {
        let callers = CallerSource::Fixed(Caller::OtherProcess);
        let _ = serve_connection(
            Panicker,
            server,
            callers,
            &options,
            CancellationToken::new(),
            TaskTracker::new(),
        )
        .await;
    });
    // A read is answered on the connection's task (at once or through
    // `handle`), a write on a task of its own: each turns the panic into
    // the same answer, and the connection goes on.
    let requests = [
        "GET /v1/state HTTP/1.1\r\nHost: x\r\n\r\n".to_owned(),
        "POST /v1/close HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}".to_owned(),
        "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n".to_owned(),
    ];
    for request in requests {
        io.write_all(request.as_bytes()).await.unwrap();
        let response = read_response(&mut io).await;
        assert!(response.starts_with("HTTP/1.1 500"), "{request:?}: {response}");
        assert!(response.contains("\"code\":\"internal\""), "{response}");
        assert!(!response.contains("a bug answering"), "the panic's text stays inside: {response}");
    }
}
