//! What the runs of dead programs left, found in `/proc` and stopped at
//! a start (Linux).

use std::collections::{BTreeMap, BTreeSet};
use std::os::fd::OwnedFd;

use rustix::process::{Pid, PidfdFlags, Signal, kill_process, pidfd_open, pidfd_send_signal};

use super::{RUN_ENV, clean_tag, program_alive, start_time};

/// One process as `/proc` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Proc {
    pub(super) pid: u32,
    pub(super) parent: u32,
    pub(super) session: u32,
    pub(super) start: u64,
    /// Its run's mark, when it has one and we may read it.
    pub(super) mark: Option<String>,
}

/// The variable marks had before 0.2 (Pi's runs only), still read by the
/// sweep so that what an older program left is found after an upgrade.
const OLD_RUN_ENV: &str = "DURABLE_PI_RUN";

/// The processes now.
fn snapshot() -> Vec<Proc> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    let prefixes = [format!("{RUN_ENV}="), format!("{OLD_RUN_ENV}=")];
    let mut out = Vec::new();
    for entry in entries.flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else { continue };
        let Some((parent, session, start)) = parse_stat(&stat) else { continue };
        // Another user's process, or one gone meanwhile: no mark we can see.
        let mark = std::fs::read(entry.path().join("environ")).ok().and_then(|environ| {
            environ
                .split(|&b| b == 0)
                .find_map(|var| prefixes.iter().find_map(|p| var.strip_prefix(p.as_bytes())))
                .and_then(|mark| std::str::from_utf8(mark).ok().map(str::to_owned))
        });
        out.push(Proc { pid, parent, session, start, mark });
    }
    out
}

/// A mark's tag, program pid and program start (`<tag>-<pid>-<start>-<n>`,
/// read from the right: the tag is everything before); `None` for what is
/// not a mark (never taken for a dead program's).
pub(super) fn parse_mark(mark: &str) -> Option<(&str, u32, u64)> {
    let mut parts = mark.rsplitn(4, '-');
    let _n: u64 = parts.next()?.parse().ok()?;
    let start = parts.next()?.parse().ok()?;
    let pid = parts.next()?.parse().ok()?;
    Some((parts.next()?, pid, start))
}

/// Parent, session and start time from `/proc/<pid>/stat`.
fn parse_stat(stat: &str) -> Option<(u32, u32, u64)> {
    // `pid (comm) state ppid pgrp session … starttime(22) …`: the name may
    // hold spaces and parentheses, so read after its last `)`.
    let (_, rest) = stat.rsplit_once(')')?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    Some((fields.get(1)?.parse().ok()?, fields.get(3)?.parse().ok()?, fields.get(19)?.parse().ok()?))
}

/// The processes that ran under a root (a process `is_root` picks): the
/// roots, their children (transitively), and the members of sessions one
/// of them leads — a session is entered only by birth, so its members
/// descend from its leader. Never `me` (this program), what descends from
/// it, or the members of its own session: a program started from a dead
/// run's session (its watcher gone too) does not sweep itself away.
pub(super) fn under(procs: &[Proc], me: u32, is_root: impl Fn(&Proc) -> bool) -> BTreeSet<u32> {
    let my_session = procs.iter().find(|p| p.pid == me).map(|p| p.session);
    let mut spared: BTreeSet<u32> = BTreeSet::from([me]);
    loop {
        let more: Vec<u32> = procs
            .iter()
            .filter(|p| !spared.contains(&p.pid) && spared.contains(&p.parent))
            .map(|p| p.pid)
            .collect();
        if more.is_empty() {
            break;
        }
        spared.extend(more);
    }
    let spare = |p: &Proc| spared.contains(&p.pid) || Some(p.session) == my_session;
    let mut found: BTreeSet<u32> = procs.iter().filter(|p| !spare(p) && is_root(p)).map(|p| p.pid).collect();
    loop {
        let more: Vec<u32> = procs
            .iter()
            .filter(|p| {
                !found.contains(&p.pid)
                    && !spare(p)
                    && (found.contains(&p.parent) || found.contains(&p.session))
            })
            .map(|p| p.pid)
            .collect();
        if more.is_empty() {
            return found;
        }
        found.extend(more);
    }
}

/// Stops what the agent runs of programs no longer alive left under
/// `tag`: every process whose environment holds a mark of `tag` naming a
/// program that is gone, and what runs under it. Each is stopped
/// (`SIGSTOP`) as it is found, until a scan finds nothing new, then all are
/// killed. Returns how many were killed. A live program's runs, and
/// processes of other tags, are left alone.
pub fn stop_leftovers(tag: &str) -> usize {
    let tag = clean_tag(tag);
    let is_root = |p: &Proc| {
        p.mark
            .as_deref()
            .and_then(parse_mark)
            .is_some_and(|(t, pid, start)| t == tag && !program_alive(pid, start))
    };
    let me = std::process::id();
    let mut held: BTreeMap<u32, Held> = BTreeMap::new();
    // Bounded: a round adds at least one process, and each is held once.
    for _ in 0..100 {
        let procs = snapshot();
        let mut new = false;
        for pid in under(&procs, me, is_root) {
            if held.contains_key(&pid) {
                continue;
            }
            let Some(p) = procs.iter().find(|p| p.pid == pid) else { continue };
            if let Some(h) = Held::stop(p) {
                held.insert(pid, h);
                new = true;
            }
        }
        if !new {
            break;
        }
    }
    let stopped = held.into_values().filter(Held::kill).count();
    if stopped > 0 {
        tracing::info!(stopped, "stopped what the runs of a dead program left running");
    }
    stopped
}

/// A process stopped by us, and how to reach it again: its pidfd (Linux
/// 5.3 and later), or its pid and start time.
struct Held {
    pid: Pid,
    pidfd: Option<OwnedFd>,
}

impl Held {
    /// Stops `p` if it is still the process the scan saw: its pidfd is
    /// opened first, then its start time read again, so the pidfd names
    /// that very process, never one that took its pid since.
    fn stop(p: &Proc) -> Option<Held> {
        let pid = Pid::from_raw(i32::try_from(p.pid).ok()?)?;
        let pidfd = match pidfd_open(pid, PidfdFlags::empty()) {
            Ok(fd) => Some(fd),
            Err(rustix::io::Errno::NOSYS) => None,
            Err(_) => return None, // gone
        };
        if start_time(p.pid) != Some(p.start) {
            return None;
        }
        let held = Held { pid, pidfd };
        held.signal(Signal::STOP).then_some(held)
    }

    fn kill(&self) -> bool {
        self.signal(Signal::KILL)
    }

    fn signal(&self, signal: Signal) -> bool {
        match &self.pidfd {
            Some(fd) => pidfd_send_signal(fd, signal).is_ok(),
            // An old kernel: the pid, checked just before (a reuse within
            // that instant would need the whole pid space to wrap).
            None => kill_process(self.pid, signal).is_ok(),
        }
    }
}
