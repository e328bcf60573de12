//! Exactly once: the receipt step every write goes through (§9). A repeat
//! of a request id still being processed waits for the first; a stored
//! receipt is replayed with `replayed: true`; an evicted one is `500
//! receipt-dropped`; only a `200` is stored, and it is stored before the
//! response leaves.

use std::collections::HashMap;
use std::future::Future;
use std::pin::pin;
use std::sync::{Arc, Mutex, OnceLock};

use durable_types::exchange::Response;
use durable_types::{ErrorCode, Id};
use serde_json::Value;
use tokio::sync::Notify;

use crate::core::Core;
use crate::receipts::DynReceiptStore;
use durable_core::data::receipt::{Lookup, Receipt, SendState};
use durable_core::respond;

/// What the first request for an id ended with: its receipt, or nothing
/// (refused, failed, or dropped), in which case a waiting repeat runs itself.
/// Set once; the repeats waiting for it are woken then.
#[derive(Default)]
struct Settled {
    outcome: OnceLock<Option<Receipt>>,
    /// One `Notify`, not a `watch` channel, which goes through eight of
    /// them at every send: about 700 instructions less an answer, with
    /// nobody waiting (`docs/benchmarks.md`).
    done: Notify,
    /// Tests only: runs where a settle from another thread can land,
    /// between `wait`'s look at the outcome and its await.
    #[cfg(test)]
    between_check_and_await: Option<fn(&Settled)>,
}

impl Settled {
    fn settle(&self, receipt: Option<Receipt>) {
        // Only the first counts: the drop of a settled claim sets nothing.
        let _ = self.outcome.set(receipt);
        self.done.notify_waiters();
    }

    async fn wait(&self) -> Option<Receipt> {
        loop {
            // Registered before the check: a settle between the check and
            // the await still wakes it.
            let mut notified = pin!(self.done.notified());
            notified.as_mut().enable();
            if let Some(outcome) = self.outcome.get() {
                return outcome.clone();
            }
            #[cfg(test)]
            if let Some(land) = self.between_check_and_await {
                land(self);
            }
            notified.await;
        }
    }
}

/// Request ids being processed now.
#[derive(Default)]
pub(crate) struct InFlight {
    map: Mutex<HashMap<Id, Arc<Settled>>>,
}

/// The first request's hold on its id. When it ends, however it ends, the
/// id leaves the map and then the waiting repeats are woken with the
/// outcome (nothing, if none was given): a repeat woken with nothing finds
/// the id free.
struct Claim<'a> {
    inflight: &'a InFlight,
    id: &'a Id,
    settled: Arc<Settled>,
    ended: bool,
}

impl Claim<'_> {
    fn settle(mut self, receipt: Option<Receipt>) {
        self.end(receipt);
    }

    fn end(&mut self, receipt: Option<Receipt>) {
        if std::mem::replace(&mut self.ended, true) {
            return;
        }
        self.inflight.map.lock().unwrap_or_else(|e| e.into_inner()).remove(self.id);
        self.settled.settle(receipt);
    }
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        self.end(None);
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

impl Core {
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

impl Core {
    /// Runs `run` at most once for `request_id`, through the receipt store.
    /// `before_run` is checked once the id is ours and before the store:
    /// it may answer at once (the answer route's held answers).
    pub(crate) async fn once<F, Fut>(
        &self,
        request_id: &Id,
        before_run: impl Fn(&Core) -> Option<Response>,
        run: F,
    ) -> Response
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Ran>,
    {
        let inflight = &self.shared.inflight;
        let claim = loop {
            let first = {
                let mut map = inflight.map.lock().unwrap_or_else(|e| e.into_inner());
                match map.get(request_id) {
                    Some(first) => Arc::clone(first),
                    None => {
                        let settled = Arc::new(Settled::default());
                        map.insert(request_id.clone(), Arc::clone(&settled));
                        break Claim { inflight, id: request_id, settled, ended: false };
                    }
                }
            };
            if let Some(receipt) = first.wait().await {
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

#[cfg(test)]
mod tests {
    use std::task::{Context, Poll, Waker};

    use super::*;

    /// The settle lands between a repeat's look at the outcome and its
    /// await, every time: the repeat must still wake, at its first poll. It
    /// would wait forever, were it registered only after its look. (The
    /// model check polls on one thread and never runs a settle there.)
    #[test]
    fn a_settle_between_the_check_and_the_await_still_wakes_the_repeat() {
        let settled = Settled { between_check_and_await: Some(|s| s.settle(None)), ..Settled::default() };
        let mut wait = pin!(settled.wait());
        let polled = wait.as_mut().poll(&mut Context::from_waker(Waker::noop()));
        assert!(matches!(polled, Poll::Ready(None)), "the repeat was never woken");
    }
}
