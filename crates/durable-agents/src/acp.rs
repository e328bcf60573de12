//! `durable-agent acp`: any ACP agent on the phone. Each ACP session is a
//! pane, a permission request is a card, the agent's sessions are the
//! history (`durable_sdk::acp` does the mapping; its docs have the table).
//!
//! The layout: workspace `acp`, tab `chats`; a pane per conversation, its id
//! the ACP `sessionId` (or, for a session id that breaks the ID rule,
//! `acp-` and the first 40 hex digits of its SHA-256). A first start shows
//! no pane: the starter `new-conversation` starts an agent, makes a session
//! (`session/new`) and sends its text as the first prompt.
//!
//! `--data` (default `~/.local/state/durable-acp`, made 0700) holds
//! `receipts.sqlite3` (receipts, the cards open at a stop, and each
//! conversation's items as the pane showed them) and
//! `conversations/<pane id>.json` (each conversation's title, session and
//! whether it is closed): a restart on the same folder opens the
//! conversations not closed again, and the agent loads its session at the
//! next send.
//!
//! It prints `listening <address>` once it serves, and stops on SIGINT or
//! SIGTERM (each agent's input is closed; it is killed after 2 s).

use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use durable_sdk::acp::{AcpConversations, AcpOptions, AgentCommand, NEW_CONVERSATION};
use durable_sdk::stores::SqliteReceiptStore;
use durable_sdk::transport::socket_path_for;
use durable_sdk::{Cap, Caps, CoreOptions, Transport, create_core};

use crate::process;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// `durable-agent acp`'s command line.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  durable-agent acp -- npx @agentclientprotocol/claude-agent-acp
  durable-agent acp --cwd ~/src/app -- codex-acp
  durable-agent acp -- gemini --acp
  durable-agent acp --listen 0.0.0.0:8443 --self-signed -- pi-acp   (token in COLLIE_TOKEN)

It prints `listening <address>` once it serves; give that address to Collie
(or to `durable phone`). SIGINT or SIGTERM stops it: the turns running get a
grace, then each agent is stopped.")]
pub(crate) struct Args {
    /// The agent's command line as one string, split as a shell would
    /// (quotes, no expansion); or give it after `--`.
    #[arg(long, value_name = "CMD", conflicts_with = "command")]
    agent: Option<String>,
    /// The agent's command and its arguments, after `--`. It runs with this
    /// program's environment minus COLLIE_TOKEN and COLLIE_TOKEN_NEXT; one
    /// agent process runs per live conversation.
    #[arg(last = true, value_name = "AGENT COMMAND", required_unless_present = "agent")]
    command: Vec<OsString>,
    /// The sessions' working folder (default: the current folder).
    #[arg(long, value_name = "DIR")]
    cwd: Option<PathBuf>,
    /// The session mode to run in (one the agent offers, e.g. `default`,
    /// `acceptEdits`, `auto`). Without it, a session the agent would start
    /// in a mode that never asks (Claude Code's `auto`, `full-access`,
    /// `yolo`) is switched to one that asks: cards by default.
    #[arg(long, value_name = "MODE")]
    mode: Option<String>,
    /// This program's folder: receipts, open cards and each conversation's
    /// items (default: ~/.local/state/durable-acp; made private, 0700).
    #[arg(long, value_name = "DIR")]
    data: Option<PathBuf>,
    /// Agent processes alive at once; one more stops the one idle longest.
    #[arg(long, value_name = "N", default_value_t = 8)]
    max_agents: usize,
    /// An agent idle this long is stopped (its pane keeps its items).
    #[arg(long, value_name = "SECS", default_value_t = 600)]
    idle_stop_secs: u64,
    /// How long an agent has to answer `initialize`; then it is killed and
    /// the pane says why.
    #[arg(long, value_name = "SECS", default_value_t = 30)]
    init_timeout_secs: u64,
    /// The private Unix socket to serve on (default: the user's runtime
    /// folder, durable-acp/app.sock).
    #[arg(long, value_name = "PATH", conflicts_with = "listen")]
    socket: Option<PathBuf>,
    /// Serve HTTPS on HOST:PORT instead of the socket, the token from
    /// COLLIE_TOKEN (allow-always options are not offered over HTTPS).
    #[arg(long, value_name = "ADDR", requires = "self_signed")]
    listen: Option<String>,
    /// With --listen: a self-signed certificate, its fingerprint printed on
    /// standard error for Collie to pin.
    #[arg(long, requires = "listen")]
    self_signed: bool,
}

impl Args {
    /// The agent's command, from `--agent` or after `--`.
    fn agent(&self) -> Result<AgentCommand, BoxError> {
        if let Some(line) = &self.agent {
            return Ok(AgentCommand::parse(line)?);
        }
        let Some((program, args)) = self.command.split_first() else {
            return Err(
                "say which agent to run: durable-agent acp -- <agent command> (or --agent \"CMD\")".into()
            );
        };
        Ok(args.iter().fold(AgentCommand::new(program), |command, arg| command.arg(arg)))
    }
}

pub(crate) fn main(args: Args) -> ExitCode {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build();
    match runtime.map_err(BoxError::from).and_then(|rt| rt.block_on(run(args))) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("durable-agent: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> Result<(), BoxError> {
    process::report_file_size_limit()?;
    let command = args.agent()?;
    let data = match args.data {
        Some(d) => d,
        None => std::env::var_os("HOME")
            .map(PathBuf::from)
            .ok_or("HOME is not set: give --data")?
            .join(".local/state/durable-acp"),
    };
    // What the phone sent and the agent answered is the user's alone.
    process::private_folder(&data)?;
    let cwd = match args.cwd {
        Some(dir) => std::path::absolute(dir)?,
        None => std::env::current_dir()?,
    };
    let mut options = AcpOptions::builder(command, cwd, &data)
        .max_agents(args.max_agents)
        .idle_stop(Duration::from_secs(args.idle_stop_secs))
        .init_timeout(Duration::from_secs(args.init_timeout_secs));
    if let Some(mode) = args.mode {
        options = options.mode(mode);
    }
    let options = options.build()?;
    let receipts = SqliteReceiptStore::open(data.join("receipts.sqlite3"))?;
    // ACP has no steer. Served over HTTPS, allow-always is off: an agent's
    // allow_always options are not offered there.
    let core =
        CoreOptions::builder().host_name("acp").receipts(receipts).caps(Caps::all().without(Cap::Steer));
    let collie = create_core(core)?;
    let transport = match args.listen {
        Some(addr) => Transport::https(addr).self_signed(),
        None => Transport::socket_at(args.socket.unwrap_or_else(|| socket_path_for("durable-acp"))),
    };
    collie.serve(transport).await?;
    let tab = collie.workspace("acp", "ACP")?.tab("chats", "Conversations")?;
    let acp = AcpConversations::new(tab, options)?;
    // The conversations not closed come back as panes, from their records.
    acp.restore()?;
    collie.starter(NEW_CONVERSATION, "New conversation")?;
    // The cards open when we last stopped: their agent processes are gone.
    // Each of their conversations loads its session now; a card the agent
    // asks for again comes back by its id, the others are closed
    // ("Stopped before an answer").
    acp.take_up_kept_asks(collie.kept_asks().await?);
    collie.history(acp.history());
    collie.set_hooks(acp.hooks());
    collie.ready();
    {
        let mut out = std::io::stdout().lock();
        writeln!(out, "listening {}", collie.address())?;
        out.flush()?;
    }
    process::shutdown_signal().await?;
    // The turns running get the grace to end, with their agents still
    // there; then each agent is stopped.
    collie.close().await;
    acp.shutdown().await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        acp: Args,
    }

    fn parse(args: &[&str]) -> Result<Args, String> {
        Cli::try_parse_from(std::iter::once("acp").chain(args.iter().copied()))
            .map(|c| c.acp)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn the_agent_comes_after_double_dash_or_as_one_string() {
        let a = parse(&["--cwd", "/src", "--", "npx", "pi-acp", "--verbose"]).unwrap();
        assert_eq!(a.command, ["npx", "pi-acp", "--verbose"]);
        let command = a.agent().unwrap();
        assert_eq!(command.program(), "npx");
        let a = parse(&["--agent", "node '/opt/my agent/index.js'"]).unwrap();
        assert_eq!(a.agent().unwrap().program(), "node");
        assert!(parse(&["--agent", "x", "--", "y"]).is_err(), "one way to say the agent");
        let none = parse(&["--cwd", "/src"]).unwrap_err();
        assert!(none.contains("AGENT COMMAND"), "{none}");
    }

    #[test]
    fn https_needs_its_certificate_and_excludes_the_socket() {
        assert!(parse(&["--listen", "127.0.0.1:0", "--", "a"]).is_err());
        assert!(parse(&["--self-signed", "--", "a"]).is_err());
        assert!(parse(&["--listen", "127.0.0.1:0", "--self-signed", "--socket", "/s", "--", "a"]).is_err());
        let a = parse(&["--listen", "127.0.0.1:0", "--self-signed", "--", "a"]).unwrap();
        assert!(a.self_signed && a.listen.is_some());
        let d = parse(&["--", "a"]).unwrap();
        assert_eq!((d.max_agents, d.idle_stop_secs, d.init_timeout_secs), (8, 600, 30));
    }

    /// The user service unit this package ships runs a command line this
    /// program takes.
    #[test]
    fn the_shipped_service_unit_runs_a_command_this_program_takes() {
        let unit = include_str!("../systemd/durable-agent.service");
        let exec =
            unit.lines().find_map(|l| l.strip_prefix("ExecStart=")).expect("the unit has an ExecStart line");
        let words: Vec<String> = exec.split_whitespace().map(|w| w.replace("%h", "/home/u")).collect();
        assert!(words[0].ends_with("/durable-agent") && words[1] == "acp", "{exec}");
        let words: Vec<&str> = words[2..].iter().map(String::as_str).collect();
        let args = parse(&words).unwrap_or_else(|e| panic!("{exec}: {e}"));
        assert_eq!(args.agent().unwrap().program(), "npx", "{exec}");
        assert!(unit.contains("[Install]") && unit.contains("WantedBy=default.target"));
    }
}
