//! §3 hello and versions, §4 capabilities: what is declared, and the routes
//! of the capabilities that are off; the epoch across a restart.

use bytes::Bytes;
use hyper::Method;
use serde_json::{Value, json};

use super::{Ctx, Kind, unknown_ask};
use crate::conformance::check::{
    CaseResult, bool_of, ensure, field, is_lower_hex, rid, state, str_of, u64_of,
};
use crate::conformance::wire;

pub(crate) async fn hello_says_wire_1_and_caps(cx: Ctx) -> CaseResult {
    let r = cx.client().get("/hello").await?;
    let h = r.ok()?;
    let (min, max) = (u64_of(&h["wire"], "min")?, u64_of(&h["wire"], "max")?);
    ensure!(
        min <= wire::WIRE_VERSION && wire::WIRE_VERSION <= max,
        "wire {} does not include v{}",
        h["wire"],
        wire::WIRE_VERSION
    );
    let sdk = field(h, "sdk")?;
    ensure!(!str_of(sdk, "name")?.is_empty(), "sdk.name is empty");
    ensure!(!str_of(sdk, "version")?.is_empty(), "sdk.version is empty");
    if sdk["name"] == wire::SDK_NAME {
        ensure!(h["runtime"] == "rust", "runtime is {} (this SDK is Rust)", h["runtime"]);
    }
    str_of(h, "host")?;
    str_of(h, "runtime")?;
    bool_of(h, "ready")?;
    let epoch = str_of(h, "epoch")?;
    ensure!(is_lower_hex(epoch, 16), "epoch {epoch:?} is not 16 lowercase hex characters");
    let check = str_of(h, "callerCheck")?;
    let allowed: &[&str] = match cx.kind {
        Kind::Socket => &["on", "off", "unavailable"],
        Kind::Tls | Kind::Http => &["token"],
    };
    ensure!(allowed.contains(&check), "callerCheck is {check:?} (expected one of {allowed:?})");
    let caps = h.get("caps").and_then(Value::as_object).ok_or("hello has no `caps` object")?;
    let mut wrong = Vec::new();
    for cap in wire::CAP_NAMES {
        if caps.get(cap).and_then(Value::as_bool).is_none() {
            wrong.push(format!("{cap} is {:?}", caps.get(cap)));
        }
    }
    ensure!(wrong.is_empty(), "every capability is a bool: {}", wrong.join(", "));
    ensure!(caps["terminal"] == false, "terminal is true (a durable agent has no screen)");
    Ok(())
}

pub(crate) async fn hello_epoch_is_in_every_state_answer(cx: Ctx) -> CaseResult {
    let c = cx.client();
    let epoch = c.get("/hello").await?.ok()?["epoch"].clone();
    let full = state(&c).await?;
    ensure!(full["epoch"] == epoch, "state epoch {} differs from hello's {epoch}", full["epoch"]);
    let since = c.get("/v1/state?since=1").await?;
    ensure!(
        since.ok()?["epoch"] == epoch,
        "since answer epoch {} differs from hello's {epoch}",
        since.json["epoch"]
    );
    Ok(())
}

pub(crate) async fn hello_post_compatible_when_ranges_overlap(cx: Ctx) -> CaseResult {
    let c = cx.client();
    let ours = c.get("/hello").await?.ok()?["wire"].clone();
    for w in [json!({"min": 1, "max": 1}), json!({"min": 1, "max": 3}), json!({"min": 0, "max": 1})] {
        let r = c.post("/hello", &json!({"collie": {"version": "1.22.0"}, "wire": w})).await?;
        let body = r.ok()?;
        ensure!(body["compatible"] == true, "Collie wire {w}: compatible is {}", body["compatible"]);
        ensure!(body["wire"] == ours, "answer wire is {} (GET /hello says {ours})", body["wire"]);
    }
    Ok(())
}

pub(crate) async fn hello_post_incompatible_answers_compatible_false(cx: Ctx) -> CaseResult {
    let c = cx.client();
    let max = u64_of(&c.get("/hello").await?.ok()?["wire"], "max")?;
    let w = json!({"min": max.saturating_add(1), "max": max.saturating_add(2)});
    let r = c.post("/hello", &json!({"collie": {"version": "0.0.1-conformance"}, "wire": w})).await?;
    let body = r.ok()?;
    ensure!(body["compatible"] == false, "Collie wire {w}: compatible is {}", body["compatible"]);
    c.post_raw("/hello", Bytes::from_static(b"{\"collie\": {\"version\": \"1\"}}"))
        .await?
        .refused(400, "bad-request")
        .map_err(|e| format!("a body without `wire`: {e}"))?;
    Ok(())
}

pub(crate) async fn caps_off_routes_not_supported(cx: Ctx) -> CaseResult {
    let c = cx.client();
    let pane = crate::link::enc(&cx.panes().into_iter().next().unwrap_or_else(|| "p".to_owned()));
    let mut wrong = Vec::new();
    let routes: Vec<(&str, Method, String, Value)> = vec![
        (
            "asks",
            Method::POST,
            format!("/v1/asks/{}", unknown_ask()),
            json!({"answer": {"optionIds": ["x"]}}),
        ),
        ("send", Method::POST, format!("/v1/panes/{pane}/send"), json!({"text": "x"})),
        ("steer", Method::POST, format!("/v1/panes/{pane}/steer"), json!({"text": "x"})),
        ("abort", Method::POST, format!("/v1/panes/{pane}/stop"), json!({})),
        ("actions", Method::POST, format!("/v1/panes/{pane}/actions/x"), json!({})),
        ("rename", Method::POST, "/v1/rename".into(), json!({"target": "pane", "id": "x", "title": "x"})),
        ("close", Method::POST, "/v1/close".into(), json!({"target": "pane", "id": "x"})),
        ("reopen", Method::POST, "/v1/reopen".into(), json!({"id": "x"})),
        ("starters", Method::POST, "/v1/starters/x".into(), json!({})),
        ("history", Method::GET, "/v1/history".into(), Value::Null),
        ("history", Method::GET, "/v1/history/x".into(), Value::Null),
    ];
    let mut tried = 0;
    for (cap, method, path, mut body) in routes {
        if cx.cap(cap) {
            continue;
        }
        tried += 1;
        let r = if method == Method::GET {
            c.get(&path).await?
        } else {
            body["requestId"] = json!(rid("c"));
            c.post(&path, &body).await?
        };
        if let Err(why) = r.refused(409, "not-supported") {
            wrong.push(format!("{cap} off: {why}"));
        }
        // The capability is checked before the body.
        if method == Method::POST {
            let r = c.post_raw(&path, Bytes::from_static(b"not json")).await?;
            if let Err(why) = r.refused(409, "not-supported") {
                wrong.push(format!("{cap} off, capability before body: {why}"));
            }
        }
    }
    ensure!(tried > 0, "every capability with a route is on: nothing to check");
    ensure!(wrong.is_empty(), "{}", wrong.join("; "));
    Ok(())
}

pub(crate) async fn epoch_changes_when_the_agent_restarts(cx: Ctx) -> CaseResult {
    let before = cx.client().get("/hello").await?.ok()?["epoch"].clone();
    cx.restart().await?;
    let after = cx.client().get("/hello").await?.ok()?["epoch"].clone();
    ensure!(before != after, "the epoch {before} is the same after a restart");
    Ok(())
}
