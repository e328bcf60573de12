//! Conversations kept by the receipt store: a pane declared again after a
//! restart comes back with what the phone was shown — the program's items
//! as last written, the user items of sends, the SDK's own notices — and a
//! reader of its events gets that view. Here the restart is a new core over
//! the same memory store (the SQLite store's own test restarts over a file:
//! `durable-sdk/tests/conversations.rs`).
use durable_runtime::test_util as harness;

use std::sync::Arc;

use durable_runtime::types::{Item, NoticeTone, Timestamp};
use durable_runtime::{
    ChatHandler, ConversationOp, Lookup, MemoryReceiptStore, Receipt, ReceiptStore, StoreError, Turn,
};
use harness::Harness;
use serde_json::{Value, json};

/// Answers each send at once.
struct Echo;

impl ChatHandler for Echo {
    async fn turn(&self, turn: Turn) {
        turn.reply(format!("did: {}", turn.text()));
    }
}

/// The memory store as a test sees it: it may keep no conversations (a
/// store written before they were), hand back a conversation another
/// program wrote, and it notes each batch of changes it is handed.
#[derive(Default)]
struct TestStore {
    memory: MemoryReceiptStore,
    keeps_no_conversations: bool,
    written_elsewhere: Option<Vec<Item>>,
    batches: std::sync::Mutex<Vec<Vec<String>>>,
    /// Outlives the process (as SQLite and PostgreSQL do: it keeps sends),
    /// so items wait for it before readers see them.
    outlives_the_process: bool,
    /// When set, each batch of changes waits for a permit (the store is
    /// slow), and fails once through when `fails` is set.
    gate: Option<tokio::sync::Semaphore>,
    fails: bool,
}

impl ReceiptStore for TestStore {
    async fn get(&self, request_id: &str) -> Result<Lookup, StoreError> {
        self.memory.get(request_id).await
    }
    async fn put(&self, request_id: &str, receipt: Receipt, group: &str) -> Result<(), StoreError> {
        self.memory.put(request_id, receipt, group).await
    }
    fn keeps_conversations(&self) -> bool {
        !self.keeps_no_conversations
    }
    fn keeps_sends(&self) -> bool {
        self.outlives_the_process
    }
    async fn keep_conversation(&self, ops: Vec<ConversationOp>, at: Timestamp) -> Result<(), StoreError> {
        if let Some(gate) = &self.gate {
            gate.acquire().await.expect("the gate stays").forget();
        }
        if self.fails {
            return Err(StoreError::new("the disk is full"));
        }
        let noted = ops
            .iter()
            .map(|op| match op {
                ConversationOp::Item { item, .. } => {
                    format!("item {}", serde_json::to_value(&**item).unwrap()["text"].as_str().unwrap())
                }
                ConversationOp::Title { title, .. } => format!("title {title}"),
                _ => "other".to_owned(),
            })
            .collect();
        self.batches.lock().unwrap().push(noted);
        self.memory.keep_conversation(ops, at).await
    }
    async fn conversation_rows(
        &self,
        after: Option<durable_runtime::RowPlace>,
        limit: usize,
    ) -> Result<Vec<durable_runtime::KeptConversationRow>, StoreError> {
        self.memory.conversation_rows(after, limit).await
    }
    async fn kept_conversation(
        &self,
        pane: &str,
    ) -> Result<Option<durable_runtime::KeptConversation>, StoreError> {
        match &self.written_elsewhere {
            Some(items) => Ok(Some(durable_runtime::KeptConversation::new(None, items.clone(), false))),
            None => self.memory.kept_conversation(pane).await,
        }
    }
}

/// One run of the agent over `store`: the standard pane, its chat.
fn run(store: &Arc<MemoryReceiptStore>) -> Harness {
    let h = Harness::with(|b| b.receipts(Arc::clone(store)));
    h.pane().on_send(Echo).unwrap();
    h
}

fn items(view: &Value) -> Vec<Value> {
    view["items"].as_array().cloned().unwrap_or_default()
}

fn texts(view: &Value) -> Vec<String> {
    items(view).iter().map(|i| i["text"].as_str().unwrap_or("").to_owned()).collect()
}

#[tokio::test]
async fn a_pane_declared_after_a_restart_comes_back_with_its_items_each_as_last_written() {
    let store = Arc::new(MemoryReceiptStore::new());
    let first = run(&store);
    let pane = first.core.pane("ticket-1").unwrap();
    first.core.ready();
    pane.write(Item::partial_reply("r-a", "Looking").unwrap()).unwrap();
    pane.write(Item::notice("n-1", "Order 5521 found", NoticeTone::Info).unwrap()).unwrap();
    pane.write(Item::reply("r-a", "Looking at order 5521.").unwrap()).unwrap();
    let sent = first.post("/v1/panes/ticket-1/send", json!({"requestId": "r-1", "text": "refund?"})).await;
    assert_eq!(sent.status, 200, "{:?}", sent.json);
    first.settle().await;
    first.core.conversations_kept().await;
    let before = first.view("ticket-1").await;
    assert_eq!(
        texts(&before),
        ["Looking at order 5521.", "Order 5521 found", "refund?", "did: refund?"],
        "the rewrite is in place, the send's user item and reply follow"
    );

    // The restart: a new core over the same store declares the pane again.
    let second = run(&store);
    second.core.ready();
    second.core.conversations_kept().await;
    let after = second.view("ticket-1").await;
    assert_eq!(items(&after), items(&before), "the same items, in the same order, each as last written");
    assert_eq!(after["dropped"], false);
    // The pane showed nothing yet: the kept items are its first events.
    let tail: Vec<Value> = second.all_events("ticket-1").await.iter().map(|e| e["item"].clone()).collect();
    assert_eq!(tail, items(&before), "one item event each");
    // A reader from the last run (its `after` beyond the pane's last seq) gets the view.
    let r = second.events("ticket-1", before["next"].as_u64().unwrap()).await;
    assert_eq!(r.json["snapshot"], true, "{:?}", r.json);
    assert_eq!(items(&r.json), items(&before));
    // The pane goes on from there: new items follow the kept ones.
    let again = second.post("/v1/panes/ticket-1/send", json!({"requestId": "r-2", "text": "thanks"})).await;
    assert_eq!(again.status, 200, "{:?}", again.json);
    second.settle().await;
    assert_eq!(texts(&second.view("ticket-1").await)[4..], ["thanks", "did: thanks"]);
}

/// A first run that kept a, b and c on the standard pane; then a second
/// run over the same store, with no driver yet (its restore waits in the
/// journal, as it would before `serve`), that writes a welcome item and
/// b again before its panes are restored.
async fn second_run_writing_before_the_restore(store: &Arc<MemoryReceiptStore>) -> Harness {
    let first = run(store);
    let pane = first.core.pane("ticket-1").unwrap();
    for (id, text) in [("a", "one"), ("b", "two"), ("c", "three")] {
        pane.write(Item::reply(id, text).unwrap()).unwrap();
    }
    first.core.conversations_kept().await;
    let second = Harness::without_driver(|b| b.receipts(Arc::clone(store)));
    let pane = second.pane();
    pane.write(Item::reply("welcome", "Hello again").unwrap()).unwrap();
    pane.write(Item::reply("b", "two, edited").unwrap()).unwrap();
    second
}

async fn restore(h: &Harness) {
    while let Some(job) = h.core.driver().poll_job() {
        job.await;
    }
}

const RESTORED: [&str; 4] = ["one", "two, edited", "three", "Hello again"];

#[tokio::test]
async fn items_written_before_the_restore_follow_the_kept_ones_as_events_renumbered_when_nobody_read_them() {
    let store = Arc::new(MemoryReceiptStore::new());
    let second = second_run_writing_before_the_restore(&store).await;
    restore(&second).await;
    let events = second.all_events("ticket-1").await;
    let seqs: Vec<u64> = events.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs, [1, 2, 3, 4, 5], "the kept items, then the two writes, from seq 1");
    let texts_in_order: Vec<&str> = events.iter().map(|e| e["item"]["text"].as_str().unwrap()).collect();
    assert_eq!(texts_in_order, ["one", "two", "three", "Hello again", "two, edited"]);
    assert_eq!(texts(&second.view("ticket-1").await), RESTORED, "b's newer form in b's place");
}

#[tokio::test]
async fn items_written_before_the_restore_follow_the_kept_ones_and_a_reader_of_them_gets_the_view() {
    let store = Arc::new(MemoryReceiptStore::new());
    let second = second_run_writing_before_the_restore(&store).await;
    assert_eq!(texts(&second.view("ticket-1").await), ["Hello again", "two, edited"], "not restored yet");
    restore(&second).await;
    assert_eq!(
        texts(&second.view("ticket-1").await),
        RESTORED,
        "kept items first; b's newer form in b's place"
    );
    // The tail started again: a reader of the events written before the
    // restore gets the view, never a tail that lacks the kept items.
    for after in [0, 2] {
        let r = second.events("ticket-1", after).await;
        assert_eq!(r.json["snapshot"], true, "after={after}: {:?}", r.json);
        assert_eq!(texts(&r.json), RESTORED);
    }
    // The store agrees: a third run sees the same.
    let kept = store.kept_conversation("ticket-1").await.unwrap().expect("kept");
    let kept_texts: Vec<String> = kept
        .items
        .iter()
        .map(|i| serde_json::to_value(i).unwrap()["text"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(kept_texts, RESTORED);
    assert_eq!(kept.title.as_deref(), Some("Maria Lopez"));
}

#[tokio::test]
async fn a_pane_closed_and_declared_again_gets_its_items_back_until_the_program_forgets_them() {
    let store = Arc::new(MemoryReceiptStore::new());
    let h = run(&store);
    let pane = h.core.pane("ticket-1").unwrap();
    pane.write(Item::reply("a", "old").unwrap()).unwrap();
    let seen = h.all_events("ticket-1").await.len() as u64;
    pane.close();
    // Declared again in the same run (as a reopen hook does): the kept
    // items come back, and seqs go on from the closed pane's, so a reader
    // from before reads on from where it was.
    let pane = h.pane();
    pane.write(Item::reply("b", "new").unwrap()).unwrap();
    h.settle().await;
    h.core.conversations_kept().await;
    assert_eq!(texts(&h.view("ticket-1").await), ["old", "new"]);
    let r = h.events("ticket-1", seen).await;
    assert_eq!(r.json["snapshot"], false, "{:?}", r.json);
    let read_on: Vec<&str> =
        r.json["events"].as_array().unwrap().iter().map(|e| e["item"]["text"].as_str().unwrap()).collect();
    assert_eq!(read_on, ["old", "new"]);

    // Forgotten: the next declaration starts empty.
    h.core.forget_conversation("ticket-1");
    pane.close();
    h.pane();
    h.settle().await;
    h.core.conversations_kept().await;
    assert_eq!(texts(&h.view("ticket-1").await), Vec::<String>::new());
    let kept = store.kept_conversation("ticket-1").await.unwrap().expect("its title is kept");
    assert!(kept.items.is_empty(), "{:?}", kept.items);
}

#[tokio::test]
async fn a_store_that_keeps_no_conversations_restores_nothing() {
    let store = Arc::new(TestStore { keeps_no_conversations: true, ..TestStore::default() });
    let h = Harness::with(|b| b.receipts(Arc::clone(&store)));
    h.pane().write(Item::reply("a", "one").unwrap()).unwrap();
    h.core.ready();
    h.core.conversations_kept().await; // immediate: nothing is journaled
    h.settle().await;
    assert_eq!(h.all_events("ticket-1").await.len(), 1, "the tail as written: no restore started it again");
    assert!(store.batches.lock().unwrap().is_empty(), "the store was handed nothing to keep");
}

#[tokio::test]
async fn a_conversation_keeps_its_newest_items_and_says_older_ones_were_dropped() {
    let store = Arc::new(MemoryReceiptStore::new());
    let first = run(&store);
    let pane = first.core.pane("ticket-1").unwrap();
    let limit = durable_runtime::KEPT_ITEMS_PER_CONVERSATION;
    for n in 0..limit + 3 {
        pane.write(Item::reply(&format!("i{n}"), format!("n{n}")).unwrap()).unwrap();
    }
    first.core.conversations_kept().await;
    let second = run(&store);
    second.core.conversations_kept().await;
    let view = second.view("ticket-1").await;
    assert_eq!(view["dropped"], true);
    let texts = texts(&view);
    assert_eq!(texts.len(), limit);
    assert_eq!(texts[0], "n3", "the three oldest went");
}

#[tokio::test]
async fn the_memory_store_forgets_the_conversation_written_to_least_recently_past_its_bound() {
    let store = MemoryReceiptStore::new();
    let item = |n: usize| ConversationOp::item(format!("p{n}"), Item::reply("a", format!("n{n}")).unwrap());
    for n in 0..durable_runtime::MEMORY_CONVERSATIONS {
        store.keep_conversation(vec![item(n)], Timestamp::EPOCH).await.unwrap();
    }
    // p0 is written to again: p1 is now the least recent.
    store.keep_conversation(vec![ConversationOp::title("p0", "First")], Timestamp::EPOCH).await.unwrap();
    store
        .keep_conversation(vec![item(durable_runtime::MEMORY_CONVERSATIONS)], Timestamp::EPOCH)
        .await
        .unwrap();
    assert!(store.kept_conversation("p0").await.unwrap().is_some());
    assert_eq!(store.kept_conversation("p1").await.unwrap(), None, "the least recent went");
    assert!(store.kept_conversation("p2").await.unwrap().is_some());
}

#[tokio::test]
async fn a_conversation_forgotten_before_the_store_answered_is_not_given_back() {
    let store = Arc::new(MemoryReceiptStore::new());
    let first = run(&store);
    first.core.pane("ticket-1").unwrap().write(Item::reply("a", "old").unwrap()).unwrap();
    first.core.conversations_kept().await;

    let second = Harness::without_driver(|b| b.receipts(Arc::clone(&store)));
    second.pane();
    second.core.forget_conversation("ticket-1");
    restore(&second).await;
    assert_eq!(
        texts(&second.view("ticket-1").await),
        Vec::<String>::new(),
        "the forget won over the read before it"
    );
}

#[tokio::test]
async fn a_pane_closed_before_the_store_answered_gets_its_items_when_it_is_reopened() {
    let store = Arc::new(MemoryReceiptStore::new());
    let first = run(&store);
    first.core.pane("ticket-1").unwrap().write(Item::reply("a", "kept").unwrap()).unwrap();
    first.core.conversations_kept().await;

    let second =
        Harness::without_driver(|b| b.receipts(Arc::clone(&store)).caps(durable_runtime::types::Caps::all()));
    second.pane().close();
    restore(&second).await;
    let reopened = second.post("/v1/reopen", json!({"requestId": "o-1", "id": "ticket-1"}));
    let mut reopened = std::pin::pin!(reopened);
    let reply = loop {
        // The reopen's jobs run here: the harness has no driver.
        if let Some(reply) = harness::poll_once(&mut reopened) {
            break reply;
        }
        restore(&second).await;
        tokio::task::yield_now().await;
    };
    assert_eq!(reply.status, 200, "{:?}", reply.json);
    assert_eq!(texts(&second.view("ticket-1").await), ["kept"]);
}

#[tokio::test]
async fn a_pane_declared_twice_before_the_store_answered_gets_its_items_once() {
    let store = Arc::new(MemoryReceiptStore::new());
    let first = run(&store);
    first.core.pane("ticket-1").unwrap().write(Item::reply("a", "kept").unwrap()).unwrap();
    first.core.conversations_kept().await;

    let second = Harness::without_driver(|b| b.receipts(Arc::clone(&store)));
    second.pane().close();
    second.pane();
    restore(&second).await;
    assert_eq!(texts(&second.view("ticket-1").await), ["kept"]);
    let items: Vec<Value> = second.all_events("ticket-1").await;
    assert_eq!(items.len(), 1, "one event for the kept item, not one per declaration: {items:?}");
}

#[tokio::test]
async fn kept_items_come_back_final_and_meeting_the_item_rules() {
    // As another program wrote it: a partial reply a crash cut, text with
    // invisible characters, and an item whose link breaks the rules.
    let written: Vec<Item> = serde_json::from_value(json!([
        {"id": "r-1", "kind": "reply", "text": "Checking the ord", "partial": true},
        {"id": "r-2", "kind": "reply", "text": "Re\u{200b}fund\u{202e} issued"},
        {"id": "l-1", "kind": "link", "text": "Order", "href": "javascript:alert(1)"},
    ]))
    .unwrap();
    let h =
        Harness::with(|b| b.receipts(TestStore { written_elsewhere: Some(written), ..TestStore::default() }));
    h.pane();
    h.core.conversations_kept().await;
    let view = h.view("ticket-1").await;
    assert_eq!(texts(&view), ["Checking the ord", "Refund issued"], "{view}");
    assert!(items(&view).iter().all(|i| i.get("partial").is_none()), "a cut partial streams no more: {view}");
    assert!(h.warns().iter().any(|w| w.contains("1 kept item(s)")), "{:?}", h.warns());
}

#[tokio::test]
async fn an_item_written_again_while_the_store_is_behind_is_one_op_in_its_first_place() {
    let store = Arc::new(TestStore::default());
    let h = Harness::without_driver(|b| b.receipts(Arc::clone(&store)));
    let pane = h.pane();
    for text in ["Chec", "Checking", "Checking the order"] {
        pane.write(Item::partial_reply("r-1", text).unwrap()).unwrap();
    }
    pane.write(Item::reply("r-2", "Done").unwrap()).unwrap();
    pane.write(Item::reply("r-1", "Checked the order.").unwrap()).unwrap();
    restore(&h).await;
    assert_eq!(
        *store.batches.lock().unwrap(),
        [vec!["title Maria Lopez", "item Checked the order.", "item Done"]],
        "one batch; r-1 once, in its first place, in its last form"
    );
    // Taken by the store, an item written again is a new op.
    pane.write(Item::reply("r-1", "Checked the order again.").unwrap()).unwrap();
    restore(&h).await;
    assert_eq!(store.batches.lock().unwrap()[1], ["item Checked the order again."]);
}

#[tokio::test]
async fn an_item_written_again_past_a_conversations_bound_of_newer_ones_is_not_folded_into_its_old_place() {
    let store = Arc::new(TestStore::default());
    let h = Harness::without_driver(|b| b.receipts(Arc::clone(&store)));
    let pane = h.pane();
    pane.write(Item::reply("x", "first").unwrap()).unwrap();
    for n in 0..durable_runtime::KEPT_ITEMS_PER_CONVERSATION {
        pane.write(Item::reply(&format!("i{n}"), "n").unwrap()).unwrap();
    }
    pane.write(Item::reply("x", "last").unwrap()).unwrap();
    restore(&h).await;
    let written: Vec<String> = store.batches.lock().unwrap().concat();
    assert_eq!(written.iter().filter(|w| w.starts_with("item first")).count(), 1);
    assert_eq!(
        written.last().map(String::as_str),
        Some("item last"),
        "a new op at the end, as the view has it"
    );
    let kept = store.kept_conversation("ticket-1").await.unwrap().unwrap();
    assert_eq!(
        kept.items.last().unwrap().id.as_str(),
        "x",
        "the store keeps x, newest, as the pane shows it"
    );
}

/// A store that outlives the process, its batches held until `open`.
fn slow_store(fails: bool) -> Arc<TestStore> {
    Arc::new(TestStore {
        outlives_the_process: true,
        gate: Some(tokio::sync::Semaphore::new(0)),
        fails,
        ..TestStore::default()
    })
}

fn open(store: &TestStore) {
    store.gate.as_ref().unwrap().add_permits(1_000);
}

/// An agent over a slow store: its pane declared, `ready()`, and `first`
/// batches let through (the first: the pane's restore read and title).
async fn slow_agent(
    fails: bool,
    first: usize,
    options: impl FnOnce(durable_runtime::CoreOptionsBuilder) -> durable_runtime::CoreOptionsBuilder,
) -> (Harness, durable_runtime::Pane, Arc<TestStore>) {
    let store = slow_store(fails);
    let h = Harness::with(|b| options(b.receipts(Arc::clone(&store))));
    let pane = h.pane();
    h.core.ready();
    if first > 0 {
        store.gate.as_ref().unwrap().add_permits(first);
        h.core.conversations_kept().await;
    }
    (h, pane, store)
}

/// The pane's events from 0, answered at once (a poll never waits for the store).
async fn events_now(h: &Harness, pane: &str) -> Vec<Value> {
    let r = tokio::time::timeout(std::time::Duration::from_secs(5), h.events(pane, 0))
        .await
        .expect("a poll answers while the store is slow");
    assert_eq!(r.status, 200, "{:?}", r.json);
    assert_eq!(r.json["snapshot"], false, "{:?}", r.json);
    r.json["events"].as_array().cloned().unwrap_or_default()
}

fn kinds(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| match e["type"].as_str().unwrap() {
            "item" => format!("item {}", e["item"]["text"].as_str().unwrap_or("")),
            "state" => format!("state {}", e["state"].as_str().unwrap_or("")),
            other => other.to_owned(),
        })
        .collect()
}

/// The pane as the state poll shows it.
async fn pane_in_state(h: &Harness, pane: &str) -> Value {
    let state = h.state().await.json;
    state["panes"].as_array().unwrap().iter().find(|p| p["id"] == pane).cloned().expect("the pane")
}

#[tokio::test]
async fn over_a_store_that_outlives_the_process_an_item_is_shown_once_kept_and_what_follows_waits_behind_it()
{
    let (h, pane, store) = slow_agent(false, 1, |b| b).await;
    pane.on_send(Echo).unwrap();
    let seq_before = pane_in_state(&h, "ticket-1").await["lastSeq"].clone();

    // The write and the send answer at once; readers see none of it yet.
    pane.write(Item::notice("n-1", "Order 5521 found", NoticeTone::Info).unwrap()).unwrap();
    let sent = tokio::time::timeout(
        std::time::Duration::from_secs(5),
        h.post("/v1/panes/ticket-1/send", json!({"requestId": "r-1", "text": "refund?"})),
    )
    .await
    .expect("a send does not wait for the store");
    assert_eq!(sent.json["result"], "sent", "{:?}", sent.json);
    h.settle().await;
    assert_eq!(kinds(&events_now(&h, "ticket-1").await), Vec::<String>::new(), "nothing kept, nothing shown");
    let shown = pane_in_state(&h, "ticket-1").await;
    assert_eq!((shown["lastSeq"].clone(), shown["state"].clone()), (seq_before, json!("idle")));
    assert_eq!(
        pane.current_state(),
        durable_runtime::types::PaneState::Idle,
        "the program's side: its turn ran"
    );

    // The store keeps them: they are shown, in the order written.
    open(&store);
    h.core.conversations_kept().await;
    let events = events_now(&h, "ticket-1").await;
    assert_eq!(
        kinds(&events),
        ["item Order 5521 found", "state working", "item refund?", "item did: refund?", "state idle"],
        "each item once kept, the state changes behind them"
    );
    let shown = pane_in_state(&h, "ticket-1").await;
    assert_eq!(shown["lastSeq"], events.last().unwrap()["seq"], "the state poll names the last shown seq");
    assert_eq!(shown["state"], "idle");
}

#[tokio::test]
async fn a_pane_shows_its_items_up_to_the_first_the_store_does_not_have_yet() {
    let (h, pane, store) = slow_agent(false, 1, |b| b).await;
    // `a` goes in a batch the store holds; `b` waits in the journal behind
    // it, and its rewrite joins its op there.
    pane.write(Item::reply("a", "one").unwrap()).unwrap();
    h.settle().await;
    pane.write(Item::partial_reply("b", "tw").unwrap()).unwrap();
    pane.write(Item::reply("b", "two").unwrap()).unwrap();
    store.gate.as_ref().unwrap().add_permits(1);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while kinds(&events_now(&h, "ticket-1").await).is_empty() && std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    assert_eq!(kinds(&events_now(&h, "ticket-1").await), ["item one"], "b is not kept yet");
    open(&store);
    h.core.conversations_kept().await;
    assert_eq!(
        kinds(&events_now(&h, "ticket-1").await),
        ["item one", "item two"],
        "b's waiting form was replaced by its rewrite, as its op was: one event"
    );
    let batches = store.batches.lock().unwrap().clone();
    assert_eq!(batches[1..], [vec!["item one".to_owned()], vec!["item two".to_owned()]], "{batches:?}");
}

#[tokio::test]
async fn a_title_written_while_items_wait_is_a_new_state_seq_at_once() {
    let (h, pane, store) = slow_agent(false, 1, |b| b).await;
    pane.write(Item::reply("a", "one").unwrap()).unwrap();
    let before = h.state().await.json;
    pane.rename("Maria Lopez").unwrap();
    let after = h.state().await.json;
    assert!(after["seq"].as_u64() > before["seq"].as_u64(), "{} then {}", before["seq"], after["seq"]);
    let shown = pane_in_state(&h, "ticket-1").await;
    assert_eq!(shown["title"], "Maria Lopez", "no answer at a seq shows the old title");
    open(&store);
}

#[tokio::test]
async fn a_store_that_never_answers_costs_a_tails_worth_of_waiting_events_then_they_are_shown_with_a_warning()
{
    let (h, pane, store) = slow_agent(false, 1, |b| b.tail_limit(8)).await;
    pane.write(Item::reply("first", "held by the store").unwrap()).unwrap();
    h.settle().await;
    for n in 0..20 {
        pane.write(Item::reply(&format!("i{n}"), format!("n{n}")).unwrap()).unwrap();
    }
    // 21 waiting, 8 kept waiting: the oldest 13 are shown, in order.
    let view = texts(&h.view("ticket-1").await);
    assert_eq!(view.len(), 13, "{view:?}");
    assert_eq!((view[0].as_str(), view[12].as_str()), ("held by the store", "n11"), "{view:?}");
    assert_eq!(
        h.warns().iter().filter(|w| w.contains("events behind on pane ticket-1")).count(),
        1,
        "{:?}",
        h.warns()
    );
    open(&store);
    h.core.conversations_kept().await;
    let view = texts(&h.view("ticket-1").await);
    assert_eq!(
        (view.len(), view.last().map(String::as_str)),
        (21, Some("n19")),
        "the rest once kept: {view:?}"
    );
}

#[tokio::test]
async fn a_store_that_fails_to_keep_an_item_does_not_hide_it() {
    let (h, pane, store) = slow_agent(true, 0, |b| b).await;
    pane.write(Item::reply("a", "one").unwrap()).unwrap();
    open(&store);
    h.core.conversations_kept().await;
    assert_eq!(kinds(&events_now(&h, "ticket-1").await), ["item one"]);
    assert!(h.warns().iter().any(|w| w.contains("could not be kept")), "{:?}", h.warns());
}

#[tokio::test]
async fn a_partial_item_waiting_for_the_store_is_finalized_when_its_pane_goes_idle() {
    let (h, pane, store) = slow_agent(false, 0, |b| b).await;
    pane.state(durable_runtime::types::PaneState::Working, Some("t-1")).unwrap();
    pane.write(Item::partial_reply("a", "Look").unwrap()).unwrap();
    pane.state(durable_runtime::types::PaneState::Idle, None).unwrap();
    // The item waits for the store, and the idle behind it: readers still see the turn.
    assert_eq!(pane.current_state(), durable_runtime::types::PaneState::Idle);
    let shown = pane_in_state(&h, "ticket-1").await;
    assert_eq!((shown["state"].clone(), shown["turnId"].clone()), (json!("working"), json!("t-1")));
    assert_eq!(kinds(&events_now(&h, "ticket-1").await), ["state working"]);
    open(&store);
    h.core.conversations_kept().await;
    let view = h.view("ticket-1").await;
    assert_eq!(texts(&view), ["Look"]);
    assert!(view["items"][0].get("partial").is_none(), "finalized: {view}");
    assert!(h.warns().iter().any(|w| w.contains("went idle with partial items (a)")), "{:?}", h.warns());
}

#[tokio::test]
async fn over_the_memory_store_an_item_is_shown_at_once() {
    let store = Arc::new(MemoryReceiptStore::new());
    let h = run(&store);
    h.core.ready();
    h.pane().write(Item::reply("a", "one").unwrap()).unwrap();
    // No settle, no wait: the store cannot outlive the process, so nothing is gained by waiting.
    assert_eq!(kinds(&events_now(&h, "ticket-1").await), ["item one"]);
}

#[tokio::test]
async fn a_pane_declared_again_writes_after_its_own_restore_never_into_an_op_of_the_pane_before() {
    let (h, pane, store) = slow_agent(false, 0, |b| b).await;
    // The store holds the first batch: everything below waits in the journal.
    pane.write(Item::partial_reply("a", "x").unwrap()).unwrap();
    pane.close();
    let again = h.pane();
    again.write(Item::partial_reply("a", "xy").unwrap()).unwrap();
    open(&store);
    h.core.conversations_kept().await;
    // The second pane's restore reads what the first kept ("x", finalized);
    // its own write follows it, not folded into the first pane's op.
    let items: Vec<Value> = h.all_events("ticket-1").await.iter().map(|e| e["item"].clone()).collect();
    let texts: Vec<&str> = items.iter().map(|i| i["text"].as_str().unwrap_or("")).collect();
    assert_eq!(texts, ["x", "xy"], "{items:?}");
    assert!(items[0].get("partial").is_none() && items[1]["partial"] == true, "{items:?}");
}

/// A run whose rename hook answers `accept` and notes what it was asked
/// (no hook at all with `None`).
fn run_with_rename_hook(
    store: &Arc<MemoryReceiptStore>,
    accept: Option<bool>,
) -> (Harness, Arc<std::sync::Mutex<Vec<durable_runtime::RenameRequest>>>) {
    let h = Harness::with(|b| b.receipts(Arc::clone(store)));
    let asked = Arc::new(std::sync::Mutex::new(Vec::new()));
    if let Some(accept) = accept {
        let noted = Arc::clone(&asked);
        h.core.on_rename(move |req| {
            noted.lock().unwrap().push(req);
            async move {
                if accept { Ok(()) } else { Err(durable_runtime::Refusal::new("keeps its own titles")) }
            }
        });
    }
    (h, asked)
}

/// A store over which a first run's pane was renamed by the phone (its
/// rename hook accepting) to `title`.
async fn phone_renamed_in_a_first_run(title: &str) -> Arc<MemoryReceiptStore> {
    let store = Arc::new(MemoryReceiptStore::new());
    let (first, _) = run_with_rename_hook(&store, Some(true));
    first.pane();
    first.core.ready();
    let rename = json!({"requestId": "ren-1", "target": "pane", "id": "ticket-1", "title": title});
    let renamed = first.post("/v1/rename", rename).await;
    assert_eq!(renamed.status, 200, "{:?}", renamed.json);
    assert_eq!(title_now(&first).await, title);
    store
}

async fn title_now(h: &Harness) -> Value {
    h.settle().await;
    h.core.conversations_kept().await;
    h.settle().await;
    pane_in_state(h, "ticket-1").await["title"].clone()
}

#[tokio::test]
async fn a_title_the_phone_gave_is_offered_back_to_the_rename_hook_as_the_pane_is_declared_again() {
    let store = phone_renamed_in_a_first_run("Refund 5521").await;

    // Declared again under its first title: the hook is asked, and accepts.
    let (second, asked) = run_with_rename_hook(&store, Some(true));
    second.pane();
    second.core.ready();
    assert_eq!(title_now(&second).await, "Refund 5521", "the kept title, accepted");
    let asked = asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert!(asked[0].kept && asked[0].title == "Refund 5521" && asked[0].id == "ticket-1", "{asked:?}");
    assert!(asked[0].request_id.as_str().starts_with("kept-title-"), "{asked:?}");
    drop(second);

    // A hook that refuses: the declared title stays, and is what is kept now.
    let (third, asked) = run_with_rename_hook(&store, Some(false));
    third.pane();
    third.core.ready();
    assert_eq!(title_now(&third).await, "Maria Lopez");
    assert_eq!(asked.lock().unwrap().len(), 1);
    drop(third);
    let (fourth, asked) = run_with_rename_hook(&store, Some(true));
    fourth.pane();
    fourth.core.ready();
    assert_eq!(title_now(&fourth).await, "Maria Lopez");
    assert!(asked.lock().unwrap().is_empty(), "nothing to offer: the kept title is the declared one");
}

#[tokio::test]
async fn without_a_rename_hook_the_declared_title_stays() {
    let store = Arc::new(MemoryReceiptStore::new());
    let (first, _) = run_with_rename_hook(&store, Some(true));
    first.pane().rename("Set by the program").unwrap();
    first.core.ready();
    assert_eq!(title_now(&first).await, "Set by the program");
    drop(first);
    let (second, _) = run_with_rename_hook(&store, None);
    second.pane();
    second.core.ready();
    assert_eq!(title_now(&second).await, "Maria Lopez");
}

#[tokio::test]
async fn only_the_phones_title_is_offered_and_never_over_a_rename_the_program_made_since_it_declared_the_pane()
 {
    // The program's own rename is not offered back.
    let store = Arc::new(MemoryReceiptStore::new());
    let (first, _) = run_with_rename_hook(&store, Some(true));
    first.pane().rename("Named by the program").unwrap();
    first.core.ready();
    assert_eq!(title_now(&first).await, "Named by the program");
    drop(first);
    let (second, asked) = run_with_rename_hook(&store, Some(true));
    second.pane();
    second.core.ready();
    assert_eq!(title_now(&second).await, "Maria Lopez");
    assert!(asked.lock().unwrap().is_empty(), "the program's title is not offered");
    drop(second);

    // The phone's is, with a request id of this run's own, unless the
    // program renamed the pane before its kept title came back.
    let store = phone_renamed_in_a_first_run("Refund 5521").await;
    let (second, asked) = run_with_rename_hook(&store, Some(true));
    second.pane().rename("Renamed at start").unwrap();
    second.core.ready();
    assert_eq!(title_now(&second).await, "Renamed at start", "the program's newer title stays");
    assert!(asked.lock().unwrap().is_empty(), "{:?}", asked.lock().unwrap());
    drop(second);
    let (third, asked) = run_with_rename_hook(&store, Some(true));
    third.pane();
    third.core.ready();
    assert_eq!(title_now(&third).await, "Maria Lopez", "the program's title was kept last: nothing offered");
    assert!(asked.lock().unwrap().is_empty());
}
