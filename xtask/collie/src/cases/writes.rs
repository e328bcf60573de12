//! §8 writes from the phone: send, steer, stop, actions, rename, close, reopen,
//! starters, each with its refusals.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::Ctx;
use crate::check::{
    CaseResult, answer, answer_ok, arr_of, cut, ensure, ids, is_partial, items_after, kind_is, mark,
    open_asks, pane, pane_in, raise, rid, send, send_ok, state, str_of, u64_of, wait_ask_closed, wait_for,
    wait_idle, wait_item, wait_state,
};
use durable_cli::conformance::client::Client;

const P: &str = "ticket-1";

fn check_write(body: &Value, result: &str, request_id: &str) -> CaseResult {
    ensure!(body["result"] == result, "result {} (expected {result})", body["result"]);
    ensure!(body["requestId"] == request_id, "requestId {} (expected {request_id})", body["requestId"]);
    ensure!(body["replayed"] == false, "replayed {} on a first request", body["replayed"]);
    Ok(())
}

async fn post_write(
    c: &Client,
    path: &str,
    mut body: Value,
) -> CaseResult<(String, durable_cli::conformance::client::Resp)> {
    let request_id = rid("w");
    body["requestId"] = json!(request_id);
    let r = c.post(path, &body).await?;
    Ok((request_id, r))
}

pub(crate) async fn send_idle_pane_sent_then_user_item_and_reply(cx: Ctx) -> CaseResult {
    let c = cx.client()?;
    let before = wait_idle(&c, P).await?;
    let m = u64_of(&before, "lastSeq")?;
    let request_id = rid("send");
    let r = send(&c, P, "hello desk", &request_id).await?;
    let body = r.ok()?;
    check_write(body, "sent", &request_id)?;
    ensure!(body.get("turnId").is_some(), "a send answer lacks turnId");
    ensure!(
        body["turnId"] == before["turnId"],
        "sent turnId {} (expected the pane's turn {})",
        body["turnId"],
        before["turnId"]
    );
    let user = wait_for("the user item of the send", Duration::from_secs(5), || async {
        Ok(items_after(&c, P, m)
            .await?
            .into_iter()
            .find(|i| kind_is(i, "user") && i["requestId"] == request_id.as_str()))
    })
    .await?;
    ensure!(user["text"] == "hello desk", "user item text {}", user["text"]);
    wait_item(&c, P, m, "reply", "Got it: hello desk").await?;
    wait_idle(&c, P).await?;
    Ok(())
}

pub(crate) async fn send_during_turn_queued_then_delivered(cx: Ctx) -> CaseResult {
    let c = cx.client()?;
    let m = wait_idle(&c, P).await?["lastSeq"].as_u64().unwrap_or(0);
    send_ok(&c, P, "first of two").await?;
    let working = wait_state(&c, P, "working", Duration::from_secs(3)).await?;
    let request_id = rid("queued");
    let r = send(&c, P, "second of two", &request_id).await?;
    let body = r.ok()?;
    check_write(body, "queued", &request_id)?;
    ensure!(
        body["turnId"] == working["turnId"],
        "queued turnId {} (expected the running turn {})",
        body["turnId"],
        working["turnId"]
    );
    wait_item(&c, P, m, "reply", "Got it: first of two").await?;
    wait_for("the queued send's user item", Duration::from_secs(8), || async {
        Ok(items_after(&c, P, m)
            .await?
            .into_iter()
            .find(|i| kind_is(i, "user") && i["requestId"] == request_id.as_str()))
    })
    .await?;
    wait_item(&c, P, m, "reply", "Got it: second of two").await?;
    wait_idle(&c, P).await?;
    Ok(())
}

pub(crate) async fn send_refused_ask_open_then_same_id_succeeds(cx: Ctx) -> CaseResult {
    let c = cx.client()?;
    let ask = raise(&c, P, "choice").await?;
    let request_id = rid("askopen");
    let r = send(&c, P, "while asked", &request_id).await?;
    let refused = r.refused(409, "ask-open").map(|b| b["askId"].clone());
    answer_ok(&c, &ask, json!({"optionIds": ["yes"]})).await?;
    let ask_id = refused?;
    ensure!(ask_id == ask["id"], "ask-open names askId {ask_id} (expected {})", ask["id"]);
    wait_idle(&c, P).await?;
    let r = send(&c, P, "while asked", &request_id).await?;
    check_write(r.ok()?, "sent", &request_id)?;
    wait_idle(&c, P).await?;
    Ok(())
}

pub(crate) async fn send_turn_moved_409_when_a_turn_began_after(cx: Ctx) -> CaseResult {
    let c = cx.client()?;
    let mut idle = wait_idle(&c, P).await?;
    if idle["turnId"].is_null() {
        send_ok(&c, P, "a first turn").await?;
        wait_state(&c, P, "working", Duration::from_secs(3)).await.ok();
        idle = wait_idle(&c, P).await?;
    }
    let t0 = idle["turnId"].clone();
    let request_id = rid("turn");
    let r = c
        .post(
            &format!("/v1/panes/{P}/send"),
            &json!({"requestId": request_id, "text": "on turn", "turnId": t0}),
        )
        .await?;
    let body = r.ok()?;
    check_write(body, "sent", &request_id)?;
    ensure!(body["turnId"] == t0, "sent turnId {} (expected {t0})", body["turnId"]);
    wait_state(&c, P, "working", Duration::from_secs(3)).await.ok();
    let t1 = wait_idle(&c, P).await?["turnId"].clone();
    ensure!(t1 != t0, "a send started no new turn: turnId still {t1}");
    let r = c
        .post(
            &format!("/v1/panes/{P}/send"),
            &json!({"requestId": rid("turn"), "text": "late", "turnId": t0}),
        )
        .await?;
    let body = r.refused(409, "turn-moved")?;
    ensure!(body["turnId"] == t1, "turn-moved names turnId {} (expected the current {t1})", body["turnId"]);
    Ok(())
}

pub(crate) async fn steer_during_turn_steered_into_reply(cx: Ctx) -> CaseResult {
    let c = cx.client()?;
    let m = wait_idle(&c, P).await?["lastSeq"].as_u64().unwrap_or(0);
    send_ok(&c, P, "steer me").await?;
    wait_state(&c, P, "working", Duration::from_secs(3)).await?;
    let (request_id, r) = post_write(&c, &format!("/v1/panes/{P}/steer"), json!({"text": "faster"})).await?;
    check_write(r.ok()?, "steered", &request_id)?;
    wait_idle(&c, P).await?;
    let items = items_after(&c, P, m).await?;
    let reply = items
        .iter()
        .find(|i| {
            kind_is(i, "reply") && i["text"].as_str().is_some_and(|t| t.starts_with("Got it: steer me"))
        })
        .ok_or("no reply to the steered send")?;
    ensure!(!is_partial(reply), "the reply is still partial after the turn: {}", cut(reply));
    ensure!(
        reply["text"].as_str().is_some_and(|t| t.contains("(steer: faster)")),
        "the reply {} lacks (steer: faster)",
        reply["text"]
    );
    Ok(())
}

pub(crate) async fn stop_aborts_the_running_turn(cx: Ctx) -> CaseResult {
    let c = cx.client()?;
    let m = wait_idle(&c, P).await?["lastSeq"].as_u64().unwrap_or(0);
    send_ok(&c, P, "stop me please, this is a long request").await?;
    wait_state(&c, P, "working", Duration::from_secs(3)).await?;
    let (request_id, r) = post_write(&c, &format!("/v1/panes/{P}/stop"), json!({})).await?;
    check_write(r.ok()?, "stopped", &request_id)?;
    let stopped = Instant::now();
    wait_idle(&c, P).await?;
    ensure!(
        stopped.elapsed() < Duration::from_millis(1000),
        "the pane went idle {:?} after stop",
        stopped.elapsed()
    );
    let items = items_after(&c, P, m).await?;
    let partial: Vec<&Value> = items.iter().filter(|i| is_partial(i)).collect();
    ensure!(partial.is_empty(), "after stop, items are still partial: {}", cut(&json!(partial)));
    Ok(())
}

pub(crate) async fn stop_closes_open_asks_as_aborted(cx: Ctx) -> CaseResult {
    let c = cx.client()?;
    let ask = raise(&c, P, "choice").await?;
    let id = str_of(&ask, "id")?.to_owned();
    let m = mark(&c, P).await?;
    let (request_id, r) = post_write(&c, &format!("/v1/panes/{P}/stop"), json!({})).await?;
    check_write(r.ok()?, "stopped", &request_id)?;
    let closed = wait_ask_closed(&c, P, m, &id).await?;
    ensure!(
        closed["decidedBy"] == "program" && closed["outcome"] == "aborted",
        "ask-closed event {}",
        cut(&closed)
    );
    let want = format!("Stopped before an answer: {}", str_of(&ask, "title")?);
    wait_item(&c, P, m, "notice", &want).await?;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let n = items_after(&c, P, m).await?.iter().filter(|i| kind_is(i, "notice")).count();
    ensure!(n == 1, "{n} notices after one aborted ask (expected exactly one)");
    let late = answer(&c, &id, &rid("late"), json!({"optionIds": ["yes"]}), None).await?;
    let body = late.refused(409, "ask-closed")?;
    ensure!(body["decidedBy"] == "program", "ask-closed decidedBy {} (expected program)", body["decidedBy"]);
    Ok(())
}

/// POST actions/refund on ticket-1 and return the card it raises.
async fn refund_card(c: &Client) -> CaseResult<Value> {
    wait_idle(c, P).await?;
    let before = ids(&open_asks(&state(c).await?));
    let (request_id, r) = post_write(c, &format!("/v1/panes/{P}/actions/refund"), json!({})).await?;
    check_write(r.ok()?, "done", &request_id)?;
    let ask = wait_for("the refund card", Duration::from_secs(5), || async {
        Ok(open_asks(&state(c).await?)
            .into_iter()
            .find(|a| a["pane"] == P && !before.contains(&a["id"].as_str().unwrap_or("").to_owned())))
    })
    .await?;
    super::asks::check_card(&ask, P, "choice")?;
    ensure!(ask["title"] == "refund wants to run", "refund card title {}", ask["title"]);
    ensure!(
        ask["tool"]
            == json!({"name": "refund", "call": "refund(order: \"5521\", amount: 40)", "args": [["order", "\"5521\""], ["amount", "40"]]}),
        "refund card tool {}",
        cut(&ask["tool"])
    );
    ensure!(ask["push"]["title"] == "refund needs a yes", "refund card push {}", ask["push"]);
    ensure!(
        ask["options"] == json!([{"id": "allow", "label": "Allow"}, {"id": "deny", "label": "Deny"}]),
        "refund card options {}",
        ask["options"]
    );
    Ok(ask)
}

pub(crate) async fn action_refund_allow_issues_refund(cx: Ctx) -> CaseResult {
    let c = cx.client()?;
    let ask = refund_card(&c).await?;
    let m = mark(&c, P).await?;
    answer_ok(&c, &ask, json!({"optionIds": ["allow"]})).await?;
    wait_item(&c, P, m, "notice", "Refund of 40 issued").await?;
    Ok(())
}

pub(crate) async fn action_refund_deny_not_issued(cx: Ctx) -> CaseResult {
    let c = cx.client()?;
    let ask = refund_card(&c).await?;
    let m = mark(&c, P).await?;
    answer_ok(&c, &ask, json!({"optionIds": ["deny"]})).await?;
    wait_item(&c, P, m, "notice", "Refund not issued").await?;
    Ok(())
}

pub(crate) async fn announcements_has_no_handler_not_supported(cx: Ctx) -> CaseResult {
    let c = cx.client()?;
    let mut wrong = Vec::new();
    for (route, body) in [
        ("send", json!({"text": "hi"})),
        ("steer", json!({"text": "hi"})),
        ("stop", json!({})),
        ("actions/refund", json!({})),
        ("actions/anything", json!({})),
    ] {
        let (_, r) = post_write(&c, &format!("/v1/panes/announcements/{route}"), body).await?;
        if let Err(why) = r.refused(409, "not-supported") {
            wrong.push(why);
        }
    }
    ensure!(wrong.is_empty(), "{}", wrong.join("; "));
    Ok(())
}

async fn rename(
    c: &Client,
    target: &str,
    id: &str,
    title: &str,
) -> CaseResult<durable_cli::conformance::client::Resp> {
    post_write(c, "/v1/rename", json!({"target": target, "id": id, "title": title})).await.map(|(_, r)| r)
}

pub(crate) async fn rename_workspace_tab_pane_renamed(cx: Ctx) -> CaseResult {
    let c = cx.client()?;
    let long = "é".repeat(200); // 400 bytes: truncated to 256 on a UTF-8 boundary
    let result = async {
        for (target, id, title) in [
            ("workspace", "support", "Support desk"),
            ("tab", "support:main", "Open tickets"),
            ("pane", P, long.as_str()),
        ] {
            let (request_id, r) =
                post_write(&c, "/v1/rename", json!({"target": target, "id": id, "title": title})).await?;
            check_write(r.ok()?, "renamed", &request_id)?;
        }
        let s = state(&c).await?;
        let ws = s["workspaces"]
            .as_array()
            .and_then(|w| w.iter().find(|w| w["id"] == "support"))
            .cloned()
            .unwrap_or_default();
        ensure!(ws["title"] == "Support desk", "workspace title {}", ws["title"]);
        let tab = ws["tabs"]
            .as_array()
            .and_then(|t| t.iter().find(|t| t["id"] == "support:main"))
            .cloned()
            .unwrap_or_default();
        ensure!(tab["title"] == "Open tickets", "tab title {}", tab["title"]);
        let title = pane_in(&s, P).map(|p| p["title"].clone()).unwrap_or_default();
        ensure!(
            title == json!("é".repeat(128)),
            "a 400-byte title became {} (expected its first 256 bytes)",
            cut(&title)
        );
        rename(&c, "window", P, "x").await?.refused(400, "bad-request")?;
        rename(&c, "pane", "ticket-9999", "x").await?.refused(404, "not-found")?;
        Ok(())
    }
    .await;
    for (target, id, title) in
        [("workspace", "support", "Support"), ("tab", "support:main", "Tickets"), ("pane", P, "Maria Lopez")]
    {
        rename(&c, target, id, title).await?;
    }
    result
}

/// Starts a new ticket and returns its pane id.
pub(crate) async fn new_ticket(c: &Client) -> CaseResult<String> {
    let (request_id, r) = post_write(c, "/v1/starters/new-ticket", json!({"text": "a new ticket"})).await?;
    let body = r.ok()?;
    check_write(body, "started", &request_id)?;
    Ok(str_of(body, "pane")?.to_owned())
}

fn ticket_numbers(s: &Value) -> Vec<u64> {
    let mut all = ids(s["panes"].as_array().map(Vec::as_slice).unwrap_or(&[]));
    all.extend(ids(s["closed"].as_array().map(Vec::as_slice).unwrap_or(&[])));
    all.iter().filter_map(|id| id.strip_prefix("ticket-")?.parse().ok()).collect()
}

pub(crate) async fn starter_new_ticket_started_with_next_pane(cx: Ctx) -> CaseResult {
    let c = cx.client()?;
    let s = state(&c).await?;
    let next = ticket_numbers(&s).into_iter().max().unwrap_or(1) + 1;
    let (request_id, r) =
        post_write(&c, "/v1/starters/new-ticket", json!({"text": "my parcel is late"})).await?;
    let first = r.ok()?.clone();
    check_write(&first, "started", &request_id)?;
    let want = format!("ticket-{next}");
    ensure!(first["pane"] == want.as_str(), "started pane {} (expected {want})", first["pane"]);
    let s = state(&c).await?;
    let p = pane_in(&s, &want).ok_or_else(|| format!("{want} is not in the state"))?;
    ensure!(p["tab"] == "support:main", "{want} tab {}", p["tab"]);
    // A replay starts nothing new.
    let again = c
        .post("/v1/starters/new-ticket", &json!({"requestId": request_id, "text": "my parcel is late"}))
        .await?;
    let again = again.ok()?;
    ensure!(again["pane"] == want.as_str() && again["replayed"] == true, "starter replay {}", cut(again));
    let after = state(&c).await?;
    ensure!(
        ticket_numbers(&after).into_iter().max() == Some(next),
        "a replayed starter created another ticket: {:?}",
        ticket_numbers(&after)
    );
    post_write(&c, "/v1/starters/no-such-starter", json!({})).await?.1.refused(404, "not-found")?;
    Ok(())
}

pub(crate) async fn close_and_reopen_ticket_closes_its_asks(cx: Ctx) -> CaseResult {
    let c = cx.client()?;
    let p = new_ticket(&c).await?;
    wait_idle(&c, &p).await?;
    let ask = raise(&c, &p, "choice").await?;
    let seq0 = u64_of(&state(&c).await?, "seq")?;
    let (request_id, r) = post_write(&c, "/v1/close", json!({"target": "pane", "id": p})).await?;
    check_write(r.ok()?, "closed", &request_id)?;
    let s = state(&c).await?;
    ensure!(pane_in(&s, &p).is_none(), "closed pane {p} is still in panes");
    let closed = arr_of(&s, "closed")?.iter().find(|x| x["id"] == p.as_str()).cloned();
    let closed = closed.ok_or_else(|| format!("{p} is not in the closed list {}", cut(&s["closed"])))?;
    ensure!(
        closed["title"].is_string() && closed.get("sessionId").is_some(),
        "closed entry {}",
        cut(&closed)
    );
    ensure!(
        !ids(arr_of(&s, "asks")?).contains(&str_of(&ask, "id")?.to_owned()),
        "the closed pane's ask is still open"
    );
    let late = answer(&c, str_of(&ask, "id")?, &rid("late"), json!({"optionIds": ["yes"]}), None).await?;
    let body = late.refused(409, "ask-closed")?;
    ensure!(
        body["decidedBy"] == "program",
        "the closed pane's ask: decidedBy {} (expected program)",
        body["decidedBy"]
    );
    let d = c.get(&format!("/v1/state?since={seq0}")).await?;
    let d = d.ok()?;
    ensure!(
        d["removed"].as_array().is_some_and(|r| r.contains(&json!(p))),
        "since answer removed {} lacks {p}",
        d["removed"]
    );
    ensure!(
        d.get("closed").is_some() && d.get("workspaces").is_some(),
        "a close is a layout change; since answer {}",
        cut(d)
    );
    c.get(&format!("/v1/panes/{p}/events?after=0")).await?.refused(404, "not-found")?;
    // A closed conversation is read from the history provider.
    let h = c.get(&format!("/v1/history/{p}")).await?;
    ensure!(h.ok()?["row"]["state"] == "closed", "history of closed {p}: row {}", cut(&h.json["row"]));

    let (request_id, r) = post_write(&c, "/v1/reopen", json!({"id": p})).await?;
    check_write(r.ok()?, "reopened", &request_id)?;
    let s = state(&c).await?;
    ensure!(pane_in(&s, &p).is_some(), "reopened pane {p} is not in panes");
    ensure!(!ids(arr_of(&s, "closed")?).contains(&p), "reopened pane {p} is still in the closed list");
    post_write(&c, "/v1/reopen", json!({"id": "ticket-9999"})).await?.1.refused(404, "not-found")?;
    pane(&c, &p).await.map(|_| ())
}

pub(crate) async fn refusal_stores_nothing_same_request_id_retries(cx: Ctx) -> CaseResult {
    let c = cx.client()?;
    wait_idle(&c, P).await?;
    let request_id = rid("steer");
    let path = format!("/v1/panes/{P}/steer");
    let body = json!({"requestId": request_id, "text": "retry me"});
    c.post(&path, &body).await?.refused(409, "refused")?;
    send_ok(&c, P, "a turn to steer").await?;
    wait_state(&c, P, "working", Duration::from_secs(3)).await?;
    let r = c.post(&path, &body).await?;
    let result = r.ok().map(|b| check_write(b, "steered", &request_id));
    wait_idle(&c, P).await?;
    result?
}
