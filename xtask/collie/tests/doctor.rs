//! `durable doctor` against a healthy desk and against each broken
//! layout: a relative path, a path too long, a socket folder others can
//! read, a stale socket, no socket at all, a file that is not a socket, a
//! wrong token, a certificate that is not the pinned one, and command lines
//! it cannot use (exit code 2). Agents that answer badly are in
//! `bad_agents.rs`.

mod support;

use std::os::unix::fs::PermissionsExt;

use support::{Desk, TestDir, doctor, text};

/// The line of `rule`, which must start with `verdict` (`ok`, `FAIL`, `skip`).
fn line<'a>(out: &'a str, verdict: &str, rule: &str) -> &'a str {
    out.lines()
        .find(|l| l.split_whitespace().take(2).eq([verdict, &format!("{rule}:")]))
        .unwrap_or_else(|| panic!("no `{verdict} {rule}:` line in:\n{out}"))
}

#[test]
fn doctor_passes_a_healthy_desk_on_its_socket() {
    let dir = TestDir::new("doc-ok");
    let desk = Desk::socket(&dir, &[]);
    let out = doctor(&desk.args(), None);
    let t = text(&out);
    assert!(out.status.success(), "{t}");
    for rule in [
        "socket-path-absolute",
        "socket-path-length",
        "socket-not-private",
        "socket-stale",
        "hello",
        "wire-range",
        "caps",
        "ready",
    ] {
        line(&t, "ok", rule);
    }
    assert!(
        line(&t, "ok", "caps").contains("asks starters send steer abort rename close actions history reopen")
    );
    assert!(!t.contains("FAIL"), "{t}");
}

#[test]
fn doctor_refuses_a_relative_path() {
    let out = doctor(&["--socket".into(), "durable-desk/app.sock".into()], None);
    let t = text(&out);
    assert_eq!(out.status.code(), Some(1), "{t}");
    let l = line(&t, "FAIL", "socket-path-absolute");
    assert!(l.contains("relative") && l.contains("fix:") && l.contains("§1.1"), "{l}");
    line(&t, "skip", "hello");
}

#[test]
fn doctor_refuses_a_path_over_103_bytes() {
    let long = format!("/tmp/{}/app.sock", "d".repeat(100));
    let out = doctor(&["--socket".into(), long], None);
    let t = text(&out);
    assert_eq!(out.status.code(), Some(1), "{t}");
    let l = line(&t, "FAIL", "socket-path-length");
    assert!(l.contains("114 bytes") && l.contains("103"), "{l}");
}

#[test]
fn doctor_names_a_socket_folder_others_can_read() {
    let dir = TestDir::new("doc-open");
    let desk = Desk::socket(&dir, &[]);
    let folder = std::path::Path::new(&desk.address).parent().unwrap().to_owned();
    std::fs::set_permissions(&folder, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = doctor(&desk.args(), None);
    let t = text(&out);
    assert_eq!(out.status.code(), Some(1), "{t}");
    let l = line(&t, "FAIL", "socket-not-private");
    assert!(l.contains(&format!("{} is open to group or others (mode 0755)", folder.display())), "{l}");
    assert!(l.contains(&format!("fix: chmod 700 {}", folder.display())), "{l}");
    // The other checks still run: the agent answers.
    line(&t, "ok", "hello");
    line(&t, "ok", "ready");
    // A world-writable ancestor without the sticky bit is named too.
    std::fs::set_permissions(&folder, std::fs::Permissions::from_mode(0o700)).unwrap();
    std::fs::set_permissions(&dir.0, std::fs::Permissions::from_mode(0o777)).unwrap();
    let t = text(&doctor(&desk.args(), None));
    let l = line(&t, "FAIL", "socket-not-private");
    assert!(l.contains(&format!("{} is writable by group or others", dir.0.display())), "{l}");
    std::fs::set_permissions(&dir.0, std::fs::Permissions::from_mode(0o700)).unwrap();
    assert!(doctor(&desk.args(), None).status.success());
}

#[test]
fn doctor_finds_a_stale_socket() {
    let dir = TestDir::new("doc-stale");
    let desk = Desk::socket(&dir, &[]);
    let args = desk.args();
    desk.kill();
    assert!(std::path::Path::new(&args[1]).exists(), "SIGKILL leaves the socket file");
    let out = doctor(&args, None);
    let t = text(&out);
    assert_eq!(out.status.code(), Some(1), "{t}");
    let l = line(&t, "FAIL", "socket-stale");
    assert!(l.contains("connection refused") && l.contains("start the agent again"), "{l}");
    line(&t, "ok", "socket-not-private");
    line(&t, "skip", "ready");
    // No socket at all: one line says so, and what to do.
    std::fs::remove_file(&args[1]).unwrap();
    let out = doctor(&args, None);
    let t = text(&out);
    assert_eq!(out.status.code(), Some(1), "{t}");
    let l = line(&t, "FAIL", "socket-stale");
    assert!(
        l.contains(&format!("there is no socket at {}", args[1])) && l.contains("fix: start the agent"),
        "{l}"
    );
    assert_eq!(t.matches("FAIL").count(), 1, "{t}");
    // Nor its folder.
    std::fs::remove_dir_all(std::path::Path::new(&args[1]).parent().unwrap()).unwrap();
    let t = text(&doctor(&args, None));
    assert!(line(&t, "FAIL", "socket-stale").contains("does not exist"), "{t}");
    assert_eq!(t.matches("FAIL").count(), 1, "{t}");
    line(&t, "skip", "hello");
}

#[test]
fn doctor_names_a_file_that_is_not_a_socket() {
    let dir = TestDir::new("doc-file");
    let path = dir.0.join("app.sock");
    std::fs::write(&path, "").unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    let out = doctor(&["--socket".into(), path.to_str().unwrap().into()], None);
    let t = text(&out);
    assert_eq!(out.status.code(), Some(1), "{t}");
    assert!(line(&t, "FAIL", "socket-not-private").contains("is not a socket"), "{t}");
    // Not called stale: nothing could ever listen on a plain file.
    line(&t, "skip", "socket-stale");
    assert_eq!(t.matches("FAIL").count(), 1, "{t}");
}

/// Command lines the doctor (and the phone) cannot use: exit code 2, a
/// line that says what to write, no check run.
#[test]
fn unusable_command_lines_exit_2() {
    let cases: [&[&str]; 5] = [
        &[],
        &["--socket", "/tmp/a.sock", "--url", "https://127.0.0.1:1"],
        &["--url", "https://127.0.0.1:1", "--fingerprint", "not-hex"],
        &["--socket", ""],
        &["--sockets", "/tmp/a.sock"],
    ];
    for command in ["doctor", "phone"] {
        for args in cases {
            let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
            let out = support::run_durable(&support::durable(), command, &args, None);
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "durable {command} {args:?}:\n{}", text(&out));
            assert!(!err.trim().is_empty() && !err.contains("panicked"), "durable {command} {args:?}: {err}");
            assert!(!String::from_utf8_lossy(&out.stdout).contains("ok "), "a check ran: {}", text(&out));
        }
    }
}

/// `COLLIE_DURABLE_SOCKET` exported for the terminal is only a default:
/// with `--url` the commands reach the URL (no conflict, exit 2), and
/// without a flag they reach the socket it names.
#[test]
fn the_socket_variable_is_a_default_that_a_url_overrides() {
    let dir = TestDir::new("doc-env");
    let desk = Desk::socket(&dir, &[]);
    for command in ["doctor", "conformance"] {
        let out = std::process::Command::new(support::durable())
            .args([command, "--url", "http://127.0.0.1:1"])
            .env("COLLIE_DURABLE_SOCKET", dir.socket())
            .env("COLLIE_TOKEN", support::token())
            .output()
            .unwrap();
        // Port 1 answers nothing: a failed check or an unreachable agent, not a usage error.
        assert_eq!(
            out.status.code(),
            Some(1),
            "durable {command} --url with the variable set:\n{}",
            text(&out)
        );
    }
    let out = std::process::Command::new(support::durable())
        .arg("doctor")
        .env("COLLIE_DURABLE_SOCKET", dir.socket())
        .env_remove("COLLIE_TOKEN")
        .output()
        .unwrap();
    assert!(out.status.success(), "durable doctor on the variable's socket:\n{}", text(&out));
    drop(desk);
}

#[test]
fn doctor_over_https_checks_url_certificate_and_token() {
    let dir = TestDir::new("doc-https");
    let desk = Desk::https(&dir, &[]);
    let token = desk.token.clone().unwrap();
    let out = doctor(&desk.args(), Some(&token));
    let t = text(&out);
    assert!(out.status.success(), "{t}");
    for rule in ["url-scheme", "certificate", "token", "hello", "wire-range", "caps", "ready"] {
        line(&t, "ok", rule);
    }
    assert!(line(&t, "ok", "certificate").contains(desk.fingerprint.as_deref().unwrap()));
    assert!(!t.contains(&token), "the token shows:\n{t}");

    // A wrong token: the agent's 401, named with its fix; the token never printed.
    let wrong = "0123456789abcdef".repeat(4);
    let out = doctor(&desk.args(), Some(&wrong));
    let t = text(&out);
    assert_eq!(out.status.code(), Some(1), "{t}");
    let l = line(&t, "FAIL", "token");
    assert!(l.contains("401 token-refused") && l.contains("fix:"), "{l}");
    assert!(!t.contains(&wrong) && !t.contains(&token), "a token shows:\n{t}");
    // No token at all.
    let t = text(&doctor(&desk.args(), None));
    assert!(line(&t, "FAIL", "token").contains("COLLIE_TOKEN is not set"), "{t}");

    // Another pin: the fingerprint the agent shows, and the one expected.
    let mut args = desk.args();
    *args.last_mut().unwrap() = "ab".repeat(32);
    let t = text(&doctor(&args, Some(&token)));
    let l = line(&t, "FAIL", "certificate");
    assert!(l.contains(desk.fingerprint.as_deref().unwrap()) && l.contains(&"AB:".repeat(31)), "{l}");
    // No pin: the fingerprint to pin is shown, and the token is not sent to
    // a server not verified (were it, the agent would have accepted it).
    let t = text(&doctor(&["--url".into(), desk.address.clone()], Some(&token)));
    assert!(
        line(&t, "FAIL", "certificate")
            .contains(&format!("--fingerprint {}", desk.fingerprint.as_deref().unwrap()))
    );
    assert!(line(&t, "skip", "token").contains("not sent"), "{t}");
    line(&t, "skip", "hello");
    let t = text(&doctor(&["--url".into(), desk.address.clone(), "--insecure".into()], Some(&token)));
    line(&t, "ok", "certificate");
}

#[test]
fn doctor_refuses_plain_http_off_loopback() {
    let t = text(&doctor(&["--url".into(), "http://192.0.2.1:8080".into()], Some(&"a".repeat(40))));
    assert!(line(&t, "FAIL", "url-scheme").contains("only for 127.0.0.1 or localhost"), "{t}");
    let t = text(&doctor(&["--url".into(), "ftp://127.0.0.1:21".into()], None));
    line(&t, "FAIL", "url-scheme");
}
