//! Each pane's writer (§8): one write at a time per pane — a write from
//! the phone, or the delivery of its queued sends — the others waiting in
//! arrival order; and the phone's writes that come while the sends the
//! last run left are put back in their queues (§9.1), held back until that
//! is over, so that a new send goes behind them, never before.
//!
//! A writer is named by a [`Link`]: the one granted a pane holds it until
//! it ends; a waiter is woken ([`Effect::Wake`]) when its turn comes.

use std::collections::{HashMap, VecDeque};

use durable_types::Id;

use super::{Effect, Link};

/// Who writes each pane, and who waits.
#[derive(Clone, Debug, Default)]
pub struct Writers {
    panes: HashMap<Id, PaneWriters>,
    /// The sends the last run left are being put back in their queues.
    recovering: bool,
    /// The phone's writes that came meanwhile, in arrival order.
    held_back: Vec<(Id, Link)>,
}

#[derive(Clone, Debug, Default)]
struct PaneWriters {
    holder: Option<Link>,
    waiting: VecDeque<Link>,
}

impl PaneWriters {
    fn is_free(&self) -> bool {
        self.holder.is_none() && self.waiting.is_empty()
    }
}

impl Writers {
    /// `writer` asks for `pane`: `true` when it holds it now; otherwise it
    /// waits, and is woken when it does. A write from the phone
    /// (`from_phone`) that comes while the sends are being recovered waits
    /// for the recovery first.
    pub fn request(&mut self, pane: &Id, writer: Link, from_phone: bool) -> bool {
        if from_phone && self.recovering {
            self.held_back.push((pane.clone(), writer));
            return false;
        }
        let entry = self.panes.entry(pane.clone()).or_default();
        if entry.is_free() {
            entry.holder = Some(writer);
            return true;
        }
        entry.waiting.push_back(writer);
        false
    }

    /// Whether `writer` holds `pane` now.
    pub fn holds(&self, pane: &Id, writer: Link) -> bool {
        self.panes.get(pane).is_some_and(|p| p.holder == Some(writer))
    }

    /// `writer` is done with `pane`, or stopped waiting for it (its request
    /// was dropped, or it gave up): the next waiter holds the pane.
    pub fn end(&mut self, pane: &Id, writer: Link, effects: &mut Vec<Effect>) {
        if let Some(at) = self.held_back.iter().position(|(p, w)| *w == writer && p == pane) {
            self.held_back.remove(at);
            return;
        }
        let Some(entry) = self.panes.get_mut(pane) else { return };
        if entry.holder == Some(writer) {
            entry.holder = entry.waiting.pop_front();
            if let Some(next) = entry.holder {
                effects.push(Effect::Wake(next));
            }
        } else if let Some(at) = entry.waiting.iter().position(|w| *w == writer) {
            entry.waiting.remove(at);
        }
        if entry.holder.is_none() && entry.waiting.is_empty() {
            self.panes.remove(pane);
        }
    }

    /// The recovery of the last run's sends began: the phone's writes wait.
    pub fn begin_recovery(&mut self) {
        self.recovering = true;
    }

    /// The recovery is over (however it ended): the writes held back ask
    /// for their panes, in the order they came.
    pub fn end_recovery(&mut self, effects: &mut Vec<Effect>) {
        if !std::mem::replace(&mut self.recovering, false) {
            return;
        }
        for (pane, writer) in std::mem::take(&mut self.held_back) {
            if self.request(&pane, writer, false) {
                effects.push(Effect::Wake(writer));
            }
        }
    }

    /// A pane closed: who waits for it is woken (and finds it closed); the
    /// one holding it goes on to its end.
    pub fn pane_closed(&mut self, pane: &Id, effects: &mut Vec<Effect>) {
        if let Some(entry) = self.panes.get_mut(pane) {
            for writer in entry.waiting.drain(..) {
                effects.push(Effect::Wake(writer));
            }
            if entry.holder.is_none() {
                self.panes.remove(pane);
            }
        }
        // Held back: woken at the recovery's end, as any other.
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(s: &str) -> Id {
        Id::new(s).unwrap()
    }

    fn woken(effects: &[Effect]) -> Vec<Link> {
        effects.iter().filter_map(|e| if let Effect::Wake(l) = e { Some(*l) } else { None }).collect()
    }

    #[test]
    fn one_writer_per_pane_the_others_in_arrival_order() {
        let (mut w, mut fx, p) = (Writers::default(), Vec::new(), id("p"));
        assert!(w.request(&p, 1, true));
        assert!(w.request(&id("q"), 9, true), "another pane is free");
        assert!(!w.request(&p, 2, true));
        assert!(!w.request(&p, 3, false));
        w.end(&p, 1, &mut fx);
        assert_eq!(woken(&fx), [2]);
        assert!(w.holds(&p, 2) && !w.holds(&p, 3));
        // A waiter that gives up leaves no hole: 2 hands over to nobody but 4.
        assert!(!w.request(&p, 4, true));
        w.end(&p, 3, &mut fx);
        w.end(&p, 2, &mut fx);
        assert_eq!(woken(&fx), [2, 4]);
        w.end(&p, 4, &mut fx);
        assert!(w.request(&p, 5, true), "free again");
    }

    #[test]
    fn the_phones_writes_wait_for_the_recovery_and_deliveries_do_not() {
        let (mut w, mut fx, p) = (Writers::default(), Vec::new(), id("p"));
        w.begin_recovery();
        assert!(!w.request(&p, 1, true), "held back");
        assert!(w.request(&p, 2, false), "a delivery goes");
        assert!(!w.request(&id("q"), 3, true));
        w.end_recovery(&mut fx);
        assert_eq!(woken(&fx), [3], "q was free; p's writer waits behind the delivery");
        w.end(&p, 2, &mut fx);
        assert_eq!(woken(&fx), [3, 1]);
        w.end_recovery(&mut fx);
        assert_eq!(woken(&fx), [3, 1], "a second end changes nothing");
    }

    #[test]
    fn a_closed_pane_wakes_its_waiters_and_a_held_back_one_can_leave() {
        let (mut w, mut fx, p) = (Writers::default(), Vec::new(), id("p"));
        assert!(w.request(&p, 1, true));
        assert!(!w.request(&p, 2, true));
        assert!(!w.request(&p, 3, true));
        w.pane_closed(&p, &mut fx);
        assert_eq!(woken(&fx), [2, 3]);
        w.end(&p, 1, &mut fx);
        assert_eq!(woken(&fx), [2, 3], "nobody waits any more");
        w.begin_recovery();
        assert!(!w.request(&p, 4, true));
        w.end(&p, 4, &mut fx);
        w.end_recovery(&mut fx);
        assert_eq!(woken(&fx), [2, 3], "the one that left is not woken");
    }
}
