//! Every conversation of one agent command: panes in a tab, their
//! processes under the limit, the phone's layout actions, the records.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use durable_runtime::{CloseRequest, Hooks, RenameRequest, Reopen, ReopenRequest, Started, StarterRequest};
use durable_runtime::{Collie, HandlerResult, KeptAsk, Pane, PaneOptions, Refusal, Tab};
use durable_types::{Id, Item, Target};

use crate::conversation::{Conversation, Pool, Shared};
use crate::process::AgentProcess;
use crate::store::{Record, Store, private_folder};
use crate::{AcpHistory, AcpOptions, Error, pane_id_for};

/// The starter that makes a new conversation (`session/new`), its text
/// the first prompt.
pub const NEW_CONVERSATION: &str = "new-conversation";

/// The conversations of one ACP agent command, as panes of a tab: each
/// pane's sends go to its session through an agent process of its own
/// (see the [crate docs](crate)).
///
/// ```no_run
/// use durable_sdk::acp::{AcpConversations, AcpOptions, AgentCommand};
///
/// # async fn f(collie: durable_sdk::Collie) -> Result<(), Box<dyn std::error::Error>> {
/// let command = AgentCommand::parse("npx pi-acp")?;
/// let options = AcpOptions::builder(command, "/home/me/project", "/home/me/.local/state/my-agent").build()?;
/// let tab = collie.workspace("acp", "Agent")?.tab("chats", "Conversations")?;
/// let acp = AcpConversations::new(tab, options)?;
/// acp.restore()?;
/// collie.starter(durable_sdk::acp::NEW_CONVERSATION, "New conversation")?;
/// // Cards left open by a crash: back if the agent asks again, else closed.
/// acp.take_up_kept_asks(collie.kept_asks().await?);
/// collie.history(acp.history());
/// collie.set_hooks(acp.hooks());
/// collie.ready();
/// # Ok(()) }
/// ```
pub struct AcpConversations {
    shared: Arc<Shared>,
    tab: Tab,
    open: Mutex<HashMap<String, Arc<Conversation>>>,
    /// Closed by the phone in this process: the SDK can restore their panes.
    closed_here: Mutex<HashMap<String, Arc<Conversation>>>,
}

impl std::fmt::Debug for AcpConversations {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AcpConversations").field("tab", &self.tab.id()).finish_non_exhaustive()
    }
}

impl AcpConversations {
    /// Conversations in `tab`, run as `options` say. Makes the data folder
    /// (0700), stops what the agents of a program that died on this folder
    /// left running (Linux; a live program's are spared), and starts the
    /// task that stops idle agents (on the current tokio runtime).
    pub fn new(tab: Tab, options: AcpOptions) -> Result<Arc<AcpConversations>, Error> {
        private_folder(&options.data_dir)?;
        durable_process::stop_leftovers(&durable_process::folder_tag(&options.data_dir));
        let store = Store::open(&options.data_dir)?;
        let idle = options.idle_stop;
        let sdk_keeps_items = tab.collie().keeps_conversations_across_restarts();
        let shared = Arc::new(Shared { options, store, pool: Pool::new(), sdk_keeps_items });
        let me = Arc::new(AcpConversations {
            shared,
            tab,
            open: Mutex::new(HashMap::new()),
            closed_here: Mutex::new(HashMap::new()),
        });
        tokio::spawn(stop_idle(Arc::downgrade(&me), idle));
        Ok(me)
    }

    /// The options.
    pub fn options(&self) -> &AcpOptions {
        &self.shared.options
    }

    /// Opens a pane for each conversation of the records that is not
    /// closed, oldest first, showing its kept items (no agent starts: one
    /// does at the pane's next send, with `session/load`). Returns how many.
    ///
    /// When the SDK's receipt store keeps conversations across restarts
    /// (SQLite, PostgreSQL), it keeps the items and the records keep the
    /// rest; items a record still holds (written by an earlier version, or
    /// replayed from the agent for history) move onto the store here, and
    /// leave the record once the store is seen to have them.
    pub fn restore(&self) -> Result<usize, Error> {
        let all = self.shared.store.all();
        if self.shared.sdk_keeps_items {
            // Oldest first: past the store's bound of conversations, the one
            // written to least recently is forgotten, so the newest stay.
            let mut closed: Vec<&Record> = all.iter().filter(|r| r.closed && !r.items.is_empty()).collect();
            closed.sort_by_key(|r| r.updated_at);
            for record in closed {
                self.move_closed_items(record);
            }
        }
        let mut records: Vec<Record> = all.into_iter().filter(|r| !r.closed).collect();
        records.sort_by_key(|r| r.started_at);
        let n = records.len();
        for record in records {
            self.open_pane(record.session_id.clone(), Some(record))?;
        }
        Ok(n)
    }

    fn open_pane(&self, session_id: String, record: Option<Record>) -> Result<Arc<Conversation>, Error> {
        let pane_id = pane_id_for(&session_id);
        let title = record.as_ref().map_or_else(|| "New conversation".to_owned(), |r| r.title.clone());
        let cwd = self.shared.options.cwd.display().to_string();
        let options = PaneOptions::new(&title).harness("acp").session_id(&pane_id).cwd(cwd);
        let pane = self.tab.pane(&pane_id, options).map_err(|e| Error::Pane { why: e.to_string() })?;
        let conversation = Conversation::attach(self.shared.clone(), pane, session_id, record)?;
        conversation.save();
        if conversation.moves_items() {
            // The pane showed the record's items, and the SDK's store keeps
            // what a pane shows: the record lets them go once it has them.
            let ids = conversation.kept_item_ids();
            let core = self.tab.collie().clone();
            let c = conversation.clone();
            tokio::spawn(async move {
                if items_are_kept(&core, c.pane.id(), &ids).await {
                    c.items_moved();
                }
            });
        }
        self.open.lock().unwrap_or_else(|e| e.into_inner()).insert(pane_id, conversation.clone());
        Ok(conversation)
    }

    /// Moves the items of a closed conversation's record onto the SDK's
    /// store (the pane is not declared: they are kept as its
    /// conversation), and out of the record once the store has them.
    fn move_closed_items(&self, record: &Record) {
        let core = self.tab.collie().clone();
        let Some(ids) = import_items(&core, record) else { return };
        let shared = self.shared.clone();
        let pane = record.pane_id.clone();
        tokio::spawn(async move {
            if !items_are_kept(&core, &pane, &ids).await {
                return;
            }
            if let Err(e) = shared.store.drop_items(&pane) {
                core.warn(&format!("durable-acp: the record of {pane} was not written: {e}"));
            }
        });
    }

    /// The pane of an open conversation.
    pub fn pane(&self, pane_id: &str) -> Option<Pane> {
        self.conversation(pane_id).map(|c| c.pane.clone())
    }

    fn conversation(&self, pane_id: &str) -> Option<Arc<Conversation>> {
        self.open.lock().unwrap_or_else(|e| e.into_inner()).get(pane_id).cloned()
    }

    /// A new conversation: an agent starts, `session/new` makes the
    /// session, its pane opens, and `first_text` (if any) is sent as the
    /// first prompt (on a task of its own: this returns with the pane).
    pub async fn start(&self, first_text: Option<String>) -> Result<Pane, Error> {
        let options = &self.shared.options;
        let (process, events) = AgentProcess::start(options).await?;
        let session_id = match process.new_session(&options.cwd).await {
            Ok(id) => id,
            Err(e) => {
                process.stop().await;
                return Err(e);
            }
        };
        let conversation = self.open_pane(session_id, None)?;
        conversation.adopt(process, events).await?;
        if let Some(text) = first_text.filter(|t| !t.trim().is_empty()) {
            let c = conversation.clone();
            c.set_first_text(text.clone());
            tokio::spawn(async move {
                if let Err(e) = c.prompt(text).await {
                    tracing::warn!(error = %e, "acp: the first prompt was not sent");
                }
            });
        }
        Ok(conversation.pane.clone())
    }

    /// Closes a conversation: its agent stops (the session stays with the
    /// agent: never `session/delete`), its record says closed (its items
    /// stay where they are kept: the SDK's store, or the record).
    pub async fn close(&self, pane_id: &str) {
        let conversation = self.open.lock().unwrap_or_else(|e| e.into_inner()).remove(pane_id);
        if let Some(c) = conversation {
            c.close().await;
            self.closed_here.lock().unwrap_or_else(|e| e.into_inner()).insert(pane_id.to_owned(), c);
        }
    }

    /// Reopens a closed conversation by its pane id (a history row's id):
    /// [`Reopen::Restore`] when this process closed it (the SDK restores the
    /// pane), else a pane made again from the record — or, for a session
    /// only the agent lists, a pane that shows its replay (`session/load`).
    pub async fn reopen(self: &Arc<Self>, pane_id: &str) -> Result<Reopen, Error> {
        let here = self.closed_here.lock().unwrap_or_else(|e| e.into_inner()).remove(pane_id);
        if let Some(c) = here {
            c.reopened();
            self.open.lock().unwrap_or_else(|e| e.into_inner()).insert(pane_id.to_owned(), c);
            return Ok(Reopen::Restore);
        }
        if let Some(mut record) = self.shared.store.get(pane_id) {
            record.closed = false;
            self.open_pane(record.session_id.clone(), Some(record))?;
            return Ok(Reopen::Reopened);
        }
        let listed = self.history().session_of(pane_id).await;
        // Unknown here: `Restore` has the SDK answer `404 not-found` (the
        // wire's answer for an id it does not know), not a refusal.
        let Some(session_id) = listed else { return Ok(Reopen::Restore) };
        let conversation = self.open_pane(session_id, None)?;
        tokio::spawn(async move {
            if let Err(e) = conversation.start().await {
                tracing::warn!(error = %e, "acp: a reopened session did not load");
            }
        });
        Ok(Reopen::Reopened)
    }

    /// The phone renamed a pane: its title is kept in the record (ACP has
    /// no rename), and the agent's titles no longer replace it.
    pub fn renamed(&self, pane_id: &str, title: &str) {
        if let Some(c) = self.conversation(pane_id) {
            c.renamed(title);
        }
    }

    /// Closes the asks kept from the last run ([`KeptAsk::close`]: "Stopped
    /// before an answer"): the agent process that asked is gone, and an
    /// ACP agent cannot be handed a late answer.
    pub fn close_kept_asks(&self, kept: Vec<KeptAsk>) {
        for ask in kept {
            ask.close();
        }
    }

    /// Takes up the asks kept from the last run (call it after
    /// [`restore`](Self::restore), before `ready()`, on a tokio runtime):
    /// each conversation that had a card open loads its session now, in
    /// the background, at most `max_agents` at once. An agent that asks
    /// again for the same tool call, during the load or within a second
    /// after it, gets the same card back, by the same id (an answer the
    /// phone gave meanwhile lands); asked again with other options, the
    /// new card takes the id (an answer given to the old one is dropped).
    /// The cards not asked again, and those of a conversation that is not
    /// open, are closed ("Stopped before an answer"), and an agent that
    /// asked nothing again is stopped until the next send. pi-acp never
    /// asks again: its cards close once its session is loaded.
    pub fn take_up_kept_asks(&self, kept: Vec<KeptAsk>) {
        let mut by_pane: HashMap<String, Vec<KeptAsk>> = HashMap::new();
        for ask in kept {
            by_pane.entry(ask.pane().to_owned()).or_default().push(ask);
        }
        // The agents of the take-ups count only once loaded: started all
        // at once, they would pass the limit.
        let starts = Arc::new(tokio::sync::Semaphore::new(self.shared.options.max_agents.max(1)));
        for (pane, asks) in by_pane {
            match self.conversation(&pane) {
                Some(c) => {
                    let starts = starts.clone();
                    tokio::spawn(async move {
                        let _start = starts.acquire_owned().await;
                        c.take_up(asks).await;
                    });
                }
                None => asks.into_iter().for_each(KeptAsk::close),
            }
        }
    }

    /// The history provider: the records and the agent's `session/list`.
    pub fn history(self: &Arc<Self>) -> AcpHistory {
        AcpHistory::new(self.shared.clone(), Arc::downgrade(self), &self.tab)
    }

    /// Whether a conversation's pane is open here.
    pub(crate) fn is_open(&self, pane_id: &str) -> bool {
        self.open.lock().unwrap_or_else(|e| e.into_inner()).contains_key(pane_id)
    }

    /// The records of the open conversations, as they stand.
    pub(crate) fn open_records(&self) -> Vec<Record> {
        let open: Vec<_> = self.open.lock().unwrap_or_else(|e| e.into_inner()).values().cloned().collect();
        open.iter().map(|c| c.record()).collect()
    }

    /// The hooks for the phone's rename, close, reopen and the
    /// `new-conversation` starter (give them to `Collie::set_hooks`).
    pub fn hooks(self: &Arc<Self>) -> AcpHooks {
        AcpHooks(self.clone())
    }

    /// Stops every agent (their input closes; each is killed after 2 s)
    /// and writes every record.
    pub async fn shutdown(&self) {
        let open: Vec<_> = self.open.lock().unwrap_or_else(|e| e.into_inner()).values().cloned().collect();
        let stops = open.iter().map(|c| async move {
            c.stop_process().await;
            c.save();
        });
        futures::future::join_all(stops).await;
    }
}

/// Hands the record's items to the SDK's store as the conversation of its
/// pane (not declared in this run); the ids to find there before the
/// record lets them go, or `None` when nothing was handed over (a `warn`
/// line says why). An item that breaks the item rules would be left out of
/// a pane too: it is not moved, and goes with the record's items.
pub(crate) fn import_items(core: &Collie, record: &Record) -> Option<Vec<Id>> {
    let items: Vec<Item> = record.items.iter().filter(|i| follows_item_rules(i)).cloned().collect();
    if items.len() < record.items.len() {
        core.warn(&format!(
            "durable-acp: {} item(s) of {} break the item rules; they are left out",
            record.items.len() - items.len(),
            record.pane_id
        ));
    }
    let ids: Vec<Id> = items.iter().map(|i| i.id.clone()).collect();
    match core.import_conversation(&record.pane_id, &record.title, items) {
        Ok(true) => Some(ids),
        Ok(false) => None,
        Err(e) => {
            core.warn(&format!("durable-acp: the items of {} stay in its record: {e}", record.pane_id));
            None
        }
    }
}

/// Whether the SDK takes the item (a pane's write, a restore, an import).
pub(crate) fn follows_item_rules(item: &Item) -> bool {
    item.clone().sanitized().is_ok()
}

/// Whether the SDK's store has every item of `ids` in the conversation of
/// `pane`, once it has kept what was written so far (a `warn` line when not).
pub(crate) async fn items_are_kept(core: &Collie, pane: &str, ids: &[Id]) -> bool {
    core.conversations_kept().await;
    let why = match core.kept_conversation(pane).await {
        Ok(Some(kept)) => {
            let have: HashSet<&Id> = kept.items.iter().map(|i| &i.id).collect();
            let missing = ids.iter().filter(|id| !have.contains(id)).count();
            if missing == 0 {
                return true;
            }
            format!("{missing} of its {} items are not in the receipt store", ids.len())
        }
        Ok(None) => "the receipt store has none of its items".to_owned(),
        Err(e) => format!("the receipt store could not be read: {e}"),
    };
    core.warn(&format!(
        "durable-acp: the record of {pane} keeps its items ({why}); moved again at the next start"
    ));
    false
}

/// Stops the agents idle longer than `idle`.
async fn stop_idle(me: std::sync::Weak<AcpConversations>, idle: Duration) {
    let every = (idle / 4).clamp(Duration::from_millis(100), Duration::from_secs(5));
    loop {
        tokio::time::sleep(every).await;
        let Some(me) = me.upgrade() else { return };
        for c in me.shared.pool.running() {
            if !c.is_busy() && c.last_used().elapsed() >= idle {
                tokio::spawn(async move { c.stop_process_if_idle().await });
            }
        }
    }
}

/// The phone's layout actions on ACP conversations (see [`AcpConversations::hooks`]).
#[derive(Debug)]
pub struct AcpHooks(Arc<AcpConversations>);

impl Hooks for AcpHooks {
    async fn on_rename(&self, req: RenameRequest) -> HandlerResult {
        if req.target == Target::Pane {
            self.0.renamed(&req.id, &req.title);
        }
        Ok(())
    }

    async fn on_close(&self, req: CloseRequest) -> HandlerResult {
        if req.target == Target::Pane {
            self.0.close(&req.id).await;
        }
        Ok(())
    }

    async fn on_reopen(&self, req: ReopenRequest) -> HandlerResult<Reopen> {
        self.0.reopen(req.id.as_str()).await.map_err(|e| Refusal::new(e.to_string()))
    }

    async fn on_starter(&self, req: StarterRequest) -> HandlerResult<Started> {
        if req.starter.as_str() != NEW_CONVERSATION {
            return Err(Refusal::not_supported());
        }
        match self.0.start(req.text).await {
            Ok(pane) => Ok(Started::pane(&pane)),
            Err(e) => Err(Refusal::new(e.to_string())),
        }
    }
}

impl Record {
    /// The record of a session only the agent lists.
    pub(crate) fn listed(session_id: &str, title: &str, updated_at: u64) -> Record {
        Record {
            session_id: session_id.to_owned(),
            pane_id: pane_id_for(session_id),
            title: title.to_owned(),
            renamed: false,
            started_at: updated_at,
            updated_at,
            closed: true,
            dropped: false,
            items: Vec::new(),
        }
    }
}
