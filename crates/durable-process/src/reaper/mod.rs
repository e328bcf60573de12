//! What an agent's tools start never outlives the agent process.
//!
//! An agent's tools may run a call in a session of its own (Pi's `bash`
//! does), so neither the agent's process group nor its exit reaches it,
//! and a program killed with its agent (`SIGKILL` to the group, the OOM
//! killer, a crash) cannot clean up after itself. So every agent process
//! is started with a mark in its environment,
//! `DURABLE_AGENT_RUN=<tag>-<program pid>-<program start>-<n>` ([`RunMark`]),
//! which everything it starts inherits (a call in a session of its own
//! too), and beside it a small [`Watcher`] (`sh`, in a process group of its
//! own) that waits on a pipe only the program holds. When the pipe closes
//! — the program ended this agent process, or the program died, however —
//! the watcher stops what ran under that process: the processes carrying
//! the run's mark, their children (transitively), and the members of
//! sessions they lead (a call that cleared its environment still runs in
//! its call's session). It stops each (`SIGSTOP`) as it finds it, so
//! nothing forks away while it looks, then kills them all.
//!
//! A start on the same tag ([`folder_tag`] of the folder the runs share)
//! can also stop what the runs of programs no longer alive left (their
//! watchers killed with them), with [`stop_leftovers`]: the program's pid
//! and start time in the mark tell a dead program from a live one, and a
//! process is stopped only when its own environment names such a run, or
//! it runs under one that does; each is signalled through a pidfd opened
//! after its start time was read, so a pid reused meanwhile is never taken
//! for it.
//!
//! Why a mark and a watcher, not a subreaper or a cgroup: a subreaper
//! must be the process that starts the agent and outlive the program — a
//! program of its own, which a library cannot ship beside every binary —
//! and a cgroup of one's own needs a delegated hierarchy (systemd) that a
//! program run by hand does not have. The mark needs nothing: `/proc` and
//! `sh`. What escapes it: a process that clears its environment and leaves
//! both its parent (double fork) and its call's session; under systemd, the
//! service's cgroup (`KillMode=control-group`, the default) catches that.
//!
//! The watcher needs `sh` and `grep` (and `tr` where `grep` has no `-z`);
//! without `sh` the run goes unwatched, with a warn event, and the sweep at
//! the next start remains.
//!
//! Elsewhere (macOS, no `/proc`): the watcher lists processes with `ps -E`
//! (the environments of the user's own processes) and `awk`, and stops the
//! marked ones and their children; `ps` shows no sessions there, and a
//! start does not look for what dead programs left. On Windows there is no
//! watcher.

#[cfg(target_os = "linux")]
mod leftovers;

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

#[cfg(target_os = "linux")]
pub use leftovers::stop_leftovers;

/// The environment variable that marks an agent process's run and what it starts.
pub const RUN_ENV: &str = "DURABLE_AGENT_RUN";

/// A tag for the runs of agents on one folder (a digest of its canonical
/// path): the runs of programs on the same folder share it, so a start
/// there finds what dead ones left ([`stop_leftovers`]).
pub fn folder_tag(dir: &Path) -> String {
    use sha2::{Digest, Sha256};
    let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    let digest = Sha256::digest(dir.as_os_str().as_encoded_bytes());
    digest.iter().take(8).map(|b| format!("{b:02x}")).collect()
}

/// The mark of one agent process's run: `<tag>-<program pid>-<program
/// start>-<n>`, never given twice while the machine runs (the program's
/// pid and start time name it, `n` counts its runs).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RunMark(String);

impl RunMark {
    /// A fresh mark for a run under `tag`. A character of `tag` other than
    /// an ASCII letter, digit or `_` is written `_` (a mark is one word of
    /// the watcher's pattern, its parts split at `-`).
    pub fn new(tag: &str) -> RunMark {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        RunMark::numbered(tag, NEXT.fetch_add(1, Ordering::Relaxed))
    }

    fn numbered(tag: &str, n: u64) -> RunMark {
        let pid = std::process::id();
        RunMark(format!("{}-{pid}-{}-{n}", clean_tag(tag), start_time(pid).unwrap_or(0)))
    }

    /// The mark, as the agent's environment holds it.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether a process carrying this mark still runs; `None` where this
    /// cannot be told (no `/proc`): wait as if one did.
    pub fn any_alive(&self) -> Option<bool> {
        #[cfg(target_os = "linux")]
        {
            let want = format!("{RUN_ENV}={}", self.0);
            let dir = std::fs::read_dir("/proc").ok()?;
            Some(dir.flatten().any(|entry| {
                let name = entry.file_name();
                let is_pid = name.to_str().is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()));
                is_pid
                    && std::fs::read(entry.path().join("environ"))
                        .is_ok_and(|env| env.split(|&b| b == 0).any(|v| v == want.as_bytes()))
            }))
        }
        #[cfg(not(target_os = "linux"))]
        None
    }
}

impl std::fmt::Display for RunMark {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// `tag` as a mark's first part: ASCII letters, digits and `_`.
pub(crate) fn clean_tag(tag: &str) -> String {
    let clean: String =
        tag.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' { c } else { '_' }).collect();
    if clean.is_empty() { "agent".to_owned() } else { clean }
}

/// A process's start time from `/proc/<pid>/stat` (field 22, clock ticks
/// since boot); `None` without `/proc`.
pub(crate) fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // `pid (comm) state …`: the name may hold spaces and parentheses.
    let (_, rest) = stat.rsplit_once(')')?;
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// Whether the program of pid `pid` started at `start` still runs.
#[cfg(target_os = "linux")]
pub(crate) fn program_alive(pid: u32, start: u64) -> bool {
    start_time(pid) == Some(start)
}

/// The watcher's script, and its arguments after the mark.
#[cfg(target_os = "linux")]
const WATCH: (&str, &[&str]) = (include_str!("watch_proc.sh"), &[]);
#[cfg(all(unix, not(target_os = "linux")))]
const WATCH: (&str, &[&str]) = (include_str!("watch_ps.sh"), &["-axwwE"]);

/// A run's watcher: dropping it (closing its pipe) stops the run's
/// processes, and so does this program's death. Keep it as long as the
/// agent is wanted: dropped at once, it stops the agent too.
#[derive(Debug)]
#[must_use = "dropping the watcher stops every process of its run, the agent included"]
pub struct Watcher {
    _pipe: tokio::process::ChildStdin,
}

impl Watcher {
    /// No watcher where there is no `sh` (Windows).
    #[cfg(not(unix))]
    pub fn spawn(_mark: &RunMark) -> Option<Watcher> {
        None
    }

    /// Starts the watcher of the run `mark` (`None`, with a warn event,
    /// when `sh` cannot start). Start it before the agent process, so no
    /// instant of the run goes unwatched.
    #[cfg(unix)]
    pub fn spawn(mark: &RunMark) -> Option<Watcher> {
        Watcher::spawn_script(WATCH.0, mark, WATCH.1)
    }

    #[cfg(unix)]
    fn spawn_script(script: &str, mark: &RunMark, args: &[&str]) -> Option<Watcher> {
        let mut command = tokio::process::Command::new("sh");
        command
            .arg("-c")
            .arg(script)
            .arg("durable-agent-watcher")
            .arg(mark.as_str())
            .args(args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            // Its own group: a signal to the program's group leaves it to clean up.
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
                tracing::warn!(error = %e, "the watcher of an agent's processes did not start; a call the agent runs may outlive it");
                None
            }
        }
    }
}

/// Without `/proc`, a start finds no leftovers (see the module's docs).
#[cfg(not(target_os = "linux"))]
pub fn stop_leftovers(_tag: &str) -> usize {
    0
}

#[cfg(all(test, target_os = "linux"))]
mod tests;
