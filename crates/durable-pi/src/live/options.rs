//! How to run Pi: the command line, the sessions folder, the gate's policy.

use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use durable_runtime::approval_spec;
use durable_types::AskSpec;
use serde_json::Value;

use crate::Error;

/// The reason Pi is given when the person picks Deny (the model reads it).
pub const DEFAULT_DENIED_REASON: &str = "The person denied this tool call.";
/// The reason Pi is given when no one answered: the card timed out, or the
/// turn was stopped or the pane closed first.
pub const DEFAULT_UNANSWERED_REASON: &str = "No one approved this tool call.";

/// How to start Pi: the program and its arguments, as the user gives them.
/// durable-pi adds what RPC mode needs (`--mode rpc`, `--session-dir`, the
/// session — `--session <file>` once its file exists, else `--session-id` —
/// and `-e <gate>` when a tool is gated). Pi inherits the agent's
/// environment but for the tokens ([`TOKEN_ENV`](durable_types::TOKEN_ENV),
/// [`TOKEN_NEXT_ENV`](durable_types::TOKEN_NEXT_ENV)), which its tools must
/// not read.
///
/// `Debug` shows the environment's names and the arguments' flags only:
/// values may be API keys (`--api-key …`).
///
/// ```
/// use durable_sdk::pi::PiCommand;
/// let pi = PiCommand::parse("node '/opt/pi/cli.js' --provider faux").unwrap();
/// assert_eq!(pi.program(), "node");
/// assert_eq!(pi.arguments(), ["/opt/pi/cli.js", "--provider", "faux"]);
/// assert!(PiCommand::parse("  ").is_err());
/// ```
#[derive(Clone)]
pub struct PiCommand {
    program: OsString,
    args: Vec<OsString>,
    envs: Vec<(OsString, OsString)>,
    current_dir: Option<PathBuf>,
}

impl PiCommand {
    /// Runs `program` (e.g. `pi`, found on `PATH`).
    pub fn new(program: impl Into<OsString>) -> Self {
        PiCommand { program: program.into(), args: Vec::new(), envs: Vec::new(), current_dir: None }
    }

    /// A command line split as a POSIX shell splits words (quotes and
    /// backslashes; no variables, no globs). An empty line, or one with an
    /// unclosed quote, is an error.
    pub fn parse(command_line: &str) -> Result<Self, Error> {
        let words = shell_words::split(command_line).map_err(|e| Error::BadCommand { why: e.to_string() })?;
        let mut words = words.into_iter();
        let program =
            words.next().ok_or_else(|| Error::BadCommand { why: "it names no program".to_owned() })?;
        Ok(PiCommand { args: words.map(OsString::from).collect(), ..PiCommand::new(program) })
    }

    /// Adds an argument.
    pub fn arg(mut self, arg: impl Into<OsString>) -> Self {
        self.args.push(arg.into());
        self
    }

    /// Adds arguments.
    pub fn args<I: IntoIterator<Item = S>, S: Into<OsString>>(mut self, args: I) -> Self {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// Sets an environment variable for Pi (e.g. `PI_CODING_AGENT_DIR`).
    pub fn env(mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> Self {
        self.envs.push((key.into(), value.into()));
        self
    }

    /// The folder Pi runs in: its tools work there, and its sessions are
    /// that folder's. Default: the agent's own working folder.
    pub fn current_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.current_dir = Some(dir.into());
        self
    }

    /// The program.
    pub fn program(&self) -> &std::ffi::OsStr {
        &self.program
    }

    /// The arguments given (not those durable-pi adds).
    pub fn arguments(&self) -> &[OsString] {
        &self.args
    }

    pub(crate) fn command(&self) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::new(&self.program);
        cmd.args(&self.args);
        // Pi runs its model's tools: with the agent's token they could
        // answer their own approval cards over HTTPS (§1.2, the token is
        // the only barrier there). A variable the program names on this
        // command is its own choice.
        for name in [durable_types::TOKEN_ENV, durable_types::TOKEN_NEXT_ENV] {
            cmd.env_remove(name);
        }
        for (k, v) in &self.envs {
            cmd.env(k, v);
        }
        if let Some(dir) = &self.current_dir {
            cmd.current_dir(dir);
        }
        cmd
    }
}

/// An argument as `Debug` shows it: a flag's name, and no value (`--api-key
/// sk-…` shows as `--api-key`, `…`; `--api-key=sk-…` as `--api-key=…`).
fn shown_argument(arg: &OsString) -> String {
    let arg = arg.to_string_lossy();
    match arg.split_once('=') {
        Some((flag, _)) if flag.starts_with('-') => format!("{flag}=…"),
        None if arg.starts_with('-') => arg.into_owned(),
        _ => "…".to_owned(),
    }
}

impl fmt::Debug for PiCommand {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let env_names: Vec<_> = self.envs.iter().map(|(k, _)| k).collect();
        let args: Vec<_> = self.args.iter().map(shown_argument).collect();
        f.debug_struct("PiCommand")
            .field("program", &self.program)
            .field("args", &args)
            .field("env", &env_names)
            .field("current_dir", &self.current_dir)
            .finish()
    }
}

/// Builds the card of a gated call from the tool, its arguments and the
/// call id. The card must offer an option with id `allow`: picking it runs
/// the call; any other answer blocks it.
pub type CardFn = dyn Fn(&str, &Value, &str) -> AskSpec + Send + Sync;

/// Which tool calls wait for the person, and what the card and Pi are told.
///
/// By default `bash`, `write` and `edit` are gated, the card is
/// [`approval_spec`] (Allow / Deny), it never times out, and Pi hears
/// [`DEFAULT_DENIED_REASON`] or [`DEFAULT_UNANSWERED_REASON`].
#[derive(Clone)]
pub struct GateOptions {
    pub(crate) tools: Vec<String>,
    pub(crate) timeout_ms: Option<u64>,
    pub(crate) denied_reason: String,
    pub(crate) unanswered_reason: String,
    pub(crate) card: Arc<CardFn>,
}

impl Default for GateOptions {
    fn default() -> Self {
        GateOptions {
            tools: ["bash", "write", "edit"].map(str::to_owned).to_vec(),
            timeout_ms: None,
            denied_reason: DEFAULT_DENIED_REASON.to_owned(),
            unanswered_reason: DEFAULT_UNANSWERED_REASON.to_owned(),
            card: Arc::new(|tool, args, call| approval_spec(tool, args, call)),
        }
    }
}

impl GateOptions {
    /// No tool is gated (and the gate extension is not loaded).
    pub fn none() -> Self {
        GateOptions { tools: Vec::new(), ..GateOptions::default() }
    }

    /// Gates these tools (by Pi's tool name; `*` gates every tool).
    pub fn tools<I: IntoIterator<Item = S>, S: Into<String>>(mut self, tools: I) -> Self {
        self.tools = tools.into_iter().map(Into::into).collect();
        self
    }

    /// A card left unanswered this long closes (`timeout`) and blocks the call.
    pub fn timeout_ms(mut self, ms: u64) -> Self {
        self.timeout_ms = Some(ms);
        self
    }

    /// What Pi is told when the person denies a call.
    pub fn denied_reason(mut self, reason: impl Into<String>) -> Self {
        self.denied_reason = reason.into();
        self
    }

    /// What Pi is told when a card closed without an answer.
    pub fn unanswered_reason(mut self, reason: impl Into<String>) -> Self {
        self.unanswered_reason = reason.into();
        self
    }

    /// The card's words: a function of the tool, its arguments and the call
    /// id (see [`CardFn`]). The ask's id is always `ask_id_for(pane, call id)`.
    pub fn card(mut self, card: impl Fn(&str, &Value, &str) -> AskSpec + Send + Sync + 'static) -> Self {
        self.card = Arc::new(card);
        self
    }

    /// The tools gated.
    pub fn gated_tools(&self) -> &[String] {
        &self.tools
    }
}

impl fmt::Debug for GateOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GateOptions")
            .field("tools", &self.tools)
            .field("timeout_ms", &self.timeout_ms)
            .field("denied_reason", &self.denied_reason)
            .field("unanswered_reason", &self.unanswered_reason)
            .finish_non_exhaustive()
    }
}

/// Everything a live Pi conversation needs; built with [`PiOptions::builder`].
#[derive(Debug, Clone)]
pub struct PiOptions {
    pub(crate) command: PiCommand,
    pub(crate) session_dir: PathBuf,
    pub(crate) gate: GateOptions,
    pub(crate) extension_dir: PathBuf,
    pub(crate) partial_every: Duration,
    pub(crate) stop_grace: Duration,
}

impl PiOptions {
    /// Pi started by `command`, keeping its sessions in `session_dir`.
    pub fn builder(command: PiCommand, session_dir: impl Into<PathBuf>) -> PiOptionsBuilder {
        let session_dir = session_dir.into();
        PiOptionsBuilder {
            options: PiOptions {
                extension_dir: session_dir.join(".durable-pi"),
                command,
                session_dir,
                gate: GateOptions::default(),
                partial_every: Duration::from_millis(250),
                stop_grace: Duration::from_secs(5),
            },
        }
    }

    /// Pi's sessions folder.
    pub fn session_dir(&self) -> &Path {
        &self.session_dir
    }

    /// The gate's policy.
    pub fn gate(&self) -> &GateOptions {
        &self.gate
    }
}

/// Builds [`PiOptions`].
#[derive(Debug)]
pub struct PiOptionsBuilder {
    options: PiOptions,
}

impl PiOptionsBuilder {
    /// The gate's policy (default: [`GateOptions::default`]).
    pub fn gate(mut self, gate: GateOptions) -> Self {
        self.options.gate = gate;
        self
    }

    /// Where the gate extension's file is written for Pi to load (default:
    /// `.durable-pi` in the sessions folder; it is the agent's own folder,
    /// never a shared one, since Pi runs what it finds there).
    pub fn extension_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.options.extension_dir = dir.into();
        self
    }

    /// How long a stopped turn waits for Pi to settle before Pi is ended
    /// (default 5 s; `Duration::MAX` waits as long as Pi takes).
    pub fn stop_grace(mut self, grace: Duration) -> Self {
        self.options.stop_grace = grace;
        self
    }

    /// The options; an error when a gated tool's name is empty or has a
    /// comma (the extension reads the list comma-separated).
    pub fn build(self) -> Result<PiOptions, Error> {
        if let Some(bad) = self.options.gate.tools.iter().find(|t| t.contains(',') || t.trim().is_empty()) {
            return Err(Error::BadOption {
                rule: "gate tool names are non-empty and have no comma",
                value: bad.clone(),
            });
        }
        Ok(self.options)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pi takes its key on the command line (`--api-key`): neither `Debug`
    /// nor an error repeats a value of it.
    #[test]
    fn a_key_on_pi_s_command_line_stays_out_of_debug_and_errors() {
        let cmd = PiCommand::parse("pi --provider anthropic --api-key sk-SECRET-1 --token=SECRET-2 SECRET-3")
            .unwrap()
            .env("ANTHROPIC_API_KEY", "SECRET-4");
        let shown = format!("{cmd:?}");
        assert!(!shown.contains("SECRET"), "{shown}");
        assert!(shown.contains(r#"["--provider", "…", "--api-key", "…", "--token=…", "…"]"#), "{shown}");
        assert!(shown.contains("ANTHROPIC_API_KEY"), "the names stay: {shown}");
        let options = PiOptions::builder(cmd, "/tmp/sessions").build().unwrap();
        assert!(!format!("{options:?}").contains("SECRET"), "{options:?}");
        for line in ["pi --api-key SECRET-5 'unclosed", "  "] {
            let err = PiCommand::parse(line).unwrap_err();
            assert!(matches!(err, Error::BadCommand { .. }), "{err:?}");
            for text in [err.to_string(), err.public_message()] {
                assert!(!text.contains("SECRET") && text.contains("command line"), "{text}");
            }
            assert!(!format!("{err:?}").contains("SECRET"), "{err:?}");
        }
    }

    /// Pi never gets the agent's tokens from its environment.
    #[test]
    fn pi_s_command_removes_the_agent_s_tokens() {
        let cmd = PiCommand::new("pi").env("KEPT", "1").command();
        let envs: Vec<_> = cmd.as_std().get_envs().collect();
        for name in [durable_types::TOKEN_ENV, durable_types::TOKEN_NEXT_ENV] {
            assert!(envs.contains(&(std::ffi::OsStr::new(name), None)), "{name} is not removed: {envs:?}");
        }
        assert!(envs.contains(&(std::ffi::OsStr::new("KEPT"), Some(std::ffi::OsStr::new("1")))));
    }
}
