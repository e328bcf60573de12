//! §1.2 HTTPS with a bearer token: refused without it, the rotation token, the
//! start-up refusal of a short token, and the token never printed.

use hyper::Method;
use serde_json::json;

use super::Ctx;
use crate::conformance::check::{R, ensure, pane, rid};
use crate::conformance::client::{Auth, Client, Resp};
use crate::conformance::desk::Started;

fn token_refused(r: &Resp) -> R {
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
    Ok(())
}

async fn get(c: &Client, path: &str, auth: Auth) -> R<Resp> {
    c.request(Method::GET, path, None, &[], auth).await
}

pub(crate) async fn token_missing_401_token_refused(cx: Ctx) -> R {
    let c = cx.client()?;
    for path in ["/hello", "/v1/state", "/v1/nope"] {
        token_refused(&get(&c, path, Auth::Missing).await?).map_err(|e| format!("no token, {path}: {e}"))?;
    }
    let r = c
        .request(Method::GET, "/hello", None, &[("authorization", "Basic Zm9vOmJhcg==")], Auth::Missing)
        .await?;
    token_refused(&r).map_err(|e| format!("Basic auth: {e}"))
}

pub(crate) async fn token_wrong_401_and_nothing_runs(cx: Ctx) -> R {
    let c = cx.client()?;
    let wrong = "0".repeat(64);
    token_refused(&get(&c, "/hello", Auth::Bearer(wrong.clone())).await?)?;
    let mut token = cx.token().to_owned();
    token.pop();
    token.push('x');
    token_refused(&get(&c, "/hello", Auth::Bearer(token)).await?)
        .map_err(|e| format!("token off by its last byte: {e}"))?;
    let body = json!({"requestId": rid("t"), "target": "pane", "id": "ticket-1", "title": "Not allowed"});
    let bytes = bytes::Bytes::from(body.to_string());
    let r = c.request(Method::POST, "/v1/rename", Some(bytes), &[], Auth::Bearer(wrong)).await?;
    token_refused(&r)?;
    let title = pane(&c, "ticket-1").await?["title"].clone();
    ensure!(title != "Not allowed", "a write with a wrong token ran");
    ensure!(!r.body_text().contains(cx.token()), "the 401 body names the token");
    Ok(())
}

pub(crate) async fn token_next_accepted(cx: Ctx) -> R {
    let c = cx.client()?;
    let r = get(&c, "/hello", Auth::Bearer(cx.token_next().to_owned())).await?;
    r.ok().map_err(|e| format!("COLLIE_TOKEN_NEXT: {e}"))?;
    get(&c, "/v1/state", Auth::Bearer(cx.token_next().to_owned())).await?.ok()?;
    Ok(())
}

pub(crate) async fn token_shorter_than_32_bytes_refused_at_startup(cx: Ctx) -> R {
    let mut spec = cx.spec(&[]);
    spec.token = "short-token-31-bytes-xxxxxxxxxx".to_owned();
    spec.token_next = String::new();
    match crate::conformance::desk::Desk::try_start(spec).await? {
        Started::Listening(desk) => Err(format!("a 31-byte COLLIE_TOKEN started a desk at {}", desk.address)),
        Started::Exited { status, .. } => {
            ensure!(!status.success(), "the desk exited with success on a short token");
            Ok(())
        }
    }
}

pub(crate) async fn token_never_in_the_agent_output(cx: Ctx) -> R {
    let (stdout, stderr) = cx.shared_output()?;
    for (name, text) in [("stdout", stdout), ("stderr", stderr)] {
        for (which, token) in [("COLLIE_TOKEN", cx.token()), ("COLLIE_TOKEN_NEXT", cx.token_next())] {
            ensure!(!text.contains(token), "the desk's {name} contains {which}");
        }
    }
    Ok(())
}
