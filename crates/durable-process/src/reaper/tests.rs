use super::*;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

/// Polls until `child` has ended (10 s at most: this is no timing check).
fn gone(child: &mut Child) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

/// Polls until no process has pid `pid` (it is not our child: `/proc`).
fn pid_gone(pid: u32) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok();
        // Gone, or a zombie waiting for its parent.
        if state
            .as_deref()
            .and_then(|s| s.rsplit_once(')'))
            .is_none_or(|(_, rest)| rest.trim_start().starts_with('Z'))
        {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

fn sleeper(mark: &str) -> Child {
    Command::new("sleep").arg("300").env(RUN_ENV, mark).spawn().unwrap()
}

/// A call as Pi runs it: `sh` carrying `mark`, leading a session of its own,
/// and under it a `sleep` that cleared its environment. The `sh`, and the
/// sleep's pid.
fn detached_call(mark: &str) -> (Child, u32) {
    let mut call =
        Command::new("setsid").args(["sh", "-c", "env -i sleep 300; :"]).env(RUN_ENV, mark).spawn().unwrap();
    let sh = call.id();
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        let sleep = std::fs::read_dir("/proc").unwrap().flatten().find_map(|e| {
            let pid = e.file_name().to_string_lossy().parse::<u32>().ok()?;
            let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
            let (name, rest) = stat.rsplit_once(')')?;
            let parent = rest.split_whitespace().nth(1)?;
            (name.ends_with("(sleep") && parent == sh.to_string()).then_some(pid)
        });
        if let Some(sleep) = sleep {
            return (call, sleep);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = call.kill();
    let _ = call.wait();
    panic!("the call's sleep did not start");
}

mod proc_tests {
    use super::super::leftovers::{Proc, under};
    use super::*;

    fn p(pid: u32, parent: u32, session: u32, mark: Option<&str>) -> Proc {
        Proc { pid, parent, session, start: 1, mark: mark.map(str::to_owned) }
    }

    #[test]
    fn under_a_root_are_its_children_and_its_sessions_members_not_its_own_session() {
        let procs = [
            p(1, 0, 1, None),
            p(10, 1, 10, None),         // the agent's shell, leading its session
            p(20, 10, 10, Some("run")), // Pi, in the shell's session
            p(21, 20, 21, Some("run")), // a call, leading a session of its own
            p(22, 21, 21, None),        // its child that cleared its environment
            p(23, 1, 21, None),         // in the call's session, its parent gone
            p(24, 22, 24, None),        // the child's child, in a session of its own
            p(30, 10, 10, None),        // another program of the shell's session
            p(31, 1, 31, Some("other")),
        ];
        let found = under(&procs, |p| p.mark.as_deref() == Some("run"));
        assert_eq!(found.into_iter().collect::<Vec<_>>(), [20, 21, 22, 23, 24]);
    }

    #[test]
    fn a_start_stops_the_leftovers_of_a_dead_agent_and_spares_a_live_ones_and_other_folders() {
        let tag = format!("test{}", std::process::id());
        // A pid no process has (above the kernel's pid limit).
        let (mut dead, dead_sleep) = detached_call(&format!("{tag}-4999999-1-1"));
        let mut live = sleeper(RunMark::numbered(&tag, 1).as_str());
        let mut other = sleeper("otherfolder-4999999-1-1");
        let mut unmarked = Command::new("sleep").arg("300").spawn().unwrap();
        assert_eq!(stop_leftovers(&tag), 2, "the call and the sleep under it");
        assert!(gone(&mut dead), "the dead agent's call is stopped");
        assert!(pid_gone(dead_sleep), "and what runs under it, though it has no mark");
        for (what, child) in [
            ("a live agent's run", &mut live),
            ("another folder's", &mut other),
            ("an unmarked process", &mut unmarked),
        ] {
            assert!(child.try_wait().unwrap().is_none(), "{what} is left alone");
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    #[test]
    fn a_mark_names_this_agent_and_its_start() {
        let mark = RunMark::numbered("abc", 3);
        let rest = mark.as_str().strip_prefix("abc-").unwrap();
        assert!(program_alive(rest), "{mark}");
        assert!(!program_alive("4999999-1-3"));
        assert!(!program_alive("garbage"));
    }
}

/// Drops the watcher of `script` and checks that the marked call (in a
/// session of its own) and what runs under it are stopped, and nothing else.
async fn the_watcher_stops_the_run(script: &str, args: &[&str], n: u64) {
    // A mark of this test's own (the tests run at once).
    let mark = RunMark::numbered(&format!("watch{}", std::process::id()), n);
    let watcher = Watcher::spawn_script(script, &mark, args).expect("sh starts");
    let (mut call, sleep) = detached_call(mark.as_str());
    let mut unmarked = Command::new("sleep").arg("300").spawn().unwrap();
    let mut other_run = sleeper(&format!("{mark}0"));
    assert!(call.try_wait().unwrap().is_none());
    drop(watcher);
    assert!(gone(&mut call), "the marked call is stopped once the pipe closes");
    assert!(pid_gone(sleep), "and what runs under it, though it has no mark");
    for (what, child) in [("an unmarked process", &mut unmarked), ("another run's", &mut other_run)] {
        assert!(child.try_wait().unwrap().is_none(), "{what} is left alone");
        let _ = child.kill();
        let _ = child.wait();
    }
}

#[tokio::test]
async fn dropping_the_watcher_stops_the_run_even_in_a_session_of_its_own() {
    the_watcher_stops_the_run(WATCH.0, WATCH.1, 1).await;
}

/// The same where `grep` cannot read NUL-separated lines: one `tr | grep`
/// per process.
#[tokio::test]
async fn the_watcher_without_grep_z_stops_the_run_too() {
    the_watcher_stops_the_run(WATCH.0, &["per-process"], 2).await;
}

/// The watcher of systems without `/proc` (macOS), run here with procps'
/// `ps` (`e` where macOS says `-E`): the marked call and its children.
#[tokio::test]
async fn the_watcher_without_proc_stops_the_marked_processes_and_their_children() {
    the_watcher_stops_the_run(include_str!("watch_ps.sh"), &["axwwe"], 3).await;
}

/// `any_alive` sees a marked process in a session of its own, and no
/// longer once the watcher's pipe closed.
#[tokio::test]
async fn a_marked_process_is_seen_alive_until_the_watcher_stops_it() {
    let mark = RunMark::numbered(&format!("alive{}", std::process::id()), 1);
    let mut sleeper =
        Command::new("setsid").args(["sleep", "60"]).env(RUN_ENV, mark.as_str()).spawn().unwrap();
    let watcher = Watcher::spawn(&mark).expect("sh");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !mark.any_alive() {
        assert!(Instant::now() < deadline, "the marked process never showed");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    drop(watcher);
    assert!(gone(&mut sleeper), "killed once the pipe closed");
    assert!(!mark.any_alive());
}
