//! Cases that need a desk of their own: declared caps, `busy`, stop beside a
//! stuck write.

use std::time::{Duration, Instant};

use bytes::Bytes;
use hyper::Method;
use serde_json::json;

use super::Ctx;
use super::hello::expect_caps;
use crate::check::{CaseResult, ensure, rid, send, state};
use durable_cli::conformance::client::Auth;

const P: &str = "ticket-1";

pub(crate) async fn caps_declared_list_only_and_off_routes_not_supported(cx: Ctx) -> CaseResult {
    let desk = cx.desk(&["--caps", "asks,send"]).await?;
    let c = desk.client.clone();
    expect_caps(c.get("/hello").await?.ok()?, &["asks", "send"])?;
    let before = c.get("/v1/state").await?;
    let etag = before.header("etag").map(str::to_owned);
    let mut wrong = Vec::new();
    let writes = [
        (format!("/v1/panes/{P}/steer"), json!({"requestId": rid("c"), "text": "x"})),
        (format!("/v1/panes/{P}/stop"), json!({"requestId": rid("c")})),
        (format!("/v1/panes/{P}/actions/refund"), json!({"requestId": rid("c")})),
        (
            "/v1/rename".to_owned(),
            json!({"requestId": rid("c"), "target": "pane", "id": P, "title": "Renamed"}),
        ),
        ("/v1/close".to_owned(), json!({"requestId": rid("c"), "target": "pane", "id": P})),
        ("/v1/reopen".to_owned(), json!({"requestId": rid("c"), "id": P})),
        ("/v1/starters/new-ticket".to_owned(), json!({"requestId": rid("c")})),
    ];
    for (path, body) in &writes {
        if let Err(why) = c.post(path, body).await?.refused(409, "not-supported") {
            wrong.push(why);
        }
    }
    for path in ["/v1/history", "/v1/history/ticket-1"] {
        if let Err(why) = c.get(path).await?.refused(409, "not-supported") {
            wrong.push(why);
        }
    }
    // The capability is checked before the body, and the route before the capability.
    let r = c.post_raw(&format!("/v1/panes/{P}/steer"), Bytes::from_static(b"not json")).await?;
    if let Err(why) = r.refused(409, "not-supported") {
        wrong.push(format!("cap before body: {why}"));
    }
    let r = c.request(Method::GET, "/v1/rename", None, &[], Auth::Default).await?;
    if let Err(why) = r.refused(405, "method-not-allowed") {
        wrong.push(format!("route before cap: {why}"));
    }
    ensure!(wrong.is_empty(), "{}", wrong.join("; "));
    let after = c.get("/v1/state").await?;
    ensure!(
        after.header("etag").map(str::to_owned) == etag,
        "refused routes changed the state (ETag {etag:?} → {:?})",
        after.header("etag")
    );
    // The declared caps still work.
    let r = send(&c, P, "still here", &rid("s")).await?;
    ensure!(r.ok()?["result"] == "sent", "send with cap on: {}", r.body_text());
    Ok(())
}

pub(crate) async fn busy_409_after_5s_waiting_for_the_pane_lock(cx: Ctx) -> CaseResult {
    let desk = cx.desk(&["--accept-delay-ms", "6000"]).await?;
    let c = desk.client.clone();
    state(&c).await?;
    let first = async {
        let r = send(&c, P, "slow one", &rid("busy")).await?;
        r.ok().map(|b| b["result"].clone())
    };
    let second = async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let start = Instant::now();
        let r = send(&c, P, "waits", &rid("busy")).await?;
        Ok::<_, String>((r, start.elapsed()))
    };
    let (first, second) = tokio::join!(first, second);
    let (r, waited) = second?;
    r.refused(409, "busy")?;
    ensure!(
        waited >= Duration::from_millis(4500) && waited <= Duration::from_millis(6500),
        "busy came after {:.2} s (expected about 5 s from its arrival)",
        waited.as_secs_f64()
    );
    let result = first?;
    ensure!(result == "sent", "the first send (6 s to accept) answered {result}");
    Ok(())
}

pub(crate) async fn stop_never_waits_behind_a_write_lock(cx: Ctx) -> CaseResult {
    let desk = cx.desk(&["--accept-delay-ms", "3000"]).await?;
    let c = desk.client.clone();
    state(&c).await?;
    let slow = async { send(&c, P, "slow", &rid("slow")).await };
    let stop = async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let start = Instant::now();
        let r = c.post(&format!("/v1/panes/{P}/stop"), &json!({"requestId": rid("stop")})).await?;
        Ok::<_, String>((r, start.elapsed()))
    };
    let (slow, stop) = tokio::join!(slow, stop);
    let (r, took) = stop?;
    ensure!(r.ok()?["result"] == "stopped", "stop: {}", r.body_text());
    ensure!(
        took < Duration::from_millis(1500),
        "stop took {:.2} s behind a send that holds the lock",
        took.as_secs_f64()
    );
    slow?;
    Ok(())
}

pub(crate) async fn repeat_while_processing_waits_for_the_first(cx: Ctx) -> CaseResult {
    let desk = cx.desk(&["--accept-delay-ms", "2500"]).await?;
    let c = desk.client.clone();
    let body = json!({"requestId": rid("same"), "target": "pane", "id": P, "title": "Once"});
    let first = async { c.post("/v1/rename", &body).await };
    let repeat = async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        c.post("/v1/rename", &body).await
    };
    let (first, repeat) = tokio::join!(first, repeat);
    let first = first?.ok()?.clone();
    let repeat = repeat?;
    let mut want = first.clone();
    want["replayed"] = json!(true);
    ensure!(
        repeat.ok()? == &want,
        "a repeat during processing answered {} (expected the first's receipt, replayed: {})",
        repeat.body_text(),
        want
    );
    Ok(())
}

pub(crate) async fn close_tab_removes_its_panes(cx: Ctx) -> CaseResult {
    let desk = cx.desk(&[]).await?;
    let c = desk.client.clone();
    let r = c
        .post("/v1/close", &json!({"requestId": rid("close"), "target": "tab", "id": "support:board"}))
        .await?;
    ensure!(r.ok()?["result"] == "closed", "close tab: {}", r.body_text());
    let s = state(&c).await?;
    let tabs: Vec<String> = s["workspaces"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|w| w["tabs"].as_array().cloned().unwrap_or_default())
        .filter_map(|t| t["id"].as_str().map(str::to_owned))
        .collect();
    ensure!(!tabs.contains(&"support:board".to_owned()), "the closed tab is still in the layout: {tabs:?}");
    ensure!(crate::check::pane_in(&s, "announcements").is_none(), "the closed tab's pane is still in panes");
    ensure!(crate::check::pane_in(&s, P).is_some(), "closing support:board removed {P}");
    Ok(())
}

pub(crate) async fn events_behind_the_tail_get_the_view(cx: Ctx) -> CaseResult {
    let desk = cx.desk(&["--turn-ms", "20"]).await?;
    let c = desk.client.clone();
    let mut last = 0;
    for n in 0..200 {
        if last > 560 {
            break;
        }
        let r = send(&c, P, &format!("message {n}"), &rid("tail")).await?;
        r.ok()?;
        tokio::time::sleep(Duration::from_millis(30)).await;
        last = crate::check::mark(&c, P).await?;
    }
    crate::check::wait_idle(&c, P).await?;
    let last = crate::check::mark(&c, P).await?;
    ensure!(last > 560, "only {last} events after 200 sends");
    // The last 500 (TAIL_LIMIT) are kept as events.
    let kept = c.get(&format!("/v1/panes/{P}/events?after={}", last - 500)).await?;
    let kept = kept.ok()?;
    ensure!(
        kept["snapshot"] == false,
        "after = last - 500: snapshot {} (the tail keeps 500 events)",
        kept["snapshot"]
    );
    ensure!(
        kept["events"].as_array().map(Vec::len) == Some(500),
        "after = last - 500: {} events",
        kept["events"].as_array().map_or(0, Vec::len)
    );
    // Older than the tail: the pane's view.
    let view = c.get(&format!("/v1/panes/{P}/events?after=1")).await?;
    let view = view.ok()?;
    ensure!(view["snapshot"] == true, "after=1 with {last} events: snapshot {}", view["snapshot"]);
    ensure!(view["next"] == last, "the view's next {} (expected {last})", view["next"]);
    ensure!(view["dropped"] == false, "dropped {} with far fewer than 2000 items", view["dropped"]);
    let items = view["items"].as_array().ok_or("the view has no items")?;
    let users = items.iter().filter(|i| i["kind"] == "user").count();
    ensure!(users >= 70, "the view holds {users} user items (every send since the start is expected)");
    let first_user = items.iter().find(|i| i["kind"] == "user").map(|i| i["text"].clone());
    ensure!(
        first_user == Some(json!("message 0")),
        "the view's first user item is {first_user:?} (order of first appearance)"
    );
    Ok(())
}
