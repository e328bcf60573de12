//! `durable` reads no answer past its limit (`--max-answer-mib`, 64 MiB by
//! default): against an agent that streams a body without end, or announces
//! one of a gigabyte and sends it, the doctor and the phone stop reading at
//! the limit and say so, naming the limit and the option, and their memory
//! stays near the limit (it went to several GB before).

mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use support::{TestDir, text};

/// How the fake agent sends its endless answer.
#[derive(Clone, Copy, Debug)]
enum Endless {
    /// `Transfer-Encoding: chunked`, chunks without end.
    Chunked,
    /// `Content-Length` of 1 GiB, then the bytes.
    Announced,
}

/// Answers every request on `path` with an answer that does not end (it
/// stops once the reader goes, or after 2 GiB).
fn endless_agent(path: &Path, how: Endless) {
    let listener = UnixListener::bind(path).unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { break };
            std::thread::spawn(move || serve(stream, how));
        }
    });
}

fn serve(stream: UnixStream, how: Endless) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut line = String::new();
    while reader.read_line(&mut line).is_ok_and(|n| n > 0) && line != "\r\n" {
        line.clear();
    }
    let mut stream = stream;
    let head = match how {
        Endless::Chunked => {
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n"
                .to_owned()
        }
        Endless::Announced => format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
            1u64 << 30
        ),
    };
    if stream.write_all(head.as_bytes()).is_err() {
        return;
    }
    let block = vec![b' '; 64 * 1024];
    let chunk = [format!("{:x}\r\n", block.len()).into_bytes(), block.clone(), b"\r\n".to_vec()].concat();
    let piece = match how {
        Endless::Chunked => &chunk,
        Endless::Announced => &block,
    };
    for _ in 0..(2u64 << 30) / piece.len() as u64 {
        if stream.write_all(piece).is_err() {
            return;
        }
    }
}

/// Peak resident memory of a process, in MiB (`VmHWM`).
fn peak_mib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse::<u64>().ok().map(|kib| kib / 1024)
}

#[test]
fn the_doctor_stops_reading_an_endless_answer_at_the_limit_and_names_it() {
    let dir = TestDir::new("bounded-doctor");
    for (n, how) in [Endless::Chunked, Endless::Announced].into_iter().enumerate() {
        let socket = dir.0.join(format!("d{n}.sock"));
        endless_agent(&socket, how);
        let args = vec![
            "--socket".to_owned(),
            socket.to_str().unwrap().to_owned(),
            "--max-answer-mib".to_owned(),
            "2".to_owned(),
        ];
        let out = support::doctor(&args, None);
        let t = text(&out);
        assert_eq!(out.status.code(), Some(1), "{how:?}:\n{t}");
        let hello =
            t.lines().find(|l| l.starts_with("FAIL  hello:")).unwrap_or_else(|| panic!("{how:?}:\n{t}"));
        assert!(
            hello.contains("larger than 2 MiB") && hello.contains("--max-answer-mib"),
            "{how:?}: {hello}"
        );
        assert!(!t.contains("panicked"), "{t}");
    }
}

#[test]
fn the_phone_stops_reading_at_the_default_limit_and_its_memory_stays_near_it() {
    let dir = TestDir::new("bounded-phone");
    let socket = dir.0.join("p.sock");
    endless_agent(&socket, Endless::Chunked);
    let mut child = Command::new(support::durable())
        .args(["phone", "--plain", "--socket", socket.to_str().unwrap()])
        .env_remove("COLLIE_TOKEN")
        .env_remove("COLLIE_DURABLE_SOCKET")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut seen = String::new();
    let mut line = String::new();
    while Instant::now() < deadline && stdout.read_line(&mut line).is_ok_and(|n| n > 0) {
        seen.push_str(&line);
        if line.contains("hello:") {
            break;
        }
        line.clear();
    }
    let peak = peak_mib(pid);
    drop(child.stdin.take());
    let _ = child.kill();
    let _ = child.wait();
    let mut rest = String::new();
    let _ = child.stderr.take().unwrap().read_to_string(&mut rest);
    assert!(
        line.contains("larger than 64 MiB") && line.contains("--max-answer-mib"),
        "no line about the limit:\n{seen}{rest}"
    );
    // The body held whole once, and hyper's buffers: well under what an
    // unbounded read took (2.9-9.4 GB before), with room for the allocator.
    let peak = peak.expect("the phone's /proc status");
    assert!(peak < 512, "the phone peaked at {peak} MiB reading a 64 MiB-limited answer");
}
