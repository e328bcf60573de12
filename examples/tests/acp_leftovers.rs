//! What an ACP agent's tools start never outlives it (durable-acp through
//! `durable_process`): `durable-agent acp` with the fake agent
//! `acp/tool_agent.py`, whose tool runs the prompt as a long call in a
//! session of its own (`setsid sh -c …`, as a coding agent's shell tool
//! does) and ends the turn while it runs. Then durable-agent is killed
//! (`SIGKILL`): alone, when the watcher of its agent's run stops the call;
//! or with its agent and that watcher, when the call runs on until a start
//! of durable-agent on the same `--data` stops it (`stop_leftovers`). Also
//! as `nobody` where the tests run as root, and with a call that clears its
//! environment (`env -i`), which carries no mark but runs in its call's
//! session. Each case polls `/proc` with a bounded deadline, then starts
//! durable-agent again on the same data and finds nothing of the old run.
#![cfg(feature = "acp")]

mod agent;

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use agent::{alive, as_user, curl_as, durable_agent, unprivileged};
use serde_json::{Value, json};

/// Polls `check` every 50 ms for up to 30 s (a loaded machine is slow).
fn eventually<T>(what: &str, mut check: impl FnMut() -> Option<T>) -> Option<T> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(v) = check() {
            return Some(v);
        }
        if Instant::now() > deadline {
            eprintln!("timed out waiting for {what}");
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A fresh folder for one case (`project`, the sessions' folder; durable-agent
/// makes `data` and `sock`), its user's.
fn scratch(name: &str, user: Option<u32>) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("durable-acp-leftovers-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("project")).unwrap();
    if let Some(uid) = user {
        for sub in ["", "project"] {
            std::os::unix::fs::chown(dir.join(sub), Some(uid), Some(uid)).unwrap();
        }
    }
    dir
}

/// `durable-agent acp` on `dir/data` with the tool agent, in a process
/// group of its own.
struct DurableAgent {
    child: Child,
    socket: String,
    user: Option<u32>,
}

impl DurableAgent {
    fn start(dir: &Path, user: Option<u32>) -> DurableAgent {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/acp/tool_agent.py");
        let socket = dir.join("sock").join("app.sock").to_str().unwrap().to_owned();
        let mut child = as_user(user, durable_agent())
            .args(["acp", "--socket", &socket, "--data"])
            .arg(dir.join("data"))
            .arg("--cwd")
            .arg(dir.join("project"))
            .args(["--", "python3"])
            .arg(&script)
            .env("HOME", dir)
            .env_remove("COLLIE_TOKEN")
            .env_remove("COLLIE_TOKEN_NEXT")
            .current_dir(dir.join("project"))
            // A group of its own: the test ends whatever of it is left.
            .process_group(0)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("durable-agent was built for this test");
        let mut first = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut first).expect("a line");
        assert_eq!(first.trim(), format!("listening {socket}"));
        DurableAgent { child, socket, user }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn curl(&self, args: &[&str], path: &str) -> Value {
        let url = format!("http://collie{path}");
        let (status, r) = curl_as(self.user, &self.socket, &[args, &[url.as_str()]].concat());
        assert_eq!(status, 200, "{path}: {r}");
        r
    }

    /// A new conversation whose first prompt is `command`: its pane, once
    /// the agent said it started the call.
    fn run(&self, command: &str) -> String {
        let body = json!({"requestId": "s-1", "text": command}).to_string();
        let r = self
            .curl(&["-H", "Content-Type: application/json", "-d", &body], "/v1/starters/new-conversation");
        assert_eq!(r["result"], "started", "{r}");
        let pane = r["pane"].as_str().expect("the starter names its pane").to_owned();
        let said = format!("started {command}");
        let reply = eventually("the agent's reply", || {
            let events = self.curl(&[], &format!("/v1/panes/{pane}/events?after=0"));
            events["events"]
                .as_array()?
                .iter()
                .find(|e| e["type"] == "item" && e["item"]["text"] == said.as_str())
                .cloned()
        });
        assert!(reply.is_some(), "the agent answered the turn");
        pane
    }

    /// The state is served: the start (and its sweep) is done.
    fn serving(&self) {
        let state = self.curl(&[], "/v1/state");
        assert!(state["panes"].is_array(), "{state}");
    }

    fn kill(&self) {
        kill(&[self.pid()]);
    }

    /// Reaps it once it ended.
    fn wait(&mut self) {
        let ended = eventually("durable-agent to end", || self.child.try_wait().ok().flatten());
        assert!(ended.is_some(), "durable-agent did not end");
    }
}

impl Drop for DurableAgent {
    fn drop(&mut self) {
        if let Ok(Some(_)) = self.child.try_wait() {
            return;
        }
        let _ = Command::new("kill").args(["-TERM", "--", &format!("-{}", self.pid())]).status();
        if eventually("durable-agent to end", || self.child.try_wait().ok().flatten()).is_none() {
            let _ = Command::new("kill").args(["-KILL", "--", &format!("-{}", self.pid())]).status();
            let _ = self.child.wait();
        }
    }
}

fn kill(pids: &[u32]) {
    if pids.is_empty() {
        return;
    }
    let pids: Vec<String> = pids.iter().map(u32::to_string).collect();
    let _ = Command::new("kill").arg("-KILL").args(&pids).status();
}

/// The running pids in `/proc`, with what `read` gives for each.
fn scan<T>(mut read: impl FnMut(&Path) -> Option<T>) -> Vec<(u32, T)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
        if let Some(v) = read(&entry.path()).filter(|_| alive(pid)) {
            out.push((pid, v));
        }
    }
    out
}

/// The command line of `dir` (`/proc/<pid>`), its words joined by spaces.
fn cmdline(dir: &Path) -> Option<String> {
    let raw = std::fs::read(dir.join("cmdline")).ok()?;
    Some(String::from_utf8_lossy(&raw).replace('\0', " "))
}

/// The running processes whose command line holds `needle`.
fn processes_naming(needle: &str) -> Vec<u32> {
    let found = scan(|dir| cmdline(dir).filter(|c| c.contains(needle)));
    found.into_iter().map(|(pid, _)| pid).collect()
}

/// Whether a run mark (`<tag>-<program pid>-<start>-<n>`) is one of program `pid`'s.
fn mark_of(mark: &str, pid: u32) -> bool {
    mark.split('-').nth(1) == Some(pid.to_string().as_str())
}

/// The running processes whose environment holds a run mark
/// (`DURABLE_AGENT_RUN`) of durable-agent `pid`, with their parents.
fn marked_by(pid: u32) -> Vec<(u32, u32)> {
    scan(|dir| {
        let environ = std::fs::read(dir.join("environ")).ok()?;
        let marked = environ.split(|&b| b == 0).any(|var| {
            var.strip_prefix(b"DURABLE_AGENT_RUN=").is_some_and(|m| mark_of(&String::from_utf8_lossy(m), pid))
        });
        let stat = std::fs::read_to_string(dir.join("stat")).ok()?;
        let parent = stat.rsplit_once(')')?.1.split_whitespace().nth(1)?.parse().ok()?;
        marked.then_some(parent)
    })
}

/// The watchers of durable-agent `pid`'s agent runs (`sh -c <script>
/// durable-agent-watcher <mark>`; the script names it too, so the last).
fn watchers_of(pid: u32) -> Vec<u32> {
    let found = scan(|dir| {
        let cmdline = cmdline(dir)?;
        let mark = cmdline.rsplit_once(" durable-agent-watcher ")?.1.split(' ').next()?.to_owned();
        mark_of(&mark, pid).then_some(())
    });
    found.into_iter().map(|(pid, _)| pid).collect()
}

/// How durable-agent is ended while the call runs.
#[derive(Clone, Copy, Debug, PartialEq)]
enum End {
    /// `SIGKILL` to durable-agent alone: the watcher of its agent's run
    /// sees its pipe close.
    Kill,
    /// `SIGKILL` to durable-agent, its agent and the watcher of the
    /// agent's run: only the next start on the same data is left to stop
    /// the call.
    KillAll,
}

/// Runs `command` as the tool agent's call (it names `needle` while it
/// runs, and says nothing), ends durable-agent as `end` says, and checks
/// that the call's processes are gone, then that a start on the same data
/// finds nothing of the old run.
fn the_call_is_gone_after(end: End, user: Option<u32>, name: &str, command: &str, needle: &str) {
    let dir = scratch(&format!("{name}-{}", user.unwrap_or(0)), user);
    let mut first = DurableAgent::start(&dir, user);
    let pid = first.pid();
    first.run(command);
    let call = eventually("the call's processes", || {
        let found = processes_naming(needle);
        (!found.is_empty()).then_some(found)
    })
    .expect("the call runs under the agent");
    let marked = marked_by(pid);
    let agents: Vec<u32> = marked.iter().filter(|&&(_, parent)| parent == pid).map(|&(p, _)| p).collect();
    let watchers = watchers_of(pid);
    assert_eq!(agents.len(), 1, "one agent process, marked: {marked:?}");
    assert_eq!(watchers.len(), 1, "one watcher for its run");
    assert!(marked.iter().any(|(p, _)| call.contains(p)), "the call carries the mark: {marked:?}, {call:?}");
    // Let the call settle into what it runs (`sleep`, under its `sh`).
    std::thread::sleep(Duration::from_millis(300));
    match end {
        End::Kill => {
            first.kill();
            first.wait();
        }
        End::KillAll => {
            // The watcher first: it acts as soon as durable-agent is gone.
            kill(&[watchers[0], pid, agents[0]]);
            first.wait();
            let agent_gone = eventually("the agent to end", || (!alive(agents[0])).then_some(()));
            assert!(agent_gone.is_some(), "the agent process {} outlived its SIGKILL", agents[0]);
            std::thread::sleep(Duration::from_millis(300));
            assert!(!processes_naming(needle).is_empty(), "with its watcher gone, the call is still there");
        }
    }
    // A start on the same data (for `KillAll`, what stops the call).
    let again = (end == End::KillAll).then(|| DurableAgent::start(&dir, user));
    let gone =
        eventually("the call's processes to end", || processes_naming(needle).is_empty().then_some(()));
    let left = processes_naming(needle);
    kill(&left);
    assert!(
        gone.is_some() && left.is_empty(),
        "after {end:?}, the call's processes {call:?} outlived durable-agent: {left:?}"
    );
    drop(again);
    let again = DurableAgent::start(&dir, user);
    again.serving();
    let leftover = marked_by(pid);
    // The watcher ends a moment after what it stopped (a last scan).
    let _ = eventually("the old run's watcher to end", || watchers_of(pid).is_empty().then_some(()));
    let watchers = watchers_of(pid);
    assert!(
        leftover.is_empty() && watchers.is_empty() && processes_naming(needle).is_empty(),
        "a start on the same data finds processes of the old run: {leftover:?}, watchers {watchers:?}"
    );
    drop(again);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A number no other process names (`sleep` adds it to its 300 s).
fn needle(case: u32) -> String {
    format!("0.8642{}{case:02}", std::process::id())
}

/// A call as a shell tool runs it: the command, then more after it, so
/// its `sh` stays (and leads the call's session).
fn sleep_call(case: u32) -> (String, String) {
    let needle = needle(case);
    (format!("sleep 300 {needle}; echo done"), needle)
}

#[test]
fn sigkill_to_durable_agent_ends_its_agents_long_call() {
    let (command, needle) = sleep_call(1);
    the_call_is_gone_after(End::Kill, None, "kill", &command, &needle);
}

#[test]
fn with_its_agent_and_the_watcher_killed_too_the_next_start_ends_the_call() {
    let (command, needle) = sleep_call(2);
    the_call_is_gone_after(End::KillAll, None, "all", &command, &needle);
}

/// As `nobody` (when the tests run as root): the watcher runs as that user.
#[test]
fn sigkill_to_an_unprivileged_durable_agent_ends_its_agents_long_call() {
    let (command, needle) = sleep_call(3);
    the_call_is_gone_after(End::Kill, unprivileged(), "kill-user", &command, &needle);
}

/// As `nobody`: a start stops only that user's leftovers, and finds them.
#[test]
fn with_the_watcher_killed_too_the_next_start_of_an_unprivileged_durable_agent_ends_the_call() {
    let (command, needle) = sleep_call(4);
    the_call_is_gone_after(End::KillAll, unprivileged(), "all-user", &command, &needle);
}

/// A call that clears its environment (`env -i`): its process carries no
/// mark, but it runs in the call's session, under the call's `sh`.
#[test]
fn a_call_that_clears_its_environment_is_ended_by_the_watcher() {
    let needle = needle(5);
    let command = format!("env -i sleep 300 {needle}; echo done");
    the_call_is_gone_after(End::Kill, None, "env-kill", &command, &needle);
}

/// The same, with only the next start left to stop it.
#[test]
fn a_call_that_clears_its_environment_is_ended_by_the_next_start() {
    let needle = needle(6);
    let command = format!("env -i sleep 300 {needle}; echo done");
    the_call_is_gone_after(End::KillAll, None, "env-all", &command, &needle);
}
