//! What runs the agents: the command, folders, limits and timings.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::Error;

/// The command that starts an ACP agent (it speaks ACP on its standard
/// input and output). The agent inherits the program's environment, minus
/// `COLLIE_TOKEN` and `COLLIE_TOKEN_NEXT`, plus what [`env`](Self::env) adds.
#[derive(Clone)]
pub struct AgentCommand {
    program: OsString,
    args: Vec<OsString>,
    env: Vec<(OsString, OsString)>,
}

impl std::fmt::Debug for AgentCommand {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The environment's values may be keys: only their names are shown.
        let names: Vec<_> = self.env.iter().map(|(k, _)| k).collect();
        f.debug_struct("AgentCommand")
            .field("program", &self.program)
            .field("args", &self.args)
            .field("env", &names)
            .finish()
    }
}

impl AgentCommand {
    /// A program, with no arguments.
    pub fn new(program: impl Into<OsString>) -> Self {
        AgentCommand { program: program.into(), args: Vec::new(), env: Vec::new() }
    }

    /// A command line split as a shell would (quotes and backslashes, no
    /// expansion): `"npx pi-acp"`, `"/opt/node '/opt/my agent/index.js'"`.
    pub fn parse(line: &str) -> Result<Self, Error> {
        let words = shell_words::split(line).map_err(|_| Error::BadOption {
            rule: "an agent command line has balanced quotes",
            value: line.to_owned(),
        })?;
        let mut words = words.into_iter();
        let Some(program) = words.next() else {
            return Err(Error::BadOption {
                rule: "an agent command line names a program",
                value: line.to_owned(),
            });
        };
        Ok(AgentCommand {
            program: program.into(),
            args: words.map(OsString::from).collect(),
            env: Vec::new(),
        })
    }

    /// Adds an argument.
    pub fn arg(mut self, arg: impl Into<OsString>) -> Self {
        self.args.push(arg.into());
        self
    }

    /// Sets a variable in the agent's environment.
    pub fn env(mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    /// The program.
    pub fn program(&self) -> &OsString {
        &self.program
    }

    pub(crate) fn command(&self, cwd: &Path) -> tokio::process::Command {
        let mut command = tokio::process::Command::new(&self.program);
        command.args(&self.args).current_dir(cwd);
        // What the phone's token opens stays out of the agent's reach.
        command.env_remove(durable_types::TOKEN_ENV).env_remove(durable_types::TOKEN_NEXT_ENV);
        for (k, v) in &self.env {
            command.env(k, v);
        }
        command
    }
}

/// The options of [`AcpConversations`](crate::AcpConversations); build with
/// [`AcpOptions::builder`].
#[derive(Debug, Clone)]
pub struct AcpOptions {
    pub(crate) command: AgentCommand,
    pub(crate) cwd: PathBuf,
    pub(crate) data_dir: PathBuf,
    pub(crate) max_agents: usize,
    pub(crate) idle_stop: Duration,
    pub(crate) init_timeout: Duration,
    pub(crate) partial_every: Duration,
    pub(crate) stop_grace: Duration,
    pub(crate) mode: crate::modes::ModeChoice,
}

/// Builds [`AcpOptions`].
#[derive(Debug, Clone)]
pub struct AcpOptionsBuilder(AcpOptions);

/// Agent processes alive at once, by default.
pub const DEFAULT_MAX_AGENTS: usize = 8;
/// How long an agent may sit idle before it is stopped, by default.
pub const DEFAULT_IDLE_STOP: Duration = Duration::from_secs(600);
/// How long an agent has to answer `initialize`, by default.
pub const DEFAULT_INIT_TIMEOUT: Duration = Duration::from_secs(30);

impl AcpOptions {
    /// The agents' working folder.
    pub fn cwd(&self) -> &Path {
        &self.cwd
    }

    /// This program's folder (its records are in `conversations/`).
    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// Options for agents started by `command` in the folder `cwd` (an
    /// absolute path: the sessions' working folder), with this program's
    /// records in `data_dir`.
    pub fn builder(
        command: AgentCommand,
        cwd: impl Into<PathBuf>,
        data_dir: impl Into<PathBuf>,
    ) -> AcpOptionsBuilder {
        AcpOptionsBuilder(AcpOptions {
            command,
            cwd: cwd.into(),
            data_dir: data_dir.into(),
            max_agents: DEFAULT_MAX_AGENTS,
            idle_stop: DEFAULT_IDLE_STOP,
            init_timeout: DEFAULT_INIT_TIMEOUT,
            partial_every: Duration::from_millis(250),
            stop_grace: Duration::from_secs(10),
            mode: crate::modes::ModeChoice::default(),
        })
    }
}

impl AcpOptionsBuilder {
    /// Agent processes alive at once (default [`DEFAULT_MAX_AGENTS`]);
    /// starting one more stops the one idle longest.
    pub fn max_agents(mut self, n: usize) -> Self {
        self.0.max_agents = n;
        self
    }

    /// An agent idle this long is stopped (default [`DEFAULT_IDLE_STOP`]);
    /// its pane keeps its items and the next send starts it again.
    pub fn idle_stop(mut self, after: Duration) -> Self {
        self.0.idle_stop = after;
        self
    }

    /// How long an agent has to answer `initialize` (default
    /// [`DEFAULT_INIT_TIMEOUT`]).
    pub fn init_timeout(mut self, timeout: Duration) -> Self {
        self.0.init_timeout = timeout;
        self
    }

    /// How often a growing reply is written as `partial` at most (default
    /// 250 ms, the contract's pace). A turn's first partial items wait
    /// this long from its start too: a reply that ends sooner is written
    /// once, whole.
    pub fn partial_every(mut self, every: Duration) -> Self {
        self.0.partial_every = every;
        self
    }

    /// How long a stopped turn waits for the agent to end it after
    /// `session/cancel` before the agent is ended (default 10 s).
    pub fn stop_grace(mut self, grace: Duration) -> Self {
        self.0.stop_grace = grace;
        self
    }

    /// The session mode every session runs in (an id the agent offers in
    /// its `modes`, e.g. `default`, `acceptEdits`, `auto`): the user's
    /// choice. Without it, a session the agent starts in a mode that never
    /// asks is switched to one that asks (the crate docs, "Cards by
    /// default"). A mode the agent does not offer fails the session's start
    /// with an error naming the modes it offers.
    pub fn mode(mut self, mode: impl Into<String>) -> Self {
        self.0.mode = crate::modes::ModeChoice::Chosen(mode.into());
        self
    }

    /// The options, checked.
    pub fn build(self) -> Result<AcpOptions, Error> {
        let o = self.0;
        if !o.cwd.is_absolute() {
            return Err(Error::BadOption {
                rule: "the agent's working folder is an absolute path (ACP requires it)",
                value: o.cwd.display().to_string(),
            });
        }
        if o.max_agents == 0 {
            return Err(Error::BadOption { rule: "max_agents is at least 1", value: "0".into() });
        }
        if o.init_timeout.is_zero() {
            return Err(Error::BadOption { rule: "init_timeout is more than zero", value: "0s".into() });
        }
        if matches!(&o.mode, crate::modes::ModeChoice::Chosen(m) if m.trim().is_empty()) {
            return Err(Error::BadOption { rule: "a session mode is named", value: String::new() });
        }
        if o.idle_stop.is_zero() {
            return Err(Error::BadOption { rule: "idle_stop is more than zero", value: "0s".into() });
        }
        Ok(o)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_line_is_split_like_a_shell_and_bad_options_are_named() {
        let c = AgentCommand::parse("node '/opt/my agent/index.js' --flag").unwrap();
        assert_eq!(c.program(), "node");
        assert_eq!(c.args, ["/opt/my agent/index.js", "--flag"]);
        assert!(matches!(AgentCommand::parse("node 'open"), Err(Error::BadOption { .. })));
        assert!(matches!(AgentCommand::parse("  "), Err(Error::BadOption { .. })));
        let secret = AgentCommand::new("a").env("ANTHROPIC_API_KEY", "sk-secret");
        assert!(!format!("{secret:?}").contains("sk-secret"));
        let relative = AcpOptions::builder(AgentCommand::new("a"), "rel", "/tmp/d").build();
        assert!(relative.unwrap_err().to_string().contains("absolute"));
        let zero = AcpOptions::builder(AgentCommand::new("a"), "/tmp", "/tmp/d").max_agents(0).build();
        assert!(zero.unwrap_err().to_string().contains("max_agents"));
    }
}
