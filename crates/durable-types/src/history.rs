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
