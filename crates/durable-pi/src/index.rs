//! The sessions folder's index, kept in a file of the agent's (its data
//! folder), so that a start does not read every session file again.
//!
//! For each file it holds what a listing shows (a [`SessionSummary`]) with
//! the file's size and modification time when it was read; a listing takes
//! an entry as it is while both still match and reads the file again
//! otherwise (Pi appended to it), and drops the entries of files gone. The
//! index is written whole (to a temporary file, then renamed over it) after
//! a listing that changed it. A file that cannot be read, is damaged, or was
//! written for another folder or by another version is not trusted: the
//! listing reads the folder's files as if there were none.
//!
//! Beside it, the newest rows ([`save_newest`]): the first rows of the
//! listing that wrote them, with when it began, in a file small whatever
//! the number of sessions, from which the history's first page after a
//! start is told without reading the index (see `folder::first_rows`).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use durable_types::Timestamp;
use serde::{Deserialize, Serialize};

use crate::folder::SessionSummary;

/// The index's layout; another one is rebuilt, not read.
const VERSION: u32 = 1;

/// What the index remembers of one file.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Entry {
    pub(crate) len: u64,
    pub(crate) modified: Option<SystemTime>,
    /// `None`: the file is not a session (left out of listings).
    pub(crate) summary: Option<SessionSummary>,
}

#[derive(Serialize, Deserialize)]
struct File {
    version: u32,
    /// The folder it indexes, as given.
    dir: PathBuf,
    entries: Vec<Stored>,
}

#[derive(Serialize, Deserialize)]
struct Stored {
    /// The file's name in the folder.
    name: String,
    len: u64,
    /// Nanoseconds since the Unix epoch.
    modified_ns: Option<u128>,
    summary: Option<StoredSummary>,
}

#[derive(Serialize, Deserialize)]
struct StoredSummary {
    id: String,
    name: Option<String>,
    first_user_text: Option<String>,
    started_at: u64,
    last_activity: u64,
    items: u64,
    entries: usize,
    malformed: usize,
    cwd: Option<String>,
    parent_session: Option<String>,
}

fn to_ns(t: SystemTime) -> Option<u128> {
    t.duration_since(UNIX_EPOCH).ok().map(|d| d.as_nanos())
}

fn from_ns(ns: u128) -> Option<SystemTime> {
    let secs = u64::try_from(ns / 1_000_000_000).ok()?;
    UNIX_EPOCH.checked_add(Duration::new(secs, (ns % 1_000_000_000) as u32))
}

/// Reads the index of `dir` from `file`: empty when there is none, or it is
/// damaged, or not this folder's, or of another layout.
pub(crate) fn load(file: &Path, dir: &Path) -> HashMap<PathBuf, Entry> {
    let Ok(bytes) = std::fs::read(file) else { return HashMap::new() };
    let parsed: File = match serde_json::from_slice(&bytes) {
        Ok(parsed) => parsed,
        Err(e) => {
            tracing::warn!(file = %file.display(), error = %e, "pi: the sessions index is damaged; it is built again");
            return HashMap::new();
        }
    };
    if parsed.version != VERSION || parsed.dir != dir {
        return HashMap::new();
    }
    parsed.entries.into_iter().filter(Stored::names_a_file_in_the_folder).map(|e| e.into_entry(dir)).collect()
}

/// Writes the index of `dir` to `file` (a temporary file renamed over it).
pub(crate) fn save(file: &Path, dir: &Path, entries: &HashMap<PathBuf, Entry>) -> std::io::Result<()> {
    let stored = entries.iter().filter_map(|(path, e)| Stored::of(path, e)).collect();
    write_whole(file, &File { version: VERSION, dir: dir.to_owned(), entries: stored })
}

/// Writes `value` as JSON to `file`: to a temporary file, renamed over it
/// (a reader finds the old file or the new one, never a part).
fn write_whole(file: &Path, value: &impl Serialize) -> std::io::Result<()> {
    let bytes = serde_json::to_vec(value).map_err(std::io::Error::other)?;
    let tmp = file.with_extension(format!("tmp.{}", std::process::id()));
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, file)
}

impl Stored {
    fn of(path: &Path, e: &Entry) -> Option<Stored> {
        let name = path.file_name()?.to_str()?.to_owned();
        let summary = e.summary.as_ref().map(|s| StoredSummary {
            id: s.id.clone(),
            name: s.name.clone(),
            first_user_text: s.first_user_text.clone(),
            started_at: s.started_at.as_millis(),
            last_activity: s.last_activity.as_millis(),
            items: s.items,
            entries: s.entries,
            malformed: s.malformed,
            cwd: s.cwd.clone(),
            parent_session: s.parent_session.clone(),
        });
        Some(Stored { name, len: e.len, modified_ns: e.modified.and_then(to_ns), summary })
    }

    /// A plain name, so that the entry cannot point out of the folder.
    fn names_a_file_in_the_folder(&self) -> bool {
        !self.name.is_empty() && !self.name.contains('/') && self.name != "." && self.name != ".."
    }

    fn into_entry(self, dir: &Path) -> (PathBuf, Entry) {
        let path = dir.join(&self.name);
        let summary = self.summary.map(|s| SessionSummary {
            id: s.id,
            path: path.clone(),
            name: s.name,
            first_user_text: s.first_user_text,
            started_at: Timestamp::from_millis(s.started_at.min(Timestamp::MAX.as_millis())),
            last_activity: Timestamp::from_millis(s.last_activity.min(Timestamp::MAX.as_millis())),
            items: s.items,
            entries: s.entries,
            malformed: s.malformed,
            cwd: s.cwd,
            parent_session: s.parent_session,
        });
        (path, Entry { len: self.len, modified: self.modified_ns.and_then(from_ns), summary })
    }
}

/// The newest rows file's layout; another one is not read.
const NEWEST_VERSION: u32 = 1;

/// The sessions a listing found newest, kept beside the index
/// ([`save_newest`]): what the history's first page needs, in a file
/// small whatever the number of sessions.
#[derive(Debug)]
pub(crate) struct NewestRows {
    /// When the listing began, before it looked at any file: a file
    /// modified since may differ from what the rows say.
    pub(crate) listed_at: SystemTime,
    /// The rows are every session the folder held.
    pub(crate) all: bool,
    /// The listing's first files, newest first (copies of one session
    /// each in its place): every other session file, as it was then, was
    /// last active at or before the last of them.
    pub(crate) rows: Vec<(PathBuf, Entry)>,
}

#[derive(Serialize, Deserialize)]
struct NewestFile {
    version: u32,
    dir: PathBuf,
    /// Nanoseconds since the Unix epoch.
    listed_at_ns: u128,
    all: bool,
    rows: Vec<Stored>,
}

/// Writes the newest rows of `dir`, the listing begun at `listed_at`, to
/// `file`.
pub(crate) fn save_newest(
    file: &Path,
    dir: &Path,
    listed_at: SystemTime,
    all: bool,
    rows: &[(&Path, Entry)],
) -> std::io::Result<()> {
    let Some(listed_at_ns) = to_ns(listed_at) else { return Ok(()) };
    let rows = rows.iter().filter_map(|(path, e)| Stored::of(path, e)).collect();
    write_whole(file, &NewestFile { version: NEWEST_VERSION, dir: dir.to_owned(), listed_at_ns, all, rows })
}

/// Reads the newest rows of `dir` from `file`: `None` when there are none,
/// or they are damaged, not this folder's, or of another layout (the
/// history's first page then reads the session files newest first).
pub(crate) fn load_newest(file: &Path, dir: &Path) -> Option<NewestRows> {
    let bytes = std::fs::read(file).ok()?;
    let parsed: NewestFile = serde_json::from_slice(&bytes).ok()?;
    if parsed.version != NEWEST_VERSION || parsed.dir != dir {
        return None;
    }
    // A row that names no file of the folder: the file is not trusted.
    if !parsed.rows.iter().all(Stored::names_a_file_in_the_folder) {
        return None;
    }
    let rows = parsed.rows.into_iter().map(|r| r.into_entry(dir)).collect();
    Some(NewestRows { listed_at: from_ns(parsed.listed_at_ns)?, all: parsed.all, rows })
}
