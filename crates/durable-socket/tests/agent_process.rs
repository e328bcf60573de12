//! The caller check and the path's environment default, with the agent in a
//! process of its own: this test executable run again in "fixture" mode.
//!
//! Serving in the test process would make every process the test starts a
//! descendant of the agent; here the test process is the agent's parent,
//! which is not its descendant.

mod common;

use std::ffi::OsString;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use common::{ANSWER_BODY, ANSWER_PATH, Need, TempDir, core, curl, needs, set_mode};
use durable_socket::{SocketOptions, serve};

const FIXTURE: &str = "DURABLE_SOCKET_FIXTURE";
const FIXTURE_PATH: &str = "DURABLE_SOCKET_FIXTURE_PATH";
const FIXTURE_CURL: &str = "DURABLE_SOCKET_FIXTURE_CURL";
const FIXTURE_PYTHON: &str = "DURABLE_SOCKET_FIXTURE_PYTHON";

/// Spawned with `DURABLE_SOCKET_FIXTURE` set, the agent; run as a test, it
/// checks what every other test here leans on: the fixture serves on the
/// path it is given, says so, and closes cleanly when its stdin closes.
///
/// As the agent it serves a core on `DURABLE_SOCKET_FIXTURE_PATH` (or, unset, on the
/// default path), reports on stdout as `fixture: …` lines, optionally runs
/// curl itself (a process the agent launches) or a python3 script
/// (`DURABLE_SOCKET_FIXTURE_PYTHON`, given the socket path as its argument,
/// each line it prints relayed as `fixture: py <line>`), and closes when its
/// stdin closes.
#[test]
fn fixture_agent_process() {
    if std::env::var_os(FIXTURE).is_none() {
        let dir = TempDir::new();
        let path = socket_in(&dir);
        let mut agent = Agent::spawn(&[path_env(&path)], None);
        assert_eq!(agent.expect("listening"), path.display().to_string());
        agent.expect("ready");
        let lines = agent.finish();
        assert_eq!(lines.last().map(String::as_str), Some("closed"), "{lines:?}");
        return;
    }
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.block_on(async {
        let mut builder = SocketOptions::builder().observe_callers(|c| println!("fixture: caller {c:?}"));
        if let Some(path) = std::env::var_os(FIXTURE_PATH) {
            builder = builder.path(path);
        }
        let server = match serve(core().driver(), builder.build()).await {
            Ok(server) => server,
            Err(e) => {
                println!("fixture: error {e}");
                return;
            }
        };
        println!("fixture: listening {}", server.address().display());
        if std::env::var_os(FIXTURE_CURL).is_some() {
            let path = server.address().to_owned();
            let (read, write) = tokio::task::spawn_blocking(move || {
                (
                    curl(&path, "GET", "/v1/state", None).0,
                    curl(&path, "POST", ANSWER_PATH, Some(ANSWER_BODY)).0,
                )
            })
            .await
            .unwrap();
            println!("fixture: child-read {read}");
            println!("fixture: child-write {write}");
        }
        if let Some(script) = std::env::var_os(FIXTURE_PYTHON) {
            let path = server.address().to_owned();
            let out = tokio::task::spawn_blocking(move || {
                Command::new("python3").arg("-c").arg(script).arg(path).stderr(Stdio::inherit()).output()
            })
            .await
            .unwrap()
            .expect("python3 runs");
            for line in String::from_utf8_lossy(&out.stdout).lines() {
                println!("fixture: py {line}");
            }
            println!("fixture: py-exit {}", out.status.code().unwrap_or(-1));
        }
        println!("fixture: ready");
        tokio::task::spawn_blocking(|| {
            let _ = std::io::stdin().read_to_end(&mut Vec::new());
        })
        .await
        .unwrap();
        server.close().await;
        println!("fixture: closed");
    });
}

/// An agent running in a child process.
struct Agent {
    child: Child,
    lines: Receiver<String>,
    seen: Vec<String>,
}

impl Agent {
    fn spawn(envs: &[(&str, OsString)], uid: Option<u32>) -> Agent {
        let mut cmd = Command::new(std::env::current_exe().unwrap());
        cmd.args(["--exact", "fixture_agent_process", "--nocapture", "--test-threads=1"])
            .env(FIXTURE, "1")
            .env_remove("COLLIE_DURABLE_SOCKET")
            .env_remove(FIXTURE_PATH)
            .env_remove(FIXTURE_CURL)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        for (k, v) in envs {
            cmd.env(k, v);
        }
        if let Some(uid) = uid {
            use std::os::unix::process::CommandExt;
            cmd.uid(uid).gid(uid);
        }
        let mut child = cmd.spawn().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                // The harness may print `test … ... ` on the same line first.
                if let Some((_, rest)) = line.split_once("fixture: ") {
                    let _ = tx.send(rest.to_owned());
                }
            }
        });
        Agent { child, lines, seen: Vec::new() }
    }

    /// Waits for a line starting with `prefix`; returns the rest of it.
    fn expect(&mut self, prefix: &str) -> String {
        let end = Instant::now() + Duration::from_secs(60);
        loop {
            match self.lines.recv_timeout(end.saturating_duration_since(Instant::now())) {
                Ok(line) => {
                    self.seen.push(line.clone());
                    if let Some(rest) = line.strip_prefix(prefix) {
                        return rest.trim().to_owned();
                    }
                    if let Some(error) = line.strip_prefix("error ") {
                        panic!("the agent could not start: {error}");
                    }
                }
                Err(RecvTimeoutError::Timeout) => panic!("no {prefix:?} from the agent; saw {:?}", self.seen),
                Err(RecvTimeoutError::Disconnected) => panic!("the agent exited; saw {:?}", self.seen),
            }
        }
    }

    /// Closes the agent (its stdin) and returns every line it wrote.
    fn finish(mut self) -> Vec<String> {
        drop(self.child.stdin.take());
        let end = Instant::now() + Duration::from_secs(60);
        while let Ok(line) = self.lines.recv_timeout(end.saturating_duration_since(Instant::now())) {
            self.seen.push(line);
        }
        let status = self.child.wait().unwrap();
        assert!(status.success(), "the agent failed: {status}; saw {:?}", self.seen);
        self.seen
    }
}

fn socket_in(dir: &TempDir) -> PathBuf {
    dir.join("run/app.sock")
}

fn path_env(path: &Path) -> (&'static str, OsString) {
    (FIXTURE_PATH, path.as_os_str().to_owned())
}

fn callers(lines: &[String]) -> Vec<&str> {
    lines.iter().filter_map(|l| l.strip_prefix("caller ")).collect()
}

#[test]
fn a_process_the_agent_launches_is_classified_self_or_descendant() {
    let dir = TempDir::new();
    let mut agent = Agent::spawn(&[path_env(&socket_in(&dir)), (FIXTURE_CURL, "1".into())], None);
    agent.expect("ready");
    let lines = agent.finish();
    assert_eq!(callers(&lines), ["SelfOrDescendant", "SelfOrDescendant"], "{lines:?}");
}

#[test]
fn a_process_the_agent_launches_gets_403_on_a_write_and_200_on_a_read() {
    let dir = TempDir::new();
    let mut agent = Agent::spawn(&[path_env(&socket_in(&dir)), (FIXTURE_CURL, "1".into())], None);
    let read = agent.expect("child-read");
    let write = agent.expect("child-write");
    agent.finish();
    assert_eq!(read, "200", "a read from the agent's own child is served");
    assert_eq!(write, "403", "a write from the agent's own child is refused");
}

#[test]
fn an_unrelated_processs_write_is_not_refused_as_self() {
    let dir = TempDir::new();
    let path = socket_in(&dir);
    let mut agent = Agent::spawn(&[path_env(&path)], None);
    agent.expect("ready");
    // This test process started the agent: it is the agent's parent, and its
    // curl is no descendant of the agent.
    let (status, body) = curl(&path, "POST", ANSWER_PATH, Some(ANSWER_BODY));
    let lines = agent.finish();
    assert_eq!(callers(&lines), ["OtherProcess"], "{lines:?}");
    assert_ne!(status, 0, "no HTTP answer");
    assert_ne!(status, 403, "an unrelated process's write was refused: {body}");
}

/// A folder the other user owns, with mode 0700, to serve from.
fn folder_for(uid: u32) -> TempDir {
    let dir = TempDir::new();
    std::os::unix::fs::chown(dir.path(), Some(uid), Some(uid)).unwrap();
    set_mode(dir.path(), 0o700);
    dir
}

#[test]
fn an_agent_running_as_another_uid_refuses_roots_connection_with_403() {
    // Root, to run the agent as another user.
    if !needs(Need::Root, "an_agent_running_as_another_uid_refuses_roots_connection_with_403") {
        return;
    }
    let dir = folder_for(65534);
    let path = socket_in(&dir);
    let mut agent = Agent::spawn(&[path_env(&path)], Some(65534));
    agent.expect("ready");
    let read = curl(&path, "GET", "/hello", None);
    let write = curl(&path, "POST", ANSWER_PATH, Some(ANSWER_BODY));
    let lines = agent.finish();
    // Classified as another user, then refused on reads and writes alike.
    assert_eq!(callers(&lines), ["OtherUser", "OtherUser"], "{lines:?}");
    assert_eq!(read.0, 403, "{}", read.1);
    assert_eq!(write.0, 403, "{}", write.1);
}

#[test]
fn the_socket_path_defaults_to_collie_durable_socket() {
    let dir = TempDir::new();
    let path = socket_in(&dir);
    let mut agent = Agent::spawn(&[("COLLIE_DURABLE_SOCKET", path.as_os_str().to_owned())], None);
    assert_eq!(agent.expect("listening"), path.display().to_string());
    assert!(path.exists());
    agent.finish();
    assert!(!path.exists(), "close removed the socket");
}

#[test]
fn the_socket_option_overrides_collie_durable_socket() {
    let dir = TempDir::new();
    let chosen = dir.join("chosen/app.sock");
    let env = socket_in(&dir);
    let mut agent =
        Agent::spawn(&[path_env(&chosen), ("COLLIE_DURABLE_SOCKET", env.as_os_str().to_owned())], None);
    assert_eq!(agent.expect("listening"), chosen.display().to_string());
    assert!(!env.exists());
    agent.finish();
}

#[test]
fn without_a_path_or_collie_durable_socket_start_up_fails_saying_so() {
    let agent = Agent::spawn(&[], None);
    let lines = agent.finish();
    let error = lines.iter().find_map(|l| l.strip_prefix("error ")).unwrap_or_else(|| panic!("{lines:?}"));
    assert!(error.contains("no socket path"), "{error}");
    assert!(error.contains("COLLIE_DURABLE_SOCKET"), "{error}");
}

/// Runs `script` with python3 as a child of a fixture agent; returns the
/// lines it printed.
fn run_python_in_agent(script: &str) -> Vec<String> {
    let dir = TempDir::new();
    let mut agent = Agent::spawn(&[path_env(&socket_in(&dir)), (FIXTURE_PYTHON, script.into())], None);
    assert_eq!(agent.expect("py-exit"), "0", "the script failed; saw {:?}", agent.seen);
    let lines = agent.finish();
    let mut seen = std::collections::BTreeMap::<&str, usize>::new();
    for caller in callers(&lines) {
        *seen.entry(caller).or_default() += 1;
    }
    eprintln!("callers seen by the agent: {seen:?}");
    lines.iter().filter_map(|l| l.strip_prefix("py ")).map(str::to_owned).collect()
}

/// Python: `post(sock)` sends the answer write on `sock` and returns the
/// response's status code.
const PY_POST: &str = r#"
import ctypes, os, socket, sys
PATH = sys.argv[1]
BODY = b'{"requestId":"r-1","answer":{"optionIds":["yes"]}}'
REQ = (b"POST /v1/asks/970f8a0b30368fbbcab73013d31d2d51 HTTP/1.1\r\nHost: x\r\n"
       b"Content-Type: application/json\r\nConnection: close\r\n"
       b"Content-Length: " + str(len(BODY)).encode() + b"\r\n\r\n" + BODY)
def post(sock):
    sock.sendall(REQ)
    resp = b""
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            break
        resp += chunk
    parts = resp.split(b" ", 2)
    return parts[1].decode() if len(parts) > 1 else "0"
"#;

#[test]
fn a_descendant_with_a_non_utf8_command_name_is_still_refused_a_write() {
    // python3, to fork and to rename a process.
    if !needs(Need::Python3, "a_descendant_with_a_non_utf8_command_name_is_still_refused_a_write") {
        return;
    }
    // The agent's child renames itself to bytes that are not UTF-8 (as any
    // process may), then connects and writes.
    let script = format!(
        "{PY_POST}
ctypes.CDLL(None).prctl(15, b'\\xff\\xfe', 0, 0, 0)
assert open('/proc/self/stat', 'rb').read().split(b' ')[1] == b'(\\xff\\xfe)'
s = socket.socket(socket.AF_UNIX)
s.connect(PATH)
print('status', post(s))
"
    );
    let lines = run_python_in_agent(&script);
    assert_eq!(lines, ["status 403"], "a write from the agent's renamed child must be refused");
}

#[test]
fn a_write_on_a_connection_whose_connecting_process_exited_is_refused() {
    // python3, to fork and to rename a process.
    if !needs(Need::Python3, "a_write_on_a_connection_whose_connecting_process_exited_is_refused") {
        return;
    }
    // 200 times: a child of the agent's child connects, forks, and exits at
    // once (its parent reaps it, so its /proc entry goes away); the
    // grandchild writes on the inherited connection. Not one write may pass.
    let script = format!(
        "{PY_POST}
statuses = {{}}
for i in range(200):
    r, w = os.pipe()
    c = os.fork()
    if c == 0:
        os.close(r)
        s = socket.socket(socket.AF_UNIX)
        s.connect(PATH)
        if os.fork() == 0:
            status = post(s)
            os.write(w, status.encode())
            os._exit(0)
        os._exit(0)
    os.close(w)
    os.waitpid(c, 0)
    got = b''
    while True:
        chunk = os.read(r, 64)
        if not chunk:
            break
        got += chunk
    os.close(r)
    key = got.decode() or 'none'
    statuses[key] = statuses.get(key, 0) + 1
for key in sorted(statuses):
    print('status', key, statuses[key])
"
    );
    let started = Instant::now();
    let lines = run_python_in_agent(&script);
    eprintln!("200 forked writes in {:?}", started.elapsed());
    assert_eq!(lines, ["status 403 200"], "every write through an exited connector must be refused");
}
