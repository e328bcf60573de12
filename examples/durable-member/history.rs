//! History: the SDK's own (the receipt store keeps every conversation, open
//! and closed, and reads each), with the desk's one addition — a ticket's
//! row says its order (`Order 5521`). The desk keeps no items of its own.

use std::sync::Arc;

use durable_sdk::Collie;
use durable_sdk::history::{HistoryError, HistoryProvider, ItemsPage, RowsPage};
use durable_sdk::types::Cursor;

use crate::store::Store;

pub(crate) struct DeskHistory {
    pub(crate) collie: Collie,
    pub(crate) store: Arc<Store>,
}

impl HistoryProvider for DeskHistory {
    async fn rows(&self, after: Option<Cursor>, limit: usize) -> Result<RowsPage, HistoryError> {
        let mut page = self.collie.kept_history_rows(after, limit).await?;
        let store = self.store.clone();
        let ids: Vec<String> = page.rows.iter().map(|r| r.id.clone()).collect();
        let orders = tokio::task::spawn_blocking(move || {
            ids.iter().map(|id| store.pane(id).ok().flatten().and_then(|p| p.order)).collect::<Vec<_>>()
        })
        .await
        .map_err(|_| HistoryError::new("the desk's store read failed"))?;
        for (row, order) in page.rows.iter_mut().zip(orders) {
            row.subtitle = order.map(|o| format!("Order {o}"));
        }
        Ok(page)
    }

    /// Each conversation is the SDK's: an open pane's view, a closed one
    /// from the receipt store.
    async fn items(
        &self,
        _session_id: &str,
        _after: Option<Cursor>,
        _limit: usize,
    ) -> Result<Option<ItemsPage>, HistoryError> {
        Ok(None)
    }
}
