//! ACP session updates → the pane's items. Sans-IO: updates and the time
//! go in, items come out; the caller writes them and drives the timer
//! ([`Mapper::flush_at`]).
//!
//! | update | item |
//! |---|---|
//! | `agent_message_chunk` | `reply`, `partial` while it grows (at most every `every`), final when something else begins, its `messageId` changes, or the turn ends; cut at the item's limit with a `notice` saying so |
//! | an `agent_message_chunk` marked `_meta.claudeCode.kind: "informational"` | a `notice` of its own |
//! | `agent_thought_chunk` | `thinking`, the same way |
//! | `user_message_chunk` | `user`, in a replay only (in a live turn the send wrote it); the agent's interruption markers (`[Request interrupted by user…]`) are a `notice` "Stopped." instead |
//! | `tool_call`, `tool_call_update` | one `tool` item per call, rewritten as it goes: `running` (pending, in progress), `ok` (completed), `error` (failed, or its card closed unanswered), `denied` (failed after the user refused it); its output from `rawOutput`, else its text content (a whole-fenced block unwrapped), else pi-acp's terminal output |
//! | a `diff` in a call's content | a `code` item, `lang: diff`, after the call |
//! | `plan` | one `markdown` item per turn, rewritten in place within the turn |
//! | `session_info_update` with a title | no item: [`Mapper::take_title`] |
//! | `notice` | a `notice` |
//! | usage, commands, config | nothing |
//! | `current_mode_update` | the mode buttons follow (the conversation, not this mapping: see the crate docs) |
//!
//! Item ids: `<prefix>-<n>` for the segment's `n`th text block (a turn's
//! prefix is its turn id, a replay's `load-<k>`), `<prefix>-tool-<n>` for
//! its `n`th tool call, `<that>-diff-<k>` for a call's diffs,
//! `<prefix>-n<k>` for notices, `<prefix>-plan-<k>` for the plan of the
//! segment's `k`th turn (a replay holds many turns).

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use agent_client_protocol::schema::MaybeUndefined;
use agent_client_protocol::v1::schema::{
    ContentBlock, ContentChunk, NoticeSeverity, Plan, PlanEntryStatus, SessionUpdate, ToolCall,
    ToolCallContent, ToolCallStatus, ToolCallUpdate, ToolKind,
};
use durable_runtime::ItemCadence;
use durable_types::item_limits;
use durable_types::{Id, Item, ItemBody, NoticeTone, ToolInfo, ToolStatus, arguments_view, call_summary};
use serde_json::Value;

/// Text kept per diff at most (a code item's limit on the wire). What comes
/// past it is dropped, so a flood does not grow memory.
const TEXT_MAX: usize = item_limits::CODE_TEXT;
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

/// What the agent writes in place of a user message when a turn was cut
/// (Claude Code's words; a replay carries them as user messages).
const INTERRUPTED: &str = "[Request interrupted by user";
/// A tool item's output when its card closed with no answer.
pub(crate) const STOPPED_UNANSWERED: &str = "Stopped before an answer: the call did not run.";
/// A tool item's output when the agent says the user cut it.
const INTERRUPTED_CALL: &str = "Interrupted: the call did not run.";

/// Whether `text` is one of the agent's interruption markers, not words of the user's.
fn is_interruption(text: &str) -> bool {
    let text = text.trim();
    text.starts_with(INTERRUPTED) && text.ends_with(']') && !text[1..].contains('[')
}

impl Kind {
    /// The most text an item of the kind holds (the wire's limit).
    fn limit(self) -> usize {
        match self {
            Kind::Reply => item_limits::REPLY_TEXT,
            Kind::Thinking => item_limits::THINKING_TEXT,
            Kind::User => item_limits::USER_TEXT,
        }
    }
}

/// The text block being streamed.
struct Block {
    kind: Kind,
    id: Id,
    text: String,
    message_id: Option<String>,
    /// Text past the limit was dropped.
    cut: bool,
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
    /// Its card closed with no answer (a stop, a close, the agent's end).
    unanswered: bool,
    content_output: Option<String>,
    /// `rawOutput` as text: what the call gave, where `content` may only
    /// describe the call (Claude Code's `Bash`, codex-acp).
    raw_output: Option<String>,
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
            _ if self.unanswered => ToolStatus::Error,
            ToolCallStatus::Failed if self.denied => ToolStatus::Denied,
            ToolCallStatus::Failed => ToolStatus::Error,
            _ => ToolStatus::Running,
        }
    }

    fn output(&self) -> Option<String> {
        if self.unanswered && self.status != ToolCallStatus::Completed {
            return Some(STOPPED_UNANSWERED.into());
        }
        let given = [&self.raw_output, &self.content_output].into_iter().flatten().find(|t| !t.is_empty());
        let out = match given {
            Some(text) if self.status == ToolCallStatus::Failed && is_interruption(text) => {
                INTERRUPTED_CALL.to_owned()
            }
            Some(text) => text.clone(),
            None => self.terminal.clone(),
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
    prefix: String,
    /// The plan item of the turn under way, once it has one.
    plan: Option<Id>,
    /// Turns of the segment that had a plan (a replay holds many turns).
    plans: usize,
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
    /// A conversation's mapping: partial items at most once per `every`.
    pub(crate) fn new(every: Duration) -> Mapper {
        Mapper {
            prefix: "acp".into(),
            plan: None,
            plans: 0,
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
        self.plan = None;
        self.plans = 0;
        self.current = None;
        self.tools.clear();
        self.dirty = false;
        self.dirty_tools.clear();
        self.cadence.reset();
    }

    /// A turn's first partial items wait one interval from `now` too: a
    /// reply shorter than that goes out whole, once. A phone polls every
    /// 2 s and sees no difference; the agent writes, and its pollers read,
    /// fewer items.
    pub(crate) fn hold_first_partial(&mut self, now: Instant) {
        self.cadence.partials_written(now);
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
    /// Whether a call of the segment still runs (its agent never said it
    /// ended).
    pub(crate) fn any_running(&self) -> bool {
        self.tools.values().any(|t| t.status() == ToolStatus::Running)
    }

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

    /// The user refused the call (a reject option): when it fails, it
    /// reads `denied`.
    pub(crate) fn deny(&mut self, tool_call_id: &str) -> Vec<Item> {
        let mut out = Vec::new();
        if let Some(t) = self.tools.get_mut(tool_call_id) {
            t.denied = true;
            push(&mut out, t.id.clone(), t.body());
        }
        self.changed(out)
    }

    /// The call's card closed with no answer (a stop, a close, the agent's
    /// end): nobody refused it, and it did not run — it reads `error`,
    /// its output [`STOPPED_UNANSWERED`].
    pub(crate) fn unanswered(&mut self, tool_call_id: &str) -> Vec<Item> {
        let mut out = Vec::new();
        if let Some(t) = self.tools.get_mut(tool_call_id) {
            t.unanswered = true;
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
            SessionUpdate::Plan(plan) => {
                if self.plan.is_none() {
                    self.plans += 1;
                    self.plan = Id::new(format!("{}-plan-{}", self.prefix, self.plans)).ok();
                }
                if let Some(id) = self.plan.clone() {
                    push(&mut out, id, plan_body(plan));
                }
            }
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
        if kind == Kind::Reply && is_informational(chunk) {
            // The agent's word to the user (Claude Code's warnings), not the reply.
            self.close_block(out);
            let plain = text.replace("**", "");
            let tone =
                if plain.trim_start().starts_with("Warning") { NoticeTone::Warn } else { NoticeTone::Info };
            if !plain.trim().is_empty() {
                out.extend(self.notice(plain.trim().to_owned(), tone));
            }
            return;
        }
        if kind == Kind::User && is_interruption(&text) {
            self.close_block(out);
            out.extend(self.notice("Stopped.".into(), NoticeTone::Info));
            return;
        }
        let message_id = chunk.message_id.as_ref().map(|m| m.0.to_string());
        // A chunk with another message id (or none after one) is another message.
        let same = self.current.as_ref().is_some_and(|b| b.kind == kind && b.message_id == message_id);
        if !same {
            self.close_block(out);
            if kind == Kind::User {
                // A user message begins a turn of the replay: its plan is its own.
                self.plan = None;
            }
            if self.blocks >= BLOCKS_MAX {
                return;
            }
            let Ok(id) = Id::new(format!("{}-{}", self.prefix, self.blocks)) else { return };
            self.blocks += 1;
            self.current =
                Some(Block { kind, id, text: String::new(), message_id: message_id.clone(), cut: false });
        }
        if let Some(block) = &mut self.current {
            block.cut |= !push_capped(&mut block.text, &text, kind.limit());
            // A user item has no partial form: it is written when it closes.
            self.dirty |= kind != Kind::User;
        }
    }

    /// Writes the streamed block as final and closes it; a block cut at
    /// its limit is followed by a notice that says so.
    fn close_block(&mut self, out: &mut Vec<Item>) {
        let Some(block) = self.current.take() else { return };
        self.dirty = false;
        if let Some(body) = block.body(false) {
            push(out, block.id.clone(), body);
        }
        if block.cut {
            let what = match block.kind {
                Kind::Reply => "reply",
                Kind::Thinking => "thinking",
                Kind::User => "message",
            };
            let kib = block.kind.limit() / 1024;
            let text =
                format!("The {what} above was cut at {kib} KiB, its limit here: the rest was dropped.");
            out.extend(self.notice(text, NoticeTone::Warn));
        }
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
                    unanswered: false,
                    content_output: None,
                    raw_output: None,
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
        if let Some(raw) = &call.raw_output {
            t.raw_output = raw_output_text(raw);
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
        if let Some(raw) = &f.raw_output {
            t.raw_output = raw_output_text(raw);
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
    let text = unfenced(&text).to_owned();
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

/// Whether a message chunk is marked informational
/// (`_meta.claudeCode.kind: "informational"`): a word to the user beside the reply.
fn is_informational(chunk: &ContentChunk) -> bool {
    let kind = chunk.meta.as_ref().and_then(|m| m.get("claudeCode")).and_then(|c| c.get("kind"));
    kind.and_then(Value::as_str) == Some("informational")
}

/// A tool's output is plain text: a whole-fenced block (` ``` ` lines
/// around it, as Claude Code wraps a refusal) is unwrapped; anything else
/// is kept as it is.
fn unfenced(text: &str) -> &str {
    let trimmed = text.trim();
    let Some(rest) = trimmed.strip_prefix("```") else { return text };
    let Some(inner) = rest.strip_suffix("```") else { return text };
    // The opening line (and its language tag) goes; a fence inside means
    // more than one block.
    let Some((_, body)) = inner.split_once('\n') else { return text };
    if body.contains("```") {
        return text;
    }
    body.trim_matches('\n')
}

/// `rawOutput` as the call's output: a string as it is; of an object, its
/// `formatted_output`, `output`, `stdout` and `stderr`, or `content`
/// (codex-acp, Claude Code); else the JSON itself, cut to the output's limit.
fn raw_output_text(raw: &Value) -> Option<String> {
    let text = match raw {
        Value::Null => return None,
        Value::String(s) => s.clone(),
        Value::Array(parts) => {
            let texts: Vec<String> = parts
                .iter()
                .filter_map(|p| p.as_str().or_else(|| p.get("text").and_then(Value::as_str)))
                .map(str::to_owned)
                .collect();
            if texts.is_empty() { compact(raw) } else { texts.join("\n") }
        }
        Value::Object(o) => {
            let field = |k: &str| o.get(k).and_then(Value::as_str).filter(|s| !s.is_empty());
            if let Some(text) = field("formatted_output").or_else(|| field("output")) {
                text.to_owned()
            } else if field("stdout").is_some() || field("stderr").is_some() {
                [field("stdout"), field("stderr")].into_iter().flatten().collect::<Vec<_>>().join("\n")
            } else if let Some(content) = o.get("content").filter(|c| !c.is_null()) {
                raw_output_text(content)?
            } else {
                compact(raw)
            }
        }
        other => other.to_string(),
    };
    let mut out = String::new();
    push_capped(&mut out, unfenced(&text), OUTPUT_MAX);
    Some(out).filter(|s| !s.trim().is_empty())
}

/// A value as compact JSON, cut to a tool output's limit.
fn compact(value: &Value) -> String {
    let mut out = String::new();
    push_capped(&mut out, &value.to_string(), OUTPUT_MAX);
    out
}

/// Appends `more` to `text` up to `max` bytes (cut at a character
/// boundary); `false` when some of it was dropped.
fn push_capped(text: &mut String, more: &str, max: usize) -> bool {
    let room = max.saturating_sub(text.len());
    if more.len() <= room {
        text.push_str(more);
        return true;
    }
    let mut cut = room;
    while cut > 0 && !more.is_char_boundary(cut) {
        cut -= 1;
    }
    text.push_str(&more[..cut]);
    false
}

fn push(out: &mut Vec<Item>, id: Id, body: ItemBody) {
    // The item rules clean and cut the text; an item they refuse is dropped.
    if let Ok((item, _)) = Item::new(id, body).sanitized() {
        out.push(item);
    }
}

#[cfg(test)]
mod tests;
