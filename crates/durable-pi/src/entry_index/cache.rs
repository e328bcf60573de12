//! The entry indexes a sessions folder keeps: the few read last in memory
//! (at most [`HELD_FILES`] files and [`HELD_ENTRIES`] entries in all, so
//! memory follows what is being read, not what was), and those of long
//! sessions on disk, beside the sessions index, so that a start does not
//! read a long conversation whole again to show a page of it.

use std::collections::VecDeque;
use std::fs::File;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::SystemTime;

use durable_types::Item;
use sha2::{Digest, Sha256};

use super::page::{self, PageError};
use super::{EntryIndex, disk};
use crate::Error;
use crate::folder::SessionSummary;
use crate::items::pane_view;
use crate::session::Session;

/// Indexes held in memory at most.
const HELD_FILES: usize = 8;
/// Entries held in memory at most, over every index (about 130 bytes each);
/// a larger index is read from disk at each page.
const HELD_ENTRIES: usize = 100_000;
/// Indexes of files this long or longer are kept on disk and in memory
/// after a listing; a shorter file costs little to read again.
const LONG_BYTES: u64 = 64 * 1024;

/// The entry indexes of one sessions folder.
#[derive(Debug)]
pub(crate) struct EntryIndexes {
    /// Where the indexes of long sessions are kept, if anywhere.
    dir: Option<PathBuf>,
    /// Most recently used last.
    held: Mutex<VecDeque<(PathBuf, EntryIndex)>>,
}

impl EntryIndexes {
    /// Indexes kept in memory only (`dir` `None`), or on disk in `dir` too.
    pub(crate) fn new(dir: Option<PathBuf>) -> Self {
        EntryIndexes { dir, held: Mutex::new(VecDeque::new()) }
    }

    /// What a listing shows of the session file at `path` (`None` when it
    /// is not a session), read through its index: a file that grew is read
    /// from where its index ends.
    pub(crate) fn summary(
        &self,
        path: &Path,
        modified: Option<SystemTime>,
    ) -> Result<Option<SessionSummary>, Error> {
        let (index, mut file) = self.open(path, false)?;
        let summary = index.with_last_line(&mut file).map_err(io(path))?.summary(path, modified);
        let long = index.covered() >= LONG_BYTES;
        self.keep(path, index, long);
        Ok(summary)
    }

    /// The items at `range` of the session at `path` and what a listing
    /// shows of it (its `items` all the items), reading only the entries
    /// the page needs. An index that does not match the file is built
    /// again, once; if it still does not, the file is read whole.
    pub(crate) fn page(
        &self,
        path: &Path,
        range: Range<usize>,
    ) -> Result<(SessionSummary, Vec<Item>), Error> {
        for rebuild in [false, true] {
            let (index, mut file) = self.open(path, rebuild)?;
            let read = {
                let whole = index.with_last_line(&mut file).map_err(io(path))?;
                if !whole.is_session() {
                    return Err(Error::NotASession { path: path.to_owned() });
                }
                page::items(&whole, &mut file, range.clone())
                    .map(|(items, total)| (whole.summary_of(path, None, total), items))
            };
            match read {
                Ok((Some(summary), items)) => {
                    self.keep(path, index, true);
                    return Ok((summary, items));
                }
                Ok((None, _)) => return Err(Error::NotASession { path: path.to_owned() }),
                Err(PageError::Io(e)) => return Err(io(path)(e)),
                Err(PageError::Stale) => {
                    tracing::warn!(file = %path.display(), "pi: a session's entry index does not match it; it is built again");
                }
            }
        }
        let session = Session::read(path)?;
        let summary = SessionSummary::of(path, &session, None)
            .ok_or_else(|| Error::NotASession { path: path.to_owned() })?;
        let items = pane_view(&session).items.into_iter().skip(range.start).take(range.len()).collect();
        Ok((summary, items))
    }

    /// Forgets the index of a file that is gone.
    pub(crate) fn forget(&self, path: &Path) {
        self.held.lock().unwrap_or_else(|e| e.into_inner()).retain(|(p, _)| p != path);
        if let Some(file) = self.file_for(path) {
            let _ = std::fs::remove_file(file);
        }
    }

    /// The index of `path`, up to date with the file, out of memory (given
    /// back with [`keep`](Self::keep)), and the file open.
    fn open(&self, path: &Path, rebuild: bool) -> Result<(EntryIndex, File), Error> {
        let mut file = File::open(path).map_err(io(path))?;
        let meta = file.metadata().map_err(io(path))?;
        let known = if rebuild { None } else { self.take(path).or_else(|| self.load(path)) };
        if let Some(mut index) = known {
            if index.refresh(&mut file, &meta).map_err(io(path))?.is_ok() {
                return Ok((index, file));
            }
        }
        let index = EntryIndex::build(&mut file, &meta).map_err(io(path))?;
        Ok((index, file))
    }

    fn take(&self, path: &Path) -> Option<EntryIndex> {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        let at = held.iter().position(|(p, _)| p == path)?;
        held.remove(at).map(|(_, index)| index)
    }

    /// Gives an index back: written to disk when the file is long and the
    /// index is new or grew by an eighth since written, and held in memory
    /// when `hold`, the least recently used ones let go past the bounds.
    fn keep(&self, path: &Path, mut index: EntryIndex, hold: bool) {
        if index.covered() >= LONG_BYTES
            && index.saved.is_none_or(|saved| index.len() >= saved + (saved / 8).max(64))
        {
            if let Some(file) = self.file_for(path) {
                let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
                let written = std::fs::create_dir_all(file.parent().unwrap_or(Path::new(".")))
                    .and_then(|()| disk::save(&file, name, &index));
                match written {
                    Ok(()) => index.saved = Some(index.len()),
                    Err(e) => {
                        tracing::warn!(file = %file.display(), error = %e, "pi: an entry index could not be written")
                    }
                }
            }
        }
        if !hold || index.len() > HELD_ENTRIES {
            return;
        }
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        held.retain(|(p, _)| p != path);
        held.push_back((path.to_owned(), index));
        while held.len() > HELD_FILES || held.iter().map(|(_, i)| i.len()).sum::<usize>() > HELD_ENTRIES {
            held.pop_front();
        }
    }

    fn load(&self, path: &Path) -> Option<EntryIndex> {
        let name = path.file_name()?.to_str()?;
        disk::load(&self.file_for(path)?, name)
    }

    /// The index file of a session file: named by a digest of its name (any
    /// name fits, none is taken for another's).
    fn file_for(&self, path: &Path) -> Option<PathBuf> {
        let dir = self.dir.as_ref()?;
        let digest = Sha256::digest(path.file_name()?.as_encoded_bytes());
        let hex: String = digest.iter().take(16).map(|b| format!("{b:02x}")).collect();
        Some(dir.join(format!("{hex}.idx")))
    }

    /// How many indexes are held in memory, and their entries.
    #[cfg(test)]
    pub(crate) fn held(&self) -> (usize, usize) {
        let held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        (held.len(), held.iter().map(|(_, i)| i.len()).sum())
    }
}

fn io(path: &Path) -> impl Fn(std::io::Error) -> Error + '_ {
    move |source| Error::Io { path: path.to_owned(), source }
}
