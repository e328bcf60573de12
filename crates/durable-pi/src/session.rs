//! Pi's session files: the format (JSONL, version 3), its entries, and the
//! tree they form through `parentId`, with the branch Pi shows.
//!
//! A session file is one JSON object a line. The first is the header
//! (`{"type":"session","version":3,"id",…}`); every other line is an entry
//! `{type, id, parentId, timestamp, …}`. Entries form a tree: a fork inside a
//! file is an entry whose parent is not the line before it. The branch shown
//! is the path from the last entry in the file back to its root.
//!
//! Reading is tolerant, as Pi's own loader is: a line that is not a JSON
//! object, or an entry without an `id`, is skipped and counted
//! ([`Session::malformed`]); an entry of a type this crate does not know is
//! kept as [`EntryKind::Unknown`]; a field of the wrong shape reads as absent.
//! Files of versions 1 and 2 (which Pi migrates when it opens them) are read
//! too: entries without ids get `line-<n>` ids chained in file order, and the
//! old `hookMessage` role reads as a custom message.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use durable_types::Timestamp;
use serde_json::{Map, Value};

use crate::Error;

/// The session format version this crate is written against.
pub const SESSION_VERSION: u64 = 3;

/// The first line of a session file.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Header {
    /// The session id (a UUID v7 unless the session was given one).
    pub id: String,
    /// The format version; 1 when the header names none.
    pub version: u64,
    /// When Pi created the session.
    pub timestamp: Option<Timestamp>,
    /// The working folder Pi ran in.
    pub cwd: Option<String>,
    /// The file this session was forked from (an absolute path), if any.
    pub parent_session: Option<String>,
}

/// One entry: a node of the session's tree.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Entry {
    /// The entry id (8 hex characters, or a UUID), unique in its file.
    pub id: String,
    /// The parent entry; `None` for a root.
    pub parent_id: Option<String>,
    /// When Pi wrote the entry.
    pub timestamp: Option<Timestamp>,
    /// What the entry holds.
    pub kind: EntryKind,
}

impl Entry {
    /// The entry's time: a message's own time when it has one, else the
    /// entry's.
    pub fn time(&self) -> Option<Timestamp> {
        match &self.kind {
            EntryKind::Message { sent_at: Some(t), .. } => Some(*t),
            _ => self.timestamp,
        }
    }

    /// The message, when the entry is one.
    pub fn message(&self) -> Option<&Message> {
        match &self.kind {
            EntryKind::Message { message, .. } => Some(message),
            _ => None,
        }
    }
}

/// The entry types of a version 3 session file.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum EntryKind {
    /// `message`: a message of the conversation.
    Message {
        /// The message.
        message: Message,
        /// The message's own time (`message.timestamp`, milliseconds).
        sent_at: Option<Timestamp>,
    },
    /// `model_change`: the user picked another model.
    ModelChange {
        /// The provider.
        provider: String,
        /// The model id.
        model_id: String,
    },
    /// `thinking_level_change`.
    ThinkingLevelChange {
        /// The new level.
        level: String,
    },
    /// `usage`: model usage outside the conversation (e.g. cache warming).
    Usage {
        /// What it was for.
        kind: String,
    },
    /// `compaction`: earlier messages summarized for the model.
    Compaction {
        /// The summary.
        summary: String,
        /// The first entry kept as it was.
        first_kept_entry_id: Option<String>,
    },
    /// `branch_summary`: a summary of the branch left behind.
    BranchSummary {
        /// The summary.
        summary: String,
        /// The leaf of the branch that was left.
        from_id: Option<String>,
    },
    /// `custom`: an extension's state; never shown.
    Custom {
        /// The extension's name for it.
        custom_type: String,
    },
    /// `custom_message`: a message an extension put in the conversation.
    CustomMessage {
        /// The extension's name for it.
        custom_type: String,
        /// Its content.
        content: Vec<Block>,
        /// Whether Pi shows it.
        display: bool,
    },
    /// `label`: a bookmark on another entry.
    Label {
        /// The entry labelled.
        target_id: String,
        /// The label; `None` clears it.
        label: Option<String>,
    },
    /// `session_info`: the session's display name.
    SessionInfo {
        /// The name; `None` (or empty) clears it.
        name: Option<String>,
    },
    /// `context_edit`: a change to what the model sees of an earlier entry
    /// (the chat is unchanged).
    ContextEdit {
        /// The entry edited.
        target_id: String,
    },
    /// A type this crate does not know.
    Unknown {
        /// The entry's `type`.
        type_name: String,
    },
}

/// A message, by its role.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Message {
    /// What the person wrote.
    User {
        /// Text and images.
        content: Vec<Block>,
    },
    /// The model's answer: text, thinking and tool calls, in order.
    Assistant {
        /// The blocks.
        content: Vec<Block>,
        /// Why the answer ended.
        stop_reason: StopReason,
        /// The error, when it ended in one.
        error_message: Option<String>,
    },
    /// The result of a tool call.
    ToolResult {
        /// The call's id (the `id` of a [`Block::ToolCall`]).
        tool_call_id: String,
        /// The tool.
        tool_name: String,
        /// The output.
        content: Vec<Block>,
        /// Whether the tool failed.
        is_error: bool,
    },
    /// The system prompt and tools (hidden in a chat).
    System,
    /// A command the user ran with `!` in Pi.
    BashExecution {
        /// The command.
        command: String,
        /// Its output.
        output: String,
        /// Its exit code.
        exit_code: Option<i64>,
        /// Whether it was stopped.
        cancelled: bool,
    },
    /// A message an extension sent (role `custom`, formerly `hookMessage`).
    Custom {
        /// The extension's name for it.
        custom_type: String,
        /// Its content.
        content: Vec<Block>,
        /// Whether Pi shows it.
        display: bool,
    },
    /// Another role.
    Other {
        /// The role.
        role: String,
    },
}

impl Message {
    /// A message from its JSON object, as Pi writes it in a session file
    /// and sends it in RPC events (`message_start`, `message_end`); a value
    /// that is not an object is a message of no role.
    ///
    /// ```
    /// use durable_sdk::pi::{Block, Message};
    /// let m = Message::from_json(&durable_sdk::json!({"role": "user", "content": "hi"}));
    /// assert_eq!(m, Message::User { content: vec![Block::Text("hi".into())] });
    /// ```
    pub fn from_json(value: &Value) -> Message {
        value.as_object().map(message).unwrap_or(Message::Other { role: String::new() })
    }
}

/// One content block of a message.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Block {
    /// Text.
    Text(String),
    /// The model's thinking.
    Thinking {
        /// The text (empty when redacted).
        text: String,
        /// Whether the provider redacted it.
        redacted: bool,
    },
    /// A tool call.
    ToolCall {
        /// The call id, the key of its result.
        id: String,
        /// The tool.
        name: String,
        /// The arguments.
        arguments: Value,
    },
    /// An image.
    Image {
        /// Its MIME type.
        mime_type: String,
    },
    /// Another block type.
    Other {
        /// The block's `type`.
        type_name: String,
    },
}

impl Block {
    /// The text of text blocks, joined by new lines; an image reads as
    /// `[image]`. Other blocks give nothing.
    pub fn text_of(blocks: &[Block]) -> String {
        let parts: Vec<&str> = blocks
            .iter()
            .filter_map(|b| match b {
                Block::Text(t) => Some(t.as_str()),
                Block::Image { .. } => Some("[image]"),
                _ => None,
            })
            .collect();
        parts.join("\n")
    }
}

/// Why an assistant message ended.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum StopReason {
    /// It finished.
    Stop,
    /// It hit the output limit.
    Length,
    /// It calls tools.
    ToolUse,
    /// It failed.
    Error,
    /// It was stopped.
    Aborted,
    /// Another reason (`pending`, `deferred`, …), or none.
    Other(String),
}

impl StopReason {
    fn parse(s: Option<&str>) -> StopReason {
        match s {
            Some("stop") => StopReason::Stop,
            Some("length") => StopReason::Length,
            Some("toolUse") => StopReason::ToolUse,
            Some("error") => StopReason::Error,
            Some("aborted") => StopReason::Aborted,
            other => StopReason::Other(other.unwrap_or("").to_owned()),
        }
    }
}

/// What one line of a session file was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Line {
    /// The header.
    Header,
    /// An entry, at this index of [`Session::entries`].
    Entry(usize),
    /// An empty line (ignored).
    Blank,
    /// Skipped: not a JSON object, an entry without id, a second header.
    Malformed,
    /// The file is not a session: its first object is not a header.
    NotASession,
}

/// A session file as read so far: its header, its entries in file order,
/// and how many lines were skipped.
///
/// ```
/// use durable_sdk::pi::Session;
/// let text = concat!(
///     r#"{"type":"session","version":3,"id":"s1","timestamp":"2026-12-01T05:00:00.000Z","cwd":"/p"}"#, "\n",
///     r#"{"type":"message","id":"a","parentId":null,"timestamp":"2026-12-01T05:00:01.000Z","message":{"role":"user","content":"hi","timestamp":1796101201000}}"#, "\n",
///     r#"{"type":"message","id":"b","parentId":"a","timestamp":"2026-12-01T05:00:02.000Z","message":{"role":"assistant","content":[{"type":"text","text":"hello"}],"stopReason":"stop"}}"#, "\n",
///     r#"{"type":"message","id":"c","parentId":"a","timestamp":"2026-12-01T05:00:03.000Z","message":{"role":"assistant","content":[{"type":"text","text":"hi!"}],"stopReason":"stop"}}"#, "\n",
///     "not json\n",
/// );
/// let session = Session::parse(text.as_bytes());
/// assert_eq!(session.header().unwrap().id, "s1");
/// assert_eq!(session.malformed(), 1);
/// // "c" forks from "a": the branch shown is a → c.
/// let ids: Vec<&str> = session.branch().iter().map(|e| e.id.as_str()).collect();
/// assert_eq!(ids, ["a", "c"]);
/// assert_eq!(session.children("a").len(), 2);
/// ```
#[derive(Debug, Clone, Default)]
pub struct Session {
    header: Option<Header>,
    not_a_session: bool,
    entries: Vec<Entry>,
    by_id: HashMap<String, usize>,
    malformed: usize,
}

impl Session {
    /// An empty session (no header yet).
    pub fn new() -> Self {
        Session::default()
    }

    /// Reads a whole file's bytes. A last line without its newline is read
    /// when it is whole JSON (as Pi's loader does), else counted malformed.
    pub fn parse(bytes: &[u8]) -> Session {
        let mut session = Session::new();
        let mut rest = bytes;
        while let Some(nl) = rest.iter().position(|b| *b == b'\n') {
            session.push_line(&rest[..nl]);
            rest = &rest[nl + 1..];
        }
        if !rest.is_empty() {
            session.push_line(rest);
        }
        session
    }

    /// Reads a session file. A file whose first object is not a session
    /// header (or an empty file) is [`Error::NotASession`].
    pub fn read(path: &Path) -> Result<Session, Error> {
        let bytes = std::fs::read(path).map_err(|source| Error::Io { path: path.to_owned(), source })?;
        let session = Session::parse(&bytes);
        if !session.is_session() {
            return Err(Error::NotASession { path: path.to_owned() });
        }
        Ok(session)
    }

    /// Reads one line (without its newline) and says what it was.
    pub fn push_line(&mut self, line: &[u8]) -> Line {
        if self.not_a_session {
            return Line::NotASession;
        }
        let previous = self.entries.last().map(|e| e.id.as_str());
        match parse_line(line, self.header.as_ref(), self.entries.len(), previous) {
            Parsed::Blank => Line::Blank,
            Parsed::Malformed => {
                self.malformed += 1;
                Line::Malformed
            }
            Parsed::NotASession => {
                self.not_a_session = true;
                Line::NotASession
            }
            Parsed::Header(h) => {
                self.header = Some(h);
                Line::Header
            }
            Parsed::Entry(entry) => {
                let index = self.entries.len();
                self.by_id.insert(entry.id.clone(), index);
                self.entries.push(entry);
                Line::Entry(index)
            }
        }
    }

    /// Counts one more skipped line (a reader that drops an overlong line).
    pub(crate) fn count_malformed(&mut self) {
        self.malformed += 1;
    }

    /// Whether the first object read was a session header.
    pub fn is_session(&self) -> bool {
        self.header.is_some()
    }

    /// Whether the first object read was not a session header: the file is
    /// not a session, and no further line is read.
    pub fn is_refused(&self) -> bool {
        self.not_a_session
    }

    /// The header, once read.
    pub fn header(&self) -> Option<&Header> {
        self.header.as_ref()
    }

    /// The session id (the header's).
    pub fn id(&self) -> Option<&str> {
        self.header.as_ref().map(|h| h.id.as_str())
    }

    /// Every entry, in file order.
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// The entry with this id (the last one, if a file repeats an id).
    pub fn entry(&self, id: &str) -> Option<&Entry> {
        self.by_id.get(id).map(|&i| &self.entries[i])
    }

    /// Lines skipped so far: not JSON objects, entries without an id, a
    /// second header, lines too long to hold.
    pub fn malformed(&self) -> usize {
        self.malformed
    }

    /// The leaf: the last entry in the file.
    pub fn leaf(&self) -> Option<&Entry> {
        self.entries.last()
    }

    /// The branch shown: the entries from the root to the leaf. A parent
    /// that is missing ends the walk (the entry acts as a root), and so does
    /// a loop.
    pub fn branch(&self) -> Vec<&Entry> {
        self.branch_indices().into_iter().map(|i| &self.entries[i]).collect()
    }

    /// The indices (in [`Session::entries`]) of the branch shown, root first.
    pub fn branch_indices(&self) -> Vec<usize> {
        let mut path = Vec::new();
        let Some(mut i) = self.entries.len().checked_sub(1) else {
            return path;
        };
        let mut seen = HashSet::new();
        while seen.insert(i) {
            path.push(i);
            let entry = &self.entries[i];
            match entry.parent_id.as_deref().filter(|p| *p != entry.id).and_then(|p| self.by_id.get(p)) {
                Some(&parent) => i = parent,
                None => break,
            }
        }
        path.reverse();
        path
    }

    /// Whether the entry with this id is on the branch shown.
    pub fn is_on_branch(&self, id: &str) -> bool {
        let Some(&target) = self.by_id.get(id) else { return false };
        self.branch_indices().contains(&target)
    }

    /// The entries whose parent is `id`, in file order.
    pub fn children(&self, id: &str) -> Vec<&Entry> {
        self.entries.iter().filter(|e| e.parent_id.as_deref() == Some(id) && e.id != id).collect()
    }

    /// The roots: entries without a parent, or whose parent is missing.
    pub fn roots(&self) -> Vec<&Entry> {
        self.entries
            .iter()
            .filter(|e| match e.parent_id.as_deref() {
                None => true,
                Some(p) => p == e.id || !self.by_id.contains_key(p),
            })
            .collect()
    }

    /// The session's name: the last `session_info` in the file (trimmed; an
    /// empty name clears it), wherever it sits in the tree, as Pi reads it.
    pub fn name(&self) -> Option<&str> {
        self.entries.iter().rev().find_map(|e| match &e.kind {
            EntryKind::SessionInfo { name } => Some(name.as_deref().map(str::trim).filter(|n| !n.is_empty())),
            _ => None,
        })?
    }

    /// The label on an entry: the last `label` entry for it (an empty one
    /// clears it).
    pub fn label(&self, id: &str) -> Option<&str> {
        self.entries.iter().rev().find_map(|e| match &e.kind {
            EntryKind::Label { target_id, label } if target_id == id => {
                Some(label.as_deref().filter(|l| !l.is_empty()))
            }
            _ => None,
        })?
    }

    /// The text of the first user message that has some, in file order (the
    /// title Pi lists an unnamed session by).
    pub fn first_user_text(&self) -> Option<String> {
        self.entries.iter().find_map(|e| match e.message() {
            Some(Message::User { content }) => {
                let text = Block::text_of(content);
                (!text.trim().is_empty()).then_some(text)
            }
            _ => None,
        })
    }

    /// The time of the latest user or assistant message (Pi's "modified",
    /// which orders its session list).
    pub fn last_activity(&self) -> Option<Timestamp> {
        self.entries
            .iter()
            .filter(|e| matches!(e.message(), Some(Message::User { .. } | Message::Assistant { .. })))
            .filter_map(Entry::time)
            .max()
    }

    /// When the session started: the header's time, else its first entry's.
    pub fn started_at(&self) -> Option<Timestamp> {
        self.header
            .as_ref()
            .and_then(|h| h.timestamp)
            .or_else(|| self.entries.iter().find_map(|e| e.timestamp))
    }
}

/// What one line of a session file is, read after the lines before it.
pub(crate) enum Parsed {
    /// White space only.
    Blank,
    /// Skipped: not a JSON object, an entry without id, a second header.
    Malformed,
    /// The first object is not a header: the file is not a session.
    NotASession,
    /// The header.
    Header(Header),
    /// An entry.
    Entry(Entry),
}

/// Reads one line (without its newline) of a file whose earlier lines gave
/// `header` and `ordinal` entries, the last one `previous_id` (a legacy
/// file's entries without ids take their ids and parents from these). The
/// one reading of a line, for [`Session`] and for the entry index, so both
/// see the same entries.
pub(crate) fn parse_line(
    line: &[u8],
    header: Option<&Header>,
    ordinal: usize,
    previous_id: Option<&str>,
) -> Parsed {
    if line.iter().all(u8::is_ascii_whitespace) {
        return Parsed::Blank;
    }
    let Ok(Value::Object(obj)) = crate::json::parse(line) else {
        return Parsed::Malformed;
    };
    let is_header = obj.get("type").and_then(Value::as_str) == Some("session");
    match (header, is_header) {
        (None, true) => parse_header(&obj).map_or(Parsed::NotASession, Parsed::Header),
        (None, false) => Parsed::NotASession,
        (Some(_), true) => Parsed::Malformed,
        (Some(h), false) => {
            parse_entry(&obj, h.version < 2, ordinal, previous_id).map_or(Parsed::Malformed, Parsed::Entry)
        }
    }
}

fn str_of(obj: &Map<String, Value>, key: &str) -> Option<String> {
    obj.get(key).and_then(Value::as_str).map(str::to_owned)
}

fn string(obj: &Map<String, Value>, key: &str) -> String {
    str_of(obj, key).unwrap_or_default()
}

fn iso_time(obj: &Map<String, Value>, key: &str) -> Option<Timestamp> {
    obj.get(key).and_then(Value::as_str).and_then(|s| Timestamp::parse(s).ok())
}

fn millis(obj: &Map<String, Value>, key: &str) -> Option<Timestamp> {
    let v = obj.get(key)?;
    let ms = v.as_u64().or_else(|| v.as_f64().filter(|f| f.is_finite() && *f >= 0.0).map(|f| f as u64))?;
    Some(Timestamp::from_millis(ms.min(Timestamp::MAX.as_millis())))
}

fn parse_header(obj: &Map<String, Value>) -> Option<Header> {
    Some(Header {
        id: str_of(obj, "id")?,
        version: obj.get("version").and_then(Value::as_u64).unwrap_or(1),
        timestamp: iso_time(obj, "timestamp"),
        cwd: str_of(obj, "cwd"),
        parent_session: str_of(obj, "parentSession"),
    })
}

/// Content: a string (one text block) or a list of blocks.
fn blocks(v: Option<&Value>) -> Vec<Block> {
    match v {
        Some(Value::String(s)) => vec![Block::Text(s.clone())],
        Some(Value::Array(items)) => items.iter().filter_map(|b| b.as_object()).map(block).collect(),
        _ => Vec::new(),
    }
}

fn block(b: &Map<String, Value>) -> Block {
    match b.get("type").and_then(Value::as_str).unwrap_or("") {
        "text" => Block::Text(string(b, "text")),
        "thinking" => Block::Thinking {
            text: string(b, "thinking"),
            redacted: b.get("redacted").and_then(Value::as_bool).unwrap_or(false),
        },
        "toolCall" => Block::ToolCall {
            id: string(b, "id"),
            name: string(b, "name"),
            arguments: b.get("arguments").cloned().unwrap_or(Value::Null),
        },
        "image" => Block::Image { mime_type: string(b, "mimeType") },
        other => Block::Other { type_name: other.to_owned() },
    }
}

fn message(m: &Map<String, Value>) -> Message {
    let display = m.get("display").and_then(Value::as_bool).unwrap_or(false);
    match m.get("role").and_then(Value::as_str).unwrap_or("") {
        "user" => Message::User { content: blocks(m.get("content")) },
        "assistant" => Message::Assistant {
            content: blocks(m.get("content")),
            stop_reason: StopReason::parse(m.get("stopReason").and_then(Value::as_str)),
            error_message: str_of(m, "errorMessage"),
        },
        "toolResult" => Message::ToolResult {
            tool_call_id: string(m, "toolCallId"),
            tool_name: string(m, "toolName"),
            content: blocks(m.get("content")),
            is_error: m.get("isError").and_then(Value::as_bool).unwrap_or(false),
        },
        "system" => Message::System,
        "bashExecution" => Message::BashExecution {
            command: string(m, "command"),
            output: string(m, "output"),
            exit_code: m.get("exitCode").and_then(Value::as_i64),
            cancelled: m.get("cancelled").and_then(Value::as_bool).unwrap_or(false),
        },
        // `hookMessage` is the version 2 name of `custom`.
        "custom" | "hookMessage" => Message::Custom {
            custom_type: string(m, "customType"),
            content: blocks(m.get("content")),
            display,
        },
        other => Message::Other { role: other.to_owned() },
    }
}

/// An entry from its object; `None` when it has no id (and the file is not
/// a legacy one that gives ids by position).
fn parse_entry(
    obj: &Map<String, Value>,
    legacy: bool,
    ordinal: usize,
    previous_id: Option<&str>,
) -> Option<Entry> {
    let (id, parent_id) = match str_of(obj, "id") {
        Some(id) => (id, str_of(obj, "parentId")),
        None if legacy => (format!("line-{ordinal}"), previous_id.map(str::to_owned)),
        None => return None,
    };
    let type_name = obj.get("type").and_then(Value::as_str).unwrap_or("");
    let kind = match type_name {
        "message" => {
            let m = obj.get("message").and_then(Value::as_object);
            EntryKind::Message {
                message: m.map(message).unwrap_or(Message::Other { role: String::new() }),
                sent_at: m.and_then(|m| millis(m, "timestamp")),
            }
        }
        "model_change" => {
            EntryKind::ModelChange { provider: string(obj, "provider"), model_id: string(obj, "modelId") }
        }
        "thinking_level_change" => EntryKind::ThinkingLevelChange { level: string(obj, "thinkingLevel") },
        "usage" => EntryKind::Usage { kind: string(obj, "kind") },
        "compaction" => EntryKind::Compaction {
            summary: string(obj, "summary"),
            first_kept_entry_id: str_of(obj, "firstKeptEntryId"),
        },
        "branch_summary" => {
            EntryKind::BranchSummary { summary: string(obj, "summary"), from_id: str_of(obj, "fromId") }
        }
        "custom" => EntryKind::Custom { custom_type: string(obj, "customType") },
        "custom_message" => EntryKind::CustomMessage {
            custom_type: string(obj, "customType"),
            content: blocks(obj.get("content")),
            display: obj.get("display").and_then(Value::as_bool).unwrap_or(false),
        },
        "label" => EntryKind::Label { target_id: string(obj, "targetId"), label: str_of(obj, "label") },
        "session_info" => EntryKind::SessionInfo { name: str_of(obj, "name") },
        "context_edit" => EntryKind::ContextEdit { target_id: string(obj, "targetId") },
        other => EntryKind::Unknown { type_name: other.to_owned() },
    };
    Some(Entry { id, parent_id, timestamp: iso_time(obj, "timestamp"), kind })
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: &str =
        r#"{"type":"session","version":3,"id":"s","timestamp":"2026-12-01T05:00:00.000Z","cwd":"/p"}"#;

    fn session(lines: &[&str]) -> Session {
        let mut text = String::new();
        for l in lines {
            text.push_str(l);
            text.push('\n');
        }
        Session::parse(text.as_bytes())
    }

    #[test]
    fn a_file_whose_first_object_is_not_a_header_is_not_a_session() {
        let s = session(&[r#"{"type":"message","id":"a","parentId":null}"#, HEADER]);
        assert!(!s.is_session());
        assert!(s.entries().is_empty());
        assert!(!Session::parse(b"").is_session());
        // Malformed lines before the header are skipped, as Pi skips them.
        let s = session(&["garbage", HEADER]);
        assert!(s.is_session());
        assert_eq!(s.malformed(), 1);
    }

    #[test]
    fn malformed_lines_are_skipped_and_counted() {
        let s = session(&[
            HEADER,
            "{not json",
            "[1,2]",
            r#"{"type":"message","parentId":null}"#,
            HEADER,
            "",
            r#"{"type":"message","id":"a","parentId":null,"message":{"role":"user","content":"hi"}}"#,
        ]);
        assert_eq!(s.malformed(), 4);
        assert_eq!(s.entries().len(), 1);
    }

    #[test]
    fn unknown_types_and_roles_and_blocks_are_kept_as_such() {
        let s = session(&[
            HEADER,
            r#"{"type":"future_thing","id":"a","parentId":null}"#,
            r#"{"type":"message","id":"b","parentId":"a","message":{"role":"oracle"}}"#,
            r#"{"type":"message","id":"c","parentId":"b","message":{"role":"assistant","content":[{"type":"hologram"}],"stopReason":"deferred"}}"#,
        ]);
        assert_eq!(s.entries()[0].kind, EntryKind::Unknown { type_name: "future_thing".into() });
        assert_eq!(s.entries()[1].message(), Some(&Message::Other { role: "oracle".into() }));
        assert_eq!(
            s.entries()[2].message(),
            Some(&Message::Assistant {
                content: vec![Block::Other { type_name: "hologram".into() }],
                stop_reason: StopReason::Other("deferred".into()),
                error_message: None,
            })
        );
        assert_eq!(s.malformed(), 0);
    }

    #[test]
    fn the_branch_survives_a_missing_parent_and_a_loop() {
        let s = session(&[
            HEADER,
            r#"{"type":"label","id":"a","parentId":"gone","targetId":"x","label":"l"}"#,
            r#"{"type":"label","id":"b","parentId":"a","targetId":"x","label":"l"}"#,
        ]);
        assert_eq!(s.branch().len(), 2);
        assert_eq!(s.roots().len(), 1);
        let s = session(&[
            HEADER,
            r#"{"type":"label","id":"a","parentId":"b","targetId":"x"}"#,
            r#"{"type":"label","id":"b","parentId":"a","targetId":"x"}"#,
        ]);
        assert_eq!(s.branch().len(), 2);
        let s = session(&[HEADER, r#"{"type":"label","id":"a","parentId":"a","targetId":"x"}"#]);
        assert_eq!(s.branch().len(), 1);
        assert_eq!(s.roots().len(), 1);
        assert!(s.children("a").is_empty());
    }

    #[test]
    fn the_name_is_the_last_session_info_and_an_empty_one_clears_it() {
        let named = r#"{"type":"session_info","id":"a","parentId":null,"name":"  Work  "}"#;
        let cleared = r#"{"type":"session_info","id":"b","parentId":"a","name":""}"#;
        assert_eq!(session(&[HEADER, named]).name(), Some("Work"));
        assert_eq!(session(&[HEADER, named, cleared]).name(), None);
        assert_eq!(session(&[HEADER]).name(), None);
    }

    #[test]
    fn legacy_files_get_ids_by_position_and_hook_messages_read_as_custom() {
        let s = session(&[
            r#"{"type":"session","id":"old","timestamp":"2025-01-01T00:00:00.000Z"}"#,
            r#"{"type":"message","message":{"role":"user","content":"hi"}}"#,
            r#"{"type":"message","message":{"role":"hookMessage","customType":"x","content":"note","display":true}}"#,
        ]);
        assert_eq!(s.header().unwrap().version, 1);
        let ids: Vec<&str> = s.branch().iter().map(|e| e.id.as_str()).collect();
        assert_eq!(ids, ["line-0", "line-1"]);
        assert!(matches!(s.entries()[1].message(), Some(Message::Custom { display: true, .. })));
    }

    #[test]
    fn a_last_line_without_newline_is_read_when_whole() {
        let text = format!("{HEADER}\n{}", r#"{"type":"label","id":"a","parentId":null,"targetId":"x"}"#);
        assert_eq!(Session::parse(text.as_bytes()).entries().len(), 1);
        let torn = format!("{HEADER}\n{}", r#"{"type":"label","id":"a","par"#);
        let s = Session::parse(torn.as_bytes());
        assert_eq!((s.entries().len(), s.malformed()), (0, 1));
    }
}
