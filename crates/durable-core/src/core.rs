//! The core: shared state, the driver's side (deadlines, jobs, wake-up).
//! SKELETON — the lead replaces this with the full core; the driver API
//! (create_core, handle, next_deadline, tick, poll_job, set_wakeup,
//! set_caller_check, warn, now, options) stays as it is.

use std::collections::VecDeque;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use durable_types::Timestamp;
use durable_types::exchange::{Request, Response};

use crate::options::CoreOptions;

/// Work that belongs to no request; the driver runs it to completion.
pub type Job = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// What `GET /hello` says of the caller check, set by the transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CallerCheckMode {
    /// Socket, and the platform tells the peer: writes from the agent and
    /// its descendants are refused.
    On,
    /// Socket, and the program turned the check off.
    Off,
    /// Socket, and the platform cannot tell the peer.
    Unavailable,
    /// HTTPS: the bearer token is the check.
    Token,
}

impl CallerCheckMode {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            CallerCheckMode::On => "on",
            CallerCheckMode::Off => "off",
            CallerCheckMode::Unavailable => "unavailable",
            CallerCheckMode::Token => "token",
        }
    }
}

/// A durable agent's protocol core. Cheap to clone: clones share one state.
#[derive(Clone)]
pub struct Core {
    pub(crate) shared: Arc<Shared>,
}

pub(crate) struct Shared {
    pub(crate) options: CoreOptions,
    pub(crate) driver: Mutex<DriverState>,
}

pub(crate) struct DriverState {
    jobs: VecDeque<Job>,
    wakeup: Option<Arc<dyn Fn() + Send + Sync>>,
    caller_check: CallerCheckMode,
}

impl fmt::Debug for Core {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Core").field("options", &self.shared.options).finish_non_exhaustive()
    }
}

/// Builds a core (the seed's `createCore`).
pub fn create_core(options: CoreOptions) -> Core {
    Core {
        shared: Arc::new(Shared {
            options,
            driver: Mutex::new(DriverState {
                jobs: VecDeque::new(),
                wakeup: None,
                caller_check: CallerCheckMode::Unavailable,
            }),
        }),
    }
}

impl Core {
    /// Answers one request from Collie.
    pub fn handle(&self, request: Request) -> impl Future<Output = Response> + Send + 'static {
        let core = self.clone();
        async move {
            let _ = &core;
            let _ = request;
            Response::json(404, &b"{\"ok\":false,\"code\":\"not-found\",\"message\":\"skeleton\"}"[..])
        }
    }

    /// The earliest time at which the driver must call [`Core::tick`].
    pub fn next_deadline(&self) -> Option<Timestamp> {
        None
    }

    /// Fires every deadline at or before `now`.
    pub fn tick(&self, now: Timestamp) {
        let _ = now;
    }

    /// The next job to run, if any.
    pub fn poll_job(&self) -> Option<Job> {
        self.shared.driver.lock().unwrap_or_else(|e| e.into_inner()).jobs.pop_front()
    }

    /// Registers the driver's wake-up: called when a job is queued or the
    /// next deadline may have moved earlier.
    pub fn set_wakeup(&self, wake: impl Fn() + Send + Sync + 'static) {
        self.shared.driver.lock().unwrap_or_else(|e| e.into_inner()).wakeup = Some(Arc::new(wake));
    }

    /// Tells the core what the transport's caller check is (for `GET /hello`).
    pub fn set_caller_check(&self, mode: CallerCheckMode) {
        self.shared.driver.lock().unwrap_or_else(|e| e.into_inner()).caller_check = mode;
    }

    /// Writes one line through the warn sink.
    pub fn warn(&self, line: &str) {
        (self.shared.options.warn)(line);
    }

    /// The current time, from the injected clock.
    pub fn now(&self) -> Timestamp {
        self.shared.options.clock.now()
    }

    /// The options the core was built with.
    pub fn options(&self) -> &CoreOptions {
        &self.shared.options
    }
}
