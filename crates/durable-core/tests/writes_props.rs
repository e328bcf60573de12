//! Exactly once, as a property (contract §8–§9): random interleavings of
//! writes (send, steer, stop, action, rename) and turns on several panes,
//! with repeated request ids and a small receipt store, checked against a
//! reference model of the store (per-group FIFO of capacity N, evicted ids
//! remembered for 10 × N further ids of the group) and of the panes.
mod harness;

use std::collections::{HashMap, HashSet, VecDeque};

use durable_core::MemoryReceiptStore;
use durable_core::types::EVICTED_MEMORY_FACTOR;
use harness::Harness;
use harness::recorder::{CoreExt, Log, PaneExt, Recorder};
use proptest::prelude::*;
use serde_json::{Value, json};

const PANES: usize = 3;
const IDS: usize = 10;
const CAPACITY: usize = 3;

#[derive(Debug, Clone)]
enum Op {
    Send(usize, usize),
    Steer(usize, usize),
    Stop(usize, usize),
    Action(usize, usize),
    /// Renames pane `.0` (group `renames`).
    Rename(usize, usize),
    /// Renames the workspace (group `renames`).
    RenameWorkspace(usize),
    Working(usize),
    Idle(usize),
}

fn op() -> impl Strategy<Value = Op> {
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

#[derive(Default)]
struct Model {
    store: StoreModel,
    panes: Vec<PaneModel>,
    calls: HashMap<String, usize>,
    turns: usize,
}

impl Model {
    fn call(&mut self, rid: &str) {
        *self.calls.entry(rid.to_owned()).or_insert(0) += 1;
    }

    /// What the route does for a new request id: the status and body, and
    /// the receipt group when it is a success.
    fn run(&mut self, op: &Op, rid: &str) -> (u16, Value, Option<String>) {
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
                    self.call(rid);
                    "sent"
                };
                let mut body = ok(result);
                body["turnId"] = turn;
                (200, body, Some(format!("pane:p{p}")))
            }
            Op::Steer(p, _) => {
                if self.panes[p].working {
                    self.call(rid);
                    (200, ok("steered"), Some(format!("pane:p{p}")))
                } else {
                    (409, Value::Null, None)
                }
            }
            Op::Stop(p, _) => {
                self.call(rid);
                (200, ok("stopped"), Some(format!("pane:p{p}")))
            }
            Op::Action(p, _) => {
                self.call(rid);
                (200, ok("done"), Some(format!("pane:p{p}")))
            }
            Op::Rename(..) | Op::RenameWorkspace(_) => {
                self.call(rid);
                (200, ok("renamed"), Some("renames".into()))
            }
            Op::Working(_) | Op::Idle(_) => unreachable!(),
        }
    }

    fn idle(&mut self, p: usize) {
        self.panes[p].working = false;
        // Queued sends are delivered in order; each one's turn ends at once,
        // so every one goes through, and the last names the pane's turn.
        while let Some(rid) = self.panes[p].queue.pop_front() {
            self.panes[p].delivered.push(rid.clone());
            self.panes[p].turn = Some(rid.clone());
            self.call(&rid);
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

async fn scenario(ops: Vec<Op>) -> Result<(), TestCaseError> {
    let h = Harness::with(|b| b.receipts(MemoryReceiptStore::with_capacity(CAPACITY)));
    let log = Log::default();
    let panes: Vec<_> = (0..PANES)
        .map(|p| {
            let pane = h.pane_named(&format!("p{p}"));
            pane.action("go", "Go", None).unwrap();
            pane.handlers(Recorder::new("pane", &log)).unwrap();
            pane
        })
        .collect();
    let hook = Recorder::new("hook", &log);
    h.core.set_hooks(hook.clone());
    h.core.set_handlers(hook);
    let mut model = Model { panes: vec![PaneModel::default(); PANES], ..Default::default() };

    for (step, op) in ops.iter().enumerate() {
        match *op {
            Op::Working(p) => {
                model.turns += 1;
                let turn = format!("t-{}", model.turns);
                panes[p].working(&turn).unwrap();
                model.panes[p].working = true;
                model.panes[p].turn = Some(turn);
                continue;
            }
            Op::Idle(p) => {
                panes[p].idle().unwrap();
                h.settle().await;
                model.idle(p);
                continue;
            }
            _ => {}
        }
        let (path, body, rid) = request(op).unwrap();
        let r = h.post(&path, body).await;
        let at = format!("step {step} {op:?}: got {} {}", r.status, r.json);
        match model.store.get(&rid) {
            Seen::Found(first) => {
                let mut replay = first.clone();
                replay["replayed"] = json!(true);
                prop_assert_eq!(r.status, 200, "{}", at);
                prop_assert_eq!(&r.json, &replay, "{}", at);
            }
            Seen::Evicted => {
                prop_assert_eq!(r.status, 500, "{}", at);
                prop_assert_eq!(r.code(), "receipt-dropped", "{}", at);
            }
            Seen::Unknown => {
                let (status, expected, group) = model.run(op, &rid);
                prop_assert_eq!(r.status, status, "{}", at);
                match group {
                    Some(group) => {
                        prop_assert_eq!(&r.json, &expected, "{}", at);
                        model.store.put(&rid, expected, &group);
                    }
                    None => {
                        prop_assert_eq!(r.code(), "refused", "{}", at);
                        prop_assert_eq!(&r.json["reason"], "not-working", "{}", at);
                    }
                }
            }
        }
        // Executions so far match the model exactly, and none ran twice.
        let calls = log.per_request();
        prop_assert_eq!(&calls, &model.calls, "{}", at);
        prop_assert!(calls.values().all(|&n| n <= 1), "{}: {:?}", at, calls);
    }

    for p in 0..PANES {
        let view = h.view(&format!("p{p}")).await;
        let users: Vec<String> = view["items"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|i| i["kind"] == "user")
            .map(|i| i["requestId"].as_str().unwrap().to_owned())
            .collect();
        prop_assert_eq!(&users, &model.panes[p].delivered, "user items of p{}", p);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn exactly_once_each_request_id_runs_at_most_once_replays_its_first_body_and_evicted_ids_are_receipt_dropped(
        ops in prop::collection::vec(op(), 1..60)
    ) {
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        rt.block_on(scenario(ops))?;
    }
}
