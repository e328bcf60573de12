//! A sessions folder: the `*.jsonl` session files Pi writes into one folder
//! (`--session-dir`, or `~/.pi/agent/sessions/--<cwd>--/`), listed newest
//! first.
//!
//! As in Pi's own list: a file that cannot be read or is not a session is
//! left out (one bad file does not hide the others), a folder that does not
//! exist holds no sessions, and "newest" is the latest user or assistant
//! message (else the session's start). Two files with one session id (a
//! copy) list once: the one active last. Summaries are kept between listings
//! and a file is read again only when its size or modification time changed.

use std::collections::{HashMap, HashSet};
use std::io::ErrorKind;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use durable_types::Timestamp;

use crate::Error;
use crate::entry_index::cache::EntryIndexes;
use crate::items::{item_count, pane_view};
use crate::session::Session;
use crate::store::{Conversation, ConversationInfo, ConversationStore};

mod first_rows;

use first_rows::StartListing;

/// What a listing shows of one session file.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SessionSummary {
    /// The session id (the header's).
    pub id: String,
    /// The file.
    pub path: PathBuf,
    /// The session's name (the last `session_info`).
    pub name: Option<String>,
    /// The text of the first user message.
    pub first_user_text: Option<String>,
    /// The header's time, else the first entry's, else the file's.
    pub started_at: Timestamp,
    /// The latest user or assistant message, else `started_at`.
    pub last_activity: Timestamp,
    /// Items of the branch shown.
    pub items: u64,
    /// Entries in the file.
    pub entries: usize,
    /// Lines skipped as malformed.
    pub malformed: usize,
    /// The working folder Pi ran in.
    pub cwd: Option<String>,
    /// The file this session was forked from.
    pub parent_session: Option<String>,
}

impl SessionSummary {
    pub(crate) fn of(path: &Path, session: &Session, modified: Option<SystemTime>) -> Option<SessionSummary> {
        let header = session.header()?;
        let file_time = modified.and_then(|m| m.duration_since(UNIX_EPOCH).ok()).map(|d| {
            Timestamp::from_millis(
                u64::try_from(d.as_millis()).unwrap_or(u64::MAX).min(Timestamp::MAX.as_millis()),
            )
        });
        let started_at = session.started_at().or(file_time).unwrap_or(Timestamp::EPOCH);
        Some(SessionSummary {
            id: header.id.clone(),
            path: path.to_owned(),
            name: session.name().map(str::to_owned),
            first_user_text: session.first_user_text(),
            started_at,
            last_activity: session.last_activity().unwrap_or(started_at),
            items: item_count(session) as u64,
            entries: session.entries().len(),
            malformed: session.malformed(),
            cwd: header.cwd.clone(),
            parent_session: header.parent_session.clone(),
        })
    }

    /// What a conversation list shows of it.
    pub fn info(&self) -> ConversationInfo {
        ConversationInfo {
            id: self.id.clone(),
            name: self.name.clone(),
            first_user_text: self.first_user_text.clone(),
            started_at: self.started_at,
            last_activity: self.last_activity,
            items: self.items,
        }
    }
}

use crate::index::Entry as Cached;

/// A file's last activity can follow its modification time by this much
/// (file times come from a coarser clock than Pi's timestamps).
const MODIFIED_SLACK_MS: u64 = 60_000;

/// A session file as the folder's listing shows it.
#[derive(Debug, Clone)]
struct Listed {
    path: PathBuf,
    len: u64,
    modified: Option<SystemTime>,
}

impl Listed {
    /// Whether `cached` was read from the file as it is now.
    fn matches(&self, cached: &Cached) -> bool {
        cached.len == self.len && cached.modified == self.modified
    }

    fn is_fresh_in(&self, cache: &HashMap<PathBuf, Cached>) -> bool {
        cache.get(&self.path).is_some_and(|c| self.matches(c))
    }

    /// The latest its last activity can be (ms): its modification time,
    /// with a margin; unbounded without one.
    fn activity_bound(&self) -> u64 {
        self.modified.and_then(|m| m.duration_since(UNIX_EPOCH).ok()).map_or(u64::MAX, |d| {
            u64::try_from(d.as_millis()).unwrap_or(u64::MAX).saturating_add(MODIFIED_SLACK_MS)
        })
    }
}

/// Whether Pi named the file at `path` after session `id`
/// (`<time>_<id>.jsonl`, or `<id>.jsonl`).
fn named_after(path: &Path, id: &str) -> bool {
    let Some(name) = path.file_name().and_then(|n| n.to_str()) else { return false };
    let Some(stem) = name.strip_suffix(".jsonl") else { return false };
    !id.is_empty() && (stem == id || stem.strip_suffix(id).is_some_and(|time| time.ends_with('_')))
}

/// Newest first: latest activity, then id, then file, descending.
fn newest_first(a: &SessionSummary, b: &SessionSummary) -> std::cmp::Ordering {
    (b.last_activity, &b.id, &b.path).cmp(&(a.last_activity, &a.id, &a.path))
}

/// One folder of Pi session files.
///
/// ```
/// use durable_sdk::pi::SessionFolder;
///
/// let dir = std::env::temp_dir().join(format!("durable-pi-doc-folder-{}", std::process::id()));
/// std::fs::create_dir_all(&dir)?;
/// for (file, id, at) in [("a.jsonl", "older", "05:00"), ("b.jsonl", "newer", "06:00")] {
///     std::fs::write(dir.join(file), format!(
///         "{{\"type\":\"session\",\"version\":3,\"id\":\"{id}\",\"timestamp\":\"2026-12-01T{at}:00.000Z\"}}\n\
///          {{\"type\":\"message\",\"id\":\"m\",\"parentId\":null,\"message\":{{\"role\":\"user\",\"content\":\"hi\"}}}}\n"))?;
/// }
/// std::fs::write(dir.join("notes.txt"), "not a session")?;
/// let folder = SessionFolder::new(&dir);
/// let ids: Vec<String> = folder.sessions()?.into_iter().map(|s| s.id).collect();
/// assert_eq!(ids, ["newer", "older"]);
/// assert_eq!(folder.read("older")?.unwrap().entries().len(), 1);
/// # std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct SessionFolder {
    dir: PathBuf,
    cache: Mutex<HashMap<PathBuf, Cached>>,
    /// Where the summaries are kept between runs, if anywhere.
    index: Option<PathBuf>,
    /// The summaries changed since the index was last written.
    dirty: std::sync::atomic::AtomicBool,
    /// The index was read (at the first listing of every session).
    index_read: std::sync::OnceLock<()>,
    /// The file each session id was found in last ([`find`](Self::find)),
    /// and what it held at its size and time then: a lookup of a session
    /// found before does not wait for a listing that holds `cache`.
    found: Mutex<HashMap<String, (PathBuf, Cached)>>,
    /// Where each entry of the sessions read last is (and, with an index,
    /// of the long ones), so that a page reads only its entries.
    entries: EntryIndexes,
    /// The folder as [`newest`](Self::newest) found it at start, until the
    /// first listing of every session is done: the history's first page
    /// is told from it ([`ConversationStore::newest_conversations`]).
    start: Mutex<Option<std::sync::Arc<StartListing>>>,
    /// A listing of every session was made in this run.
    listed: std::sync::atomic::AtomicBool,
    /// The newest rows file was written in this run.
    newest_rows_written: std::sync::atomic::AtomicBool,
}

impl SessionFolder {
    /// The folder at `dir` (read at each listing; it need not exist yet).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        SessionFolder {
            dir: dir.into(),
            cache: Mutex::new(HashMap::new()),
            index: None,
            dirty: std::sync::atomic::AtomicBool::new(false),
            index_read: std::sync::OnceLock::new(),
            found: Mutex::new(HashMap::new()),
            entries: EntryIndexes::new(None),
            start: Mutex::new(None),
            listed: std::sync::atomic::AtomicBool::new(false),
            newest_rows_written: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// The folder at `dir`, with its summaries kept in `index_file` (a file
    /// of the agent's own, e.g. in its data folder): a listing reads again
    /// only the files that changed since they were read, in this run or an
    /// earlier one, so a start over a folder of thousands of sessions costs
    /// a listing of the folder, not a reading of every file. The index is
    /// written after a listing that changed it; one that is damaged, or
    /// was written for another folder, is built again. It is read at the
    /// first listing of every session ([`sessions`](Self::sessions)), not
    /// here: a start that opens only the newest sessions
    /// ([`newest`](Self::newest)) does not wait for it.
    ///
    /// Beside it, in the folder named after it with the extension
    /// `entries` (`sessions-index.entries/` for `sessions-index.json`), the
    /// entry index of each long session (where each entry's line is and
    /// what it shows), so that a page of a long conversation reads the
    /// entries it shows, in this run or a later one, not the whole file.
    /// And beside it, with the extension `newest.json`, the rows a listing
    /// found newest (at most 256, whatever the number of sessions), so
    /// that the history's first page after a start is answered from them
    /// and the files changed since, without waiting for that first listing
    /// ([`ConversationStore::newest_conversations`]).
    pub fn with_index(dir: impl Into<PathBuf>, index_file: impl Into<PathBuf>) -> Self {
        let index_file = index_file.into();
        let entries = EntryIndexes::new(Some(index_file.with_extension("entries")));
        SessionFolder { index: Some(index_file), entries, ..SessionFolder::new(dir) }
    }

    /// Reads the index once, keeping what this run read since (newer).
    fn read_index(&self) {
        let Some(file) = &self.index else { return };
        self.index_read.get_or_init(|| {
            let indexed = crate::index::load(file, &self.dir);
            let indexed_len = indexed.len();
            let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
            let mut differs = false;
            for (path, entry) in indexed {
                match cache.entry(path) {
                    std::collections::hash_map::Entry::Occupied(read) => differs |= *read.get() != entry,
                    std::collections::hash_map::Entry::Vacant(place) => drop(place.insert(entry)),
                }
            }
            // Files read before (at start, `newest`) as the index has them
            // leave it as it is: it is not written again for nothing.
            let unindexed = cache.len() > indexed_len;
            self.dirty.store(differs || unindexed, std::sync::atomic::Ordering::SeqCst);
        });
    }

    /// Writes the index when the summaries changed; whether it did.
    fn save_index(&self, cache: &HashMap<PathBuf, Cached>) -> bool {
        let Some(file) = &self.index else { return false };
        // Not read yet: what this run holds is a part, not the index.
        if self.index_read.get().is_none() || !self.dirty.swap(false, std::sync::atomic::Ordering::SeqCst) {
            return false;
        }
        if let Err(e) = crate::index::save(file, &self.dir, cache) {
            self.dirty.store(true, std::sync::atomic::Ordering::SeqCst);
            tracing::warn!(file = %file.display(), error = %e, "pi: the sessions index could not be written");
            return false;
        }
        true
    }

    /// Where the newest rows are kept, with an index.
    fn newest_rows_file(&self) -> Option<PathBuf> {
        self.index.as_ref().map(|file| file.with_extension("newest.json"))
    }

    /// Writes the newest rows of a listing begun at `listed_at` (every
    /// session file, sorted newest first, copies of one id each in its
    /// place): at the first listing of a run, and whenever the index is
    /// written, so that what they say of the files not changed since
    /// `listed_at` stays true.
    fn save_newest_rows(
        &self,
        listed_at: SystemTime,
        sorted: &[(SessionSummary, &Listed)],
        index_written: bool,
    ) {
        let Some(file) = self.newest_rows_file() else { return };
        if !index_written && self.newest_rows_written.load(std::sync::atomic::Ordering::SeqCst) {
            return;
        }
        let rows: Vec<(&Path, Cached)> = sorted
            .iter()
            .take(first_rows::NEWEST_ROWS)
            .map(|(s, f)| {
                (f.path.as_path(), Cached { len: f.len, modified: f.modified, summary: Some(s.clone()) })
            })
            .collect();
        let all = sorted.len() <= first_rows::NEWEST_ROWS;
        match crate::index::save_newest(&file, &self.dir, listed_at, all, &rows) {
            Ok(()) => self.newest_rows_written.store(true, std::sync::atomic::Ordering::SeqCst),
            Err(e) => {
                tracing::warn!(file = %file.display(), error = %e, "pi: the newest rows could not be written")
            }
        }
    }

    /// The folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The folder's session files (`*.jsonl`) with their size and time.
    fn files(&self) -> Result<Vec<Listed>, Error> {
        let listing = match std::fs::read_dir(&self.dir) {
            Ok(listing) => listing,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Vec::new()),
            Err(source) => return Err(Error::Io { path: self.dir.clone(), source }),
        };
        let mut files = Vec::new();
        for dir_entry in listing.flatten() {
            let path = dir_entry.path();
            if path.extension().is_none_or(|ext| ext != "jsonl") {
                continue;
            }
            // Through the folder's handle (no walk of the whole path for each
            // file); a link is followed.
            let meta = match dir_entry.file_type() {
                Ok(t) if t.is_symlink() => std::fs::metadata(&path),
                _ => dir_entry.metadata(),
            };
            let Ok(meta) = meta else { continue };
            if meta.is_file() {
                files.push(Listed { path, len: meta.len(), modified: meta.modified().ok() });
            }
        }
        Ok(files)
    }

    /// Reads one file's summary (no lock held: a listing that reads
    /// thousands of files does not hold up a [`find`](Self::find)), through
    /// its entry index: a long file that Pi appended to is read from where
    /// its index ends.
    fn read_file(&self, file: &Listed) -> Cached {
        let summary = self.entries.summary(&file.path, file.modified).ok().flatten();
        Cached { len: file.len, modified: file.modified, summary }
    }

    /// Keeps what was read, and writes the index if that changed it.
    fn remember(&self, read: Vec<(PathBuf, Cached)>) {
        if read.is_empty() {
            return;
        }
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        cache.extend(read);
        self.dirty.store(true, std::sync::atomic::Ordering::SeqCst);
        self.save_index(&cache);
    }

    /// Every session, newest first (latest activity, then id, descending),
    /// one per session id.
    pub fn sessions(&self) -> Result<Vec<SessionSummary>, Error> {
        self.read_index();
        // Before any file is looked at: a file modified after this may
        // differ from what the listing read of it.
        let listed_at = SystemTime::now();
        let files = self.files()?;
        let stale: Vec<&Listed> = {
            let cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
            files.iter().filter(|f| !f.is_fresh_in(&cache)).collect()
        };
        let read: Vec<(PathBuf, Cached)> =
            stale.into_iter().map(|f| (f.path.clone(), self.read_file(f))).collect();
        let present: HashSet<&Path> = files.iter().map(|f| f.path.as_path()).collect();
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        if !read.is_empty() {
            cache.extend(read);
            self.dirty.store(true, std::sync::atomic::Ordering::SeqCst);
        }
        let gone: Vec<PathBuf> = cache.keys().filter(|p| !present.contains(p.as_path())).cloned().collect();
        for path in &gone {
            cache.remove(path);
            self.entries.forget(path);
        }
        if !gone.is_empty() {
            self.dirty.store(true, std::sync::atomic::Ordering::SeqCst);
        }
        // Each session with its file (as listed).
        let mut listed: Vec<(SessionSummary, &Listed)> = files
            .iter()
            .filter_map(|f| cache.get(&f.path).and_then(|c| c.summary.clone()).map(|s| (s, f)))
            .collect();
        let index_written = self.save_index(&cache);
        // Sorted without the lock: a page's lookups do not wait for it.
        drop(cache);
        listed.sort_by(|a, b| newest_first(&a.0, &b.0));
        self.save_newest_rows(listed_at, &listed, index_written);
        // Every file known now: what the start found is no longer needed.
        self.listed.store(true, std::sync::atomic::Ordering::SeqCst);
        *self.start.lock().unwrap_or_else(|e| e.into_inner()) = None;
        let mut out: Vec<SessionSummary> = listed.into_iter().map(|(s, _)| s).collect();
        let mut seen = HashSet::new();
        out.retain(|s| seen.insert(s.id.clone()));
        Ok(out)
    }

    /// The first `n` sessions of [`sessions`](Self::sessions) that `keep`
    /// keeps, reading only the files that can be among them.
    ///
    /// Pi appends each entry to its session's file as it is made, so a
    /// file's modification time is at or after its latest activity: the
    /// files this folder has not read yet, or that changed since, are read
    /// newest modification first, and no more once the next one was
    /// modified before the `n`-th session found was active. The index is
    /// not read for it (reading a few files costs less), so a start over
    /// thousands of sessions, with an index or without, reads a few files
    /// and no more (the history's listing reads the rest, or the index).
    /// A file whose modification time
    /// was set back before its last message (by a copy that set it) may be
    /// passed over here; [`sessions`](Self::sessions) lists it in its place.
    pub fn newest(
        &self,
        n: usize,
        mut keep: impl FnMut(&SessionSummary) -> bool,
    ) -> Result<Vec<SessionSummary>, Error> {
        if n == 0 {
            return Ok(Vec::new());
        }
        let mut files = self.files()?;
        // Newest modification first: the files read below in this order,
        // and the history's first page after it ([`StartListing`]).
        files.sort_by_key(|f| std::cmp::Reverse(f.activity_bound()));
        let mut top = Vec::new();
        let mut unread = Vec::new();
        let mut fresh = HashMap::new();
        let first_listing = !self.listed.load(std::sync::atomic::Ordering::SeqCst);
        {
            let cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
            for file in &files {
                match cache.get(&file.path) {
                    Some(c) if file.matches(c) => {
                        top.extend(c.summary.iter().filter(|s| keep(s)).cloned());
                        if first_listing {
                            fresh.insert(file.path.clone(), c.clone());
                        }
                    }
                    _ => unread.push(file),
                }
            }
        }
        let first_n = |top: &mut Vec<SessionSummary>| {
            top.sort_by(newest_first);
            let mut seen = HashSet::new();
            top.retain(|s| seen.insert(s.id.clone()));
            top.truncate(n);
        };
        first_n(&mut top);
        let mut read = Vec::new();
        for file in unread {
            let nth = (top.len() == n).then(|| top[n - 1].last_activity.as_millis());
            if nth.is_some_and(|nth| file.activity_bound() < nth) {
                break; // this file and every one after it were last active before the n-th
            }
            let entry = self.read_file(file);
            if let Some(summary) = entry.summary.as_ref().filter(|s| keep(s)) {
                if nth.is_none_or(|nth| summary.last_activity.as_millis() >= nth) {
                    top.push(summary.clone());
                    first_n(&mut top);
                }
            }
            read.push((file.path.clone(), entry));
        }
        if first_listing {
            fresh.extend(read.iter().cloned());
            let start = StartListing::new(files, fresh);
            *self.start.lock().unwrap_or_else(|e| e.into_inner()) = Some(std::sync::Arc::new(start));
        }
        self.remember(read);
        self.found_in(&top);
        Ok(top)
    }

    /// Keeps where each of `sessions` was found, for [`find`](Self::find),
    /// when its file is named after its id: the one active last of those so
    /// named (a file not read by [`newest`](Self::newest) was last active
    /// before it), as `find` would take. An agent opens the sessions
    /// `newest` gave, and the history looks up the open ones at each page:
    /// each is then a look at one file, not a search of every summary.
    fn found_in(&self, sessions: &[SessionSummary]) {
        let cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        let mut found = self.found.lock().unwrap_or_else(|e| e.into_inner());
        for summary in sessions {
            let Some(cached) = cache.get(&summary.path) else { continue };
            if named_after(&summary.path, &summary.id) && !found.contains_key(&summary.id) {
                found.insert(summary.id.clone(), (summary.path.clone(), cached.clone()));
            }
        }
    }

    /// The session with this id, if the folder holds it.
    ///
    /// Pi names a session's file after its id (`<time>_<id>.jsonl`), so the
    /// files so named are read first, and only they: finding one session
    /// costs a listing of the folder, not a reading of every session in it
    /// (an agent opening its sessions one by one would read the folder's
    /// every file once per session). Only when none of them holds the id is
    /// every file read. Of several files named after the id, the one with
    /// the latest activity is taken; a copy under another name is looked at
    /// only in that second reading (so where one named after the id holds
    /// it, such a copy is not taken even if active later, which
    /// [`sessions`](Self::sessions) would list instead). A session found
    /// before is taken from the file it was found in while that file still
    /// holds it (a look at one file; what Pi appended since is read).
    pub fn find(&self, id: &str) -> Result<Option<SessionSummary>, Error> {
        if let Some(found) = self.find_again(id) {
            return Ok(Some(found));
        }
        let found = match self.find_known(id) {
            Some(found) => Some(found),
            None => match self.find_named(id)? {
                Some(found) => Some(found),
                None => self.sessions()?.into_iter().find(|s| s.id == id),
            },
        };
        if let Some(found) = &found {
            let cached = self.cache.lock().unwrap_or_else(|e| e.into_inner()).get(&found.path).cloned();
            if let Some(cached) = cached {
                let mut known = self.found.lock().unwrap_or_else(|e| e.into_inner());
                known.insert(id.to_owned(), (found.path.clone(), cached));
            }
        }
        Ok(found)
    }

    /// The session with this id from the file it was found in last, while
    /// that file holds it: a look at one file (the history asks it of every
    /// open conversation at each page), and a reading of what was appended
    /// when it changed.
    fn find_again(&self, id: &str) -> Option<SessionSummary> {
        let (path, known) = self.found.lock().unwrap_or_else(|e| e.into_inner()).get(id).cloned()?;
        let meta = std::fs::metadata(&path).ok()?;
        let modified = meta.modified().ok();
        if known.len == meta.len() && known.modified == modified {
            return known.summary.filter(|s| s.id == id);
        }
        // Pi wrote to it since: read what it appended (through the file's
        // entry index), not the folder.
        let summary = self.entries.summary(&path, modified).ok().flatten();
        let read = Cached { len: meta.len(), modified, summary: summary.clone() };
        self.found
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id.to_owned(), (path.clone(), read.clone()));
        self.cache.lock().unwrap_or_else(|e| e.into_inner()).insert(path, read);
        self.dirty.store(true, std::sync::atomic::Ordering::SeqCst);
        summary.filter(|s| s.id == id)
    }

    /// The session with this id from what an earlier listing (or the
    /// index) read, when its file is named after the id and has not changed
    /// since: no listing of the folder at all.
    fn find_known(&self, id: &str) -> Option<SessionSummary> {
        if id.is_empty() {
            return None;
        }
        let cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        let mut best: Option<SessionSummary> = None;
        for (path, cached) in cache.iter() {
            let Some(summary) = cached.summary.as_ref().filter(|s| s.id == id) else { continue };
            if !named_after(path, id) {
                continue;
            }
            let Ok(meta) = std::fs::metadata(path) else { return None };
            if meta.len() != cached.len || meta.modified().ok() != cached.modified {
                return None; // changed: the listing of the named files reads it again
            }
            if best
                .as_ref()
                .is_none_or(|b| (summary.last_activity, &summary.path) > (b.last_activity, &b.path))
            {
                best = Some(summary.clone());
            }
        }
        best
    }

    /// The newest session with this id among the files named after it.
    fn find_named(&self, id: &str) -> Result<Option<SessionSummary>, Error> {
        if id.is_empty() {
            return Ok(None);
        }
        let listing = match std::fs::read_dir(&self.dir) {
            Ok(listing) => listing,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
            Err(source) => return Err(Error::Io { path: self.dir.clone(), source }),
        };
        let mut best: Option<SessionSummary> = None;
        for dir_entry in listing.flatten() {
            let path = dir_entry.path();
            if !named_after(&path, id) {
                continue;
            }
            let Ok(meta) = std::fs::metadata(&path) else { continue };
            if !meta.is_file() {
                continue;
            }
            let modified = meta.modified().ok();
            let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
            let fresh = cache.get(&path).is_some_and(|c| c.len == meta.len() && c.modified == modified);
            if !fresh {
                let summary = self.entries.summary(&path, modified).ok().flatten();
                cache.insert(path.clone(), Cached { len: meta.len(), modified, summary });
                self.dirty.store(true, std::sync::atomic::Ordering::SeqCst);
            }
            let Some(summary) = cache.get(&path).and_then(|c| c.summary.clone()) else { continue };
            let newer =
                |b: &SessionSummary| (summary.last_activity, &summary.path) > (b.last_activity, &b.path);
            if summary.id == id && best.as_ref().is_none_or(newer) {
                best = Some(summary);
            }
        }
        Ok(best)
    }

    /// Reads the session with this id, if the folder holds it.
    pub fn read(&self, id: &str) -> Result<Option<Session>, Error> {
        match self.find(id)? {
            Some(summary) => Session::read(&summary.path).map(Some),
            None => Ok(None),
        }
    }
}

impl ConversationStore for SessionFolder {
    fn conversations(&self) -> Result<Vec<ConversationInfo>, Error> {
        Ok(self.sessions()?.iter().map(SessionSummary::info).collect())
    }

    fn info(&self, id: &str) -> Result<Option<ConversationInfo>, Error> {
        Ok(self.find(id)?.map(|s| s.info()))
    }

    fn conversation(&self, id: &str) -> Result<Option<Conversation>, Error> {
        let Some(summary) = self.find(id)? else { return Ok(None) };
        let session = Session::read(&summary.path)?;
        let items = pane_view(&session).items;
        let info =
            SessionSummary::of(&summary.path, &session, None).map_or_else(|| summary.info(), |s| s.info());
        Ok(Some(Conversation::new(ConversationInfo { items: items.len() as u64, ..info }, items)))
    }

    /// Before the first listing of every session, after
    /// [`newest`](SessionFolder::newest) (an agent's start): from the files
    /// it read, the newest rows the last listing kept beside the index
    /// ([`with_index`](SessionFolder::with_index)), each checked against
    /// its file's size and modification time now (read again when either
    /// changed), and the files modified since those rows were written,
    /// read newest modification first as `newest` reads them. `None` once
    /// listed, before a `newest`, or when more than 256 files would have
    /// to be read. As `newest`, it takes a file's modification time to be
    /// at or after its last activity, and after the listing that wrote the
    /// rows when written since: a file copied in with an older time kept
    /// may be missing from these, and is listed in its place.
    fn newest_conversations(&self, n: usize) -> Result<Option<Vec<ConversationInfo>>, Error> {
        Ok(self.first_rows(n).map(|rows| rows.iter().map(SessionSummary::info).collect()))
    }

    /// Reads only the entries the page shows (and the results of its tool
    /// calls), through the file's entry index.
    fn conversation_page(&self, id: &str, range: Range<usize>) -> Result<Option<Conversation>, Error> {
        let Some(found) = self.find(id)? else { return Ok(None) };
        let (now, items) = self.entries.page(&found.path, range)?;
        Ok(Some(Conversation::new(now.info(), items)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("durable-pi-folder-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn write(dir: &Path, file: &str, id: &str, user_ms: u64) {
        std::fs::write(
            dir.join(file),
            format!(
                "{{\"type\":\"session\",\"version\":3,\"id\":\"{id}\",\"timestamp\":\"2026-12-01T05:00:00.000Z\"}}\n\
                 {{\"type\":\"message\",\"id\":\"m\",\"parentId\":null,\"message\":{{\"role\":\"user\",\"content\":\"hi\",\"timestamp\":{user_ms}}}}}\n"
            ),
        )
        .unwrap();
    }

    /// Replaces a file's bytes with as many of garbage, keeping its time:
    /// only what reads it again sees the change.
    pub(super) fn garble_keeping_size_and_time(path: &Path) {
        let meta = std::fs::metadata(path).unwrap();
        std::fs::write(path, vec![b'#'; meta.len() as usize]).unwrap();
        std::fs::File::options()
            .write(true)
            .open(path)
            .unwrap()
            .set_modified(meta.modified().unwrap())
            .unwrap();
    }

    fn ids(folder: &SessionFolder) -> Vec<String> {
        folder.sessions().unwrap().into_iter().map(|s| s.id).collect()
    }

    #[test]
    fn the_index_spares_a_start_the_unchanged_files_and_follows_changed_new_and_gone_ones() {
        let dir = temp("index");
        let sessions = dir.join("sessions");
        std::fs::create_dir_all(&sessions).unwrap();
        let index = dir.join("index.json");
        write(&sessions, "a.jsonl", "a", 1_000);
        write(&sessions, "b.jsonl", "b", 2_000);
        write(&sessions, "c.jsonl", "c", 3_000);
        assert_eq!(ids(&SessionFolder::with_index(&sessions, &index)), ["c", "b", "a"]);
        assert!(index.exists(), "written after the first listing");

        // The next start reads no unchanged file: b's garbage goes unseen.
        garble_keeping_size_and_time(&sessions.join("b.jsonl"));
        let folder = SessionFolder::with_index(&sessions, &index);
        assert_eq!(ids(&folder), ["c", "b", "a"], "b was not read again");
        assert_eq!(ids(&SessionFolder::new(&sessions)), ["c", "a"], "without the index it is");

        // A changed file (Pi appended), a new one and a gone one are followed,
        // in this run and the next.
        write(&sessions, "a.jsonl", "a", 9_000);
        write(&sessions, "d.jsonl", "d", 4_000);
        std::fs::remove_file(sessions.join("c.jsonl")).unwrap();
        assert_eq!(ids(&folder), ["a", "d", "b"]);
        let kept: serde_json::Value = serde_json::from_slice(&std::fs::read(&index).unwrap()).unwrap();
        let mut names: Vec<&str> =
            kept["entries"].as_array().unwrap().iter().filter_map(|e| e["name"].as_str()).collect();
        names.sort();
        assert_eq!(names, ["a.jsonl", "b.jsonl", "d.jsonl"], "the gone file's entry dropped from the index");
        let again = SessionFolder::with_index(&sessions, &index);
        assert_eq!(ids(&again), ["a", "d", "b"]);
        assert_eq!(again.sessions().unwrap()[0].last_activity.as_millis(), 9_000);
    }

    #[test]
    fn a_damaged_index_or_another_folders_is_built_again_not_trusted() {
        let dir = temp("index-bad");
        let sessions = dir.join("sessions");
        std::fs::create_dir_all(&sessions).unwrap();
        let index = dir.join("index.json");
        write(&sessions, "a.jsonl", "a", 1_000);
        write(&sessions, "b.jsonl", "b", 2_000);
        assert_eq!(ids(&SessionFolder::with_index(&sessions, &index)), ["b", "a"]);
        garble_keeping_size_and_time(&sessions.join("b.jsonl"));

        let text = std::fs::read_to_string(&index).unwrap();
        std::fs::write(&index, &text[..text.len() / 2]).unwrap();
        assert_eq!(ids(&SessionFolder::with_index(&sessions, &index)), ["a"], "a cut index: every file read");
        let rebuilt: serde_json::Value = serde_json::from_slice(&std::fs::read(&index).unwrap()).unwrap();
        assert_eq!(rebuilt["entries"].as_array().map(Vec::len), Some(2), "and written again whole");

        // Indexed for another folder, whose b.jsonl has the same name, size
        // and time as this one's: not taken for this one.
        let other = dir.join("other");
        std::fs::create_dir_all(&other).unwrap();
        write(&other, "b.jsonl", "g", 5_000);
        let b = std::fs::metadata(sessions.join("b.jsonl")).unwrap();
        assert_eq!(std::fs::metadata(other.join("b.jsonl")).unwrap().len(), b.len());
        std::fs::File::options()
            .write(true)
            .open(other.join("b.jsonl"))
            .unwrap()
            .set_modified(b.modified().unwrap())
            .unwrap();
        let other_index = dir.join("other-index.json");
        assert_eq!(ids(&SessionFolder::with_index(&other, &other_index)), ["g"]);
        std::fs::copy(&other_index, &index).unwrap();
        assert_eq!(ids(&SessionFolder::with_index(&sessions, &index)), ["a"], "g is not this folder's");
    }

    /// Sets a file's modification time, as Pi's last write left it.
    fn touch(path: &Path, ms: u64) {
        std::fs::File::options()
            .write(true)
            .open(path)
            .unwrap()
            .set_modified(UNIX_EPOCH + std::time::Duration::from_millis(ms))
            .unwrap();
    }

    #[test]
    fn newest_reads_only_the_files_that_can_be_among_the_first_n() {
        let dir = temp("newest");
        const DAY: u64 = 86_400_000;
        // Thirty sessions a day apart, each file last written a second after its last message.
        for n in 0..30u64 {
            let file = format!("2026-01-{:02}T05-00-00-000Z_s{n}.jsonl", n % 28 + 1);
            write(&dir, &file, &format!("s{n}"), 1_700_000_000_000 + n * DAY);
            touch(&dir.join(&file), 1_700_000_000_000 + n * DAY + 1_000);
        }
        let want = |folder: &SessionFolder, n: usize, skip: &str| -> Vec<String> {
            folder.sessions().unwrap().into_iter().map(|s| s.id).filter(|id| id != skip).take(n).collect()
        };
        let folder = SessionFolder::new(&dir);
        let got: Vec<String> =
            folder.newest(3, |s| s.id != "s28").unwrap().into_iter().map(|s| s.id).collect();
        assert_eq!(got, ["s29", "s27", "s26"]);
        assert_eq!(
            folder.cache.lock().unwrap().len(),
            4,
            "s29 to s26 (s28 read, then left out): s25 was written before s26 was last active"
        );
        assert_eq!(got, want(&SessionFolder::new(&dir), 3, "s28"));

        // What the folder read before is not read again; a file written since
        // (its time now) is read, and leads.
        write(&dir, "2026-01-01T05-00-00-000Z_s3.jsonl", "s3", 1_800_000_000_000);
        touch(&dir.join("2026-01-01T05-00-00-000Z_s3.jsonl"), 1_800_000_000_500);
        let got: Vec<String> = folder.newest(2, |_| true).unwrap().into_iter().map(|s| s.id).collect();
        assert_eq!(got, ["s3", "s29"]);
        assert_eq!(folder.cache.lock().unwrap().len(), 5, "s3 (written since) read, nothing else");

        // Times that say nothing (every file written at once): every file is
        // read, and the pick is still the listing's.
        let same = temp("newest-same");
        for n in 0..10u64 {
            write(&same, &format!("s{n}.jsonl"), &format!("s{n}"), 5_000 + n);
        }
        write(&same, "copy.jsonl", "s2", 9_999); // a copy active last lists once
        let folder = SessionFolder::new(&same);
        let got: Vec<String> = folder.newest(3, |_| true).unwrap().into_iter().map(|s| s.id).collect();
        assert_eq!(got, ["s2", "s9", "s8"]);
        assert_eq!(got, want(&SessionFolder::new(&same), 3, ""));
        assert!(folder.newest(0, |_| true).unwrap().is_empty());
    }

    #[test]
    fn the_sessions_newest_gave_are_found_again_by_a_look_at_their_file() {
        let dir = temp("newest-found");
        for n in 0..5u64 {
            let file = format!("2026-01-01T05-00-00-000Z_s{n}.jsonl");
            write(&dir, &file, &format!("s{n}"), 1_000_000 + n * 100_000);
            touch(&dir.join(&file), 1_000_000 + n * 100_000 + 1_000);
        }
        write(&dir, "copy.jsonl", "c", 9_000_000); // not named after its id
        touch(&dir.join("copy.jsonl"), 9_001_000);
        let folder = SessionFolder::new(&dir);
        let got: Vec<String> = folder.newest(3, |_| true).unwrap().into_iter().map(|s| s.id).collect();
        assert_eq!(got, ["c", "s4", "s3"]);
        let mut found: Vec<String> = folder.found.lock().unwrap().keys().cloned().collect();
        found.sort();
        assert_eq!(found, ["s3", "s4"], "c's file is not named after it: find looks for it as ever");
        // A look at the file: what Pi appended since is read, not the folder.
        write(&dir, "2026-01-01T05-00-00-000Z_s3.jsonl", "s3", 7_000_000);
        assert_eq!(folder.find("s3").unwrap().map(|s| s.last_activity.as_millis()), Some(7_000_000));
        assert!(named_after(Path::new("/x/2026_s1.jsonl"), "s1") && named_after(Path::new("s1.jsonl"), "s1"));
        assert!(
            !named_after(Path::new("/x/2026_s11.jsonl"), "1")
                && !named_after(Path::new("/x/as1.jsonl"), "s1")
        );
        assert!(!named_after(Path::new("/x/_.jsonl"), ""));
    }

    #[test]
    fn newest_at_a_start_neither_waits_for_the_index_nor_writes_a_part_over_it() {
        let dir = temp("newest-index");
        let sessions = dir.join("sessions");
        std::fs::create_dir_all(&sessions).unwrap();
        let index = dir.join("index.json");
        for (n, id) in ["a", "b", "c"].into_iter().enumerate() {
            let file = sessions.join(format!("{id}.jsonl"));
            write(&sessions, &format!("{id}.jsonl"), id, 1_000_000 + n as u64 * 100_000_000);
            touch(&file, 1_000_000 + n as u64 * 100_000_000 + 1_000);
        }
        assert_eq!(ids(&SessionFolder::with_index(&sessions, &index)), ["c", "b", "a"]);
        garble_keeping_size_and_time(&sessions.join("a.jsonl"));

        touch(&index, 1_000);

        // A start: the newest read from its file, the index not read yet.
        let folder = SessionFolder::with_index(&sessions, &index);
        let newest: Vec<String> = folder.newest(1, |_| true).unwrap().into_iter().map(|s| s.id).collect();
        assert_eq!(newest, ["c"]);
        assert_eq!(folder.cache.lock().unwrap().len(), 1, "c alone read, no index");
        // The whole index is still there for the listing (a's garbage unseen),
        // and c, read as the index has it, does not make it written again.
        assert_eq!(ids(&folder), ["c", "b", "a"]);
        assert_eq!(
            std::fs::metadata(&index).unwrap().modified().unwrap(),
            UNIX_EPOCH + std::time::Duration::from_millis(1_000),
            "not written again"
        );
        assert_eq!(ids(&SessionFolder::with_index(&sessions, &index)), ["c", "b", "a"]);
    }

    #[test]
    fn a_missing_folder_holds_no_sessions() {
        let folder = SessionFolder::new(temp("missing").join("nope"));
        assert!(folder.sessions().unwrap().is_empty());
        assert!(folder.conversation("x").unwrap().is_none());
    }

    #[test]
    fn a_copy_of_a_session_lists_once_as_the_one_active_last() {
        let dir = temp("dup");
        write(&dir, "a.jsonl", "same", 1_000);
        write(&dir, "b.jsonl", "same", 2_000);
        write(&dir, "c.jsonl", "other", 1_500);
        let list = SessionFolder::new(&dir).sessions().unwrap();
        let got: Vec<(&str, &str)> =
            list.iter().map(|s| (s.id.as_str(), s.path.file_name().unwrap().to_str().unwrap())).collect();
        assert_eq!(got, [("same", "b.jsonl"), ("other", "c.jsonl")]);
    }

    #[test]
    fn a_file_is_read_again_when_it_changes_and_forgotten_when_it_goes() {
        let dir = temp("cache");
        write(&dir, "a.jsonl", "s", 1_000);
        let folder = SessionFolder::new(&dir);
        assert_eq!(folder.sessions().unwrap()[0].items, 1);
        let mut text = std::fs::read_to_string(dir.join("a.jsonl")).unwrap();
        text.push_str("{\"type\":\"message\",\"id\":\"n\",\"parentId\":\"m\",\"message\":{\"role\":\"assistant\",\"content\":\"yo\",\"timestamp\":5000}}\n");
        std::fs::write(dir.join("a.jsonl"), text).unwrap();
        let s = &folder.sessions().unwrap()[0];
        assert_eq!((s.entries, s.last_activity), (2, Timestamp::from_millis(5_000)));
        std::fs::remove_file(dir.join("a.jsonl")).unwrap();
        assert!(folder.sessions().unwrap().is_empty());
        assert!(folder.cache.lock().unwrap().is_empty());
    }

    #[test]
    fn find_reads_only_the_files_named_after_the_id_when_one_holds_it() {
        let dir = temp("named");
        for n in 0..20 {
            write(&dir, &format!("2026-12-01T05-00-00-000Z_s{n}.jsonl"), &format!("s{n}"), 1_000 + n);
        }
        let folder = SessionFolder::new(&dir);
        let found = folder.find("s7").unwrap().expect("found by its file name");
        assert_eq!((found.id.as_str(), found.last_activity), ("s7", Timestamp::from_millis(1_007)));
        assert_eq!(folder.cache.lock().unwrap().len(), 1, "one file read, not the folder's twenty");
        // "s1" is a suffix of no other file's name: "_s1.jsonl" matches s1 only, not s11.
        assert_eq!(folder.find("s1").unwrap().map(|s| s.last_activity), Some(Timestamp::from_millis(1_001)));
        assert_eq!(folder.cache.lock().unwrap().len(), 2);
    }

    #[test]
    fn find_falls_back_to_every_file_when_none_named_after_the_id_holds_it() {
        let dir = temp("fallback");
        write(&dir, "copy.jsonl", "s1", 1_000); // not named after its id
        write(&dir, "2026-12-01T05-00-00-000Z_s2.jsonl", "other", 2_000); // named after s2, holds another id
        write(&dir, "2026-12-01T05-00-00-000Z_s3.jsonl", "s3", 3_000);
        write(&dir, "2026-12-02T05-00-00-000Z_s3.jsonl", "s3", 4_000); // a newer copy under the same id
        let folder = SessionFolder::new(&dir);
        assert_eq!(folder.find("s1").unwrap().map(|s| s.path), Some(dir.join("copy.jsonl")));
        assert!(folder.find("s2").unwrap().is_none(), "its file holds another id");
        assert_eq!(folder.find("other").unwrap().map(|s| s.id), Some("other".to_owned()));
        let newest = folder.find("s3").unwrap().expect("s3");
        assert_eq!(
            newest.last_activity,
            Timestamp::from_millis(4_000),
            "the one active last, as sessions() lists"
        );
        assert!(folder.find("").unwrap().is_none());
    }
}
