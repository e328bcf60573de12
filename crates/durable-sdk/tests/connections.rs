//! The facade's connection limits reach the socket `open_collie` serves:
//! the cap (docs/reliability.md, "Connections").
#![cfg(unix)]

mod common;

use std::time::Duration;

use common::TempDir;
use durable_sdk::{OpenOptions, open_collie};
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

/// `max_connections(2)` on `OpenOptions`: with two connections that have
/// made a request, a third is closed at once, and the two go on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_options_max_connections_caps_the_socket() {
    let dir = TempDir::new("cap");
    let socket = dir.0.join("app.sock");
    let options = OpenOptions::builder()
        .socket(&socket)
        .max_connections(2)
        .header_read_timeout(Duration::from_secs(60))
        .write_timeout(Duration::from_secs(60));
    let collie = open_collie(options).await.unwrap();
    collie.ready();
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
