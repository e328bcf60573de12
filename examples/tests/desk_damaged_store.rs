//! The desk on a damaged receipts store: after sends it acknowledged and a
//! `SIGKILL`, `receipts.sqlite3` emptied to 0 bytes, or its WAL cut in
//! half: the desk refuses to start — it exits non-zero, says on standard
//! error which file is damaged and how, and never serves — where it used
//! to serve and run every acknowledged send again as new.

mod desk_support;

use std::io::Read;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use desk_support::{Desk, TestDir, desk_binary};

/// Starts the desk, has it acknowledge sends, and kills it: the receipts
/// are in the WAL, not checkpointed. The receipts database's path.
fn acknowledged_then_killed(dir: &TestDir) -> PathBuf {
    let desk = Desk::start(dir, &["--turn-ms", "20"]);
    for i in 0..6 {
        let (status, body) = desk.send("ticket-1", &format!("snd-{i}"), &format!("message {i}"));
        assert_eq!(status, 200, "{body}");
    }
    desk.kill();
    PathBuf::from(dir.data()).join("receipts.sqlite3")
}

/// Runs the desk on the folder until it exits (30 s at most): its exit
/// code, standard output and standard error.
fn run_to_exit(dir: &TestDir) -> (Option<i32>, String, String) {
    let mut child = Command::new(desk_binary())
        .args(["--socket", &dir.socket(), "--data", &dir.data()])
        .env_remove("COLLIE_DURABLE_SOCKET")
        .env_remove("DESK_RECEIPTS_URL")
        .env_remove("RUST_LOG")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the desk example is built (cargo build -p durable-examples --examples)");
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the desk did not exit on a damaged store: it serves");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let (mut out, mut err) = (String::new(), String::new());
    child.stdout.take().unwrap().read_to_string(&mut out).unwrap();
    child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    (status.code(), out, err)
}

fn assert_refused(dir: &TestDir, damage: &str) {
    let (code, out, err) = run_to_exit(dir);
    assert!(code.is_some_and(|c| c != 0), "exit {code:?}; stderr:\n{err}");
    assert!(!out.contains("listening"), "it served:\n{out}");
    assert!(
        err.contains("receipts.sqlite3") && err.contains(damage),
        "stderr names the file and {damage:?}:\n{err}"
    );
    assert!(
        err.contains("from a backup") && err.contains("receipts.sqlite3.witness"),
        "stderr says what to do:\n{err}"
    );
}

#[test]
fn a_desk_whose_receipts_were_emptied_refuses_to_start() {
    let dir = TestDir::new("damaged-empty");
    let db = acknowledged_then_killed(&dir);
    std::fs::File::create(&db).unwrap(); // truncated to 0 bytes
    assert_refused(&dir, "emptied");
    assert_eq!(std::fs::metadata(&db).unwrap().len(), 0, "left as it was found");
}

#[test]
fn a_desk_whose_receipts_wal_was_cut_in_half_refuses_to_start() {
    let dir = TestDir::new("damaged-wal");
    let db = acknowledged_then_killed(&dir);
    let wal = std::fs::OpenOptions::new().write(true).open(db.with_extension("sqlite3-wal")).unwrap();
    let len = wal.metadata().unwrap().len();
    assert!(len > 0, "the acknowledged writes are in the WAL");
    wal.set_len(len / 2).unwrap();
    assert_refused(&dir, "rolled back from");
}
