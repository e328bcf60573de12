//! §8 writes from the phone: the refusals that cannot act (the request id
//! rule, unknown panes, actions and starters, texts over 64 KiB), then, with
//! `--writes`, send, steer, the declared actions and starters, rename, close
//! and reopen.

use std::time::Duration;

use serde_json::{Value, json};

use super::{Ctx, asks::answer_card, pane_now, send_somewhere, unknown_pane, wait_idle};
use crate::conformance::check::{
    CaseResult, arr_of, cut, ensure, events_after, expect_replay, ids, kind_is, mark, open_asks, pane_in,
    rid, state, u64_of, wait_for,
};
use crate::conformance::wire;

fn check_write(body: &Value, result: &str, request_id: &str) -> CaseResult {
    ensure!(body["result"] == result, "result {} (expected {result})", body["result"]);
    ensure!(body["requestId"] == request_id, "requestId {} (expected {request_id})", body["requestId"]);
    ensure!(body["replayed"] == false, "replayed {} on a first request", body["replayed"]);
    Ok(())
}

/// A write route whose capability is on, with a body the route takes: the
/// request id rule is checked there (after the capability, before anything runs).
pub(crate) fn write_route(cx: &Ctx) -> Option<(String, Value)> {
    // A pane the agent does not have: the request id is checked first (§8).
    let pane = unknown_pane(cx);
    let routes = [
        ("send", format!("/v1/panes/{}/send", crate::link::enc(&pane)), json!({"text": "x"})),
        ("steer", format!("/v1/panes/{}/steer", crate::link::enc(&pane)), json!({"text": "x"})),
        ("abort", format!("/v1/panes/{}/stop", crate::link::enc(&pane)), json!({})),
        ("rename", "/v1/rename".to_owned(), json!({"target": "pane", "id": pane, "title": "x"})),
        ("close", "/v1/close".to_owned(), json!({"target": "pane", "id": pane})),
        ("reopen", "/v1/reopen".to_owned(), json!({"id": pane})),
        ("starters", "/v1/starters/x".to_owned(), json!({})),
        ("actions", format!("/v1/panes/{}/actions/x", crate::link::enc(&pane)), json!({})),
    ];
    routes.into_iter().find(|(cap, _, _)| cx.cap(cap)).map(|(_, path, body)| (path, body))
}

pub(crate) async fn write_request_id_rule_400(cx: Ctx) -> CaseResult {
    let c = cx.client();
    let (path, base) = write_route(&cx).ok_or("no write capability is on")?;
    let mut wrong = Vec::new();
    for bad in [
        Value::Null,
        json!("has space"),
        json!("a/b"),
        json!("q?"),
        json!("h#"),
        json!(""),
        json!("x".repeat(wire::ID_MAX + 1)),
        json!(7),
    ] {
        let mut body = base.clone();
        if !bad.is_null() {
            body["requestId"] = bad.clone();
        }
        let r = c.post(&path, &body).await?;
        if r.refused(400, "bad-request").is_err() {
            wrong.push(format!("requestId {}: {} {}", cut(&bad), r.status, r.body_text()));
        }
    }
    ensure!(wrong.is_empty(), "POST {path}: {}", wrong.join("; "));
    Ok(())
}

pub(crate) async fn write_unknown_pane_404(cx: Ctx) -> CaseResult {
    let c = cx.client();
    let p = unknown_pane(&cx);
    for (cap, route) in [("send", "send"), ("steer", "steer"), ("abort", "stop")] {
        if cx.cap(cap) {
            c.post(&format!("/v1/panes/{p}/{route}"), &json!({"requestId": rid("u"), "text": "x"}))
                .await?
                .refused(404, "not-found")?;
        }
    }
    Ok(())
}

/// Refused whole, never cut to fit: to a pane the agent does not have (the
/// body is checked first, §8), so an agent that would cut it acts on nothing.
pub(crate) async fn send_text_over_64k_400_never_cut(cx: Ctx) -> CaseResult {
    let c = cx.client();
    let p = unknown_pane(&cx);
    let body = json!({"requestId": rid("big"), "text": "a".repeat(wire::PHONE_TEXT_MAX + 1)});
    c.post(&format!("/v1/panes/{}/send", crate::link::enc(&p)), &body).await?.refused(400, "bad-request")?;
    Ok(())
}

pub(crate) async fn path_ids_percent_decoded_before_the_id_rule(cx: Ctx) -> CaseResult {
    let c = cx.client();
    let r = c.post("/v1/panes/no%20such/send", &json!({"requestId": rid("w"), "text": "x"})).await?;
    r.refused(400, "bad-request").map_err(|e| format!("pane id `no such` (percent-encoded): {e}"))?;
    Ok(())
}

pub(crate) async fn action_unknown_404(cx: Ctx) -> CaseResult {
    let c = cx.client();
    let (p, actions) = cx.actions().into_iter().next().ok_or("no pane declares an action")?;
    let mut unknown = "no-such-action".to_owned();
    while actions.contains(&unknown) {
        unknown.push('x');
    }
    c.post(&format!("/v1/panes/{}/actions/{unknown}", crate::link::enc(&p)), &json!({"requestId": rid("a")}))
        .await?
        .refused(404, "not-found")?;
    Ok(())
}

pub(crate) async fn starter_unknown_404(cx: Ctx) -> CaseResult {
    let mut unknown = "no-such-starter".to_owned();
    while cx.starters().contains(&unknown) {
        unknown.push('x');
    }
    cx.client()
        .post(&format!("/v1/starters/{unknown}"), &json!({"requestId": rid("s")}))
        .await?
        .refused(404, "not-found")?;
    Ok(())
}

pub(crate) async fn send_sent_then_user_item_and_idle(cx: Ctx) -> CaseResult {
    let c = cx.client();
    let (p, request_id, _, body) = send_somewhere(&c, &cx, "conformance: hello").await?;
    let result = body["result"].as_str().unwrap_or("");
    ensure!(result == "sent" || result == "queued", "result {} (expected sent or queued)", body["result"]);
    ensure!(body["requestId"] == request_id.as_str(), "requestId {}", body["requestId"]);
    ensure!(body["replayed"] == false, "replayed {} on a first send", body["replayed"]);
    ensure!(body.get("turnId").is_some(), "a send answer lacks turnId");
    let user = wait_for("the user item of the send", Duration::from_secs(10), || async {
        let events = events_after(&c, &p, 0).await.unwrap_or_default();
        let view = if events.is_empty() {
            let r = c.get(&format!("/v1/panes/{}/events?after=0", crate::link::enc(&p))).await?;
            r.json["items"].as_array().cloned().unwrap_or_default()
        } else {
            events.iter().filter_map(|e| e.get("item").cloned()).collect()
        };
        Ok(view.into_iter().find(|i| kind_is(i, "user") && i["requestId"] == request_id.as_str()))
    })
    .await?;
    ensure!(user["text"] == "conformance: hello", "user item text {}", user["text"]);
    wait_idle(&c, &p).await?;
    Ok(())
}

pub(crate) async fn steer_idle_pane_409_refused_not_working(cx: Ctx) -> CaseResult {
    let c = cx.client();
    let (p, _, _, _) = send_somewhere(&c, &cx, "conformance: then idle").await?;
    wait_idle(&c, &p).await?;
    let before = mark(&c, &p).await?;
    let body = json!({"requestId": rid("steer"), "text": "nobody listens"});
    let r = c.post(&format!("/v1/panes/{}/steer", crate::link::enc(&p)), &body).await?;
    if r.status == 200 {
        // Fine only if a turn began meanwhile, on its own: the pane's events
        // say so (a `state` event `working`), or it is working now.
        let began = events_after(&c, &p, before)
            .await?
            .iter()
            .any(|e| e["type"] == "state" && e["state"] == "working");
        let working = pane_now(&c, &p).await?["state"] == "working";
        ensure!(began || working, "a steer to an idle pane was accepted: {}", cut(&r.json));
        return Ok(());
    }
    let refused = r.refused(409, "refused")?;
    ensure!(
        refused["reason"] == "not-working",
        "refused reason {} (expected not-working)",
        refused["reason"]
    );
    Ok(())
}

pub(crate) async fn actions_declared_are_done(cx: Ctx) -> CaseResult {
    let c = cx.client();
    for (p, actions) in cx.actions() {
        for action in actions {
            let before = ids(&open_asks(&state(&c).await?));
            let request_id = rid("action");
            let path = format!("/v1/panes/{}/actions/{}", crate::link::enc(&p), crate::link::enc(&action));
            let body = json!({"requestId": request_id});
            let r = c.post(&path, &body).await?;
            if r.status == 409 && r.json["code"] == "refused" {
                continue; // the program may refuse now, with its reason
            }
            let first = r.ok().map_err(|e| format!("{p}/{action}: {e}"))?.clone();
            check_write(&first, "done", &request_id)?;
            expect_replay(&c, &path, &body, &first).await?;
            // The cards it raised (within 2 s), answered as a careful phone would.
            let is_new = |a: &Value| {
                a["pane"] == p.as_str() && !before.contains(&a["id"].as_str().unwrap_or("").to_owned())
            };
            let raised = wait_for("a card", Duration::from_secs(2), || async {
                let asks: Vec<Value> = open_asks(&state(&c).await?).into_iter().filter(is_new).collect();
                Ok((!asks.is_empty()).then_some(asks))
            })
            .await
            .unwrap_or_default();
            for ask in raised {
                answer_card(&c, &ask).await?;
            }
        }
    }
    Ok(())
}

pub(crate) async fn starters_declared_start(cx: Ctx) -> CaseResult {
    let c = cx.client();
    for starter in cx.starters() {
        let request_id = rid("start");
        let path = format!("/v1/starters/{}", crate::link::enc(&starter));
        let body = json!({"requestId": request_id, "text": "conformance"});
        let r = c.post(&path, &body).await?;
        if r.status == 409 && r.json["code"] == "refused" {
            continue;
        }
        let first = r.ok().map_err(|e| format!("starter {starter}: {e}"))?.clone();
        check_write(&first, "started", &request_id)?;
        ensure!(first["pane"].is_string() || first["pane"].is_null(), "started pane {}", first["pane"]);
        if let Some(p) = first["pane"].as_str() {
            let s = state(&c).await?;
            ensure!(pane_in(&s, p).is_some(), "the started pane {p} is not in the state");
        }
        expect_replay(&c, &path, &body, &first).await?;
    }
    Ok(())
}

pub(crate) async fn rename_pane_renamed(cx: Ctx) -> CaseResult {
    let c = cx.client();
    let p = cx.first_pane()?;
    let title = pane_now(&c, &p).await?["title"].as_str().unwrap_or(&p).to_owned();
    // A request id of exactly ID_MAX bytes is within the rule, and an
    // unknown field rides along (forward compatibility).
    let request_id = format!("{:y<width$}", rid("rename"), width = wire::ID_MAX);
    let body = json!({"requestId": request_id, "target": "pane", "id": p, "title": title,
                      "fromTheFuture": {"anything": [1, 2]}});
    let r = c.post("/v1/rename", &body).await?;
    if r.status == 409 && r.json["code"] == "refused" {
        // A hook may refuse (§8: a read-only conversation), with its reason;
        // nothing is stored, so there is no receipt to replay.
        let refused = r.refused(409, "refused")?;
        ensure!(
            refused["reason"].as_str().is_some_and(|reason| !reason.trim().is_empty()),
            "{}: 409 refused without a reason: {}",
            r.what,
            r.body_text()
        );
    } else {
        let first =
            r.ok().map_err(|e| format!("{e} (expected 200 renamed, or 409 refused with a reason)"))?;
        check_write(first, "renamed", &request_id)?;
        expect_replay(&c, "/v1/rename", &body, first).await?;
    }
    let body = json!({"requestId": rid("rename"), "target": "pane", "id": unknown_pane(&cx), "title": "x"});
    c.post("/v1/rename", &body).await?.refused(404, "not-found")?;
    let body = json!({"requestId": rid("rename"), "target": "window", "id": p, "title": "x"});
    c.post("/v1/rename", &body).await?.refused(400, "bad-request")?;
    Ok(())
}

pub(crate) async fn close_and_reopen_pane(cx: Ctx) -> CaseResult {
    let c = cx.client();
    // The last pane: a started one when a starter ran, the least central otherwise.
    let s = state(&c).await?;
    let p = ids(arr_of(&s, "panes")?).pop().ok_or("no pane to close")?;
    let seq0 = u64_of(&s, "seq")?;
    let request_id = rid("close");
    let r = c.post("/v1/close", &json!({"requestId": request_id, "target": "pane", "id": p})).await?;
    if r.status == 409 && r.json["code"] == "refused" {
        return Ok(());
    }
    check_write(r.ok()?, "closed", &request_id)?;
    let s = state(&c).await?;
    ensure!(pane_in(&s, &p).is_none(), "closed pane {p} is still in panes");
    ensure!(ids(arr_of(&s, "closed")?).contains(&p), "{p} is not in the closed list {}", cut(&s["closed"]));
    let d = c.get(&format!("/v1/state?since={seq0}")).await?;
    let d = d.ok()?;
    ensure!(
        d["full"] == true || d["removed"].as_array().is_some_and(|r| r.contains(&json!(p))),
        "since answer removed {} lacks {p}",
        d["removed"]
    );
    let request_id = rid("reopen");
    let r = c.post("/v1/reopen", &json!({"requestId": request_id, "id": p})).await?;
    check_write(r.ok()?, "reopened", &request_id)?;
    let s = state(&c).await?;
    ensure!(pane_in(&s, &p).is_some(), "reopened pane {p} is not in panes");
    ensure!(!ids(arr_of(&s, "closed")?).contains(&p), "reopened pane {p} is still in the closed list");
    c.post("/v1/reopen", &json!({"requestId": rid("reopen"), "id": unknown_pane(&cx)}))
        .await?
        .refused(404, "not-found")?;
    Ok(())
}
