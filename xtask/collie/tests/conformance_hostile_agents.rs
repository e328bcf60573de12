//! `durable conformance` against hostile agents: fake agents on a socket of
//! this test that stream a hello without end, announce one of a gigabyte,
//! send a hello that is not JSON, or fill their hello, ids and answers with
//! escape sequences, C1 controls and bidi overrides. The run ends with one
//! clear error naming the limit and `--max-answer-mib` (never a panic), its
//! memory stays near the limit (it went to 9.4 GB against an endless body),
//! and nothing the agent wrote reaches the terminal unescaped.

mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use support::{TestDir, durable};

/// What a fake agent sends back to one request.
enum Answer {
    /// These bytes, then the connection closes.
    Bytes(Vec<u8>),
    /// `Transfer-Encoding: chunked`, chunks without end (until the reader
    /// goes, or 4 GiB).
    EndlessChunked,
    /// `Content-Length` of 1 GiB, then the bytes (until the reader goes).
    AnnouncedGigabyte,
}

/// A whole answer with this status and body, its bytes as given.
fn answer(status: u16, body: &[u8]) -> Answer {
    let head = format!(
        "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    Answer::Bytes([head.as_bytes(), body].concat())
}

/// Serves `route(path)` on a socket at `path`, from threads, until the
/// test process ends.
fn fake_agent(path: &Path, route: impl Fn(&str) -> Answer + Send + Sync + 'static) {
    let listener = UnixListener::bind(path).expect("binding the fake agent's socket");
    let route = Arc::new(route);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { break };
            let route = route.clone();
            std::thread::spawn(move || serve(stream, &*route));
        }
    });
}

fn serve(stream: UnixStream, route: &dyn Fn(&str) -> Answer) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut request_line = String::new();
    if reader.read_line(&mut request_line).is_err() {
        return;
    }
    let mut length = 0;
    let mut line = String::new();
    while reader.read_line(&mut line).is_ok_and(|n| n > 0) && line != "\r\n" {
        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            length = v.trim().parse().unwrap_or(0);
        }
        line.clear();
    }
    let mut body = vec![0; length];
    let _ = reader.read_exact(&mut body);
    let path = request_line.split_whitespace().nth(1).unwrap_or("").to_owned();
    let mut stream = stream;
    let block = vec![b' '; 64 * 1024];
    match route(&path) {
        Answer::Bytes(bytes) => {
            let _ = stream.write_all(&bytes);
        }
        Answer::EndlessChunked => {
            let head =
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n";
            let chunk =
                [format!("{:x}\r\n", block.len()).into_bytes(), block.clone(), b"\r\n".to_vec()].concat();
            if stream.write_all(head.as_bytes()).is_err() {
                return;
            }
            for _ in 0..(4u64 << 30) / chunk.len() as u64 {
                if stream.write_all(&chunk).is_err() {
                    return;
                }
            }
        }
        Answer::AnnouncedGigabyte => {
            let head = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
                1u64 << 30
            );
            if stream.write_all(head.as_bytes()).is_err() {
                return;
            }
            for _ in 0..(1u64 << 30) / block.len() as u64 {
                if stream.write_all(&block).is_err() {
                    return;
                }
            }
        }
    }
}

/// How a watched run of `durable` ended.
struct Watched {
    code: Option<i32>,
    stdout: String,
    stderr: String,
    /// The most resident memory the process had (`VmHWM`), in MiB.
    peak_mib: u64,
}

/// The peak resident memory of a running process, in MiB.
fn peak_mib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse::<u64>().ok().map(|kib| kib / 1024)
}

/// Past this, a run is killed (and the test fails): without a limit, an
/// endless body would take the machine's memory.
const KILL_AT_MIB: u64 = 2048;

/// Runs `durable conformance <args>`, watching its peak memory, for at
/// most two minutes (a generous bound: it ends within a second or two).
fn conformance_watched(args: &[&str]) -> Watched {
    let mut child = Command::new(durable())
        .arg("conformance")
        .args(args)
        .env_remove("COLLIE_DURABLE_SOCKET")
        .env_remove("COLLIE_TOKEN")
        .env_remove("COLLIE_TOKEN_NEXT")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting durable conformance");
    let read_all = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            let _ = pipe.read_to_end(&mut bytes);
            String::from_utf8_lossy(&bytes).into_owned()
        })
    };
    let stdout = read_all(Box::new(child.stdout.take().unwrap()));
    let stderr = read_all(Box::new(child.stderr.take().unwrap()));
    let started = Instant::now();
    let mut peak = 0;
    let status = loop {
        if let Some(mib) = peak_mib(child.id()) {
            peak = peak.max(mib);
        }
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if peak > KILL_AT_MIB || started.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("durable conformance took {peak} MiB in {:?} and was killed", started.elapsed());
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    Watched {
        code: status.code(),
        stdout: stdout.join().unwrap(),
        stderr: stderr.join().unwrap(),
        peak_mib: peak,
    }
}

/// One clear error line from the run (exit code 1, no panic), naming the
/// limit and the option that raises it.
fn ends_naming_the_limit(run: &Watched, mib: u64) {
    let said = format!("{}{}", run.stdout, run.stderr);
    assert_eq!(run.code, Some(1), "{said}");
    assert!(!said.contains("panicked"), "{said}");
    let error = run.stderr.lines().find(|l| l.starts_with("durable conformance: ")).unwrap_or_default();
    assert!(
        error.contains(&format!("larger than {mib} MiB")) && error.contains("--max-answer-mib raises it"),
        "the error names neither the limit nor the option:\n{said}"
    );
}

#[test]
fn conformance_stops_an_endless_hello_at_the_limit_in_bounded_memory() {
    let dir = TestDir::new("cf-endless");
    let socket = dir.0.join("a.sock");
    fake_agent(&socket, |_| Answer::EndlessChunked);
    let run = conformance_watched(&["--socket", socket.to_str().unwrap()]);
    ends_naming_the_limit(&run, 64);
    // 64 MiB read, then dropped: far from the 9.4 GB it took without a limit.
    assert!(run.peak_mib < 512, "durable conformance peaked at {} MiB", run.peak_mib);
}

#[test]
fn conformance_refuses_an_announced_gigabyte_at_the_limit_it_is_given() {
    let dir = TestDir::new("cf-announced");
    let socket = dir.0.join("a.sock");
    fake_agent(&socket, |_| Answer::AnnouncedGigabyte);
    let run = conformance_watched(&["--socket", socket.to_str().unwrap(), "--max-answer-mib", "2"]);
    ends_naming_the_limit(&run, 2);
    assert!(run.stderr.contains("content-length 1073741824"), "{}", run.stderr);
    assert!(run.peak_mib < 512, "durable conformance peaked at {} MiB", run.peak_mib);
}

/// A terminal obeys none of what it prints: no ESC, no other C0 control
/// but the newlines between lines, no C1, no bidi control.
fn assert_inert(said: &str) {
    let bad: Vec<String> = said
        .chars()
        .filter(|c| {
            (c.is_control() && *c != '\n')
                || matches!(c, '\u{61c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
        })
        .map(|c| format!("{c:?}"))
        .collect();
    assert!(bad.is_empty(), "the report printed {bad:?} raw:\n{}", said.escape_debug());
}

/// What a hostile agent writes: a retitle, a clear screen, a C1 CSI and a
/// bidi override, raw.
const HOSTILE: &str = "\u{1b}]0;owned\u{7}\u{1b}[2J\u{9b}31m\u{202e}txet";

#[test]
fn a_hello_that_is_not_json_is_one_clear_error_printed_escaped() {
    let dir = TestDir::new("cf-not-json");
    let socket = dir.0.join("a.sock");
    fake_agent(&socket, |_| answer(200, format!("<html>{HOSTILE}</html>").as_bytes()));
    let run = conformance_watched(&["--socket", socket.to_str().unwrap()]);
    let said = format!("{}{}", run.stdout, run.stderr);
    assert_eq!(run.code, Some(1), "{said}");
    assert!(!said.contains("panicked"), "{said}");
    assert!(run.stderr.contains("gives no hello"), "{said}");
    assert!(run.stderr.contains(r"<html>\u{1b}]0;owned\u{7}\u{1b}[2J\u{9b}31m\u{202e}txet</html>"), "{said}");
    assert_inert(&said);
}

#[test]
fn the_report_shows_a_hostile_agents_words_escaped() {
    let dir = TestDir::new("cf-hostile");
    let socket = dir.0.join("a.sock");
    // Its hello and ids hold the characters as JSON escapes (they arrive
    // decoded); its other answers hold them raw, in bodies that are not JSON.
    let hello = r#"{"ok": true, "wire": {"min": 1, "max": 1},
        "sdk": {"name": "\u001b]0;owned\u0007", "version": "\u001b[2J"}, "host": "\u009b31m\u202etxet",
        "runtime": "rust", "ready": true, "epoch": "0123456789abcdef", "callerCheck": "on",
        "caps": {"asks": false, "starters": false, "send": true, "steer": false, "abort": false,
                 "rename": false, "close": false, "actions": false, "history": false, "reopen": false,
                 "terminal": false}}"#;
    let state = r#"{"ok": true, "epoch": "0123456789abcdef", "seq": 3, "ready": true, "full": true,
        "workspaces": [{"id": "w", "title": "W", "tabs": [{"id": "w:t", "title": "T", "panes": ["p\u202e\u009b"]}]}],
        "panes": [{"id": "p\u202e\u009b", "tab": "w:t", "title": "\u001b[2J", "state": "\u009b2J",
                   "turnId": null, "lastSeq": 0, "openAsks": [], "actions": []}],
        "removed": [], "closed": [], "starters": [], "asks": []}"#;
    fake_agent(&socket, move |path| match path.split('?').next() {
        Some("/hello") => answer(200, hello.as_bytes()),
        Some("/v1/state") => answer(200, state.as_bytes()),
        _ => answer(200, HOSTILE.as_bytes()),
    });
    let run = conformance_watched(&["--socket", socket.to_str().unwrap()]);
    let said = format!("{}{}", run.stdout, run.stderr);
    assert_eq!(run.code, Some(1), "{said}");
    assert!(!said.contains("panicked"), "{said}");
    let header = run.stdout.lines().next().unwrap_or_default();
    assert!(
        header.contains(r"(\u{1b}]0;owned\u{7} \u{1b}[2J, host \u{9b}31m\u{202e}txet;"),
        "the header line: {header}"
    );
    assert!(
        run.stdout.contains(r"\u{1b}[2J\u{9b}31m\u{202e}txet"),
        "no FAIL line shows the answers:\n{said}"
    );
    assert!(run.stdout.lines().filter(|l| l.starts_with("FAIL ")).count() >= 5, "{said}");
    assert_inert(&said);
}

#[test]
fn the_help_says_how_agent_cmd_pins_a_certificate_new_at_each_start() {
    let out = Command::new(durable()).args(["conformance", "--help"]).output().expect("durable --help");
    let help = String::from_utf8_lossy(&out.stdout).split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(out.status.success(), "{help}");
    assert!(
        help.contains("which no --fingerprint can pin across a restart: leave --fingerprint out, and after each start the run pins the fingerprint the agent prints"),
        "{help}"
    );
}
