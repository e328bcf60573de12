//! Each pane's conversation, kept by a store that keeps conversations:
//! what a pane shows goes into a journal that a job of the runtime applies
//! to the store in batches ([`Effect::DrainConversations`]), and a pane
//! declared is first given back what is kept under its id
//! ([`ConversationStep::Restore`], in the same journal, so the store is
//! read before any newer write of that pane).

use durable_types::{Id, Item, RuleError, Timestamp};

use super::panes::{KeptBy, raised_ask};
use super::{Effect, Journal, State};
use crate::data::conversation::{ConversationOp, KEPT_ITEMS_PER_CONVERSATION, KeptConversation};

/// One step of the conversations' journal.
#[derive(Clone, Debug)]
pub enum ConversationStep {
    /// A change for the store (applied in batches).
    Keep(ConversationOp),
    /// Read what the store kept of this pane and give it back to the pane
    /// declared with this restore number, if it is still owed one
    /// ([`State::restore_conversation`]).
    Restore {
        /// The pane id.
        pane: Id,
        /// Which declaration of the pane asked for it.
        restore: u64,
    },
    /// A send's turn ended: record it `done` in the same write as the
    /// changes before it, the items its turn showed among them
    /// ([`State::journal_send_done`]), unless a write of its pane failed
    /// since its turn began ([`State::conversation_failed_since`]).
    SendDone {
        /// The send's request id.
        request_id: Id,
        /// Its pane.
        pane: Id,
        /// The journal's length as its turn began.
        since: u64,
    },
}

/// The journal of conversations.
pub type ConversationsJournal = Journal<ConversationStep>;

/// A new journal of conversations.
pub(super) fn journal() -> ConversationsJournal {
    Journal::new(|| Effect::DrainConversations)
}

impl State {
    /// The store keeps conversations: from now on, what panes show is
    /// journaled, and each pane declared is given back what is kept under
    /// its id.
    pub fn keep_conversations(&mut self) {
        self.keeps_conversations = true;
    }

    /// Whether the store keeps conversations.
    pub fn keeps_conversations(&self) -> bool {
        self.keeps_conversations
    }

    /// The store keeps conversations across processes: from now on a
    /// pane's item is shown to readers only once the store has it, and
    /// each event after it waits behind it, so that what a phone saw never
    /// goes back after a crash (docs/wire.md §9.2). The program's side
    /// sees every write at once; no write or read waits.
    pub fn show_items_once_kept(&mut self) {
        self.items_wait_for_store = self.keeps_conversations;
    }

    /// A store that keeps asks: from now on an ask is shown to readers
    /// (its `ask` event, the state's and a snapshot's `asks`) only once
    /// the store has kept it, and each event after it waits behind it, so
    /// that a card the phone saw is one a crash keeps (docs/wire.md §7.2).
    /// The program's side sees it at once; nothing waits.
    pub fn show_asks_once_kept(&mut self) {
        self.asks_wait_for_store = true;
    }

    /// Moves the events whose items or asks the store now has (or failed
    /// to keep: a store that fails must not hide a pane for ever) into
    /// their panes' tails, in order, each pane up to its first event still
    /// waiting.
    pub(super) fn show_kept_events(&mut self) {
        if self.panes_waiting.is_empty() {
            return;
        }
        let tail_limit = self.tail_limit;
        let (items_applied, asks_applied) =
            (self.conversations.applied_so_far(), self.asks_journal.applied_so_far());
        let waits = |kept_by: Option<KeptBy>| match kept_by {
            Some(KeptBy::Conversation(op)) => op >= items_applied,
            Some(KeptBy::Ask(op)) => op >= asks_applied,
            None => false,
        };
        let waiting: Vec<Id> = self.panes_waiting.iter().cloned().collect();
        let mut asks_shown = Vec::new();
        for pane in waiting {
            let Some(p) = self.open_or_closed_mut(&pane) else {
                self.panes_waiting.remove(&pane);
                continue;
            };
            let mut shown = 0;
            while let Some(front) = p.pending.front() {
                if waits(front.kept_by) {
                    break;
                }
                let Some(event) = p.pending.pop_front() else { break };
                asks_shown.extend(raised_ask(&event.body));
                p.push_event(event.ts, event.body, tail_limit);
                shown += 1;
            }
            if p.pending.is_empty() {
                self.panes_waiting.remove(&pane);
            }
            if shown > 0 && self.is_open(&pane) {
                self.touch_pane(&pane);
            }
        }
        self.asks_shown(asks_shown);
    }

    /// Journals a change of a pane's conversation (nothing when the store
    /// keeps none). For an item, returns the number of the journal's op
    /// that keeps it (its own, or its earlier form's that it replaced).
    ///
    /// An item written again while its earlier form still waits for the
    /// store replaces that form in the journal (the store would only have
    /// replaced it): a reply streamed while the store is slow costs one
    /// queued op, not one per partial write.
    pub(super) fn keep_conversation(&mut self, op: ConversationOp) -> Option<u64> {
        if !self.keeps_conversations {
            return None;
        }
        if self.conversations.queued() == 0 {
            self.queued_items.clear();
        } else if self.queued_items.len() > 2 * self.conversations.queued() + 64 {
            // The store never caught up long enough to clear them: drop the
            // entries of ops it took.
            let first = self.conversations.pushed() - self.conversations.queued() as u64;
            self.queued_items.retain(|_, index| *index >= first);
        }
        match op {
            ConversationOp::Item { pane, item } => {
                let key = (pane, item.id.clone());
                // Within a conversation's bound of the queued form only: past
                // it the store would drop that place before the pane did.
                let near = |index: u64, pushed: u64| pushed - index < KEPT_ITEMS_PER_CONVERSATION as u64;
                let pushed = self.conversations.pushed();
                if let Some(&index) = self.queued_items.get(&key).filter(|&&i| near(i, pushed)) {
                    if let Some(ConversationStep::Keep(ConversationOp::Item { item: queued, .. })) =
                        self.conversations.queued_mut(index)
                    {
                        *queued = item;
                        return Some(index);
                    }
                }
                let op = ConversationOp::Item { pane: key.0.clone(), item };
                self.conversations.push(ConversationStep::Keep(op), &mut self.effects);
                let index = self.conversations.pushed() - 1;
                self.queued_items.insert(key, index);
                Some(index)
            }
            ConversationOp::Forget { pane } => {
                // A later write of an item starts over after the forget.
                self.queued_items.retain(|(p, _), _| *p != pane);
                self.conversations
                    .push(ConversationStep::Keep(ConversationOp::Forget { pane }), &mut self.effects);
                None
            }
            op => {
                self.conversations.push(ConversationStep::Keep(op), &mut self.effects);
                None
            }
        }
    }

    /// A pane was declared (the first time in this run, or again after a
    /// close): it is owed what is kept under its id, then its declared
    /// title is kept. Returns the restore number the pane waits for.
    pub(super) fn conversation_opened(&mut self, pane: &Id, title: &str) -> Option<u64> {
        if !self.keeps_conversations {
            return None;
        }
        self.restores += 1;
        let restore = self.restores;
        // An item the pane writes from now on is a new op after the restore,
        // never folded into one of an earlier pane of this id queued before it.
        self.queued_items.retain(|(p, _), _| p != pane.as_str());
        self.conversations.push(ConversationStep::Restore { pane: pane.clone(), restore }, &mut self.effects);
        self.restores_pushed_at = self.conversations.pushed();
        self.keep_conversation(ConversationOp::title(pane.as_str(), title));
        Some(restore)
    }

    /// Keeps `items`, oldest first, under `title` as the conversation of
    /// `pane`, a pane this run has not declared: for a program that moves
    /// the conversations it kept itself onto the store. Returns whether
    /// the store keeps conversations (else nothing is journaled). A pane
    /// open, or closed and still in this run's closed list, is an `Err`:
    /// its items are kept as it shows them.
    pub fn import_conversation(
        &mut self,
        pane: &Id,
        title: String,
        items: Vec<Item>,
    ) -> Result<bool, RuleError> {
        if self.is_declared(pane) {
            return Err(RuleError::invalid_state(
                "import a conversation",
                format!("pane {pane} was declared in this run: what it shows is kept as it shows it"),
            ));
        }
        if !self.keeps_conversations {
            return Ok(false);
        }
        self.keep_conversation(ConversationOp::title(pane.as_str(), title));
        // A partial item stays as it is: history and a pane declared later
        // read it as final, as they do a pane's cut reply.
        for item in items {
            self.keep_conversation(ConversationOp::item(pane.as_str(), item));
        }
        Ok(true)
    }

    /// The program deletes a conversation from the store. A pane of that id
    /// still owed its kept items is no longer (it starts empty); an open
    /// one keeps what it shows, and what it shows next is kept anew.
    pub fn forget_conversation(&mut self, pane: &str) {
        if let Ok(id) = Id::new(pane) {
            self.cancel_restore(&id);
        }
        self.keep_conversation(ConversationOp::Forget { pane: pane.to_owned() });
    }

    /// The next steps for the store, in order, at most `max`: a run the
    /// runtime applies as the restores' reads, in order, then the changes
    /// in one call (one commit). The run ends before a restore of a pane
    /// whose items or forget it holds, so that a read sees every change
    /// journaled before it. Empty: the job ends.
    pub fn next_conversation_steps(&mut self, max: usize) -> Vec<ConversationStep> {
        let Some(first) = self.conversations.take_next() else { return Vec::new() };
        // The panes whose items (or forget) the run holds.
        let mut changed: Vec<String> = Vec::new();
        let note = |step: &ConversationStep, changed: &mut Vec<String>| {
            if let ConversationStep::Keep(op) = step {
                if !matches!(op, ConversationOp::Title { .. }) && !changed.iter().any(|p| p == op.pane()) {
                    changed.push(op.pane().to_owned());
                }
            }
        };
        note(&first, &mut changed);
        let mut steps = vec![first];
        while steps.len() < max {
            let next = self.conversations.take_next_if(|s| match s {
                ConversationStep::Restore { pane, .. } => !changed.iter().any(|p| p == pane.as_str()),
                ConversationStep::Keep(_) | ConversationStep::SendDone { .. } => true,
            });
            let Some(step) = next else { break };
            note(&step, &mut changed);
            steps.push(step);
        }
        steps
    }

    /// A send's turn ended: journals its `done` after every change pushed
    /// so far, so that the store records it in the write that keeps the
    /// items the turn showed (one commit at a turn's end, where there were
    /// two) and never before them: a restart then never finds a done send
    /// whose reply it lost. Returns the journal's length to wait for;
    /// `None` when the store keeps no conversations (the runtime then marks
    /// the send itself).
    ///
    /// `since` is the journal's length as the turn began
    /// ([`journal_pushed`](State::journal_pushed)): a write of `pane`'s
    /// conversation that fails after it leaves the send unrecorded.
    pub fn journal_send_done(&mut self, request_id: Id, pane: Id, since: u64) -> Option<u64> {
        if !self.keeps_conversations {
            return None;
        }
        self.conversations.push(ConversationStep::SendDone { request_id, pane, since }, &mut self.effects);
        Some(self.conversations.pushed())
    }

    /// The journal's steps taken so far by the job (applied or on their
    /// way to the store): the last step of the run it just took is number
    /// `this - 1`.
    pub fn conversation_steps_taken(&self) -> u64 {
        self.conversations.pushed() - self.conversations.queued() as u64
    }

    /// A write of conversations failed, or its job was dropped: for each
    /// pane it changed, the journal's length up to that pane's last step
    /// in it. A send of such a pane whose turn began before that step is
    /// then not recorded done: its items may be lost, and a restart closes
    /// it with its notice.
    pub fn conversation_write_failed(&mut self, panes: impl IntoIterator<Item = (String, u64)>) {
        for (pane, upto) in panes {
            let at = self.conversation_failures.entry(pane).or_insert(0);
            *at = (*at).max(upto);
        }
    }

    /// Whether a failed write held a step of `pane`'s at or past the
    /// journal's length `since`.
    pub fn conversation_failed_since(&self, pane: &str, since: u64) -> bool {
        self.conversation_failures.get(pane).is_some_and(|&taken| taken > since)
    }

    /// The steps up to the last restore asked for: what a waiter for the
    /// panes' kept items waits for.
    pub fn conversation_restores_pushed(&self) -> u64 {
        self.restores_pushed_at
    }

    /// Gives the pane declared with restore number `restore` what the store
    /// kept under its id, if it is still owed it (open, or closed since):
    /// the kept items first, in their order, each in its newest form (the
    /// program may have written it again since it declared the pane) and
    /// finalized (a partial item cut by a restart streams no more); the
    /// items written since follow. While no reader asked for the pane's
    /// events they are renumbered behind the kept ones; after, the tail
    /// starts again and readers get the view (a snapshot, §6). Kept items
    /// that break the item rules are left out. Returns whether the pane
    /// changed.
    pub fn restore_conversation(
        &mut self,
        pane: &Id,
        restore: u64,
        kept: KeptConversation,
        now: Timestamp,
    ) -> bool {
        match self.open_or_closed_mut(pane) {
            Some(p) if p.restore == Some(restore) => p.restore = None,
            _ => return false,
        }
        // A title the phone gave the pane that it was not declared with
        // again: the program's rename hook decides — unless the program
        // renamed the pane since it declared it (its own title wins).
        let declared = self
            .pane(pane)
            .filter(|p| Some(p.title()) == self.declared_title(pane))
            .map(|p| p.title().to_owned());
        if let (Some(title), Some(instead_of), true) = (kept.title.clone(), declared, kept.title_by_phone) {
            if title != instead_of {
                self.effect(Effect::OfferKeptTitle { pane: pane.clone(), title, instead_of, restore });
            }
        }
        // The conversation started when the store first kept it, in an
        // earlier run (history's `startedAt`).
        if let (Some(at), Some(p)) = (kept.started_at, self.open_or_closed_mut(pane)) {
            p.started_before(at);
        }
        if kept.items.is_empty() && !kept.dropped {
            return false;
        }
        let mut items = Vec::with_capacity(kept.items.len());
        let mut broken = 0;
        for item in kept.items {
            match item.sanitized() {
                Ok((mut item, _)) => {
                    item.body.finalize();
                    items.push(item);
                }
                Err(_) => broken += 1,
            }
        }
        if broken > 0 {
            self.effect(Effect::Warn(format!(
                "collie: {broken} kept item(s) of pane {pane} break the item rules; they are left out"
            )));
        }
        let tail_limit = self.tail_limit;
        let Some(p) = self.open_or_closed_mut(pane) else { return false };
        p.restore_items(items, kept.dropped, now, tail_limit);
        // A closed pane shows nothing to a poll until it is reopened.
        if self.is_open(pane) {
            self.touch_pane(pane);
        }
        true
    }
}
