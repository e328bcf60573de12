//! Pi's RPC events → the pane's items, for one turn. Sans-IO: events and
//! the time go in, items come out; the caller writes them and drives the
//! timer ([`Stream::flush_at`]).
//!
//! The items are those the session file gives (see [`crate::items`]), with
//! ids of the turn: `pi-<turn id>-<m>-<n>` for block `n` of the turn's
//! `m`th assistant message, `pi-<turn id>-u<k>` for a steer Pi delivered,
//! `pi-<turn id>-c<k>` for a shown custom message or a notification. The
//! turn's first user message is the send itself, whose `user` item the SDK
//! wrote already.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use durable_runtime::ItemCadence;
use durable_types::{Id, Item, ItemBody, NoticeTone, ToolStatus, call_summary};
use serde_json::Value;

use crate::items::{assistant_items, item_id, notice, tool, tool_result};
use crate::session::{Block, Message};

/// Content blocks of one streamed message at most (a reply has a few: text,
/// thinking, tool calls).
const BLOCKS_MAX: usize = 4096;

/// A block of the assistant message being streamed.
enum Streaming {
    Text(String),
    Thinking(String),
    Other,
}

impl Streaming {
    /// What the chat shows of the block so far, if it holds any text.
    fn body(&self, partial: bool) -> Option<ItemBody> {
        match self {
            Streaming::Text(t) if !t.trim().is_empty() => Some(ItemBody::Reply { text: t.clone(), partial }),
            Streaming::Thinking(t) if !t.trim().is_empty() => {
                Some(ItemBody::Thinking { text: t.clone(), partial })
            }
            _ => None,
        }
    }
}

struct Tool {
    id: Id,
    name: String,
    call: String,
    status: ToolStatus,
    output: Option<String>,
}

/// One turn's mapping.
pub(crate) struct Stream {
    turn: String,
    /// Assistant messages begun in this turn.
    messages: usize,
    /// The one being streamed: its index and blocks.
    current: Option<(usize, Vec<Streaming>)>,
    tools: HashMap<String, Tool>,
    users: usize,
    extras: usize,
    dirty: bool,
    dirty_tools: HashSet<String>,
    /// Partial items at most once per `every`; an unchanged item is not
    /// written again (Pi tells a tool's call and result more than once).
    cadence: ItemCadence,
}

impl Stream {
    /// A turn's stream; partial items at most once per `every`.
    pub(crate) fn new(turn: &str, every: Duration) -> Self {
        Stream {
            turn: turn.to_owned(),
            messages: 0,
            current: None,
            tools: HashMap::new(),
            users: 0,
            extras: 0,
            dirty: false,
            dirty_tools: HashSet::new(),
            cadence: ItemCadence::new(every),
        }
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

    /// The current message's text and thinking blocks before `below`, as
    /// partial items.
    fn partial_blocks(&self, below: usize, out: &mut Vec<Item>) {
        let Some((m, blocks)) = &self.current else { return };
        for (n, block) in blocks.iter().enumerate().take(below) {
            if let Some(body) = block.body(true) {
                push(out, self.block_id(*m, n), body);
            }
        }
    }

    fn flush_items(&mut self, now: Instant) -> Vec<Item> {
        if !self.cadence.partial_due(now) {
            return Vec::new();
        }
        let mut out = Vec::new();
        if self.dirty {
            self.dirty = false;
            self.partial_blocks(usize::MAX, &mut out);
        }
        for call in std::mem::take(&mut self.dirty_tools) {
            if let Some(t) = self.tools.get(&call) {
                push(&mut out, t.id.clone(), t.body());
            }
        }
        if !out.is_empty() {
            self.cadence.partials_written(now);
        }
        out
    }

    /// What the turn shows when it ends without Pi finishing the message
    /// (Pi exited): the streamed blocks as they stand, no longer partial;
    /// tools still running stay `running` no more: they read `error`.
    pub(crate) fn finish(&mut self) -> Vec<Item> {
        let mut out = Vec::new();
        if let Some((m, blocks)) = self.current.take() {
            for (n, block) in blocks.iter().enumerate() {
                let Some(body) = block.body(false) else { continue };
                push(&mut out, self.block_id(m, n), body);
            }
        }
        for t in self.tools.values_mut() {
            if t.status == ToolStatus::Running {
                t.status = ToolStatus::Error;
                push(&mut out, t.id.clone(), t.body());
            }
        }
        self.dirty = false;
        self.dirty_tools.clear();
        self.changed(out)
    }

    /// The items an event gives now (partial ones only when due), each
    /// only when it changed.
    pub(crate) fn on_event(&mut self, event: &Value, now: Instant) -> Vec<Item> {
        let out = self.event_items(event, now);
        self.changed(out)
    }

    /// The id of the `tool` item of a call, once the call was seen.
    pub(crate) fn tool_item(&self, call_id: &str) -> Option<&Id> {
        self.tools.get(call_id).map(|t| &t.id)
    }

    fn changed(&mut self, items: Vec<Item>) -> Vec<Item> {
        self.cadence.changed(items)
    }

    fn event_items(&mut self, event: &Value, now: Instant) -> Vec<Item> {
        let mut out = Vec::new();
        match event.get("type").and_then(Value::as_str).unwrap_or("") {
            "message_start" if role(event) == Some("assistant") => {
                self.current = Some((self.messages, Vec::new()));
                self.messages += 1;
            }
            "message_update" => {
                if let Some(update) = event.get("assistantMessageEvent") {
                    self.on_update(update, &mut out);
                }
            }
            "message_end" => {
                if let Some(message) = event.get("message") {
                    self.on_message_end(message, &mut out);
                }
            }
            "tool_execution_start" => {
                let call = str_field(event, "toolCallId");
                if !self.tools.contains_key(call) {
                    let name = str_field(event, "toolName").to_owned();
                    let args = event.get("args").cloned().unwrap_or(Value::Null);
                    self.add_tool(call, name, &args, &mut out);
                }
            }
            "tool_execution_update" => {
                let call = str_field(event, "toolCallId");
                if let Some(t) = self.tools.get_mut(call) {
                    let content = event.get("partialResult").and_then(|r| r.get("content"));
                    t.output = Some(result_text(content)).filter(|o| !o.is_empty());
                    self.dirty_tools.insert(call.to_owned());
                }
            }
            "tool_execution_end" => {
                let call = str_field(event, "toolCallId");
                let is_error = event.get("isError").and_then(Value::as_bool).unwrap_or(false);
                let content = event.get("result").and_then(|r| r.get("content"));
                self.end_tool(call, result_blocks(content), is_error, &mut out);
            }
            _ => {}
        }
        out.extend(self.flush_items(now));
        out
    }

    /// A notice of the turn (a notification from an extension, Pi's exit).
    pub(crate) fn notice(&mut self, text: String, tone: NoticeTone) -> Vec<Item> {
        let mut out = Vec::new();
        self.extras += 1;
        push(&mut out, item_id(&format!("{}-c{}", self.turn, self.extras), 0), notice(text, tone));
        out
    }

    fn on_update(&mut self, update: &Value, out: &mut Vec<Item>) {
        let index = update.get("contentIndex").and_then(Value::as_u64).unwrap_or(0);
        let index = usize::try_from(index).unwrap_or(usize::MAX);
        let kind = str_field(update, "type");
        if kind == "toolcall_end" {
            if let Some(call) = update.get("toolCall") {
                let id = str_field(call, "id").to_owned();
                let name = str_field(call, "name").to_owned();
                let args = call.get("arguments").cloned().unwrap_or(Value::Null);
                let m = self.current.as_ref().map_or(self.messages, |c| c.0);
                if !self.tools.contains_key(&id) {
                    // The blocks before the call are written first, even
                    // when their partial is not due yet: the chat shows the
                    // message in its order (as it reads from the session
                    // file after a restart), not the call before its text.
                    self.partial_blocks(index, out);
                    let item = self.block_id(m, index);
                    self.tools.insert(id.clone(), Tool::new(item, name, &args));
                }
                if let Some(t) = self.tools.get(&id) {
                    push(out, t.id.clone(), t.body());
                }
            }
            return;
        }
        let Some((_, blocks)) = &mut self.current else { return };
        // The index comes from Pi's output: past any real message's blocks
        // it is dropped, not grown to (an index of 2^63 would take the
        // memory of the machine).
        if index >= BLOCKS_MAX {
            return;
        }
        while blocks.len() <= index {
            blocks.push(Streaming::Other);
        }
        let delta = update.get("delta").and_then(Value::as_str).unwrap_or("");
        match kind {
            "text_start" => blocks[index] = Streaming::Text(String::new()),
            "thinking_start" => blocks[index] = Streaming::Thinking(String::new()),
            "text_delta" | "thinking_delta" => {
                match &mut blocks[index] {
                    Streaming::Text(t) | Streaming::Thinking(t) => t.push_str(delta),
                    other if kind == "text_delta" => *other = Streaming::Text(delta.to_owned()),
                    other => *other = Streaming::Thinking(delta.to_owned()),
                }
                self.dirty = true;
            }
            _ => {}
        }
    }

    fn on_message_end(&mut self, message: &Value, out: &mut Vec<Item>) {
        match Message::from_json(message) {
            Message::Assistant { content, stop_reason, error_message } => {
                let m = match self.current.take() {
                    Some((m, _)) => m,
                    None => {
                        self.messages += 1;
                        self.messages - 1
                    }
                };
                self.dirty = false;
                for part in assistant_items(&content, &stop_reason, error_message.as_deref()) {
                    let id = self.block_id(m, part.n);
                    match (part.call_id, &content[..]) {
                        (Some(call), blocks) => {
                            if let Some(Block::ToolCall { name, arguments, .. }) = blocks.get(part.n) {
                                if !self.tools.contains_key(call) {
                                    self.tools
                                        .insert(call.to_owned(), Tool::new(id, name.clone(), arguments));
                                }
                                if let Some(t) = self.tools.get(call) {
                                    push(out, t.id.clone(), t.body());
                                }
                            }
                        }
                        (None, _) => push(out, id, part.body),
                    }
                }
            }
            Message::User { content } => {
                self.users += 1;
                // The first is the send's own text, already shown.
                if self.users > 1 {
                    let text = Block::text_of(&content);
                    let id = item_id(&format!("{}-u{}", self.turn, self.users - 1), 0);
                    push(out, id, ItemBody::User { text, request_id: None });
                }
            }
            Message::ToolResult { tool_call_id, tool_name, content, is_error } => {
                if !self.tools.contains_key(&tool_call_id) {
                    self.add_tool(&tool_call_id, tool_name, &Value::Null, out);
                }
                self.end_tool(&tool_call_id, content, is_error, out);
            }
            Message::Custom { content, display: true, .. } => {
                out.extend(self.notice(Block::text_of(&content), NoticeTone::Info));
            }
            _ => {}
        }
    }

    fn add_tool(&mut self, call: &str, name: String, args: &Value, out: &mut Vec<Item>) {
        self.extras += 1;
        let id = item_id(&format!("{}-t{}", self.turn, self.extras), 0);
        let t = Tool::new(id, name, args);
        push(out, t.id.clone(), t.body());
        self.tools.insert(call.to_owned(), t);
    }

    fn end_tool(&mut self, call: &str, content: Vec<Block>, is_error: bool, out: &mut Vec<Item>) {
        if let Some(t) = self.tools.get_mut(call) {
            (t.status, t.output) = tool_result(&content, is_error);
            self.dirty_tools.remove(call);
            push(out, t.id.clone(), t.body());
        }
    }

    fn block_id(&self, m: usize, n: usize) -> Id {
        item_id(&format!("{}-{m}", self.turn), n)
    }
}

impl Tool {
    fn new(id: Id, name: String, args: &Value) -> Tool {
        let call = if args.is_null() { format!("{name}()") } else { call_summary(&name, args) };
        Tool { id, name, call, status: ToolStatus::Running, output: None }
    }

    fn body(&self) -> ItemBody {
        tool(&self.name, self.call.clone(), self.status, self.output.clone())
    }
}

fn push(out: &mut Vec<Item>, id: Id, body: ItemBody) {
    // The item rules clean and cut the text; an item they refuse is dropped.
    if let Ok((item, _)) = Item::new(id, body).sanitized() {
        out.push(item);
    }
}

fn role(event: &Value) -> Option<&str> {
    event.get("message")?.get("role")?.as_str()
}

fn str_field<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or("")
}

fn result_blocks(content: Option<&Value>) -> Vec<Block> {
    match Message::from_json(&serde_json::json!({"role": "user", "content": content})) {
        Message::User { content } => content,
        _ => Vec::new(),
    }
}

fn result_text(content: Option<&Value>) -> String {
    Block::text_of(&result_blocks(content))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn update(kind: &str, index: u64, delta: &str) -> Value {
        json!({"type": "message_update", "assistantMessageEvent": {"type": kind, "contentIndex": index, "delta": delta}})
    }

    fn ids(items: &[Item]) -> Vec<&str> {
        items.iter().map(|i| i.id.as_str()).collect()
    }

    /// A call's `tool` item never comes before the text the model wrote
    /// ahead of it, even when that text's partial was not due yet.
    #[test]
    fn the_text_before_a_call_is_written_before_the_call() {
        let t0 = Instant::now();
        let ms = |n| t0 + Duration::from_millis(n);
        let mut s = Stream::new("r", Duration::from_millis(250));
        s.on_event(&json!({"type": "message_start", "message": {"role": "assistant", "content": []}}), t0);
        assert_eq!(ids(&s.on_event(&update("thinking_delta", 0, "Hmm."), t0)), ["pi-r-0-0"]);
        assert!(s.on_event(&update("text_delta", 1, "Running it."), ms(50)).is_empty(), "not due yet");
        let call = json!({"id": "c1", "name": "bash", "arguments": {"command": "ls"}});
        let end = json!({"type": "message_update", "assistantMessageEvent": {"type": "toolcall_end", "contentIndex": 2, "toolCall": call}});
        let out = s.on_event(&end, ms(100));
        assert_eq!(ids(&out), ["pi-r-0-1", "pi-r-0-2"], "the text, then the call");
        assert_eq!(out[0].body, ItemBody::Reply { text: "Running it.".into(), partial: true });
        assert!(s.flush(ms(300)).is_empty(), "nothing written twice");
    }

    /// A `contentIndex` out of all proportion (Pi's output is not trusted
    /// to be sane) is dropped: no block is grown to it, and the message's
    /// real blocks stream on.
    #[test]
    fn a_content_index_out_of_all_proportion_is_dropped_not_grown_to() {
        let t = Instant::now();
        let mut s = Stream::new("r", Duration::from_millis(250));
        s.on_event(&json!({"type": "message_start", "message": {"role": "assistant", "content": []}}), t);
        for index in [u64::MAX, 1 << 40, BLOCKS_MAX as u64] {
            assert!(s.on_event(&update("text_delta", index, "x"), t).is_empty(), "{index}");
        }
        assert_eq!(s.current.as_ref().map(|c| c.1.len()), Some(0), "no block for an index past the bound");
        let real = s.on_event(&update("text_delta", 1, "Hi"), t);
        assert_eq!(ids(&real), ["pi-r-0-1"]);
        assert_eq!(s.current.as_ref().map(|c| c.1.len()), Some(2));
    }

    #[test]
    fn deltas_come_out_as_partials_no_more_often_than_every_250_ms_then_final() {
        let t0 = Instant::now();
        let ms = |n| t0 + Duration::from_millis(n);
        let mut s = Stream::new("r-1", Duration::from_millis(250));
        assert!(
            s.on_event(&json!({"type": "message_start", "message": {"role": "user", "content": "hi"}}), t0)
                .is_empty()
        );
        assert!(
            s.on_event(&json!({"type": "message_end", "message": {"role": "user", "content": "hi"}}), t0)
                .is_empty()
        );
        s.on_event(&json!({"type": "message_start", "message": {"role": "assistant", "content": []}}), t0);
        s.on_event(&update("text_start", 0, ""), t0);
        let first = s.on_event(&update("text_delta", 0, "Hel"), ms(1));
        assert_eq!(first.len(), 1);
        assert_eq!(first[0].body, ItemBody::Reply { text: "Hel".into(), partial: true });
        assert_eq!(first[0].id.as_str(), "pi-r-1-0-0");
        assert!(s.on_event(&update("text_delta", 0, "lo"), ms(100)).is_empty(), "held: 99 ms since the last");
        assert_eq!(s.flush_at(), Some(ms(251)));
        assert!(s.flush(ms(200)).is_empty());
        let later = s.flush(ms(251));
        assert_eq!(later[0].body, ItemBody::Reply { text: "Hello".into(), partial: true });
        assert_eq!(s.flush_at(), None);
        let end = json!({"type": "message_end", "message": {"role": "assistant", "content": [{"type": "text", "text": "Hello!"}], "stopReason": "stop"}});
        let done = s.on_event(&end, ms(260));
        assert_eq!(ids(&done), ["pi-r-1-0-0"]);
        assert_eq!(done[0].body, ItemBody::Reply { text: "Hello!".into(), partial: false });
    }

    #[test]
    fn a_tool_call_runs_then_ends_in_place_and_a_steer_is_a_user_item() {
        let t = Instant::now();
        let mut s = Stream::new("r-2", Duration::from_millis(250));
        s.on_event(&json!({"type": "message_end", "message": {"role": "user", "content": "go"}}), t);
        s.on_event(&json!({"type": "message_start", "message": {"role": "assistant", "content": []}}), t);
        let call = json!({"id": "c1", "name": "bash", "arguments": {"command": "ls"}});
        let running = s.on_event(
            &json!({"type": "message_update", "assistantMessageEvent": {"type": "toolcall_end", "contentIndex": 1, "toolCall": call}}),
            t,
        );
        assert_eq!(ids(&running), ["pi-r-2-0-1"]);
        match &running[0].body {
            ItemBody::Tool { status, call, .. } => {
                assert_eq!((*status, call.as_str()), (ToolStatus::Running, r#"bash(command: "ls")"#))
            }
            other => panic!("{other:?}"),
        }
        let end = json!({"type": "message_end", "message": {"role": "assistant", "content": [{"type": "text", "text": "Listing."}, {"type": "toolCall", "id": "c1", "name": "bash", "arguments": {"command": "ls"}}], "stopReason": "toolUse"}});
        // The tool item did not change since its `toolcall_end`: not written again.
        assert_eq!(ids(&s.on_event(&end, t)), ["pi-r-2-0-0"]);
        assert_eq!(s.tool_item("c1").map(Id::as_str), Some("pi-r-2-0-1"));
        let ended = s.on_event(
            &json!({"type": "tool_execution_end", "toolCallId": "c1", "result": {"content": [{"type": "text", "text": "a.txt\n"}]}, "isError": false}),
            t,
        );
        match &ended[0].body {
            ItemBody::Tool { status, output, .. } => {
                assert_eq!((*status, output.as_deref()), (ToolStatus::Ok, Some("a.txt\n")))
            }
            other => panic!("{other:?}"),
        }
        let steer = s.on_event(&json!({"type": "message_end", "message": {"role": "user", "content": [{"type": "text", "text": "and b"}]}}), t);
        assert_eq!(ids(&steer), ["pi-r-2-u1-0"]);
        s.on_event(&json!({"type": "message_start", "message": {"role": "assistant", "content": []}}), t);
        let stopped = json!({"type": "message_end", "message": {"role": "assistant", "content": [{"type": "text", "text": "par"}], "stopReason": "aborted"}});
        let out = s.on_event(&stopped, t);
        assert_eq!(ids(&out), ["pi-r-2-1-0", "pi-r-2-1-1"]);
        assert_eq!(out[1].body, notice(crate::items::STOPPED.into(), NoticeTone::Info));
    }

    #[test]
    fn an_exit_mid_message_keeps_the_text_and_fails_running_tools() {
        let t = Instant::now();
        let mut s = Stream::new("r-3", Duration::from_millis(250));
        s.on_event(&json!({"type": "tool_execution_start", "toolCallId": "x", "toolName": "read", "args": {"path": "a"}}), t);
        s.on_event(&json!({"type": "message_start", "message": {"role": "assistant"}}), t);
        s.on_event(&update("thinking_delta", 0, "hmm"), t);
        let out = s.finish();
        let kinds: Vec<_> = out.iter().map(|i| i.body.kind()).collect();
        assert_eq!(kinds, ["thinking", "tool"]);
        assert!(!out[0].body.is_partial());
        assert!(matches!(out[1].body, ItemBody::Tool { status: ToolStatus::Error, .. }));
        assert_eq!(s.flush_at(), None);
    }
}
