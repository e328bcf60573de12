//! Asks on the program's side: raising one and its awaitable (§7, §7.2),
//! the abort signal's watcher, and `require_approval` (§7.3). The rules
//! (closing, held answers, expiry) are the machine's, in durable-core's
//! `asks.rs`.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use durable_types::{Answer, AskOption, AskSpec, DecidedBy, Id, Outcome, RuleError, Timestamp, ToolInfo};
use serde_json::Value;
use tokio::sync::oneshot;

use crate::core::Collie;
use crate::handles::layout::Pane;
use crate::select::{Either, select};
use crate::signal::AbortSignal;
use durable_core::asks::Raised;
use durable_core::data::decided::{AskClosed, Decided};

/// The awaitable of a raised ask. Resolves to the answer, or fails with
/// [`AskClosed`]. Dropping it does *not* close the ask: like a shutdown, it
/// is not an answer. With a receipt store that keeps asks, an ask open when
/// the agent stops is handed back at its next start
/// ([`Collie::kept_asks`](crate::Collie::kept_asks)), to raise again by its id.
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

impl Collie {
    /// Raises an ask on a pane (see [`Pane::ask`]): the machine opens it,
    /// and an abort signal is watched by a job until the ask closes.
    pub(crate) fn raise_ask(
        &self,
        pane: &Id,
        spec: AskSpec,
        signal: Option<AbortSignal>,
    ) -> Result<AskHandle, RuleError> {
        let now = self.now();
        let (tx, rx) = oneshot::channel();
        let (closed_tx, closed_rx) = oneshot::channel();
        let mut st = self.lock();
        let link = st.links().add_ask(tx, closed_tx);
        let raised = match st.machine_mut().raise_ask(pane, spec, link, now) {
            Ok(raised) => raised,
            Err(e) => {
                st.links().forget_ask(link);
                return Err(e);
            }
        };
        drop(st);
        let Raised { id, span, open } = raised;
        if let (Some(signal), true) = (signal, open) {
            let core = self.inner();
            let ask_id = id.clone();
            self.push_job(async move {
                if let Either::Left(()) = select(signal.aborted(), closed_rx).await {
                    let now = core.now();
                    core.lock().machine_mut().abort_ask(&ask_id, now);
                }
            });
        }
        Ok(AskHandle { id, rx, span })
    }

    /// The program answers an ask itself (another channel answered).
    pub(crate) fn decide_by_program(&self, pane: &Id, ask_id: &str, answer: Answer) -> Result<(), RuleError> {
        let now = self.now();
        self.lock().machine_mut().decide_by_program(pane, ask_id, answer, now)
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
