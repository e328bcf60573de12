//! A gated call's card across a restart of the agent.
//!
//! Pi aborts a call it was gating when the agent stops (its input closes),
//! and cannot be handed the answer afterwards. So the card is kept (by a
//! receipt store that keeps asks) with a small value naming the session,
//! the tool and a digest of the call's arguments, and at the next start
//! [`PiConversation::take_up`] raises it again by the same id — an answer
//! the phone sent during the restart lands then. Allow tells Pi, in a turn
//! of the agent's own, that the call was approved and lets exactly that call
//! (same tool, same arguments) through the gate once; Deny tells Pi it was
//! refused. A call Pi does not make again, a card that closes unanswered,
//! and a card no conversation takes up ([`close_kept_card`]) each leave a
//! notice that the call did not run.

use durable_runtime::{KeptAsk, Pane};
use durable_types::{Item, NoticeTone};
use serde_json::{Value, json};

use super::conversation::PiConversation;

/// The key of the card's agent data.
const KEY: &str = "durablePi";

/// The digest of a call's arguments: SHA-256 of their canonical JSON.
pub(super) fn input_digest(input: &Value) -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(durable_types::canonical_json(input).as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// The agent data a gated call's card is kept with (small, whatever the
/// arguments' size).
pub(super) fn card_data(session: &str, tool: &str, digest: &str) -> Value {
    json!({KEY: {"session": session, "tool": tool, "inputSha256": digest}})
}

/// What a kept card says of its call.
struct CardData {
    session: String,
    tool: String,
    digest: String,
}

impl CardData {
    fn of(kept: &KeptAsk) -> Option<CardData> {
        let data = kept.agent_data()?.get(KEY)?;
        let field = |name: &str| data.get(name)?.as_str().map(str::to_owned);
        Some(CardData { session: field("session")?, tool: field("tool")?, digest: field("inputSha256")? })
    }
}

/// The words Pi reads once the card is answered after a restart.
fn approved_prompt(tool: &str, call: &str) -> String {
    format!(
        "[durable-pi] The agent restarted while your {tool} call `{call}` waited for the user's approval. \
         The user has approved it now: make that same call again, with the same arguments."
    )
}

fn refused_prompt(tool: &str, call: &str) -> String {
    format!(
        "[durable-pi] The agent restarted while your {tool} call `{call}` waited for the user's approval. \
         The user has refused it: do not make it."
    )
}

/// A notice on the pane, under an id of its own.
fn notice(pane: &Pane, ask_id: &str, what: &str, text: String) {
    if let Ok(id) = durable_types::Id::new(format!("pi-{what}-{ask_id}")) {
        let item = Item::new(id, crate::items::notice(text, NoticeTone::Warn));
        if let Ok((item, _)) = item.sanitized() {
            let _ = pane.write(item);
        }
    }
}

/// The call as the card shows it.
fn call_line(kept: &KeptAsk, tool: &str) -> String {
    kept.ask().tool.as_ref().map_or_else(|| tool.to_owned(), |t| t.call.clone())
}

impl PiConversation {
    /// Takes up the card of a call this conversation's Pi was gating when
    /// the agent stopped, handed back by
    /// [`Collie::kept_asks`](https://docs.rs/durable-sdk) (see the
    /// [module docs](super)): the card is raised again by its id, and its
    /// answer goes to Pi in a turn of the agent's own. Call it before
    /// `ready()`. `Err` gives the ask back when it is not such a card of
    /// this conversation.
    pub fn take_up(&self, kept: KeptAsk) -> Result<(), KeptAsk> {
        let Some(data) = CardData::of(&kept) else { return Err(kept) };
        if data.session != self.session_id() {
            return Err(kept);
        }
        let call = call_line(&kept, &data.tool);
        let ask_id = kept.id().to_owned();
        let pane = self.pane().clone();
        let handle = match kept.raise() {
            Ok(handle) => handle,
            // Left unclaimed: `ready()` closes it ("Stopped before an answer").
            Err(e) => {
                notice(
                    &pane,
                    &ask_id,
                    "not-run",
                    format!("{call} did not run: its card could not be raised again ({e})."),
                );
                return Ok(());
            }
        };
        let conversation = self.clone();
        tokio::spawn(async move {
            match handle.decided().await {
                Ok(d) if d.answer.option_id() == Some("allow") => {
                    conversation.allow_once(&data.tool, &data.digest);
                    let _ = conversation.prompt(&approved_prompt(&data.tool, &call)).await;
                    if conversation.take_pass(&data.tool, &data.digest) {
                        let text = format!("{call} did not run: Pi did not make the approved call again.");
                        notice(&pane, &ask_id, "not-run", text);
                    }
                }
                Ok(_) => {
                    let _ = conversation.prompt(&refused_prompt(&data.tool, &call)).await;
                }
                Err(_) => notice(&pane, &ask_id, "not-run", format!("{call} did not run.")),
            }
        });
        Ok(())
    }
}

/// Closes a kept card of a gated call that no conversation takes up (the
/// agent runs without Pi, or the conversation is not open): the chat line
/// `Stopped before an answer: …`, and on `pane`, when given, a notice that
/// the call did not run.
pub fn close_kept_card(kept: KeptAsk, pane: Option<&Pane>) {
    let tool = CardData::of(&kept).map(|d| d.tool).unwrap_or_else(|| "tool".to_owned());
    let (call, ask_id) = (call_line(&kept, &tool), kept.id().to_owned());
    kept.close();
    if let Some(pane) = pane {
        notice(
            pane,
            &ask_id,
            "not-run",
            format!("{call} did not run: the agent restarted before it was answered."),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_digest_is_of_the_canonical_arguments_and_the_data_stays_small() {
        let a = input_digest(&json!({"command": "ls", "timeout": 5}));
        let b = input_digest(&serde_json::from_str(r#"{"timeout":5,"command":"ls"}"#).unwrap());
        assert_eq!(a, b, "key order does not matter");
        assert_ne!(a, input_digest(&json!({"command": "ls -la", "timeout": 5})));
        let huge = json!({"path": "a.txt", "content": "x".repeat(1 << 20)});
        let data = card_data("0b7d6c2e-5a0f-4a55-9a1e-3f1c2d4e5f60", "write", &input_digest(&huge));
        assert!(serde_json::to_string(&data).unwrap().len() < durable_types::AGENT_DATA_MAX / 8);
    }
}
