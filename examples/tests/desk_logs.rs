//! The desk's logs, as an author reads them: on standard error (standard
//! output keeps its one `listening` line), filtered by `RUST_LOG`.
//! `RUST_LOG=durable_core=debug` shows each request with its route, pane
//! and request id, never the token; unset, the default (`info`) shows
//! Collie's hello and not the polls.

mod desk_support;

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};

use desk_support::{TestDir, desk_binary};

const TOKEN: &str = "desk-logs-token-0123456789abcdef-0123456789";

/// The desk over HTTPS (self-signed, a free port) with `RUST_LOG` as given
/// (`None`: unset), its standard error kept; with its address.
fn start(dir: &TestDir, rust_log: Option<&str>) -> (Child, String) {
    let mut cmd = Command::new(desk_binary());
    cmd.args(["--listen", "127.0.0.1:0", "--self-signed", "--data", &dir.data()])
        .env("COLLIE_TOKEN", TOKEN)
        .env_remove("COLLIE_TOKEN_NEXT")
        .env_remove("DESK_RECEIPTS_URL")
        .env_remove("RUST_LOG")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(filter) = rust_log {
        cmd.env("RUST_LOG", filter);
    }
    let mut child = cmd.spawn().expect("the desk example was built by cargo test");
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).expect("the desk prints `listening <address>`");
    let address = line.trim().strip_prefix("listening ").expect("listening <address>").to_owned();
    // Nothing else on standard output: the logs go to standard error.
    std::thread::spawn(move || {
        let mut rest = String::new();
        let _ = stdout.read_to_string(&mut rest);
        assert!(rest.is_empty(), "standard output past `listening`: {rest}");
    });
    (child, address)
}

/// `curl -k` with the token: the status.
fn curl(address: &str, path: &str, body: Option<&str>) -> u16 {
    let mut cmd = Command::new("curl");
    cmd.args(["-sSk", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "20"])
        .args(["-H", &format!("Authorization: Bearer {TOKEN}")]);
    if let Some(body) = body {
        cmd.args(["-H", "Content-Type: application/json", "--data-binary", body]);
    }
    let out = cmd.arg(format!("{address}{path}")).output().expect("curl runs");
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap_or(0)
}

/// Stops the desk and returns all it wrote on standard error.
fn stderr_of(mut child: Child) -> String {
    let _ = child.kill();
    let mut text = String::new();
    child.stderr.take().unwrap().read_to_string(&mut text).unwrap();
    let _ = child.wait();
    text
}

#[test]
fn rust_log_durable_core_debug_shows_each_request_of_the_desk_with_its_route_and_never_the_token() {
    let dir = TestDir::new("logs-debug");
    let (child, address) = start(&dir, Some("durable_core=debug"));
    assert_eq!(curl(&address, "/v1/state", None), 200);
    let hello = r#"{"collie": {"version": "1.22.0"}, "wire": {"min": 1, "max": 1}}"#;
    assert_eq!(curl(&address, "/hello", Some(hello)), 200);
    assert_eq!(curl(&address, "/v1/panes/ticket-1/send", Some(r#"{"requestId": "s-1", "text": "hi"}"#)), 200);
    let logs = stderr_of(child);

    let line_with =
        |parts: &[&str]| logs.lines().find(|l| parts.iter().all(|p| l.contains(p))).map(str::to_owned);
    let poll = line_with(&["DEBUG", "request{", r#"route="/v1/state""#, "answered status=200"]);
    assert!(poll.is_some(), "no request line for the poll in:\n{logs}");
    let send = line_with(&[
        r#"route="/v1/panes/{pane}/send""#,
        r#"pane="ticket-1""#,
        r#"request_id="s-1""#,
        "answered status=200",
    ]);
    assert!(send.is_some(), "no request line for the send in:\n{logs}");
    let hello = line_with(&["INFO", "Collie said hello", "collie_version=1.22.0"]);
    assert!(hello.is_some(), "no hello line in:\n{logs}");
    assert!(line_with(&["durable_core::routes"]).is_some(), "targets are module paths:\n{logs}");
    // Never the token, the header, or a body.
    for secret in [TOKEN, "Bearer", "Authorization", "\"text\"", "hi\""] {
        assert!(!logs.contains(secret), "{secret:?} in the logs:\n{logs}");
    }
}

#[test]
fn without_rust_log_the_desk_says_collies_hello_and_not_every_poll() {
    let dir = TestDir::new("logs-default");
    let (child, address) = start(&dir, None);
    assert_eq!(curl(&address, "/v1/state", None), 200);
    let hello = r#"{"collie": {"version": "1.23.0"}, "wire": {"min": 1, "max": 1}}"#;
    assert_eq!(curl(&address, "/hello", Some(hello)), 200);
    assert_eq!(curl(&address, "/hello", Some(hello)), 200);
    let logs = stderr_of(child);
    let hellos = logs.lines().filter(|l| l.contains("Collie said hello") && l.contains("1.23.0")).count();
    assert_eq!(hellos, 1, "one hello line per Collie version:\n{logs}");
    assert!(!logs.contains("answered status="), "a request line at the default level:\n{logs}");
    // The self-signed certificate's warn line, once (a tracing event now).
    let fingerprints = logs.lines().filter(|l| l.contains("SHA-256 fingerprint")).count();
    assert_eq!(fingerprints, 1, "{logs}");
    assert!(!logs.contains(TOKEN), "{logs}");
}
