//! The helpers the desk's cases share with `durable conformance` (its
//! `check` module), and `ensure!`.

pub(crate) use durable_cli::conformance::check::*;

/// `ensure!(cond, "why {}", x)`: fail the case with that reason.
macro_rules! ensure {
    ($cond:expr, $($arg:tt)+) => {
        if !$cond {
            return Err(format!($($arg)+));
        }
    };
}
pub(crate) use ensure;

use std::time::Duration;

use durable_cli::conformance::client::Client;
use serde_json::Value;

/// Sends `/ask <spec>` to an idle pane and returns the new open ask.
pub(crate) async fn raise(c: &Client, p: &str, spec: &str) -> CaseResult<Value> {
    wait_idle(c, p).await?;
    let before = ids(&open_asks(&state(c).await?));
    send_ok(c, p, &format!("/ask {spec}")).await?;
    wait_for(&format!("the ask raised by `/ask {spec}` on {p}"), Duration::from_secs(10), || async {
        let s = state(c).await?;
        Ok(open_asks(&s).into_iter().find(|a| {
            a.get("pane").and_then(Value::as_str) == Some(p)
                && a.get("id").and_then(Value::as_str).is_some_and(|id| !before.iter().any(|b| b == id))
        }))
    })
    .await
}

/// The reply the desk writes when an answer comes: `Answer: <sorted compact JSON>`.
pub(crate) async fn wait_answer_echo(c: &Client, p: &str, after: u64, answer: &Value) -> CaseResult<Value> {
    wait_item(c, p, after, "reply", &format!("Answer: {}", canonical(answer))).await
}
