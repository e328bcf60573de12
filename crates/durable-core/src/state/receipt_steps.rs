//! The receipt steps under way (§9): for each write going through the
//! receipt step, where it stands. The rules that move a step are the
//! machine's (`once.rs`); this is only what it remembers between the
//! driver's calls.

use durable_types::Id;
use durable_types::exchange::Response;

use crate::data::receipt::Receipt;

/// One write's receipt step: its request id, its stage, and whether its
/// caller went away.
#[derive(Clone, Debug)]
pub struct ReceiptStep {
    pub request_id: Id,
    pub stage: Stage,
    /// Its caller went away: it is driven to its end for the store's sake.
    pub detached: bool,
}

/// Where a receipt step stands, named by what it waits for.
#[derive(Clone, Debug)]
pub enum Stage {
    /// Another request holds the id: this one waits for its outcome.
    WaitingFirst,
    /// The id is this request's: the route's own check comes first.
    Checking,
    /// The store is asked for the id.
    Claiming,
    /// A receipt is replayed, and the store is asked where its send
    /// stands; `settle` holds the receipt when this request still holds
    /// the id (it settles the repeats once the replay is written).
    ReplayingSend { receipt: Receipt, settle: bool },
    /// The write runs; the id is claimed in the store.
    Running,
    /// The write's receipt is applied (kept in memory) and waits for the
    /// store to have the asks the write raised or closed.
    WaitingForAsks { receipt: Receipt, group: String, response: Response },
    /// The store is putting the receipt in `group`.
    Putting { receipt: Receipt, group: String, response: Response },
    /// The store's claim is being released; then the step ends so.
    Releasing(Ending),
}

/// How a step that held the store's claim ends, once it is released.
#[derive(Clone, Debug)]
pub enum Ending {
    /// An answer with nothing to keep (refused, failed, a `202 held`).
    Unstored(Response),
    /// The receipt is in the store.
    Kept { receipt: Receipt, response: Response },
    /// Applied but not in the store: the receipt stays in memory.
    NotKept { receipt: Receipt, response: Response },
}

impl Stage {
    /// Whether the step holds the request id in this process (the
    /// repeats wait for it).
    pub fn holds_id(&self) -> bool {
        match self {
            Stage::WaitingFirst => false,
            Stage::ReplayingSend { settle, .. } => *settle,
            _ => true,
        }
    }

    /// Whether the step holds the id's claim in the store.
    pub fn holds_store_claim(&self) -> bool {
        matches!(
            self,
            Stage::Running | Stage::WaitingForAsks { .. } | Stage::Putting { .. } | Stage::Releasing(_)
        )
    }
}
