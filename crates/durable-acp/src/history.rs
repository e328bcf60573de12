//! The history: this program's records merged with the agent's
//! `session/list` (every page, by its cursors), newest first.
//!
//! ACP gives a session's id, title and last update; what the wire needs
//! beside (when it started, how many items) comes from the record, and a
//! session no record knows shows its last update as its start and no
//! items. A closed conversation's items come from the SDK's receipt store
//! when it keeps them across restarts, else from its record; one only the
//! agent lists is read once by a replay (`session/load` in an agent started
//! for it) and kept (the record, its items where the rest are), so a
//! second read starts nothing. Open conversations are left to their panes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use durable_runtime::{Collie, HistoryError, HistoryProvider, ItemsPage, RowsPage, Tab};
use durable_types::{Cursor, HISTORY_LIMIT_MAX, HistoryRow, Item, Timestamp};

use crate::AcpConversations;
use crate::conversation::{Shared, new_prefix};
use crate::mapping::Mapper;
use crate::process::{AgentEvent, AgentProcess};
use crate::store::Record;

/// How long a `session/list` listing is used before it is asked again.
const LISTING_FRESH: Duration = Duration::from_secs(30);
/// Pages of `session/list` read at most (pi-acp's pages hold 50).
const PAGES_MAX: usize = 100;

/// The agent's sessions as last listed, and when.
type Listing = Option<(Instant, Vec<Record>)>;

/// The history provider of [`AcpConversations`] (give it to `Collie::history`).
pub struct AcpHistory {
    shared: Arc<Shared>,
    core: Collie,
    conversations: Weak<AcpConversations>,
    workspace: String,
    tab: String,
    listing: Arc<tokio::sync::Mutex<Listing>>,
    /// Replays under way are one at a time.
    replays: Arc<tokio::sync::Mutex<()>>,
    warned: Arc<Mutex<bool>>,
}

impl std::fmt::Debug for AcpHistory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AcpHistory").field("tab", &self.tab).finish_non_exhaustive()
    }
}

impl AcpHistory {
    pub(crate) fn new(shared: Arc<Shared>, conversations: Weak<AcpConversations>, tab: &Tab) -> AcpHistory {
        let core = tab.collie().clone();
        let tab = tab.id();
        let workspace = tab.split(':').next().unwrap_or("").to_owned();
        AcpHistory {
            shared,
            core,
            conversations,
            workspace,
            tab,
            listing: Arc::default(),
            replays: Arc::default(),
            warned: Arc::default(),
        }
    }

    /// The agent's sessions (cached for [`LISTING_FRESH`]): an agent is
    /// started for the listing and stopped after it. An agent that cannot
    /// list, or fails to, lists nothing (said once in a warn event).
    async fn listed(&self) -> Vec<Record> {
        let mut cache = self.listing.lock().await;
        if let Some((_, rows)) = cache.as_ref().filter(|(at, _)| at.elapsed() < LISTING_FRESH) {
            return rows.clone();
        }
        let rows = match self.list().await {
            Ok(rows) => rows,
            Err(e) => {
                let mut warned = self.warned.lock().unwrap_or_else(|e| e.into_inner());
                if !*warned {
                    *warned = true;
                    tracing::warn!(error = %e, "acp: the agent's sessions could not be listed; the history shows this program's records");
                }
                Vec::new()
            }
        };
        *cache = Some((Instant::now(), rows.clone()));
        rows
    }

    async fn list(&self) -> Result<Vec<Record>, crate::Error> {
        let options = &self.shared.options;
        let (process, events) = AgentProcess::start(options).await?;
        let _drain = drain(process.clone(), events);
        if !process.abilities.list {
            process.stop().await;
            return Ok(Vec::new());
        }
        let mut rows = Vec::new();
        let mut cursor = None;
        for _ in 0..PAGES_MAX {
            let page = match process.list_sessions(&options.cwd, cursor.take()).await {
                Ok(page) => page,
                Err(e) => {
                    process.stop().await;
                    return Err(e);
                }
            };
            for s in page.sessions {
                let updated = s.updated_at.as_deref().and_then(|t| Timestamp::parse(t).ok());
                let updated = updated.map_or(0, Timestamp::as_millis);
                let title = s.title.unwrap_or_else(|| "Conversation".into());
                rows.push(Record::listed(&s.session_id.0, &title, updated));
            }
            match page.next_cursor {
                Some(next) if !next.is_empty() => cursor = Some(next),
                _ => break,
            }
        }
        process.stop().await;
        Ok(rows)
    }

    /// The session id of a pane id, among the sessions the agent lists.
    pub(crate) async fn session_of(&self, pane_id: &str) -> Option<String> {
        self.listed().await.into_iter().find(|r| r.pane_id == pane_id).map(|r| r.session_id)
    }

    /// Every conversation: records first (they know more), then the
    /// sessions only the agent lists; newest first.
    async fn all(&self) -> Vec<(Record, bool)> {
        let conversations = self.conversations.upgrade();
        let mut records = self.shared.store.all();
        if let Some(c) = &conversations {
            // The open ones as they stand now.
            for open in c.open_records() {
                records.retain(|r| r.pane_id != open.pane_id);
                records.push(open);
            }
        }
        for listed in self.listed().await {
            if !records.iter().any(|r| r.pane_id == listed.pane_id) {
                records.push(listed);
            }
        }
        records.sort_by(|a, b| b.updated_at.cmp(&a.updated_at).then_with(|| a.pane_id.cmp(&b.pane_id)));
        records
            .into_iter()
            .map(|r| {
                let open = conversations.as_ref().is_some_and(|c| c.is_open(&r.pane_id));
                (r, open)
            })
            .collect()
    }

    fn row(&self, record: &Record, open: bool, items: u64) -> HistoryRow {
        let row = HistoryRow::open(&record.pane_id, &record.title, Timestamp::from_millis(record.started_at))
            .in_tab(&self.workspace, &self.tab)
            .with_items(items);
        if open { row } else { row.closed(Timestamp::from_millis(record.updated_at.max(record.started_at))) }
    }

    /// A conversation's items and whether older ones were dropped: the
    /// record's, or, when the SDK's store keeps them, the store's.
    async fn items_of(&self, record: &Record) -> Result<(Vec<Item>, bool), HistoryError> {
        if !record.items.is_empty() || !self.shared.sdk_keeps_items {
            return Ok((record.items.clone(), record.dropped));
        }
        match self.core.kept_conversation(&record.pane_id).await {
            Ok(Some(kept)) => Ok((kept.items, kept.dropped || record.dropped)),
            // The store's bound of conversations forgot it: its items are
            // gone, and the page says so.
            Ok(None) => Ok((Vec::new(), true)),
            Err(e) => {
                self.core.warn(&format!(
                    "durable-acp: the items of {} could not be read from the receipt store: {e}",
                    record.pane_id
                ));
                Err(HistoryError::new("the receipt store could not read this conversation"))
            }
        }
    }

    /// How many items the SDK's store keeps of each conversation, by id
    /// (its rows, which count without reading the items; empty when the
    /// store keeps none, or cannot list them: it says so in a warn line).
    async fn store_counts(&self) -> HashMap<String, u64> {
        let mut counts = HashMap::new();
        if !self.shared.sdk_keeps_items {
            return counts;
        }
        let mut after = None;
        for _ in 0..PAGES_MAX {
            let Ok(page) = self.core.kept_history_rows(after.take(), HISTORY_LIMIT_MAX).await else { break };
            counts.extend(page.rows.into_iter().map(|r| (r.id, r.items)));
            match page.next {
                Some(next) => after = Some(next),
                None => break,
            }
        }
        counts
    }

    /// A replay of a session only the agent lists, kept as a closed record
    /// (its items in the SDK's store when that keeps them, else in the record).
    async fn replay(&self, listed: Record) -> Result<Record, crate::Error> {
        let _one = self.replays.lock().await;
        if let Some(kept) = self.shared.store.get(&listed.pane_id) {
            return Ok(kept);
        }
        let options = &self.shared.options;
        let (process, mut events) = AgentProcess::start(options).await?;
        let mut mapper = Mapper::new(Duration::ZERO);
        mapper.begin(&new_prefix("load"), true);
        let collect = {
            let process = process.clone();
            let session = listed.session_id.clone();
            async move {
                let mut items: Vec<Item> = Vec::new();
                while let Some(event) = events.recv().await {
                    match event {
                        AgentEvent::Update(n) => {
                            process.gate.add_permits(1);
                            if n.session_id.0.as_ref() == session {
                                items.extend(mapper.on_update(&n.update, Instant::now()));
                            }
                        }
                        // Reading a closed conversation asks nobody anything.
                        request @ (AgentEvent::Permission(..) | AgentEvent::Elicitation(..)) => {
                            request.refuse()
                        }
                        AgentEvent::Barrier(done) => {
                            items.extend(mapper.finish(false));
                            let _ = done.send(());
                            break;
                        }
                        AgentEvent::Exited(_) => break,
                    }
                }
                items
            }
        };
        let collector = tokio::spawn(collect);
        let loaded = process.load_session(&listed.session_id, &options.cwd).await;
        process.settle().await;
        process.stop().await;
        let items = collector.await.unwrap_or_default();
        loaded?;
        let mut log = crate::store::ItemLog::default();
        for item in items {
            log.upsert(item);
        }
        let mut record = Record { items: log.items().to_vec(), dropped: log.dropped, ..listed };
        if self.shared.sdk_keeps_items && !record.items.is_empty() {
            let moved = match crate::conversations::import_items(&self.core, &record) {
                Some(ids) => crate::conversations::items_are_kept(&self.core, &record.pane_id, &ids).await,
                None => false,
            };
            if moved {
                record.items.clear();
            }
        }
        // Reopened meanwhile (its pane's record written): that record wins.
        if let Some(kept) = self.shared.store.get(&record.pane_id) {
            return Ok(kept);
        }
        self.shared.store.put(&record)?;
        Ok(record)
    }
}

/// Reads and drops what a short-lived agent says (its updates' permits given back).
fn drain(
    process: Arc<AgentProcess>,
    mut events: tokio::sync::mpsc::Receiver<AgentEvent>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        while let Some(event) = events.recv().await {
            match event {
                AgentEvent::Update(_) => process.gate.add_permits(1),
                AgentEvent::Barrier(done) => {
                    let _ = done.send(());
                }
                request @ (AgentEvent::Permission(..) | AgentEvent::Elicitation(..)) => request.refuse(),
                AgentEvent::Exited(_) => return,
            }
        }
    })
}

fn offset(after: Option<Cursor>) -> Result<usize, HistoryError> {
    match after {
        None => Ok(0),
        Some(c) => c
            .as_str()
            .strip_prefix('o')
            .and_then(|n| n.parse().ok())
            .ok_or_else(|| HistoryError::new("this cursor is not one of this history's")),
    }
}

fn cursor(n: usize) -> Option<Cursor> {
    Cursor::new(format!("o{n}")).ok()
}

impl HistoryProvider for AcpHistory {
    async fn rows(&self, after: Option<Cursor>, limit: usize) -> Result<RowsPage, HistoryError> {
        let from = offset(after)?;
        let all = self.all().await;
        let counts = self.store_counts().await;
        let rows: Vec<HistoryRow> = all
            .iter()
            .skip(from)
            .take(limit)
            .map(|(record, open)| {
                let items = if record.items.is_empty() && self.shared.sdk_keeps_items {
                    counts.get(&record.pane_id).copied().unwrap_or(0)
                } else {
                    record.items.len() as u64
                };
                self.row(record, *open, items)
            })
            .collect();
        let end = from + rows.len();
        Ok(RowsPage { next: if end < all.len() { cursor(end) } else { None }, rows })
    }

    async fn items(
        &self,
        session_id: &str,
        after: Option<Cursor>,
        limit: usize,
    ) -> Result<Option<ItemsPage>, HistoryError> {
        if self.conversations.upgrade().is_some_and(|c| c.is_open(session_id)) {
            return Ok(None); // the pane's own view
        }
        let record = match self.shared.store.get(session_id) {
            Some(r) => r,
            None => {
                let listed = self.listed().await.into_iter().find(|r| r.pane_id == session_id);
                let Some(listed) = listed else { return Ok(None) };
                self.replay(listed)
                    .await
                    .map_err(|_| HistoryError::new("the agent could not replay this conversation"))?
            }
        };
        let from = offset(after)?;
        let (all, dropped) = self.items_of(&record).await?;
        let count = all.len();
        let items: Vec<Item> = all.into_iter().skip(from).take(limit).collect();
        let end = from + items.len();
        let next = if end < count { cursor(end) } else { None };
        let row = self.row(&record, false, count as u64);
        Ok(Some(ItemsPage { row, items, next, dropped }))
    }
}
