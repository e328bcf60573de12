//! The TLS server in a process of its own — this test executable run again
//! in "fixture" mode — spoken to by real clients: curl, Python's `ssl`, and
//! `openssl s_client`.
//!
//! The fixture's settings, tokens included, reach it only through its own
//! environment (`Command::env`); the test process never changes its own.

mod common;

use std::fs;
use std::io::Read;
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;

/// The agent when spawned as the fixture; run as a test, a check that the
/// fixture serves and closes cleanly (see `common::fixture_entry`).
#[test]
fn fixture_agent_process() {
    common::fixture_entry();
}

#[test]
fn with_the_token_get_hello_is_200_and_says_caller_check_token() {
    let mut agent = Agent::spawn(&[token_env()]);
    let address = agent.listening();
    assert!(address.starts_with("https://127.0.0.1:"), "{address}");
    assert_ne!(port_of(&address), 0, "the real port is reported");
    let (status, body) = get(&address, "/hello", &[&bearer(TOKEN)]);
    assert_eq!(status, 200, "{body}");
    let hello = json(&body);
    assert_eq!(hello["ok"], true);
    assert_eq!(hello["callerCheck"], "token");
    assert_eq!(hello["host"], "tls-test");
    let (status, body) = get(&address, "/v1/state", &[&bearer(TOKEN)]);
    assert_eq!(status, 200, "{body}");
    let output = agent.finish();
    assert!(!output.contains(TOKEN), "the token was written out: {output}");
}

#[test]
fn without_an_accepted_bearer_token_every_request_is_401_token_refused_and_nothing_else() {
    let wrong = "0000000000000000000000000000000000000000000000000000000000000000";
    let mut agent = Agent::spawn(&[token_env()]);
    let address = agent.listening();
    let cases: Vec<(&str, Vec<String>)> = vec![
        ("no Authorization header", vec![]),
        ("a wrong token", vec![bearer(wrong)]),
        ("`Bearer ` with nothing after it", vec!["Authorization: Bearer ".to_owned()]),
        ("`Bearer` alone", vec!["Authorization: Bearer".to_owned()]),
        ("Basic credentials", vec!["Authorization: Basic dXNlcjpwYXNzd29yZA==".to_owned()]),
        ("the token under another scheme", vec![format!("Authorization: Token {TOKEN}")]),
        ("the token less its last byte", vec![bearer(&TOKEN[..TOKEN.len() - 1])]),
        ("the token and one byte more", vec![bearer(&format!("{TOKEN}0"))]),
        ("the token in upper case", vec![bearer(&TOKEN.to_uppercase())]),
        ("the token in another header", vec![format!("X-Token: {TOKEN}")]),
        ("two Authorization headers", vec![bearer(TOKEN), bearer(wrong)]),
    ];
    for path in ["/hello", "/v1/state", "/v1/no-such-route"] {
        for (case, headers) in &cases {
            let headers: Vec<&str> = headers.iter().map(String::as_str).collect();
            let (status, body) = get(&address, path, &headers);
            assert_eq!(status, 401, "{case} on {path}: {body}");
            let v = json(&body);
            assert_eq!(v["ok"], false, "{case}");
            assert_eq!(v["code"], "token-refused", "{case}");
            let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
            assert_eq!(keys, ["ok", "code", "message"], "{case}: no other detail");
            assert!(!body.contains(TOKEN) && !body.contains(wrong), "{case}: {body}");
        }
    }
    // A write without the token does not reach the core either.
    let (status, body) = curl(
        &format!("{address}/v1/asks/970f8a0b30368fbbcab73013d31d2d51"),
        &["-k", "-X", "POST", "-H", "Content-Type: application/json", "--data-binary", "{}"],
    );
    assert_eq!(status, 401, "{body}");
    assert_eq!(json(&body)["code"], "token-refused");
    let output = agent.finish();
    assert!(!output.contains(TOKEN), "the token was written out: {output}");
}

#[test]
fn collie_token_next_is_accepted_beside_collie_token() {
    let mut agent = Agent::spawn(&[token_env(), ("COLLIE_TOKEN_NEXT", TOKEN_NEXT)]);
    let address = agent.listening();
    for token in [TOKEN, TOKEN_NEXT] {
        let (status, body) = get(&address, "/hello", &[&bearer(token)]);
        assert_eq!(status, 200, "{body}");
        assert_eq!(json(&body)["callerCheck"], "token");
    }
    let (status, _) = get(&address, "/hello", &[&bearer(&TOKEN_NEXT.replace('7', "8"))]);
    assert_eq!(status, 401);
    let output = agent.finish();
    assert!(!output.contains(TOKEN) && !output.contains(TOKEN_NEXT), "{output}");
}

#[test]
fn an_empty_collie_token_next_is_unset() {
    let mut agent = Agent::spawn(&[token_env(), ("COLLIE_TOKEN_NEXT", "")]);
    let address = agent.listening();
    assert_eq!(get(&address, "/hello", &[&bearer(TOKEN)]).0, 200);
    assert_eq!(get(&address, "/hello", &["Authorization: Bearer "]).0, 401);
    agent.finish();
}

/// Asserts the agent refused to start; returns its stderr.
fn refused_at_start(envs: &[(&str, &str)]) -> String {
    let (status, stdout, stderr) = Agent::spawn(envs).exit();
    assert!(!status.success(), "the agent started: {stdout:?}");
    assert!(!stdout.iter().any(|l| l.starts_with("listening")), "{stdout:?}");
    assert!(stderr.contains("fixture: error"), "{stderr}");
    stderr
}

#[test]
fn a_31_byte_collie_token_is_refused_at_start() {
    let short = &TOKEN[..31];
    let stderr = refused_at_start(&[("COLLIE_TOKEN", short)]);
    assert!(stderr.contains("COLLIE_TOKEN is 31 bytes"), "{stderr}");
    assert!(stderr.contains("at least 32"), "{stderr}");
    assert!(!stderr.contains(short), "the token's value was written out: {stderr}");
    // 32 bytes is enough.
    let mut agent = Agent::spawn(&[("COLLIE_TOKEN", &TOKEN[..32])]);
    let address = agent.listening();
    assert_eq!(get(&address, "/hello", &[&bearer(&TOKEN[..32])]).0, 200);
    agent.finish();
}

#[test]
fn a_31_byte_collie_token_next_is_refused_at_start() {
    let short = &TOKEN_NEXT[..31];
    let stderr = refused_at_start(&[token_env(), ("COLLIE_TOKEN_NEXT", short)]);
    assert!(stderr.contains("COLLIE_TOKEN_NEXT is 31 bytes"), "{stderr}");
    assert!(!stderr.contains(short) && !stderr.contains(TOKEN), "{stderr}");
}

#[test]
fn no_token_at_all_is_refused_at_start() {
    let stderr = refused_at_start(&[]);
    assert!(stderr.contains("no token: set COLLIE_TOKEN"), "{stderr}");
}

#[test]
fn plain_http_on_0_0_0_0_is_refused_at_start() {
    let port = free_port().to_string();
    let listen = format!("0.0.0.0:{port}");
    let stderr = refused_at_start(&[token_env(), (FIXTURE_PLAIN, "1"), (FIXTURE_LISTEN, &listen)]);
    assert!(stderr.contains("plain HTTP rule"), "{stderr}");
    assert!(stderr.contains(&listen), "{stderr}");
    // Nothing was bound.
    assert!(TcpStream::connect(("127.0.0.1", port.parse::<u16>().unwrap())).is_err());
}

#[test]
fn plain_http_on_127_0_0_1_with_a_port_is_served() {
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let mut agent = Agent::spawn(&[token_env(), (FIXTURE_PLAIN, "1"), (FIXTURE_LISTEN, &listen)]);
    let address = agent.listening();
    assert_eq!(address, format!("http://127.0.0.1:{port}"));
    let (status, body) = curl(&format!("{address}/hello"), &["-H", &bearer(TOKEN)]);
    assert_eq!(status, 200, "{body}");
    assert_eq!(json(&body)["callerCheck"], "token");
    let (status, body) = curl(&format!("{address}/hello"), &[]);
    assert_eq!(status, 401, "plain HTTP still needs the token: {body}");
    assert_eq!(json(&body)["code"], "token-refused");
    agent.finish();
}

#[test]
fn plain_http_on_localhost_with_a_port_is_served() {
    let port = free_port();
    let listen = format!("localhost:{port}");
    let mut agent = Agent::spawn(&[token_env(), (FIXTURE_PLAIN, "1"), (FIXTURE_LISTEN, &listen)]);
    let address = agent.listening();
    assert_eq!(address, format!("http://localhost:{port}"));
    let (status, body) = curl(&format!("http://127.0.0.1:{port}/hello"), &["-H", &bearer(TOKEN)]);
    assert_eq!(status, 200, "{body}");
    agent.finish();
}

#[test]
fn a_core_built_with_allow_always_starts_over_https() {
    // No start-up failure for a forgotten `allow_always(false)` (serving
    // over HTTPS turns it off: the server's unit tests check the flag).
    for env in [
        vec![token_env(), (FIXTURE_CORE_ALLOW_ALWAYS, "1")],
        vec![token_env(), (FIXTURE_CORE_ALLOW_ALWAYS, "1"), (FIXTURE_ALLOW_ALWAYS, "1")],
    ] {
        let mut agent = Agent::spawn(&env);
        let address = agent.listening();
        assert_eq!(get(&address, "/hello", &[&bearer(TOKEN)]).0, 200);
        agent.finish();
    }
}

#[test]
fn alpn_negotiates_http_1_1() {
    let mut agent = Agent::spawn(&[token_env()]);
    let port = port_of(&agent.listening()).to_string();

    // Python's ssl, offering h2 first: the server picks http/1.1.
    let out = python(PY_TLS_CLIENT, &[&port, "h2,http/1.1", TOKEN]);
    assert_eq!(py_field(&out, "alpn"), Some("http/1.1"), "{out}");
    assert_eq!(py_field(&out, "status"), Some("200"), "{out}");
    // Offering only h2: no protocol in common, the handshake fails.
    let out = python(PY_TLS_CLIENT, &[&port, "h2", TOKEN]);
    assert!(py_field(&out, "ssl-error").is_some(), "{out}");

    // openssl s_client.
    let mut child = Command::new("openssl")
        .args(["s_client", "-connect", &format!("127.0.0.1:{port}"), "-alpn", "http/1.1"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("openssl runs");
    let end = Instant::now() + Duration::from_secs(10);
    while child.try_wait().unwrap().is_none() {
        assert!(Instant::now() < end, "openssl s_client did not finish");
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("ALPN protocol: http/1.1"), "{text}");
    agent.finish();
}

#[test]
fn the_printed_fingerprint_is_the_certificate_the_server_presents() {
    let mut agent = Agent::spawn(&[token_env()]);
    let port = port_of(&agent.listening()).to_string();
    let printed = agent.expect("fingerprint ");
    assert_eq!(printed.len(), 95, "{printed}");
    assert!(printed.bytes().all(|b| b == b':' || b.is_ascii_digit() || (b'A'..=b'F').contains(&b)));
    let out = python(PY_TLS_CLIENT, &[&port, "http/1.1", TOKEN]);
    let seen = py_field(&out, "fingerprint").unwrap().to_uppercase();
    assert_eq!(printed.replace(':', ""), seen);
    // The warn sink (stderr) says it too.
    let output = agent.finish();
    assert!(output.contains(&format!("SHA-256 fingerprint {printed}")), "{output}");
}

#[test]
fn a_certificate_from_pem_files_is_verified_by_curl_and_python_with_the_ca_file() {
    let dir = TempDir::new();
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()])
        .unwrap()
        .self_signed(&key)
        .unwrap();
    let (cert_path, key_path) = (dir.join("cert.pem"), dir.join("key.pem"));
    fs::write(&cert_path, cert.pem()).unwrap();
    fs::write(&key_path, key.serialize_pem()).unwrap();

    let mut agent = Agent::spawn(&[
        token_env(),
        (FIXTURE_LISTEN, "localhost:0"),
        (FIXTURE_CERT, path_str(&cert_path)),
        (FIXTURE_KEY, path_str(&key_path)),
    ]);
    let address = agent.listening();
    let port = port_of(&address);
    assert_eq!(address, format!("https://localhost:{port}"));
    // No -k: curl checks the chain and the name.
    let auth = bearer(TOKEN);
    for url in [format!("https://localhost:{port}/hello"), format!("https://127.0.0.1:{port}/hello")] {
        let (status, body) = curl(&url, &["--cacert", path_str(&cert_path), "-H", &auth]);
        assert_eq!(status, 200, "{url}: {body}");
    }
    // Without the CA file the certificate is not trusted.
    let (status, _) = curl(&format!("https://127.0.0.1:{port}/hello"), &["-H", &auth]);
    assert_eq!(status, 0);
    let out = python(
        r#"
import ssl, sys, urllib.request
ctx = ssl.create_default_context(cafile=sys.argv[2])
req = urllib.request.Request("https://localhost:%s/hello" % sys.argv[1],
                             headers={"Authorization": "Bearer " + sys.argv[3]})
print(urllib.request.urlopen(req, context=ctx, timeout=10).read().decode())
"#,
        &[&port.to_string(), path_str(&cert_path), TOKEN],
    );
    assert_eq!(json(out.trim())["callerCheck"], "token", "{out}");
    assert!(agent.seen.iter().all(|l| !l.starts_with("fingerprint")), "no fingerprint for PEM files");
    agent.finish();
}

#[test]
fn a_missing_certificate_file_is_refused_at_start_naming_it() {
    let dir = TempDir::new();
    let cert = dir.join("missing-cert.pem");
    let key = dir.join("missing-key.pem");
    let stderr =
        refused_at_start(&[token_env(), (FIXTURE_CERT, path_str(&cert)), (FIXTURE_KEY, path_str(&key))]);
    assert!(stderr.contains("missing-cert.pem"), "{stderr}");
}

#[test]
fn a_client_stalled_in_its_handshake_holds_up_no_one_and_is_dropped() {
    let mut agent = Agent::spawn(&[token_env(), (FIXTURE_HANDSHAKE_MS, "500")]);
    let address = agent.listening();
    // Connects and never says hello.
    let mut stalled = TcpStream::connect(("127.0.0.1", port_of(&address))).unwrap();
    let started = Instant::now();
    let (status, body) = get(&address, "/hello", &[&bearer(TOKEN)]);
    assert_eq!(status, 200, "{body}");
    assert!(started.elapsed() < Duration::from_secs(5));
    // Past the handshake timeout the server drops it.
    stalled.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut buf = [0u8; 16];
    let read = stalled.read(&mut buf);
    assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
    assert!(started.elapsed() < Duration::from_secs(8), "dropped after {:?}", started.elapsed());
    agent.finish();
}

#[test]
fn close_stops_the_server_and_the_agent_exits_cleanly() {
    let mut agent = Agent::spawn(&[token_env()]);
    let port = port_of(&agent.listening());
    // A connection still in its handshake (with the default 10 s timeout)
    // does not hold the close up.
    let _stalled = TcpStream::connect(("127.0.0.1", port)).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    let started = Instant::now();
    agent.finish();
    assert!(started.elapsed() < Duration::from_secs(3), "close took {:?}", started.elapsed());
    assert!(TcpStream::connect(("127.0.0.1", port)).is_err());
}
