//! The turn the SDK runs for a send (§8, and the decisions on turns in
//! docs/wire.md): a chat handler driven the way Collie drives it — a send
//! starts a turn named after its request id, a steer reaches the running
//! turn, a stop ends it, and its end sets the pane idle.
use durable_runtime::test_util as harness;

use std::sync::{Arc, Mutex};

use durable_runtime::types::PaneState;
use durable_runtime::{ChatHandler, HandlerResult, Refusal, SendRequest, SteerRequest, Turn};
use harness::Harness;
use serde_json::{Value, json};
use tokio::sync::Notify;

const SEND: &str = "/v1/panes/ticket-1/send";
const STEER: &str = "/v1/panes/ticket-1/steer";
const STOP: &str = "/v1/panes/ticket-1/stop";

/// Replies with every steer it hears until the phone stops it (or a steer
/// says `done`), writing the reply as it grows.
struct Listener {
    started: Arc<Notify>,
}

impl ChatHandler for Listener {
    async fn turn(&self, mut turn: Turn) {
        let mut reply = format!("heard: {}", turn.text());
        turn.partial(reply.clone());
        self.started.notify_one();
        while let Some(steer) = turn.next_steer().await {
            reply.push_str(&format!(" + {steer}"));
            turn.partial(reply.clone());
            if steer == "done" {
                break;
            }
        }
        turn.reply(reply);
    }
}

fn reply_of(view: &Value, request_id: &str) -> Value {
    let id = format!("reply-{request_id}");
    view["items"].as_array().unwrap().iter().find(|i| i["id"] == id).cloned().unwrap_or(Value::Null)
}

fn listener(h: &Harness) -> Arc<Notify> {
    let started = Arc::new(Notify::new());
    h.pane().on_send(Listener { started: started.clone() }).unwrap();
    started
}

#[tokio::test]
async fn a_send_runs_a_turn_named_after_its_request_id_and_steers_reach_it_until_it_ends() {
    let h = Harness::new();
    let started = listener(&h);
    let r = h.post(SEND, json!({"requestId": "r-1", "text": "hello"})).await;
    assert_eq!(r.json["result"], "sent", "{:?}", r.json);
    started.notified().await;
    let pane = h.core.pane("ticket-1").unwrap();
    assert_eq!(pane.current_state(), PaneState::Working);
    assert_eq!(pane.turn_id().as_deref(), Some("r-1"));
    for (rid, text) in [("s-1", "left"), ("s-2", "done")] {
        let r = h.post(STEER, json!({"requestId": rid, "text": text})).await;
        assert_eq!(r.json["result"], "steered", "{:?}", r.json);
    }
    h.settle().await;
    let reply = reply_of(&h.view("ticket-1").await, "r-1");
    assert_eq!(reply["text"], "heard: hello + left + done");
    assert_eq!(reply.get("partial"), None, "the final write is not partial");
    assert_eq!(pane.current_state(), PaneState::Idle, "the turn's end sets the pane idle");
    // Idle again: a steer has no turn to reach.
    let r = h.post(STEER, json!({"requestId": "s-3", "text": "late"})).await;
    assert_eq!((r.status, r.json["reason"].clone()), (409, json!("not-working")));
}

#[tokio::test]
async fn a_stop_from_the_phone_ends_the_turn_with_what_it_had() {
    let h = Harness::new();
    let started = listener(&h);
    h.post(SEND, json!({"requestId": "r-1", "text": "long"})).await;
    started.notified().await;
    let r = h.post(STOP, json!({"requestId": "x-1"})).await;
    assert_eq!(r.json["result"], "stopped", "{:?}", r.json);
    h.settle().await;
    let reply = reply_of(&h.view("ticket-1").await, "r-1");
    assert_eq!((reply["text"].clone(), reply.get("partial")), (json!("heard: long"), None));
    assert_eq!(h.core.pane("ticket-1").unwrap().current_state(), PaneState::Idle);
}

#[tokio::test]
async fn a_send_during_a_turn_is_queued_and_runs_its_own_turn_after_it() {
    let h = Harness::new();
    let started = listener(&h);
    h.post(SEND, json!({"requestId": "r-1", "text": "one"})).await;
    started.notified().await;
    let r = h.post(SEND, json!({"requestId": "r-2", "text": "two"})).await;
    assert_eq!((r.json["result"].clone(), r.json["turnId"].clone()), (json!("queued"), json!("r-1")));
    h.post(STEER, json!({"requestId": "s-1", "text": "done"})).await;
    started.notified().await; // the queued send's turn started
    let pane = h.core.pane("ticket-1").unwrap();
    assert_eq!(pane.turn_id().as_deref(), Some("r-2"));
    h.post(STEER, json!({"requestId": "s-2", "text": "done"})).await;
    h.settle().await;
    let view = h.view("ticket-1").await;
    assert_eq!(reply_of(&view, "r-1")["text"], "heard: one + done");
    assert_eq!(reply_of(&view, "r-2")["text"], "heard: two + done");
}

/// Refuses sends that shout, takes no steers, and counts the turns it ran.
struct Picky(Arc<Mutex<Vec<String>>>);

impl ChatHandler for Picky {
    async fn check_send(&self, req: SendRequest) -> HandlerResult {
        if req.text.chars().any(char::is_uppercase) {
            return Err(Refusal::new("no shouting"));
        }
        Ok(())
    }
    async fn steer(&self, _req: SteerRequest) -> HandlerResult {
        Err(Refusal::not_supported())
    }
    async fn turn(&self, turn: Turn) {
        self.0.lock().unwrap().push(turn.text().to_owned());
        turn.stopped().await;
    }
}

#[tokio::test]
async fn check_send_refuses_before_any_turn_and_a_steer_handler_may_decline() {
    let h = Harness::new();
    let ran = Arc::new(Mutex::new(Vec::new()));
    h.pane().on_send(Picky(ran.clone())).unwrap();
    let r = h.post(SEND, json!({"requestId": "r-1", "text": "HELLO"})).await;
    assert_eq!((r.status, r.code(), r.json["reason"].clone()), (409, "refused", json!("no shouting")));
    let pane = h.core.pane("ticket-1").unwrap();
    assert_eq!((pane.current_state(), pane.turn_id()), (PaneState::Idle, None), "no turn started");
    // Refused stores nothing: the same request id may try again.
    let r = h.post(SEND, json!({"requestId": "r-1", "text": "hello"})).await;
    assert_eq!(r.json["result"], "sent", "{:?}", r.json);
    h.settle().await;
    assert_eq!(*ran.lock().unwrap(), ["hello"]);
    let r = h.post(STEER, json!({"requestId": "s-1", "text": "x"})).await;
    assert_eq!((r.status, r.code()), (409, "not-supported"));
}

#[tokio::test]
async fn a_turn_the_program_starts_hears_steers_and_stop_too_and_a_closed_pane_is_its_own_error() {
    let h = Harness::new();
    let pane = h.pane();
    pane.on_send(Picky(Arc::default())).unwrap();
    let mut turn = pane.start_turn("t-9").unwrap();
    // Picky declines steers: the program's own turn hears nothing then.
    let r = h.post(STEER, json!({"requestId": "s-1", "text": "x"})).await;
    assert_eq!(r.code(), "not-supported");
    assert!(turn.take_steers().is_empty());
    let r = h.post(STOP, json!({"requestId": "x-1"})).await;
    assert_eq!(r.json["result"], "stopped");
    assert!(turn.is_stopped());
    assert_eq!(turn.next_steer().await, None, "a stopped turn hears no more");
    pane.close();
    assert!(!turn.is_open());
    let err = turn.write(durable_runtime::types::Item::reply("late", "x").unwrap()).unwrap_err();
    assert!(err.is_closed(), "{err:?}");
    turn.end(); // ending a turn of a closed pane is a no-op
}

/// A turn the program replaced (a second `start_turn` on its pane, as the
/// Pi and ACP adapters do for each prompt) hears no more steers: its
/// `next_steer()` says `None`, so a steer loop ends and its job with it.
#[tokio::test]
async fn a_replaced_turn_hears_the_end_of_its_steers() {
    let h = Harness::new();
    let pane = h.pane();
    let mut first = pane.start_turn("first").unwrap();
    let _second = pane.start_turn("second").unwrap();
    let heard = tokio::time::timeout(std::time::Duration::from_secs(10), first.next_steer()).await;
    assert_eq!(heard, Ok(None), "the replaced turn still waits for steers");
}

/// A graceful stop waits for the turns running (`Driver::turns_done`): it
/// waits while one runs, and wakes when the last one ends — a steer that
/// ends it here.
#[tokio::test]
async fn turns_done_waits_for_the_running_turn_and_wakes_at_its_end() {
    let h = Harness::new();
    let started = listener(&h);
    h.post(SEND, json!({"requestId": "r-1", "text": "long"})).await;
    started.notified().await;
    assert_eq!(h.core.driver().turns_running(), 1);
    let core = h.core.clone();
    let mut done = tokio::spawn(async move { core.driver().turns_done().await });
    tokio::task::yield_now().await;
    let waited = tokio::time::timeout(std::time::Duration::from_millis(50), &mut done).await;
    assert!(waited.is_err(), "turns_done returned while a turn ran");
    h.post(STEER, json!({"requestId": "s-1", "text": "done"})).await;
    tokio::time::timeout(std::time::Duration::from_secs(20), done)
        .await
        .expect("turns_done never woke after the last turn ended")
        .unwrap();
    assert_eq!(h.core.driver().turns_running(), 0);
    // With none running it returns at once.
    h.core.driver().turns_done().await;
}
