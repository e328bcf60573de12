//! One conversation: a pane, an ACP session, and the agent process that
//! runs it while it is live.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use agent_client_protocol::v1::Responder;
use agent_client_protocol::v1::schema::{
    CreateElicitationRequest, CreateElicitationResponse, ElicitationAcceptAction, ElicitationAction,
    ElicitationMode, PermissionOptionKind, RequestPermissionOutcome, RequestPermissionRequest,
    RequestPermissionResponse, SelectedPermissionOutcome, SessionUpdate, StopReason,
};
use durable_runtime::{
    AbortController, ActionHandler, ActionRequest, ChatHandler, HandlerResult, KeptAsk, Pane, Refusal, Turn,
};
use durable_types::{AskKind, AskOption, AskSpec, Id, Item, ItemBody, NoticeTone, OptionStyle, ToolInfo};
use tokio::sync::mpsc;

use crate::ids::{call_id_for, option_id_for};
use crate::mapping::Mapper;
use crate::process::{AgentEvent, AgentProcess};
use crate::store::{ItemLog, Record, Store, now_ms};
use crate::{AcpOptions, Error};

/// How long after `session/load` answers a card kept from the last run
/// waits for the agent to ask again, before it is closed.
const KEPT_GRACE: Duration = Duration::from_secs(1);

/// Cards open at once per conversation, at most: a permission request past
/// them is refused back to the agent (`cancelled`), and the pane says so.
/// Real agents ask one call at a time; a flood of requests would otherwise
/// hold memory and make every stop close thousands.
pub const CARDS_OPEN_MAX: usize = 64;

/// What conversations share: the options, the records, the pool of processes.
pub(crate) struct Shared {
    pub options: AcpOptions,
    pub store: Store,
    pub pool: Pool,
    /// The SDK's receipt store keeps each pane's items across restarts
    /// (`Collie::keeps_conversations_across_restarts`): the records then
    /// keep no items of their own (one copy, under the same ids).
    pub sdk_keeps_items: bool,
}

/// The agent processes alive, at most `options.max_agents`.
pub(crate) struct Pool {
    live: Mutex<Vec<Weak<Conversation>>>,
}

impl Pool {
    pub(crate) fn new() -> Pool {
        Pool { live: Mutex::new(Vec::new()) }
    }

    /// The conversations whose agent runs.
    pub(crate) fn running(&self) -> Vec<Arc<Conversation>> {
        let mut live = self.live.lock().unwrap_or_else(|e| e.into_inner());
        live.retain(|w| w.upgrade().is_some_and(|c| c.running.load(Ordering::SeqCst)));
        live.iter().filter_map(Weak::upgrade).collect()
    }

    /// Waits for room for one more agent: at the limit, the conversation
    /// idle longest is stopped; when every one is in a turn, this waits.
    async fn make_room(&self, max: usize, me: &Arc<Conversation>, turn: Option<&Turn>) -> Result<(), Error> {
        loop {
            let running: Vec<_> = self.running().into_iter().filter(|c| !Arc::ptr_eq(c, me)).collect();
            if running.len() < max {
                self.live.lock().unwrap_or_else(|e| e.into_inner()).push(Arc::downgrade(me));
                return Ok(());
            }
            let idle = running.iter().filter(|c| !c.is_busy()).min_by_key(|c| c.last_used());
            match idle {
                Some(c) => c.stop_process_if_idle().await,
                None => {
                    if turn.is_some_and(Turn::is_stopped) {
                        return Err(Error::agent("stopped while waiting for a free agent"));
                    }
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            }
        }
    }
}

/// The live process of a conversation.
struct Live {
    process: Arc<AgentProcess>,
}

/// A conversation behind a pane (see the crate docs).
pub(crate) struct Conversation {
    shared: Arc<Shared>,
    pub pane: Pane,
    pub session_id: String,
    live: tokio::sync::Mutex<Option<Live>>,
    /// A process runs (mirrors `live`, readable without waiting).
    running: AtomicBool,
    mapper: Mutex<Mapper>,
    log: Mutex<ItemLog>,
    meta: Mutex<Meta>,
    /// The open cards, by the agent's tool call id.
    cards: Mutex<HashMap<String, AbortController>>,
    /// Requests past [`CARDS_OPEN_MAX`] are being refused: the pane was
    /// told once, and is told again only after the cards went below it.
    refusing_cards: AtomicBool,
    /// A starter's first text, not yet sent (the task that sends it has
    /// not begun): a close meanwhile says it was not sent.
    first_text: Mutex<Option<String>>,
    /// Cards kept from the last run, by their tool call id (ours), while
    /// the agent may ask again (see `take_up`).
    kept: Mutex<HashMap<String, KeptAsk>>,
    /// The agent asked again for a card kept from the last run.
    asked_again: AtomicBool,
    busy: AtomicBool,
    last_used: Mutex<Instant>,
    /// The pane shows the conversation already: a replay is not written again.
    muted: AtomicBool,
    /// Items were written to the pane since the record was last saved.
    unsaved: AtomicBool,
    /// The record came with items while the SDK's store keeps them: the
    /// record keeps them too until the store is seen to have them
    /// (`conversations::items_are_kept`, then [`items_moved`](Self::items_moved)).
    moving_items: AtomicBool,
    /// The session mode the phone chose with a mode button: set again
    /// after the agent loads the session (a load would start it in the
    /// agent's own, or the bridge's cards-by-default, mode).
    phone_mode: Mutex<Option<String>>,
}

struct Meta {
    title: String,
    renamed: bool,
    started_at: u64,
    closed: bool,
}

impl Conversation {
    /// A conversation on `pane`, showing `record`'s items when there is one.
    pub(crate) fn attach(
        shared: Arc<Shared>,
        pane: Pane,
        session_id: String,
        record: Option<Record>,
    ) -> Result<Arc<Conversation>, Error> {
        let moving = shared.sdk_keeps_items && record.as_ref().is_some_and(|r| !r.items.is_empty());
        let (log, meta) = match record {
            Some(r) => {
                for item in &r.items {
                    let _ = pane.write(item.clone());
                }
                let meta =
                    Meta { title: r.title, renamed: r.renamed, started_at: r.started_at, closed: false };
                (ItemLog::from_items(r.items, r.dropped), meta)
            }
            None => (
                ItemLog::default(),
                Meta {
                    title: "New conversation".into(),
                    renamed: false,
                    started_at: now_ms(),
                    closed: false,
                },
            ),
        };
        let every = shared.options.partial_every;
        let conversation = Arc::new(Conversation {
            shared,
            pane: pane.clone(),
            session_id,
            live: tokio::sync::Mutex::new(None),
            running: AtomicBool::new(false),
            mapper: Mutex::new(Mapper::new(every)),
            log: Mutex::new(log),
            meta: Mutex::new(meta),
            cards: Mutex::new(HashMap::new()),
            refusing_cards: AtomicBool::new(false),
            first_text: Mutex::new(None),
            kept: Mutex::new(HashMap::new()),
            asked_again: AtomicBool::new(false),
            busy: AtomicBool::new(false),
            last_used: Mutex::new(Instant::now()),
            muted: AtomicBool::new(false),
            unsaved: AtomicBool::new(false),
            moving_items: AtomicBool::new(moving),
            phone_mode: Mutex::new(None),
        });
        pane.on_send(Chat(Arc::downgrade(&conversation))).map_err(|e| Error::Pane { why: e.to_string() })?;
        pane.on_action(ModeButtons(Arc::downgrade(&conversation)))
            .map_err(|e| Error::Pane { why: e.to_string() })?;
        Ok(conversation)
    }

    pub(crate) fn last_used(&self) -> Instant {
        *self.last_used.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn touch(&self) {
        *self.last_used.lock().unwrap_or_else(|e| e.into_inner()) = Instant::now();
    }

    /// In a turn, or a card is open (one raised again after a restart
    /// is open outside any turn): not to be stopped as idle.
    pub(crate) fn is_busy(&self) -> bool {
        self.busy.load(Ordering::SeqCst) || !self.cards.lock().unwrap_or_else(|e| e.into_inner()).is_empty()
    }

    /// The record as it stands: with the pane's items unless the SDK's
    /// store keeps them (and has those the record came with).
    pub(crate) fn record(&self) -> Record {
        let meta = self.meta.lock().unwrap_or_else(|e| e.into_inner());
        let log = self.log.lock().unwrap_or_else(|e| e.into_inner());
        let items = if self.keeps_items() { log.items().to_vec() } else { Vec::new() };
        Record {
            session_id: self.session_id.clone(),
            pane_id: self.pane.id().to_owned(),
            title: meta.title.clone(),
            renamed: meta.renamed,
            started_at: meta.started_at,
            updated_at: now_ms(),
            closed: meta.closed,
            dropped: log.dropped,
            items,
        }
    }

    /// Whether the pane shows the conversation already: items written in
    /// this run, or (the SDK's store keeping them) items the store gives
    /// back to the pane, though the record has none.
    async fn shows_conversation(&self) -> bool {
        if !self.log.lock().unwrap_or_else(|e| e.into_inner()).is_empty() {
            return true;
        }
        if !self.shared.sdk_keeps_items {
            return false;
        }
        match self.pane.collie().kept_conversation(self.pane.id()).await {
            Ok(kept) => kept.is_some_and(|k| !k.items.is_empty()),
            Err(e) => {
                // Unknown: the replay is shown rather than nothing.
                tracing::warn!(error = %e, pane = self.pane.id(), "acp: the receipt store could not be read");
                false
            }
        }
    }

    /// The record keeps the pane's items: the SDK's store does not, or
    /// does not have those the record came with yet.
    fn keeps_items(&self) -> bool {
        !self.shared.sdk_keeps_items || self.moves_items()
    }

    /// The record came with items the SDK's store is to keep, and still
    /// keeps them (set only when the SDK's store keeps items).
    pub(crate) fn moves_items(&self) -> bool {
        self.moving_items.load(Ordering::SeqCst)
    }

    /// The items the record came with are in the SDK's store: the record
    /// no longer keeps any (written at once).
    pub(crate) fn items_moved(&self) {
        if self.moving_items.swap(false, Ordering::SeqCst) {
            self.save();
        }
    }

    /// The ids of the items the record keeps now (those to find in the
    /// SDK's store before it stops keeping them).
    pub(crate) fn kept_item_ids(&self) -> Vec<durable_types::Id> {
        let log = self.log.lock().unwrap_or_else(|e| e.into_inner());
        // One that breaks the item rules never reached the pane, nor the store.
        log.items()
            .iter()
            .filter(|i| crate::conversations::follows_item_rules(i))
            .map(|i| i.id.clone())
            .collect()
    }

    pub(crate) fn save(&self) {
        // Cleared before the snapshot: an item written meanwhile is in it,
        // or marks the record unsaved again.
        self.unsaved.store(false, Ordering::SeqCst);
        if let Err(e) = self.shared.store.put_with(|| self.record()) {
            self.pane
                .collie()
                .warn(&format!("durable-acp: the record of {} was not written: {e}", self.pane.id()));
        }
    }

    /// The phone renamed the pane: the title is kept, and the agent's no longer shows.
    pub(crate) fn renamed(&self, title: &str) {
        {
            let mut meta = self.meta.lock().unwrap_or_else(|e| e.into_inner());
            meta.title = title.to_owned();
            meta.renamed = true;
        }
        self.save();
    }

    /// The phone closed the pane: the agent is stopped (the session stays
    /// with the agent), the record says closed. A first text not yet sent,
    /// or a turn under way, leaves a notice (the pane, still open while
    /// the close hook runs, keeps it, and so does the record).
    pub(crate) async fn close(&self) {
        self.meta.lock().unwrap_or_else(|e| e.into_inner()).closed = true;
        let (unsent, busy) = {
            let mut first = self.first_text.lock().unwrap_or_else(|e| e.into_inner());
            (first.take(), self.busy.load(Ordering::SeqCst))
        };
        if let Some(text) = unsent {
            self.notice(
                format!(
                    "Closed before the first message reached the agent; it was not sent: “{}”",
                    quote(&text)
                ),
                NoticeTone::Warn,
            );
        } else if busy {
            self.notice(
                "Closed during a turn: the agent was stopped before it finished its answer.".into(),
                NoticeTone::Warn,
            );
        }
        // The agent frees the session (`session/close`, where it offers it),
        // then stops.
        let live = self.live.lock().await.take();
        if let Some(live) = &live {
            live.process.close_session(&self.session_id).await;
        }
        self.stop_live(live).await;
        self.save();
    }

    fn is_closed(&self) -> bool {
        self.meta.lock().unwrap_or_else(|e| e.into_inner()).closed
    }

    /// The starter's first text, to be sent by a task of its own ([`prompt`](Self::prompt)).
    pub(crate) fn set_first_text(&self, text: String) {
        *self.first_text.lock().unwrap_or_else(|e| e.into_inner()) = Some(text);
    }

    /// Reopened: the record no longer says closed.
    pub(crate) fn reopened(&self) {
        self.meta.lock().unwrap_or_else(|e| e.into_inner()).closed = false;
        self.save();
    }

    /// Writes items to the pane and the log (none while a replay is muted).
    fn write(&self, items: Vec<Item>) {
        if items.is_empty() || self.muted.load(Ordering::SeqCst) {
            return;
        }
        let mut log = self.log.lock().unwrap_or_else(|e| e.into_inner());
        self.unsaved.store(true, Ordering::SeqCst);
        for item in items {
            log.upsert(item.clone());
            let _ = self.pane.write(item);
        }
    }

    /// Writes a turn's last items: kept in the record first, then shown,
    /// so that a crash never takes back a reply the phone saw (the turn's
    /// end then saves only what came after). When the SDK's store keeps
    /// the items, it shows them once it has them: the record is not
    /// written for them.
    fn write_kept(&self, items: Vec<Item>) {
        if items.is_empty() || self.muted.load(Ordering::SeqCst) {
            return;
        }
        {
            let mut log = self.log.lock().unwrap_or_else(|e| e.into_inner());
            for item in &items {
                log.upsert(item.clone());
            }
        }
        if self.keeps_items() {
            self.save();
        }
        for item in items {
            let _ = self.pane.write(item);
        }
    }

    fn notice(&self, text: String, tone: NoticeTone) {
        let items = self.mapper.lock().unwrap_or_else(|e| e.into_inner()).notice(text, tone);
        self.write(items);
    }

    /// The agent gave a title: shown unless the phone renamed the pane.
    fn agent_title(&self, title: String) {
        let show = {
            let mut meta = self.meta.lock().unwrap_or_else(|e| e.into_inner());
            if meta.renamed || meta.title == title {
                false
            } else {
                meta.title = title.clone();
                self.unsaved.store(true, Ordering::SeqCst);
                true
            }
        };
        if show {
            let _ = self.pane.rename(&title);
        }
    }

    /// Stops the agent if it runs (idle, closed, shutdown): open cards
    /// close (the agent hears `cancelled`), the process ends.
    pub(crate) async fn stop_process(&self) {
        let live = self.live.lock().await.take();
        self.stop_live(live).await;
    }

    /// [`stop_process`](Self::stop_process) unless it is busy, decided
    /// under the process's lock: a send that starts a turn meanwhile either
    /// is seen busy, or waits for the lock and starts a new process.
    pub(crate) async fn stop_process_if_idle(&self) {
        let live = {
            let mut slot = self.live.lock().await;
            if self.is_busy() {
                return;
            }
            slot.take()
        };
        self.stop_live(live).await;
    }

    async fn stop_live(&self, live: Option<Live>) {
        self.running.store(false, Ordering::SeqCst);
        if let Some(live) = live {
            live.process.ending.store(true, Ordering::SeqCst);
            self.close_cards();
            live.process.stop().await;
        }
    }

    /// Closes the open cards: nobody answered them, so each call's item
    /// says it was stopped before an answer (written here, before the
    /// record is saved), and the agent hears `cancelled`. Linear in the
    /// cards open.
    fn close_cards(&self) {
        let cards: Vec<_> = self.cards.lock().unwrap_or_else(|e| e.into_inner()).drain().collect();
        if !cards.is_empty() {
            let items: Vec<Item> = {
                let mut mapper = self.mapper.lock().unwrap_or_else(|e| e.into_inner());
                cards.iter().flat_map(|(call, _)| mapper.unanswered(call)).collect()
            };
            self.write(items);
        }
        for (_, card) in cards {
            card.abort();
        }
        self.refusing_cards.store(false, Ordering::SeqCst);
        self.close_kept();
    }

    /// Makes room for one more card: `None` past [`CARDS_OPEN_MAX`] (the
    /// pane is told once per burst), else the card's abort controller, counted open.
    fn open_card(&self, acp_call: &str, title: &str) -> Option<AbortController> {
        let mut cards = self.cards.lock().unwrap_or_else(|e| e.into_inner());
        if cards.len() >= CARDS_OPEN_MAX && !cards.contains_key(acp_call) {
            drop(cards);
            if !self.refusing_cards.swap(true, Ordering::SeqCst) {
                self.notice(
                    format!(
                        "The agent asked for more than {CARDS_OPEN_MAX} cards open at once: its requests past them are refused (it hears “cancelled”), the first: “{}”.",
                        quote(title)
                    ),
                    NoticeTone::Warn,
                );
            }
            return None;
        }
        let card = AbortController::new();
        cards.insert(acp_call.to_owned(), card.clone());
        Some(card)
    }

    /// Closes the cards kept from the last run that the agent did not ask
    /// again ("Stopped before an answer").
    fn close_kept(&self) {
        let kept: Vec<_> = self.kept.lock().unwrap_or_else(|e| e.into_inner()).drain().collect();
        for (_, ask) in kept {
            ask.close();
        }
    }

    /// Takes up cards kept from the last run: the session is loaded now,
    /// and a permission request for one of their tool calls during the
    /// load or within [`KEPT_GRACE`] after it raises that card again, by
    /// the same id (an answer the phone gave meanwhile lands). The others
    /// are closed then, and all of them when the load fails.
    pub(crate) async fn take_up(self: Arc<Self>, asks: Vec<KeptAsk>) {
        {
            let mut kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
            for ask in asks {
                kept.insert(ask.tool_call_id().to_owned(), ask);
            }
        }
        match self.start().await {
            Ok(()) => {
                tokio::time::sleep(KEPT_GRACE).await;
                // Asked nothing again, and idle: the agent was started only
                // for this, and stops (the next send starts it, as after
                // any restart). Its stop closes the cards kept.
                if !self.asked_again.load(Ordering::SeqCst) {
                    self.stop_process_if_idle().await;
                }
            }
            Err(e) => tracing::warn!(
                error = %e,
                "acp: a session with cards kept from the last run did not load; the cards are closed"
            ),
        }
        self.close_kept();
    }

    /// The running agent, started when there is none: initialized, and the
    /// session loaded (or, for `new`, made: its id must be this one's).
    async fn process(self: &Arc<Self>, turn: Option<&Turn>) -> Result<Arc<AgentProcess>, Error> {
        let mut slot = self.live.lock().await;
        if let Some(live) = slot.as_ref().filter(|l| l.process.is_alive()) {
            return Ok(live.process.clone());
        }
        *slot = None;
        if self.is_closed() {
            // Closed meanwhile (a starter's first turn): no agent starts for it.
            return Err(Error::Pane { why: "the conversation was closed".into() });
        }
        self.running.store(false, Ordering::SeqCst);
        let options = &self.shared.options;
        self.shared.pool.make_room(options.max_agents, self, turn).await?;
        let (process, events) = AgentProcess::start(options).await?;
        tokio::spawn(pump(Arc::downgrade(self), process.clone(), events));
        // What the pane shows already is not written again from the replay.
        let shown = self.shows_conversation().await;
        if !(process.abilities.load || (shown && process.abilities.resume)) {
            process.stop().await;
            return Err(Error::agent("the agent cannot load sessions (no loadSession in its capabilities)"));
        }
        // A pane that shows the conversation needs no replay: an agent that
        // offers `session/resume` goes on without one (else, or if it fails,
        // `session/load`).
        let resumed = if shown && process.abilities.resume {
            match process.resume_session(&self.session_id, &options.cwd).await {
                Ok(()) => true,
                Err(e) => {
                    tracing::warn!(error = %e, "acp: session/resume failed; loading the session instead");
                    false
                }
            }
        } else {
            false
        };
        let gemini = process.agent_name.as_deref() == Some(crate::process::GEMINI_CLI);
        let started_at = self.meta.lock().unwrap_or_else(|e| e.into_inner()).started_at;
        let loaded = if resumed {
            Ok(())
        } else if !process.abilities.load {
            Err(Error::agent("session/resume failed, and the agent cannot load sessions"))
        } else if gemini && started_at / 60_000 == now_ms() / 60_000 {
            // Loaded in the minute it began, the session would be lost (`GEMINI_CLI`).
            Err(Error::agent(format!(
                "Gemini CLI cannot load a conversation in the minute it began without losing it; \
                 it can from {} UTC",
                minute_after(started_at)
            )))
        } else {
            self.mapper.lock().unwrap_or_else(|e| e.into_inner()).begin(&new_prefix("load"), true);
            self.muted.store(shown, Ordering::SeqCst);
            let loaded = process.load_session(&self.session_id, &options.cwd).await;
            process.settle().await;
            if gemini && loaded.is_ok() {
                replay_waited_out(&process).await;
            }
            let rest = self.mapper.lock().unwrap_or_else(|e| e.into_inner()).finish(false);
            self.write(rest);
            self.muted.store(false, Ordering::SeqCst);
            loaded
        };
        if let Err(e) = loaded {
            process.ending.store(true, Ordering::SeqCst);
            process.stop().await;
            return Err(e);
        }
        // The phone's mode, again: the load started the session in another.
        let phone_mode = self.phone_mode.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let current = process.modes().map(|s| s.current_mode_id.0.to_string());
        if let Some(mode) = phone_mode.filter(|m| current.as_deref().is_some_and(|c| c != m)) {
            match process.set_mode(&self.session_id, &mode).await {
                Ok(()) => {}
                Err(e) => self.notice(
                    format!("The mode chosen on the phone could not be set again: {e}"),
                    NoticeTone::Warn,
                ),
            }
        }
        self.show_modes(&process);
        self.running.store(true, Ordering::SeqCst);
        *slot = Some(Live { process: process.clone() });
        Ok(process)
    }

    /// The session's modes as pane buttons, the current one marked (none
    /// when the agent offers no modes).
    fn show_modes(&self, process: &AgentProcess) {
        let Some(state) = process.modes() else { return };
        for (id, label) in crate::modes::buttons(&state, self.pane.collie().allow_always()) {
            if let Err(e) = self.pane.action(&id, &label, None) {
                tracing::warn!(error = %e, "acp: a mode button was not shown");
            }
        }
    }

    /// The phone pressed a mode button: the session switches to `mode`. A
    /// mode in which the agent never asks is allow-always by another name:
    /// it takes a card whose option needs the phone's second tap, and is
    /// never offered where allow-always is off (over HTTPS).
    async fn press_mode(self: Arc<Self>, mode: String) -> HandlerResult {
        let process = self.process(None).await.map_err(|e| Refusal::new(e.to_string()))?;
        let Some(state) = process.modes() else {
            return Err(Refusal::new("the agent offers no session modes"));
        };
        if !state.available_modes.iter().any(|m| *m.id.0 == *mode) {
            return Err(Refusal::new(format!("the agent offers no mode {mode:?}")));
        }
        if *state.current_mode_id.0 == *mode {
            return Ok(());
        }
        let name = crate::modes::name_of(&state, &mode).to_owned();
        if !crate::modes::NEVER_ASKS.contains(&mode.as_str()) {
            self.switch_mode(&process, &mode, &name).await;
            return Ok(());
        }
        if !self.pane.collie().allow_always() {
            return Err(Refusal::new(format!(
                "the {name} mode runs tools without asking, which is allow-always by another name: not offered here (HTTPS)"
            )));
        }
        let options = [
            AskOption::new("keep", "Keep asking").style(OptionStyle::Primary),
            AskOption::new("switch", format!("Switch to {name}: act without asking"))
                .style(OptionStyle::Danger)
                .always(),
        ];
        let call = format!("mode-{}", new_prefix("switch"));
        let spec = AskSpec::choice(
            call,
            format!("Switch to the {name} mode? The agent will no longer ask before it acts."),
            options,
        )
        .tool(ToolInfo::from_call("session/set_mode", &serde_json::json!({"mode": mode})));
        let call = spec.tool_call_id.clone();
        let abort =
            self.open_card(&call, &spec.title).ok_or_else(|| Refusal::new("too many cards are open"))?;
        let card = match self.pane.ask_with(spec, Some(abort.signal())) {
            Ok(card) => card,
            Err(e) => {
                self.forget_card(&call);
                return Err(Refusal::new(e.to_string()));
            }
        };
        drop(process);
        tokio::spawn(async move {
            let switch = matches!(card.await, Ok(answer) if answer.option_id() == Some("switch"));
            self.forget_card(&call);
            if switch {
                // The agent as it is now (it may have been stopped meanwhile).
                match self.process(None).await {
                    Ok(process) => self.switch_mode(&process, &mode, &name).await,
                    Err(e) => {
                        self.notice(format!("The {name} mode could not be set: {e}"), NoticeTone::Error)
                    }
                }
            }
        });
        Ok(())
    }

    /// Whether a card of the agent's call `acp_call` is open.
    fn has_card(&self, acp_call: &str) -> bool {
        self.cards.lock().unwrap_or_else(|e| e.into_inner()).contains_key(acp_call)
    }

    /// The agent asks for a form or for a page to be opened
    /// (`elicitation/create`): a card, and its answer back — `accept` with
    /// the form's values (or that the page was done), `decline`, or
    /// `cancel` when the card closed unanswered (a stop, a close). What no
    /// card can show is declined, and the pane says why.
    async fn elicit(
        self: Arc<Self>,
        request: CreateElicitationRequest,
        responder: Responder<CreateElicitationResponse>,
    ) {
        let respond = |action: ElicitationAction| {
            let _ = responder.respond(CreateElicitationResponse::new(action));
        };
        let call = new_prefix("elicit");
        let shown = match &request.mode {
            ElicitationMode::Form(form) => {
                let schema = serde_json::to_value(&form.requested_schema).unwrap_or_default();
                crate::elicitation::form_card(&call, &request.message, &schema)
                    .map(|(spec, backs)| (spec, Some(backs)))
                    .map_err(|why| format!("a form no card can show ({why})"))
            }
            ElicitationMode::Url(page) => crate::elicitation::url_card(&call, &request.message, &page.url)
                .map(|spec| (spec, None))
                .map_err(|why| format!("a page no card can show ({why})")),
            _ => Err("a kind of input this bridge does not show".to_owned()),
        };
        let (spec, backs) = match shown {
            Ok(shown) => shown,
            Err(why) => {
                self.notice(format!("The agent asked for {why}: it hears “decline”."), NoticeTone::Warn);
                return respond(ElicitationAction::Decline);
            }
        };
        // Counted and closed as a permission card is: bounded, ended by a
        // stop or a close (the agent then hears `cancel`), busy while open.
        let Some(abort) = self.open_card(&call, &spec.title) else {
            return respond(ElicitationAction::Cancel);
        };
        let card = match self.pane.ask_with(spec, Some(abort.signal())) {
            Ok(card) => card,
            Err(e) => {
                self.forget_card(&call);
                self.notice(
                    format!("The agent asked for a card that could not be raised ({e}): it hears “decline”."),
                    NoticeTone::Warn,
                );
                return respond(ElicitationAction::Decline);
            }
        };
        self.touch();
        let answered = card.await;
        self.forget_card(&call);
        let action = match (answered, backs) {
            (Ok(answer), Some(backs)) => {
                let content = crate::elicitation::content_of(&answer, &backs);
                match serde_json::from_value(serde_json::Value::Object(content)) {
                    Ok(content) => {
                        ElicitationAction::Accept(ElicitationAcceptAction::new().content(Some(content)))
                    }
                    Err(_) => ElicitationAction::Decline,
                }
            }
            (Ok(answer), None) if answer.option_id() == Some("done") => {
                ElicitationAction::Accept(ElicitationAcceptAction::new())
            }
            (Ok(_), None) => ElicitationAction::Decline,
            (Err(_), _) => ElicitationAction::Cancel,
        };
        respond(action);
    }

    /// Sets the mode the phone chose, and says so.
    async fn switch_mode(&self, process: &AgentProcess, mode: &str, name: &str) {
        match process.set_mode(&self.session_id, mode).await {
            Ok(()) => {
                *self.phone_mode.lock().unwrap_or_else(|e| e.into_inner()) = Some(mode.to_owned());
                self.show_modes(process);
                self.notice(format!("Mode: {name}."), NoticeTone::Info);
            }
            Err(e) => self.notice(format!("The {name} mode could not be set: {e}"), NoticeTone::Error),
        }
    }

    /// The agent says its session's mode changed (`current_mode_update`):
    /// the buttons follow, and a change it made on its own (an "always"
    /// option that switches the mode) is said in the chat.
    fn agent_mode(&self, process: &AgentProcess, mode: &str) {
        let on_its_own = process.agent_set_mode(mode);
        self.show_modes(process);
        if on_its_own {
            let name = process
                .modes()
                .map_or_else(|| mode.to_owned(), |s| crate::modes::name_of(&s, mode).to_owned());
            let (text, tone) = if crate::modes::NEVER_ASKS.contains(&mode) {
                (
                    format!("The agent switched to the {name} mode: it no longer asks before it acts."),
                    NoticeTone::Warn,
                )
            } else {
                (format!("The agent switched to the {name} mode."), NoticeTone::Info)
            };
            self.notice(text, tone);
        }
    }

    /// Puts a process that just made this conversation's session
    /// (`session/new`) behind it, with its event stream.
    pub(crate) async fn adopt(
        self: &Arc<Self>,
        process: Arc<AgentProcess>,
        events: mpsc::Receiver<AgentEvent>,
    ) -> Result<(), Error> {
        let mut slot = self.live.lock().await;
        self.shared.pool.make_room(self.shared.options.max_agents, self, None).await?;
        tokio::spawn(pump(Arc::downgrade(self), process.clone(), events));
        self.show_modes(&process);
        self.running.store(true, Ordering::SeqCst);
        *slot = Some(Live { process });
        Ok(())
    }

    /// Loads the session now (a conversation reopened from the history,
    /// whose pane should show the replay).
    pub(crate) async fn start(self: &Arc<Self>) -> Result<(), Error> {
        self.process(None).await.map(|_| ())
    }

    /// Sends `text` as a turn of the program's own (a starter's first
    /// text): the pane shows it as a `user` item.
    pub(crate) async fn prompt(self: Arc<Self>, text: String) -> Result<(), Error> {
        {
            // Taken and busy at once: a close from here on sees a turn,
            // not an unsent text (it reads both under the same lock).
            let mut first = self.first_text.lock().unwrap_or_else(|e| e.into_inner());
            if self.is_closed() {
                // Closed before this task began: the close tells of the
                // text (it is left for it, or it took it already).
                return Ok(());
            }
            first.take();
            self.busy.store(true, Ordering::SeqCst);
        }
        let turn_id = new_prefix("prompt");
        let pane_error = |e: durable_types::RuleError| Error::Pane { why: e.to_string() };
        let started = self.pane.start_turn(&turn_id).map_err(pane_error);
        let user = Id::new(format!("user-{turn_id}")).map_err(pane_error);
        let (turn, user) = match (started, user) {
            (Ok(turn), Ok(user)) => (turn, user),
            (Err(e), _) | (_, Err(e)) => {
                self.busy.store(false, Ordering::SeqCst);
                return Err(e);
            }
        };
        self.write(vec![Item::new(user, ItemBody::User { text: text.clone(), request_id: None })]);
        self.run_turn(turn, text).await;
        Ok(())
    }

    /// One turn: `session/prompt` until its answer.
    async fn run_turn(self: Arc<Self>, turn: Turn, text: String) {
        self.busy.store(true, Ordering::SeqCst);
        self.touch();
        if let Some(request) = turn.request_id() {
            let item = Item::new(
                durable_runtime::user_item_id(request),
                ItemBody::User { text: text.clone(), request_id: Some(request.clone()) },
            );
            // The SDK wrote it on the pane; the record keeps it too.
            self.log.lock().unwrap_or_else(|e| e.into_inner()).upsert(item);
            self.unsaved.store(true, Ordering::SeqCst);
        }
        let process = match self.process(Some(&turn)).await {
            Ok(p) => p,
            Err(e) => {
                if !self.is_closed() {
                    self.notice(format!("{e}. The next message tries again."), NoticeTone::Error);
                }
                return self.end_turn(turn);
            }
        };
        {
            let mut mapper = self.mapper.lock().unwrap_or_else(|e| e.into_inner());
            mapper.begin(&new_prefix("t"), false);
            mapper.hold_first_partial(Instant::now());
        }
        let grace = self.shared.options.stop_grace;
        let prompt = process.prompt(&self.session_id, &text);
        tokio::pin!(prompt);
        let mut stop_by: Option<tokio::time::Instant> = None;
        let answer = loop {
            tokio::select! {
                answer = &mut prompt => break answer,
                () = turn.stopped(), if stop_by.is_none() => {
                    stop_by = Some(tokio::time::Instant::now() + grace);
                    process.cancel(&self.session_id);
                    self.close_cards();
                }
                () = tokio::time::sleep_until(stop_by.unwrap_or_else(tokio::time::Instant::now)), if stop_by.is_some() => {
                    process.kill();
                    break Err(Error::agent(format!("the agent did not stop within {} s; it was ended", grace.as_secs())));
                }
            }
        };
        process.settle().await;
        let failed = answer.is_err() || stop_by.is_some();
        let (left_running, rest) = {
            let mut mapper = self.mapper.lock().unwrap_or_else(|e| e.into_inner());
            (stop_by.is_some() && mapper.any_running(), mapper.finish(failed))
        };
        self.write_kept(rest);
        match answer {
            Ok(r) => match r.stop_reason {
                StopReason::Cancelled => self.notice("Stopped.".into(), NoticeTone::Info),
                StopReason::Refusal => self.notice("The agent refused to go on.".into(), NoticeTone::Warn),
                StopReason::MaxTokens => {
                    self.notice("The reply reached the model's token limit.".into(), NoticeTone::Warn)
                }
                StopReason::MaxTurnRequests => self
                    .notice("The turn reached the agent's limit of model requests.".into(), NoticeTone::Warn),
                _ => {}
            },
            // An exit is told by the pump, with its status.
            Err(e) => {
                if process.exit_status(Duration::from_secs(1)).await.is_none() {
                    self.notice(e.to_string(), NoticeTone::Error);
                }
            }
        }
        self.close_cards();
        if left_running {
            // The agent ended the turn but not its call (Codex leaves a
            // cancelled command running): it is stopped, and with it what
            // its tools started; the next message starts it again.
            self.notice(
                "A call was still running when the turn stopped: the agent was stopped to end it. \
                 The next message starts it again."
                    .into(),
                NoticeTone::Info,
            );
            self.stop_process().await;
        }
        self.end_turn(turn);
    }

    fn end_turn(&self, turn: Turn) {
        if self.unsaved.load(Ordering::SeqCst) {
            self.save();
        }
        self.busy.store(false, Ordering::SeqCst);
        self.touch();
        turn.end();
    }

    /// A permission request: a card, and the answer back to the agent.
    async fn card(
        self: Arc<Self>,
        request: RequestPermissionRequest,
        responder: Responder<RequestPermissionResponse>,
        kept: Option<KeptAsk>,
        card: AbortController,
    ) {
        let acp_call = request.tool_call.tool_call_id.0.to_string();
        let view = self.mapper.lock().unwrap_or_else(|e| e.into_inner()).call_view(&request.tool_call);
        let allow_always = self.pane.collie().allow_always();
        let mut ours: Vec<(String, &agent_client_protocol::v1::schema::PermissionOption)> = Vec::new();
        let mut options = Vec::new();
        for (n, o) in request.options.iter().enumerate() {
            let always = o.kind == PermissionOptionKind::AllowAlways;
            if always && !allow_always {
                continue; // never over HTTPS (the SDK's rule)
            }
            let id = option_id_for(&o.option_id.0, n);
            let mut option = AskOption::new(id.clone(), o.name.clone());
            option = match o.kind {
                PermissionOptionKind::RejectOnce | PermissionOptionKind::RejectAlways => {
                    option.style(OptionStyle::Danger)
                }
                _ => option.style(OptionStyle::Primary),
            };
            if always {
                option = option.always();
            }
            ours.push((id, o));
            options.push(option);
        }
        let cancelled = || RequestPermissionResponse::new(RequestPermissionOutcome::Cancelled);
        let title = request.tool_call.fields.title.clone().filter(|t| !t.trim().is_empty());
        let title = title.unwrap_or_else(|| format!("Allow {}?", view.tool.call));
        if options.is_empty() {
            self.forget_card(&acp_call);
            let _ = responder.respond(cancelled());
            self.notice(
                format!(
                    "The agent asked with only “allow always” options, which are off here: refused (it hears “cancelled”): “{}”",
                    quote(&title)
                ),
                NoticeTone::Warn,
            );
            return;
        }
        let mut spec =
            AskSpec::choice(call_id_for(&acp_call), title.clone(), options).tool(view.tool.clone());
        if let Some(item) = &view.item {
            spec = spec.item_id(item.as_str());
        }
        if let Some(kept) = kept {
            // Asked again after a restart: the card kept is raised (same
            // id and hash, so an answer held for it lands) when it offers
            // the same options; else this one is raised under its id.
            let same = matches!(&kept.ask().kind, AskKind::Choice { options: old }
                if old.iter().map(|o| o.id.as_str()).eq(ours.iter().map(|(id, _)| id.as_str())));
            if same {
                spec = kept.claim();
            } else {
                // Claimed, not closed: this card takes its id (an answer
                // held for the old one fails its hash and is dropped).
                drop(kept.claim());
            }
        }
        self.touch();
        let mut raised = true;
        let chosen = match self.pane.ask_with(spec, Some(card.signal())) {
            Ok(handle) => handle.decided().await.ok().and_then(|d| d.answer.option_id().map(str::to_owned)),
            Err(e) => {
                // The phone cannot show it (23 options where a card holds
                // 8, …): the pane says so, not only a log line.
                raised = false;
                self.pane
                    .collie()
                    .warn(&format!("durable-acp: the card of tool call {acp_call} was not raised: {e}"));
                self.notice(
                    format!(
                        "The agent asked something the phone cannot show as a card ({e}): refused (it hears “cancelled”): “{}”",
                        quote(&title)
                    ),
                    NoticeTone::Warn,
                );
                None
            }
        };
        self.forget_card(&acp_call);
        self.touch();
        let picked = chosen.and_then(|id| ours.iter().find(|(ours, _)| *ours == id).map(|(_, o)| *o));
        let refused = match picked {
            Some(o) => {
                let outcome = SelectedPermissionOutcome::new(o.option_id.clone());
                let _ = responder
                    .respond(RequestPermissionResponse::new(RequestPermissionOutcome::Selected(outcome)));
                matches!(o.kind, PermissionOptionKind::RejectOnce | PermissionOptionKind::RejectAlways)
            }
            None => {
                let _ = responder.respond(cancelled());
                // Closed with no answer (a stop, a close, the agent's end):
                // nobody refused the call, and it did not run.
                if raised {
                    let items = self.mapper.lock().unwrap_or_else(|e| e.into_inner()).unanswered(&acp_call);
                    self.write(items);
                }
                false
            }
        };
        if refused {
            let items = self.mapper.lock().unwrap_or_else(|e| e.into_inner()).deny(&acp_call);
            self.write(items);
        }
    }

    /// A card is no longer open; below the limit, the next burst past it is told again.
    fn forget_card(&self, acp_call: &str) {
        let mut cards = self.cards.lock().unwrap_or_else(|e| e.into_inner());
        cards.remove(acp_call);
        if cards.len() < CARDS_OPEN_MAX {
            self.refusing_cards.store(false, Ordering::SeqCst);
        }
    }
}

/// Reads one process's events for as long as it runs, and shows them.
async fn pump(
    conversation: Weak<Conversation>,
    process: Arc<AgentProcess>,
    mut events: mpsc::Receiver<AgentEvent>,
) {
    loop {
        let Some(c) = conversation.upgrade() else { return };
        let wake = c.mapper.lock().unwrap_or_else(|e| e.into_inner()).flush_at();
        let event = tokio::select! {
            event = events.recv() => event,
            () = tokio::time::sleep_until(wake.map_or_else(tokio::time::Instant::now, tokio::time::Instant::from_std)), if wake.is_some() => {
                let items = c.mapper.lock().unwrap_or_else(|e| e.into_inner()).flush(Instant::now());
                c.write(items);
                continue;
            }
        };
        match event {
            None => return,
            Some(AgentEvent::Update(n)) => {
                process.gate.add_permits(1);
                process.updates_read.fetch_add(1, Ordering::SeqCst);
                if n.session_id.0.as_ref() != c.session_id {
                    tracing::warn!("acp: an update for a session this agent does not run here; dropped");
                    continue;
                }
                if let SessionUpdate::CurrentModeUpdate(update) = &n.update {
                    c.agent_mode(&process, &update.current_mode_id.0);
                    continue;
                }
                let (items, title) = {
                    let mut mapper = c.mapper.lock().unwrap_or_else(|e| e.into_inner());
                    (mapper.on_update(&n.update, Instant::now()), mapper.take_title())
                };
                c.write(items);
                if let Some(title) = title {
                    c.agent_title(title);
                }
            }
            Some(AgentEvent::Permission(request, responder)) => {
                if request.session_id.0.as_ref() != c.session_id {
                    tracing::warn!(
                        "acp: a permission request for a session this agent does not run here; cancelled"
                    );
                    let _ = responder
                        .respond(RequestPermissionResponse::new(RequestPermissionOutcome::Cancelled));
                    continue;
                }
                let kept = c
                    .kept
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .remove(&call_id_for(&request.tool_call.tool_call_id.0));
                if kept.is_some() {
                    c.asked_again.store(true, Ordering::SeqCst);
                }
                // Counted open here, in the order asked: a burst cannot
                // pass the limit before its cards' tasks run.
                let title = request.tool_call.fields.title.clone().unwrap_or_default();
                if c.has_card(&request.tool_call.tool_call_id.0) {
                    // The same call asked twice while its card is open: the
                    // card stays (and is the one a stop closes).
                    request_again(&c, &title, responder);
                    continue;
                }
                match c.open_card(&request.tool_call.tool_call_id.0, &title) {
                    Some(card) => {
                        tokio::spawn(c.clone().card(request, responder, kept, card));
                    }
                    None => {
                        let _ = responder
                            .respond(RequestPermissionResponse::new(RequestPermissionOutcome::Cancelled));
                        if let Some(kept) = kept {
                            kept.close();
                        }
                    }
                }
            }
            Some(AgentEvent::Elicitation(request, responder)) => {
                tokio::spawn(c.clone().elicit(request, responder));
            }
            Some(AgentEvent::Barrier(done)) => {
                let _ = done.send(());
            }
            Some(AgentEvent::Exited(how)) => {
                // It no longer counts against the limit (unless another
                // process took its place meanwhile: that one counts).
                let mine = c
                    .live
                    .try_lock()
                    .is_ok_and(|slot| slot.as_ref().is_some_and(|l| Arc::ptr_eq(&l.process, &process)));
                if mine {
                    c.running.store(false, Ordering::SeqCst);
                }
                c.close_cards();
                if !process.ending.load(Ordering::SeqCst) {
                    let rest = c.mapper.lock().unwrap_or_else(|e| e.into_inner()).finish(true);
                    c.write(rest);
                    c.notice(
                        format!("The agent exited ({how}). The next message starts it again."),
                        NoticeTone::Error,
                    );
                    c.save();
                }
                return;
            }
        }
    }
}

/// The pane's mode buttons (`mode-<id>`; a weak handle, as [`Chat`]).
struct ModeButtons(Weak<Conversation>);

impl ActionHandler for ModeButtons {
    async fn action(&self, req: ActionRequest) -> HandlerResult {
        let Some(c) = self.0.upgrade() else { return Err(Refusal::new("the conversation is closed")) };
        match crate::modes::mode_of_button(req.action.as_str()) {
            Some(mode) => c.press_mode(mode.to_owned()).await,
            None => Err(Refusal::not_supported()),
        }
    }
}

/// The pane's chat handler (a weak handle: a closed conversation's pane does not keep it).
struct Chat(Weak<Conversation>);

impl ChatHandler for Chat {
    async fn turn(&self, turn: Turn) {
        let Some(c) = self.0.upgrade() else { return };
        let text = turn.text().to_owned();
        c.run_turn(turn, text).await;
    }
}

/// A permission request for a call whose card is open already: refused
/// (`cancelled`), and the pane says so.
fn request_again(c: &Conversation, title: &str, responder: Responder<RequestPermissionResponse>) {
    let _ = responder.respond(RequestPermissionResponse::new(RequestPermissionOutcome::Cancelled));
    c.notice(
        format!(
            "The agent asked again about a call whose card is open: refused (it hears “cancelled”): “{}”",
            quote(title)
        ),
        NoticeTone::Warn,
    );
}

/// A prefix of item ids not used before in this pane, even across runs:
/// `<what>-<ms since the epoch, base 36>-<n>`.
pub(crate) fn new_prefix(what: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    format!("{what}-{}-{n}", base36(now_ms()))
}

fn base36(mut n: u64) -> String {
    const DIGITS: &[u8] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let mut out = Vec::new();
    loop {
        out.push(DIGITS[(n % 36) as usize]);
        n /= 36;
        if n == 0 {
            break;
        }
    }
    out.reverse();
    String::from_utf8(out).unwrap_or_default()
}

/// Text quoted in a notice: its first line, at most 200 characters.
fn quote(text: &str) -> String {
    let line = text.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or("");
    let mut out: String = line.chars().take(200).collect();
    if out.len() < line.len() || text.trim().lines().count() > 1 {
        out.push('…');
    }
    out
}

/// Waits until an agent that replays after answering its load (Gemini CLI,
/// `GEMINI_CLI`) has gone quiet: no update read for 300 ms, 5 s at most.
async fn replay_waited_out(process: &AgentProcess) {
    let give_up = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        let before = process.updates_read.load(Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(300)).await;
        process.settle().await;
        if process.updates_read.load(Ordering::SeqCst) == before || tokio::time::Instant::now() >= give_up {
            return;
        }
    }
}

/// `HH:MM` (UTC) of the minute after the one `at_ms` falls in.
fn minute_after(at_ms: u64) -> String {
    let minute = (at_ms / 60_000 + 1) % (24 * 60);
    format!("{:02}:{:02}", minute / 60, minute % 60)
}
