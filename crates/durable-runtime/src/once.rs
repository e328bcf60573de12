//! Exactly once: the receipt step every write goes through (§9). A repeat
//! of a request id still being processed waits for the first; a stored
//! receipt is replayed with `replayed: true`; an evicted one is `500
//! receipt-dropped`; only a `200` is stored, and it is stored before the
//! response leaves.

use std::future::Future;

use durable_types::exchange::Response;
use durable_types::{ErrorCode, Id};
use serde_json::Value;

use crate::core::Collie;
use crate::receipts::DynReceiptStore;
use durable_core::data::receipt::{Lookup, Receipt, SendState};
use durable_core::respond;
use durable_core::state::Link;

/// The first request's hold on its id, in the machine's claim table
/// (`State::claim_request`). When it ends, however it ends — a settle, or
/// the request dropped — the id is free and then the waiting repeats hear
/// the outcome (nothing, if none was given): a repeat that hears nothing
/// claims the id itself.
struct RequestClaim<'a> {
    core: &'a Collie,
    id: &'a Id,
    ended: bool,
}

impl RequestClaim<'_> {
    fn settle(mut self, receipt: Option<Receipt>) {
        self.end(receipt);
    }

    fn end(&mut self, receipt: Option<Receipt>) {
        if std::mem::replace(&mut self.ended, true) {
            return;
        }
        self.core.lock().settle_request(self.id, receipt);
    }
}

impl Drop for RequestClaim<'_> {
    fn drop(&mut self) {
        self.end(None);
    }
}

/// A repeat waiting for the first request of its id. Dropped while it
/// waits (its caller went away), it leaves the claim's waiters and the
/// links: a handler stuck for long with its phone retrying keeps nothing.
struct RepeatWaiting<'a> {
    core: &'a Collie,
    id: &'a Id,
    waiter: Link,
    settled: bool,
}

impl Drop for RepeatWaiting<'_> {
    fn drop(&mut self) {
        if !self.settled {
            let mut st = self.core.lock();
            st.stop_waiting_for_request(self.id, self.waiter);
            st.links().forget_settle(self.waiter);
        }
    }
}

/// The store's claim on a request id (`ReceiptStore::claim`), released
/// when the write is over, however it ends (a dropped request too).
struct StoreClaim<'a> {
    store: &'a dyn DynReceiptStore,
    id: &'a Id,
}

impl Drop for StoreClaim<'_> {
    fn drop(&mut self) {
        self.store.release_dyn(self.id.as_str());
    }
}

/// A stored receipt sent again, with `replayed: true`.
pub(crate) fn replay(receipt: &Receipt) -> Response {
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

impl Collie {
    /// The replay of a receipt; a send's with its delivery state.
    async fn replay_of(&self, request_id: &Id, receipt: &Receipt) -> Response {
        /// The one field that tells a send's receipt.
        #[derive(serde::Deserialize)]
        struct ResultField<'a> {
            #[serde(borrow)]
            result: Option<std::borrow::Cow<'a, str>>,
        }
        let result = serde_json::from_slice::<ResultField<'_>>(&receipt.body).ok().and_then(|r| r.result);
        let is_send = matches!(result.as_deref(), Some("sent" | "queued"));
        if !is_send {
            return replay(receipt);
        }
        // A store that cannot say gives the receipt as it was: the answer
        // itself is what the phone must get.
        let state = self.shared.options.receipts.send_state_dyn(request_id.as_str()).await.ok().flatten();
        replay_with(receipt, state)
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
        let claim = loop {
            // The look at the claim and the wait are one step under the
            // lock: a settle cannot land between them.
            let (mut waiting, settled) = {
                let mut st = self.lock();
                if st.claim_request(request_id) {
                    break RequestClaim { core: self, id: request_id, ended: false };
                }
                let (waiter, settled) = st.links().add_settle();
                st.wait_for_request(request_id, waiter);
                (RepeatWaiting { core: self, id: request_id, waiter, settled: false }, settled)
            };
            let outcome = settled.await;
            waiting.settled = true;
            if let Ok(Some(receipt)) = outcome {
                // A send's replay says where it stands (§9.1) also when it
                // waited for the first: the same path as a later repeat.
                return self.replay_of(request_id, &receipt).await;
            }
            // The first was refused or failed: this repeat runs on its own.
        };
        if let Some(resp) = before_run(self) {
            claim.settle(None);
            return resp;
        }
        let applied = self.lock().memory_receipt(request_id).cloned();
        if let Some(receipt) = applied {
            claim.settle(Some(receipt.clone()));
            return self.replay_of(request_id, &receipt).await;
        }
        let store = &*self.shared.options.receipts;
        match store.claim_dyn(request_id.as_str()).await {
            Ok(Lookup::Found(receipt)) => {
                let resp = self.replay_of(request_id, &receipt).await;
                claim.settle(Some(receipt));
                return resp;
            }
            Ok(Lookup::Evicted) => {
                claim.settle(None);
                return respond::error(
                    ErrorCode::ReceiptDropped,
                    format!(
                        "request {request_id} was answered before, but its receipt was evicted; nothing was executed"
                    ),
                );
            }
            Ok(_) => {}
            Err(e) => {
                claim.settle(None);
                return respond::error(ErrorCode::Internal, format!("the receipt store failed: {e}"));
            }
        }
        // The id is ours in the store too (across processes) until released;
        // it is released before a waiting repeat in this process wakes.
        let store_claim = StoreClaim { store, id: request_id };
        let ran = run().await;
        match (ran.response.status, ran.group) {
            (200, Some(group)) => {
                // The bytes the response sends, shared, not copied.
                let receipt = Receipt::new(200, ran.response.body.clone());
                // Applied: the receipt is kept in memory until the store has
                // it, so that a repeat in this process replays it, never runs
                // it twice, also when `put` fails or this request is dropped
                // while `put` runs (its waiting repeats then run themselves:
                // found by the exhaustive model check, issue #15).
                self.lock().keep_receipt(request_id.clone(), receipt.clone());
                // A card this write raised or closed is in the store before
                // the answer leaves (after the receipt in memory: a request
                // dropped during this wait is still never run twice).
                self.asks_written().await;
                let put = store.put_dyn(request_id.as_str(), receipt.clone(), &group).await;
                drop(store_claim);
                if let Err(e) = put {
                    // Applied but not durable: the receipt stays in memory.
                    claim.settle(Some(receipt));
                    return respond::error(
                        ErrorCode::Internal,
                        format!(
                            "the write was applied but its receipt could not be stored ({e}); a retry with this request id replays it"
                        ),
                    );
                }
                self.lock().forget_receipt(request_id);
                claim.settle(Some(receipt));
                ran.response
            }
            _ => {
                drop(store_claim);
                claim.settle(None);
                ran.response
            }
        }
    }
}
