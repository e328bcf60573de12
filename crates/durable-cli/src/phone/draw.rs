//! How the phone draws what the agent sent: panes, items by kind
//! (docs/wire.md §6.1) and cards (§7), as plain text lines. Text from the
//! network loses its control and invisible characters first, so an agent
//! cannot move the cursor or hide words on the terminal.

use serde_json::Value;

use super::model::{Ask, FieldType, Kind, Pane, short_id};
use crate::text::invisible;

/// Collie's words where the agent no longer keeps a chat's oldest messages
/// (docs/wire.md §6 and §10: `dropped`).
pub(crate) const SKIPPED: &str = "Older messages were skipped: the durable agent no longer keeps them.";

/// Collie's words when the agent's wire versions (§3) and the phone's share
/// none: `durable-hello: incompatible: the durable agent speaks 2..3, this
/// Collie speaks 1..1`.
pub(crate) fn incompatible(agent: (u64, u64), phone: (u64, u64)) -> String {
    format!(
        "durable-hello: incompatible: the durable agent speaks {}..{}, this Collie speaks {}..{}",
        agent.0, agent.1, phone.0, phone.1
    )
}

/// One line of text from the network, safe to print.
pub(crate) fn clean(text: &str) -> String {
    text.chars()
        .map(|c| if c == '\t' || c == '\n' || c == '\r' { ' ' } else { c })
        .filter(|c| !c.is_control() && !invisible(*c))
        .collect()
}

/// Body text from the network: its lines, each safe to print.
pub(crate) fn clean_lines(text: &str) -> Vec<String> {
    text.split('\n').map(|l| clean(&l.replace('\t', "    "))).collect()
}

pub(crate) fn quoted(text: &str) -> String {
    format!("\"{}\"", clean(text))
}

/// `9m 58s`, `58s`, `1h 02m`; `expired` once past.
pub(crate) fn time_left(ms: i128) -> String {
    if ms <= 0 {
        return "expired".into();
    }
    let s = (ms + 999) / 1000;
    match (s / 3600, (s % 3600) / 60, s % 60) {
        (0, 0, s) => format!("{s}s"),
        (0, m, s) => format!("{m}m {s:02}s"),
        (h, m, _) => format!("{h}h {m:02}m"),
    }
}

/// A pane on one line: id, title, state, its turn, asks, actions.
pub(crate) fn pane_line(pane: &Pane) -> String {
    let mut line = format!("pane {} {} {}", clean(&pane.id), quoted(&pane.title), clean(&pane.state));
    if pane.state == "working" {
        if let Some(turn) = &pane.turn_id {
            line.push_str(&format!(" (turn {})", clean(turn)));
        }
    }
    match pane.open_asks.len() {
        0 => {}
        1 => line.push_str(", 1 open ask"),
        n => line.push_str(&format!(", {n} open asks")),
    }
    if !pane.actions.is_empty() {
        let ids: Vec<String> = pane.actions.iter().map(|a| clean(&a.id)).collect();
        line.push_str(&format!(", actions: {}", ids.join(" ")));
    }
    line
}

fn option_list(options: &[super::model::Opt]) -> String {
    options
        .iter()
        .map(|o| {
            let always = if o.always { " (always: asks you to confirm)" } else { "" };
            format!("{} {}{always}", clean(&o.id), quoted(&o.label))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// A card: its first line names it, the others are indented. With `now`,
/// the time left; without, the expiry itself (a line that does not change).
pub(crate) fn card_lines(ask: &Ask, now: Option<i128>) -> Vec<String> {
    let kind = match &ask.kind {
        Kind::Choice(_) => "choice",
        Kind::Multi { .. } => "multi",
        Kind::Text { .. } => "text",
        Kind::Form(_) => "form",
        Kind::Other(k) => k.as_str(),
    };
    let mut lines =
        vec![format!("ask {} on {} ({}): {}", ask.short(), clean(&ask.pane), clean(kind), clean(&ask.title))];
    if let Some(reason) = &ask.reason {
        for (n, line) in clean_lines(reason).into_iter().enumerate() {
            lines.push(if n == 0 { format!("  reason: {line}") } else { format!("    {line}") });
        }
    }
    if let Some((_, call)) = &ask.tool {
        lines.push(format!("  tool: {}", clean(call)));
    }
    match &ask.push {
        (Some(t), Some(l)) => lines.push(format!("  push: {} - {}", clean(t), clean(l))),
        (Some(t), None) | (None, Some(t)) => lines.push(format!("  push: {}", clean(t))),
        (None, None) => {}
    }
    match &ask.kind {
        Kind::Choice(options) => lines.push(format!("  options: {}", option_list(options))),
        Kind::Multi { options, min, max } => {
            lines.push(format!("  pick {min} to {max} of: {}", option_list(options)));
        }
        Kind::Text { placeholder, multiline, max_bytes } => {
            let mut what = vec!["a text answer".to_owned()];
            if let Some(p) = placeholder {
                what.push(format!("placeholder {}", quoted(p)));
            }
            if *multiline {
                what.push("several lines".into());
            }
            if let Some(n) = max_bytes {
                what.push(format!("at most {n} bytes"));
            }
            lines.push(format!("  {}", what.join(", ")));
        }
        Kind::Form(fields) => {
            for f in fields {
                let ty = match &f.ty {
                    FieldType::Text => "text".to_owned(),
                    FieldType::Number => "number".to_owned(),
                    FieldType::Bool => "yes/no".to_owned(),
                    FieldType::Select(options) => {
                        let o: Vec<String> = options
                            .iter()
                            .map(|o| format!("{} {}", clean(&o.id), quoted(&o.label)))
                            .collect();
                        format!("one of {}", o.join(" | "))
                    }
                    FieldType::Other(t) => format!("{} (not known to this phone)", clean(t)),
                };
                let required = if f.required { ", required" } else { "" };
                lines.push(format!("  field {} {} ({ty}{required})", clean(&f.id), quoted(&f.label)));
            }
        }
        Kind::Other(_) => lines.push("  (a kind this phone cannot answer)".into()),
    }
    match (now, ask.expires_ms, &ask.expires_at) {
        (Some(now), Some(at), _) => lines.push(format!("  expires in {}", time_left(at - now))),
        (_, _, Some(at)) => lines.push(format!("  expires at {}", clean(at))),
        _ => {}
    }
    lines
}

fn text_of<'a>(item: &'a Value, key: &str) -> &'a str {
    item.get(key).and_then(Value::as_str).unwrap_or("")
}

fn badge(item: &Value) -> String {
    match item.get("badge") {
        Some(b) => format!(" <{} {}>", clean(text_of(b, "text")), clean(text_of(b, "tone"))),
        None => String::new(),
    }
}

/// `prefix` then the text's lines (the first after the prefix).
fn with_text(prefix: &str, text: &str, partial: bool) -> Vec<String> {
    let mut lines = clean_lines(text);
    lines[0] = format!("{prefix}{}", lines[0]);
    if partial {
        if let Some(last) = lines.last_mut() {
            last.push_str(" …");
        }
    }
    lines
}

/// An item drawn by kind; continuation lines are not indented.
pub(crate) fn item_lines(item: &Value) -> Vec<String> {
    let partial = item.get("partial") == Some(&Value::Bool(true));
    let kind = text_of(item, "kind");
    match kind {
        "user" => with_text("you: ", text_of(item, "text"), false),
        "reply" | "markdown" => with_text("agent: ", text_of(item, "text"), partial),
        "thinking" => with_text("thinking: ", text_of(item, "text"), partial),
        "notice" => {
            let tone = match text_of(item, "tone") {
                "warn" => "warning: ",
                "error" => "error: ",
                _ => "note: ",
            };
            with_text(tone, text_of(item, "text"), partial)
        }
        "code" => {
            let lang = text_of(item, "lang");
            let head = if lang.is_empty() { "code:".to_owned() } else { format!("code ({}):", clean(lang)) };
            let mut lines = vec![head];
            lines.extend(clean_lines(text_of(item, "text")).into_iter().map(|l| format!("  {l}")));
            lines
        }
        "tool" => {
            let mut lines = vec![format!(
                "tool {} [{}]: {}{}",
                clean(text_of(item, "name")),
                clean(text_of(item, "status")),
                clean(text_of(item, "call")),
                badge(item)
            )];
            if let Some(output) = item.get("output").and_then(Value::as_str) {
                lines.extend(clean_lines(output).into_iter().map(|l| format!("  | {l}")));
            }
            lines
        }
        "link" => vec![format!("link: {} <{}>", clean(text_of(item, "text")), clean(text_of(item, "href")))],
        "progress" => {
            let value = item
                .get("value")
                .and_then(Value::as_f64)
                .filter(|v| v.is_finite())
                .unwrap_or(0.0)
                .clamp(0.0, 1.0);
            let filled = (value * 10.0).round() as usize;
            vec![format!(
                "progress: {} [{}{}] {:.0}%{}",
                clean(text_of(item, "label")),
                "#".repeat(filled),
                ".".repeat(10 - filled),
                value * 100.0,
                badge(item)
            )]
        }
        other => vec![format!("(an item of kind {} this phone does not draw)", quoted(other))],
    }
}

/// A write's answer on one line: the result (sent, queued, replayed…) or
/// the refusal with its code, message and the fields its code adds (§2).
pub(crate) fn outcome(what: &str, request_id: &str, status: u16, json: Option<&Value>) -> String {
    let Some(v) = json else {
        return format!("{what}: the agent answered {status} without a JSON body (request {request_id})");
    };
    if v.get("ok") == Some(&Value::Bool(true)) {
        let result = clean(text_of(v, "result"));
        let mut extra = Vec::new();
        match v.get("turnId") {
            Some(Value::String(t)) if result == "queued" => extra.push(format!("behind turn {}", clean(t))),
            Some(Value::String(t)) => extra.push(format!("turn {}", clean(t))),
            Some(Value::Null) => extra.push("no turn before".to_owned()),
            _ => {}
        }
        if let Some(p) = v.get("pane") {
            extra.push(match p.as_str() {
                Some(p) => format!("pane {}", clean(p)),
                None => "no pane".to_owned(),
            });
        }
        if let Some(by) = v.get("decidedBy").and_then(Value::as_str) {
            extra.push(format!("decided by {}", clean(by)));
        }
        if v.get("replayed") == Some(&Value::Bool(true)) {
            extra.push("replayed: the agent had it already".to_owned());
        }
        let extra = if extra.is_empty() { String::new() } else { format!(" ({})", extra.join(", ")) };
        return format!("{what}: {result}{extra} [request {request_id}]");
    }
    let code = clean(text_of(v, "code"));
    let mut line = format!("{what}: refused {status} {code}: {}", clean(text_of(v, "message")));
    if let Some(reason) = v.get("reason").and_then(Value::as_str) {
        line.push_str(&format!(" (reason: {})", clean(reason)));
    }
    if let Some(ask) = v.get("askId").and_then(Value::as_str) {
        line.push_str(&format!(" (ask {})", short_id(&clean(ask))));
    }
    match v.get("turnId") {
        Some(Value::String(t)) => line.push_str(&format!(" (turn now {})", clean(t))),
        Some(Value::Null) if code == "turn-moved" => line.push_str(" (no turn yet)"),
        _ => {}
    }
    if let Some(by) = v.get("decidedBy").and_then(Value::as_str) {
        line.push_str(&format!(" (decided by {})", clean(by)));
    }
    format!("{line} [request {request_id}]")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn network_text_loses_escapes_and_invisible_characters() {
        assert_eq!(clean("a\u{1b}[2Jb\u{202E}c\u{200B}d\te"), "a[2Jbcd e");
        assert_eq!(clean_lines("one\ntwo\u{7}"), ["one", "two"]);
        assert_eq!(quoted("x\ny"), "\"x y\"");
    }

    #[test]
    fn items_are_drawn_by_kind() {
        let d = |v: Value| item_lines(&v).join("|");
        assert_eq!(d(json!({"kind": "user", "text": "hi"})), "you: hi");
        assert_eq!(d(json!({"kind": "reply", "text": "Got", "partial": true})), "agent: Got …");
        assert_eq!(d(json!({"kind": "thinking", "text": "hm\nmore"})), "thinking: hm|more");
        assert_eq!(d(json!({"kind": "notice", "text": "late", "tone": "warn"})), "warning: late");
        assert_eq!(d(json!({"kind": "notice", "text": "ok"})), "note: ok");
        assert_eq!(
            d(json!({"kind": "tool", "name": "refund", "call": "refund(order: \"5521\")", "status": "ok",
                "output": "done", "badge": {"text": "40 €", "tone": "good"}})),
            "tool refund [ok]: refund(order: \"5521\") <40 € good>|  | done"
        );
        assert_eq!(
            d(json!({"kind": "link", "text": "Order", "href": "https://x.invalid/1"})),
            "link: Order <https://x.invalid/1>"
        );
        assert_eq!(
            d(json!({"kind": "progress", "label": "Upload", "value": 0.5})),
            "progress: Upload [#####.....] 50%"
        );
        assert_eq!(
            d(json!({"kind": "progress", "label": "x", "value": "lots"})),
            "progress: x [..........] 0%"
        );
        assert_eq!(d(json!({"kind": "code", "lang": "rust", "text": "fn x()"})), "code (rust):|  fn x()");
        assert_eq!(d(json!({"kind": "hologram"})), "(an item of kind \"hologram\" this phone does not draw)");
        assert_eq!(d(json!(42)), "(an item of kind \"\" this phone does not draw)");
    }

    #[test]
    fn collies_words() {
        assert_eq!(
            incompatible((2, 3), (1, 1)),
            "durable-hello: incompatible: the durable agent speaks 2..3, this Collie speaks 1..1"
        );
        assert_eq!(SKIPPED, "Older messages were skipped: the durable agent no longer keeps them.");
    }

    #[test]
    fn times_left_read_well() {
        assert_eq!(time_left(58_000), "58s");
        assert_eq!(time_left(598_001), "9m 59s");
        assert_eq!(time_left(3_725_000), "1h 02m");
        assert_eq!(time_left(-1), "expired");
    }

    #[test]
    fn outcomes_name_the_result_or_the_refusal() {
        let sent =
            json!({"ok": true, "result": "sent", "turnId": null, "requestId": "p-1", "replayed": false});
        assert_eq!(outcome("send", "p-1", 200, Some(&sent)), "send: sent (no turn before) [request p-1]");
        let queued = json!({"ok": true, "result": "queued", "turnId": "r-1", "replayed": true});
        assert_eq!(
            outcome("send", "p-2", 200, Some(&queued)),
            "send: queued (behind turn r-1, replayed: the agent had it already) [request p-2]"
        );
        let refused = json!({"ok": false, "code": "refused", "message": "the handler refused", "reason": "not-working"});
        assert_eq!(
            outcome("steer", "p-3", 409, Some(&refused)),
            "steer: refused 409 refused: the handler refused (reason: not-working) [request p-3]"
        );
        assert!(outcome("stop", "p-4", 502, None).contains("without a JSON body"));
    }
}
