//! A Pi agent on the phone: each Pi conversation is a pane, a risky tool
//! call (`bash`, `write`, `edit`) is an approval card, and Pi's sessions
//! folder is the history.
//!
//! ```text
//! cargo run --example pi -- [--pi "<command that starts Pi>"] [--sessions DIR]
//!     [--gate TOOLS] [--data DIR] [--open N] [--socket PATH | --listen ADDR --self-signed] [--no-pi]
//! ```
//!
//! - `--pi`: Pi's command line (default `pi`); durable-pi adds `--mode rpc`,
//!   the session flags and its gate extension. One Pi runs per open
//!   conversation, from its first send.
//! - `--sessions`: Pi's sessions folder (default `sessions` in the data
//!   folder). The sessions active last are panes (`--open N`, default 20),
//!   except those closed from the phone; the others are closed rows in the
//!   history, which the phone reopens as panes (`POST /v1/reopen` with the
//!   row's id). The starter `new-conversation` opens a new one. A start
//!   reads only the files that can hold those N (by their modification
//!   times: Pi appends to a session's file as it goes), then lists the rest
//!   for the history on a thread of its own.
//! - `--gate TOOLS`: the tools whose calls wait for a card, comma-separated
//!   (default `bash,write,edit`; `*` for every tool, `none` for none).
//! - `--no-pi`: start no Pi; the sessions are read-only panes that follow
//!   their files, and the history.
//! - `--data`: the agent's folder (default `~/.local/state/durable-pi`):
//!   receipts and open cards, the list of closed conversations, and the
//!   sessions folder's index (`sessions-index.json`: the history's listing
//!   reads only the session files that changed since, so after the first
//!   start it costs a listing of the folder at any number of sessions).
//! - `--raise-delay-ms N`: raise the cards kept from the last run N ms
//!   after serving instead of at once (to see an answer sent meanwhile held,
//!   then land).
//! - `--listen ADDR --self-signed`: HTTPS with the token in `COLLIE_TOKEN`,
//!   instead of the private socket (`--socket` names its path).
//!
//! It prints `listening <address>` once it serves.

use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use durable_sdk::asks::KeptAsk;
use durable_sdk::handlers::{
    CloseRequest, Hooks, RenameRequest, Reopen, ReopenRequest, Started, StarterRequest,
};
use durable_sdk::pi::{
    Follower, GateOptions, PiCommand, PiConversation, PiHistory, PiOptions, SessionFolder, close_kept_card,
    items_since,
};
use durable_sdk::stores::SqliteReceiptStore;
use durable_sdk::transport::socket_path_for;
use durable_sdk::types::Target;
use durable_sdk::{
    Collie, CoreOptions, HandlerResult, Pane, PaneOptions, Refusal, Tab, Transport, create_core,
};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

const USAGE: &str = "usage: pi [--pi CMD] [--sessions DIR] [--gate TOOLS] [--data DIR] [--open N] [--raise-delay-ms N] [--socket PATH | --listen ADDR --self-signed] [--no-pi]\n";

/// Conversations opened as panes at start, by default: the ones active last.
const OPEN_DEFAULT: usize = 20;

#[derive(Default)]
struct Args {
    pi: Option<String>,
    sessions: Option<PathBuf>,
    gate: Option<String>,
    data: Option<PathBuf>,
    socket: Option<PathBuf>,
    listen: Option<String>,
    self_signed: bool,
    no_pi: bool,
    open: Option<usize>,
    raise_delay_ms: u64,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args::default();
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--pi" => args.pi = Some(value()?),
            "--sessions" => args.sessions = Some(value()?.into()),
            "--gate" => args.gate = Some(value()?),
            "--data" => args.data = Some(value()?.into()),
            "--socket" => args.socket = Some(value()?.into()),
            "--listen" => args.listen = Some(value()?),
            "--self-signed" => args.self_signed = true,
            "--no-pi" => args.no_pi = true,
            "--open" => args.open = Some(value()?.parse().map_err(|_| "--open needs a number".to_owned())?),
            "--raise-delay-ms" => {
                args.raise_delay_ms =
                    value()?.parse().map_err(|_| "--raise-delay-ms needs a number".to_owned())?
            }
            "--help" | "-h" => return Err(String::new()),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    if args.listen.is_some() != args.self_signed {
        return Err("--listen and --self-signed go together".into());
    }
    Ok(args)
}

/// The agent: a pane per conversation, Pi behind each (unless `--no-pi`).
struct Agent {
    tab: Tab,
    folder: Arc<SessionFolder>,
    history: Arc<PiHistory<Arc<SessionFolder>>>,
    pi: Option<PiOptions>,
    closed_file: PathBuf,
    conversations: Mutex<HashMap<String, PiConversation>>,
    /// Closed by the phone in this process: the SDK restores them itself.
    closed_here: Mutex<HashSet<String>>,
}

impl Agent {
    /// Opens the conversation `id` as a pane.
    fn open(&self, id: &str, title: &str) -> Result<Pane, BoxError> {
        let pane = self.tab.pane(id, PaneOptions::new(title).harness("pi").session_id(id))?;
        match &self.pi {
            Some(options) => {
                let conversation = PiConversation::attach(&pane, id, options.clone())?;
                self.conversations.lock().unwrap().insert(id.to_owned(), conversation);
            }
            None => follow(pane.clone(), self.folder.clone(), id.to_owned()),
        }
        self.history.set_open(id, true);
        self.set_closed(id, false)?;
        Ok(pane)
    }

    fn closed(&self) -> HashSet<String> {
        let text = std::fs::read_to_string(&self.closed_file).unwrap_or_default();
        text.lines().map(str::to_owned).filter(|l| !l.is_empty()).collect()
    }

    fn set_closed(&self, id: &str, closed: bool) -> Result<(), BoxError> {
        let mut ids = self.closed();
        let changed = if closed { ids.insert(id.to_owned()) } else { ids.remove(id) };
        if changed {
            let text: String = ids.iter().map(|i| format!("{i}\n")).collect();
            let tmp = self.closed_file.with_extension("tmp");
            std::fs::write(&tmp, text)?;
            std::fs::rename(&tmp, &self.closed_file)?;
        }
        Ok(())
    }

    fn conversation(&self, id: &str) -> Option<PiConversation> {
        self.conversations.lock().unwrap().get(id).cloned()
    }
}

/// A read-only pane that follows the session's file as Pi (run elsewhere) writes it.
fn follow(pane: Pane, folder: Arc<SessionFolder>, id: String) {
    tokio::spawn(async move {
        let Ok(Some(summary)) = folder.find(&id) else { return };
        let mut follower = Follower::new(summary.path);
        while pane.is_open() {
            if let Ok(progress) = follower.poll() {
                let first =
                    if progress.reset || progress.branch_moved { 0 } else { progress.new_entries.start };
                for item in items_since(follower.session(), first) {
                    let _ = pane.write(item);
                }
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    });
}

struct AgentHooks(Arc<Agent>);

impl Hooks for AgentHooks {
    async fn on_rename(&self, req: RenameRequest) -> HandlerResult {
        if req.target != Target::Pane {
            return Ok(());
        }
        match self.0.conversation(&req.id) {
            Some(c) => Ok(c.rename(&req.title).await?),
            None => Err(Refusal::new("this conversation is read-only")),
        }
    }

    async fn on_close(&self, req: CloseRequest) -> HandlerResult {
        if req.target == Target::Pane {
            if let Some(c) = self.0.conversation(&req.id) {
                c.shutdown().await;
            }
            self.0.set_closed(&req.id, true).map_err(|e| Refusal::new(e.to_string()))?;
            self.0.history.set_open(&req.id, false);
            self.0.closed_here.lock().unwrap().insert(req.id.clone());
        }
        Ok(())
    }

    async fn on_reopen(&self, req: ReopenRequest) -> HandlerResult<Reopen> {
        let id = req.id.as_str();
        if self.0.closed_here.lock().unwrap().remove(id) {
            self.0.set_closed(id, false).map_err(|e| Refusal::new(e.to_string()))?;
            self.0.history.set_open(id, true);
            return Ok(Reopen::Restore);
        }
        let summary = self.0.folder.find(id).map_err(|e| Refusal::new(e.public_message()))?;
        // Unknown here: `Restore` has the SDK answer `404 not-found` (§8), as
        // for any id it does not know.
        let Some(summary) = summary else { return Ok(Reopen::Restore) };
        self.0.open(id, &summary.info().title()).map_err(|e| Refusal::new(e.to_string()))?;
        Ok(Reopen::Reopened)
    }

    async fn on_starter(&self, req: StarterRequest) -> HandlerResult<Started> {
        if req.starter.as_str() != "new-conversation" || self.0.pi.is_none() {
            return Err(Refusal::not_supported());
        }
        let id = PiConversation::new_session_id();
        let pane = self.0.open(&id, "New conversation").map_err(|e| Refusal::new(e.to_string()))?;
        if let (Some(text), Some(c)) = (req.text, self.0.conversation(&id)) {
            tokio::spawn(async move { c.prompt(&text).await });
        }
        Ok(Started::pane(&pane))
    }
}

async fn run(args: Args) -> Result<(), BoxError> {
    durable_examples::report_file_size_limit()?; // a write past `ulimit -f` is an error, not a silent death (lib.rs)
    let data = match args.data {
        Some(d) => d,
        None => std::env::var_os("HOME")
            .map(PathBuf::from)
            .ok_or("HOME is not set: give --data")?
            .join(".local/state/durable-pi"),
    };
    // What the phone sent and Pi answered is the user's alone.
    durable_examples::private_folder(&data)?;
    let sessions = args.sessions.unwrap_or_else(|| data.join("sessions"));
    durable_examples::private_folder(&sessions)?;
    let receipts = SqliteReceiptStore::open(data.join("receipts.sqlite3"))?;
    // Served over HTTPS, allow-always is off: Allow and Deny only.
    let collie = create_core(CoreOptions::builder().host_name("pi").receipts(receipts))?;
    let transport = match args.listen {
        Some(addr) => Transport::https(addr).self_signed(),
        None => Transport::socket_at(args.socket.unwrap_or_else(|| socket_path_for("durable-pi"))),
    };
    collie.serve(transport).await?;
    let pi = match (args.no_pi, &args.pi) {
        (true, _) => None,
        (false, command) => {
            let gate = match args.gate.as_deref() {
                None => GateOptions::default(),
                Some("none") => GateOptions::none(),
                Some(list) => GateOptions::default().tools(list.split(',').map(str::trim)),
            };
            let command = PiCommand::parse(command.as_deref().unwrap_or("pi"))?;
            Some(PiOptions::builder(command, &sessions).gate(gate).build()?)
        }
    };
    // One folder for the panes and the history, its summaries kept in the
    // data folder: a start reads only what changed.
    let folder = Arc::new(SessionFolder::with_index(&sessions, data.join("sessions-index.json")));
    let history = Arc::new(PiHistory::new(folder.clone()));
    let agent = Arc::new(Agent {
        tab: collie.workspace("pi", "Pi")?.tab("chats", "Conversations")?,
        folder,
        history: history.clone(),
        pi,
        closed_file: data.join("closed"),
        conversations: Mutex::default(),
        closed_here: Mutex::default(),
    });
    let closed = agent.closed();
    // The conversations active last are panes; the others are closed rows
    // in history, which the phone reopens (`on_reopen`). Only the files that
    // can be among them are read (by their modification times), even on a
    // first start without an index.
    let recent = agent.folder.newest(args.open.unwrap_or(OPEN_DEFAULT), |s| !closed.contains(&s.id))?;
    let mut opened = 0;
    // Oldest first, so the newest conversation ends up last in the tab.
    for summary in recent.into_iter().rev() {
        agent.open(&summary.id, &summary.info().title())?;
        opened += 1;
    }
    if opened == 0 && agent.pi.is_some() {
        agent.open(&PiConversation::new_session_id(), "New conversation")?;
    }
    if agent.pi.is_some() {
        collie.starter("new-conversation", "New conversation")?;
    }
    // The cards open when the agent last stopped: each gated call's card
    // comes back by its id, and its answer reaches Pi; one whose
    // conversation is not open here is closed, saying the call did not run.
    // With --raise-delay-ms they come back that long after `ready()`
    // (an answer sent meanwhile is held, then lands).
    let mut kept = collie.kept_asks().await?;
    if args.raise_delay_ms == 0 {
        take_up(&agent, &collie, std::mem::take(&mut kept));
    }
    collie.history(history);
    collie.set_hooks(AgentHooks(agent.clone()));
    collie.ready();
    if !kept.is_empty() {
        let (agent, collie) = (agent.clone(), collie.clone());
        let delay = Duration::from_millis(args.raise_delay_ms);
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            take_up(&agent, &collie, kept);
        });
    }
    {
        let mut out = std::io::stdout().lock();
        writeln!(out, "listening {}", collie.address())?;
        out.flush()?;
    }
    // The history's listing (on a first start, every session file read once
    // for the index) is made now, on a thread of its own: the first page
    // finds it, or waits for it.
    agent.history.warm();
    durable_examples::shutdown_signal().await?; // SIGINT or SIGTERM (lib.rs)
    // The turns running get the grace to end, with their Pi still there;
    // then each Pi is stopped.
    collie.close().await;
    let running: Vec<PiConversation> = agent.conversations.lock().unwrap().drain().map(|(_, c)| c).collect();
    for conversation in running {
        conversation.shutdown().await;
    }
    Ok(())
}

/// Raises the kept cards again through their conversations; one whose
/// conversation is not open here is closed, saying its call did not run.
fn take_up(agent: &Agent, collie: &Collie, kept: Vec<KeptAsk>) {
    for kept in kept {
        match agent.conversation(kept.pane()) {
            // Not a card of Pi's gate: dropped, and closed ("Stopped before an answer").
            Some(conversation) => drop(conversation.take_up(kept)),
            None => {
                let pane = collie.pane(kept.pane());
                close_kept_card(kept, pane.as_ref());
            }
        }
    }
}

fn main() -> std::process::ExitCode {
    durable_examples::logs(); // on standard error, filtered by RUST_LOG (lib.rs)
    let args = match parse_args() {
        Ok(args) => args,
        Err(why) => {
            if !why.is_empty() {
                eprintln!("pi: {why}");
            }
            eprint!("{USAGE}");
            return std::process::ExitCode::from(2);
        }
    };
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build();
    match runtime.map_err(BoxError::from).and_then(|rt| rt.block_on(run(args))) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("pi: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
