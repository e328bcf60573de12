//! Exactly once under contention (contract §8–§9): many tasks send the same
//! request ids at once, on a multi-thread runtime. A repeat of an id still
//! being processed waits for the first and gets its receipt.
use durable_runtime::test_util as harness;

use std::collections::HashMap;
use std::sync::Arc;

use durable_runtime::types::exchange::{Caller, Request};
use durable_runtime::{
    ActionHandler, ActionRequest, ChatHandler, HandlerResult, SendRequest, StopRequest, Turn,
};
use harness::recorder::{Log, PaneExt, Recorder};
use harness::{Harness, Reply, without_replayed};
use serde_json::{Value, json};
use tokio::sync::Barrier;

const IDS: usize = 8;
const TASKS_PER_ID: usize = 8;

/// Accepts after yielding a few times, so that repeats arrive while the
/// first is still inside its handler.
#[derive(Clone)]
struct Slow(Recorder);

async fn pause() {
    for _ in 0..50 {
        tokio::task::yield_now().await;
    }
}

impl ChatHandler for Slow {
    async fn turn(&self, turn: Turn) {
        self.0.turn(turn).await
    }
    async fn check_send(&self, req: SendRequest) -> HandlerResult {
        pause().await;
        self.0.check_send(req).await
    }
    async fn stop(&self, req: StopRequest) -> HandlerResult {
        pause().await;
        ChatHandler::stop(&self.0, req).await
    }
}

impl ActionHandler for Slow {
    async fn action(&self, req: ActionRequest) -> HandlerResult {
        pause().await;
        self.0.action(req).await
    }
}

/// Runs `IDS × TASKS_PER_ID` requests at once, released together by a
/// barrier; `request(id, task)` builds each one.
async fn storm(
    h: &Harness,
    request: impl Fn(usize, usize) -> (String, Value),
) -> HashMap<String, Vec<Reply>> {
    let barrier = Arc::new(Barrier::new(IDS * TASKS_PER_ID));
    let mut tasks = Vec::new();
    for task in 0..TASKS_PER_ID {
        for id in 0..IDS {
            let (path, body) = request(id, task);
            let core = h.core.clone();
            let barrier = barrier.clone();
            tasks.push(tokio::spawn(async move {
                barrier.wait().await;
                let reply = Reply::from(
                    core.driver().handle(Request::post(&path, body.to_string(), Caller::OtherProcess)).await,
                );
                (format!("r-{id}"), reply)
            }));
        }
    }
    let mut by_id: HashMap<String, Vec<Reply>> = HashMap::new();
    for t in tasks {
        // A repeat never woken (a lost wake-up) fails here, not hangs.
        let joined = tokio::time::timeout(std::time::Duration::from_secs(60), t).await;
        let (rid, reply) = joined.expect("a request never got its answer").unwrap();
        by_id.entry(rid).or_default().push(reply);
    }
    by_id
}

/// A send that met a running turn was answered `queued`: the program hears
/// it when that turn ends, after its answer. Waits (up to 5 s) for one call
/// per id; the assertions that follow say what is missing if none comes.
async fn calls_of_queued_sends_settle(log: &Log) {
    for _ in 0..1000 {
        if log.calls().len() >= IDS {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
}

fn assert_one_execution_and_identical_answers(log: &Log, by_id: &HashMap<String, Vec<Reply>>) {
    assert_eq!(by_id.len(), IDS);
    for (rid, replies) in by_id {
        assert_eq!(replies.len(), TASKS_PER_ID);
        assert_eq!(log.count(rid), 1, "{rid} ran exactly once: {:?}", log.calls());
        let first = without_replayed(&replies[0].json);
        for r in replies {
            assert_eq!(r.status, 200, "{rid}: {:?}", r.json);
            assert_eq!(without_replayed(&r.json), first, "{rid}: every answer is the first one");
        }
        let fresh = replies.iter().filter(|r| r.json["replayed"] == false).count();
        let replayed = replies.iter().filter(|r| r.json["replayed"] == true).count();
        assert_eq!((fresh, replayed), (1, TASKS_PER_ID - 1), "{rid}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrency_64_tasks_sending_the_same_request_ids_at_once_run_each_id_exactly_once() {
    let h = Harness::new();
    let log = Log::default();
    // Two panes: ids share a pane's lock, and span two receipt groups.
    for p in ["p0", "p1"] {
        h.pane_named(p).handlers(Slow(Recorder::new("pane", &log))).unwrap();
    }
    let by_id = storm(&h, |id, _| {
        (
            format!("/v1/panes/p{}/send", id % 2),
            json!({"requestId": format!("r-{id}"), "text": format!("hello {id}")}),
        )
    })
    .await;
    calls_of_queued_sends_settle(&log).await;
    assert_one_execution_and_identical_answers(&log, &by_id);
    for replies in by_id.values() {
        let result = replies[0].json["result"].as_str().unwrap_or_default();
        assert!(result == "sent" || result == "queued", "{result}");
    }
    // One `user` item per id.
    for p in ["p0", "p1"] {
        let view = h.view(p).await;
        let users = view["items"].as_array().unwrap().iter().filter(|i| i["kind"] == "user").count();
        assert_eq!(users, IDS / 2, "{p}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrency_the_same_request_ids_racing_on_different_routes_still_run_once_with_one_answer() {
    let h = Harness::new();
    let log = Log::default();
    let pane = h.pane_named("p0");
    pane.action("go", "Go", None).unwrap();
    pane.handlers(Slow(Recorder::new("pane", &log))).unwrap();
    // Each id is sent by some tasks, pressed as an action or a stop by
    // others: whichever comes first names the action, the rest replay it.
    let by_id = storm(&h, |id, task| {
        let body = json!({"requestId": format!("r-{id}"), "text": "x"});
        let path = match task % 3 {
            0 => "/v1/panes/p0/send",
            1 => "/v1/panes/p0/actions/go",
            _ => "/v1/panes/p0/stop",
        };
        (path.to_owned(), body)
    })
    .await;
    calls_of_queued_sends_settle(&log).await;
    assert_one_execution_and_identical_answers(&log, &by_id);
    assert_eq!(log.calls().len(), IDS);
}
