//! Pi Durable's storage (JSONL, format 1), read-only: [`DurableFolder`], a
//! [`ConversationStore`] beside the sessions folder, so that
//! [`PiHistory`](crate::PiHistory) serves either.
//!
//! A storage folder holds `main.jsonl`, one commit a line:
//! `{"format":1,"type":"commit","seq":N,"writes":[…]}`. A write is
//! `{"type":"conversation"|"entry"|"submission","value":{…}}` or task and
//! document bookkeeping, which a chat has no use for and is skipped, as
//! are the sidecar files (`doc-<id>.jsonl`, `task-<id>.jsonl`, `*.reclaim`):
//! conversations and entries are inline in `main.jsonl`.
//!
//! - Each read takes what was appended since the last one; a last line
//!   without its newline (a commit being written, or torn by a crash) is
//!   held back until the newline comes, as Pi Durable's own recovery drops
//!   it. A line that is not a format 1 commit is skipped and counted
//!   ([`DurableFolder::skipped`]).
//! - An entry written again (same id) replaces the earlier value; entries
//!   are in id order (ids come from one ordered namespace).
//! - Entry kinds: `pi.user` → `user`; `pi.assistant` → its blocks, as a
//!   session file's assistant message ([`crate::items`]); `pi.tool-result`
//!   → the call's `tool` item updated; `pi.compaction` → a notice with the
//!   summary ([`COMPACTION_PREFIX`]); `pi.reset` → a notice (the handoff
//!   text, else [`RESET`]); `pi.system` and every other kind → nothing.
//! - Item ids are `pi-<entry id>-<n>` ([`item_id`]): reading the store
//!   again rewrites items in place.
//! - The list leaves out sub-agent conversations (those with an `owner`):
//!   they are work a conversation delegated, not conversations the person
//!   had; each can still be read by its id. A conversation's title is its
//!   first user text (the records hold no name).

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::{ErrorKind, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use durable_types::{Item, ItemBody, NoticeTone, Timestamp};
use serde_json::Value;

use crate::Error;
use crate::items::{COMPACTION_PREFIX, assistant_items, item_id, notice, tool, tool_result};
use crate::session::{Block, Message};
use crate::store::{Conversation, ConversationInfo, ConversationStore};

/// The notice of a `pi.reset` entry that carries no handoff text.
pub const RESET: &str = "The conversation started over.";

/// A line longer than this is dropped (a commit of a bigger size is not a
/// chat's).
const MAX_LINE: usize = 64 * 1024 * 1024;

/// One conversation record.
#[derive(Debug, Clone)]
struct Record {
    owner: bool,
}

/// One entry record.
#[derive(Debug, Clone)]
struct EntryRecord {
    conversation: u64,
    kind: String,
    model: Vec<Value>,
    data: Value,
}

#[derive(Debug, Default)]
struct Commits {
    offset: u64,
    pending: Vec<u8>,
    dropping: bool,
    conversations: BTreeMap<u64, Record>,
    entries: BTreeMap<u64, EntryRecord>,
    skipped: usize,
    last_seq: u64,
    /// Whole lines read, to tell a caller whether anything came.
    lines: u64,
}

/// A Pi Durable storage folder, read as Pi Durable appends to it.
///
/// ```
/// use durable_sdk::pi::{ConversationStore, DurableFolder};
///
/// let dir = std::env::temp_dir().join(format!("durable-pi-doc-durable-{}", std::process::id()));
/// std::fs::create_dir_all(&dir)?;
/// std::fs::write(dir.join("main.jsonl"), concat!(
///     r#"{"format":1,"type":"commit","seq":1,"writes":[{"type":"conversation","value":{"id":1}},"#,
///     r#"{"type":"entry","value":{"id":2,"conversationId":1,"kind":"pi.user","model":[{"role":"user","content":"hello","timestamp":1796100000000}]}}]}"#, "\n",
///     r#"{"format":1,"type":"commit","seq":2,"writes":[{"type":"entry","value":{"id":3,"conversationId":1,"kind":"pi.assistant","#,
///     r#""model":[{"role":"assistant","content":[{"type":"text","text":"Hi!"}],"stopReason":"stop","timestamp":1796100001000}]}}]}"#, "\n",
///     r#"{"format":1,"type":"commit","seq":3,"writes":[{"type":"entry","value":{"id":4"#, // torn: no newline yet
/// ))?;
/// let store = DurableFolder::new(&dir);
/// let list = store.conversations()?;
/// assert_eq!((list[0].id.as_str(), list[0].title()), ("1", "hello".to_owned()));
/// let c = store.conversation("1")?.unwrap();
/// let ids: Vec<&str> = c.items.iter().map(|i| i.id.as_str()).collect();
/// assert_eq!(ids, ["pi-2-0", "pi-3-0"]);
/// # std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct DurableFolder {
    dir: PathBuf,
    read: Mutex<Commits>,
}

impl DurableFolder {
    /// The storage folder `dir` (nothing is read until asked).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        DurableFolder { dir: dir.into(), read: Mutex::new(Commits::default()) }
    }

    /// The folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Lines skipped so far: not JSON, not a commit, or not format 1.
    pub fn skipped(&self) -> usize {
        self.lock().skipped
    }

    /// The `seq` of the last commit read.
    pub fn last_seq(&self) -> u64 {
        self.lock().last_seq
    }

    /// Reads what was appended since the last read; returns whether
    /// anything was. A missing `main.jsonl` reads as an empty store.
    pub fn refresh(&self) -> Result<bool, Error> {
        let path = self.dir.join("main.jsonl");
        let io = |source| Error::Io { path: path.clone(), source };
        let mut file = match File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(io(e)),
        };
        let mut read = self.lock();
        let len = file.metadata().map_err(io)?.len();
        if len < read.offset {
            // Replaced or cut: read it again whole.
            *read = Commits::default();
        } else if !read.pending.is_empty() {
            // The unfinished last line must still be there: a recovery cuts
            // a torn final line and appends its next commits, which may
            // reach past where the torn one ended. Then the line is read
            // again from its start.
            let start = read.offset - read.pending.len() as u64;
            file.seek(SeekFrom::Start(start)).map_err(io)?;
            let mut held = vec![0; read.pending.len()];
            file.read_exact(&mut held).map_err(io)?;
            if held != read.pending {
                read.offset = start;
                read.pending.clear();
            }
        }
        file.seek(SeekFrom::Start(read.offset)).map_err(io)?;
        let mut chunk = Vec::new();
        file.read_to_end(&mut chunk).map_err(io)?;
        read.offset += chunk.len() as u64;
        let before = read.lines;
        read.feed(&chunk);
        Ok(read.lines != before)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Commits> {
        self.read.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Commits {
    fn feed(&mut self, mut bytes: &[u8]) {
        while let Some(nl) = bytes.iter().position(|b| *b == b'\n') {
            let (line, rest) = (&bytes[..nl], &bytes[nl + 1..]);
            if self.dropping {
                self.dropping = false;
            } else {
                self.pending.extend_from_slice(line);
                let whole = std::mem::take(&mut self.pending);
                self.commit(&whole);
            }
            bytes = rest;
        }
        if !self.dropping {
            if self.pending.len() + bytes.len() > MAX_LINE {
                self.pending = Vec::new();
                self.dropping = true;
                self.skipped += 1;
            } else {
                self.pending.extend_from_slice(bytes);
            }
        }
    }

    fn commit(&mut self, line: &[u8]) {
        self.lines += 1;
        if line.iter().all(u8::is_ascii_whitespace) {
            return;
        }
        let Ok(Value::Object(commit)) = crate::json::parse(line) else {
            self.skipped += 1;
            return;
        };
        let format_1 = commit.get("format").and_then(Value::as_u64) == Some(1);
        if !format_1 || commit.get("type").and_then(Value::as_str) != Some("commit") {
            self.skipped += 1;
            return;
        }
        if let Some(seq) = commit.get("seq").and_then(Value::as_u64) {
            self.last_seq = self.last_seq.max(seq);
        }
        for write in commit.get("writes").and_then(Value::as_array).into_iter().flatten() {
            let value = write.get("value").unwrap_or(&Value::Null);
            let Some(id) = value.get("id").and_then(Value::as_u64) else { continue };
            match write.get("type").and_then(Value::as_str) {
                Some("conversation") => {
                    let owner = value.get("owner").is_some_and(|o| !o.is_null());
                    self.conversations.insert(id, Record { owner });
                }
                Some("entry") => {
                    let Some(conversation) = value.get("conversationId").and_then(Value::as_u64) else {
                        continue;
                    };
                    let entry = EntryRecord {
                        conversation,
                        kind: value.get("kind").and_then(Value::as_str).unwrap_or("").to_owned(),
                        model: value.get("model").and_then(Value::as_array).cloned().unwrap_or_default(),
                        data: value.get("data").cloned().unwrap_or(Value::Null),
                    };
                    self.entries.insert(id, entry);
                }
                // Submissions, tasks and documents: nothing a chat shows.
                _ => {}
            }
        }
    }

    /// A conversation's items, with its first user text and message times.
    fn conversation(&self, id: u64) -> Option<(ConversationInfo, Vec<Item>)> {
        self.conversations.get(&id)?;
        let mut items: Vec<Item> = Vec::new();
        let mut calls: HashMap<String, usize> = HashMap::new();
        let (mut first_text, mut first_at, mut last_at) = (None, None, None);
        for (entry_id, entry) in self.entries.iter().filter(|(_, e)| e.conversation == id) {
            let key = entry_id.to_string();
            let message = entry.model.first().map(Message::from_json);
            let at = entry
                .model
                .first()
                .and_then(|m| m.get("timestamp"))
                .and_then(Value::as_u64)
                .map(Timestamp::from_millis);
            let push = |items: &mut Vec<Item>, n: usize, body: ItemBody| {
                let item = Item { id: item_id(&key, n), ts: at, body };
                if let Ok((item, _)) = item.sanitized() {
                    items.push(item);
                }
            };
            match (entry.kind.as_str(), message) {
                ("pi.user", Some(Message::User { content })) => {
                    let text = Block::text_of(&content);
                    first_text.get_or_insert_with(|| text.clone());
                    push(&mut items, 0, ItemBody::User { text, request_id: None });
                }
                ("pi.assistant", Some(Message::Assistant { content, stop_reason, error_message })) => {
                    for part in assistant_items(&content, &stop_reason, error_message.as_deref()) {
                        if let Some(call) = part.call_id {
                            calls.insert(call.to_owned(), items.len());
                        }
                        push(&mut items, part.n, part.body);
                    }
                }
                (
                    "pi.tool-result",
                    Some(Message::ToolResult { tool_call_id, tool_name, content, is_error }),
                ) => {
                    let (status, output) = tool_result(&content, is_error);
                    match calls.get(&tool_call_id).and_then(|&k| items.get_mut(k)) {
                        Some(item) => {
                            if let ItemBody::Tool { status: s, output: o, .. } = &mut item.body {
                                (*s, *o) = (status, output);
                            }
                            if let Ok((clean, _)) = item.clone().sanitized() {
                                *item = clean;
                            }
                        }
                        None => {
                            push(&mut items, 0, tool(&tool_name, format!("{tool_name}()"), status, output))
                        }
                    }
                }
                ("pi.compaction", _) => {
                    let summary = text_in(&entry.data, "summary").unwrap_or_default();
                    push(&mut items, 0, notice(format!("{COMPACTION_PREFIX}{summary}"), NoticeTone::Info));
                }
                ("pi.reset", _) => {
                    let text = text_in(&entry.data, "handoff").unwrap_or_else(|| RESET.to_owned());
                    push(&mut items, 0, notice(text, NoticeTone::Info));
                }
                _ => continue,
            }
            if at.is_some() {
                first_at = first_at.or(at);
                last_at = at.max(last_at);
            }
        }
        let started = first_at.unwrap_or(Timestamp::EPOCH);
        let mut info = ConversationInfo::new(id.to_string(), started)
            .with_last_activity(last_at.unwrap_or(started))
            .with_items(items.len() as u64);
        if let Some(text) = first_text {
            info = info.with_first_user_text(text);
        }
        Some((info, items))
    }
}

/// A string field of an entry's data, or the data itself when it is a string.
fn text_in(data: &Value, key: &str) -> Option<String> {
    data.get(key).or(Some(data)).and_then(Value::as_str).map(str::to_owned)
}

impl ConversationStore for DurableFolder {
    fn conversations(&self) -> Result<Vec<ConversationInfo>, Error> {
        self.refresh()?;
        let read = self.lock();
        let mut list: Vec<ConversationInfo> = read
            .conversations
            .iter()
            .filter(|(_, r)| !r.owner)
            .filter_map(|(id, _)| read.conversation(*id).map(|(info, _)| info))
            .collect();
        list.sort_by(|a, b| b.last_activity.cmp(&a.last_activity).then_with(|| b.id.cmp(&a.id)));
        Ok(list)
    }

    fn conversation(&self, id: &str) -> Result<Option<Conversation>, Error> {
        self.refresh()?;
        // Ids are numbers as the rows give them: "01" is no id of ours.
        let Some(id) = id.parse::<u64>().ok().filter(|n| n.to_string() == id) else { return Ok(None) };
        Ok(self.lock().conversation(id).map(|(info, items)| Conversation::new(info, items)))
    }
}
