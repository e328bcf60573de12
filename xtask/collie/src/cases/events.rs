//! §6 events, `next`, and the snapshot view.

use serde_json::Value;

use super::Ctx;
use crate::check::{
    CaseResult, arr_of, cut, ensure, field, mark, rid, send, time_of, u64_of, wait_idle, wait_item,
};

const TYPES: [&str; 5] = ["item", "state", "ask", "ask-closed", "title"];

pub(crate) async fn events_after_lists_events_and_next(cx: Ctx) -> CaseResult {
    let c = cx.client()?;
    wait_idle(&c, "ticket-1").await?;
    let m = mark(&c, "ticket-1").await?;
    let request_id = rid("send");
    send(&c, "ticket-1", "events probe", &request_id).await?.ok()?;
    wait_item(&c, "ticket-1", m, "reply", "Got it: events probe").await?;
    wait_idle(&c, "ticket-1").await?;

    let r = c.get(&format!("/v1/panes/ticket-1/events?after={m}")).await?;
    let body = r.ok()?;
    ensure!(body["pane"] == "ticket-1", "pane {}", body["pane"]);
    ensure!(body["snapshot"] == false, "snapshot {}", body["snapshot"]);
    let events = arr_of(body, "events")?;
    ensure!(!events.is_empty(), "no events after {m} though a send ran");
    for (i, e) in events.iter().enumerate() {
        let seq = u64_of(e, "seq")?;
        ensure!(seq == m + 1 + i as u64, "event seqs are not consecutive from {}: {}", m + 1, cut(e));
        time_of(e, "ts")?;
        let ty = e["type"].as_str().unwrap_or("");
        ensure!(TYPES.contains(&ty), "event type {ty:?}");
        match ty {
            "item" => {
                let item = field(e, "item")?;
                ensure!(
                    item["id"].is_string() && item["kind"].is_string(),
                    "item without id/kind: {}",
                    cut(item)
                );
            }
            "state" => {
                ensure!(e["state"] == "idle" || e["state"] == "working", "state event {}", cut(e));
                ensure!(e.get("turnId").is_some(), "state event without turnId: {}", cut(e));
            }
            _ => {}
        }
    }
    let last = u64_of(events.last().expect("not empty"), "seq")?;
    ensure!(u64_of(body, "next")? == last, "next {} (expected the last seq {last})", body["next"]);
    let user = events
        .iter()
        .filter_map(|e| e.get("item"))
        .find(|i| i["kind"] == "user" && i["requestId"] == request_id.as_str());
    let user = user.ok_or_else(|| format!("no user item naming requestId {request_id}"))?;
    ensure!(user["text"] == "events probe", "user item text {}", user["text"]);
    let states: Vec<&str> =
        events.iter().filter(|e| e["type"] == "state").filter_map(|e| e["state"].as_str()).collect();
    ensure!(states.contains(&"working") && states.last() == Some(&"idle"), "state events {states:?}");

    // `seq` counts from 1 (when the pane is still within its tail).
    let from0 = c.get("/v1/panes/ticket-1/events?after=0").await?;
    let from0 = from0.ok()?;
    if from0["snapshot"] == false {
        let first = arr_of(from0, "events")?.first().map(|e| e["seq"].clone());
        ensure!(first == Some(Value::from(1)), "the first event's seq is {first:?} (expected 1)");
    }
    Ok(())
}
