//! §9 receipts: replay with the same body, found by id whatever the route,
//! `receipt-dropped`, and receipts that survive a SIGKILL.

use std::time::Duration;

use serde_json::json;

use super::Ctx;
use crate::check::{CaseResult, cut, ensure, mark, pane, rid, send, wait_item};
use durable_cli::conformance::check::expect_replay;

const P: &str = "ticket-1";

pub(crate) async fn receipt_dropped_after_eviction(cx: Ctx) -> CaseResult {
    let desk = cx.desk(&["--receipts-per-group", "2"]).await?;
    let c = desk.client.clone();
    // A send's receipt lives in group pane:ticket-1; renames do not evict it.
    let send_id = rid("s");
    let sent = send(&c, P, "kept", &send_id).await?.ok()?.clone();
    let mut firsts = Vec::new();
    for title in ["One", "Two", "Three"] {
        let body = json!({"requestId": rid("r"), "target": "pane", "id": P, "title": title});
        let first = c.post("/v1/rename", &body).await?.ok()?.clone();
        firsts.push((body, first));
    }
    let (oldest, _) = &firsts[0];
    c.post("/v1/rename", oldest).await?.refused(500, "receipt-dropped")?;
    let title = pane(&c, P).await?["title"].clone();
    ensure!(title == "Three", "a dropped receipt executed again: title {title}");
    let (newest, newest_first) = &firsts[2];
    expect_replay(&c, "/v1/rename", newest, newest_first).await?;
    expect_replay(&c, &format!("/v1/panes/{P}/send"), &json!({"requestId": send_id, "text": "kept"}), &sent)
        .await?;
    Ok(())
}

pub(crate) async fn answer_held_across_restart_then_applied(cx: Ctx) -> CaseResult {
    let desk = cx.desk(&[]).await?;
    let ask = crate::check::raise(&desk.client, P, "choice").await?;
    let (id, hash) = (ask["id"].as_str().unwrap_or("").to_owned(), ask["hash"].clone());
    let desk = desk.restart(&["--raise-delay-ms", "1500"]).await?;
    let c = desk.client.clone();
    let m = mark(&c, P).await?;
    let request_id = rid("held");
    let body = json!({"requestId": request_id, "answer": {"optionIds": ["yes"]}, "hash": hash});
    let r = c.post(&format!("/v1/asks/{id}"), &body).await?;
    let held = r.ok_with(202).map_err(|e| format!("answer during the raise delay: {e}"))?;
    ensure!(held["result"] == "held", "result {} (expected held)", held["result"]);
    let again = c.post(&format!("/v1/asks/{id}"), &body).await?;
    ensure!(
        again.status == 202 && again.json["result"] == "held",
        "repeat while held: {} {}",
        again.status,
        again.body_text()
    );
    wait_item(&c, P, m, "reply", "Answer: {\"optionIds\":[\"yes\"]}").await?;
    let closed = crate::check::wait_ask_closed(&c, P, m, &id).await?;
    ensure!(
        closed["decidedBy"] == "phone",
        "the held answer closed the ask with decidedBy {}",
        closed["decidedBy"]
    );
    let receipt = c.post(&format!("/v1/asks/{id}"), &body).await?;
    let receipt = receipt.ok()?;
    ensure!(
        receipt["result"] == "answered" && receipt["replayed"] == true && receipt["decidedBy"] == "phone",
        "once applied, the request id replays {} (expected 200 answered, replayed)",
        cut(receipt)
    );
    Ok(())
}

pub(crate) async fn held_answer_with_other_hash_discarded_then_id_free(cx: Ctx) -> CaseResult {
    let desk = cx.desk(&[]).await?;
    let ask = crate::check::raise(&desk.client, P, "choice").await?;
    let id = ask["id"].as_str().unwrap_or("").to_owned();
    let desk = desk.restart(&["--raise-delay-ms", "1500"]).await?;
    let c = desk.client.clone();
    let request_id = rid("held");
    let wrong = json!({"requestId": request_id, "answer": {"optionIds": ["yes"]}, "hash": "e".repeat(64)});
    c.post(&format!("/v1/asks/{id}"), &wrong).await?.ok_with(202)?;
    let shown = crate::check::wait_for("the ask raised again", Duration::from_secs(6), || async {
        let s = crate::check::state(&c).await?;
        Ok(crate::check::open_asks(&s).into_iter().find(|a| a["id"] == id.as_str()))
    })
    .await?;
    ensure!(
        shown["hash"] == ask["hash"],
        "the ask raised again has hash {} (before: {})",
        shown["hash"],
        ask["hash"]
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    let still = crate::check::open_asks(&crate::check::state(&c).await?);
    ensure!(still.iter().any(|a| a["id"] == id.as_str()), "a held answer with another hash decided the ask");
    // Discarded: the request id is free again.
    let right = json!({"requestId": request_id, "answer": {"optionIds": ["no"]}, "hash": ask["hash"]});
    let r = c.post(&format!("/v1/asks/{id}"), &right).await?;
    crate::check::check_answered(r.ok()?, &id, &request_id, false)?;
    Ok(())
}

pub(crate) async fn held_answer_dropped_after_hold_ms(cx: Ctx) -> CaseResult {
    let desk = cx.desk(&[]).await?;
    let ask = crate::check::raise(&desk.client, P, "choice").await?;
    let id = ask["id"].as_str().unwrap_or("").to_owned();
    let desk = desk.restart(&["--raise-delay-ms", "1500", "--hold-ms", "300"]).await?;
    let c = desk.client.clone();
    let body = json!({"requestId": rid("held"), "answer": {"optionIds": ["yes"]}, "hash": ask["hash"]});
    c.post(&format!("/v1/asks/{id}"), &body).await?.ok_with(202)?;
    crate::check::wait_for("the ask raised again", Duration::from_secs(6), || async {
        let s = crate::check::state(&c).await?;
        Ok(crate::check::open_asks(&s).into_iter().find(|a| a["id"] == id.as_str()))
    })
    .await?;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let still = crate::check::open_asks(&crate::check::state(&c).await?);
    ensure!(
        still.iter().any(|a| a["id"] == id.as_str()),
        "an answer held past --hold-ms 300 still decided the ask"
    );
    Ok(())
}
