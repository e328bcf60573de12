//! The sends a restart left (§9.1), the machine's side. Only those that
//! were answered count (a send never answered is the phone's to repeat):
//! one still queued goes back in its pane's queue; one whose turn was
//! running is closed with a notice on its pane; one whose pane was not
//! declared again is closed, with a warn line. The phone's writes are held
//! back meanwhile (the state's writers), so that a send that arrives during
//! the recovery goes behind the ones it puts back.
//!
//! A sequence, as the receipt step (`once.rs`): the driver starts it with
//! [`Machine::begin_recovering_sends`], does the store call each
//! [`RecoveryNext`] names and hands the result back with
//! [`Machine::recovering_sends`], until [`RecoveryNext::Over`] names the
//! panes whose queued sends it delivers.

use durable_types::{Id, Item, ItemBody, NoticeTone, Timestamp};

use crate::data::item_ids::derived_item_id;
use crate::data::receipt::{Lookup, PendingSend, SendState, StoreError};
use crate::machine::Machine;
use crate::state::{LeftSend, QueuedSend, RecoveryStage, SendRecovery};

/// What the recovery needs done next.
#[derive(Debug, PartialEq, Eq)]
pub enum RecoveryNext {
    /// Read the sends the last run left (`ReceiptStore::unfinished_sends`),
    /// then [`RecoveryInput::Sends`].
    ReadSends,
    /// Read this send's receipt (`ReceiptStore::get`), then
    /// [`RecoveryInput::Lookup`].
    Lookup(Id),
    /// Record this send closed (`ReceiptStore::set_send_state`), then
    /// [`RecoveryInput::Closed`].
    Close(Id),
    /// The recovery is over: deliver the sends queued on these panes.
    Over {
        /// The panes whose queues got sends back, in the order first met.
        deliver: Vec<Id>,
    },
}

/// What the driver hands back for the last [`RecoveryNext`].
#[derive(Debug)]
pub enum RecoveryInput {
    /// The store's unfinished sends.
    Sends(Result<Vec<PendingSend>, StoreError>),
    /// The send's receipt.
    Lookup(Result<Lookup, StoreError>),
    /// The send's close, recorded or not.
    Closed(Result<(), StoreError>),
}

impl Machine {
    /// Starts the recovery of the sends the last run left.
    pub fn begin_recovering_sends(&mut self) -> RecoveryNext {
        self.state.put_send_recovery(SendRecovery::default());
        RecoveryNext::ReadSends
    }

    /// Moves the recovery on with what the store said. `now` dates the
    /// notices it writes. A problem is a warn line; none stops the
    /// recovery but a failed read of the sends.
    pub fn recovering_sends(&mut self, input: RecoveryInput, now: Timestamp) -> RecoveryNext {
        let Some(mut recovery) = self.state.take_send_recovery() else {
            self.warn("the recovery of the sends was driven after it ended".to_owned());
            return RecoveryNext::Over { deliver: Vec::new() };
        };
        match (std::mem::take(&mut recovery.stage), input) {
            (RecoveryStage::ReadingSends, RecoveryInput::Sends(Err(e))) => {
                self.warn(format!("the sends left by the last run could not be read ({e})"));
                return RecoveryNext::Over { deliver: Vec::new() };
            }
            (RecoveryStage::ReadingSends, RecoveryInput::Sends(Ok(sends))) => {
                // A record whose ids do not read is no send of this agent's.
                recovery.left = sends
                    .into_iter()
                    .filter_map(|send| {
                        let request_id = Id::new(send.request_id.as_str()).ok()?;
                        let pane = Id::new(send.pane.as_str()).ok()?;
                        Some(LeftSend { request_id, pane, text: send.text, state: send.state })
                    })
                    .collect();
            }
            (
                RecoveryStage::LookingUp(send),
                RecoveryInput::Lookup(Ok(Lookup::Found(_) | Lookup::Evicted)),
            ) => {
                if let Some((request_id, then_warn)) = self.take_up(&mut recovery, send, now) {
                    return self.close(recovery, request_id, then_warn);
                }
            }
            (RecoveryStage::LookingUp(send), RecoveryInput::Lookup(Ok(Lookup::Unknown))) => {
                // Never answered: the phone repeats it if it still wants it.
                return self.close(recovery, send.request_id, None);
            }
            (RecoveryStage::LookingUp(send), RecoveryInput::Lookup(Err(e))) => {
                self.warn(format!(
                    "send {}: its receipt could not be read ({e}); left as it is",
                    send.request_id
                ));
            }
            (RecoveryStage::Closing { request_id, then_warn }, RecoveryInput::Closed(closed)) => {
                if let Err(e) = closed {
                    self.warn(format!("send {request_id}: its close could not be recorded ({e})"));
                }
                if let Some(line) = then_warn {
                    self.warn(line);
                }
            }
            (stage, input) => {
                self.warn(format!(
                    "the recovery of the sends was driven out of order ({input:?} while it stood at {stage:?}); the sends left are left as they are"
                ));
                return RecoveryNext::Over { deliver: recovery.deliver };
            }
        }
        self.next_send(recovery)
    }

    /// An answered send of the last run: back in its queue (`None`), or to
    /// be closed, with the warn line to give once it is.
    fn take_up(
        &mut self,
        recovery: &mut SendRecovery,
        send: LeftSend,
        now: Timestamp,
    ) -> Option<(Id, Option<String>)> {
        let LeftSend { request_id, pane, text, state } = send;
        if self.state.pane(&pane).is_none() {
            let why = format!(
                "send {request_id} was acknowledged for pane {pane}, which was not opened again: closed"
            );
            return Some((request_id, Some(why)));
        }
        if state == SendState::Queued {
            self.state.queue_send(&pane, QueuedSend { request_id, text });
            if !recovery.deliver.contains(&pane) {
                recovery.deliver.push(pane);
            }
            return None;
        }
        // Its turn was running: cut by the restart, said on its pane.
        let notice = Item::new(
            derived_item_id("cut", request_id.as_str()),
            ItemBody::Notice {
                text: format!("The agent restarted while answering “{text}”; that answer did not finish."),
                partial: false,
                tone: Some(NoticeTone::Warn),
            },
        );
        if let Ok((notice, _)) = notice.sanitized() {
            let _ = self.write_item(&pane, notice, now);
        }
        Some((request_id, None))
    }

    /// Asks for `request_id`'s close; `then_warn` is given once recorded.
    fn close(
        &mut self,
        mut recovery: SendRecovery,
        request_id: Id,
        then_warn: Option<String>,
    ) -> RecoveryNext {
        recovery.stage = RecoveryStage::Closing { request_id: request_id.clone(), then_warn };
        self.state.put_send_recovery(recovery);
        RecoveryNext::Close(request_id)
    }

    /// The next send to look at, or the end.
    fn next_send(&mut self, mut recovery: SendRecovery) -> RecoveryNext {
        let Some(send) = recovery.left.pop_front() else {
            return RecoveryNext::Over { deliver: recovery.deliver };
        };
        let request_id = send.request_id.clone();
        recovery.stage = RecoveryStage::LookingUp(send);
        self.state.put_send_recovery(recovery);
        RecoveryNext::Lookup(request_id)
    }
}
