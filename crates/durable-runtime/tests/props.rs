//! Property tests (issue 3): any sequence of item writes gives the view of a
//! simple reference model (§6), and random interleavings of answers with
//! repeated request ids execute each request id once and replay identical
//! bodies (§7.1, §9).
use durable_runtime::test_util as harness;

use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};

use durable_runtime::types::exchange::{Caller, Request};
use durable_runtime::types::{AskOption, AskSpec, Item, ItemBody, VIEW_LIMIT};
use durable_runtime::{AskHandle, Lookup, MemoryReceiptStore, Receipt, ReceiptStore, StoreError};
use harness::{Harness, poll_once, without_replayed};
use proptest::prelude::*;
use serde_json::{Value, json};

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().build().expect("runtime")
}

// ---------------------------------------------------------------------------
// (1) Item writes against a reference model

#[derive(Debug, Clone)]
enum ItemOp {
    Write { id: usize, kind: u8, text: String, partial: bool },
    Working,
    Idle,
}

const KINDS: [&str; 6] = ["reply", "markdown", "thinking", "notice", "code", "user"];

fn item_of(id: usize, kind: u8, text: &str, partial: bool) -> Item {
    let id = durable_runtime::types::Id::new(format!("i{id}")).unwrap();
    let text = text.to_owned();
    let body = match KINDS[kind as usize] {
        "reply" => ItemBody::Reply { text, partial },
        "markdown" => ItemBody::Markdown { text, partial },
        "thinking" => ItemBody::Thinking { text, partial },
        "notice" => ItemBody::Notice { text, partial, tone: None },
        "code" => ItemBody::Code { text, lang: None },
        _ => ItemBody::User { text, request_id: None },
    };
    Item::new(id, body)
}

/// The item as the view must show it.
fn expected_json(id: usize, kind: u8, text: &str, partial: bool) -> Value {
    let kind = KINDS[kind as usize];
    let mut v = json!({"id": format!("i{id}"), "kind": kind, "text": text});
    if partial && matches!(kind, "reply" | "markdown" | "thinking" | "notice") {
        v["partial"] = json!(true);
    }
    v
}

/// The reference model: items in order of first appearance, replaced in
/// place, capped to the most recent `VIEW_LIMIT` (an id that fell out is new
/// again), partial cleared when the pane goes idle.
#[derive(Default)]
struct ViewModel {
    items: Vec<(String, Value)>,
    dropped: bool,
    warned: bool,
}

impl ViewModel {
    fn write(&mut self, v: Value) {
        let id = v["id"].as_str().unwrap().to_owned();
        match self.items.iter_mut().find(|(i, _)| *i == id) {
            Some(slot) => slot.1 = v,
            None => {
                self.items.push((id, v));
                if self.items.len() > VIEW_LIMIT {
                    self.items.remove(0);
                    self.dropped = true;
                }
            }
        }
    }

    fn idle(&mut self) {
        let mut any = false;
        for (_, v) in &mut self.items {
            if v.as_object_mut().unwrap().remove("partial").is_some() {
                any = true;
            }
        }
        self.warned |= any;
    }

    fn view(&self) -> Vec<Value> {
        self.items.iter().map(|(_, v)| v.clone()).collect()
    }
}

fn item_op(ids: usize) -> impl Strategy<Value = ItemOp> {
    prop_oneof![
        8 => (0..ids, 0..KINDS.len() as u8, "[a-z ]{0,12}", any::<bool>())
            .prop_map(|(id, kind, text, partial)| ItemOp::Write { id, kind, text, partial }),
        1 => Just(ItemOp::Working),
        1 => Just(ItemOp::Idle),
    ]
}

fn check_items(ops: &[ItemOp], tail_limit: usize) -> Result<bool, TestCaseError> {
    runtime().block_on(async {
        let h = Harness::with(|b| b.tail_limit(tail_limit));
        let pane = h.pane();
        let mut model = ViewModel::default();
        for op in ops {
            match op {
                ItemOp::Write { id, kind, text, partial } => {
                    pane.write(item_of(*id, *kind, text, *partial)).unwrap();
                    model.write(expected_json(*id, *kind, text, *partial));
                }
                ItemOp::Working => pane.working("t-1").unwrap(),
                ItemOp::Idle => {
                    pane.idle().unwrap();
                    model.idle();
                }
            }
        }
        let snap = h.view("ticket-1").await;
        prop_assert_eq!(snap["items"].as_array().unwrap(), &model.view());
        prop_assert_eq!(snap["dropped"].as_bool(), Some(model.dropped));
        prop_assert_eq!(h.warns().len(), usize::from(model.warned), "one warning at most per pane");
        // A reader that kept up with the whole tail builds the same view.
        let tail = h.events("ticket-1", 0).await.json;
        if tail["snapshot"] == false {
            let mut from_events = ViewModel::default();
            for e in tail["events"].as_array().unwrap() {
                if e["type"] == "item" {
                    from_events.write(e["item"].clone());
                }
            }
            prop_assert_eq!(from_events.view(), model.view());
            prop_assert_eq!(&tail["next"], &snap["next"]);
        }
        Ok(model.dropped)
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn prop_item_writes_give_the_view_of_the_reference_model(ops in prop::collection::vec(item_op(6), 0..80)) {
        check_items(&ops, 500)?;
    }
}

/// Mostly fresh ids (so the view passes its cap), some from a small set
/// written again and again (replaced in place, or new again once dropped).
fn item_op_big() -> impl Strategy<Value = ItemOp> {
    let id = prop_oneof![9 => 100..20_000usize, 1 => 0..40usize];
    prop_oneof![
        40 => (id, 0..KINDS.len() as u8, "[a-z]{0,4}", any::<bool>())
            .prop_map(|(id, kind, text, partial)| ItemOp::Write { id, kind, text, partial }),
        1 => Just(ItemOp::Working),
        1 => Just(ItemOp::Idle),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 6, max_shrink_iters: 64, ..ProptestConfig::default() })]

    /// The same with enough ids to pass the 2000-item cap of the view.
    #[test]
    fn prop_item_writes_past_the_view_limit_keep_the_most_recent_2000(
        ops in prop::collection::vec(item_op_big(), 2500..2900)
    ) {
        let dropped = check_items(&ops, 50)?;
        prop_assert!(dropped, "the sequence passed the cap");
    }
}

// ---------------------------------------------------------------------------
// (2) Answers with repeated request ids, interleaved

/// A memory store that yields to the runtime inside `get` and `put`, so
/// concurrent requests interleave at the awaits.
struct YieldingStore {
    inner: MemoryReceiptStore,
    yields: Vec<u8>,
    turn: AtomicUsize,
}

impl YieldingStore {
    async fn pause(&self) {
        let n = self.yields[self.turn.fetch_add(1, Ordering::Relaxed) % self.yields.len()];
        for _ in 0..n {
            tokio::task::yield_now().await;
        }
    }
}

impl ReceiptStore for YieldingStore {
    async fn get(&self, request_id: &str) -> Result<Lookup, StoreError> {
        self.pause().await;
        self.inner.get(request_id).await
    }

    async fn put(&self, request_id: &str, receipt: Receipt, group: &str) -> Result<(), StoreError> {
        self.pause().await;
        self.inner.put(request_id, receipt, group).await
    }
}

const ASKS: usize = 3;
const OPTIONS: [&str; 3] = ["a", "b", "c"];

#[derive(Debug, Clone, Copy)]
struct AnswerOp {
    ask: usize,
    rid: usize,
    option: usize,
}

fn answer_op() -> impl Strategy<Value = AnswerOp> {
    (0..ASKS, 0..5usize, 0..OPTIONS.len()).prop_map(|(ask, rid, option)| AnswerOp { ask, rid, option })
}

struct Outcome {
    op: AnswerOp,
    batch: usize,
    status: u16,
    body: Value,
}

fn raise(h: &Harness) -> Vec<AskHandle> {
    let pane = h.pane();
    (0..ASKS)
        .map(|i| {
            let options = OPTIONS.map(|o| AskOption::new(o, o.to_uppercase()));
            pane.ask(AskSpec::choice(format!("call-{i}"), format!("Ask {i}"), options)).unwrap()
        })
        .collect()
}

fn request(ask_id: &str, op: AnswerOp) -> Request {
    let body = json!({"requestId": format!("r-{}", op.rid), "answer": {"optionIds": [OPTIONS[op.option]]}});
    Request::post(&format!("/v1/asks/{ask_id}"), body.to_string(), Caller::OtherProcess)
}

/// Runs the ops in batches (each batch concurrently) and checks the
/// exactly-once rules on what came back.
fn check_answers(ops: &[AnswerOp], batch_sizes: &[usize], yields: Vec<u8>) -> Result<(), TestCaseError> {
    runtime().block_on(async {
        let store = YieldingStore { inner: MemoryReceiptStore::new(), yields, turn: AtomicUsize::new(0) };
        let h = Harness::with(|b| b.receipts(store));
        let handles = raise(&h);
        let ids: Vec<String> = handles.iter().map(|a| a.id().to_owned()).collect();
        let mut outcomes = Vec::new();
        let mut rest = ops;
        let mut batch = 0;
        let mut sizes = batch_sizes.iter().cycle();
        while !rest.is_empty() {
            let n = (*sizes.next().unwrap()).clamp(1, rest.len());
            let (now, later) = rest.split_at(n);
            rest = later;
            let tasks: Vec<_> = now
                .iter()
                .map(|op| (*op, tokio::spawn(h.core.driver().handle(request(&ids[op.ask], *op)))))
                .collect();
            for (op, task) in tasks {
                let resp = task.await.unwrap();
                outcomes.push(Outcome { op, batch, status: resp.status, body: resp.body_json() });
            }
            batch += 1;
        }

        // Every answer is a first success, a replay, or ask-closed.
        let mut first_by_rid: HashMap<usize, &Outcome> = HashMap::new();
        let mut first_by_ask: HashMap<usize, &Outcome> = HashMap::new();
        for o in &outcomes {
            match (o.status, o.body["replayed"].as_bool()) {
                (200, Some(false)) => {
                    prop_assert!(first_by_rid.insert(o.op.rid, o).is_none(), "r-{} executed twice", o.op.rid);
                    prop_assert!(
                        first_by_ask.insert(o.op.ask, o).is_none(),
                        "ask {} answered twice",
                        o.op.ask
                    );
                    prop_assert_eq!(o.body["askId"].as_str(), Some(ids[o.op.ask].as_str()));
                }
                (200, Some(true)) => {}
                (409, _) => prop_assert_eq!(o.body["code"].as_str(), Some("ask-closed")),
                _ => prop_assert!(false, "unexpected answer {} {}", o.status, o.body),
            }
        }
        for o in &outcomes {
            let first = first_by_rid.get(&o.op.rid);
            if o.status == 200 {
                // Replays are the first body but for `replayed`.
                let first = first.expect("a replay has a first");
                prop_assert_eq!(without_replayed(&o.body), without_replayed(&first.body));
            }
            if let Some(first) = first {
                if o.batch > first.batch {
                    prop_assert_eq!(o.status, 200, "a later repeat of r-{} replays", o.op.rid);
                    prop_assert_eq!(o.body["replayed"].as_bool(), Some(true));
                }
            }
            if o.status == 409 {
                prop_assert!(first_by_ask.contains_key(&o.op.ask), "ask-closed only for a decided ask");
                prop_assert_eq!(o.body["decidedBy"].as_str(), Some("phone"));
            }
        }

        // Each awaitable resolved once, with the first answer; the others wait.
        let open = h.open_ask_ids().await;
        for (i, handle) in handles.into_iter().enumerate() {
            let mut handle = Box::pin(handle);
            match first_by_ask.get(&i) {
                Some(first) => {
                    let got = poll_once(&mut handle).expect("resolved").unwrap();
                    prop_assert_eq!(got.option_id(), Some(OPTIONS[first.op.option]));
                    prop_assert!(!open.contains(&ids[i]));
                    // A later, different request id: ask-closed.
                    let r = h
                        .answer(&ids[i], json!({"requestId": "fresh", "answer": {"optionIds": ["a"]}}))
                        .await;
                    prop_assert_eq!((r.status, r.code()), (409, "ask-closed"));
                }
                None => {
                    prop_assert!(poll_once(&mut handle).is_none());
                    prop_assert!(open.contains(&ids[i]));
                }
            }
        }
        Ok(())
    })
}

/// Run one at a time, the answers follow an exact model.
fn check_answers_sequential(ops: &[AnswerOp]) -> Result<(), TestCaseError> {
    runtime().block_on(async {
        let h = Harness::new();
        let handles = raise(&h);
        let ids: Vec<String> = handles.iter().map(|a| a.id().to_owned()).collect();
        let mut receipts: HashMap<usize, Value> = HashMap::new();
        let mut decided: HashMap<usize, usize> = HashMap::new();
        for (step, op) in ops.iter().enumerate() {
            h.advance(1).await;
            let resp: Value = h.core.driver().handle(request(&ids[op.ask], *op)).await.body_json();
            if let Some(first) = receipts.get(&op.rid) {
                prop_assert_eq!(resp["replayed"].as_bool(), Some(true), "step {}", step);
                prop_assert_eq!(without_replayed(&resp), without_replayed(first));
            } else if let Entry::Vacant(slot) = decided.entry(op.ask) {
                prop_assert_eq!(resp["result"].as_str(), Some("answered"), "step {}", step);
                prop_assert_eq!(resp["replayed"].as_bool(), Some(false));
                prop_assert_eq!(resp["requestId"].as_str().map(str::to_owned), Some(format!("r-{}", op.rid)));
                receipts.insert(op.rid, resp);
                slot.insert(op.option);
            } else {
                prop_assert_eq!(resp["code"].as_str(), Some("ask-closed"), "step {}", step);
            }
        }
        let decided_ids: HashSet<&String> = decided.keys().map(|i| &ids[*i]).collect();
        for (i, handle) in handles.into_iter().enumerate() {
            let mut handle = Box::pin(handle);
            match decided.get(&i) {
                Some(opt) => {
                    let got = poll_once(&mut handle).expect("resolved").unwrap();
                    prop_assert_eq!(got.option_id(), Some(OPTIONS[*opt]));
                }
                None => prop_assert!(poll_once(&mut handle).is_none()),
            }
        }
        let open: HashSet<String> = h.open_ask_ids().await.into_iter().collect();
        prop_assert!(open.iter().all(|id| !decided_ids.contains(id)));
        prop_assert_eq!(open.len() + decided.len(), ASKS);
        Ok(())
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn prop_repeated_request_ids_execute_once_and_replay_identical_bodies(
        ops in prop::collection::vec(answer_op(), 1..24),
    ) {
        check_answers_sequential(&ops)?;
    }

    #[test]
    fn prop_interleaved_answers_execute_each_request_id_at_most_once(
        ops in prop::collection::vec(answer_op(), 1..24),
        batch_sizes in prop::collection::vec(1..6usize, 1..6),
        yields in prop::collection::vec(0..4u8, 1..8),
    ) {
        check_answers(&ops, &batch_sizes, yields)?;
    }
}

// ---------------------------------------------------------------------------
// (3) No input panics

fn segment() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("v1".to_owned()),
        Just("hello".to_owned()),
        Just("state".to_owned()),
        Just("panes".to_owned()),
        Just("ticket-1".to_owned()),
        Just("events".to_owned()),
        Just("asks".to_owned()),
        Just("send".to_owned()),
        Just("stop".to_owned()),
        Just("actions".to_owned()),
        Just("history".to_owned()),
        Just("970f8a0b30368fbbcab73013d31d2d51".to_owned()),
        "[%0-9A-Za-z:?#. -]{0,8}",
        "\\PC{0,6}",
    ]
}

fn body() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..40),
        Just(br#"{"requestId":"r-1","answer":{"optionIds":["yes"]}}"#.to_vec()),
        Just(br#"{"requestId":"r-1","answer":{"optionIds":["yes"]},"hash":"cb8b64234d06250d254d479dcdd28c57083cae57ba257f035c7f409be9de57ce"}"#.to_vec()),
        Just(br#"{"wire":{"min":2,"max":4294967295}}"#.to_vec()),
        "\\PC{0,30}".prop_map(String::into_bytes),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn prop_no_request_panics_and_every_answer_is_in_the_error_table(
        method in prop::sample::select(vec!["GET", "POST", "PUT", "DELETE", "HEAD"]),
        segs in prop::collection::vec(segment(), 0..6),
        query in prop::option::of("[a-z]{0,6}=[-0-9a-z%]{0,24}"),
        body in body(),
        caller in prop::sample::select(vec![Caller::OtherProcess, Caller::SelfOrDescendant, Caller::Token, Caller::Unknown]),
    ) {
        runtime().block_on(async {
            let h = Harness::new();
            let pane = h.pane();
            let _ask = pane.ask(AskSpec::choice("call-1", "Go?", [AskOption::new("yes", "Yes")])).unwrap();
            let mut path = format!("/{}", segs.join("/"));
            if let Some(q) = &query {
                path = format!("{path}?{q}");
            }
            let mut req = Request::new(durable_runtime::types::exchange::Method::from_name(method), &path, caller);
            req.body = durable_runtime::types::exchange::Body::Complete(body.clone().into());
            let resp = h.core.driver().handle(req).await;
            prop_assert!([200, 202, 304, 400, 403, 404, 405, 409, 413, 500].contains(&resp.status), "{}", resp.status);
            if resp.status != 304 {
                let json = resp.body_json();
                prop_assert!(json["ok"].is_boolean(), "{path}: {json}");
                prop_assert_eq!(json["ok"].as_bool(), Some(resp.status < 300));
            }
            Ok(())
        })?;
    }
}
