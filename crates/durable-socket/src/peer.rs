//! The caller check: who is at the other end of a connection (Linux
//! `SO_PEERCRED` and the `/proc` parent chain).

use std::fs;

use tokio::net::UnixStream;

use durable_core::CallerCheckMode;
use durable_types::exchange::Caller;

use crate::options::CallerCheck;

/// A connection's peer as the kernel reports it (`SO_PEERCRED`).
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerCred {
    /// The peer's process id; 0 when it lives in a pid namespace this
    /// process cannot see.
    pub pid: i32,
    /// The peer's effective user id.
    pub uid: u32,
}

/// How far up the parent chain the check looks before giving up (a chain
/// deeper than this is not one a real process tree has).
const MAX_CHAIN: usize = 4096;

/// Classifies a peer for an agent running as `own_pid` / `own_uid`:
/// another user → [`Caller::OtherUser`]; the agent itself or a process whose
/// parent chain in `/proc` reaches the agent → [`Caller::SelfOrDescendant`];
/// anything else (including a pid this process cannot see) →
/// [`Caller::OtherProcess`].
#[doc(hidden)]
pub fn classify_peer(peer: PeerCred, own_pid: u32, own_uid: u32) -> Caller {
    if peer.uid != own_uid {
        return Caller::OtherUser;
    }
    let Ok(own) = i32::try_from(own_pid) else {
        return Caller::OtherProcess;
    };
    let mut pid = peer.pid;
    for _ in 0..MAX_CHAIN {
        if pid == own {
            return Caller::SelfOrDescendant;
        }
        if pid <= 1 {
            break;
        }
        match parent_of(pid) {
            Some(parent) => pid = parent,
            None => break,
        }
    }
    Caller::OtherProcess
}

/// The parent of `pid`, from `/proc/<pid>/stat` (the field after the
/// parenthesized command name, which may itself hold spaces and `)`).
fn parent_of(pid: i32) -> Option<i32> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after_name = &stat[stat.rfind(')')? + 1..];
    let mut fields = after_name.split_whitespace();
    let _state = fields.next()?;
    fields.next()?.parse().ok()
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
    /// Linux: `SO_PEERCRED` and the parent chain.
    Full { pid: u32, uid: u32 },
}

impl PeerCheck {
    /// The check for this platform, the mode the core reports in
    /// `GET /hello`, and the start-up warn line, if any.
    pub(crate) fn for_platform(check: CallerCheck) -> (PeerCheck, CallerCheckMode, Option<&'static str>) {
        if check == CallerCheck::Off {
            return (PeerCheck::Off, CallerCheckMode::Off, None);
        }
        platform_check()
    }

    /// Who is at the other end of `stream`.
    pub(crate) fn caller_of(self, stream: &UnixStream) -> Caller {
        match self {
            PeerCheck::Off | PeerCheck::Unavailable => Caller::Unknown,
            PeerCheck::UidOnly { uid } => match peer_cred(stream) {
                Some(peer) if peer.uid == uid => Caller::Unknown,
                _ => Caller::OtherUser,
            },
            // A peer the kernel will not describe is refused outright.
            PeerCheck::Full { pid, uid } => {
                peer_cred(stream).map_or(Caller::OtherUser, |peer| classify_peer(peer, pid, uid))
            }
        }
    }
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
        Some(_) => (PeerCheck::Full { pid, uid }, CallerCheckMode::On, None),
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
        let mut sh = Command::new("sh")
            .args(["-c", "sleep 5 & echo $!; wait"])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(&mut std::io::BufReader::new(sh.stdout.take().unwrap()), &mut line)
            .unwrap();
        let grandchild: i32 = line.trim().parse().unwrap();
        assert_eq!(classify_peer(PeerCred { pid: grandchild, uid }, pid, uid), Caller::SelfOrDescendant);
        let _ = Command::new("kill").arg(grandchild.to_string()).status();
        let _ = sh.wait();
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_process_outside_the_agents_tree_is_another_process() {
        let (pid, uid) = me();
        // Our parent is not our descendant; nor is init, an unseen pid (0) or
        // a pid that does not exist.
        let parent = parent_of(pid as i32).unwrap();
        for other in [parent, 1, 0, i32::MAX] {
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
        fs::create_dir_all(&dir).unwrap();
        let odd = dir.join("x) (y z");
        fs::copy("/bin/sleep", &odd).unwrap();
        let mut child = Command::new(&odd).arg("5").spawn().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(100));
        let stat = fs::read_to_string(format!("/proc/{}/stat", child.id())).unwrap();
        assert!(stat.contains("(x) (y z)"), "{stat}");
        assert_eq!(parent_of(child.id() as i32), Some(std::process::id() as i32));
        let _ = child.kill();
        let _ = child.wait();
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
