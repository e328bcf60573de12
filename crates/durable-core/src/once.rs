//! Exactly once, the machine's side: the receipt step every write goes
//! through (§9). A repeat of a request id still being processed waits for
//! the first; a stored receipt is replayed with `replayed: true` (a send's
//! with where it stands, §9.1); an evicted one is `500 receipt-dropped`;
//! only a `200` is stored, and it is stored before the response leaves.
//!
//! The step is a sequence: the driver starts it with
//! [`Machine::begin_receipt_step`], does what each [`ReceiptNext`] asks
//! (wait, run the route's check, call the store, run the write) and hands
//! the outcome back with [`Machine::receipt_step`], until the answer comes
//! out as [`ReceiptNext::Respond`]. A driver whose request is dropped midway
//! says so with [`Machine::drop_receipt_step`], and drives on what it
//! gives back: a write applied is kept in the store all the same.

use durable_types::exchange::Response;
use durable_types::{ErrorCode, Id};
use serde_json::Value;

use crate::data::receipt::{Lookup, Receipt, SendState, StoreError};
use crate::machine::Machine;
use crate::respond;
use crate::state::{Ending, JournalName, Link, ReceiptStep, Stage};

/// What a receipt step needs done next; the driver hands its outcome back
/// as the [`ReceiptInput`] of the same name.
#[derive(Debug, Clone)]
pub enum ReceiptNext {
    /// Another request holds the id: wait for `Effect::Settle` to this
    /// request's link, then [`ReceiptInput::Settled`].
    WaitFirst,
    /// The id is this request's: run the route's own check before the
    /// store (the answer route's held answers), then [`ReceiptInput::Checked`].
    Check,
    /// Claim the id in the store (`ReceiptStore::claim`), then
    /// [`ReceiptInput::Claimed`].
    Claim,
    /// Ask the store where the send being replayed stands
    /// (`ReceiptStore::send_state`), then [`ReceiptInput::SendState`].
    SendState,
    /// Run the write, then [`ReceiptInput::Ran`].
    Run,
    /// Wait until the store applied the first `target` ops of the asks'
    /// journal (a card the write raised or closed is kept before its answer
    /// leaves), then [`ReceiptInput::AsksWritten`].
    WaitForAsks {
        /// The journal's length when the write was done.
        target: u64,
    },
    /// Put the receipt in the store (`ReceiptStore::put`), then
    /// [`ReceiptInput::Put`].
    Put {
        /// The receipt: the response's own bytes.
        receipt: Receipt,
        /// Its group (`ReceiptStore::put`'s eviction group).
        group: String,
    },
    /// Release the id's claim in the store (`ReceiptStore::release`), then
    /// [`ReceiptInput::Released`].
    Release,
    /// The step is over: send this.
    Respond(Response),
}

/// What the driver hands back for the last [`ReceiptNext`].
#[derive(Debug)]
pub enum ReceiptInput {
    /// The first request of the id ended with this receipt, or with
    /// nothing (refused, failed, dropped).
    Settled(Option<Receipt>),
    /// The route's check answered at once, or not.
    Checked(Option<Response>),
    /// The store's claim.
    Claimed(Result<Lookup, StoreError>),
    /// Where the send stands, by the store (a store that cannot say gives
    /// the receipt as it was: the answer itself is what the phone must get).
    SendState(Result<Option<SendState>, StoreError>),
    /// The write's response, with its receipt group when it is a success
    /// to keep.
    Ran {
        /// What the write answered.
        response: Response,
        /// Its receipt group, for a `200` to store.
        group: Option<String>,
    },
    /// The asks' journal was applied that far.
    AsksWritten,
    /// The store's put.
    Put(Result<(), StoreError>),
    /// The store's claim was released.
    Released,
}

impl Machine {
    /// Starts the receipt step of the write `request` (a link the driver
    /// chose, unique among the steps under way) for `request_id`.
    pub fn begin_receipt_step(&mut self, request: Link, request_id: Id) -> ReceiptNext {
        if self.state.receipt_step(request).is_some() {
            return ReceiptNext::Respond(out_of_order(
                "a receipt step is under way for this request already",
            ));
        }
        let stage = if self.state.claim_request(&request_id) {
            Stage::Checking
        } else {
            self.state.wait_for_request(&request_id, request);
            Stage::WaitingFirst
        };
        let next = match stage {
            Stage::Checking => ReceiptNext::Check,
            _ => ReceiptNext::WaitFirst,
        };
        self.state.put_receipt_step(request, ReceiptStep { request_id, stage, detached: false });
        next
    }

    /// Moves the receipt step of `request` on with what the driver did.
    /// An input the step does not wait for is a driver's mistake: the step
    /// ends with `500` (and lets the id go), never a panic.
    pub fn receipt_step(&mut self, request: Link, input: ReceiptInput) -> ReceiptNext {
        let Some(ReceiptStep { request_id, stage, detached }) = self.state.take_receipt_step(request) else {
            return ReceiptNext::Respond(out_of_order("no receipt step is under way for this request"));
        };
        let (stage, next) = match (stage, input) {
            (Stage::WaitingFirst, ReceiptInput::Settled(Some(receipt))) => {
                // A send's replay says where it stands (§9.1) also when it
                // waited for the first: the same path as a later repeat.
                return self.replay(request, request_id, receipt, false);
            }
            (Stage::WaitingFirst, ReceiptInput::Settled(None)) => {
                // The first was refused or failed: this repeat runs on its own.
                return self.begin_receipt_step(request, request_id);
            }
            (Stage::Checking, ReceiptInput::Checked(Some(response))) => {
                self.state.settle_request(&request_id, None);
                return ReceiptNext::Respond(response);
            }
            (Stage::Checking, ReceiptInput::Checked(None)) => {
                if let Some(receipt) = self.state.memory_receipt(&request_id).cloned() {
                    // Applied before and not in the store (yet): replayed.
                    self.state.settle_request(&request_id, Some(receipt.clone()));
                    return self.replay(request, request_id, receipt, false);
                }
                (Stage::Claiming, ReceiptNext::Claim)
            }
            (Stage::Claiming, ReceiptInput::Claimed(claimed)) => match claimed {
                Ok(Lookup::Found(receipt)) => return self.replay(request, request_id, receipt, true),
                Ok(Lookup::Evicted) => {
                    self.state.settle_request(&request_id, None);
                    return ReceiptNext::Respond(respond::error(
                        ErrorCode::ReceiptDropped,
                        format!(
                            "request {request_id} was answered before, but its receipt was evicted; nothing was executed"
                        ),
                    ));
                }
                // The id is ours in the store too (across processes) until
                // released; it is released before a waiting repeat in this
                // process hears anything.
                Ok(Lookup::Unknown) => (Stage::Running, ReceiptNext::Run),
                Err(e) => {
                    self.state.settle_request(&request_id, None);
                    return ReceiptNext::Respond(respond::error(
                        ErrorCode::Internal,
                        format!("the receipt store failed: {e}"),
                    ));
                }
            },
            (Stage::ReplayingSend { receipt, settle }, ReceiptInput::SendState(state)) => {
                let response = replay_with(&receipt, state.ok().flatten());
                if settle {
                    self.state.settle_request(&request_id, Some(receipt));
                }
                return ReceiptNext::Respond(response);
            }
            (Stage::Running, ReceiptInput::Ran { response, group: Some(group) })
                if response.status == 200 =>
            {
                // The bytes the response sends, shared, not copied.
                let receipt = Receipt::new(200, response.body.clone());
                // Applied: the receipt is kept in memory until the store
                // has it, so that a repeat in this process replays it, never
                // runs it twice, also when `put` fails or this request is
                // dropped while `put` runs (its waiting repeats then run
                // themselves: found by the exhaustive model check, issue #15).
                self.state.keep_receipt(request_id.clone(), receipt.clone());
                // A card this write raised or closed is in the store before
                // the answer leaves (after the receipt in memory: a request
                // dropped during this wait is still never run twice).
                let target = self.state.journal_pushed(JournalName::Asks);
                if self.config.keeps_asks && !self.state.journal_has_applied(JournalName::Asks, target) {
                    (Stage::WaitingForAsks { receipt, group, response }, ReceiptNext::WaitForAsks { target })
                } else {
                    let put = ReceiptNext::Put { receipt: receipt.clone(), group: group.clone() };
                    (Stage::Putting { receipt, group, response }, put)
                }
            }
            (Stage::Running, ReceiptInput::Ran { response, .. }) => {
                (Stage::Releasing(Ending::Unstored(response)), ReceiptNext::Release)
            }
            (Stage::WaitingForAsks { receipt, group, response }, ReceiptInput::AsksWritten) => {
                let put = ReceiptNext::Put { receipt: receipt.clone(), group: group.clone() };
                (Stage::Putting { receipt, group, response }, put)
            }
            (Stage::Putting { receipt, response, .. }, ReceiptInput::Put(put)) => {
                let ending = match put {
                    Ok(()) => Ending::Kept { receipt, response },
                    Err(e) => Ending::NotKept {
                        receipt,
                        response: respond::error(
                            ErrorCode::Internal,
                            format!(
                                "the write was applied but its receipt could not be stored ({e}); a retry with this request id replays it"
                            ),
                        ),
                    },
                };
                (Stage::Releasing(ending), ReceiptNext::Release)
            }
            (Stage::Releasing(ending), ReceiptInput::Released) => {
                let (settle, response) = match ending {
                    Ending::Unstored(response) => (None, response),
                    Ending::Kept { receipt, response } => {
                        self.state.forget_receipt(&request_id);
                        (Some(receipt), response)
                    }
                    // Applied but not durable: the receipt stays in memory.
                    Ending::NotKept { receipt, response } => (Some(receipt), response),
                };
                self.state.settle_request(&request_id, settle);
                return ReceiptNext::Respond(response);
            }
            (stage, input) => {
                let why = format!("it got {} while it waited for {}", input.name(), stage_wants(&stage));
                let response = out_of_order(&why);
                // The store's claim is let go first, as at every end.
                if !stage.holds_store_claim() {
                    match stage {
                        Stage::WaitingFirst => self.state.stop_waiting_for_request(&request_id, request),
                        stage => self.end_step(&request_id, &stage),
                    }
                    return ReceiptNext::Respond(response);
                }
                (Stage::Releasing(Ending::Unstored(response)), ReceiptNext::Release)
            }
        };
        self.state.put_receipt_step(request, ReceiptStep { request_id, stage, detached });
        next
    }

    /// Whether the receipt step of `request` holds the id's claim in the
    /// store: a driver that abandons it ([`Machine::abandon_receipt_step`])
    /// releases it first.
    pub fn receipt_step_holds_store_claim(&self, request: Link) -> bool {
        self.state.receipt_step(request).is_some_and(|s| s.stage.holds_store_claim())
    }

    /// The caller of a receipt step went away before its answer. A repeat
    /// waiting stops waiting, and a step that did nothing the store must
    /// hear of ends (the id is let go: its repeats run on their own).
    /// Otherwise it goes on without its caller — `Some(next)`, to be driven
    /// to its end as before, its answer sent to no one: a write applied is
    /// put in the store and the repeats replay it (another process's
    /// included, which would otherwise run it again once the claim went),
    /// and a claim held in the store is released before the id is let go
    /// here. The step remembers it was detached: a second drop abandons it.
    pub fn drop_receipt_step(&mut self, request: Link) -> Option<ReceiptNext> {
        let ReceiptStep { request_id, stage, detached } = self.state.take_receipt_step(request)?;
        if detached {
            // Its driver went away too: the claim in the store is released
            // first (by whoever drives it on), then the id let go.
            if !stage.holds_store_claim() {
                self.end_step(&request_id, &stage);
                return None;
            }
            let stage = Stage::Releasing(Ending::Unstored(dropped()));
            self.state.put_receipt_step(request, ReceiptStep { request_id, stage, detached });
            return Some(ReceiptNext::Release);
        }
        let (stage, next) = match stage {
            Stage::WaitingFirst => {
                self.state.stop_waiting_for_request(&request_id, request);
                return None;
            }
            Stage::WaitingForAsks { receipt, group, response } => {
                let target = self.state.journal_pushed(JournalName::Asks);
                (Stage::WaitingForAsks { receipt, group, response }, ReceiptNext::WaitForAsks { target })
            }
            Stage::Putting { receipt, group, response } => {
                // Put again: the put in flight went with the caller, or
                // lands first (a put of a kept id keeps the first).
                let put = ReceiptNext::Put { receipt: receipt.clone(), group: group.clone() };
                (Stage::Putting { receipt, group, response }, put)
            }
            Stage::Releasing(ending) => (Stage::Releasing(ending), ReceiptNext::Release),
            // The write was cut as it ran: nothing applied to keep; the
            // store's claim is released, then the id let go.
            Stage::Running => (Stage::Releasing(Ending::Unstored(dropped())), ReceiptNext::Release),
            stage => {
                self.end_step(&request_id, &stage);
                return None;
            }
        };
        self.state.put_receipt_step(request, ReceiptStep { request_id, stage, detached: true });
        Some(next)
    }

    /// The driver gives a receipt step up (a detached step whose driver
    /// went away too): the id is let go as it stands. A driver that holds
    /// the store's claim ([`Machine::receipt_step_holds_store_claim`])
    /// releases it first.
    pub fn abandon_receipt_step(&mut self, request: Link) {
        if let Some(ReceiptStep { request_id, stage, .. }) = self.state.take_receipt_step(request) {
            match stage {
                Stage::WaitingFirst => self.state.stop_waiting_for_request(&request_id, request),
                stage => self.end_step(&request_id, &stage),
            }
        }
    }

    /// A step ends without a receipt to hand out: the id is free.
    fn end_step(&mut self, request_id: &Id, stage: &Stage) {
        if stage.holds_id() {
            self.state.settle_request(request_id, None);
        }
    }

    /// Replays `receipt`; a send's asks the store where it stands first.
    /// `settle`: this request holds the id, and settles it once the replay
    /// is written.
    fn replay(&mut self, request: Link, request_id: Id, receipt: Receipt, settle: bool) -> ReceiptNext {
        if is_send(&receipt) {
            let stage = Stage::ReplayingSend { receipt, settle };
            self.state.put_receipt_step(request, ReceiptStep { request_id, stage, detached: false });
            return ReceiptNext::SendState;
        }
        let response = replay(&receipt);
        if settle {
            self.state.settle_request(&request_id, Some(receipt));
        }
        ReceiptNext::Respond(response)
    }
}

impl ReceiptInput {
    fn name(&self) -> &'static str {
        match self {
            ReceiptInput::Settled(_) => "the first request's outcome",
            ReceiptInput::Checked(_) => "the route's check",
            ReceiptInput::Claimed(_) => "the store's claim",
            ReceiptInput::SendState(_) => "the send's state",
            ReceiptInput::Ran { .. } => "the write's answer",
            ReceiptInput::AsksWritten => "the asks' journal written",
            ReceiptInput::Put(_) => "the store's put",
            ReceiptInput::Released => "the claim released",
        }
    }
}

fn stage_wants(stage: &Stage) -> &'static str {
    match stage {
        Stage::WaitingFirst => "the first request's outcome",
        Stage::Checking => "the route's check",
        Stage::Claiming => "the store's claim",
        Stage::ReplayingSend { .. } => "the send's state",
        Stage::Running => "the write's answer",
        Stage::WaitingForAsks { .. } => "the asks' journal written",
        Stage::Putting { .. } => "the store's put",
        Stage::Releasing(_) => "the claim released",
    }
}

/// The answer of a step whose caller went away (sent to no one).
fn dropped() -> Response {
    respond::error(ErrorCode::Internal, "the request was dropped before its answer")
}

fn out_of_order(why: &str) -> Response {
    respond::error(ErrorCode::Internal, format!("the receipt step was driven out of order: {why}"))
}

/// Whether a receipt is a send's (`result` is `sent` or `queued`): its
/// replay says where the send stands.
fn is_send(receipt: &Receipt) -> bool {
    /// The one field that tells a send's receipt.
    #[derive(serde::Deserialize)]
    struct ResultField<'a> {
        #[serde(borrow)]
        result: Option<std::borrow::Cow<'a, str>>,
    }
    let result = serde_json::from_slice::<ResultField<'_>>(&receipt.body).ok().and_then(|r| r.result);
    matches!(result.as_deref(), Some("sent" | "queued"))
}

/// A stored receipt sent again, with `replayed: true`.
fn replay(receipt: &Receipt) -> Response {
    replay_with(receipt, None)
}

/// A receipt sent again; a send's also says where it stands (the
/// `Durable-Delivery` header, §9.1) when the store keeps sends. The body is
/// the first answer's, as §9 requires.
fn replay_with(receipt: &Receipt, delivery: Option<SendState>) -> Response {
    let Ok(mut body) = receipt.parse_body() else {
        return respond::error(ErrorCode::Internal, "a kept receipt is damaged: its body is not JSON");
    };
    if let Value::Object(m) = &mut body {
        m.insert("replayed".into(), Value::Bool(true));
    }
    let mut response = respond::json(receipt.status, &body);
    response.delivery = delivery.map(SendState::as_str);
    response
}
