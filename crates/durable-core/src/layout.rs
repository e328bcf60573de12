//! The layout, the machine's side: workspaces, tabs and panes opened,
//! renamed and closed, what a pane shows (items, state, actions), and the
//! starters, each checked to the rules. The handles that call these are
//! the program's, in durable-runtime (its `handles/layout.rs`).

use std::path::Path;

use durable_types::text::{clean_line, is_blank, quoted, title_error};
use durable_types::{
    ActionView, EventBody, HARNESS_MAX, Id, Item, PaneState, RuleError, ScopeId, TITLE_MAX, Timestamp,
};

use crate::machine::Machine;
use crate::state::{PaneFields, SessionId, TabKey};

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

/// How a pane looks: built with [`PaneOptions::new`] and its setters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PaneOptions {
    title: String,
    harness: String,
    cwd: Option<String>,
    session_id: SessionId,
}

impl PaneOptions {
    /// A pane titled `title` (cut to 256 bytes). `Tab::pane`
    /// refuses a title that is empty once cleaned (the title rule).
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

/// The error of a call on a pane that is closed (or was never open).
pub fn closed_pane(pane: &Id) -> RuleError {
    RuleError::closed("pane", format!("pane {pane} is closed"))
}

impl Machine {
    /// The workspace with this id, created with `title` if it does not exist.
    pub fn add_workspace(&mut self, id: &str, title_text: &str) -> Result<ScopeId, RuleError> {
        let id = ScopeId::named("workspace id", id)?;
        let title = title(title_text, || format!("workspace {}", quoted(id.as_str())))?;
        self.state.add_workspace(id.clone(), title);
        Ok(id)
    }

    /// Adds (or relabels) a starter.
    pub fn add_starter(&mut self, id: &str, label: &str) -> Result<(), RuleError> {
        let id = Id::named("starter id", id)?;
        let label = title_field(label, "label", || format!("starter {}", quoted(id.as_str())))?;
        self.state.set_starter(id, label);
        Ok(())
    }

    /// The tab with this id in a workspace, created with `title` if it does
    /// not exist.
    pub fn add_tab(&mut self, ws: &ScopeId, id: &str, title_text: &str) -> Result<TabKey, RuleError> {
        let tab = ScopeId::named("tab id", id)?;
        let key = TabKey { ws: ws.clone(), tab };
        let title = title(title_text, || format!("tab {}", quoted(&key.wire())))?;
        if !self.state.add_tab(&key, title) {
            return Err(RuleError::closed("workspace", format!("workspace {ws} is closed")));
        }
        Ok(key)
    }

    pub fn rename_workspace(&mut self, ws: &ScopeId, title_text: &str) -> Result<(), RuleError> {
        let title = title(title_text, || format!("workspace {}", quoted(ws.as_str())))?;
        if !self.state.rename_workspace(ws, title) {
            return Err(RuleError::closed("workspace", format!("workspace {ws} is closed")));
        }
        Ok(())
    }

    pub fn rename_tab(&mut self, key: &TabKey, title_text: &str) -> Result<(), RuleError> {
        let title = title(title_text, || format!("tab {}", quoted(&key.wire())))?;
        if !self.state.rename_tab(key, title) {
            return Err(RuleError::closed("tab", format!("tab {} is closed", key.wire())));
        }
        Ok(())
    }

    /// The pane with this id: the open one, else a new pane in the tab.
    /// The ids and the title are checked whether or not it is open.
    pub fn add_pane(&mut self, key: &TabKey, id: &str, options: PaneOptions) -> Result<Id, RuleError> {
        let id = Id::named("pane id", id)?;
        if let SessionId::Named(s) = &options.session_id {
            Id::named("session id", s.as_str())?;
        }
        let title = title(&options.title, || format!("pane {}", quoted(id.as_str())))?;
        if self.state.is_open(&id) {
            return Ok(id);
        }
        let fields = PaneFields {
            title,
            harness: clean_line(&options.harness, HARNESS_MAX).text,
            cwd: options.cwd.filter(|c| Path::new(c).is_absolute() || c.starts_with('/')),
            session_id: options.session_id,
        };
        if !self.state.add_pane(key, id.clone(), fields) {
            return Err(RuleError::closed("tab", format!("tab {} is closed", key.wire())));
        }
        Ok(id)
    }

    /// Keeps `items` (sanitized by the caller), oldest first, under
    /// `title_text` as the conversation of `pane`, a pane this run has not
    /// declared ([`State::import_conversation`](crate::state::State::import_conversation)).
    /// A bad pane id or title is an `Err` of its rule.
    pub fn import_conversation(
        &mut self,
        pane: &str,
        title_text: &str,
        items: Vec<Item>,
    ) -> Result<bool, RuleError> {
        let id = Id::named("pane id", pane)?;
        let title = title(title_text, || format!("pane {}", quoted(id.as_str())))?;
        self.state.import_conversation(&id, title, items)
    }

    /// Removes a pane from the layout (closing its asks as aborted) and keeps
    /// it in the closed list. Returns whether it was open.
    pub fn close_pane(&mut self, pane: &Id, now: Timestamp) -> bool {
        self.abort_asks_of(pane, now);
        if !self.state.close_pane(pane) {
            return false;
        }
        self.state.writes_pane_closed(pane);
        true
    }

    /// Puts back a pane this process closed. Returns whether it could.
    pub fn restore_pane(&mut self, pane: &Id, now: Timestamp) -> bool {
        self.state.restore_pane(pane, now)
    }

    /// Closes a tab and its panes. Returns whether it was open.
    pub fn close_tab(&mut self, key: &TabKey, now: Timestamp) -> bool {
        let Some(panes) = self.state.tab_panes(key) else { return false };
        for p in panes {
            self.close_pane(&p, now);
        }
        self.state.remove_tab(key);
        true
    }

    /// Closes a workspace and everything in it. Returns whether it was open.
    pub fn close_workspace(&mut self, ws: &ScopeId, now: Timestamp) -> bool {
        let Some(tabs) = self.state.workspace_tabs(ws) else { return false };
        for tab in tabs {
            self.close_tab(&TabKey { ws: ws.clone(), tab }, now);
        }
        self.state.remove_workspace(ws);
        true
    }

    /// Writes an item (sanitized by the caller) into an open pane.
    pub fn write_item(&mut self, pane: &Id, item: Item, now: Timestamp) -> Result<(), RuleError> {
        if !self.state.is_open(pane) {
            return Err(closed_pane(pane));
        }
        self.state.pane_event(pane, now, EventBody::Item { item: item.into() });
        Ok(())
    }

    /// Sets a pane's state and turn. Going idle finalizes items still
    /// marked partial, with one warn line.
    pub fn set_pane_state(
        &mut self,
        pane: &Id,
        state: PaneState,
        turn_id: Option<&str>,
        now: Timestamp,
    ) -> Result<(), RuleError> {
        let turn = turn_id.map(|t| Id::named("turn id", t)).transpose()?.map(Id::into_string);
        let finalized = self.state.set_pane_state(pane, state, turn, now).ok_or_else(|| closed_pane(pane))?;
        if !finalized.is_empty() {
            self.warn(format!(
                "collie: pane {} went idle with partial items ({}); the SDK finalized them. Write each once more without partial before the turn ends.",
                pane,
                finalized.join(", ")
            ));
        }
        Ok(())
    }

    /// Adds or replaces an action button of an open pane.
    pub fn set_action(
        &mut self,
        pane: &Id,
        id: &str,
        label: &str,
        icon: Option<&str>,
    ) -> Result<(), RuleError> {
        let id = Id::named("action id", id)?;
        let label = title_field(label, "label", || {
            format!("action {} of pane {}", quoted(id.as_str()), quoted(pane.as_str()))
        })?;
        let view = ActionView { id, label, icon: icon.map(str::to_owned) };
        self.state.set_action(pane, view).then_some(()).ok_or_else(|| closed_pane(pane))
    }

    /// Renames a pane: `Ok(false)` when it is not open, an `Err` when the
    /// title is empty once cleaned (the title rule).
    pub fn rename_pane(&mut self, pane: &Id, title_text: &str, now: Timestamp) -> Result<bool, RuleError> {
        let title = title(title_text, || format!("pane {}", quoted(pane.as_str())))?;
        Ok(self.state.rename_pane(pane, title, now, false))
    }

    /// Renames a pane as the phone asked (its rename hook accepted): kept
    /// as the phone's title, offered back after a restart (§9.2).
    pub fn rename_pane_from_phone(
        &mut self,
        pane: &Id,
        title_text: &str,
        now: Timestamp,
    ) -> Result<bool, RuleError> {
        let title = title(title_text, || format!("pane {}", quoted(pane.as_str())))?;
        Ok(self.state.rename_pane(pane, title, now, true))
    }
}
