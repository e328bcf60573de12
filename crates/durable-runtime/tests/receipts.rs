//! Contract §9: receipts — replay, refusals store nothing, the memory store's
//! eviction, groups, and a repeat of a request id still in flight.
use durable_runtime::test_util as harness;

use std::sync::{Arc, Mutex};

use durable_runtime::types::exchange::{Caller, Request};
use durable_runtime::types::{Answer, AskOption, AskSpec, RECEIPTS_PER_GROUP, ToolInfo};
use durable_runtime::{Lookup, MemoryReceiptStore, Receipt, ReceiptStore, StoreError};
use harness::{Harness, poll_once, without_replayed};
use serde_json::{Value, json};
use tokio::sync::Semaphore;

fn yes_no(call: &str) -> AskSpec {
    AskSpec::choice(call, "Go?", [AskOption::new("yes", "Yes"), AskOption::new("no", "No")])
}

fn pick(request_id: &str, option: &str) -> Value {
    json!({"requestId": request_id, "answer": {"optionIds": [option]}})
}

fn receipt(n: usize) -> Receipt {
    Receipt::of_json(200, &json!({"ok": true, "n": n}))
}

/// A store that records what it was given and can hold `get` or `put`
/// until the test lets them through.
struct GateStore {
    inner: MemoryReceiptStore,
    get_gate: Option<Arc<Semaphore>>,
    put_gate: Option<Arc<Semaphore>>,
    puts: Arc<Mutex<Vec<(String, String)>>>,
    fail_get: bool,
    fail_put: bool,
}

impl GateStore {
    fn new() -> Self {
        GateStore {
            inner: MemoryReceiptStore::new(),
            get_gate: None,
            put_gate: None,
            puts: Arc::default(),
            fail_get: false,
            fail_put: false,
        }
    }
}

impl ReceiptStore for GateStore {
    async fn get(&self, request_id: &str) -> Result<Lookup, StoreError> {
        if let Some(g) = &self.get_gate {
            g.acquire().await.unwrap().forget();
        }
        if self.fail_get {
            return Err(StoreError::new("disk gone"));
        }
        self.inner.get(request_id).await
    }

    async fn put(&self, request_id: &str, receipt: Receipt, group: &str) -> Result<(), StoreError> {
        if let Some(g) = &self.put_gate {
            g.acquire().await.unwrap().forget();
        }
        if self.fail_put {
            return Err(StoreError::new("disk full"));
        }
        self.puts.lock().unwrap().push((request_id.to_owned(), group.to_owned()));
        self.inner.put(request_id, receipt, group).await
    }
}

// ---------------------------------------------------------------------------
// Replay

#[tokio::test]
async fn repeat_of_a_request_id_replays_the_first_answer_with_replayed_true() {
    let h = Harness::new();
    let ask = h.pane().ask(yes_no("c1")).unwrap();
    let id = ask.id().to_owned();
    let first = h.answer(&id, pick("r-1", "yes")).await;
    assert_eq!((first.status, first.json["replayed"].clone()), (200, json!(false)));
    h.advance(5_000).await;
    for _ in 0..3 {
        let again = h.answer(&id, pick("r-1", "no")).await;
        assert_eq!(again.status, 200);
        assert_eq!(again.json["replayed"], true);
        assert_eq!(without_replayed(&again.json), without_replayed(&first.json));
        assert_eq!(again.json["decidedAt"], "2026-11-30T05:00:00.000Z", "the first answer's time");
    }
    assert_eq!(ask.await.unwrap(), Answer::option("yes"), "executed once, with the first answer");
}

#[tokio::test]
async fn refusals_store_nothing_so_the_same_request_id_may_try_again() {
    let h = Harness::new();
    let pane = h.pane();
    // 404: unknown ask without a hash.
    assert_eq!(h.answer("ffffffffffffffffffffffffffffffff", pick("r-1", "yes")).await.status, 404);
    // 400: an answer that does not fit.
    let a1 = pane.ask(yes_no("c1")).unwrap();
    assert_eq!(h.answer(a1.id(), pick("r-1", "maybe")).await.status, 400);
    // 409 hash-mismatch.
    let stale = json!({"requestId": "r-1", "answer": {"optionIds": ["yes"]}, "hash": "0".repeat(64)});
    assert_eq!(h.answer(a1.id(), stale).await.code(), "hash-mismatch");
    // 409 confirm-required.
    let always = pane
        .ask(
            AskSpec::choice(
                "c2",
                "Go?",
                [AskOption::new("ok", "OK"), AskOption::new("always", "Always").always()],
            )
            .tool(ToolInfo::from_call("t", &json!({}))),
        )
        .unwrap();
    assert_eq!(h.answer(always.id(), pick("r-1", "always")).await.code(), "confirm-required");
    // 409 ask-closed.
    pane.decide(always.id(), Answer::option("ok")).unwrap();
    assert_eq!(h.answer(always.id(), pick("r-1", "ok")).await.code(), "ask-closed");
    // After all that, r-1 is still new.
    let r = h.answer(a1.id(), pick("r-1", "no")).await;
    assert_eq!((r.status, r.json["replayed"].clone()), (200, json!(false)));
    assert_eq!(a1.await.unwrap(), Answer::option("no"));
}

#[tokio::test]
async fn a_request_id_names_one_action_whatever_route_repeats_it() {
    let h = Harness::with_caps(durable_runtime::types::Caps::all());
    let pane = h.pane();
    let ask = pane.ask(yes_no("c1")).unwrap();
    let first = h.answer(ask.id(), pick("r-1", "yes")).await;
    // Another ask, on another pane.
    let other = h.pane_named("other").ask(yes_no("c1")).unwrap();
    let r = h.answer(other.id(), pick("r-1", "no")).await;
    assert_eq!((r.status, r.json["replayed"].clone()), (200, json!(true)));
    assert_eq!(without_replayed(&r.json), without_replayed(&first.json));
    assert_eq!(h.open_ask_ids().await, [other.id().to_owned()], "nothing executed");
    // Another route entirely.
    let r = h
        .post("/v1/rename", json!({"requestId": "r-1", "target": "pane", "id": "ticket-1", "title": "New"}))
        .await;
    assert_eq!((r.status, r.json["replayed"].clone()), (200, json!(true)), "{:?}", r.json);
    assert_eq!(without_replayed(&r.json), without_replayed(&first.json));
    assert_eq!(h.state().await.json["panes"][0]["title"], "Maria Lopez", "the rename did not run");
}

#[tokio::test]
async fn answer_receipt_is_kept_in_the_group_of_the_asks_pane() {
    let store = GateStore::new();
    let puts = store.puts.clone();
    let h = Harness::with(|b| b.receipts(store));
    let ask = h.pane_named("desk-7").ask(yes_no("c1")).unwrap();
    assert_eq!(h.answer(ask.id(), pick("r-1", "yes")).await.status, 200);
    assert_eq!(*puts.lock().unwrap(), [("r-1".to_owned(), "pane:desk-7".to_owned())]);
    // Refusals put nothing.
    assert_eq!(h.answer(ask.id(), pick("r-2", "yes")).await.status, 409);
    assert_eq!(puts.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn receipts_in_a_kept_store_replay_after_a_restart_and_execute_nothing() {
    let store = Arc::new(MemoryReceiptStore::new());
    let h = Harness::with(|b| b.receipts(store.clone()));
    let ask = h.pane().ask(yes_no("c1")).unwrap();
    let first = h.answer(ask.id(), pick("r-1", "yes")).await;
    drop(h);
    // A new process (same store): the program raises the ask again.
    let h = Harness::with(|b| b.receipts(store.clone()));
    let ask = h.pane().ask(yes_no("c1")).unwrap();
    let r = h.answer(ask.id(), pick("r-1", "no")).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json["replayed"], true);
    assert_eq!(without_replayed(&r.json), without_replayed(&first.json));
    assert_eq!(h.open_ask_ids().await, [ask.id().to_owned()], "a replay executes nothing");
}

#[tokio::test]
async fn receipt_store_failure_is_500_internal_and_executes_nothing() {
    let mut store = GateStore::new();
    store.fail_get = true;
    let h = Harness::with(|b| b.receipts(store));
    let ask = h.pane().ask(yes_no("c1")).unwrap();
    let r = h.answer(ask.id(), pick("r-1", "yes")).await;
    assert_eq!((r.status, r.code()), (500, "internal"));
    assert!(!r.json["message"].as_str().unwrap().is_empty());
    assert_eq!(h.open_ask_ids().await, [ask.id().to_owned()]);
}

// ---------------------------------------------------------------------------
// MemoryReceiptStore

#[tokio::test]
async fn memory_store_keeps_1000_per_group_and_a_repeat_of_an_evicted_id_is_500_receipt_dropped() {
    let h = Harness::with(|b| b.tail_limit(1));
    let pane = h.pane();
    for i in 0..=RECEIPTS_PER_GROUP {
        let ask = pane.ask(yes_no(&format!("c{i}"))).unwrap();
        let r = h.answer(ask.id(), pick(&format!("r-{i}"), "yes")).await;
        assert_eq!(r.status, 200, "{i}");
    }
    // r-0 was evicted by the 1001st; r-1 is still kept.
    let fresh = pane.ask(yes_no("fresh")).unwrap();
    let r = h.answer(fresh.id(), pick("r-0", "yes")).await;
    assert_eq!((r.status, r.code()), (500, "receipt-dropped"));
    assert_eq!(r.json["ok"], false);
    assert_eq!(h.open_ask_ids().await, [fresh.id().to_owned()], "nothing executed");
    let r = h.answer(fresh.id(), pick("r-1", "yes")).await;
    assert_eq!((r.status, r.json["replayed"].clone()), (200, json!(true)));
    // Still dropped on a second try: a 500 stores nothing, and frees nothing.
    assert_eq!(h.answer(fresh.id(), pick("r-0", "yes")).await.code(), "receipt-dropped");
    assert_eq!(h.open_ask_ids().await, [fresh.id().to_owned()]);
}

#[tokio::test]
async fn memory_store_finds_an_id_whatever_group_it_was_put_in() {
    let store = MemoryReceiptStore::new();
    store.put("r-1", receipt(1), "pane:a").await.unwrap();
    assert_eq!(store.get("r-1").await.unwrap(), Lookup::Found(receipt(1)));
    assert_eq!(store.get("r-2").await.unwrap(), Lookup::Unknown);
    // The first receipt stays.
    store.put("r-1", receipt(9), "renames").await.unwrap();
    assert_eq!(store.get("r-1").await.unwrap(), Lookup::Found(receipt(1)));
}

#[tokio::test]
async fn memory_store_groups_only_decide_eviction() {
    let store = MemoryReceiptStore::new();
    store.put("a-0", receipt(0), "pane:a").await.unwrap();
    for i in 0..RECEIPTS_PER_GROUP * 2 {
        store.put(&format!("b-{i}"), receipt(i), "pane:b").await.unwrap();
    }
    assert_eq!(
        store.get("a-0").await.unwrap(),
        Lookup::Found(receipt(0)),
        "another group's puts evict nothing here"
    );
    assert_eq!(store.get("b-0").await.unwrap(), Lookup::Evicted);
    assert!(matches!(store.get(&format!("b-{}", RECEIPTS_PER_GROUP)).await.unwrap(), Lookup::Found(_)));
    assert!(matches!(store.get(&format!("b-{}", RECEIPTS_PER_GROUP - 1)).await.unwrap(), Lookup::Evicted));
}

#[tokio::test]
async fn memory_store_remembers_evicted_ids_until_ten_times_per_group_further_ids() {
    let store = MemoryReceiptStore::new();
    let group = "pane:a";
    for i in 0..=RECEIPTS_PER_GROUP {
        store.put(&format!("r-{i}"), receipt(i), group).await.unwrap();
    }
    assert_eq!(store.get("r-0").await.unwrap(), Lookup::Evicted, "evicted by the 1001st");
    // 10 × 1000 − 1 further ids of the group: still remembered.
    for i in 1..10 * RECEIPTS_PER_GROUP {
        store.put(&format!("s-{i}"), receipt(i), group).await.unwrap();
    }
    assert_eq!(store.get("r-0").await.unwrap(), Lookup::Evicted);
    assert_eq!(store.get("r-1").await.unwrap(), Lookup::Evicted);
    // Ids of other groups do not count.
    for i in 0..RECEIPTS_PER_GROUP * 3 {
        store.put(&format!("o-{i}"), receipt(i), "pane:other").await.unwrap();
    }
    assert_eq!(store.get("r-0").await.unwrap(), Lookup::Evicted);
}

#[tokio::test]
async fn memory_store_with_capacity_keeps_that_many_per_group() {
    let store = MemoryReceiptStore::with_capacity(2);
    for i in 0..3 {
        store.put(&format!("r-{i}"), receipt(i), "g").await.unwrap();
    }
    assert_eq!(store.get("r-0").await.unwrap(), Lookup::Evicted);
    assert_eq!(store.get("r-1").await.unwrap(), Lookup::Found(receipt(1)));
    // Evicted ids are remembered for 10 × 2 further ids, then forgotten.
    for i in 3..22 {
        store.put(&format!("r-{i}"), receipt(i), "g").await.unwrap();
    }
    assert_eq!(store.get("r-0").await.unwrap(), Lookup::Evicted);
    for i in 22..40 {
        store.put(&format!("r-{i}"), receipt(i), "g").await.unwrap();
    }
    assert_eq!(store.get("r-0").await.unwrap(), Lookup::Unknown);
}

// ---------------------------------------------------------------------------
// In flight

#[tokio::test]
async fn concurrent_repeat_of_an_in_flight_request_id_waits_for_the_first_and_replays() {
    let gate = Arc::new(Semaphore::new(0));
    let mut store = GateStore::new();
    store.put_gate = Some(gate.clone());
    let h = Harness::with(|b| b.receipts(store));
    let ask = h.pane().ask(yes_no("c1")).unwrap();
    let path = format!("/v1/asks/{}", ask.id());
    let send =
        |body: Value| h.core.driver().handle(Request::post(&path, body.to_string(), Caller::OtherProcess));
    let first = tokio::spawn(send(pick("r-1", "yes")));
    h.settle().await;
    let second = tokio::spawn(send(pick("r-1", "no")));
    h.settle().await;
    assert!(!first.is_finished(), "the first waits for its receipt to be kept");
    assert!(!second.is_finished(), "the repeat waits for the first");
    gate.add_permits(1);
    let first = first.await.unwrap();
    let second = second.await.unwrap();
    let (a, b) = (first.body_json(), second.body_json());
    assert_eq!((first.status, a["replayed"].clone()), (200, json!(false)));
    assert_eq!((second.status, b["replayed"].clone()), (200, json!(true)));
    assert_eq!(without_replayed(&a), without_replayed(&b));
    assert_eq!(ask.await.unwrap(), Answer::option("yes"));
    assert_eq!(gate.available_permits(), 0, "one receipt was put");
}

#[tokio::test]
async fn concurrent_repeat_of_a_refused_request_runs_on_its_own() {
    let gate = Arc::new(Semaphore::new(0));
    let mut store = GateStore::new();
    store.get_gate = Some(gate.clone());
    let h = Harness::with(|b| b.receipts(store));
    let ask = h.pane().ask(yes_no("c1")).unwrap();
    let path = format!("/v1/asks/{}", ask.id());
    let send =
        |body: Value| h.core.driver().handle(Request::post(&path, body.to_string(), Caller::OtherProcess));
    let first = tokio::spawn(send(pick("r-1", "maybe"))); // does not fit: 400
    h.settle().await;
    let second = tokio::spawn(send(pick("r-1", "no")));
    h.settle().await;
    assert!(!second.is_finished());
    gate.add_permits(1);
    h.settle().await;
    let first = first.await.unwrap();
    assert_eq!(first.status, 400);
    gate.add_permits(1);
    let second = second.await.unwrap();
    assert_eq!((second.status, second.body_json()["replayed"].clone()), (200, json!(false)));
    let mut ask = Box::pin(ask);
    assert_eq!(poll_once(&mut ask).unwrap().unwrap(), Answer::option("no"));
}

#[tokio::test]
async fn receipt_put_failure_is_500_internal_and_no_receipt_is_kept() {
    let mut store = GateStore::new();
    store.fail_put = true;
    let puts = store.puts.clone();
    let h = Harness::with(|b| b.receipts(store));
    let ask = h.pane().ask(yes_no("c1")).unwrap();
    let r = h.answer(ask.id(), pick("r-1", "yes")).await;
    assert_eq!((r.status, r.code()), (500, "internal"));
    assert!(puts.lock().unwrap().is_empty());
}

#[tokio::test]
async fn applied_held_answer_becomes_the_receipt_in_the_group_of_the_asks_pane() {
    let store = GateStore::new();
    let puts = store.puts.clone();
    // The driver is slow to run jobs: nobody runs them until the test does.
    let h = Harness::without_driver(|b| b.receipts(store));
    let pane = h.pane();
    let spec = yes_no("c1");
    let hash = spec
        .clone()
        .build(
            &durable_runtime::types::Id::new("ticket-1").unwrap(),
            durable_runtime::types::Timestamp::EPOCH,
            true,
        )
        .unwrap()
        .hash;
    let id = durable_runtime::types::ask_id_for("ticket-1", "c1");
    let held = json!({"requestId": "r-1", "answer": {"optionIds": ["yes"]}, "hash": hash});
    assert_eq!(h.answer(&id, held.clone()).await.status, 202);
    let ask = pane.ask(spec).unwrap();
    assert_eq!(ask.await.unwrap(), Answer::option("yes"));
    // Before the receipt job ran, a repeat already replays the answer.
    let r = h.answer(&id, held.clone()).await;
    assert_eq!(
        (r.status, r.json["replayed"].clone(), r.json["result"].clone()),
        (200, json!(true), json!("answered"))
    );
    assert!(puts.lock().unwrap().is_empty());
    // The driver runs the job: the receipt is kept in the ask's pane group.
    while let Some(job) = h.core.driver().poll_job() {
        job.await;
    }
    assert_eq!(*puts.lock().unwrap(), [("r-1".to_owned(), "pane:ticket-1".to_owned())]);
    let again = h.answer(&id, held).await;
    assert_eq!(without_replayed(&again.json), without_replayed(&r.json));
    assert_eq!(again.json["replayed"], true);
}

// ---------------------------------------------------------------------------
// Claims (a store shared by several processes)

/// A store that logs the calls of the receipt step.
struct ClaimLog {
    inner: MemoryReceiptStore,
    log: Arc<Mutex<Vec<String>>>,
    put_gate: Option<Arc<Semaphore>>,
}

impl ReceiptStore for ClaimLog {
    async fn get(&self, request_id: &str) -> Result<Lookup, StoreError> {
        self.log.lock().unwrap().push(format!("get {request_id}"));
        self.inner.get(request_id).await
    }
    async fn claim(&self, request_id: &str) -> Result<Lookup, StoreError> {
        self.log.lock().unwrap().push(format!("claim {request_id}"));
        self.inner.get(request_id).await
    }
    fn release(&self, request_id: &str) {
        self.log.lock().unwrap().push(format!("release {request_id}"));
    }
    async fn put(&self, request_id: &str, receipt: Receipt, group: &str) -> Result<(), StoreError> {
        self.log.lock().unwrap().push(format!("put {request_id}"));
        if let Some(g) = &self.put_gate {
            g.acquire().await.unwrap().forget();
        }
        self.inner.put(request_id, receipt, group).await
    }
}

#[tokio::test]
async fn the_receipt_step_claims_the_id_puts_then_releases_and_releases_a_refusal_too() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let store = ClaimLog { inner: MemoryReceiptStore::new(), log: log.clone(), put_gate: None };
    let h = Harness::with(|b| b.receipts(store));
    let ask = h.pane().ask(yes_no("c1")).unwrap();
    // Refused (does not fit): claimed, then released, nothing put.
    assert_eq!(h.answer(ask.id(), pick("r-1", "maybe")).await.status, 400);
    assert_eq!(*log.lock().unwrap(), ["claim r-1", "release r-1"]);
    log.lock().unwrap().clear();
    // Applied: claimed, put, released.
    assert_eq!(h.answer(ask.id(), pick("r-1", "yes")).await.status, 200);
    assert_eq!(*log.lock().unwrap(), ["claim r-1", "put r-1", "release r-1"]);
    log.lock().unwrap().clear();
    // A replay: the claim finds the receipt, nothing to release.
    assert_eq!(h.answer(ask.id(), pick("r-1", "no")).await.json["replayed"], true);
    assert_eq!(*log.lock().unwrap(), ["claim r-1"]);
}

/// The caller goes away while the applied write's receipt is put: the
/// step goes on without it (the put again, then the release), so that the
/// receipt is kept — a duplicate at another process would otherwise find
/// the id free and run the write again.
#[tokio::test]
async fn a_request_dropped_while_its_receipt_is_put_goes_on_to_put_it_and_release_its_claim() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let gate = Arc::new(Semaphore::new(0));
    let store = ClaimLog { inner: MemoryReceiptStore::new(), log: log.clone(), put_gate: Some(gate.clone()) };
    let h = Harness::with(|b| b.receipts(store));
    let ask = h.pane().ask(yes_no("c1")).unwrap();
    let path = format!("/v1/asks/{}", ask.id());
    let request = Request::post(&path, pick("r-1", "yes").to_string(), Caller::OtherProcess);
    let core = h.core.clone();
    let task = tokio::spawn(async move { core.driver().handle(request).await });
    h.settle().await;
    assert_eq!(*log.lock().unwrap(), ["claim r-1", "put r-1"], "held in put");
    task.abort(); // the connection went away
    assert!(task.await.unwrap_err().is_cancelled());
    h.settle().await;
    assert_eq!(*log.lock().unwrap(), ["claim r-1", "put r-1", "put r-1"], "put again, held");
    gate.add_permits(1);
    h.settle().await;
    assert_eq!(*log.lock().unwrap(), ["claim r-1", "put r-1", "put r-1", "release r-1"]);
    log.lock().unwrap().clear();
    assert_eq!(h.answer(ask.id(), pick("r-1", "yes")).await.json["replayed"], true);
    assert_eq!(*log.lock().unwrap(), ["claim r-1"], "the store has it");
}

// ---------------------------------------------------------------------------
// The receipt's own form

/// A store that hands back, for every id, the receipt it was made with.
struct FixedStore(Receipt);

impl ReceiptStore for FixedStore {
    async fn get(&self, _request_id: &str) -> Result<Lookup, StoreError> {
        Ok(Lookup::Found(self.0.clone()))
    }
    async fn put(&self, _request_id: &str, _receipt: Receipt, _group: &str) -> Result<(), StoreError> {
        Ok(())
    }
}

#[tokio::test]
async fn the_kept_receipt_is_the_answer_as_sent_byte_for_byte() {
    let store = Arc::new(MemoryReceiptStore::new());
    let h = Harness::with(|b| b.receipts(store.clone()));
    let ask = h.pane().ask(yes_no("c1")).unwrap();
    let path = format!("/v1/asks/{}", ask.id());
    let sent = h
        .core
        .driver()
        .handle(Request::post(&path, pick("r-1", "yes").to_string(), Caller::OtherProcess))
        .await;
    assert_eq!(sent.status, 200);
    let Lookup::Found(kept) = store.get("r-1").await.unwrap() else { panic!("an answer's receipt is kept") };
    assert_eq!((kept.status, &kept.body), (200, &sent.body), "the bytes the phone got");
    assert_eq!(kept.parse_body().unwrap()["replayed"], false);
}

#[test]
fn a_receipt_as_json_holds_its_body_as_the_json_it_is_and_reads_back_the_same_bytes() {
    let body = r#"{"ok":true,"result":"sent","n":[1, 2],"replayed":false}"#;
    let receipt = Receipt::new(200, body);
    let line = serde_json::to_string(&receipt).unwrap();
    assert_eq!(line, format!(r#"{{"status":200,"body":{body}}}"#));
    let back: Receipt = serde_json::from_str(&line).unwrap();
    assert_eq!(back, receipt, "the same bytes, spacing and key order kept");
    // A line written by a store before receipts were kept as bytes (the body
    // as a nested object, any key order) still reads.
    let old: Receipt = serde_json::from_str(r#"{"body": {"b": 1, "a": 2}, "status": 200}"#).unwrap();
    assert_eq!((old.status, old.parse_body().unwrap()), (200, json!({"b": 1, "a": 2})));
    // A body that is not JSON cannot be written as a receipt line, nor
    // kept by a store.
    assert!(serde_json::to_string(&Receipt::new(200, "{oops")).is_err());
    assert!(Receipt::new(200, "{oops").json_text().is_err());
    assert!(Receipt::new(200, vec![b'"', 0xff, b'"']).json_text().is_err(), "not UTF-8");
    assert!(Receipt::from_json_text(200, "{oops".into()).is_err());
    assert_eq!(Receipt::from_json_text(200, body.into()).unwrap(), receipt);
}

#[tokio::test]
async fn a_damaged_kept_receipt_is_500_internal_and_runs_nothing() {
    let h = Harness::with(|b| b.receipts(FixedStore(Receipt::new(200, "{not json"))));
    let ask = h.pane().ask(yes_no("c1")).unwrap();
    let r = h.answer(ask.id(), pick("r-1", "yes")).await;
    assert_eq!((r.status, r.json["code"].as_str()), (500, Some("internal")));
    assert!(r.json["message"].as_str().unwrap().contains("receipt is damaged"), "{}", r.json);
    assert_eq!(h.open_ask_ids().await, [ask.id().to_owned()], "nothing ran");
}
