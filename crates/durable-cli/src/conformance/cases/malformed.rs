//! §2 conventions: 400 for bad JSON, 404 for unknown routes, 405 with `Allow`,
//! 413 over 1 MiB, JSON bodies with `ok`, unknown fields ignored.

use bytes::Bytes;
use hyper::Method;
use serde_json::json;

use super::Ctx;
use crate::conformance::check::{R, ensure, rid};
use crate::conformance::client::Auth;

pub(crate) async fn malformed_json_400_bad_request(cx: Ctx) -> R {
    let c = cx.client()?;
    let mut wrong = Vec::new();
    let cases: [(&str, &[u8]); 6] = [
        ("/v1/rename", b"{"),
        ("/v1/panes/ticket-1/send", b"[]"),
        ("/v1/panes/ticket-1/send", b"{\"requestId\": \"x-1\"}"),
        ("/v1/panes/ticket-1/send", b"{\"requestId\": \"x-2\", \"text\": 5}"),
        ("/v1/rename", b"{\"requestId\": \"x-3\", \"target\": \"pane\", \"id\": \"ticket-1\"}"),
        ("/hello", b"nope"),
    ];
    for (path, body) in cases {
        let r = c.post_raw(path, Bytes::from_static(body)).await?;
        if r.refused(400, "bad-request").is_err() {
            wrong.push(format!(
                "POST {path} {}: {} {}",
                String::from_utf8_lossy(body),
                r.status,
                r.body_text()
            ));
        }
    }
    ensure!(wrong.is_empty(), "{}", wrong.join("; "));
    Ok(())
}

pub(crate) async fn unknown_route_404_not_found(cx: Ctx) -> R {
    let c = cx.client()?;
    for path in ["/v1/nope", "/state", "/v2/state", "/v1/hello", "/v1/panes/ticket-1/nope"] {
        c.get(path).await?.refused(404, "not-found")?;
    }
    c.post("/v1/panes/ticket-1/nope", &json!({"requestId": rid("n")})).await?.refused(404, "not-found")?;
    Ok(())
}

pub(crate) async fn wrong_method_405_with_allow(cx: Ctx) -> R {
    let c = cx.client()?;
    let mut wrong = Vec::new();
    for (method, path, allow) in [
        (Method::GET, "/v1/rename", &["POST"][..]),
        (Method::GET, "/v1/panes/ticket-1/send", &["POST"]),
        (Method::POST, "/v1/state", &["GET"]),
        (Method::PUT, "/v1/asks/970f8a0b30368fbbcab73013d31d2d51", &["POST"]),
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

pub(crate) async fn body_over_1mib_413_too_large(cx: Ctx) -> R {
    let c = cx.client()?;
    let head = br#"{"requestId": "big-1", "text": ""#;
    let tail = br#""}"#;
    let mut body = Vec::with_capacity(1 << 20 | 1);
    body.extend_from_slice(head);
    body.resize((1 << 20) + 1 - tail.len(), b'a');
    body.extend_from_slice(tail);
    ensure!(body.len() == (1 << 20) + 1, "built {} bytes", body.len());
    let r = c.post_early_answer("/v1/panes/ticket-1/send", Bytes::from(body)).await?;
    r.refused(413, "too-large")?;
    // Exactly 1 MiB is within the limit (then refused for its 64 KiB text, not its size).
    let mut body = Vec::with_capacity(1 << 20);
    body.extend_from_slice(head);
    body.resize((1 << 20) - tail.len(), b'a');
    body.extend_from_slice(tail);
    c.post_raw("/v1/panes/ticket-1/send", Bytes::from(body)).await?.refused(400, "bad-request")?;
    Ok(())
}

pub(crate) async fn responses_are_json_objects_with_ok(cx: Ctx) -> R {
    let c = cx.client()?;
    for (path, status) in
        [("/hello", 200), ("/v1/state", 200), ("/v1/nope", 404), ("/v1/history?limit=0", 400)]
    {
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

pub(crate) async fn unknown_request_fields_ignored(cx: Ctx) -> R {
    let c = cx.client()?;
    let body = json!({"requestId": rid("u"), "target": "pane", "id": "ticket-1", "title": "Maria Lopez",
                      "fromTheFuture": {"anything": [1, 2]}});
    let r = c.post("/v1/rename", &body).await?;
    ensure!(r.ok()?["result"] == "renamed", "rename with an unknown field: {}", r.body_text());
    Ok(())
}

pub(crate) async fn keep_alive_serves_several_polls_on_one_connection(cx: Ctx) -> R {
    let c = cx.client()?;
    let answers = c.get_on_one_connection(&["/hello", "/v1/state", "/v1/state?since=1", "/v1/nope"]).await?;
    answers[0].ok()?;
    answers[1].ok()?;
    answers[2].ok()?;
    answers[3].refused(404, "not-found")?;
    Ok(())
}
