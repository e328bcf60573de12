//! What Pi's tools start never outlives the agent.
//!
//! Pi's `bash` tool runs each call in a session of its own, so neither Pi's
//! process group nor Pi's exit reaches it, and an agent killed with its Pi
//! (`SIGKILL` to the group, the OOM killer, a crash) cannot clean up after
//! itself. So every Pi is started with a mark in its environment,
//! `DURABLE_PI_RUN=<folder>-<agent pid>-<agent start>-<n>`, which everything
//! it starts inherits (a call in its own session too), and beside it a
//! small watcher (`sh`, in a process group of its own) that waits on a pipe
//! only the agent holds. When the pipe closes — the agent ended this Pi, or
//! the agent died, however — the watcher stops every process carrying that
//! run's mark, and exits. A start on the same sessions folder also stops
//! what the runs of agents no longer alive left (a watcher killed with
//! them): the agent's pid and start time in the mark tell a dead agent from
//! a live one, and a process is stopped only when its own environment
//! names such a run, so a reused pid is never taken for it.
//!
//! Linux only (`/proc`); elsewhere (macOS) Pi is started without a watcher,
//! and a call Pi runs in its own session may outlive an agent killed with
//! its Pi.

use std::path::Path;

/// The environment variable that marks a Pi run and what it starts.
pub(crate) const RUN_ENV: &str = "DURABLE_PI_RUN";

/// The sessions folder's part of a run's mark: the runs of agents on the
/// same folder share it.
pub(crate) fn folder_tag(session_dir: &Path) -> String {
    use sha2::{Digest, Sha256};
    let dir = std::fs::canonicalize(session_dir).unwrap_or_else(|_| session_dir.to_path_buf());
    let digest = Sha256::digest(dir.as_os_str().as_encoded_bytes());
    digest.iter().take(8).map(|b| format!("{b:02x}")).collect()
}

/// This agent process: its pid and its start time (clock ticks since boot),
/// which together name it for as long as the machine runs.
fn this_agent() -> String {
    let pid = std::process::id();
    format!("{pid}-{}", start_time(pid).unwrap_or(0))
}

/// A process's start time from `/proc/<pid>/stat` (field 22).
fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // `pid (comm) state …`: the name may hold spaces and parentheses.
    let (_, rest) = stat.rsplit_once(')')?;
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// A fresh mark for one Pi run of this agent on this folder.
pub(crate) fn run_mark(tag: &str, n: u64) -> String {
    format!("{tag}-{}-{n}", this_agent())
}

/// The watcher's script: wait for the pipe to close, then stop every
/// process whose environment holds `DURABLE_PI_RUN=$1` (a few rounds, for
/// what forks meanwhile).
#[cfg(target_os = "linux")]
const WATCH: &str = r#"read -r _
round=0
while [ "$round" -lt 10 ]; do
  round=$((round + 1))
  found=
  for d in /proc/[0-9]*; do
    p=${d#/proc/}
    [ "$p" = "$$" ] && continue
    if tr '\0' '\n' < "$d/environ" 2>/dev/null | grep -qxF "DURABLE_PI_RUN=$1"; then
      kill -KILL "$p" 2>/dev/null && found=1
    fi
  done
  [ -z "$found" ] && exit 0
  sleep 0.1
done
"#;

/// A run's watcher: dropping it (closing its pipe) stops the run's processes.
#[derive(Debug)]
pub(crate) struct Watcher {
    _pipe: tokio::process::ChildStdin,
}

impl Watcher {
    /// No watcher outside Linux (no `/proc` to find a run's processes).
    #[cfg(not(target_os = "linux"))]
    pub(crate) fn spawn(_mark: &str) -> Option<Watcher> {
        None
    }

    /// Starts the watcher of the run `mark` (`None`, with a warn event,
    /// when `sh` cannot start).
    #[cfg(target_os = "linux")]
    pub(crate) fn spawn(mark: &str) -> Option<Watcher> {
        let mut command = tokio::process::Command::new("sh");
        command
            .arg("-c")
            .arg(WATCH)
            .arg("durable-pi-watcher")
            .arg(mark)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            // Its own group: a signal to the agent's group leaves it to clean up.
            .process_group(0)
            .kill_on_drop(false);
        for name in [durable_types::TOKEN_ENV, durable_types::TOKEN_NEXT_ENV, RUN_ENV] {
            command.env_remove(name);
        }
        match command.spawn() {
            Ok(mut child) => child.stdin.take().map(|pipe| Watcher { _pipe: pipe }),
            Err(e) => {
                tracing::warn!(target: "durable", error = %e, "pi: the watcher of Pi's tools did not start; a call Pi runs may outlive the agent");
                None
            }
        }
    }
}

/// Stops what the Pi runs of agents no longer alive left on this folder:
/// every process whose environment holds a mark of `tag` naming an agent
/// that is gone. Returns how many were stopped. Linux only (0 elsewhere).
pub(crate) fn stop_leftovers(tag: &str) -> usize {
    let Ok(entries) = std::fs::read_dir("/proc") else { return 0 };
    let prefix = format!("{RUN_ENV}={tag}-");
    let me = std::process::id();
    let mut stopped = 0;
    for entry in entries.flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
        if pid == me {
            continue;
        }
        // Another user's process, or one gone meanwhile: not readable, not ours.
        let Ok(environ) = std::fs::read(entry.path().join("environ")) else { continue };
        let Some(mark) = environ
            .split(|&b| b == 0)
            .find_map(|var| var.strip_prefix(prefix.as_bytes()))
            .and_then(|rest| std::str::from_utf8(rest).ok())
        else {
            continue;
        };
        if agent_alive(mark) {
            continue;
        }
        if kill(pid) {
            stopped += 1;
        }
    }
    if stopped > 0 {
        tracing::info!(target: "durable", stopped, "pi: stopped what a dead agent's Pi left running");
    }
    stopped
}

/// Whether the agent a mark's rest (`<pid>-<start>-<n>`) names still runs.
fn agent_alive(rest: &str) -> bool {
    let mut parts = rest.split('-');
    let (Some(pid), Some(start)) = (parts.next(), parts.next()) else { return false };
    let (Ok(pid), Ok(start)) = (pid.parse::<u32>(), start.parse::<u64>()) else { return false };
    start_time(pid) == Some(start)
}

#[cfg(unix)]
fn kill(pid: u32) -> bool {
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;
    let Ok(pid) = i32::try_from(pid) else { return false };
    kill(Pid::from_raw(pid), Signal::SIGKILL).is_ok()
}

#[cfg(not(unix))]
fn kill(_pid: u32) -> bool {
    false
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    fn gone(child: &mut std::process::Child) -> bool {
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = child.try_wait() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    fn sleeper(mark: &str) -> std::process::Child {
        std::process::Command::new("sleep").arg("300").env(RUN_ENV, mark).spawn().unwrap()
    }

    #[test]
    fn a_start_stops_the_leftovers_of_a_dead_agent_and_spares_a_live_ones_and_other_folders() {
        let tag = format!("test{}", std::process::id());
        // A pid no process has (above the kernel's pid limit).
        let dead = sleeper(&format!("{tag}-4999999-1-1"));
        let live = sleeper(&run_mark(&tag, 1));
        let other = sleeper("otherfolder-4999999-1-1");
        let (mut dead, mut live, mut other) = (dead, live, other);
        assert_eq!(stop_leftovers(&tag), 1);
        assert!(gone(&mut dead), "the dead agent's leftover is stopped");
        assert!(live.try_wait().unwrap().is_none(), "a live agent's run is left alone");
        assert!(other.try_wait().unwrap().is_none(), "another folder's run is left alone");
        let _ = live.kill();
        let _ = other.kill();
        let _ = (live.wait(), other.wait());
    }

    #[tokio::test]
    async fn dropping_the_watcher_stops_the_run_even_in_a_session_of_its_own() {
        let mark = run_mark(&format!("watch{}", std::process::id()), 7);
        let watcher = Watcher::spawn(&mark).expect("sh starts");
        // setsid: out of every group and session the agent has, as Pi's bash calls are.
        let mut call = std::process::Command::new("setsid")
            .args(["-w", "sleep", "300"])
            .env(RUN_ENV, &mark)
            .spawn()
            .unwrap();
        let mut unmarked = std::process::Command::new("sleep").arg("300").spawn().unwrap();
        std::thread::sleep(Duration::from_millis(200));
        assert!(call.try_wait().unwrap().is_none());
        drop(watcher);
        assert!(gone(&mut call), "the marked call is stopped once the pipe closes");
        assert!(unmarked.try_wait().unwrap().is_none(), "an unmarked process is not");
        let _ = unmarked.kill();
        let _ = unmarked.wait();
    }

    #[test]
    fn a_mark_names_this_agent_and_its_start() {
        let mark = run_mark("abc", 3);
        let rest = mark.strip_prefix("abc-").unwrap();
        assert!(agent_alive(rest), "{mark}");
        assert!(!agent_alive("4999999-1-3"));
        assert!(!agent_alive("garbage"));
    }
}
