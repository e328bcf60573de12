//! The desk under a file-size limit (`ulimit -f`), as a shared host or a
//! service manager may set one: a write past it does not end the desk in
//! silence (the kernel's `SIGXFSZ`), it fails as a write, the desk says so
//! on standard error and keeps answering.

mod desk_support;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use desk_support::{TestDir, desk_binary};

/// The limit, in `ulimit -f`'s blocks (512 bytes in dash, 1 KiB in bash):
/// room for the desk's first files, not for many receipts in the
/// write-ahead log.
const LIMIT_BLOCKS: u32 = 400;

fn curl(socket: &str, args: &[&str], path: &str) -> (u16, serde_json::Value) {
    let out = Command::new("curl")
        .args(["-sS", "--max-time", "20", "-w", "\n%{http_code}", "--unix-socket", socket])
        .args(args)
        .arg(format!("http://desk{path}"))
        .output()
        .expect("curl runs");
    let text = String::from_utf8_lossy(&out.stdout);
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", "0"));
    (code.trim().parse().unwrap_or(0), serde_json::from_str(body).unwrap_or_default())
}

#[test]
fn a_write_past_the_file_size_limit_is_reported_and_the_desk_keeps_answering() {
    let dir = TestDir::new("file-size");
    let socket = dir.socket();
    // `exec`: the limit is the desk's own, and so is the process waited on.
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(format!("ulimit -f {LIMIT_BLOCKS} && exec \"$0\" \"$@\""))
        .arg(desk_binary())
        .args(["--socket", &socket, "--data", &dir.data()])
        .env_remove("COLLIE_DURABLE_SOCKET")
        .env_remove("DESK_RECEIPTS_URL")
        .env_remove("RUST_LOG")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the desk example was built by cargo test");
    let (tx, lines) = mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    let stderr = child.stderr.take().unwrap();
    let out_tx = tx.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = out_tx.send(line);
        }
    });
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let mut seen = Vec::new();
    let wait_for = |seen: &mut Vec<String>, check: &dyn Fn(&str) -> bool| -> bool {
        let deadline = Instant::now() + Duration::from_secs(30);
        while let Ok(line) = lines.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            seen.push(line);
            if check(seen.last().unwrap()) {
                return true;
            }
        }
        false
    };
    assert!(
        wait_for(&mut seen, &|l| l.starts_with("listening ")),
        "the desk did not start under ulimit -f {LIMIT_BLOCKS}:\n{}",
        seen.join("\n")
    );

    // Renames until one passes the limit: each is a receipt committed to the
    // store before its answer.
    let mut refused = None;
    for n in 0..2_000 {
        let body = serde_json::json!({
            "requestId": format!("fs-{n}"),
            "target": "pane",
            "id": "ticket-1",
            "title": format!("Refund {n} {}", "x".repeat(200)),
        });
        let (status, answer) = curl(
            &socket,
            &["-X", "POST", "-H", "Content-Type: application/json", "--data-binary", &body.to_string()],
            "/v1/rename",
        );
        if status != 200 {
            refused = Some((n, status, answer));
            break;
        }
    }
    let (n, status, answer) = refused.expect("2,000 renames never passed the file-size limit");
    assert!(status >= 500, "rename {n}: {status} {answer}");
    assert!(
        wait_for(&mut seen, &|l| l.contains("file-size limit (ulimit -f)")),
        "no line about the file-size limit after rename {n} ({status} {answer}):\n{}",
        seen.join("\n")
    );
    // Still there, and still answering what needs no new file space.
    assert!(child.try_wait().unwrap().is_none(), "the desk ended:\n{}", seen.join("\n"));
    let (status, state) = curl(&socket, &[], "/v1/state");
    assert_eq!(status, 200, "{state}");
    assert!(state["panes"].as_array().is_some_and(|p| !p.is_empty()), "{state}");
    let _ = child.kill();
    let _ = child.wait();
}
