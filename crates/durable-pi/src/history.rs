//! Store → history: [`PiHistory`], the history provider Collie's history
//! routes read, over any [`ConversationStore`] (a Pi sessions folder by
//! default).
//!
//! - A row per conversation, newest first: the title is the session's name,
//!   else its first user text; `startedAt` and `endedAt` come from the
//!   entries (the session's start and its latest user or assistant message);
//!   `items` counts the items its pane shows.
//! - A row is `closed` (with `endedAt`) unless the agent said the session
//!   is live ([`PiHistory::set_open`]): Pi's files do not say whether a Pi
//!   process still writes them.
//! - Row cursors name the last row given (its latest activity and id), so a
//!   session that starts while the phone pages does not shift the pages.
//!   Item cursors are positions in the conversation (the branch shown).
//! - Rows whose id breaks the ID rule are left out.
//! - Pages come from one listing of the store, made again in the background
//!   once older than [`PiHistory::relist_after`] (2 s by default), with the
//!   conversations open as panes ([`PiHistory::set_open`]) looked up as
//!   they are now ([`ConversationStore::info`]) and put in their place: a
//!   page costs a lookup at any number of conversations, and shows the
//!   conversation just had. The first listing is begun at start
//!   ([`PiHistory::warm`]); a page asked before it is done is served from
//!   the conversations the store tells newest at once
//!   ([`ConversationStore::newest_conversations`]: a Pi sessions folder
//!   tells them from the rows its last listing found newest), and waits
//!   for the listing only when it goes past them.
//!
//! The provider is thin: [`PiHistory::rows_page`] and
//! [`PiHistory::items_page`] do the work, synchronously (they read files).

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use durable_runtime::{HistoryError, HistoryProvider, ItemsPage, RowsPage};
use durable_types::{ConversationState, Cursor, HistoryRow, check_id};

use crate::Error;
use crate::folder::SessionFolder;
use crate::store::{ConversationInfo, ConversationStore};

/// The history of a conversation store.
///
/// ```
/// use durable_sdk::pi::{PiHistory, SessionFolder};
///
/// let dir = std::env::temp_dir().join(format!("durable-pi-doc-history-{}", std::process::id()));
/// std::fs::create_dir_all(&dir)?;
/// for n in 1..=3 {
///     std::fs::write(dir.join(format!("{n}.jsonl")), format!(
///         "{{\"type\":\"session\",\"version\":3,\"id\":\"s{n}\",\"timestamp\":\"2026-12-01T05:0{n}:00.000Z\"}}\n\
///          {{\"type\":\"message\",\"id\":\"m\",\"parentId\":null,\"message\":{{\"role\":\"user\",\"content\":\"question {n}\"}}}}\n"))?;
/// }
/// let history = PiHistory::new(SessionFolder::new(&dir));
/// let page = history.rows_page(None, 2)?;
/// let titles: Vec<&str> = page.rows.iter().map(|r| r.title.as_str()).collect();
/// assert_eq!(titles, ["question 3", "question 2"]);
/// let rest = history.rows_page(page.next.as_ref(), 2)?;
/// assert_eq!(rest.rows[0].id, "s1");
/// assert!(rest.next.is_none());
/// let items = history.items_page("s1", None, 50)?.unwrap();
/// assert_eq!(items.items[0].id.as_str(), "pi-m-0");
/// # std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct PiHistory<S = SessionFolder> {
    store: Arc<S>,
    open: Arc<Mutex<HashSet<String>>>,
    /// The rows of the last listing, sorted, and when it was made.
    listing: Arc<Mutex<Option<Listing>>>,
    /// A listing is being made in the background (set false, and
    /// `listed_now` notified, under the `listing` lock).
    relisting: Arc<AtomicBool>,
    listed_now: Arc<Condvar>,
    relist_after: Duration,
}

/// A listing: when it was made, and its rows, newest first.
type Listing = (Instant, Arc<Vec<ConversationInfo>>);

/// How long a listing serves pages before the store is listed again.
pub const RELIST_AFTER: Duration = Duration::from_secs(2);

impl<S: ConversationStore> PiHistory<S> {
    /// The history of `store`; every row closed until [`PiHistory::set_open`].
    pub fn new(store: S) -> Self {
        PiHistory {
            store: Arc::new(store),
            open: Arc::default(),
            listing: Arc::default(),
            relisting: Arc::default(),
            listed_now: Arc::default(),
            relist_after: RELIST_AFTER,
        }
    }

    /// Pages are served from one listing of the store, sorted; once it is
    /// older than `after` (default [`RELIST_AFTER`], 2 s) the next page is
    /// still served from it while the store is listed again on a thread of
    /// its own. So a page costs a lookup in the listing at any number of
    /// conversations (only a page asked before the first listing is done
    /// may wait for it: see [`warm`](Self::warm)). The conversations open as panes are looked up
    /// at each page as they are now; one not open that changed meanwhile
    /// shows from the page after that listing. `Duration::ZERO` lists the
    /// store at every page, before answering.
    pub fn relist_after(mut self, after: Duration) -> Self {
        self.relist_after = after;
        self
    }

    /// The same history, sharing everything (for a page served on a
    /// blocking thread).
    fn share(&self) -> Self {
        PiHistory {
            store: Arc::clone(&self.store),
            open: Arc::clone(&self.open),
            listing: Arc::clone(&self.listing),
            relisting: Arc::clone(&self.relisting),
            listed_now: Arc::clone(&self.listed_now),
            relist_after: self.relist_after,
        }
    }

    /// Lists the store on a thread of its own now, so that the first page
    /// asked finds a listing (an agent calls it at start). A page asked
    /// before it is done is served from the conversations the store tells
    /// newest at once ([`ConversationStore::newest_conversations`]) when
    /// it lies within them, else waits for that listing rather than
    /// listing the store again.
    pub fn warm(&self) {
        self.relist_in_background();
    }

    /// Makes a listing on a thread of its own, unless one is being made.
    fn relist_in_background(&self) {
        if self.relisting.swap(true, Ordering::SeqCst) {
            return;
        }
        let done = ListingDone {
            listing: Arc::clone(&self.listing),
            relisting: Arc::clone(&self.relisting),
            listed_now: Arc::clone(&self.listed_now),
        };
        let store = Arc::clone(&self.store);
        let spawned = std::thread::Builder::new().name("durable-pi-history".into()).spawn(move || {
            let started = Instant::now();
            let rows = list(&*store).ok();
            done.finish(started, rows);
        });
        if let Err(e) = spawned {
            tracing::warn!(error = %e, "pi: the history could not list on a thread of its own");
            // The closure (and its `ListingDone`) was dropped: that cleared `relisting`.
        }
    }

    /// The sorted rows: the last listing (a stale one starts a new listing
    /// in the background), else the one under way (waited for, not made
    /// twice), else one made now.
    fn listed(&self) -> Result<Arc<Vec<ConversationInfo>>, Error> {
        if !self.relist_after.is_zero() {
            let mut last = self.listing.lock().unwrap_or_else(|e| e.into_inner());
            while last.is_none() && self.relisting.load(Ordering::SeqCst) {
                last = self.listed_now.wait(last).unwrap_or_else(|e| e.into_inner());
            }
            if let Some((at, rows)) = last.clone() {
                drop(last);
                if at.elapsed() >= self.relist_after {
                    self.relist_in_background();
                }
                return Ok(rows);
            }
        }
        let started = Instant::now();
        let rows = list(&*self.store)?;
        *self.listing.lock().unwrap_or_else(|e| e.into_inner()) = Some((started, Arc::clone(&rows)));
        Ok(rows)
    }

    /// The store.
    pub fn store(&self) -> &S {
        &self.store
    }

    /// Says whether a session is live (its row `open`, without `endedAt`).
    pub fn set_open(&self, id: &str, open: bool) {
        let mut set = self.open.lock().unwrap_or_else(|e| e.into_inner());
        if open {
            set.insert(id.to_owned());
        } else {
            set.remove(id);
        }
    }

    fn row(&self, info: &ConversationInfo) -> HistoryRow {
        let open = self.open.lock().unwrap_or_else(|e| e.into_inner()).contains(&info.id);
        HistoryRow {
            id: info.id.clone(),
            title: info.title(),
            subtitle: None,
            workspace_id: None,
            tab_id: None,
            started_at: info.started_at,
            ended_at: (!open).then_some(info.last_activity),
            state: if open { ConversationState::Open } else { ConversationState::Closed },
            items: info.items,
        }
    }

    /// The conversations open as panes, as the store has them now, newest
    /// first.
    fn open_now(&self) -> Result<Vec<ConversationInfo>, Error> {
        let ids: Vec<String> = self.open.lock().unwrap_or_else(|e| e.into_inner()).iter().cloned().collect();
        let mut open = Vec::with_capacity(ids.len());
        for id in ids {
            open.extend(self.store.info(&id)?.filter(|c| c.id == id && check_id(&c.id).is_ok()));
        }
        open.sort_by(|a, b| sort_key(b).cmp(&sort_key(a)));
        Ok(open)
    }

    /// Rows after `after` (from the newest when `None`), at most `limit`:
    /// the listing's, with the conversations open as panes as they are now
    /// in their place. Before the first listing is done, a page within the
    /// conversations the store tells newest at once
    /// ([`ConversationStore::newest_conversations`]) is served from them
    /// (the same rows and cursors the listing gives); another waits for it.
    pub fn rows_page(&self, after: Option<&Cursor>, limit: usize) -> Result<RowsPage, Error> {
        let after = after.map(parse_row_cursor).transpose()?;
        let open = self.open_now()?;
        let want = limit.max(1);
        // Enough to fill the page past the open ones, and one more to say
        // whether there are more.
        if let Some((first, every)) = self.newest_before_listing(want + open.len() + 1) {
            if let Some(page) = self.page_of(&first, every, &open, after.as_ref(), want) {
                return Ok(page);
            }
        }
        let all = self.listed()?;
        // A whole listing answers every page.
        Ok(self
            .page_of(&all, true, &open, after.as_ref(), want)
            .unwrap_or(RowsPage { rows: Vec::new(), next: None }))
    }

    /// Before the first listing is done, the first `n` rows the store tells
    /// at once (the listing begun, if it is not under way), sorted as a
    /// listing's, and whether they are every row.
    fn newest_before_listing(&self, n: usize) -> Option<(Vec<ConversationInfo>, bool)> {
        if self.relist_after.is_zero() || self.listing.lock().unwrap_or_else(|e| e.into_inner()).is_some() {
            return None;
        }
        let first = match self.store.newest_conversations(n) {
            Ok(first) => first?,
            Err(e) => {
                // The listing will say it if it is lasting.
                tracing::debug!(error = %e, "pi: the newest conversations could not be told; the page waits for the listing");
                return None;
            }
        };
        // The pages after this one are served from the listing.
        self.relist_in_background();
        let every = first.len() < n;
        let mut first: Vec<ConversationInfo> =
            first.into_iter().filter(|c| check_id(&c.id).is_ok()).collect();
        first.sort_by(|a, b| sort_key(b).cmp(&sort_key(a)));
        Some((first, every))
    }

    /// The page after `after` of the rows `all` (sorted; the first of the
    /// listing's, or `every` one of them) and `open` (sorted, as they are
    /// now): `None` when it goes past the end of `all` and that is not
    /// every row.
    fn page_of(
        &self,
        all: &[ConversationInfo],
        every: bool,
        open: &[ConversationInfo],
        after: Option<&(u64, String)>,
        want: usize,
    ) -> Option<RowsPage> {
        let open_ids: HashSet<&str> = open.iter().map(|c| c.id.as_str()).collect();
        let (mut i, mut j) = match after {
            None => (0, 0),
            Some((ms, id)) => {
                // The first row that sorts after the cursor's (both are sorted).
                let after = |c: &ConversationInfo| sort_key(c) >= (*ms, id.as_str());
                (all.partition_point(after), open.partition_point(after))
            }
        };
        let mut page: Vec<&ConversationInfo> = Vec::with_capacity(want.min(all.len() + open.len()));
        let mut more = false;
        loop {
            while all.get(i).is_some_and(|c| open_ids.contains(c.id.as_str())) {
                i += 1; // shown as it is now, from `open`
            }
            if i == all.len() && !every {
                return None; // the next row may be one of the listing's not told
            }
            let next = match (all.get(i), open.get(j)) {
                (None, None) => break,
                (Some(listed), Some(now)) if sort_key(listed) > sort_key(now) => {
                    i += 1;
                    listed
                }
                (_, Some(now)) => {
                    j += 1;
                    now
                }
                (Some(listed), None) => {
                    i += 1;
                    listed
                }
            };
            if page.len() == want {
                more = true;
                break;
            }
            page.push(next);
        }
        let next = if more { page.last().map(|last| row_cursor(last)) } else { None };
        Some(RowsPage { rows: page.iter().map(|c| self.row(c)).collect(), next })
    }

    /// One conversation's items after `after`, at most `limit`; `None` for
    /// an unknown id.
    pub fn items_page(
        &self,
        id: &str,
        after: Option<&Cursor>,
        limit: usize,
    ) -> Result<Option<ItemsPage>, Error> {
        let start = match after {
            None => 0,
            Some(cursor) => parse_items_cursor(cursor)?,
        };
        let range = start..start.saturating_add(limit.max(1));
        let Some(page) = self.store.conversation_page(id, range)? else { return Ok(None) };
        let total = usize::try_from(page.info.items).unwrap_or(usize::MAX);
        let end = start.min(total) + page.items.len();
        let next = (end < total).then(|| items_cursor(end));
        let row = self.row(&page.info);
        Ok(Some(ItemsPage { row, items: page.items, next, dropped: false }))
    }
}

/// Pages read files and may wait for a listing under way: on tokio's
/// blocking threads when a runtime runs the request, so a page never holds
/// up the runtime's workers (inline otherwise).
impl<S: ConversationStore> HistoryProvider for PiHistory<S> {
    async fn rows(&self, after: Option<Cursor>, limit: usize) -> Result<RowsPage, HistoryError> {
        let history = self.share();
        off_the_runtime(move || history.rows_page(after.as_ref(), limit))
            .await
            .map_err(|e| HistoryError::new(e.public_message()))
    }

    async fn items(
        &self,
        session_id: &str,
        after: Option<Cursor>,
        limit: usize,
    ) -> Result<Option<ItemsPage>, HistoryError> {
        let (history, id) = (self.share(), session_id.to_owned());
        off_the_runtime(move || history.items_page(&id, after.as_ref(), limit))
            .await
            .map_err(|e| HistoryError::new(e.public_message()))
    }
}

/// Runs `work` on tokio's blocking threads when called on a runtime, else
/// here.
async fn off_the_runtime<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, Error> + Send + 'static,
) -> Result<T, Error> {
    match tokio::runtime::Handle::try_current() {
        Ok(runtime) => match runtime.spawn_blocking(work).await {
            Ok(result) => result,
            Err(e) => Err(Error::Pi { why: format!("the history page failed: {e}") }),
        },
        Err(_) => work(),
    }
}

/// Ends a background listing, also when it panics or never starts: its rows
/// kept, `relisting` cleared and the pages waiting for it woken, under the
/// listing's lock (so a page that looked at `relisting` cannot miss it).
struct ListingDone {
    listing: Arc<Mutex<Option<Listing>>>,
    relisting: Arc<AtomicBool>,
    listed_now: Arc<Condvar>,
}

impl ListingDone {
    fn finish(self, started: Instant, rows: Option<Arc<Vec<ConversationInfo>>>) {
        if let Some(rows) = rows {
            *self.listing.lock().unwrap_or_else(|e| e.into_inner()) = Some((started, rows));
        }
        // Drop clears the flag.
    }
}

impl Drop for ListingDone {
    fn drop(&mut self) {
        let guard = self.listing.lock().unwrap_or_else(|e| e.into_inner());
        self.relisting.store(false, Ordering::SeqCst);
        drop(guard);
        self.listed_now.notify_all();
    }
}

/// The store's conversations whose id follows the ID rule, newest first.
fn list<S: ConversationStore>(store: &S) -> Result<Arc<Vec<ConversationInfo>>, Error> {
    let mut all: Vec<ConversationInfo> =
        store.conversations()?.into_iter().filter(|c| check_id(&c.id).is_ok()).collect();
    all.sort_by(|a, b| (b.last_activity.as_millis(), &b.id).cmp(&(a.last_activity.as_millis(), &a.id)));
    Ok(Arc::new(all))
}

/// The order of rows, newest first when compared in reverse.
fn sort_key(c: &ConversationInfo) -> (u64, &str) {
    (c.last_activity.as_millis(), c.id.as_str())
}

/// `r<latest activity ms>.<id in hex>`: printable ASCII whatever the id.
fn row_cursor(info: &ConversationInfo) -> Cursor {
    let hex: String = info.id.bytes().map(|b| format!("{b:02x}")).collect();
    Cursor::new(format!("r{}.{hex}", info.last_activity.as_millis()))
        .expect("digits and hex follow the cursor rule")
}

fn parse_row_cursor(cursor: &Cursor) -> Result<(u64, String), Error> {
    let bad = || Error::BadCursor { cursor: cursor.as_str().to_owned() };
    let (ms, hex) = cursor.as_str().strip_prefix('r').and_then(|c| c.split_once('.')).ok_or_else(bad)?;
    let ms = ms.parse().map_err(|_| bad())?;
    if hex.len() % 2 != 0 || !hex.is_ascii() {
        return Err(bad());
    }
    let bytes = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16))
        .collect::<Result<Vec<u8>, _>>()
        .map_err(|_| bad())?;
    Ok((ms, String::from_utf8(bytes).map_err(|_| bad())?))
}

/// `i<position>`.
fn items_cursor(position: usize) -> Cursor {
    Cursor::new(format!("i{position}")).expect("digits follow the cursor rule")
}

fn parse_items_cursor(cursor: &Cursor) -> Result<usize, Error> {
    cursor
        .as_str()
        .strip_prefix('i')
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| Error::BadCursor { cursor: cursor.as_str().to_owned() })
}

#[cfg(test)]
mod tests {
    use durable_types::{Item, Timestamp};

    use super::*;
    use crate::store::Conversation;

    /// Conversations held in memory.
    struct Memory(Vec<Conversation>);

    impl ConversationStore for Memory {
        fn conversations(&self) -> Result<Vec<ConversationInfo>, Error> {
            Ok(self.0.iter().map(|c| c.info.clone()).collect())
        }
        fn conversation(&self, id: &str) -> Result<Option<Conversation>, Error> {
            Ok(self.0.iter().find(|c| c.info.id == id).cloned())
        }
    }

    fn conv(id: &str, at: u64, items: usize) -> Conversation {
        let items: Vec<Item> =
            (0..items).map(|n| Item::reply(&format!("{id}-{n}"), format!("reply {n}")).unwrap()).collect();
        let info = ConversationInfo::new(id, Timestamp::from_millis(at))
            .with_last_activity(Timestamp::from_millis(at))
            .with_items(items.len() as u64);
        Conversation::new(info, items)
    }

    fn ids(page: &RowsPage) -> Vec<&str> {
        page.rows.iter().map(|r| r.id.as_str()).collect()
    }

    #[test]
    fn row_pages_hold_their_place_when_a_newer_session_appears() {
        let mut store = Memory(vec![conv("a", 1, 0), conv("b", 2, 0), conv("c", 3, 0), conv("d", 3, 0)]);
        let history = PiHistory::new(Memory(store.0.clone()));
        let first = history.rows_page(None, 2).unwrap();
        assert_eq!(ids(&first), ["d", "c"]);
        store.0.push(conv("e", 9, 0));
        let history = PiHistory::new(store);
        let second = history.rows_page(first.next.as_ref(), 2).unwrap();
        assert_eq!(ids(&second), ["b", "a"]);
        assert!(second.next.is_none());
    }

    #[test]
    fn rows_whose_id_breaks_the_id_rule_are_left_out_and_cursors_take_any_id() {
        let history = PiHistory::new(Memory(vec![conv("bad id", 5, 0), conv("é", 4, 0), conv("z", 3, 0)]));
        let first = history.rows_page(None, 1).unwrap();
        assert_eq!(ids(&first), ["é"]);
        let next = first.next.unwrap();
        assert!(durable_types::check_cursor(next.as_str()).is_ok());
        assert_eq!(ids(&history.rows_page(Some(&next), 5).unwrap()), ["z"]);
    }

    #[test]
    fn a_row_is_closed_with_an_end_unless_the_session_is_live() {
        let history = PiHistory::new(Memory(vec![conv("a", 7, 2)]));
        let row = &history.rows_page(None, 10).unwrap().rows[0];
        assert_eq!(
            (row.state, row.ended_at, row.items),
            (ConversationState::Closed, Some(Timestamp::from_millis(7)), 2)
        );
        history.set_open("a", true);
        let row = &history.rows_page(None, 10).unwrap().rows[0];
        assert_eq!((row.state, row.ended_at), (ConversationState::Open, None));
    }

    #[test]
    fn item_pages_follow_their_cursor_to_the_end() {
        let history = PiHistory::new(Memory(vec![conv("a", 1, 5)]));
        let mut after = None;
        let mut seen = Vec::new();
        loop {
            let page = history.items_page("a", after.as_ref(), 2).unwrap().unwrap();
            seen.extend(page.items.into_iter().map(|i| i.id.into_string()));
            match page.next {
                Some(next) => after = Some(next),
                None => break,
            }
        }
        assert_eq!(seen, ["a-0", "a-1", "a-2", "a-3", "a-4"]);
        assert!(history.items_page("nope", None, 2).unwrap().is_none());
    }

    #[test]
    fn a_cursor_this_history_did_not_give_is_an_error_that_names_it() {
        let history = PiHistory::new(Memory(vec![conv("a", 1, 1)]));
        for bad in ["x", "r1", "r1.zz", "rx.61", "r1.6"] {
            let err = history.rows_page(Some(&Cursor::new(bad).unwrap()), 2).unwrap_err();
            assert!(err.to_string().contains(bad), "{err}");
        }
        assert!(history.items_page("a", Some(&Cursor::new("r1.61").unwrap()), 2).is_err());
    }

    /// A store whose conversations change, counting its listings.
    #[derive(Default)]
    struct Growing(Mutex<(Vec<Conversation>, usize)>);

    impl ConversationStore for Growing {
        fn conversations(&self) -> Result<Vec<ConversationInfo>, Error> {
            let mut g = self.0.lock().unwrap();
            g.1 += 1;
            Ok(g.0.iter().map(|c| c.info.clone()).collect())
        }
        fn conversation(&self, id: &str) -> Result<Option<Conversation>, Error> {
            Ok(self.0.lock().unwrap().0.iter().find(|c| c.info.id == id).cloned())
        }
    }

    #[test]
    fn pages_come_from_one_listing_until_it_is_older_than_relist_after() {
        let store = Growing::default();
        store.0.lock().unwrap().0.extend((0..5).map(|n| conv(&format!("s{n}"), n, 0)));
        let history = PiHistory::new(store).relist_after(Duration::from_secs(600));
        let mut after = None;
        let mut seen = Vec::new();
        loop {
            let page = history.rows_page(after.as_ref(), 2).unwrap();
            seen.extend(ids(&page).into_iter().map(str::to_owned));
            match page.next {
                Some(next) => after = Some(next),
                None => break,
            }
        }
        assert_eq!(seen, ["s4", "s3", "s2", "s1", "s0"]);
        assert_eq!(history.store().0.lock().unwrap().1, 1, "three pages, one listing");
        history.store().0.lock().unwrap().0.push(conv("new", 9, 0));
        assert_eq!(ids(&history.rows_page(None, 1).unwrap()), ["s4"], "not yet listed again");

        // Older than relist_after (1 ms here): the page still comes from the
        // old listing, and a new one is made in the background.
        let store = Growing::default();
        store.0.lock().unwrap().0.extend((1..=3).map(|n| conv(&format!("s{n}"), n, 0)));
        let history = PiHistory::new(store).relist_after(Duration::from_millis(1));
        assert_eq!(ids(&history.rows_page(None, 3).unwrap()), ["s3", "s2", "s1"]);
        history.store().0.lock().unwrap().0.push(conv("new", 9, 0));
        std::thread::sleep(Duration::from_millis(5));
        assert_eq!(ids(&history.rows_page(None, 1).unwrap()), ["s3"], "the old listing's page");
        let deadline = Instant::now() + Duration::from_secs(10);
        while ids(&history.rows_page(None, 1).unwrap()) != ["new"] {
            assert!(Instant::now() < deadline, "the background listing never came");
            std::thread::sleep(Duration::from_millis(10));
        }

        // warm() lists before the first page is asked.
        let warmed = PiHistory::new(Growing::default());
        warmed.store().0.lock().unwrap().0.push(conv("w", 1, 0));
        warmed.warm();
        let deadline = Instant::now() + Duration::from_secs(10);
        while warmed.store().0.lock().unwrap().1 == 0 || warmed.relisting.load(Ordering::SeqCst) {
            assert!(Instant::now() < deadline, "warm() never listed");
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(ids(&warmed.rows_page(None, 5).unwrap()), ["w"]);
        assert_eq!(warmed.store().0.lock().unwrap().1, 1, "the first page came from warm()'s listing");

        let every = PiHistory::new(Growing::default()).relist_after(Duration::ZERO);
        every.rows_page(None, 1).unwrap();
        every.rows_page(None, 1).unwrap();
        assert_eq!(every.store().0.lock().unwrap().1, 2, "ZERO lists at every page");
    }

    #[test]
    fn conversations_open_as_panes_show_as_they_are_now_in_their_place() {
        let store = Growing::default();
        store.0.lock().unwrap().0.extend((1..=4).map(|n| conv(&format!("s{n}"), n * 10, 0)));
        let history = PiHistory::new(store).relist_after(Duration::from_secs(600));
        assert_eq!(ids(&history.rows_page(None, 10).unwrap()), ["s4", "s3", "s2", "s1"]);
        // Since that listing: s1 (open) was active again, s5 (open) began,
        // s2 (not open) was active again too.
        {
            let mut g = history.store().0.lock().unwrap();
            g.0.retain(|c| c.info.id != "s1" && c.info.id != "s2");
            g.0.extend([conv("s1", 35, 3), conv("s5", 50, 1), conv("s2", 60, 0)]);
        }
        history.set_open("s1", true);
        history.set_open("s5", true);
        history.set_open("gone", true); // open, not in the store: no row
        let first = history.rows_page(None, 2).unwrap();
        assert_eq!(ids(&first), ["s5", "s4"], "s2 waits for the next listing; s5 is shown at once");
        let rest = history.rows_page(first.next.as_ref(), 2).unwrap();
        assert_eq!(ids(&rest), ["s1", "s3"], "s1 in its new place, once");
        assert_eq!((rest.rows[0].items, rest.rows[0].state), (3, ConversationState::Open));
        let last = history.rows_page(rest.next.as_ref(), 2).unwrap();
        assert_eq!(ids(&last), ["s2"]);
        assert!(last.next.is_none());
        assert_eq!(history.store().0.lock().unwrap().1, 1, "one listing");
    }

    /// A store that takes its time to list, counting its listings.
    struct Slow(Growing);

    impl ConversationStore for Slow {
        fn conversations(&self) -> Result<Vec<ConversationInfo>, Error> {
            std::thread::sleep(Duration::from_millis(300));
            self.0.conversations()
        }
        fn conversation(&self, id: &str) -> Result<Option<Conversation>, Error> {
            self.0.conversation(id)
        }
    }

    #[test]
    fn a_first_page_asked_while_warm_lists_waits_for_that_listing() {
        let history = PiHistory::new(Slow(Growing::default()));
        history.store().0.0.lock().unwrap().0.push(conv("w", 1, 0));
        history.warm();
        // Asked at once, while the warm listing sleeps: served from it.
        assert_eq!(ids(&history.rows_page(None, 5).unwrap()), ["w"]);
        assert_eq!(history.store().0.0.lock().unwrap().1, 1, "one listing, not a second for the page");
    }

    #[tokio::test]
    async fn the_provider_serves_the_same_pages() {
        let history = PiHistory::new(Memory(vec![conv("a", 1, 3)]));
        let page = HistoryProvider::rows(&history, None, 10).await.unwrap();
        assert_eq!(ids(&page), ["a"]);
        let items = HistoryProvider::items(&history, "a", None, 2).await.unwrap().unwrap();
        assert_eq!(items.items.len(), 2);
        let err = HistoryProvider::rows(&history, Some(Cursor::new("x").unwrap()), 1).await.unwrap_err();
        assert!(err.to_string().contains("cursor"), "{err}");
    }

    /// A store that lists only once the runtime's other task has run (or
    /// after 5 s), saying which.
    struct WaitsForTheRuntime(Arc<(Mutex<bool>, Condvar)>, Arc<AtomicBool>);

    impl ConversationStore for WaitsForTheRuntime {
        fn conversations(&self) -> Result<Vec<ConversationInfo>, Error> {
            let (ran, now) = &*self.0;
            let ran = ran.lock().unwrap();
            let (ran, _) = now.wait_timeout_while(ran, Duration::from_secs(5), |ran| !*ran).unwrap();
            self.1.store(*ran, Ordering::SeqCst);
            Ok(vec![conv("a", 1, 0).info])
        }
        fn conversation(&self, _id: &str) -> Result<Option<Conversation>, Error> {
            Ok(None)
        }
    }

    /// A page that reads the store does not hold up the runtime it is
    /// served on (here its only thread): another task runs meanwhile.
    #[tokio::test(flavor = "current_thread")]
    async fn a_page_leaves_the_runtime_free_while_it_reads_the_store() {
        let ran = Arc::new((Mutex::new(false), Condvar::new()));
        let saw = Arc::new(AtomicBool::new(false));
        let history = PiHistory::new(WaitsForTheRuntime(Arc::clone(&ran), Arc::clone(&saw)));
        let other = tokio::spawn(async move {
            *ran.0.lock().unwrap() = true;
            ran.1.notify_all();
        });
        let page = HistoryProvider::rows(&history, None, 10).await.unwrap();
        assert_eq!(ids(&page), ["a"]);
        assert!(saw.load(Ordering::SeqCst), "the listing blocked the runtime's only thread");
        other.await.unwrap();
    }
}
