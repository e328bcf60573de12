//! A write whose caller goes away at one of its awaits, and its duplicate
//! at another agent process over the same store, through the runtime's own
//! loops (`once.rs`, `writes.rs`, `answer.rs`): what the machine's
//! enumeration (`durable-core/tests/exactly_once_machine.rs`, scenarios
//! (10) and (12)) checks of the machine, sampled here over the driver that
//! runs it. The store claims an id across processes, as PostgreSQL's does
//! (a second claim waits for the first's put or release), and yields before
//! each call, so that each of its calls is a point where the caller can
//! go away.

use durable_runtime::test_util as harness;

use std::collections::HashSet;
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use durable_runtime::types::exchange::{Caller, Request};
use durable_runtime::types::{Answer, AskOption, AskSpec, Caps, ask_id_for};
use durable_runtime::{
    ChatHandler, HandlerResult, Lookup, MemoryReceiptStore, Receipt, ReceiptStore, SendRequest, StoreError,
    Turn,
};
use futures_util::FutureExt;
use futures_util::task::noop_waker_ref;
use harness::{Harness, Reply, without_replayed};
use serde_json::{Value, json};

const SEND: &str = "/v1/panes/ticket-1/send";

/// A store shared by the processes whose claim holds across them.
#[derive(Clone, Default)]
struct Claiming {
    inner: Arc<MemoryReceiptStore>,
    claimed: Arc<Mutex<HashSet<String>>>,
    freed: Arc<tokio::sync::Notify>,
}

impl Claiming {
    fn free(&self, request_id: &str) {
        self.claimed.lock().unwrap().remove(request_id);
        self.freed.notify_waiters();
    }

    fn holds_claims(&self) -> bool {
        !self.claimed.lock().unwrap().is_empty()
    }
}

impl ReceiptStore for Claiming {
    async fn get(&self, request_id: &str) -> Result<Lookup, StoreError> {
        tokio::task::yield_now().await;
        self.inner.get(request_id).await
    }
    async fn claim(&self, request_id: &str) -> Result<Lookup, StoreError> {
        loop {
            tokio::task::yield_now().await;
            let found = self.inner.get(request_id).await?;
            if !matches!(found, Lookup::Unknown) {
                return Ok(found);
            }
            // Made before the look: a release in between still wakes it.
            let freed = self.freed.notified();
            if self.claimed.lock().unwrap().insert(request_id.to_owned()) {
                return Ok(Lookup::Unknown);
            }
            freed.await;
        }
    }
    async fn put(&self, request_id: &str, receipt: Receipt, group: &str) -> Result<(), StoreError> {
        tokio::task::yield_now().await;
        self.inner.put(request_id, receipt, group).await?;
        self.free(request_id);
        Ok(())
    }
    fn release(&self, request_id: &str) {
        self.free(request_id);
    }
}

/// The chat handler of every process: it counts the sends it takes and
/// the turns it runs, and takes its time to decide.
#[derive(Clone, Default)]
struct Counting {
    taken: Arc<AtomicUsize>,
    turns: Arc<AtomicUsize>,
}

impl ChatHandler for Counting {
    async fn check_send(&self, _req: SendRequest) -> HandlerResult {
        tokio::task::yield_now().await;
        self.taken.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
    async fn turn(&self, _turn: Turn) {
        self.turns.fetch_add(1, Ordering::SeqCst);
    }
}

fn process(store: &Claiming) -> Harness {
    let store = store.clone();
    Harness::with(move |b| b.receipts(store).caps(Caps::all()))
}

/// Lets the jobs of both processes run (the detached end of a dropped
/// write included) until the store holds no claim.
async fn quiet(store: &Claiming) {
    for _ in 0..500 {
        tokio::task::yield_now().await;
    }
    assert!(!store.holds_claims(), "a claim was left in the store");
}

/// A request that must answer: one waiting for a claim nobody releases
/// fails here rather than hanging the suite.
async fn in_time<T>(request: impl Future<Output = T>) -> T {
    tokio::time::timeout(std::time::Duration::from_secs(10), request)
        .await
        .expect("a request waited 10 s: a claim left by the dropped write was never released")
}

/// A retry at `p` once all is over: the duplicate's answer, replayed.
async fn retry_replays(p: &Harness, path: &str, body: &Value, duplicate: &Reply, at: &str) {
    let retry = in_time(p.post(path, body.clone())).await;
    let replayed = (retry.status, &retry.json["replayed"]);
    assert_eq!(replayed, (200, &json!(true)), "{at}: the retry {}", retry.json);
    assert_eq!(without_replayed(&retry.json), without_replayed(&duplicate.json), "{at}");
}

/// Polls `request` `polls` times (a caller that goes away then), or
/// until it answers; says whether it answered.
fn poll_then_drop(
    request: impl Future<Output = durable_runtime::types::exchange::Response>,
    polls: usize,
) -> bool {
    let mut request = Box::pin(request);
    let mut cx = Context::from_waker(noop_waker_ref());
    (0..polls).any(|_| matches!(request.as_mut().poll(&mut cx), Poll::Ready(_)))
}

#[tokio::test]
async fn a_send_dropped_at_each_await_with_a_duplicate_at_another_process_runs_its_turn_once() {
    let body = json!({"requestId": "r-1", "text": "hi"});
    let (mut cut, mut whole) = (0, 0);
    for polls in 0..24 {
        let store = Claiming::default();
        let chat = Counting::default();
        let (p0, p1) = (process(&store), process(&store));
        p0.pane().on_send(chat.clone()).unwrap();
        p1.pane().on_send(chat.clone()).unwrap();
        let first = p0.core.driver().handle(Request::post(SEND, body.to_string(), Caller::OtherProcess));
        if poll_then_drop(first, polls) {
            whole += 1
        } else {
            cut += 1
        }
        let duplicate = in_time(p1.post(SEND, body.clone())).await;
        quiet(&store).await;
        let (taken, turns) = (chat.taken.load(Ordering::SeqCst), chat.turns.load(Ordering::SeqCst));
        let at = format!("dropped after {polls} polls: {} {}", duplicate.status, duplicate.json);
        assert_eq!(duplicate.status, 200, "{at}");
        assert_eq!(turns, 1, "{at}: {turns} turns");
        assert!(taken <= 2, "{at}: taken {taken} times");
        retry_replays(&p0, SEND, &body, &duplicate, &at).await;
        assert_eq!(chat.turns.load(Ordering::SeqCst), 1, "{at}: the retry ran it again");
    }
    assert!(cut >= 2 && whole >= 1, "the polls reach both sides: {cut} cut, {whole} whole");
}

/// The same for an answer, in one process (a card is one process's): the
/// ask is decided once, and a duplicate and a retry replay it.
#[tokio::test]
async fn an_answer_dropped_at_each_await_with_a_duplicate_decides_the_ask_once() {
    let spec = AskSpec::choice("c1", "Go?", [AskOption::new("yes", "Yes"), AskOption::new("no", "No")]);
    let path = format!("/v1/asks/{}", ask_id_for("ticket-1", "c1"));
    let body = json!({"requestId": "r-1", "answer": {"optionIds": ["yes"]}});
    let (mut cut, mut whole) = (0, 0);
    for polls in 0..16 {
        let store = Claiming::default();
        let p0 = process(&store);
        let ask = p0.pane().ask(spec.clone()).unwrap();
        let first = p0.core.driver().handle(Request::post(&path, body.to_string(), Caller::OtherProcess));
        if poll_then_drop(first, polls) {
            whole += 1
        } else {
            cut += 1
        }
        let duplicate = in_time(p0.post(&path, body.clone())).await;
        quiet(&store).await;
        let at = format!("dropped after {polls} polls: {} {}", duplicate.status, duplicate.json);
        assert_eq!(duplicate.status, 200, "{at}");
        let decided = ask.now_or_never().expect("the ask is decided");
        assert_eq!(decided, Ok(Answer::option("yes")), "{at}");
        let events = p0.events("ticket-1", 0).await.json.to_string();
        assert_eq!(events.matches("\"ask-closed\"").count(), 1, "{at}: {events}");
        retry_replays(&p0, &path, &body, &duplicate, &at).await;
    }
    assert!(cut >= 2 && whole >= 1, "the polls reach both sides: {cut} cut, {whole} whole");
}
