//! A turn as a value: the pane works while a [`Turn`] lives, and goes idle
//! when it ends or is dropped — so a handler cannot forget `idle()` and
//! leave queued sends stuck.

use std::fmt;

use durable_types::{Item, RuleError};

use crate::layout::Pane;

/// A running turn on a pane, from [`Pane::start_turn`]. Write the growing
/// reply with [`partial`](Turn::partial), the final text with
/// [`reply`](Turn::reply); [`end`](Turn::end) it (or drop it) to set the
/// pane idle, which delivers the next queued send.
#[must_use = "dropping a Turn ends it at once: the pane goes idle"]
pub struct Turn {
    pane: Pane,
    id: String,
    ended: bool,
}

impl fmt::Debug for Turn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Turn").field("pane", &self.pane.id()).field("id", &self.id).finish()
    }
}

impl Pane {
    /// Starts a turn: the pane is `working` with this turn id until the
    /// returned [`Turn`] ends or is dropped. The id follows the ID rule.
    pub fn start_turn(&self, turn_id: &str) -> Result<Turn, RuleError> {
        self.working(turn_id)?;
        Ok(Turn { pane: self.clone(), id: turn_id.to_owned(), ended: false })
    }
}

impl Turn {
    /// The turn id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The pane.
    pub fn pane(&self) -> &Pane {
        &self.pane
    }

    /// Writes the reply `item_id` as still growing (`partial: true`). Write
    /// it again as it grows, at most every 250 ms.
    pub fn partial(&self, item_id: &str, text: impl Into<String>) -> Result<(), RuleError> {
        self.pane.write(Item::partial_reply(item_id, text)?)
    }

    /// Writes the reply `item_id` with its final text (no `partial`).
    pub fn reply(&self, item_id: &str, text: impl Into<String>) -> Result<(), RuleError> {
        self.pane.write(Item::reply(item_id, text)?)
    }

    /// Ends the turn: the pane goes idle (partial items left are finalized
    /// with one warning) and the next queued send is delivered.
    pub fn end(mut self) -> Result<(), RuleError> {
        self.ended = true;
        self.pane.idle()
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        if !self.ended {
            // The pane may be closed already: nothing more to end then.
            let _ = self.pane.idle();
        }
    }
}
