//! Receipts (contract §9): the first successful answer to a request id is
//! kept, and a repeat gets it again with `replayed: true`.

use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet, VecDeque};
use std::fmt;
use std::sync::Mutex;

use std::future::Future;
use std::sync::Arc;

use crate::handlers::BoxFuture;
use durable_core::data::conversation::{
    ConversationOp, ItemsInOrder, KEPT_ITEMS_PER_CONVERSATION, KeptConversation, KeptConversationRow,
    RowPlace,
};
use durable_core::data::receipt::{KeptAskRecord, Lookup, PendingSend, Receipt, SendState, StoreError};
use durable_types::{EVICTED_MEMORY_FACTOR, RECEIPTS_PER_GROUP};
use durable_types::{Item, Timestamp};

/// Where receipts live. `get` finds an id whatever group it was put in;
/// groups (`pane:<paneId>`, `starters`, `renames`, `closes`, `reopens`) only
/// decide eviction.
///
/// A store that keeps receipts across restarts makes a replay after a
/// restart still return the first answer (the default
/// [`MemoryReceiptStore`] forgets everything with the process). Write one
/// and give it to
/// [`CoreOptionsBuilder::receipts`](crate::CoreOptionsBuilder::receipts).
/// A store keeps a receipt as text: its status and its body's
/// [`json_text`](Receipt::json_text), read back with
/// [`Receipt::from_json_text`] ([`Receipt`] is also
/// `Serialize + Deserialize`, one JSON line, for a store that writes with
/// serde):
///
/// ```
/// use std::collections::HashMap;
/// use std::sync::{Arc, Mutex};
///
/// use durable_sdk::driver::ManualClock;
/// use durable_sdk::driver::exchange::{Caller, Request};
/// use durable_sdk::handlers::{ChatHandler, SendRequest};
/// use durable_sdk::stores::{Lookup, Receipt, ReceiptStore, StoreError};
/// use durable_sdk::types::Timestamp;
/// use durable_sdk::{Collie, CoreOptions, HandlerResult, PaneOptions, Turn, create_core};
///
/// /// What outlives the process: a file or a database table. A shared map
/// /// of each receipt's status and JSON text stands in for it here.
/// type Disk = Arc<Mutex<HashMap<String, (u16, String)>>>;
///
/// /// Keeps every receipt on "disk". `put` returns only once the receipt is
/// /// written: the core sends the answer after. A store that prunes old
/// /// receipts (by `group`) remembers the pruned ids and answers
/// /// `Lookup::Evicted` for them, so that a late repeat runs nothing.
/// struct DiskStore(Disk);
///
/// impl ReceiptStore for DiskStore {
///     async fn get(&self, request_id: &str) -> Result<Lookup, StoreError> {
///         let disk = self.0.lock().map_err(|_| StoreError::new("disk lock poisoned"))?;
///         match disk.get(request_id) {
///             None => Ok(Lookup::Unknown),
///             Some((status, text)) => Receipt::from_json_text(*status, text.clone())
///                 .map(Lookup::Found)
///                 .map_err(|e| StoreError::new(format!("a receipt is damaged: {e}"))),
///         }
///     }
///
///     async fn put(&self, request_id: &str, receipt: Receipt, _group: &str) -> Result<(), StoreError> {
///         let text = receipt.json_text().map_err(|e| StoreError::new(e.to_string()))?.to_owned();
///         let mut disk = self.0.lock().map_err(|_| StoreError::new("disk lock poisoned"))?;
///         disk.entry(request_id.to_owned()).or_insert((receipt.status, text)); // the first answer stays
///         Ok(())
///     }
/// }
///
/// /// The agent, counting the sends it takes (their turns run on a driver,
/// /// which this example has none of).
/// struct Agent(Arc<Mutex<usize>>);
///
/// impl ChatHandler for Agent {
///     async fn check_send(&self, _req: SendRequest) -> HandlerResult {
///         *self.0.lock().unwrap() += 1;
///         Ok(())
///     }
///     async fn turn(&self, _turn: Turn) {}
/// }
///
/// /// One run of the agent process: a fresh core (a new epoch) over the same disk.
/// fn start(disk: &Disk, epoch: &str, runs: &Arc<Mutex<usize>>) -> Collie {
///     let options = CoreOptions::builder()
///         .clock(ManualClock::new(Timestamp::from_millis(1_796_014_800_000)))
///         .epoch(epoch)
///         .receipts(DiskStore(disk.clone()));
///     let collie = create_core(options).unwrap();
///     let tab = collie.workspace("support", "Support").unwrap().tab("main", "Tickets").unwrap();
///     let pane = tab.pane("ticket-1", PaneOptions::new("Maria Lopez")).unwrap();
///     pane.on_send(Agent(runs.clone())).unwrap();
///     collie.ready();
///     collie
/// }
///
/// // What Collie sends, played here without a transport.
/// let send = || {
///     Request::post("/v1/panes/ticket-1/send", r#"{"requestId":"r-1","text":"hi"}"#, Caller::OtherProcess)
/// };
/// let disk = Disk::default();
/// let runs = Arc::new(Mutex::new(0));
/// let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
/// rt.block_on(async {
///     let first = start(&disk, "0123456789abcdef", &runs).driver().handle(send()).await.body_json();
///     assert_eq!(first["result"], "sent");
///     assert_eq!(first["replayed"], false);
///
///     // The agent restarts; Collie, unsure the send arrived, repeats it.
///     let again = start(&disk, "fedcba9876543210", &runs).driver().handle(send()).await.body_json();
///     assert_eq!(again["result"], "sent");
///     assert_eq!(again["replayed"], true); // the first answer, and nothing ran again
/// });
/// assert_eq!(*runs.lock().unwrap(), 1);
/// ```
pub trait ReceiptStore: Send + Sync + 'static {
    /// What the store knows of `request_id`.
    fn get(&self, request_id: &str) -> impl Future<Output = Result<Lookup, StoreError>> + Send;
    /// Stores the first successful answer to `request_id`. Returns once it is
    /// kept: the response leaves only after.
    fn put(
        &self,
        request_id: &str,
        receipt: Receipt,
        group: &str,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// What the store knows of `request_id`, asked by the write about to
    /// run it: the core calls this instead of [`get`](Self::get) in its
    /// receipt step, then runs the write when it is [`Lookup::Unknown`],
    /// then calls [`put`](Self::put) (a `200`) and in every case
    /// [`release`](Self::release).
    ///
    /// A store shared by several agent processes claims the id here until
    /// `put` or `release`, so that a repeat arriving at another process
    /// meanwhile waits and then finds the receipt (one process runs the
    /// write; the others replay its answer). The core already makes the
    /// repeats *within* one process wait for the first; a claim is only
    /// needed across processes. The default is [`get`](Self::get): no claim.
    ///
    /// Such a store's `put` must finish once begun, even when its future is
    /// dropped (its caller went away midway): a put that ended the claim
    /// with no receipt kept would let a waiting repeat at another process
    /// run the write again. The SDK's PostgreSQL store commits on a task of
    /// its own; the core puts a dropped write's receipt again (a put of a
    /// kept id keeps the first).
    fn claim(&self, request_id: &str) -> impl Future<Output = Result<Lookup, StoreError>> + Send {
        self.get(request_id)
    }

    /// Ends the claim [`claim`](Self::claim) took on `request_id`, if any:
    /// the write was refused or failed (nothing to keep, another process
    /// may run it), or `put` already ended the claim (nothing left to do).
    /// Called once after every `claim` that answered
    /// [`Lookup::Unknown`], also when the request is dropped midway, so it
    /// cannot wait: a store that must talk to its database does so in the
    /// background. The default does nothing.
    fn release(&self, request_id: &str) {
        let _ = request_id;
    }

    /// Records a send before it is answered (§9.1): the core calls it first
    /// — in state `Queued` for a send that waits for the pane, `Running` for
    /// one whose turn starts at once (one commit on the way to the turn) —
    /// then [`set_send_state`](Self::set_send_state) as its turn starts
    /// (when it waited) and ends. A send the core refuses is not recorded.
    /// A store that keeps these across a restart lets the next run deliver
    /// the sends still queued and close, with a notice, those whose turn
    /// the restart cut. The default keeps nothing (sends acknowledged
    /// before a restart are then gone with the process). Returns once kept.
    fn record_send(&self, send: PendingSend) -> impl Future<Output = Result<(), StoreError>> + Send {
        let _ = send;
        async { Ok(()) }
    }

    /// A recorded send moved on. An id not recorded is ignored.
    fn set_send_state(
        &self,
        request_id: &str,
        state: SendState,
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        let _ = (request_id, state);
        async { Ok(()) }
    }

    /// Where a recorded send stands (`None`: not recorded, or forgotten).
    fn send_state(
        &self,
        request_id: &str,
    ) -> impl Future<Output = Result<Option<SendState>, StoreError>> + Send {
        let _ = request_id;
        async { Ok(None) }
    }

    /// The recorded sends still `queued` or `running`, oldest first.
    fn unfinished_sends(&self) -> impl Future<Output = Result<Vec<PendingSend>, StoreError>> + Send {
        async { Ok(Vec::new()) }
    }

    /// Whether this store keeps the sends journal across a restart (it
    /// implements [`record_send`](Self::record_send) and
    /// [`unfinished_sends`](Self::unfinished_sends)): then the writes that
    /// arrive after [`ready`](crate::Collie::ready) wait (within the 5 s busy
    /// limit) until the last run's sends are back in their queues, so a
    /// repeat is decided once and a new send never overtakes them
    /// (the wire, §9.1: [`durable_sdk::wire`](https://docs.rs/durable-sdk/latest/durable_sdk/wire/index.html)).
    /// The default: `false` (nothing to wait for).
    fn keeps_sends(&self) -> bool {
        false
    }

    /// Whether this store keeps open asks across a restart (§7.2): then the
    /// core calls [`keep_ask`](Self::keep_ask) as an ask is raised,
    /// [`forget_ask`](Self::forget_ask) as it closes, and
    /// [`kept_asks`](Self::kept_asks) at the next start. A store that keeps
    /// receipts but not asks makes the core say so once, at
    /// [`ready`](crate::Collie::ready). The default: `false`.
    fn keeps_asks(&self) -> bool {
        false
    }

    /// Keeps an open ask (a later one with the same id replaces it).
    /// Returns once kept.
    fn keep_ask(&self, ask: KeptAskRecord) -> impl Future<Output = Result<(), StoreError>> + Send {
        let _ = ask;
        async { Ok(()) }
    }

    /// The ask closed: forget it. An id not kept is ignored.
    fn forget_ask(&self, ask_id: &str) -> impl Future<Output = Result<(), StoreError>> + Send {
        let _ = ask_id;
        async { Ok(()) }
    }

    /// The asks left open by the last run, oldest first, called once at
    /// start. A store shared by several processes hands out only the asks
    /// of processes that are gone, never those of one still running, and
    /// makes the asks it hands out this process's own.
    fn kept_asks(&self) -> impl Future<Output = Result<Vec<KeptAskRecord>, StoreError>> + Send {
        async { Ok(Vec::new()) }
    }

    /// Whether this store keeps each pane's conversation: then the core
    /// hands it, in order, every item and title a pane shows
    /// ([`keep_conversation`](Self::keep_conversation)), and reads a pane's
    /// back ([`kept_conversation`](Self::kept_conversation)) as the pane is
    /// first declared in a run, so that the chat survives a restart with no
    /// code of the program's. The default: `false`.
    fn keeps_conversations(&self) -> bool {
        false
    }

    /// Applies changes to kept conversations, in order, as one write (a
    /// store that can should commit them together). An item replaces the
    /// conversation's item of its id in place, or goes at its end; past
    /// [`KEPT_ITEMS_PER_CONVERSATION`] items the oldest are dropped and the
    /// conversation remembers that some were. Returns once kept.
    ///
    /// `at` is the time of the batch, by the program's clock: a
    /// conversation the batch starts started then, and every conversation
    /// it changes was written then (history's `startedAt` and `endedAt`).
    fn keep_conversation(
        &self,
        ops: Vec<ConversationOp>,
        at: Timestamp,
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        let _ = (ops, at);
        async { Ok(()) }
    }

    /// Applies `ops` as [`keep_conversation`](Self::keep_conversation)
    /// does and, after them, records the sends `ended` as
    /// [`Done`](SendState::Done): the turns that showed those items are
    /// over. The core calls it at a turn's end, with the items the turn
    /// showed, when the store keeps both sends and conversations; a store
    /// that can should make it one write, so that a turn ends in one commit
    /// and a restart never finds a send done whose reply is not kept.
    ///
    /// The default does one after the other: `keep_conversation`, then
    /// [`set_send_state`](Self::set_send_state) for each send, stopping at
    /// the first error (a send whose items were not kept stays running, and
    /// a restart closes it as cut, with its notice).
    fn keep_conversation_and_end_sends(
        &self,
        ops: Vec<ConversationOp>,
        ended: Vec<String>,
        at: Timestamp,
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        async move {
            if !ops.is_empty() {
                self.keep_conversation(ops, at).await?;
            }
            for request_id in &ended {
                self.set_send_state(request_id, SendState::Done).await?;
            }
            Ok(())
        }
    }

    /// The conversations kept, newest first by when each started (then by
    /// pane id, descending), those after `after` (from the first when
    /// `None`), at most `limit`: history's rows when the program gives no
    /// provider (§10). The default: none.
    fn conversation_rows(
        &self,
        after: Option<RowPlace>,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<KeptConversationRow>, StoreError>> + Send {
        let _ = (after, limit);
        async { Ok(Vec::new()) }
    }

    /// What is kept of the pane's conversation (`None`: nothing).
    fn kept_conversation(
        &self,
        pane: &str,
    ) -> impl Future<Output = Result<Option<KeptConversation>, StoreError>> + Send {
        let _ = pane;
        async { Ok(None) }
    }
}

/// A shared store is a store: `receipts(Arc::clone(&store))` keeps a handle
/// for the program.
impl<S: ReceiptStore> ReceiptStore for Arc<S> {
    fn get(&self, request_id: &str) -> impl Future<Output = Result<Lookup, StoreError>> + Send {
        S::get(self, request_id)
    }
    fn put(
        &self,
        request_id: &str,
        receipt: Receipt,
        group: &str,
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        S::put(self, request_id, receipt, group)
    }
    fn claim(&self, request_id: &str) -> impl Future<Output = Result<Lookup, StoreError>> + Send {
        S::claim(self, request_id)
    }
    fn release(&self, request_id: &str) {
        S::release(self, request_id)
    }
    fn record_send(&self, send: PendingSend) -> impl Future<Output = Result<(), StoreError>> + Send {
        S::record_send(self, send)
    }
    fn set_send_state(
        &self,
        request_id: &str,
        state: SendState,
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        S::set_send_state(self, request_id, state)
    }
    fn send_state(
        &self,
        request_id: &str,
    ) -> impl Future<Output = Result<Option<SendState>, StoreError>> + Send {
        S::send_state(self, request_id)
    }
    fn unfinished_sends(&self) -> impl Future<Output = Result<Vec<PendingSend>, StoreError>> + Send {
        S::unfinished_sends(self)
    }
    fn keeps_asks(&self) -> bool {
        S::keeps_asks(self)
    }
    fn keeps_sends(&self) -> bool {
        S::keeps_sends(self)
    }
    fn keep_ask(&self, ask: KeptAskRecord) -> impl Future<Output = Result<(), StoreError>> + Send {
        S::keep_ask(self, ask)
    }
    fn forget_ask(&self, ask_id: &str) -> impl Future<Output = Result<(), StoreError>> + Send {
        S::forget_ask(self, ask_id)
    }
    fn kept_asks(&self) -> impl Future<Output = Result<Vec<KeptAskRecord>, StoreError>> + Send {
        S::kept_asks(self)
    }
    fn keeps_conversations(&self) -> bool {
        S::keeps_conversations(self)
    }
    fn keep_conversation(
        &self,
        ops: Vec<ConversationOp>,
        at: Timestamp,
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        S::keep_conversation(self, ops, at)
    }
    fn keep_conversation_and_end_sends(
        &self,
        ops: Vec<ConversationOp>,
        ended: Vec<String>,
        at: Timestamp,
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        S::keep_conversation_and_end_sends(self, ops, ended, at)
    }
    fn conversation_rows(
        &self,
        after: Option<RowPlace>,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<KeptConversationRow>, StoreError>> + Send {
        S::conversation_rows(self, after, limit)
    }
    fn kept_conversation(
        &self,
        pane: &str,
    ) -> impl Future<Output = Result<Option<KeptConversation>, StoreError>> + Send {
        S::kept_conversation(self, pane)
    }
}

/// The erased form the core keeps.
pub(crate) trait DynReceiptStore: Send + Sync {
    fn get_dyn<'a>(&'a self, request_id: &'a str) -> BoxFuture<'a, Result<Lookup, StoreError>>;
    fn claim_dyn<'a>(&'a self, request_id: &'a str) -> BoxFuture<'a, Result<Lookup, StoreError>>;
    fn release_dyn(&self, request_id: &str);
    fn put_dyn<'a>(
        &'a self,
        request_id: &'a str,
        receipt: Receipt,
        group: &'a str,
    ) -> BoxFuture<'a, Result<(), StoreError>>;
    fn record_send_dyn(&self, send: PendingSend) -> BoxFuture<'_, Result<(), StoreError>>;
    fn set_send_state_dyn<'a>(
        &'a self,
        request_id: &'a str,
        state: SendState,
    ) -> BoxFuture<'a, Result<(), StoreError>>;
    fn send_state_dyn<'a>(
        &'a self,
        request_id: &'a str,
    ) -> BoxFuture<'a, Result<Option<SendState>, StoreError>>;
    fn unfinished_sends_dyn(&self) -> BoxFuture<'_, Result<Vec<PendingSend>, StoreError>>;
    fn keeps_asks_dyn(&self) -> bool;
    fn keeps_sends_dyn(&self) -> bool;
    fn keep_ask_dyn(&self, ask: KeptAskRecord) -> BoxFuture<'_, Result<(), StoreError>>;
    fn forget_ask_dyn<'a>(&'a self, ask_id: &'a str) -> BoxFuture<'a, Result<(), StoreError>>;
    fn kept_asks_dyn(&self) -> BoxFuture<'_, Result<Vec<KeptAskRecord>, StoreError>>;
    fn keeps_conversations_dyn(&self) -> bool;
    fn keep_conversation_dyn(
        &self,
        ops: Vec<ConversationOp>,
        at: Timestamp,
    ) -> BoxFuture<'_, Result<(), StoreError>>;
    fn keep_conversation_and_end_sends_dyn(
        &self,
        ops: Vec<ConversationOp>,
        ended: Vec<String>,
        at: Timestamp,
    ) -> BoxFuture<'_, Result<(), StoreError>>;
    fn conversation_rows_dyn(
        &self,
        after: Option<RowPlace>,
        limit: usize,
    ) -> BoxFuture<'_, Result<Vec<KeptConversationRow>, StoreError>>;
    fn kept_conversation_dyn<'a>(
        &'a self,
        pane: &'a str,
    ) -> BoxFuture<'a, Result<Option<KeptConversation>, StoreError>>;
}

impl<S: ReceiptStore> DynReceiptStore for S {
    fn record_send_dyn(&self, send: PendingSend) -> BoxFuture<'_, Result<(), StoreError>> {
        Box::pin(self.record_send(send))
    }
    fn set_send_state_dyn<'a>(
        &'a self,
        request_id: &'a str,
        state: SendState,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(self.set_send_state(request_id, state))
    }
    fn send_state_dyn<'a>(
        &'a self,
        request_id: &'a str,
    ) -> BoxFuture<'a, Result<Option<SendState>, StoreError>> {
        Box::pin(self.send_state(request_id))
    }
    fn unfinished_sends_dyn(&self) -> BoxFuture<'_, Result<Vec<PendingSend>, StoreError>> {
        Box::pin(self.unfinished_sends())
    }
    fn keeps_asks_dyn(&self) -> bool {
        self.keeps_asks()
    }
    fn keeps_sends_dyn(&self) -> bool {
        self.keeps_sends()
    }
    fn keep_ask_dyn(&self, ask: KeptAskRecord) -> BoxFuture<'_, Result<(), StoreError>> {
        Box::pin(self.keep_ask(ask))
    }
    fn forget_ask_dyn<'a>(&'a self, ask_id: &'a str) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(self.forget_ask(ask_id))
    }
    fn kept_asks_dyn(&self) -> BoxFuture<'_, Result<Vec<KeptAskRecord>, StoreError>> {
        Box::pin(self.kept_asks())
    }
    fn keeps_conversations_dyn(&self) -> bool {
        self.keeps_conversations()
    }
    fn keep_conversation_dyn(
        &self,
        ops: Vec<ConversationOp>,
        at: Timestamp,
    ) -> BoxFuture<'_, Result<(), StoreError>> {
        Box::pin(self.keep_conversation(ops, at))
    }
    fn keep_conversation_and_end_sends_dyn(
        &self,
        ops: Vec<ConversationOp>,
        ended: Vec<String>,
        at: Timestamp,
    ) -> BoxFuture<'_, Result<(), StoreError>> {
        Box::pin(self.keep_conversation_and_end_sends(ops, ended, at))
    }
    fn conversation_rows_dyn(
        &self,
        after: Option<RowPlace>,
        limit: usize,
    ) -> BoxFuture<'_, Result<Vec<KeptConversationRow>, StoreError>> {
        Box::pin(self.conversation_rows(after, limit))
    }
    fn kept_conversation_dyn<'a>(
        &'a self,
        pane: &'a str,
    ) -> BoxFuture<'a, Result<Option<KeptConversation>, StoreError>> {
        Box::pin(self.kept_conversation(pane))
    }
    fn get_dyn<'a>(&'a self, request_id: &'a str) -> BoxFuture<'a, Result<Lookup, StoreError>> {
        Box::pin(self.get(request_id))
    }
    fn claim_dyn<'a>(&'a self, request_id: &'a str) -> BoxFuture<'a, Result<Lookup, StoreError>> {
        Box::pin(self.claim(request_id))
    }
    fn release_dyn(&self, request_id: &str) {
        self.release(request_id)
    }
    fn put_dyn<'a>(
        &'a self,
        request_id: &'a str,
        receipt: Receipt,
        group: &'a str,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(self.put(request_id, receipt, group))
    }
}

/// The default store: in memory, the `per_group` (default
/// [`RECEIPTS_PER_GROUP`]) most recent receipts of each group; evicted ids
/// are remembered until `10 × per_group` further ids of the group have passed.
/// It keeps conversations too (the [`KEPT_ITEMS_PER_CONVERSATION`] newest
/// items of each, and the [`MEMORY_CONVERSATIONS`] conversations written to
/// last), so that a pane declared again in the process — or a core made
/// again over the same store — gets its items back. Everything is gone
/// with the process.
pub struct MemoryReceiptStore {
    per_group: usize,
    inner: Mutex<MemoryInner>,
}

#[derive(Default)]
struct MemoryInner {
    // One copy of each request id, shared by the maps and the group's log.
    receipts: HashMap<Arc<str>, Receipt>,
    groups: HashMap<String, GroupLog>,
    evicted: HashSet<Arc<str>>,
    conversations: HashMap<String, MemoryConversation>,
    conversation_writes: u64,
}

impl MemoryInner {
    /// The conversation of `pane`, made if new (forgetting the one written
    /// to least recently past [`MEMORY_CONVERSATIONS`]), marked as written now.
    fn conversation(&mut self, pane: String, at: Timestamp) -> &mut MemoryConversation {
        self.conversation_writes += 1;
        if !self.conversations.contains_key(&pane) && self.conversations.len() >= MEMORY_CONVERSATIONS {
            let oldest = self.conversations.iter().min_by_key(|(_, c)| c.written).map(|(p, _)| p.clone());
            if let Some(oldest) = oldest {
                self.conversations.remove(&oldest);
            }
        }
        let written = self.conversation_writes;
        let c = self.conversations.entry(pane).or_insert_with(|| MemoryConversation::started(at));
        c.written = written;
        c.written_at = at;
        c
    }
}

/// The conversations the memory store keeps: past it, the one written to
/// least recently is forgotten (the items of 1,000 conversations at most,
/// not one per pane the agent ever showed).
pub const MEMORY_CONVERSATIONS: usize = 1_000;

/// A kept conversation.
struct MemoryConversation {
    title: Option<String>,
    title_by_phone: bool,
    items: ItemsInOrder,
    /// The store's write count at its last change (the oldest is forgotten first).
    written: u64,
    started_at: Timestamp,
    written_at: Timestamp,
}

impl MemoryConversation {
    fn started(at: Timestamp) -> Self {
        MemoryConversation {
            title: None,
            title_by_phone: false,
            items: ItemsInOrder::new(KEPT_ITEMS_PER_CONVERSATION),
            written: 0,
            started_at: at,
            written_at: at,
        }
    }
}

#[derive(Default)]
struct GroupLog {
    live: VecDeque<Arc<str>>,
    evicted: VecDeque<Arc<str>>,
}

impl GroupLog {
    /// Adds a kept id; evicts the group's oldest past `per_group`, and
    /// forgets the oldest evicted ids past ten times that.
    fn admit(
        &mut self,
        request_id: Arc<str>,
        per_group: usize,
        receipts: &mut HashMap<Arc<str>, Receipt>,
        evicted: &mut HashSet<Arc<str>>,
    ) {
        self.live.push_back(request_id);
        while self.live.len() > per_group {
            let Some(old) = self.live.pop_front() else { break };
            receipts.remove(&old);
            evicted.insert(Arc::clone(&old));
            self.evicted.push_back(old);
        }
        while self.evicted.len() > per_group * EVICTED_MEMORY_FACTOR {
            if let Some(old) = self.evicted.pop_front() {
                evicted.remove(&old);
            }
        }
    }
}

impl MemoryReceiptStore {
    /// A store keeping [`RECEIPTS_PER_GROUP`] receipts per group.
    pub fn new() -> Self {
        Self::with_capacity(RECEIPTS_PER_GROUP)
    }

    /// A store keeping `per_group` receipts per group (at least 1).
    pub fn with_capacity(per_group: usize) -> Self {
        MemoryReceiptStore { per_group: per_group.max(1), inner: Mutex::new(MemoryInner::default()) }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, MemoryInner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Default for MemoryReceiptStore {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for MemoryReceiptStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryReceiptStore").field("per_group", &self.per_group).finish_non_exhaustive()
    }
}

impl ReceiptStore for MemoryReceiptStore {
    async fn get(&self, request_id: &str) -> Result<Lookup, StoreError> {
        let inner = self.lock();
        Ok(match inner.receipts.get(request_id) {
            Some(r) => Lookup::Found(r.clone()),
            None if inner.evicted.contains(request_id) => Lookup::Evicted,
            None => Lookup::Unknown,
        })
    }

    async fn put(&self, request_id: &str, receipt: Receipt, group: &str) -> Result<(), StoreError> {
        let per_group = self.per_group;
        let mut inner = self.lock();
        let inner = &mut *inner;
        let id: Arc<str> = Arc::from(request_id);
        match inner.receipts.entry(Arc::clone(&id)) {
            Entry::Occupied(_) => return Ok(()), // already kept: the first answer stays
            Entry::Vacant(v) => {
                v.insert(receipt);
            }
        }
        inner.evicted.remove(request_id);
        // The group's own key is made once, when the group is first seen.
        match inner.groups.get_mut(group) {
            Some(log) => log.admit(id, per_group, &mut inner.receipts, &mut inner.evicted),
            None => {
                let mut log = GroupLog::default();
                log.admit(id, per_group, &mut inner.receipts, &mut inner.evicted);
                inner.groups.insert(group.to_owned(), log);
            }
        }
        Ok(())
    }

    fn keeps_conversations(&self) -> bool {
        true
    }

    async fn keep_conversation(&self, ops: Vec<ConversationOp>, at: Timestamp) -> Result<(), StoreError> {
        let mut inner = self.lock();
        for op in ops {
            match op {
                ConversationOp::Item { pane, item } => inner.conversation(pane, at).items.put(item),
                ConversationOp::Title { pane, title, by_phone } => {
                    let c = inner.conversation(pane, at);
                    c.title = Some(title);
                    c.title_by_phone = by_phone;
                }
                ConversationOp::Forget { pane } => {
                    inner.conversations.remove(&pane);
                }
                // A later kind of op this store does not know: keeping it
                // wrong would be worse than not keeping it.
                _ => {}
            }
        }
        Ok(())
    }

    async fn kept_conversation(&self, pane: &str) -> Result<Option<KeptConversation>, StoreError> {
        let inner = self.lock();
        Ok(inner.conversations.get(pane).map(|c| {
            let items = c.items.iter().map(|i| Item::clone(i)).collect();
            KeptConversation::new(c.title.clone(), items, c.items.dropped())
                .with_title_by_phone(c.title_by_phone)
                .with_times(c.started_at, c.written_at)
        }))
    }

    async fn conversation_rows(
        &self,
        after: Option<RowPlace>,
        limit: usize,
    ) -> Result<Vec<KeptConversationRow>, StoreError> {
        let inner = self.lock();
        let mut rows: Vec<KeptConversationRow> = inner
            .conversations
            .iter()
            .filter(|(pane, c)| after.as_ref().is_none_or(|a| a.is_before(c.started_at, pane)))
            .map(|(pane, c)| {
                KeptConversationRow::new(
                    pane.clone(),
                    c.title.clone(),
                    c.started_at,
                    c.written_at,
                    c.items.len() as u64,
                )
            })
            .collect();
        rows.sort_by(|a, b| (b.started_at, &b.pane).cmp(&(a.started_at, &a.pane)));
        rows.truncate(limit);
        Ok(rows)
    }
}
