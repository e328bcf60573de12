//! What the phone knows of the agent: the last state poll (docs/wire.md
//! §5), the open asks (§7) and the view of the open pane (§6), read from
//! JSON the network gave. Nothing here trusts that JSON: a field of the
//! wrong shape is an `Err` naming it, never a panic.

use serde_json::Value;

use super::draw;

/// The wire versions this phone speaks (§3).
pub(crate) const WIRE: (u64, u64) = (1, 1);

/// Reads a field, naming it when it is missing or of another type.
fn field<'a>(v: &'a Value, at: &str, key: &str) -> Result<&'a Value, String> {
    v.get(key).ok_or_else(|| format!("{at}.{key} is missing"))
}

fn string(v: &Value, at: &str, key: &str) -> Result<String, String> {
    field(v, at, key)?.as_str().map(str::to_owned).ok_or_else(|| format!("{at}.{key} is not a string"))
}

fn opt_string(v: &Value, at: &str, key: &str) -> Result<Option<String>, String> {
    match v.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(format!("{at}.{key} is not a string")),
    }
}

fn number(v: &Value, at: &str, key: &str) -> Result<u64, String> {
    field(v, at, key)?.as_u64().ok_or_else(|| format!("{at}.{key} is not a whole number"))
}

fn boolean(v: &Value, at: &str, key: &str) -> Result<bool, String> {
    field(v, at, key)?.as_bool().ok_or_else(|| format!("{at}.{key} is not true or false"))
}

fn array<'a>(v: &'a Value, at: &str, key: &str) -> Result<&'a Vec<Value>, String> {
    field(v, at, key)?.as_array().ok_or_else(|| format!("{at}.{key} is not an array"))
}

fn strings(v: &Value, at: &str, key: &str) -> Result<Vec<String>, String> {
    array(v, at, key)?
        .iter()
        .enumerate()
        .map(|(i, s)| s.as_str().map(str::to_owned).ok_or_else(|| format!("{at}.{key}[{i}] is not a string")))
        .collect()
}

/// `GET /hello` (§3).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Hello {
    pub(crate) host: String,
    pub(crate) ready: bool,
    pub(crate) wire: (u64, u64),
    pub(crate) epoch: String,
    pub(crate) caller_check: String,
    /// Every capability the agent named, with its value.
    pub(crate) caps: Vec<(String, bool)>,
}

impl Hello {
    pub(crate) fn parse(v: &Value) -> Result<Hello, String> {
        if v.get("ok") != Some(&Value::Bool(true)) {
            return Err("hello: the answer is not {\"ok\": true, …}".into());
        }
        let wire = field(v, "hello", "wire")?;
        let caps = field(v, "hello", "caps")?
            .as_object()
            .ok_or("hello.caps is not an object")?
            .iter()
            .map(|(k, v)| {
                v.as_bool()
                    .map(|b| (k.clone(), b))
                    .ok_or_else(|| format!("hello.caps.{k} is not true or false"))
            })
            .collect::<Result<_, _>>()?;
        Ok(Hello {
            host: string(v, "hello", "host")?,
            ready: boolean(v, "hello", "ready")?,
            wire: (number(wire, "hello.wire", "min")?, number(wire, "hello.wire", "max")?),
            epoch: string(v, "hello", "epoch")?,
            caller_check: opt_string(v, "hello", "callerCheck")?.unwrap_or_default(),
            caps,
        })
    }

    pub(crate) fn has(&self, cap: &str) -> bool {
        self.caps.iter().any(|(name, on)| name == cap && *on)
    }
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Entry {
    pub(crate) id: String,
    pub(crate) label: String,
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Tab {
    pub(crate) id: String,
    pub(crate) title: String,
    pub(crate) panes: Vec<String>,
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Workspace {
    pub(crate) id: String,
    pub(crate) title: String,
    pub(crate) tabs: Vec<Tab>,
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Pane {
    pub(crate) id: String,
    pub(crate) tab: String,
    pub(crate) title: String,
    pub(crate) state: String,
    pub(crate) turn_id: Option<String>,
    pub(crate) last_seq: u64,
    pub(crate) open_asks: Vec<String>,
    pub(crate) actions: Vec<Entry>,
}

impl Pane {
    fn parse(v: &Value, at: &str) -> Result<Pane, String> {
        let actions = array(v, at, "actions")?
            .iter()
            .enumerate()
            .map(|(i, a)| {
                let at = format!("{at}.actions[{i}]");
                Ok(Entry { id: string(a, &at, "id")?, label: string(a, &at, "label")? })
            })
            .collect::<Result<_, String>>()?;
        Ok(Pane {
            id: string(v, at, "id")?,
            tab: string(v, at, "tab")?,
            title: string(v, at, "title")?,
            state: string(v, at, "state")?,
            turn_id: opt_string(v, at, "turnId")?,
            last_seq: number(v, at, "lastSeq")?,
            open_asks: strings(v, at, "openAsks")?,
            actions,
        })
    }
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Opt {
    pub(crate) id: String,
    pub(crate) label: String,
    pub(crate) always: bool,
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) enum FieldType {
    Text,
    Number,
    Bool,
    Select(Vec<Opt>),
    Other(String),
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Field {
    pub(crate) id: String,
    pub(crate) label: String,
    pub(crate) ty: FieldType,
    pub(crate) required: bool,
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Kind {
    Choice(Vec<Opt>),
    Multi {
        options: Vec<Opt>,
        min: u64,
        max: u64,
    },
    Text {
        placeholder: Option<String>,
        multiline: bool,
        max_bytes: Option<u64>,
    },
    Form(Vec<Field>),
    /// A kind this phone does not know: shown, not answerable.
    Other(String),
}

/// An open ask, a card (§7).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Ask {
    pub(crate) id: String,
    pub(crate) pane: String,
    pub(crate) kind: Kind,
    pub(crate) title: String,
    pub(crate) reason: Option<String>,
    /// The tool's name and its call on one line.
    pub(crate) tool: Option<(String, String)>,
    pub(crate) push: (Option<String>, Option<String>),
    pub(crate) expires_at: Option<String>,
    /// `expiresAt` in Unix milliseconds, when it could be read.
    pub(crate) expires_ms: Option<i128>,
    pub(crate) hash: String,
}

fn options(v: &Value, at: &str) -> Result<Vec<Opt>, String> {
    array(v, at, "options")?
        .iter()
        .enumerate()
        .map(|(i, o)| {
            let at = format!("{at}.options[{i}]");
            Ok(Opt {
                id: string(o, &at, "id")?,
                label: string(o, &at, "label")?,
                always: o.get("always") == Some(&Value::Bool(true)),
            })
        })
        .collect()
}

/// Unix milliseconds of an RFC 3339 time.
pub(crate) fn unix_ms(text: &str) -> Option<i128> {
    let t = time::OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339).ok()?;
    Some(t.unix_timestamp_nanos() / 1_000_000)
}

/// Now, in Unix milliseconds.
pub(crate) fn now_ms() -> i128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i128)
        .unwrap_or(0)
}

impl Ask {
    pub(crate) fn parse(v: &Value, at: &str) -> Result<Ask, String> {
        let kind_name = string(v, at, "kind")?;
        let kind = match kind_name.as_str() {
            "choice" => Kind::Choice(options(v, at)?),
            "multi" => {
                let options = options(v, at)?;
                let min = v.get("min").and_then(Value::as_u64).unwrap_or(1);
                let max = v.get("max").and_then(Value::as_u64).unwrap_or(options.len() as u64);
                Kind::Multi { options, min, max }
            }
            "text" => Kind::Text {
                placeholder: opt_string(v, at, "placeholder")?,
                multiline: v.get("multiline") == Some(&Value::Bool(true)),
                max_bytes: v.get("maxBytes").and_then(Value::as_u64),
            },
            "form" => Kind::Form(
                array(v, at, "fields")?
                    .iter()
                    .enumerate()
                    .map(|(i, f)| {
                        let at = format!("{at}.fields[{i}]");
                        let ty = match string(f, &at, "type")?.as_str() {
                            "text" => FieldType::Text,
                            "number" => FieldType::Number,
                            "bool" => FieldType::Bool,
                            "select" => FieldType::Select(options(f, &at)?),
                            other => FieldType::Other(other.to_owned()),
                        };
                        Ok(Field {
                            id: string(f, &at, "id")?,
                            label: string(f, &at, "label")?,
                            ty,
                            required: f.get("required") == Some(&Value::Bool(true)),
                        })
                    })
                    .collect::<Result<_, String>>()?,
            ),
            other => Kind::Other(other.to_owned()),
        };
        let tool = match v.get("tool") {
            None | Some(Value::Null) => None,
            Some(t) => {
                Some((string(t, &format!("{at}.tool"), "name")?, string(t, &format!("{at}.tool"), "call")?))
            }
        };
        let push = match v.get("push") {
            None | Some(Value::Null) => (None, None),
            Some(p) => (
                opt_string(p, &format!("{at}.push"), "title")?,
                opt_string(p, &format!("{at}.push"), "line")?,
            ),
        };
        let expires_at = opt_string(v, at, "expiresAt")?;
        Ok(Ask {
            id: string(v, at, "id")?,
            pane: string(v, at, "pane")?,
            kind,
            title: string(v, at, "title")?,
            reason: opt_string(v, at, "reason")?,
            tool,
            push,
            expires_ms: expires_at.as_deref().and_then(unix_ms),
            expires_at,
            hash: string(v, at, "hash")?,
        })
    }

    /// The first 8 characters of the id: enough to tell asks apart.
    pub(crate) fn short(&self) -> &str {
        short_id(&self.id)
    }
}

pub(crate) fn short_id(id: &str) -> &str {
    match id.char_indices().nth(8) {
        Some((at, _)) => &id[..at],
        None => id,
    }
}

/// The open pane's chat: items in order of first appearance, an item
/// written again under its id replacing the earlier one (§6).
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct View {
    pub(crate) pane: String,
    /// The events read so far (`next`); `None` before the first read.
    pub(crate) next: Option<u64>,
    pub(crate) items: Vec<Value>,
    pub(crate) dropped: bool,
}

impl View {
    pub(crate) fn new(pane: &str) -> View {
        View { pane: pane.to_owned(), ..View::default() }
    }

    fn upsert(&mut self, item: Value) {
        let id = item.get("id").cloned();
        match self.items.iter_mut().find(|i| id.is_some() && i.get("id") == id.as_ref()) {
            Some(slot) => *slot = item,
            None => self.items.push(item),
        }
    }
}

/// Everything the phone shows.
#[derive(Clone, Debug, Default)]
pub(crate) struct Model {
    pub(crate) hello: Option<Hello>,
    pub(crate) epoch: Option<String>,
    pub(crate) seq: u64,
    pub(crate) etag: Option<String>,
    pub(crate) ready: bool,
    pub(crate) workspaces: Vec<Workspace>,
    pub(crate) panes: Vec<Pane>,
    pub(crate) closed: Vec<Entry>,
    pub(crate) starters: Vec<Entry>,
    pub(crate) asks: Vec<Ask>,
    pub(crate) view: Option<View>,
}

/// What a state answer did.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Applied {
    /// The changes, one line each.
    pub(crate) lines: Vec<String>,
    /// The agent restarted and answered a `since` poll: read the whole state.
    pub(crate) read_again: bool,
}

impl Model {
    pub(crate) fn pane(&self, id: &str) -> Option<&Pane> {
        self.panes.iter().find(|p| p.id == id)
    }

    pub(crate) fn ask(&self, id: &str) -> Option<&Ask> {
        self.asks.iter().find(|a| a.id == id)
    }

    /// The poll's query: `since` once the phone has a state.
    pub(crate) fn state_path(&self) -> String {
        if self.epoch.is_some() && self.seq > 0 {
            format!("/v1/state?since={}", self.seq)
        } else {
            "/v1/state".into()
        }
    }

    /// Every line the phone would print for what it knows, keyed, in order.
    fn describe(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        if self.epoch.is_some() {
            let ready = if self.ready { "ready" } else { "starting (not ready yet)" };
            out.push(("agent".into(), format!("agent {ready}")));
        }
        for ws in &self.workspaces {
            out.push((
                format!("ws {}", ws.id),
                format!("workspace {} {}", draw::clean(&ws.id), draw::quoted(&ws.title)),
            ));
            for tab in &ws.tabs {
                let panes: Vec<String> = tab.panes.iter().map(|p| draw::clean(p)).collect();
                out.push((
                    format!("tab {}", tab.id),
                    format!(
                        "tab {} {}: {}",
                        draw::clean(&tab.id),
                        draw::quoted(&tab.title),
                        panes.join(", ")
                    ),
                ));
            }
        }
        for pane in &self.panes {
            out.push((format!("pane {}", pane.id), draw::pane_line(pane)));
        }
        if !self.closed.is_empty() {
            let list: Vec<String> = self
                .closed
                .iter()
                .map(|c| format!("{} {}", draw::clean(&c.id), draw::quoted(&c.label)))
                .collect();
            out.push(("closed".into(), format!("closed (reopen): {}", list.join(", "))));
        }
        if !self.starters.is_empty() {
            let list: Vec<String> = self
                .starters
                .iter()
                .map(|c| format!("{} {}", draw::clean(&c.id), draw::quoted(&c.label)))
                .collect();
            out.push(("starters".into(), format!("starters: {}", list.join(", "))));
        }
        for ask in &self.asks {
            out.push((format!("ask {}", ask.id), draw::card_lines(ask, None).join("\n")));
        }
        out
    }

    /// Applies a `GET /v1/state` answer (full or `since`).
    pub(crate) fn apply_state(&mut self, v: &Value, etag: Option<&str>) -> Result<Applied, String> {
        if v.get("ok") != Some(&Value::Bool(true)) {
            return Err("state: the answer is not {\"ok\": true, …}".into());
        }
        let epoch = string(v, "state", "epoch")?;
        let seq = number(v, "state", "seq")?;
        let full = boolean(v, "state", "full")?;
        let ready = boolean(v, "state", "ready")?;
        let restarted = self.epoch.as_ref().is_some_and(|e| *e != epoch);
        if restarted && !full {
            // Sequences start over with a new epoch (§3): this diff means nothing.
            self.seq = 0;
            self.etag = None;
            return Ok(Applied {
                lines: vec!["agent restarted (a new epoch): reading its whole state".into()],
                read_again: true,
            });
        }
        // Parse everything before changing anything.
        let panes: Vec<Pane> = array(v, "state", "panes")?
            .iter()
            .enumerate()
            .map(|(i, p)| Pane::parse(p, &format!("state.panes[{i}]")))
            .collect::<Result<_, _>>()?;
        let removed = strings(v, "state", "removed")?;
        let asks: Vec<Ask> = array(v, "state", "asks")?
            .iter()
            .enumerate()
            .map(|(i, a)| Ask::parse(a, &format!("state.asks[{i}]")))
            .collect::<Result<_, _>>()?;
        let layout = match v.get("workspaces") {
            None => None,
            Some(_) => {
                Some((parse_workspaces(v)?, entries(v, "closed", "title")?, entries(v, "starters", "label")?))
            }
        };
        if full && layout.is_none() {
            return Err("state: a full answer without workspaces".into());
        }

        let before = self.describe();
        let mut lines = Vec::new();
        if restarted {
            lines.push("agent restarted (a new epoch)".to_owned());
            if let Some(view) = &mut self.view {
                *view = View::new(&view.pane);
            }
        }
        if full {
            self.panes = panes;
        } else {
            for pane in panes {
                match self.panes.iter_mut().find(|p| p.id == pane.id) {
                    Some(slot) => *slot = pane,
                    None => self.panes.push(pane),
                }
            }
            self.panes.retain(|p| !removed.contains(&p.id));
        }
        if let Some((workspaces, closed, starters)) = layout {
            self.workspaces = workspaces;
            self.closed = closed;
            self.starters = starters;
            // Keep the panes in layout order (§5).
            let order: Vec<&String> =
                self.workspaces.iter().flat_map(|w| w.tabs.iter().flat_map(|t| t.panes.iter())).collect();
            self.panes.sort_by_key(|p| order.iter().position(|id| **id == p.id).unwrap_or(usize::MAX));
        }
        self.asks = asks;
        self.epoch = Some(epoch);
        self.seq = seq;
        self.ready = ready;
        self.etag = etag.map(str::to_owned);
        let after = self.describe();
        let now = now_ms();
        lines.extend(diff(&before, &after, |key, text| {
            match key.strip_prefix("ask ").and_then(|id| self.ask(id)) {
                // A new card shows the time it has left.
                Some(ask) => draw::card_lines(ask, Some(now)).join("\n"),
                None => text.to_owned(),
            }
        }));
        if let Some(view) = &self.view {
            if self.pane(&view.pane).is_none() {
                lines.push(format!("pane {} is gone (closed or removed)", draw::clean(&view.pane)));
                self.view = None;
            }
        }
        Ok(Applied { lines, read_again: false })
    }

    /// Whether the open pane has events the phone has not read.
    pub(crate) fn view_behind(&self) -> Option<(String, u64)> {
        let view = self.view.as_ref()?;
        let pane = self.pane(&view.pane)?;
        match view.next {
            None => Some((view.pane.clone(), 0)),
            Some(next) if pane.last_seq != next => Some((view.pane.clone(), next)),
            Some(_) => None,
        }
    }

    /// Applies a `GET /v1/panes/{pane}/events` answer to the open pane's
    /// view; the lines are the items drawn anew.
    pub(crate) fn apply_events(&mut self, v: &Value) -> Result<Vec<String>, String> {
        if v.get("ok") != Some(&Value::Bool(true)) {
            return Err("events: the answer is not {\"ok\": true, …}".into());
        }
        let pane = string(v, "events", "pane")?;
        let Some(view) = self.view.as_mut().filter(|view| view.pane == pane) else { return Ok(Vec::new()) };
        let next = number(v, "events", "next")?;
        let before: Vec<(String, String)> = chat_lines(view);
        let said = view.dropped;
        if boolean(v, "events", "snapshot")? {
            let items = array(v, "events", "items")?;
            view.items.clear();
            for item in items {
                view.upsert(item.clone());
            }
            view.dropped = v.get("dropped") == Some(&Value::Bool(true));
        } else {
            for (i, e) in array(v, "events", "events")?.iter().enumerate() {
                if e.get("type").and_then(Value::as_str) == Some("item") {
                    view.upsert(field(e, &format!("events.events[{i}]"), "item")?.clone());
                }
            }
        }
        view.next = Some(next);
        let after = chat_lines(view);
        let prefix = format!("[{}] ", draw::clean(&view.pane));
        let mut lines = Vec::new();
        // Once when the agent says it dropped the oldest, again when more of
        // what the phone showed went.
        let lost = before.iter().any(|(k, _)| !after.iter().any(|(a, _)| a == k));
        if view.dropped && (!said || lost) {
            lines.push(format!("{prefix}{}", draw::SKIPPED));
        }
        for (key, text) in &after {
            if !before.iter().any(|(k, t)| k == key && t == text) {
                for (n, line) in text.lines().enumerate() {
                    lines.push(if n == 0 { format!("{prefix}{line}") } else { format!("{prefix}  {line}") });
                }
            }
        }
        Ok(lines)
    }
}

/// Each item of a view as (id, its drawing).
fn chat_lines(view: &View) -> Vec<(String, String)> {
    view.items
        .iter()
        .enumerate()
        .map(|(n, item)| {
            let key = item.get("id").and_then(Value::as_str).map_or_else(|| format!("#{n}"), str::to_owned);
            (key, draw::item_lines(item).join("\n"))
        })
        .collect()
}

fn parse_workspaces(v: &Value) -> Result<Vec<Workspace>, String> {
    array(v, "state", "workspaces")?
        .iter()
        .enumerate()
        .map(|(i, w)| {
            let at = format!("state.workspaces[{i}]");
            let tabs = array(w, &at, "tabs")?
                .iter()
                .enumerate()
                .map(|(j, t)| {
                    let at = format!("{at}.tabs[{j}]");
                    Ok(Tab {
                        id: string(t, &at, "id")?,
                        title: string(t, &at, "title")?,
                        panes: strings(t, &at, "panes")?,
                    })
                })
                .collect::<Result<_, String>>()?;
            Ok(Workspace { id: string(w, &at, "id")?, title: string(w, &at, "title")?, tabs })
        })
        .collect()
}

fn entries(v: &Value, key: &str, label: &str) -> Result<Vec<Entry>, String> {
    match v.get(key) {
        None => Ok(Vec::new()),
        Some(_) => array(v, "state", key)?
            .iter()
            .enumerate()
            .map(|(i, e)| {
                let at = format!("state.{key}[{i}]");
                Ok(Entry { id: string(e, &at, "id")?, label: string(e, &at, label)? })
            })
            .collect(),
    }
}

/// The lines that changed from `before` to `after`, then what went away.
fn diff(
    before: &[(String, String)],
    after: &[(String, String)],
    print: impl Fn(&str, &str) -> String,
) -> Vec<String> {
    let mut lines = Vec::new();
    for (key, text) in after {
        if !before.iter().any(|(k, t)| k == key && t == text) {
            lines.extend(print(key, text).lines().map(str::to_owned));
        }
    }
    for (key, _) in before {
        if !after.iter().any(|(k, _)| k == key) {
            let (what, id) = key.split_once(' ').unwrap_or((key, ""));
            let id = draw::clean(id);
            lines.push(match what {
                "ask" => format!("ask {} closed", short_id(&id)),
                "ws" => format!("workspace {id} removed"),
                "closed" => "closed (reopen): none".to_owned(),
                "starters" => "starters: none".to_owned(),
                _ => format!("{what} {id} removed"),
            });
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn state() -> Value {
        json!({"ok": true, "epoch": "e1", "seq": 3, "ready": true, "full": true,
            "workspaces": [{"id": "support", "title": "Support",
                "tabs": [{"id": "support:main", "title": "Tickets", "panes": ["ticket-1"]}]}],
            "panes": [{"id": "ticket-1", "tab": "support:main", "title": "Maria Lopez", "harness": "desk",
                "sessionId": "ticket-1", "state": "idle", "turnId": null, "lastSeq": 0, "openAsks": [],
                "actions": [{"id": "refund", "label": "Refund", "icon": "check"}]}],
            "removed": [], "closed": [], "starters": [{"id": "new-ticket", "label": "New ticket"}], "asks": []})
    }

    fn ask() -> Value {
        json!({"id": "970f8a0b30368fbbcab73013d31d2d51", "pane": "ticket-1", "kind": "choice",
            "title": "refund wants to run", "itemId": "call-1", "toolCallId": "call-1",
            "tool": {"name": "refund", "call": "refund(order: \"5521\", amount: 40)", "args": []},
            "push": {"title": "refund needs a yes"},
            "options": [{"id": "allow", "label": "Allow"}, {"id": "deny", "label": "Deny"}],
            "createdAt": "2026-11-30T05:00:00.000Z", "readable": true, "cleaned": false, "hash": "ab"})
    }

    #[test]
    fn a_full_state_then_a_since_diff_print_what_changed() {
        let mut m = Model::default();
        let a = m.apply_state(&state(), Some("\"e1-3\"")).unwrap();
        assert_eq!(a.lines[0], "agent ready");
        assert!(a.lines.iter().any(|l| l == "pane ticket-1 \"Maria Lopez\" idle, actions: refund"), "{a:?}");
        assert!(a.lines.iter().any(|l| l == "starters: new-ticket \"New ticket\""));
        assert_eq!(m.state_path(), "/v1/state?since=3");

        let diff = json!({"ok": true, "epoch": "e1", "seq": 5, "ready": true, "full": false,
            "panes": [{"id": "ticket-1", "tab": "support:main", "title": "Maria Lopez", "harness": "desk",
                "sessionId": "ticket-1", "state": "working", "turnId": "r-1", "lastSeq": 2,
                "openAsks": ["970f8a0b30368fbbcab73013d31d2d51"], "actions": [{"id": "refund", "label": "Refund"}]}],
            "removed": [], "asks": [ask()]});
        let a = m.apply_state(&diff, None).unwrap();
        assert_eq!(
            a.lines[0],
            "pane ticket-1 \"Maria Lopez\" working (turn r-1), 1 open ask, actions: refund"
        );
        assert_eq!(a.lines[1], "ask 970f8a0b on ticket-1 (choice): refund wants to run");
        assert!(a.lines.contains(&"  tool: refund(order: \"5521\", amount: 40)".to_owned()), "{a:?}");
        assert_eq!(m.starters.len(), 1, "a diff without layout keeps it");

        let gone = json!({"ok": true, "epoch": "e1", "seq": 6, "ready": true, "full": false,
            "panes": [], "removed": ["ticket-1"], "asks": []});
        let a = m.apply_state(&gone, None).unwrap();
        assert_eq!(a.lines, ["pane ticket-1 removed", "ask 970f8a0b closed"]);
    }

    #[test]
    fn a_new_epoch_with_a_diff_reads_again() {
        let mut m = Model::default();
        m.apply_state(&state(), None).unwrap();
        let other = json!({"ok": true, "epoch": "e2", "seq": 9, "ready": true, "full": false,
            "panes": [], "removed": [], "asks": []});
        let a = m.apply_state(&other, None).unwrap();
        assert!(a.read_again);
        assert_eq!(m.state_path(), "/v1/state");
    }

    #[test]
    fn bad_shapes_are_errors_naming_the_field() {
        let mut m = Model::default();
        let mut bad = state();
        bad["panes"][0]["lastSeq"] = json!("three");
        assert_eq!(m.apply_state(&bad, None).unwrap_err(), "state.panes[0].lastSeq is not a whole number");
        assert!(m.panes.is_empty(), "nothing applied");
        for bad in [json!(null), json!([]), json!({"ok": true}), json!({"ok": false, "code": "x"})] {
            assert!(m.apply_state(&bad, None).is_err());
            assert!(m.apply_events(&bad).is_err() || m.view.is_none());
        }
        let mut a = ask();
        a["options"] = json!([{"id": 3}]);
        assert!(Ask::parse(&a, "ask").is_err());
        assert!(Hello::parse(&json!({"ok": true, "caps": []})).is_err());
    }

    #[test]
    fn a_view_without_its_oldest_messages_says_so_in_collies_words() {
        let mut m = Model::default();
        m.apply_state(&state(), None).unwrap();
        m.view = Some(View::new("ticket-1"));
        let skipped = "[ticket-1] Older messages were skipped: the durable agent no longer keeps them.";
        let snap = |next: u64, id: &str| {
            json!({"ok": true, "pane": "ticket-1", "snapshot": true, "next": next, "state": "idle",
                "turnId": null, "asks": [], "dropped": true, "items": [{"id": id, "kind": "user", "text": id}]})
        };
        assert_eq!(m.apply_events(&snap(2500, "u9")).unwrap(), [skipped, "[ticket-1] you: u9"]);
        // Said once: the events after it do not say it again.
        let page = json!({"ok": true, "pane": "ticket-1", "snapshot": false, "next": 2501, "events": [
            {"seq": 2501, "ts": "t", "type": "item", "item": {"id": "r9", "kind": "reply", "text": "ok"}}]});
        assert_eq!(m.apply_events(&page).unwrap(), ["[ticket-1] agent: ok"]);
        // Behind the tail: the view again, without messages the phone showed.
        assert_eq!(m.apply_events(&snap(4000, "u12")).unwrap(), [skipped, "[ticket-1] you: u12"]);
    }

    #[test]
    fn events_grow_the_view_and_print_changed_items() {
        let mut m = Model::default();
        m.apply_state(&state(), None).unwrap();
        m.view = Some(View::new("ticket-1"));
        assert_eq!(m.view_behind(), Some(("ticket-1".into(), 0)));
        let page = json!({"ok": true, "pane": "ticket-1", "snapshot": false, "next": 2, "events": [
            {"seq": 1, "ts": "t", "type": "item", "item": {"id": "u", "kind": "user", "text": "hi"}},
            {"seq": 2, "ts": "t", "type": "item", "item": {"id": "r", "kind": "reply", "text": "Got", "partial": true}}]});
        assert_eq!(m.apply_events(&page).unwrap(), ["[ticket-1] you: hi", "[ticket-1] agent: Got …"]);
        let page = json!({"ok": true, "pane": "ticket-1", "snapshot": false, "next": 3, "events": [
            {"seq": 3, "ts": "t", "type": "item", "item": {"id": "r", "kind": "reply", "text": "Got it: hi\nbye"}}]});
        assert_eq!(m.apply_events(&page).unwrap(), ["[ticket-1] agent: Got it: hi", "[ticket-1]   bye"]);
        assert_eq!(m.view.as_ref().unwrap().items.len(), 2);
        let snap = json!({"ok": true, "pane": "ticket-1", "snapshot": true, "next": 9, "state": "idle",
            "turnId": null, "asks": [], "dropped": false, "items": [{"id": "u", "kind": "user", "text": "hi"}]});
        assert!(m.apply_events(&snap).unwrap().is_empty());
        assert_eq!(m.view.as_ref().unwrap().next, Some(9));
    }
}
