//! The phone's writes, the machine's side (§8): what a send comes to —
//! refused, recorded first, queued behind the pane's turn, or run now.
//! The pane's write (who holds it), the handlers and the store's writes
//! are the runtime's, which asks here between them and hands back what the
//! store has the send recorded as.

use durable_types::exchange::Response;
use durable_types::{ErrorBody, ErrorCode, Id, PaneState};
use serde_json::Value;

use crate::data::receipt::SendState;
use crate::machine::Machine;
use crate::respond;
use crate::state::QueuedSend;

/// Sends queued on one pane, at most: past this a send is `409 busy`.
pub const QUEUE_MAX: usize = 64;

/// What a send comes to, looked at once more.
#[derive(Debug, PartialEq)]
pub enum SendLook {
    /// Refused, with this answer (not stored).
    Refused(Response),
    /// It passes: the store is to have it recorded in this state first,
    /// and then it is looked at again (a turn the program began or ended
    /// itself may have moved meanwhile).
    Record(SendState),
    /// Recorded `Queued`, and queued behind the pane's turn or the sends
    /// before it. `deliver_now`: no turn runs, so the queue is to be
    /// delivered now. `turn_id`: the pane's turn, for the answer.
    Queued { turn_id: Option<String>, deliver_now: bool },
    /// Recorded `Running`: it is delivered now. `turn_id`: the pane's turn
    /// before it, for the answer.
    RunNow { turn_id: Option<String> },
}

impl Machine {
    /// Looks at a send to `pane` whose writer holds the pane's write
    /// (§8, §9.1). `seen_turn` is the body's `turnId` (`Some(None)`: the
    /// phone saw no turn yet); `recorded` is the state the store has the
    /// send recorded in (`None`: not yet). `has_takers`: the pane or the
    /// agent has a chat or action handler (a pane with none answers
    /// `not-supported` before anything is recorded; the chat handlers
    /// themselves are asked as it is delivered). A send is recorded before
    /// it is queued or run: `Running` when it runs at once (one commit
    /// before its turn, not two), `Queued` when it waits.
    pub fn look_at_send(
        &mut self,
        pane: &Id,
        request_id: &Id,
        text: &str,
        seen_turn: Option<&Option<String>>,
        recorded: Option<SendState>,
        has_takers: bool,
    ) -> SendLook {
        if !self.state.is_open(pane) {
            return SendLook::Refused(respond::no_pane(pane));
        }
        if recorded.is_none() && !has_takers {
            return SendLook::Refused(respond::not_supported("send"));
        }
        if let Some(ask) = self.state.open_asks_of(pane).first().cloned() {
            return SendLook::Refused(respond::failure(
                ErrorBody::new(ErrorCode::AskOpen, "the pane has an open ask: answer it, or steer or stop")
                    .with("askId", ask),
            ));
        }
        let Some(p) = self.state.pane(pane) else {
            return SendLook::Refused(respond::no_pane(pane));
        };
        let current = p.turn_id().map(str::to_owned);
        // `turnId: null` says the phone saw no turn yet: any turn since moved it.
        if let Some(seen) = seen_turn {
            if seen.as_ref() != current.as_ref() {
                return SendLook::Refused(respond::failure(
                    ErrorBody::new(
                        ErrorCode::TurnMoved,
                        "a turn began after the one this send was written for",
                    )
                    .with("turnId", current.map_or(Value::Null, Value::String)),
                ));
            }
        }
        if self.is_stopping() {
            // No turn starts in a graceful stop, and nothing is
            // acknowledged that would not run: the phone sends it again.
            return SendLook::Refused(stopping());
        }
        let working = p.state() == PaneState::Working;
        // Sends still queued from the last turn go first: this one waits
        // behind them.
        let behind = p.has_queued();
        let waits = working || behind;
        if waits && p.queued_len() >= QUEUE_MAX {
            return SendLook::Refused(respond::error(
                ErrorCode::Busy,
                format!("pane {pane} already has {QUEUE_MAX} sends queued; try again after the turn"),
            ));
        }
        let want = if waits { SendState::Queued } else { SendState::Running };
        if recorded != Some(want) {
            return SendLook::Record(want);
        }
        if !waits {
            return SendLook::RunNow { turn_id: current };
        }
        self.state.queue_send(pane, QueuedSend { request_id: request_id.clone(), text: text.to_owned() });
        SendLook::Queued { turn_id: current, deliver_now: !working }
    }
}

/// `409 busy`, unstored: the phone sends it again once the agent is back.
pub fn stopping() -> Response {
    respond::error(ErrorCode::Busy, "the agent is stopping: send again once it is back")
}
