//! §5 the state poll: every field, the ETag and 304, `since` deltas.

use hyper::Method;
use serde_json::{Value, json};

use super::Ctx;
use crate::check::{CaseResult, arr_of, cut, ensure, ids, pane_in, rid, send_ok, state, u64_of, wait_idle};
use durable_cli::conformance::client::{Auth, Client, Resp};

const EVERY_FIELD: [&str; 11] =
    ["ok", "epoch", "seq", "ready", "full", "workspaces", "panes", "removed", "closed", "starters", "asks"];
const LAYOUT_FIELDS: [&str; 3] = ["workspaces", "closed", "starters"];

fn tab<'a>(state: &'a Value, tab_id: &str) -> Option<&'a Value> {
    state["workspaces"]
        .as_array()?
        .iter()
        .flat_map(|w| w["tabs"].as_array().into_iter().flatten())
        .find(|t| t["id"] == tab_id)
}

pub(crate) async fn state_shows_the_desks_layout(cx: Ctx) -> CaseResult {
    let c = cx.client()?;
    let s = state(&c).await?;
    let missing: Vec<&str> = EVERY_FIELD.iter().copied().filter(|f| s.get(*f).is_none()).collect();
    ensure!(missing.is_empty(), "a full answer lacks {missing:?}");
    ensure!(s["full"] == true, "plain GET /v1/state: full is {}", s["full"]);
    ensure!(s["ready"] == true, "ready is {}", s["ready"]);
    ensure!(s["removed"] == json!([]), "a full answer has removed {}", s["removed"]);
    u64_of(&s, "seq")?;
    arr_of(&s, "asks")?;
    arr_of(&s, "closed")?;

    let support = s["workspaces"].as_array().and_then(|w| w.iter().find(|w| w["id"] == "support"));
    let support = support.ok_or_else(|| format!("no workspace `support` in {}", cut(&s["workspaces"])))?;
    ensure!(support["title"] == "Support", "workspace support is titled {}", support["title"]);
    let main = tab(&s, "support:main").ok_or("no tab `support:main`")?;
    ensure!(main["title"] == "Tickets", "tab support:main is titled {}", main["title"]);
    ensure!(
        main["panes"].as_array().is_some_and(|p| p.contains(&json!("ticket-1"))),
        "support:main panes {}",
        main["panes"]
    );
    let board = tab(&s, "support:board").ok_or("no tab `support:board`")?;
    ensure!(board["panes"] == json!(["announcements"]), "support:board panes {}", board["panes"]);

    let t1 = pane_in(&s, "ticket-1").ok_or("no pane ticket-1")?;
    ensure!(t1["tab"] == "support:main", "ticket-1 tab {}", t1["tab"]);
    ensure!(t1["harness"] == "desk", "ticket-1 harness {}", t1["harness"]);
    ensure!(
        t1["sessionId"] == "ticket-1",
        "ticket-1 sessionId {} (a history provider is set)",
        t1["sessionId"]
    );
    ensure!(t1["state"] == "idle" || t1["state"] == "working", "ticket-1 state {}", t1["state"]);
    ensure!(t1["turnId"].is_string() || t1["turnId"].is_null(), "ticket-1 turnId {}", t1["turnId"]);
    u64_of(t1, "lastSeq")?;
    arr_of(t1, "openAsks")?;
    if let Some(cwd) = t1.get("cwd") {
        ensure!(cwd.as_str().is_some_and(|p| p.starts_with('/')), "cwd {cwd} is sent but not absolute");
    }
    let refund =
        arr_of(t1, "actions")?.iter().find(|a| a["id"] == "refund").ok_or("ticket-1 has no refund action")?;
    ensure!(refund["icon"] == "check", "refund icon {}", refund["icon"]);
    let ann = pane_in(&s, "announcements").ok_or("no pane announcements")?;
    ensure!(ann["tab"] == "support:board", "announcements tab {}", ann["tab"]);
    ensure!(ids(arr_of(&s, "starters")?).contains(&"new-ticket".to_owned()), "starters {}", s["starters"]);
    Ok(())
}

async fn get_if_none_match(c: &Client, path: &str, etag: &str) -> CaseResult<Resp> {
    c.request(Method::GET, path, None, &[("if-none-match", etag)], Auth::Default).await
}

pub(crate) async fn state_since_send_changes_only_that_pane(cx: Ctx) -> CaseResult {
    let c = cx.client()?;
    wait_idle(&c, "ticket-1").await?;
    let seq0 = u64_of(&state(&c).await?, "seq")?;
    send_ok(&c, "ticket-1", "since probe").await?;
    wait_idle(&c, "ticket-1").await?;
    let r = c.get(&format!("/v1/state?since={seq0}")).await?;
    let d = r.ok()?;
    ensure!(d["full"] == false, "since={seq0}: full is {}", d["full"]);
    for f in ["epoch", "seq", "ready", "panes", "removed", "asks"] {
        ensure!(d.get(f).is_some(), "since answer lacks `{f}`");
    }
    ensure!(u64_of(d, "seq")? > seq0, "seq {} did not grow past {seq0} after a send", d["seq"]);
    ensure!(
        ids(arr_of(d, "panes")?) == ["ticket-1"],
        "since answer panes {:?} (expected only ticket-1)",
        ids(arr_of(d, "panes")?)
    );
    ensure!(d["removed"] == json!([]), "removed {}", d["removed"]);
    let layout: Vec<&str> = LAYOUT_FIELDS.iter().copied().filter(|f| d.get(*f).is_some()).collect();
    ensure!(layout.is_empty(), "a send is no layout change, yet the since answer has {layout:?}");
    // The same ETag as the full answer, and If-None-Match honoured.
    let full = c.get("/v1/state").await?;
    let etag = full.header("etag").ok_or("no ETag")?.to_owned();
    ensure!(
        r.header("etag") == Some(etag.as_str()),
        "since ETag {:?} differs from the full {etag}",
        r.header("etag")
    );
    let again = get_if_none_match(&c, &format!("/v1/state?since={seq0}"), &etag).await?;
    ensure!(again.status == 304, "since with If-None-Match: status {} (expected 304)", again.status);
    Ok(())
}

pub(crate) async fn state_since_layout_change_brings_layout_fields(cx: Ctx) -> CaseResult {
    let c = cx.client()?;
    let seq0 = u64_of(&state(&c).await?, "seq")?;
    let rename = |title: &str| json!({"requestId": rid("rename"), "target": "tab", "id": "support:board", "title": title});
    c.post("/v1/rename", &rename("Board (layout probe)")).await?.ok()?;
    let r = c.get(&format!("/v1/state?since={seq0}")).await?;
    let d = r.ok()?.clone();
    c.post("/v1/rename", &rename("Board")).await?.ok()?;
    ensure!(d["full"] == false, "since={seq0}: full is {}", d["full"]);
    let missing: Vec<&str> = LAYOUT_FIELDS.iter().copied().filter(|f| d.get(*f).is_none()).collect();
    ensure!(missing.is_empty(), "a tab rename is a layout change, yet the since answer lacks {missing:?}");
    let board = tab(&d, "support:board").ok_or("no tab support:board in the since answer")?;
    ensure!(board["title"] == "Board (layout probe)", "board title {}", board["title"]);
    Ok(())
}
