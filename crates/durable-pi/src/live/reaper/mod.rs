//! What Pi's tools start never outlives the agent.
//!
//! Pi's `bash` tool runs each call in a session of its own, so neither Pi's
//! process group nor Pi's exit reaches it, and an agent killed with its Pi
//! (`SIGKILL` to the group, the OOM killer, a crash) cannot clean up after
//! itself. So every Pi is started with a mark in its environment,
//! `DURABLE_PI_RUN=<folder>-<agent pid>-<agent start>-<n>`, which everything
//! it starts inherits (a call in a session of its own too), and beside it a
//! small watcher (`sh`, in a process group of its own) that waits on a pipe
//! only the agent holds. When the pipe closes — the agent ended this Pi, or
//! the agent died, however — the watcher stops what ran under that Pi: the
//! processes carrying the run's mark, their children (transitively), and
//! the members of sessions they lead (a call that cleared its environment
//! still runs in its call's session). It stops each (`SIGSTOP`) as it finds
//! it, so nothing forks away while it looks, then kills them all.
//!
//! A start on the same sessions folder also stops what the runs of agents
//! no longer alive left (their watchers killed with them): the agent's pid
//! and start time in the mark tell a dead agent from a live one, and a
//! process is stopped only when its own environment names such a run, or
//! it runs under one that does; each is signalled through a pidfd opened
//! after its start time was read, so a pid reused meanwhile is never taken
//! for it ([`leftovers`]).
//!
//! Why a mark and a watcher, not a subreaper or a cgroup: a subreaper
//! must be the process that starts Pi and outlive the agent — a program of
//! its own, which a library cannot ship beside every agent binary — and a
//! cgroup of one's own needs a delegated hierarchy (systemd) that an agent
//! run by hand does not have. The mark needs nothing: `/proc` and `sh`.
//! What escapes it: a process that clears its environment and leaves both
//! its parent (double fork) and its call's session; under systemd, the
//! service's cgroup (`KillMode=control-group`, the default) catches that.
//!
//! The watcher needs `sh` and `grep` (and `tr` where `grep` has no `-z`);
//! without `sh` the run goes unwatched, with a warn event, and the sweep at
//! the next start remains.
//!
//! Elsewhere (macOS, no `/proc`): the watcher lists processes with `ps -E`
//! (the environments of the user's own processes) and `awk`, and stops the
//! marked ones and their children; `ps` shows no sessions there, and a
//! start does not look for what dead agents left.

#[cfg(target_os = "linux")]
mod leftovers;

use std::path::Path;

#[cfg(target_os = "linux")]
pub(crate) use leftovers::stop_leftovers;

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

/// A process's start time from `/proc/<pid>/stat` (field 22); `None`
/// without `/proc`.
pub(crate) fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // `pid (comm) state …`: the name may hold spaces and parentheses.
    let (_, rest) = stat.rsplit_once(')')?;
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// A fresh mark for one Pi run of this agent on this folder.
pub(crate) fn run_mark(tag: &str, n: u64) -> String {
    format!("{tag}-{}-{n}", this_agent())
}

/// Whether the agent a mark's rest (`<pid>-<start>-<n>`) names still runs.
#[cfg(target_os = "linux")]
pub(crate) fn agent_alive(rest: &str) -> bool {
    let mut parts = rest.split('-');
    let (Some(pid), Some(start)) = (parts.next(), parts.next()) else { return false };
    let (Ok(pid), Ok(start)) = (pid.parse::<u32>(), start.parse::<u64>()) else { return false };
    start_time(pid) == Some(start)
}

/// The watcher's script, and its arguments after the mark.
#[cfg(target_os = "linux")]
const WATCH: (&str, &[&str]) = (include_str!("watch_proc.sh"), &[]);
#[cfg(all(unix, not(target_os = "linux")))]
const WATCH: (&str, &[&str]) = (include_str!("watch_ps.sh"), &["-axwwE"]);

/// A run's watcher: dropping it (closing its pipe) stops the run's processes.
#[derive(Debug)]
pub(crate) struct Watcher {
    _pipe: tokio::process::ChildStdin,
}

impl Watcher {
    /// No watcher where there is no `sh` (Windows).
    #[cfg(not(unix))]
    pub(crate) fn spawn(_mark: &str) -> Option<Watcher> {
        None
    }

    /// Starts the watcher of the run `mark` (`None`, with a warn event,
    /// when `sh` cannot start).
    #[cfg(unix)]
    pub(crate) fn spawn(mark: &str) -> Option<Watcher> {
        Watcher::spawn_script(WATCH.0, mark, WATCH.1)
    }

    #[cfg(unix)]
    fn spawn_script(script: &str, mark: &str, args: &[&str]) -> Option<Watcher> {
        let mut command = tokio::process::Command::new("sh");
        command
            .arg("-c")
            .arg(script)
            .arg("durable-pi-watcher")
            .arg(mark)
            .args(args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            // Its own group: a signal to the agent's group leaves it to clean up.
            .process_group(0)
            .kill_on_drop(false);
        // Not the tokens (no process we start has them), and not the mark:
        // the watcher must not find itself.
        for name in [durable_types::TOKEN_ENV, durable_types::TOKEN_NEXT_ENV, RUN_ENV] {
            command.env_remove(name);
        }
        match command.spawn() {
            Ok(mut child) => child.stdin.take().map(|pipe| Watcher { _pipe: pipe }),
            Err(e) => {
                tracing::warn!(error = %e, "pi: the watcher of Pi's tools did not start; a call Pi runs may outlive the agent");
                None
            }
        }
    }
}

/// Without `/proc`, a start finds no leftovers (see the module's docs).
#[cfg(not(target_os = "linux"))]
pub(crate) fn stop_leftovers(_tag: &str) -> usize {
    0
}

#[cfg(all(test, target_os = "linux"))]
mod tests;
