//! History (§10): the agent's own store of conversations, served through a
//! [`HistoryProvider`] set with [`Core::history`].

use std::sync::Arc;

use std::future::Future;

use crate::handlers::BoxFuture;
use durable_types::TITLE_MAX;
use durable_types::exchange::{Request, Response};
use durable_types::text::sanitize_line;
use durable_types::{
    ConversationPage, Cursor, ErrorCode, HISTORY_LIMIT_DEFAULT, HISTORY_LIMIT_MAX, HistoryPage, HistoryRow,
    Id, Item,
};

use crate::core::Core;
use crate::request::{Query, RequestError};
use crate::respond;

/// One page of conversation rows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowsPage {
    /// The rows, at most `limit`.
    pub rows: Vec<HistoryRow>,
    /// The cursor of the next page; `None` ends the list.
    pub next: Option<Cursor>,
}

/// One page of a conversation's items.
#[derive(Debug, Clone, PartialEq)]
pub struct ItemsPage {
    /// The conversation's row.
    pub row: HistoryRow,
    /// Its items, in order, at most `limit`.
    pub items: Vec<Item>,
    /// The cursor of the next page; `None` ends it.
    pub next: Option<Cursor>,
    /// True when the agent no longer keeps the conversation's oldest items.
    pub dropped: bool,
}

/// An error of a history provider; the phone gets `500 internal` with this
/// message, so it must say nothing secret.
#[derive(Debug, thiserror::Error)]
#[error("history: {message}")]
pub struct HistoryError {
    message: String,
}

impl HistoryError {
    /// An error with a message.
    pub fn new(message: impl Into<String>) -> Self {
        HistoryError { message: message.into() }
    }
}

/// Serves every conversation, open and closed, from the agent's own store.
/// Cursors are the provider's own strings (the cursor rule: 1 to 512 bytes
/// of printable ASCII without space).
pub trait HistoryProvider: Send + Sync + 'static {
    /// Rows after `after` (from the start when `None`), at most `limit`.
    fn rows(
        &self,
        after: Option<Cursor>,
        limit: usize,
    ) -> impl Future<Output = Result<RowsPage, HistoryError>> + Send;
    /// One conversation's items after `after`, at most `limit`; `None` for
    /// an unknown session id.
    fn items(
        &self,
        session_id: &str,
        after: Option<Cursor>,
        limit: usize,
    ) -> impl Future<Output = Result<Option<ItemsPage>, HistoryError>> + Send;
}

/// A shared provider is a provider: `history(Arc::clone(&store))` keeps a
/// handle for the program.
impl<P: HistoryProvider> HistoryProvider for Arc<P> {
    fn rows(
        &self,
        after: Option<Cursor>,
        limit: usize,
    ) -> impl Future<Output = Result<RowsPage, HistoryError>> + Send {
        P::rows(self, after, limit)
    }
    fn items(
        &self,
        session_id: &str,
        after: Option<Cursor>,
        limit: usize,
    ) -> impl Future<Output = Result<Option<ItemsPage>, HistoryError>> + Send {
        P::items(self, session_id, after, limit)
    }
}

/// The erased form the core keeps.
pub(crate) trait DynHistory: Send + Sync {
    fn rows_dyn(&self, after: Option<Cursor>, limit: usize) -> BoxFuture<'_, Result<RowsPage, HistoryError>>;
    fn items_dyn<'a>(
        &'a self,
        session_id: &'a str,
        after: Option<Cursor>,
        limit: usize,
    ) -> BoxFuture<'a, Result<Option<ItemsPage>, HistoryError>>;
}

impl<P: HistoryProvider> DynHistory for P {
    fn rows_dyn(&self, after: Option<Cursor>, limit: usize) -> BoxFuture<'_, Result<RowsPage, HistoryError>> {
        Box::pin(self.rows(after, limit))
    }
    fn items_dyn<'a>(
        &'a self,
        session_id: &'a str,
        after: Option<Cursor>,
        limit: usize,
    ) -> BoxFuture<'a, Result<Option<ItemsPage>, HistoryError>> {
        Box::pin(self.items(session_id, after, limit))
    }
}

impl Core {
    /// Sets the history provider (the seed's `collie.history(provider)`).
    /// With caps omitted, this turns the `history` cap on; every pane's
    /// session id becomes its pane id unless `tab.pane()` named another.
    pub fn history(&self, provider: impl HistoryProvider) {
        *self.shared.history.write().unwrap_or_else(|e| e.into_inner()) = Some(Arc::new(provider));
        self.lock().enable_history();
    }

    fn provider(&self) -> Option<Arc<dyn DynHistory>> {
        self.shared.history.read().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// A provider's row under the rules: its id follows the ID rule (else it is
/// left out, with a warn line), its title and subtitle are cut to 256 bytes.
fn clean_row(core: &Core, mut row: HistoryRow) -> Option<HistoryRow> {
    if let Err(e) = durable_types::check_id(&row.id) {
        core.warn(&format!("collie: history left out a row whose id breaks the ID rule: {e}"));
        return None;
    }
    sanitize_line(&mut row.title, TITLE_MAX);
    if let Some(subtitle) = &mut row.subtitle {
        sanitize_line(subtitle, TITLE_MAX);
    }
    Some(row)
}

fn paging(req: &Request) -> Result<(Option<Cursor>, usize), RequestError> {
    let q = Query::of(req);
    let after = match q.get("after")? {
        None => None,
        Some(a) => Some(Cursor::new(a).map_err(|source| RequestError::Cursor { key: "after", source })?),
    };
    let limit = match q.u64("limit")? {
        None => HISTORY_LIMIT_DEFAULT,
        Some(n) if (1..=HISTORY_LIMIT_MAX as u64).contains(&n) => n as usize,
        Some(value) => {
            return Err(RequestError::OutOfBounds {
                key: "limit",
                min: 1,
                max: HISTORY_LIMIT_MAX as u64,
                value,
            });
        }
    };
    Ok((after, limit))
}

pub(crate) async fn list(core: &Core, req: &Request) -> Result<Response, Response> {
    let (after, limit) = paging(req)?;
    let Some(provider) = core.provider() else {
        return Err(respond::error(ErrorCode::NotSupported, "this agent has no history provider"));
    };
    let mut page = provider
        .rows_dyn(after, limit)
        .await
        .map_err(|e| respond::error(ErrorCode::Internal, e.to_string()))?;
    page.rows.truncate(limit);
    page.rows = page.rows.into_iter().filter_map(|r| clean_row(core, r)).collect();
    Ok(respond::json(
        200,
        &HistoryPage { ok: true, rows: page.rows, next: page.next.map(Cursor::into_string) },
    ))
}

pub(crate) async fn conversation(core: &Core, req: &Request, session: Id) -> Result<Response, Response> {
    let (after, limit) = paging(req)?;
    let Some(provider) = core.provider() else {
        return Err(respond::error(ErrorCode::NotSupported, "this agent has no history provider"));
    };
    let page = provider
        .items_dyn(session.as_str(), after, limit)
        .await
        .map_err(|e| respond::error(ErrorCode::Internal, e.to_string()))?
        .ok_or_else(|| respond::not_found(format!("no conversation {session}")))?;
    let mut items = page.items;
    items.truncate(limit);
    // The provider's items meet the same rules as the program's.
    let items = items
        .into_iter()
        .filter_map(|item| match item.sanitized() {
            Ok((item, _)) => Some(item),
            Err(e) => {
                core.warn(&format!("collie: history left out an item of {session} that breaks a rule: {e}"));
                None
            }
        })
        .collect();
    let Some(row) = clean_row(core, page.row) else {
        return Err(respond::error(
            ErrorCode::Internal,
            "the history provider gave a row that breaks the ID rule",
        ));
    };
    Ok(respond::json(
        200,
        &ConversationPage {
            ok: true,
            row,
            items,
            next: page.next.map(Cursor::into_string),
            dropped: page.dropped,
        },
    ))
}
