//! The desk's questions: `/ask <kind> [Ns]` in a ticket, the refund
//! approval, and raising again after a restart the asks the SDK's receipt
//! store kept (same id, same card, same absolute expiry).

use std::sync::Arc;

use durable_sdk::asks::{ApprovalFuture, AskHandle, KeptAsk};
use durable_sdk::asks::{FieldType, FormField, ToolInfo, canonical_json};
use durable_sdk::types::{Id, ItemBody, NoticeTone};
use durable_sdk::{ApprovalOptions, Pane, require_approval};
use durable_sdk::{AskOption, AskSpec, Item};
use serde_json::{Value, json};

use crate::desk::Desk;

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
    /// `/ask <kind> [Ns]` on a ticket: raised, and kept by the SDK's receipt
    /// store until it closes (its kind kept with it, to echo the answer
    /// after a restart).
    pub(crate) fn raise_new(
        self: &Arc<Self>,
        pane: &Pane,
        kind: AskKindCmd,
        secs: Option<u64>,
    ) -> Result<(), String> {
        let n = self.store.next("ask").map_err(|e| format!("the desk's store failed: {e}"))?;
        let tool_call_id = format!("ask-{n}");
        let mut spec = spec(kind, &tool_call_id, pane.id(), self.core.allow_always())
            .agent_data(json!({"kind": kind.name()}));
        if let Some(s) = secs {
            spec = spec.expires_at(self.core.now().plus_millis(s * 1000));
        }
        let handle = pane.ask(spec).map_err(|e| e.to_string())?;
        let desk = self.clone();
        let pane = pane.clone();
        tokio::spawn(async move { desk.echo_answer(pane, handle, tool_call_id).await });
        Ok(())
    }

    /// The refund action: `require_approval("refund", {order, amount}, …)`
    /// on its own task (the action answers at once).
    pub(crate) fn start_refund(self: &Arc<Self>, pane: &Pane) -> Result<(), String> {
        let n = self.store.next("refund").map_err(|e| format!("the desk's store failed: {e}"))?;
        let tool_call_id = format!("refund-{n}");
        let row = self.store.pane(pane.id()).ok().flatten();
        let args = refund_args(
            row.as_ref().and_then(|r| r.order.as_deref()),
            row.as_ref().and_then(|r| r.amount.as_ref()),
        );
        let options = ApprovalOptions::new(pane, tool_call_id.clone()).agent_data(json!({"kind": "refund"}));
        let approval = require_approval("refund", &args, options).map_err(|e| e.to_string())?;
        tokio::spawn(self.clone().refund_when_decided(pane.clone(), approval, tool_call_id, args));
        Ok(())
    }

    /// The asks open when the desk last stopped (kept by the SDK's receipt
    /// store): raised again now, or — with `--raise-delay-ms` — held and
    /// raised later by [`raise_kept`](Self::raise_kept). Called before
    /// `ready()`: what is held here is claimed, the rest is closed there.
    pub(crate) async fn take_up_kept(self: &Arc<Self>, later: bool) -> Result<Vec<KeptAsk>, String> {
        let kept = self.core.kept_asks().await.map_err(|e| format!("the kept asks: {e}"))?;
        if later {
            return Ok(kept);
        }
        self.raise_kept(kept);
        Ok(Vec::new())
    }

    /// Raises kept asks again, each with the task that waits for its
    /// answer. One whose pane is gone, or of a kind the desk does not know,
    /// is closed by the SDK (dropped unclaimed); one past its expiry closes
    /// as timed out at once.
    pub(crate) fn raise_kept(self: &Arc<Self>, kept: Vec<KeptAsk>) {
        for ask in kept {
            let Some(pane) = self.core.pane(ask.pane()) else { continue };
            let kind = ask.agent_data().and_then(|d| d["kind"].as_str()).unwrap_or("").to_owned();
            let tool_call_id = ask.tool_call_id().to_owned();
            if kind == "refund" {
                let row = self.store.pane(pane.id()).ok().flatten();
                let args = refund_args(
                    row.as_ref().and_then(|r| r.order.as_deref()),
                    row.as_ref().and_then(|r| r.amount.as_ref()),
                );
                match ask.raise_approval() {
                    Ok(approval) => {
                        tokio::spawn(self.clone().refund_when_decided(pane, approval, tool_call_id, args));
                    }
                    Err(e) => {
                        self.core.warn(&format!("desk: could not raise refund {tool_call_id} again: {e}"))
                    }
                }
                continue;
            }
            if AskKindCmd::from_name(&kind).is_none() {
                continue;
            }
            match ask.raise() {
                Ok(handle) => {
                    let desk = self.clone();
                    tokio::spawn(async move { desk.echo_answer(pane, handle, tool_call_id).await });
                }
                Err(e) => self.core.warn(&format!("desk: could not raise ask {tool_call_id} again: {e}")),
            }
        }
    }

    /// Waits for the refund's card; writes whether the refund was issued.
    async fn refund_when_decided(
        self: Arc<Self>,
        pane: Pane,
        approval: ApprovalFuture,
        n: String,
        args: Value,
    ) {
        let approval = approval.await;
        let (text, tone) = if approval.approved {
            (format!("Refund of {} issued", amount_text(&args)), NoticeTone::Info)
        } else {
            ("Refund not issued".to_owned(), NoticeTone::Warn)
        };
        if let Ok(id) = Id::new(format!("{n}-result")) {
            self.say(&pane, Item::new(id, ItemBody::Notice { text, partial: false, tone: Some(tone) }));
        }
    }

    /// Waits for an `/ask` answer and writes `Answer: <compact JSON, keys sorted>`.
    /// (A card closed unanswered gets the SDK's own closing line, which
    /// its store keeps.)
    async fn echo_answer(self: Arc<Self>, pane: Pane, handle: AskHandle, tool_call_id: String) {
        if let Ok(decided) = handle.decided().await {
            let text = format!("Answer: {}", canonical_json(&decided.answer.to_json()));
            if let Ok(id) = Id::new(format!("answer-{tool_call_id}")) {
                self.say(&pane, Item::new(id, ItemBody::Reply { text, partial: false }));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use durable_sdk::types::Timestamp;

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
