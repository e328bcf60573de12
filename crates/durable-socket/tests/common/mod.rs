//! Helpers shared by the socket tests: private temp folders, a core, curl.
#![allow(dead_code, unreachable_pub)]

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

use durable_http::{SystemClock, random_epoch, stderr_warn};
use durable_runtime::{Collie, CoreOptions, create_core};

/// A write the core refuses from the agent itself (an answer to an ask).
pub const ANSWER_PATH: &str = "/v1/asks/970f8a0b30368fbbcab73013d31d2d51";
pub const ANSWER_BODY: &str = r#"{"requestId":"r-1","answer":{"optionIds":["yes"]}}"#;

/// A fresh folder under the system temp folder (sticky `/tmp` is allowed as
/// an ancestor), mode 0700, removed on drop.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new() -> Self {
        static N: AtomicUsize = AtomicUsize::new(0);
        let n = N.fetch_add(1, Ordering::SeqCst);
        let path = std::env::temp_dir().join(format!("dsock-{}-{n}", std::process::id()));
        let _ = fs::remove_dir_all(&path);
        fs::create_dir(&path).unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o700)).unwrap();
        TempDir(path)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    pub fn join(&self, rest: &str) -> PathBuf {
        self.0.join(rest)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

pub fn mode(path: &Path) -> u32 {
    fs::symlink_metadata(path).unwrap().permissions().mode() & 0o7777
}

pub fn set_mode(path: &Path, mode: u32) {
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
}

pub fn core() -> Collie {
    create_core(
        CoreOptions::builder()
            .host_name("socket-test")
            .clock(SystemClock)
            .epoch(random_epoch())
            .warn(stderr_warn())
            .build()
            .unwrap(),
    )
}

pub fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// What a test needs that a machine may lack.
#[derive(Clone, Copy, Debug)]
pub enum Need {
    /// To run as root (to give files to another user, to run as one).
    Root,
    /// `python3` on the `PATH` (to fork, to rename a process).
    Python3,
}

impl Need {
    fn name(self) -> &'static str {
        match self {
            Need::Root => "root",
            Need::Python3 => "python3",
        }
    }

    fn present(self) -> bool {
        match self {
            Need::Root => is_root(),
            Need::Python3 => {
                Command::new("python3").arg("-c").arg("pass").status().is_ok_and(|s| s.success())
            }
        }
    }

    fn how(self) -> &'static str {
        match self {
            Need::Root => {
                "run the tests as root (CI does: its container's user is root), e.g. \
                 `sudo -E env \"PATH=$PATH\" cargo test -p durable-socket`"
            }
            Need::Python3 => "install python3 (e.g. `apt-get install python3`) and put it on the PATH",
        }
    }
}

/// Whether `test` may run: `true` when what it needs is here. A test never
/// passes having checked nothing: when it is missing, the test fails saying
/// how to get it — always under CI (`CI` set), and elsewhere unless
/// `DURABLE_TESTS_SKIP` names it (comma-separated, e.g. `root,python3`):
/// then this says on the terminal (not captured) that the test was not
/// checked, and returns `false`.
pub fn needs(need: Need, test: &str) -> bool {
    if need.present() {
        return true;
    }
    let name = need.name();
    let why = format!("{test} needs {name}: {}", need.how());
    if std::env::var_os("CI").is_some() {
        panic!("{why} (under CI a missing prerequisite is a failure, not a skip)");
    }
    let skip = std::env::var("DURABLE_TESTS_SKIP").unwrap_or_default();
    if !skip.split(',').any(|s| s.trim() == name) {
        panic!("{why}; or set DURABLE_TESTS_SKIP={name} to skip it knowingly outside CI");
    }
    // Written past the test harness's capture, so a skip is never silent.
    use std::io::Write as _;
    let _ = writeln!(std::io::stderr(), "NOT CHECKED: {test} (needs {name}; DURABLE_TESTS_SKIP={skip})");
    false
}

/// One request with curl over the socket: (status, body). Status 0 when
/// curl got no HTTP answer.
pub fn curl(socket: &Path, method: &str, path: &str, body: Option<&str>) -> (u16, String) {
    let mut cmd = Command::new("curl");
    cmd.args(["-s", "-S", "--max-time", "20", "-o", "-", "-w", "\n%{http_code}", "-X", method])
        .arg("--unix-socket")
        .arg(socket);
    if let Some(body) = body {
        cmd.args(["-H", "Content-Type: application/json", "--data-binary", body]);
    }
    cmd.arg(format!("http://localhost{path}"));
    let out = cmd.output().expect("curl runs");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, status) = text.rsplit_once('\n').unwrap_or(("", text.as_str()));
    (status.trim().parse().unwrap_or(0), body.to_owned())
}

/// [`curl`] off the async runtime's threads.
pub async fn curl_async(
    socket: &Path,
    method: &'static str,
    path: &'static str,
    body: Option<&'static str>,
) -> (u16, String) {
    let socket = socket.to_owned();
    tokio::task::spawn_blocking(move || curl(&socket, method, path, body)).await.unwrap()
}
