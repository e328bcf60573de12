//! The history provider: every ticket (and the announcements pane), open
//! and closed, from the desk's store. Cursors are the store's own sequence
//! numbers written in decimal; reads run on a blocking thread.

use std::sync::Arc;

use durable_sdk::history::{ConversationState, HistoryRow};
use durable_sdk::history::{HistoryError, HistoryProvider, ItemsPage, RowsPage};
use durable_sdk::types::{Cursor, Timestamp, tab_wire_id};

use crate::store::{PaneRow, Store, WORKSPACE};

pub(crate) struct DeskHistory {
    pub(crate) store: Arc<Store>,
}

fn row(store: &Store, p: &PaneRow) -> HistoryRow {
    let tab = durable_sdk::types::ScopeId::new(p.tab.clone()).ok();
    let ws = durable_sdk::types::ScopeId::new(WORKSPACE.0).ok();
    HistoryRow {
        id: p.id.clone(),
        title: p.title.clone(),
        subtitle: p.order.as_ref().map(|o| format!("Order {o}")),
        workspace_id: Some(WORKSPACE.0.to_owned()),
        tab_id: ws.zip(tab).map(|(w, t)| tab_wire_id(&w, &t)),
        started_at: Timestamp::from_millis(p.started_at),
        ended_at: p.ended_at.map(Timestamp::from_millis),
        state: if p.closed { ConversationState::Closed } else { ConversationState::Open },
        items: store.item_count(&p.id).unwrap_or(0),
    }
}

/// A cursor of ours, or `None` for one we never gave (read as "nothing after it").
fn position(after: Option<Cursor>) -> Option<i64> {
    match after {
        None => Some(0),
        Some(c) => c.as_str().parse().ok(),
    }
}

fn cursor(n: i64) -> Option<Cursor> {
    Cursor::new(n.to_string()).ok()
}

async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Result<T, HistoryError> {
    tokio::task::spawn_blocking(f).await.map_err(|_| HistoryError::new("the desk's store read failed"))
}

impl HistoryProvider for DeskHistory {
    async fn rows(&self, after: Option<Cursor>, limit: usize) -> Result<RowsPage, HistoryError> {
        let Some(after) = position(after) else { return Ok(RowsPage { rows: Vec::new(), next: None }) };
        let store = self.store.clone();
        blocking(move || {
            let mut panes =
                store.rows(after, limit + 1).map_err(|e| HistoryError::new(format!("store: {e}")))?;
            let more = panes.len() > limit;
            panes.truncate(limit);
            let next = if more { panes.last().and_then(|p| cursor(p.n)) } else { None };
            Ok(RowsPage { rows: panes.iter().map(|p| row(&store, p)).collect(), next })
        })
        .await?
    }

    async fn items(
        &self,
        session_id: &str,
        after: Option<Cursor>,
        limit: usize,
    ) -> Result<Option<ItemsPage>, HistoryError> {
        let store = self.store.clone();
        let session = session_id.to_owned();
        let after = position(after);
        blocking(move || {
            let Some(pane) = store.pane(&session).map_err(|e| HistoryError::new(format!("store: {e}")))?
            else {
                return Ok(None);
            };
            let row = row(&store, &pane);
            let Some(after) = after else {
                return Ok(Some(ItemsPage { row, items: Vec::new(), next: None, dropped: false }));
            };
            let mut items = store
                .items(&session, after, limit + 1)
                .map_err(|e| HistoryError::new(format!("store: {e}")))?;
            let more = items.len() > limit;
            items.truncate(limit);
            let next = if more { items.last().and_then(|(seq, _)| cursor(*seq)) } else { None };
            Ok(Some(ItemsPage {
                row,
                items: items.into_iter().map(|(_, i)| i).collect(),
                next,
                dropped: false,
            }))
        })
        .await?
    }
}
