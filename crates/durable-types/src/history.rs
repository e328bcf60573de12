//! History: the agent's own store of conversations (§10).

use serde::{Deserialize, Serialize};

use crate::{Item, Timestamp};

/// Whether a conversation is open or closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum ConversationState {
    /// Open.
    Open,
    /// Closed.
    Closed,
}

/// One conversation in the history list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HistoryRow {
    /// The session id.
    pub id: String,
    /// The title.
    pub title: String,
    /// A second line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subtitle: Option<String>,
    /// The workspace it belongs to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace_id: Option<String>,
    /// The tab it belongs to (wire id).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tab_id: Option<String>,
    /// When it started.
    pub started_at: Timestamp,
    /// When it ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<Timestamp>,
    /// Open or closed.
    pub state: ConversationState,
    /// How many items it has.
    pub items: u64,
}

impl HistoryRow {
    /// An open conversation that started at `started_at`, with no items
    /// yet; the `with_*` and [`closed`](Self::closed) methods fill the rest.
    ///
    /// ```
    /// use durable_sdk::history::{ConversationState, HistoryRow};
    /// use durable_sdk::types::Timestamp;
    /// let row = HistoryRow::open("orders", "Orders", Timestamp::EPOCH).in_tab("shop", "shop:main").with_items(3);
    /// assert_eq!((row.state, row.items, row.tab_id.as_deref()), (ConversationState::Open, 3, Some("shop:main")));
    /// let ended = row.closed(Timestamp::from_millis(5));
    /// assert_eq!((ended.state, ended.ended_at), (ConversationState::Closed, Some(Timestamp::from_millis(5))));
    /// ```
    pub fn open(id: impl Into<String>, title: impl Into<String>, started_at: Timestamp) -> Self {
        HistoryRow {
            id: id.into(),
            title: title.into(),
            subtitle: None,
            workspace_id: None,
            tab_id: None,
            started_at,
            ended_at: None,
            state: ConversationState::Open,
            items: 0,
        }
    }

    /// Closed, having ended at `ended_at`.
    pub fn closed(mut self, ended_at: Timestamp) -> Self {
        self.state = ConversationState::Closed;
        self.ended_at = Some(ended_at);
        self
    }

    /// In this workspace and tab (the tab's wire id, `<workspace>:<tab>`).
    pub fn in_tab(mut self, workspace_id: impl Into<String>, tab_id: impl Into<String>) -> Self {
        self.workspace_id = Some(workspace_id.into());
        self.tab_id = Some(tab_id.into());
        self
    }

    /// With this many items.
    pub fn with_items(mut self, items: u64) -> Self {
        self.items = items;
        self
    }

    /// With a second line.
    pub fn with_subtitle(mut self, subtitle: impl Into<String>) -> Self {
        self.subtitle = Some(subtitle.into());
        self
    }
}

/// `GET /v1/history`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistoryPage {
    /// Always true.
    pub ok: bool,
    /// The rows.
    pub rows: Vec<HistoryRow>,
    /// The cursor of the next page; absent at the end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next: Option<String>,
}

/// `GET /v1/history/{sessionId}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConversationPage {
    /// Always true.
    pub ok: bool,
    /// The conversation's row.
    pub row: HistoryRow,
    /// Its items, in order.
    pub items: Vec<Item>,
    /// The cursor of the next page; absent at the end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next: Option<String>,
    /// True when the agent no longer keeps the oldest items.
    pub dropped: bool,
}
