//! The layout: workspaces, their tabs, each tab's panes in order, and the
//! starters.

use durable_types::{Id, ScopeId, StarterView, TabView, WorkspaceView};

use super::State;
use super::panes::PaneData;

/// A tab's place: workspace id and tab id.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct TabKey {
    pub ws: ScopeId,
    pub tab: ScopeId,
}

impl TabKey {
    pub fn wire(&self) -> String {
        durable_types::tab_wire_id(&self.ws, &self.tab)
    }
}

#[derive(Clone, Debug)]
pub(super) struct WorkspaceData {
    id: ScopeId,
    title: String,
    tabs: Vec<TabData>,
}

#[derive(Clone, Debug)]
pub(super) struct TabData {
    id: ScopeId,
    title: String,
    pub(super) panes: Vec<Id>,
}

impl State {
    pub fn workspaces_view(&self) -> Vec<WorkspaceView> {
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

    /// Open panes in the layout's order: workspaces, tabs, then panes in their tab.
    pub fn panes_in_layout_order(&self) -> impl Iterator<Item = &PaneData> {
        ids_in_layout(&self.workspaces).filter_map(|id| self.panes.get(id).map(|p| &**p))
    }

    /// Learns each pane's place in the layout, if the layout changed since.
    pub fn refresh_layout_order(&mut self) {
        if self.layout_pos_seq != Some(self.layout_seq) {
            let at = self.layout_seq;
            let mut i = 0;
            for id in ids_in_layout(&self.workspaces) {
                if let Some(pane) = self.panes.get_mut(id) {
                    pane.set_layout_pos(at, i);
                    i += 1;
                }
            }
            self.layout_pos_seq = Some(at);
        }
    }

    fn workspace(&self, id: &ScopeId) -> Option<&WorkspaceData> {
        self.workspaces.iter().find(|w| &w.id == id)
    }

    fn workspace_mut(&mut self, id: &ScopeId) -> Option<&mut WorkspaceData> {
        self.workspaces.iter_mut().find(|w| &w.id == id)
    }

    pub(super) fn find_tab_mut(&mut self, key: &TabKey) -> Option<&mut TabData> {
        self.workspace_mut(&key.ws)?.tabs.iter_mut().find(|t| t.id == key.tab)
    }

    pub fn has_workspace(&self, id: &ScopeId) -> bool {
        self.workspace(id).is_some()
    }

    pub fn has_tab(&self, key: &TabKey) -> bool {
        self.workspace(&key.ws).is_some_and(|w| w.tabs.iter().any(|t| t.id == key.tab))
    }

    /// The workspace's tab ids; `None` when it is not open.
    pub fn workspace_tabs(&self, id: &ScopeId) -> Option<Vec<ScopeId>> {
        self.workspace(id).map(|w| w.tabs.iter().map(|t| t.id.clone()).collect())
    }

    /// The tab's pane ids in order; `None` when it is not open.
    pub fn tab_panes(&self, key: &TabKey) -> Option<Vec<Id>> {
        self.workspace(&key.ws)?.tabs.iter().find(|t| t.id == key.tab).map(|t| t.panes.clone())
    }

    /// Adds a workspace unless one with this id is open.
    pub fn add_workspace(&mut self, id: ScopeId, title: String) {
        if !self.has_workspace(&id) {
            self.workspaces.push(WorkspaceData { id, title, tabs: Vec::new() });
            self.bump_layout();
        }
    }

    /// Retitles a workspace; `false` when it is not open.
    pub fn rename_workspace(&mut self, id: &ScopeId, title: String) -> bool {
        let Some(w) = self.workspace_mut(id) else { return false };
        w.title = title;
        self.bump_layout();
        true
    }

    /// Takes a workspace out of the layout (its tabs closed first).
    pub fn remove_workspace(&mut self, id: &ScopeId) {
        self.workspaces.retain(|w| &w.id != id);
        self.bump_layout();
    }

    /// Adds a tab unless one with this key is open. `false`: its workspace
    /// is not open.
    pub fn add_tab(&mut self, key: &TabKey, title: String) -> bool {
        let Some(ws) = self.workspace_mut(&key.ws) else { return false };
        if !ws.tabs.iter().any(|t| t.id == key.tab) {
            ws.tabs.push(TabData { id: key.tab.clone(), title, panes: Vec::new() });
            self.bump_layout();
        }
        true
    }

    /// A pane's tab, brought back (with its workspace) when it is gone:
    /// named after its id, empty.
    pub(super) fn ensure_tab(&mut self, key: &TabKey) {
        if self.has_tab(key) {
            return;
        }
        if !self.has_workspace(&key.ws) {
            self.workspaces.push(WorkspaceData {
                id: key.ws.clone(),
                title: key.ws.to_string(),
                tabs: Vec::new(),
            });
        }
        if let Some(w) = self.workspace_mut(&key.ws) {
            w.tabs.push(TabData { id: key.tab.clone(), title: key.tab.to_string(), panes: Vec::new() });
        }
    }

    /// Retitles a tab; `false` when it is not open.
    pub fn rename_tab(&mut self, key: &TabKey, title: String) -> bool {
        let Some(t) = self.find_tab_mut(key) else { return false };
        t.title = title;
        self.bump_layout();
        true
    }

    /// Takes a tab out of the layout (its panes closed first).
    pub fn remove_tab(&mut self, key: &TabKey) {
        if let Some(w) = self.workspace_mut(&key.ws) {
            w.tabs.retain(|t| t.id != key.tab);
        }
        self.bump_layout();
    }

    // Starters.

    pub fn starters(&self) -> &[StarterView] {
        &self.starters
    }

    pub fn has_starter(&self, id: &Id) -> bool {
        self.starters.iter().any(|s| &s.id == id)
    }

    /// Adds a starter, or relabels the one with this id.
    pub fn set_starter(&mut self, id: Id, label: String) {
        match self.starters.iter_mut().find(|s| s.id == id) {
            Some(s) => s.label = label,
            None => self.starters.push(StarterView { id, label }),
        }
        self.bump_layout();
    }

    pub fn remove_starter(&mut self, id: &str) {
        let before = self.starters.len();
        self.starters.retain(|s| s.id != id);
        if self.starters.len() != before {
            self.bump_layout();
        }
    }
}

/// The pane ids of the layout, workspace by workspace, tab by tab (a free
/// function, so that the panes can be borrowed apart while it runs).
fn ids_in_layout(workspaces: &[WorkspaceData]) -> impl Iterator<Item = &Id> {
    workspaces.iter().flat_map(|w| w.tabs.iter().flat_map(|t| t.panes.iter()))
}
