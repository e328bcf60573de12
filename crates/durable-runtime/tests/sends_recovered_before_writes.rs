//! The sends a restart left are back in their queues before the pane takes
//! a write (§9.1, issue 29): in a burst that goes on across a restart, a
//! new send arriving while the recovery still reads the store waits behind
//! the sends queued before the restart, and the repeat of a send the last
//! run recorded but never answered runs once — not once by its repeat and
//! once more by the recovery.
use durable_runtime::test_util as harness;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use durable_runtime::types::exchange::{Caller, Request};
use durable_runtime::{ChatHandler, Lookup, PendingSend, Receipt, ReceiptStore, SendState, StoreError, Turn};
use harness::Harness;
use serde_json::json;
use tokio::sync::Semaphore;

/// Receipts and sends "on disk"; the first `get` after `hold` is armed
/// waits for `gate` (the recovery, reading the store slowly).
#[derive(Clone)]
struct SlowStore {
    receipts: Arc<Mutex<Vec<(String, Receipt)>>>,
    sends: Arc<Mutex<Vec<PendingSend>>>,
    hold: Arc<AtomicBool>,
    gate: Arc<Semaphore>,
}

impl Default for SlowStore {
    fn default() -> Self {
        SlowStore {
            receipts: Arc::default(),
            sends: Arc::default(),
            hold: Arc::default(),
            gate: Arc::new(Semaphore::new(0)),
        }
    }
}

impl ReceiptStore for SlowStore {
    async fn get(&self, request_id: &str) -> Result<Lookup, StoreError> {
        if self.hold.swap(false, Ordering::SeqCst) {
            let _ = self.gate.acquire().await;
        }
        let receipts = self.receipts.lock().unwrap();
        Ok(match receipts.iter().find(|(id, _)| id == request_id) {
            Some((_, r)) => Lookup::Found(r.clone()),
            None => Lookup::Unknown,
        })
    }

    async fn put(&self, request_id: &str, receipt: Receipt, _group: &str) -> Result<(), StoreError> {
        let mut receipts = self.receipts.lock().unwrap();
        if !receipts.iter().any(|(id, _)| id == request_id) {
            receipts.push((request_id.to_owned(), receipt));
        }
        Ok(())
    }

    async fn record_send(&self, send: PendingSend) -> Result<(), StoreError> {
        let mut sends = self.sends.lock().unwrap();
        sends.retain(|s| s.request_id != send.request_id);
        sends.push(send);
        Ok(())
    }

    async fn set_send_state(&self, request_id: &str, state: SendState) -> Result<(), StoreError> {
        if let Some(s) = self.sends.lock().unwrap().iter_mut().find(|s| s.request_id == request_id) {
            s.state = state;
        }
        Ok(())
    }

    async fn send_state(&self, request_id: &str) -> Result<Option<SendState>, StoreError> {
        Ok(self.sends.lock().unwrap().iter().find(|s| s.request_id == request_id).map(|s| s.state))
    }

    fn keeps_sends(&self) -> bool {
        true
    }

    async fn unfinished_sends(&self) -> Result<Vec<PendingSend>, StoreError> {
        let sends = self.sends.lock().unwrap();
        Ok(sends
            .iter()
            .filter(|s| matches!(s.state, SendState::Queued | SendState::Running))
            .cloned()
            .collect())
    }
}

/// Answers at once, and counts what it ran.
struct Quick(Arc<Mutex<Vec<String>>>);

impl ChatHandler for Quick {
    async fn turn(&self, turn: Turn) {
        self.0.lock().unwrap().push(turn.text().to_owned());
        turn.reply(format!("did: {}", turn.text()));
    }
}

fn send(pane: &str, request_id: &str, text: &str) -> Request {
    let body = json!({"requestId": request_id, "text": text}).to_string();
    Request::post(&format!("/v1/panes/{pane}/send"), body, Caller::OtherProcess)
}

#[tokio::test]
async fn writes_arriving_while_the_restart_recovers_sends_wait_for_it() {
    let store = SlowStore::default();
    // What the last run left: "one" answered `queued` on ticket-1; "two"
    // recorded on ticket-2, the process killed before its answer.
    store.record_send(PendingSend::new("r-1", "ticket-1", "one", SendState::Queued)).await.unwrap();
    store
        .put("r-1", Receipt::of_json(200, &json!({"ok": true, "result": "queued"})), "pane:ticket-1")
        .await
        .unwrap();
    store.record_send(PendingSend::new("r-2", "ticket-2", "two", SendState::Queued)).await.unwrap();

    let ran = Arc::new(Mutex::new(Vec::new()));
    let h = Harness::with(|b| b.receipts(store.clone()));
    h.pane().on_send(Quick(ran.clone())).unwrap();
    h.pane_named("ticket-2").on_send(Quick(ran.clone())).unwrap();
    // The recovery has read the sends left and is looking up the first one's receipt.
    store.hold.store(true, Ordering::SeqCst);
    h.core.ready();
    h.settle().await;
    assert!(!store.hold.load(Ordering::SeqCst), "the recovery reads the store");

    // The burst goes on: a new send on ticket-1, and the phone repeats "two".
    let (core, core2) = (h.core.clone(), h.core.clone());
    let new = tokio::spawn(async move { core.driver().handle(send("ticket-1", "r-3", "three")).await });
    let again = tokio::spawn(async move { core2.driver().handle(send("ticket-2", "r-2", "two")).await });
    h.settle().await;
    store.gate.add_permits(1);
    h.settle().await;
    let (new, again) = (new.await.unwrap(), again.await.unwrap());
    h.settle().await;
    assert_eq!((new.status, again.status), (200, 200));

    let ran = ran.lock().unwrap().clone();
    let on_1: Vec<&String> = ran.iter().filter(|t| *t != "two").collect();
    assert_eq!(on_1, ["one", "three"], "the send queued before the restart goes first");
    assert_eq!(ran.iter().filter(|t| *t == "two").count(), 1, "the repeated send ran once: {ran:?}");
    for rid in ["r-1", "r-2", "r-3"] {
        assert_eq!(store.send_state(rid).await.unwrap(), Some(SendState::Done), "{rid}");
    }
}
