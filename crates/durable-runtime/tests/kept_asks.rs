//! Asks open at a stop, kept by the receipt store and handed back at the
//! next start (§7.2): raised again by the same id (a held answer lands),
//! claimed to raise later, closed by the agent, or closed at `ready()` with
//! the chat line when nobody claimed them; the store forgets each as it
//! closes, in order.
use durable_runtime::test_util as harness;

use std::sync::{Arc, Mutex};

use durable_runtime::types::{AskOption, AskSpec, ToolInfo, ask_id_for};
use durable_runtime::{
    ApprovalOptions, KeptAskRecord, Lookup, Receipt, ReceiptStore, StoreError, require_approval,
};
use harness::{Harness, poll_once};
use serde_json::{Value, json};

/// Receipts and kept asks "on disk", shared by the runs of the agent.
#[derive(Default)]
struct Disk {
    receipts: Vec<(String, Receipt)>,
    asks: Vec<KeptAskRecord>,
}

#[derive(Clone, Default)]
struct AskStore(Arc<Mutex<Disk>>);

impl AskStore {
    fn kept_ids(&self) -> Vec<String> {
        self.0.lock().unwrap().asks.iter().map(|a| a.ask.id.clone()).collect()
    }
}

impl ReceiptStore for AskStore {
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

    fn keeps_asks(&self) -> bool {
        true
    }

    async fn keep_ask(&self, ask: KeptAskRecord) -> Result<(), StoreError> {
        // Written as text and read back, as a real store does.
        let ask = KeptAskRecord::from_json_text(&ask.to_json_text()?)?;
        let mut disk = self.0.lock().unwrap();
        match disk.asks.iter_mut().find(|a| a.ask.id == ask.ask.id) {
            Some(old) => *old = ask,
            None => disk.asks.push(ask),
        }
        Ok(())
    }

    async fn forget_ask(&self, ask_id: &str) -> Result<(), StoreError> {
        self.0.lock().unwrap().asks.retain(|a| a.ask.id != ask_id);
        Ok(())
    }

    async fn kept_asks(&self) -> Result<Vec<KeptAskRecord>, StoreError> {
        Ok(self.0.lock().unwrap().asks.clone())
    }
}

fn run(store: &AskStore) -> Harness {
    let store = store.clone();
    Harness::with(move |b| b.receipts(store))
}

fn refund(call: &str) -> AskSpec {
    AskSpec::choice(
        call,
        "refund wants to run",
        [AskOption::new("allow", "Allow"), AskOption::new("deny", "Deny")],
    )
    .tool(ToolInfo::from_call("refund", &json!({"order": "5521", "amount": 40})))
    .push_title("refund needs a yes")
}

fn pick(request_id: &str, option: &str, hash: &str) -> Value {
    json!({"requestId": request_id, "answer": {"optionIds": [option]}, "hash": hash})
}

/// The first run raises the card and "dies" with it open.
async fn first_run(store: &AskStore, spec: AskSpec) -> (String, String) {
    let h = run(store);
    let handle = h.pane().ask(spec).unwrap();
    h.settle().await;
    let id = handle.id().to_owned();
    let hash = h.state().await.json["asks"][0]["hash"].as_str().unwrap().to_owned();
    assert_eq!(store.kept_ids(), std::slice::from_ref(&id), "the open ask is kept");
    (id, hash)
}

#[tokio::test]
async fn an_ask_open_at_a_stop_is_handed_back_and_raised_again_by_the_same_id_with_its_agent_data() {
    let store = AskStore::default();
    let spec = refund("refund-1").agent_data(json!({"order": "5521"})).expires_in_ms(600_000);
    let (id, hash) = first_run(&store, spec).await;

    let h = run(&store);
    h.pane();
    let kept = h.core.kept_asks().await.unwrap();
    assert_eq!(kept.len(), 1);
    let ask = kept.into_iter().next().unwrap();
    assert_eq!(ask.id(), id);
    assert_eq!(ask.id(), ask_id_for("ticket-1", "refund-1"));
    assert_eq!(ask.pane(), "ticket-1");
    assert_eq!(ask.tool_call_id(), "refund-1");
    assert_eq!(ask.agent_data(), Some(&json!({"order": "5521"})));
    assert_eq!(ask.ask().title, "refund wants to run");
    assert_eq!(ask.ask().tool.as_ref().unwrap().call, "refund(order: \"5521\", amount: 40)");
    assert_eq!(ask.ask().expires_at.unwrap().as_millis(), harness::T0 + 600_000, "the kept expiry");
    let handle = ask.raise().unwrap();
    h.core.ready();
    h.settle().await;

    let state = h.state().await.json;
    assert_eq!(state["asks"][0]["id"], id.as_str());
    assert_eq!(state["asks"][0]["hash"], hash.as_str(), "the same card, so the same hash");
    assert_eq!(state["asks"][0]["push"]["title"], "refund needs a yes");
    let r = h.answer(&id, pick("r-1", "allow", &hash)).await;
    assert_eq!(r.status, 200, "{:?}", r.json);
    let mut handle = Box::pin(handle);
    let answer = poll_once(&mut handle).expect("decided").unwrap();
    assert_eq!(answer.option_id(), Some("allow"));
    h.settle().await;
    assert!(store.kept_ids().is_empty(), "a decided ask is forgotten");
}

#[tokio::test]
async fn an_answer_sent_during_the_restart_is_held_and_lands_when_the_ask_is_raised_again() {
    let store = AskStore::default();
    let (id, hash) = first_run(&store, refund("refund-1").agent_data(json!({"order": "5521"}))).await;

    let h = run(&store);
    let pane = h.pane();
    // The agent claims the ask to raise it after `ready()` (its work is
    // not back yet); the phone's answer arrives in between.
    let kept = h.core.kept_asks().await.unwrap();
    let spec = kept.into_iter().next().unwrap().claim();
    h.core.ready();
    h.settle().await;
    let held = h.answer(&id, pick("r-1", "allow", &hash)).await;
    assert_eq!((held.status, held.json["result"].as_str()), (202, Some("held")));
    assert!(h.notices("ticket-1").await.is_empty(), "a claimed ask is not closed at ready");

    let mut handle = Box::pin(pane.ask(spec).unwrap());
    let answer = poll_once(&mut handle).expect("the held answer applied at raise").unwrap();
    assert_eq!(answer.option_id(), Some("allow"));
    let replay = h.answer(&id, pick("r-1", "allow", &hash)).await;
    assert_eq!((replay.status, replay.json["replayed"].as_bool()), (200, Some(true)));
    h.settle().await;
    assert!(store.kept_ids().is_empty());
}

#[tokio::test]
async fn a_kept_approval_raised_again_resolves_to_its_approval() {
    let store = AskStore::default();
    let h = run(&store);
    let pane = h.pane();
    let args = json!({"order": "5521", "amount": 40});
    let options = ApprovalOptions::new(&pane, "refund-1").agent_data(json!({"order": "5521"}));
    let _first = require_approval("refund", &args, options).unwrap();
    h.settle().await;
    let hash = h.state().await.json["asks"][0]["hash"].as_str().unwrap().to_owned();
    assert_eq!(store.0.lock().unwrap().asks[0].agent_data, Some(json!({"order": "5521"})));

    let h = run(&store);
    h.pane();
    let kept = h.core.kept_asks().await.unwrap().into_iter().next().unwrap();
    let id = kept.id().to_owned();
    let approval = kept.raise_approval().unwrap();
    h.core.ready();
    let r = h.answer(&id, pick("r-1", "deny", &hash)).await;
    assert_eq!(r.status, 200, "{:?}", r.json);
    let approval = approval.await;
    assert!(!approval.approved);
    assert_eq!(approval.ask_id, id);
}

#[tokio::test]
async fn an_ask_nobody_claims_by_ready_is_closed_with_the_chat_line_and_its_late_answer_is_refused() {
    let store = AskStore::default();
    let (id, hash) = first_run(&store, refund("refund-1")).await;

    let h = run(&store);
    h.pane();
    // Held while the agent starts (before it says whether it takes the ask up).
    let held = h.answer(&id, pick("r-1", "allow", &hash)).await;
    assert_eq!(held.status, 202);
    let kept = h.core.kept_asks().await.unwrap();
    assert_eq!(kept.len(), 1);
    drop(kept); // unclaimed
    h.core.ready();
    h.settle().await;
    assert_eq!(h.notices("ticket-1").await, ["Stopped before an answer: refund wants to run"]);
    assert!(h.open_ask_ids().await.is_empty());
    assert!(store.kept_ids().is_empty(), "closed, so forgotten");
    let late = h.answer(&id, pick("r-2", "allow", &hash)).await;
    assert_eq!((late.status, late.code()), (409, "ask-closed"), "{:?}", late.json);
    assert_eq!(late.json["decidedBy"], "program");
}

#[tokio::test]
async fn an_agent_that_never_asks_gets_its_kept_asks_closed_at_ready() {
    let store = AskStore::default();
    first_run(&store, refund("refund-1")).await;
    let h = run(&store);
    h.pane();
    h.core.ready();
    h.settle().await;
    assert_eq!(h.notices("ticket-1").await, ["Stopped before an answer: refund wants to run"]);
    assert!(store.kept_ids().is_empty());
}

#[tokio::test]
async fn an_ask_closed_by_the_agent_says_so_and_one_whose_pane_is_gone_closes_without_a_line() {
    let store = AskStore::default();
    let h = run(&store);
    let _a = h.pane().ask(refund("refund-1")).unwrap();
    let _b = h.pane_named("ticket-2").ask(refund("refund-2")).unwrap();
    h.settle().await;
    assert_eq!(store.kept_ids().len(), 2);

    // The next run has ticket-1 only.
    let h = run(&store);
    h.pane();
    let kept = h.core.kept_asks().await.unwrap();
    assert_eq!(kept.len(), 2);
    for ask in kept {
        if ask.pane() == "ticket-1" {
            ask.close();
        } else {
            assert!(ask.raise().is_err(), "its pane is not there");
        }
    }
    h.core.ready();
    h.settle().await;
    assert_eq!(h.notices("ticket-1").await, ["Stopped before an answer: refund wants to run"]);
    assert!(store.kept_ids().is_empty());
    assert!(h.core.kept_asks().await.unwrap().is_empty(), "nothing more after ready");
}

#[tokio::test]
async fn an_ask_that_closes_as_it_opens_is_not_left_kept() {
    let store = AskStore::default();
    let h = run(&store);
    let pane = h.pane();
    // Past its expiry already: it times out in the same call that raised it.
    let spec = refund("refund-1").expires_at(durable_runtime::types::Timestamp::from_millis(harness::T0 - 1));
    let _handle = pane.ask(spec).unwrap();
    let _other = pane.ask(refund("refund-2")).unwrap();
    pane.decide(&ask_id_for("ticket-1", "refund-2"), durable_runtime::types::Answer::option("allow"))
        .unwrap();
    h.settle().await;
    assert!(store.kept_ids().is_empty(), "kept, then forgotten, in that order: {:?}", store.kept_ids());
}

#[tokio::test]
async fn agent_data_is_bounded_and_never_sent_to_the_phone() {
    let store = AskStore::default();
    let h = run(&store);
    let pane = h.pane();
    let big = json!({"blob": "x".repeat(durable_runtime::types::AGENT_DATA_MAX)});
    let e = pane.ask(refund("refund-1").agent_data(big)).unwrap_err();
    assert!(e.to_string().contains("agent data"), "{e}");
    let _ok = pane.ask(refund("refund-2").agent_data(json!({"secret-key": 7}))).unwrap();
    let state = h.state().await;
    assert!(!state.json.to_string().contains("secret-key"), "agent data stays in the agent");
}

#[tokio::test]
async fn a_store_of_its_own_that_keeps_no_asks_is_said_once_and_the_memory_store_is_not() {
    #[derive(Default)]
    struct Receipts;
    impl ReceiptStore for Receipts {
        async fn get(&self, _: &str) -> Result<Lookup, StoreError> {
            Ok(Lookup::Unknown)
        }
        async fn put(&self, _: &str, _: Receipt, _: &str) -> Result<(), StoreError> {
            Ok(())
        }
    }
    let own = Harness::with(|b| b.receipts(Receipts));
    own.core.ready();
    own.core.ready();
    own.settle().await;
    let said: Vec<String> = own.warns().into_iter().filter(|w| w.contains("keeps no asks")).collect();
    assert_eq!(said.len(), 1, "{said:?}");

    let memory = Harness::new();
    memory.core.ready();
    memory.settle().await;
    assert!(!memory.warns().iter().any(|w| w.contains("keeps no asks")));
    let explicit = Harness::with(|b| b.receipts(durable_runtime::MemoryReceiptStore::new()));
    explicit.core.ready();
    explicit.settle().await;
    assert!(!explicit.warns().iter().any(|w| w.contains("keeps no asks")));
}

/// Which of the store's ask writes waits for the test to let it through.
#[derive(Clone, Copy, PartialEq)]
enum Held {
    Keep,
    Forget,
    /// The first `keep_ask` panics (an author's store with a bug).
    PanicOnFirstKeep,
    /// The read of the last run's asks.
    Read,
}

/// A store one of whose ask writes waits for the test to let it through.
#[derive(Clone)]
struct Gated {
    inner: AskStore,
    held: Held,
    gate: Arc<tokio::sync::Semaphore>,
    panicked: Arc<std::sync::atomic::AtomicBool>,
    /// The writes that reached the gate.
    at_gate: Arc<std::sync::atomic::AtomicUsize>,
}

impl Gated {
    fn new(held: Held) -> Gated {
        Gated {
            inner: AskStore::default(),
            held,
            gate: Arc::new(tokio::sync::Semaphore::new(0)),
            panicked: Arc::default(),
            at_gate: Arc::default(),
        }
    }

    /// Waits until a write waits at the gate (the driver runs on another
    /// thread: yielding here does not say its job got that far).
    async fn reached(&self) {
        for _ in 0..1000 {
            if self.at_gate.load(std::sync::atomic::Ordering::SeqCst) > 0 {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        panic!("no store write reached the gate in 10 s");
    }

    async fn pass(&self, op: Held) -> Result<(), StoreError> {
        if self.held == Held::PanicOnFirstKeep
            && op == Held::Keep
            && !self.panicked.swap(true, std::sync::atomic::Ordering::SeqCst)
        {
            panic!("the store's own bug");
        }
        if op == self.held {
            self.at_gate.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let _pass = self.gate.acquire().await.map_err(|_| StoreError::new("gate closed"))?;
        }
        Ok(())
    }
}

impl ReceiptStore for Gated {
    async fn get(&self, request_id: &str) -> Result<Lookup, StoreError> {
        self.inner.get(request_id).await
    }
    async fn put(&self, request_id: &str, receipt: Receipt, group: &str) -> Result<(), StoreError> {
        self.inner.put(request_id, receipt, group).await
    }
    fn keeps_asks(&self) -> bool {
        true
    }
    async fn keep_ask(&self, ask: KeptAskRecord) -> Result<(), StoreError> {
        self.pass(Held::Keep).await?;
        self.inner.keep_ask(ask).await
    }
    async fn forget_ask(&self, ask_id: &str) -> Result<(), StoreError> {
        self.pass(Held::Forget).await?;
        self.inner.forget_ask(ask_id).await
    }
    async fn kept_asks(&self) -> Result<Vec<KeptAskRecord>, StoreError> {
        self.pass(Held::Read).await?;
        self.inner.kept_asks().await
    }
}

/// A core over `store`, its driver the test's runtime.
fn gated_run(store: &Gated) -> Harness {
    let store = store.clone();
    Harness::with(move |b| b.receipts(store))
}

/// The ticket pane with a Refund button whose action raises the card
/// `refund-1`, and the phone's press of it (`b-1`), not sent yet.
fn refund_button(
    h: &Harness,
) -> (
    durable_runtime::Pane,
    futures_util::future::BoxFuture<'static, durable_runtime::types::exchange::Response>,
) {
    let pane = h.pane();
    pane.action("refund", "Refund", None).unwrap();
    pane.on_action(|req: durable_runtime::ActionRequest| async move {
        let _card = req.pane.ask(refund("refund-1"))?;
        Ok(())
    })
    .unwrap();
    let press = h.core.driver().handle(durable_runtime::types::exchange::Request::post(
        "/v1/panes/ticket-1/actions/refund",
        r#"{"requestId":"b-1"}"#,
        durable_runtime::types::exchange::Caller::OtherProcess,
    ));
    (pane, Box::pin(press))
}

#[tokio::test]
async fn a_button_that_raises_a_card_answers_only_once_the_store_has_the_card() {
    let store = Gated::new(Held::Keep);
    let h = gated_run(&store);
    let (_pane, press) = refund_button(&h);
    let mut press = tokio::spawn(press);
    h.settle().await;
    assert!(poll_once(&mut press).is_none(), "answered before the store kept the card");
    store.gate.add_permits(1);
    let response = tokio::time::timeout(std::time::Duration::from_secs(10), press).await.unwrap().unwrap();
    assert_eq!(response.status, 200);
    assert_eq!(store.inner.kept_ids(), [ask_id_for("ticket-1", "refund-1")]);
}

/// A store whose ask write panics (a bug of its own) does not hold up the
/// writes behind it: the button that raised the card answers, the warning
/// says the card may not survive a restart, and the next card is kept.
#[tokio::test]
async fn a_store_that_panics_on_an_ask_write_never_holds_up_the_writes_behind_it() {
    let store = Gated::new(Held::PanicOnFirstKeep);
    let h = gated_run(&store);
    let (pane, press) = refund_button(&h);
    let response = tokio::time::timeout(std::time::Duration::from_secs(10), tokio::spawn(press))
        .await
        .expect("the press waited forever behind the store's panic")
        .unwrap();
    assert_eq!(response.status, 200);
    assert!(store.panicked.load(std::sync::atomic::Ordering::SeqCst), "the store's write ran and panicked");
    let warned =
        h.warns.lock().unwrap().iter().any(|w| w.contains("stopped while writing an ask (it panicked)"));
    assert!(warned, "{:?}", h.warns.lock().unwrap());
    let _second = pane.ask(refund("refund-2")).unwrap();
    h.settle().await;
    let second = ask_id_for("ticket-1", "refund-2");
    for _ in 0..100 {
        if store.inner.kept_ids().contains(&second) {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    panic!("the next card was never kept: {:?}", store.inner.kept_ids());
}

/// A runtime shut down while the store writes a card drops that write's
/// job without a panic: the warning says so, and does not send a reader
/// of the logs hunting a panic.
#[test]
fn a_runtime_shut_down_mid_write_is_told_as_a_shutdown_not_a_panic() {
    let store = Gated::new(Held::Keep);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let h = runtime.block_on(async {
        let h = gated_run(&store);
        let _card = h.pane().ask(refund("refund-1")).unwrap();
        store.reached().await;
        h
    });
    assert!(store.inner.kept_ids().is_empty(), "the write waits at the gate");
    drop(runtime);
    let warns = h.warns.lock().unwrap().clone();
    let lost: Vec<&String> = warns.iter().filter(|w| w.contains("stopped while writing an ask")).collect();
    assert_eq!(lost.len(), 1, "{warns:?}");
    assert!(lost[0].contains("the runtime shut down") && !lost[0].contains("panicked"), "{lost:?}");
}

/// An answer the phone heard `200` for never leaves its card kept: were the
/// agent killed right after, the next start would raise a decided card
/// again, and sends queued behind it would wait for an answer that never
/// comes (the burst of issue 29 lost sends that way, with the desk's own
/// store of asks, which forgot an ask only after its answer had left).
#[tokio::test]
async fn an_answer_is_acknowledged_only_once_its_card_is_forgotten() {
    let store = Gated::new(Held::Forget);
    let h = gated_run(&store);
    let _handle = h.pane().ask(refund("refund-1")).unwrap();
    h.settle().await;
    let state = h.state().await.json;
    let (id, hash) = (state["asks"][0]["id"].as_str().unwrap().to_owned(), state["asks"][0]["hash"].clone());
    assert_eq!(store.inner.kept_ids(), std::slice::from_ref(&id));
    let body = json!({"requestId": "a-1", "answer": {"optionIds": ["allow"]}, "hash": hash}).to_string();
    let answer = h.core.driver().handle(durable_runtime::types::exchange::Request::post(
        &format!("/v1/asks/{id}"),
        body,
        durable_runtime::types::exchange::Caller::OtherProcess,
    ));
    let mut answer = tokio::spawn(answer);
    h.settle().await;
    assert!(poll_once(&mut answer).is_none(), "answered while the store still kept the card");
    store.gate.add_permits(1);
    let response = tokio::time::timeout(std::time::Duration::from_secs(10), answer).await.unwrap().unwrap();
    assert_eq!(response.status, 200);
    assert!(store.inner.kept_ids().is_empty());
}

/// A card raised again after its expiry takes the answer the phone sent in
/// time, during the restart; without one it times out.
#[tokio::test]
async fn a_card_raised_again_after_its_expiry_takes_an_answer_held_in_time() {
    let store = AskStore::default();
    let (id, hash) = first_run(&store, refund("refund-1").expires_in_ms(10_000)).await;
    let h = run(&store);
    let pane = h.pane();
    let spec = h.core.kept_asks().await.unwrap().into_iter().next().unwrap().claim();
    h.core.ready();
    let held = h.answer(&id, pick("r-1", "allow", &hash)).await;
    assert_eq!(held.status, 202);
    h.advance(20_000).await; // past the card's expiry before it is raised again
    let mut handle = Box::pin(pane.ask(spec).unwrap());
    let answer = poll_once(&mut handle).expect("decided at raise").expect("the held answer, not a timeout");
    assert_eq!(answer.option_id(), Some("allow"));

    // Without a held answer, the same late raise times out.
    let store = AskStore::default();
    first_run(&store, refund("refund-2").expires_in_ms(10_000)).await;
    let h = run(&store);
    let pane = h.pane();
    let spec = h.core.kept_asks().await.unwrap().into_iter().next().unwrap().claim();
    h.advance(20_000).await;
    let mut handle = Box::pin(pane.ask(spec).unwrap());
    assert!(poll_once(&mut handle).expect("decided at raise").is_err(), "timed out");
}

/// The last run's asks are read once: `ready()` coming while the agent's
/// `kept_asks()` reads them waits for that read, and closes only what the
/// agent did not take.
#[tokio::test]
async fn ready_during_the_agents_read_of_its_kept_asks_waits_for_it_and_closes_only_what_is_left() {
    let store = Gated::new(Held::Read);
    let (id, _) = first_run(&store.inner, refund("refund-1")).await;
    let h = gated_run(&store);
    h.pane();
    let core = h.core.clone();
    let mut reading = tokio::spawn(async move { core.kept_asks().await });
    h.settle().await;
    assert!(poll_once(&mut reading).is_none(), "the read waits for the store");
    h.core.ready();
    h.settle().await;
    assert!(h.notices("ticket-1").await.is_empty(), "ready() closed nothing while the read ran");
    store.gate.add_permits(1);
    let kept =
        tokio::time::timeout(std::time::Duration::from_secs(10), reading).await.unwrap().unwrap().unwrap();
    assert_eq!(kept.iter().map(|k| k.id().to_owned()).collect::<Vec<_>>(), std::slice::from_ref(&id));
    let handle = kept.into_iter().next().unwrap().raise().unwrap();
    h.settle().await;
    assert!(h.notices("ticket-1").await.is_empty(), "the agent's ask was not closed");
    assert_eq!(h.open_ask_ids().await, [id]);
    assert!(h.core.kept_asks().await.unwrap().is_empty(), "handed out once");
    drop(handle);
}

/// `ready()` reading first: the agent's `kept_asks()` that comes meanwhile
/// waits, and gets nothing (`ready()` closed them all).
#[tokio::test]
async fn kept_asks_during_readys_read_waits_and_gets_nothing_once_ready_closed_them() {
    let store = Gated::new(Held::Read);
    let (_, _) = first_run(&store.inner, refund("refund-1")).await;
    let h = gated_run(&store);
    h.pane();
    h.core.ready();
    h.settle().await;
    let core = h.core.clone();
    let mut late = tokio::spawn(async move { core.kept_asks().await });
    h.settle().await;
    assert!(poll_once(&mut late).is_none(), "waits for ready()'s read");
    store.gate.add_permits(1);
    let kept =
        tokio::time::timeout(std::time::Duration::from_secs(10), late).await.unwrap().unwrap().unwrap();
    assert!(kept.is_empty());
    h.settle().await;
    assert_eq!(h.notices("ticket-1").await, ["Stopped before an answer: refund wants to run"]);
}

/// A write waiting for the store to keep its card, whose caller goes away,
/// goes on without it: once the store answers, its receipt is kept (a
/// repeat replays it) and nothing of it is left behind.
#[tokio::test]
async fn a_write_waiting_for_the_store_that_goes_away_leaves_nothing_behind() {
    let store = Gated::new(Held::Keep);
    let h = gated_run(&store);
    let _ = refund_button(&h);
    h.settle().await;
    let links = harness::links_in_use(&h.core);
    let press = h.core.driver().handle(durable_runtime::types::exchange::Request::post(
        "/v1/panes/ticket-1/actions/refund",
        r#"{"requestId":"b-1"}"#,
        durable_runtime::types::exchange::Caller::OtherProcess,
    ));
    let press = tokio::spawn(press);
    h.settle().await;
    assert!(!press.is_finished(), "it waits for the store");
    press.abort();
    assert!(press.await.unwrap_err().is_cancelled());
    // The card stays open (the action ran): its awaitable is one link
    // more, and the step, gone on without its caller, waits for the store.
    assert_eq!(harness::links_in_use(&h.core), links + 2, "the step waits for the store");
    store.gate.add_permits(1);
    h.settle().await;
    assert_eq!(store.inner.kept_ids(), [ask_id_for("ticket-1", "refund-1")]);
    assert_eq!(harness::links_in_use(&h.core), links + 1, "the step that went on left nothing");
    let again = h
        .core
        .driver()
        .handle(durable_runtime::types::exchange::Request::post(
            "/v1/panes/ticket-1/actions/refund",
            r#"{"requestId":"b-1"}"#,
            durable_runtime::types::exchange::Caller::OtherProcess,
        ))
        .await;
    assert_eq!(again.status, 200, "{}", String::from_utf8_lossy(&again.body));
    assert_eq!(again.body_json()["replayed"], true, "the write went on to keep its receipt");
}

/// A card the phone saw is one a crash keeps: with a store that keeps
/// asks, a card raised in a turn (no write waits for it) is shown — in the
/// state, the pane's snapshot and its events — only once the store has
/// it; the program sees it at once, and what follows it on the pane waits
/// behind it. (The pi example's card, killed right after the phone saw it,
/// was not raised again at the next start: the store never had it.)
#[tokio::test]
async fn a_card_is_shown_to_the_phone_only_once_the_store_has_kept_it() {
    let store = Gated::new(Held::Keep);
    let h = gated_run(&store);
    let pane = h.pane();
    h.settle().await;
    let before = h.seq().await;
    let _card = pane.ask(refund("refund-1")).unwrap();
    pane.write(durable_runtime::types::Item::reply("after", "Waiting for your answer.").unwrap()).unwrap();
    // Another pane changes: the state is answered afresh, not from before.
    let other = h.pane_named("ticket-2");
    other.write(durable_runtime::types::Item::reply("hello", "Hello").unwrap()).unwrap();
    h.settle().await;
    let id = ask_id_for("ticket-1", "refund-1");
    assert_eq!(pane.open_asks(), std::slice::from_ref(&id), "the program sees its card at once");
    assert!(store.inner.kept_ids().is_empty());
    let state = h.state().await.json;
    assert!(state["panes"].as_array().unwrap().iter().any(|p| p["id"] == "ticket-2"), "{state}");
    assert_eq!(state["asks"], json!([]), "shown before the store has it: {state}");
    assert!(h.view("ticket-1").await["asks"].as_array().unwrap().is_empty());
    let events = h.all_events("ticket-1").await;
    assert!(
        !events.iter().any(|e| e["type"] == "ask" || e["item"]["id"] == "after"),
        "the card and what follows it wait: {events:?}"
    );

    store.gate.add_permits(1);
    let shown = tokio::time::timeout(std::time::Duration::from_secs(10), h.state_since(before))
        .await
        .expect("a poll waiting for a change wakes when the card is shown")
        .json;
    assert_eq!(store.inner.kept_ids(), std::slice::from_ref(&id));
    assert_eq!(shown["asks"][0]["id"], id.as_str(), "{shown}");
    assert_eq!(h.view("ticket-1").await["asks"][0]["id"], id.as_str());
    let kinds: Vec<Value> = h
        .all_events("ticket-1")
        .await
        .iter()
        .filter(|e| e["type"] == "ask" || e["item"]["id"] == "after")
        .map(|e| e["type"].clone())
        .collect();
    assert_eq!(kinds, [json!("ask"), json!("item")], "in the order written");
}

/// A card the store had at this start, raised again as it was, is shown
/// at once: the phone polling right after the restart finds it (the
/// approval recipe's restart test does). Raised with another expiry, the
/// store's record is not that card yet: it waits for its keep.
#[tokio::test]
async fn a_card_raised_again_as_the_store_kept_it_is_shown_at_once() {
    for changed in [false, true] {
        let store = AskStore::default();
        let (id, _) = first_run(&store, refund("refund-1").expires_in_ms(600_000)).await;
        let gated = Gated { inner: store.clone(), ..Gated::new(Held::Keep) };
        let h = gated_run(&gated);
        h.pane();
        let kept = h.core.kept_asks().await.unwrap();
        let ask = kept.into_iter().next().unwrap();
        let _handle = if changed {
            let spec = ask.spec().expires_in_ms(900_000);
            ask.claim();
            h.pane().ask(spec).unwrap()
        } else {
            ask.raise().unwrap()
        };
        h.core.ready();
        h.settle().await;
        let shown = h.open_ask_ids().await;
        if changed {
            assert!(shown.is_empty(), "another expiry than the store's is shown before it is kept");
            gated.gate.add_permits(1);
            for _ in 0..100 {
                if h.open_ask_ids().await == std::slice::from_ref(&id) {
                    break;
                }
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            }
            assert_eq!(h.open_ask_ids().await, std::slice::from_ref(&id), "shown once kept");
        } else {
            assert_eq!(shown, std::slice::from_ref(&id), "the store has it: shown at once");
        }
    }
}
