//! §6 events, `next`, and the snapshot view.

use serde_json::Value;

use super::Ctx;
use crate::conformance::check::{
    R, arr_of, bool_of, cut, ensure, field, mark, rid, send, time_of, u64_of, wait_idle, wait_item,
};

const TYPES: [&str; 5] = ["item", "state", "ask", "ask-closed", "title"];

pub(crate) async fn events_after_lists_events_and_next(cx: Ctx) -> R {
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

pub(crate) async fn events_next_is_after_when_none_returned(cx: Ctx) -> R {
    let c = cx.client()?;
    wait_idle(&c, "ticket-1").await?;
    let m = mark(&c, "ticket-1").await?;
    let r = c.get(&format!("/v1/panes/ticket-1/events?after={m}")).await?;
    let body = r.ok()?;
    ensure!(body["snapshot"] == false, "after the last seq: snapshot {}", body["snapshot"]);
    ensure!(arr_of(body, "events")?.is_empty(), "events after the last seq: {}", cut(&body["events"]));
    ensure!(u64_of(body, "next")? == m, "next {} (expected after = {m})", body["next"]);
    // `after` defaults to 0.
    let plain = c.get("/v1/panes/ticket-1/events").await?;
    let zero = c.get("/v1/panes/ticket-1/events?after=0").await?;
    ensure!(
        plain.ok()?["next"] == zero.ok()?["next"] && plain.json["snapshot"] == zero.json["snapshot"],
        "no `after` answers next {} / snapshot {}, after=0 answers next {} / snapshot {}",
        plain.json["next"],
        plain.json["snapshot"],
        zero.json["next"],
        zero.json["snapshot"]
    );
    Ok(())
}

pub(crate) async fn events_after_beyond_last_gives_snapshot(cx: Ctx) -> R {
    let c = cx.client()?;
    wait_idle(&c, "ticket-1").await?;
    let m = mark(&c, "ticket-1").await?;
    let r = c.get(&format!("/v1/panes/ticket-1/events?after={}", m + 1000)).await?;
    let v = r.ok()?;
    ensure!(v["snapshot"] == true, "after beyond the last seq: snapshot {}", v["snapshot"]);
    ensure!(v["pane"] == "ticket-1", "pane {}", v["pane"]);
    let items = arr_of(v, "items")?;
    ensure!(!items.is_empty(), "the snapshot view has no items though ticket-1 has some");
    ensure!(v["state"] == "idle" || v["state"] == "working", "state {}", v["state"]);
    ensure!(v.get("turnId").is_some(), "the view lacks turnId");
    arr_of(v, "asks")?;
    bool_of(v, "dropped")?;
    ensure!(u64_of(v, "next")? == m, "the view's next is {} (expected the last seq {m})", v["next"]);
    // The view holds each item once, at its latest version.
    let mut seen = std::collections::HashSet::new();
    for item in items {
        let id = item["id"].as_str().unwrap_or("");
        ensure!(seen.insert(id.to_owned()), "item {id} is twice in the view");
        ensure!(item["partial"] != true, "an idle pane's view has a partial item: {}", cut(item));
    }
    Ok(())
}

pub(crate) async fn events_unknown_pane_404(cx: Ctx) -> R {
    let c = cx.client()?;
    c.get("/v1/panes/no-such-pane/events?after=0").await?.refused(404, "not-found")?;
    // Ids are percent-decoded before the rule: %2D is `-`.
    let r = c.get("/v1/panes/ticket%2D1/events?after=0").await?;
    ensure!(r.ok()?["pane"] == "ticket-1", "ticket%2D1 answered pane {}", r.json["pane"]);
    Ok(())
}
