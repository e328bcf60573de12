//! Events of a pane and the event read (contract §6).

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::{Ask, DecidedBy, Id, Item, Outcome, Timestamp};

/// Whether a pane's turn is running.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum PaneState {
    /// No turn is running.
    #[default]
    Idle,
    /// A turn is running.
    Working,
}

/// One event of a pane's raw tail.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// The pane's event sequence, from 1.
    pub seq: u64,
    /// When it happened.
    pub ts: Timestamp,
    /// What happened.
    #[serde(flatten)]
    pub body: EventBody,
}

/// What an event says.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
#[non_exhaustive]
pub enum EventBody {
    /// An item written (or written again: it replaces the earlier one).
    Item {
        /// The item (shared with the pane's view: one copy for both).
        item: Arc<Item>,
    },
    /// The pane's state changed.
    State {
        /// The state.
        state: PaneState,
        /// The running turn, or the last one; `null` before any.
        #[serde(rename = "turnId")]
        turn_id: Option<String>,
    },
    /// An ask was raised.
    Ask {
        /// The ask (shared with the core's open ask: one copy for both).
        ask: Arc<Ask>,
    },
    /// An ask closed.
    AskClosed {
        /// The ask id.
        #[serde(rename = "askId")]
        ask_id: String,
        /// Who decided.
        #[serde(rename = "decidedBy")]
        decided_by: DecidedBy,
        /// When.
        #[serde(rename = "decidedAt")]
        decided_at: Timestamp,
        /// How.
        outcome: Outcome,
    },
    /// The pane's title changed.
    Title {
        /// The new title.
        title: String,
    },
}

/// `GET /v1/panes/{pane}/events?after=N` when the reader is within the tail.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventsPage {
    /// Always true.
    pub ok: bool,
    /// The pane.
    pub pane: Id,
    /// Always false here.
    pub snapshot: bool,
    /// The seq of the last event returned, or `after` when none is.
    pub next: u64,
    /// The events after `after`, in order.
    pub events: Vec<Event>,
}

/// `GET /v1/panes/{pane}/events?after=N` when the reader fell behind: the
/// pane's current view instead.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PaneSnapshot {
    /// Always true.
    pub ok: bool,
    /// The pane.
    pub pane: Id,
    /// Always true here.
    pub snapshot: bool,
    /// The view: items in order of first appearance, at most 2000.
    pub items: Vec<Item>,
    /// The pane's state.
    pub state: PaneState,
    /// The running or last turn.
    #[serde(rename = "turnId")]
    pub turn_id: Option<String>,
    /// The pane's open asks.
    pub asks: Vec<Ask>,
    /// The pane's last event seq.
    pub next: u64,
    /// True when the view lost its oldest items to the 2000 limit.
    pub dropped: bool,
}
