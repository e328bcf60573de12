//! A recording handler for the write tests (§8): it answers with a
//! configurable verdict and logs every call (who, what, request id, text),
//! so a test can count executions per request id.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::types::{Id, RuleError};
use crate::{
    AbortSignal, ActionHandler, ActionRequest, ChatHandler, CloseRequest, Collie, HandlerResult, Hooks, Pane,
    Refusal, RenameRequest, Reopen, ReopenRequest, SendRequest, Started, StarterRequest, SteerRequest,
    StopRequest, Turn,
};

/// What a recorder answers (the tests' own verdict, mapped onto each
/// handler's typed result).
#[derive(Debug, Clone, PartialEq, Eq)]
#[allow(clippy::enum_variant_names)]
pub enum Handled {
    /// Take the write.
    Accepted,
    /// A starter opened this pane.
    Started(Id),
    /// Refuse with a reason (`409 refused`).
    Refused(String),
    /// Not mine (`Refusal::not_supported`); for rename/close/reopen, "let
    /// the SDK apply it".
    NotHandled,
}

impl Handled {
    /// Refused with this reason.
    pub fn refuse(reason: impl Into<String>) -> Self {
        Handled::Refused(reason.into())
    }

    fn plain(self) -> HandlerResult {
        match self {
            Handled::Accepted | Handled::Started(_) => Ok(()),
            Handled::Refused(r) => Err(Refusal::new(r)),
            Handled::NotHandled => Err(Refusal::not_supported()),
        }
    }

    /// For rename and close: not handled means the SDK applies it.
    fn layout(self) -> HandlerResult {
        match self {
            Handled::NotHandled => Ok(()),
            other => other.plain(),
        }
    }
}

/// Sets a pane's chat and action handlers at once (the tests' shorthand).
pub trait PaneExt {
    /// Sets the pane's chat and action handlers to `h`.
    fn handlers<H: ChatHandler + ActionHandler + Clone>(&self, h: H) -> Result<(), RuleError>;
}

impl PaneExt for Pane {
    fn handlers<H: ChatHandler + ActionHandler + Clone>(&self, h: H) -> Result<(), RuleError> {
        self.on_send(h.clone())?;
        self.on_action(h)
    }
}

/// Sets the agent-wide chat and action handlers at once.
pub trait CoreExt {
    /// Sets the agent-wide chat and action handlers to `h`.
    fn set_handlers<H: ChatHandler + ActionHandler + Clone>(&self, h: H);
}

impl CoreExt for Collie {
    fn set_handlers<H: ChatHandler + ActionHandler + Clone>(&self, h: H) {
        self.on_send(h.clone());
        self.on_action(h);
    }
}

/// One call to a handler or hook.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    /// The recorder's name (`pane`, `hook`, …).
    pub who: &'static str,
    /// `send`, `steer`, `stop`, `action`, `rename`, `close`, `reopen`, `starter`.
    pub kind: &'static str,
    /// The pane (empty for layout writes).
    pub pane: String,
    /// The request id.
    pub request_id: String,
    /// Text, action id, target id or starter id, by kind.
    pub detail: String,
}

type Verdict = Arc<dyn Fn(&Call) -> Handled + Send + Sync>;

/// A shared log of calls, and the stop signals turns were given.
#[derive(Clone, Default)]
pub struct Log {
    calls: Arc<Mutex<Vec<Call>>>,
    signals: Arc<Mutex<Vec<(String, AbortSignal)>>>,
}

impl Log {
    /// Every call so far, in order.
    pub fn calls(&self) -> Vec<Call> {
        self.calls.lock().unwrap().clone()
    }

    /// Calls of this kind.
    pub fn of(&self, kind: &str) -> Vec<Call> {
        self.calls().into_iter().filter(|c| c.kind == kind).collect()
    }

    /// How many calls (any kind, any recorder) named this request id.
    pub fn count(&self, request_id: &str) -> usize {
        self.calls().iter().filter(|c| c.request_id == request_id).count()
    }

    /// Calls per request id.
    pub fn per_request(&self) -> HashMap<String, usize> {
        let mut m = HashMap::new();
        for c in self.calls() {
            *m.entry(c.request_id).or_insert(0) += 1;
        }
        m
    }

    /// The stop signal of the turn started by the send with this request id.
    pub fn signal(&self, request_id: &str) -> Option<AbortSignal> {
        self.signals.lock().unwrap().iter().find(|(r, _)| r == request_id).map(|(_, s)| s.clone())
    }

    fn push(&self, call: Call) {
        self.calls.lock().unwrap().push(call);
    }
}

/// Handlers and hooks that log each call and answer `verdict(call)`
/// (default: [`Handled::Accepted`]). A turn it takes ends at once.
#[derive(Clone)]
pub struct Recorder {
    /// Its name in the log.
    pub who: &'static str,
    /// Where it logs.
    pub log: Log,
    verdict: Verdict,
    hold: Option<Arc<tokio::sync::Semaphore>>,
}

impl Recorder {
    /// Accepts everything.
    pub fn new(who: &'static str, log: &Log) -> Recorder {
        Recorder { who, log: log.clone(), verdict: Arc::new(|_| Handled::Accepted), hold: None }
    }

    /// Answers `verdict(call)`.
    pub fn with(
        who: &'static str,
        log: &Log,
        verdict: impl Fn(&Call) -> Handled + Send + Sync + 'static,
    ) -> Recorder {
        Recorder { who, log: log.clone(), verdict: Arc::new(verdict), hold: None }
    }

    /// Logs one call and answers its verdict.
    pub fn record(&self, kind: &'static str, pane: &str, request_id: &str, detail: &str) -> Handled {
        let call = Call {
            who: self.who,
            kind,
            pane: pane.to_owned(),
            request_id: request_id.to_owned(),
            detail: detail.to_owned(),
        };
        let verdict = (self.verdict)(&call);
        self.log.push(call);
        verdict
    }

    /// Logs a send and answers the verdict.
    pub fn send_call(&self, req: &SendRequest) -> Handled {
        self.log.signals.lock().unwrap().push((req.request_id.to_string(), req.signal.clone()));
        self.record("send", req.pane.id(), req.request_id.as_str(), &req.text)
    }

    /// A recorder whose turns run until the phone stops them (or the test
    /// adds a permit to `gate`), so the pane stays working.
    pub fn holding(who: &'static str, log: &Log, gate: Arc<tokio::sync::Semaphore>) -> Recorder {
        Recorder { hold: Some(gate), ..Recorder::new(who, log) }
    }
}

impl ChatHandler for Recorder {
    async fn turn(&self, turn: Turn) {
        if let Some(gate) = &self.hold {
            tokio::select! {
                permit = gate.acquire() => drop(permit),
                () = turn.stopped() => {}
            }
        }
    }
    async fn check_send(&self, req: SendRequest) -> HandlerResult {
        self.send_call(&req).plain()
    }
    async fn steer(&self, req: SteerRequest) -> HandlerResult {
        self.record("steer", req.pane.id(), req.request_id.as_str(), &req.text).plain()
    }
    async fn stop(&self, req: StopRequest) -> HandlerResult {
        self.record("stop", req.pane.id(), req.request_id.as_str(), "").plain()
    }
}

impl ActionHandler for Recorder {
    async fn action(&self, req: ActionRequest) -> HandlerResult {
        self.record("action", req.pane.id(), req.request_id.as_str(), req.action.as_str()).plain()
    }
}

impl Hooks for Recorder {
    async fn on_rename(&self, req: RenameRequest) -> HandlerResult {
        self.record("rename", "", req.request_id.as_str(), &format!("{}={}", req.id, req.title)).layout()
    }
    async fn on_close(&self, req: CloseRequest) -> HandlerResult {
        self.record("close", "", req.request_id.as_str(), &req.id).layout()
    }
    async fn on_reopen(&self, req: ReopenRequest) -> HandlerResult<Reopen> {
        match self.record("reopen", "", req.request_id.as_str(), req.id.as_str()) {
            Handled::NotHandled => Ok(Reopen::Restore),
            other => other.plain().map(|()| Reopen::Reopened),
        }
    }
    async fn on_starter(&self, req: StarterRequest) -> HandlerResult<Started> {
        let detail = match &req.text {
            Some(t) => format!("{}:{t}", req.starter),
            None => req.starter.to_string(),
        };
        match self.record("starter", "", req.request_id.as_str(), &detail) {
            Handled::Started(pane) => Ok(Started::from_id(pane)),
            other => other.plain().map(|()| Started::without_pane()),
        }
    }
}
