//! Deadlines the driver fires with `tick(now)`: ask expiry, held answers,
//! the `busy` wait. The core never sleeps.

use std::collections::BTreeMap;

use durable_types::Timestamp;

/// What happens when a deadline passes.
#[derive(Clone, Debug)]
pub enum Timer {
    /// An open ask reaches its `expiresAt`.
    AskExpiry(String),
    /// A held answer's `hold_ms` is over.
    HoldExpiry(String),
    /// Wakes a waiter (a write waiting for its pane's lock), by the number
    /// durable-runtime's links keep its wake-up under.
    Wake(u64),
}

/// Deadlines in time order.
#[derive(Clone, Default, Debug)]
pub struct Timers {
    next: u64,
    map: BTreeMap<(Timestamp, u64), Timer>,
}

impl Timers {
    /// Adds a deadline. Returns whether it is now the earliest.
    pub fn add(&mut self, at: Timestamp, timer: Timer) -> bool {
        self.next += 1;
        let earliest = self.map.keys().next().is_none_or(|(t, _)| at < *t);
        self.map.insert((at, self.next), timer);
        earliest
    }

    /// The earliest deadline.
    pub fn next_deadline(&self) -> Option<Timestamp> {
        self.map.keys().next().map(|(t, _)| *t)
    }

    /// Removes and returns every deadline at or before `now`.
    pub fn due(&mut self, now: Timestamp) -> Vec<Timer> {
        let later = self.map.split_off(&(now.plus_millis(1), 0));
        std::mem::replace(&mut self.map, later).into_values().collect()
    }
}
