//! The limits a `Transport` carries reach the socket `open_collie` serves:
//! the cap and the timeouts (docs/reliability.md, "Connections").
#![cfg(all(unix, feature = "socket"))]

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::TempDir;
use durable_sdk::transport::CallerCheck;
use durable_sdk::{Collie, Limits, OpenOptions, Transport, open_collie};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;

/// `GET /hello` on `io`: the answer's status line.
async fn hello(io: &mut UnixStream) -> String {
    io.write_all(b"GET /hello HTTP/1.1\r\nHost: agent\r\n\r\n").await.unwrap();
    let mut buf = Vec::new();
    let mut byte = [0u8; 1];
    while !buf.ends_with(b"\r\n\r\n") {
        assert_eq!(io.read(&mut byte).await.unwrap(), 1, "closed mid-answer");
        buf.push(byte[0]);
    }
    let head = String::from_utf8(buf).unwrap();
    let length: usize = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().parse().unwrap())
        })
        .unwrap();
    let mut body = vec![0u8; length];
    io.read_exact(&mut body).await.unwrap();
    head.lines().next().unwrap().to_owned()
}

/// `max_connections(2)` in the transport's `Limits`: with two connections that have
/// made a request, a third is closed at once, and the two go on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_limits_max_connections_caps_the_socket() {
    let (_dir, socket, collie) = agent("cap", |o| {
        o.max_connections(2)
            .header_read_timeout(Duration::from_secs(60))
            .write_timeout(Duration::from_secs(60))
    })
    .await;
    let mut a = UnixStream::connect(&socket).await.unwrap();
    let mut b = UnixStream::connect(&socket).await.unwrap();
    assert_eq!(hello(&mut a).await, "HTTP/1.1 200 OK");
    assert_eq!(hello(&mut b).await, "HTTP/1.1 200 OK");
    let mut c = UnixStream::connect(&socket).await.unwrap();
    let mut rest = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), c.read_to_end(&mut rest))
        .await
        .expect("the connection past the cap stayed open")
        .unwrap();
    assert!(rest.is_empty());
    assert_eq!(hello(&mut a).await, "HTTP/1.1 200 OK");
    assert_eq!(hello(&mut b).await, "HTTP/1.1 200 OK");
    collie.close().await;
}

/// Reads `io` to its end, which must come within `within` (each timeout set
/// below is a fraction of a second against a default of 30 s or 10 s, so a
/// timeout that did not reach the socket runs past `within`).
async fn closed_within(io: &mut UnixStream, within: Duration) -> Vec<u8> {
    let mut rest = Vec::new();
    tokio::time::timeout(within, io.read_to_end(&mut rest))
        .await
        .expect("the connection outlived the timeout set in the limits")
        .unwrap();
    rest
}

/// An agent opened with `options` on a socket in a folder of its own
/// (kept while the test runs), ready; the test plays its Collie from the
/// agent's own process, so the caller check is off (on, the test's
/// connections would be served but keep no place under the cap).
async fn agent(name: &str, limits: impl FnOnce(Limits) -> Limits) -> (TempDir, PathBuf, Collie) {
    let dir = TempDir::new(name);
    let socket = dir.0.join("app.sock");
    let transport =
        Transport::socket_at(&socket).caller_check(CallerCheck::Off).limits(limits(Limits::new()));
    let collie = open_collie(OpenOptions::new("agent").transport(transport).warn(|_| {})).await.unwrap();
    collie.ready();
    (dir, socket, collie)
}

/// A connection whose write request stops a tenth of the way into its body.
async fn stalled_write(socket: &Path) -> UnixStream {
    let mut io = UnixStream::connect(socket).await.unwrap();
    io.write_all(b"POST /v1/workspaces/w/rename HTTP/1.1\r\nHost: agent\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"requestId\"")
        .await
        .unwrap();
    io
}

/// `header_read_timeout` and `body_read_timeout` in the limits: a
/// connection that sends no request, and one whose body stalls, are
/// closed by the socket, without an answer; the stalled request never runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_limits_read_timeouts_reach_the_socket() {
    let (_dir, socket, collie) = agent("timeouts", |o| {
        o.header_read_timeout(Duration::from_millis(300)).body_read_timeout(Duration::from_millis(300))
    })
    .await;
    let mut idle = UnixStream::connect(&socket).await.unwrap();
    let mut stalled = stalled_write(&socket).await;
    assert_eq!(closed_within(&mut idle, Duration::from_secs(10)).await, b"");
    assert_eq!(closed_within(&mut stalled, Duration::from_secs(10)).await, b"");
    // The socket serves on.
    let mut again = UnixStream::connect(&socket).await.unwrap();
    assert_eq!(hello(&mut again).await, "HTTP/1.1 200 OK");
    collie.close().await;
}

/// `shutdown_grace` in the limits: `close()` waits for a request whose
/// body stalls no longer than the grace (the default is 10 s).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_limits_shutdown_grace_bounds_close() {
    let (_dir, socket, collie) = agent("grace", |o| {
        o.body_read_timeout(Duration::from_secs(60)).shutdown_grace(Duration::from_millis(200))
    })
    .await;
    let mut stalled = stalled_write(&socket).await;
    // The request is in flight once its head is read: a `GET /hello` on
    // another connection answered after it says the server is past that.
    let mut other = UnixStream::connect(&socket).await.unwrap();
    assert_eq!(hello(&mut other).await, "HTTP/1.1 200 OK");
    tokio::time::timeout(Duration::from_secs(5), collie.close())
        .await
        .expect("close() waited past the grace set in the limits");
    assert_eq!(closed_within(&mut stalled, Duration::from_secs(5)).await, b"");
}

/// With the caller check on, the test's connections are the agent's own
/// (its process): served, but keeping no place. Past the cap a new one
/// takes the place of the oldest rather than being refused, so a runaway
/// tool cannot keep Collie out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_s_own_connections_keep_no_place_under_the_cap() {
    let dir = TempDir::new("own");
    let socket = dir.0.join("app.sock");
    let transport = Transport::socket_at(&socket).limits(Limits::new().max_connections(2));
    let collie = open_collie(OpenOptions::new("agent").transport(transport)).await.unwrap();
    collie.ready();
    let mut a = UnixStream::connect(&socket).await.unwrap();
    let mut b = UnixStream::connect(&socket).await.unwrap();
    assert_eq!(hello(&mut a).await, "HTTP/1.1 200 OK");
    assert_eq!(hello(&mut b).await, "HTTP/1.1 200 OK");
    let mut c = UnixStream::connect(&socket).await.unwrap();
    assert_eq!(closed_within(&mut a, Duration::from_secs(5)).await, b"", "the oldest gave its place");
    assert_eq!(hello(&mut c).await, "HTTP/1.1 200 OK", "the new one is served, not refused");
    assert_eq!(hello(&mut b).await, "HTTP/1.1 200 OK");
    collie.close().await;
}
