//! Exactly once: the receipt step every write goes through (§9), driven
//! here and decided by the machine (`durable_core::once`): a repeat of a
//! request id still being processed waits for the first; a stored receipt
//! is replayed with `replayed: true`; an evicted one is `500
//! receipt-dropped`; only a `200` is stored, and it is stored before the
//! response leaves. This file does what the machine asks — wait, run the
//! route's check and the write, call the store — and hands back what came
//! of it.

use std::future::Future;

use durable_types::Id;
use durable_types::exchange::Response;
use tokio::sync::oneshot;

use crate::core::Collie;
use durable_core::data::receipt::Receipt;
use durable_core::once::{ReceiptInput, ReceiptNext};
use durable_core::state::{JournalName, Link};

/// A request's receipt step in the machine. Dropped before its answer (its
/// caller went away), the machine lets the id go — the store's claim
/// released first, here, when the write was cut as it ran — or, with the
/// write applied, the rest goes on as a [`Tail`].
struct Step<'a> {
    core: &'a Collie,
    request_id: &'a Id,
    link: Link,
    over: bool,
}

impl Drop for Step<'_> {
    fn drop(&mut self) {
        if self.over {
            return;
        }
        let mut next = {
            let mut st = self.core.lock();
            st.links().forget_settle(self.link);
            st.machine_mut().drop_receipt_step(self.link)
        };
        loop {
            match next {
                None | Some(ReceiptNext::Respond(_)) => return,
                // `release` does not wait: done now, not left to a job
                // that might never run.
                Some(ReceiptNext::Release) => {
                    self.core.shared.options.receipts.release_dyn(self.request_id.as_str());
                    let input = ReceiptInput::Released;
                    next = Some(self.core.lock().machine_mut().receipt_step(self.link, input));
                }
                Some(rest) => {
                    let tail = Tail::new(self.core, self.request_id, self.link);
                    self.core.push_job(tail.finish(rest));
                    return;
                }
            }
        }
    }
}

/// What is left of a receipt step whose caller went away with its write
/// applied (the asks' wait, the put again, the release), run as a job of
/// its own, its answer sent to no one: the receipt reaches the store, and
/// a duplicate at another process replays it instead of running the write
/// again. Dropped before its end (the agent going away), it releases the
/// store's claim when it holds one and gives the step up.
struct Tail {
    core: Collie,
    request_id: Id,
    link: Link,
    over: bool,
}

impl Tail {
    fn new(core: &Collie, request_id: &Id, link: Link) -> Tail {
        Tail { core: core.inner(), request_id: request_id.clone(), link, over: false }
    }

    /// Drives the step to its end (its answer goes to no one).
    async fn finish(mut self, mut next: ReceiptNext) {
        let store = self.core.shared.options.receipts.clone();
        let id = self.request_id.as_str();
        loop {
            let input = match next {
                ReceiptNext::Respond(_) => {
                    self.over = true;
                    return;
                }
                ReceiptNext::WaitForAsks { target } => {
                    self.core.wait_for_journal(JournalName::Asks, target).await;
                    ReceiptInput::AsksWritten
                }
                ReceiptNext::Put { receipt, group } => {
                    ReceiptInput::Put(store.put_dyn(id, receipt, &group).await)
                }
                ReceiptNext::Release => {
                    store.release_dyn(id);
                    ReceiptInput::Released
                }
                // Not asked after the write: the machine ends the step on
                // an input it does not wait for (releasing first).
                ReceiptNext::WaitFirst
                | ReceiptNext::Check
                | ReceiptNext::Claim
                | ReceiptNext::SendState
                | ReceiptNext::Run => ReceiptInput::Released,
            };
            next = self.core.lock().machine_mut().receipt_step(self.link, input);
        }
    }
}

impl Drop for Tail {
    fn drop(&mut self) {
        if self.over {
            return;
        }
        if self.core.lock().machine().receipt_step_holds_store_claim(self.link) {
            self.core.shared.options.receipts.release_dyn(self.request_id.as_str());
        }
        self.core.lock().machine_mut().abandon_receipt_step(self.link);
    }
}

impl Step<'_> {
    /// Moves the step on under the lock; a wait for the first request is
    /// set up under the same lock, so its outcome cannot land before it.
    fn advance(
        &self,
        input: Option<ReceiptInput>,
    ) -> (ReceiptNext, Option<oneshot::Receiver<Option<Receipt>>>) {
        let mut st = self.core.lock();
        let next = match input {
            None => st.machine_mut().begin_receipt_step(self.link, self.request_id.clone()),
            Some(input) => st.machine_mut().receipt_step(self.link, input),
        };
        let settled = matches!(next, ReceiptNext::WaitFirst).then(|| st.links().settle_for(self.link));
        (next, settled)
    }
}

/// What a run of a write gives back: the response, and the receipt group
/// when it is a success to keep (its receipt is the response's own bytes).
pub(crate) struct Ran {
    pub(crate) response: Response,
    pub(crate) group: Option<String>,
}

impl Ran {
    /// A response that is not stored (a refusal, a `202 held`).
    pub(crate) fn unstored(response: Response) -> Ran {
        Ran { response, group: None }
    }

    /// A `200` whose receipt is kept in `group` (a body that could not be
    /// written is an error answer, which is not stored).
    pub(crate) fn stored(response: Response, group: String) -> Ran {
        Ran { response, group: Some(group) }
    }
}

impl Collie {
    /// Runs `run` at most once for `request_id`, through the receipt store.
    /// `before_run` is checked once the id is ours and before the store:
    /// it may answer at once (the answer route's held answers).
    pub(crate) async fn once<F, Fut>(
        &self,
        request_id: &Id,
        before_run: impl Fn(&Collie) -> Option<Response>,
        run: F,
    ) -> Response
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Ran>,
    {
        let link = self.lock().links().new_link();
        let mut step = Step { core: self, request_id, link, over: false };
        let store = &*self.shared.options.receipts;
        let mut run = Some(run);
        let (mut next, mut settled) = step.advance(None);
        loop {
            let input = match next {
                ReceiptNext::Respond(response) => {
                    step.over = true;
                    return response;
                }
                ReceiptNext::WaitFirst => {
                    let outcome = match settled.take() {
                        Some(settled) => settled.await.ok().flatten(),
                        None => None,
                    };
                    ReceiptInput::Settled(outcome)
                }
                ReceiptNext::Check => ReceiptInput::Checked(before_run(self)),
                ReceiptNext::Claim => ReceiptInput::Claimed(store.claim_dyn(request_id.as_str()).await),
                ReceiptNext::SendState => {
                    ReceiptInput::SendState(store.send_state_dyn(request_id.as_str()).await)
                }
                ReceiptNext::Run => {
                    let ran = match run.take() {
                        Some(run) => run().await,
                        None => Ran::unstored(durable_core::respond::error(
                            durable_types::ErrorCode::Internal,
                            "the receipt step asked to run a write twice; it ran once",
                        )),
                    };
                    ReceiptInput::Ran { response: ran.response, group: ran.group }
                }
                ReceiptNext::WaitForAsks { target } => {
                    self.wait_for_journal(JournalName::Asks, target).await;
                    ReceiptInput::AsksWritten
                }
                ReceiptNext::Put { receipt, group } => {
                    ReceiptInput::Put(store.put_dyn(request_id.as_str(), receipt, &group).await)
                }
                ReceiptNext::Release => {
                    store.release_dyn(request_id.as_str());
                    ReceiptInput::Released
                }
            };
            (next, settled) = step.advance(Some(input));
        }
    }
}
