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
    let call =
        Command::new("setsid").args(["sh", "-c", "env -i sleep 300; :"]).env(RUN_ENV, mark).spawn().unwrap();
    let sleep = sleep_under(call.id());
    (call, sleep)
}

/// The pid of the `sleep` whose parent is `parent`, once it shows.
fn sleep_under(parent: u32) -> u32 {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        let sleep = std::fs::read_dir("/proc").unwrap().flatten().find_map(|e| {
            let pid = e.file_name().to_string_lossy().parse::<u32>().ok()?;
            let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
            let (name, rest) = stat.rsplit_once(')')?;
            (name.ends_with("(sleep") && rest.split_whitespace().nth(1)? == parent.to_string()).then_some(pid)
        });
        if let Some(sleep) = sleep {
            return sleep;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("no sleep under {parent}");
}

mod proc_tests {
    use super::super::leftovers::{Proc, parse_mark, under};
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
        let found = under(&procs, 99_999, |p| p.mark.as_deref() == Some("run"));
        assert_eq!(found.into_iter().collect::<Vec<_>>(), [20, 21, 22, 23, 24]);
    }

    #[test]
    fn this_program_its_children_and_its_session_are_spared() {
        let procs = [
            p(21, 1, 21, Some("run")), // a dead run's call, leading its session
            p(40, 21, 21, None),       // this program, started from that session
            p(41, 40, 41, None),       // its agent, in a group and session of its own
            p(42, 40, 21, None),       // its watcher, still in the session
            p(43, 21, 21, None),       // the call's own child
        ];
        let found = under(&procs, 40, |p| p.mark.as_deref() == Some("run"));
        assert_eq!(
            found.into_iter().collect::<Vec<_>>(),
            Vec::<u32>::new(),
            "the whole session is this program's"
        );
        let procs =
            [p(21, 1, 21, Some("run")), p(40, 1, 40, None), p(41, 40, 41, Some("run")), p(43, 21, 21, None)];
        let found = under(&procs, 40, |p| p.mark.as_deref() == Some("run"));
        assert_eq!(found.into_iter().collect::<Vec<_>>(), [21, 43], "never this program's own child");
    }

    #[test]
    fn a_mark_is_read_from_the_right_and_what_is_not_one_is_no_dead_run() {
        assert_eq!(parse_mark("abc-12-34-5"), Some(("abc", 12, 34)));
        assert_eq!(parse_mark("a-b-12-34-5"), Some(("a-b", 12, 34)), "a tag is never cut at its own `-`");
        assert_eq!(parse_mark("agent-b-12-34"), None);
        assert_eq!(parse_mark("12-34-5"), None);
        assert_eq!(parse_mark(""), None);
        assert_eq!(
            RunMark::numbered("a-b\n*", 1).as_str().split('-').next(),
            Some("a_b__"),
            "tags are one word"
        );
    }

    /// Starts `script` under `sh` as an orphan in a session of its own (a
    /// double fork: a dead program's leftovers are no child of the next
    /// program, and this test's children are spared as its own), `mark`
    /// in its environment; the `sh`'s pid.
    fn orphan(mark: &str, script: &str) -> u32 {
        let out = Command::new("sh")
            .args(["-c", "setsid sh -c \"$0\" </dev/null >/dev/null 2>&1 & echo $!", script])
            .env(RUN_ENV, mark)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().parse().expect("the orphan's pid")
    }

    /// Whether `pid` runs now (not gone, not a zombie).
    fn running(pid: u32) -> bool {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|s| s.rsplit_once(')').map(|(_, rest)| !rest.trim_start().starts_with('Z')))
            .unwrap_or(false)
    }

    #[test]
    fn a_start_stops_the_leftovers_of_a_dead_agent_and_spares_a_live_ones_and_other_folders() {
        let tag = format!("test{}", std::process::id());
        // A pid no process has (above the kernel's pid limit): a dead program.
        let dead = orphan(&format!("{tag}-4999999-1-1"), "env -i sleep 300; :");
        let dead_sleep = sleep_under(dead);
        let live = orphan(RunMark::numbered(&tag, 1).as_str(), "sleep 300; :");
        let other = orphan("otherfolder-4999999-1-1", "sleep 300; :");
        let mut unmarked = Command::new("sleep").arg("300").spawn().unwrap();
        assert_eq!(stop_leftovers(&tag), 2, "the call and the sleep under it");
        assert!(pid_gone(dead), "the dead agent's call is stopped");
        assert!(pid_gone(dead_sleep), "and what runs under it, though it has no mark");
        for (what, pid) in [("a live program's run", live), ("another folder's", other)] {
            assert!(running(pid), "{what} is left alone");
            let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
        }
        assert!(unmarked.try_wait().unwrap().is_none(), "an unmarked process is left alone");
        let _ = unmarked.kill();
        let _ = unmarked.wait();
    }

    #[test]
    fn the_sweep_spares_this_programs_own_children() {
        let tag = format!("own{}", std::process::id());
        // Marked as a dead program's, but a child of this one.
        let (mut call, _) = detached_call(&format!("{tag}-4999999-1-1"));
        assert_eq!(stop_leftovers(&tag), 0);
        assert!(call.try_wait().unwrap().is_none(), "this program's child is left alone");
        let _ = call.kill();
        let _ = call.wait();
    }

    #[test]
    fn a_mark_names_this_agent_and_its_start() {
        let mark = RunMark::numbered("abc", 3);
        let (tag, pid, start) = parse_mark(mark.as_str()).unwrap();
        assert_eq!(tag, "abc");
        assert!(program_alive(pid, start), "{mark}");
        assert!(!program_alive(4_999_999, 1));
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
    while mark.any_alive() != Some(true) {
        assert!(Instant::now() < deadline, "the marked process never showed");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    drop(watcher);
    assert!(gone(&mut sleeper), "killed once the pipe closed");
    assert_eq!(mark.any_alive(), Some(false));
}

/// A marked call that cleans up on `SIGTERM` gets the chance: the watcher
/// sends it first, and kills only what is left.
async fn the_watcher_terms_first(script: &str, args: &[&str], n: u64) {
    let mark = RunMark::numbered(&format!("term{}", std::process::id()), n);
    let dir = std::env::temp_dir().join(format!("durable-process-term-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (cleaned, ready) = (dir.join("cleaned"), dir.join("ready"));
    let watcher = Watcher::spawn_script(script, &mark, args).expect("sh starts");
    let script = format!(
        "trap 'touch {}; exit 0' TERM; touch {}; while :; do sleep 0.05; done",
        cleaned.display(),
        ready.display()
    );
    let mut call =
        Command::new("setsid").args(["sh", "-c", &script]).env(RUN_ENV, mark.as_str()).spawn().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !ready.exists() {
        assert!(Instant::now() < deadline, "the call never set its trap");
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(watcher);
    assert!(gone(&mut call), "the call ends");
    assert!(cleaned.exists(), "it had its TERM and cleaned up");
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn the_watcher_sends_term_before_kill() {
    the_watcher_terms_first(WATCH.0, WATCH.1, 1).await;
}

#[tokio::test]
async fn the_watcher_without_proc_sends_term_before_kill() {
    the_watcher_terms_first(include_str!("watch_ps.sh"), &["axwwe"], 2).await;
}
