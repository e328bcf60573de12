//! Asks: the open ones in the order raised, the ids decided (for `409
//! ask-closed`), and answers held for asks not raised yet (§7.1).

use std::collections::hash_map::Entry;
use std::sync::Arc;

use durable_types::{Ask, DecidedBy, EventBody, Id, Item, ItemBody, NoticeTone, Outcome, Timestamp};

use super::panes::KeptBy;
use super::{Link, State};

/// How many decided ask ids are remembered for `409 ask-closed`.
const DECIDED_MEMORY: usize = 10_000;

/// Answers held at once, at most: each may carry up to 1 MiB, so the bytes
/// they keep are bounded too (durable-runtime's
/// `CoreOptions::held_answer_bytes`, default `HELD_ANSWER_BYTES`).
const HOLDS_MAX: usize = 1000;

/// One open ask.
#[derive(Clone, Debug)]
pub struct OpenAsk {
    /// Shared with the pane's `ask` event.
    pub ask: Arc<Ask>,
    order: u64,
    /// The program's awaitable (and its abort watcher), resolved through
    /// [`Effect::Decide`](super::Effect::Decide).
    pub link: Link,
    /// The ask's `tracing` span: its closing is told inside it.
    pub span: tracing::Span,
    /// The asks' journal op readers wait for before they see it (a store
    /// that keeps asks: docs/wire.md §7.2); `None` once its event reached
    /// the pane's tail anyway (shown unkept past a tail's worth).
    kept_by: Option<u64>,
}

/// An answer to an unknown ask, held for a while (§7.1).
#[derive(Clone, Debug)]
pub struct Hold {
    pub request_id: Id,
    pub hash: String,
    pub answer: durable_types::AnswerBody,
    pub confirm_always: bool,
    pub arrived_at: Timestamp,
    pub expires_at: Timestamp,
}

impl Hold {
    /// What this hold counts against the byte bound: the text it keeps
    /// (ask id, request id, hash, the answer's strings and values as JSON).
    fn bytes(&self, ask_id: &str) -> usize {
        let a = &self.answer;
        let options: usize = a.option_ids.iter().flatten().map(|o| o.len() + 3).sum();
        let text = a.text.as_ref().map_or(0, String::len);
        let values = a.values.as_ref().map_or(0, |v| serde_json::to_vec(v).map_or(0, |j| j.len()));
        ask_id.len() + self.request_id.as_str().len() + self.hash.len() + options + text + values
    }
}

impl State {
    /// The open ask with this id.
    pub fn ask(&self, id: &str) -> Option<&Ask> {
        self.asks.get(id).map(|a| &*a.ask)
    }

    pub fn is_ask_open(&self, id: &str) -> bool {
        self.asks.contains_key(id)
    }

    /// Every open ask, oldest first.
    pub fn asks_in_order(&self) -> Vec<&Ask> {
        let mut v: Vec<&OpenAsk> = self.asks.values().collect();
        v.sort_by_key(|a| a.order);
        v.into_iter().map(|a| &*a.ask).collect()
    }

    /// The open asks readers see, oldest first: all but those a store that
    /// keeps asks does not have yet (docs/wire.md §7.2). As with a title,
    /// the state poll shows an ask at once even while its pane's `ask`
    /// event waits behind items not kept yet (§9.2).
    pub fn shown_asks_in_order(&self) -> Vec<&Ask> {
        let applied = self.asks_journal.applied_so_far();
        let mut v: Vec<&OpenAsk> =
            self.asks.values().filter(|a| a.kept_by.is_none_or(|op| op < applied)).collect();
        v.sort_by_key(|a| a.order);
        v.into_iter().map(|a| &*a.ask).collect()
    }

    /// These asks' events reached their panes' tails (shown unkept past a
    /// tail's worth, or kept): the state poll shows them too.
    pub(super) fn asks_shown(&mut self, asks: impl IntoIterator<Item = Arc<Ask>>) {
        for ask in asks {
            // The same raise, not a later one under the same id.
            if let Some(open) = self.asks.get_mut(ask.id.as_str()).filter(|o| Arc::ptr_eq(&o.ask, &ask)) {
                open.kept_by = None;
            }
        }
    }

    /// The store applied the asks' journal ops from number `from` on: the
    /// panes of the asks it kept show them in the state poll now (a new
    /// `seq`), even while their `ask` events wait behind items.
    pub(super) fn asks_kept_from(&mut self, from: u64) {
        let applied = self.asks_journal.applied_so_far();
        let panes: Vec<Id> = self
            .asks
            .values()
            .filter(|a| a.kept_by.is_some_and(|op| (from..applied).contains(&op)))
            .map(|a| a.ask.pane.clone())
            .collect();
        for pane in panes {
            self.touch_pane(&pane);
        }
    }

    /// The ids of a pane's open asks, oldest first.
    pub fn open_asks_of(&self, pane: &Id) -> Vec<String> {
        let mut v: Vec<&OpenAsk> = self.asks.values().filter(|a| &a.ask.pane == pane).collect();
        v.sort_by_key(|a| a.order);
        v.into_iter().map(|a| a.ask.id.clone()).collect()
    }

    /// Who decided an ask that is no longer open, and when.
    pub fn decided(&self, id: &str) -> Option<(DecidedBy, Timestamp)> {
        self.decided.get(id).map(|&(by, at, _)| (by, at))
    }

    /// Opens an ask (its `ask` event on the pane). The caller checked that
    /// its pane is open and its id is not. `kept_by`: the number of the
    /// asks' journal op that keeps it, when the store keeps asks — readers
    /// see it once the store has it
    /// ([`show_asks_once_kept`](Self::show_asks_once_kept)), or at once
    /// when the store had it at this start, as it is.
    pub fn open_ask(
        &mut self,
        ask: Ask,
        now: Timestamp,
        link: Link,
        span: tracing::Span,
        kept_by: Option<u64>,
    ) {
        let ask = Arc::new(ask);
        let id = ask.id.clone();
        // Raised again: it is open, no longer decided.
        self.decided.remove(id.as_str());
        self.next_ask_order += 1;
        let order = self.next_ask_order;
        // Raised again as the store has it (after a restart): no wait.
        let in_store = self
            .asks_in_store
            .get(id.as_str())
            .is_some_and(|(hash, expires_at)| *hash == ask.hash && *expires_at == ask.expires_at);
        let kept_by = kept_by.filter(|_| self.asks_wait_for_store && !in_store);
        self.asks.insert(id, OpenAsk { ask: Arc::clone(&ask), order, link, span, kept_by });
        let event = EventBody::Ask { ask: Arc::clone(&ask) };
        self.push_pane_event(&ask.pane, now, event, kept_by.map(KeptBy::Ask));
    }

    /// Closes an open ask: the `ask-closed` event and, unless the phone
    /// decided, one chat notice. Returns the ask, whose awaitable the caller
    /// resolves; `None` when it was not open.
    pub fn close_ask(
        &mut self,
        id: &str,
        by: DecidedBy,
        outcome: Outcome,
        now: Timestamp,
    ) -> Option<OpenAsk> {
        let open = self.asks.remove(id)?;
        self.remember_decided(id, by, now);
        let pane = &open.ask.pane;
        self.pane_event(
            pane,
            now,
            EventBody::AskClosed { ask_id: id.to_owned(), decided_by: by, decided_at: now, outcome },
        );
        let notice = match (by, outcome) {
            (DecidedBy::Timeout, _) => {
                Some((format!("Timed out before an answer: {}", open.ask.title), NoticeTone::Warn))
            }
            (DecidedBy::Program, Outcome::Answered) => {
                Some((format!("Answered in the agent: {}", open.ask.title), NoticeTone::Info))
            }
            (DecidedBy::Program, _) => {
                Some((format!("Stopped before an answer: {}", open.ask.title), NoticeTone::Info))
            }
            _ => None,
        };
        if let Some((text, tone)) = notice {
            if let Ok(item_id) = Id::new(format!("ask-closed-{id}")) {
                let item = Item::new(item_id, ItemBody::Notice { text, partial: false, tone: Some(tone) });
                if let Ok((item, _)) = item.sanitized() {
                    self.pane_event(pane, now, EventBody::Item { item: item.into() });
                }
            }
        }
        Some(open)
    }

    pub fn remember_decided(&mut self, id: &str, by: DecidedBy, at: Timestamp) {
        self.decided_gen += 1;
        let generation = self.decided_gen;
        // One copy of the id, shared by the map and the order.
        let id: Arc<str> = Arc::from(id);
        self.decided.insert(Arc::clone(&id), (by, at, generation));
        self.decided_order.push_back((id, generation));
        while self.decided_order.len() > DECIDED_MEMORY {
            // Forget an id only if this is its latest decision: one lookup
            // of an entry that is, at the bound, long out of the cache.
            if let Some((old, g)) = self.decided_order.pop_front() {
                if let Entry::Occupied(e) = self.decided.entry(old) {
                    if e.get().2 == g {
                        e.remove();
                    }
                }
            }
        }
    }

    // Held answers.

    /// The ask an answer with this request id is held for.
    pub fn held_ask_of(&self, request_id: &Id) -> Option<&str> {
        self.hold_by_request.get(request_id).map(String::as_str)
    }

    /// Holds an answer for ask `id`. A newer hold for the same ask replaces
    /// the older one; past [`HOLDS_MAX`] holds, or past `max_bytes` held
    /// bytes in all, the oldest go until the new one fits (the new one is
    /// always kept). Either way their request ids are free again.
    pub fn hold_answer(&mut self, id: String, hold: Hold, max_bytes: usize) {
        self.take_hold(&id);
        let bytes = hold.bytes(&id);
        while !self.holds.is_empty()
            && (self.holds.len() >= HOLDS_MAX || self.held_bytes.saturating_add(bytes) > max_bytes)
        {
            let oldest = self.holds.iter().min_by_key(|(_, h)| h.arrived_at).map(|(id, _)| id.clone());
            match oldest {
                Some(old) => {
                    self.take_hold(&old);
                }
                None => break,
            }
        }
        self.held_bytes += bytes;
        self.hold_by_request.insert(hold.request_id.clone(), id.clone());
        self.holds.insert(id, hold);
    }

    /// Removes the answer held for ask `id`; its request id is free again.
    pub fn take_hold(&mut self, id: &str) -> Option<Hold> {
        let hold = self.holds.remove(id)?;
        self.held_bytes -= hold.bytes(id);
        self.hold_by_request.remove(&hold.request_id);
        Some(hold)
    }

    /// Drops the answer held for ask `id` if its time is over.
    pub fn expire_hold(&mut self, id: &str, now: Timestamp) {
        if self.holds.get(id).is_some_and(|h| h.expires_at <= now) {
            self.take_hold(id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decided_ids_are_forgotten_oldest_first_unless_decided_again() {
        let mut st = State::new(16);
        let at = Timestamp::from_millis(1_000);
        st.remember_decided("first", DecidedBy::Phone, at);
        st.remember_decided("again", DecidedBy::Phone, at);
        for i in 0..DECIDED_MEMORY - 2 {
            st.remember_decided(&format!("ask-{i}"), DecidedBy::Phone, at);
        }
        assert!(st.decided("first").is_some(), "the bound is not reached yet");
        // Decided again: its older entry in the order must not forget it.
        st.remember_decided("again", DecidedBy::Timeout, at);
        assert!(st.decided("first").is_none(), "the oldest id went at the bound");
        st.remember_decided("one-more", DecidedBy::Phone, at);
        assert_eq!(st.decided("again").map(|d| d.0), Some(DecidedBy::Timeout));
        assert!(st.decided("ask-0").is_some());
        assert_eq!(st.decided.len(), DECIDED_MEMORY);
        assert_eq!(st.decided_order.len(), DECIDED_MEMORY);
    }
}
