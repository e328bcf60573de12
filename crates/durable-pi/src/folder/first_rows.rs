//! The first rows of a listing, told before the listing is made, so that
//! the history's first page after a start costs the same at any number of
//! sessions: the first listing of a run reads the sessions index and looks
//! at every file (tens of milliseconds at 10,000 sessions), and a first
//! start reads every file.
//!
//! They come from what the start found ([`SessionFolder::newest`]: every
//! file's size and modification time, and the files it read), the newest
//! rows the last listing kept beside the index, and the files modified
//! since that listing, read newest modification first. Every file not
//! among them was, by what the listing or the files' times say, last
//! active at or before some time; only the rows newer than that are told,
//! each checked against its file's size and modification time now (and
//! read again when either changed), so a file Pi wrote since is never told
//! as it was.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::{Cached, Listed, SessionFolder, SessionSummary, newest_first};

/// Rows kept in the newest rows file: a page of the wire's largest limit
/// (200), the conversations open as panes and one more to say whether
/// there are more.
pub(super) const NEWEST_ROWS: usize = 256;

/// Files the first rows may read: past it (many files changed since the
/// newest rows were written), the history waits for its listing.
const READS_MAX: usize = 256;

/// A file modified this little before a listing began may have been
/// modified after the listing looked at it: a file's time comes from a
/// coarser clock than the one the listing's start was read from.
const LISTED_SLACK: Duration = Duration::from_secs(2);

/// The folder as [`SessionFolder::newest`] found it at start.
#[derive(Debug)]
pub(crate) struct StartListing {
    /// Every session file, newest modification first.
    files: Vec<Listed>,
    /// What was read of some of them (at their size and time then), and
    /// what the first rows read since.
    read: Mutex<HashMap<PathBuf, Cached>>,
}

impl StartListing {
    /// `files` sorted newest modification first.
    pub(super) fn new(files: Vec<Listed>, read: HashMap<PathBuf, Cached>) -> Self {
        StartListing { files, read: Mutex::new(read) }
    }
}

/// A file the first rows know: what it held at this size and time.
struct Known {
    len: u64,
    modified: Option<SystemTime>,
    summary: Option<SessionSummary>,
    /// Its size and time were found as they are now, by the first rows.
    checked: bool,
}

fn ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// The sessions `known` holds, newest first, one per id.
fn ranked(known: &HashMap<PathBuf, Known>) -> Vec<&SessionSummary> {
    let mut rows: Vec<&SessionSummary> = known.values().filter_map(|k| k.summary.as_ref()).collect();
    rows.sort_by(|a, b| newest_first(a, b));
    let mut seen = HashSet::new();
    rows.retain(|s| seen.insert(s.id.as_str()));
    rows
}

impl SessionFolder {
    /// The first `n` sessions of [`sessions`](Self::sessions), or all of
    /// them when there are fewer, told before the first listing of this
    /// run (see the module); `None` when they cannot be told without it.
    pub(super) fn first_rows(&self, n: usize) -> Option<Vec<SessionSummary>> {
        if n == 0 {
            return None;
        }
        let start = self.start.lock().unwrap_or_else(|e| e.into_inner()).clone()?;
        let newest = self.newest_rows_file().and_then(|file| crate::index::load_newest(&file, &self.dir));
        let files = &start.files;
        // The files the newest rows may not stand for (modified since they
        // were written, or every file when there are none) come first.
        let changed_end = match &newest {
            Some(rows) => {
                let since = rows.listed_at.checked_sub(LISTED_SLACK).unwrap_or(UNIX_EPOCH);
                let since_bound = ms(since).saturating_add(super::MODIFIED_SLACK_MS);
                files.partition_point(|f| f.activity_bound() >= since_bound)
            }
            None => files.len(),
        };
        // The files after them are in the newest rows, or sort after the
        // last of those rows (were last active before it, or at the same
        // time under a lesser id).
        let unchanged_after: Option<SessionSummary> = match &newest {
            Some(rows) if !rows.all && changed_end < files.len() => {
                Some(rows.rows.last().and_then(|(_, e)| e.summary.clone())?)
            }
            _ => None,
        };
        let mut known: HashMap<PathBuf, Known> = newest
            .into_iter()
            .flat_map(|rows| rows.rows)
            .map(|(path, e)| {
                (path, Known { len: e.len, modified: e.modified, summary: e.summary, checked: false })
            })
            .collect();
        let mut reads = 0;
        let mut next = 0;
        loop {
            // The changed files, newest modification first, until the next
            // one was modified before the n-th session known was active.
            if let Some(file) = files[..changed_end].get(next) {
                let nth = ranked(&known).get(n - 1).map(|s| s.last_activity.as_millis());
                if nth.is_none_or(|nth| file.activity_bound() >= nth) {
                    next += 1;
                    let held = start.read.lock().unwrap_or_else(|e| e.into_inner()).get(&file.path).cloned();
                    let cached = match held.filter(|c| file.matches(c)) {
                        Some(cached) => cached,
                        None => self.read_for_first_rows(&start, file, &mut reads)?,
                    };
                    let summary = cached.summary;
                    known.insert(
                        file.path.clone(),
                        Known { len: file.len, modified: file.modified, summary, checked: false },
                    );
                    continue;
                }
            }
            // The changed files not read were last active at or before this.
            let unread_up_to = files[..changed_end].get(next).map(Listed::activity_bound);
            let told = |s: &SessionSummary| {
                unread_up_to.is_none_or(|up_to| s.last_activity.as_millis() > up_to)
                    && unchanged_after.as_ref().is_none_or(|last| newest_first(s, last).is_lt())
            };
            let rows: Vec<&SessionSummary> = ranked(&known).into_iter().filter(|s| told(s)).take(n).collect();
            if rows.len() < n && (unread_up_to.is_some() || unchanged_after.is_some()) {
                return None;
            }
            // Each row as its file is now.
            let unchecked: Vec<PathBuf> = rows
                .iter()
                .filter(|s| known.get(&s.path).is_some_and(|k| !k.checked))
                .map(|s| s.path.clone())
                .collect();
            if unchecked.is_empty() {
                return Some(rows.into_iter().cloned().collect());
            }
            for path in unchecked {
                let now = std::fs::metadata(&path).ok().filter(|m| m.is_file());
                let Some(meta) = now else {
                    known.remove(&path);
                    continue;
                };
                let file = Listed { path, len: meta.len(), modified: meta.modified().ok() };
                let Some(entry) = known.get_mut(&file.path) else { continue };
                if entry.len == file.len && entry.modified == file.modified {
                    entry.checked = true;
                    continue;
                }
                let cached = self.read_for_first_rows(&start, &file, &mut reads)?;
                let summary = cached.summary;
                known.insert(
                    file.path.clone(),
                    Known { len: file.len, modified: file.modified, summary, checked: true },
                );
            }
        }
    }

    /// Reads `file` for the first rows, at most [`READS_MAX`] times in all
    /// (`None` past it), keeping what it read for the next first rows.
    fn read_for_first_rows(&self, start: &StartListing, file: &Listed, reads: &mut usize) -> Option<Cached> {
        *reads += 1;
        if *reads > READS_MAX {
            return None;
        }
        let cached = self.read_file(file);
        start.read.lock().unwrap_or_else(|e| e.into_inner()).insert(file.path.clone(), cached.clone());
        Some(cached)
    }
}

#[cfg(test)]
mod tests {
    use crate::folder::tests::garble_keeping_size_and_time;
    use std::path::Path;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Condvar};

    use durable_runtime::RowsPage;

    use super::*;
    use crate::history::PiHistory;
    use crate::store::{Conversation, ConversationInfo, ConversationStore};

    const DAY: u64 = 86_400_000;
    /// 2026-11-01T00:00:00Z: the sessions below are active a day apart before it.
    const BASE: u64 = 1_793_491_200_000;

    fn temp(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("durable-pi-first-rows-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("sessions")).unwrap();
        dir
    }

    fn file(sessions: &Path, k: u64) -> PathBuf {
        sessions.join(format!("2026-01-01T00-00-00-000Z_s{k}.jsonl"))
    }

    /// Sets a file's modification time, as Pi's last write left it.
    fn touch(path: &Path, ms: u64) {
        let at = UNIX_EPOCH + Duration::from_millis(ms);
        std::fs::File::options().write(true).open(path).unwrap().set_modified(at).unwrap();
    }

    /// Session `s{k}`, asking "question {k}" at `at`, the file written a
    /// second later.
    fn session(sessions: &Path, k: u64, at: u64) {
        let path = file(sessions, k);
        std::fs::write(
            &path,
            format!(
                "{{\"type\":\"session\",\"version\":3,\"id\":\"s{k}\",\"timestamp\":\"2026-01-01T00:00:00.000Z\"}}\n\
                 {{\"type\":\"message\",\"id\":\"m\",\"parentId\":null,\"message\":{{\"role\":\"user\",\"content\":\"question {k}\",\"timestamp\":{at}}}}}\n"
            ),
        )
        .unwrap();
        touch(&path, at + 1_000);
    }

    /// Appends a line to a session's file.
    fn append(path: &Path, line: &str) {
        use std::io::Write;
        let mut f = std::fs::File::options().append(true).open(path).unwrap();
        writeln!(f, "{line}").unwrap();
    }

    /// `count` sessions a day apart (s0 the oldest), listed once with an
    /// index, which writes the newest rows.
    fn listed_once(dir: &Path, count: u64) -> (PathBuf, PathBuf) {
        let (sessions, index) = (dir.join("sessions"), dir.join("sessions-index.json"));
        for k in 0..count {
            session(&sessions, k, BASE - (count - 1 - k) * DAY);
        }
        assert_eq!(SessionFolder::with_index(&sessions, &index).sessions().unwrap().len(), count as usize);
        assert!(index.with_extension("newest.json").exists(), "the newest rows are written with the index");
        (sessions, index)
    }

    /// A folder whose listings of every session wait until the test lets
    /// them go (or 10 s pass), counting those done.
    struct HeldListing {
        folder: SessionFolder,
        go: Arc<(Mutex<bool>, Condvar)>,
        listed: AtomicUsize,
    }

    impl HeldListing {
        fn new(folder: SessionFolder) -> Self {
            HeldListing { folder, go: Arc::default(), listed: AtomicUsize::new(0) }
        }
        fn let_go(&self) {
            *self.go.0.lock().unwrap() = true;
            self.go.1.notify_all();
        }
    }

    impl ConversationStore for HeldListing {
        fn conversations(&self) -> Result<Vec<ConversationInfo>, crate::Error> {
            let go = self.go.0.lock().unwrap();
            drop(self.go.1.wait_timeout_while(go, Duration::from_secs(10), |go| !*go).unwrap());
            let all = self.folder.conversations();
            self.listed.fetch_add(1, Ordering::SeqCst);
            all
        }
        fn conversation(&self, id: &str) -> Result<Option<Conversation>, crate::Error> {
            self.folder.conversation(id)
        }
        fn info(&self, id: &str) -> Result<Option<ConversationInfo>, crate::Error> {
            self.folder.info(id)
        }
        fn newest_conversations(&self, n: usize) -> Result<Option<Vec<ConversationInfo>>, crate::Error> {
            self.folder.newest_conversations(n)
        }
    }

    fn ids(page: &RowsPage) -> Vec<&str> {
        page.rows.iter().map(|r| r.id.as_str()).collect()
    }

    fn titles(page: &RowsPage) -> Vec<&str> {
        page.rows.iter().map(|r| r.title.as_str()).collect()
    }

    /// A start as the Pi example makes it: the newest sessions read, the
    /// history's listing begun.
    fn start(sessions: &Path, index: &Path, open: usize) -> PiHistory<HeldListing> {
        let folder = SessionFolder::with_index(sessions, index);
        let opened = folder.newest(open, |_| true).unwrap();
        let history = PiHistory::new(HeldListing::new(folder));
        for s in opened {
            history.set_open(&s.id, true);
        }
        history.warm();
        history
    }

    #[test]
    fn the_first_page_after_a_start_is_told_from_the_newest_rows_without_the_listing_or_the_files() {
        let dir = temp("told");
        let (sessions, index) = listed_once(&dir, 40);
        // Sessions 4th to 12th newest: a reading of them would find garbage,
        // and no row.
        for k in 28..=36 {
            garble_keeping_size_and_time(&file(&sessions, k));
        }
        let history = start(&sessions, &index, 2);
        let first = history.rows_page(None, 10).unwrap();
        assert_eq!(history.store().listed.load(Ordering::SeqCst), 0, "told while the listing waits");
        let want: Vec<String> = (30..40).rev().map(|k| format!("s{k}")).collect();
        assert_eq!(ids(&first), want);
        assert_eq!(titles(&first)[3..], (30..=36).rev().map(|k| format!("question {k}")).collect::<Vec<_>>());
        assert!(history.store().folder.index_read.get().is_none(), "the sessions index not read");
        let start = history.store().folder.start.lock().unwrap().clone().unwrap();
        assert_eq!(start.read.lock().unwrap().len(), 2, "no file read but the start's two");
        assert_eq!(first.rows[0].state, durable_types::ConversationState::Open, "open ones as they are");

        // The next page comes from the listing, after the first page's last row.
        history.store().let_go();
        let second = history.rows_page(first.next.as_ref(), 10).unwrap();
        assert_eq!(ids(&second), (20..30).rev().map(|k| format!("s{k}")).collect::<Vec<_>>());
        assert_eq!(history.store().listed.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn a_file_changed_since_the_newest_rows_were_written_is_told_as_it_is_now() {
        let dir = temp("changed");
        let (sessions, index) = listed_once(&dir, 40);
        let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as u64;
        // Pi answered in s20 since (its file written now): it leads.
        append(
            &file(&sessions, 20),
            &format!(
                "{{\"type\":\"message\",\"id\":\"a\",\"parentId\":\"m\",\"message\":{{\"role\":\"assistant\",\"content\":\"yes\",\"timestamp\":{now}}}}}"
            ),
        );
        // s35 was renamed, its time then set back as it was: only its size says so.
        let s35 = file(&sessions, 35);
        let was = std::fs::metadata(&s35).unwrap().modified().unwrap();
        append(&s35, "{\"type\":\"session_info\",\"id\":\"i\",\"parentId\":\"m\",\"name\":\"renamed\"}");
        std::fs::File::options().write(true).open(&s35).unwrap().set_modified(was).unwrap();
        // s33 is gone; s40 was written since, last active between s39 and s38.
        std::fs::remove_file(file(&sessions, 33)).unwrap();
        session(&sessions, 40, BASE - DAY / 2);
        touch(&file(&sessions, 40), now);

        let history = start(&sessions, &index, 1);
        let first = history.rows_page(None, 10).unwrap();
        assert_eq!(history.store().listed.load(Ordering::SeqCst), 0, "told while the listing waits");
        history.store().let_go();
        let listed = PiHistory::new(SessionFolder::new(&sessions));
        listed.set_open("s20", true);
        let want = listed.rows_page(None, 10).unwrap();
        assert_eq!(ids(&want), ["s20", "s39", "s40", "s38", "s37", "s36", "s35", "s34", "s32", "s31"]);
        assert_eq!(want.rows[0].items, 2);
        assert_eq!(want.rows[6].title, "renamed");
        assert_eq!(first, want, "the rows and cursor a listing of every file gives");
        let second = history.rows_page(first.next.as_ref(), 10).unwrap();
        assert_eq!(second, listed.rows_page(want.next.as_ref(), 10).unwrap());
    }

    #[test]
    fn what_the_newest_rows_cannot_tell_waits_for_the_listing() {
        let dir = temp("past");
        let (sessions, index) = listed_once(&dir, NEWEST_ROWS as u64 + 20);
        let folder = SessionFolder::with_index(&sessions, &index);
        assert!(folder.first_rows(5).is_none(), "nothing before the start's newest");
        folder.newest(1, |_| true).unwrap();
        let ids = |rows: Vec<SessionSummary>| rows.into_iter().map(|s| s.id).collect::<Vec<_>>();
        let top: Vec<String> = (0..NEWEST_ROWS as u64 + 20).rev().map(|k| format!("s{k}")).collect();
        assert_eq!(ids(folder.first_rows(5).unwrap()), top[..5]);
        assert_eq!(ids(folder.first_rows(NEWEST_ROWS - 1).unwrap()), top[..NEWEST_ROWS - 1]);
        assert!(folder.first_rows(NEWEST_ROWS).is_none(), "the last kept row may tie with the ones after it");
        assert!(folder.first_rows(NEWEST_ROWS + 20).is_none());
        folder.sessions().unwrap();
        assert!(folder.first_rows(5).is_none(), "listed: the history has its listing");

        // Fewer sessions than asked: every one.
        let few = temp("few");
        let (sessions, index) = listed_once(&few, 3);
        let folder = SessionFolder::with_index(&sessions, &index);
        folder.newest(1, |_| true).unwrap();
        assert_eq!(ids(folder.first_rows(10).unwrap()), ["s2", "s1", "s0"]);
        let history = PiHistory::new(folder);
        let page = history.rows_page(None, 10).unwrap();
        assert_eq!((page.rows.len(), page.next), (3, None));
    }

    #[test]
    fn without_newest_rows_or_with_damaged_ones_the_files_are_read_newest_first() {
        let dir = temp("damaged");
        let (sessions, index) = listed_once(&dir, 30);
        let rows_file = index.with_extension("newest.json");
        let want: Vec<String> = (22..30).rev().map(|k| format!("s{k}")).collect();
        let bytes = std::fs::read(&rows_file).unwrap();
        let other = dir.join("other");
        std::fs::create_dir_all(&other).unwrap();
        let text = String::from_utf8(bytes.clone()).unwrap();
        let renamed =
            text.replace("\"name\":\"2026-01-01T00-00-00-000Z_s29.jsonl\"", "\"name\":\"../x.jsonl\"");
        assert_ne!(renamed, text);
        let damaged: [Vec<u8>; 5] = [
            bytes[..bytes.len() / 2].to_vec(),
            b"\xff\xfe not json".to_vec(),
            b"{\"version\":1,\"dir\":\"/\",\"listed_at_ns\":1,\"all\":true,\"rows\":[]}".to_vec(),
            text.replace(&format!("{}", sessions.display()), &format!("{}", other.display())).into_bytes(),
            renamed.into_bytes(),
        ];
        for (n, bad) in damaged.iter().enumerate() {
            std::fs::write(&rows_file, bad).unwrap();
            let folder = SessionFolder::with_index(&sessions, &index);
            folder.newest(2, |_| true).unwrap();
            let told: Vec<String> = folder.first_rows(8).unwrap().into_iter().map(|s| s.id).collect();
            assert_eq!(told, want, "damage {n}");
        }
        std::fs::remove_file(&rows_file).unwrap();
        let folder = SessionFolder::with_index(&sessions, &index);
        folder.newest(2, |_| true).unwrap();
        let told: Vec<String> = folder.first_rows(8).unwrap().into_iter().map(|s| s.id).collect();
        assert_eq!(told, want, "no rows file");
        let start = folder.start.lock().unwrap().clone().unwrap();
        assert!(start.read.lock().unwrap().len() < 12, "the newest files read, not the folder's thirty");
    }
}
