//! A send delivered (§8, §9.1), the machine's side: offered to the pane's
//! chat handler, then the agent-wide one, until one takes or refuses it;
//! recorded `Running` (unless it was already); begun as the pane's turn,
//! with the `user` item naming its request id. A send taken from the
//! pane's queue and not delivered is closed, with a notice on its pane; in
//! a graceful stop it goes back to its queue.
//!
//! The turn is counted from the start, under the same step as the look at
//! the stop, so either a graceful stop sees this turn (and waits for it)
//! or this sees the stop. A turn begun stays counted until the driver
//! says it ended (`State::turn_ended`); a delivery that ends otherwise, or
//! is dropped, stops counting it here.
//!
//! A sequence, as the receipt step (`once.rs`): the driver starts it with
//! [`Machine::begin_delivery`] or [`Machine::begin_queued_delivery`], does
//! what each [`DeliveryNext`] names (a handler's verdict, a store write,
//! the turn's inbox) and hands the outcome back with
//! [`Machine::delivery_step`], until [`DeliveryNext::Over`].

use durable_types::{Id, Item, ItemBody, NoticeTone, Timestamp};

use crate::data::item_ids::user_item_id;
use crate::data::receipt::{SendState, StoreError};
use crate::machine::Machine;
use crate::state::{Delivery, DeliveryStage, Effect, Link, QueuedSend};

pub use crate::state::ChatSlot;

/// What a delivery needs done next.
#[derive(Debug, PartialEq, Eq)]
pub enum DeliveryNext {
    /// Offer the send to this chat handler (`check_send`), then
    /// [`DeliveryInput::Checked`]; a slot with no handler is
    /// [`Verdict::NotSupported`].
    Check(ChatSlot),
    /// Record the send `Running` (`ReceiptStore::set_send_state`), then
    /// [`DeliveryInput::Marked`]: without the mark a restart would take
    /// the turn for one not begun and run it again.
    MarkRunning,
    /// Begin the turn on the pane with the handler that took it (its
    /// steer inbox, the pane `working`), then [`DeliveryInput::Started`].
    StartTurn,
    /// Record the queued send closed, then [`DeliveryInput::Closed`].
    MarkClosed,
    /// The delivery is over.
    Over(Delivered),
}

/// How a delivery ended.
#[derive(Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Delivered {
    /// Its turn began: the driver runs it, and says when it ends.
    Started,
    /// A handler refused it (`409 refused`), or its turn could not begin.
    Refused(String),
    /// No handler took it (`409 not-supported`).
    NotSupported,
    /// A graceful stop began: nothing was done (a queued send is back in
    /// its queue).
    Stopping,
    /// The driver handed back something the delivery did not wait for
    /// (`500`, naming it): nothing more is done.
    Failed(String),
}

/// What the driver hands back for the last [`DeliveryNext`].
#[derive(Debug)]
pub enum DeliveryInput {
    /// The chat handler's verdict.
    Checked(Verdict),
    /// The send's `Running` mark, recorded or not.
    Marked(Result<(), StoreError>),
    /// The turn begun, or why it could not (its pane closed meanwhile).
    Started(Result<(), String>),
    /// The queued send's close, recorded or not.
    Closed(Result<(), StoreError>),
}

/// A chat handler's verdict on a send.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    /// It takes the send: its turn begins.
    Takes,
    /// It refuses the send, with a reason for the phone.
    Refuses(String),
    /// It does not take sends here (or the slot has no handler): the next
    /// one is asked.
    NotSupported,
}

impl Machine {
    /// Starts delivering a send to `pane`, for the driver's `link`, whose
    /// writer holds the pane's write. `recorded` is the state the store
    /// has it in (`Running` for a send run as it arrives, `Queued` for one
    /// from the queue). `stop` names the turn's stop signal: armed on the
    /// pane now, so a stop that arrives while a handler decides fires it.
    pub fn begin_delivery(
        &mut self,
        link: Link,
        pane: &Id,
        send: QueuedSend,
        recorded: SendState,
        stop: Link,
    ) -> DeliveryNext {
        let QueuedSend { request_id, text } = send;
        let from_queue = recorded == SendState::Queued;
        if self.is_stopping() {
            self.state.effect(Effect::ForgetStop(stop));
            if from_queue {
                // Back where it was, for the next start.
                self.state.requeue_send(pane, QueuedSend { request_id, text });
            }
            return DeliveryNext::Over(Delivered::Stopping);
        }
        self.state.turn_began();
        if !self.state.arm_turn_stop(pane, stop) {
            self.state.effect(Effect::ForgetStop(stop));
        }
        let stage = DeliveryStage::Checking(ChatSlot::Pane);
        let marked = recorded == SendState::Running;
        self.state
            .put_delivery(link, Delivery { pane: pane.clone(), request_id, text, from_queue, marked, stage });
        DeliveryNext::Check(ChatSlot::Pane)
    }

    /// Starts delivering the oldest send queued on `pane`, when the pane
    /// is idle, asks nothing and no graceful stop began (what is queued
    /// then stays queued: a store that keeps sends delivers it at the next
    /// start). Returns the send taken and the first step, or `None` (and
    /// `stop` is let go).
    pub fn begin_queued_delivery(
        &mut self,
        link: Link,
        pane: &Id,
        stop: Link,
    ) -> Option<(QueuedSend, DeliveryNext)> {
        let next = if self.is_stopping() { None } else { self.state.next_queued_send(pane) };
        let Some(send) = next else {
            self.state.effect(Effect::ForgetStop(stop));
            return None;
        };
        let first = self.begin_delivery(link, pane, send.clone(), SendState::Queued, stop);
        Some((send, first))
    }

    /// Moves the delivery of `link` on with what the driver did. `now`
    /// dates the items it writes.
    pub fn delivery_step(&mut self, link: Link, input: DeliveryInput, now: Timestamp) -> DeliveryNext {
        let Some(mut delivery) = self.state.take_delivery(link) else {
            return DeliveryNext::Over(Delivered::Failed(format!(
                "no delivery is under way for link {link} (handed {input:?})"
            )));
        };
        let stage = std::mem::replace(&mut delivery.stage, DeliveryStage::Starting);
        match (stage, input) {
            (DeliveryStage::Checking(_), DeliveryInput::Checked(Verdict::Takes)) if delivery.marked => {
                self.go(link, delivery, DeliveryStage::Starting, DeliveryNext::StartTurn)
            }
            (DeliveryStage::Checking(_), DeliveryInput::Checked(Verdict::Takes)) => {
                self.go(link, delivery, DeliveryStage::Marking, DeliveryNext::MarkRunning)
            }
            (DeliveryStage::Checking(_), DeliveryInput::Checked(Verdict::Refuses(reason))) => {
                self.not_delivered(link, delivery, reason, true)
            }
            (DeliveryStage::Checking(ChatSlot::Pane), DeliveryInput::Checked(Verdict::NotSupported)) => {
                let (stage, next) =
                    (DeliveryStage::Checking(ChatSlot::Wide), DeliveryNext::Check(ChatSlot::Wide));
                self.go(link, delivery, stage, next)
            }
            (DeliveryStage::Checking(_), DeliveryInput::Checked(Verdict::NotSupported)) => {
                self.not_delivered(link, delivery, "no handler takes send here".to_owned(), false)
            }
            (DeliveryStage::Marking, DeliveryInput::Marked(Ok(()))) => {
                delivery.marked = true;
                self.go(link, delivery, DeliveryStage::Starting, DeliveryNext::StartTurn)
            }
            (DeliveryStage::Marking, DeliveryInput::Marked(Err(e))) => {
                let reason = format!("the send's turn could not be recorded ({e})");
                self.not_delivered(link, delivery, reason, true)
            }
            (DeliveryStage::Starting, DeliveryInput::Started(Ok(()))) => {
                let Delivery { pane, request_id, text, .. } = delivery;
                let user = Item::new(
                    user_item_id(&request_id),
                    ItemBody::User { text, request_id: Some(request_id.clone()) },
                );
                if let Ok((user, _)) = user.sanitized() {
                    // Its pane closed meanwhile: nothing to show it on.
                    let _ = self.write_item(&pane, user, now);
                }
                DeliveryNext::Over(Delivered::Started)
            }
            (DeliveryStage::Starting, DeliveryInput::Started(Err(reason))) => {
                self.not_delivered(link, delivery, reason, true)
            }
            (DeliveryStage::Closing { reason, supported }, DeliveryInput::Closed(closed)) => {
                if let Err(e) = closed {
                    self.warn(format!("send {}: its close could not be recorded ({e})", delivery.request_id));
                }
                let notice = Item::new(
                    user_item_id(&delivery.request_id),
                    ItemBody::Notice {
                        text: format!("A queued message was not delivered: {reason}"),
                        partial: false,
                        tone: Some(NoticeTone::Warn),
                    },
                );
                if let Ok((notice, _)) = notice.sanitized() {
                    let _ = self.write_item(&delivery.pane, notice, now);
                }
                DeliveryNext::Over(if supported {
                    Delivered::Refused(reason)
                } else {
                    Delivered::NotSupported
                })
            }
            (stage, input) => {
                if stage.counts_turn() {
                    self.state.turn_ended();
                }
                DeliveryNext::Over(Delivered::Failed(format!(
                    "the delivery of send {} was driven out of order ({input:?} while it stood at {stage:?})",
                    delivery.request_id
                )))
            }
        }
    }

    /// The driver's delivery of `link` went away (its request dropped, or
    /// its job): its turn, not begun, is no longer counted.
    pub fn drop_delivery(&mut self, link: Link) {
        if self.state.take_delivery(link).is_some_and(|d| d.stage.counts_turn()) {
            self.state.turn_ended();
        }
    }

    fn go(
        &mut self,
        link: Link,
        mut delivery: Delivery,
        stage: DeliveryStage,
        next: DeliveryNext,
    ) -> DeliveryNext {
        delivery.stage = stage;
        self.state.put_delivery(link, delivery);
        next
    }

    /// Not delivered: the turn is not counted any more; a queued send is
    /// closed first (with its notice once recorded). `supported`: a
    /// handler gave `reason` (`refused`), rather than none taking it.
    fn not_delivered(
        &mut self,
        link: Link,
        delivery: Delivery,
        reason: String,
        supported: bool,
    ) -> DeliveryNext {
        self.state.turn_ended();
        if delivery.from_queue {
            let stage = DeliveryStage::Closing { reason, supported };
            return self.go(link, delivery, stage, DeliveryNext::MarkClosed);
        }
        DeliveryNext::Over(if supported { Delivered::Refused(reason) } else { Delivered::NotSupported })
    }
}
