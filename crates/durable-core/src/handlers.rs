//! Handlers (per pane) and hooks (agent-wide) for the phone's writes (§8).
//!
//! A write answers once its handler has *accepted* the work, not when the
//! work is finished: a handler starts the work (on the program's own task)
//! and returns. Awaiting an ask inside a handler deadlocks the pane: the
//! answer could only arrive through the same phone whose write is waiting.

use async_trait::async_trait;
use durable_types::{Id, Target};

use crate::layout::Pane;
use crate::signal::AbortSignal;

/// What a handler or hook says of a write.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Handled {
    /// The work is accepted.
    Accepted,
    /// A starter created this pane.
    Started(Id),
    /// The work is refused: `409 refused` with this reason, nothing stored,
    /// so the same request id may try again.
    Refused(String),
    /// This handler does not take this write: the hook is asked next, and
    /// with no hook the answer is `409 not-supported`.
    NotHandled,
}

impl Handled {
    /// A refusal with a reason.
    pub fn refuse(reason: impl Into<String>) -> Self {
        Handled::Refused(reason.into())
    }
}

/// `send` from the phone, delivered when the pane is idle.
#[derive(Debug, Clone)]
pub struct SendRequest {
    /// The pane.
    pub pane: Pane,
    /// The send's request id (the `user` item names it).
    pub request_id: Id,
    /// The text.
    pub text: String,
    /// A signal that fires when the phone stops the turn.
    pub signal: AbortSignal,
}

/// `steer` from the phone: text for the running turn.
#[derive(Debug, Clone)]
pub struct SteerRequest {
    /// The pane.
    pub pane: Pane,
    /// The request id.
    pub request_id: Id,
    /// The text.
    pub text: String,
}

/// `stop` from the phone. Stop never waits behind the pane's write lock, so
/// this runs even while a send is stuck in its handler. Once the handler (or
/// the hook) accepts — or takes no part ([`Handled::NotHandled`]) — the core
/// fires the turn's signal (the [`SendRequest::signal`] of the last send
/// delivered) and closes the pane's open asks as aborted; a refusal does
/// neither.
#[derive(Debug, Clone)]
pub struct StopRequest {
    /// The pane.
    pub pane: Pane,
    /// The request id.
    pub request_id: Id,
}

/// A pane action button pressed on the phone.
#[derive(Debug, Clone)]
pub struct ActionRequest {
    /// The pane.
    pub pane: Pane,
    /// The request id.
    pub request_id: Id,
    /// The action id.
    pub action: Id,
}

/// A rename from the phone; accepted, the SDK sets the title itself.
#[derive(Debug, Clone)]
pub struct RenameRequest {
    /// The request id.
    pub request_id: Id,
    /// What is renamed.
    pub target: Target,
    /// Its id (`<workspace>:<tab>` for a tab).
    pub id: String,
    /// The new title.
    pub title: String,
}

/// A close from the phone; accepted, the SDK removes the target and
/// everything in it, and closes their open asks as aborted.
#[derive(Debug, Clone)]
pub struct CloseRequest {
    /// The request id.
    pub request_id: Id,
    /// What is closed.
    pub target: Target,
    /// Its id.
    pub id: String,
}

/// A reopen from the phone. With a hook, the hook decides (and typically
/// calls `tab.pane(..)` again); without one, the SDK restores a pane this
/// process closed.
#[derive(Debug, Clone)]
pub struct ReopenRequest {
    /// The request id.
    pub request_id: Id,
    /// The pane id.
    pub id: Id,
}

/// A starter pressed on the phone: the hook creates a pane and answers
/// [`Handled::Started`] with its id.
#[derive(Debug, Clone)]
pub struct StarterRequest {
    /// The request id.
    pub request_id: Id,
    /// The starter id.
    pub starter: Id,
    /// The first text, if the phone sent one.
    pub text: Option<String>,
}

/// Handlers of a pane's writes (send, steer, stop, actions), set on one pane
/// with [`Pane::handlers`](crate::Pane::handlers) or for every pane with
/// [`Core::set_handlers`](crate::Core::set_handlers); a pane's own win. Every
/// method defaults to [`Handled::NotHandled`]: the agent-wide handlers are
/// asked next, and when none takes the write the answer is `409
/// not-supported` — except for stop, which the SDK applies itself (the
/// turn's signal fires, the pane's asks close, `stopped`). A pane with no
/// handlers at all answers `409 not-supported` to all four.
#[async_trait]
pub trait PaneHandlers: Send + Sync + 'static {
    /// Text to start a turn with. Called when the pane is idle (a send that
    /// arrives during a turn is queued and delivered after it).
    ///
    /// The phone's send waits for this answer, so:
    /// 1. start the turn: [`req.pane.start_turn(id)`](crate::Pane::start_turn)
    ///    (the pane works: steer is taken, sends that arrive meanwhile are
    ///    queued);
    /// 2. move the [`Turn`](crate::Turn) into work spawned on your own task
    ///    and return [`Handled::Accepted`] at once — the SDK then writes the
    ///    `user` item ([`user_item_id`](crate::user_item_id));
    /// 3. in the work, stream the reply ([`Turn::partial`](crate::Turn::partial),
    ///    then [`Turn::reply`](crate::Turn::reply)), watch `req.signal` for
    ///    the phone's stop, and let the turn end (or drop): the pane goes
    ///    idle and the next queued send is delivered.
    ///
    /// ```no_run
    /// use durable_core::{async_trait, Handled, PaneHandlers, SendRequest};
    ///
    /// struct Agent;
    /// # fn spawn(work: impl std::future::Future<Output = ()> + Send + 'static) { drop(work) }
    ///
    /// #[async_trait]
    /// impl PaneHandlers for Agent {
    ///     async fn send(&self, req: SendRequest) -> Handled {
    ///         let turn = match req.pane.start_turn(&format!("t-{}", req.request_id)) {
    ///             Ok(turn) => turn,
    ///             Err(e) => return Handled::refuse(e.to_string()),
    ///         };
    ///         // On your runtime's executor (the work outlives this call).
    ///         spawn(async move {
    ///             let reply = format!("reply-{}", req.request_id);
    ///             let _ = turn.partial(&reply, "Got it");
    ///             let _ = turn.reply(&reply, format!("Got it: {}", req.text));
    ///         }); // the turn is dropped at the end: the pane goes idle
    ///         Handled::Accepted
    ///     }
    /// }
    /// ```
    async fn send(&self, req: SendRequest) -> Handled {
        let _ = req;
        Handled::NotHandled
    }
    /// Text for the running turn.
    async fn steer(&self, req: SteerRequest) -> Handled {
        let _ = req;
        Handled::NotHandled
    }
    /// The phone stopped the turn.
    async fn stop(&self, req: StopRequest) -> Handled {
        let _ = req;
        Handled::NotHandled
    }
    /// A pane action.
    async fn action(&self, req: ActionRequest) -> Handled {
        let _ = req;
        Handled::NotHandled
    }
}

/// Agent-wide hooks for the layout writes from the phone: rename, close,
/// reopen and starters. A hook runs only when its cap is on and its request
/// id is new. Every method defaults to [`Handled::NotHandled`]; for rename
/// and close that means the SDK accepts and applies the change itself, for
/// reopen that it restores a pane this process closed, for a starter that
/// the route answers `409 not-supported`.
///
/// The pane writes (send, steer, stop, actions) go to [`PaneHandlers`]: a
/// pane's own ([`Pane::handlers`](crate::Pane::handlers)), else the
/// agent-wide ones ([`Core::set_handlers`](crate::Core::set_handlers)). A
/// pane with neither answers `409 not-supported` to all four.
#[async_trait]
pub trait Hooks: Send + Sync + 'static {
    /// A rename.
    async fn on_rename(&self, req: RenameRequest) -> Handled {
        let _ = req;
        Handled::NotHandled
    }
    /// A close.
    async fn on_close(&self, req: CloseRequest) -> Handled {
        let _ = req;
        Handled::NotHandled
    }
    /// A reopen.
    async fn on_reopen(&self, req: ReopenRequest) -> Handled {
        let _ = req;
        Handled::NotHandled
    }
    /// A starter.
    async fn on_starter(&self, req: StarterRequest) -> Handled {
        let _ = req;
        Handled::NotHandled
    }
}
