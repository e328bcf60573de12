//! Exactly once, as a property (contract §8–§9), for any receipt store:
//! random interleavings of writes (send, steer, stop, action, rename) and
//! turns on several panes, with repeated request ids and a small receipt
//! store, checked against a reference model of the store (per-group FIFO of
//! capacity `CAPACITY`, evicted ids remembered for 10 × that many
//! further ids of the group) and of the panes.
//!
//! With one store the agent is one process (`writes_props.rs`, the memory
//! store). With two, two agent processes share one database: two cores,
//! each with its own store (its own connection pool), the same panes; each
//! write goes to one of them or to both at once, and every request id still
//! runs at most once, across both (the PostgreSQL store's tests in
//! `durable-sdk`).

use std::collections::{HashMap, HashSet, VecDeque};

use crate::ReceiptStore;
use crate::types::EVICTED_MEMORY_FACTOR;
use proptest::prelude::*;
use serde_json::{Value, json};

use super::Harness;
use super::recorder::{CoreExt, Log, PaneExt, Recorder};

/// Panes of the generated scenarios.
pub const PANES: usize = 3;
/// Request ids a scenario draws from (so that ids repeat).
pub const IDS: usize = 10;
/// The receipts per group of the stores under test.
pub const CAPACITY: usize = 3;

/// One step of a scenario: a write to a pane (pane, request id) or a turn's start or end.
#[derive(Debug, Clone)]
pub enum Op {
    /// A send.
    Send(usize, usize),
    /// A steer.
    Steer(usize, usize),
    /// A stop.
    Stop(usize, usize),
    /// An action press.
    Action(usize, usize),
    /// Renames pane `.0` (group `renames`).
    Rename(usize, usize),
    /// Renames the workspace (group `renames`).
    RenameWorkspace(usize),
    /// The program starts a turn on the pane.
    Working(usize),
    /// The program ends the pane's turn.
    Idle(usize),
}

/// Which process an op goes to, when there are two.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum At {
    /// This process.
    One(usize),
    /// Both at once (a write), or both (a turn's start or end).
    Both,
}

/// A random step.
pub fn op() -> impl Strategy<Value = Op> {
    let p = 0..PANES;
    let r = 0..IDS;
    prop_oneof![
        4 => (p.clone(), r.clone()).prop_map(|(p, r)| Op::Send(p, r)),
        2 => (p.clone(), r.clone()).prop_map(|(p, r)| Op::Steer(p, r)),
        1 => (p.clone(), r.clone()).prop_map(|(p, r)| Op::Stop(p, r)),
        2 => (p.clone(), r.clone()).prop_map(|(p, r)| Op::Action(p, r)),
        2 => (p.clone(), r.clone()).prop_map(|(p, r)| Op::Rename(p, r)),
        1 => r.prop_map(Op::RenameWorkspace),
        2 => p.clone().prop_map(Op::Working),
        2 => p.prop_map(Op::Idle),
    ]
}

/// An op and where it goes, for two processes.
pub fn op_at() -> impl Strategy<Value = (Op, At)> {
    (op(), prop_oneof![1 => Just(At::One(0)), 1 => Just(At::One(1)), 2 => Just(At::Both)])
}

/// The reference model of the receipt store.
#[derive(Default)]
struct StoreModel {
    receipts: HashMap<String, Value>,
    live: HashMap<String, VecDeque<String>>,
    evicted_log: HashMap<String, VecDeque<String>>,
    evicted: HashSet<String>,
}

enum Seen {
    Found(Value),
    Evicted,
    Unknown,
}

impl StoreModel {
    fn get(&self, rid: &str) -> Seen {
        match self.receipts.get(rid) {
            Some(v) => Seen::Found(v.clone()),
            None if self.evicted.contains(rid) => Seen::Evicted,
            None => Seen::Unknown,
        }
    }

    fn put(&mut self, rid: &str, body: Value, group: &str) {
        self.receipts.insert(rid.to_owned(), body);
        self.evicted.remove(rid);
        let live = self.live.entry(group.to_owned()).or_default();
        live.push_back(rid.to_owned());
        let log = self.evicted_log.entry(group.to_owned()).or_default();
        while live.len() > CAPACITY {
            let old = live.pop_front().unwrap();
            self.receipts.remove(&old);
            self.evicted.insert(old.clone());
            log.push_back(old);
        }
        while log.len() > CAPACITY * EVICTED_MEMORY_FACTOR {
            let old = log.pop_front().unwrap();
            self.evicted.remove(&old);
        }
    }
}

#[derive(Default, Clone)]
struct PaneModel {
    working: bool,
    turn: Option<String>,
    queue: VecDeque<String>,
    /// Request ids of the sends delivered, in order (their `user` items).
    delivered: Vec<String>,
}

/// The panes of one process, and what ran there.
#[derive(Default, Clone)]
struct Process {
    panes: Vec<PaneModel>,
    turns: usize,
}

#[derive(Default)]
struct Model {
    store: StoreModel,
    processes: Vec<Process>,
    /// Executions per request id, across processes.
    calls: HashMap<String, usize>,
}

/// What a route did for a new request id: status, body, the receipt group
/// of a success, and the request ids it ran (a send's turn).
type Outcome = (u16, Value, Option<String>);

impl Process {
    /// What the route does here for a new request id, and what it ran.
    fn run(&mut self, op: &Op, rid: &str, ran: &mut Vec<String>) -> Outcome {
        let ok = |result: &str| json!({"ok": true, "result": result, "requestId": rid, "replayed": false});
        match *op {
            Op::Send(p, _) => {
                let turn = self.panes[p].turn.clone().map_or(Value::Null, Value::String);
                let pane = &mut self.panes[p];
                let result = if pane.working || !pane.queue.is_empty() {
                    pane.queue.push_back(rid.to_owned());
                    "queued"
                } else {
                    // Its turn (named after it) runs and ends at once.
                    pane.delivered.push(rid.to_owned());
                    pane.turn = Some(rid.to_owned());
                    ran.push(rid.to_owned());
                    "sent"
                };
                let mut body = ok(result);
                body["turnId"] = turn;
                (200, body, Some(format!("pane:p{p}")))
            }
            Op::Steer(p, _) => {
                if self.panes[p].working {
                    ran.push(rid.to_owned());
                    (200, ok("steered"), Some(format!("pane:p{p}")))
                } else {
                    (409, Value::Null, None)
                }
            }
            Op::Stop(p, _) => {
                ran.push(rid.to_owned());
                (200, ok("stopped"), Some(format!("pane:p{p}")))
            }
            Op::Action(p, _) => {
                ran.push(rid.to_owned());
                (200, ok("done"), Some(format!("pane:p{p}")))
            }
            Op::Rename(..) | Op::RenameWorkspace(_) => {
                ran.push(rid.to_owned());
                (200, ok("renamed"), Some("renames".into()))
            }
            Op::Working(_) | Op::Idle(_) => unreachable!(),
        }
    }

    fn idle(&mut self, p: usize, ran: &mut Vec<String>) {
        self.panes[p].working = false;
        // Queued sends are delivered in order; each one's turn ends at once,
        // so every one goes through, and the last names the pane's turn.
        while let Some(rid) = self.panes[p].queue.pop_front() {
            self.panes[p].delivered.push(rid.clone());
            self.panes[p].turn = Some(rid.clone());
            ran.push(rid);
        }
    }
}

impl Model {
    fn count(&mut self, ran: Vec<String>) {
        for rid in ran {
            *self.calls.entry(rid).or_insert(0) += 1;
        }
    }
}

fn request(op: &Op) -> Option<(String, Value, String)> {
    let rid = |r: usize| format!("r-{r}");
    Some(match *op {
        Op::Send(p, r) => (
            format!("/v1/panes/p{p}/send"),
            json!({"requestId": rid(r), "text": format!("text {r}")}),
            rid(r),
        ),
        Op::Steer(p, r) => {
            (format!("/v1/panes/p{p}/steer"), json!({"requestId": rid(r), "text": "steer"}), rid(r))
        }
        Op::Stop(p, r) => (format!("/v1/panes/p{p}/stop"), json!({"requestId": rid(r)}), rid(r)),
        Op::Action(p, r) => (format!("/v1/panes/p{p}/actions/go"), json!({"requestId": rid(r)}), rid(r)),
        Op::Rename(p, r) => (
            "/v1/rename".into(),
            json!({"requestId": rid(r), "target": "pane", "id": format!("p{p}"), "title": format!("title {r}")}),
            rid(r),
        ),
        Op::RenameWorkspace(r) => (
            "/v1/rename".into(),
            json!({"requestId": rid(r), "target": "workspace", "id": "support", "title": format!("ws {r}")}),
            rid(r),
        ),
        Op::Working(_) | Op::Idle(_) => return None,
    })
}

/// Checks `reply` against a new id's predicted outcome.
fn check_run(reply: &super::Reply, predicted: &Outcome, at: &str) -> Result<(), TestCaseError> {
    let (status, expected, group) = predicted;
    prop_assert_eq!(reply.status, *status, "{}", at);
    match group {
        Some(_) => prop_assert_eq!(&reply.json, expected, "{}", at),
        None => {
            prop_assert_eq!(reply.code(), "refused", "{}", at);
            prop_assert_eq!(&reply.json["reason"], "not-working", "{}", at);
        }
    }
    Ok(())
}

fn check_replay(reply: &super::Reply, first: &Value, at: &str) -> Result<(), TestCaseError> {
    let mut replay = first.clone();
    replay["replayed"] = json!(true);
    prop_assert_eq!(reply.status, 200, "{}", at);
    prop_assert_eq!(&reply.json, &replay, "{}", at);
    Ok(())
}

/// Runs `ops` against one core per store (all sharing what the stores
/// share); with one store every op goes to it whatever its [`At`].
pub async fn scenario<S: ReceiptStore>(ops: Vec<(Op, At)>, stores: Vec<S>) -> Result<(), TestCaseError> {
    let log = Log::default();
    let cores: Vec<Harness> = stores
        .into_iter()
        .map(|store| {
            let h = Harness::with(|b| b.receipts(store));
            for p in 0..PANES {
                let pane = h.pane_named(&format!("p{p}"));
                pane.action("go", "Go", None).unwrap();
                pane.handlers(Recorder::new("pane", &log)).unwrap();
            }
            let hook = Recorder::new("hook", &log);
            h.core.set_hooks(hook.clone());
            h.core.set_handlers(hook);
            h
        })
        .collect();
    let n = cores.len();
    let mut model = Model {
        processes: vec![Process { panes: vec![PaneModel::default(); PANES], turns: 0 }; n],
        ..Default::default()
    };
    let targets = |at: At| -> Vec<usize> {
        match at {
            _ if n == 1 => vec![0],
            At::One(c) => vec![c % n],
            At::Both => (0..n).collect(),
        }
    };

    for (step, (op, at)) in ops.iter().enumerate() {
        let to = targets(*at);
        match *op {
            Op::Working(p) => {
                for &c in &to {
                    let process = &mut model.processes[c];
                    process.turns += 1;
                    let turn = format!("t-{}", process.turns);
                    cores[c].pane_named(&format!("p{p}")).working(&turn).unwrap();
                    process.panes[p].working = true;
                    process.panes[p].turn = Some(turn);
                }
                continue;
            }
            Op::Idle(p) => {
                for &c in &to {
                    cores[c].pane_named(&format!("p{p}")).idle().unwrap();
                    cores[c].settle().await;
                    let mut ran = Vec::new();
                    model.processes[c].idle(p, &mut ran);
                    model.count(ran);
                    // A store on a real database takes its time to record
                    // the queued sends' turns: wait until they all ran.
                    caught_up(&cores[c], p, &model.processes[c].panes[p]).await;
                }
                continue;
            }
            _ => {}
        }
        let (path, body, rid) = request(op).unwrap();
        // The same write at every target at once.
        let replies: Vec<super::Reply> =
            futures_util::future::join_all(to.iter().map(|&c| cores[c].post(&path, body.clone()))).await;
        let at_text = format!(
            "step {step} {op:?} at {at:?}: got {:?}",
            replies.iter().map(|r| format!("{} {}", r.status, r.json)).collect::<Vec<_>>()
        );
        match model.store.get(&rid) {
            Seen::Found(first) => {
                for r in &replies {
                    check_replay(r, &first, &at_text)?;
                }
            }
            Seen::Evicted => {
                for r in &replies {
                    prop_assert_eq!(r.status, 500, "{}", at_text);
                    prop_assert_eq!(r.code(), "receipt-dropped", "{}", at_text);
                }
            }
            Seen::Unknown => {
                // The process whose answer is a first answer ran it; the
                // others replayed it, or were refused before it ran.
                let winner = replies.iter().position(|r| r.status == 200 && r.json["replayed"] == false);
                let mut stored: Option<(Value, String)> = None;
                if let Some(i) = winner {
                    let c = to[i];
                    let mut process = model.processes[c].clone();
                    let mut ran = Vec::new();
                    let predicted = process.run(op, &rid, &mut ran);
                    check_run(&replies[i], &predicted, &at_text)?;
                    model.processes[c] = process;
                    model.count(ran);
                    stored = predicted.2.map(|group| (predicted.1, group));
                }
                for (i, r) in replies.iter().enumerate() {
                    if Some(i) == winner {
                        continue;
                    }
                    match &stored {
                        Some((first, _)) if r.status == 200 => check_replay(r, first, &at_text)?,
                        _ => {
                            // Refused here, before or without the winner.
                            let predicted = model.processes[to[i]].clone().run(op, &rid, &mut Vec::new());
                            prop_assert!(
                                predicted.2.is_none(),
                                "{}: ran nowhere though it would here",
                                at_text
                            );
                            check_run(r, &predicted, &at_text)?;
                        }
                    }
                }
                if let Some((first, group)) = stored {
                    model.store.put(&rid, first, &group);
                }
            }
        }
        // Executions so far match the model exactly, and none ran twice.
        let calls = log.per_request();
        prop_assert_eq!(&calls, &model.calls, "{}", at_text);
        prop_assert!(calls.values().all(|&n| n <= 1), "{}: {:?}", at_text, calls);
    }

    for (c, h) in cores.iter().enumerate() {
        // Over a store that outlives the process, items are shown once kept.
        h.core.conversations_kept().await;
        for p in 0..PANES {
            let users = delivered(h, p).await;
            prop_assert_eq!(&users, &model.processes[c].panes[p].delivered, "user items of p{} at {}", p, c);
        }
    }
    Ok(())
}

/// The `user` items of a pane's view: the sends delivered, in order.
async fn delivered(h: &Harness, p: usize) -> Vec<String> {
    let view = h.view(&format!("p{p}")).await;
    view["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["kind"] == "user")
        .map(|i| i["requestId"].as_str().unwrap().to_owned())
        .collect()
}

/// Waits (at most 5 s) until the pane shows what the model says: its sends
/// delivered and its turn over. The final check says what differs.
async fn caught_up(h: &Harness, p: usize, model: &PaneModel) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while std::time::Instant::now() < deadline {
        let state = h.state().await.json;
        let working = state["panes"]
            .as_array()
            .and_then(|panes| panes.iter().find(|x| x["id"] == format!("p{p}")))
            .is_some_and(|x| x["state"] == "working");
        if delivered(h, p).await == model.delivered && working == model.working {
            return;
        }
        tokio::task::yield_now().await;
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}
