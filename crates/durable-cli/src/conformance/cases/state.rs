//! §5 state: the full answer, its ETag, `304`s and deltas.

use hyper::Method;
use serde_json::json;

use super::Ctx;
use crate::conformance::check::{CaseResult, arr_of, bool_of, ensure, pane_in, state, str_of, u64_of};
use crate::conformance::client::{Auth, Client, Resp};

const EVERY_FIELD: [&str; 11] =
    ["ok", "epoch", "seq", "ready", "full", "workspaces", "panes", "removed", "closed", "starters", "asks"];

/// An absolute path on the agent's machine, whatever its system: `/…`,
/// `C:\…` or `C:/…`, or a UNC path `\\server\share…`.
fn is_absolute_anywhere(path: &str) -> bool {
    let b = path.as_bytes();
    path.starts_with('/')
        || path.starts_with("\\\\")
        || (b.len() >= 3 && b[0].is_ascii_alphabetic() && b[1] == b':' && (b[2] == b'\\' || b[2] == b'/'))
}

pub(crate) async fn state_full_has_every_field(cx: Ctx) -> CaseResult {
    let s = state(&cx.client()).await?;
    let missing: Vec<&str> = EVERY_FIELD.iter().copied().filter(|f| s.get(*f).is_none()).collect();
    ensure!(missing.is_empty(), "a full answer lacks {missing:?}");
    ensure!(s["full"] == true, "plain GET /v1/state: full is {}", s["full"]);
    bool_of(&s, "ready")?;
    ensure!(s["removed"] == json!([]), "a full answer has removed {}", s["removed"]);
    u64_of(&s, "seq")?;
    arr_of(&s, "asks")?;
    arr_of(&s, "closed")?;
    arr_of(&s, "starters")?;
    let panes = arr_of(&s, "panes")?;
    let mut tab_panes = Vec::new();
    for w in arr_of(&s, "workspaces")? {
        str_of(w, "id")?;
        str_of(w, "title")?;
        for t in arr_of(w, "tabs")? {
            str_of(t, "id")?;
            str_of(t, "title")?;
            for p in arr_of(t, "panes")? {
                let p =
                    p.as_str().ok_or_else(|| format!("tab {} lists a pane {p} that is no id", t["id"]))?;
                tab_panes.push((p.to_owned(), t["id"].clone()));
            }
        }
    }
    for p in panes {
        let id = str_of(p, "id")?;
        str_of(p, "title")?;
        ensure!(p["state"] == "idle" || p["state"] == "working", "pane {id}: state {}", p["state"]);
        ensure!(p["turnId"].is_string() || p["turnId"].is_null(), "pane {id}: turnId {}", p["turnId"]);
        u64_of(p, "lastSeq")?;
        arr_of(p, "openAsks")?;
        for a in arr_of(p, "actions")? {
            str_of(a, "id")?;
            str_of(a, "label")?;
        }
        if let Some(cwd) = p.get("cwd") {
            ensure!(cwd.as_str().is_some_and(is_absolute_anywhere), "pane {id}: cwd {cwd} is not absolute");
        }
        let tab = tab_panes.iter().find(|(pane, _)| pane == id).map(|(_, t)| t.clone());
        ensure!(tab.is_some(), "pane {id} is in no tab's panes");
        ensure!(p["tab"] == tab.unwrap_or_default(), "pane {id}: tab {} differs from the layout", p["tab"]);
    }
    for (p, tab) in &tab_panes {
        ensure!(pane_in(&s, p).is_some(), "tab {tab} lists pane {p}, which is not in panes");
    }
    for st in arr_of(&s, "starters")? {
        str_of(st, "id")?;
    }
    Ok(())
}

pub(crate) async fn state_etag_is_epoch_dash_seq(cx: Ctx) -> CaseResult {
    let r = cx.client().get("/v1/state").await?;
    let s = r.ok()?;
    let want = format!("\"{}-{}\"", str_of(s, "epoch")?, u64_of(s, "seq")?);
    ensure!(r.header("etag") == Some(want.as_str()), "ETag {:?} (expected {want})", r.header("etag"));
    Ok(())
}

async fn get_if_none_match(c: &Client, path: &str, etag: &str) -> CaseResult<Resp> {
    c.request(Method::GET, path, None, &[("if-none-match", etag)], Auth::Default).await
}

pub(crate) async fn state_304_when_etag_matches(cx: Ctx) -> CaseResult {
    let c = cx.client();
    // A busy agent may move between the two polls: three tries.
    let mut last = String::new();
    for _ in 0..3 {
        let r = c.get("/v1/state").await?;
        r.ok()?;
        let etag = r.header("etag").ok_or("no ETag on GET /v1/state")?.to_owned();
        let again = get_if_none_match(&c, "/v1/state", &etag).await?;
        if again.status == 304 {
            ensure!(again.body.is_empty(), "304 with a body: {}", again.body_text());
            let other = get_if_none_match(&c, "/v1/state", "\"0000000000000000-0\"").await?;
            ensure!(
                other.status == 200,
                "If-None-Match with another tag: status {} (expected 200)",
                other.status
            );
            return Ok(());
        }
        last = format!(
            "If-None-Match {etag}: status {} (expected 304, or 200 with a new ETag {:?})",
            again.status,
            again.header("etag")
        );
        ensure!(again.status == 200 && again.header("etag") != Some(etag.as_str()), "{last}");
    }
    Err(last)
}

pub(crate) async fn state_full_when_since_is_zero_or_ahead(cx: Ctx) -> CaseResult {
    let c = cx.client();
    let seq = u64_of(&state(&c).await?, "seq")?;
    for since in [0, seq.saturating_add(1000)] {
        let r = c.get(&format!("/v1/state?since={since}")).await?;
        let d = r.ok()?;
        ensure!(d["full"] == true, "since={since} (current seq {seq}): full is {}", d["full"]);
        let missing: Vec<&str> = EVERY_FIELD.iter().copied().filter(|f| d.get(*f).is_none()).collect();
        ensure!(missing.is_empty(), "since={since}: a full answer lacks {missing:?}");
    }
    Ok(())
}

pub(crate) async fn state_since_current_seq_is_a_delta(cx: Ctx) -> CaseResult {
    let c = cx.client();
    let r = c.get("/v1/state").await?;
    let seq = u64_of(r.ok()?, "seq")?;
    let d = c.get(&format!("/v1/state?since={seq}")).await?;
    let body = d.ok()?;
    ensure!(body["full"] == false, "since={seq} (the current seq): full is {}", body["full"]);
    for f in ["epoch", "seq", "ready", "panes", "removed", "asks"] {
        ensure!(body.get(f).is_some(), "since answer lacks `{f}`");
    }
    ensure!(u64_of(body, "seq")? >= seq, "seq went back from {seq} to {}", body["seq"]);
    let etag = d.header("etag").ok_or("no ETag on a since answer")?;
    let want = format!("\"{}-{}\"", str_of(body, "epoch")?, u64_of(body, "seq")?);
    ensure!(etag == want, "since ETag {etag} (expected {want})");
    Ok(())
}
