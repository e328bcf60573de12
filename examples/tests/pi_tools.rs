//! What Pi's tools start never outlives the agent (durable-pi's
//! `live::reaper`): `cargo run --example pi` with the real Pi and the
//! scripted model of `crates/durable-pi/tests/pi/faux.ts`, a long `bash`
//! call running under Pi (in a session of its own, as Pi runs every call),
//! and the agent ended by `SIGTERM`, by `SIGKILL`, by `SIGKILL` to it and its
//! Pi at once (also as `nobody` where the tests run as root), and with the
//! watcher of Pi's run killed too, when only the next start on the same
//! data is left to stop the call. Each case waits for the call's processes
//! to be gone (polling `/proc`, with a bounded deadline), then starts the
//! agent again on the same data and finds nothing of the old run. The
//! agent runs with `COLLIE_TOKEN` and `COLLIE_TOKEN_NEXT`: neither Pi, the
//! call nor the watcher has them.
//!
//! It needs node 22 and Pi in `<repo>/.tools` (`cargo xtask install-pi`);
//! without them it fails and says so: it never skips.
mod agent;

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use agent::{as_user, curl_as, example, unprivileged};
use serde_json::json;

const PI_CLI: &str = "node_modules/@earendil-works/pi-coding-agent/dist/bundle/cli.js";

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("examples sits in the repository")
}

/// Pi's command line with the scripted model.
fn pi_command() -> String {
    let tools = repo().join(".tools");
    let (node, cli) = (tools.join("bin/node"), tools.join(PI_CLI));
    assert!(
        node.exists() && cli.exists(),
        "Pi is not installed: run `cargo xtask install-pi` (node 22 and Pi into {}); \
         the live tests need it and never skip",
        tools.display()
    );
    let faux = repo().join("crates/durable-pi/tests/pi/faux.ts");
    format!(
        "'{}' '{}' --offline --no-extensions --no-skills --no-prompt-templates --no-themes \
         --no-context-files --no-mcp --provider faux --model scripted -e '{}'",
        node.display(),
        cli.display(),
        faux.display()
    )
}

/// Polls `check` for up to 30 s (a slow machine starts Pi in seconds).
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
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The Pi example on a data folder of the test's, in a process group of
/// its own (so a test can kill the agent and its Pi at once).
struct PiAgent {
    child: Child,
    socket: String,
    user: Option<u32>,
}

impl PiAgent {
    fn start(dir: &Path, user: Option<u32>) -> PiAgent {
        for sub in ["agent", "project"] {
            std::fs::create_dir_all(dir.join(sub)).unwrap();
        }
        if let Some(uid) = user {
            for sub in ["", "agent", "project"] {
                std::os::unix::fs::chown(dir.join(sub), Some(uid), Some(uid)).unwrap();
            }
        }
        let socket = dir.join("sock").join("app.sock").to_str().unwrap().to_owned();
        let mut child = as_user(user, example("pi"))
            .args(["--data", dir.join("data").to_str().unwrap(), "--socket", &socket])
            // No card for `bash`: the call runs as soon as the model makes it.
            .args(["--pi", &pi_command(), "--gate", "write,edit"])
            .current_dir(dir.join("project"))
            .env("PI_CODING_AGENT_DIR", dir.join("agent"))
            .env("PI_OFFLINE", "1")
            .env("PI_SKIP_VERSION_CHECK", "1")
            .env("PI_TELEMETRY", "0")
            .env("FAUX_TOKENS_PER_SECOND", "150")
            // Neither Pi, its tools nor the watcher may inherit these.
            .env("COLLIE_TOKEN", "t".repeat(40))
            .env("COLLIE_TOKEN_NEXT", "n".repeat(40))
            .process_group(0)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("the example was built by cargo test");
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let first = lines.next().expect("a line").expect("utf-8");
        assert_eq!(first, format!("listening {socket}"));
        PiAgent { child, socket, user }
    }

    fn pane(&self) -> String {
        let state = curl_as(self.user, &self.socket, &["http://collie/v1/state"]).1;
        state["panes"][0]["id"].as_str().expect("a pane").to_owned()
    }

    fn send(&self, pane: &str, text: &str) {
        let body = json!({"requestId": "r-1", "text": text}).to_string();
        let url = format!("http://collie/v1/panes/{pane}/send");
        let (status, r) =
            curl_as(self.user, &self.socket, &["-H", "Content-Type: application/json", "-d", &body, &url]);
        assert_eq!((status, r["result"].clone()), (200, json!("sent")), "{r}");
    }

    fn signal(&self, signal: &str, whole_group: bool) {
        let target = if whole_group { format!("-{}", self.child.id()) } else { self.child.id().to_string() };
        let status = Command::new("kill").args([&format!("-{signal}"), "--", &target]).status().unwrap();
        assert!(status.success(), "kill -{signal} {target}");
    }

    /// Waits for the agent to end (a `SIGTERM` gives it its shutdown grace).
    fn wait(&mut self) {
        let ended = eventually("the agent to end", || self.child.try_wait().ok().flatten());
        if ended.is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
            panic!("the agent did not end");
        }
    }
}

impl Drop for PiAgent {
    fn drop(&mut self) {
        if let Ok(Some(_)) = self.child.try_wait() {
            return;
        }
        self.signal("TERM", false);
        if eventually("the agent to end", || self.child.try_wait().ok().flatten()).is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("durable-pi-tools-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The processes whose command line holds `needle` (from `/proc`).
fn processes_naming(needle: &str) -> Vec<u32> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else { continue };
        if String::from_utf8_lossy(&cmdline).replace('\0', " ").contains(needle) {
            out.push(pid);
        }
    }
    out
}

/// The processes that carry a Pi run's mark (`DURABLE_AGENT_RUN`) of the
/// agent `agent_pid` in their environment.
fn processes_of_agent(agent_pid: u32) -> Vec<u32> {
    let needle = format!("-{agent_pid}-");
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
        let Ok(environ) = std::fs::read(entry.path().join("environ")) else { continue };
        let marked = environ.split(|&b| b == 0).any(|var| {
            var.strip_prefix(b"DURABLE_AGENT_RUN=")
                .is_some_and(|mark| String::from_utf8_lossy(mark).contains(&needle))
        });
        if marked {
            out.push(pid);
        }
    }
    out
}

/// Whether process `pid`'s environment names one of the agent's tokens.
fn has_token(pid: u32) -> bool {
    let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
    environ.split(|&b| b == 0).any(|var| var.starts_with(b"COLLIE_TOKEN"))
}

fn watchers_of(agent_pid: u32) -> Vec<u32> {
    processes_naming("durable-agent-watcher")
        .into_iter()
        .filter(|pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            String::from_utf8_lossy(&cmdline).contains(&format!("-{agent_pid}-"))
        })
        .collect()
}

/// How the agent is ended while the call runs.
#[derive(Clone, Copy, Debug, PartialEq)]
enum End {
    /// `SIGTERM` to the agent: it ends its Pis on the way out.
    Term,
    /// `SIGKILL` to the agent alone: its Pi sees its input close.
    Kill,
    /// `SIGKILL` to the agent and its Pi at once (`kill -9 -<group>`).
    KillGroup,
    /// `SIGKILL` to the agent, its Pi and the watcher of Pi's run: only
    /// the next start on the same data is left to stop the call.
    KillAll,
}

/// Runs `command` as a `bash` call under the real Pi (it names `needle`
/// while it runs, and says nothing), ends the agent as `end` says, and
/// checks that the call's processes are gone, then that a start on the
/// same data finds nothing of the old run.
fn the_call_is_gone_after(end: End, user: Option<u32>, name: &str, command: &str, needle: &str) {
    let dir = scratch(&format!("{name}-{}", user.unwrap_or(0)));
    let mut agent = PiAgent::start(&dir, user);
    let agent_pid = agent.child.id();
    let pane = agent.pane();
    agent.send(&pane, &format!("use bash: {command}; echo done"));
    let running = eventually("the call's processes", || {
        let found = processes_naming(needle);
        (!found.is_empty()).then_some(found)
    })
    .expect("the call runs under Pi");
    let ours: Vec<u32> = [processes_of_agent(agent_pid), watchers_of(agent_pid), running.clone()].concat();
    assert!(
        !watchers_of(agent_pid).is_empty() && processes_of_agent(agent_pid).len() > 1,
        "Pi, its call, a watcher"
    );
    assert!(has_token(agent_pid), "the agent has its tokens");
    let leaked: Vec<u32> = ours.into_iter().filter(|&pid| has_token(pid)).collect();
    assert!(leaked.is_empty(), "Pi, its call or the watcher inherited a token: {leaked:?}");
    // Let the call settle into what it runs (`sleep`, under its `bash`).
    std::thread::sleep(Duration::from_millis(500));
    match end {
        End::Term => {
            agent.signal("TERM", false);
            agent.wait();
        }
        End::Kill => {
            agent.signal("KILL", false);
            agent.wait();
        }
        End::KillGroup => {
            agent.signal("KILL", true);
            agent.wait();
        }
        End::KillAll => {
            let watchers = watchers_of(agent_pid);
            assert!(!watchers.is_empty(), "Pi's run has a watcher");
            agent.signal("KILL", true);
            for pid in watchers {
                let _ = Command::new("kill").args(["-KILL", &pid.to_string()]).status();
            }
            agent.wait();
            std::thread::sleep(Duration::from_millis(300));
            assert!(!processes_naming(needle).is_empty(), "with its watcher gone, the call is still there");
        }
    }
    // A start on the same data (for `KillAll`, what stops the call).
    let again = (end == End::KillAll).then(|| PiAgent::start(&dir, user));
    let gone =
        eventually("the call's processes to end", || processes_naming(needle).is_empty().then_some(()));
    let left = processes_naming(needle);
    for pid in &left {
        let _ = Command::new("kill").args(["-KILL", &pid.to_string()]).status();
    }
    assert!(
        gone.is_some() && left.is_empty(),
        "after {end:?}, the call's processes {running:?} outlived the agent: {left:?}"
    );
    drop(again);
    let again = PiAgent::start(&dir, user);
    // Serving: the start (and its pane's Pi conversation) is done.
    let _ = again.pane();
    let leftover = processes_of_agent(agent_pid);
    assert!(
        leftover.is_empty() && processes_naming(needle).is_empty(),
        "a start on the same data finds a process of the old run: {leftover:?}"
    );
}

/// A number no other process names (`sleep` takes a fraction).
fn needle(case: u32) -> String {
    format!("4321.{}{case:02}", std::process::id())
}

fn sleep_call(case: u32) -> (String, String) {
    let needle = needle(case);
    (format!("sleep {needle}"), needle)
}

#[test]
fn sigterm_to_the_agent_ends_pis_long_bash_call() {
    let (command, needle) = sleep_call(1);
    the_call_is_gone_after(End::Term, None, "term", &command, &needle);
}

#[test]
fn sigkill_to_the_agent_ends_pis_long_bash_call() {
    let (command, needle) = sleep_call(2);
    the_call_is_gone_after(End::Kill, None, "kill", &command, &needle);
}

#[test]
fn sigkill_to_the_agent_and_its_pi_ends_pis_long_bash_call() {
    let (command, needle) = sleep_call(3);
    the_call_is_gone_after(End::KillGroup, None, "group", &command, &needle);
}

/// The same with the agent and its Pi as `nobody` (when the tests run as root).
#[test]
fn sigkill_to_an_unprivileged_agent_and_its_pi_ends_pis_long_bash_call() {
    let (command, needle) = sleep_call(4);
    the_call_is_gone_after(End::KillGroup, unprivileged(), "group-user", &command, &needle);
}

#[test]
fn with_the_watcher_killed_too_the_next_start_ends_pis_long_bash_call() {
    let (command, needle) = sleep_call(5);
    the_call_is_gone_after(End::KillAll, None, "all", &command, &needle);
}

/// As `nobody`: a start stops only that user's leftovers, and finds them.
#[test]
fn with_the_watcher_killed_too_the_next_start_of_an_unprivileged_agent_ends_the_call() {
    let (command, needle) = sleep_call(6);
    the_call_is_gone_after(End::KillAll, unprivileged(), "all-user", &command, &needle);
}

/// A call that clears its environment (`env -i`): its process carries no
/// mark, but it runs in the call's session, under the call's `bash`.
#[test]
fn a_call_that_clears_its_environment_is_ended_too() {
    let needle = needle(7);
    let command = format!("env -i sleep {needle}");
    the_call_is_gone_after(End::KillGroup, None, "env-group", &command, &needle);
}

/// The same, with only the next start left to stop it.
#[test]
fn a_call_that_clears_its_environment_is_ended_by_the_next_start() {
    let needle = needle(8);
    let command = format!("env -i sleep {needle}");
    the_call_is_gone_after(End::KillAll, None, "env-all", &command, &needle);
}
