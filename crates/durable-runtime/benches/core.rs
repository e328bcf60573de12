//! `cargo bench -p durable-runtime`: what the core costs per request, measured
//! against a baseline taken in the same run — `serde_json` writing a value
//! of the same size as the answer (the floor any JSON agent pays). Prints
//! figures; asserts nothing (machines here are shared and noisy).

use std::hint::black_box;
use std::time::{Duration, Instant};

use durable_runtime::types::exchange::{Caller, Request};
use durable_runtime::types::{AskOption, AskSpec, Id, Item, ItemBody, Timestamp};
use durable_runtime::{CoreOptions, ManualClock, PaneOptions, create_core};

const PANES: usize = 100;
const ITEMS: usize = 50;

/// Runs `f` repeatedly for about `budget` and returns nanoseconds per call.
fn measure(budget: Duration, mut f: impl FnMut()) -> f64 {
    for _ in 0..10 {
        f();
    }
    let start = Instant::now();
    let mut n = 0u64;
    while start.elapsed() < budget {
        for _ in 0..10 {
            f();
        }
        n += 10;
    }
    start.elapsed().as_nanos() as f64 / n as f64
}

fn main() {
    let budget =
        Duration::from_millis(std::env::var("BENCH_MS").ok().and_then(|v| v.parse().ok()).unwrap_or(500));
    let rt = tokio::runtime::Builder::new_current_thread().build().expect("runtime");
    let clock = ManualClock::new(Timestamp::from_millis(1_796_014_800_000));
    let core = create_core(
        CoreOptions::builder()
            .host_name("bench")
            .clock(clock.clone())
            .epoch("0123456789abcdef")
            .build()
            .unwrap(),
    );
    let tab = core.workspace("support", "Support").unwrap().tab("main", "Tickets").unwrap();
    let mut panes = Vec::new();
    for p in 0..PANES {
        let pane = tab
            .pane(&format!("ticket-{p}"), PaneOptions::new(format!("Customer {p}")).harness("desk"))
            .unwrap();
        for i in 0..ITEMS {
            let body = ItemBody::Reply {
                text: format!("reply {i} of a conversation, a line of ordinary length"),
                partial: false,
            };
            pane.write(Item::new(Id::new(format!("r{i}")).unwrap(), body)).unwrap();
        }
        panes.push(pane);
    }
    let ask = panes[0]
        .ask(AskSpec::choice(
            "call-1",
            "refund wants to run",
            [AskOption::new("allow", "Allow"), AskOption::new("deny", "Deny")],
        ))
        .unwrap();
    core.ready();

    let full = rt.block_on(core.driver().handle(Request::get("/v1/state", Caller::OtherProcess)));
    let etag = full.etag.clone().unwrap();
    let full_value: serde_json::Value = serde_json::from_slice(&full.body).unwrap();
    let events = rt.block_on(
        core.driver().handle(Request::get("/v1/panes/ticket-0/events?after=0", Caller::OtherProcess)),
    );
    let events_value: serde_json::Value = serde_json::from_slice(&events.body).unwrap();

    let base_full = measure(budget, || {
        black_box(serde_json::to_vec(black_box(&full_value)).unwrap());
    });
    let poll_full = measure(budget, || {
        black_box(rt.block_on(core.driver().handle(Request::get("/v1/state", Caller::OtherProcess))));
    });
    let poll_304 = measure(budget, || {
        let req = Request::get("/v1/state", Caller::OtherProcess).with_if_none_match(etag.clone());
        black_box(rt.block_on(core.driver().handle(req)));
    });
    let base_events = measure(budget, || {
        black_box(serde_json::to_vec(black_box(&events_value)).unwrap());
    });
    let read_events = measure(budget, || {
        black_box(rt.block_on(
            core.driver().handle(Request::get("/v1/panes/ticket-0/events?after=0", Caller::OtherProcess)),
        ));
    });
    let mut n = 0u64;
    let write_item = measure(budget, || {
        n += 1;
        let body = ItemBody::Reply { text: "a growing reply".into(), partial: true };
        panes[1].write(Item::new(Id::new(format!("grow-{}", n % 64)).unwrap(), body)).unwrap();
    });
    let mut r = 0u64;
    let replay = measure(budget, || {
        r += 1;
        let body = format!(r#"{{"requestId":"bench-{}","answer":{{"optionIds":["allow"]}}}}"#, r % 1000);
        let req = Request::post(&format!("/v1/asks/{}", ask.id()), body, Caller::OtherProcess);
        black_box(rt.block_on(core.driver().handle(req)));
    });

    println!(
        "durable-runtime, {PANES} panes × {ITEMS} items; ns per call (ratio to the baseline of the same size)"
    );
    println!(
        "baseline  serde_json write of the full state  {:>10.0} ns  (1.00×, {} bytes)",
        base_full,
        full.body.len()
    );
    println!(
        "GET /v1/state (full)                          {:>10.0} ns  ({:.2}×)",
        poll_full,
        poll_full / base_full
    );
    println!(
        "GET /v1/state with a matching ETag (304)      {:>10.0} ns  ({:.3}×)",
        poll_304,
        poll_304 / base_full
    );
    println!(
        "baseline  serde_json write of one events page {:>10.0} ns  (1.00×, {} bytes)",
        base_events,
        events.body.len()
    );
    println!(
        "GET /v1/panes/ticket-0/events?after=0         {:>10.0} ns  ({:.2}×)",
        read_events,
        read_events / base_events
    );
    println!("pane.write of a partial reply (in place)      {:>10.0} ns", write_item);
    println!("POST /v1/asks answer, closed or replayed      {:>10.0} ns", replay);

    // Memory: what 1,000 more panes of 50 items add to the resident set,
    // against the size of the same content as JSON (what a view holds).
    let before = resident_bytes();
    let tab2 = core.workspace("memory", "Memory").unwrap().tab("t", "T").unwrap();
    for p in 0..1000 {
        let pane =
            tab2.pane(&format!("m-{p}"), PaneOptions::new(format!("Customer {p}")).harness("desk")).unwrap();
        for i in 0..ITEMS {
            let body = ItemBody::Reply {
                text: format!("reply {i} of a conversation, a line of ordinary length"),
                partial: false,
            };
            pane.write(Item::new(Id::new(format!("r{i}")).unwrap(), body)).unwrap();
        }
    }
    let after = resident_bytes();
    let json_per_pane = events.body.len();
    if let (Some(b), Some(a)) = (before, after) {
        let per_pane = a.saturating_sub(b) as f64 / 1000.0;
        println!(
            "memory per pane of {ITEMS} items (view + tail)    {:>10.0} B   ({:.1}× its events page as JSON, {} B)",
            per_pane,
            per_pane / json_per_pane as f64,
            json_per_pane
        );
    }
}

/// The resident set size from `/proc/self/statm` (Linux), in bytes.
fn resident_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * 4096)
}
