//! [`ItemCadence`]: items streamed from an agent's own events, partial ones
//! at most once per interval and none written twice unchanged.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use durable_types::{Id, Item, ItemBody};

/// The pace of items an agent streams from another program's events (a
/// model's deltas, a tool's output): partial items go out at most once per
/// `every` — the wire asks for at most one per
/// [`PARTIAL_MIN_INTERVAL`](durable_types::constants::PARTIAL_MIN_INTERVAL)
/// — and an item given again with the body it was last written with is
/// dropped (such programs often repeat a call or its result).
///
/// Sans-IO: the caller gives the time. A driver holds what grew since the
/// last partial items, asks [`next_partial_at`](Self::next_partial_at)
/// when to write them, checks [`partial_due`](Self::partial_due), says
/// [`partials_written`](Self::partials_written), and passes every batch
/// through [`changed`](Self::changed).
#[derive(Debug, Clone)]
pub struct ItemCadence {
    every: Duration,
    last_partial: Option<Instant>,
    /// What each item was last written as.
    written: HashMap<Id, ItemBody>,
}

impl ItemCadence {
    /// Partial items at most once per `every`.
    pub fn new(every: Duration) -> Self {
        ItemCadence { every, last_partial: None, written: HashMap::new() }
    }

    /// When partial items may go next; `None` when none went yet (they may
    /// go at once).
    pub fn next_partial_at(&self) -> Option<Instant> {
        self.last_partial.map(|t| t + self.every)
    }

    /// Whether partial items may go at `now`.
    pub fn partial_due(&self, now: Instant) -> bool {
        self.next_partial_at().is_none_or(|at| now >= at)
    }

    /// Partial items went at `now`: the next may go `every` later.
    pub fn partials_written(&mut self, now: Instant) {
        self.last_partial = Some(now);
    }

    /// The items of `items` that differ from what each was last written
    /// as, in order; each is remembered as written.
    pub fn changed(&mut self, items: Vec<Item>) -> Vec<Item> {
        items
            .into_iter()
            .filter(|item| {
                if self.written.get(&item.id) == Some(&item.body) {
                    return false;
                }
                self.written.insert(item.id.clone(), item.body.clone());
                true
            })
            .collect()
    }

    /// How many items it remembers as written (one body each): what it
    /// holds in memory until [`reset`](Self::reset).
    pub fn remembered_items(&self) -> usize {
        self.written.len()
    }

    /// Forgets what was written and when (a new conversation, or one shown
    /// again from scratch).
    pub fn reset(&mut self) {
        self.last_partial = None;
        self.written.clear();
    }
}
