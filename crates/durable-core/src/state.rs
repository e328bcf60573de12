//! The core's state: layout, panes with their views and event tails, the
//! change sequence the state poll reads, and the open asks.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::Arc;

use durable_types::{
    ActionView, Ask, ClosedView, DecidedBy, Event, EventBody, Id, Item, PaneState, PaneView,
    STATE_SEQ_MEMORY, ScopeId, StarterView, TabView, Timestamp, VIEW_LIMIT, WorkspaceView,
};
use tokio::sync::oneshot;

use crate::asks::{AskClosed, Decided};
use crate::handlers::PaneTakers;
use crate::timers::Timers;

/// What `tab.pane()` was told of the session id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum SessionId {
    /// Nothing: the pane id once a history provider is set, else null.
    Unset,
    /// This id.
    Named(String),
    /// Null: it cannot stay the same after a restart.
    Null,
}

/// A tab's place: workspace id and tab id.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub(crate) struct TabKey {
    pub(crate) ws: ScopeId,
    pub(crate) tab: ScopeId,
}

impl TabKey {
    pub(crate) fn wire(&self) -> String {
        durable_types::tab_wire_id(&self.ws, &self.tab)
    }
}

pub(crate) struct WorkspaceData {
    pub(crate) id: ScopeId,
    pub(crate) title: String,
    pub(crate) tabs: Vec<TabData>,
}

pub(crate) struct TabData {
    pub(crate) id: ScopeId,
    pub(crate) title: String,
    pub(crate) panes: Vec<Id>,
}

/// One pane: its fields, its view and its raw event tail.
pub(crate) struct PaneData {
    pub(crate) id: Id,
    pub(crate) tab: TabKey,
    pub(crate) title: String,
    pub(crate) harness: String,
    pub(crate) cwd: Option<String>,
    pub(crate) session_id: SessionId,
    pub(crate) state: PaneState,
    pub(crate) turn_id: Option<String>,
    pub(crate) last_seq: u64,
    pub(crate) events: VecDeque<Event>,
    pub(crate) view: BTreeMap<u64, Arc<Item>>,
    pub(crate) view_index: HashMap<Id, u64>,
    pub(crate) next_order: u64,
    pub(crate) dropped: bool,
    pub(crate) actions: Vec<ActionView>,
    pub(crate) changed_at: u64,
    pub(crate) warned_partial: bool,
    /// The pane's own handlers (the agent-wide ones serve a pane without).
    pub(crate) takers: PaneTakers,
    pub(crate) turn_cancel: Option<crate::signal::AbortController>,
    /// The running [`Turn`](crate::Turn)'s token and steer inbox.
    pub(crate) turn_inbox: Option<(u64, tokio::sync::mpsc::UnboundedSender<String>)>,
    pub(crate) queued: VecDeque<QueuedSend>,
}

/// A send that arrived during a turn, delivered once the pane goes idle.
pub(crate) struct QueuedSend {
    pub(crate) request_id: Id,
    pub(crate) text: String,
}

impl PaneData {
    pub(crate) fn session_id(&self, has_history: bool) -> Option<String> {
        match (&self.session_id, has_history) {
            (SessionId::Named(s), _) => Some(s.clone()),
            (SessionId::Unset, true) => Some(self.id.to_string()),
            _ => None,
        }
    }

    pub(crate) fn view_item(&self, has_history: bool) -> PaneView {
        PaneView {
            id: self.id.clone(),
            tab: self.tab.wire(),
            title: self.title.clone(),
            harness: self.harness.clone(),
            cwd: self.cwd.clone(),
            session_id: self.session_id(has_history),
            state: self.state,
            turn_id: self.turn_id.clone(),
            last_seq: self.last_seq,
            open_asks: Vec::new(),
            actions: self.actions.clone(),
        }
    }

    /// Appends an event to the tail (trimmed to `tail_limit`).
    pub(crate) fn push_event(&mut self, ts: Timestamp, body: EventBody, tail_limit: usize) {
        self.last_seq += 1;
        if let EventBody::Item { item } = &body {
            self.put_in_view(item.clone());
        }
        self.events.push_back(Event { seq: self.last_seq, ts, body });
        while self.events.len() > tail_limit {
            self.events.pop_front();
        }
    }

    /// Puts an item in the view: in place for a known id, else at the end.
    fn put_in_view(&mut self, item: Arc<Item>) {
        if let Some(order) = self.view_index.get(&item.id) {
            self.view.insert(*order, item);
            return;
        }
        self.next_order += 1;
        self.view_index.insert(item.id.clone(), self.next_order);
        self.view.insert(self.next_order, item);
        while self.view.len() > VIEW_LIMIT {
            if let Some((_, old)) = self.view.pop_first() {
                self.view_index.remove(&old.id);
                self.dropped = true;
            }
        }
    }

    /// The seq of the oldest event still in the tail (last_seq + 1 if none).
    pub(crate) fn first_retained(&self) -> u64 {
        self.events.front().map_or(self.last_seq + 1, |e| e.seq)
    }
}

/// A pane closed by this process, kept so that reopen can restore it.
pub(crate) struct ClosedPane {
    pub(crate) view: ClosedView,
    pub(crate) data: PaneData,
}

/// One open ask.
pub(crate) struct OpenAsk {
    pub(crate) ask: Ask,
    pub(crate) order: u64,
    pub(crate) sender: Option<oneshot::Sender<Result<Decided, AskClosed>>>,
    /// Fires when the ask closes, to end its abort-signal watcher job.
    pub(crate) closed_tx: Option<oneshot::Sender<()>>,
}

/// An answer to an unknown ask, held for a while (§7.1).
pub(crate) struct Hold {
    pub(crate) request_id: Id,
    pub(crate) hash: String,
    pub(crate) answer: durable_types::AnswerBody,
    pub(crate) confirm_always: bool,
    pub(crate) arrived_at: Timestamp,
    pub(crate) expires_at: Timestamp,
}

/// The whole mutable state, behind one lock held only between awaits.
pub(crate) struct State {
    pub(crate) ready: bool,
    pub(crate) seq: u64,
    pub(crate) layout_seq: u64,
    pub(crate) workspaces: Vec<WorkspaceData>,
    pub(crate) panes: HashMap<Id, PaneData>,
    pub(crate) removed: VecDeque<(Id, u64)>,
    pub(crate) closed: Vec<ClosedPane>,
    pub(crate) starters: Vec<StarterView>,
    pub(crate) asks: HashMap<String, OpenAsk>,
    pub(crate) next_ask_order: u64,
    pub(crate) decided: HashMap<String, (DecidedBy, Timestamp, u64)>,
    pub(crate) decided_order: VecDeque<(String, u64)>,
    pub(crate) decided_gen: u64,
    pub(crate) holds: HashMap<String, Hold>,
    pub(crate) hold_by_request: HashMap<Id, String>,
    pub(crate) memory_receipts: HashMap<Id, crate::receipts::Receipt>,
    pub(crate) timers: Timers,
    pub(crate) warned_versions: HashSet<String>,
    pub(crate) has_history: bool,
    /// Whether any chat / action handler was ever set (for the default caps).
    pub(crate) has_chat: bool,
    pub(crate) has_actions: bool,
    pub(crate) has_hooks: bool,
    /// Turn tokens handed out, so an old turn cannot end a newer one.
    pub(crate) turn_tokens: u64,
    /// The last event seq of each pane id closed in this process: a pane
    /// opened again under that id goes on counting from there, so a reader's
    /// `after` keeps its meaning within the epoch.
    pub(crate) seq_floor: HashMap<Id, u64>,
}

/// How many decided ask ids are remembered for `409 ask-closed`.
const DECIDED_MEMORY: usize = 10_000;

impl State {
    pub(crate) fn new() -> Self {
        State {
            ready: false,
            seq: 0,
            layout_seq: 0,
            workspaces: Vec::new(),
            panes: HashMap::new(),
            removed: VecDeque::new(),
            closed: Vec::new(),
            starters: Vec::new(),
            asks: HashMap::new(),
            next_ask_order: 0,
            decided: HashMap::new(),
            decided_order: VecDeque::new(),
            decided_gen: 0,
            holds: HashMap::new(),
            hold_by_request: HashMap::new(),
            memory_receipts: HashMap::new(),
            timers: Timers::default(),
            warned_versions: HashSet::new(),
            has_history: false,
            has_chat: false,
            has_actions: false,
            has_hooks: false,
            turn_tokens: 0,
            seq_floor: HashMap::new(),
        }
    }

    /// Something a poll can see changed: the sequence grows.
    pub(crate) fn bump(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    /// The layout changed (workspaces, tabs, pane membership, closed, starters).
    pub(crate) fn bump_layout(&mut self) {
        self.layout_seq = self.bump();
    }

    /// A pane's field or tail changed.
    pub(crate) fn touch_pane(&mut self, pane: &Id) {
        let seq = self.bump();
        if let Some(p) = self.panes.get_mut(pane) {
            p.changed_at = seq;
        }
    }

    /// Appends an event to a pane and marks it changed.
    pub(crate) fn pane_event(&mut self, pane: &Id, ts: Timestamp, body: EventBody, tail_limit: usize) {
        if let Some(p) = self.panes.get_mut(pane) {
            p.push_event(ts, body, tail_limit);
        }
        self.touch_pane(pane);
    }

    /// Removes the answer held for ask `id`; its request id is free again.
    pub(crate) fn take_hold(&mut self, id: &str) -> Option<Hold> {
        let hold = self.holds.remove(id)?;
        self.hold_by_request.remove(&hold.request_id);
        Some(hold)
    }

    pub(crate) fn remember_decided(&mut self, id: String, by: DecidedBy, at: Timestamp) {
        self.decided_gen += 1;
        let generation = self.decided_gen;
        self.decided.insert(id.clone(), (by, at, generation));
        self.decided_order.push_back((id, generation));
        while self.decided_order.len() > DECIDED_MEMORY {
            // Forget an id only if this is its latest decision.
            if let Some((old, g)) = self.decided_order.pop_front() {
                if self.decided.get(&old).is_some_and(|d| d.2 == g) {
                    self.decided.remove(&old);
                }
            }
        }
    }

    pub(crate) fn record_removed(&mut self, pane: Id) {
        let seq = self.seq;
        self.removed.push_back((pane, seq));
        while self.removed.front().is_some_and(|(_, s)| seq.saturating_sub(*s) > STATE_SEQ_MEMORY) {
            self.removed.pop_front();
        }
    }

    pub(crate) fn open_asks_of(&self, pane: &Id) -> Vec<String> {
        let mut v: Vec<&OpenAsk> = self.asks.values().filter(|a| &a.ask.pane == pane).collect();
        v.sort_by_key(|a| a.order);
        v.into_iter().map(|a| a.ask.id.clone()).collect()
    }

    pub(crate) fn open_asks_sorted(&self) -> Vec<Ask> {
        let mut v: Vec<&OpenAsk> = self.asks.values().collect();
        v.sort_by_key(|a| a.order);
        v.into_iter().map(|a| a.ask.clone()).collect()
    }

    pub(crate) fn workspaces_view(&self) -> Vec<WorkspaceView> {
        self.workspaces
            .iter()
            .map(|w| WorkspaceView {
                id: w.id.to_string(),
                title: w.title.clone(),
                tabs: w
                    .tabs
                    .iter()
                    .map(|t| TabView {
                        id: durable_types::tab_wire_id(&w.id, &t.id),
                        title: t.title.clone(),
                        panes: t.panes.iter().map(|p| p.to_string()).collect(),
                    })
                    .collect(),
            })
            .collect()
    }

    pub(crate) fn find_tab_mut(&mut self, key: &TabKey) -> Option<&mut TabData> {
        self.workspaces.iter_mut().find(|w| w.id == key.ws)?.tabs.iter_mut().find(|t| t.id == key.tab)
    }
}
