//! History (§10): the agent's own store of conversations, served through a
//! [`HistoryProvider`] set with [`Collie::history`].

use std::sync::Arc;

use std::future::Future;

use crate::handlers::BoxFuture;
use durable_core::data::receipt::StoreError;
use durable_core::{KeptConversationRow, RowPlace};
use durable_types::TITLE_MAX;
use durable_types::exchange::{Request, Response};
use durable_types::text::sanitize_line;
use durable_types::{
    ConversationPage, Cursor, ErrorCode, HISTORY_LIMIT_DEFAULT, HISTORY_LIMIT_MAX, HistoryPage, HistoryRow,
    Id, Item, Timestamp,
};

use crate::core::Collie;
use durable_core::request::{Query, RequestError};
use durable_core::respond;

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
/// message (`400 bad-request` for [`bad_cursor`](Self::bad_cursor)), so it
/// must say nothing secret.
#[derive(Debug, thiserror::Error)]
#[error("history: {message}")]
pub struct HistoryError {
    message: String,
    bad_cursor: bool,
}

impl HistoryError {
    /// An error with a message.
    pub fn new(message: impl Into<String>) -> Self {
        HistoryError { message: message.into(), bad_cursor: false }
    }

    /// The phone's `after` is no cursor this history gave: `400
    /// bad-request`, as the SDK's own history answers it.
    pub fn bad_cursor(message: impl Into<String>) -> Self {
        HistoryError { message: message.into(), bad_cursor: true }
    }
}

/// The answer to a provider's error: `400` for a cursor it never gave,
/// else `500 internal`.
fn provider_failed(e: HistoryError) -> Response {
    let code = if e.bad_cursor { ErrorCode::BadRequest } else { ErrorCode::Internal };
    respond::error(code, e.to_string())
}

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

/// A provider's row under the rules: its id follows the ID rule (else it is
/// left out, with a warn line), its title and subtitle are cut to 256 bytes.
fn clean_row(core: &Collie, mut row: HistoryRow) -> Option<HistoryRow> {
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

/// History has no source: neither a provider nor a store that keeps
/// conversations.
fn no_history() -> Response {
    respond::error(
        ErrorCode::NotSupported,
        "this agent has no history: no history provider, and its receipt store keeps no conversations",
    )
}

pub(crate) async fn list(core: &Collie, req: &Request) -> Result<Response, Response> {
    let (after, limit) = paging(req)?;
    let Some(provider) = core.provider() else {
        if core.keeps_conversations() {
            return kept_rows(core, after, limit).await;
        }
        return Err(no_history());
    };
    let mut page = provider.rows_dyn(after, limit).await.map_err(provider_failed)?;
    page.rows.truncate(limit);
    page.rows = page.rows.into_iter().filter_map(|r| clean_row(core, r)).collect();
    Ok(respond::json(
        200,
        &HistoryPage { ok: true, rows: page.rows, next: page.next.map(Cursor::into_string) },
    ))
}

pub(crate) async fn conversation(core: &Collie, req: &Request, session: Id) -> Result<Response, Response> {
    let (after, limit) = paging(req)?;
    let provider = match core.provider() {
        Some(provider) => provider,
        None if core.keeps_conversations() => return sdk_page(core, &session, after, limit).await,
        None => return Err(no_history()),
    };
    let Some(page) =
        provider.items_dyn(session.as_str(), after.clone(), limit).await.map_err(provider_failed)?
    else {
        // The provider knows no conversation by this id: the SDK's own
        // (an open pane's view, else the store's kept conversation).
        return sdk_page(core, &session, after, limit).await;
    };
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

/// The prefix of the cursors of a page read from an open pane's view: the
/// cursor is `view-<n>`, `n` the place in the view of the page's last item.
const VIEW_CURSOR: &str = "view-";

/// The prefix of the cursors of a page of a kept conversation: `kept-<n>`,
/// `n` the number of its items before the next page.
const KEPT_CURSOR: &str = "kept-";

/// The prefix of the cursors of the rows of kept conversations:
/// `rows-<started>-<pane in hex>`, the start time (milliseconds) and pane
/// id of the page's last row ([`rows_cursor`]).
const ROWS_CURSOR: &str = "rows-";

/// `GET /v1/history/{sessionId}` served by the SDK: the open pane with that
/// session id from its view, else the conversation the receipt store keeps
/// (a pane this process closed under that session id, or the pane of that
/// id), as a closed one; else `404`.
async fn sdk_page(
    core: &Collie,
    session: &Id,
    after: Option<Cursor>,
    limit: usize,
) -> Result<Response, Response> {
    enum Source {
        View,
        Kept(String),
        None,
    }
    let source = {
        let st = core.lock();
        if st.open_pane_of_session(session.as_str()).is_some() {
            Source::View
        } else if st.is_open(session) || !st.keeps_conversations() {
            // An open pane that names no session id, or another one, is not
            // read under its pane id.
            Source::None
        } else {
            Source::Kept(st.closed_pane_of_session(session.as_str()).unwrap_or(session.as_str()).to_owned())
        }
    };
    match source {
        Source::View => open_pane_page(core, session, after, limit),
        Source::Kept(pane) => kept_page(core, session, &pane, after, limit).await,
        Source::None => Err(respond::not_found(format!("no conversation {session}"))),
    }
}

/// A `500` for a receipt store that failed a history read: the phone gets
/// a plain message, the program's warn line the store's own (which may name
/// where the store lives).
fn store_failed(core: &Collie, what: &str, e: &StoreError) -> Response {
    core.warn(&format!("collie: history could not {what} from the receipt store: {e}"));
    respond::error(ErrorCode::Internal, format!("history: the receipt store could not {what}"))
}

/// A page of a conversation the store keeps under `pane` and no pane shows
/// now (a pane closed, or not declared again since a restart), served as
/// `session`: a `closed` row, ended when the store last kept a change of it.
async fn kept_page(
    core: &Collie,
    session: &Id,
    pane: &str,
    after: Option<Cursor>,
    limit: usize,
) -> Result<Response, Response> {
    let kept = core
        .kept_conversation(pane)
        .await
        .map_err(|e| store_failed(core, &format!("read the conversation {session}"), &e))?
        .ok_or_else(|| respond::not_found(format!("no conversation {session}")))?;
    let from = match &after {
        None => 0,
        Some(cursor) => cursor
            .as_str()
            .strip_prefix(KEPT_CURSOR)
            .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|n| n.parse::<usize>().ok())
            .ok_or_else(|| {
                respond::error(
                    ErrorCode::BadRequest,
                    format!("after: {} is not a cursor of the conversation {session}", cursor.as_str()),
                )
            })?,
    };
    let count = kept.items.len();
    let started = kept.started_at.unwrap_or(Timestamp::EPOCH);
    let row =
        HistoryRow::open(session.as_str(), kept.title.clone().unwrap_or_else(|| pane.to_owned()), started)
            .with_items(count as u64)
            .closed(kept.written_at.unwrap_or(started));
    let end = from.saturating_add(limit).min(count);
    // No turn writes a closed conversation again: an item still partial
    // (its pane closed mid-reply) is read as final, as a restore shows it.
    let items = kept
        .items
        .into_iter()
        .skip(from)
        .take(end.saturating_sub(from))
        .map(|mut item| {
            item.body.finalize();
            item
        })
        .collect();
    let next = (end < count).then(|| format!("{KEPT_CURSOR}{end}"));
    Ok(respond::json(200, &ConversationPage { ok: true, row, items, next, dropped: kept.dropped }))
}

/// `GET /v1/history` served by the SDK: the conversations the receipt store
/// keeps, newest first by start. One a pane shows now is `open`, under the
/// pane's session id, with the pane's title, tab and item count (a pane
/// with no session id is not listed while open); the others are `closed`,
/// under the session id of the pane this process closed, else the pane id
/// (one whose id an open pane uses as its session id is left out: the open
/// pane is what that id reads).
async fn kept_rows(core: &Collie, after: Option<Cursor>, limit: usize) -> Result<Response, Response> {
    let page = core.kept_history_rows(after, limit).await.map_err(provider_failed)?;
    Ok(respond::json(
        200,
        &HistoryPage { ok: true, rows: page.rows, next: page.next.map(Cursor::into_string) },
    ))
}

/// One page of the rows of kept conversations, after `place`.
async fn rows_page(core: &Collie, mut place: Option<RowPlace>, limit: usize) -> Result<RowsPage, StoreError> {
    let mut rows = Vec::with_capacity(limit);
    // Rows left out (open panes without a session id) are made up for
    // from the next ones, so that a page is short only at the end.
    loop {
        let mut kept = core.conversation_rows(place.clone(), limit + 1).await?;
        // The store has rows past this batch's `limit`, or the page fills
        // before the batch ends: either way, rows are left for a next page.
        let mut left = kept.len() > limit;
        kept.truncate(limit);
        {
            let st = core.lock();
            let mut batch = kept.into_iter();
            for k in batch.by_ref() {
                place = Some(k.place());
                if let Some(row) = row_of(&st, k) {
                    rows.push(row);
                }
                if rows.len() == limit {
                    break;
                }
            }
            left |= batch.next().is_some();
        }
        if !left || rows.len() == limit {
            let next = match (left, &place) {
                (true, Some(last)) => Cursor::new(rows_cursor(last)).ok(),
                _ => None,
            };
            return Ok(RowsPage { rows, next });
        }
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
        let place = match &after {
            None => None,
            Some(cursor) => Some(rows_place(cursor).ok_or_else(|| {
                HistoryError::bad_cursor(format!(
                    "after: {} is not a cursor of this history",
                    cursor.as_str()
                ))
            })?),
        };
        rows_page(self, place, limit).await.map_err(|e| {
            self.warn(&format!(
                "collie: history could not list the conversations from the receipt store: {e}"
            ));
            HistoryError::new("the receipt store could not list the conversations")
        })
    }
}

/// The row of a kept conversation, as the state stands (`None`: not listed).
fn row_of(st: &crate::core::StateGuard<'_>, k: KeptConversationRow) -> Option<HistoryRow> {
    let has_history = st.has_history();
    let shown = Id::new(k.pane.as_str()).ok().and_then(|id| st.pane(&id));
    if let Some(pane) = shown {
        let session = pane.session_id(has_history)?;
        let tab = pane.tab();
        // The earlier of the store's start and the pane's first event, as
        // the pane's own page says.
        let started = pane.started_at().map_or(k.started_at, |s| s.min(k.started_at));
        return Some(
            HistoryRow::open(session, pane.title(), started)
                .in_tab(tab.ws.as_str(), tab.wire())
                .with_items(pane.view_len() as u64),
        );
    }
    let id = match st.closed_session_id(&k.pane) {
        Some(Some(session)) => session.to_owned(),
        _ => k.pane.clone(),
    };
    if st.open_pane_of_session(&id).is_some() {
        return None;
    }
    let title = k.title.unwrap_or_else(|| k.pane.clone());
    Some(HistoryRow::open(id, title, k.started_at).with_items(k.items).closed(k.written_at))
}

/// The cursor after a row: `rows-<started>-<pane>`, the pane id in hex (a
/// pane id may hold what a cursor may not).
fn rows_cursor(place: &RowPlace) -> String {
    let hex: String = place.pane.bytes().map(|b| format!("{b:02x}")).collect();
    format!("{ROWS_CURSOR}{}-{hex}", place.started_at.as_millis())
}

/// The place a rows cursor (`rows-<started>-<pane in hex>`) names.
fn rows_place(cursor: &Cursor) -> Option<RowPlace> {
    let (ms, hex) = cursor.as_str().strip_prefix(ROWS_CURSOR)?.split_once('-')?;
    if hex.is_empty() || hex.len() % 2 != 0 || !ms.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let bytes = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok())
        .collect::<Option<Vec<u8>>>()?;
    Some(RowPlace {
        started_at: Timestamp::from_millis(ms.parse().ok()?),
        pane: String::from_utf8(bytes).ok()?,
    })
}

/// `GET /v1/history/{sessionId}` for a session id the provider knows no
/// conversation by (§10, our decision): the open pane with that session id
/// is served from its view, the items the events route's snapshot holds, in
/// order, with a row describing the pane; no such pane is `404`. The view's
/// items already met the item rules when the program wrote them.
fn open_pane_page(
    core: &Collie,
    session: &Id,
    after: Option<Cursor>,
    limit: usize,
) -> Result<Response, Response> {
    let now = core.now();
    let st = core.lock();
    let Some(pane) = st.open_pane_of_session(session.as_str()) else {
        return Err(respond::not_found(format!("no conversation {session}")));
    };
    let from = match &after {
        None => 0,
        Some(cursor) => view_place(cursor).ok_or_else(|| {
            respond::error(
                ErrorCode::BadRequest,
                format!("after: {} is not a cursor of the conversation {session}", cursor.as_str()),
            )
        })?,
    };
    let (items, next) = pane.view_page(from, limit);
    let tab = pane.tab();
    let row = HistoryRow::open(session.as_str(), pane.title(), pane.started_at().unwrap_or(now))
        .in_tab(tab.ws.as_str(), tab.wire())
        .with_items(pane.view_len() as u64);
    let dropped = pane.view_dropped();
    drop(st);
    Ok(respond::json(
        200,
        &ConversationPage { ok: true, row, items, next: next.map(|n| format!("{VIEW_CURSOR}{n}")), dropped },
    ))
}

/// The place a view cursor (`view-<n>`) names; `None` for another cursor.
fn view_place(cursor: &Cursor) -> Option<u64> {
    cursor.as_str().strip_prefix(VIEW_CURSOR)?.parse().ok()
}
