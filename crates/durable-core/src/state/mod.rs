//! The core's state: layout, panes with their views and event tails, the
//! change sequence the state poll reads, the open asks, held answers and
//! decided ids.
//!
//! One owner per change: every field is private to this module, and each
//! change is a method named after what it does (`open_ask`, `close_pane`,
//! `set_pane_state`, …). The rest of the crate reads through accessors and
//! does what lies outside the state (resolving an ask's awaitable, queuing
//! jobs, waking the driver).
//!
//! The state is plain data: it holds no channel, signal or handler. What
//! belongs to the program's side (an ask's awaitable, a turn's steer inbox
//! and stop signal, a pane's handlers, a waiter's wake-up) is named here by
//! a [`Link`] number, and what the state wants done with one comes out as
//! an [`Effect`] that the core applies as it lets the state go (under its
//! lock, but for the warn lines and the handlers let go of, after it).

mod asks;
mod conversations;
mod deliveries;
mod effects;
mod journal;
mod kept;
mod layout;
mod panes;
mod receipt_steps;
mod send_recovery;
mod writers;

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::Arc;

use bytes::Bytes;

use durable_types::exchange::Tag;
use durable_types::{DecidedBy, Id, STATE_SEQ_MEMORY, StarterView, Timestamp};

use crate::data::receipt::{KeptAskRecord, Receipt};
use crate::timers::{Timer, Timers};

pub use asks::Hold;
pub use conversations::{ConversationStep, ConversationsJournal};
pub use deliveries::{ChatSlot, Delivery, DeliveryStage};
pub use effects::{Effect, Link};
pub use journal::{AskOp, AsksJournal, Journal, JournalName};
pub use kept::{KeptLoad, KeptPhase};
pub use layout::TabKey;
pub use panes::{PaneData, PaneFields, QueuedSend, SessionId, Takers};
pub use receipt_steps::{Ending, ReceiptStep, Stage};
pub use send_recovery::{LeftSend, RecoveryStage, SendRecovery};
pub use writers::Writers;

use asks::OpenAsk;
use layout::WorkspaceData;
use panes::ClosedPane;

/// Collie versions remembered as warned about, and as greeted (the version
/// comes from the network); past it the oldest is forgotten.
const WARNED_VERSIONS_MAX: usize = 64;

/// The whole mutable state (durable-runtime keeps it behind one lock, held
/// only between awaits).
#[derive(Clone, Debug)]
pub struct State {
    /// Raw events each pane keeps (from the options).
    tail_limit: usize,
    ready: bool,
    seq: u64,
    layout_seq: u64,
    workspaces: Vec<WorkspaceData>,
    /// Boxed: a map keeps room for more entries than it holds, and an idle
    /// pane's room is then a pointer, not the whole pane.
    panes: HashMap<Id, Box<PaneData>>,
    removed: VecDeque<(Id, u64)>,
    closed: Vec<ClosedPane>,
    starters: Vec<StarterView>,
    asks: HashMap<String, OpenAsk>,
    next_ask_order: u64,
    decided: HashMap<Arc<str>, (DecidedBy, Timestamp, u64)>,
    decided_order: VecDeque<(Arc<str>, u64)>,
    decided_gen: u64,
    holds: HashMap<String, Hold>,
    hold_by_request: HashMap<Id, String>,
    /// The bytes the held answers count, in all (`Hold::bytes`).
    held_bytes: usize,
    /// Receipts applied but not (yet) in the store: a repeat replays them.
    memory_receipts: HashMap<Id, Receipt>,
    /// Request ids being processed now (§9), each with the repeats waiting
    /// for its first request's outcome, in arrival order.
    claims: HashMap<Id, Vec<Link>>,
    /// The writes going through the receipt step now, by the link of
    /// their request.
    receipt_steps: HashMap<Link, ReceiptStep>,
    deliveries: HashMap<Link, Delivery>,
    /// The recovery of the sends the last run left, while it runs.
    send_recovery: Option<SendRecovery>,
    /// Turns of sends running on the driver, and who waits for none.
    turns_running: usize,
    idle_waiters: Vec<Link>,
    /// Each pane's writer, and who waits (§8).
    writers: Writers,
    /// The store's journal of asks (§7.2).
    asks_journal: AsksJournal,
    /// The store's journal of conversations, when it keeps them.
    conversations: ConversationsJournal,
    keeps_conversations: bool,
    /// Whether a pane's item is shown only once the store has it (a store
    /// that keeps conversations across processes), and the panes with
    /// events waiting for it.
    items_wait_for_store: bool,
    /// Whether an ask is shown only once the store has kept it (a store
    /// that keeps asks): a card the phone saw is one a crash keeps.
    asks_wait_for_store: bool,
    /// The asks the store had at this start, by id, with their cards'
    /// hashes and expiries, until forgotten: one raised again as it was is
    /// shown at once (the store has it already).
    asks_in_store: HashMap<String, (String, Option<Timestamp>)>,
    panes_waiting: HashSet<Id>,
    /// Each item whose op waits in the journal, by (pane, item id): the
    /// op's number there (stale once taken; cleared when none waits).
    queued_items: HashMap<(String, Id), u64>,
    /// Restore numbers handed out, and the journal's length at the last.
    restores: u64,
    restores_pushed_at: u64,
    /// Panes a write of conversations failed for (or was dropped), each
    /// with the journal's length up to that write's last step: a send
    /// whose turn began before it is not recorded done.
    conversation_failures: HashMap<String, u64>,
    /// The asks the last run left open (§7.2).
    kept: KeptPhase,
    timers: Timers,
    warned_versions: VecDeque<String>,
    /// Collie versions whose `POST /hello` was told to `tracing`.
    greeted_versions: VecDeque<String>,
    has_history: bool,
    /// Whether any chat / action handler was ever set (for the default caps).
    has_chat: bool,
    has_actions: bool,
    has_hooks: bool,
    /// What durable-runtime applies to the program's side before it lets the
    /// state go.
    effects: Vec<Effect>,
    /// The last event seq of each pane id closed in this process: a pane
    /// opened again under that id goes on counting from there, so a reader's
    /// `after` keeps its meaning within the epoch.
    seq_floor: HashMap<Id, u64>,
    /// Each open pane's last change, by seq: a delta poll reads the changes
    /// after `since` here, not every pane (an entry whose pane changed
    /// again or closed is stale, and skipped).
    changes: BTreeMap<u64, Id>,
    layout_pos_seq: Option<u64>,
    /// The full state answer's bytes at a seq: polls between changes share them.
    full_answer: Option<(u64, Bytes)>,
    /// The last delta answer's bytes: (seq, since, bytes). Pollers at the
    /// same place share it until the next change.
    delta_answer: Option<(u64, u64, Bytes)>,
    /// The state's `ETag` at a seq, made once per change, not per poll.
    etag: Option<(u64, Tag)>,
    /// The last pane snapshot answer (a reader behind the tail) at a seq.
    snapshot_answer: Option<(u64, Id, Bytes)>,
    /// Where an event is encoded, at its first read, before it is kept:
    /// kept events are then one allocation of their own size each, not a
    /// buffer grown by doubling from 128 bytes.
    event_scratch: Vec<u8>,
}

impl State {
    pub fn new(tail_limit: usize) -> Self {
        State {
            tail_limit,
            ready: false,
            seq: 0,
            layout_seq: 0,
            workspaces: Vec::new(),
            panes: HashMap::new(),
            removed: VecDeque::new(),
            closed: Vec::new(),
            starters: Vec::new(),
            asks: HashMap::new(),
            next_ask_order: 0,
            decided: HashMap::new(),
            decided_order: VecDeque::new(),
            decided_gen: 0,
            holds: HashMap::new(),
            hold_by_request: HashMap::new(),
            held_bytes: 0,
            memory_receipts: HashMap::new(),
            claims: HashMap::new(),
            receipt_steps: HashMap::new(),
            deliveries: HashMap::new(),
            send_recovery: None,
            turns_running: 0,
            idle_waiters: Vec::new(),
            writers: Writers::default(),
            asks_journal: AsksJournal::new(|| Effect::DrainAsks),
            conversations: conversations::journal(),
            keeps_conversations: false,
            items_wait_for_store: false,
            asks_wait_for_store: false,
            asks_in_store: HashMap::new(),
            panes_waiting: HashSet::new(),
            queued_items: HashMap::new(),
            restores: 0,
            restores_pushed_at: 0,
            conversation_failures: HashMap::new(),
            kept: KeptPhase::default(),
            timers: Timers::default(),
            warned_versions: VecDeque::new(),
            greeted_versions: VecDeque::new(),
            has_history: false,
            has_chat: false,
            has_actions: false,
            has_hooks: false,
            effects: Vec::new(),
            seq_floor: HashMap::new(),
            changes: BTreeMap::new(),
            layout_pos_seq: None,
            event_scratch: Vec::new(),
            full_answer: None,
            delta_answer: None,
            etag: None,
            snapshot_answer: None,
        }
    }

    /// Asks for something to be done on the program's side.
    pub fn effect(&mut self, effect: Effect) {
        self.effects.push(effect);
    }

    /// What was asked for since the last call, oldest first (the queue
    /// keeps its room for the next ones).
    pub fn drain_effects(&mut self) -> std::vec::Drain<'_, Effect> {
        self.effects.drain(..)
    }

    /// The full state answer kept for `seq`, if it is the current one.
    pub fn full_answer(&self) -> Option<Bytes> {
        self.full_answer.as_ref().filter(|(seq, _)| *seq == self.seq).map(|(_, b)| b.clone())
    }

    /// The snapshot answer kept for `pane` at the current seq.
    pub fn snapshot_answer(&self, pane: &Id) -> Option<Bytes> {
        self.snapshot_answer
            .as_ref()
            .filter(|(seq, id, _)| *seq == self.seq && id == pane)
            .map(|(_, _, b)| b.clone())
    }

    /// Keeps a pane's snapshot answer of the current seq (one pane's: the
    /// readers behind at one time mostly read the same pane).
    pub fn keep_snapshot_answer(&mut self, pane: &Id, body: Bytes) {
        self.snapshot_answer = Some((self.seq, pane.clone(), body));
    }

    /// Keeps the full state answer of the current seq.
    pub fn keep_full_answer(&mut self, body: Bytes) {
        self.full_answer = Some((self.seq, body));
    }

    /// The size of the last full state answer kept, current or not: the
    /// next one is about as large.
    pub fn full_answer_len(&self) -> usize {
        self.full_answer.as_ref().map_or(0, |(_, b)| b.len())
    }

    /// The delta answer since `since` kept at the current seq, if any.
    pub fn delta_answer(&self, since: u64) -> Option<Bytes> {
        self.delta_answer
            .as_ref()
            .filter(|(seq, n, _)| *seq == self.seq && *n == since)
            .map(|(_, _, b)| b.clone())
    }

    /// Keeps the delta answer since `since` at the current seq.
    pub fn keep_delta_answer(&mut self, since: u64, body: Bytes) {
        self.delta_answer = Some((self.seq, since, body));
    }

    /// The state's `ETag` at the current seq, if a poll made it already.
    pub fn kept_etag(&self) -> Option<Tag> {
        self.etag.as_ref().filter(|(at, _)| *at == self.seq).map(|(_, tag)| tag.clone())
    }

    /// The state's `ETag` at the current seq: `"<epoch>-<seq>"`.
    pub fn etag(&mut self, epoch: &str) -> Tag {
        let seq = self.seq;
        match &self.etag {
            Some((at, tag)) if *at == seq => tag.clone(),
            _ => {
                let tag = Tag::from(format!("\"{epoch}-{seq}\""));
                self.etag = Some((seq, tag.clone()));
                tag
            }
        }
    }

    /// The open panes changed after `seq`, in layout order (as of the last
    /// [`refresh_layout_order`](Self::refresh_layout_order)): O(changes),
    /// not O(panes).
    pub fn panes_changed_since(&self, seq: u64) -> Vec<&PaneData> {
        let mut changed: Vec<(usize, &PaneData)> = self
            .changes
            .range(seq.saturating_add(1)..)
            .filter_map(|(at, id)| self.panes.get(id).map(|p| &**p).filter(|p| p.changed_at() == *at))
            .filter_map(|p| self.layout_pos_seq.and_then(|at| p.layout_pos_at(at)).map(|i| (i, p)))
            .collect();
        changed.sort_by_key(|(i, _)| *i);
        changed.into_iter().map(|(_, p)| p).collect()
    }

    /// The change sequence the state poll reads.
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// The sequence of the last layout change.
    pub fn layout_seq(&self) -> u64 {
        self.layout_seq
    }

    pub fn is_ready(&self) -> bool {
        self.ready
    }

    /// The agent is ready; the poll sees it once.
    pub fn mark_ready(&mut self) {
        if !self.ready {
            self.ready = true;
            self.bump();
        }
    }

    /// Something a poll can see changed: the sequence grows.
    fn bump(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    /// The layout changed (workspaces, tabs, pane membership, closed, starters).
    fn bump_layout(&mut self) {
        self.layout_seq = self.bump();
    }

    // What the program registered, for the default capabilities (§4).

    pub fn has_chat(&self) -> bool {
        self.has_chat
    }

    pub fn has_actions(&self) -> bool {
        self.has_actions
    }

    pub fn has_hooks(&self) -> bool {
        self.has_hooks
    }

    pub fn has_history(&self) -> bool {
        self.has_history
    }

    /// An agent-wide chat handler was set.
    pub fn note_chat_handler(&mut self) {
        self.has_chat = true;
    }

    /// An agent-wide action handler was set.
    pub fn note_action_handler(&mut self) {
        self.has_actions = true;
    }

    /// Layout hooks were set.
    pub fn note_hooks(&mut self) {
        self.has_hooks = true;
    }

    // Deadlines.

    /// Adds a deadline; says whether it is now the earliest.
    pub fn add_timer(&mut self, at: Timestamp, timer: Timer) -> bool {
        self.timers.add(at, timer)
    }

    pub fn next_deadline(&self) -> Option<Timestamp> {
        self.timers.next_deadline()
    }

    /// Removes and returns every deadline at or before `now`.
    pub fn take_due(&mut self, now: Timestamp) -> Vec<Timer> {
        self.timers.due(now)
    }

    // Request ids being processed now (§9): the first request of an id
    // holds it; a repeat that comes meanwhile waits for its outcome, and
    // replays its receipt or, when it has none (refused, failed, dropped),
    // claims the id again itself.

    /// Claims `request_id` for a request about to be processed: `true` when
    /// no other request holds it. Otherwise the caller waits for the
    /// holder's outcome ([`State::wait_for_request`], under the same lock).
    pub fn claim_request(&mut self, request_id: &Id) -> bool {
        if self.claims.contains_key(request_id) {
            return false;
        }
        self.claims.insert(request_id.clone(), Vec::new());
        true
    }

    /// `waiter` hears the outcome of the request holding `request_id`
    /// ([`Effect::Settle`]); at once, with nothing, when none holds it.
    pub fn wait_for_request(&mut self, request_id: &Id, waiter: Link) {
        match self.claims.get_mut(request_id) {
            Some(waiters) => waiters.push(waiter),
            None => self.effects.push(Effect::Settle { waiter, receipt: None }),
        }
    }

    /// `waiter` stopped waiting for `request_id` (its request was dropped).
    pub fn stop_waiting_for_request(&mut self, request_id: &Id, waiter: Link) {
        if let Some(waiters) = self.claims.get_mut(request_id) {
            waiters.retain(|w| *w != waiter);
        }
    }

    /// The request holding `request_id` ended with `receipt` (`None`:
    /// refused, failed or dropped): the id is free, and each repeat waiting
    /// for it hears the outcome, in the order they came. Only the first
    /// settle of a claim counts.
    pub fn settle_request(&mut self, request_id: &Id, receipt: Option<Receipt>) {
        let Some(waiters) = self.claims.remove(request_id) else { return };
        for waiter in waiters {
            self.effects.push(Effect::Settle { waiter, receipt: receipt.clone() });
        }
    }

    // The receipt steps under way (`receipt_steps.rs`; their rules are
    // the machine's, in `once.rs`).

    /// The receipt step of `request`, taken out to be moved on (put back
    /// with [`State::put_receipt_step`] unless it ended).
    pub fn take_receipt_step(&mut self, request: Link) -> Option<ReceiptStep> {
        self.receipt_steps.remove(&request)
    }

    /// The receipt step of `request`, as it stands now.
    pub fn receipt_step(&self, request: Link) -> Option<&ReceiptStep> {
        self.receipt_steps.get(&request)
    }

    /// Keeps where the receipt step of `request` stands.
    pub fn put_receipt_step(&mut self, request: Link, step: ReceiptStep) {
        self.receipt_steps.insert(request, step);
    }

    // The deliveries under way (`deliveries.rs`; their rules are the
    // machine's, in `delivery.rs`).

    /// The delivery of `link`, taken out to be moved on (put back with
    /// [`State::put_delivery`] unless it ended).
    pub fn take_delivery(&mut self, link: Link) -> Option<Delivery> {
        self.deliveries.remove(&link)
    }

    /// Keeps where the delivery of `link` stands.
    pub fn put_delivery(&mut self, link: Link, delivery: Delivery) {
        self.deliveries.insert(link, delivery);
    }

    /// How many deliveries are under way.
    pub fn deliveries_under_way(&self) -> usize {
        self.deliveries.len()
    }

    // The store's journal of asks (`journal.rs`).

    /// An ask opened: a store that keeps asks keeps it. Returns the
    /// number of the journal's op that keeps it.
    pub fn journal_keep(&mut self, record: KeptAskRecord) -> u64 {
        self.asks_journal.push(AskOp::Keep(Box::new(record)), &mut self.effects);
        self.asks_journal.pushed() - 1
    }

    /// An ask closed: the store forgets it.
    pub fn journal_forget(&mut self, ask_id: String) {
        self.asks_in_store.remove(&ask_id);
        self.asks_journal.push(AskOp::Forget(ask_id), &mut self.effects);
    }

    /// The next op for the store, or `None`: the job that applies them ends.
    pub fn next_ask_op(&mut self) -> Option<AskOp> {
        self.asks_journal.take_next()
    }

    // What the runtime asks of either journal (`journal.rs`).

    /// The store applied (or failed) the `count` ops of `journal` taken last.
    pub fn journal_applied(&mut self, journal: JournalName, count: u64) {
        self.journal_done(journal, count, false);
    }

    /// The `count` ops of `journal` taken last were dropped before the
    /// store said anything.
    pub fn journal_dropped(&mut self, journal: JournalName, count: u64) {
        self.journal_done(journal, count, true);
    }

    /// Ops done either way: who waited for them is woken, and what readers
    /// waited for is shown.
    fn journal_done(&mut self, journal: JournalName, count: u64, dropped: bool) {
        let effects = &mut self.effects;
        match journal {
            JournalName::Asks => {
                let from = self.asks_journal.applied_so_far();
                if dropped {
                    self.asks_journal.dropped(count, effects);
                } else {
                    self.asks_journal.applied(count, effects);
                }
                self.asks_kept_from(from);
            }
            JournalName::Conversations if dropped => self.conversations.dropped(count, effects),
            JournalName::Conversations => self.conversations.applied(count, effects),
        }
        self.show_kept_events();
    }

    /// How many ops were pushed to `journal` so far: what a waiter for
    /// everything waits for.
    pub fn journal_pushed(&self, journal: JournalName) -> u64 {
        match journal {
            JournalName::Asks => self.asks_journal.pushed(),
            JournalName::Conversations => self.conversations.pushed(),
        }
    }

    /// Whether the store applied the first `target` ops of `journal`.
    pub fn journal_has_applied(&self, journal: JournalName, target: u64) -> bool {
        match journal {
            JournalName::Asks => self.asks_journal.has_applied(target),
            JournalName::Conversations => self.conversations.has_applied(target),
        }
    }

    /// `waiter` is woken once the store applied the first `target` ops of
    /// `journal`.
    pub fn wait_for_journal(&mut self, journal: JournalName, target: u64, waiter: Link) {
        match journal {
            JournalName::Asks => self.asks_journal.wait(target, waiter, &mut self.effects),
            JournalName::Conversations => self.conversations.wait(target, waiter, &mut self.effects),
        }
    }

    /// `waiter` stopped waiting for `journal` (its caller went away).
    pub fn stop_waiting_for_journal(&mut self, journal: JournalName, waiter: Link) {
        match journal {
            JournalName::Asks => self.asks_journal.stop_waiting(waiter),
            JournalName::Conversations => self.conversations.stop_waiting(waiter),
        }
    }

    // The asks the last run left open (`kept.rs`).

    /// Who reads the last run's asks from the store.
    pub fn begin_kept_load(&mut self) -> KeptLoad {
        self.kept.begin_load()
    }

    /// `waiter` is woken when the read of the last run's asks ends.
    pub fn wait_for_kept_load(&mut self, waiter: Link) {
        self.kept.wait(waiter, &mut self.effects);
    }

    /// The read of the last run's asks ended with `records`.
    pub fn kept_loaded(&mut self, records: Vec<KeptAskRecord>) {
        let in_store = records.iter().map(|r| (r.ask.id.clone(), (r.ask.hash.clone(), r.ask.expires_at)));
        self.asks_in_store.extend(in_store);
        self.kept.loaded(records, &mut self.effects);
    }

    /// The read of the last run's asks failed or was dropped.
    pub fn kept_load_failed(&mut self) {
        self.kept.load_failed(&mut self.effects);
    }

    /// The last run's asks not handed out yet, handed out now.
    pub fn take_kept(&mut self) -> Vec<KeptAskRecord> {
        self.kept.take()
    }

    /// An ask handed out and dropped unclaimed comes back, or is the
    /// caller's to close (`Some`).
    pub fn give_back_kept(&mut self, record: KeptAskRecord) -> Option<KeptAskRecord> {
        self.kept.give_back(record)
    }

    /// `ready()`: nothing more is handed out; the asks left are returned,
    /// to close.
    pub fn settle_kept(&mut self) -> Vec<KeptAskRecord> {
        self.kept.settle(&mut self.effects)
    }

    // Each pane's writer (`writers.rs`).

    /// `writer` asks for `pane`'s write: `true` when it holds it now;
    /// otherwise it is woken ([`Effect::Wake`]) when it does.
    pub fn request_write(&mut self, pane: &Id, writer: Link, from_phone: bool) -> bool {
        self.writers.request(pane, writer, from_phone)
    }

    /// Whether `writer` holds `pane`'s write now.
    pub fn holds_write(&self, pane: &Id, writer: Link) -> bool {
        self.writers.holds(pane, writer)
    }

    /// `writer` is done with `pane`'s write, or stopped waiting for it.
    pub fn end_write(&mut self, pane: &Id, writer: Link) {
        self.writers.end(pane, writer, &mut self.effects);
    }

    /// The sends the last run left are being put back in their queues: the
    /// phone's writes wait for that.
    pub fn begin_send_recovery(&mut self) {
        self.writers.begin_recovery();
    }

    /// The recovery of the sends is over, however it ended.
    pub fn end_send_recovery(&mut self) {
        self.send_recovery = None;
        self.writers.end_recovery(&mut self.effects);
    }

    /// The recovery of the sends, taken out to be moved on (put back with
    /// [`State::put_send_recovery`] unless it ended).
    pub fn take_send_recovery(&mut self) -> Option<SendRecovery> {
        self.send_recovery.take()
    }

    /// Keeps where the recovery of the sends stands.
    pub fn put_send_recovery(&mut self, recovery: SendRecovery) {
        self.send_recovery = Some(recovery);
    }

    /// A pane closed: the writes waiting for it are woken (and find it closed).
    pub fn writes_pane_closed(&mut self, pane: &Id) {
        self.writers.pane_closed(pane, &mut self.effects);
    }

    // Turns of sends running (a graceful stop waits for none).

    /// A send's turn began on the driver.
    pub fn turn_began(&mut self) {
        self.turns_running += 1;
    }

    /// A send's turn ended (or its job was dropped): the last one wakes
    /// who waits for none.
    pub fn turn_ended(&mut self) {
        self.turns_running = self.turns_running.saturating_sub(1);
        if self.turns_running == 0 {
            for waiter in std::mem::take(&mut self.idle_waiters) {
                self.effects.push(Effect::Wake(waiter));
            }
        }
    }

    /// How many turns of sends run now.
    pub fn turns_running(&self) -> usize {
        self.turns_running
    }

    /// `waiter` is woken once no turn of a send runs (at once if none does).
    pub fn wait_for_idle(&mut self, waiter: Link) {
        if self.turns_running == 0 {
            self.effects.push(Effect::Wake(waiter));
        } else {
            self.idle_waiters.push(waiter);
        }
    }

    // Receipts kept in memory.

    pub fn memory_receipt(&self, request_id: &Id) -> Option<&Receipt> {
        self.memory_receipts.get(request_id)
    }

    /// Keeps a receipt that is applied but not in the store (yet).
    pub fn keep_receipt(&mut self, request_id: Id, receipt: Receipt) {
        self.memory_receipts.insert(request_id, receipt);
    }

    /// The store has the receipt now.
    pub fn forget_receipt(&mut self, request_id: &Id) {
        self.memory_receipts.remove(request_id);
    }

    /// Whether a Collie version is to be warned about: not among the last
    /// [`WARNED_VERSIONS_MAX`] warned about. Bounded, since the version comes
    /// from the network; a full memory forgets its oldest rather than
    /// silencing every version after it (a flood of made-up versions can
    /// make a real one warned about again, never unwarned).
    pub fn first_warning_for(&mut self, version: String) -> bool {
        first_of(&mut self.warned_versions, version)
    }

    /// Whether this is the first `POST /hello` from a Collie version (among
    /// the last [`WARNED_VERSIONS_MAX`], as [`first_warning_for`](Self::first_warning_for)).
    pub fn first_hello_from(&mut self, version: &str) -> bool {
        if self.greeted_versions.iter().any(|v| v == version) {
            return false;
        }
        first_of(&mut self.greeted_versions, version.to_owned())
    }

    /// Remembers a pane left the layout now, for `removed` in the poll.
    fn record_removed(&mut self, pane: Id) {
        let seq = self.seq;
        self.removed.push_back((pane, seq));
        while self.removed.front().is_some_and(|(_, s)| seq.saturating_sub(*s) > STATE_SEQ_MEMORY) {
            self.removed.pop_front();
        }
    }

    /// Pane ids removed after `seq` and not open again, each once (a pane
    /// closed, brought back and closed again is listed once).
    pub fn removed_since(&self, seq: u64) -> Vec<String> {
        let mut seen = HashSet::new();
        self.removed
            .iter()
            .filter(|(id, s)| *s > seq && !self.panes.contains_key(id) && seen.insert(id))
            .map(|(id, _)| id.to_string())
            .collect()
    }
}

/// Remembers `version` in a bounded memory; says whether it was new there.
fn first_of(memory: &mut VecDeque<String>, version: String) -> bool {
    if memory.contains(&version) {
        return false;
    }
    if memory.len() >= WARNED_VERSIONS_MAX {
        memory.pop_front();
    }
    memory.push_back(version);
    true
}
