//! This program's own record of each conversation, in the data folder:
//! `conversations/<pane id>.json`, written whole (a temporary file renamed
//! over it) at each turn's end, rename, close and stop.
//!
//! ACP has no rename, no start time and no item count; and reading a
//! closed conversation from the agent means starting one. So the record
//! keeps the title (and whether the phone set it), when the conversation
//! started and was last updated, whether it is closed, and — unless the
//! SDK's receipt store keeps them across restarts — its items as the pane
//! showed them (the last [`ITEMS_KEPT`]).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use durable_types::{Id, Item};
use serde::{Deserialize, Serialize};

use crate::Error;

/// Items kept per conversation, at most (the newest).
pub const ITEMS_KEPT: usize = 2000;

/// One conversation's record.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Record {
    pub session_id: String,
    pub pane_id: String,
    pub title: String,
    /// The phone named it: the agent's titles no longer change it.
    #[serde(default)]
    pub renamed: bool,
    /// Milliseconds since the Unix epoch.
    pub started_at: u64,
    pub updated_at: u64,
    #[serde(default)]
    pub closed: bool,
    /// Items dropped from the front (past [`ITEMS_KEPT`]).
    #[serde(default)]
    pub dropped: bool,
    #[serde(default)]
    pub items: Vec<Item>,
}

/// The records' folder.
#[derive(Debug, Clone)]
pub(crate) struct Store {
    dir: PathBuf,
    /// One write at a time (shared by clones): two saves of one record at once (a close while
    /// a turn ends) would share the temporary file, and the later snapshot
    /// could be overwritten by the earlier.
    writing: std::sync::Arc<std::sync::Mutex<()>>,
}

impl Store {
    /// The folder `conversations` in `data_dir`, made (0700) when missing.
    pub(crate) fn open(data_dir: &Path) -> Result<Store, Error> {
        let dir = data_dir.join("conversations");
        private_folder(&dir)?;
        Ok(Store { dir, writing: std::sync::Arc::new(std::sync::Mutex::new(())) })
    }

    fn path(&self, pane_id: &str) -> PathBuf {
        // A pane id follows the ID rule: no `/`, no `..` alone.
        self.dir.join(format!("{pane_id}.json"))
    }

    /// Every readable record; a file that does not read is skipped with a warn event.
    pub(crate) fn all(&self) -> Vec<Record> {
        let Ok(dir) = std::fs::read_dir(&self.dir) else { return Vec::new() };
        let mut out = Vec::new();
        for entry in dir.flatten() {
            let path = entry.path();
            if path.extension().and_then(|e| e.to_str()) != Some("json") {
                continue;
            }
            match std::fs::read(&path).map(|b| serde_json::from_slice::<Record>(&b)) {
                Ok(Ok(record)) => out.push(record),
                _ => {
                    tracing::warn!(path = %path.display(), "acp: a conversation record does not read; skipped")
                }
            }
        }
        out
    }

    /// The record of `pane_id`, if there is one that reads.
    pub(crate) fn get(&self, pane_id: &str) -> Option<Record> {
        Id::new(pane_id).ok()?;
        let bytes = std::fs::read(self.path(pane_id)).ok()?;
        serde_json::from_slice(&bytes).ok()
    }

    /// Writes the record `snapshot` takes, whole, taken and written while no
    /// other write runs: the last snapshot taken is the one on disk.
    pub(crate) fn put_with(&self, snapshot: impl FnOnce() -> Record) -> Result<(), Error> {
        let _one = self.writing.lock().unwrap_or_else(|e| e.into_inner());
        self.write(&snapshot())
    }

    /// Writes a record whole.
    pub(crate) fn put(&self, record: &Record) -> Result<(), Error> {
        let _one = self.writing.lock().unwrap_or_else(|e| e.into_inner());
        self.write(record)
    }

    /// Writes the record of `pane_id` again without its items (the SDK's
    /// store has them), as it stands on disk: a record written meanwhile
    /// keeps all else it says.
    pub(crate) fn drop_items(&self, pane_id: &str) -> Result<(), Error> {
        let _one = self.writing.lock().unwrap_or_else(|e| e.into_inner());
        let Some(mut record) = self.get(pane_id) else { return Ok(()) };
        if record.items.is_empty() {
            return Ok(());
        }
        record.items.clear();
        self.write(&record)
    }

    fn write(&self, record: &Record) -> Result<(), Error> {
        let path = self.path(&record.pane_id);
        let tmp = self.dir.join(format!(".{}.tmp", record.pane_id));
        let bytes =
            serde_json::to_vec(record).map_err(|e| Error::Io { path: path.clone(), source: e.into() })?;
        std::fs::write(&tmp, bytes).map_err(|source| Error::Io { path: tmp.clone(), source })?;
        std::fs::rename(&tmp, &path).map_err(|source| Error::Io { path, source })
    }
}

/// The items a pane showed, in order, each id once (a rewrite replaces it in place).
#[derive(Debug, Default)]
pub(crate) struct ItemLog {
    items: Vec<Item>,
    at: HashMap<Id, usize>,
    pub dropped: bool,
}

impl ItemLog {
    pub(crate) fn from_items(items: Vec<Item>, dropped: bool) -> ItemLog {
        let mut log = ItemLog { items: Vec::new(), at: HashMap::new(), dropped };
        for item in items {
            log.upsert(item);
        }
        log
    }

    pub(crate) fn upsert(&mut self, item: Item) {
        if let Some(&n) = self.at.get(&item.id) {
            self.items[n] = item;
            return;
        }
        self.at.insert(item.id.clone(), self.items.len());
        self.items.push(item);
        // Cut in steps of ITEMS_KEPT, not one item at a time: the index is
        // rebuilt once per ITEMS_KEPT items written, so a flood of new
        // items costs each a constant, not the whole log.
        if self.items.len() >= 2 * ITEMS_KEPT {
            let cut = self.items.len() - ITEMS_KEPT;
            self.items.drain(..cut);
            self.at = self.items.iter().enumerate().map(|(n, i)| (i.id.clone(), n)).collect();
        }
        if self.items.len() > ITEMS_KEPT {
            self.dropped = true;
        }
    }

    /// The last [`ITEMS_KEPT`] items.
    pub(crate) fn items(&self) -> &[Item] {
        &self.items[self.items.len().saturating_sub(ITEMS_KEPT)..]
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
}

/// Creates a folder only its user can open (an existing one is left as it is).
pub(crate) fn private_folder(dir: &Path) -> Result<(), Error> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    builder.create(dir).map_err(|source| Error::Io { path: dir.to_owned(), source })
}

/// Milliseconds since the Unix epoch, now.
pub(crate) fn now_ms() -> u64 {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use durable_types::ItemBody;

    fn reply(id: &str, text: &str) -> Item {
        Item::new(Id::new(id).unwrap(), ItemBody::Reply { text: text.into(), partial: false })
    }

    #[test]
    fn saves_of_one_record_at_once_all_succeed_and_the_last_snapshot_stays() {
        let dir = std::env::temp_dir().join(format!("durable-acp-store-race-{}", std::process::id()));
        let store = Store::open(&dir).unwrap();
        let record = |n: u64| Record {
            session_id: "s".into(),
            pane_id: "p".into(),
            title: format!("T{n}"),
            renamed: false,
            started_at: 1,
            updated_at: n,
            closed: false,
            dropped: false,
            items: Vec::new(),
        };
        let next = std::sync::atomic::AtomicU64::new(0);
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..100 {
                        store
                            .put_with(|| record(next.fetch_add(1, std::sync::atomic::Ordering::SeqCst)))
                            .expect("a save at the same time as others");
                    }
                });
            }
        });
        // The snapshot taken last is the one kept.
        assert_eq!(store.get("p").map(|r| r.updated_at), Some(399));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_record_round_trips_and_a_rewrite_replaces_an_item_in_place() {
        let dir = std::env::temp_dir().join(format!("durable-acp-store-{}", std::process::id()));
        let store = Store::open(&dir).unwrap();
        let mut log = ItemLog::default();
        log.upsert(reply("a", "one"));
        log.upsert(reply("b", "two"));
        log.upsert(reply("a", "one, again"));
        assert_eq!(log.items().iter().map(|i| i.id.as_str()).collect::<Vec<_>>(), ["a", "b"]);
        let record = Record {
            session_id: "s/1".into(),
            pane_id: crate::pane_id_for("s/1"),
            title: "T".into(),
            renamed: true,
            started_at: 1,
            updated_at: 2,
            closed: false,
            dropped: false,
            items: log.items().to_vec(),
        };
        store.put(&record).unwrap();
        assert_eq!(store.get(&record.pane_id), Some(record.clone()));
        assert_eq!(store.all(), [record]);
        std::fs::write(dir.join("conversations/broken.json"), b"{").unwrap();
        assert_eq!(store.all().len(), 1, "a broken file is skipped");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(dir.join("conversations")).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o700);
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_log_keeps_the_newest_items_and_says_it_dropped_some() {
        let mut log = ItemLog::default();
        for n in 0..ITEMS_KEPT + 5 {
            log.upsert(reply(&format!("i{n}"), "x"));
        }
        assert_eq!(log.items().len(), ITEMS_KEPT);
        assert_eq!(log.items()[0].id.as_str(), "i5");
        assert!(log.dropped);
        log.upsert(reply("i5", "y"));
        assert_eq!(log.items().len(), ITEMS_KEPT, "a rewrite after the cut is still in place");
    }
}
