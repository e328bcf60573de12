//! Any ACP agent on the phone: each ACP session is a pane, a permission
//! request is a card, the agent's sessions are the history.
//!
//! ```text
//! cargo run --example acp -- --agent "<command that starts an ACP agent>"
//!     [--cwd DIR] [--data DIR] [--max-agents N] [--idle-stop-secs N] [--init-timeout-secs N]
//!     [--socket PATH | --listen ADDR --self-signed]
//! ```
//! (It needs Rust 1.88, as durable-acp does: the `acp` feature of
//! `durable-examples`, on by default.)
//!
//! - `--agent`: the agent's command line, split like a shell would (quotes,
//!   no expansion), e.g. `--agent "npx pi-acp"` or `--agent "/opt/node
//!   /opt/pi-acp/dist/index.js"`. The agent runs in `--cwd` with this
//!   program's environment minus `COLLIE_TOKEN` and `COLLIE_TOKEN_NEXT`
//!   (for pi-acp, set `HOME`, `PI_CODING_AGENT_DIR`, `PI_ACP_PI_COMMAND`
//!   on this program). One agent process runs per live conversation.
//! - `--cwd`: the sessions' working folder, made absolute (default: the
//!   current folder). `session/new`, `session/load` and `session/list` use it.
//! - `--data`: this program's folder (default `~/.local/state/durable-acp`),
//!   made 0700, holding:
//!   - `receipts.sqlite3`: receipts and the cards open at a stop;
//!   - `conversations/<pane id>.json`: one per conversation, written at
//!     each turn's end, close and stop: `{"sessionId", "paneId", "title",
//!     "renamed", "startedAt", "updatedAt", "closed", "items": [...]}`
//!     (its items as the pane showed them). A restart on the same `--data`
//!     opens the conversations not closed as panes again with these items;
//!     the agent is started on one (`session/load`) at its first send.
//! - `--max-agents N`: agent processes alive at once (default 8); starting
//!   one more stops the one idle longest (its pane keeps its items).
//! - `--idle-stop-secs N`: an agent idle that long is stopped (default 600).
//! - `--init-timeout-secs N`: how long an agent has to answer `initialize`
//!   (default 30); then it is killed, and the pane of the send gets an
//!   error notice and goes idle (a starter is refused with that error).
//! - `--listen ADDR --self-signed`: HTTPS with the token in `COLLIE_TOKEN`,
//!   instead of the private socket (`--socket` names its path).
//!
//! The layout: workspace `acp`, tab `chats`; a pane per conversation, its id
//! the ACP `sessionId` (and the pane's `sessionId` the same), or, for a
//! session id that breaks the ID rule (a `/`, over 128 bytes, …),
//! `acp-` and the first 40 hex digits of its SHA-256. A first start shows no
//! pane: the starter `new-conversation` (`POST /v1/starters/new-conversation`
//! with `text`) starts an agent, makes a session (`session/new`) and sends
//! the text as the first prompt; its answer names the new pane.
//!
//! A permission request is a `choice` card with id
//! `ask_id_for(<pane id>, <toolCall.toolCallId>)` (a tool call id that
//! breaks the ID rule is mapped like a session id, with `call-`): its
//! options are the request's, each with the request's `optionId` as its id
//! (`option-<n>` when that breaks the ID rule) and its `name` as label;
//! `allow_always` options only where allow-always is on (never over HTTPS).
//! The answer goes back as the chosen `optionId`. A stop, a close, or the
//! agent's exit closes the card and answers the agent `cancelled`.
//!
//! It prints `listening <address>` once it serves, and stops on SIGINT or
//! SIGTERM (each agent's input is closed; it is killed after 2 s).

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use durable_sdk::acp::{AcpConversations, AcpOptions, AgentCommand, NEW_CONVERSATION};
use durable_sdk::stores::SqliteReceiptStore;
use durable_sdk::transport::socket_path_for;
use durable_sdk::{Cap, Caps, CoreOptions, Transport, create_core};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

const USAGE: &str = "usage: acp --agent CMD [--cwd DIR] [--data DIR] [--max-agents N] [--idle-stop-secs N] [--init-timeout-secs N] [--socket PATH | --listen ADDR --self-signed]\n";

#[derive(Default)]
struct Args {
    agent: Option<String>,
    cwd: Option<PathBuf>,
    data: Option<PathBuf>,
    max_agents: Option<usize>,
    idle_stop_secs: Option<u64>,
    init_timeout_secs: Option<u64>,
    socket: Option<PathBuf>,
    listen: Option<String>,
    self_signed: bool,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args::default();
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        let number = |v: String, flag: &str| v.parse::<u64>().map_err(|_| format!("{flag} needs a number"));
        match flag.as_str() {
            "--agent" => args.agent = Some(value()?),
            "--cwd" => args.cwd = Some(value()?.into()),
            "--data" => args.data = Some(value()?.into()),
            "--max-agents" => args.max_agents = Some(number(value()?, "--max-agents")? as usize),
            "--idle-stop-secs" => args.idle_stop_secs = Some(number(value()?, "--idle-stop-secs")?),
            "--init-timeout-secs" => args.init_timeout_secs = Some(number(value()?, "--init-timeout-secs")?),
            "--socket" => args.socket = Some(value()?.into()),
            "--listen" => args.listen = Some(value()?),
            "--self-signed" => args.self_signed = true,
            "--help" | "-h" => return Err(String::new()),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    if args.agent.is_none() {
        return Err("--agent is required".into());
    }
    if args.listen.is_some() != args.self_signed {
        return Err("--listen and --self-signed go together".into());
    }
    if args.listen.is_some() && args.socket.is_some() {
        return Err("--socket or --listen, not both".into());
    }
    Ok(args)
}

async fn run(args: Args) -> Result<(), BoxError> {
    durable_examples::report_file_size_limit()?; // a write past `ulimit -f` is an error, not a silent death (lib.rs)
    let data = match args.data {
        Some(d) => d,
        None => std::env::var_os("HOME")
            .map(PathBuf::from)
            .ok_or("HOME is not set: give --data")?
            .join(".local/state/durable-acp"),
    };
    // What the phone sent and the agent answered is the user's alone.
    durable_examples::private_folder(&data)?;
    let cwd = match args.cwd {
        Some(dir) => std::path::absolute(dir)?,
        None => std::env::current_dir()?,
    };
    let command = AgentCommand::parse(args.agent.as_deref().unwrap_or_default())?;
    let mut options = AcpOptions::builder(command, cwd, &data);
    if let Some(n) = args.max_agents {
        options = options.max_agents(n);
    }
    if let Some(s) = args.idle_stop_secs {
        options = options.idle_stop(Duration::from_secs(s));
    }
    if let Some(s) = args.init_timeout_secs {
        options = options.init_timeout(Duration::from_secs(s));
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
    durable_examples::shutdown_signal().await?; // SIGINT or SIGTERM (lib.rs)
    // The turns running get the grace to end, with their agents still
    // there; then each agent is stopped.
    collie.close().await;
    acp.shutdown().await;
    Ok(())
}

fn main() -> std::process::ExitCode {
    durable_examples::logs(); // on standard error, filtered by RUST_LOG (lib.rs)
    let args = match parse_args() {
        Ok(args) => args,
        Err(why) => {
            if !why.is_empty() {
                eprintln!("acp: {why}");
            }
            eprint!("{USAGE}");
            return std::process::ExitCode::from(2);
        }
    };
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build();
    match runtime.map_err(BoxError::from).and_then(|rt| rt.block_on(run(args))) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("acp: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
