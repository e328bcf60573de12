//! Acknowledged sends across a restart (§9.1), with a store that keeps
//! them: a send answered `queued` runs after the restart, once; a send whose
//! turn the restart cut is closed with a notice; a replay says which (the
//! `Durable-Delivery` header; its body stays the first answer's).
use durable_runtime::test_util as harness;

use std::sync::{Arc, Mutex};

use durable_runtime::{ChatHandler, Lookup, PendingSend, Receipt, ReceiptStore, SendState, StoreError, Turn};
use harness::Harness;
use serde_json::json;

/// Receipts and sends "on disk": shared by the runs of the agent.
#[derive(Default)]
struct Disk {
    receipts: Vec<(String, Receipt)>,
    sends: Vec<PendingSend>,
    /// The journal's writes, in order: `record <id> <state>`, `state <id> <state>`.
    writes: Vec<String>,
}

#[derive(Clone, Default)]
struct JournalStore(Arc<Mutex<Disk>>);

impl ReceiptStore for JournalStore {
    async fn get(&self, request_id: &str) -> Result<Lookup, StoreError> {
        let disk = self.0.lock().unwrap();
        Ok(match disk.receipts.iter().find(|(id, _)| id == request_id) {
            Some((_, r)) => Lookup::Found(r.clone()),
            None => Lookup::Unknown,
        })
    }

    async fn put(&self, request_id: &str, receipt: Receipt, _group: &str) -> Result<(), StoreError> {
        let mut disk = self.0.lock().unwrap();
        if !disk.receipts.iter().any(|(id, _)| id == request_id) {
            disk.receipts.push((request_id.to_owned(), receipt));
        }
        Ok(())
    }

    async fn record_send(&self, send: PendingSend) -> Result<(), StoreError> {
        let mut disk = self.0.lock().unwrap();
        disk.writes.push(format!("record {} {}", send.request_id, send.state.as_str()));
        disk.sends.retain(|s| s.request_id != send.request_id);
        disk.sends.push(send);
        Ok(())
    }

    async fn set_send_state(&self, request_id: &str, state: SendState) -> Result<(), StoreError> {
        let mut disk = self.0.lock().unwrap();
        disk.writes.push(format!("state {request_id} {}", state.as_str()));
        if let Some(s) = disk.sends.iter_mut().find(|s| s.request_id == request_id) {
            s.state = state;
        }
        Ok(())
    }

    async fn send_state(&self, request_id: &str) -> Result<Option<SendState>, StoreError> {
        Ok(self.0.lock().unwrap().sends.iter().find(|s| s.request_id == request_id).map(|s| s.state))
    }

    fn keeps_sends(&self) -> bool {
        true
    }

    async fn unfinished_sends(&self) -> Result<Vec<PendingSend>, StoreError> {
        let disk = self.0.lock().unwrap();
        Ok(disk
            .sends
            .iter()
            .filter(|s| matches!(s.state, SendState::Queued | SendState::Running))
            .cloned()
            .collect())
    }
}

/// The first run's chat: its turns never end (the process dies in them).
struct Stuck;

impl ChatHandler for Stuck {
    async fn turn(&self, _turn: Turn) {
        std::future::pending::<()>().await
    }
}

/// The second run's chat: answers at once, and counts what it ran.
struct Quick(Arc<Mutex<Vec<String>>>);

impl ChatHandler for Quick {
    async fn turn(&self, turn: Turn) {
        self.0.lock().unwrap().push(turn.text().to_owned());
        turn.reply(format!("did: {}", turn.text()));
    }
}

const SEND: &str = "/v1/panes/ticket-1/send";

#[tokio::test]
async fn queued_sends_run_after_a_restart_and_a_cut_turn_is_closed_with_a_notice() {
    let store = JournalStore::default();
    let first = Harness::with(|b| b.receipts(store.clone()));
    first.pane().on_send(Stuck).unwrap();
    first.core.ready();
    let mut answers = Vec::new();
    for (rid, text) in [("r-1", "one"), ("r-2", "two"), ("r-3", "three")] {
        let r = first.post(SEND, json!({"requestId": rid, "text": text})).await;
        assert_eq!(r.status, 200, "{:?}", r.json);
        answers.push(r.json);
    }
    assert_eq!(
        (answers[0]["result"].clone(), answers[1]["result"].clone()),
        (json!("sent"), json!("queued"))
    );
    // A send recorded but never answered (the process died before its
    // receipt), and one answered for a pane the next run does not open.
    store.record_send(PendingSend::new("r-4", "ticket-1", "unanswered", SendState::Queued)).await.unwrap();
    store.record_send(PendingSend::new("r-5", "ticket-9", "elsewhere", SendState::Queued)).await.unwrap();
    store
        .put("r-5", Receipt::of_json(200, &json!({"ok": true, "result": "queued"})), "pane:ticket-9")
        .await
        .unwrap();

    // The restart: a new core over the same store; the first is never heard from again.
    let ran = Arc::new(Mutex::new(Vec::new()));
    let second = Harness::with(|b| b.receipts(store.clone()));
    second.pane().on_send(Quick(ran.clone())).unwrap();
    assert!(ran.lock().unwrap().is_empty(), "nothing runs before the program says it is ready");
    second.core.ready();
    second.settle().await;
    assert_eq!(
        *ran.lock().unwrap(),
        ["two", "three"],
        "the queued sends ran once, in order; the cut one did not"
    );
    let notices = second.notices("ticket-1").await;
    assert_eq!(notices, ["The agent restarted while answering “one”; that answer did not finish."]);
    assert!(
        second.warns().iter().any(|w| w.contains("r-5") && w.contains("ticket-9")),
        "{:?}",
        second.warns()
    );

    // Each replay is the first answer; its header says where the send stands.
    for (rid, answer, delivery) in
        [("r-1", &answers[0], "closed"), ("r-2", &answers[1], "done"), ("r-3", &answers[2], "done")]
    {
        let again = second.post(SEND, json!({"requestId": rid, "text": "ignored"})).await;
        assert_eq!(again.delivery, Some(delivery), "{rid}: {:?}", again.json);
        let mut first_body = answer.clone();
        first_body["replayed"] = json!(true);
        assert_eq!(again.json, first_body, "{rid}: the body is the first answer's (§9)");
    }
    assert_eq!(ran.lock().unwrap().len(), 2, "no replay ran anything");
    assert_eq!(
        store.send_state("r-4").await.unwrap(),
        Some(SendState::Closed),
        "never answered: the phone's to repeat"
    );
    // A third run finds nothing left to do.
    let third = Harness::with(|b| b.receipts(store.clone()));
    third.pane().on_send(Quick(ran.clone())).unwrap();
    third.core.ready();
    third.settle().await;
    assert_eq!(ran.lock().unwrap().len(), 2);
    assert!(third.notices("ticket-1").await.is_empty());
}

#[tokio::test]
async fn with_the_memory_store_a_replay_is_the_first_answer_alone() {
    let h = Harness::new();
    let ran = Arc::new(Mutex::new(Vec::new()));
    h.pane().on_send(Quick(ran.clone())).unwrap();
    h.core.ready();
    let first = h.post(SEND, json!({"requestId": "r-1", "text": "hi"})).await;
    h.settle().await;
    let again = h.post(SEND, json!({"requestId": "r-1", "text": "hi"})).await;
    assert_eq!(again.delivery, None, "{:?}", again.json);
    assert_eq!(harness::without_replayed(&again.json), harness::without_replayed(&first.json));
}

/// A chat whose `check_send` says it has started, then waits for its gate:
/// the first send is still being processed when its repeat arrives.
struct Gated {
    entered: Arc<tokio::sync::Notify>,
    gate: Arc<tokio::sync::Notify>,
}

impl ChatHandler for Gated {
    async fn turn(&self, _turn: Turn) {}
    async fn check_send(&self, _req: durable_runtime::SendRequest) -> durable_runtime::HandlerResult {
        self.entered.notify_one();
        self.gate.notified().await;
        Ok(())
    }
}

#[tokio::test]
async fn a_repeat_that_waited_for_the_first_send_says_where_it_stands_too() {
    let store = JournalStore::default();
    let h = Harness::with(|b| b.receipts(store.clone()));
    let (entered, gate) = (Arc::new(tokio::sync::Notify::new()), Arc::new(tokio::sync::Notify::new()));
    h.pane().on_send(Gated { entered: entered.clone(), gate: gate.clone() }).unwrap();
    h.core.ready();
    let body = json!({"requestId": "dup-1", "text": "hi"});
    let first = h.post(SEND, body.clone());
    let repeat = h.post(SEND, body.clone());
    let release = async {
        // The first is inside its check; the repeat, polled after it, finds
        // the request id in flight and waits for its outcome.
        entered.notified().await;
        for _ in 0..50 {
            tokio::task::yield_now().await;
        }
        gate.notify_one();
    };
    let (first, repeat, ()) = tokio::join!(first, repeat, release);
    assert_eq!(first.status, 200, "{:?}", first.json);
    assert_eq!(first.delivery, None, "a first answer is not a replay");
    assert_eq!(repeat.status, 200, "{:?}", repeat.json);
    assert_eq!(repeat.json["replayed"], json!(true), "{:?}", repeat.json);
    assert!(
        repeat.delivery.is_some(),
        "§9.1: the repeat replays a send, so it says where it stands: {:?}",
        repeat.json
    );
    assert_eq!(harness::without_replayed(&repeat.json), harness::without_replayed(&first.json));
    let later = h.post(SEND, body).await;
    assert!(later.delivery.is_some(), "a later replay says it too: {:?}", later.json);
}

/// Holds its turn until told to end it.
struct Held(Arc<tokio::sync::Notify>);

impl ChatHandler for Held {
    async fn turn(&self, turn: Turn) {
        self.0.notified().await;
        turn.reply("done");
    }
}

#[tokio::test]
async fn a_send_run_at_once_is_recorded_running_in_one_write_and_a_queued_one_moves_from_queued() {
    let store = JournalStore::default();
    let agent = Harness::with(|b| b.receipts(store.clone()));
    let release = Arc::new(tokio::sync::Notify::new());
    agent.pane().on_send(Held(release.clone())).unwrap();
    agent.core.ready();
    let first = agent.post(SEND, json!({"requestId": "r-1", "text": "one"})).await;
    assert_eq!(first.json["result"], "sent", "{:?}", first.json);
    let second = agent.post(SEND, json!({"requestId": "r-2", "text": "two"})).await;
    assert_eq!(second.json["result"], "queued", "{:?}", second.json);
    let writes = |store: &JournalStore| store.0.lock().unwrap().writes.clone();
    // Before its turn: r-1 one write, already `running`; r-2 waits, `queued`.
    assert_eq!(writes(&store), ["record r-1 running", "record r-2 queued"]);
    release.notify_one(); // r-1's turn ends; r-2's begins
    agent.settle().await;
    release.notify_one(); // r-2's ends
    agent.settle().await;
    assert_eq!(
        writes(&store),
        ["record r-1 running", "record r-2 queued", "state r-1 done", "state r-2 running", "state r-2 done"]
    );
}
