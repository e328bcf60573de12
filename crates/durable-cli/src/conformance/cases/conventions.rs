//! §2 conventions every route keeps: JSON objects with `ok`, the
//! refusals of malformed bodies, unknown routes, wrong methods and bodies over
//! 1 MiB, unknown fields ignored, several polls on one connection.

use bytes::Bytes;
use hyper::Method;
use serde_json::json;

use super::{Ctx, unknown_ask, unknown_pane};
use crate::conformance::check::{CaseResult, ensure, rid};
use crate::conformance::client::Auth;
use crate::conformance::wire;

pub(crate) async fn responses_are_json_objects_with_ok(cx: Ctx) -> CaseResult {
    let c = cx.client();
    for (path, status) in [("/hello", 200), ("/v1/state", 200), ("/v1/nope", 404)] {
        let r = c.get(path).await?;
        ensure!(r.status == status, "GET {path}: status {} (expected {status})", r.status);
        let ct = r.header("content-type").unwrap_or("");
        ensure!(ct.starts_with("application/json"), "GET {path}: Content-Type {ct:?}");
        ensure!(
            r.json.get("ok").is_some_and(|v| v.is_boolean()),
            "GET {path}: body without a boolean ok: {}",
            r.body_text()
        );
    }
    Ok(())
}

pub(crate) async fn malformed_json_400_bad_request(cx: Ctx) -> CaseResult {
    let c = cx.client();
    // Malformed writes go to a pane the agent does not have: the body is
    // checked first (§8), and an agent that wrongly took one acts on nothing.
    let mut cases: Vec<(String, Vec<u8>)> =
        vec![("/hello".into(), b"nope".to_vec()), ("/hello".into(), b"{".to_vec())];
    let unknown = unknown_pane(&cx);
    let pane = crate::link::enc(&unknown);
    if cx.cap("send") {
        let send = format!("/v1/panes/{pane}/send");
        cases.push((send.clone(), b"{".to_vec()));
        cases.push((send.clone(), b"[]".to_vec()));
        cases.push((send.clone(), b"{\"requestId\": \"x-1\"}".to_vec()));
        cases.push((send, b"{\"requestId\": \"x-2\", \"text\": 5}".to_vec()));
    }
    if cx.cap("rename") {
        cases.push(("/v1/rename".into(), b"{".to_vec()));
        let no_title = json!({"requestId": "x-3", "target": "pane", "id": unknown});
        cases.push(("/v1/rename".into(), no_title.to_string().into_bytes()));
    }
    if cx.cap("close") {
        let no_target = json!({"requestId": "x-4", "target": "window", "id": unknown});
        cases.push(("/v1/close".into(), no_target.to_string().into_bytes()));
    }
    let mut wrong = Vec::new();
    for (path, body) in cases {
        let r = c.post_raw(&path, Bytes::from(body.clone())).await?;
        if r.refused(400, "bad-request").is_err() {
            wrong.push(format!(
                "POST {path} {}: {} {}",
                String::from_utf8_lossy(&body),
                r.status,
                r.body_text()
            ));
        }
    }
    ensure!(wrong.is_empty(), "{}", wrong.join("; "));
    Ok(())
}

pub(crate) async fn unknown_route_404_not_found(cx: Ctx) -> CaseResult {
    let c = cx.client();
    let pane = crate::link::enc(&cx.panes().into_iter().next().unwrap_or_else(|| "p".to_owned()));
    let nested = format!("/v1/panes/{pane}/nope");
    for path in ["/v1/nope", "/state", "/v2/state", "/v1/hello", nested.as_str()] {
        c.get(path).await?.refused(404, "not-found")?;
    }
    c.post(&nested, &json!({"requestId": rid("n")})).await?.refused(404, "not-found")?;
    Ok(())
}

pub(crate) async fn wrong_method_405_with_allow(cx: Ctx) -> CaseResult {
    let c = cx.client();
    let mut wrong = Vec::new();
    let ask = format!("/v1/asks/{}", unknown_ask());
    for (method, path, allow) in [
        (Method::GET, "/v1/rename", &["POST"][..]),
        (Method::GET, "/v1/panes/p/send", &["POST"]),
        (Method::POST, "/v1/state", &["GET"]),
        (Method::PUT, ask.as_str(), &["POST"]),
        (Method::DELETE, "/hello", &["GET", "POST"]),
    ] {
        let body = (method == Method::POST || method == Method::PUT).then(|| Bytes::from_static(b"{}"));
        let r = c.request(method.clone(), path, body, &[], Auth::Default).await?;
        if let Err(why) = r.refused(405, "method-not-allowed") {
            wrong.push(why);
            continue;
        }
        let got = r.header("allow").unwrap_or("");
        let methods: Vec<&str> = got.split(',').map(str::trim).collect();
        if !allow.iter().all(|m| methods.contains(m)) {
            wrong.push(format!("{method} {path}: Allow {got:?} (expected {allow:?})"));
        }
    }
    ensure!(wrong.is_empty(), "{}", wrong.join("; "));
    Ok(())
}

fn body_of(len: usize) -> Vec<u8> {
    let head = br#"{"requestId": "big-1", "text": ""#;
    let tail = br#""}"#;
    let mut body = Vec::with_capacity(len);
    body.extend_from_slice(head);
    body.resize(len - tail.len(), b'a');
    body.extend_from_slice(tail);
    body
}

pub(crate) async fn body_over_1mib_413_too_large(cx: Ctx) -> CaseResult {
    let c = cx.client();
    let over = body_of(wire::BODY_MAX + 1);
    c.post_early_answer("/hello", Bytes::from(over.clone())).await?.refused(413, "too-large")?;
    if cx.cap("send") {
        // A pane the agent does not have: the size is checked first (§8).
        let pane = crate::link::enc(&unknown_pane(&cx));
        let path = format!("/v1/panes/{pane}/send");
        c.post_early_answer(&path, Bytes::from(over)).await?.refused(413, "too-large")?;
        // Exactly 1 MiB is within the limit (then refused for its text over 64 KiB, not its size).
        c.post_raw(&path, Bytes::from(body_of(wire::BODY_MAX))).await?.refused(400, "bad-request")?;
    }
    Ok(())
}

pub(crate) async fn unknown_request_fields_ignored(cx: Ctx) -> CaseResult {
    let c = cx.client();
    let body = json!({"collie": {"version": "1.22.0", "later": true}, "wire": {"min": 1, "max": 1},
                      "fromTheFuture": {"anything": [1, 2]}});
    let r = c.post("/hello", &body).await?;
    ensure!(r.ok()?["compatible"] == true, "POST /hello with unknown fields: {}", r.body_text());
    Ok(())
}

pub(crate) async fn keep_alive_serves_several_polls_on_one_connection(cx: Ctx) -> CaseResult {
    let answers =
        cx.client().get_on_one_connection(&["/hello", "/v1/state", "/v1/state?since=1", "/v1/nope"]).await?;
    ensure!(answers.len() == 4, "{} answers to 4 requests", answers.len());
    answers[0].ok()?;
    answers[1].ok()?;
    answers[2].ok()?;
    answers[3].refused(404, "not-found")?;
    Ok(())
}
