//! What the agent's tools start never outlives the agent (Linux).
//!
//! Each agent starts with a mark in its environment ([`RUN_ENV`]), which
//! everything it starts inherits — Pi's `bash` calls too, though each runs
//! in a session of its own, out of reach of the agent's process group.
//! Beside it runs a small watcher (`sh`, in a process group of its own)
//! reading a pipe from this program: when the pipe closes — the agent was
//! stopped, or this program died, even by `SIGKILL` — the watcher stops
//! every process carrying the mark (`TERM`, a second, then `KILL`). Not
//! reached: a process that clears its environment (`env -i`) and leaves
//! the agent's process group; under systemd the service's cgroup stops it.

use std::sync::atomic::{AtomicU64, Ordering};

/// The variable that marks an agent's run.
pub(crate) const RUN_ENV: &str = "DURABLE_ACP_RUN";

/// Stops the marked processes, then exits (`$1` is the mark).
const WATCH: &str = r#"read _ignored
for sig in TERM KILL; do
  for d in /proc/[0-9]*; do
    if tr '\0' '\n' < "$d/environ" 2>/dev/null | grep -qxF "DURABLE_ACP_RUN=$1"; then
      kill "-$sig" "${d#/proc/}" 2>/dev/null
    fi
  done
  [ "$sig" = TERM ] && sleep 1
done
"#;

/// A mark not given twice: this program's pid and a counter.
pub(crate) fn run_mark() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    format!("{}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed))
}

/// The watcher of one run: dropping it closes its pipe, and it stops the run's processes.
pub(crate) struct Watcher {
    _pipe: tokio::process::ChildStdin,
    _child: tokio::process::Child,
}

impl Watcher {
    /// Starts the watcher of `mark`; `None` (with a warn event) when `sh` cannot start.
    pub(crate) fn spawn(mark: &str) -> Option<Watcher> {
        let mut command = tokio::process::Command::new("sh");
        command
            .arg("-c")
            .arg(WATCH)
            .arg("sh")
            .arg(mark)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .env_remove(RUN_ENV)
            .env_remove(durable_types::TOKEN_ENV)
            .env_remove(durable_types::TOKEN_NEXT_ENV)
            .process_group(0)
            .kill_on_drop(false);
        match command.spawn() {
            Ok(mut child) => {
                let pipe = child.stdin.take()?;
                Some(Watcher { _pipe: pipe, _child: child })
            }
            Err(e) => {
                tracing::warn!(error = %e, "acp: the watcher of the agent's processes did not start");
                None
            }
        }
    }
}

/// Whether a process carrying `mark` still runs.
pub(crate) fn any_marked(mark: &str) -> bool {
    let want = format!("{RUN_ENV}={mark}");
    let Ok(dir) = std::fs::read_dir("/proc") else { return false };
    dir.flatten().any(|entry| {
        let name = entry.file_name();
        let is_pid = name.to_str().is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()));
        is_pid
            && std::fs::read(entry.path().join("environ"))
                .is_ok_and(|env| env.split(|&b| b == 0).any(|v| v == want.as_bytes()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A process that left the agent's session and group (`setsid`) is
    /// still stopped once the watcher's pipe closes.
    #[tokio::test]
    async fn a_marked_process_in_a_session_of_its_own_is_stopped_when_the_pipe_closes() {
        let mark = run_mark();
        let mut sleeper = std::process::Command::new("setsid")
            .args(["sleep", "60"])
            .env(RUN_ENV, &mark)
            .spawn()
            .expect("setsid and sleep");
        let watcher = Watcher::spawn(&mark).expect("sh");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !any_marked(&mark) {
            assert!(std::time::Instant::now() < deadline, "the marked process never showed");
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        drop(watcher);
        let status = tokio::task::spawn_blocking(move || sleeper.wait()).await.unwrap().unwrap();
        assert!(!status.success(), "killed, not ended: {status}");
        assert!(!any_marked(&mark));
    }
}
