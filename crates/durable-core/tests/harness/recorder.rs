//! A recording handler for the write tests (§8): it answers with a
//! configurable verdict and logs every call (who, what, request id, text),
//! so a test can count executions per request id.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use durable_core::{
    AbortSignal, ActionRequest, CloseRequest, Handled, Hooks, PaneHandlers, RenameRequest, ReopenRequest,
    SendRequest, StarterRequest, SteerRequest, StopRequest,
};

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

/// A shared log of calls, and the abort signals sends were given.
#[derive(Clone, Default)]
pub struct Log {
    calls: Arc<Mutex<Vec<Call>>>,
    signals: Arc<Mutex<Vec<(String, AbortSignal)>>>,
}

impl Log {
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

    /// The abort signal the send with this request id was given.
    pub fn signal(&self, request_id: &str) -> Option<AbortSignal> {
        self.signals.lock().unwrap().iter().find(|(r, _)| r == request_id).map(|(_, s)| s.clone())
    }

    fn push(&self, call: Call) {
        self.calls.lock().unwrap().push(call);
    }
}

/// Handlers and hooks that log each call and answer `verdict(call)`
/// (default: [`Handled::Accepted`]).
#[derive(Clone)]
pub struct Recorder {
    pub who: &'static str,
    pub log: Log,
    verdict: Verdict,
}

impl Recorder {
    /// Accepts everything.
    pub fn new(who: &'static str, log: &Log) -> Recorder {
        Recorder { who, log: log.clone(), verdict: Arc::new(|_| Handled::Accepted) }
    }

    /// Answers `verdict(call)`.
    pub fn with(
        who: &'static str,
        log: &Log,
        verdict: impl Fn(&Call) -> Handled + Send + Sync + 'static,
    ) -> Recorder {
        Recorder { who, log: log.clone(), verdict: Arc::new(verdict) }
    }

    fn record(&self, kind: &'static str, pane: &str, request_id: &str, detail: &str) -> Handled {
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

    fn send_call(&self, req: &SendRequest) -> Handled {
        self.log.signals.lock().unwrap().push((req.request_id.to_string(), req.signal.clone()));
        self.record("send", req.pane.id(), req.request_id.as_str(), &req.text)
    }
}

#[async_trait]
impl PaneHandlers for Recorder {
    async fn send(&self, req: SendRequest) -> Handled {
        self.send_call(&req)
    }
    async fn steer(&self, req: SteerRequest) -> Handled {
        self.record("steer", req.pane.id(), req.request_id.as_str(), &req.text)
    }
    async fn stop(&self, req: StopRequest) -> Handled {
        self.record("stop", req.pane.id(), req.request_id.as_str(), "")
    }
    async fn action(&self, req: ActionRequest) -> Handled {
        self.record("action", req.pane.id(), req.request_id.as_str(), req.action.as_str())
    }
}

#[async_trait]
impl Hooks for Recorder {
    async fn on_rename(&self, req: RenameRequest) -> Handled {
        self.record("rename", "", req.request_id.as_str(), &format!("{}={}", req.id, req.title))
    }
    async fn on_close(&self, req: CloseRequest) -> Handled {
        self.record("close", "", req.request_id.as_str(), &req.id)
    }
    async fn on_reopen(&self, req: ReopenRequest) -> Handled {
        self.record("reopen", "", req.request_id.as_str(), req.id.as_str())
    }
    async fn on_starter(&self, req: StarterRequest) -> Handled {
        let detail = match &req.text {
            Some(t) => format!("{}:{t}", req.starter),
            None => req.starter.to_string(),
        };
        self.record("starter", "", req.request_id.as_str(), &detail)
    }
}
