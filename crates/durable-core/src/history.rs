//! History (§10), the machine's side: which source answers a read — the
//! program's provider, an open pane's view, the conversations the receipt
//! store keeps — the SDK's own cursors, and the rows and pages it serves
//! itself. The provider and the store are the driver's: a read is a
//! sequence ([`Machine::begin_history`], then [`Machine::history_step`]
//! with each call's outcome) whose [`HistoryNext`] names the call to make,
//! until it answers. The read's place is the driver's [`HistoryRead`]:
//! the machine keeps nothing of it, so a read dropped midway leaves
//! nothing behind.

use durable_types::exchange::{Request, Response};
use durable_types::text::sanitize_line;
use durable_types::{
    Cap, ConversationPage, Cursor, ErrorCode, HISTORY_LIMIT_DEFAULT, HISTORY_LIMIT_MAX, HistoryPage,
    HistoryRow, Id, Item, TITLE_MAX, Timestamp,
};

use crate::data::conversation::{KeptConversation, KeptConversationRow, RowPlace};
use crate::data::receipt::StoreError;
use crate::machine::Machine;
use crate::request::{Query, RequestError, path_id};
use crate::respond;
use crate::state::State;

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

/// Which history read: `GET /v1/history` or `GET /v1/history/{sessionId}`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum HistoryRoute {
    /// The rows.
    Rows,
    /// One conversation, by its session id as the path gives it (checked
    /// after the cap's gate, as the contract orders the answers).
    Conversation(String),
}

/// What a history read needs done next; the driver hands the outcome back
/// as the [`HistoryInput`] of the same name.
#[derive(Debug)]
#[non_exhaustive]
pub enum HistoryNext {
    /// Ask the program's provider for a page of rows (`HistoryProvider::rows`).
    ProviderRows {
        /// The phone's cursor.
        after: Option<Cursor>,
        /// At most this many.
        limit: usize,
    },
    /// Ask the provider for a conversation's items (`HistoryProvider::items`).
    ProviderItems {
        /// The session id.
        session: Id,
        /// The phone's cursor.
        after: Option<Cursor>,
        /// At most this many.
        limit: usize,
    },
    /// Read what the receipt store keeps of the conversation of this pane
    /// (`ReceiptStore::kept_conversation`).
    KeptConversation {
        /// The pane id that names it in the store.
        pane: String,
    },
    /// Read the rows of kept conversations, newest first, after `place`
    /// (`ReceiptStore::conversation_rows`).
    KeptRows {
        /// After this row (`None`: from the newest).
        place: Option<RowPlace>,
        /// At most this many.
        limit: usize,
    },
    /// The read is over: send this.
    Respond(Response),
}

/// What the driver hands back for the last [`HistoryNext`].
#[derive(Debug)]
#[non_exhaustive]
pub enum HistoryInput {
    /// The provider's rows.
    ProviderRows(Result<RowsPage, HistoryError>),
    /// The provider's conversation (`None`: it knows none by that id).
    ProviderItems(Result<Option<ItemsPage>, HistoryError>),
    /// The store's conversation.
    KeptConversation(Result<Option<KeptConversation>, StoreError>),
    /// The store's rows.
    KeptRows(Result<Vec<KeptConversationRow>, StoreError>),
}

/// Where a history read stands, kept by its driver between calls.
#[derive(Debug)]
pub struct HistoryRead {
    session: Option<Id>,
    after: Option<Cursor>,
    limit: usize,
    stage: Stage,
}

#[derive(Debug)]
enum Stage {
    ProviderRows,
    ProviderItems,
    Kept { pane: String },
    Rows(KeptRowsRead),
    Over,
}

/// Where a read of the rows of kept conversations stands: rows left out
/// (open panes without a session id) are made up for from the next ones,
/// so that a page is short only at the end.
#[derive(Debug)]
pub struct KeptRowsRead {
    rows: Vec<HistoryRow>,
    place: Option<RowPlace>,
    limit: usize,
}

/// What a read of the rows of kept conversations needs next.
#[derive(Debug)]
#[non_exhaustive]
pub enum RowsNext {
    /// Read a batch of rows from the store (`ReceiptStore::conversation_rows`).
    Read {
        /// After this row.
        place: Option<RowPlace>,
        /// At most this many.
        limit: usize,
    },
    /// The page, or why there is none (a store that failed: its own error
    /// went to the warn sink, the phone gets a plain message).
    Page(Result<RowsPage, HistoryError>),
}

impl Machine {
    /// Starts a history read: the cap's gate, the paging (`after`, `limit`
    /// in 1..=100), then the source — the provider when the program set one
    /// (`has_provider`), else the SDK's own (an open pane's view, the
    /// store's kept conversations), else `not-supported`.
    pub fn begin_history(
        &mut self,
        req: &Request,
        route: HistoryRoute,
        has_provider: bool,
        now: Timestamp,
    ) -> (HistoryRead, HistoryNext) {
        let mut read = HistoryRead { session: None, after: None, limit: 0, stage: Stage::Over };
        if !self.caps().has(Cap::History) {
            let refused =
                respond::error(ErrorCode::NotSupported, "this agent does not declare the history capability");
            return (read, HistoryNext::Respond(refused));
        }
        if let HistoryRoute::Conversation(segment) = &route {
            match path_id(segment, "session id") {
                Ok(session) => read.session = Some(session),
                Err(e) => return (read, HistoryNext::Respond(e.into())),
            }
        }
        let (after, limit) = match paging(req) {
            Ok(paging) => paging,
            Err(e) => return (read, HistoryNext::Respond(e.into())),
        };
        (read.after, read.limit) = (after.clone(), limit);
        let keeps = self.state.keeps_conversations();
        let next = match (read.session.clone(), has_provider) {
            (None, true) => {
                read.stage = Stage::ProviderRows;
                HistoryNext::ProviderRows { after, limit }
            }
            (Some(session), true) => {
                read.stage = Stage::ProviderItems;
                HistoryNext::ProviderItems { session, after, limit }
            }
            (None, false) if keeps => match self.begin_kept_rows(after.as_ref(), limit) {
                Ok((rows, RowsNext::Read { place, limit })) => {
                    read.stage = Stage::Rows(rows);
                    HistoryNext::KeptRows { place, limit }
                }
                Ok((_, next)) => rows_answer(next),
                Err(e) => HistoryNext::Respond(provider_failed(e)),
            },
            (Some(_), false) if keeps => self.sdk_page(&mut read, now),
            _ => HistoryNext::Respond(no_history()),
        };
        (read, next)
    }

    /// Moves a history read on with what the driver did. An input the read
    /// does not wait for is a driver's mistake: `500`, never a panic.
    pub fn history_step(
        &mut self,
        read: &mut HistoryRead,
        input: HistoryInput,
        now: Timestamp,
    ) -> HistoryNext {
        let stage = std::mem::replace(&mut read.stage, Stage::Over);
        let (after, limit) = (read.after.clone(), read.limit);
        match (stage, input) {
            (Stage::ProviderRows, HistoryInput::ProviderRows(page)) => {
                let mut page = match page {
                    Ok(page) => page,
                    Err(e) => return HistoryNext::Respond(provider_failed(e)),
                };
                page.rows.truncate(limit);
                let rows = page.rows.into_iter().filter_map(|r| self.clean_row(r)).collect();
                let next = page.next.map(Cursor::into_string);
                HistoryNext::Respond(respond::json(200, &HistoryPage { ok: true, rows, next }))
            }
            (Stage::ProviderItems, HistoryInput::ProviderItems(page)) => match page {
                Err(e) => HistoryNext::Respond(provider_failed(e)),
                // The provider knows no conversation by this id: the SDK's
                // own (an open pane's view, else the store's kept one).
                Ok(None) => self.sdk_page(read, now),
                Ok(Some(page)) => HistoryNext::Respond(self.provider_page(read, page)),
            },
            (Stage::Kept { pane }, HistoryInput::KeptConversation(kept)) => {
                let Some(session) = read.session.clone() else {
                    return HistoryNext::Respond(respond::error(
                        ErrorCode::Internal,
                        "a history read without its id",
                    ));
                };
                HistoryNext::Respond(match kept {
                    Err(e) => self.store_failed(&format!("read the conversation {session}"), &e),
                    Ok(None) => respond::not_found(format!("no conversation {session}")),
                    Ok(Some(kept)) => kept_page(&session, &pane, kept, after.as_ref(), limit),
                })
            }
            (Stage::Rows(mut rows), HistoryInput::KeptRows(batch)) => {
                match self.kept_rows_step(&mut rows, batch) {
                    RowsNext::Read { place, limit } => {
                        read.stage = Stage::Rows(rows);
                        HistoryNext::KeptRows { place, limit }
                    }
                    next => rows_answer(next),
                }
            }
            (_, input) => HistoryNext::Respond(respond::error(
                ErrorCode::Internal,
                format!("a history read got {} it did not ask for", input.name()),
            )),
        }
    }

    /// Starts a read of the rows of kept conversations after the phone's
    /// cursor (one this gave: `rows-…`; another is a bad cursor), at most
    /// `limit` of them: 1 to 200, the wire's bound on a history page
    /// (another is an error naming it).
    pub fn begin_kept_rows(
        &self,
        after: Option<&Cursor>,
        limit: usize,
    ) -> Result<(KeptRowsRead, RowsNext), HistoryError> {
        if !(1..=HISTORY_LIMIT_MAX).contains(&limit) {
            return Err(HistoryError::new(format!(
                "limit {limit} is not a page size of history: 1 to {HISTORY_LIMIT_MAX}"
            )));
        }
        let place = match after {
            None => None,
            Some(cursor) => Some(rows_place(cursor).ok_or_else(|| {
                HistoryError::bad_cursor(format!(
                    "after: {} is not a cursor of this history",
                    cursor.as_str()
                ))
            })?),
        };
        let next = RowsNext::Read { place: place.clone(), limit: limit + 1 };
        Ok((KeptRowsRead { rows: Vec::with_capacity(limit), place, limit }, next))
    }

    /// Moves a read of kept rows on with the store's batch (read with at
    /// most `limit + 1` rows, so that one more says a next page exists).
    pub fn kept_rows_step(
        &mut self,
        read: &mut KeptRowsRead,
        batch: Result<Vec<KeptConversationRow>, StoreError>,
    ) -> RowsNext {
        let mut kept = match batch {
            Ok(kept) => kept,
            Err(e) => {
                self.warn(format!(
                    "collie: history could not list the conversations from the receipt store: {e}"
                ));
                let failed = HistoryError::new("the receipt store could not list the conversations");
                return RowsNext::Page(Err(failed));
            }
        };
        let limit = read.limit;
        // The store has rows past this batch's `limit`, or the page fills
        // before the batch ends: either way, rows are left for a next page.
        let mut left = kept.len() > limit;
        kept.truncate(limit);
        let mut batch = kept.into_iter();
        for k in batch.by_ref() {
            read.place = Some(k.place());
            if let Some(row) = row_of(&self.state, k) {
                read.rows.push(row);
            }
            if read.rows.len() == limit {
                break;
            }
        }
        left |= batch.next().is_some();
        if left && read.rows.len() < limit {
            return RowsNext::Read { place: read.place.clone(), limit: limit + 1 };
        }
        let next = match (left, &read.place) {
            (true, Some(last)) => Cursor::new(rows_cursor(last)).ok(),
            _ => None,
        };
        RowsNext::Page(Ok(RowsPage { rows: std::mem::take(&mut read.rows), next }))
    }

    /// `GET /v1/history/{sessionId}` served by the SDK: the open pane with
    /// that session id from its view, else the conversation the receipt
    /// store keeps (a pane this process closed under that session id, or
    /// the pane of that id), as a closed one; else `404`.
    fn sdk_page(&mut self, read: &mut HistoryRead, now: Timestamp) -> HistoryNext {
        let Some(session) = read.session.clone() else {
            return HistoryNext::Respond(respond::error(
                ErrorCode::Internal,
                "a history read without its id",
            ));
        };
        let st = &self.state;
        if st.open_pane_of_session(session.as_str()).is_some() {
            return HistoryNext::Respond(self.open_pane_page(&session, read.after.as_ref(), read.limit, now));
        }
        // An open pane that names no session id, or another one, is not
        // read under its pane id.
        if st.is_open(&session) || !st.keeps_conversations() {
            return HistoryNext::Respond(respond::not_found(format!("no conversation {session}")));
        }
        let pane = st.closed_pane_of_session(session.as_str()).unwrap_or(session.as_str()).to_owned();
        read.stage = Stage::Kept { pane: pane.clone() };
        HistoryNext::KeptConversation { pane }
    }

    /// A provider's page under the item and ID rules.
    fn provider_page(&mut self, read: &HistoryRead, page: ItemsPage) -> Response {
        let session = read.session.as_ref().map_or("", |s| s.as_str());
        let mut items = page.items;
        items.truncate(read.limit);
        // The provider's items meet the same rules as the program's.
        let items = items
            .into_iter()
            .filter_map(|item| match item.sanitized() {
                Ok((item, _)) => Some(item),
                Err(e) => {
                    self.warn(format!(
                        "collie: history left out an item of {session} that breaks a rule: {e}"
                    ));
                    None
                }
            })
            .collect();
        let Some(row) = self.clean_row(page.row) else {
            return respond::error(
                ErrorCode::Internal,
                "the history provider gave a row that breaks the ID rule",
            );
        };
        let next = page.next.map(Cursor::into_string);
        respond::json(200, &ConversationPage { ok: true, row, items, next, dropped: page.dropped })
    }

    /// `GET /v1/history/{sessionId}` for the open pane with that session
    /// id (§10, our decision): its view, the items the events route's
    /// snapshot holds, in order, with a row describing the pane. The
    /// view's items already met the item rules when the program wrote them.
    fn open_pane_page(&self, session: &Id, after: Option<&Cursor>, limit: usize, now: Timestamp) -> Response {
        let Some(pane) = self.state.open_pane_of_session(session.as_str()) else {
            return respond::not_found(format!("no conversation {session}"));
        };
        let from = match after {
            None => 0,
            Some(cursor) => match view_place(cursor) {
                Some(from) => from,
                None => return bad_cursor(cursor, session),
            },
        };
        let (items, next) = pane.view_page(from, limit);
        let tab = pane.tab();
        let row = HistoryRow::open(session.as_str(), pane.title(), pane.started_at().unwrap_or(now))
            .in_tab(tab.ws.as_str(), tab.wire())
            .with_items(pane.view_len() as u64);
        let (next, dropped) = (next.map(|n| format!("{VIEW_CURSOR}{n}")), pane.view_dropped());
        respond::json(200, &ConversationPage { ok: true, row, items, next, dropped })
    }

    /// A provider's row under the rules: its id follows the ID rule (else
    /// it is left out, with a warn line), its title and subtitle are cut to
    /// 256 bytes.
    fn clean_row(&mut self, mut row: HistoryRow) -> Option<HistoryRow> {
        if let Err(e) = durable_types::check_id(&row.id) {
            self.warn(format!("collie: history left out a row whose id breaks the ID rule: {e}"));
            return None;
        }
        sanitize_line(&mut row.title, TITLE_MAX);
        if let Some(subtitle) = &mut row.subtitle {
            sanitize_line(subtitle, TITLE_MAX);
        }
        Some(row)
    }

    /// A `500` for a receipt store that failed a history read: the phone
    /// gets a plain message, the program's warn line the store's own (which
    /// may name where the store lives).
    fn store_failed(&mut self, what: &str, e: &StoreError) -> Response {
        self.warn(format!("collie: history could not {what} from the receipt store: {e}"));
        respond::error(ErrorCode::Internal, format!("history: the receipt store could not {what}"))
    }
}

impl HistoryInput {
    fn name(&self) -> &'static str {
        match self {
            HistoryInput::ProviderRows(_) => "the provider's rows",
            HistoryInput::ProviderItems(_) => "the provider's conversation",
            HistoryInput::KeptConversation(_) => "the store's conversation",
            HistoryInput::KeptRows(_) => "the store's rows",
        }
    }
}

/// The route's answer for a finished read of kept rows.
fn rows_answer(next: RowsNext) -> HistoryNext {
    HistoryNext::Respond(match next {
        RowsNext::Page(Ok(page)) => {
            let next = page.next.map(Cursor::into_string);
            respond::json(200, &HistoryPage { ok: true, rows: page.rows, next })
        }
        RowsNext::Page(Err(e)) => provider_failed(e),
        RowsNext::Read { .. } => respond::error(ErrorCode::Internal, "a rows read answered before its end"),
    })
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

fn bad_cursor(cursor: &Cursor, session: &Id) -> Response {
    respond::error(
        ErrorCode::BadRequest,
        format!("after: {} is not a cursor of the conversation {session}", cursor.as_str()),
    )
}

/// A page of a conversation the store keeps under `pane` and no pane shows
/// now (a pane closed, or not declared again since a restart), served as
/// `session`: a `closed` row, ended when the store last kept a change of it.
fn kept_page(
    session: &Id,
    pane: &str,
    kept: KeptConversation,
    after: Option<&Cursor>,
    limit: usize,
) -> Response {
    let from = match after {
        None => 0,
        Some(cursor) => match cursor
            .as_str()
            .strip_prefix(KEPT_CURSOR)
            .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|n| n.parse::<usize>().ok())
        {
            Some(from) => from,
            None => return bad_cursor(cursor, session),
        },
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
    respond::json(200, &ConversationPage { ok: true, row, items, next, dropped: kept.dropped })
}

/// The row of a kept conversation, as the state stands (`None`: not listed).
/// One a pane shows now is `open`, under the pane's session id, with the
/// pane's title, tab and item count (a pane with no session id is not
/// listed while open); the others are `closed`, under the session id of
/// the pane this process closed, else the pane id (one whose id an open
/// pane uses as its session id is left out: the open pane is what that id
/// reads).
fn row_of(st: &State, k: KeptConversationRow) -> Option<HistoryRow> {
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

/// The place a view cursor (`view-<n>`, digits only) names; `None` for
/// another cursor.
fn view_place(cursor: &Cursor) -> Option<u64> {
    let n = cursor.as_str().strip_prefix(VIEW_CURSOR)?;
    n.bytes().all(|b| b.is_ascii_digit()).then(|| n.parse().ok())?
}
