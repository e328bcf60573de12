//! A burst, then a crash (§9.1): ten writers at once on the desk's tickets
//! — sends, renames, starters opening new tickets that the writers then
//! write to, refund buttons and their answers — with turns of 300 ms, so
//! that every ticket has a turn running and sends queued behind it when the
//! desk is killed with `SIGKILL`. Started again on the same data, every send
//! that was acknowledged runs or is closed with a notice on its pane: none
//! is left `queued` (the burst of issue 29 lost the last queued send of a
//! pane this way).
mod desk_support;

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use desk_support::{Desk, TestDir};
use serde_json::{Value, json};

const WRITERS: usize = 10;
const WRITES_EACH: usize = 30;

/// A send the desk acknowledged: its pane, text and first answer.
struct Acked {
    pane: String,
    text: String,
}

/// The burst: the sends acknowledged, and the cards answered `200`.
fn burst(desk: &Desk) -> (HashMap<String, Acked>, HashSet<String>) {
    let panes = Mutex::new(vec!["ticket-1".to_owned()]);
    let acked = Mutex::new(HashMap::new());
    let answered = Mutex::new(HashSet::new());
    std::thread::scope(|s| {
        for w in 0..WRITERS {
            let (panes, acked, answered) = (&panes, &acked, &answered);
            s.spawn(move || {
                for k in 0..WRITES_EACH {
                    let pane = {
                        let panes = panes.lock().unwrap();
                        panes[(w * 7 + k * 3) % panes.len()].clone()
                    };
                    match (w + k) % 10 {
                        0 if w % 3 == 0 => {
                            let (status, r) =
                                desk.post("/v1/starters/new-ticket", json!({"requestId": format!("new-{w}-{k}")}));
                            if status == 200 {
                                panes.lock().unwrap().push(r["pane"].as_str().unwrap().to_owned());
                            }
                        }
                        1 => {
                            let body = json!({"requestId": format!("ren-{w}-{k}"), "target": "pane", "id": pane, "title": format!("Ticket {w}.{k}")});
                            desk.post("/v1/rename", body);
                        }
                        2 if k % 4 == 0 => {
                            desk.post(
                                &format!("/v1/panes/{pane}/actions/refund"),
                                json!({"requestId": format!("act-{w}-{k}")}),
                            );
                        }
                        3 => {
                            let (_, state) = desk.get("/v1/state");
                            for ask in state["asks"].as_array().into_iter().flatten() {
                                let answer = json!({"requestId": format!("ans-{w}-{k}-{}", ask["id"].as_str().unwrap_or("")), "answer": {"optionIds": ["deny"]}, "hash": ask["hash"]});
                                let id = ask["id"].as_str().unwrap_or("").to_owned();
                                let (status, _) = desk.post(&format!("/v1/asks/{id}"), answer);
                                if status == 200 {
                                    answered.lock().unwrap().insert(id);
                                }
                            }
                        }
                        _ => {
                            let id = format!("snd-{w}-{k}");
                            let text = format!("burst {w}.{k}");
                            let body = json!({"requestId": id, "text": text});
                            let (status, _) = desk.post(&format!("/v1/panes/{pane}/send"), body);
                            if status == 200 {
                                acked.lock().unwrap().insert(id, Acked { pane, text });
                            }
                        }
                    }
                }
            });
        }
    });
    (acked.into_inner().unwrap(), answered.into_inner().unwrap())
}

#[test]
fn every_send_acknowledged_in_a_burst_runs_or_is_closed_with_a_notice_after_a_sigkill() {
    let dir = TestDir::new("burst");
    let desk = Desk::start(&dir, &["--turn-ms", "300"]);
    let (acked, answered) = burst(&desk);
    let state = desk.state();
    let working = state["panes"].as_array().unwrap().iter().filter(|p| p["state"] == "working").count();
    assert!(working >= 2, "the kill lands while turns run: {state}");
    desk.kill();
    assert!(acked.len() >= 100, "most sends were acknowledged: {}", acked.len());

    let desk = Desk::start(&dir, &["--turn-ms", "20"]);
    // A card the phone heard `200` for is never raised again (sends queued
    // behind it would wait for an answer that never comes).
    let state = desk.state();
    for ask in state["asks"].as_array().into_iter().flatten() {
        let id = ask["id"].as_str().unwrap_or("");
        assert!(!answered.contains(id), "card {id} was answered before the kill and is open again");
    }
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut left: Vec<(&String, &Acked)> = acked.iter().collect();
    let mut closed = Vec::new();
    while !left.is_empty() {
        // The phone answers the cards that come back (refunds), as a person would.
        let (_, state) = desk.get("/v1/state");
        for ask in state["asks"].as_array().into_iter().flatten() {
            let id = ask["id"].as_str().unwrap_or("");
            let answer = json!({"requestId": format!("after-{id}"), "answer": {"optionIds": ["deny"]}, "hash": ask["hash"]});
            desk.post(&format!("/v1/asks/{id}"), answer);
        }
        let mut still = Vec::new();
        for (id, send) in left {
            let body = json!({"requestId": id, "text": send.text});
            let (status, again, delivery) =
                desk.post_delivery(&format!("/v1/panes/{}/send", send.pane), body);
            assert_eq!((status, again["replayed"].clone()), (200, json!(true)), "{id}: {again}");
            match delivery.as_deref() {
                Some("done") => {}
                Some("closed") => closed.push((id, send)),
                Some("queued" | "running") => still.push((id, send)),
                other => panic!("{id}: a send's replay says where it stands, not {other:?}"),
            }
        }
        left = still;
        let stuck: Vec<&String> = left.iter().map(|(id, _)| *id).collect();
        assert!(Instant::now() < deadline, "acknowledged sends never ran: {stuck:?}");
        if !left.is_empty() {
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    // A closed send says so on its pane.
    for (id, send) in closed {
        let items = desk.items(&send.pane);
        let notice = items.iter().find(|i| {
            i["kind"] == "notice" && (i["id"] == format!("cut-{id}") || i["id"] == format!("user-{id}"))
        });
        assert!(notice.is_some(), "{id} was closed without a notice on {}", send.pane);
    }
    let _: Value = desk.state();
}
