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
use durable_types::{Answer, AnswerBody, AnswerRequest, Ask, DecidedBy, ErrorBody, ErrorCode, Id, Outcome};
use serde_json::json;

use crate::asks::answered;
use crate::core::Core;
use crate::once::Ran;
use crate::respond;
use crate::state::Hold;
use crate::timers::Timer;

/// Why an answer does not go through, after it met its ask (steps 6–7).
pub(crate) enum Misfit {
    Shape(String),
    ConfirmRequired,
}

/// Steps 6 and 7: the answer fits the ask, and an allow-always pick is
/// confirmed (and allowed at all: never on a cleaned ask or one without a tool).
pub(crate) fn check_fit(ask: &Ask, body: &AnswerBody, confirm_always: bool) -> Result<Answer, Misfit> {
    let answer = body.fit(&ask.kind).map_err(Misfit::Shape)?;
    let always = answer.option_ids().iter().any(|id| ask.is_always_option(id));
    if always {
        if ask.cleaned || ask.tool.is_none() {
            return Err(Misfit::Shape(
                "an allow-always option cannot be picked on an ask whose text was cleaned or that names no tool".into(),
            ));
        }
        if !confirm_always {
            return Err(Misfit::ConfirmRequired);
        }
    }
    Ok(answer)
}

pub(crate) async fn answer(core: &Core, ask_id: Id, parsed: AnswerRequest) -> Response {
    let request_id = parsed.request_id.clone();
    let held_again = |core: &Core| -> Option<Response> {
        let st = core.lock();
        let ask = st.held_ask_of(&request_id)?;
        Some(held_response(ask, &request_id))
    };
    let run = || async { decide(core, &ask_id, parsed) };
    core.once(&request_id, held_again, run).await
}

fn held_response(ask_id: &str, request_id: &Id) -> Response {
    respond::json(
        202,
        &json!({"ok": true, "result": "held", "askId": ask_id, "requestId": request_id, "replayed": false}),
    )
}

/// Steps 3–7 and the decision itself, under the state lock.
fn decide(core: &Core, ask_id: &Id, req: AnswerRequest) -> Ran {
    let now = core.now();
    let hold_ms = core.options().hold_ms;
    let held_answer_bytes = core.options().held_answer_bytes;
    let mut st = core.lock();
    core.close_if_expired_locked(&mut st, ask_id.as_str(), now);
    let Some(open) = st.ask(ask_id.as_str()) else {
        if let Some((by, at)) = st.decided(ask_id.as_str()) {
            return Ran::unstored(respond::failure(
                ErrorBody::new(ErrorCode::AskClosed, format!("ask {ask_id} was already decided"))
                    .with("decidedBy", by.as_str())
                    .with("decidedAt", at.to_rfc3339()),
            ));
        }
        let looks_like_an_ask_id = ask_id.as_str().len() == 32
            && ask_id.as_str().bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
        let Some(hash) = req.hash.filter(|_| looks_like_an_ask_id) else {
            return Ran::unstored(respond::not_found(format!(
                "no ask {ask_id}; an answer with the ask's hash would be held until the agent raises it"
            )));
        };
        // Step 3: held for hold_ms.
        let expires_at = now.plus_millis(hold_ms);
        st.hold_answer(
            ask_id.to_string(),
            Hold {
                request_id: req.request_id.clone(),
                hash,
                answer: req.answer,
                confirm_always: req.confirm_always,
                arrived_at: now,
                expires_at,
            },
            held_answer_bytes,
        );
        core.add_timer(&mut st, expires_at, Timer::HoldExpiry(ask_id.to_string()));
        return Ran::unstored(held_response(ask_id.as_str(), &req.request_id));
    };
    if let Some(hash) = &req.hash {
        if *hash != open.hash {
            let ask = serde_json::to_value(open).unwrap_or_default();
            return Ran::unstored(respond::failure(
                ErrorBody::new(
                    ErrorCode::HashMismatch,
                    "the ask changed since it was shown; here it is as it is now",
                )
                .with("ask", ask),
            ));
        }
    }
    let answer = match check_fit(open, &req.answer, req.confirm_always) {
        Ok(a) => a,
        Err(Misfit::Shape(why)) => return Ran::unstored(respond::bad_request(format!("answer: {why}"))),
        Err(Misfit::ConfirmRequired) => {
            return Ran::unstored(respond::error(
                ErrorCode::ConfirmRequired,
                "an allow-always pick needs a second tap: send it again with confirmAlways: true",
            ));
        }
    };
    let group = format!("pane:{}", open.pane);
    core.close_ask_locked(&mut st, ask_id.as_str(), DecidedBy::Phone, Outcome::Answered, Some(answer), now);
    Ran::stored(answered(ask_id.as_str(), now, &req.request_id), group)
}
