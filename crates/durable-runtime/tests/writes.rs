//! Writes from the phone (contract §8) and their receipts (§9): each test
//! names the rule it checks.
use durable_runtime::test_util as harness;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use durable_runtime::types::exchange::{Caller, Request};
use durable_runtime::types::{AskOption, AskSpec, Cap, Caps, DecidedBy, Id, Outcome};
use durable_runtime::{
    ActionHandler, ActionRequest, ChatHandler, HandlerResult, Hooks, MemoryReceiptStore, Pane, PaneOptions,
    Refusal, SendRequest, Turn,
};
use harness::recorder::{CoreExt, Handled, Log, PaneExt, Recorder};
use harness::{Harness, Reply, without_replayed};
use serde_json::{Value, json};
use tokio::sync::Semaphore;

const SEND: &str = "/v1/panes/ticket-1/send";
const STEER: &str = "/v1/panes/ticket-1/steer";
const STOP: &str = "/v1/panes/ticket-1/stop";
const REFUND: &str = "/v1/panes/ticket-1/actions/refund";

/// A harness with pane `ticket-1` (action `refund`) whose handlers record
/// and accept every write.
fn setup() -> (Harness, Pane, Log) {
    let h = Harness::with_caps(Caps::all());
    let pane = h.pane();
    pane.action("refund", "Refund", Some("check")).unwrap();
    let log = Log::default();
    pane.handlers(Recorder::new("pane", &log)).unwrap();
    (h, pane, log)
}

fn choice(tool_call_id: &str, title: &str) -> AskSpec {
    AskSpec::choice(tool_call_id, title, [AskOption::new("yes", "Yes"), AskOption::new("no", "No")])
}

/// The items of a pane's view with this kind.
async fn items_of(h: &Harness, pane: &str, kind: &str) -> Vec<Value> {
    let view = h.view(pane).await;
    view["items"].as_array().unwrap().iter().filter(|i| i["kind"] == kind).cloned().collect()
}

fn assert_status(r: &Reply, status: u16, code: &str) {
    assert_eq!(r.status, status, "{:?}", r.json);
    assert_eq!(r.json["ok"], status < 300, "{:?}", r.json);
    if status >= 300 {
        assert_eq!(r.code(), code, "{:?}", r.json);
        assert!(r.json["message"].as_str().is_some_and(|m| !m.is_empty()), "{:?}", r.json);
    }
}

fn assert_success(r: &Reply, result: &str, request_id: &str, replayed: bool) {
    assert_eq!(r.status, 200, "{:?}", r.json);
    assert_eq!(r.json["ok"], true);
    assert_eq!(r.json["result"], result, "{:?}", r.json);
    assert_eq!(r.json["requestId"], request_id);
    assert_eq!(r.json["replayed"], replayed);
}

/// Send handlers that wait on a gate before answering: a write stuck in its
/// handler, holding the pane's lock.
#[derive(Clone)]
struct Gated {
    gate: Arc<Semaphore>,
    log: Log,
    verdicts: Arc<dyn Fn(usize) -> Handled + Send + Sync>,
    calls: Arc<AtomicUsize>,
}

impl ChatHandler for Gated {
    /// The turn runs until the phone stops it.
    async fn turn(&self, turn: Turn) {
        turn.stopped().await;
    }
    async fn check_send(&self, req: SendRequest) -> HandlerResult {
        let n = self.calls.fetch_add(1, Ordering::SeqCst);
        Recorder::new("gated", &self.log).send_call(&req);
        let _permit = self.gate.acquire().await.unwrap();
        match (self.verdicts)(n) {
            Handled::Refused(r) => Err(Refusal::new(r)),
            Handled::NotHandled => Err(Refusal::not_supported()),
            _ => Ok(()),
        }
    }
    async fn steer(&self, req: durable_runtime::SteerRequest) -> HandlerResult {
        ChatHandler::steer(&Recorder::new("gated", &self.log), req).await
    }
}

impl ActionHandler for Gated {
    async fn action(&self, req: ActionRequest) -> HandlerResult {
        Recorder::new("gated", &self.log).action(req).await
    }
}

fn gated(
    h: &Harness,
    verdicts: impl Fn(usize) -> Handled + Send + Sync + 'static,
) -> (Pane, Log, Arc<Semaphore>) {
    let pane = h.pane();
    pane.action("refund", "Refund", None).unwrap();
    let log = Log::default();
    let gate = Arc::new(Semaphore::new(0));
    pane.handlers(Gated {
        gate: gate.clone(),
        log: log.clone(),
        verdicts: Arc::new(verdicts),
        calls: Arc::new(AtomicUsize::new(0)),
    })
    .unwrap();
    (pane, log, gate)
}

/// Starts a request on the runtime and lets it run as far as it can.
async fn spawn_post(h: &Harness, path: &str, body: Value) -> tokio::task::JoinHandle<Reply> {
    let fut = h.core.driver().handle(Request::post(path, body.to_string(), Caller::OtherProcess));
    let task = tokio::spawn(async move { Reply::from(fut.await) });
    h.settle().await;
    task
}

// ---------------------------------------------------------------------------
// send

#[tokio::test]
async fn send_on_idle_pane_is_sent_to_the_handler_once_with_a_user_item_naming_the_request_id() {
    let (h, pane, log) = setup();
    pane.working("t-1").unwrap();
    pane.idle().unwrap();
    let r = h.post(SEND, json!({"requestId": "r-1", "text": "Where is my order?"})).await;
    assert_success(&r, "sent", "r-1", false);
    assert_eq!(r.json["turnId"], "t-1");
    let sends = log.of("send");
    assert_eq!(sends.len(), 1);
    assert_eq!(sends[0].request_id, "r-1");
    assert_eq!(sends[0].detail, "Where is my order?");
    assert_eq!(sends[0].who, "pane");
    let users = items_of(&h, "ticket-1", "user").await;
    assert_eq!(users.len(), 1, "{users:?}");
    assert_eq!(users[0]["text"], "Where is my order?");
    assert_eq!(users[0]["requestId"], "r-1");
    // A repeat executes nothing and writes no second item.
    let again = h.post(SEND, json!({"requestId": "r-1", "text": "Where is my order?"})).await;
    assert_success(&again, "sent", "r-1", true);
    assert_eq!(without_replayed(&again.json), without_replayed(&r.json));
    assert_eq!(log.count("r-1"), 1);
    assert_eq!(items_of(&h, "ticket-1", "user").await.len(), 1);
}

#[tokio::test]
async fn send_answer_turn_id_is_null_when_the_pane_has_had_no_turn() {
    let (h, _pane, _log) = setup();
    let r = h.post(SEND, json!({"requestId": "r-1", "text": "hi"})).await;
    assert_success(&r, "sent", "r-1", false);
    assert!(r.json.as_object().unwrap().contains_key("turnId"), "{:?}", r.json);
    assert_eq!(r.json["turnId"], Value::Null);
}

#[tokio::test]
async fn send_during_a_turn_is_queued_behind_the_running_turn_and_delivered_after_it_with_its_user_item() {
    let (h, pane, log) = setup();
    pane.working("t-2").unwrap();
    let r = h.post(SEND, json!({"requestId": "r-q1", "text": "first"})).await;
    assert_success(&r, "queued", "r-q1", false);
    assert_eq!(r.json["turnId"], "t-2");
    let r2 = h.post(SEND, json!({"requestId": "r-q2", "text": "second"})).await;
    assert_success(&r2, "queued", "r-q2", false);
    assert!(log.of("send").is_empty(), "a queued send reaches no handler during the turn");
    assert!(items_of(&h, "ticket-1", "user").await.is_empty());

    pane.idle().unwrap();
    h.settle().await;
    let sends: Vec<_> = log.of("send").into_iter().map(|c| (c.request_id, c.detail)).collect();
    assert_eq!(sends, vec![("r-q1".into(), "first".into()), ("r-q2".into(), "second".into())]);
    let users = items_of(&h, "ticket-1", "user").await;
    let named: Vec<_> = users.iter().map(|u| (u["requestId"].clone(), u["text"].clone())).collect();
    assert_eq!(named, vec![(json!("r-q1"), json!("first")), (json!("r-q2"), json!("second"))]);
    // A repeat of a queued send replays `queued` and delivers nothing again.
    let again = h.post(SEND, json!({"requestId": "r-q1", "text": "first"})).await;
    assert_success(&again, "queued", "r-q1", true);
    h.settle().await;
    assert_eq!(log.count("r-q1"), 1);
}

#[tokio::test]
async fn send_queued_sends_wait_for_the_next_turn_when_the_delivered_one_starts_a_turn() {
    let h = Harness::with_caps(Caps::all());
    let pane = h.pane();
    let log = Log::default();
    // The handler starts a turn for each text it takes.
    // Each send it takes runs a turn until the test lets it end.
    let gate = Arc::new(Semaphore::new(0));
    pane.handlers(Recorder::holding("pane", &log, gate.clone())).unwrap();
    pane.working("t-1").unwrap();
    assert_success(&h.post(SEND, json!({"requestId": "a", "text": "1"})).await, "queued", "a", false);
    assert_success(&h.post(SEND, json!({"requestId": "b", "text": "2"})).await, "queued", "b", false);
    pane.idle().unwrap();
    h.settle().await;
    assert_eq!(log.of("send").len(), 1, "the first starts turn `a`; the second waits for it");
    assert_eq!(pane.turn_id().as_deref(), Some("a"));
    assert_eq!(pane.current_state(), durable_runtime::types::PaneState::Working);
    gate.add_permits(1);
    h.settle().await;
    let ids: Vec<_> = log.of("send").into_iter().map(|c| c.request_id).collect();
    assert_eq!(ids, vec!["a", "b"]);
}

#[tokio::test]
async fn send_refused_with_ask_open_while_the_pane_has_an_open_ask_even_an_unreadable_one_then_the_same_id_succeeds()
 {
    let (h, pane, log) = setup();
    let ask = pane.ask(AskSpec::text("note-1", "What should I write?")).unwrap();
    let ask_id = ask.id().to_owned();
    let r = h.post(SEND, json!({"requestId": "r-a", "text": "hello"})).await;
    assert_status(&r, 409, "ask-open");
    assert_eq!(r.json["askId"], ask_id);
    assert!(log.of("send").is_empty());
    assert!(items_of(&h, "ticket-1", "user").await.is_empty());
    // Answering the (text) ask on its own card frees the pane.
    let a = h.answer(&ask_id, json!({"requestId": "r-ans", "answer": {"text": "a note"}})).await;
    assert_eq!(a.status, 200, "{:?}", a.json);
    assert_eq!(ask.await.unwrap().text(), Some("a note"));
    // Refusals store nothing: the same request id now goes through.
    let r = h.post(SEND, json!({"requestId": "r-a", "text": "hello"})).await;
    assert_success(&r, "sent", "r-a", false);
    assert_eq!(log.count("r-a"), 1);
}

#[tokio::test]
async fn send_refused_with_turn_moved_when_a_turn_began_after_the_one_it_names() {
    let (h, pane, log) = setup();
    pane.working("t-1").unwrap();
    pane.idle().unwrap();
    pane.working("t-2").unwrap();
    pane.idle().unwrap();
    let r = h.post(SEND, json!({"requestId": "r-t", "text": "hi", "turnId": "t-1"})).await;
    assert_status(&r, 409, "turn-moved");
    assert_eq!(r.json["turnId"], "t-2");
    assert!(log.of("send").is_empty(), "nothing reaches the agent");
    // Nothing stored: the same id, checked against the current turn, is sent.
    let r = h.post(SEND, json!({"requestId": "r-t", "text": "hi", "turnId": "t-2"})).await;
    assert_success(&r, "sent", "r-t", false);
    assert_eq!(r.json["turnId"], "t-2");
}

// ---------------------------------------------------------------------------
// steer

#[tokio::test]
async fn steer_while_working_is_steered_and_gives_the_text_to_the_running_turn() {
    let (h, pane, log) = setup();
    pane.working("t-1").unwrap();
    let r = h.post(STEER, json!({"requestId": "s-1", "text": "shorter please"})).await;
    assert_success(&r, "steered", "s-1", false);
    let steers = log.of("steer");
    assert_eq!(steers.len(), 1);
    assert_eq!((steers[0].request_id.as_str(), steers[0].detail.as_str()), ("s-1", "shorter please"));
}

#[tokio::test]
async fn steer_on_an_idle_pane_is_refused_not_working_and_stores_nothing() {
    let (h, pane, log) = setup();
    let r = h.post(STEER, json!({"requestId": "s-1", "text": "faster"})).await;
    assert_status(&r, 409, "refused");
    assert_eq!(r.json["reason"], "not-working");
    assert!(log.of("steer").is_empty());
    pane.working("t-1").unwrap();
    let r = h.post(STEER, json!({"requestId": "s-1", "text": "faster"})).await;
    assert_success(&r, "steered", "s-1", false);
    assert_eq!(log.count("s-1"), 1);
}

// ---------------------------------------------------------------------------
// stop

#[tokio::test]
async fn stop_fires_the_turn_signal_and_closes_the_panes_open_asks_as_aborted() {
    let (h, pane, log) = setup();
    let other = h.pane_named("ticket-2");
    let r = h.post(SEND, json!({"requestId": "r-1", "text": "go"})).await;
    assert_success(&r, "sent", "r-1", false);
    pane.working("t-1").unwrap();
    let signal = log.signal("r-1").expect("the send got a signal");
    assert!(!signal.is_aborted());
    let ask = pane.ask(choice("call-1", "refund wants to run")).unwrap();
    let ask_id = ask.id().to_owned();
    let elsewhere = other.ask(choice("call-9", "elsewhere")).unwrap();

    let r = h.post(STOP, json!({"requestId": "x-1"})).await;
    assert_success(&r, "stopped", "x-1", false);
    assert!(signal.is_aborted(), "stop fires the SendRequest's signal");
    assert_eq!(log.of("stop").len(), 1);
    let closed = ask.await.unwrap_err();
    assert_eq!(closed.decided_by, DecidedBy::Program);
    assert_eq!(closed.outcome, Outcome::Aborted);
    let events = h.all_events("ticket-1").await;
    let ev = events.iter().find(|e| e["type"] == "ask-closed").expect("an ask-closed event");
    assert_eq!(ev["askId"], ask_id);
    assert_eq!(ev["outcome"], "aborted");
    assert_eq!(ev["decidedBy"], "program");
    assert_eq!(h.notices("ticket-1").await, vec!["Stopped before an answer: refund wants to run".to_owned()]);
    // Only this pane's asks.
    assert_eq!(h.open_ask_ids().await, vec![elsewhere.id().to_owned()]);
    // The answer to a stopped ask is ask-closed.
    let late = h.answer(&ask_id, json!({"requestId": "a-late", "answer": {"optionIds": ["yes"]}})).await;
    assert_status(&late, 409, "ask-closed");
}

#[tokio::test]
async fn stop_on_an_idle_pane_only_closes_its_asks_and_answers_stopped() {
    let (h, pane, log) = setup();
    let ask = pane.ask(choice("call-1", "Deploy?")).unwrap();
    let r = h.post(STOP, json!({"requestId": "x-1"})).await;
    assert_success(&r, "stopped", "x-1", false);
    assert_eq!(ask.await.unwrap_err().outcome, Outcome::Aborted);
    assert_eq!(pane.current_state(), durable_runtime::types::PaneState::Idle);
    assert_eq!(log.of("stop").len(), 1);
    // With no ask at all it still answers stopped.
    let r = h.post(STOP, json!({"requestId": "x-2"})).await;
    assert_success(&r, "stopped", "x-2", false);
}

#[tokio::test]
async fn stop_never_waits_behind_the_pane_lock_even_with_a_send_stuck_in_its_handler() {
    let h = Harness::with_caps(Caps::all());
    let (pane, log, _gate) = gated(&h, |_| Handled::Accepted);
    let stuck = spawn_post(&h, SEND, json!({"requestId": "r-stuck", "text": "hang"})).await;
    assert_eq!(log.of("send").len(), 1, "the send is inside its handler");
    assert!(!stuck.is_finished());
    let ask = pane.ask(choice("call-1", "Deploy?")).unwrap();

    let stop = spawn_post(&h, STOP, json!({"requestId": "x-1"})).await;
    assert!(stop.is_finished(), "stop answered without waiting for the send's lock (no clock moved)");
    let r = stop.await.unwrap();
    assert_success(&r, "stopped", "x-1", false);
    assert!(log.signal("r-stuck").unwrap().is_aborted(), "the stuck send's signal fired");
    assert_eq!(ask.await.unwrap_err().outcome, Outcome::Aborted);
    assert!(!stuck.is_finished());
    stuck.abort();
}

#[tokio::test]
async fn stop_refused_by_its_handler_fires_nothing_and_stores_nothing() {
    let h = Harness::with_caps(Caps::all());
    let pane = h.pane();
    let log = Log::default();
    let refusals = Arc::new(AtomicUsize::new(1));
    pane.handlers(Recorder::with("pane", &log, move |c| {
        if c.kind == "stop" && refusals.fetch_sub(1, Ordering::SeqCst) == 1 {
            Handled::refuse("mid-deploy")
        } else {
            Handled::Accepted
        }
    }))
    .unwrap();
    let ask = pane.ask(choice("call-1", "Deploy?")).unwrap();
    let r = h.post(STOP, json!({"requestId": "x-1"})).await;
    assert_status(&r, 409, "refused");
    assert_eq!(r.json["reason"], "mid-deploy");
    assert_eq!(h.open_ask_ids().await, vec![ask.id().to_owned()], "a refused stop closes no ask");
    let r = h.post(STOP, json!({"requestId": "x-1"})).await;
    assert_success(&r, "stopped", "x-1", false);
    assert!(h.open_ask_ids().await.is_empty());
    assert_eq!(log.count("x-1"), 2);
}

// ---------------------------------------------------------------------------
// busy

#[tokio::test]
async fn busy_a_write_that_waits_five_seconds_from_its_arrival_for_the_pane_lock_gets_409_busy() {
    let h = Harness::with_caps(Caps::all());
    let (_pane, log, gate) = gated(&h, |_| Handled::Accepted);
    let first = spawn_post(&h, SEND, json!({"requestId": "r-1", "text": "slow"})).await;
    let links = harness::links_in_use(&h.core);
    h.advance(1_000).await;
    // Arrives at T0 + 1 s: busy at T0 + 6 s.
    let second = spawn_post(&h, REFUND, json!({"requestId": "a-1"})).await;
    h.advance(4_999).await;
    assert!(!second.is_finished(), "still within 5 s of its arrival");
    h.advance(1).await;
    assert!(second.is_finished(), "5 s after its arrival");
    let r = second.await.unwrap();
    assert_status(&r, 409, "busy");
    assert!(log.of("action").is_empty(), "the busy write ran nothing");
    assert_eq!(harness::links_in_use(&h.core), links, "the busy write left nothing behind");
    // The first finishes; busy stored nothing, so the same id now runs.
    gate.add_permits(1);
    h.settle().await;
    assert_success(&first.await.unwrap(), "sent", "r-1", false);
    let r = h.post(REFUND, json!({"requestId": "a-1"})).await;
    assert_success(&r, "done", "a-1", false);
    assert_eq!(log.count("a-1"), 1);
}

#[tokio::test]
async fn busy_a_write_that_gets_the_lock_within_five_seconds_runs_normally() {
    let h = Harness::with_caps(Caps::all());
    let (pane, log, gate) = gated(&h, |_| Handled::Accepted);
    let first = spawn_post(&h, SEND, json!({"requestId": "r-1", "text": "slow"})).await;
    pane.working("t-1").unwrap();
    let steer = spawn_post(&h, STEER, json!({"requestId": "s-1", "text": "more"})).await;
    h.advance(4_000).await;
    assert!(!steer.is_finished());
    gate.add_permits(1);
    h.settle().await;
    assert_success(&first.await.unwrap(), "sent", "r-1", false);
    assert_success(&steer.await.unwrap(), "steered", "s-1", false);
    h.advance(2_000).await;
    assert_eq!(log.count("s-1"), 1);
}

#[tokio::test]
async fn busy_writes_waiting_for_a_pane_run_in_arrival_order() {
    let h = Harness::with_caps(Caps::all());
    let (_pane, log, gate) = gated(&h, |_| Handled::Accepted);
    let first = spawn_post(&h, SEND, json!({"requestId": "r-1", "text": "slow"})).await;
    let mut waiting = Vec::new();
    for id in ["a-3", "a-1", "a-2"] {
        waiting.push(spawn_post(&h, REFUND, json!({"requestId": id})).await);
    }
    gate.add_permits(1);
    h.settle().await;
    assert_success(&first.await.unwrap(), "sent", "r-1", false);
    for w in waiting {
        assert_eq!(w.await.unwrap().status, 200);
    }
    let order: Vec<String> = log.of("action").iter().map(|c| c.request_id.to_string()).collect();
    assert_eq!(order, ["a-3", "a-1", "a-2"], "the order they came in");
}

#[tokio::test]
async fn busy_a_write_waiting_for_a_pane_the_program_closes_is_404_at_once() {
    let h = Harness::with_caps(Caps::all());
    let (pane, log, gate) = gated(&h, |_| Handled::Accepted);
    let first = spawn_post(&h, SEND, json!({"requestId": "r-1", "text": "slow"})).await;
    let second = spawn_post(&h, REFUND, json!({"requestId": "a-1"})).await;
    assert!(!second.is_finished(), "it waits for the pane");
    pane.close();
    h.settle().await;
    // The first still holds the pane: the second did not wait for it to end.
    assert!(!first.is_finished());
    let r = tokio::time::timeout(std::time::Duration::from_secs(20), second)
        .await
        .expect("the waiting write did not hear of the close")
        .unwrap();
    assert_eq!(r.status, 404, "{:?}", r.json);
    assert!(log.of("action").is_empty());
    gate.add_permits(1);
    h.settle().await;
    let _ = first.await.unwrap();
}

#[tokio::test]
async fn busy_a_waiting_write_that_is_dropped_leaves_its_place_to_the_next() {
    let h = Harness::with_caps(Caps::all());
    let (_pane, log, gate) = gated(&h, |_| Handled::Accepted);
    let first = spawn_post(&h, SEND, json!({"requestId": "r-1", "text": "slow"})).await;
    let dropped = spawn_post(&h, REFUND, json!({"requestId": "a-1"})).await;
    let next = spawn_post(&h, REFUND, json!({"requestId": "a-2"})).await;
    // The caller goes away while its write waits (its connection closed).
    dropped.abort();
    assert!(dropped.await.unwrap_err().is_cancelled());
    gate.add_permits(1);
    h.settle().await;
    assert_success(&first.await.unwrap(), "sent", "r-1", false);
    // No time passes: a place kept for the dropped write would hold the
    // pane for ever, and this would never end.
    let r = tokio::time::timeout(std::time::Duration::from_secs(20), next)
        .await
        .expect("the write after a dropped one never got the pane")
        .unwrap();
    assert_success(&r, "done", "a-2", false);
    assert_eq!(log.count("a-1"), 0, "the dropped write ran nothing");
}

#[tokio::test]
async fn busy_writes_waiting_for_a_pane_closed_and_opened_again_are_404_and_never_run_beside_its_writer() {
    let h = Harness::with_caps(Caps::all());
    let (pane, log, gate) = gated(&h, |_| Handled::Accepted);
    let first = spawn_post(&h, SEND, json!({"requestId": "r-1", "text": "slow"})).await;
    let waiting = spawn_post(&h, REFUND, json!({"requestId": "a-1"})).await;
    // The program closes the pane and opens it again under its id, with
    // its handlers, while the first write still holds it.
    pane.close();
    let (again, _, _) = gated(&h, |_| Handled::Accepted);
    assert!(again.is_open());
    h.settle().await;
    let r = tokio::time::timeout(std::time::Duration::from_secs(20), waiting)
        .await
        .expect("the waiting write did not hear of the close")
        .unwrap();
    assert_eq!(r.status, 404, "it waited for the pane that closed: {:?}", r.json);
    assert!(log.of("action").is_empty(), "it never ran beside the first write");
    gate.add_permits(1);
    h.settle().await;
    let _ = first.await.unwrap();
}

#[tokio::test]
async fn a_repeat_that_goes_away_while_its_first_runs_leaves_nothing_behind() {
    let h = Harness::with_caps(Caps::all());
    let (_pane, log, gate) = gated(&h, |_| Handled::Accepted);
    let first = spawn_post(&h, SEND, json!({"requestId": "r-1", "text": "slow"})).await;
    let links = harness::links_in_use(&h.core);
    for _ in 0..3 {
        let repeat = spawn_post(&h, SEND, json!({"requestId": "r-1", "text": "slow"})).await;
        assert!(!repeat.is_finished(), "a repeat waits for the first");
        repeat.abort();
        assert!(repeat.await.unwrap_err().is_cancelled());
    }
    assert_eq!(harness::links_in_use(&h.core), links, "the repeats that went away left nothing");
    gate.add_permits(1);
    h.settle().await;
    assert_success(&first.await.unwrap(), "sent", "r-1", false);
    assert_eq!(log.count("r-1"), 1);
}

// ---------------------------------------------------------------------------
// actions, handlers and hooks

#[tokio::test]
async fn action_is_done_once_its_handler_accepts_and_an_unknown_action_id_is_404() {
    let (h, _pane, log) = setup();
    let r = h.post(REFUND, json!({"requestId": "a-1"})).await;
    assert_success(&r, "done", "a-1", false);
    let calls = log.of("action");
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].detail, "refund");
    let r = h.post("/v1/panes/ticket-1/actions/explode", json!({"requestId": "a-2"})).await;
    assert_status(&r, 404, "not-found");
    assert_eq!(log.of("action").len(), 1);
    let r = h.post("/v1/panes/nope/actions/refund", json!({"requestId": "a-3"})).await;
    assert_status(&r, 404, "not-found");
}

#[tokio::test]
async fn no_handler_and_no_hook_answers_not_supported_to_send_steer_stop_and_any_action() {
    let h = Harness::with_caps(Caps::all());
    let pane = h.pane();
    pane.action("refund", "Refund", None).unwrap();
    pane.working("t-1").unwrap();
    let ask = pane.ask(choice("call-1", "Deploy?")).unwrap();
    let rid = |n: &str| json!({"requestId": n, "text": "x"});
    // send checks the ask only once a handler could take it.
    assert_status(&h.post(SEND, rid("w-1")).await, 409, "not-supported");
    assert_status(&h.post(STEER, rid("w-2")).await, 409, "not-supported");
    assert_status(&h.post(STOP, rid("w-3")).await, 409, "not-supported");
    assert_status(&h.post(REFUND, rid("w-4")).await, 409, "not-supported");
    assert_status(&h.post("/v1/panes/ticket-1/actions/unknown", rid("w-5")).await, 409, "not-supported");
    assert_eq!(h.open_ask_ids().await, vec![ask.id().to_owned()], "a not-supported stop closes nothing");
}

#[tokio::test]
async fn per_pane_handlers_win_over_the_agent_wide_hook_and_not_handled_falls_to_the_hook() {
    let h = Harness::with_caps(Caps::all());
    let log = Log::default();
    let hook = Recorder::new("hook", &log);
    h.core.set_hooks(hook.clone());
    h.core.set_handlers(hook);
    let with = h.pane_named("ticket-1");
    with.action("refund", "Refund", None).unwrap();
    // The pane's own handler takes sends and actions, not steer.
    with.handlers(Recorder::with("pane", &log, |c| match c.kind {
        "steer" => Handled::NotHandled,
        _ => Handled::Accepted,
    }))
    .unwrap();
    let without = h.pane_named("ticket-2");
    without.action("refund", "Refund", None).unwrap();

    assert_success(&h.post(SEND, json!({"requestId": "1", "text": "a"})).await, "sent", "1", false);
    assert_success(&h.post(REFUND, json!({"requestId": "2"})).await, "done", "2", false);
    with.working("t-1").unwrap();
    assert_success(&h.post(STEER, json!({"requestId": "3", "text": "b"})).await, "steered", "3", false);
    let send2 = h.post("/v1/panes/ticket-2/send", json!({"requestId": "4", "text": "c"})).await;
    assert_success(&send2, "sent", "4", false);
    let act2 = h.post("/v1/panes/ticket-2/actions/refund", json!({"requestId": "5"})).await;
    assert_success(&act2, "done", "5", false);

    let who: Vec<_> = log.calls().into_iter().map(|c| (c.request_id, c.who, c.kind)).collect();
    assert_eq!(
        who,
        vec![
            ("1".into(), "pane", "send"),
            ("2".into(), "pane", "action"),
            ("3".into(), "pane", "steer"),
            ("3".into(), "hook", "steer"),
            ("4".into(), "hook", "send"),
            ("5".into(), "hook", "action"),
        ]
    );
}

#[tokio::test]
async fn handler_not_handled_and_no_hook_is_not_supported() {
    let h = Harness::with_caps(Caps::all());
    let pane = h.pane();
    let log = Log::default();
    pane.handlers(Recorder::with("pane", &log, |_| Handled::NotHandled)).unwrap();
    let r = h.post(SEND, json!({"requestId": "1", "text": "a"})).await;
    assert_status(&r, 409, "not-supported");
    assert!(items_of(&h, "ticket-1", "user").await.is_empty());
}

#[tokio::test]
async fn a_refusal_answers_409_refused_with_its_reason_and_stores_nothing_so_the_same_id_retries() {
    let h = Harness::with_caps(Caps::all());
    let pane = h.pane();
    pane.action("refund", "Refund", None).unwrap();
    let log = Log::default();
    let first = Arc::new(std::sync::Mutex::new(std::collections::HashSet::new()));
    // Each request id is refused the first time.
    pane.handlers(Recorder::with("pane", &log, move |c| {
        if first.lock().unwrap().insert(c.request_id.clone()) {
            Handled::refuse(format!("not now ({})", c.kind))
        } else {
            Handled::Accepted
        }
    }))
    .unwrap();
    let cases = [(SEND, "send", "sent"), (REFUND, "action", "done")];
    for (path, kind, result) in cases {
        let rid = format!("r-{kind}");
        let body = json!({"requestId": rid, "text": "t"});
        let r = h.post(path, body.clone()).await;
        assert_status(&r, 409, "refused");
        assert_eq!(r.json["reason"], format!("not now ({kind})"));
        let r = h.post(path, body.clone()).await;
        assert_success(&r, result, &rid, false);
        assert_eq!(log.count(&rid), 2, "refused once, then run");
        let r = h.post(path, body).await;
        assert_success(&r, result, &rid, true);
        assert_eq!(log.count(&rid), 2);
    }
    // A refused send writes no user item; the accepted one writes one.
    let users = items_of(&h, "ticket-1", "user").await;
    assert_eq!(users.len(), 1);
    pane.working("t-1").unwrap();
    let r = h.post(STEER, json!({"requestId": "r-steer", "text": "t"})).await;
    assert_status(&r, 409, "refused");
    assert_eq!(r.json["reason"], "not now (steer)");
    assert_success(
        &h.post(STEER, json!({"requestId": "r-steer", "text": "t"})).await,
        "steered",
        "r-steer",
        false,
    );
}

#[tokio::test]
async fn a_hook_runs_only_when_its_cap_is_on_and_its_request_id_is_new() {
    let h = Harness::with_caps(Caps::all().without(Cap::Send).without(Cap::Rename).without(Cap::History));
    let log = Log::default();
    let hook = Recorder::new("hook", &log);
    h.core.set_hooks(hook.clone());
    h.core.set_handlers(hook);
    h.pane();
    h.core.starter("new-ticket", "New ticket").unwrap();
    let r = h.post(SEND, json!({"requestId": "1", "text": "a"})).await;
    assert_status(&r, 409, "not-supported");
    let r = h
        .post("/v1/rename", json!({"requestId": "2", "target": "pane", "id": "ticket-1", "title": "X"}))
        .await;
    assert_status(&r, 409, "not-supported");
    assert!(log.calls().is_empty(), "no hook ran for a cap that is off");
    // Caps on: the hook runs once per new id.
    let r = h.post("/v1/starters/new-ticket", json!({"requestId": "3"})).await;
    assert_success(&r, "started", "3", false);
    let r = h.post("/v1/starters/new-ticket", json!({"requestId": "3"})).await;
    assert_success(&r, "started", "3", true);
    let r = h.post("/v1/close", json!({"requestId": "4", "target": "pane", "id": "ticket-1"})).await;
    assert_success(&r, "closed", "4", false);
    let r = h.post("/v1/close", json!({"requestId": "4", "target": "pane", "id": "ticket-1"})).await;
    assert_success(&r, "closed", "4", true);
    let kinds: Vec<_> = log.calls().into_iter().map(|c| (c.kind, c.request_id)).collect();
    assert_eq!(kinds, vec![("starter", "3".into()), ("close", "4".into())]);
}

#[tokio::test]
async fn a_write_answers_once_its_handler_accepted_not_when_the_work_is_finished() {
    let h = Harness::with_caps(Caps::all());
    let pane = h.pane();
    let log = Log::default();
    // Its turn runs until stopped: the answer does not wait for it.
    pane.handlers(Recorder::holding("pane", &log, Arc::new(Semaphore::new(0)))).unwrap();
    let r = h.post(SEND, json!({"requestId": "1", "text": "long job"})).await;
    assert_success(&r, "sent", "1", false);
    assert_eq!(pane.current_state(), durable_runtime::types::PaneState::Working);
}

// ---------------------------------------------------------------------------
// rename, close, reopen

#[tokio::test]
async fn rename_sets_the_title_of_a_workspace_a_tab_named_ws_colon_tab_and_a_pane_with_a_title_event() {
    let (h, _pane, _log) = setup();
    let rename = |rid: &str, target: &str, id: &str, title: &str| json!({"requestId": rid, "target": target, "id": id, "title": title});
    assert_success(
        &h.post("/v1/rename", rename("n-1", "workspace", "support", "Help")).await,
        "renamed",
        "n-1",
        false,
    );
    assert_success(
        &h.post("/v1/rename", rename("n-2", "tab", "support:main", "Inbox")).await,
        "renamed",
        "n-2",
        false,
    );
    assert_success(
        &h.post("/v1/rename", rename("n-3", "pane", "ticket-1", "Maria L.")).await,
        "renamed",
        "n-3",
        false,
    );
    let s = h.state().await.json;
    assert_eq!(s["workspaces"][0]["title"], "Help");
    assert_eq!(s["workspaces"][0]["tabs"][0]["id"], "support:main");
    assert_eq!(s["workspaces"][0]["tabs"][0]["title"], "Inbox");
    assert_eq!(s["panes"][0]["title"], "Maria L.");
    let events = h.all_events("ticket-1").await;
    let titles: Vec<_> = events.iter().filter(|e| e["type"] == "title").map(|e| e["title"].clone()).collect();
    assert_eq!(titles, vec![json!("Maria L.")]);
    // Unknown targets are 404; a tab id breaking `<ws>:<tab>` is 400.
    assert_status(&h.post("/v1/rename", rename("n-4", "pane", "ghost", "x")).await, 404, "not-found");
    assert_status(&h.post("/v1/rename", rename("n-5", "tab", "support:nope", "x")).await, 404, "not-found");
    assert_status(&h.post("/v1/rename", rename("n-6", "tab", "main", "x")).await, 400, "bad-request");
    assert_status(&h.post("/v1/rename", rename("n-7", "pane", "a b", "x")).await, 400, "bad-request");
    assert_status(&h.post("/v1/rename", rename("n-8", "window", "x", "x")).await, 400, "bad-request");
}

#[tokio::test]
async fn rename_through_the_hook_refused_applies_nothing_accepted_or_not_handled_the_sdk_applies_it() {
    let h = Harness::with_caps(Caps::all());
    h.pane();
    let log = Log::default();
    let hook = Recorder::with("hook", &log, |c| match c.request_id.as_str() {
        "no" => Handled::refuse("titles are fixed"),
        "skip" => Handled::NotHandled,
        _ => Handled::Accepted,
    });
    h.core.set_hooks(hook.clone());
    h.core.set_handlers(hook);
    let body = |rid: &str, title: &str| json!({"requestId": rid, "target": "pane", "id": "ticket-1", "title": title});
    let r = h.post("/v1/rename", body("no", "Nope")).await;
    assert_status(&r, 409, "refused");
    assert_eq!(r.json["reason"], "titles are fixed");
    assert_eq!(h.state().await.json["panes"][0]["title"], "Maria Lopez");
    assert_success(&h.post("/v1/rename", body("yes", "Accepted")).await, "renamed", "yes", false);
    assert_eq!(h.state().await.json["panes"][0]["title"], "Accepted");
    assert_success(&h.post("/v1/rename", body("skip", "Default")).await, "renamed", "skip", false);
    assert_eq!(h.state().await.json["panes"][0]["title"], "Default");
    let details: Vec<_> = log.of("rename").into_iter().map(|c| c.detail).collect();
    assert_eq!(details, vec!["ticket-1=Nope", "ticket-1=Accepted", "ticket-1=Default"]);
}

#[tokio::test]
async fn close_removes_the_target_and_everything_in_it_and_closes_their_asks_as_aborted() {
    let h = Harness::with_caps(Caps::all());
    let support = h.core.workspace("support", "Support").unwrap();
    let main = support.tab("main", "Tickets").unwrap();
    let board = support.tab("board", "Board").unwrap();
    let other = h.core.workspace("ops", "Ops").unwrap().tab("t", "T").unwrap();
    let p1 = main.pane("ticket-1", PaneOptions::new("One")).unwrap();
    let p2 = main.pane("ticket-2", PaneOptions::new("Two")).unwrap();
    let p3 = board.pane("news", PaneOptions::new("News")).unwrap();
    let p4 = other.pane("deploy", PaneOptions::new("Deploy")).unwrap();
    let a1 = p1.ask(choice("c1", "one")).unwrap();
    let a3 = p3.ask(choice("c3", "three")).unwrap();
    let a4 = p4.ask(choice("c4", "four")).unwrap();

    // A pane.
    let r = h.post("/v1/close", json!({"requestId": "c-1", "target": "pane", "id": "ticket-2"})).await;
    assert_success(&r, "closed", "c-1", false);
    assert!(!p2.is_open());
    assert_status(&h.events("ticket-2", 0).await, 404, "not-found");
    // A tab: its panes and their asks.
    let r = h.post("/v1/close", json!({"requestId": "c-2", "target": "tab", "id": "support:main"})).await;
    assert_success(&r, "closed", "c-2", false);
    assert!(!p1.is_open());
    let closed = a1.await.unwrap_err();
    assert_eq!((closed.decided_by, closed.outcome), (DecidedBy::Program, Outcome::Aborted));
    // A workspace: every tab and pane in it.
    let r = h.post("/v1/close", json!({"requestId": "c-3", "target": "workspace", "id": "support"})).await;
    assert_success(&r, "closed", "c-3", false);
    assert!(!p3.is_open());
    assert_eq!(a3.await.unwrap_err().outcome, Outcome::Aborted);

    let s = h.state().await.json;
    let ws: Vec<_> = s["workspaces"].as_array().unwrap().iter().map(|w| w["id"].clone()).collect();
    assert_eq!(ws, vec![json!("ops")]);
    let panes: Vec<_> = s["panes"].as_array().unwrap().iter().map(|p| p["id"].clone()).collect();
    assert_eq!(panes, vec![json!("deploy")]);
    let closed: Vec<_> = s["closed"].as_array().unwrap().iter().map(|p| p["id"].clone()).collect();
    assert_eq!(closed.len(), 3);
    for id in ["ticket-1", "ticket-2", "news"] {
        assert!(closed.contains(&json!(id)), "{closed:?}");
    }
    assert_eq!(h.open_ask_ids().await, vec![a4.id().to_owned()], "asks elsewhere stay open");
    assert_status(
        &h.post("/v1/close", json!({"requestId": "c-4", "target": "pane", "id": "ticket-1"})).await,
        404,
        "not-found",
    );
}

#[tokio::test]
async fn reopen_without_a_hook_restores_a_pane_this_process_closed_and_404_for_one_never_closed_here() {
    let (h, pane, log) = setup();
    let r = h.post("/v1/close", json!({"requestId": "c-1", "target": "pane", "id": "ticket-1"})).await;
    assert_success(&r, "closed", "c-1", false);
    assert!(!pane.is_open());
    let r = h.post("/v1/reopen", json!({"requestId": "o-1", "id": "ticket-1"})).await;
    assert_success(&r, "reopened", "o-1", false);
    assert!(pane.is_open());
    let s = h.state().await.json;
    assert_eq!(s["panes"][0]["id"], "ticket-1");
    assert_eq!(s["panes"][0]["title"], "Maria Lopez");
    assert!(s["closed"].as_array().unwrap().is_empty());
    // Restored with its handlers.
    assert_success(&h.post(SEND, json!({"requestId": "r-1", "text": "back"})).await, "sent", "r-1", false);
    assert_eq!(log.of("send").len(), 1);
    let r = h.post("/v1/reopen", json!({"requestId": "o-2", "id": "ticket-0"})).await;
    assert_status(&r, 404, "not-found");
    let r = h.post("/v1/reopen", json!({"requestId": "o-3", "id": "bad id"})).await;
    assert_status(&r, 400, "bad-request");
}

#[tokio::test]
async fn reopen_with_an_on_reopen_hook_the_hook_decides() {
    let h = Harness::with_caps(Caps::all());
    let log = Log::default();
    let core = h.core.clone();
    let hook = Recorder::with("hook", &log, move |c| match c.detail.as_str() {
        // A conversation from before a restart: the hook shows it again.
        "ticket-0" => {
            let tab = core.workspace("support", "Support").unwrap().tab("main", "Tickets").unwrap();
            tab.pane("ticket-0", PaneOptions::new("Old ticket")).unwrap();
            Handled::Accepted
        }
        "ticket-1" => Handled::refuse("archived"),
        _ => Handled::NotHandled,
    });
    h.core.set_hooks(hook.clone());
    h.core.set_handlers(hook);
    let p1 = h.pane_named("ticket-1");
    let p2 = h.pane_named("ticket-2");
    p1.close();
    p2.close();
    let r = h.post("/v1/reopen", json!({"requestId": "o-0", "id": "ticket-0"})).await;
    assert_success(&r, "reopened", "o-0", false);
    assert!(h.core.pane("ticket-0").is_some());
    let r = h.post("/v1/reopen", json!({"requestId": "o-1", "id": "ticket-1"})).await;
    assert_status(&r, 409, "refused");
    assert_eq!(r.json["reason"], "archived");
    assert!(!p1.is_open(), "the hook refused: the SDK restores nothing");
    // NotHandled: the SDK's own restore.
    let r = h.post("/v1/reopen", json!({"requestId": "o-2", "id": "ticket-2"})).await;
    assert_success(&r, "reopened", "o-2", false);
    assert!(p2.is_open());
    assert_eq!(log.of("reopen").len(), 3);
}

// ---------------------------------------------------------------------------
// starters

#[tokio::test]
async fn starter_is_started_with_the_pane_the_hook_created_and_an_unknown_starter_is_404() {
    let h = Harness::with_caps(Caps::all());
    let log = Log::default();
    let core = h.core.clone();
    let hook = Recorder::with("hook", &log, move |c| {
        let tab = core.workspace("support", "Support").unwrap().tab("main", "Tickets").unwrap();
        tab.pane("ticket-7", PaneOptions::new(c.detail.clone())).unwrap();
        Handled::Started(Id::new("ticket-7").unwrap())
    });
    h.core.set_hooks(hook.clone());
    h.core.set_handlers(hook);
    h.core.starter("new-ticket", "New ticket").unwrap();
    let r = h.post("/v1/starters/new-ticket", json!({"requestId": "s-1", "text": "Printer on fire"})).await;
    assert_success(&r, "started", "s-1", false);
    assert_eq!(r.json["pane"], "ticket-7");
    assert_eq!(log.of("starter")[0].detail, "new-ticket:Printer on fire");
    assert!(h.core.pane("ticket-7").is_some());
    let r = h.post("/v1/starters/new-thing", json!({"requestId": "s-2"})).await;
    assert_status(&r, 404, "not-found");
    assert_eq!(log.of("starter").len(), 1);
}

#[tokio::test]
async fn starter_without_a_hook_is_not_supported() {
    let h = Harness::with_caps(Caps::all());
    h.core.starter("new-ticket", "New ticket").unwrap();
    let r = h.post("/v1/starters/new-ticket", json!({"requestId": "s-1"})).await;
    assert_status(&r, 409, "not-supported");
}

// ---------------------------------------------------------------------------
// text from the phone

#[tokio::test]
async fn phone_text_over_64_kib_is_400_for_send_steer_and_starter_and_never_cut() {
    let (h, pane, log) = setup();
    let hook = Recorder::with("hook", &log, |_| Handled::Started(Id::new("ticket-1").unwrap()));
    h.core.set_hooks(hook.clone());
    h.core.set_handlers(hook);
    h.core.starter("new-ticket", "New ticket").unwrap();
    let over = "é".repeat(32 * 1024) + "x"; // 65,537 bytes
    let exact = "a".repeat(64 * 1024);
    pane.working("t-1").unwrap();
    for (path, rid) in [(SEND, "w-1"), (STEER, "w-2"), ("/v1/starters/new-ticket", "w-3")] {
        let r = h.post(path, json!({"requestId": rid, "text": over})).await;
        assert_status(&r, 400, "bad-request");
    }
    assert!(log.calls().is_empty());
    pane.idle().unwrap();
    // 64 KiB exactly goes through whole.
    assert_success(&h.post(SEND, json!({"requestId": "w-1", "text": exact})).await, "sent", "w-1", false);
    assert_eq!(log.of("send")[0].detail.len(), 64 * 1024);
    let users = items_of(&h, "ticket-1", "user").await;
    assert_eq!(users[0]["text"].as_str().unwrap().len(), 64 * 1024);
    pane.working("t-2").unwrap();
    assert_success(&h.post(STEER, json!({"requestId": "w-2", "text": exact})).await, "steered", "w-2", false);
    assert_eq!(log.of("steer")[0].detail.len(), 64 * 1024);
    let r = h.post("/v1/starters/new-ticket", json!({"requestId": "w-3", "text": exact})).await;
    assert_success(&r, "started", "w-3", false);
}

// ---------------------------------------------------------------------------
// the order of checks

#[tokio::test]
async fn write_checks_run_in_order_route_caller_capability_body_receipt_then_route_rules() {
    let h = Harness::with_caps(Caps::all().without(Cap::Steer).without(Cap::History));
    let pane = h.pane();
    let log = Log::default();
    pane.handlers(Recorder::new("pane", &log)).unwrap();
    // Route: unknown → 404, wrong method → 405 (before anything else).
    assert_status(&h.post("/v1/panes/ticket-1/sned", json!({})).await, 404, "not-found");
    let r = h.method("GET", SEND).await;
    assert_status(&r, 405, "method-not-allowed");
    assert_eq!(r.allow, Some("POST"));
    // Caller before capability and body.
    let r = h.post_as(STEER, json!("not an object"), Caller::SelfOrDescendant).await;
    assert_status(&r, 403, "caller-refused");
    let r = h.post_as(SEND, json!({"requestId": "r-1", "text": "x"}), Caller::SelfOrDescendant).await;
    assert_status(&r, 403, "caller-refused");
    assert!(log.calls().is_empty());
    // Capability before body: a cap-off route with a malformed body is 409.
    assert_status(&h.post_raw(STEER, b"{not json").await, 409, "not-supported");
    assert_status(&h.post_too_large(STEER).await, 409, "not-supported");
    // Body: malformed → 400, too large → 413, missing or bad request id → 400.
    assert_status(&h.post_raw(SEND, b"{not json").await, 400, "bad-request");
    assert_status(&h.post_too_large(SEND).await, 413, "too-large");
    assert_status(&h.post(SEND, json!({"text": "x"})).await, 400, "bad-request");
    assert_status(&h.post(SEND, json!({"requestId": "a b", "text": "x"})).await, 400, "bad-request");
    assert_status(&h.post(SEND, json!({"requestId": "r-1"})).await, 400, "bad-request");
    assert_status(
        &h.post("/v1/panes/a%20b/send", json!({"requestId": "r-1", "text": "x"})).await,
        400,
        "bad-request",
    );
    // Receipt before the route's own rules: a replayed send to a pane since
    // closed returns its receipt.
    let first = h.post(SEND, json!({"requestId": "r-1", "text": "x"})).await;
    assert_success(&first, "sent", "r-1", false);
    pane.close();
    let again = h.post(SEND, json!({"requestId": "r-1", "text": "x"})).await;
    assert_success(&again, "sent", "r-1", true);
    assert_eq!(without_replayed(&again.json), without_replayed(&first.json));
    // A new id meets the route's rules: the pane is gone.
    assert_status(&h.post(SEND, json!({"requestId": "r-2", "text": "x"})).await, 404, "not-found");
    // The body is checked before the receipt: a replayed id with a broken
    // body is 400.
    assert_status(&h.post(SEND, json!({"requestId": "r-1"})).await, 400, "bad-request");
    assert_eq!(log.count("r-1"), 1);
}

#[tokio::test]
async fn write_from_another_user_is_refused_403() {
    let (h, _pane, log) = setup();
    let r = h.post_as(SEND, json!({"requestId": "r-1", "text": "x"}), Caller::OtherUser).await;
    assert_status(&r, 403, "caller-refused");
    assert!(log.calls().is_empty());
}

#[tokio::test]
async fn every_write_route_whose_cap_is_off_answers_409_not_supported_and_runs_nothing() {
    let h = Harness::with_caps(Caps::none().with(Cap::Asks));
    let (pane, log) = (h.pane(), Log::default());
    pane.action("refund", "Refund", None).unwrap();
    pane.handlers(Recorder::new("pane", &log)).unwrap();
    let hook = Recorder::new("hook", &log);
    h.core.set_hooks(hook.clone());
    h.core.set_handlers(hook);
    h.core.starter("new-ticket", "New").unwrap();
    pane.close();
    let routes = [
        (SEND, json!({"requestId": "1", "text": "x"})),
        (STEER, json!({"requestId": "2", "text": "x"})),
        (STOP, json!({"requestId": "3"})),
        (REFUND, json!({"requestId": "4"})),
        ("/v1/rename", json!({"requestId": "5", "target": "pane", "id": "ticket-1", "title": "x"})),
        ("/v1/close", json!({"requestId": "6", "target": "pane", "id": "ticket-1"})),
        ("/v1/reopen", json!({"requestId": "7", "id": "ticket-1"})),
        ("/v1/starters/new-ticket", json!({"requestId": "8"})),
    ];
    for (path, body) in routes {
        assert_status(&h.post(path, body).await, 409, "not-supported");
    }
    assert!(log.calls().is_empty());
    assert!(h.core.pane("ticket-1").is_none(), "reopen ran nothing");
}

// ---------------------------------------------------------------------------
// receipts (§9) for writes

#[tokio::test]
async fn receipts_a_request_id_is_found_whatever_route_or_group_repeats_it() {
    let (h, _pane, log) = setup();
    let hook = Recorder::with("hook", &log, |_| Handled::Started(Id::new("ticket-1").unwrap()));
    h.core.set_hooks(hook.clone());
    h.core.set_handlers(hook);
    h.core.starter("new-ticket", "New").unwrap();
    let sent = h.post(SEND, json!({"requestId": "same", "text": "x"})).await;
    assert_success(&sent, "sent", "same", false);
    // The id named a send: an action, a rename, a starter repeating it get
    // the send's receipt and run nothing.
    for (path, body) in [
        (REFUND, json!({"requestId": "same"})),
        ("/v1/rename", json!({"requestId": "same", "target": "pane", "id": "ticket-1", "title": "x"})),
        ("/v1/starters/new-ticket", json!({"requestId": "same"})),
        ("/v1/panes/ticket-1/stop", json!({"requestId": "same"})),
    ] {
        let r = h.post(path, body).await;
        assert_success(&r, "sent", "same", true);
        assert_eq!(without_replayed(&r.json), without_replayed(&sent.json));
    }
    // And a starter's id repeated on a send.
    let started = h.post("/v1/starters/new-ticket", json!({"requestId": "st"})).await;
    assert_success(&started, "started", "st", false);
    let r = h.post(SEND, json!({"requestId": "st", "text": "y"})).await;
    assert_success(&r, "started", "st", true);
    assert_eq!(r.json["pane"], "ticket-1");
    assert_eq!(log.count("same"), 1);
    assert_eq!(log.count("st"), 1);
}

#[tokio::test]
async fn receipts_an_evicted_id_answers_500_receipt_dropped_and_executes_nothing() {
    let h = Harness::with(|b| b.receipts(MemoryReceiptStore::with_capacity(2)));
    let pane = h.pane();
    let log = Log::default();
    pane.handlers(Recorder::new("pane", &log)).unwrap();
    let hook = Recorder::new("hook", &log);
    h.core.set_hooks(hook.clone());
    h.core.set_handlers(hook);
    for rid in ["r-1", "r-2", "r-3"] {
        assert_success(&h.post(SEND, json!({"requestId": rid, "text": rid})).await, "sent", rid, false);
    }
    // Other groups do not evict `pane:ticket-1`.
    for rid in ["n-1", "n-2", "n-3"] {
        let body = json!({"requestId": rid, "target": "pane", "id": "ticket-1", "title": rid});
        assert_success(&h.post("/v1/rename", body).await, "renamed", rid, false);
    }
    let r = h.post(SEND, json!({"requestId": "r-1", "text": "r-1"})).await;
    assert_status(&r, 500, "receipt-dropped");
    assert_eq!(log.count("r-1"), 1, "nothing executed");
    // Whatever route repeats it.
    assert_status(&h.post(STOP, json!({"requestId": "r-1"})).await, 500, "receipt-dropped");
    assert_status(
        &h.post("/v1/rename", json!({"requestId": "n-1", "target": "pane", "id": "ticket-1", "title": "z"}))
            .await,
        500,
        "receipt-dropped",
    );
    assert_eq!(log.count("n-1"), 1);
    assert_eq!(h.state().await.json["panes"][0]["title"], "n-3");
    // The kept ones still replay.
    assert_success(&h.post(SEND, json!({"requestId": "r-2", "text": "r-2"})).await, "sent", "r-2", true);
    assert_success(&h.post(SEND, json!({"requestId": "r-3", "text": "r-3"})).await, "sent", "r-3", true);
    assert_eq!(items_of(&h, "ticket-1", "user").await.len(), 3);
}

#[tokio::test]
async fn receipts_a_repeat_of_an_id_still_being_processed_waits_for_the_first_and_gets_its_receipt() {
    let h = Harness::with_caps(Caps::all());
    let (_pane, log, gate) = gated(&h, |_| Handled::Accepted);
    let first = spawn_post(&h, SEND, json!({"requestId": "r-1", "text": "x"})).await;
    // The repeat comes on another route: it still names the same action.
    let repeat = spawn_post(&h, REFUND, json!({"requestId": "r-1"})).await;
    assert!(!repeat.is_finished());
    gate.add_permits(1);
    h.settle().await;
    let (a, b) = (first.await.unwrap(), repeat.await.unwrap());
    assert_success(&a, "sent", "r-1", false);
    assert_success(&b, "sent", "r-1", true);
    assert_eq!(without_replayed(&a.json), without_replayed(&b.json));
    assert_eq!(log.count("r-1"), 1);
}

#[tokio::test]
async fn receipts_a_repeat_of_an_id_whose_first_was_refused_is_processed_on_its_own() {
    let h = Harness::with_caps(Caps::all());
    let (_pane, log, gate) =
        gated(&h, |n| if n == 0 { Handled::refuse("warming up") } else { Handled::Accepted });
    let first = spawn_post(&h, SEND, json!({"requestId": "r-1", "text": "x"})).await;
    let repeat = spawn_post(&h, SEND, json!({"requestId": "r-1", "text": "x"})).await;
    assert_eq!(log.count("r-1"), 1, "the repeat waits for the first");
    gate.add_permits(2);
    h.settle().await;
    let a = first.await.unwrap();
    assert_status(&a, 409, "refused");
    assert_eq!(a.json["reason"], "warming up");
    assert_success(&repeat.await.unwrap(), "sent", "r-1", false);
    assert_eq!(log.count("r-1"), 2);
}

#[tokio::test]
async fn receipts_every_successful_write_answer_carries_ok_result_request_id_and_replayed() {
    let (h, pane, log) = setup();
    let hook = Recorder::with("hook", &log, |_| Handled::Started(Id::new("ticket-9").unwrap()));
    h.core.set_hooks(hook.clone());
    h.core.set_handlers(hook);
    h.core.starter("new", "New").unwrap();
    let mut answers = Vec::new();
    answers.push(h.post(SEND, json!({"requestId": "1", "text": "x"})).await);
    pane.working("t-1").unwrap();
    answers.push(h.post(SEND, json!({"requestId": "2", "text": "x"})).await);
    answers.push(h.post(STEER, json!({"requestId": "3", "text": "x"})).await);
    answers.push(h.post(STOP, json!({"requestId": "4"})).await);
    answers.push(h.post(REFUND, json!({"requestId": "5"})).await);
    answers.push(
        h.post("/v1/rename", json!({"requestId": "6", "target": "pane", "id": "ticket-1", "title": "t"}))
            .await,
    );
    answers.push(h.post("/v1/starters/new", json!({"requestId": "7"})).await);
    answers.push(h.post("/v1/close", json!({"requestId": "8", "target": "pane", "id": "ticket-1"})).await);
    answers.push(h.post("/v1/reopen", json!({"requestId": "9", "id": "ticket-1"})).await);
    let results: Vec<_> =
        answers.iter().map(|r| r.json["result"].as_str().unwrap_or("?").to_owned()).collect();
    assert_eq!(
        results,
        ["sent", "queued", "steered", "stopped", "done", "renamed", "started", "closed", "reopened"]
    );
    for (i, r) in answers.iter().enumerate() {
        assert_success(r, &results[i], &(i + 1).to_string(), false);
    }
}

// ---------------------------------------------------------------------------
// A hook handles every pane without handlers.

struct SendOnly;

impl ChatHandler for SendOnly {
    async fn turn(&self, _turn: Turn) {}
}

impl Hooks for SendOnly {}

#[tokio::test]
async fn a_hook_that_does_not_take_a_write_answers_not_supported_for_it() {
    let h = Harness::with_caps(Caps::all());
    let pane = h.pane();
    pane.action("refund", "Refund", None).unwrap();
    h.core.set_hooks(SendOnly);
    h.core.on_send(SendOnly);
    h.core.starter("new", "New").unwrap();
    assert_success(&h.post(SEND, json!({"requestId": "1", "text": "x"})).await, "sent", "1", false);
    assert_status(&h.post(REFUND, json!({"requestId": "2"})).await, 409, "not-supported");
    pane.working("t-1").unwrap();
    // A chat handler takes steers unless it says otherwise.
    assert_success(&h.post(STEER, json!({"requestId": "3", "text": "x"})).await, "steered", "3", false);
    assert_status(&h.post("/v1/starters/new", json!({"requestId": "4"})).await, 409, "not-supported");
    // Stop is applied by the SDK itself when no handler takes it: the turn's
    // signal fires and the asks close.
    assert_success(&h.post(STOP, json!({"requestId": "5"})).await, "stopped", "5", false);
}

#[tokio::test]
async fn pane_lock_answers_and_stop_skip_it_while_rename_and_close_of_the_pane_wait_for_it() {
    let h = Harness::with_caps(Caps::all());
    let (pane, log, gate) = gated(&h, |_| Handled::Accepted);
    let stuck = spawn_post(&h, SEND, json!({"requestId": "r-1", "text": "slow"})).await;
    // An answer needs no lock: it is single-use by itself.
    let ask = pane.ask(choice("call-1", "Deploy?")).unwrap();
    let answer = spawn_post(
        &h,
        &format!("/v1/asks/{}", ask.id()),
        json!({"requestId": "a-1", "answer": {"optionIds": ["yes"]}}),
    )
    .await;
    assert!(answer.is_finished(), "an answer does not wait for the pane's lock");
    assert_eq!(answer.await.unwrap().json["result"], "answered");
    assert_eq!(ask.await.unwrap().option_id(), Some("yes"));
    // Rename and close of the pane share the lock.
    let rename = spawn_post(
        &h,
        "/v1/rename",
        json!({"requestId": "n-1", "target": "pane", "id": "ticket-1", "title": "x"}),
    )
    .await;
    let close =
        spawn_post(&h, "/v1/close", json!({"requestId": "c-1", "target": "pane", "id": "ticket-1"})).await;
    assert!(!rename.is_finished() && !close.is_finished());
    h.advance(5_000).await;
    assert_status(&rename.await.unwrap(), 409, "busy");
    assert_status(&close.await.unwrap(), 409, "busy");
    assert!(pane.is_open());
    assert_eq!(h.state().await.json["panes"][0]["title"], "Maria Lopez");
    gate.add_permits(1);
    h.settle().await;
    assert_success(&stuck.await.unwrap(), "sent", "r-1", false);
    assert_eq!(log.count("r-1"), 1);
}

/// Layout hooks only (what the desk sets): they take no pane write.
struct LayoutHooks;

impl Hooks for LayoutHooks {
    async fn on_rename(&self, _req: durable_runtime::RenameRequest) -> HandlerResult {
        Ok(())
    }
}

#[tokio::test]
async fn a_pane_without_handlers_answers_not_supported_to_every_pane_write_even_with_layout_hooks() {
    let h = Harness::with_caps(Caps::all());
    let pane = h.pane_named("announcements");
    h.core.set_hooks(LayoutHooks);
    pane.action("pin", "Pin", None).unwrap();
    let base = "/v1/panes/announcements";
    let send = h.post(&format!("{base}/send"), json!({"requestId": "a1", "text": "x"})).await;
    assert_status(&send, 409, "not-supported");
    // Idle: not-supported comes before steer's own `not-working` refusal.
    let steer = h.post(&format!("{base}/steer"), json!({"requestId": "a2", "text": "x"})).await;
    assert_status(&steer, 409, "not-supported");
    let stop = h.post(&format!("{base}/stop"), json!({"requestId": "a3"})).await;
    assert_status(&stop, 409, "not-supported");
    // Before the unknown-action 404: any action id is not-supported.
    for action in ["pin", "nope"] {
        let r =
            h.post(&format!("{base}/actions/{action}"), json!({"requestId": format!("a-{action}")})).await;
        assert_status(&r, 409, "not-supported");
    }
}

#[tokio::test]
async fn agent_wide_handlers_take_the_pane_writes_of_panes_without_their_own() {
    let h = Harness::with_caps(Caps::all());
    let log = Log::default();
    let pane = h.pane_named("ticket-9");
    h.core.set_handlers(Recorder::new("agent", &log));
    let r = h.post("/v1/panes/ticket-9/send", json!({"requestId": "w1", "text": "hi"})).await;
    assert_success(&r, "sent", "w1", false);
    assert_eq!(log.of("send").len(), 1);
    assert_eq!(log.of("send")[0].who, "agent");
    drop(pane);
}

#[tokio::test]
async fn a_send_with_turn_id_null_is_turn_moved_once_a_turn_began() {
    let (h, pane, log) = setup();
    // Before any turn, null matches: the phone saw no turn, and there is none.
    let r = h.post(SEND, json!({"requestId": "n1", "text": "x", "turnId": null})).await;
    assert_success(&r, "sent", "n1", false);
    assert_eq!(r.json["turnId"], Value::Null);
    pane.working("t-1").unwrap();
    pane.idle().unwrap();
    let r = h.post(SEND, json!({"requestId": "n2", "text": "y", "turnId": null})).await;
    assert_status(&r, 409, "turn-moved");
    assert_eq!(r.json["turnId"], "t-1");
    assert_eq!(log.count("n2"), 0, "nothing reaches the handler");
}

#[tokio::test]
async fn sends_queued_when_the_pane_closed_are_delivered_when_it_is_reopened() {
    let (h, pane, log) = setup();
    pane.working("t-1").unwrap();
    let r = h.post(SEND, json!({"requestId": "q1", "text": "later"})).await;
    assert_success(&r, "queued", "q1", false);
    pane.close();
    let r = h.post("/v1/reopen", json!({"requestId": "re-1", "id": "ticket-1"})).await;
    assert_success(&r, "reopened", "re-1", false);
    h.settle().await;
    assert_eq!(log.count("q1"), 1, "the queued send is delivered once the pane is back");
    let users = items_of(&h, "ticket-1", "user").await;
    assert!(users.iter().any(|u| u["requestId"] == "q1"), "{users:?}");
}

/// A store whose `put` always fails (a disk full).
struct FailingStore;

impl durable_runtime::ReceiptStore for FailingStore {
    async fn get(&self, _id: &str) -> Result<durable_runtime::Lookup, durable_runtime::StoreError> {
        Ok(durable_runtime::Lookup::Unknown)
    }
    async fn put(
        &self,
        _id: &str,
        _r: durable_runtime::Receipt,
        _g: &str,
    ) -> Result<(), durable_runtime::StoreError> {
        Err(durable_runtime::StoreError::new("disk full"))
    }
}

#[tokio::test]
async fn a_write_whose_receipt_cannot_be_stored_is_500_and_a_retry_replays_it_without_running_again() {
    let h = Harness::with(|b| b.receipts(FailingStore));
    let log = Log::default();
    let pane = h.pane();
    pane.handlers(Recorder::new("pane", &log)).unwrap();
    let first = h.post(SEND, json!({"requestId": "d1", "text": "x"})).await;
    assert_status(&first, 500, "internal");
    let retry = h.post(SEND, json!({"requestId": "d1", "text": "x"})).await;
    assert_success(&retry, "sent", "d1", true);
    assert_eq!(log.count("d1"), 1, "executed once, never twice");
}

/// The delivery the machine counts as a running turn is let go when its
/// request is dropped while the chat handler still decides: a graceful
/// stop would otherwise wait for it for ever.
#[tokio::test]
async fn a_send_dropped_while_its_handler_decides_is_no_longer_counted_as_running() {
    let h = Harness::with_caps(Caps::all());
    let (_pane, _log, _gate) = gated(&h, |_| Handled::Accepted);
    let stuck = spawn_post(&h, SEND, json!({"requestId": "r-1", "text": "slow"})).await;
    assert_eq!(h.core.driver().turns_running(), 1, "counted while its handler decides");
    stuck.abort();
    let _ = stuck.await;
    h.settle().await;
    assert_eq!(h.core.driver().turns_running(), 0, "a graceful stop would wait for it for ever");
    tokio::time::timeout(std::time::Duration::from_secs(5), h.core.driver().turns_done())
        .await
        .expect("turns_done returns once the dropped send is let go");
}
