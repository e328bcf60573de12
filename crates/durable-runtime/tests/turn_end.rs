//! A turn's end with a store that keeps sends and conversations: the send
//! is recorded `done` with the items its turn showed (one write for a store
//! that can make it one, after them for one that cannot), and never when
//! those items could not be kept — a restart then closes it as cut, with
//! its notice, rather than leave the user's message without a word.
use durable_runtime::test_util as harness;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use durable_runtime::{
    ChatHandler, ConversationOp, KeptConversation, Lookup, MemoryReceiptStore, PendingSend, Receipt,
    ReceiptStore, SendState, StoreError, Turn,
};
use durable_types::Timestamp;
use harness::Harness;
use serde_json::json;

/// What both stores share: receipts and conversations in a memory store,
/// the sends' states, and the writes in order.
#[derive(Default)]
struct Disk {
    memory: MemoryReceiptStore,
    sends: Mutex<Vec<PendingSend>>,
    /// `keep <texts>`, `state <id> <state>`, `keep+end <texts> <ids>`.
    writes: Mutex<Vec<String>>,
    /// The store refuses conversation changes.
    refuse_items: AtomicBool,
    /// The store was asked to keep a reply (`did: …`).
    reply_asked: AtomicBool,
}

impl Disk {
    fn log(&self, line: String) {
        self.writes.lock().unwrap().push(line);
    }

    fn texts(ops: &[ConversationOp]) -> String {
        let texts: Vec<String> = ops
            .iter()
            .filter_map(|op| match op {
                ConversationOp::Item { item, .. } => {
                    serde_json::to_value(&**item).ok()?["text"].as_str().map(str::to_owned)
                }
                _ => None,
            })
            .collect();
        format!("[{}]", texts.join("|"))
    }

    async fn keep(&self, ops: Vec<ConversationOp>, at: Timestamp) -> Result<(), StoreError> {
        if Disk::texts(&ops).contains("did: ") {
            self.reply_asked.store(true, Ordering::SeqCst);
        }
        // A store takes its time, as one on a disk does: a turn that did
        // not wait for its end would be seen over before it is recorded.
        for _ in 0..5 {
            tokio::task::yield_now().await;
        }
        if self.refuse_items.load(Ordering::SeqCst) && !ops.is_empty() {
            return Err(StoreError::new("the disk is full"));
        }
        self.memory.keep_conversation(ops, at).await
    }

    fn set_state(&self, request_id: &str, state: SendState) {
        if let Some(s) = self.sends.lock().unwrap().iter_mut().find(|s| s.request_id == request_id) {
            s.state = state;
        }
    }

    fn state(&self, request_id: &str) -> Option<SendState> {
        self.sends.lock().unwrap().iter().find(|s| s.request_id == request_id).map(|s| s.state)
    }
}

/// The store methods both kinds of store have alike.
macro_rules! common_store_methods {
    () => {
        async fn get(&self, request_id: &str) -> Result<Lookup, StoreError> {
            self.0.memory.get(request_id).await
        }
        async fn put(&self, request_id: &str, receipt: Receipt, group: &str) -> Result<(), StoreError> {
            self.0.memory.put(request_id, receipt, group).await
        }
        fn keeps_sends(&self) -> bool {
            true
        }
        async fn record_send(&self, send: PendingSend) -> Result<(), StoreError> {
            self.0.log(format!("record {} {}", send.request_id, send.state.as_str()));
            let mut sends = self.0.sends.lock().unwrap();
            sends.retain(|s| s.request_id != send.request_id);
            sends.push(send);
            Ok(())
        }
        async fn set_send_state(&self, request_id: &str, state: SendState) -> Result<(), StoreError> {
            self.0.log(format!("state {request_id} {}", state.as_str()));
            self.0.set_state(request_id, state);
            Ok(())
        }
        async fn send_state(&self, request_id: &str) -> Result<Option<SendState>, StoreError> {
            Ok(self.0.state(request_id))
        }
        async fn unfinished_sends(&self) -> Result<Vec<PendingSend>, StoreError> {
            let sends = self.0.sends.lock().unwrap();
            Ok(sends
                .iter()
                .filter(|s| matches!(s.state, SendState::Queued | SendState::Running))
                .cloned()
                .collect())
        }
        fn keeps_conversations(&self) -> bool {
            true
        }
        async fn keep_conversation(&self, ops: Vec<ConversationOp>, at: Timestamp) -> Result<(), StoreError> {
            self.0.log(format!("keep {}", Disk::texts(&ops)));
            self.0.keep(ops, at).await
        }
        async fn kept_conversation(&self, pane: &str) -> Result<Option<KeptConversation>, StoreError> {
            self.0.memory.kept_conversation(pane).await
        }
    };
}

/// A store with the trait's own `keep_conversation_and_end_sends`.
#[derive(Clone, Default)]
struct ByDefault(Arc<Disk>);

impl ReceiptStore for ByDefault {
    common_store_methods!();
}

/// A store that makes a turn's end one write.
#[derive(Clone, Default)]
struct OneWrite(Arc<Disk>);

impl ReceiptStore for OneWrite {
    common_store_methods!();

    async fn keep_conversation_and_end_sends(
        &self,
        ops: Vec<ConversationOp>,
        ended: Vec<String>,
        at: Timestamp,
    ) -> Result<(), StoreError> {
        self.0.log(format!("keep+end {} {}", Disk::texts(&ops), ended.join(",")));
        // A slow disk: a turn is over only once its end is recorded, so
        // `turns_done` waits for this.
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        self.0.keep(ops, at).await?;
        for id in &ended {
            self.0.set_state(id, SendState::Done);
        }
        Ok(())
    }
}

/// Replies at once.
struct Echo;

impl ChatHandler for Echo {
    async fn turn(&self, turn: Turn) {
        turn.reply(format!("did: {}", turn.text()));
    }
}

/// Replies, then works on until the store was asked to keep the reply:
/// the turn's end comes in a later write than its items.
struct ReplyThenWork(Arc<Disk>);

impl ChatHandler for ReplyThenWork {
    async fn turn(&self, turn: Turn) {
        turn.reply(format!("did: {}", turn.text()));
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !self.0.reply_asked.load(Ordering::SeqCst) && std::time::Instant::now() < deadline {
            tokio::time::sleep(std::time::Duration::from_millis(2)).await;
        }
    }
}

async fn agent(store: impl ReceiptStore) -> Harness {
    agent_with(store, Echo).await
}

/// An agent on `disk`, through a store that makes a turn's end one write
/// or through one with the trait's default.
async fn agent_on(disk: &Arc<Disk>, one_write: bool, chat: impl ChatHandler) -> Harness {
    match one_write {
        true => agent_with(OneWrite(disk.clone()), chat).await,
        false => agent_with(ByDefault(disk.clone()), chat).await,
    }
}

async fn agent_with(store: impl ReceiptStore, chat: impl ChatHandler) -> Harness {
    let h = Harness::with(|b| b.receipts(store));
    h.pane().on_send(chat).unwrap();
    h.core.ready();
    h.core.conversations_kept().await;
    h.settle().await;
    h
}

/// Sends `text` as `request_id`, then waits until its turn is over (not
/// for the store: a turn is over once its end is recorded).
async fn send(h: &Harness, request_id: &str, text: &str) {
    let r = h.post("/v1/panes/ticket-1/send", json!({"requestId": request_id, "text": text})).await;
    assert_eq!(r.json["result"], "sent", "{:?}", r.json);
    h.core.driver().turns_done().await;
}

#[tokio::test]
async fn a_store_that_can_records_a_turns_end_in_the_write_of_its_last_items() {
    let store = OneWrite::default();
    let disk = store.0.clone();
    let h = agent(store).await;
    send(&h, "s-1", "refund 5521").await;
    assert_eq!(disk.state("s-1"), Some(SendState::Done));
    let writes = disk.writes.lock().unwrap().clone();
    let ends: Vec<&String> = writes.iter().filter(|w| w.starts_with("keep+end")).collect();
    assert_eq!(ends.len(), 1, "{writes:?}");
    assert!(ends[0].ends_with(" s-1"), "{writes:?}");
    assert!(writes.iter().any(|w| w.contains("did: refund 5521")), "the reply is kept by then: {writes:?}");
    let done_alone = writes.iter().any(|w| w == "state s-1 done");
    assert!(!done_alone, "no write of its own for the end: {writes:?}");
}

#[tokio::test]
async fn by_default_the_end_is_recorded_after_the_items_it_showed() {
    let store = ByDefault::default();
    let disk = store.0.clone();
    let h = agent(store).await;
    send(&h, "s-1", "refund 5521").await;
    let writes = disk.writes.lock().unwrap().clone();
    let reply = writes.iter().position(|w| w.starts_with("keep") && w.contains("did: refund 5521"));
    let done = writes.iter().position(|w| w == "state s-1 done");
    assert!(matches!((reply, done), (Some(r), Some(d)) if r < d), "{writes:?}");
    assert_eq!(disk.state("s-1"), Some(SendState::Done));
}

#[tokio::test]
async fn a_turn_whose_items_were_not_kept_is_not_done_and_a_restart_closes_it_with_its_notice() {
    for one_write in [true, false] {
        let disk = Arc::new(Disk::default());
        let h = agent_on(&disk, one_write, Echo).await;
        disk.refuse_items.store(true, Ordering::SeqCst);
        send(&h, "s-1", "refund 5521").await;
        assert_eq!(disk.state("s-1"), Some(SendState::Running), "one write: {one_write}");
        let warns = h.warns();
        assert!(
            warns.iter().any(|w| w.contains("the disk is full")) && warns.iter().any(|w| w.contains("s-1")),
            "the warnings say why and name the send (one write: {one_write}): {warns:?}"
        );
        drop(h);

        // The restart: the store works again; the cut send gets its notice.
        disk.refuse_items.store(false, Ordering::SeqCst);
        let again = agent_on(&disk, one_write, Echo).await;
        let notice = "The agent restarted while answering “refund 5521”; that answer did not finish.";
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !again.notices("ticket-1").await.iter().any(|n| n == notice) {
            assert!(std::time::Instant::now() < deadline, "no notice: {:?}", again.notices("ticket-1").await);
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        assert_eq!(disk.state("s-1"), Some(SendState::Closed));
    }
}

#[tokio::test]
async fn a_turn_whose_items_failed_in_an_earlier_write_than_its_end_is_not_done_either() {
    for one_write in [true, false] {
        let disk = Arc::new(Disk::default());
        let h = agent_on(&disk, one_write, ReplyThenWork(disk.clone())).await;
        disk.refuse_items.store(true, Ordering::SeqCst);
        send(&h, "s-1", "refund 5521").await;
        assert!(disk.reply_asked.load(Ordering::SeqCst), "the reply's write came first");
        assert_eq!(disk.state("s-1"), Some(SendState::Running), "one write: {one_write}");
        let warns = h.warns();
        assert!(
            warns.iter().any(|w| w.contains("send s-1") && w.contains("not recorded done")),
            "one write: {one_write}: {warns:?}"
        );

        // A later turn on the pane, the store working again, is done.
        disk.refuse_items.store(false, Ordering::SeqCst);
        send(&h, "s-2", "and 5522").await;
        assert_eq!(disk.state("s-2"), Some(SendState::Done), "one write: {one_write}");
    }
}
