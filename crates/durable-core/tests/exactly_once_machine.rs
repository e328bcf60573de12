//! Exactly once, enumerated over the machine (issue #41): the receipt step
//! (`durable_core::once`) and the writes it runs — a plain write, the
//! phone's answer to an ask (held when it comes before the ask is raised),
//! a send with its chat handler and its turn — driven with no runtime, no
//! future and no store but a model, under every order in which its
//! drivers can hand outcomes back: each request's arrival, each store
//! call's answer, each of a send's awaits (its record in the sends
//! journal, its handler's verdict), each settle heard, the program raising
//! its ask, the job putting a held answer's receipt, a turn's end, a
//! caller dropped at any point.
//!
//! A world is one or two machines (two processes) over one model store
//! (receipts, the sends journal, and claims that hold across processes: a
//! claim on an id another process holds waits for its put or release). A
//! schedule is a sequence of choices among the enabled actions; every
//! branch runs on a clone of the world (`Machine: Clone`) and is checked
//! when no action is left:
//!
//! - the write ran at most once (a plain write's runs, the ask's
//!   decisions, the `user` items on every process's pane), and exactly once
//!   when any request got a `200`;
//! - every `200` has the same body but for `replayed`, and at most one has
//!   `replayed: false`;
//! - no `5xx` but where a failure was injected, and then its text says so;
//!   no other status but a refusal where one was asked for, and an answer's
//!   `202 held`;
//! - no request is left waiting (a deadlock fails the schedule);
//! - no claim is left in the store, and no machine holds the id; no turn or
//!   delivery is left counted, the pane's write is free and the pane idle;
//! - the ask's awaitable got the answer once, its receipt is in the store
//!   (unless its put failed), and a retry at the end replays it.
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
//! | (9) an answer held before its ask is raised, racing the raise, two duplicates | 1,961 |
//! | (9b) the same, the first put failing (the route's or the held answer's job) | 1,710 |
//! | (10) an answer dropped at any point, a duplicate, then a retry, racing the raise | 5,088 |
//! | (11) a send dropped at any point of its delivery, a duplicate, then a retry | 6,684 |
//! | (12) a send dropped at any point, a duplicate at another process | 2,593 |
//! | (13) the first send refused by its chat handler, duplicates at two processes | 61,255 |
//!
//! Twins (requests of one process declared alike) arrive in their order:
//! the other order is the same world. (7) is what made a dropped caller's
//! step go on detached (`Machine::drop_receipt_step`): when the step was
//! let go with its write applied but not in the store, the duplicate at
//! the other process claimed the id and ran the write again.
//!
//! (9)–(13) are the scenarios of the runtime's explorer of interleavings,
//! which ran the real handlers and jobs under a scheduler of futures and
//! is retired: what it explored is the machine's now, and the runtime's
//! loops that drive these steps are tested with real concurrency and real
//! stores (`crates/durable-runtime/tests/writes_props.rs`, `receipts.rs`).
//!
//! The counts are asserted: a change to the steps changes them (recount
//! with `cargo test -p durable-core --test exactly_once_machine --
//! --nocapture`, which prints them).

mod standard;

use std::collections::HashMap;

use durable_core::asks::held_response;
use durable_core::delivery::{ChatSlot, Delivered, DeliveryInput, DeliveryNext, Verdict};
use durable_core::machine::{Machine, MachineConfig};
use durable_core::once::{ReceiptInput, ReceiptNext};
use durable_core::respond;
use durable_core::state::{Effect, JournalName, Link, QueuedSend};
use durable_core::types::exchange::Response;
use durable_core::types::{
    Answer, AnswerRequest, AskOption, AskSpec, ErrorCode, Id, ItemBody, PaneState, WriteResponse, ask_id_for,
};
use durable_core::writes::SendLook;
use durable_core::{Lookup, PaneOptions, Receipt, SendState, StoreError};
use serde_json::{Value, json};
use standard::NOW;

const ID: &str = "r-1";
const PANE: &str = "ticket-1";
/// The link of the program's ask awaitable.
const ASK: Link = 900;

/// A process's machine: the desk's pane `ticket-1`.
fn machine(keeps_asks: bool) -> Machine {
    let mut m = Machine::new(MachineConfig { keeps_asks, ..standard::config() });
    let ws = m.add_workspace("support", "Support").unwrap();
    let tab = m.add_tab(&ws, "main", "Tickets").unwrap();
    m.add_pane(&tab, PANE, PaneOptions::new("Maria")).unwrap();
    m
}

fn pane() -> Id {
    Id::new(PANE).unwrap()
}

fn yes_no() -> AskSpec {
    AskSpec::choice("c1", "Go?", [AskOption::new("yes", "Yes"), AskOption::new("no", "No")])
}

/// The phone's answer `yes`, with the hash of the ask it saw (so that it
/// is held when it arrives before the ask is raised).
fn pick_yes() -> AnswerRequest {
    let hash = yes_no().build(&pane(), NOW, true).unwrap().hash;
    let body = json!({"requestId": ID, "answer": {"optionIds": ["yes"]}, "hash": hash});
    AnswerRequest::parse(body.to_string().as_bytes()).unwrap()
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

/// What the requests with the id are.
#[derive(Clone, Copy, PartialEq)]
enum Kind {
    /// A write done in one step once the id is the request's.
    Plain,
    /// The phone's answer to the ask `c1`, which the program raises on
    /// process 0 in its own time: an answer that comes first is held
    /// (`202`) and applied at the raise, its receipt put by a job.
    Answer,
    /// A send, as the send route runs it: the pane's write, the record in
    /// the sends journal, the chat handler's verdict, the turn begun and
    /// ended — a step at each of the route's awaits, where its caller may
    /// go away.
    Send,
}

/// A scenario: the requests, and the failures injected.
struct Scenario {
    name: &'static str,
    reqs: Vec<Req>,
    processes: usize,
    kind: Kind,
    /// The first `put` fails (a route's or a held answer's).
    fail_first_put: bool,
    /// The first `claim` fails.
    fail_first_claim: bool,
    /// The first run of the write refuses (`409`; a send's chat handler
    /// refuses it), the later ones succeed.
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
            kind: Kind::Plain,
            fail_first_put: false,
            fail_first_claim: false,
            refuse_first_run: false,
            closes_a_card: false,
        }
    }

    fn of(self, kind: Kind) -> Scenario {
        Scenario { kind, ..self }
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Action {
    Arrive(usize),
    Advance(usize),
    Drop(usize),
    /// The store applies a process's journal of asks.
    ApplyAsks(usize),
    /// The program raises the ask on process 0.
    Raise,
    /// A process's job puts the receipt of a held answer applied.
    PutHeld(usize),
    /// The turn a send began on a process ends.
    EndTurn(usize),
}

/// A send's run between two of its awaits.
#[derive(Clone, Copy)]
enum SendStage {
    /// The sends journal is recording it in this state.
    Recording(SendState),
    /// Being delivered: the chat handler of this slot decides.
    Checking(ChatSlot),
}

#[derive(Clone)]
enum At {
    NotArrived,
    Waiting(ReceiptNext),
    /// A send's write under way (its receipt step waits for its answer).
    Sending(SendStage),
    /// Its caller went away; the step goes on for the store's sake.
    Detached(ReceiptNext),
    Answered(Response),
    Dropped,
}

/// The model store: receipts, claims that hold across processes, the
/// sends journal.
#[derive(Default, Clone)]
struct Store {
    receipts: HashMap<String, Receipt>,
    claimed_by: Option<usize>,
    puts: usize,
    claims: usize,
    sends: HashMap<String, SendState>,
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
    /// The program raised its ask.
    raised: bool,
    /// The held answers each process applied, whose receipts its job puts.
    held_puts: Vec<Vec<(Id, Receipt, String)>>,
    /// What the ask's awaitable was handed, each time.
    decisions: Vec<Result<Answer, String>>,
    /// The turn running on each process (its link), begun by a send.
    turns: Vec<Option<Link>>,
    /// The chat handlers' refusals so far (shared by the processes).
    refusals: usize,
    /// The sends the chat handlers took.
    takes: usize,
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
            raised: false,
            held_puts: vec![Vec::new(); scenario.processes],
            decisions: Vec::new(),
            turns: vec![None; scenario.processes],
            refusals: 0,
            takes: 0,
        }
    }

    /// Each request's link in its machine: its index, unique in the world.
    fn link(r: usize) -> Link {
        r as Link + 1
    }

    /// The links of request `r`'s send (unique in the world): its pane
    /// write, its delivery, the delivery's stop signal, its turn, and the
    /// turn's own stop signal (the runtime's `begin_turn` arms one).
    fn send_links(r: usize) -> [Link; 5] {
        let base = 100 + 10 * r as Link;
        [base, base + 1, base + 2, base + 3, base + 4]
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
                At::Sending(_) => {
                    out.push(Action::Advance(r));
                    if req.may_drop {
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
            if !self.held_puts[p].is_empty() {
                out.push(Action::PutHeld(p));
            }
            if self.turns[p].is_some() {
                out.push(Action::EndTurn(p));
            }
        }
        if self.scenario.kind == Kind::Answer && !self.raised {
            out.push(Action::Raise);
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
                let p = self.scenario.reqs[r].process;
                let input = match std::mem::replace(&mut self.at[r], At::Dropped) {
                    At::Waiting(ReceiptNext::Run) if self.scenario.kind == Kind::Send => self.begin_send(r),
                    At::Sending(stage) => self.send_step(r, stage),
                    At::Waiting(next) => Some(self.perform(p, Self::link(r), next)),
                    At::Detached(next) => {
                        let input = self.perform(p, Self::link(r), next);
                        let next = self.machines[p].receipt_step(Self::link(r), input);
                        self.settle(r, next);
                        // Its answer goes to no one.
                        self.at[r] = match std::mem::replace(&mut self.at[r], At::Dropped) {
                            At::Waiting(next) => At::Detached(next),
                            _ => At::Dropped,
                        };
                        return;
                    }
                    _ => panic!("request {r} advanced while not waiting"),
                };
                // `None`: a send's write goes on at its next await.
                if let Some(input) = input {
                    let next = self.machines[p].receipt_step(Self::link(r), input);
                    self.settle(r, next);
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
                if let At::Sending(_) = self.at[r] {
                    // The send's write goes with its caller: the delivery
                    // under way is given up, the pane's write let go.
                    let [writer, delivery, ..] = Self::send_links(r);
                    self.machines[p].drop_delivery(delivery);
                    self.machines[p].state.end_write(&pane(), writer);
                }
                self.settles[p].remove(&Self::link(r));
                self.at[r] = match self.machines[p].drop_receipt_step(Self::link(r)) {
                    Some(next) => At::Detached(next),
                    None => At::Dropped,
                };
                self.collect(p);
            }
            Action::Raise => {
                self.raised = true;
                let raised = self.machines[0].raise_ask(&pane(), yes_no(), ASK, NOW);
                raised.expect("the pane is open and the ask is new");
                self.collect(0);
            }
            Action::PutHeld(p) => {
                let (request_id, receipt, _group) = self.held_puts[p].remove(0);
                if self.put(request_id.as_str(), receipt) {
                    self.machines[p].state.forget_receipt(&request_id);
                }
                // Else kept in memory: a repeat in this process still replays it.
            }
            Action::EndTurn(p) => {
                let turn = self.turns[p].take().expect("a turn runs");
                let m = &mut self.machines[p];
                if m.state.uninstall_turn(&pane(), turn) {
                    m.set_pane_state(&pane(), PaneState::Idle, None, NOW).unwrap();
                }
                self.store.sends.insert(ID.to_owned(), SendState::Done);
                m.state.turn_ended();
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
            match effect {
                Effect::Settle { waiter, receipt } => {
                    self.settles[p].insert(waiter, receipt);
                }
                Effect::Decide { ask, result } => {
                    assert_eq!(ask, ASK, "a decision for an awaitable nobody raised");
                    self.decisions.push(result.map(|d| d.answer).map_err(|e| format!("{e:?}")));
                }
                Effect::PutHeldReceipt { request_id, receipt, group } => {
                    self.held_puts[p].push((request_id, receipt, group));
                }
                _ => {}
            }
        }
    }

    fn release(&mut self, p: usize) {
        assert_eq!(self.store.claimed_by, Some(p), "a release by a process that holds no claim");
        self.store.claimed_by = None;
    }

    /// The store's put of the id's receipt; `false` when it failed.
    fn put(&mut self, request_id: &str, receipt: Receipt) -> bool {
        self.store.puts += 1;
        if self.scenario.fail_first_put && self.store.puts == 1 {
            self.injected = true;
            return false;
        }
        // A put of a kept id keeps the first.
        self.store.receipts.entry(request_id.to_owned()).or_insert(receipt);
        true
    }

    /// Does what `next` asks, the way a runtime does, and gives its outcome.
    fn perform(&mut self, p: usize, link: Link, next: ReceiptNext) -> ReceiptInput {
        let id = Id::new(ID).unwrap();
        match next {
            ReceiptNext::WaitFirst => {
                let heard = self.settles[p].remove(&link);
                ReceiptInput::Settled(heard.flatten())
            }
            ReceiptNext::Check if self.scenario.kind == Kind::Answer => {
                // The answer route's check: this id holds an answer → `202` again.
                let held = self.machines[p].state.held_ask_of(&id).map(|ask| held_response(ask, &id));
                ReceiptInput::Checked(held)
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
            ReceiptNext::SendState => ReceiptInput::SendState(Ok(self.store.sends.get(ID).cloned())),
            ReceiptNext::Run if self.scenario.kind == Kind::Answer => {
                let ask_id = Id::new(ask_id_for(PANE, "c1")).unwrap();
                let (response, group) = self.machines[p].answer_ask(&ask_id, pick_yes(), NOW);
                ReceiptInput::Ran { response, group }
            }
            ReceiptNext::Run => {
                self.runs += 1;
                if self.scenario.refuse_first_run && self.runs == 1 {
                    let refused = respond::error(ErrorCode::Refused, "refused: not yet");
                    return ReceiptInput::Ran { response: refused, group: Some("pane:ticket-1".into()) };
                }
                self.effects += 1;
                if self.scenario.closes_a_card {
                    self.machines[p].state.journal_forget(format!("card-{link}"));
                }
                let body = json!({ "ok": true, "result": "sent", "requestId": ID, "replayed": false });
                ReceiptInput::Ran { response: respond::json(200, &body), group: Some("pane:ticket-1".into()) }
            }
            ReceiptNext::WaitForAsks { .. } => ReceiptInput::AsksWritten,
            ReceiptNext::Put { receipt, .. } => match self.put(ID, receipt) {
                true => ReceiptInput::Put(Ok(())),
                false => ReceiptInput::Put(Err(StoreError::new("put failed (injected)"))),
            },
            ReceiptNext::Release => {
                self.release(p);
                ReceiptInput::Released
            }
            ReceiptNext::Respond(_) => panic!("an answer is not a step"),
        }
    }

    /// A send's write begins, as the send route does: it takes the pane's
    /// write and looks at the send.
    fn begin_send(&mut self, r: usize) -> Option<ReceiptInput> {
        let p = self.scenario.reqs[r].process;
        let [writer, ..] = Self::send_links(r);
        let granted = self.machines[p].state.request_write(&pane(), writer, true);
        assert!(granted, "a process runs one send with the id at a time: its pane's write is free");
        self.look_at_send(r, None)
    }

    /// Goes on with a send's write after the await it stood at.
    fn send_step(&mut self, r: usize, stage: SendStage) -> Option<ReceiptInput> {
        match stage {
            SendStage::Recording(want) => {
                self.store.sends.insert(ID.to_owned(), want);
                self.look_at_send(r, Some(want))
            }
            SendStage::Checking(slot) => {
                // The pane's own chat handler (there is no agent-wide one):
                // it refuses the first send of the world when asked to.
                let verdict = match slot {
                    ChatSlot::Pane if self.scenario.refuse_first_run && self.refusals == 0 => {
                        self.refusals += 1;
                        Verdict::Refuses("not now".into())
                    }
                    ChatSlot::Pane => {
                        self.takes += 1;
                        Verdict::Takes
                    }
                    _ => Verdict::NotSupported,
                };
                let p = self.scenario.reqs[r].process;
                let [_, delivery, ..] = Self::send_links(r);
                let next = self.machines[p].delivery_step(delivery, DeliveryInput::Checked(verdict), NOW);
                self.deliver(r, next)
            }
        }
    }

    /// The machine's look at the send (`recorded`: the journal's state).
    fn look_at_send(&mut self, r: usize, recorded: Option<SendState>) -> Option<ReceiptInput> {
        let p = self.scenario.reqs[r].process;
        let id = Id::new(ID).unwrap();
        let [writer, delivery, stop, ..] = Self::send_links(r);
        let m = &mut self.machines[p];
        match m.look_at_send(&pane(), &id, "hi", None, recorded, true) {
            SendLook::Record(want) => {
                self.at[r] = At::Sending(SendStage::Recording(want));
                None
            }
            SendLook::Refused(response) => {
                m.state.end_write(&pane(), writer);
                Some(ReceiptInput::Ran { response, group: None })
            }
            SendLook::RunNow { .. } => {
                let send = QueuedSend { request_id: id, text: "hi".into() };
                let next = m.begin_delivery(delivery, &pane(), send, SendState::Running, stop);
                self.deliver(r, next)
            }
            SendLook::Queued { .. } => panic!("a send with the id was queued: no turn ran before it"),
        }
    }

    /// Drives the delivery on to its next await, or to the write's answer.
    fn deliver(&mut self, r: usize, mut next: DeliveryNext) -> Option<ReceiptInput> {
        let p = self.scenario.reqs[r].process;
        let [writer, delivery, _, turn, turn_stop] = Self::send_links(r);
        loop {
            let m = &mut self.machines[p];
            let input = match next {
                DeliveryNext::Check(slot) => {
                    self.at[r] = At::Sending(SendStage::Checking(slot));
                    return None;
                }
                DeliveryNext::StartTurn => {
                    // The turn begins at once (no await): the pane works.
                    assert!(m.state.install_turn(&pane(), turn_stop, turn), "the pane is open");
                    m.set_pane_state(&pane(), PaneState::Working, Some(ID), NOW).unwrap();
                    self.turns[p] = Some(turn);
                    DeliveryInput::Started(Ok(()))
                }
                DeliveryNext::Over(delivered) => {
                    m.state.end_write(&pane(), writer);
                    let group = "pane:ticket-1".to_owned();
                    return Some(match delivered {
                        Delivered::Started => {
                            let sent =
                                WriteResponse::new("sent", Id::new(ID).unwrap()).with("turnId", Value::Null);
                            ReceiptInput::Ran { response: respond::json(200, &sent), group: Some(group) }
                        }
                        Delivered::Refused(reason) => {
                            ReceiptInput::Ran { response: respond::refused(reason), group: None }
                        }
                        other => panic!("a send delivered as {other:?}"),
                    });
                }
                other => panic!("a send run as it arrived asked for {other:?}"),
            };
            next = m.delivery_step(delivery, input, NOW);
        }
    }

    /// The write's effect: what the scenario's requests change.
    fn effects(&mut self) -> usize {
        match self.scenario.kind {
            Kind::Plain => self.effects,
            Kind::Answer => self.decisions.iter().filter(|d| d.is_ok()).count(),
            // The `user` items the sends wrote, on every process's pane.
            Kind::Send => self
                .machines
                .iter()
                .map(|m| {
                    let (items, _) = m.state.pane(&pane()).expect("the pane is open").view_items();
                    items.iter().filter(|item| matches!(item.body, ItemBody::User { .. })).count()
                })
                .sum(),
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
                At::NotArrived | At::Waiting(_) | At::Sending(_) | At::Detached(_) => {
                    panic!("{at}: a request was left waiting")
                }
            })
            .collect();
        let effects = self.effects();
        assert!(effects <= 1, "{at}: the write ran {effects} times");
        let oks: Vec<&Value> = replies.iter().filter(|(s, _)| *s == 200).map(|(_, b)| b).collect();
        if !oks.is_empty() {
            assert_eq!(effects, 1, "{at}: a 200 for a write that never ran");
        }
        let without_replayed = |b: &Value| {
            let mut b = b.clone();
            b.as_object_mut().map(|m| m.remove("replayed"));
            b
        };
        for ok in &oks {
            assert_eq!(without_replayed(ok), without_replayed(oks[0]), "{at}: two different 200s");
        }
        assert!(oks.iter().all(|b| b["replayed"].is_boolean()), "{at}: a 200 without `replayed`: {oks:?}");
        let firsts = oks.iter().filter(|b| b["replayed"] == json!(false)).count();
        assert!(firsts <= 1, "{at}: {firsts} answers say they are the first");
        // Where every request reaches its caller, the first answer says
        // so: exactly one `replayed: false` — none when the write's own
        // answer was the `500` of a failed put. (An answer may be applied
        // by a held answer's raise, which no request answers first.)
        let drops = self.scenario.reqs.iter().any(|r| r.may_drop);
        if self.scenario.kind != Kind::Answer && !drops {
            let want = usize::from(!self.scenario.fail_first_put);
            assert_eq!(firsts, want, "{at}: {firsts} answers say replayed: false, not {want}");
        }
        let failures = replies.iter().filter(|(status, _)| *status >= 500).count();
        if self.scenario.fail_first_put || self.scenario.fail_first_claim {
            // The put fails on its first call: a held answer's job may be
            // the one that meets it, and then no request gets a `500`.
            let most = 1;
            let least = usize::from(self.scenario.kind != Kind::Answer);
            assert!((least..=most).contains(&failures), "{at}: {failures} answers are 5xx");
        }
        for (status, body) in &replies {
            if *status >= 500 {
                let message = body["message"].as_str().unwrap_or_default();
                assert!(
                    self.injected && message.contains("injected"),
                    "{at}: an unexplained {status}: {body}"
                );
            }
            let allowed = match self.scenario.kind {
                // An answer that met the hold is `202` (held) again.
                Kind::Answer => &[200, 202][..],
                _ if self.scenario.refuse_first_run => &[200, 409],
                _ => &[200],
            };
            assert!(*status >= 500 || allowed.contains(status), "{at}: {status} {body}");
            if *status == 409 {
                assert_eq!(body["code"], json!("refused"), "{at}: {body}");
            }
        }
        if self.scenario.refuse_first_run {
            let refused = replies.iter().filter(|(status, _)| *status == 409).count();
            assert!(refused <= 1, "{at}: {refused} refusals for one refused run");
        }
        if self.scenario.kind == Kind::Send {
            // A handler's yes is the turn begun (no await between them).
            assert_eq!(self.takes, effects, "{at}: the chat handler took {} sends", self.takes);
            let recorded = self.store.sends.get(ID);
            assert!(effects == 0 || recorded.is_some(), "{at}: a turn ran for a send never recorded");
        }
        if !oks.is_empty() && !self.scenario.fail_first_put {
            assert!(self.store.receipts.contains_key(ID), "{at}: a 200 whose receipt is not in the store");
        }
        assert_eq!(self.store.claimed_by, None, "{at}: a claim was left in the store");
        if self.scenario.kind == Kind::Answer {
            let yes = Answer::option("yes");
            assert!(
                matches!(self.decisions.as_slice(), [Ok(answer)] if *answer == yes),
                "{at}: the ask's awaitable was handed {:?}, not the answer once",
                self.decisions
            );
            let kept = self.store.receipts.contains_key(ID);
            assert_eq!(kept, !self.injected, "{at}: the receipt is in the store unless its put failed");
            // A retry once everything is over replays the answer applied.
            let retry = self.retry(0);
            assert_eq!((retry.0, &retry.1["replayed"]), (200, &json!(true)), "{at}: the retry got {retry:?}");
            if let Some(first) = oks.first() {
                assert_eq!(without_replayed(&retry.1), without_replayed(first), "{at}: the retry's body");
            }
        }
        for (p, m) in self.machines.iter_mut().enumerate() {
            let probe = 1000;
            let next = m.begin_receipt_step(probe, Id::new(ID).unwrap());
            assert!(matches!(next, ReceiptNext::Check), "{at}: process {p} still holds the id ({next:?})");
            m.drop_receipt_step(probe);
            // Every send's write, delivery and turn ended with it.
            let st = &mut m.state;
            assert_eq!(st.turns_running(), 0, "{at}: process {p} counts a turn that is over");
            assert_eq!(st.deliveries_under_way(), 0, "{at}: process {p} keeps a delivery");
            assert!(st.request_write(&pane(), probe, true), "{at}: process {p}'s pane write is still held");
            st.end_write(&pane(), probe);
            assert_eq!(st.pane(&pane()).map(|p| p.state()), Some(PaneState::Idle), "{at}: process {p} works");
        }
    }

    /// A request with the id at process `p` once the schedule is over,
    /// driven to its answer.
    fn retry(&mut self, p: usize) -> (u16, Value) {
        let link = 2000;
        let mut next = self.machines[p].begin_receipt_step(link, Id::new(ID).unwrap());
        let response = loop {
            next = match next {
                ReceiptNext::Respond(response) => break response,
                next => {
                    let input = self.perform(p, link, next);
                    self.machines[p].receipt_step(link, input)
                }
            };
        };
        self.collect(p);
        (response.status, serde_json::from_slice(&response.body).unwrap())
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

#[test]
fn an_answer_held_before_its_ask_is_raised_racing_the_raise_and_two_duplicates() {
    let s = Scenario::new(
        "(9) an answer held before the raise, racing it, two duplicates",
        1,
        vec![req(0), req(0), req(0)],
    )
    .of(Kind::Answer);
    assert_eq!(explore(&s), 1_961);
}

#[test]
fn an_answer_held_before_its_ask_is_raised_with_the_first_put_failing() {
    let mut s = Scenario::new("(9b) the same, the first put failing", 1, vec![req(0), req(0), req(0)])
        .of(Kind::Answer);
    s.fail_first_put = true;
    assert_eq!(explore(&s), 1_710);
}

#[test]
fn an_answer_dropped_at_any_point_a_duplicate_and_a_retry() {
    let dropped = Req { may_drop: true, ..req(0) };
    let retry = Req { after: Some(0), ..req(0) };
    let s = Scenario::new(
        "(10) an answer dropped at any point, a duplicate, then a retry",
        1,
        vec![dropped, req(0), retry],
    )
    .of(Kind::Answer);
    assert_eq!(explore(&s), 5_088);
}

#[test]
fn a_send_dropped_at_any_point_of_its_delivery_a_duplicate_and_a_retry() {
    let dropped = Req { may_drop: true, ..req(0) };
    let retry = Req { after: Some(0), ..req(0) };
    let s = Scenario::new(
        "(11) a send dropped at any point, a duplicate, then a retry",
        1,
        vec![dropped, req(0), retry],
    )
    .of(Kind::Send);
    assert_eq!(explore(&s), 6_684);
}

#[test]
fn a_send_dropped_at_any_point_of_its_delivery_with_a_duplicate_at_another_process() {
    let dropped = Req { may_drop: true, ..req(0) };
    let s = Scenario::new(
        "(12) a send dropped at any point, a duplicate at another process",
        2,
        vec![dropped, req(1)],
    )
    .of(Kind::Send);
    assert_eq!(explore(&s), 2_593);
}

#[test]
fn the_first_send_refused_by_its_chat_handler_with_duplicates_at_two_processes() {
    let mut s = Scenario::new(
        "(13) the first send refused by its handler, duplicates at two processes",
        2,
        vec![req(0), req(0), req(1)],
    )
    .of(Kind::Send);
    s.refuse_first_run = true;
    assert_eq!(explore(&s), 61_255);
}
