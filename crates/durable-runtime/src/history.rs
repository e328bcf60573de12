//! History (§10): the agent's own store of conversations, served through a
//! [`HistoryProvider`] set with [`Collie::history`], and the loop that
//! serves a history read as the machine decides it
//! (`durable_core::history`): it calls the provider and the receipt store
//! the machine names, and hands back what they said.

use std::future::Future;
use std::sync::Arc;

pub use durable_core::history::{HistoryError, ItemsPage, RowsPage};
use durable_core::history::{HistoryInput, HistoryNext, HistoryRoute, RowsNext};
use durable_types::Cursor;
use durable_types::exchange::{Request, Response};

use crate::core::Collie;
use crate::handlers::BoxFuture;

/// Serves the conversations of the agent's own store, open and closed.
/// Cursors are the provider's own strings (the cursor rule: 1 to 512 bytes
/// of printable ASCII without space).
///
/// The provider need not serve the panes open now: for a session id it
/// answers `None` to, `GET /v1/history/{sessionId}` reads the open pane
/// with that `sessionId` from the pane's own view, else the conversation
/// the receipt store keeps (§10). The rows list is the provider's alone; a
/// provider that only adds to the SDK's own rows (a subtitle) takes them
/// from [`Collie::kept_history_rows`]. A row's `id` is the session id it is
/// read under.
pub trait HistoryProvider: Send + Sync + 'static {
    /// Rows after `after` (from the start when `None`), at most `limit`.
    /// The SDK adds none: an open pane is listed only if the provider lists
    /// it.
    fn rows(
        &self,
        after: Option<Cursor>,
        limit: usize,
    ) -> impl Future<Output = Result<RowsPage, HistoryError>> + Send;
    /// One conversation's items after `after`, at most `limit`; `None` for
    /// a session id the provider knows no conversation by.
    ///
    /// A page given here always wins. `None` for the `sessionId` of a pane
    /// open now makes the route serve that pane's view instead: its items
    /// as the events route's snapshot holds them, with an `open` row made
    /// from the pane (title, tab, item count, the time of its first event),
    /// paged with the SDK's own cursors (`view-<n>`); for any other id it
    /// is `404 not-found`. An `Err` is `500 internal`, open pane or not.
    ///
    /// Default: `None` for every id — a provider that lists rows and
    /// leaves the conversations of open panes to the panes.
    fn items(
        &self,
        session_id: &str,
        after: Option<Cursor>,
        limit: usize,
    ) -> impl Future<Output = Result<Option<ItemsPage>, HistoryError>> + Send {
        let _ = (session_id, after, limit);
        async { Ok(None) }
    }
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

impl Collie {
    /// Sets the history provider (the seed's `collie.history(provider)`).
    /// With caps omitted, this turns the `history` cap on; every pane's
    /// session id becomes its pane id unless `tab.pane()` named another.
    pub fn history(&self, provider: impl HistoryProvider) {
        let mut st = self.lock();
        let links = st.links();
        if let Some(old) = links.history.replace(Arc::new(provider)) {
            links.release(old);
        }
        st.enable_history();
    }

    fn provider(&self) -> Option<Arc<dyn DynHistory>> {
        self.lock().links_ref().history.clone()
    }
}

/// Serves `GET /v1/history` or `GET /v1/history/{sessionId}`: the calls
/// the machine's read asks for, until it answers.
pub(crate) async fn serve(core: &Collie, req: &Request, route: HistoryRoute) -> Response {
    let provider = core.provider();
    let store = &core.shared.options.receipts;
    let now = core.now();
    let (mut read, mut next) = core.lock().machine_mut().begin_history(req, route, provider.is_some(), now);
    loop {
        let input = match next {
            HistoryNext::Respond(response) => return response,
            HistoryNext::ProviderRows { after, limit } => match &provider {
                Some(p) => HistoryInput::ProviderRows(p.rows_dyn(after, limit).await),
                None => HistoryInput::ProviderRows(Err(HistoryError::new("no history provider"))),
            },
            HistoryNext::ProviderItems { session, after, limit } => match &provider {
                Some(p) => HistoryInput::ProviderItems(p.items_dyn(session.as_str(), after, limit).await),
                None => HistoryInput::ProviderItems(Ok(None)),
            },
            HistoryNext::KeptConversation { pane } => {
                HistoryInput::KeptConversation(store.kept_conversation_dyn(&pane).await)
            }
            HistoryNext::KeptRows { place, limit } => {
                HistoryInput::KeptRows(store.conversation_rows_dyn(place, limit).await)
            }
            _ => {
                return durable_core::respond::error(
                    durable_types::ErrorCode::Internal,
                    "an unknown history step",
                );
            }
        };
        let now = core.now();
        next = core.lock().machine_mut().history_step(&mut read, input, now);
    }
}

impl Collie {
    /// A page of history's rows as the SDK lists them with no provider
    /// (docs/wire.md §10): the conversations the receipt store keeps,
    /// newest first. For a provider that lists the SDK's rows with
    /// something of its own added (a subtitle) and leaves each
    /// conversation to the SDK (its `items` answering `None`): pass the
    /// phone's cursor and limit through. A cursor this never gave is a
    /// [`HistoryError::bad_cursor`] (`400` from the provider's `?`), a
    /// store that fails an error (`500`).
    pub async fn kept_history_rows(
        &self,
        after: Option<Cursor>,
        limit: usize,
    ) -> Result<RowsPage, HistoryError> {
        let store = &self.shared.options.receipts;
        let (mut read, mut next) = self.lock().machine().begin_kept_rows(after.as_ref(), limit)?;
        loop {
            let batch = match next {
                RowsNext::Read { place, limit } => store.conversation_rows_dyn(place, limit).await,
                RowsNext::Page(page) => return page,
                _ => return Err(HistoryError::new("an unknown step of the rows' read")),
            };
            next = self.lock().machine_mut().kept_rows_step(&mut read, batch);
        }
    }
}
