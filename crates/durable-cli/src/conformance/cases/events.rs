//! §6 events: consecutive seqs, `next`, the snapshot view, unknown panes.

use super::{Ctx, pane_now, unknown_pane};
use crate::conformance::check::{CaseResult, arr_of, bool_of, cut, ensure, field, str_of, time_of, u64_of};

const TYPES: [&str; 5] = ["item", "state", "ask", "ask-closed", "title"];

pub(crate) async fn events_list_consecutive_seqs_and_next(cx: Ctx) -> CaseResult {
    let c = cx.client();
    for p in cx.panes() {
        let r = c.get(&format!("/v1/panes/{}/events?after=0", crate::link::enc(&p))).await?;
        let body = r.ok()?;
        ensure!(body["pane"] == p.as_str(), "events of {p}: pane {}", body["pane"]);
        if bool_of(body, "snapshot")? {
            continue;
        }
        let events = arr_of(body, "events")?;
        let mut last: u64 = 0;
        for (i, e) in events.iter().enumerate() {
            let seq = u64_of(e, "seq")?;
            ensure!(
                i == 0 || Some(seq) == last.checked_add(1),
                "{p}: event seqs are not consecutive: {} after {last}",
                seq
            );
            last = seq;
            time_of(e, "ts")?;
            let ty = e["type"].as_str().unwrap_or("");
            ensure!(TYPES.contains(&ty), "{p}: event type {ty:?}");
            match ty {
                "item" => {
                    let item = field(e, "item")?;
                    ensure!(
                        item["id"].is_string() && item["kind"].is_string(),
                        "{p}: item without id/kind: {}",
                        cut(item)
                    );
                }
                "state" => {
                    ensure!(e["state"] == "idle" || e["state"] == "working", "{p}: state event {}", cut(e));
                    ensure!(e.get("turnId").is_some(), "{p}: state event without turnId: {}", cut(e));
                }
                _ => {}
            }
        }
        if let Some(e) = events.last() {
            ensure!(
                u64_of(body, "next")? == u64_of(e, "seq")?,
                "{p}: next {} (expected the last seq {last})",
                body["next"]
            );
        }
    }
    Ok(())
}

pub(crate) async fn events_next_is_after_when_none_returned(cx: Ctx) -> CaseResult {
    let c = cx.client();
    let p = cx.first_pane()?;
    let path = format!("/v1/panes/{}/events", crate::link::enc(&p));
    let mut last = String::new();
    for _ in 0..3 {
        let m = u64_of(&pane_now(&c, &p).await?, "lastSeq")?;
        let r = c.get(&format!("{path}?after={m}")).await?;
        let body = r.ok()?;
        if u64_of(body, "next")? != m {
            last = format!("after the last seq {m}: next {} (the pane moved?)", body["next"]);
            continue;
        }
        ensure!(body["snapshot"] == false, "after the last seq: snapshot {}", body["snapshot"]);
        ensure!(arr_of(body, "events")?.is_empty(), "events after the last seq: {}", cut(&body["events"]));
        let plain = c.get(&path).await?;
        let zero = c.get(&format!("{path}?after=0")).await?;
        ensure!(
            plain.ok()?["snapshot"] == zero.ok()?["snapshot"],
            "no `after` answers snapshot {}, after=0 answers snapshot {}",
            plain.json["snapshot"],
            zero.json["snapshot"]
        );
        return Ok(());
    }
    Err(last)
}

pub(crate) async fn events_after_beyond_last_gives_snapshot(cx: Ctx) -> CaseResult {
    let c = cx.client();
    let p = cx.first_pane()?;
    let m = u64_of(&pane_now(&c, &p).await?, "lastSeq")?;
    let r =
        c.get(&format!("/v1/panes/{}/events?after={}", crate::link::enc(&p), m.saturating_add(1000))).await?;
    let v = r.ok()?;
    ensure!(v["snapshot"] == true, "after beyond the last seq: snapshot {}", v["snapshot"]);
    ensure!(v["pane"] == p.as_str(), "pane {}", v["pane"]);
    let items = arr_of(v, "items")?;
    ensure!(v["state"] == "idle" || v["state"] == "working", "state {}", v["state"]);
    ensure!(v.get("turnId").is_some(), "the view lacks turnId");
    arr_of(v, "asks")?;
    bool_of(v, "dropped")?;
    ensure!(u64_of(v, "next")? >= m, "the view's next is {} (the pane's lastSeq was {m})", v["next"]);
    let mut seen = std::collections::HashSet::new();
    for item in items {
        let id = str_of(item, "id")?;
        str_of(item, "kind")?;
        ensure!(seen.insert(id.to_owned()), "item {id} is twice in the view");
    }
    Ok(())
}

pub(crate) async fn events_unknown_pane_404(cx: Ctx) -> CaseResult {
    let c = cx.client();
    c.get(&format!("/v1/panes/{}/events?after=0", unknown_pane(&cx))).await?.refused(404, "not-found")?;
    // Ids are percent-decoded before the rule: every byte of a real pane's id encoded.
    let p = cx.first_pane()?;
    let encoded: String = p.bytes().map(|b| format!("%{b:02X}")).collect();
    let r = c.get(&format!("/v1/panes/{encoded}/events?after=0")).await?;
    ensure!(r.ok()?["pane"] == p.as_str(), "{encoded} answered pane {}", r.json["pane"]);
    Ok(())
}
