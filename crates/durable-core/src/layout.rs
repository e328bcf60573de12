//! The program's side of the layout: [`Workspace`], [`Tab`] and [`Pane`]
//! handles, and what a pane shows (items, state, actions, title).

use std::fmt;
use std::path::Path;
use std::sync::Arc;

use durable_types::text::{clean_line, is_blank, quoted, title_error};
use durable_types::{
    ActionView, Answer, AskSpec, EventBody, HARNESS_MAX, Id, Item, PaneState, RuleError, ScopeId, TITLE_MAX,
};

use crate::asks::AskHandle;
use crate::core::Core;
use crate::handlers::{ActionHandler, ChatHandler};
use crate::signal::AbortSignal;
use crate::state::{PaneFields, SessionId, State, TabKey};

/// A title (or label) cleaned by the line rule and cut to 256 bytes; one
/// that shows nothing once cleaned (empty, or white space alone) is an
/// `Err` of the title rule naming what it belongs to (`owner`).
fn title(s: &str, owner: impl FnOnce() -> String) -> Result<String, RuleError> {
    title_field(s, "title", owner)
}

/// [`title`] for a `field` other than a title (a button's label).
fn title_field(s: &str, field: &str, owner: impl FnOnce() -> String) -> Result<String, RuleError> {
    let cleaned = clean_line(s, TITLE_MAX).text;
    if is_blank(&cleaned) {
        // The owner's name is made only for the error.
        return Err(title_error(field, &owner()));
    }
    Ok(cleaned)
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
    /// A pane titled `title` (cut to 256 bytes). [`Tab::pane`] refuses a
    /// title that is empty once cleaned (the title rule).
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
    /// An id breaking the ID rule (or holding `:`) is an `Err`, and so is a
    /// title that is empty once cleaned (the title rule).
    pub fn workspace(&self, id: &str, title_text: &str) -> Result<Workspace, RuleError> {
        let id = ScopeId::named("workspace id", id)?;
        let title = title(title_text, || format!("workspace {}", quoted(id.as_str())))?;
        self.lock().add_workspace(id.clone(), title);
        Ok(Workspace { core: self.clone(), id })
    }

    /// A handle to an open pane, if there is one with this id.
    pub fn pane(&self, id: &str) -> Option<Pane> {
        let id = Id::new(id).ok()?;
        self.lock().is_open(&id).then(|| Pane { core: self.clone(), id })
    }

    /// Adds (or relabels) a starter: a button on the phone that starts a new
    /// conversation through the `on_starter` hook. A bad id, or a label
    /// that is empty once cleaned, is an `Err`.
    pub fn starter(&self, id: &str, label: &str) -> Result<(), RuleError> {
        let id = Id::named("starter id", id)?;
        let label = title_field(label, "label", || format!("starter {}", quoted(id.as_str())))?;
        self.lock().set_starter(id, label);
        Ok(())
    }

    /// Removes a starter.
    pub fn remove_starter(&self, id: &str) {
        self.lock().remove_starter(id);
    }

    /// Removes a pane from the layout (closing its asks as aborted) and keeps
    /// it in the closed list. Returns whether it was open.
    pub(crate) fn close_pane_locked(&self, st: &mut State, pane: &Id) -> bool {
        let now = self.now();
        self.abort_asks_of(st, pane, now);
        if !st.close_pane(pane) {
            return false;
        }
        self.shared.writes.remove(pane);
        true
    }

    /// Puts back a pane this process closed. Returns whether it could.
    pub(crate) fn restore_pane_locked(&self, st: &mut State, pane: &Id) -> bool {
        st.restore_pane(pane, self.now())
    }
}

impl Workspace {
    /// The workspace id.
    pub fn id(&self) -> &str {
        self.id.as_str()
    }

    /// The tab with this id, created with `title` if it does not exist. A
    /// bad id, or a title that is empty once cleaned, is an `Err`.
    pub fn tab(&self, id: &str, title_text: &str) -> Result<Tab, RuleError> {
        let tab = ScopeId::named("tab id", id)?;
        let key = TabKey { ws: self.id.clone(), tab };
        let title = title(title_text, || format!("tab {}", quoted(&key.wire())))?;
        if !self.core.lock().add_tab(&key, title) {
            return Err(RuleError::closed("workspace", format!("workspace {} is closed", self.id)));
        }
        Ok(Tab { core: self.core.clone(), key })
    }

    /// Renames the workspace. A title that is empty once cleaned is an
    /// `Err` (the title rule), and so is a workspace that was closed.
    pub fn rename(&self, title_text: &str) -> Result<(), RuleError> {
        let title = title(title_text, || format!("workspace {}", quoted(self.id.as_str())))?;
        if !self.core.lock().rename_workspace(&self.id, title) {
            return Err(RuleError::closed("workspace", format!("workspace {} is closed", self.id)));
        }
        Ok(())
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
    ///
    /// A bad pane or session id, or a title that is empty once cleaned
    /// (`PaneOptions::new("")`), is an `Err`, whether or not the pane is open.
    pub fn pane(&self, id: &str, options: PaneOptions) -> Result<Pane, RuleError> {
        let id = Id::named("pane id", id)?;
        if let SessionId::Named(s) = &options.session_id {
            Id::named("session id", s.as_str())?;
        }
        let title = title(&options.title, || format!("pane {}", quoted(id.as_str())))?;
        let mut st = self.core.lock();
        if st.is_open(&id) {
            return Ok(Pane { core: self.core.clone(), id });
        }
        let fields = PaneFields {
            title,
            harness: clean_line(&options.harness, HARNESS_MAX).text,
            cwd: options.cwd.filter(|c| Path::new(c).is_absolute() || c.starts_with('/')),
            session_id: options.session_id,
        };
        if !st.add_pane(&self.key, id.clone(), fields) {
            return Err(RuleError::closed("tab", format!("tab {} is closed", self.key.wire())));
        }
        Ok(Pane { core: self.core.clone(), id })
    }

    /// Renames the tab. A title that is empty once cleaned is an `Err`
    /// (the title rule), and so is a tab that was closed.
    pub fn rename(&self, title_text: &str) -> Result<(), RuleError> {
        let title = title(title_text, || format!("tab {}", quoted(&self.key.wire())))?;
        if !self.core.lock().rename_tab(&self.key, title) {
            return Err(RuleError::closed("tab", format!("tab {} is closed", self.key.wire())));
        }
        Ok(())
    }

    /// Closes the tab and its panes.
    pub fn close(&self) {
        let mut st = self.core.lock();
        self.core.close_tab_locked(&mut st, &self.key);
    }
}

impl Core {
    pub(crate) fn close_tab_locked(&self, st: &mut State, key: &TabKey) -> bool {
        let Some(panes) = st.tab_panes(key) else { return false };
        for p in panes {
            self.close_pane_locked(st, &p);
        }
        st.remove_tab(key);
        true
    }

    pub(crate) fn close_workspace_locked(&self, st: &mut State, ws: &ScopeId) -> bool {
        let Some(tabs) = st.workspace_tabs(ws) else { return false };
        for tab in tabs {
            self.close_tab_locked(st, &TabKey { ws: ws.clone(), tab });
        }
        st.remove_workspace(ws);
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
        st.pane(&self.id).and_then(|p| p.session_id(st.has_history()))
    }

    /// The running turn, or the last one.
    pub fn turn_id(&self) -> Option<String> {
        self.core.lock().pane(&self.id).and_then(|p| p.turn_id().map(str::to_owned))
    }

    /// The pane's state.
    pub fn current_state(&self) -> PaneState {
        self.core.lock().pane(&self.id).map(|p| p.state()).unwrap_or_default()
    }

    /// The ids of the pane's open asks, oldest first.
    pub fn open_asks(&self) -> Vec<String> {
        self.core.lock().open_asks_of(&self.id)
    }

    /// Whether the pane is still open.
    pub fn is_open(&self) -> bool {
        self.core.lock().is_open(&self.id)
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
        let mut st = self.core.lock();
        if !st.is_open(&self.id) {
            return Err(self.closed_err());
        }
        st.pane_event(&self.id, now, EventBody::Item { item: item.into() });
        Ok(())
    }

    /// Sets the pane's state and turn. Going idle finalizes items still
    /// marked partial (with one warning) and delivers a queued send.
    pub fn state(&self, state: PaneState, turn_id: Option<&str>) -> Result<(), RuleError> {
        let turn = turn_id.map(|t| Id::named("turn id", t)).transpose()?.map(Id::into_string);
        let now = self.core.now();
        let finalized =
            self.core.lock().set_pane_state(&self.id, state, turn, now).ok_or_else(|| self.closed_err())?;
        if !finalized.is_empty() {
            self.core.warn(&format!(
                "collie: pane {} went idle with partial items ({}); the SDK finalized them. Write each once more without partial before the turn ends.",
                self.id,
                finalized.join(", ")
            ));
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
    /// but draws no icon. A bad id, or a label that is empty once cleaned,
    /// is an `Err`.
    pub fn action(&self, id: &str, label: &str, icon: Option<&str>) -> Result<(), RuleError> {
        let id = Id::named("action id", id)?;
        let label = title_field(label, "label", || {
            format!("action {} of pane {}", quoted(id.as_str()), quoted(self.id.as_str()))
        })?;
        let view = ActionView { id, label, icon: icon.map(str::to_owned) };
        self.core.lock().set_action(&self.id, view).then_some(()).ok_or_else(|| self.closed_err())
    }

    /// Removes an action button.
    pub fn remove_action(&self, id: &str) {
        self.core.lock().remove_action(&self.id, id);
    }

    /// Renames the pane (a `title` event). A title that is empty once
    /// cleaned is an `Err` (the title rule), and so is a closed pane.
    pub fn rename(&self, title_text: &str) -> Result<(), RuleError> {
        let now = self.core.now();
        let mut st = self.core.lock();
        self.core
            .rename_pane_locked(&mut st, &self.id, title_text, now)?
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
    /// steers and stops); it wins over the agent-wide one (`Collie::on_send`
    /// in `durable_sdk`; [`Core::on_send`] on a core built by hand). Turns on the `send`, `steer` and `abort` caps when
    /// caps are not given.
    ///
    /// A [`ChatHandler`], or a closure run as each turn, its argument's
    /// type written out (Rust cannot infer it through the trait):
    /// `pane.on_send(|turn: Turn| async move { turn.reply("hi"); })`.
    pub fn on_send(&self, handler: impl ChatHandler) -> Result<(), RuleError> {
        let mut st = self.core.lock();
        let link = st.links().add_chat(Arc::new(handler));
        if st.set_pane_chat(&self.id, link) {
            return Ok(());
        }
        st.links().forget_handler(link);
        Err(self.closed_err())
    }

    /// Sets what runs when the phone presses one of this pane's action
    /// buttons; it wins over the agent-wide one (`Collie::on_action` in
    /// `durable_sdk`; [`Core::on_action`] on a core built by hand). Turns
    /// on the `actions` and `abort` caps when caps are not given.
    ///
    /// An [`ActionHandler`], or a closure, its argument's type written out:
    /// `pane.on_action(|req: ActionRequest| async move { Ok(()) })`; `?` on
    /// the SDK's errors inside it refuses the press with their words.
    pub fn on_action(&self, handler: impl ActionHandler) -> Result<(), RuleError> {
        let mut st = self.core.lock();
        let link = st.links().add_actions(Arc::new(handler));
        if st.set_pane_actions(&self.id, link) {
            return Ok(());
        }
        st.links().forget_handler(link);
        Err(self.closed_err())
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
    /// Renames a pane: `Ok(false)` when it is not open, an `Err` when the
    /// title is empty once cleaned (the title rule).
    pub(crate) fn rename_pane_locked(
        &self,
        st: &mut State,
        pane: &Id,
        title_text: &str,
        now: durable_types::Timestamp,
    ) -> Result<bool, RuleError> {
        let title = title(title_text, || format!("pane {}", quoted(pane.as_str())))?;
        Ok(st.rename_pane(pane, title, now))
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
