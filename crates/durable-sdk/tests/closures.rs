//! Closures are handlers (a chat turn, an action, each layout hook), and
//! `?` on the SDK's own rules inside one refuses the write with the rule's
//! words (`docs/wire.md` §8). Driven the way Collie would, through the
//! agent's core, with the agent served so its driver runs the turns.
#![cfg(all(unix, feature = "socket"))]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::TempDir;
use durable_sdk::driver::exchange::{Caller, Request};
use durable_sdk::handlers::{Hooks, RenameRequest, Started, StarterRequest};
use durable_sdk::{
    ActionRequest, Caps, Collie, HandlerResult, Item, OpenOptions, PaneOptions, Refusal, Transport, Turn,
    Value, json, open_collie,
};

async fn agent(dir: &TempDir) -> Collie {
    let transport = Transport::socket_at(dir.0.join("app.sock"));
    let options = OpenOptions::new("closures").transport(transport).caps(Caps::all()).warn(|_| {});
    open_collie(options).await.expect("served")
}

async fn post(collie: &Collie, path: &str, body: Value) -> (u16, Value) {
    let r = collie.driver().handle(Request::post(path, body.to_string(), Caller::OtherProcess)).await;
    (r.status, r.body_json())
}

async fn eventually<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "never: {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closure_runs_each_turn_and_an_action() {
    let dir = TempDir::new("turn");
    let collie = agent(&dir).await;
    let tab = collie.workspace("w", "W").unwrap().tab("t", "T").unwrap();
    let chat = tab.pane("chat", PaneOptions::new("Chat")).unwrap();
    chat.on_send(|turn: Turn| async move { turn.reply(format!("echo: {}", turn.text())) }).unwrap();
    let pressed = Arc::new(AtomicUsize::new(0));
    let count = pressed.clone();
    let ops = tab.pane("ops", PaneOptions::new("Ops")).unwrap();
    ops.action("ping", "Ping", None).unwrap();
    ops.on_action(move |req: ActionRequest| {
        let count = count.clone();
        async move {
            count.fetch_add(1, Ordering::SeqCst);
            req.pane.write(Item::reply(&format!("pong-{}", req.request_id), "pong")?)?;
            Ok(())
        }
    })
    .unwrap();
    collie.ready();

    let (status, r) = post(&collie, "/v1/panes/chat/send", json!({"requestId": "r-1", "text": "hi"})).await;
    assert_eq!((status, r["result"].as_str()), (200, Some("sent")), "{r}");
    eventually("the closure's reply", || {
        let view = chat.current_state();
        (view == durable_sdk::types::PaneState::Idle).then_some(())
    })
    .await;
    let events = collie.driver().handle(Request::get("/v1/panes/chat/events", Caller::OtherProcess)).await;
    let events = events.body_json().to_string();
    assert!(events.contains("echo: hi"), "{events}");

    let (status, r) = post(&collie, "/v1/panes/ops/actions/ping", json!({"requestId": "b-1"})).await;
    assert_eq!((status, r["result"].as_str()), (200, Some("done")), "{r}");
    assert_eq!(pressed.load(Ordering::SeqCst), 1);
    let events = collie.driver().handle(Request::get("/v1/panes/ops/events", Caller::OtherProcess)).await;
    let events = events.body_json().to_string();
    assert!(events.contains("pong-b-1"), "{events}");
    collie.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rule_broken_inside_a_handler_refuses_with_its_words_and_stores_nothing() {
    let dir = TempDir::new("refuse");
    let collie = agent(&dir).await;
    let pane =
        collie.workspace("w", "W").unwrap().tab("t", "T").unwrap().pane("p", PaneOptions::new("P")).unwrap();
    pane.action("go", "Go", None).unwrap();
    let runs = Arc::new(AtomicUsize::new(0));
    let count = runs.clone();
    pane.on_action(move |req: ActionRequest| {
        let n = count.fetch_add(1, Ordering::SeqCst);
        async move {
            // The first press breaks the ID rule (an id with a space); the second does not.
            let id = if n == 0 { "not an id".to_owned() } else { format!("ok-{}", req.request_id) };
            req.pane.write(Item::reply(&id, "done")?)?;
            HandlerResult::Ok(())
        }
    })
    .unwrap();
    collie.ready();

    let (status, r) = post(&collie, "/v1/panes/p/actions/go", json!({"requestId": "b-1"})).await;
    assert_eq!(status, 409, "{r}");
    assert_eq!(r["code"], "refused", "{r}");
    let reason = r["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("id rule") && reason.contains("\"not an id\""),
        "the rule's words and the value: {r}"
    );
    // Nothing stored: the same request id runs the handler again, and is taken.
    let (status, r) = post(&collie, "/v1/panes/p/actions/go", json!({"requestId": "b-1"})).await;
    assert_eq!(
        (status, r["result"].as_str(), r["replayed"].as_bool()),
        (200, Some("done"), Some(false)),
        "{r}"
    );
    assert_eq!(runs.load(Ordering::SeqCst), 2);
    collie.close().await;
}

/// A `Hooks` value whose rename refuses everything.
struct NoRenames;

impl Hooks for NoRenames {
    async fn on_rename(&self, _req: RenameRequest) -> HandlerResult {
        Err(Refusal::new("renames are off"))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hook_closures_replace_one_hook_each_and_set_hooks_replaces_them_all() {
    let dir = TempDir::new("hooks");
    let collie = agent(&dir).await;
    let tab = collie.workspace("w", "W").unwrap().tab("t", "T").unwrap();
    tab.pane("p", PaneOptions::new("P")).unwrap();
    collie.starter("new", "New").unwrap();
    let opener = tab.clone();
    collie.on_starter(move |req: StarterRequest| {
        let tab = opener.clone();
        async move {
            let pane = tab.pane(&format!("n-{}", req.request_id), PaneOptions::new("New one"))?;
            Ok(Started::pane(&pane))
        }
    });
    collie.ready();
    let (status, r) = post(&collie, "/v1/starters/new", json!({"requestId": "s-1"})).await;
    assert_eq!((status, r["pane"].as_str()), (200, Some("n-s-1")), "{r}");
    // A hook not set does what the trait's default does: rename accepted.
    let rename = |id: &str| json!({"requestId": id, "target": "pane", "id": "p", "title": "Renamed"});
    assert_eq!(post(&collie, "/v1/rename", rename("q-1")).await.0, 200);

    // A closure over a Hooks value replaces that one hook.
    collie.set_hooks(NoRenames);
    let (status, r) = post(&collie, "/v1/rename", rename("q-2")).await;
    assert_eq!((status, r["code"].as_str()), (409, Some("refused")), "{r}");
    let (status, r) = post(&collie, "/v1/starters/new", json!({"requestId": "s-2"})).await;
    assert_eq!(status, 409, "set_hooks replaced the starter closure: {r}");
    collie.on_rename(|_req: RenameRequest| async { Ok(()) });
    assert_eq!(post(&collie, "/v1/rename", rename("q-3")).await.0, 200, "the closure wins over the value");
    collie.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_lets_a_running_turn_end_and_refuses_new_sends_meanwhile() {
    let dir = TempDir::new("close");
    let collie = agent(&dir).await;
    let pane =
        collie.workspace("w", "W").unwrap().tab("t", "T").unwrap().pane("p", PaneOptions::new("P")).unwrap();
    pane.on_send(|turn: Turn| async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        turn.reply(format!("done: {}", turn.text()));
    })
    .unwrap();
    collie.starter("new", "New").unwrap();
    collie.on_starter(|_req: StarterRequest| async { Ok(Started::without_pane()) });
    collie.ready();
    let (status, r) = post(&collie, "/v1/panes/p/send", json!({"requestId": "r-1", "text": "slow"})).await;
    assert_eq!((status, r["result"].as_str()), (200, Some("sent")), "{r}");
    eventually("the turn running", || (collie.driver().turns_running() == 1).then_some(())).await;

    let closing = tokio::spawn({
        let collie = collie.clone();
        async move { collie.close().await }
    });
    eventually("the stop begun", || collie.driver().is_stopping().then_some(())).await;
    let (status, r) = post(&collie, "/v1/panes/p/send", json!({"requestId": "r-2", "text": "late"})).await;
    assert_eq!((status, r["code"].as_str()), (409, Some("busy")), "{r}");
    let (status, r) = post(&collie, "/v1/starters/new", json!({"requestId": "s-1"})).await;
    assert_eq!(
        (status, r["code"].as_str()),
        (409, Some("busy")),
        "a starter opens no turn in the grace: {r}"
    );
    tokio::time::timeout(Duration::from_secs(10), closing).await.expect("close returned").unwrap();
    assert_eq!(collie.driver().turns_running(), 0);
    let events = collie.driver().handle(Request::get("/v1/panes/p/events", Caller::OtherProcess)).await;
    let events = events.body_json().to_string();
    assert!(events.contains("done: slow"), "the turn ended whole before close returned: {events}");
    assert!(!events.contains("late"), "the send in the grace ran nothing: {events}");
}
