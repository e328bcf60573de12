//! Exactly once, enumerated over the machine (issue #41): the receipt step
//! (`durable_core::once`) driven with no runtime, no future and no store
//! but a model, under every order in which its drivers can hand outcomes
//! back — each request's arrival, each store call's answer, the write
//! itself, each settle heard, a caller dropped at any point.
//!
//! A world is one or two machines (two processes) over one model store
//! (receipts, and claims that hold across processes: a claim on an id
//! another process holds waits for its put or release). A schedule is a
//! sequence of choices among the enabled actions; every schedule is run
//! from the start (the world is built again for each) and checked when no
//! action is left:
//!
//! - the write ran at most once, and exactly once when any request got a
//!   `200`;
//! - every `200` has the same body but for `replayed`, and at most one has
//!   `replayed: false`;
//! - no `5xx` but where a failure was injected, and then its text says so;
//! - no request is left waiting (a deadlock fails the schedule);
//! - no claim is left in the store, and no machine holds the id.
//!
//! | scenario | schedules |
//! |---|---|
//! | (1) three duplicates, one process | 169 |
//! | (2) two duplicates at each of two processes, one store | 115,476 |
//! | (3) the first put fails, a duplicate, then a retry | 64 |
//! | (4) the first run refused, duplicates at two processes | 2,872 |
//! | (5) the first claim fails, a duplicate | 3 |
//! | (6) a request dropped at any point, a duplicate, then a retry | 468 |
//! | (7) a request dropped at any point, a duplicate at each process | 20,527 |
//! | (8) the same, the write closing a card (its answer waits for the asks' journal) | 51,081 |
//!
//! Twins (requests of one process declared alike) arrive in their order:
//! the other order is the same world. (7) is what made a dropped caller's
//! step go on detached (`Machine::drop_receipt_step`): when the step was
//! let go with its write applied but not in the store, the duplicate at
//! the other process claimed the id and ran the write again.
//!
//! The counts are asserted: a change to the receipt step's stages changes
//! them (recount with `cargo test -p durable-core --test
//! exactly_once_machine -- --nocapture`, which prints them).

mod standard;

use std::collections::HashMap;

use durable_core::machine::{Machine, MachineConfig};
use durable_core::once::{ReceiptInput, ReceiptNext};
use durable_core::respond;
use durable_core::state::{Effect, JournalName, Link};
use durable_core::types::exchange::Response;
use durable_core::types::{ErrorCode, Id};
use durable_core::{Lookup, Receipt, StoreError};
use serde_json::{Value, json};

const ID: &str = "r-1";

fn machine(keeps_asks: bool) -> Machine {
    Machine::new(MachineConfig { keeps_asks, ..standard::config() })
}

/// One request with the id, as a scenario declares it.
#[derive(Clone, Copy, PartialEq)]
struct Req {
    process: usize,
    /// It may be dropped by its caller at any point before its answer.
    may_drop: bool,
    /// It arrives only once this request has its answer (a retry).
    after: Option<usize>,
}

const fn req(process: usize) -> Req {
    Req { process, may_drop: false, after: None }
}

/// A scenario: the requests, and the failures injected.
struct Scenario {
    name: &'static str,
    reqs: Vec<Req>,
    processes: usize,
    /// The first `put` fails.
    fail_first_put: bool,
    /// The first `claim` fails.
    fail_first_claim: bool,
    /// The first run of the write refuses (`409`), the later ones succeed.
    refuse_first_run: bool,
    /// The store keeps asks, and the write closes a card: its answer waits
    /// for the asks' journal, which the store applies when it will.
    closes_a_card: bool,
}

impl Scenario {
    fn new(name: &'static str, processes: usize, reqs: Vec<Req>) -> Scenario {
        Scenario {
            name,
            reqs,
            processes,
            fail_first_put: false,
            fail_first_claim: false,
            refuse_first_run: false,
            closes_a_card: false,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Action {
    Arrive(usize),
    Advance(usize),
    Drop(usize),
    /// The store applies a process's journal of asks.
    ApplyAsks(usize),
}

#[derive(Clone)]
enum At {
    NotArrived,
    Waiting(ReceiptNext),
    /// Its caller went away; the step goes on for the store's sake.
    Detached(ReceiptNext),
    Answered(Response),
    Dropped,
}

/// The model store: receipts, and claims that hold across processes.
#[derive(Default, Clone)]
struct Store {
    receipts: HashMap<String, Receipt>,
    claimed_by: Option<usize>,
    puts: usize,
    claims: usize,
}

#[derive(Clone)]
struct World<'a> {
    scenario: &'a Scenario,
    machines: Vec<Machine>,
    /// The settles each machine handed out, by link, not yet heard.
    settles: Vec<HashMap<Link, Option<Receipt>>>,
    store: Store,
    at: Vec<At>,
    runs: usize,
    /// Runs that did the write (a refusal does nothing).
    effects: usize,
    injected: bool,
}

impl<'a> World<'a> {
    fn new(scenario: &'a Scenario) -> World<'a> {
        World {
            scenario,
            machines: (0..scenario.processes).map(|_| machine(scenario.closes_a_card)).collect(),
            settles: vec![HashMap::new(); scenario.processes],
            store: Store::default(),
            at: scenario.reqs.iter().map(|_| At::NotArrived).collect(),
            runs: 0,
            effects: 0,
            injected: false,
        }
    }

    /// Each request's link in its machine: its index, unique in the world.
    fn link(r: usize) -> Link {
        r as Link + 1
    }

    fn enabled(&self) -> Vec<Action> {
        let mut out = Vec::new();
        for (r, req) in self.scenario.reqs.iter().enumerate() {
            match &self.at[r] {
                At::NotArrived => {
                    let ready =
                        req.after.is_none_or(|first| matches!(self.at[first], At::Answered(_) | At::Dropped));
                    // Twins (the same process, the same declaration) arrive
                    // in their order: the other order is the same world.
                    let twin_first = self.scenario.reqs[..r]
                        .iter()
                        .enumerate()
                        .any(|(t, twin)| twin == req && matches!(self.at[t], At::NotArrived));
                    if ready && !twin_first {
                        out.push(Action::Arrive(r));
                    }
                }
                At::Waiting(next) | At::Detached(next) => {
                    let can = match next {
                        ReceiptNext::WaitFirst => self.settles[req.process].contains_key(&Self::link(r)),
                        ReceiptNext::Claim => self.store.claimed_by.is_none_or(|p| p == req.process),
                        ReceiptNext::WaitForAsks { target } => {
                            self.machines[req.process].state.journal_has_applied(JournalName::Asks, *target)
                        }
                        _ => true,
                    };
                    if can {
                        out.push(Action::Advance(r));
                    }
                    if req.may_drop && matches!(self.at[r], At::Waiting(_)) {
                        out.push(Action::Drop(r));
                    }
                }
                At::Answered(_) | At::Dropped => {}
            }
        }
        for (p, m) in self.machines.iter().enumerate() {
            if !m.state.journal_has_applied(JournalName::Asks, m.state.journal_pushed(JournalName::Asks)) {
                out.push(Action::ApplyAsks(p));
            }
        }
        out
    }

    fn act(&mut self, action: Action) {
        match action {
            Action::Arrive(r) => {
                let p = self.scenario.reqs[r].process;
                let next = self.machines[p].begin_receipt_step(Self::link(r), Id::new(ID).unwrap());
                self.settle(r, next);
            }
            Action::Advance(r) => {
                let (next, detached) = match std::mem::replace(&mut self.at[r], At::Dropped) {
                    At::Waiting(next) => (next, false),
                    At::Detached(next) => (next, true),
                    _ => panic!("request {r} advanced while not waiting"),
                };
                let input = self.perform(r, next);
                let p = self.scenario.reqs[r].process;
                let next = self.machines[p].receipt_step(Self::link(r), input);
                self.settle(r, next);
                if detached {
                    // Its answer goes to no one.
                    self.at[r] = match std::mem::replace(&mut self.at[r], At::Dropped) {
                        At::Waiting(next) => At::Detached(next),
                        _ => At::Dropped,
                    };
                }
            }
            Action::ApplyAsks(p) => {
                let m = &mut self.machines[p];
                while m.state.next_ask_op().is_some() {
                    m.state.journal_applied(JournalName::Asks, 1);
                }
                self.collect(p);
            }
            Action::Drop(r) => {
                let p = self.scenario.reqs[r].process;
                self.settles[p].remove(&Self::link(r));
                self.at[r] = match self.machines[p].drop_receipt_step(Self::link(r)) {
                    Some(next) => At::Detached(next),
                    None => At::Dropped,
                };
                self.collect(p);
            }
        }
    }

    /// Keeps where request `r` stands, and the settles its machine handed out.
    fn settle(&mut self, r: usize, next: ReceiptNext) {
        self.at[r] = match next {
            ReceiptNext::Respond(response) => At::Answered(response),
            next => At::Waiting(next),
        };
        self.collect(self.scenario.reqs[r].process);
    }

    fn collect(&mut self, p: usize) {
        for effect in self.machines[p].state.drain_effects() {
            if let Effect::Settle { waiter, receipt } = effect {
                self.settles[p].insert(waiter, receipt);
            }
        }
    }

    fn release(&mut self, p: usize) {
        assert_eq!(self.store.claimed_by, Some(p), "a release by a process that holds no claim");
        self.store.claimed_by = None;
    }

    /// Does what `next` asks, the way a runtime does, and gives its outcome.
    fn perform(&mut self, r: usize, next: ReceiptNext) -> ReceiptInput {
        let p = self.scenario.reqs[r].process;
        match next {
            ReceiptNext::WaitFirst => {
                let heard = self.settles[p].remove(&Self::link(r));
                ReceiptInput::Settled(heard.flatten())
            }
            ReceiptNext::Check => ReceiptInput::Checked(None),
            ReceiptNext::Claim => {
                self.store.claims += 1;
                if self.scenario.fail_first_claim && self.store.claims == 1 {
                    self.injected = true;
                    return ReceiptInput::Claimed(Err(StoreError::new("claim failed (injected)")));
                }
                if let Some(receipt) = self.store.receipts.get(ID) {
                    return ReceiptInput::Claimed(Ok(Lookup::Found(receipt.clone())));
                }
                assert!(self.store.claimed_by.is_none(), "process {p} claimed an id it holds already");
                self.store.claimed_by = Some(p);
                ReceiptInput::Claimed(Ok(Lookup::Unknown))
            }
            ReceiptNext::SendState => ReceiptInput::SendState(Ok(None)),
            ReceiptNext::Run => {
                self.runs += 1;
                if self.scenario.refuse_first_run && self.runs == 1 {
                    let refused = respond::error(ErrorCode::Refused, "refused: not yet");
                    return ReceiptInput::Ran { response: refused, group: Some("pane:ticket-1".into()) };
                }
                self.effects += 1;
                if self.scenario.closes_a_card {
                    self.machines[p].state.journal_forget(format!("card-{r}"));
                }
                let body = json!({ "ok": true, "result": "sent", "requestId": ID, "replayed": false });
                ReceiptInput::Ran { response: respond::json(200, &body), group: Some("pane:ticket-1".into()) }
            }
            ReceiptNext::WaitForAsks { .. } => ReceiptInput::AsksWritten,
            ReceiptNext::Put { receipt, .. } => {
                self.store.puts += 1;
                if self.scenario.fail_first_put && self.store.puts == 1 {
                    self.injected = true;
                    return ReceiptInput::Put(Err(StoreError::new("put failed (injected)")));
                }
                self.store.receipts.entry(ID.to_owned()).or_insert(receipt);
                ReceiptInput::Put(Ok(()))
            }
            ReceiptNext::Release => {
                self.release(p);
                ReceiptInput::Released
            }
            ReceiptNext::Respond(_) => panic!("an answer is not a step"),
        }
    }

    /// The checks of a finished schedule.
    fn check(&mut self, schedule: &[Action]) {
        let at = format!("{}: schedule {schedule:?}", self.scenario.name);
        let replies: Vec<(u16, Value)> = self
            .at
            .iter()
            .filter_map(|a| match a {
                At::Answered(r) => Some((r.status, serde_json::from_slice(&r.body).unwrap())),
                At::Dropped => None,
                At::NotArrived | At::Waiting(_) | At::Detached(_) => {
                    panic!("{at}: a request was left waiting")
                }
            })
            .collect();
        assert!(self.effects <= 1, "{at}: the write ran {} times", self.effects);
        let oks: Vec<&Value> = replies.iter().filter(|(s, _)| *s == 200).map(|(_, b)| b).collect();
        if !oks.is_empty() {
            assert_eq!(self.effects, 1, "{at}: a 200 for a write that never ran");
        }
        let without_replayed = |b: &Value| {
            let mut b = b.clone();
            b.as_object_mut().map(|m| m.remove("replayed"));
            b
        };
        for ok in &oks {
            assert_eq!(without_replayed(ok), without_replayed(oks[0]), "{at}: two different 200s");
        }
        let firsts = oks.iter().filter(|b| b["replayed"] == json!(false)).count();
        assert!(firsts <= 1, "{at}: {firsts} answers say they are the first");
        for (status, body) in &replies {
            if *status >= 500 {
                let message = body["message"].as_str().unwrap_or_default();
                assert!(
                    self.injected && message.contains("injected"),
                    "{at}: an unexplained {status}: {body}"
                );
            }
        }
        assert_eq!(self.store.claimed_by, None, "{at}: a claim was left in the store");
        for (p, m) in self.machines.iter_mut().enumerate() {
            let probe = 1000;
            let next = m.begin_receipt_step(probe, Id::new(ID).unwrap());
            assert!(matches!(next, ReceiptNext::Check), "{at}: process {p} still holds the id ({next:?})");
            m.drop_receipt_step(probe);
        }
    }
}

/// Runs every schedule of `scenario` and checks each; returns how many.
/// Depth first, each branch on a clone of the world (the machine is plain
/// data).
fn explore(scenario: &Scenario) -> usize {
    let mut count = 0;
    let mut worlds = vec![(World::new(scenario), Vec::new())];
    while let Some((mut world, schedule)) = worlds.pop() {
        let enabled = world.enabled();
        if enabled.is_empty() {
            world.check(&schedule);
            count += 1;
            continue;
        }
        for action in enabled {
            let mut next = world.clone();
            next.act(action);
            let mut longer = schedule.clone();
            longer.push(action);
            worlds.push((next, longer));
        }
    }
    println!("{}: {count} schedules", scenario.name);
    count
}

#[test]
fn three_duplicates_at_one_process() {
    let s = Scenario::new("(1) three duplicates, one process", 1, vec![req(0), req(0), req(0)]);
    assert_eq!(explore(&s), 169);
}

#[test]
fn two_duplicates_at_each_of_two_processes_over_one_store() {
    let s =
        Scenario::new("(2) two duplicates at each of two processes", 2, vec![req(0), req(0), req(1), req(1)]);
    assert_eq!(explore(&s), 115_476);
}

#[test]
fn the_first_put_fails_and_a_duplicate_and_a_retry_replay_what_was_applied() {
    let retry = Req { after: Some(0), ..req(0) };
    let mut s =
        Scenario::new("(3) the first put fails, a duplicate, then a retry", 1, vec![req(0), req(0), retry]);
    s.fail_first_put = true;
    assert_eq!(explore(&s), 64);
}

#[test]
fn the_first_run_refused_with_duplicates_at_two_processes() {
    let mut s = Scenario::new(
        "(4) the first run refused, duplicates at two processes",
        2,
        vec![req(0), req(0), req(1)],
    );
    s.refuse_first_run = true;
    assert_eq!(explore(&s), 2_872);
}

#[test]
fn the_first_claim_fails_and_a_duplicate_runs_it() {
    let mut s = Scenario::new("(5) the first claim fails, a duplicate", 1, vec![req(0), req(0)]);
    s.fail_first_claim = true;
    assert_eq!(explore(&s), 3);
}

#[test]
fn a_request_dropped_at_any_point_a_duplicate_and_a_retry() {
    let dropped = Req { may_drop: true, ..req(0) };
    let retry = Req { after: Some(0), ..req(0) };
    let s = Scenario::new(
        "(6) a request dropped at any point, a duplicate, then a retry",
        1,
        vec![dropped, req(0), retry],
    );
    assert_eq!(explore(&s), 468);
}

#[test]
fn a_write_that_closed_a_card_dropped_at_any_point_with_a_duplicate_at_another_process() {
    let dropped = Req { may_drop: true, ..req(0) };
    let mut s = Scenario::new(
        "(8) a write that closed a card, dropped at any point, a duplicate at each process",
        2,
        vec![dropped, req(0), req(1)],
    );
    s.closes_a_card = true;
    assert_eq!(explore(&s), 51_081);
}

#[test]
fn a_request_dropped_at_any_point_with_a_duplicate_at_another_process() {
    let dropped = Req { may_drop: true, ..req(0) };
    let s = Scenario::new(
        "(7) a request dropped at any point, a duplicate at each process",
        2,
        vec![dropped, req(0), req(1)],
    );
    assert_eq!(explore(&s), 20_527);
}
