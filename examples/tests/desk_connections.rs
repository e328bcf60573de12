//! `--max-connections N` sets the desk's cap on connections on both
//! transports: with a cap of 1, a connection that has sent nothing is
//! displaced as soon as a request needs the place (`docs/reliability.md`,
//! "The cap on connections"); under the default cap of 64 it would stay open
//! until its header-read timeout (30 s), or its handshake timeout (10 s) over
//! HTTPS.

mod desk_support;

use std::io::Read;
use std::time::Duration;

use desk_support::{Desk, TestDir};

const TOKEN: &str = "desk-test-token-0123456789abcdef-0123456789";

/// Waits up to 5 s for the peer to close `idle`: true when it did.
fn closed_by_the_desk(mut idle: impl Read) -> bool {
    let mut buf = [0u8; 64];
    match idle.read(&mut buf) {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) => !matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut),
    }
}

#[test]
fn max_connections_caps_the_socket() {
    let dir = TestDir::new("cap-socket");
    let desk = Desk::start(&dir, &["--max-connections", "1"]);
    let idle = std::os::unix::net::UnixStream::connect(&desk.address).unwrap();
    idle.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    std::thread::sleep(Duration::from_millis(200)); // accepted: it holds the one place
    let (status, state) = desk.get("/v1/state");
    assert_eq!(status, 200, "{state}");
    assert!(closed_by_the_desk(idle), "the idle connection kept its place past a cap of 1");
}

#[test]
fn max_connections_caps_https() {
    let dir = TestDir::new("cap-https");
    let desk = Desk::start_https(&dir, TOKEN, &["--max-connections", "1"]);
    let addr = desk.address.strip_prefix("https://").unwrap();
    let idle = std::net::TcpStream::connect(addr).unwrap();
    idle.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let (status, state) = desk.get("/v1/state");
    assert_eq!(status, 200, "{state}");
    assert!(closed_by_the_desk(idle), "the idle connection kept its place past a cap of 1");
}
