//! The entry index of one session file: where each entry's line is, its
//! parent, and what items it gives, so that a page of a long conversation
//! reads the entries it shows and no others ([`page`]).
//!
//! It is built by reading the file once, line by line, with the reading of
//! [`Session`](crate::Session) (each entry parsed, measured and dropped),
//! and extended by the lines Pi appends after the ones indexed. It is built
//! again when the file is shorter than what was indexed, when its first
//! bytes or the last bytes indexed changed (a rewrite), or when an entry
//! read at its place is not the one indexed (damage). A last line without
//! its newline (Pi half way through it) is not indexed: each reading takes
//! it as [`Session::parse`](crate::Session::parse) does.

pub(crate) mod cache;
mod disk;
mod ids;
pub(crate) mod page;

use std::fs::{File, Metadata};
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use durable_types::Timestamp;

use crate::folder::SessionSummary;
use crate::items::{Effect, effect};
use crate::session::{Block, Entry, EntryKind, Header, Message, Parsed, parse_line};
use ids::Ids;

/// Bytes of the file's start kept to notice a rewrite.
const HEAD_BYTES: usize = 256;
/// Bytes before the end of what was indexed kept to notice a rewrite that
/// kept the start.
const TAIL_BYTES: usize = 64;

/// What the file was when it was indexed.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Stamp {
    /// Its length, the unfinished last line included.
    len: u64,
    modified: Option<SystemTime>,
    /// The bytes indexed: whole lines, each with its newline.
    covered: u64,
    /// Its first bytes (at most [`HEAD_BYTES`] of the ones indexed).
    head: Vec<u8>,
    /// The last [`TAIL_BYTES`] indexed.
    tail: Vec<u8>,
}

/// What an entry gives to the items of its branch (see [`Effect`]).
#[derive(Debug, Clone, PartialEq)]
enum Makes {
    /// This many items, none a tool call.
    Items(usize),
    /// This many items, some tool calls: each call's id and the position of
    /// its item among the entry's.
    WithCalls(usize, Box<[(Box<str>, usize)]>),
    /// A tool result for this call id.
    Result(Box<str>),
}

impl Makes {
    fn of(effect: &Effect<'_>) -> Makes {
        match effect {
            Effect::Items(parts) => {
                let calls: Box<[(Box<str>, usize)]> = parts
                    .iter()
                    .enumerate()
                    .filter_map(|(k, p)| p.call_id.map(|id| (Box::from(id), k)))
                    .collect();
                if calls.is_empty() {
                    Makes::Items(parts.len())
                } else {
                    Makes::WithCalls(parts.len(), calls)
                }
            }
            Effect::Result(result) => Makes::Result(Box::from(result.call_id)),
        }
    }
}

/// One entry: its line, its id and parent (keys of [`EntryIndex::ids`]),
/// and what it gives.
#[derive(Debug, Clone, PartialEq)]
struct Indexed {
    offset: u64,
    /// The line's length, without its newline.
    len: u64,
    key: usize,
    parent: Option<usize>,
    makes: Makes,
}

/// What a listing shows of the session, kept as entries are added.
#[derive(Debug, Clone, Default, PartialEq)]
struct Summary {
    /// The last `session_info`'s name (trimmed; an empty one clears it).
    name: Option<String>,
    /// The first user message with some text, in file order.
    first_user_text: Option<String>,
    /// The first entry time, for a header without one.
    first_entry_time: Option<Timestamp>,
    /// The latest user or assistant message.
    last_activity: Option<Timestamp>,
}

impl Summary {
    fn add(&mut self, entry: &Entry) {
        if self.first_entry_time.is_none() {
            self.first_entry_time = entry.timestamp;
        }
        match entry.message() {
            Some(Message::User { content }) => {
                if self.first_user_text.is_none() {
                    let text = Block::text_of(content);
                    self.first_user_text = (!text.trim().is_empty()).then_some(text);
                }
                self.active_at(entry.time());
            }
            Some(Message::Assistant { .. }) => self.active_at(entry.time()),
            _ => {}
        }
        if let EntryKind::SessionInfo { name } = &entry.kind {
            self.name = name.as_deref().map(str::trim).filter(|n| !n.is_empty()).map(str::to_owned);
        }
    }

    fn active_at(&mut self, at: Option<Timestamp>) {
        if at.is_some() && at > self.last_activity {
            self.last_activity = at;
        }
    }
}

/// The entry index of one session file.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct EntryIndex {
    stamp: Stamp,
    header: Option<Header>,
    /// The first object was not a header: nothing after it is read.
    refused: bool,
    malformed: usize,
    entries: Vec<Indexed>,
    /// Entry ids (and parent ids) by key, each once.
    ids: Ids,
    /// By key: the last entry with that id, as [`Session::entry`](crate::Session::entry) finds it.
    last_with: Vec<Option<usize>>,
    summary: Summary,
    /// Entries when last written to disk (`None`: never).
    saved: Option<usize>,
}

/// The index does not match the file: build it again.
#[derive(Debug)]
pub(crate) struct Stale;

impl EntryIndex {
    fn empty() -> EntryIndex {
        EntryIndex {
            stamp: Stamp { len: 0, modified: None, covered: 0, head: Vec::new(), tail: Vec::new() },
            header: None,
            refused: false,
            malformed: 0,
            entries: Vec::new(),
            ids: Ids::default(),
            last_with: Vec::new(),
            summary: Summary::default(),
            saved: None,
        }
    }

    /// Reads the whole file.
    pub(crate) fn build(file: &mut File, meta: &Metadata) -> std::io::Result<EntryIndex> {
        let mut index = EntryIndex::empty();
        index.read_on(file, meta)?;
        Ok(index)
    }

    /// Brings the index up to the file as it is now: as it is when the file
    /// did not change, extended by what was appended when it grew; [`Stale`]
    /// when it was rewritten or cut (then [`build`](Self::build) it again).
    pub(crate) fn refresh(&mut self, file: &mut File, meta: &Metadata) -> std::io::Result<Result<(), Stale>> {
        if meta.len() == self.stamp.len && meta.modified().ok() == self.stamp.modified {
            return Ok(Ok(()));
        }
        let tail_at = self.stamp.covered - self.stamp.tail.len() as u64;
        if meta.len() < self.stamp.covered
            || !holds_at(file, 0, &self.stamp.head)?
            || !holds_at(file, tail_at, &self.stamp.tail)?
        {
            return Ok(Err(Stale));
        }
        self.read_on(file, meta)?;
        Ok(Ok(()))
    }

    /// Indexes the whole lines after the ones indexed, to the end of the file.
    fn read_on(&mut self, file: &mut File, meta: &Metadata) -> std::io::Result<()> {
        file.seek(SeekFrom::Start(self.stamp.covered))?;
        let mut reader = BufReader::with_capacity(256 * 1024, file);
        let mut line = Vec::new();
        let mut unfinished = 0;
        loop {
            line.clear();
            let n = reader.read_until(b'\n', &mut line)?;
            if n == 0 {
                break;
            }
            if line.last() != Some(&b'\n') {
                unfinished = n as u64;
                break;
            }
            let offset = self.stamp.covered;
            self.push_line(&line[..n - 1], offset);
            self.stamp.covered += n as u64;
            if self.stamp.head.len() < HEAD_BYTES {
                let take = (HEAD_BYTES - self.stamp.head.len()).min(n);
                self.stamp.head.extend_from_slice(&line[..take]);
            }
            let tail = &mut self.stamp.tail;
            tail.extend_from_slice(&line[n.saturating_sub(TAIL_BYTES)..]);
            let extra = tail.len().saturating_sub(TAIL_BYTES);
            tail.drain(..extra);
        }
        self.stamp.len = self.stamp.covered + unfinished;
        self.stamp.modified = meta.modified().ok();
        Ok(())
    }

    /// The index with the file's unfinished last line read as
    /// [`Session::parse`](crate::Session::parse) reads it (an entry when it
    /// is whole JSON, else a malformed line); the index itself when there is
    /// none.
    pub(crate) fn with_last_line(
        &self,
        file: &mut File,
    ) -> std::io::Result<std::borrow::Cow<'_, EntryIndex>> {
        if self.stamp.len <= self.stamp.covered {
            return Ok(std::borrow::Cow::Borrowed(self));
        }
        let line = read_at(file, self.stamp.covered, (self.stamp.len - self.stamp.covered) as usize)?;
        let mut whole = self.clone();
        whole.push_line(&line, self.stamp.covered);
        Ok(std::borrow::Cow::Owned(whole))
    }

    fn push_line(&mut self, line: &[u8], offset: u64) {
        if self.refused {
            return;
        }
        let previous = self.entries.last().map(|e| self.ids.get(e.key));
        match parse_line(line, self.header.as_ref(), self.entries.len(), previous) {
            Parsed::Blank => {}
            Parsed::Malformed => self.malformed += 1,
            Parsed::NotASession => self.refused = true,
            Parsed::Header(header) => self.header = Some(header),
            Parsed::Entry(entry) => {
                let key = self.key(&entry.id);
                let parent = entry.parent_id.as_deref().map(|p| self.key(p));
                self.last_with[key] = Some(self.entries.len());
                let makes = Makes::of(&effect(&entry));
                self.entries.push(Indexed { offset, len: line.len() as u64, key, parent, makes });
                self.summary.add(&entry);
            }
        }
    }

    /// The key of an id, given one the first time it is seen.
    fn key(&mut self, id: &str) -> usize {
        let (key, new) = self.ids.key(id);
        if new {
            self.last_with.push(None);
        }
        key
    }

    /// Whether the file is a session (its first object a header).
    pub(crate) fn is_session(&self) -> bool {
        self.header.is_some()
    }

    /// How many entries the index holds.
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// The bytes of whole lines indexed.
    pub(crate) fn covered(&self) -> u64 {
        self.stamp.covered
    }

    /// The branch shown, root first, as positions in the file's entries: the
    /// path from the last entry through each parent (the last entry with
    /// that id), ending at a missing parent or a loop, as
    /// [`Session::branch_indices`](crate::Session::branch_indices) walks it.
    fn branch(&self) -> Vec<usize> {
        let mut path = Vec::new();
        let Some(mut i) = self.entries.len().checked_sub(1) else { return path };
        let mut seen = vec![false; self.entries.len()];
        while !std::mem::replace(&mut seen[i], true) {
            path.push(i);
            let entry = &self.entries[i];
            match entry.parent.filter(|&p| p != entry.key).and_then(|p| self.last_with[p]) {
                Some(parent) => i = parent,
                None => break,
            }
        }
        path.reverse();
        path
    }

    /// What a listing shows of the session (`None` when the file is not
    /// one); `modified` stands in for a start time the file does not give.
    pub(crate) fn summary(&self, path: &Path, modified: Option<SystemTime>) -> Option<SessionSummary> {
        self.summary_of(path, modified, page::layout(self, 0..0).total)
    }

    /// [`summary`](Self::summary), its branch's `items` counted already.
    pub(crate) fn summary_of(
        &self,
        path: &Path,
        modified: Option<SystemTime>,
        items: usize,
    ) -> Option<SessionSummary> {
        let header = self.header.as_ref()?;
        let file_time = modified.and_then(|m| m.duration_since(UNIX_EPOCH).ok()).map(|d| {
            Timestamp::from_millis(
                u64::try_from(d.as_millis()).unwrap_or(u64::MAX).min(Timestamp::MAX.as_millis()),
            )
        });
        let started_at =
            header.timestamp.or(self.summary.first_entry_time).or(file_time).unwrap_or(Timestamp::EPOCH);
        Some(SessionSummary {
            id: header.id.clone(),
            path: path.to_owned(),
            name: self.summary.name.clone(),
            first_user_text: self.summary.first_user_text.clone(),
            started_at,
            last_activity: self.summary.last_activity.unwrap_or(started_at),
            items: items as u64,
            entries: self.entries.len(),
            malformed: self.malformed,
            cwd: header.cwd.clone(),
            parent_session: header.parent_session.clone(),
        })
    }
}

/// Whether `file` holds `bytes` at `offset` (not when it ends before).
fn holds_at(file: &mut File, offset: u64, bytes: &[u8]) -> std::io::Result<bool> {
    match read_at(file, offset, bytes.len()) {
        Ok(now) => Ok(now == bytes),
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Ok(false),
        Err(e) => Err(e),
    }
}

/// `len` bytes of `file` from `offset`.
fn read_at(file: &mut File, offset: u64, len: usize) -> std::io::Result<Vec<u8>> {
    let mut bytes = vec![0; len];
    file.seek(SeekFrom::Start(offset))?;
    file.read_exact(&mut bytes)?;
    Ok(bytes)
}

#[cfg(test)]
mod tests;
