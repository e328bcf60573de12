//! The program's side of the layout: [`Workspace`], [`Tab`] and [`Pane`]
//! handles, and what a pane shows (items, state, actions, title).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::fmt;
use std::path::Path;
use std::sync::Arc;

use durable_types::text::clean_line;
use durable_types::{
    ActionView, Answer, AskSpec, ClosedView, EventBody, HARNESS_MAX, Id, Item, PaneState, RuleError, ScopeId,
    TITLE_MAX,
};

use crate::asks::AskHandle;
use crate::core::Core;
use crate::handlers::{ActionHandler, ChatHandler};
use crate::signal::AbortSignal;
use crate::state::{ClosedPane, PaneData, SessionId, State, TabData, TabKey, WorkspaceData};

/// Closed panes kept for reopen (and listed in the state's `closed`).
const CLOSED_MEMORY: usize = 500;

fn title(s: &str) -> String {
    clean_line(s, TITLE_MAX).text
}

/// A workspace handle: a group of tabs on the phone.
#[derive(Clone)]
pub struct Workspace {
    core: Core,
    id: ScopeId,
}

/// A tab handle: a group of panes, named `<workspace>:<tab>` on the wire.
#[derive(Clone)]
pub struct Tab {
    core: Core,
    key: TabKey,
}

/// A pane handle: one conversation on the phone.
#[derive(Clone)]
pub struct Pane {
    core: Core,
    id: Id,
}

impl fmt::Debug for Workspace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Workspace").field(&self.id).finish()
    }
}

impl fmt::Debug for Tab {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Tab").field(&self.key.wire()).finish()
    }
}

impl fmt::Debug for Pane {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Pane").field(&self.id).finish()
    }
}

/// How a pane looks: built with [`PaneOptions::new`] and its setters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PaneOptions {
    title: String,
    harness: String,
    cwd: Option<String>,
    session_id: SessionId,
}

impl PaneOptions {
    /// A pane titled `title` (cut to 256 bytes).
    pub fn new(title: impl Into<String>) -> Self {
        PaneOptions { title: title.into(), harness: String::new(), cwd: None, session_id: SessionId::Unset }
    }

    /// The harness name (cut to 64 bytes).
    pub fn harness(mut self, harness: impl Into<String>) -> Self {
        self.harness = harness.into();
        self
    }

    /// The working folder; sent only when absolute.
    pub fn cwd(mut self, cwd: impl Into<String>) -> Self {
        self.cwd = Some(cwd.into());
        self
    }

    /// The session id history serves this conversation under (default: the
    /// pane id once a history provider is set).
    pub fn session_id(mut self, id: impl Into<String>) -> Self {
        self.session_id = SessionId::Named(id.into());
        self
    }

    /// No session id: the conversation cannot keep one across a restart.
    pub fn no_session_id(mut self) -> Self {
        self.session_id = SessionId::Null;
        self
    }
}

impl Core {
    /// The workspace with this id, created with `title` if it does not exist.
    /// An id breaking the ID rule (or holding `:`) is an `Err`.
    pub fn workspace(&self, id: &str, title_text: &str) -> Result<Workspace, RuleError> {
        let id = ScopeId::new(id)?;
        let mut st = self.lock();
        if !st.workspaces.iter().any(|w| w.id == id) {
            st.workspaces.push(WorkspaceData { id: id.clone(), title: title(title_text), tabs: Vec::new() });
            st.bump_layout();
        }
        Ok(Workspace { core: self.clone(), id })
    }

    /// A handle to an open pane, if there is one with this id.
    pub fn pane(&self, id: &str) -> Option<Pane> {
        let id = Id::new(id).ok()?;
        self.lock().panes.contains_key(&id).then(|| Pane { core: self.clone(), id })
    }

    /// Adds (or relabels) a starter: a button on the phone that starts a new
    /// conversation through the `on_starter` hook.
    pub fn starter(&self, id: &str, label: &str) -> Result<(), RuleError> {
        let id = Id::new(id)?;
        let label = title(label);
        let mut st = self.lock();
        match st.starters.iter_mut().find(|s| s.id == id) {
            Some(s) => s.label = label,
            None => st.starters.push(durable_types::StarterView { id, label }),
        }
        st.bump_layout();
        Ok(())
    }

    /// Removes a starter.
    pub fn remove_starter(&self, id: &str) {
        let mut st = self.lock();
        let before = st.starters.len();
        st.starters.retain(|s| s.id != id);
        if st.starters.len() != before {
            st.bump_layout();
        }
    }

    /// Removes a pane from the layout (closing its asks as aborted) and keeps
    /// it in the closed list. Returns whether it was open.
    pub(crate) fn close_pane_locked(&self, st: &mut State, pane: &Id) -> bool {
        let now = self.now();
        self.abort_asks_of(st, pane, now);
        let Some(mut data) = st.panes.remove(pane) else { return false };
        self.shared.writes.remove(pane);
        if let Some(c) = data.turn_cancel.take() {
            c.abort();
        }
        if let Some(tab) = st.find_tab_mut(&data.tab) {
            tab.panes.retain(|p| p != pane);
        }
        let view = ClosedView {
            id: pane.to_string(),
            title: data.title.clone(),
            session_id: data.session_id(st.has_history),
        };
        st.seq_floor.insert(pane.clone(), data.last_seq);
        st.closed.retain(|c| c.view.id != pane.as_str());
        st.closed.push(ClosedPane { view, data });
        if st.closed.len() > CLOSED_MEMORY {
            // The oldest is forgotten: reopening it needs the on_reopen hook.
            st.closed.remove(0);
        }
        st.bump_layout();
        st.record_removed(pane.clone());
        true
    }

    /// Puts back a pane this process closed. Returns whether it could.
    pub(crate) fn restore_pane_locked(&self, st: &mut State, pane: &Id) -> bool {
        let Some(pos) = st.closed.iter().position(|c| c.view.id == pane.as_str()) else { return false };
        if st.panes.contains_key(pane) {
            return false;
        }
        let key = st.closed[pos].data.tab.clone();
        if st.find_tab_mut(&key).is_none() {
            // Its tab is gone too: bring the tab (and workspace) back.
            if !st.workspaces.iter().any(|w| w.id == key.ws) {
                st.workspaces.push(WorkspaceData {
                    id: key.ws.clone(),
                    title: key.ws.to_string(),
                    tabs: Vec::new(),
                });
            }
            if let Some(w) = st.workspaces.iter_mut().find(|w| w.id == key.ws) {
                w.tabs.push(TabData { id: key.tab.clone(), title: key.tab.to_string(), panes: Vec::new() });
            }
        }
        let closed = st.closed.remove(pos);
        let mut data = closed.data;
        let was_working = data.state == PaneState::Working;
        data.state = PaneState::Idle;
        let turn_id = data.turn_id.clone();
        if let Some(tab) = st.find_tab_mut(&key) {
            tab.panes.push(pane.clone());
        }
        st.panes.insert(pane.clone(), data);
        st.bump_layout();
        st.touch_pane(pane);
        if was_working {
            // Its turn ended with the close: the tail says so too.
            let (now, tail) = (self.now(), self.shared.options.tail_limit);
            st.pane_event(pane, now, EventBody::State { state: PaneState::Idle, turn_id }, tail);
        }
        true
    }
}

impl Workspace {
    /// The workspace id.
    pub fn id(&self) -> &str {
        self.id.as_str()
    }

    /// The tab with this id, created with `title` if it does not exist.
    pub fn tab(&self, id: &str, title_text: &str) -> Result<Tab, RuleError> {
        let tab = ScopeId::new(id)?;
        let mut st = self.core.lock();
        let ws = st
            .workspaces
            .iter_mut()
            .find(|w| w.id == self.id)
            .ok_or_else(|| RuleError::closed("workspace", format!("workspace {} is closed", self.id)))?;
        if !ws.tabs.iter().any(|t| t.id == tab) {
            ws.tabs.push(TabData { id: tab.clone(), title: title(title_text), panes: Vec::new() });
            st.bump_layout();
        }
        Ok(Tab { core: self.core.clone(), key: TabKey { ws: self.id.clone(), tab } })
    }

    /// Renames the workspace.
    pub fn rename(&self, title_text: &str) {
        let mut st = self.core.lock();
        if let Some(w) = st.workspaces.iter_mut().find(|w| w.id == self.id) {
            w.title = title(title_text);
            st.bump_layout();
        }
    }

    /// Closes the workspace and everything in it.
    pub fn close(&self) {
        let mut st = self.core.lock();
        self.core.close_workspace_locked(&mut st, &self.id);
    }
}

impl Tab {
    /// The tab's wire id, `<workspace>:<tab>`.
    pub fn id(&self) -> String {
        self.key.wire()
    }

    /// The pane with this id: the existing one if the id is open (so a
    /// conversation shown twice gets no second pane), else a new pane in
    /// this tab.
    pub fn pane(&self, id: &str, options: PaneOptions) -> Result<Pane, RuleError> {
        let id = Id::new(id)?;
        if let SessionId::Named(s) = &options.session_id {
            Id::new(s.as_str()).map_err(|e| e.with_context("sessionId"))?;
        }
        let mut st = self.core.lock();
        if st.panes.contains_key(&id) {
            return Ok(Pane { core: self.core.clone(), id });
        }
        let tab = st
            .find_tab_mut(&self.key)
            .ok_or_else(|| RuleError::closed("tab", format!("tab {} is closed", self.key.wire())))?;
        tab.panes.push(id.clone());
        let cwd = options.cwd.filter(|c| Path::new(c).is_absolute() || c.starts_with('/'));
        let data = PaneData {
            id: id.clone(),
            tab: self.key.clone(),
            title: title(&options.title),
            harness: clean_line(&options.harness, HARNESS_MAX).text,
            cwd,
            session_id: options.session_id,
            state: PaneState::Idle,
            turn_id: None,
            last_seq: st.seq_floor.get(&id).copied().unwrap_or(0),
            events: VecDeque::new(),
            view: BTreeMap::new(),
            view_index: HashMap::new(),
            next_order: 0,
            dropped: false,
            actions: Vec::new(),
            changed_at: 0,
            warned_partial: false,
            takers: Default::default(),
            turn_inbox: None,
            turn_cancel: None,
            queued: VecDeque::new(),
        };
        st.closed.retain(|c| c.view.id != id.as_str());
        st.panes.insert(id.clone(), data);
        st.bump_layout();
        st.touch_pane(&id);
        Ok(Pane { core: self.core.clone(), id })
    }

    /// Renames the tab.
    pub fn rename(&self, title_text: &str) {
        let mut st = self.core.lock();
        if let Some(t) = st.find_tab_mut(&self.key) {
            t.title = title(title_text);
            st.bump_layout();
        }
    }

    /// Closes the tab and its panes.
    pub fn close(&self) {
        let mut st = self.core.lock();
        self.core.close_tab_locked(&mut st, &self.key);
    }
}

impl Core {
    pub(crate) fn close_tab_locked(&self, st: &mut State, key: &TabKey) -> bool {
        let Some(panes) = st.find_tab_mut(key).map(|t| t.panes.clone()) else { return false };
        for p in panes {
            self.close_pane_locked(st, &p);
        }
        if let Some(w) = st.workspaces.iter_mut().find(|w| w.id == key.ws) {
            w.tabs.retain(|t| t.id != key.tab);
        }
        st.bump_layout();
        true
    }

    pub(crate) fn close_workspace_locked(&self, st: &mut State, ws: &ScopeId) -> bool {
        let Some(tabs) = st
            .workspaces
            .iter()
            .find(|w| &w.id == ws)
            .map(|w| w.tabs.iter().map(|t| t.id.clone()).collect::<Vec<_>>())
        else {
            return false;
        };
        for tab in tabs {
            self.close_tab_locked(st, &TabKey { ws: ws.clone(), tab });
        }
        st.workspaces.retain(|w| &w.id != ws);
        st.bump_layout();
        true
    }
}

impl Pane {
    /// The pane id.
    pub fn id(&self) -> &str {
        self.id.as_str()
    }

    /// The core this pane belongs to.
    pub fn core(&self) -> &Core {
        &self.core
    }

    /// The session id history serves this pane under (`None`: null).
    pub fn session_id(&self) -> Option<String> {
        let st = self.core.lock();
        st.panes.get(&self.id).map(|p| p.session_id(st.has_history)).unwrap_or(None)
    }

    /// The running turn, or the last one.
    pub fn turn_id(&self) -> Option<String> {
        self.core.lock().panes.get(&self.id).and_then(|p| p.turn_id.clone())
    }

    /// The pane's state.
    pub fn current_state(&self) -> PaneState {
        self.core.lock().panes.get(&self.id).map(|p| p.state).unwrap_or_default()
    }

    /// The ids of the pane's open asks, oldest first.
    pub fn open_asks(&self) -> Vec<String> {
        self.core.lock().open_asks_of(&self.id)
    }

    /// Whether the pane is still open.
    pub fn is_open(&self) -> bool {
        self.core.lock().panes.contains_key(&self.id)
    }

    fn closed_err(&self) -> RuleError {
        RuleError::closed("pane", format!("pane {} is closed", self.id))
    }

    /// Writes an item: a new id is added at the end of the view, a known id
    /// replaces the earlier item in place. Text is sanitized and cut to its
    /// kind's limit; a bad `lang`, `href`, `badge` or `progress` is an `Err`.
    pub fn write(&self, item: Item) -> Result<(), RuleError> {
        let (item, _) = item.sanitized()?;
        let now = self.core.now();
        let tail = self.core.options().tail_limit;
        let mut st = self.core.lock();
        if !st.panes.contains_key(&self.id) {
            return Err(self.closed_err());
        }
        st.pane_event(&self.id, now, EventBody::Item { item: item.into() }, tail);
        Ok(())
    }

    /// Sets the pane's state and turn. Going idle finalizes items still
    /// marked partial (with one warning) and delivers a queued send.
    pub fn state(&self, state: PaneState, turn_id: Option<&str>) -> Result<(), RuleError> {
        let turn = turn_id.map(Id::new).transpose()?.map(Id::into_string);
        let now = self.core.now();
        let tail = self.core.options().tail_limit;
        let mut warn = None;
        {
            let mut st = self.core.lock();
            let pane = st.panes.get_mut(&self.id).ok_or_else(|| self.closed_err())?;
            if state == PaneState::Idle {
                let partial: Vec<Item> = pane
                    .view
                    .values()
                    .filter(|i| i.body.is_partial())
                    .map(|i| Item::clone(i))
                    .map(|mut i| {
                        i.body.finalize();
                        i
                    })
                    .collect();
                if !partial.is_empty() && !pane.warned_partial {
                    pane.warned_partial = true;
                    let ids: Vec<String> = partial.iter().map(|i| i.id.to_string()).collect();
                    warn = Some(format!(
                        "collie: pane {} went idle with partial items ({}); the SDK finalized them. Write each once more without partial before the turn ends.",
                        self.id,
                        ids.join(", ")
                    ));
                }
                for item in partial {
                    st.pane_event(&self.id, now, EventBody::Item { item: item.into() }, tail);
                }
            }
            let pane = st.panes.get_mut(&self.id).ok_or_else(|| self.closed_err())?;
            pane.state = state;
            if turn.is_some() {
                pane.turn_id = turn;
            }
            let turn_id = pane.turn_id.clone();
            st.pane_event(&self.id, now, EventBody::State { state, turn_id }, tail);
        }
        if let Some(w) = warn {
            self.core.warn(&w);
        }
        if state == PaneState::Idle {
            self.core.deliver_queued(&self.id);
        }
        Ok(())
    }

    /// Starts a turn: state `working` with this turn id.
    pub fn working(&self, turn_id: &str) -> Result<(), RuleError> {
        self.state(PaneState::Working, Some(turn_id))
    }

    /// Ends the turn: state `idle`.
    pub fn idle(&self) -> Result<(), RuleError> {
        self.state(PaneState::Idle, None)
    }

    /// Adds or replaces an action button. `icon` is one of
    /// [`ICON_NAMES`](durable_types::ICON_NAMES); any other name is sent
    /// but draws no icon.
    pub fn action(&self, id: &str, label: &str, icon: Option<&str>) -> Result<(), RuleError> {
        let id = Id::new(id)?;
        let view = ActionView { id: id.clone(), label: title(label), icon: icon.map(str::to_owned) };
        let mut st = self.core.lock();
        let pane = st.panes.get_mut(&self.id).ok_or_else(|| self.closed_err())?;
        match pane.actions.iter_mut().find(|a| a.id == id) {
            Some(a) => *a = view,
            None => pane.actions.push(view),
        }
        st.touch_pane(&self.id);
        Ok(())
    }

    /// Removes an action button.
    pub fn remove_action(&self, id: &str) {
        let mut st = self.core.lock();
        if let Some(p) = st.panes.get_mut(&self.id) {
            p.actions.retain(|a| a.id != id);
            st.touch_pane(&self.id);
        }
    }

    /// Renames the pane (a `title` event).
    pub fn rename(&self, title_text: &str) -> Result<(), RuleError> {
        let now = self.core.now();
        let mut st = self.core.lock();
        self.core
            .rename_pane_locked(&mut st, &self.id, title_text, now)
            .then_some(())
            .ok_or_else(|| self.closed_err())
    }

    /// Closes the pane: its open asks close as aborted, and it moves to the
    /// closed list (the phone may reopen it while this process runs).
    pub fn close(&self) {
        let mut st = self.core.lock();
        self.core.close_pane_locked(&mut st, &self.id);
    }

    /// Sets what runs when the phone sends text to this pane (its turns,
    /// steers and stops); it wins over the agent-wide one
    /// ([`Core::on_send`]). Turns on the `send`, `steer` and `abort` caps when
    /// caps are not given.
    pub fn on_send(&self, handler: impl ChatHandler) -> Result<(), RuleError> {
        let mut st = self.core.lock();
        let pane = st.panes.get_mut(&self.id).ok_or_else(|| self.closed_err())?;
        pane.takers.chat = Some(Arc::new(handler));
        st.has_chat = true;
        Ok(())
    }

    /// Sets what runs when the phone presses one of this pane's action
    /// buttons; it wins over the agent-wide one ([`Core::on_action`]). Turns
    /// on the `actions` and `abort` caps when caps are not given.
    pub fn on_action(&self, handler: impl ActionHandler) -> Result<(), RuleError> {
        let mut st = self.core.lock();
        let pane = st.panes.get_mut(&self.id).ok_or_else(|| self.closed_err())?;
        pane.takers.actions = Some(Arc::new(handler));
        st.has_actions = true;
        Ok(())
    }

    /// Raises an ask at once and returns its awaitable. The id is
    /// `ask_id_for(pane, tool_call_id)`; raising an id already open, or a bad
    /// ask, is an `Err`.
    pub fn ask(&self, spec: AskSpec) -> Result<AskHandle, RuleError> {
        self.core.raise_ask(&self.id, spec, None)
    }

    /// [`ask`](Self::ask) with an abort signal: aborting closes the ask
    /// (`decidedBy: program`, outcome `aborted`).
    pub fn ask_with(&self, spec: AskSpec, signal: Option<AbortSignal>) -> Result<AskHandle, RuleError> {
        self.core.raise_ask(&self.id, spec, signal)
    }

    /// Decides an open ask with an answer from the program (another channel
    /// answered): `decidedBy: program`; the ask's awaitable gets the answer.
    pub fn decide(&self, ask_id: &str, answer: Answer) -> Result<(), RuleError> {
        self.core.decide_by_program(&self.id, ask_id, answer)
    }
}

impl Core {
    pub(crate) fn rename_pane_locked(
        &self,
        st: &mut State,
        pane: &Id,
        title_text: &str,
        now: durable_types::Timestamp,
    ) -> bool {
        let tail = self.shared.options.tail_limit;
        let t = title(title_text);
        let Some(p) = st.panes.get_mut(pane) else { return false };
        p.title = t.clone();
        st.pane_event(pane, now, EventBody::Title { title: t }, tail);
        true
    }
}

impl Pane {
    pub(crate) fn from_parts(core: Core, id: Id) -> Pane {
        Pane { core, id }
    }

    pub(crate) fn id_ref(&self) -> &Id {
        &self.id
    }
}

impl Core {
    pub(crate) fn workspace_handle(&self, id: &ScopeId) -> Workspace {
        Workspace { core: self.clone(), id: id.clone() }
    }

    pub(crate) fn tab_handle(&self, key: &TabKey) -> Tab {
        Tab { core: self.clone(), key: key.clone() }
    }
}
