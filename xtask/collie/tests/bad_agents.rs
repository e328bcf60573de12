//! `durable doctor` and `durable phone --plain` against agents that answer
//! badly: fake agents on a thread of this test (a Unix socket or a port on
//! 127.0.0.1) that answer another wire version, a body that is not JSON, a
//! `5xx`, a connection closed mid-answer, an answer that never ends, bytes
//! that are not TLS. Each gets one line naming what failed with a fix, exit
//! code 1 from the doctor, and never a panic.

mod support;

use std::path::Path;
use std::process::Output;

use support::{Fake, Lines, TestDir, doctor, text};

/// The line of `rule`, which must start with `verdict` (`ok`, `FAIL`, `skip`).
fn line<'a>(out: &'a str, verdict: &str, rule: &str) -> &'a str {
    out.lines()
        .find(|l| l.split_whitespace().take(2).eq([verdict, &format!("{rule}:")]))
        .unwrap_or_else(|| panic!("no `{verdict} {rule}:` line in:\n{out}"))
}

/// An HTTP head promising `length` bytes of JSON, and the first bytes of it.
fn cut(length: usize, start: &str) -> Vec<u8> {
    format!("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {length}\r\n\r\n{start}")
        .into_bytes()
}

/// The fakes every transport meets: a name, the fake, the rule that fails
/// and what its line says.
fn answers() -> Vec<(&'static str, Fake, &'static str, &'static str)> {
    vec![
        (
            "another wire version",
            Fake::hello(2, 3),
            "wire-range",
            "durable-hello: incompatible: the durable agent speaks 2..3, this Collie speaks 1..1",
        ),
        ("not JSON", Fake::answer(200, "<html>it works</html>"), "hello", "200 without a JSON body"),
        ("JSON, not a hello", Fake::answer(200, "[1, 2]"), "hello", r#"200 without "ok": true"#),
        (
            "a 500",
            Fake::answer(500, r#"{"ok": false, "code": "internal", "message": "boom"}"#),
            "hello",
            "answered 500 internal: the agent failed",
        ),
        ("a 503 without a body", Fake::answer(503, ""), "hello", "answered 503: the agent failed"),
        (
            "closed mid-answer",
            Fake::Bytes(cut(400, r#"{"ok": tr"#)),
            "hello",
            "no whole answer to GET /hello",
        ),
        ("closed before an answer", Fake::Bytes(Vec::new()), "hello", "no whole answer to GET /hello"),
        ("not HTTP", Fake::Bytes(b"\x00\x01\x02 hello?\r\n\r\n".to_vec()), "hello", "no whole answer"),
        ("an answer that never starts", Fake::Stall(Vec::new()), "hello", "GET /hello: no answer in 5 s"),
        (
            "an answer that never ends",
            Fake::Stall(cut(400, r#"{"ok": true, "wi"#)),
            "hello",
            "no answer in 5 s",
        ),
    ]
}

/// Runs the doctor on each address at once (the stalled ones wait 5 s).
fn doctors(runs: Vec<(String, Vec<String>)>, token: Option<&str>) -> Vec<(String, Output)> {
    std::thread::scope(|s| {
        let handles: Vec<_> =
            runs.into_iter().map(|(name, args)| s.spawn(move || (name, doctor(&args, token)))).collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

/// One failed check named with its fix, exit code 1, no panic; the token
/// (when there is one) never shown.
fn check_failed(name: &str, out: &Output, rule: &str, says: &str, token: Option<&str>) {
    let t = text(out);
    assert_eq!(out.status.code(), Some(1), "{name}:\n{t}");
    let l = line(&t, "FAIL", rule);
    assert!(l.contains(says) && l.contains(" -- fix: "), "{name}: {l}");
    assert_eq!(t.matches("FAIL").count(), 1, "{name}: one failure, one line:\n{t}");
    assert!(t.contains("doctor: 1 check failed"), "{name}:\n{t}");
    assert!(!t.contains("panicked"), "{name}:\n{t}");
    if let Some(token) = token {
        assert!(!t.contains(token), "{name}: the token shows:\n{t}");
    }
}

#[test]
fn doctor_names_what_a_bad_agent_on_a_socket_got_wrong() {
    let dir = TestDir::new("bad-sock");
    let mut runs = Vec::new();
    let mut expected = Vec::new();
    for (n, (name, fake, rule, says)) in answers().into_iter().enumerate() {
        let path = dir.0.join(format!("f{n}.sock"));
        fake.on_socket(&path);
        runs.push((name.to_owned(), vec!["--socket".to_owned(), path.to_str().unwrap().to_owned()]));
        expected.push((rule, says));
    }
    for ((name, out), (rule, says)) in doctors(runs, None).iter().zip(expected) {
        check_failed(name, out, rule, says, None);
        let t = text(out);
        // It connected: not a stale socket, whatever came back.
        line(&t, "ok", "socket-stale");
        line(&t, "ok", "socket-not-private");
        if rule == "wire-range" {
            for rule in ["hello", "caps", "ready"] {
                line(&t, "ok", rule);
            }
        } else {
            line(&t, "skip", "wire-range");
        }
    }
}

#[test]
fn doctor_names_what_a_bad_agent_on_plain_http_got_wrong() {
    let token = support::token();
    let mut runs = Vec::new();
    let mut expected = Vec::new();
    for (name, fake, rule, says) in answers() {
        let port = fake.on_tcp();
        runs.push((name.to_owned(), vec!["--url".to_owned(), format!("http://127.0.0.1:{port}")]));
        expected.push((rule, says));
    }
    for ((name, out), (rule, says)) in doctors(runs, Some(&token)).iter().zip(expected) {
        check_failed(name, out, rule, says, Some(&token));
        line(&text(out), "ok", "url-scheme");
    }
}

#[test]
fn doctor_names_an_https_agent_that_does_not_speak_tls() {
    let token = support::token();
    let plain = Fake::Now(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n".to_vec()).on_tcp();
    let silent = Fake::Stall(Vec::new()).on_tcp();
    let runs = vec![
        ("plain http", vec!["--url".into(), format!("https://127.0.0.1:{plain}"), "--insecure".into()]),
        (
            "silent",
            vec![
                "--url".into(),
                format!("https://127.0.0.1:{silent}"),
                "--fingerprint".into(),
                "ab".repeat(32),
            ],
        ),
    ];
    let runs = runs.into_iter().map(|(n, a)| (n.to_owned(), a)).collect();
    let outs = doctors(runs, Some(&token));
    check_failed(&outs[0].0, &outs[0].1, "certificate", "TLS with 127.0.0.1:", Some(&token));
    check_failed(&outs[1].0, &outs[1].1, "certificate", "no answer in 5 s", Some(&token));
    for (_, out) in &outs {
        let t = text(out);
        assert!(line(&t, "FAIL", "certificate").contains("serves HTTPS there"), "{t}");
        line(&t, "skip", "hello");
    }
}

/// `durable phone --plain` on `args`: a line that `says`, then `quit`, and
/// never a panic; it exits 0 when the agent answered something (`reaches`),
/// else 1, saying so, so a script can tell.
fn phone_says(args: &[String], token: Option<&str>, says: &str, reaches: bool) {
    let mut args = args.to_vec();
    args.push("--plain".into());
    let mut p = Lines::start_with(&args, token);
    p.expect_within(support::PATIENCE, says, |l| l.contains(says));
    p.send("quit");
    if !reaches {
        p.expect("the agent never answered");
    }
    let seen = p.seen.join("\n");
    let status = p.finish();
    assert!(!seen.contains("panicked"), "{args:?}:\n{seen}");
    if let Some(token) = token {
        assert!(!seen.contains(token), "the token shows:\n{seen}");
    }
    if reaches {
        assert!(status.success(), "{args:?}: {status}\n{seen}");
    } else {
        assert_eq!(status.code(), Some(1), "{args:?}: a phone that never reached the agent\n{seen}");
    }
}

#[test]
fn the_phone_names_what_a_bad_agent_got_wrong_and_never_panics() {
    let dir = TestDir::new("bad-phone");
    let socket = |n: usize| dir.0.join(format!("p{n}.sock"));
    let args = |path: &Path| vec!["--socket".to_owned(), path.to_str().unwrap().to_owned()];
    // (the fake, a line the phone says, whether the agent answered at all)
    let cases: Vec<(Fake, &str, bool)> = vec![
        (
            Fake::hello(2, 3),
            "durable-hello: incompatible: the durable agent speaks 2..3, this Collie speaks 1..1",
            true,
        ),
        (Fake::answer(200, "<html>it works</html>"), "hello: the answer is not JSON", true),
        (
            Fake::answer(500, r#"{"ok": false, "code": "internal", "message": "boom"}"#),
            "hello: 500 internal: boom",
            true,
        ),
        (Fake::Bytes(cut(400, r#"{"ok": tr"#)), "hello: ", false),
        (Fake::Bytes(Vec::new()), "hello: ", false),
        (Fake::Stall(Vec::new()), "hello: GET /hello: no answer in 5 s (is the agent running?", false),
    ];
    std::thread::scope(|s| {
        for (n, (fake, says, reaches)) in cases.into_iter().enumerate() {
            let path = socket(n);
            fake.on_socket(&path);
            let args = args(&path);
            s.spawn(move || phone_says(&args, None, says, reaches));
        }
        // No socket, and a stale one.
        let missing = socket(100);
        s.spawn(move || phone_says(&args(&missing), None, "No such file or directory", false));
        let stale = socket(101);
        drop(std::os::unix::net::UnixListener::bind(&stale).unwrap());
        s.spawn(move || phone_says(&args(&stale), None, "Connection refused", false));
        // Plain http that says nonsense, with a token never shown.
        let token = support::token();
        let port = Fake::answer(200, "not json").on_tcp();
        let url = vec!["--url".to_owned(), format!("http://127.0.0.1:{port}")];
        s.spawn(move || phone_says(&url, Some(&token), "hello: the answer is not JSON", true));
    });
}
