//! The desk's questions: `/ask <kind> [Ns]` in a ticket, the refund
//! approval, keeping undecided asks in the store, and raising them again
//! (same tool-call id, same absolute expiry) after a restart.

use std::sync::Arc;

use durable_sdk::asks::AskHandle;
use durable_sdk::asks::{DecidedBy, FieldType, FormField, Outcome, ToolInfo, canonical_json};
use durable_sdk::types::{Id, ItemBody, NoticeTone, Timestamp};
use durable_sdk::{ApprovalOptions, Pane, require_approval};
use durable_sdk::{AskOption, AskSpec, Item, ask_id_for};
use serde_json::{Value, json};

use crate::desk::Desk;
use crate::store::StoredAsk;

/// The kinds `/ask` raises.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AskKindCmd {
    Choice,
    Multi,
    Text,
    Form,
    Approve,
}

impl AskKindCmd {
    pub(crate) fn name(self) -> &'static str {
        match self {
            AskKindCmd::Choice => "choice",
            AskKindCmd::Multi => "multi",
            AskKindCmd::Text => "text",
            AskKindCmd::Form => "form",
            AskKindCmd::Approve => "approve",
        }
    }

    pub(crate) fn from_name(s: &str) -> Option<Self> {
        Some(match s {
            "choice" => AskKindCmd::Choice,
            "multi" => AskKindCmd::Multi,
            "text" => AskKindCmd::Text,
            "form" => AskKindCmd::Form,
            "approve" => AskKindCmd::Approve,
            _ => return None,
        })
    }
}

pub(crate) const ASK_USAGE: &str = "usage: /ask choice|multi|text|form|approve [Ns]";

/// Parses the text of a send: `None` when it is not an `/ask` command,
/// `Some(Err(usage))` when it is one, badly written.
pub(crate) fn parse_command(text: &str) -> Option<Result<(AskKindCmd, Option<u64>), String>> {
    let mut words = text.split_whitespace();
    if words.next() != Some("/ask") {
        return None;
    }
    let parsed = (|| {
        let kind = AskKindCmd::from_name(words.next().ok_or(ASK_USAGE)?).ok_or(ASK_USAGE)?;
        let secs = match words.next() {
            None => None,
            Some(w) => {
                let n: u64 = w.strip_suffix('s').and_then(|n| n.parse().ok()).ok_or(ASK_USAGE)?;
                if n == 0 {
                    return Err(ASK_USAGE);
                }
                Some(n)
            }
        };
        if words.next().is_some() {
            return Err(ASK_USAGE);
        }
        Ok((kind, secs))
    })();
    Some(parsed.map_err(str::to_owned))
}

/// The exact card of each kind (spec README, "The support desk example").
pub(crate) fn spec(kind: AskKindCmd, tool_call_id: &str, pane: &str, allow_always: bool) -> AskSpec {
    match kind {
        AskKindCmd::Choice => AskSpec::choice(
            tool_call_id,
            "Is the problem solved?",
            [AskOption::new("yes", "Yes"), AskOption::new("no", "No")],
        ),
        AskKindCmd::Multi => AskSpec::multi(
            tool_call_id,
            "Which colours?",
            [AskOption::new("red", "Red"), AskOption::new("green", "Green"), AskOption::new("blue", "Blue")],
        ),
        AskKindCmd::Text => AskSpec::text(tool_call_id, "What should the reply say?"),
        AskKindCmd::Form => AskSpec::form(
            tool_call_id,
            "Order details",
            [
                FormField::new("name", "Name", FieldType::Text).required(),
                FormField::new("qty", "Quantity", FieldType::Number),
                FormField::new("gift", "Gift wrap", FieldType::Bool),
                FormField::new("size", "Size", FieldType::Select).options([
                    ("s", "Small"),
                    ("m", "Medium"),
                    ("l", "Large"),
                ]),
            ],
        ),
        AskKindCmd::Approve => {
            let mut options = vec![AskOption::new("allow", "Allow")];
            if allow_always {
                options.push(AskOption::new("allow-always", "Allow always").always());
            }
            options.push(AskOption::new("deny", "Deny"));
            AskSpec::choice(tool_call_id, "escalate wants to run", options)
                .tool(ToolInfo::from_call("escalate", &json!({"ticket": pane})))
                .push_title("escalate needs a yes")
        }
    }
}

/// The refund's arguments for a ticket: `{order, amount}`.
pub(crate) fn refund_args(order: Option<&str>, amount: Option<&Value>) -> Value {
    json!({"order": order.unwrap_or(""), "amount": amount.cloned().unwrap_or(Value::from(0))})
}

fn amount_text(args: &Value) -> String {
    match &args["amount"] {
        Value::String(s) => s.clone(),
        v => v.to_string(),
    }
}

impl Desk {
    /// `/ask <kind> [Ns]` on a ticket: kept in the store first, then raised.
    pub(crate) fn raise_new(
        self: &Arc<Self>,
        pane: &Pane,
        kind: AskKindCmd,
        secs: Option<u64>,
    ) -> Result<(), String> {
        let n = self.store.next("ask").map_err(|e| format!("the desk's store failed: {e}"))?;
        let tool_call_id = format!("ask-{n}");
        let expires_at = secs.map(|s| self.core.now().plus_millis(s * 1000).as_millis());
        let stored = StoredAsk {
            id: ask_id_for(pane.id(), &tool_call_id),
            pane: pane.id().to_owned(),
            kind: kind.name().to_owned(),
            tool_call_id,
            expires_at,
        };
        self.store
            .put_ask(&stored, self.core.now().as_millis())
            .map_err(|e| format!("the desk's store failed: {e}"))?;
        self.raise_stored_one(pane, &stored).inspect_err(|_| {
            let _ = self.store.remove_ask(&stored.id);
        })
    }

    /// The refund action: `require_approval("refund", {order, amount}, …)`
    /// on its own task (the action answers at once).
    pub(crate) fn start_refund(self: &Arc<Self>, pane: &Pane) -> Result<(), String> {
        let n = self.store.next("refund").map_err(|e| format!("the desk's store failed: {e}"))?;
        let tool_call_id = format!("refund-{n}");
        let stored = StoredAsk {
            id: ask_id_for(pane.id(), &tool_call_id),
            pane: pane.id().to_owned(),
            kind: "refund".into(),
            tool_call_id,
            expires_at: None,
        };
        self.store
            .put_ask(&stored, self.core.now().as_millis())
            .map_err(|e| format!("the desk's store failed: {e}"))?;
        self.raise_stored_one(pane, &stored).inspect_err(|_| {
            let _ = self.store.remove_ask(&stored.id);
        })
    }

    /// Raises every stored undecided ask again (at start-up, or
    /// `--raise-delay-ms` after it). An ask whose pane is gone is dropped;
    /// one past its expiry closes as timed out at once.
    pub(crate) fn raise_stored(self: &Arc<Self>) {
        let asks = match self.store.asks() {
            Ok(a) => a,
            Err(e) => {
                self.core.warn(&format!("desk: could not read the stored asks: {e}"));
                return;
            }
        };
        for ask in asks {
            let Some(pane) = self.core.pane(&ask.pane) else {
                let _ = self.store.remove_ask(&ask.id);
                continue;
            };
            if let Err(e) = self.raise_stored_one(&pane, &ask) {
                self.core.warn(&format!("desk: could not raise ask {} again: {e}", ask.id));
                let _ = self.store.remove_ask(&ask.id);
            }
        }
    }

    /// Raises one stored ask and starts the task that waits for its answer.
    fn raise_stored_one(self: &Arc<Self>, pane: &Pane, ask: &StoredAsk) -> Result<(), String> {
        if ask.kind == "refund" {
            let row = self.store.pane(pane.id()).ok().flatten();
            let args = refund_args(
                row.as_ref().and_then(|r| r.order.as_deref()),
                row.as_ref().and_then(|r| r.amount.as_ref()),
            );
            let mut options = ApprovalOptions::new(pane, ask.tool_call_id.clone());
            if let Some(at) = ask.expires_at {
                options = options.timeout_ms(at.saturating_sub(self.core.now().as_millis()));
            }
            let approval = require_approval("refund", &args, options).map_err(|e| e.to_string())?;
            let desk = self.clone();
            let pane = pane.clone();
            let n = ask.tool_call_id.clone();
            tokio::spawn(async move {
                let approval = approval.await;
                let _ = desk.store.remove_ask(&approval.ask_id);
                let (text, tone) = if approval.approved {
                    (format!("Refund of {} issued", amount_text(&args)), NoticeTone::Info)
                } else {
                    ("Refund not issued".to_owned(), NoticeTone::Warn)
                };
                if let Ok(id) = Id::new(format!("{n}-result")) {
                    desk.say(
                        &pane,
                        Item::new(id, ItemBody::Notice { text, partial: false, tone: Some(tone) }),
                    );
                }
            });
            return Ok(());
        }
        let kind = AskKindCmd::from_name(&ask.kind)
            .ok_or_else(|| format!("unknown stored ask kind {}", ask.kind))?;
        let mut spec = spec(kind, &ask.tool_call_id, pane.id(), self.core.allow_always());
        if let Some(at) = ask.expires_at {
            spec = spec.expires_at(Timestamp::from_millis(at));
        }
        let title = spec.title.clone();
        let handle = pane.ask(spec).map_err(|e| e.to_string())?;
        let desk = self.clone();
        let pane = pane.clone();
        let tool_call_id = ask.tool_call_id.clone();
        tokio::spawn(async move { desk.echo_answer(pane, handle, tool_call_id, title).await });
        Ok(())
    }

    /// Waits for an `/ask` answer and writes `Answer: <compact JSON, keys sorted>`.
    async fn echo_answer(
        self: Arc<Self>,
        pane: Pane,
        handle: AskHandle,
        tool_call_id: String,
        title: String,
    ) {
        let ask_id = handle.id().to_owned();
        let outcome = handle.decided().await;
        let _ = self.store.remove_ask(&ask_id);
        match outcome {
            Ok(decided) => {
                let text = format!("Answer: {}", canonical_json(&decided.answer.to_json()));
                if let Ok(id) = Id::new(format!("answer-{tool_call_id}")) {
                    self.say(&pane, Item::new(id, ItemBody::Reply { text, partial: false }));
                }
            }
            Err(closed) => {
                // The core wrote the chat notice; keep the same one for history.
                let text = match (closed.decided_by, closed.outcome) {
                    (DecidedBy::Timeout, _) | (_, Outcome::Timeout) => {
                        format!("Timed out before an answer: {title}")
                    }
                    _ => format!("Stopped before an answer: {title}"),
                };
                if let Ok(id) = Id::new(format!("ask-closed-{ask_id}")) {
                    let item = Item::new(id, ItemBody::Notice { text, partial: false, tone: None });
                    self.keep(pane.id(), &item);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ask_commands() {
        assert_eq!(parse_command("hello"), None);
        assert_eq!(parse_command("/asking"), None);
        assert_eq!(parse_command("/ask choice"), Some(Ok((AskKindCmd::Choice, None))));
        assert_eq!(parse_command("  /ask form 30s "), Some(Ok((AskKindCmd::Form, Some(30)))));
        assert!(matches!(parse_command("/ask"), Some(Err(_))));
        assert!(matches!(parse_command("/ask poll"), Some(Err(_))));
        assert!(matches!(parse_command("/ask text 30"), Some(Err(_))));
        assert!(matches!(parse_command("/ask text 0s"), Some(Err(_))));
        assert!(matches!(parse_command("/ask text 3s more"), Some(Err(_))));
    }

    #[test]
    fn every_kind_builds_and_approve_drops_allow_always_where_it_is_off() {
        let pane = Id::new("ticket-1").unwrap();
        for kind in
            [AskKindCmd::Choice, AskKindCmd::Multi, AskKindCmd::Text, AskKindCmd::Form, AskKindCmd::Approve]
        {
            spec(kind, "ask-1", "ticket-1", true).build(&pane, Timestamp::from_millis(0), true).unwrap();
        }
        let on = spec(AskKindCmd::Approve, "ask-1", "ticket-1", true)
            .build(&pane, Timestamp::EPOCH, true)
            .unwrap();
        assert!(on.kind.has_always());
        let off = spec(AskKindCmd::Approve, "ask-1", "ticket-1", false)
            .build(&pane, Timestamp::EPOCH, false)
            .unwrap();
        assert!(!off.kind.has_always());
        assert!(off.tool.is_some());
    }

    #[test]
    fn refund_args_for_ticket_1() {
        let args = refund_args(Some("5521"), Some(&Value::from(40)));
        assert_eq!(durable_sdk::asks::call_summary("refund", &args), "refund(order: \"5521\", amount: 40)");
        assert_eq!(amount_text(&args), "40");
    }
}
