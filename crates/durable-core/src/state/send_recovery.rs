//! The recovery of the sends the last run left (§9.1), where it stands
//! between the driver's calls: the sends still to look at, the one looked
//! at now, and the panes whose queues got sends back. Its rules are the
//! machine's (`recovery.rs`).

use std::collections::VecDeque;

use durable_types::Id;

use crate::data::receipt::SendState;

/// A send the last run left, its ids checked.
#[derive(Clone, Debug)]
pub struct LeftSend {
    pub request_id: Id,
    pub pane: Id,
    pub text: String,
    pub state: SendState,
}

/// The recovery under way.
#[derive(Clone, Debug, Default)]
pub struct SendRecovery {
    pub stage: RecoveryStage,
    /// The sends not looked at yet, in the order the store gave them.
    pub left: VecDeque<LeftSend>,
    /// The panes whose queues got sends back: delivered at the end.
    pub deliver: Vec<Id>,
}

/// What the recovery waits for.
#[derive(Clone, Debug, Default)]
pub enum RecoveryStage {
    /// The store's list of unfinished sends.
    #[default]
    ReadingSends,
    /// The receipt of this send: only an answered send counts.
    LookingUp(LeftSend),
    /// This send recorded closed; then the warn line, if any.
    Closing { request_id: Id, then_warn: Option<String> },
}
