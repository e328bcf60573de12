//! A burst, then a crash (§9.1): ten writers at once on the desk's tickets
//! — sends, renames, starters opening new tickets that the writers then
//! write to, refund buttons and their answers — with turns of 300 ms, so
//! that tickets have a turn running and sends queued behind it when the
//! desk is killed with `SIGKILL`: once after the burst, and once in a burst
//! that goes on across the restart (a write that got no answer is sent
//! again with its request id once the desk is back, as Collie does). Every
//! send that was acknowledged ran, once since the restart (its reply is on
//! its pane), or is closed with a notice on its pane: none is left `queued`
//! (issue 29). The second one failed before the restart made a pane's
//! writes wait for the sends the kill left: a repeated send ran twice.
mod desk_support;

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use desk_support::{Desk, TestDir};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::{Value, json};

const WRITERS: usize = 10;
const WRITES_EACH: usize = 30;

/// A send the desk acknowledged: its pane, text and first answer.
struct Acked {
    pane: String,
    text: String,
}

/// What a burst left: the sends acknowledged, the cards answered `200`,
/// and how many panes were working when the desk was killed.
struct Burst {
    acked: HashMap<String, Acked>,
    answered: HashSet<String>,
    working_at_kill: usize,
}

/// How many panes are working now.
fn working(desk: &Desk) -> usize {
    let (_, state) = desk.get("/v1/state");
    state["panes"].as_array().into_iter().flatten().filter(|p| p["state"] == "working").count()
}

/// A write that got no answer (the desk was down) sent again with the same
/// request id, as Collie does, until one comes or the burst's deadline.
fn post_until_answered(desk: &Desk, path: &str, body: Value, deadline: Instant) -> (u16, Value) {
    loop {
        let (status, answer) = desk.post(path, body.clone());
        if status != 0 || Instant::now() > deadline {
            return (status, answer);
        }
        // Soon, so that the writes sent again land while the restarted
        // desk is still putting back the sends the kill left.
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The burst. With `kill_at`, the desk is killed with `SIGKILL` as soon as
/// that many sends were acknowledged, while the writers still write, and
/// started again on the same data (`restart`): the writers go on, sending
/// again what got no answer; without, it runs to its end and the desk is
/// left running.
fn burst(desk: &Desk, kill_at: Option<(usize, &(dyn Fn() -> Desk + Sync))>) -> (Burst, Option<Desk>) {
    let restarted = Mutex::new(None);
    let deadline = Instant::now() + Duration::from_secs(120);
    let panes = Mutex::new(vec!["ticket-1".to_owned()]);
    let acked = Mutex::new(HashMap::new());
    let answered = Mutex::new(HashSet::new());
    let acked_count = AtomicUsize::new(0);
    let killed = AtomicBool::new(false);
    let working_at_kill = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for w in 0..WRITERS {
            let (panes, acked, answered) = (&panes, &acked, &answered);
            let (acked_count, killed, working_at_kill) = (&acked_count, &killed, &working_at_kill);
            let restarted = &restarted;
            s.spawn(move || {
                for k in 0..WRITES_EACH {
                    let pane = {
                        let panes = panes.lock().unwrap();
                        panes[(w * 7 + k * 3) % panes.len()].clone()
                    };
                    match (w + k) % 10 {
                        0 if w % 3 == 0 => {
                            let body = json!({"requestId": format!("new-{w}-{k}")});
                            let (status, r) = post_until_answered(desk, "/v1/starters/new-ticket", body, deadline);
                            if status == 200 {
                                panes.lock().unwrap().push(r["pane"].as_str().unwrap().to_owned());
                            }
                        }
                        1 => {
                            let body = json!({"requestId": format!("ren-{w}-{k}"), "target": "pane", "id": pane, "title": format!("Ticket {w}.{k}")});
                            post_until_answered(desk, "/v1/rename", body, deadline);
                        }
                        2 if k % 4 == 0 => {
                            post_until_answered(
                                desk,
                                &format!("/v1/panes/{pane}/actions/refund"),
                                json!({"requestId": format!("act-{w}-{k}")}),
                                deadline,
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
                            let (status, _) = post_until_answered(desk, &format!("/v1/panes/{pane}/send"), body, deadline);
                            if status == 200 {
                                acked.lock().unwrap().insert(id, Acked { pane, text });
                                let n = acked_count.fetch_add(1, Ordering::SeqCst) + 1;
                                match kill_at {
                                    Some((at, restart)) if n == at && !killed.swap(true, Ordering::SeqCst) => {
                                        // The other writers go on writing meanwhile.
                                        working_at_kill.store(working(desk), Ordering::SeqCst);
                                        let pid = Pid::from_raw(desk.child.id() as i32);
                                        kill(pid, Signal::SIGKILL).expect("the desk is killed");
                                        *restarted.lock().unwrap() = Some(restart());
                                    }
                                    _ => {}
                                }
                            }
                        }
                    }
                }
            });
        }
    });
    let burst = Burst {
        acked: acked.into_inner().unwrap(),
        answered: answered.into_inner().unwrap(),
        working_at_kill: working_at_kill.into_inner(),
    };
    (burst, restarted.into_inner().unwrap())
}

/// The desk started again on the burst's data: every acknowledged send
/// ran once (its reply is on its pane, and it began at most once since the
/// restart) or is closed with a notice on its pane. Returns the closed
/// ones: their pane and the notice's id.
fn check_after_restart(desk: &Desk, burst: &Burst) -> Vec<(String, String)> {
    // A card the phone heard `200` for is never raised again (sends queued
    // behind it would wait for an answer that never comes).
    let state = desk.state();
    for ask in state["asks"].as_array().into_iter().flatten() {
        let id = ask["id"].as_str().unwrap_or("");
        assert!(!burst.answered.contains(id), "card {id} was answered before the kill and is open again");
    }
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut left: Vec<(&String, &Acked)> = burst.acked.iter().collect();
    let mut settled = Vec::new();
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
                Some(d @ ("done" | "closed")) => settled.push((id, send, d.to_owned())),
                Some("queued" | "running") => still.push((id, send)),
                other => panic!("{id}: a send's replay says where it stands, not {other:?}"),
            }
        }
        left = still;
        let stuck: Vec<String> = left.iter().map(|(id, s)| format!("{id} on {}", s.pane)).collect();
        assert!(Instant::now() < deadline, "acknowledged sends never ran: {stuck:?}");
        if !left.is_empty() {
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    // Each pane's view and its turns since the restart, read once.
    let mut panes: HashMap<&str, (Vec<Value>, Vec<String>)> = HashMap::new();
    for (_, send, _) in &settled {
        panes.entry(send.pane.as_str()).or_insert_with(|| {
            let turns = desk
                .events(&send.pane)
                .iter()
                .filter(|e| e["type"] == "state" && e["state"] == "working")
                .map(|e| e["turnId"].as_str().unwrap_or("").to_owned())
                .collect();
            (desk.items(&send.pane), turns)
        });
    }
    let mut closed = Vec::new();
    for (id, send, delivery) in settled {
        let (items, turns) = &panes[send.pane.as_str()];
        let began = turns.iter().filter(|t| *t == id).count();
        assert!(began <= 1, "{id} began {began} times after the restart");
        let reply = items.iter().find(|i| i["id"] == format!("reply-{id}"));
        let notice = items.iter().find(|i| {
            i["kind"] == "notice" && (i["id"] == format!("cut-{id}") || i["id"] == format!("user-{id}"))
        });
        if delivery == "done" {
            let reply = reply.unwrap_or_else(|| panic!("{id} is done but its reply is not on {}", send.pane));
            assert_eq!(reply["text"], format!("Got it: {}", send.text), "{id}");
            assert!(reply.get("partial").is_none(), "{id}: {reply}");
        } else {
            let notice =
                notice.unwrap_or_else(|| panic!("{id} was closed without a notice on {}", send.pane));
            closed.push((send.pane.clone(), notice["id"].as_str().unwrap_or("").to_owned()));
        }
    }
    let _: Value = desk.state();
    closed
}

/// Every item id of a pane's conversation as history serves it, paged.
fn history_item_ids(desk: &Desk, pane: &str) -> HashSet<String> {
    let mut ids = HashSet::new();
    let mut after = String::new();
    loop {
        let (status, page) = desk.get(&format!("/v1/history/{pane}?limit=200{after}"));
        assert_eq!(status, 200, "{pane}: {page}");
        ids.extend(
            page["items"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|i| i["id"].as_str().map(str::to_owned)),
        );
        match page["next"].as_str() {
            Some(next) => after = format!("&after={next}"),
            None => return ids,
        }
    }
}

/// Each closed send's notice is on its pane and in history.
fn notices_shown_and_in_history(desk: &Desk, closed: &[(String, String)]) {
    let mut panes: HashMap<&str, (HashSet<String>, HashSet<String>)> = HashMap::new();
    for (pane, notice) in closed {
        let (shown, history) = panes.entry(pane.as_str()).or_insert_with(|| {
            let shown = desk.items(pane).iter().filter_map(|i| i["id"].as_str().map(str::to_owned)).collect();
            (shown, history_item_ids(desk, pane))
        });
        assert!(shown.contains(notice), "notice {notice} is not on {pane}");
        assert!(history.contains(notice), "notice {notice} of {pane} is not in history");
    }
}

#[test]
fn every_send_acknowledged_in_a_burst_runs_or_is_closed_with_a_notice_after_a_sigkill() {
    let dir = TestDir::new("burst");
    let desk = Desk::start(&dir, &["--turn-ms", "300"]);
    let (burst, _) = burst(&desk, None);
    assert!(working(&desk) >= 2, "the kill lands while turns run");
    desk.kill();
    assert!(burst.acked.len() >= 100, "most sends were acknowledged: {}", burst.acked.len());

    let desk = Desk::start(&dir, &["--turn-ms", "20"]);
    let closed = check_after_restart(&desk, &burst);
    assert!(!closed.is_empty(), "the kill cut turns: their sends are closed with a notice");
    notices_shown_and_in_history(&desk, &closed);
    // A second restart: the notices are still there, on the panes and in history.
    desk.kill();
    let desk = Desk::start(&dir, &["--turn-ms", "20"]);
    notices_shown_and_in_history(&desk, &closed);
}

/// The burst goes on across the crash, as Collie's would: what got no
/// answer is sent again once the desk is back, with the same request id.
#[test]
fn every_send_acknowledged_in_a_burst_that_goes_on_across_a_sigkill_runs_or_is_closed_with_a_notice() {
    let dir = TestDir::new("burst-across");
    let desk = Desk::start(&dir, &["--turn-ms", "300"]);
    let restart = || Desk::start(&dir, &["--turn-ms", "300"]);
    let (burst, again) = burst(&desk, Some((100, &restart)));
    let again = again.expect("the desk was killed in the burst");
    desk.kill();
    assert!(burst.working_at_kill >= 2, "the kill lands while turns run: {}", burst.working_at_kill);
    assert!(burst.acked.len() >= 150, "the burst went on after the restart: {}", burst.acked.len());
    check_after_restart(&again, &burst);
}
