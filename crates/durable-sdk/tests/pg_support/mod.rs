//! A real PostgreSQL server for tests, started in a temporary folder from
//! Debian's `postgresql` package (`initdb` and `postgres` on PATH or in
//! `/usr/lib/postgresql/<version>/bin`), listening only on a Unix socket in
//! that folder, with a password (scram-sha-256). PostgreSQL refuses to run
//! as root: when the tests do, the server runs as `nobody` through
//! `setpriv`. It is started with `--pdeathsig INT`, so that it shuts down
//! when the test process ends, whatever way it ends.
//!
//! No server installed is a failure that says how to install one, never a
//! skip. Also used by the desk's tests (`examples/tests`).

#![allow(dead_code, unreachable_pub)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// The password of the test server's `postgres` user.
pub const PASSWORD: &str = "pg-test-Secret-7f3a9c";

/// Where `initdb` and `postgres` are: PATH, else the newest
/// `/usr/lib/postgresql/<version>/bin`.
pub fn server_bin_dir() -> Result<PathBuf, String> {
    server_bin_dir_in(
        std::env::var_os("PATH"),
        Path::new("/usr/lib/postgresql"),
        std::env::var_os("CI").is_some(),
    )
}

/// [`server_bin_dir`] with its inputs given: `PATH`, Debian's folder of
/// versions, and whether this is CI.
pub fn server_bin_dir_in(
    path: Option<std::ffi::OsString>,
    versions: &Path,
    ci: bool,
) -> Result<PathBuf, String> {
    if let Some(path) = path {
        for dir in std::env::split_paths(&path) {
            if dir.join("initdb").is_file() && dir.join("postgres").is_file() {
                return Ok(dir);
            }
        }
    }
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir(versions)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let v: u32 = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            (bin.join("initdb").is_file() && bin.join("postgres").is_file()).then_some((v, bin))
        })
        .collect();
    found.sort();
    found.pop().map(|(_, bin)| bin).ok_or_else(|| {
        let how = "install Debian's server with `apt-get install -y --no-install-recommends postgresql` \
                   (.ci/run does so when initdb is missing)";
        if ci {
            format!("PostgreSQL is required in CI and is not installed (no initdb on PATH nor in /usr/lib/postgresql/*/bin): {how}")
        } else {
            format!("these tests need a PostgreSQL server and none is installed (no initdb on PATH nor in /usr/lib/postgresql/*/bin): {how}")
        }
    })
}

/// A running test server.
pub struct PgServer {
    pub dir: PathBuf,
    bin: PathBuf,
    user: Option<u32>,
    child: Option<Child>,
    /// `name=value` settings given to `postgres -c`, after the defaults.
    settings: Vec<String>,
}

/// The user the server runs as: `nobody` when the tests run as root.
fn server_user() -> Option<u32> {
    nix::unistd::geteuid().is_root().then_some(65534)
}

fn as_user(user: Option<u32>, program: &Path) -> Command {
    let mut c = Command::new("setpriv");
    if let Some(uid) = user {
        c.arg(format!("--reuid={uid}")).arg(format!("--regid={uid}")).arg("--clear-groups");
    }
    // The server shuts down (fast) when the thread that started it ends.
    c.args(["--pdeathsig", "INT", "--"]).arg(program);
    c
}

/// Removes the folders of test servers whose process is gone.
fn sweep_stale() {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else { return };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(rest) = name.strip_prefix("durable-pg-") else { continue };
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<u32>().ok()) else { continue };
        if !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

impl PgServer {
    /// Creates a cluster in a fresh folder and starts it; panics saying how
    /// to install PostgreSQL when it is missing.
    pub fn start() -> PgServer {
        PgServer::start_with(&[], &[])
    }

    /// [`start`](Self::start) with `settings` (`name=value`, over the
    /// defaults: `listen_addresses=127.0.0.1`, say) and `data_files` written
    /// into the data folder first, readable by the server only
    /// (`server.crt` and `server.key` for `ssl=on`).
    pub fn start_with(settings: &[String], data_files: &[(&str, &[u8])]) -> PgServer {
        static N: AtomicUsize = AtomicUsize::new(0);
        let bin = server_bin_dir().unwrap_or_else(|why| panic!("{why}"));
        sweep_stale();
        let dir = std::env::temp_dir().join(format!(
            "durable-pg-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("sock")).unwrap();
        std::fs::write(dir.join("pw"), PASSWORD).unwrap();
        let user = server_user();
        if let Some(uid) = user {
            for p in [dir.clone(), dir.join("sock"), dir.join("pw")] {
                std::os::unix::fs::chown(&p, Some(uid), Some(uid)).unwrap();
            }
        }
        let out = as_user(user, &bin.join("initdb"))
            .arg("-D")
            .arg(dir.join("data"))
            .args(["-U", "postgres", "-A", "scram-sha-256", "-E", "UTF8", "--locale=C", "--no-sync"])
            .arg(format!("--pwfile={}", dir.join("pw").display()))
            .stdin(Stdio::null())
            .output()
            .expect("initdb runs");
        assert!(
            out.status.success(),
            "initdb failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        for (name, bytes) in data_files {
            use std::os::unix::fs::PermissionsExt;
            let path = dir.join("data").join(name);
            std::fs::write(&path, bytes).unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
            if let Some(uid) = user {
                std::os::unix::fs::chown(&path, Some(uid), Some(uid)).unwrap();
            }
        }
        let mut server = PgServer { dir, bin, user, child: None, settings: settings.to_vec() };
        server.run();
        server
    }

    /// The server shared by the tests of this process: started once, on a
    /// thread that lives as long as the process (the server shuts down
    /// when the process ends).
    pub fn shared() -> &'static PgServer {
        static SHARED: OnceLock<PgServer> = OnceLock::new();
        SHARED.get_or_init(|| {
            let (tx, rx) = std::sync::mpsc::channel();
            std::thread::Builder::new()
                .name("pg-keeper".into())
                .spawn(move || {
                    let server = PgServer::start();
                    tx.send(server).unwrap();
                    loop {
                        std::thread::park();
                    }
                })
                .unwrap();
            rx.recv().expect("the test server started")
        })
    }

    /// Starts the server on its cluster (again, after [`stop`](Self::stop)).
    pub fn run(&mut self) {
        assert!(self.child.is_none(), "already running");
        let log = std::fs::File::create(self.dir.join("log")).unwrap();
        if let Some(uid) = self.user {
            std::os::unix::fs::chown(self.dir.join("log"), Some(uid), Some(uid)).unwrap();
        }
        let child = as_user(self.user, &self.bin.join("postgres"))
            .arg("-D")
            .arg(self.dir.join("data"))
            .arg("-k")
            .arg(self.dir.join("sock"))
            // No TCP; a test cluster needs no fsync (the tests kill agents,
            // not machines).
            .args(["-c", "listen_addresses=", "-c", "fsync=off", "-c", "full_page_writes=off"])
            .args(["-c", "max_connections=200"])
            .args(self.settings.iter().flat_map(|s| ["-c", s.as_str()]))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("postgres starts");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let log = std::fs::read_to_string(self.dir.join("log")).unwrap_or_default();
            if log.contains("ready to accept connections") {
                return;
            }
            if let Some(status) = self.child.as_mut().unwrap().try_wait().unwrap() {
                panic!("postgres exited ({status}) while starting:\n{log}");
            }
            assert!(Instant::now() < deadline, "postgres did not start in 30 s:\n{log}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Stops the server (a fast shutdown), keeping its cluster.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(child.id() as i32),
                nix::sys::signal::Signal::SIGINT,
            );
            let _ = child.wait();
        }
    }

    /// Stops the server's processes where they stand (`SIGSTOP`): a
    /// database that stalls, as one whose disk hangs. Nothing it was asked
    /// is answered until [`resume`](Self::resume).
    pub fn pause(&self) {
        self.signal_all(nix::sys::signal::Signal::SIGSTOP);
    }

    /// Lets a [`pause`](Self::pause)d server go on.
    pub fn resume(&self) {
        self.signal_all(nix::sys::signal::Signal::SIGCONT);
    }

    /// The postmaster and every process it started (read from `/proc`).
    fn signal_all(&self, signal: nix::sys::signal::Signal) {
        let Some(child) = &self.child else { return };
        let root = child.id();
        let mut pids = vec![root];
        for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
            let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
            let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
            // `pid (name) state ppid …`: the name may hold spaces, not a `)`.
            let ppid = stat.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().nth(1));
            if ppid.and_then(|p| p.parse::<u32>().ok()) == Some(root) {
                pids.push(pid);
            }
        }
        for pid in pids {
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), signal);
        }
    }

    /// How many client sessions the server has (`psql`'s own counted).
    pub fn client_sessions(&self) -> usize {
        let text = self.query("SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend'");
        text.parse().unwrap_or_else(|_| panic!("psql: {text}"))
    }

    /// What `psql -At` prints for `sql` (trimmed), by `psql` from the
    /// server's folder of programs, else from PATH.
    pub fn query(&self, sql: &str) -> String {
        let beside = self.bin.join("psql");
        let psql = if beside.is_file() { beside } else { PathBuf::from("psql") };
        let out = Command::new(psql)
            .args(["-h"])
            .arg(self.socket_dir())
            .args(["-U", "postgres", "-d", "postgres", "-Atc", sql])
            .env("PGPASSWORD", PASSWORD)
            .stdin(Stdio::null())
            .output()
            .expect("psql runs");
        assert!(out.status.success(), "psql {sql}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    /// The Unix socket folder.
    pub fn socket_dir(&self) -> PathBuf {
        self.dir.join("sock")
    }

    /// A URL for database `postgres`, with the password.
    pub fn url(&self) -> String {
        format!("postgres://postgres:{PASSWORD}@/postgres?host={}", self.socket_dir().display())
    }

    /// The same URL with a wrong password.
    pub fn url_with_password(&self, password: &str) -> String {
        format!("postgres://postgres:{password}@/postgres?host={}", self.socket_dir().display())
    }
}

impl Drop for PgServer {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A schema name no other test of this run uses.
pub fn fresh_schema(name: &str) -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    let name = name.replace('-', "_");
    format!("t{}_{}_{name}", std::process::id(), N.fetch_add(1, Ordering::SeqCst))
}
