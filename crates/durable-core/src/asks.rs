//! Asks on the program's side: raising, the awaitable, closing (§7, §7.2),
//! held answers applied at raise (§7.1), and `require_approval` (§7.3).

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use durable_types::exchange::Response;
use durable_types::text::quoted;
use durable_types::{
    Answer, AnswerBody, AskOption, AskSpec, DecidedBy, Id, Outcome, RuleError, Timestamp, ToolInfo,
};
use serde::Serialize;
use serde_json::Value;
use tokio::sync::oneshot;

use crate::core::Core;
use crate::data::decided::{AskClosed, Decided};
use crate::data::receipt::Receipt;
use crate::layout::Pane;
use crate::respond;
use crate::select::{Either, select};
use crate::signal::AbortSignal;
use crate::state::{Effect, State};
use crate::timers::Timer;

/// The awaitable of a raised ask. Resolves to the answer, or fails with
/// [`AskClosed`]. Dropping it does *not* close the ask: like a shutdown, it
/// is not an answer. With a receipt store that keeps asks, an ask open when
/// the agent stops is handed back at its next start
/// ([`Core::kept_asks`](crate::Core::kept_asks)), to raise again by its id.
#[must_use = "the ask stays open whether or not this is awaited; await it to get the answer"]
pub struct AskHandle {
    id: String,
    rx: oneshot::Receiver<Result<Decided, AskClosed>>,
    span: tracing::Span,
}

impl AskHandle {
    /// The ask id (`ask_id_for(pane, tool_call_id)`).
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The ask's `tracing` span (`ask`, at `INFO`: `pane`, `ask_id`), a
    /// child of the span current where it was raised (a send's turn). The
    /// core's "ask raised" and "ask decided" events are inside it; to put
    /// the program's own work around the wait in it too,
    /// `.instrument(ask.span().clone())` (`tracing::Instrument`).
    pub fn span(&self) -> &tracing::Span {
        &self.span
    }

    /// The answer with who decided and when.
    pub async fn decided(self) -> Result<Decided, AskClosed> {
        match self.rx.await {
            Ok(r) => r,
            // The core is gone (shutdown): that is not an answer.
            Err(_) => std::future::pending().await,
        }
    }
}

impl fmt::Debug for AskHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AskHandle").field("id", &self.id).finish_non_exhaustive()
    }
}

impl Future for AskHandle {
    type Output = Result<Answer, AskClosed>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match Pin::new(&mut self.rx).poll(cx) {
            Poll::Ready(Ok(r)) => Poll::Ready(r.map(|d| d.answer)),
            Poll::Ready(Err(_)) => Poll::Pending,
            Poll::Pending => Poll::Pending,
        }
    }
}

/// The `200 answered` response (its body is also the answer's receipt),
/// written straight from borrowed fields.
pub(crate) fn answered(ask_id: &str, decided_at: Timestamp, request_id: &Id) -> Response {
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

/// The answer as the phone would have sent it, to check it like one.
fn answer_body(a: &Answer) -> AnswerBody {
    {
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
}

impl Core {
    /// Raises an ask on a pane (see [`Pane::ask`]).
    pub(crate) fn raise_ask(
        &self,
        pane: &Id,
        spec: AskSpec,
        signal: Option<AbortSignal>,
    ) -> Result<AskHandle, RuleError> {
        let now = self.now();
        let allow_always = self.allow_always();
        let mut st = self.lock();
        if !st.is_open(pane) {
            return Err(RuleError::invalid_state(
                "pane",
                format!("pane {pane} is closed: an ask needs an open pane"),
            ));
        }
        let agent_data = spec.agent_data.clone();
        let ask = spec.build(pane, now, allow_always)?;
        if st.is_ask_open(&ask.id) {
            return Err(RuleError::invalid(
                "ask-open",
                format!("ask {} (pane {pane}, tool call {}) is already open", ask.id, ask.tool_call_id),
            ));
        }
        let id = ask.id.clone();
        let (tx, rx) = oneshot::channel();
        let (closed_tx, closed_rx) = oneshot::channel();
        let expires_at = ask.expires_at;
        let kind = ask.kind.name();
        // Kept before anything can close it: the store's writes keep this order.
        if self.shared.options.receipts.keeps_asks_dyn() {
            self.keep_ask(&ask, agent_data);
        }
        let span = tracing::info_span!("ask", pane = pane.as_str(), ask_id = id.as_str());
        let link = st.links().add_ask(tx, closed_tx);
        st.open_ask(ask, now, link, span.clone());
        tracing::info!(parent: &span, ask_id = %id, kind, pane = %pane, "ask raised");

        // Past its expiry already (raised again after a restart): it times
        // out at once, and an answer held meanwhile does not win.
        match expires_at {
            Some(at) if at <= now => {
                // An answer held since before the expiry (sent while the
                // agent restarted) was on time: it applies; else it times out.
                self.apply_hold(&mut st, &id, now);
                if st.is_ask_open(&id) {
                    self.close_ask_locked(&mut st, &id, DecidedBy::Timeout, Outcome::Timeout, None, now);
                }
            }
            Some(at) => {
                self.apply_hold(&mut st, &id, now);
                if st.is_ask_open(&id) {
                    self.add_timer(&mut st, at, Timer::AskExpiry(id.clone()));
                }
            }
            None => self.apply_hold(&mut st, &id, now),
        }
        let still_open = st.is_ask_open(&id);
        drop(st);
        if let (Some(signal), true) = (signal, still_open) {
            let core = self.clone();
            let ask_id = id.clone();
            self.push_job(async move {
                if let Either::Left(()) = select(signal.aborted(), closed_rx).await {
                    core.abort_ask(&ask_id);
                }
            });
        }
        Ok(AskHandle { id, rx, span })
    }

    /// A held answer for a freshly raised ask: applied when its hash
    /// matches and it fits, else discarded (its request id is free again).
    fn apply_hold(&self, st: &mut State, id: &str, now: Timestamp) {
        let Some(hold) = st.take_hold(id) else { return };
        let Some(ask) = st.ask(id) else { return };
        if ask.hash != hold.hash {
            return;
        }
        // An answer that arrived after the ask's expiry came too late.
        if ask.expires_at.is_some_and(|at| at <= hold.arrived_at) {
            return;
        }
        let fits = crate::answer::check_fit(ask, &hold.answer, hold.confirm_always);
        let Ok(answer) = fits else { return };
        let pane = ask.pane.clone();
        let answer_response = answered(id, now, &hold.request_id);
        if answer_response.status != 200 {
            return; // not written (it never happens): the hold is dropped
        }
        let receipt = Receipt::new(200, answer_response.body);
        st.keep_receipt(hold.request_id.clone(), receipt.clone());
        self.close_ask_locked(st, id, DecidedBy::Phone, Outcome::Answered, Some(answer), now);
        let core = self.clone();
        let request_id = hold.request_id;
        self.push_job(async move {
            let group = format!("pane:{pane}");
            match core.shared.options.receipts.put_dyn(request_id.as_str(), receipt, &group).await {
                Ok(()) => {
                    core.lock().forget_receipt(&request_id);
                }
                // Kept in memory: a repeat in this process still replays it.
                Err(e) => core.warn(&format!(
                    "collie: a held answer was applied but its receipt could not be stored: {e}"
                )),
            }
        });
    }

    /// Closes an open ask (the state writes its `ask-closed` event and
    /// notice) and resolves its awaitable. `answer` is `Some` for an answer
    /// (phone or program), `None` for a timeout or an abort.
    pub(crate) fn close_ask_locked(
        &self,
        st: &mut State,
        id: &str,
        by: DecidedBy,
        outcome: Outcome,
        answer: Option<Answer>,
        now: Timestamp,
    ) {
        let Some(open) = st.close_ask(id, by, outcome, now) else { return };
        let pane = &open.ask.pane;
        tracing::info!(parent: &open.span, ask_id = %id, outcome = %outcome, decided_by = %by, pane = %pane, "ask decided");
        self.forget_ask(id);
        let result = match answer {
            Some(answer) => Ok(Decided { answer, decided_by: by, decided_at: now }),
            None => Err(AskClosed { decided_by: by, decided_at: now, outcome }),
        };
        st.effect(Effect::Decide { ask: open.link, result });
        let waiting = st.pane(pane).is_some_and(|p| p.has_queued());
        if waiting && st.open_asks_of(pane).is_empty() {
            let (core, pane) = (self.clone(), pane.clone());
            self.push_job(async move { core.deliver_queued(&pane) });
        }
    }

    /// Closes every open ask of a pane as aborted by the program.
    pub(crate) fn abort_asks_of(&self, st: &mut State, pane: &Id, now: Timestamp) {
        for id in st.open_asks_of(pane) {
            self.close_ask_locked(st, &id, DecidedBy::Program, Outcome::Aborted, None, now);
        }
    }

    fn abort_ask(&self, id: &str) {
        let now = self.now();
        let mut st = self.lock();
        self.close_ask_locked(&mut st, id, DecidedBy::Program, Outcome::Aborted, None, now);
    }

    pub(crate) fn expire_ask(&self, id: &str, now: Timestamp) {
        let mut st = self.lock();
        self.close_if_expired_locked(&mut st, id, now);
    }

    /// An open ask past its `expiresAt` closes by timeout now, whether or not
    /// the driver has ticked: an answer that arrives late must not win.
    pub(crate) fn close_if_expired_locked(&self, st: &mut State, id: &str, now: Timestamp) {
        if st.ask(id).and_then(|a| a.expires_at).is_some_and(|at| at <= now) {
            self.close_ask_locked(st, id, DecidedBy::Timeout, Outcome::Timeout, None, now);
        }
    }

    pub(crate) fn expire_hold(&self, id: &str, now: Timestamp) {
        self.lock().expire_hold(id, now);
    }

    /// The program answers an ask itself (another channel answered).
    pub(crate) fn decide_by_program(&self, pane: &Id, ask_id: &str, answer: Answer) -> Result<(), RuleError> {
        durable_types::check_id_for("ask id", ask_id)?;
        let now = self.now();
        let mut st = self.lock();
        self.close_if_expired_locked(&mut st, ask_id, now);
        let open = st.ask(ask_id).filter(|a| &a.pane == pane).ok_or_else(|| {
            RuleError::invalid_state("ask", format!("ask id {} is not open on pane {pane}", quoted(ask_id)))
        })?;
        let answer = answer_body(&answer)
            .fit(&open.kind)
            .map_err(|why| RuleError::invalid("answer", format!("answer rule: {why}")))?;
        self.close_ask_locked(&mut st, ask_id, DecidedBy::Program, Outcome::Answered, Some(answer), now);
        Ok(())
    }
}

/// Options of [`require_approval`]: the pane, the tool call id, and
/// optionally a timeout and an abort signal.
#[derive(Debug, Clone)]
pub struct ApprovalOptions {
    pane: Pane,
    tool_call_id: String,
    timeout_ms: Option<u64>,
    signal: Option<AbortSignal>,
    agent_data: Option<Value>,
}

impl ApprovalOptions {
    /// Approval on `pane` for the tool call `tool_call_id` (the ID rule: 128
    /// bytes at most; in a button's handler the press's request id is one
    /// already, where `call-` and a long request id would not fit).
    pub fn new(pane: &Pane, tool_call_id: impl Into<String>) -> Self {
        ApprovalOptions {
            pane: pane.clone(),
            tool_call_id: tool_call_id.into(),
            timeout_ms: None,
            signal: None,
            agent_data: None,
        }
    }

    /// Times out after `ms` milliseconds (`approved: false`, `timeout`).
    pub fn timeout_ms(mut self, ms: u64) -> Self {
        self.timeout_ms = Some(ms);
        self
    }

    /// An abort signal: aborting closes the card (`approved: false`).
    pub fn signal(mut self, signal: AbortSignal) -> Self {
        self.signal = Some(signal);
        self
    }

    /// A small value of the agent's own, kept with the card by a receipt
    /// store that keeps asks and handed back with it after a restart
    /// ([`KeptAsk::agent_data`](crate::KeptAsk::agent_data)), to find the
    /// work again. At most [`AGENT_DATA_MAX`](durable_types::AGENT_DATA_MAX)
    /// bytes of JSON.
    pub fn agent_data(mut self, data: Value) -> Self {
        self.agent_data = Some(data);
        self
    }
}

/// The result of [`require_approval`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Approval {
    /// True only when the person picked Allow.
    pub approved: bool,
    /// Who decided.
    pub decided_by: DecidedBy,
    /// How: `answered` (Allow or Deny), `timeout`, or `aborted` (stop, abort
    /// signal, close).
    pub outcome: Outcome,
    /// When.
    pub decided_at: Timestamp,
    /// The ask id.
    pub ask_id: String,
}

/// The card `require_approval` raises for a tool call, built from the call
/// itself, never from model text: title `<tool> wants to run`, the tool line
/// [`call_summary`](durable_types::call_summary), push title
/// `<tool> needs a yes`, options Allow (`allow`) and Deny (`deny`).
pub fn approval_spec(tool_name: &str, args: &Value, tool_call_id: impl Into<String>) -> AskSpec {
    AskSpec::choice(
        tool_call_id,
        format!("{tool_name} wants to run"),
        [AskOption::new("allow", "Allow"), AskOption::new("deny", "Deny")],
    )
    .tool(ToolInfo::from_call(tool_name, args))
    .push_title(format!("{tool_name} needs a yes"))
}

/// Asks the person whether a tool call may run, in one line. Raises the card
/// at once (an `Err` for a bad call) and returns an awaitable of the
/// [`Approval`]; deny, timeout, stop and abort all give `approved: false`.
///
/// ```no_run
/// use durable_sdk::{ApprovalOptions, json, require_approval};
/// # async fn f(pane: durable_sdk::Pane) -> Result<(), Box<dyn std::error::Error>> {
/// let args = json!({"order": "5521", "amount": 40});
/// let approval = require_approval("refund", &args, ApprovalOptions::new(&pane, "call-1").timeout_ms(600_000))?.await;
/// if !approval.approved {
///     return Err(format!("refund not approved: {}", approval.decided_by.as_str()).into());
/// }
/// # Ok(()) }
/// ```
pub fn require_approval(
    tool_name: &str,
    args: &Value,
    options: ApprovalOptions,
) -> Result<ApprovalFuture, RuleError> {
    let mut spec = approval_spec(tool_name, args, options.tool_call_id);
    if let Some(ms) = options.timeout_ms {
        spec = spec.expires_in_ms(ms);
    }
    spec.agent_data = options.agent_data;
    let handle = options.pane.ask_with(spec, options.signal)?;
    Ok(approval_of(handle))
}

/// The approval a raised card of [`approval_spec`] resolves to.
pub(crate) fn approval_of(handle: AskHandle) -> ApprovalFuture {
    let ask_id = handle.id().to_owned();
    ApprovalFuture {
        span: handle.span().clone(),
        inner: Box::pin(async move {
            match handle.decided().await {
                Ok(d) => Approval {
                    approved: d.answer.option_id() == Some("allow"),
                    decided_by: d.decided_by,
                    outcome: Outcome::Answered,
                    decided_at: d.decided_at,
                    ask_id,
                },
                Err(closed) => Approval {
                    approved: false,
                    decided_by: closed.decided_by,
                    outcome: closed.outcome,
                    decided_at: closed.decided_at,
                    ask_id,
                },
            }
        }),
    }
}

/// The awaitable of [`require_approval`]; the card is already raised.
#[must_use = "the card stays open whether or not this is awaited"]
pub struct ApprovalFuture {
    inner: Pin<Box<dyn Future<Output = Approval> + Send>>,
    span: tracing::Span,
}

impl ApprovalFuture {
    /// The card's `tracing` span, as [`AskHandle::span`].
    pub fn span(&self) -> &tracing::Span {
        &self.span
    }
}

impl fmt::Debug for ApprovalFuture {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ApprovalFuture").finish_non_exhaustive()
    }
}

impl Future for ApprovalFuture {
    type Output = Approval;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Approval> {
        self.inner.as_mut().poll(cx)
    }
}
