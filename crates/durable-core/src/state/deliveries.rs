//! The deliveries under way (§8, §9.1): for each send offered to the chat
//! handlers and begun as a turn, where it stands between the driver's
//! calls. Its rules are the machine's (`delivery.rs`).

use durable_types::Id;

/// Which chat handler a send is offered to: the pane's own first, then
/// the agent-wide one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ChatSlot {
    /// The pane's own chat handler.
    Pane,
    /// The agent-wide chat handler.
    Wide,
}

/// One send being delivered.
#[derive(Clone, Debug)]
pub struct Delivery {
    pub pane: Id,
    pub request_id: Id,
    pub text: String,
    /// Taken from the pane's queue (recorded `Queued`): not delivered, it
    /// is closed with a notice on its pane; in a graceful stop it goes back.
    pub from_queue: bool,
    /// The store has it recorded `Running` already (a send run as it
    /// arrives): its turn begins without a second commit.
    pub marked: bool,
    pub stage: DeliveryStage,
}

/// What a delivery waits for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DeliveryStage {
    /// The verdict of this chat handler.
    Checking(ChatSlot),
    /// The store recording the send `Running`.
    Marking,
    /// The turn begun on the pane (its steer inbox, `working`).
    Starting,
    /// The store recording a queued send closed; `reason` goes in its
    /// notice, `supported` says whether a handler gave it.
    Closing { reason: String, supported: bool },
}

impl DeliveryStage {
    /// Whether the delivery still counts its turn as running (a queued
    /// send being closed is not delivered: its turn no longer counts).
    pub fn counts_turn(&self) -> bool {
        !matches!(self, DeliveryStage::Closing { .. })
    }
}
