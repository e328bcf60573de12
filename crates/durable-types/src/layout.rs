//! The state poll: workspaces, tabs, panes, closed panes, starters (§5).

use serde::{Deserialize, Serialize};

use crate::{Ask, Id, PaneState};

/// A workspace and its tabs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkspaceView {
    /// The workspace id.
    pub id: String,
    /// The title.
    pub title: String,
    /// Its tabs, in order.
    pub tabs: Vec<TabView>,
}

/// A tab and its panes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TabView {
    /// The wire id `<workspace>:<tab>`.
    pub id: String,
    /// The title.
    pub title: String,
    /// Pane ids, in order.
    pub panes: Vec<String>,
}

/// A pane action button.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActionView {
    /// The action id (ID rule).
    pub id: Id,
    /// The label.
    pub label: String,
    /// One of the icon names; any other draws no icon.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub icon: Option<String>,
}

/// A pane in the state poll.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PaneView {
    /// The pane id.
    pub id: Id,
    /// The tab's wire id.
    pub tab: String,
    /// The title (256 B).
    pub title: String,
    /// The harness (64 B).
    pub harness: String,
    /// The working folder, only when absolute.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// The session id, `null` when it cannot stay the same after a restart.
    pub session_id: Option<String>,
    /// `idle` or `working`.
    pub state: PaneState,
    /// The running turn, or the last one.
    pub turn_id: Option<String>,
    /// The pane's last event seq.
    pub last_seq: u64,
    /// The ids of the pane's open asks.
    pub open_asks: Vec<String>,
    /// The pane's actions.
    pub actions: Vec<ActionView>,
}

/// A pane closed in this process, offered for reopening.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClosedView {
    /// The pane id.
    pub id: String,
    /// Its title.
    pub title: String,
    /// Its session id.
    pub session_id: Option<String>,
}

/// A starter: a button that starts a new conversation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StarterView {
    /// The starter id.
    pub id: Id,
    /// The label.
    pub label: String,
}

/// `GET /v1/state` (full, or `since=N`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StateResponse {
    /// Always true.
    pub ok: bool,
    /// The agent's epoch.
    pub epoch: String,
    /// The change sequence.
    pub seq: u64,
    /// Whether the program called `ready()`.
    pub ready: bool,
    /// Whether this is a full answer.
    pub full: bool,
    /// Workspaces: in a full answer, or when the layout changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspaces: Option<Vec<WorkspaceView>>,
    /// Panes: all (full) or those of which a field changed.
    pub panes: Vec<PaneView>,
    /// Pane ids removed since `N` (empty in a full answer).
    pub removed: Vec<String>,
    /// Closed panes: in a full answer, or when the layout changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub closed: Option<Vec<ClosedView>>,
    /// Starters: in a full answer, or when the layout changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub starters: Option<Vec<StarterView>>,
    /// Every open ask, oldest first.
    pub asks: Vec<Ask>,
}
