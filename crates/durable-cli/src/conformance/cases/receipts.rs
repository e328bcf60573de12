//! §8 receipts: a repeated request id replays its first answer, whatever
//! the route, and across a `SIGKILL` restart (`--agent-cmd`).

use std::time::Duration;

use serde_json::{Value, json};

use super::{Ctx, send_somewhere, wait_idle};
use crate::conformance::check::{
    CaseResult, cut, ensure, expect_replay, items_after, kind_is, replayed, rid,
};

/// A write that acts, for the restart case: a rename of a pane to its own
/// title (nothing changes), else a send, else the first declared action.
pub(crate) fn write_that_acts(cx: &Ctx) -> Option<(String, Value)> {
    let first = cx.state["panes"].as_array()?.first()?;
    let pane = first["id"].as_str()?;
    if cx.cap("rename") {
        let title = first["title"].as_str().unwrap_or(pane);
        return Some(("/v1/rename".to_owned(), json!({"target": "pane", "id": pane, "title": title})));
    }
    if cx.cap("send") {
        let path = format!("/v1/panes/{}/send", crate::link::enc(pane));
        return Some((path, json!({"text": "conformance: kept across a restart"})));
    }
    if cx.cap("actions") {
        let (p, actions) = cx.actions().into_iter().next()?;
        let path =
            format!("/v1/panes/{}/actions/{}", crate::link::enc(&p), crate::link::enc(actions.first()?));
        return Some((path, json!({})));
    }
    None
}

pub(crate) async fn receipt_replayed_same_status_and_body(cx: Ctx) -> CaseResult {
    let c = cx.client();
    let (p, request_id, body, first) = send_somewhere(&c, &cx, "conformance: only once").await?;
    let path = format!("/v1/panes/{}/send", crate::link::enc(&p));
    expect_replay(&c, &path, &body, &first).await?;
    wait_idle(&c, &p).await?;
    expect_replay(&c, &path, &body, &first).await?;
    let users = items_after(&c, &p, 0).await.unwrap_or_default();
    let n = users.iter().filter(|i| kind_is(i, "user") && i["requestId"] == request_id.as_str()).count();
    ensure!(n <= 1, "a replayed send was delivered again: {n} user items name {request_id}");
    Ok(())
}

pub(crate) async fn receipt_found_by_request_id_whatever_the_route(cx: Ctx) -> CaseResult {
    let c = cx.client();
    let (p, request_id, _, first) = send_somewhere(&c, &cx, "conformance: one id, one action").await?;
    wait_idle(&c, &p).await?;
    // The same request id on another route (a stop): the send's receipt, replayed.
    let r = c
        .post(&format!("/v1/panes/{}/stop", crate::link::enc(&p)), &json!({"requestId": request_id}))
        .await?;
    let got = r.ok()?;
    ensure!(
        *got == replayed(&first),
        "the send's id on /stop: {} (expected the send's receipt {})",
        cut(got),
        cut(&first)
    );
    Ok(())
}

pub(crate) async fn receipts_replayed_after_sigkill_restart(cx: Ctx) -> CaseResult {
    let (path, mut body) = write_that_acts(&cx).ok_or("no write to repeat")?;
    body["requestId"] = json!(rid("kept"));
    let c = cx.client();
    let first = c.post(&path, &body).await?.ok()?.clone();
    if path.ends_with("/send") {
        // Let the turn begin before the kill: the receipt is what is checked.
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    cx.restart().await?;
    let c = cx.client();
    expect_replay(&c, &path, &body, &first).await
}
