//! ACP session updates → the pane's items. Sans-IO: updates and the time
//! go in, items come out; the caller writes them and drives the timer
//! ([`Mapper::flush_at`]).
//!
//! | update | item |
//! |---|---|
//! | `agent_message_chunk` | `reply`, `partial` while it grows (at most every `every`), final when something else begins or the turn ends |
//! | `agent_thought_chunk` | `thinking`, the same way |
//! | `user_message_chunk` | `user`, in a replay only (in a live turn the send wrote it) |
//! | `tool_call`, `tool_call_update` | one `tool` item per call, rewritten as it goes: `running` (pending, in progress), `ok` (completed), `error` (failed), `denied` (failed after the user refused it) |
//! | a `diff` in a call's content | a `code` item, `lang: diff`, after the call |
//! | `plan` | one `markdown` item per conversation, rewritten in place |
//! | `session_info_update` with a title | no item: [`Mapper::take_title`] |
//! | `notice` | a `notice` |
//! | usage, commands, modes, config | nothing |
//!
//! Item ids: `<prefix>-<n>` for the segment's `n`th text block (a turn's
//! prefix is its turn id, a replay's `load-<k>`), `<prefix>-tool-<n>` for
//! its `n`th tool call, `<that>-diff-<k>` for a call's diffs,
//! `<prefix>-n<k>` for notices, and the plan's id given at construction.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use agent_client_protocol::schema::MaybeUndefined;
use agent_client_protocol::v1::schema::{
    ContentBlock, ContentChunk, NoticeSeverity, Plan, PlanEntryStatus, SessionUpdate, ToolCall,
    ToolCallContent, ToolCallStatus, ToolCallUpdate, ToolKind,
};
use durable_core::ItemCadence;
use durable_types::{Id, Item, ItemBody, NoticeTone, ToolInfo, ToolStatus, arguments_view, call_summary};
use serde_json::Value;

/// Text kept per block at most: a reply's limit on the wire (a thinking
/// block's is smaller; the item rules cut it). What comes past it is
/// dropped, so a flood of chunks does not grow memory.
const TEXT_MAX: usize = 256 * 1024;
/// A tool's output kept at most (the wire's limit).
const OUTPUT_MAX: usize = 64 * 1024;
/// Text blocks and tool calls per segment at most; past them updates are
/// dropped (a flood of alternating chunks does not grow the map of what
/// was written without end).
const BLOCKS_MAX: usize = 4096;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    Reply,
    Thinking,
    User,
}

/// The text block being streamed.
struct Block {
    kind: Kind,
    id: Id,
    text: String,
    message_id: Option<String>,
}

impl Block {
    fn body(&self, partial: bool) -> Option<ItemBody> {
        if self.text.trim().is_empty() {
            return None;
        }
        let text = self.text.clone();
        Some(match self.kind {
            Kind::Reply => ItemBody::Reply { text, partial },
            Kind::Thinking => ItemBody::Thinking { text, partial },
            Kind::User => ItemBody::User { text, request_id: None },
        })
    }
}

/// What is known of one tool call.
struct Tool {
    id: Id,
    name: String,
    title: String,
    raw_input: Option<Value>,
    status: ToolCallStatus,
    denied: bool,
    content_output: Option<String>,
    terminal: String,
    diffs: Vec<String>,
}

impl Tool {
    fn call(&self) -> String {
        call_line(&self.title, &self.name, self.raw_input.as_ref())
    }

    fn status(&self) -> ToolStatus {
        match self.status {
            ToolCallStatus::Completed => ToolStatus::Ok,
            ToolCallStatus::Failed if self.denied => ToolStatus::Denied,
            ToolCallStatus::Failed => ToolStatus::Error,
            _ => ToolStatus::Running,
        }
    }

    fn output(&self) -> Option<String> {
        let out = match &self.content_output {
            Some(text) if !text.is_empty() => text.clone(),
            _ => self.terminal.clone(),
        };
        Some(out).filter(|o| !o.is_empty())
    }

    fn body(&self) -> ItemBody {
        ItemBody::Tool {
            name: self.name.clone(),
            call: self.call(),
            status: self.status(),
            output: self.output(),
            badge: None,
        }
    }
}

/// The call on one line: the agent's title when it gave one, else the
/// tool's name and its raw input (`name(key: value, …)`).
fn call_line(title: &str, name: &str, raw: Option<&Value>) -> String {
    let title = title.lines().find(|l| !l.trim().is_empty()).unwrap_or("").trim();
    if !title.is_empty() {
        return title.to_owned();
    }
    match raw {
        Some(v) if !v.is_null() => call_summary(name, v),
        _ => format!("{name}()"),
    }
}

fn kind_name(kind: ToolKind) -> String {
    serde_json::to_value(kind)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_else(|| "tool".into())
}

/// What the card of a permission request shows of its call.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct CallView {
    /// The `tool` item, when the call was seen.
    pub item: Option<Id>,
    /// Name, line and arguments.
    pub tool: ToolInfo,
}

/// One conversation's mapping (see the module docs).
pub(crate) struct Mapper {
    plan_id: Id,
    prefix: String,
    replay: bool,
    blocks: usize,
    tools_made: usize,
    notices: usize,
    current: Option<Block>,
    tools: HashMap<String, Tool>,
    title: Option<String>,
    dirty: bool,
    dirty_tools: HashSet<String>,
    /// Partial items at most once per `every`; an unchanged item is not
    /// written again.
    cadence: ItemCadence,
}

impl Mapper {
    /// A conversation's mapping: partial items at most once per `every`;
    /// the plan is the item `plan_id`.
    pub(crate) fn new(every: Duration, plan_id: Id) -> Mapper {
        Mapper {
            plan_id,
            prefix: "acp".into(),
            replay: false,
            blocks: 0,
            tools_made: 0,
            notices: 0,
            current: None,
            tools: HashMap::new(),
            title: None,
            dirty: false,
            dirty_tools: HashSet::new(),
            cadence: ItemCadence::new(every),
        }
    }

    /// Starts a segment (a turn, a replay, what comes between turns): its
    /// items' ids begin with `prefix`. In a replay, `user_message_chunk`s
    /// are `user` items. What the last segment streamed should be
    /// [`finish`](Self::finish)ed first.
    pub(crate) fn begin(&mut self, prefix: &str, replay: bool) {
        self.prefix = prefix.to_owned();
        self.replay = replay;
        self.blocks = 0;
        self.tools_made = 0;
        self.notices = 0;
        self.current = None;
        self.tools.clear();
        self.dirty = false;
        self.dirty_tools.clear();
        self.cadence.reset();
    }

    /// A title the agent gave since the last call (`session_info_update`).
    pub(crate) fn take_title(&mut self) -> Option<String> {
        self.title.take()
    }

    /// When the held partial items are due, if any are held.
    pub(crate) fn flush_at(&self) -> Option<Instant> {
        if !self.dirty && self.dirty_tools.is_empty() {
            return None;
        }
        Some(self.cadence.next_partial_at().unwrap_or_else(Instant::now))
    }

    /// The held partial items, if due at `now`.
    pub(crate) fn flush(&mut self, now: Instant) -> Vec<Item> {
        let out = self.flush_items(now);
        self.changed(out)
    }

    /// The end of a segment: the streamed block as it stands, final; a
    /// call still running reads `error` when `failed_running` (the turn was
    /// stopped or the agent exited), else stays as it is.
    pub(crate) fn finish(&mut self, failed_running: bool) -> Vec<Item> {
        let mut out = Vec::new();
        self.close_block(&mut out);
        for t in self.tools.values_mut() {
            if failed_running && t.status() == ToolStatus::Running {
                t.status = ToolCallStatus::Failed;
            }
        }
        let mut ids: Vec<&Tool> = self.tools.values().collect();
        ids.sort_by(|a, b| a.id.as_str().cmp(b.id.as_str()));
        for t in ids {
            push(&mut out, t.id.clone(), t.body());
        }
        self.dirty = false;
        self.dirty_tools.clear();
        self.changed(out)
    }

    /// The user refused the call (a reject option, or the card closed
    /// unanswered): when it fails, it reads `denied`.
    pub(crate) fn deny(&mut self, tool_call_id: &str) -> Vec<Item> {
        let mut out = Vec::new();
        if let Some(t) = self.tools.get_mut(tool_call_id) {
            t.denied = true;
            push(&mut out, t.id.clone(), t.body());
        }
        self.changed(out)
    }

    /// What a card about the call `tool_call_id` shows: the call as seen in
    /// `tool_call`s so far, merged with what the request itself carries.
    pub(crate) fn call_view(&self, request: &ToolCallUpdate) -> CallView {
        let id = request.tool_call_id.0.as_ref();
        let known = self.tools.get(id);
        let f = &request.fields;
        let name = f
            .name
            .clone()
            .or_else(|| f.kind.map(kind_name))
            .or_else(|| known.map(|t| t.name.clone()))
            .unwrap_or_else(|| "tool".into());
        let title = f.title.clone().or_else(|| known.map(|t| t.title.clone())).unwrap_or_default();
        let raw = f.raw_input.clone().or_else(|| known.and_then(|t| t.raw_input.clone()));
        let args = raw.as_ref().map(arguments_view).unwrap_or_default();
        let call = call_line(&title, &name, raw.as_ref());
        CallView { item: known.map(|t| t.id.clone()), tool: ToolInfo { name, call, args } }
    }

    /// The items an update gives now (partial ones only when due), each
    /// only when it changed.
    pub(crate) fn on_update(&mut self, update: &SessionUpdate, now: Instant) -> Vec<Item> {
        let mut out = Vec::new();
        match update {
            SessionUpdate::AgentMessageChunk(c) => self.chunk(Kind::Reply, c, &mut out),
            SessionUpdate::AgentThoughtChunk(c) => self.chunk(Kind::Thinking, c, &mut out),
            SessionUpdate::UserMessageChunk(c) if self.replay => self.chunk(Kind::User, c, &mut out),
            SessionUpdate::ToolCall(call) => self.tool_call(call, &mut out),
            SessionUpdate::ToolCallUpdate(update) => self.tool_update(update, &mut out),
            SessionUpdate::Plan(plan) => push(&mut out, self.plan_id.clone(), plan_body(plan)),
            SessionUpdate::SessionInfoUpdate(info) => match &info.title {
                MaybeUndefined::Value(title) if !title.trim().is_empty() => self.title = Some(title.clone()),
                _ => {}
            },
            SessionUpdate::Notice(n) => {
                let tone = match n.severity {
                    NoticeSeverity::Error => NoticeTone::Error,
                    NoticeSeverity::Warning => NoticeTone::Warn,
                    _ => NoticeTone::Info,
                };
                let text = match &n.description {
                    Some(d) if !d.is_empty() => format!("{}: {d}", n.title),
                    _ => n.title.clone(),
                };
                out.extend(self.notice(text, tone));
            }
            _ => {}
        }
        out.extend(self.flush_items(now));
        self.changed(out)
    }

    /// A notice of the segment (the agent's exit, a failed start, …).
    pub(crate) fn notice(&mut self, text: String, tone: NoticeTone) -> Vec<Item> {
        let mut out = Vec::new();
        self.notices += 1;
        if let Ok(id) = Id::new(format!("{}-n{}", self.prefix, self.notices)) {
            push(&mut out, id, ItemBody::Notice { text, partial: false, tone: Some(tone) });
        }
        out
    }

    fn chunk(&mut self, kind: Kind, chunk: &ContentChunk, out: &mut Vec<Item>) {
        let text = content_text(&chunk.content);
        let message_id = chunk.message_id.as_ref().map(|m| m.0.to_string());
        let same = self.current.as_ref().is_some_and(|b| {
            b.kind == kind && (message_id.is_none() || b.message_id.is_none() || b.message_id == message_id)
        });
        if !same {
            self.close_block(out);
            if self.blocks >= BLOCKS_MAX {
                return;
            }
            let Ok(id) = Id::new(format!("{}-{}", self.prefix, self.blocks)) else { return };
            self.blocks += 1;
            self.current = Some(Block { kind, id, text: String::new(), message_id: message_id.clone() });
        }
        if let Some(block) = &mut self.current {
            push_capped(&mut block.text, &text, TEXT_MAX);
            if block.message_id.is_none() {
                block.message_id = message_id;
            }
            // A user item has no partial form: it is written when it closes.
            self.dirty |= kind != Kind::User;
        }
    }

    /// Writes the streamed block as final and closes it.
    fn close_block(&mut self, out: &mut Vec<Item>) {
        if let Some((id, body)) = self.current.take().and_then(|b| b.body(false).map(|body| (b.id, body))) {
            push(out, id, body);
        }
        self.dirty = false;
    }

    fn tool_call(&mut self, call: &ToolCall, out: &mut Vec<Item>) {
        let key = call.tool_call_id.0.to_string();
        self.close_block(out);
        if !self.tools.contains_key(&key) {
            if self.tools_made >= BLOCKS_MAX {
                return;
            }
            let Ok(id) = Id::new(format!("{}-tool-{}", self.prefix, self.tools_made)) else { return };
            self.tools_made += 1;
            let name = call.name.clone().unwrap_or_else(|| kind_name(call.kind));
            self.tools.insert(
                key.clone(),
                Tool {
                    id,
                    name,
                    title: String::new(),
                    raw_input: None,
                    status: ToolCallStatus::Pending,
                    denied: false,
                    content_output: None,
                    terminal: String::new(),
                    diffs: Vec::new(),
                },
            );
        }
        let Some(t) = self.tools.get_mut(&key) else { return };
        t.title = call.title.clone();
        t.status = call.status;
        if call.raw_input.is_some() {
            t.raw_input = call.raw_input.clone();
        }
        apply_content(t, &call.content);
        apply_meta(t, call.meta.as_ref());
        self.dirty_tools.remove(&key);
        tool_items(t, out);
    }

    fn tool_update(&mut self, update: &ToolCallUpdate, out: &mut Vec<Item>) {
        let key = update.tool_call_id.0.to_string();
        if !self.tools.contains_key(&key) {
            // An update of a call never announced: it is made from the update.
            let f = &update.fields;
            let mut call = ToolCall::new(update.tool_call_id.clone(), f.title.clone().unwrap_or_default());
            call.kind = f.kind.unwrap_or_default();
            call.name = f.name.clone();
            self.tool_call(&call, out);
        }
        let Some(t) = self.tools.get_mut(&key) else { return };
        let before = t.status;
        let f = &update.fields;
        if let Some(title) = &f.title {
            t.title = title.clone();
        }
        if let Some(name) = &f.name {
            t.name = name.clone();
        }
        if let Some(status) = f.status {
            t.status = status;
        }
        if f.raw_input.is_some() {
            t.raw_input = f.raw_input.clone();
        }
        let diffs = t.diffs.len();
        if let Some(content) = &f.content {
            apply_content(t, content);
        }
        apply_meta(t, update.meta.as_ref());
        let only_output =
            before == t.status && f.title.is_none() && f.raw_input.is_none() && diffs == t.diffs.len();
        if only_output && t.status() == ToolStatus::Running {
            // Output as it streams is held like text.
            self.dirty_tools.insert(key);
        } else {
            self.dirty_tools.remove(&key);
            tool_items(t, out);
        }
    }

    fn flush_items(&mut self, now: Instant) -> Vec<Item> {
        if !self.cadence.partial_due(now) {
            return Vec::new();
        }
        let mut out = Vec::new();
        if self.dirty {
            self.dirty = false;
            if let Some((id, body)) =
                self.current.as_ref().and_then(|b| b.body(true).map(|body| (b.id.clone(), body)))
            {
                push(&mut out, id, body);
            }
        }
        for key in std::mem::take(&mut self.dirty_tools) {
            if let Some(t) = self.tools.get(&key) {
                push(&mut out, t.id.clone(), t.body());
            }
        }
        if !out.is_empty() {
            self.cadence.partials_written(now);
        }
        out
    }

    fn changed(&mut self, items: Vec<Item>) -> Vec<Item> {
        self.cadence.changed(items)
    }
}

/// The call's item, then its diffs.
fn tool_items(t: &Tool, out: &mut Vec<Item>) {
    push(out, t.id.clone(), t.body());
    for (k, diff) in t.diffs.iter().enumerate() {
        if let Ok(id) = Id::new(format!("{}-diff-{k}", t.id.as_str())) {
            push(out, id, ItemBody::Code { text: diff.clone(), lang: Some("diff".into()) });
        }
    }
}

/// A call's content (the whole list: an update replaces it): text as the
/// output, diffs as code; a terminal is a display hint (its output comes
/// in `_meta`).
fn apply_content(t: &mut Tool, content: &[ToolCallContent]) {
    let mut text = String::new();
    let mut diffs = Vec::new();
    for c in content {
        match c {
            ToolCallContent::Content(c) => {
                let part = content_text(&c.content);
                if !text.is_empty() && !part.is_empty() {
                    text.push('\n');
                }
                push_capped(&mut text, &part, OUTPUT_MAX);
            }
            ToolCallContent::Diff(d) => {
                let mut diff = String::new();
                let path = d.path.display();
                push_capped(&mut diff, &format!("--- {path}\n+++ {path}\n"), TEXT_MAX);
                for line in d.old_text.as_deref().unwrap_or("").lines() {
                    push_capped(&mut diff, &format!("-{line}\n"), TEXT_MAX);
                }
                for line in d.new_text.lines() {
                    push_capped(&mut diff, &format!("+{line}\n"), TEXT_MAX);
                }
                diffs.push(diff);
            }
            _ => {}
        }
    }
    t.content_output = Some(text).filter(|s| !s.is_empty()).or(t.content_output.take());
    if !diffs.is_empty() && diffs.len() <= BLOCKS_MAX {
        t.diffs = diffs;
    }
}

/// pi-acp's terminal hints: `_meta.terminal_output.data` (output as it
/// comes) and `_meta.terminal_exit.exit_code`.
fn apply_meta(t: &mut Tool, meta: Option<&serde_json::Map<String, Value>>) {
    let Some(meta) = meta else { return };
    if let Some(data) = meta.get("terminal_output").and_then(|o| o.get("data")).and_then(Value::as_str) {
        push_capped(&mut t.terminal, data, OUTPUT_MAX);
    }
}

fn plan_body(plan: &Plan) -> ItemBody {
    let mut text = String::from("**Plan**\n");
    for entry in &plan.entries {
        let line = entry.content.lines().next().unwrap_or("");
        let mark = match entry.status {
            PlanEntryStatus::Completed => "- [x] ",
            PlanEntryStatus::InProgress => "- [ ] ▶ ",
            _ => "- [ ] ",
        };
        push_capped(&mut text, &format!("{mark}{line}\n"), TEXT_MAX);
    }
    ItemBody::Markdown { text, partial: false }
}

/// What a content block shows as text.
fn content_text(block: &ContentBlock) -> String {
    match block {
        ContentBlock::Text(t) => t.text.clone(),
        ContentBlock::ResourceLink(l) => format!("[{}]({})", l.name, l.uri),
        ContentBlock::Image(_) => "[image]".into(),
        ContentBlock::Audio(_) => "[audio]".into(),
        ContentBlock::Resource(_) => "[resource]".into(),
        _ => String::new(),
    }
}

/// Appends `more` to `text` up to `max` bytes (cut at a character boundary).
fn push_capped(text: &mut String, more: &str, max: usize) {
    let room = max.saturating_sub(text.len());
    if more.len() <= room {
        text.push_str(more);
        return;
    }
    let mut cut = room;
    while cut > 0 && !more.is_char_boundary(cut) {
        cut -= 1;
    }
    text.push_str(&more[..cut]);
}

fn push(out: &mut Vec<Item>, id: Id, body: ItemBody) {
    // The item rules clean and cut the text; an item they refuse is dropped.
    if let Ok((item, _)) = Item::new(id, body).sanitized() {
        out.push(item);
    }
}

#[cfg(test)]
mod tests;
