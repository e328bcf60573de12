//! An ask is shown once kept (docs/wire.md §7.2): with a store that keeps
//! asks, readers see a card once the store has it; the edges — a store
//! that hangs (shown unkept past a tail's worth, and nothing else hidden
//! behind it), a store that keeps conversations but no asks (asks in the
//! state at once, §9.2), a card closed and raised again before its keep,
//! a pane closed and reopened while its card waits. (Its main case and a
//! card raised again after a restart: `kept_asks.rs`.)
use durable_runtime::test_util as harness;

use std::sync::Arc;

use durable_runtime::types::{AskOption, AskSpec, Item, ask_id_for};
use durable_runtime::{
    ConversationOp, KeptAskRecord, Lookup, MemoryReceiptStore, Receipt, ReceiptStore, StoreError,
};
use harness::Harness;
use serde_json::{Value, json};

/// A store that keeps asks whose `keep_ask` waits for a permit.
#[derive(Clone)]
struct HungAsks {
    memory: Arc<MemoryReceiptStore>,
    gate: Arc<tokio::sync::Semaphore>,
}

impl HungAsks {
    fn new() -> Self {
        HungAsks {
            memory: Arc::new(MemoryReceiptStore::new()),
            gate: Arc::new(tokio::sync::Semaphore::new(0)),
        }
    }
}

impl ReceiptStore for HungAsks {
    async fn get(&self, request_id: &str) -> Result<Lookup, StoreError> {
        self.memory.get(request_id).await
    }
    async fn put(&self, request_id: &str, receipt: Receipt, group: &str) -> Result<(), StoreError> {
        self.memory.put(request_id, receipt, group).await
    }
    fn keeps_asks(&self) -> bool {
        true
    }
    async fn keep_ask(&self, _ask: KeptAskRecord) -> Result<(), StoreError> {
        self.gate.acquire().await.map_err(|_| StoreError::new("closed"))?.forget();
        Ok(())
    }
    async fn forget_ask(&self, _ask_id: &str) -> Result<(), StoreError> {
        Ok(())
    }
    async fn kept_asks(&self) -> Result<Vec<KeptAskRecord>, StoreError> {
        Ok(Vec::new())
    }
}

/// A store that outlives the process (keeps sends and conversations, its
/// batches held until the gate opens), and keeps asks at once or not at all.
#[derive(Clone)]
struct SlowConversations {
    memory: Arc<MemoryReceiptStore>,
    gate: Arc<tokio::sync::Semaphore>,
    keeps_asks: bool,
}

impl SlowConversations {
    fn new(keeps_asks: bool) -> Self {
        SlowConversations {
            memory: Arc::new(MemoryReceiptStore::new()),
            gate: Arc::new(tokio::sync::Semaphore::new(0)),
            keeps_asks,
        }
    }
}

impl ReceiptStore for SlowConversations {
    fn keeps_asks(&self) -> bool {
        self.keeps_asks
    }
    async fn keep_ask(&self, _ask: KeptAskRecord) -> Result<(), StoreError> {
        Ok(())
    }
    async fn forget_ask(&self, _ask_id: &str) -> Result<(), StoreError> {
        Ok(())
    }
    async fn kept_asks(&self) -> Result<Vec<KeptAskRecord>, StoreError> {
        Ok(Vec::new())
    }
    async fn get(&self, request_id: &str) -> Result<Lookup, StoreError> {
        self.memory.get(request_id).await
    }
    async fn put(&self, request_id: &str, receipt: Receipt, group: &str) -> Result<(), StoreError> {
        self.memory.put(request_id, receipt, group).await
    }
    fn keeps_conversations(&self) -> bool {
        true
    }
    fn keeps_sends(&self) -> bool {
        true
    }
    async fn keep_conversation(
        &self,
        ops: Vec<ConversationOp>,
        at: durable_runtime::types::Timestamp,
    ) -> Result<(), StoreError> {
        self.gate.acquire().await.map_err(|_| StoreError::new("closed"))?.forget();
        self.memory.keep_conversation(ops, at).await
    }
    async fn kept_conversation(
        &self,
        pane: &str,
    ) -> Result<Option<durable_runtime::KeptConversation>, StoreError> {
        self.memory.kept_conversation(pane).await
    }
}

/// A ready agent over `store` whose pane shows an item the store does not
/// have yet (the store's first batch let through, the next held).
async fn behind_an_item(store: SlowConversations) -> (SlowConversations, Harness, durable_runtime::Pane) {
    let s = store.clone();
    let h = Harness::with(move |b| b.receipts(s));
    let pane = h.pane();
    h.core.ready();
    store.gate.add_permits(1);
    h.core.conversations_kept().await;
    pane.write(Item::reply("a", "one").unwrap()).unwrap();
    (store, h, pane)
}

fn card(call: &str) -> AskSpec {
    AskSpec::choice(call, "Go?", [AskOption::new("yes", "Yes"), AskOption::new("no", "No")])
}

fn kinds(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| match e["type"].as_str().unwrap() {
            "item" => format!("item {}", e["item"]["id"].as_str().unwrap_or("")),
            other => other.to_owned(),
        })
        .collect()
}

/// A store that hangs on a card: past a tail's worth of events waiting
/// behind it, the card is shown unkept (in the state too), and so is
/// every event behind it that waits for nothing else — the pane is not
/// left `tail_limit` events behind for as long as the store hangs.
#[tokio::test]
async fn after_an_unkept_ask_overflows_the_events_behind_it_are_not_hidden() {
    let store = HungAsks::new();
    let s = store.clone();
    let h = Harness::with(move |b| b.receipts(s).tail_limit(3));
    let pane = h.pane();
    h.settle().await;
    let _card = pane.ask(card("c-1")).unwrap();
    for n in 1..=4 {
        pane.write(Item::reply(&format!("r{n}"), format!("n{n}")).unwrap()).unwrap();
    }
    h.settle().await;
    for _ in 0..50 {
        tokio::task::yield_now().await;
    }
    let state = h.state().await.json;
    assert_eq!(state["asks"].as_array().unwrap().len(), 1, "shown unkept (overflow): {state}");
    let view = h.view("ticket-1").await;
    let ids: Vec<&str> =
        view["items"].as_array().unwrap().iter().map(|i| i["id"].as_str().unwrap()).collect();
    assert_eq!(
        (ids, view["next"].clone()),
        (vec!["r1", "r2", "r3", "r4"], json!(5)),
        "nothing of r2..r4 waits for the store (tail_limit 3)"
    );
}

/// A store that keeps conversations but no asks: an ask raised behind an
/// item the store does not have yet is in the state poll at once (§9.2),
/// as a title is; only its `ask` event waits behind the item.
#[tokio::test]
async fn without_a_store_that_keeps_asks_an_ask_is_in_the_state_at_once() {
    let (store, h, pane) = behind_an_item(SlowConversations::new(false)).await;
    let _card = pane.ask(card("c-1")).unwrap();
    h.settle().await;
    let id = ask_id_for("ticket-1", "c-1");
    let state = h.state().await.json;
    assert_eq!(state["asks"][0]["id"], id.as_str(), "an ask of a store that keeps no asks: {state}");
    store.gate.add_permits(1000);
}

/// Closed and raised again under the same id before the first keep is
/// applied: the first keep never shows the second raise early, which
/// shows once its own keep is applied; each step is a new seq.
#[tokio::test]
async fn raised_again_under_the_same_id_before_its_keep_is_applied() {
    let store = HungAsks::new();
    let s = store.clone();
    let h = Harness::with(move |b| b.receipts(s));
    let pane = h.pane();
    h.settle().await;
    let first = pane.ask(card("c-1")).unwrap();
    let id = first.id().to_owned();
    pane.decide(&id, durable_runtime::types::Answer::option("yes")).unwrap();
    let _second = pane.ask(card("c-1")).unwrap();
    h.settle().await;
    let s0 = h.state().await.json;
    assert_eq!(s0["asks"], json!([]));
    store.gate.add_permits(1);
    h.settle().await;
    let s1 = h.state().await.json;
    assert!(s1["seq"].as_u64() > s0["seq"].as_u64());
    assert_eq!(s1["asks"], json!([]), "the second raise is not kept yet: {s1}");
    let k: Vec<String> = kinds(&h.all_events("ticket-1").await);
    assert_eq!(k, vec!["ask".to_owned(), "ask-closed".to_owned(), format!("item ask-closed-{id}")], "{k:?}");
    store.gate.add_permits(1);
    h.settle().await;
    let s2 = h.state().await.json;
    assert!(s2["seq"].as_u64() > s1["seq"].as_u64());
    assert_eq!(s2["asks"][0]["id"], id.as_str(), "{s2}");
    assert_eq!(s2["panes"][0]["openAsks"], json!([id.clone()]));
    let k: Vec<String> = kinds(&h.all_events("ticket-1").await);
    assert_eq!(k.len(), 4, "{k:?}");
    assert_eq!(h.view("ticket-1").await["asks"][0]["id"], id.as_str());
}

/// A pane closed while its card waits, then reopened: the card's events
/// come once kept; nothing stays hidden.
#[tokio::test]
async fn a_pane_closed_and_reopened_while_its_card_waits() {
    let store = HungAsks::new();
    let s = store.clone();
    let h = Harness::with(move |b| b.receipts(s).caps(durable_runtime::types::Caps::all()));
    let pane = h.pane();
    h.settle().await;
    let _c = pane.ask(card("c-1")).unwrap();
    pane.write(Item::reply("after", "x").unwrap()).unwrap();
    h.settle().await;
    pane.close();
    let closed = h.state().await;
    h.settle().await;
    store.gate.add_permits(5);
    h.settle().await;
    let re = h.post("/v1/reopen", json!({"requestId": "ro-1", "id": "ticket-1"})).await;
    h.settle().await;
    let r = h.events("ticket-1", 0).await;
    let state = h.state().await.json;
    assert_eq!(state["asks"], json!([]), "{state}");
    let k = kinds(r.json["events"].as_array().cloned().unwrap_or_default().as_slice());
    assert!(
        k.contains(&"ask".to_owned()) && k.contains(&"item after".to_owned()),
        "close {:?} reopen {:?} events {:?}",
        closed.json,
        re.json,
        r.json
    );
}

/// A card kept while its `ask` event waits behind an item the store does
/// not have yet: the state poll shows it now, under a new seq (a state
/// answered before it is not served again as it was).
#[tokio::test]
async fn a_card_kept_while_its_event_waits_behind_an_item_is_in_the_state_under_a_new_seq() {
    let (store, h, pane) = behind_an_item(SlowConversations::new(true)).await;
    h.settle().await;
    let before = h.state().await.json;
    let _card = pane.ask(card("c-1")).unwrap();
    h.settle().await;
    let after = h.state().await.json;
    let id = ask_id_for("ticket-1", "c-1");
    assert!(after["seq"].as_u64() > before["seq"].as_u64(), "{before} {after}");
    assert_eq!(after["asks"][0]["id"], id.as_str(), "{after}");
    let events = h.all_events("ticket-1").await;
    assert!(!events.iter().any(|e| e["type"] == "ask"), "its event waits behind the item: {events:?}");
    store.gate.add_permits(1000);
}
