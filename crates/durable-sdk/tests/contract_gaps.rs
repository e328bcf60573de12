//! Rules of the contract (`docs/wire.md`) that no other test
//! checked, found by the coverage audit. Each test names its rule.
#![cfg(all(unix, feature = "socket"))]

mod common;

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use common::TempDir;
use durable_sdk::driver::exchange::{Caller, Request};
use durable_sdk::{AskOption, AskSpec, OpenOptions, PaneOptions, Transport, open_collie};

fn poll_once<F: Future + Unpin>(f: &mut F) -> Poll<F::Output> {
    Pin::new(f).poll(&mut Context::from_waker(Waker::noop()))
}

/// §7.2 "`close()` of the whole handle leaves open asks open: a shutdown is
/// not an answer": after `Collie::close`, the ask is still open in the core
/// (and in the state), no `ask-closed` event was written, and its awaitable
/// has not resolved.
#[tokio::test]
async fn closing_rule_close_of_the_whole_handle_leaves_open_asks_open() {
    let dir = TempDir::new("close");
    let socket = dir.0.join("run/app.sock");
    let collie = open_collie(OpenOptions::new("agent").transport(Transport::socket_at(&socket)).warn(|_| {}))
        .await
        .expect("open_collie serves");
    let core = collie.driver().clone();
    let pane = collie
        .workspace("support", "Support")
        .unwrap()
        .tab("main", "Tickets")
        .unwrap()
        .pane("ticket-1", PaneOptions::new("Maria Lopez"))
        .unwrap();
    let ask = pane.ask(AskSpec::choice("call-1", "Go?", [AskOption::new("yes", "Yes")])).unwrap();
    let id = ask.id().to_owned();
    let mut decided = Box::pin(ask.decided());
    assert!(poll_once(&mut decided).is_pending());

    collie.close().await;
    assert!(!socket.exists(), "close() stopped serving");
    for _ in 0..20 {
        tokio::task::yield_now().await;
    }
    assert!(poll_once(&mut decided).is_pending(), "a shutdown is not an answer");
    assert_eq!(pane.open_asks(), std::slice::from_ref(&id));
    let state = core.handle(Request::get("/v1/state", Caller::OtherProcess)).await.body_json();
    assert_eq!(state["asks"][0]["id"], id.as_str(), "{state}");
    let events =
        core.handle(Request::get("/v1/panes/ticket-1/events", Caller::OtherProcess)).await.body_json();
    let types: Vec<&str> =
        events["events"].as_array().unwrap().iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert!(!types.contains(&"ask-closed"), "no ask-closed event: {events}");
}
