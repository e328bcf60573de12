//! The agent's output as lines for the protocol crate's line transport,
//! read by durable-process's bounded reader: a line longer than
//! [`LINE_MAX`] is dropped as it streams (never held whole), and a line that is not UTF-8,
//! not JSON, or a `session/update` that is not one, is dropped with a warn
//! event — none ends the connection.
//!
//! `session/update` lines also pass a gate: at most [`UPDATES_IN_FLIGHT`]
//! of them are handed on and not yet taken by the conversation, so an
//! agent that floods updates is read only as fast as they are shown (the
//! protocol crate queues what it reads without a bound).

use std::sync::Arc;

use agent_client_protocol::v1::schema::SessionNotification;
use durable_process::LineReader;
use futures::Stream;
use serde_json::Value;
use tokio::io::AsyncRead;
use tokio::sync::Semaphore;

/// The longest line kept: 16 MiB (a message with an image or a large file
/// read fits; a 100 MiB line is dropped).
pub(crate) const LINE_MAX: usize = 16 * 1024 * 1024;

/// `session/update` lines handed on and not yet shown, at most.
pub(crate) const UPDATES_IN_FLIGHT: usize = 1024;

/// A gate for `session/update` lines: the reader takes a permit for each,
/// the conversation gives it back once it has shown the update.
pub(crate) fn update_gate() -> Arc<Semaphore> {
    Arc::new(Semaphore::new(UPDATES_IN_FLIGHT))
}

/// What to do with one line of the agent's output.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Hand it on.
    Pass,
    /// A `session/update`: hand it on through the gate.
    Update,
    /// Drop it (blank, or said why in a warn event).
    Drop,
}

/// Looks at one line before the protocol crate does.
pub(crate) fn judge(line: &[u8]) -> Verdict {
    if line.iter().all(u8::is_ascii_whitespace) {
        return Verdict::Drop;
    }
    let Ok(text) = std::str::from_utf8(line) else {
        tracing::warn!(bytes = line.len(), "acp: a line of the agent's output is not UTF-8; dropped");
        return Verdict::Drop;
    };
    let Ok(value) = serde_json::from_str::<Value>(text) else {
        tracing::warn!(bytes = line.len(), "acp: a line of the agent's output is not JSON; dropped");
        return Verdict::Drop;
    };
    if value.get("method").and_then(Value::as_str) != Some("session/update") || value.get("id").is_some() {
        return Verdict::Pass;
    }
    // Only an update the conversation will see takes a permit (one the
    // protocol crate cannot read would never give it back).
    match value.get("params").cloned().map(serde_json::from_value::<SessionNotification>) {
        Some(Ok(_)) => Verdict::Update,
        _ => {
            tracing::warn!(bytes = line.len(), "acp: a session/update the protocol does not know; dropped");
            Verdict::Drop
        }
    }
}

/// The lines the connection reads: bounded, judged, updates gated.
pub(crate) fn agent_lines<R>(
    reader: R,
    gate: Arc<Semaphore>,
) -> impl Stream<Item = std::io::Result<String>> + Send + 'static
where
    R: AsyncRead + Unpin + Send + 'static,
{
    let reader = LineReader::new(reader, LINE_MAX);
    futures::stream::unfold((reader, gate), |(mut reader, gate)| async move {
        loop {
            let line = match reader.next_line().await {
                Ok(Some(line)) => line,
                Ok(None) => return None,
                Err(e) => return Some((Err(e), (reader, gate))),
            };
            match judge(&line) {
                Verdict::Drop => continue,
                Verdict::Update => {
                    // A closed gate (never closed here) would mean: pass.
                    if let Ok(permit) = gate.acquire().await {
                        permit.forget();
                    }
                }
                Verdict::Pass => {}
            }
            // Checked UTF-8 by `judge`.
            let text = String::from_utf8(Vec::from(line)).unwrap_or_default();
            return Some((Ok(text), (reader, gate)));
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;

    #[tokio::test]
    async fn bad_lines_are_dropped_and_updates_take_a_permit_each() {
        let update = r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hi"}}}}"#;
        let mut input = Vec::new();
        input.extend_from_slice(b"not json\n\xff\xfe\n\n");
        input.extend_from_slice(br#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"no_such_kind"}}}"#);
        input.push(b'\n');
        input.extend_from_slice(update.as_bytes());
        input.extend_from_slice(b"\n{\"jsonrpc\":\"2.0\",\"id\":0,\"result\":{}}\n");
        let gate = update_gate();
        let lines: Vec<String> =
            agent_lines(std::io::Cursor::new(input), gate.clone()).map(|l| l.unwrap()).collect().await;
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert_eq!(lines[0], update);
        assert_eq!(gate.available_permits(), UPDATES_IN_FLIGHT - 1, "one update handed on");
    }

    #[tokio::test]
    async fn the_gate_holds_updates_past_the_bound_until_they_are_shown() {
        let update = r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"x"}}}}"#;
        let input: String = std::iter::repeat_n(format!("{update}\n"), 3).collect();
        let gate = Arc::new(Semaphore::new(2));
        let mut lines = Box::pin(agent_lines(std::io::Cursor::new(input.into_bytes()), gate.clone()));
        assert!(lines.next().await.is_some());
        assert!(lines.next().await.is_some());
        use futures::FutureExt;
        assert!(lines.next().now_or_never().is_none(), "held: two in flight");
        gate.add_permits(1);
        assert!(lines.next().await.is_some(), "handed on once one was shown");
    }
}
