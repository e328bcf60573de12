//! The desk itself: the layout built from the store, each ticket's handlers
//! (send with a streamed reply, steer, stop, the refund action), and the
//! agent-wide hooks that keep renames, closes, reopens and new tickets in
//! the store so they survive a restart.

use std::sync::Arc;
use std::time::Duration;

use durable_sdk::handlers::{
    ActionHandler, ChatHandler, CloseRequest, Hooks, RenameRequest, Reopen, ReopenRequest, SendRequest,
    Started, StarterRequest, SteerRequest,
};
use durable_sdk::types::{Id, ItemBody, RuleError, Target, user_item_id};
use durable_sdk::{ActionRequest, Collie, HandlerResult, Item, Pane, PaneOptions, Refusal, Tab, Turn};
use tokio::time::Instant;

use crate::asks;
use crate::store::{PaneRow, Store, TAB_BOARD, TAB_MAIN, WORKSPACE};

#[derive(Debug, Clone, Copy)]
pub(crate) struct Knobs {
    pub(crate) turn_ms: u64,
    pub(crate) accept_delay_ms: u64,
}

pub(crate) struct Desk {
    pub(crate) core: Collie,
    pub(crate) store: Arc<Store>,
    knobs: Knobs,
}

impl std::fmt::Debug for Desk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Desk").field("knobs", &self.knobs).finish_non_exhaustive()
    }
}

/// Ticket numbers a new ticket skips at most because the receipt store
/// keeps their conversations (the stores keep 10,000 by default).
const TICKET_NUMBERS_SKIPPED_MAX: usize = durable_sdk::stores::KEPT_CONVERSATIONS + 1;

/// The first `k/5` of `text`, on a character boundary.
fn fifth(text: &str, k: usize) -> String {
    let n = text.chars().count();
    text.chars().take((n * k).div_ceil(5)).collect()
}

fn scope_key_ws() -> String {
    format!("workspace:{}", WORKSPACE.0)
}

fn scope_key_tab(tab: &str) -> String {
    format!("tab:{}:{tab}", WORKSPACE.0)
}

impl Desk {
    pub(crate) fn new(core: Collie, store: Arc<Store>, knobs: Knobs) -> Arc<Desk> {
        Arc::new(Desk { core, store, knobs })
    }

    fn now_ms(&self) -> u64 {
        self.core.now().as_millis()
    }

    async fn accept_delay(&self) {
        if self.knobs.accept_delay_ms > 0 {
            tokio::time::sleep(Duration::from_millis(self.knobs.accept_delay_ms)).await;
        }
    }

    /// Writes a final item on the pane. The SDK's receipt store keeps it:
    /// the pane shows it again after a restart, and history serves it.
    pub(crate) fn say(&self, pane: &Pane, item: Item) {
        let _ = pane.write(item);
    }

    /// The tab (and the workspace), created when missing, with the titles
    /// the store keeps.
    fn tab(&self, tab: &str) -> Result<Tab, RuleError> {
        let (ws_title, _) = self.store.scope(&scope_key_ws()).unwrap_or_default();
        let ws = self.core.workspace(WORKSPACE.0, ws_title.as_deref().unwrap_or(WORKSPACE.1))?;
        let default_title = if tab == TAB_BOARD.0 { TAB_BOARD.1 } else { TAB_MAIN.1 };
        let (title, _) = self.store.scope(&scope_key_tab(tab)).unwrap_or_default();
        ws.tab(tab, title.as_deref().unwrap_or(default_title))
    }

    /// Builds the layout from the store: the workspace, its tabs (unless
    /// closed and empty) and every open pane.
    pub(crate) fn build_layout(self: &Arc<Self>) -> Result<(), RuleError> {
        let rows = self.store.panes().map_err(|e| RuleError::invalid("store", e.to_string()))?;
        let (_, ws_closed) = self.store.scope(&scope_key_ws()).unwrap_or_default();
        for tab in [TAB_MAIN.0, TAB_BOARD.0] {
            let (_, closed) = self.store.scope(&scope_key_tab(tab)).unwrap_or_default();
            let has_open = rows.iter().any(|r| r.tab == tab && !r.closed);
            if has_open || !(closed || ws_closed) {
                self.tab(tab)?;
            }
        }
        for row in rows.iter().filter(|r| !r.closed) {
            self.show_pane(row)?;
        }
        Ok(())
    }

    /// Shows a stored pane: a ticket gets the refund action and its
    /// handlers; the announcements pane gets none. The receipt store
    /// (SQLite, PostgreSQL) gives it back the items it showed (the wire,
    /// §9.2): the desk keeps no items of its own.
    pub(crate) fn show_pane(self: &Arc<Self>, row: &PaneRow) -> Result<Pane, RuleError> {
        let tab = self.tab(&row.tab)?;
        let pane = tab.pane(&row.id, PaneOptions::new(row.title.clone()).harness(row.harness.clone()))?;
        if row.ticket {
            pane.action("refund", "Refund", Some("check"))?;
            pane.on_send(TicketHandlers { desk: self.clone() })?;
            pane.on_action(TicketHandlers { desk: self.clone() })?;
        }
        Ok(pane)
    }

    /// The announcements pane's first item, written until the receipt
    /// store has kept it once.
    pub(crate) fn welcome(&self) {
        let text = "Welcome to the support desk. Tickets are in **Tickets**; press *New ticket* to open one.";
        if let (Some(pane), Ok(id)) = (self.core.pane("announcements"), Id::new("welcome")) {
            self.say(&pane, Item::new(id, ItemBody::Markdown { text: text.into(), partial: false }));
        }
    }

    /// The turn of a send: four partial writes spread evenly over
    /// `turn_ms`, then the final write, with the steers that arrived
    /// appended; a stop ends it with what it had, not partial.
    async fn run_turn(&self, mut turn: Turn) {
        let base = format!("Got it: {}", turn.text());
        let mut steers = String::new();
        let start = Instant::now();
        let step = Duration::from_millis(self.knobs.turn_ms) / 5;
        let mut shown: Option<String> = None;
        let mut stopped = false;
        for k in 1..=5u32 {
            tokio::select! {
                () = tokio::time::sleep_until(start + step * k) => {}
                () = turn.stopped() => { stopped = true; break; }
            }
            for text in turn.take_steers() {
                steers.push_str(&format!(" (steer: {text})"));
            }
            if k == 5 {
                break;
            }
            let partial = fifth(&format!("{base}{steers}"), k as usize);
            turn.partial(partial.clone());
            shown = Some(partial);
        }
        let final_text = if stopped { shown } else { Some(format!("{base}{steers}")) };
        if let Some(text) = final_text {
            self.say(turn.pane(), Item::new(turn.reply_id(), ItemBody::Reply { text, partial: false }));
        }
    }

    /// A new ticket from the starter; its first text, if any, is answered at once.
    async fn new_ticket(self: &Arc<Self>, req: &StarterRequest) -> Result<Id, String> {
        let store_failed = |e: rusqlite::Error| format!("the desk's store failed: {e}");
        // A number whose conversation the receipt store keeps is taken: by
        // a desk on another machine over the same database, or by this one
        // before its own store was new. Its chat is not this ticket's.
        let mut n = self.store.next("ticket").map_err(store_failed)?;
        for _ in 0..TICKET_NUMBERS_SKIPPED_MAX {
            match self.core.kept_conversation(&format!("ticket-{n}")).await {
                Ok(None) => break,
                Ok(Some(_)) => n = self.store.next("ticket").map_err(store_failed)?,
                Err(e) => return Err(format!("the receipt store failed: {e}")),
            }
        }
        let row = self.store.new_ticket_numbered(n, self.now_ms()).map_err(store_failed)?;
        let _ = self.store.set_scope_closed(&scope_key_tab(TAB_MAIN.0), false);
        let _ = self.store.set_scope_closed(&scope_key_ws(), false);
        let pane = self.show_pane(&row).map_err(|e| e.to_string())?;
        if let Some(text) = req.text.as_deref().filter(|t| !t.trim().is_empty()) {
            self.say(
                &pane,
                Item::new(
                    user_item_id(&req.request_id),
                    ItemBody::User { text: text.to_owned(), request_id: Some(req.request_id.clone()) },
                ),
            );
            if let Ok(id) = Id::new(format!("reply-{}", row.id)) {
                self.say(
                    &pane,
                    Item::new(id, ItemBody::Reply { text: format!("Got it: {text}"), partial: false }),
                );
            }
        }
        Id::new(row.id).map_err(|e| e.to_string())
    }
}

/// A ticket's handlers: its conversation and its refund button.
struct TicketHandlers {
    desk: Arc<Desk>,
}

impl ChatHandler for TicketHandlers {
    async fn check_send(&self, req: SendRequest) -> HandlerResult {
        self.desk.accept_delay().await;
        match asks::parse_command(&req.text) {
            Some(Err(usage)) => Err(Refusal::new(usage)),
            // `/ask …` raises its card now, so that a failure refuses the send.
            Some(Ok((kind, secs))) => self.desk.raise_new(&req.pane, kind, secs).map_err(Refusal::new),
            None => Ok(()),
        }
    }

    async fn turn(&self, turn: Turn) {
        if asks::parse_command(turn.text()).is_none() {
            self.desk.run_turn(turn).await;
        }
    }

    async fn steer(&self, _req: SteerRequest) -> HandlerResult {
        self.desk.accept_delay().await;
        Ok(())
    }
}

impl ActionHandler for TicketHandlers {
    async fn action(&self, req: ActionRequest) -> HandlerResult {
        self.desk.accept_delay().await;
        if req.action.as_str() != "refund" {
            return Err(Refusal::not_supported());
        }
        self.desk.start_refund(&req.pane).map_err(Refusal::new)
    }
}

/// The agent-wide hooks: the store keeps every change.
pub(crate) struct DeskHooks {
    pub(crate) desk: Arc<Desk>,
}

/// The store's failure, as the phone hears it.
fn store_failed(e: impl std::fmt::Display) -> Refusal {
    Refusal::new(format!("the desk's store failed: {e}"))
}

impl Hooks for DeskHooks {
    async fn on_rename(&self, req: RenameRequest) -> HandlerResult {
        self.desk.accept_delay().await;
        let store = &self.desk.store;
        let kept = match req.target {
            Target::Pane => store.set_title(&req.id, &req.title).map(|_| ()),
            Target::Tab => store.set_scope_title(&format!("tab:{}", req.id), &req.title),
            Target::Workspace => store.set_scope_title(&format!("workspace:{}", req.id), &req.title),
            _ => Ok(()),
        };
        kept.map_err(store_failed)
    }

    async fn on_close(&self, req: CloseRequest) -> HandlerResult {
        self.desk.accept_delay().await;
        let store = &self.desk.store;
        let now = self.desk.now_ms();
        let kept = match req.target {
            Target::Pane => store.set_closed(&req.id, true, now).map(|_| ()),
            Target::Tab => {
                let tab = req.id.split_once(':').map_or(req.id.as_str(), |(_, t)| t);
                store
                    .close_panes_of(Some(tab), now)
                    .and_then(|()| store.set_scope_closed(&format!("tab:{}", req.id), true))
            }
            Target::Workspace => store
                .close_panes_of(None, now)
                .and_then(|()| store.set_scope_closed(&format!("workspace:{}", req.id), true)),
            _ => Ok(()),
        };
        kept.map_err(store_failed)
    }

    async fn on_reopen(&self, req: ReopenRequest) -> HandlerResult<Reopen> {
        self.desk.accept_delay().await;
        let desk = &self.desk;
        let row = match desk.store.pane(req.id.as_str()) {
            Ok(Some(row)) if row.closed && desk.core.pane(req.id.as_str()).is_none() => row,
            Ok(_) => return Ok(Reopen::Restore), // not one of ours, or open: the SDK answers
            Err(e) => return Err(store_failed(e)),
        };
        let reopened = desk
            .store
            .set_closed(&row.id, false, 0)
            .and_then(|_| desk.store.set_scope_closed(&scope_key_tab(&row.tab), false))
            .and_then(|()| desk.store.set_scope_closed(&scope_key_ws(), false));
        reopened.map_err(store_failed)?;
        match desk.show_pane(&PaneRow { closed: false, ended_at: None, ..row }) {
            Ok(_) => Ok(Reopen::Reopened),
            Err(e) => Err(Refusal::new(e.to_string())),
        }
    }

    async fn on_starter(&self, req: StarterRequest) -> HandlerResult<Started> {
        self.desk.accept_delay().await;
        if req.starter.as_str() != "new-ticket" {
            return Err(Refusal::not_supported());
        }
        self.desk.new_ticket(&req).await.map(Started::from_id).map_err(Refusal::new)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reply_grows_by_fifths() {
        let text = "Got it: hello";
        assert_eq!(fifth(text, 5), text);
        assert!(text.starts_with(&fifth(text, 1)));
        assert!(fifth(text, 1).len() < fifth(text, 4).len());
        assert_eq!(fifth("é", 1), "é");
    }
}
