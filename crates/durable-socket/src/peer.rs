//! The caller check: who is at the other end of a connection (Linux
//! `SO_PEERCRED` and the `/proc` parent chain, with `SO_PEERPIDFD` where the
//! kernel has it, 6.5 and later).
//!
//! The check fails closed: a peer it cannot place for sure — its `/proc`
//! entry gone or unreadable, a link of its parent chain gone, a pid that was
//! reused — is taken for one of the agent's own processes, whose writes the
//! core refuses (reads stay open). Collie never exits while its connection is
//! open, so Collie itself is always placed.

use std::fs;

use tokio::net::UnixStream;

use durable_runtime::CallerCheckMode;
use durable_types::exchange::Caller;

use crate::options::CallerCheck;

/// A connection's peer as the kernel reports it (`SO_PEERCRED`).
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerCred {
    /// The peer's process id (the process that called `connect`); 0 when it
    /// lives in a pid namespace this process cannot see.
    pub pid: i32,
    /// The peer's effective user id.
    pub uid: u32,
}

/// How far up the parent chain the check looks before giving up (a chain
/// deeper than this is not one a real process tree has).
const MAX_CHAIN: usize = 4096;

/// What the check reads of a process in `/proc/<pid>/stat`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ProcStat {
    /// Field 4: the parent's pid (0 for the top of a pid namespace).
    pub(crate) ppid: i32,
    /// Field 22: when the process started, in clock ticks since boot.
    pub(crate) start: u64,
}

/// Parses `/proc/<pid>/stat`. The command name (field 2, in parentheses)
/// is whatever the process set — any bytes but NUL, UTF-8 or not, spaces and
/// `)` included, at most 15 bytes — so the fields are read after the *last*
/// `)`.
pub(crate) fn parse_stat(stat: &[u8]) -> Option<ProcStat> {
    let close = stat.iter().rposition(|&b| b == b')')?;
    let mut fields = stat[close + 1..].split(u8::is_ascii_whitespace).filter(|f| !f.is_empty());
    let _state = fields.next()?; // field 3
    let ppid = std::str::from_utf8(fields.next()?).ok()?.parse().ok()?; // field 4
    let start = std::str::from_utf8(fields.nth(22 - 5)?).ok()?.parse().ok()?; // field 22
    Some(ProcStat { ppid, start })
}

/// `/proc/<pid>/stat`, read as bytes; `None` when there is no such process
/// (or none this process can see: pid 0) or it cannot be read.
fn read_stat(pid: i32) -> Option<ProcStat> {
    if pid <= 0 {
        return None;
    }
    parse_stat(&fs::read(format!("/proc/{pid}/stat")).ok()?)
}

/// The parent of `pid`, from `/proc/<pid>/stat`.
#[cfg_attr(not(any(target_os = "linux", target_os = "android")), allow(dead_code))]
fn parent_of(pid: i32) -> Option<i32> {
    read_stat(pid).map(|stat| stat.ppid)
}

/// Classifies a peer for an agent running as `own_pid` / `own_uid`:
/// another user → [`Caller::OtherUser`]; a process whose parent chain in
/// `/proc` reaches init (or the top of the pid namespace) without passing
/// through the agent → [`Caller::OtherProcess`]; the agent itself, a
/// process whose chain reaches the agent, and — failing closed — any peer
/// the chain cannot be read for (the peer gone or unseen, a link gone or
/// reused) → [`Caller::SelfOrDescendant`].
#[doc(hidden)]
pub fn classify_peer(peer: PeerCred, own_pid: u32, own_uid: u32) -> Caller {
    classify(peer, own_pid, own_uid, None, read_stat)
}

/// [`classify_peer`] with `read` standing for `/proc`, and `accepted`, when
/// known, the time the connection was accepted in the unit of
/// [`ProcStat::start`]: a peer that started after it is not the process
/// that connected (its pid was reused) and fails closed.
pub(crate) fn classify(
    peer: PeerCred,
    own_pid: u32,
    own_uid: u32,
    accepted: Option<u64>,
    read: impl Fn(i32) -> Option<ProcStat>,
) -> Caller {
    // Every "cannot tell" below is this: writes refused, reads served.
    const UNSURE: Caller = Caller::SelfOrDescendant;
    if peer.uid != own_uid {
        return Caller::OtherUser;
    }
    let Ok(own) = i32::try_from(own_pid) else {
        return UNSURE;
    };
    if peer.pid == own {
        return Caller::SelfOrDescendant;
    }
    // The peer itself: gone (it connected, handed the connection on and
    // exited), unseen (pid 0), unreadable, or a newer process under a reused
    // pid — none is known not to be the agent's.
    let Some(mut stat) = read(peer.pid) else {
        return UNSURE;
    };
    if accepted.is_some_and(|accepted| stat.start > accepted) {
        return UNSURE;
    }
    let mut pid = peer.pid;
    for _ in 0..MAX_CHAIN {
        if stat.ppid == own {
            return Caller::SelfOrDescendant;
        }
        if stat.ppid == 1 {
            // Init: the whole chain was read and the agent is not on it.
            return Caller::OtherProcess;
        }
        if stat.ppid <= 0 {
            // The top of this pid namespace (its init, a kernel thread, a
            // process that entered from outside) — or a process reaped while
            // its stat was read: the kernel then writes ppid 0. Reaping
            // cannot be undone, so a second read that still finds the same
            // process proves the first one saw it alive.
            let same = read(pid).is_some_and(|again| again.start == stat.start);
            return if same { Caller::OtherProcess } else { UNSURE };
        }
        let Some(parent) = read(stat.ppid) else {
            return UNSURE; // a link vanished while the chain was walked
        };
        if parent.start > stat.start {
            // A parent cannot start after its child: the parent exited and
            // its pid now names another process.
            return UNSURE;
        }
        pid = stat.ppid;
        stat = parent;
    }
    UNSURE
}

/// The time now in the unit of `/proc/<pid>/stat`'s start time: clock ticks
/// (`sysconf(_SC_CLK_TCK)`) of `CLOCK_BOOTTIME`, the clock the kernel stamps
/// a process's start with (both shifted alike in a time namespace). Rounded
/// down, as the kernel rounds start times, so that a process that started
/// before now never reads as later.
#[cfg(any(target_os = "linux", target_os = "android"))]
fn boot_ticks_now(ticks_per_second: u64) -> Option<u64> {
    use nix::time::{ClockId, clock_gettime};
    let now = clock_gettime(ClockId::CLOCK_BOOTTIME).ok()?;
    let nanos = u128::try_from(now.tv_sec()).ok()? * 1_000_000_000 + u128::try_from(now.tv_nsec()).ok()?;
    u64::try_from(nanos * u128::from(ticks_per_second) / 1_000_000_000).ok()
}

#[cfg(any(target_os = "linux", target_os = "android"))]
fn clock_ticks_per_second() -> Option<u64> {
    use nix::unistd::{SysconfVar, sysconf};
    let ticks = sysconf(SysconfVar::CLK_TCK).ok()??;
    u64::try_from(ticks).ok().filter(|&t| t > 0)
}

/// The check a server applies to each connection.
#[derive(Debug, Clone, Copy)]
pub(crate) enum PeerCheck {
    /// The program turned the check off.
    Off,
    /// The platform cannot tell the peer.
    #[cfg_attr(any(target_os = "linux", target_os = "android"), allow(dead_code))]
    Unavailable,
    /// Linux without a readable `/proc`: other users are still told apart.
    UidOnly { uid: u32 },
    /// Linux: `SO_PEERCRED` and the parent chain; `ticks` is
    /// `sysconf(_SC_CLK_TCK)` when known, for the start-time check.
    Full { pid: u32, uid: u32, ticks: Option<u64> },
}

/// When a connection was accepted, taken by [`PeerCheck::accepted`] right
/// after the accept, for the pid-reuse check of [`PeerCheck::caller_of`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct Accepted(Option<u64>);

impl PeerCheck {
    /// The check for this platform, the mode the core reports in
    /// `GET /hello`, and the start-up warn line, if any.
    pub(crate) fn for_platform(check: CallerCheck) -> (PeerCheck, CallerCheckMode, Option<&'static str>) {
        if check == CallerCheck::Off {
            return (PeerCheck::Off, CallerCheckMode::Off, None);
        }
        platform_check()
    }

    /// The time of an accept, to take right after it.
    pub(crate) fn accepted(self) -> Accepted {
        match self {
            #[cfg(any(target_os = "linux", target_os = "android"))]
            PeerCheck::Full { ticks: Some(ticks), .. } => Accepted(boot_ticks_now(ticks)),
            _ => Accepted(None),
        }
    }

    /// Who is at the other end of `stream`, accepted at `accepted`.
    pub(crate) fn caller_of(self, stream: &UnixStream, accepted: Accepted) -> Caller {
        match self {
            PeerCheck::Off | PeerCheck::Unavailable => Caller::Unknown,
            PeerCheck::UidOnly { uid } => match peer_cred(stream) {
                Some(peer) if peer.uid == uid => Caller::Unknown,
                _ => Caller::OtherUser,
            },
            // A peer the kernel will not describe is refused outright.
            PeerCheck::Full { pid, uid, .. } => {
                let Some(peer) = peer_cred(stream) else {
                    return Caller::OtherUser;
                };
                // Taken before `/proc` is read: it names the process that
                // connected, whatever its pid comes to name later.
                let pidfd = peer_pidfd(stream);
                let caller = classify(peer, pid, uid, accepted.0, read_stat);
                confirm_alive(caller, peer.pid, pidfd.as_ref().map(pidfd_pid))
            }
        }
    }
}

/// The last step of the check where the kernel gave the peer's pidfd:
/// `now` is the pid the pidfd names after the chain was read. The same pid
/// as the peer's means the process that connected was alive through every
/// read, so no read was of another process under a reused pid. Otherwise
/// (it exited, or the pidfd cannot be read) a peer placed outside the
/// agent's tree fails closed. Without a pidfd (`None`, an older kernel)
/// the start-time check of [`classify`] stands alone.
pub(crate) fn confirm_alive(caller: Caller, peer_pid: i32, now: Option<Option<i32>>) -> Caller {
    match (caller, now) {
        (Caller::OtherProcess, Some(now)) if now != Some(peer_pid) => Caller::SelfOrDescendant,
        _ => caller,
    }
}

/// The peer's pidfd (`SO_PEERPIDFD`); `None` on a kernel without it.
#[cfg(any(target_os = "linux", target_os = "android"))]
fn peer_pidfd(stream: &UnixStream) -> Option<std::os::fd::OwnedFd> {
    use nix::sys::socket::{getsockopt, sockopt::PeerPidfd};
    getsockopt(stream, PeerPidfd).ok()
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn peer_pidfd(_stream: &UnixStream) -> Option<std::os::fd::OwnedFd> {
    None
}

/// The pid a pidfd names now, from the `Pid:` line of
/// `/proc/self/fdinfo/<fd>`: the process's pid while it lives, `-1` once it
/// exited, `0` when it is outside this pid namespace; `None` when that
/// cannot be read.
fn pidfd_pid(pidfd: &std::os::fd::OwnedFd) -> Option<i32> {
    use std::os::fd::AsRawFd;
    let info = fs::read_to_string(format!("/proc/self/fdinfo/{}", pidfd.as_raw_fd())).ok()?;
    info.lines().find_map(|line| line.strip_prefix("Pid:")).and_then(|pid| pid.trim().parse().ok())
}

#[cfg_attr(any(target_os = "linux", target_os = "android"), allow(dead_code))]
const UNAVAILABLE_WARNING: &str = "durable: this platform cannot tell which process connects to the socket, \
     so any process of this user can answer this agent's asks (caller check unavailable)";

#[cfg(any(target_os = "linux", target_os = "android"))]
const NO_PROC_WARNING: &str = "durable: /proc cannot be read, so the caller check cannot tell this agent's own \
     processes apart: any process of this user can answer this agent's asks (caller check unavailable)";

#[cfg(any(target_os = "linux", target_os = "android"))]
fn platform_check() -> (PeerCheck, CallerCheckMode, Option<&'static str>) {
    let uid = nix::unistd::geteuid().as_raw();
    let pid = std::process::id();
    match i32::try_from(pid).ok().and_then(parent_of) {
        Some(_) => {
            let check = PeerCheck::Full { pid, uid, ticks: clock_ticks_per_second() };
            (check, CallerCheckMode::On, None)
        }
        None => (PeerCheck::UidOnly { uid }, CallerCheckMode::Unavailable, Some(NO_PROC_WARNING)),
    }
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn platform_check() -> (PeerCheck, CallerCheckMode, Option<&'static str>) {
    (PeerCheck::Unavailable, CallerCheckMode::Unavailable, Some(UNAVAILABLE_WARNING))
}

#[cfg(any(target_os = "linux", target_os = "android"))]
fn peer_cred(stream: &UnixStream) -> Option<PeerCred> {
    use nix::sys::socket::{getsockopt, sockopt::PeerCredentials};
    let cred = getsockopt(stream, PeerCredentials).ok()?;
    Some(PeerCred { pid: cred.pid(), uid: cred.uid() })
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn peer_cred(_stream: &UnixStream) -> Option<PeerCred> {
    None
}

#[cfg(test)]
mod tests {
    use std::process::{Command, Stdio};

    use super::*;

    fn me() -> (u32, u32) {
        (std::process::id(), nix::unistd::geteuid().as_raw())
    }

    #[test]
    fn the_agent_itself_is_self() {
        let (pid, uid) = me();
        let peer = PeerCred { pid: pid as i32, uid };
        assert_eq!(classify_peer(peer, pid, uid), Caller::SelfOrDescendant);
    }

    /// Runs `script` in `sh`, which starts a process in the background and
    /// prints its pid on the first line; returns `sh` and that pid.
    #[cfg(target_os = "linux")]
    fn sh_background_pid(script: &str) -> (std::process::Child, i32) {
        let mut sh = Command::new("sh").args(["-c", script]).stdout(Stdio::piped()).spawn().unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(&mut std::io::BufReader::new(sh.stdout.take().unwrap()), &mut line)
            .unwrap();
        (sh, line.trim().parse().unwrap())
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_child_and_a_grandchild_of_the_agent_are_descendants() {
        let (pid, uid) = me();
        let mut child = Command::new("sleep").arg("5").spawn().unwrap();
        let peer = PeerCred { pid: child.id() as i32, uid };
        assert_eq!(classify_peer(peer, pid, uid), Caller::SelfOrDescendant);
        let _ = child.kill();
        let _ = child.wait();

        // sh starts sleep in the background and prints its pid: a grandchild.
        let (mut sh, grandchild) = sh_background_pid("sleep 5 & echo $!; wait");
        assert_eq!(classify_peer(PeerCred { pid: grandchild, uid }, pid, uid), Caller::SelfOrDescendant);
        let _ = Command::new("kill").arg(grandchild.to_string()).status();
        let _ = sh.wait();
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_process_outside_the_agents_tree_is_another_process() {
        let (pid, uid) = me();
        // Our parent is not our descendant; nor is init. (An unseen pid or
        // one that does not exist fails closed: see below.)
        let parent = parent_of(pid as i32).unwrap();
        for other in [parent, 1] {
            assert_eq!(
                classify_peer(PeerCred { pid: other, uid }, pid, uid),
                Caller::OtherProcess,
                "pid {other}"
            );
        }
    }

    #[test]
    fn another_user_is_other_user_even_inside_the_tree() {
        let (pid, uid) = me();
        let peer = PeerCred { pid: pid as i32, uid: uid.wrapping_add(1) };
        assert_eq!(classify_peer(peer, pid, uid), Caller::OtherUser);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_parent_is_read_past_a_command_name_with_spaces_and_parens() {
        // The command name in /proc/<pid>/stat is the executable's file name.
        let dir = std::env::temp_dir().join(format!("durable-peer-test-{}", std::process::id()));
        let mut child = sleep_named(&dir, "x) (y z".as_ref());
        let stat = fs::read_to_string(format!("/proc/{}/stat", child.id())).unwrap();
        assert!(stat.contains("(x) (y z)"), "{stat}");
        assert_eq!(parent_of(child.id() as i32), Some(std::process::id() as i32));
        let _ = child.kill();
        let _ = child.wait();
        let _ = fs::remove_dir_all(&dir);
    }

    /// Starts a copy of `sleep 5` whose executable is named `name` (a
    /// process's command name is its executable's file name).
    #[cfg(target_os = "linux")]
    fn sleep_named(dir: &std::path::Path, name: &std::ffi::OsStr) -> std::process::Child {
        fs::create_dir_all(dir).unwrap();
        let exe = dir.join(name);
        fs::copy("/bin/sleep", &exe).unwrap();
        // Another test thread forking while the copy was open for writing
        // holds it open until its exec: retry on "text file busy".
        for _ in 0..100 {
            match Command::new(&exe).arg("5").spawn() {
                Err(e) if e.raw_os_error() == Some(nix::errno::Errno::ETXTBSY as i32) => {
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
                other => {
                    let child = other.unwrap();
                    std::thread::sleep(std::time::Duration::from_millis(100));
                    return child;
                }
            }
        }
        panic!("{exe:?} stayed busy");
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_parent_is_read_past_a_command_name_that_is_not_utf8() {
        use std::os::unix::ffi::OsStrExt;
        let dir = std::env::temp_dir().join(format!("durable-peer-test-utf8-{}", std::process::id()));
        let mut child = sleep_named(&dir, std::ffi::OsStr::from_bytes(b"\xff\xfe) x"));
        let stat = fs::read(format!("/proc/{}/stat", child.id())).unwrap();
        assert!(stat.windows(7).any(|w| w == b"(\xff\xfe) x)"), "{stat:?}");
        assert_eq!(parent_of(child.id() as i32), Some(std::process::id() as i32));
        let (pid, uid) = me();
        let peer = PeerCred { pid: child.id() as i32, uid };
        assert_eq!(classify_peer(peer, pid, uid), Caller::SelfOrDescendant);
        let _ = child.kill();
        let _ = child.wait();
        let _ = fs::remove_dir_all(&dir);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_peer_whose_proc_entry_cannot_be_read_fails_closed() {
        let (pid, uid) = me();
        // A pid that does not exist (the connecting process exited and was
        // reaped), and 0 (a process in a pid namespace this one cannot see).
        for gone in [i32::MAX, 0] {
            assert_eq!(
                classify_peer(PeerCred { pid: gone, uid }, pid, uid),
                Caller::SelfOrDescendant,
                "pid {gone}"
            );
        }
    }

    /// A fake `/proc`: (pid, ppid, start).
    fn table(rows: &[(i32, i32, u64)]) -> impl Fn(i32) -> Option<ProcStat> + '_ {
        move |pid| rows.iter().find(|r| r.0 == pid).map(|&(_, ppid, start)| ProcStat { ppid, start })
    }

    const OWN: u32 = 100;
    const UID: u32 = 1000;

    fn peer(pid: i32) -> PeerCred {
        PeerCred { pid, uid: UID }
    }

    #[test]
    fn the_caller_check_walks_the_whole_chain_to_init_before_saying_other_process() {
        // 1 ← 50 ← 500: the agent (100) is not on the chain.
        let proc = table(&[(1, 0, 0), (50, 1, 10), (100, 50, 20), (500, 50, 30)]);
        assert_eq!(classify(peer(500), OWN, UID, Some(40), &proc), Caller::OtherProcess);
        // 1 ← 50 ← 100 (agent) ← 300 ← 500.
        let proc = table(&[(1, 0, 0), (50, 1, 10), (100, 50, 20), (300, 100, 25), (500, 300, 30)]);
        assert_eq!(classify(peer(500), OWN, UID, Some(40), &proc), Caller::SelfOrDescendant);
        // The top of a pid namespace (ppid 0) ends the chain like init.
        let proc = table(&[(7, 0, 0), (500, 7, 30)]);
        assert_eq!(classify(peer(500), OWN, UID, None, &proc), Caller::OtherProcess);
    }

    #[test]
    fn the_caller_check_fails_closed_when_a_link_of_the_chain_vanishes() {
        // 500's parent 300 is gone (and 500 not yet re-parented).
        let proc = table(&[(1, 0, 0), (100, 1, 20), (500, 300, 30)]);
        assert_eq!(classify(peer(500), OWN, UID, Some(40), &proc), Caller::SelfOrDescendant);
        // The peer itself is gone, or unseen.
        assert_eq!(classify(peer(500), OWN, UID, Some(40), table(&[])), Caller::SelfOrDescendant);
        assert_eq!(classify(peer(0), OWN, UID, Some(40), table(&[])), Caller::SelfOrDescendant);
        // Another user is still told apart.
        let other = PeerCred { pid: 500, uid: UID + 1 };
        assert_eq!(classify(other, OWN, UID, Some(40), table(&[])), Caller::OtherUser);
    }

    #[test]
    fn the_caller_check_fails_closed_on_a_reused_pid() {
        let proc = table(&[(1, 0, 0), (300, 1, 35), (500, 300, 30)]);
        // 500's parent pid 300 names a process younger than 500: the real
        // parent exited and its pid was given to another.
        assert_eq!(classify(peer(500), OWN, UID, Some(40), &proc), Caller::SelfOrDescendant);
        // The peer started after the connection was accepted: it is not the
        // process that connected.
        let proc = table(&[(1, 0, 0), (500, 1, 30)]);
        assert_eq!(classify(peer(500), OWN, UID, Some(29), &proc), Caller::SelfOrDescendant);
        assert_eq!(classify(peer(500), OWN, UID, Some(30), &proc), Caller::OtherProcess);
        assert_eq!(classify(peer(500), OWN, UID, None, &proc), Caller::OtherProcess);
    }

    #[test]
    fn the_caller_check_fails_closed_on_a_process_reaped_while_its_stat_was_read() {
        use std::cell::Cell;
        // The first read of 500 races with its reaping: the kernel writes
        // ppid 0; the next read finds nothing.
        let reads = Cell::new(0);
        let racing = |pid: i32| {
            reads.set(reads.get() + 1);
            (pid == 500 && reads.get() == 1).then_some(ProcStat { ppid: 0, start: 30 })
        };
        assert_eq!(classify(peer(500), OWN, UID, Some(40), racing), Caller::SelfOrDescendant);
        // A live process at the top of the pid namespace reads the same twice.
        let proc = table(&[(500, 0, 30)]);
        assert_eq!(classify(peer(500), OWN, UID, Some(40), &proc), Caller::OtherProcess);
    }

    #[test]
    fn the_caller_check_fails_closed_on_a_chain_that_does_not_end() {
        let proc = table(&[(400, 500, 30), (500, 400, 30)]);
        assert_eq!(classify(peer(500), OWN, UID, None, &proc), Caller::SelfOrDescendant);
    }

    #[test]
    fn the_stat_fields_are_read_after_the_last_paren_whatever_the_name_bytes() {
        let mut stat =
            b"4242 (a) \xff\xfe (x) ) S 17 4242 17 0 -1 4194304 0 0 0 0 0 0 0 0 20 0 1 0 ".to_vec();
        stat.extend_from_slice(b"123456 1000 100 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0\n");
        assert!(std::str::from_utf8(&stat).is_err());
        assert_eq!(parse_stat(&stat), Some(ProcStat { ppid: 17, start: 123_456 }));
        assert_eq!(parse_stat(b"1 (x) S"), None);
        assert_eq!(parse_stat(b"no parens 1 2 3"), None);
        // Our own, as the kernel writes it.
        let own = read_stat(std::process::id() as i32).unwrap();
        assert!(own.ppid > 0 && own.start > 0, "{own:?}");
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_peer_that_started_after_the_accept_fails_closed() {
        let (pid, uid) = me();
        let ticks = clock_ticks_per_second().unwrap();
        let before = boot_ticks_now(ticks).unwrap();
        // A process outside our tree: sh starts sleep in the background and
        // exits, so sleep is re-parented away from us.
        std::thread::sleep(std::time::Duration::from_millis(50));
        let (mut sh, orphan) = sh_background_pid("sleep 5 >/dev/null 2>&1 & echo $!");
        let _ = sh.wait();
        let after = boot_ticks_now(ticks).unwrap();
        let start = read_stat(orphan).unwrap().start;
        assert!(before < start && start <= after, "{before} < {start} <= {after}");
        let peer = PeerCred { pid: orphan, uid };
        // Accepted before it started: the pid cannot be the connecting one.
        assert_eq!(classify(peer, pid, uid, Some(before), read_stat), Caller::SelfOrDescendant);
        // Accepted after: it is what it is, a process outside the tree.
        assert_eq!(classify(peer, pid, uid, Some(after), read_stat), Caller::OtherProcess);
        let _ = Command::new("kill").arg(orphan.to_string()).status();
    }

    #[test]
    fn a_peer_placed_outside_the_tree_that_exited_before_the_pidfd_check_fails_closed() {
        let outside = Caller::OtherProcess;
        assert_eq!(confirm_alive(outside, 500, Some(Some(500))), Caller::OtherProcess);
        // Exited (-1), outside the namespace (0), or the pidfd unreadable.
        for now in [Some(-1), Some(0), None] {
            assert_eq!(confirm_alive(outside, 500, Some(now)), Caller::SelfOrDescendant, "{now:?}");
        }
        // No pidfd at all (an older kernel): the start-time check stands.
        assert_eq!(confirm_alive(outside, 500, None), Caller::OtherProcess);
        // Nothing else is changed by the pidfd.
        for caller in [Caller::OtherUser, Caller::SelfOrDescendant] {
            assert_eq!(confirm_alive(caller, 500, Some(Some(-1))), caller);
        }
    }

    /// A real peer's pidfd: it names the peer while it lives and `-1` once
    /// it exited, even though its pid could be given to another process.
    #[cfg(target_os = "linux")]
    #[test]
    fn the_peer_pidfd_names_the_connecting_process_until_it_exits() {
        let dir = std::env::temp_dir().join(format!("durable-pidfd-test-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let path = dir.join("s");
        let _ = fs::remove_file(&path);
        let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        // The peer: a child that connects, then waits for its stdin to close.
        let mut child = Command::new("python3")
            .args(["-c", "import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); sys.stdin.read()"])
            .arg(&path)
            .stdin(Stdio::piped())
            .spawn()
            .expect("python3 runs the connecting peer");
        let (stream, _) = listener.accept().unwrap();
        stream.set_nonblocking(true).unwrap();
        let rt = tokio::runtime::Builder::new_current_thread().enable_io().build().unwrap();
        let _guard = rt.enter();
        let stream = UnixStream::from_std(stream).unwrap();
        let Some(pidfd) = peer_pidfd(&stream) else {
            // A kernel before 6.5: nothing to check here, and the fallback is
            // tested above. Say so rather than pass in silence.
            eprintln!("SO_PEERPIDFD is not supported by this kernel; the pidfd test checked nothing");
            drop(child.stdin.take());
            let _ = child.wait();
            assert!(std::env::var_os("CI").is_none(), "CI machines have a kernel with SO_PEERPIDFD");
            return;
        };
        assert_eq!(pidfd_pid(&pidfd), Some(child.id() as i32));
        drop(child.stdin.take());
        child.wait().unwrap();
        assert_eq!(pidfd_pid(&pidfd), Some(-1));
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_check_off_reports_off_and_no_warning() {
        let (check, mode, warning) = PeerCheck::for_platform(CallerCheck::Off);
        assert!(matches!(check, PeerCheck::Off));
        assert_eq!(mode, CallerCheckMode::Off);
        assert!(warning.is_none());
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_check_is_on_by_default_on_linux() {
        let (check, mode, warning) = PeerCheck::for_platform(CallerCheck::default());
        assert!(matches!(check, PeerCheck::Full { .. }));
        assert_eq!(mode, CallerCheckMode::On);
        assert!(warning.is_none());
        assert!(UNAVAILABLE_WARNING.contains("any process of this user can answer"));
    }
}
