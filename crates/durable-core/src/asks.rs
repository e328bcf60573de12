//! Asks, the machine's side (§7): raising one into the state, closing it
//! (its event, its notice, the decision handed to its awaitable), answers
//! held for an ask not raised yet and applied when it is (§7.1), expiry,
//! and a decision of the program's own. The awaitable and
//! `require_approval` are durable-runtime's (its `handles/asks.rs`).
//!
//! `tracing` events "ask raised" and "ask decided" and the `ask` span come
//! from here, under `durable_core::asks`.

use durable_types::exchange::Response;
use durable_types::text::quoted;
use durable_types::{
    Answer, AnswerBody, AnswerRequest, Ask, AskSpec, DecidedBy, ErrorBody, ErrorCode, EventBody, Id, Item,
    ItemBody, NoticeTone, Outcome, RuleError, Timestamp,
};
use serde::Serialize;
use serde_json::json;

use crate::data::decided::{AskClosed, Decided};
use crate::data::receipt::{KeptAskRecord, Receipt};
use crate::machine::Machine;
use crate::respond;
use crate::state::{Effect, Hold, Link};
use crate::timers::Timer;

/// An ask the machine raised.
#[derive(Debug)]
pub struct Raised {
    /// Its id (`ask_id_for(pane, tool_call_id)`).
    pub id: String,
    /// Its `tracing` span.
    pub span: tracing::Span,
    /// Whether it is still open (a held answer or its expiry may close it
    /// as it is raised).
    pub open: bool,
}

/// The `200 answered` response (its body is also the answer's receipt),
/// written straight from borrowed fields.
pub fn answered(ask_id: &str, decided_at: Timestamp, request_id: &Id) -> Response {
    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct Answered<'a> {
        ok: bool,
        result: &'static str,
        ask_id: &'a str,
        decided_by: &'static str,
        decided_at: Timestamp,
        request_id: &'a Id,
        replayed: bool,
    }
    let body = Answered {
        ok: true,
        result: "answered",
        ask_id,
        decided_by: "phone",
        decided_at,
        request_id,
        replayed: false,
    };
    // About 150 bytes with the longest ids: one buffer, written once.
    respond::json_with_capacity(200, &body, 192)
}

/// Why an answer does not go through, after it met its ask (steps 6–7).
enum Misfit {
    Shape(String),
    ConfirmRequired,
}

/// Steps 6 and 7: the answer fits the ask, and an allow-always pick is
/// confirmed (and allowed at all: never on a cleaned ask or one without a tool).
fn check_fit(ask: &Ask, body: &AnswerBody, confirm_always: bool) -> Result<Answer, Misfit> {
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

pub fn held_response(ask_id: &str, request_id: &Id) -> Response {
    respond::json(
        202,
        &json!({"ok": true, "result": "held", "askId": ask_id, "requestId": request_id, "replayed": false}),
    )
}

/// The answer as the phone would have sent it, to check it like one.
fn answer_body(a: &Answer) -> AnswerBody {
    match a {
        Answer::Options { option_ids } => {
            AnswerBody { option_ids: Some(option_ids.clone()), ..Default::default() }
        }
        Answer::Text { text } => AnswerBody { text: Some(text.clone()), ..Default::default() },
        Answer::Values { values } => AnswerBody { values: Some(values.clone()), ..Default::default() },
        #[allow(unreachable_patterns)]
        _ => AnswerBody::default(),
    }
}

impl Machine {
    /// Raises an ask on a pane: `link` names its awaitable. An answer held
    /// for it applies now; an expiry already past closes it by timeout.
    pub fn raise_ask(
        &mut self,
        pane: &Id,
        spec: AskSpec,
        link: Link,
        now: Timestamp,
    ) -> Result<Raised, RuleError> {
        if !self.state.is_open(pane) {
            return Err(RuleError::invalid_state(
                "pane",
                format!("pane {pane} is closed: an ask needs an open pane"),
            ));
        }
        let agent_data = spec.agent_data.clone();
        let ask = spec.build(pane, now, self.allow_always())?;
        if self.state.is_ask_open(&ask.id) {
            return Err(RuleError::invalid(
                "ask-open",
                format!("ask {} (pane {pane}, tool call {}) is already open", ask.id, ask.tool_call_id),
            ));
        }
        let id = ask.id.clone();
        let expires_at = ask.expires_at;
        let kind = ask.kind.name();
        // Kept before anything can close it: the store's writes keep this order.
        let kept_by = self
            .config
            .keeps_asks
            .then(|| self.state.journal_keep(KeptAskRecord::new(ask.clone(), agent_data)));
        let span = tracing::info_span!("ask", pane = pane.as_str(), ask_id = id.as_str());
        self.state.open_ask(ask, now, link, span.clone(), kept_by);
        tracing::info!(parent: &span, ask_id = %id, kind, pane = %pane, "ask raised");

        // Past its expiry already (raised again after a restart): it times
        // out at once, and an answer held meanwhile does not win.
        match expires_at {
            Some(at) if at <= now => {
                // An answer held since before the expiry (sent while the
                // agent restarted) was on time: it applies; else it times out.
                self.apply_hold(&id, now);
                if self.state.is_ask_open(&id) {
                    self.close_ask(&id, DecidedBy::Timeout, Outcome::Timeout, None, now);
                }
            }
            Some(at) => {
                self.apply_hold(&id, now);
                if self.state.is_ask_open(&id) {
                    self.add_timer(at, Timer::AskExpiry(id.clone()));
                }
            }
            None => self.apply_hold(&id, now),
        }
        let open = self.state.is_ask_open(&id);
        Ok(Raised { id, span, open })
    }

    /// A held answer for a freshly raised ask: applied when its hash
    /// matches and it fits, else discarded (its request id is free again).
    fn apply_hold(&mut self, id: &str, now: Timestamp) {
        let Some(hold) = self.state.take_hold(id) else { return };
        let Some(ask) = self.state.ask(id) else { return };
        if ask.hash != hold.hash {
            return;
        }
        // An answer that arrived after the ask's expiry came too late.
        if ask.expires_at.is_some_and(|at| at <= hold.arrived_at) {
            return;
        }
        let fits = check_fit(ask, &hold.answer, hold.confirm_always);
        let Ok(answer) = fits else { return };
        let pane = ask.pane.clone();
        let answer_response = answered(id, now, &hold.request_id);
        if answer_response.status != 200 {
            return; // not written (it never happens): the hold is dropped
        }
        let receipt = Receipt::new(200, answer_response.body);
        self.state.keep_receipt(hold.request_id.clone(), receipt.clone());
        self.close_ask(id, DecidedBy::Phone, Outcome::Answered, Some(answer), now);
        let group = format!("pane:{pane}");
        self.state.effect(Effect::PutHeldReceipt { request_id: hold.request_id, receipt, group });
    }

    /// Closes an open ask (the state writes its `ask-closed` event and
    /// notice) and hands the decision to its awaitable. `answer` is `Some`
    /// for an answer (phone or program), `None` for a timeout or an abort.
    pub fn close_ask(
        &mut self,
        id: &str,
        by: DecidedBy,
        outcome: Outcome,
        answer: Option<Answer>,
        now: Timestamp,
    ) {
        let Some(open) = self.state.close_ask(id, by, outcome, now) else { return };
        let pane = &open.ask.pane;
        tracing::info!(parent: &open.span, ask_id = %id, outcome = %outcome, decided_by = %by, pane = %pane, "ask decided");
        if self.config.keeps_asks {
            self.state.journal_forget(id.to_owned());
        }
        let result = match answer {
            Some(answer) => Ok(Decided { answer, decided_by: by, decided_at: now }),
            None => Err(AskClosed { decided_by: by, decided_at: now, outcome }),
        };
        self.state.effect(Effect::Decide { ask: open.link, result });
        let waiting = self.state.pane(pane).is_some_and(|p| p.has_queued());
        if waiting && self.state.open_asks_of(pane).is_empty() {
            self.state.effect(Effect::DeliverQueued(pane.clone()));
        }
    }

    /// Closes every open ask of a pane as aborted by the program.
    pub fn abort_asks_of(&mut self, pane: &Id, now: Timestamp) {
        for id in self.state.open_asks_of(pane) {
            self.close_ask(&id, DecidedBy::Program, Outcome::Aborted, None, now);
        }
    }

    /// An ask's abort signal fired.
    pub fn abort_ask(&mut self, id: &str, now: Timestamp) {
        self.close_ask(id, DecidedBy::Program, Outcome::Aborted, None, now);
    }

    /// An open ask past its `expiresAt` closes by timeout now, whether or not
    /// the driver has ticked: an answer that arrives late must not win.
    pub fn close_if_expired(&mut self, id: &str, now: Timestamp) {
        if self.state.ask(id).and_then(|a| a.expires_at).is_some_and(|at| at <= now) {
            self.close_ask(id, DecidedBy::Timeout, Outcome::Timeout, None, now);
        }
    }

    /// The program answers an ask itself (another channel answered).
    pub fn decide_by_program(
        &mut self,
        pane: &Id,
        ask_id: &str,
        answer: Answer,
        now: Timestamp,
    ) -> Result<(), RuleError> {
        durable_types::check_id_for("ask id", ask_id)?;
        self.close_if_expired(ask_id, now);
        let open = self.state.ask(ask_id).filter(|a| &a.pane == pane).ok_or_else(|| {
            RuleError::invalid_state("ask", format!("ask id {} is not open on pane {pane}", quoted(ask_id)))
        })?;
        let answer = answer_body(&answer)
            .fit(&open.kind)
            .map_err(|why| RuleError::invalid("answer", format!("answer rule: {why}")))?;
        self.close_ask(ask_id, DecidedBy::Program, Outcome::Answered, Some(answer), now);
        Ok(())
    }
}

impl Machine {
    /// Closes an ask of the last run that is not open in this one (§7.2,
    /// at `ready()` for those nobody claimed): its id is decided (an
    /// answer gets `409 ask-closed`, a held one is dropped), its pane — if
    /// still open — gets the line `Stopped before an answer: <title>`, and
    /// the store's journal forgets it. An ask raised again meanwhile is
    /// left as it is; one raised again and decided keeps its decision.
    pub fn close_kept_ask(&mut self, ask: Ask, now: Timestamp) {
        let st = &mut self.state;
        if st.is_ask_open(&ask.id) {
            return;
        }
        if st.decided(&ask.id).is_some() {
            st.journal_forget(ask.id);
            return;
        }
        st.take_hold(&ask.id);
        st.remember_decided(&ask.id, DecidedBy::Program, now);
        if st.is_open(&ask.pane) {
            let text = format!("Stopped before an answer: {}", ask.title);
            let notice = Id::new(format!("ask-closed-{}", ask.id)).map(|id| {
                Item::new(id, ItemBody::Notice { text, partial: false, tone: Some(NoticeTone::Info) })
            });
            if let Ok((item, _)) = notice.map_err(|_| ()).and_then(|i| i.sanitized().map_err(|_| ())) {
                st.pane_event(&ask.pane, now, EventBody::Item { item: item.into() });
            }
        }
        tracing::info!(target: "durable_core::kept", ask_id = %ask.id, pane = %ask.pane, "kept ask closed unclaimed");
        // As a raise pushes its keep: the store's writes for one id keep
        // the order of its opens and closes.
        st.journal_forget(ask.id);
    }

    /// Steps 3–7 of an answer from the phone, and the decision itself: the
    /// response, and the receipt group when it is to be stored.
    pub fn answer_ask(
        &mut self,
        ask_id: &Id,
        req: AnswerRequest,
        now: Timestamp,
    ) -> (Response, Option<String>) {
        let hold_ms = self.config.hold_ms;
        let held_answer_bytes = self.config.held_answer_bytes;
        self.close_if_expired(ask_id.as_str(), now);
        let st = &mut self.state;
        let Some(open) = st.ask(ask_id.as_str()) else {
            if let Some((by, at)) = st.decided(ask_id.as_str()) {
                return unstored(respond::failure(
                    ErrorBody::new(ErrorCode::AskClosed, format!("ask {ask_id} was already decided"))
                        .with("decidedBy", by.as_str())
                        .with("decidedAt", at.to_rfc3339()),
                ));
            }
            let looks_like_an_ask_id = ask_id.as_str().len() == 32
                && ask_id.as_str().bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
            let Some(hash) = req.hash.filter(|_| looks_like_an_ask_id) else {
                return unstored(respond::not_found(format!(
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
            self.add_timer(expires_at, Timer::HoldExpiry(ask_id.to_string()));
            return unstored(held_response(ask_id.as_str(), &req.request_id));
        };
        if let Some(hash) = &req.hash {
            if *hash != open.hash {
                let ask = serde_json::to_value(open).unwrap_or_default();
                return unstored(respond::failure(
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
            Err(Misfit::Shape(why)) => return unstored(respond::bad_request(format!("answer: {why}"))),
            Err(Misfit::ConfirmRequired) => {
                return unstored(respond::error(
                    ErrorCode::ConfirmRequired,
                    "an allow-always pick needs a second tap: send it again with confirmAlways: true",
                ));
            }
        };
        let group = format!("pane:{}", open.pane);
        self.close_ask(ask_id.as_str(), DecidedBy::Phone, Outcome::Answered, Some(answer), now);
        (answered(ask_id.as_str(), now, &req.request_id), Some(group))
    }
}

/// A response with nothing to store.
fn unstored(response: Response) -> (Response, Option<String>) {
    (response, None)
}
