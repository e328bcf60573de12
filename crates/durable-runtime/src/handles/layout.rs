//! The program's side of the layout: [`Workspace`], [`Tab`] and [`Pane`]
//! handles, and what a pane shows (items, state, actions, title).

use std::fmt;
use std::sync::Arc;

use durable_types::{Answer, AskSpec, Id, Item, PaneState, RuleError, ScopeId};

use crate::core::Collie;
use crate::handlers::{ActionHandler, ChatHandler};
use crate::handles::asks::AskHandle;
use crate::signal::AbortSignal;
use durable_core::layout::{PaneOptions, closed_pane};
use durable_core::state::TabKey;

/// A workspace handle: a group of tabs on the phone.
#[derive(Clone)]
pub struct Workspace {
    core: Collie,
    id: ScopeId,
}

/// A tab handle: a group of panes, named `<workspace>:<tab>` on the wire.
#[derive(Clone)]
pub struct Tab {
    core: Collie,
    key: TabKey,
}

/// A pane handle: one conversation on the phone.
#[derive(Clone)]
pub struct Pane {
    core: Collie,
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

impl Collie {
    /// The workspace with this id, created with `title` if it does not exist.
    /// An id breaking the ID rule (or holding `:`) is an `Err`, and so is a
    /// title that is empty once cleaned (the title rule).
    pub fn workspace(&self, id: &str, title_text: &str) -> Result<Workspace, RuleError> {
        let id = self.lock().machine_mut().add_workspace(id, title_text)?;
        Ok(Workspace { core: self.inner(), id })
    }

    /// A handle to an open pane, if there is one with this id.
    pub fn pane(&self, id: &str) -> Option<Pane> {
        let id = Id::new(id).ok()?;
        self.lock().is_open(&id).then(|| Pane { core: self.inner(), id })
    }

    /// Adds (or relabels) a starter: a button on the phone that starts a new
    /// conversation through the `on_starter` hook. A bad id, or a label
    /// that is empty once cleaned, is an `Err`.
    pub fn starter(&self, id: &str, label: &str) -> Result<(), RuleError> {
        self.lock().machine_mut().add_starter(id, label)
    }

    /// Removes a starter.
    pub fn remove_starter(&self, id: &str) {
        self.lock().remove_starter(id);
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
        let key = self.core.lock().machine_mut().add_tab(&self.id, id, title_text)?;
        Ok(Tab { core: self.core.clone(), key })
    }

    /// Renames the workspace. A title that is empty once cleaned is an
    /// `Err` (the title rule), and so is a workspace that was closed.
    pub fn rename(&self, title_text: &str) -> Result<(), RuleError> {
        self.core.lock().machine_mut().rename_workspace(&self.id, title_text)
    }

    /// Closes the workspace and everything in it.
    pub fn close(&self) {
        let now = self.core.now();
        self.core.lock().machine_mut().close_workspace(&self.id, now);
    }
}

impl Tab {
    /// The tab's wire id, `<workspace>:<tab>`.
    pub fn id(&self) -> String {
        self.key.wire()
    }

    /// The agent this tab belongs to.
    pub fn collie(&self) -> &Collie {
        &self.core
    }

    /// The pane with this id: the existing one if the id is open (so a
    /// conversation shown twice gets no second pane), else a new pane in
    /// this tab.
    ///
    /// A bad pane or session id, or a title that is empty once cleaned
    /// (`PaneOptions::new("")`), is an `Err`, whether or not the pane is open.
    pub fn pane(&self, id: &str, options: PaneOptions) -> Result<Pane, RuleError> {
        let id = self.core.lock().machine_mut().add_pane(&self.key, id, options)?;
        Ok(Pane { core: self.core.clone(), id })
    }

    /// Renames the tab. A title that is empty once cleaned is an `Err`
    /// (the title rule), and so is a tab that was closed.
    pub fn rename(&self, title_text: &str) -> Result<(), RuleError> {
        self.core.lock().machine_mut().rename_tab(&self.key, title_text)
    }

    /// Closes the tab and its panes.
    pub fn close(&self) {
        let now = self.core.now();
        self.core.lock().machine_mut().close_tab(&self.key, now);
    }
}

impl Pane {
    /// The pane id.
    pub fn id(&self) -> &str {
        self.id.as_str()
    }

    /// The agent this pane belongs to.
    pub fn collie(&self) -> &Collie {
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

    /// Writes an item: a new id is added at the end of the view, a known id
    /// replaces the earlier item in place. Text is sanitized and cut to its
    /// kind's limit; a bad `lang`, `href`, `badge` or `progress` is an `Err`.
    pub fn write(&self, item: Item) -> Result<(), RuleError> {
        let (item, _) = item.sanitized()?;
        let now = self.core.now();
        self.core.lock().machine_mut().write_item(&self.id, item, now)
    }

    /// Sets the pane's state and turn. Going idle finalizes items still
    /// marked partial (with one warning) and delivers a queued send.
    pub fn state(&self, state: PaneState, turn_id: Option<&str>) -> Result<(), RuleError> {
        let now = self.core.now();
        self.core.lock().machine_mut().set_pane_state(&self.id, state, turn_id, now)?;
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
        self.core.lock().machine_mut().set_action(&self.id, id, label, icon)
    }

    /// Removes an action button.
    pub fn remove_action(&self, id: &str) {
        self.core.lock().remove_action(&self.id, id);
    }

    /// Renames the pane (a `title` event). A title that is empty once
    /// cleaned is an `Err` (the title rule), and so is a closed pane.
    pub fn rename(&self, title_text: &str) -> Result<(), RuleError> {
        let now = self.core.now();
        let renamed = self.core.lock().machine_mut().rename_pane(&self.id, title_text, now)?;
        renamed.then_some(()).ok_or_else(|| closed_pane(&self.id))
    }

    /// Closes the pane: its open asks close as aborted, and it moves to the
    /// closed list (the phone may reopen it while this process runs).
    pub fn close(&self) {
        let now = self.core.now();
        self.core.lock().machine_mut().close_pane(&self.id, now);
    }

    /// Sets what runs when the phone sends text to this pane (its turns,
    /// steers and stops); it wins over the agent-wide one (`Collie::on_send`
    /// in `durable_sdk`; [`Collie::on_send`] on a core built by hand). Turns on the `send`, `steer` and `abort` caps when
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
        Err(closed_pane(&self.id))
    }

    /// Sets what runs when the phone presses one of this pane's action
    /// buttons; it wins over the agent-wide one (`Collie::on_action` in
    /// `durable_sdk`; [`Collie::on_action`] on a core built by hand). Turns
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
        Err(closed_pane(&self.id))
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

impl Pane {
    pub(crate) fn from_parts(core: Collie, id: Id) -> Pane {
        Pane { core, id }
    }

    pub(crate) fn id_ref(&self) -> &Id {
        &self.id
    }
}
