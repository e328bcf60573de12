//! The in-memory harness: a core with a fake clock, requests in, responses
//! and events out, no sockets (quinn-proto's `Pair`, for our core).
#![allow(dead_code, unreachable_pub, missing_debug_implementations)]

use std::sync::{Arc, Mutex};

use crate::types::exchange::{Body, Caller, Method, Request, Response};
use crate::types::{Caps, Timestamp};
use crate::{Collie, CoreOptions, CoreOptionsBuilder, ManualClock, Pane, PaneOptions, create_core};
use serde_json::Value;

/// The harness's start time: 2026-11-30T05:00:00.000Z.
pub const T0: u64 = 1_796_014_800_000;

/// A core, its clock, and the warn lines it wrote.
pub struct Harness {
    /// The core under test.
    pub core: Collie,
    /// Its clock, moved by hand.
    pub clock: ManualClock,
    /// The lines its warn sink was given.
    pub warns: Arc<Mutex<Vec<String>>>,
}

impl Default for Harness {
    fn default() -> Self {
        Harness::new()
    }
}

/// A response with its JSON body parsed.
#[derive(Debug, Clone)]
pub struct Reply {
    /// The status.
    pub status: u16,
    /// The body, parsed (`null` when empty).
    pub json: Value,
    /// The `ETag`.
    pub etag: Option<String>,
    /// The `Allow` header (a `405`).
    pub allow: Option<&'static str>,
    /// The `Durable-Delivery` header (a replayed send's, §9.1).
    pub delivery: Option<&'static str>,
}

impl Reply {
    /// The `code` of a failure.
    pub fn code(&self) -> &str {
        self.json["code"].as_str().unwrap_or("")
    }
}

impl From<Response> for Reply {
    fn from(r: Response) -> Reply {
        Reply {
            status: r.status,
            json: r.body_json(),
            etag: r.etag.as_deref().map(str::to_owned),
            allow: r.allow,
            delivery: r.delivery,
        }
    }
}

impl Harness {
    /// A core with all caps, default options, `epoch` 0123456789abcdef.
    pub fn new() -> Harness {
        Self::with(|b| b)
    }

    /// A core with caps given.
    pub fn with_caps(caps: Caps) -> Harness {
        Self::with(|b| b.caps(caps))
    }

    /// A core whose receipt store keeps no conversations: an agent with no
    /// history of its own (no `history` cap with caps omitted, pane
    /// session ids `null` unless named).
    pub fn without_history() -> Harness {
        Self::with(|b| b.receipts(KeepsNoConversations::default()))
    }

    /// A core built with extra options.
    pub fn with(f: impl FnOnce(CoreOptionsBuilder) -> CoreOptionsBuilder) -> Harness {
        let h = Self::without_driver(f);
        // Jobs run on the test's runtime, as a driver would run them; a
        // test with no runtime leaves them queued, as a program does until
        // its driver runs.
        let waker_core = h.core.clone();
        h.core.driver().set_wakeup(move || {
            let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
            while let Some(job) = waker_core.driver().poll_job() {
                runtime.spawn(job);
            }
        });
        h
    }

    /// A core whose jobs nobody runs until the test takes them with
    /// `core.poll_job()` (a slow driver).
    pub fn without_driver(f: impl FnOnce(CoreOptionsBuilder) -> CoreOptionsBuilder) -> Harness {
        let clock = ManualClock::new(Timestamp::from_millis(T0));
        let warns = Arc::new(Mutex::new(Vec::new()));
        let sink = warns.clone();
        let builder = CoreOptions::builder()
            .host_name("desk")
            .clock(clock.clone())
            .epoch("0123456789abcdef")
            .warn(move |line| sink.lock().unwrap().push(line.to_owned()));
        let core = create_core(f(builder).build().expect("options"));
        Harness { core, clock, warns }
    }

    /// The standard layout: workspace `support`, tab `main`, pane `ticket-1`.
    pub fn pane(&self) -> Pane {
        self.pane_named("ticket-1")
    }

    /// A pane in `support:main`.
    pub fn pane_named(&self, id: &str) -> Pane {
        self.core
            .workspace("support", "Support")
            .unwrap()
            .tab("main", "Tickets")
            .unwrap()
            .pane(id, PaneOptions::new("Maria Lopez").harness("desk"))
            .unwrap()
    }

    /// Sends a request as another process of the same user.
    pub async fn request(&self, req: Request) -> Reply {
        self.settle().await;
        let r = self.core.driver().handle(req).await;
        self.settle().await;
        r.into()
    }

    /// `GET path` from another process.
    pub async fn get(&self, path: &str) -> Reply {
        self.request(Request::get(path, Caller::OtherProcess)).await
    }

    /// `POST path` with a JSON body, from another process.
    pub async fn post(&self, path: &str, body: Value) -> Reply {
        self.request(Request::post(path, body.to_string(), Caller::OtherProcess)).await
    }

    /// `POST path` with these bytes as its body.
    pub async fn post_raw(&self, path: &str, body: &'static [u8]) -> Reply {
        self.request(Request::post(path, body, Caller::OtherProcess)).await
    }

    /// `POST path` from this caller.
    pub async fn post_as(&self, path: &str, body: Value, caller: Caller) -> Reply {
        self.request(Request::post(path, body.to_string(), caller)).await
    }

    /// `POST path` whose body the transport found too large.
    pub async fn post_too_large(&self, path: &str) -> Reply {
        let mut r = Request::post(path, "", Caller::OtherProcess);
        r.body = Body::TooLarge;
        self.request(r).await
    }

    /// A request with this method (any name) and no body.
    pub async fn method(&self, method: &str, path: &str) -> Reply {
        self.request(Request::new(Method::from_name(method), path, Caller::OtherProcess)).await
    }

    /// Moves the clock and fires due deadlines, as a driver would.
    pub async fn advance(&self, ms: u64) {
        self.clock.advance(ms);
        self.core.driver().tick(self.clock.now_ts());
        self.settle().await;
    }

    /// Lets spawned jobs and woken tasks run.
    pub async fn settle(&self) {
        for _ in 0..20 {
            tokio::task::yield_now().await;
        }
    }

    /// The pane's events after `after`.
    pub async fn events(&self, pane: &str, after: u64) -> Reply {
        self.get(&format!("/v1/panes/{pane}/events?after={after}")).await
    }

    /// The warn lines so far.
    pub fn warns(&self) -> Vec<String> {
        self.warns.lock().unwrap().clone()
    }
}

/// `ManualClock::now` as a plain method (the trait is not in scope in tests).
pub trait NowTs {
    /// The clock's time.
    fn now_ts(&self) -> Timestamp;
}

impl NowTs for ManualClock {
    fn now_ts(&self) -> Timestamp {
        crate::Clock::now(self)
    }
}

// ---------------------------------------------------------------------------
// Helpers added for the contract tests (§2–§7, §9).

impl Harness {
    /// A `GET` as `caller`.
    pub async fn get_as(&self, path: &str, caller: crate::types::exchange::Caller) -> Reply {
        self.request(Request::get(path, caller)).await
    }

    /// A `GET` with `If-None-Match`.
    pub async fn get_if_none_match(&self, path: &str, etag: &str) -> Reply {
        self.request(Request::get(path, Caller::OtherProcess).with_if_none_match(etag)).await
    }

    /// `GET /v1/state`.
    pub async fn state(&self) -> Reply {
        self.get("/v1/state").await
    }

    /// `GET /v1/state?since=N`.
    pub async fn state_since(&self, n: u64) -> Reply {
        self.get(&format!("/v1/state?since={n}")).await
    }

    /// The current change sequence, read through the state poll.
    pub async fn seq(&self) -> u64 {
        self.state().await.json["seq"].as_u64().expect("seq")
    }

    /// `POST /v1/asks/{ask}` with a JSON body.
    pub async fn answer(&self, ask: &str, body: Value) -> Reply {
        self.post(&format!("/v1/asks/{ask}"), body).await
    }

    /// Every event of a pane still in its tail (`after=0`).
    pub async fn all_events(&self, pane: &str) -> Vec<Value> {
        let r = self.events(pane, 0).await;
        assert_eq!(r.status, 200, "{:?}", r.json);
        assert_eq!(r.json["snapshot"], false, "expected the tail, got a snapshot: {:?}", r.json);
        r.json["events"].as_array().cloned().unwrap_or_default()
    }

    /// The pane's view as a snapshot gives it (asked with an `after` beyond
    /// the pane's last seq).
    pub async fn view(&self, pane: &str) -> Value {
        let r = self.events(pane, u64::MAX / 2).await;
        assert_eq!(r.status, 200, "{:?}", r.json);
        assert_eq!(r.json["snapshot"], true, "{:?}", r.json);
        r.json
    }

    /// The texts of the `notice` items of a pane's view.
    pub async fn notices(&self, pane: &str) -> Vec<String> {
        let view = self.view(pane).await;
        view["items"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|i| i["kind"] == "notice")
            .map(|i| i["text"].as_str().unwrap_or("").to_owned())
            .collect()
    }

    /// The ids of the open asks in a full state answer.
    pub async fn open_ask_ids(&self) -> Vec<String> {
        let s = self.state().await;
        s.json["asks"].as_array().unwrap().iter().map(|a| a["id"].as_str().unwrap().to_owned()).collect()
    }
}

/// How many things of the program's side the core names now (asks'
/// awaitables, turns' inboxes and stop signals, handlers, waiters): a
/// write or a repeat that went away must leave none behind.
pub fn links_in_use(core: &Collie) -> usize {
    core.lock().links_ref().len()
}

/// Polls a future once without a runtime's help: `Some` when it is ready.
pub fn poll_once<F: std::future::Future + Unpin>(f: &mut F) -> Option<F::Output> {
    let waker = std::task::Waker::noop();
    let mut cx = std::task::Context::from_waker(waker);
    match std::pin::Pin::new(f).poll(&mut cx) {
        std::task::Poll::Ready(v) => Some(v),
        std::task::Poll::Pending => None,
    }
}

/// A JSON body without its `replayed` field, to compare a replay with the
/// first answer.
pub fn without_replayed(v: &Value) -> Value {
    let mut v = v.clone();
    if let Value::Object(m) = &mut v {
        m.remove("replayed");
    }
    v
}

/// A history provider with no conversation, to turn history on.
pub struct EmptyHistory;

impl crate::HistoryProvider for EmptyHistory {
    async fn rows(
        &self,
        _after: Option<crate::types::Cursor>,
        _limit: usize,
    ) -> Result<crate::RowsPage, crate::HistoryError> {
        Ok(crate::RowsPage { rows: Vec::new(), next: None })
    }

    async fn items(
        &self,
        _session_id: &str,
        _after: Option<crate::types::Cursor>,
        _limit: usize,
    ) -> Result<Option<crate::ItemsPage>, crate::HistoryError> {
        Ok(None)
    }
}

// ---------------------------------------------------------------------------
// Helpers added for the write and history tests (§8–§10).

/// A recording handler and hook, to count executions per request id.
pub mod recorder;

/// The exactly-once property, for any receipt store.
pub mod exactly_once;

/// A memory receipt store that keeps no conversations (the trait's
/// defaults): receipts only, as a custom store written before
/// conversations were kept.
#[derive(Debug, Default)]
pub struct KeepsNoConversations(crate::MemoryReceiptStore);

impl crate::ReceiptStore for KeepsNoConversations {
    async fn get(&self, request_id: &str) -> Result<crate::Lookup, crate::StoreError> {
        self.0.get(request_id).await
    }
    async fn put(
        &self,
        request_id: &str,
        receipt: crate::Receipt,
        group: &str,
    ) -> Result<(), crate::StoreError> {
        self.0.put(request_id, receipt, group).await
    }
}
