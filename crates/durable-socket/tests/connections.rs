//! Attacks on the socket server's connections, made by clients of the real
//! socket: a flood past the cap, and a client that never reads its answer.
//! (The caller check already limits who connects: another process of the
//! same user. The limits hold all the same.)
//!
//! Each test proves a limit of `docs/reliability.md` ("Connections"). Every
//! wait on a timeout is a generous multiple of it, and no test asserts how
//! fast anything is.

mod common;

use std::path::Path;
use std::time::Duration;

use common::{TempDir, core};
use durable_runtime::{Collie, PaneOptions};
use durable_socket::{Limits, SocketOptions, SocketOptionsBuilder, serve};
use durable_types::Item;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;

/// The connection limits under test: a cap and a write-progress timeout.
fn limits(
    builder: SocketOptionsBuilder,
    max_connections: usize,
    write_timeout: Duration,
) -> SocketOptionsBuilder {
    builder.limits(Limits::new().max_connections(max_connections).write_timeout(write_timeout))
}

/// Reads one answer (headers, then a `Content-Length` body): its status.
async fn answer(io: &mut UnixStream) -> u16 {
    let mut buf = Vec::new();
    let mut byte = [0u8; 1];
    while !buf.ends_with(b"\r\n\r\n") {
        assert_eq!(
            io.read(&mut byte).await.unwrap(),
            1,
            "closed mid-answer: {}",
            String::from_utf8_lossy(&buf)
        );
        buf.push(byte[0]);
    }
    let head = String::from_utf8(buf).unwrap();
    let length: usize = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().parse().unwrap())
        })
        .unwrap_or(0);
    let mut body = vec![0u8; length];
    io.read_exact(&mut body).await.unwrap();
    head[9..12].parse().unwrap()
}

async fn poll(io: &mut UnixStream) -> u16 {
    io.write_all(b"GET /v1/state HTTP/1.1\r\nHost: agent\r\n\r\n").await.unwrap();
    answer(io).await
}

/// Whether the server closes `io` within `within` (reading and dropping
/// whatever comes first).
async fn closed_within(mut io: UnixStream, within: Duration) -> bool {
    let mut sink = Vec::new();
    tokio::time::timeout(within, io.read_to_end(&mut sink)).await.is_ok()
}

/// Limit: the cap on connections. An agent capped at 4: Collie's kept-alive
/// connection has made a request, then 20 connections that send nothing
/// arrive. Each new one displaces the oldest that has made no request, so
/// the server holds at most 4; Collie's connection is never displaced and
/// its polls go on, and a fresh connection of Collie's is served too.
/// Before, the server held all 20 (until their header timeout, 30 s).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_past_the_cap_is_displaced_and_a_polling_collie_is_served() {
    let dir = TempDir::new();
    let path = dir.join("run/app.sock");
    // The test plays Collie from the agent's own process, which the caller
    // check would place in the agent's tree (served, but never keeping a
    // place): with the check off it is a caller like Collie.
    let options = limits(SocketOptions::builder().path(&path), 4, Duration::from_secs(30))
        .caller_check(durable_socket::CallerCheck::Off);
    let server = serve(core().driver(), options.build()).await.unwrap();
    let mut collie = UnixStream::connect(&path).await.unwrap();
    assert_eq!(poll(&mut collie).await, 200);

    let mut flood = Vec::new();
    for _ in 0..20 {
        flood.push(UnixStream::connect(&path).await.unwrap());
        assert_eq!(poll(&mut collie).await, 200, "Collie's kept-alive connection was displaced");
    }
    let mut fresh = UnixStream::connect(&path).await.unwrap();
    assert_eq!(poll(&mut fresh).await, 200);
    assert_eq!(poll(&mut collie).await, 200);

    let waits: Vec<_> =
        flood.into_iter().map(|io| tokio::spawn(closed_within(io, Duration::from_secs(5)))).collect();
    let mut closed = 0;
    for wait in waits {
        closed += usize::from(wait.await.unwrap());
    }
    // 22 connections came to a cap of 4, two of them Collie's.
    assert!(closed >= 18, "the server closed {closed} of the 20 flood connections, not at least 18");
    assert_eq!(poll(&mut collie).await, 200);
    server.close().await;
}

/// A pane `big` with 16 reply items of 200,000 bytes: its events answer
/// (3.2 MB) is larger than the socket's buffers.
fn big(core: &Collie) {
    let pane = core
        .workspace("w", "W")
        .unwrap()
        .tab("t", "T")
        .unwrap()
        .pane("big", PaneOptions::new("Big"))
        .unwrap();
    let text = "x".repeat(200_000);
    for i in 0..16 {
        pane.write(Item::reply(&format!("r-{i}"), text.clone()).unwrap()).unwrap();
    }
}

/// Sends the request for the big pane's events, reads nothing for `wait`,
/// then everything until the server closes (at most `wait` more): (the
/// answer's `Content-Length`, body bytes received, whether it closed).
async fn never_read(path: &Path, wait: Duration) -> (usize, usize, bool) {
    let mut io = UnixStream::connect(path).await.unwrap();
    io.write_all(b"GET /v1/panes/big/events?after=0 HTTP/1.1\r\nHost: agent\r\n\r\n").await.unwrap();
    tokio::time::sleep(wait).await;
    let mut data = Vec::new();
    let mut chunk = vec![0u8; 1 << 16];
    let closed = loop {
        match tokio::time::timeout(wait, io.read(&mut chunk)).await {
            Ok(Ok(0)) | Ok(Err(_)) => break true,
            Ok(Ok(n)) => data.extend_from_slice(&chunk[..n]),
            Err(_) => break false,
        }
    };
    let end = data.windows(4).position(|w| w == b"\r\n\r\n").expect("no answer head") + 4;
    let head = String::from_utf8_lossy(&data[..end]).to_ascii_lowercase();
    assert!(head.starts_with("http/1.1 200"), "{head}");
    let length = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:").map(|v| v.trim().parse().unwrap()))
        .expect("no content-length");
    (length, data.len() - end, closed)
}

/// Limit: the write-progress timeout. A client asks for an answer larger
/// than the socket's buffers and reads nothing: after the write timeout
/// (500 ms here; it waits 3 s) the server gives up and closes, having sent
/// part of it. Before, the server waited on that write for ever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_never_reads_its_answer_is_cut_off_by_the_write_timeout() {
    let dir = TempDir::new();
    let path = dir.join("run/app.sock");
    let core = core();
    big(&core);
    let options = limits(SocketOptions::builder().path(&path), 64, Duration::from_millis(500));
    let server = serve(core.driver(), options.build()).await.unwrap();
    let (length, received, closed) = never_read(&path, Duration::from_secs(3)).await;
    assert!(length > 3_000_000, "{length}");
    assert!(received < length, "the whole answer came ({received} bytes): the server never gave up");
    assert!(closed, "the connection stayed open");
    // The agent serves on.
    let mut io = UnixStream::connect(&path).await.unwrap();
    assert_eq!(poll(&mut io).await, 200);
    server.close().await;
}
