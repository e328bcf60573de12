//! Helpers shared by the socket tests: private temp folders, a core, curl.
#![allow(dead_code, unreachable_pub)]

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

use durable_core::{Core, CoreOptions, create_core};
use durable_http::{SystemClock, random_epoch, stderr_warn};

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

pub fn core() -> Core {
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
