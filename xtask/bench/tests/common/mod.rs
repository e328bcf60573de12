//! What the bench's tests share: a scratch folder, a server process, curl.

#![allow(dead_code, unreachable_pub)] // each test file uses part of it

use std::path::PathBuf;
use std::process::{Child, Command};

/// A folder of the test's own under /tmp (short, so that the socket path
/// stays far under 103 bytes), removed when dropped.
pub struct Folder(pub PathBuf);

impl Folder {
    pub fn new(name: &str) -> Folder {
        let dir = PathBuf::from("/tmp").join(format!("xb-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).expect("a folder under /tmp");
        Folder(dir)
    }
}

impl Drop for Folder {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub struct Served(pub Child);

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub fn curl(socket: &str, path: &str, body: Option<&str>) -> serde_json::Value {
    let mut cmd = Command::new("curl");
    cmd.args(["-s", "--unix-socket", socket]);
    if let Some(body) = body {
        cmd.args(["-H", "Content-Type: application/json", "-d", body]);
    }
    let out = cmd.arg(format!("http://bench{path}")).output().expect("curl runs");
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{path}: {e}: {}", String::from_utf8_lossy(&out.stdout)))
}
