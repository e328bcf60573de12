//! `POST /v1/asks/{askId}`: an answer from the phone, checked in the
//! contract's order (§7.1):
//! 1. the body is malformed in itself → `400`;
//! 2. its request id has a receipt → the receipt; holds an answer → `202`;
//! 3. unknown ask → held (`202`) with a hash, else `404`;
//! 4. already decided → `409 ask-closed`;
//! 5. stale hash → `409 hash-mismatch`;
//! 6. the answer does not fit → `400`;
//! 7. an allow-always pick without `confirmAlways` → `409 confirm-required`.

use durable_types::exchange::Response;
use durable_types::{AnswerRequest, Id};

use crate::core::Collie;
use crate::once::Ran;
use durable_core::asks::held_response;

pub(crate) async fn answer(core: &Collie, ask_id: Id, parsed: AnswerRequest) -> Response {
    let request_id = parsed.request_id.clone();
    let held_again = |core: &Collie| -> Option<Response> {
        let st = core.lock();
        let ask = st.held_ask_of(&request_id)?;
        Some(held_response(ask, &request_id))
    };
    let run = || async { decide(core, &ask_id, parsed) };
    core.once(&request_id, held_again, run).await
}

/// Steps 3–7 and the decision itself, in the machine.
fn decide(core: &Collie, ask_id: &Id, req: AnswerRequest) -> Ran {
    let now = core.now();
    let (response, group) = core.lock().machine_mut().answer_ask(ask_id, req, now);
    match group {
        Some(group) => Ran::stored(response, group),
        None => Ran::unstored(response),
    }
}
