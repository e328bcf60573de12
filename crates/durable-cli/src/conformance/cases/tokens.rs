//! §1.2 HTTPS with a bearer token: refused without it or with another, the
//! connection closed after a `401`, the rotation token, and the token never
//! in the agent's output.

use hyper::Method;
use serde_json::json;

use super::{Ctx, json_bytes};
use crate::conformance::check::{CaseResult, ensure, pane_in, rid};
use crate::conformance::client::{Auth, Resp};

fn token_refused(r: &Resp) -> CaseResult {
    r.refused(401, "token-refused")?;
    let extra: Vec<&String> = r
        .json
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, _)| k)
        .filter(|k| !["ok", "code", "message"].contains(&k.as_str()))
        .collect();
    ensure!(extra.is_empty(), "401 carries more than ok/code/message: {extra:?}");
    ensure!(
        r.header("www-authenticate").is_some_and(|v| v.starts_with("Bearer")),
        "401 without WWW-Authenticate: Bearer ({:?})",
        r.header("www-authenticate")
    );
    Ok(())
}

pub(crate) async fn token_missing_401_token_refused(cx: Ctx) -> CaseResult {
    let c = cx.client();
    for path in ["/hello", "/v1/state", "/v1/nope"] {
        let r = c.request(Method::GET, path, None, &[], Auth::Missing).await?;
        token_refused(&r).map_err(|e| format!("no token, {path}: {e}"))?;
    }
    let r = c
        .request(Method::GET, "/hello", None, &[("authorization", "Basic Zm9vOmJhcg==")], Auth::Missing)
        .await?;
    token_refused(&r).map_err(|e| format!("Basic auth: {e}"))
}

pub(crate) async fn token_wrong_401_and_nothing_runs(cx: Ctx) -> CaseResult {
    let c = cx.client();
    let wrong = "0".repeat(64);
    token_refused(&c.request(Method::GET, "/hello", None, &[], Auth::Bearer(wrong.clone())).await?)?;
    if let Some(token) = &cx.token {
        let mut off = token.clone();
        let last = off.pop();
        off.push(if last == Some('x') { 'y' } else { 'x' });
        token_refused(&c.request(Method::GET, "/hello", None, &[], Auth::Bearer(off)).await?)
            .map_err(|e| format!("the token off by its last byte: {e}"))?;
    }
    // A write with a wrong token runs nothing: the title is not the one it sent.
    let p = cx.panes().into_iter().next().unwrap_or_else(|| "p".to_owned());
    let body =
        json!({"requestId": rid("t"), "target": "pane", "id": p, "title": "Not allowed (conformance)"});
    let r = c.request(Method::POST, "/v1/rename", Some(json_bytes(body)), &[], Auth::Bearer(wrong)).await?;
    token_refused(&r)?;
    let after = c.get("/v1/state").await?;
    let title = pane_in(&after.json, &p).map(|x| x["title"].clone()).unwrap_or_default();
    ensure!(title != "Not allowed (conformance)", "a write with a wrong token ran");
    Ok(())
}

pub(crate) async fn token_401_closes_the_connection(cx: Ctx) -> CaseResult {
    let (r, closed) = cx.client().closes_after_first(Auth::Missing).await?;
    token_refused(&r)?;
    ensure!(
        r.header("connection").is_some_and(|v| v.eq_ignore_ascii_case("close")),
        "401 without Connection: close ({:?})",
        r.header("connection")
    );
    ensure!(closed, "the agent answered a second request on the connection after its 401");
    Ok(())
}

pub(crate) async fn token_next_accepted(cx: Ctx) -> CaseResult {
    let next = cx.token_next.clone().ok_or("no COLLIE_TOKEN_NEXT")?;
    let c = cx.client();
    c.request(Method::GET, "/hello", None, &[], Auth::Bearer(next.clone()))
        .await?
        .ok()
        .map_err(|e| format!("COLLIE_TOKEN_NEXT: {e}"))?;
    c.request(Method::GET, "/v1/state", None, &[], Auth::Bearer(next)).await?.ok()?;
    Ok(())
}

pub(crate) async fn token_never_in_the_agent_output(cx: Ctx) -> CaseResult {
    let agent = cx.agent.as_ref().ok_or("no --agent-cmd")?;
    let agent = agent.lock().await;
    let (stdout, stderr) = (agent.stdout.text(), agent.stderr.text());
    for (name, text) in [("stdout", stdout), ("stderr", stderr)] {
        for (which, token) in [("COLLIE_TOKEN", &cx.token), ("COLLIE_TOKEN_NEXT", &cx.token_next)] {
            if let Some(token) = token {
                ensure!(!text.contains(token.as_str()), "the agent's {name} contains {which}");
            }
        }
    }
    Ok(())
}
