//! §3 hello and versions, §4 capabilities as announced.

use std::time::Duration;

use serde_json::{Value, json};

use super::Ctx;
use crate::check::{CaseResult, ensure, is_lower_hex, str_of};
use crate::desk::Transport;

pub(crate) const CAPS: [&str; 11] = [
    "asks", "starters", "send", "steer", "abort", "rename", "close", "actions", "history", "reopen",
    "terminal",
];

/// Every cap named on `on` is true, every other one false, and all eleven are there.
pub(crate) fn expect_caps(hello: &Value, on: &[&str]) -> CaseResult {
    let caps = hello.get("caps").and_then(Value::as_object).ok_or("hello has no `caps` object")?;
    let mut wrong = Vec::new();
    for cap in CAPS {
        let want = on.contains(&cap);
        match caps.get(cap).and_then(Value::as_bool) {
            Some(got) if got == want => {}
            got => wrong.push(format!("{cap}: {got:?} (expected {want})")),
        }
    }
    ensure!(wrong.is_empty(), "caps differ: {}", wrong.join(", "));
    Ok(())
}

pub(crate) async fn hello_desk_declares_its_host_and_caps(cx: Ctx) -> CaseResult {
    let c = cx.client()?;
    let r = c.get("/hello").await?;
    let h = r.ok()?;
    ensure!(h["wire"] == json!({"min": 1, "max": 1}), "wire is {} (expected {{min: 1, max: 1}})", h["wire"]);
    ensure!(h["sdk"]["name"] == "durable-sdk", "sdk.name is {}", h["sdk"]["name"]);
    ensure!(
        h["sdk"]["version"].as_str().is_some_and(|v| !v.is_empty()),
        "sdk.version is {}",
        h["sdk"]["version"]
    );
    ensure!(h["host"] == "desk", "host is {} (expected desk)", h["host"]);
    ensure!(h["runtime"] == "rust", "runtime is {} (expected rust)", h["runtime"]);
    ensure!(h["ready"] == true, "ready is {} (the desk calls ready())", h["ready"]);
    let epoch = str_of(h, "epoch")?;
    ensure!(is_lower_hex(epoch, 16), "epoch {epoch:?} is not 16 lowercase hex characters");
    let want_check = match cx.transport() {
        Transport::Socket => "on",
        Transport::Tls => "token",
    };
    ensure!(h["callerCheck"] == want_check, "callerCheck is {} (expected {want_check})", h["callerCheck"]);
    // Default caps: everything, history included (the desk has a provider), no terminal.
    expect_caps(h, &CAPS[..10])
}

pub(crate) async fn hello_post_incompatible_warns_once_per_collie_version(cx: Ctx) -> CaseResult {
    let c = cx.client()?;
    let stderr = cx.shared_stderr()?;
    let single =
        "collie: Collie speaks wire v2, this durable agent speaks v1. Update the agent's SDK, or Collie.";
    let range =
        "collie: Collie speaks wire v2..3, this durable agent speaks v1. Update the agent's SDK, or Collie.";
    let count = |line: &str| stderr.text().lines().filter(|l| l.contains(line)).count();
    let (before_single, before_range) = (count(single), count(range));
    for (version, wire) in [
        ("9.1.0", json!({"min": 2, "max": 2})),
        ("9.1.0", json!({"min": 2, "max": 2})),
        ("9.2.0", json!({"min": 2, "max": 3})),
    ] {
        // An unknown field rides along: forward compatibility.
        let r = c
            .post("/hello", &json!({"collie": {"version": version}, "wire": wire, "later": {"x": 1}}))
            .await?;
        let body = r.ok()?;
        ensure!(
            body["compatible"] == false,
            "Collie {version} wire {wire}: compatible is {}",
            body["compatible"]
        );
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (single_n, range_n) = (count(single) - before_single, count(range) - before_range);
    ensure!(
        single_n == 1 && range_n == 1,
        "warn lines on stderr: {single_n} of `{single}` (two POSTs of one version: expected 1), {range_n} of the v2..3 line (expected 1); stderr tail: {}",
        stderr.tail(4)
    );
    Ok(())
}
