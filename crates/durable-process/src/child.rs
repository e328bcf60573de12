//! Starting an agent process, and ending it.

use std::process::{ExitStatus, Stdio};

use tokio::process::{Child, ChildStdin, ChildStdout, Command};

use crate::reaper::{RUN_ENV, RunMark, Watcher};
use crate::stderr::StderrTail;

/// A running agent process: its pipes, the tail of its standard error,
/// and its run's mark and [`Watcher`]. Build with [`AgentChild::builder`].
///
/// The process is killed when the [`Child`] is dropped
/// (`kill_on_drop`); what it started is stopped when the watcher is
/// dropped, so keep both as long as the agent is wanted.
#[derive(Debug)]
#[non_exhaustive]
pub struct AgentChild {
    /// The process (`kill_on_drop`).
    pub child: Child,
    /// Its standard input.
    pub stdin: ChildStdin,
    /// Its standard output.
    pub stdout: ChildStdout,
    /// The last words of its standard error.
    pub stderr: StderrTail,
    /// Its run's mark, in its environment as [`RUN_ENV`].
    pub mark: RunMark,
    /// The watcher of its run (`None` where `sh` could not start, or on Windows).
    pub watcher: Option<Watcher>,
}

/// Builds an [`AgentChild`] from the agent's command.
#[derive(Debug)]
pub struct AgentChildBuilder {
    command: Command,
    tag: String,
    own_group: bool,
}

impl AgentChild {
    /// Starts building the run of `command` (its program, arguments,
    /// environment and folder as the caller set them; the pipes are set
    /// here).
    pub fn builder(command: Command) -> AgentChildBuilder {
        AgentChildBuilder { command, tag: "agent".to_owned(), own_group: false }
    }

    /// The process id, while it runs.
    pub fn id(&self) -> Option<u32> {
        self.child.id()
    }
}

impl AgentChildBuilder {
    /// The tag of the run's mark (default `agent`): runs that share it are
    /// those [`stop_leftovers`](crate::stop_leftovers) looks at, e.g. a
    /// [`folder_tag`](crate::folder_tag) of the folder their sessions live in.
    pub fn run_tag(mut self, tag: impl Into<String>) -> Self {
        self.tag = tag.into();
        self
    }

    /// Starts the agent in a process group of its own (Unix), so that
    /// [`kill_process_group`] ends it with what it started in its group,
    /// and a signal to this program's group (a terminal's Ctrl-C) does not
    /// reach it: the program ends it. Default: it stays in this program's
    /// group.
    pub fn own_process_group(mut self) -> Self {
        self.own_group = true;
        self
    }

    /// Starts the watcher, then the agent with the mark in its
    /// environment and its three pipes, and the reader of its standard
    /// error (needs a tokio runtime). The error is the spawn's.
    ///
    /// The agent does not inherit the phone's tokens (`COLLIE_TOKEN`,
    /// `COLLIE_TOKEN_NEXT`): with them, its tools could answer their own
    /// approval cards over HTTPS. A token the command sets itself is the
    /// caller's choice.
    #[must_use = "dropping the agent child kills the agent"]
    pub fn spawn(self) -> std::io::Result<AgentChild> {
        let AgentChildBuilder { mut command, tag, own_group } = self;
        let mark = RunMark::new(&tag);
        keep_tokens_out(&mut command);
        command
            .env(RUN_ENV, mark.as_str())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        #[cfg(unix)]
        if own_group {
            command.process_group(0);
        }
        #[cfg(not(unix))]
        let _ = own_group;
        // First: no instant of the run goes unwatched.
        let watcher = Watcher::spawn(&mark);
        let mut child = command.spawn()?;
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(std::io::Error::other("the agent's pipes were not set up"));
        };
        Ok(AgentChild { child, stdin, stdout, stderr: StderrTail::spawn(stderr), mark, watcher })
    }
}

/// Removes the tokens from what `command` inherits, but one it sets itself.
fn keep_tokens_out(command: &mut Command) {
    for name in [durable_types::TOKEN_ENV, durable_types::TOKEN_NEXT_ENV] {
        let set_here = command.as_std().get_envs().any(|(key, value)| key == name && value.is_some());
        if !set_here {
            command.env_remove(name);
        }
    }
}

/// Kills a process and the process group it leads at once (`SIGKILL`; see
/// [`AgentChildBuilder::own_process_group`]). Nothing for pid 0 or 1 (a
/// signal to every process, or to init) nor for this program's own pid,
/// and nothing on Windows.
pub fn kill_process_group(pid: u32) {
    if !may_kill_group_of(pid) {
        return;
    }
    #[cfg(unix)]
    if let Some(pid) = i32::try_from(pid).ok().and_then(rustix::process::Pid::from_raw) {
        let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
    }
    #[cfg(not(unix))]
    let _ = pid;
}

/// Whether `pid`'s group may be killed: not for pid 0 (this program's own
/// group), 1 (with `-1`, every process the user may signal), nor this
/// program's pid.
fn may_kill_group_of(pid: u32) -> bool {
    pid > 1 && pid != std::process::id()
}

/// How a process ended, in words for a notice: `exit code 1`, `killed by
/// signal 9`.
pub fn describe_exit(status: &ExitStatus) -> String {
    if let Some(code) = status.code() {
        return format!("exit code {code}");
    }
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(signal) = status.signal() {
            return format!("killed by signal {signal}");
        }
    }
    status.to_string()
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn the_agent_gets_its_mark_pipes_and_the_tail_of_its_errors() {
        let mut command = Command::new("sh");
        command
            .args(["-c", r#"read line; echo "got $line $DURABLE_AGENT_RUN"; echo "it broke" >&2; exit 3"#]);
        let mut agent = AgentChild::builder(command).run_tag("t1").own_process_group().spawn().unwrap();
        assert!(agent.mark.as_str().starts_with("t1-"), "{}", agent.mark);
        agent.stdin.write_all(b"hello\n").await.unwrap();
        let mut out = String::new();
        agent.stdout.read_to_string(&mut out).await.unwrap();
        assert_eq!(out, format!("got hello {}\n", agent.mark));
        let status = agent.child.wait().await.unwrap();
        assert_eq!(describe_exit(&status), "exit code 3");
        for _ in 0..100 {
            if agent.stderr.last_line().is_some() {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        assert_eq!(agent.stderr.last_line().as_deref(), Some("it broke"));
    }

    #[tokio::test]
    async fn a_killed_group_is_described_by_its_signal() {
        let mut command = Command::new("sh");
        command.args(["-c", "sleep 60 & wait"]);
        let mut agent = AgentChild::builder(command).own_process_group().spawn().unwrap();
        kill_process_group(agent.id().unwrap());
        let status = agent.child.wait().await.unwrap();
        assert_eq!(describe_exit(&status), "killed by signal 9");
    }

    #[test]
    fn the_tokens_are_not_inherited_unless_the_command_sets_them() {
        let env_of = |command: &Command, name: &str| {
            command.as_std().get_envs().find(|(key, _)| *key == name).map(|(_, v)| v.map(|v| v.to_owned()))
        };
        let mut bare = Command::new("agent");
        keep_tokens_out(&mut bare);
        assert_eq!(env_of(&bare, "COLLIE_TOKEN"), Some(None), "removed from what it inherits");
        assert_eq!(env_of(&bare, "COLLIE_TOKEN_NEXT"), Some(None));
        let mut chosen = Command::new("agent");
        chosen.env("COLLIE_TOKEN_NEXT", "chosen");
        keep_tokens_out(&mut chosen);
        assert_eq!(env_of(&chosen, "COLLIE_TOKEN"), Some(None));
        assert_eq!(
            env_of(&chosen, "COLLIE_TOKEN_NEXT"),
            Some(Some("chosen".into())),
            "set on the command: kept"
        );
    }

    #[test]
    fn no_group_kill_reaches_init_everyone_or_this_program() {
        // Checked on the rule, not by sending: were it broken, a kill of
        // group 1 as root would end every process of the machine.
        for pid in [0, 1, std::process::id()] {
            assert!(!may_kill_group_of(pid), "{pid}");
        }
        assert!(may_kill_group_of(std::process::id() + 1));
    }

    #[tokio::test]
    async fn a_program_that_cannot_start_is_the_spawn_error() {
        let command = Command::new("/nonexistent/agent");
        let err = AgentChild::builder(command).spawn().unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::NotFound);
    }
}
