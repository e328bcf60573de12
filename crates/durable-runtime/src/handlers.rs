//! What the program answers to the phone's writes (§8): a pane's
//! conversation ([`ChatHandler`]: send, steer, stop), its buttons
//! ([`ActionHandler`]), and the agent-wide layout hooks ([`Hooks`]: rename,
//! close, reopen, starters).
//!
//! The traits use native `async fn`; the core erases them (boxing each
//! call) so that handlers of different types live side by side. A handler
//! is registered where it applies — [`Pane::on_send`](crate::Pane::on_send),
//! [`Pane::on_action`](crate::Pane::on_action), or for every pane without
//! its own, [`Collie::on_send`](crate::Collie::on_send) and
//! [`Collie::on_action`](crate::Collie::on_action) — so what a pane takes is
//! known from what was registered, and the default capabilities say exactly
//! that (§4).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use durable_types::{Id, Target};

use crate::handles::layout::Pane;
use crate::signal::AbortSignal;
use crate::turn::Turn;
pub(crate) use durable_core::data::answer::{HandlerResult, Refusal, Reopen};

/// A boxed future, for the erased handler calls.
pub(crate) type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A send from the phone, as [`ChatHandler::check_send`] sees it before the
/// turn starts.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct SendRequest {
    /// The pane.
    pub pane: Pane,
    /// The send's request id (the `user` item and the turn are named after it).
    pub request_id: Id,
    /// The text.
    pub text: String,
    /// The turn's stop signal, armed before the check runs: a stop that
    /// arrives while the check is still deciding fires it.
    pub signal: AbortSignal,
}

/// `steer` from the phone: text for the running turn.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct SteerRequest {
    /// The pane.
    pub pane: Pane,
    /// The request id.
    pub request_id: Id,
    /// The text.
    pub text: String,
}

/// `stop` from the phone. Stop never waits behind the pane's write lock.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct StopRequest {
    /// The pane.
    pub pane: Pane,
    /// The request id.
    pub request_id: Id,
}

/// A pane action button pressed on the phone.
#[derive(Debug, Clone)]
#[non_exhaustive]
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
#[non_exhaustive]
pub struct RenameRequest {
    /// The request id.
    pub request_id: Id,
    /// What is renamed.
    pub target: Target,
    /// Its id (`<workspace>:<tab>` for a tab).
    pub id: String,
    /// The new title.
    pub title: String,
    /// Not the phone's now: the title the pane had when the last run ended
    /// (kept by the receipt store), offered as the pane is declared again
    /// under another (docs/wire.md §9.2). `Ok` and the pane takes it back.
    pub kept: bool,
}

/// A close from the phone; accepted, the SDK removes the target and
/// everything in it, and closes their open asks as aborted.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct CloseRequest {
    /// The request id.
    pub request_id: Id,
    /// What is closed.
    pub target: Target,
    /// Its id.
    pub id: String,
}

/// A reopen from the phone.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ReopenRequest {
    /// The request id.
    pub request_id: Id,
    /// The pane id.
    pub id: Id,
}

/// A starter pressed on the phone.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct StarterRequest {
    /// The request id.
    pub request_id: Id,
    /// The starter id.
    pub starter: Id,
    /// The first text, if the phone sent one.
    pub text: Option<String>,
}

/// What [`Hooks::on_starter`](Hooks::on_starter) created.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Started {
    pane: Option<Id>,
}

impl Started {
    /// The starter opened this pane: the phone goes to it.
    pub fn pane(pane: &Pane) -> Self {
        Id::new(pane.id()).map_or_else(|_| Started::without_pane(), Started::from_id)
    }

    /// The starter opened the pane with this id.
    pub fn from_id(pane: Id) -> Self {
        Started { pane: Some(pane) }
    }

    /// The starter ran but opened no pane (the answer's `pane` is `null`).
    pub fn without_pane() -> Self {
        Started { pane: None }
    }

    /// The pane it opened.
    pub fn pane_id(&self) -> Option<&Id> {
        self.pane.as_ref()
    }
}

/// A pane's conversation: what runs when the phone sends text, and how a
/// running turn hears a steer or a stop.
///
/// The SDK runs the turn: when a send is taken on an idle pane, the pane
/// goes `working` (the turn id is the send's request id), the phone hears
/// `sent`, the `user` item is written, and [`turn`](ChatHandler::turn) runs
/// on the driver until it returns; then the pane goes idle and the next
/// queued send is delivered. A send that arrives during a turn is queued
/// (`queued`) and delivered after it. Nothing to spawn, no lock to mind:
/// `turn` may await asks, tools and models as long as it likes.
///
/// ```no_run
/// use durable_sdk::Turn;
/// use durable_sdk::handlers::ChatHandler;
///
/// struct Echo;
///
/// impl ChatHandler for Echo {
///     async fn turn(&self, mut turn: Turn) {
///         turn.partial("Thinking…");
///         let steers = turn.take_steers().join(" ");
///         turn.reply(format!("You said: {} {steers}", turn.text()));
///     } // the pane goes idle here
/// }
/// ```
pub trait ChatHandler: Send + Sync + 'static {
    /// Runs the turn of an accepted send, to its end. Watch
    /// [`Turn::stopped`] for the phone's stop and read steers with
    /// [`Turn::next_steer`] or [`Turn::take_steers`].
    fn turn(&self, turn: Turn) -> impl Future<Output = ()> + Send;

    /// Decides whether to take a send before its turn starts (it runs under
    /// the pane's write lock: answer quickly, and never await an ask here).
    /// Default: take it.
    fn check_send(&self, req: SendRequest) -> impl Future<Output = HandlerResult> + Send {
        let _ = req;
        async { Ok(()) }
    }

    /// Decides whether to take a steer; taken, its text reaches the running
    /// turn ([`Turn::next_steer`]). Default: take it.
    fn steer(&self, req: SteerRequest) -> impl Future<Output = HandlerResult> + Send {
        let _ = req;
        async { Ok(()) }
    }

    /// Decides whether to take a stop; taken, the SDK fires the turn's
    /// [`stopped`](Turn::stopped) and closes the pane's open asks as
    /// aborted. Default: take it.
    fn stop(&self, req: StopRequest) -> impl Future<Output = HandlerResult> + Send {
        let _ = req;
        async { Ok(()) }
    }
}

/// A closure is a chat handler: `pane.on_send(|turn: Turn| async move { … })`
/// runs it as the turn of each send (steers and stop taken, as the trait's
/// defaults do).
impl<F, Fut> ChatHandler for F
where
    F: Fn(Turn) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    fn turn(&self, turn: Turn) -> impl Future<Output = ()> + Send {
        self(turn)
    }
}

/// A pane's action buttons ([`Pane::action`](crate::Pane::action)).
///
/// A write answers once the handler has accepted the work, not when the
/// work is done: work that needs an ask (an approval card) is started on
/// the program's own task and the handler returns — awaiting the ask here
/// would keep the pane's writes waiting for an answer that cannot come
/// before this one.
pub trait ActionHandler: Send + Sync + 'static {
    /// A button was pressed: `Ok` answers `done`.
    fn action(&self, req: ActionRequest) -> impl Future<Output = HandlerResult> + Send;
}

/// A closure is an action handler:
/// `pane.on_action(|req: ActionRequest| async move { … Ok(()) })`.
impl<F, Fut> ActionHandler for F
where
    F: Fn(ActionRequest) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = HandlerResult> + Send + 'static,
{
    fn action(&self, req: ActionRequest) -> impl Future<Output = HandlerResult> + Send {
        self(req)
    }
}

/// Agent-wide hooks for the layout writes from the phone: rename, close,
/// reopen and starters. A hook runs only when its cap is on and its request
/// id is new. Setting hooks ([`Collie::set_hooks`](crate::Collie::set_hooks))
/// turns on the `rename`, `close` and `reopen` caps when caps are not given.
pub trait Hooks: Send + Sync + 'static {
    /// A rename; `Ok` and the SDK sets the title. Default: accept.
    fn on_rename(&self, req: RenameRequest) -> impl Future<Output = HandlerResult> + Send {
        let _ = req;
        async { Ok(()) }
    }
    /// A close; `Ok` and the SDK closes the target. Default: accept.
    fn on_close(&self, req: CloseRequest) -> impl Future<Output = HandlerResult> + Send {
        let _ = req;
        async { Ok(()) }
    }
    /// A reopen. Default: [`Reopen::Restore`].
    fn on_reopen(&self, req: ReopenRequest) -> impl Future<Output = HandlerResult<Reopen>> + Send {
        let _ = req;
        async { Ok(Reopen::Restore) }
    }
    /// A starter (declared with [`Collie::starter`](crate::Collie::starter)).
    /// Default: not supported.
    fn on_starter(&self, req: StarterRequest) -> impl Future<Output = HandlerResult<Started>> + Send {
        let _ = req;
        async { Err(Refusal::not_supported()) }
    }
}

// ---------------------------------------------------------------------------
// Erased forms, so that handlers of any type share one slot.

pub(crate) trait DynChat: Send + Sync {
    fn turn_dyn(&self, turn: Turn) -> BoxFuture<'_, ()>;
    fn check_send_dyn(&self, req: SendRequest) -> BoxFuture<'_, HandlerResult>;
    fn steer_dyn(&self, req: SteerRequest) -> BoxFuture<'_, HandlerResult>;
    fn stop_dyn(&self, req: StopRequest) -> BoxFuture<'_, HandlerResult>;
}

impl<T: ChatHandler> DynChat for T {
    fn turn_dyn(&self, turn: Turn) -> BoxFuture<'_, ()> {
        Box::pin(self.turn(turn))
    }
    fn check_send_dyn(&self, req: SendRequest) -> BoxFuture<'_, HandlerResult> {
        Box::pin(self.check_send(req))
    }
    fn steer_dyn(&self, req: SteerRequest) -> BoxFuture<'_, HandlerResult> {
        Box::pin(self.steer(req))
    }
    fn stop_dyn(&self, req: StopRequest) -> BoxFuture<'_, HandlerResult> {
        Box::pin(self.stop(req))
    }
}

pub(crate) trait DynActions: Send + Sync {
    fn action_dyn(&self, req: ActionRequest) -> BoxFuture<'_, HandlerResult>;
}

impl<T: ActionHandler> DynActions for T {
    fn action_dyn(&self, req: ActionRequest) -> BoxFuture<'_, HandlerResult> {
        Box::pin(self.action(req))
    }
}

pub(crate) trait DynHooks: Send + Sync {
    fn rename_dyn(&self, req: RenameRequest) -> BoxFuture<'_, HandlerResult>;
    fn close_dyn(&self, req: CloseRequest) -> BoxFuture<'_, HandlerResult>;
    fn reopen_dyn(&self, req: ReopenRequest) -> BoxFuture<'_, HandlerResult<Reopen>>;
    fn starter_dyn(&self, req: StarterRequest) -> BoxFuture<'_, HandlerResult<Started>>;
}

impl<T: Hooks> DynHooks for T {
    fn rename_dyn(&self, req: RenameRequest) -> BoxFuture<'_, HandlerResult> {
        Box::pin(self.on_rename(req))
    }
    fn close_dyn(&self, req: CloseRequest) -> BoxFuture<'_, HandlerResult> {
        Box::pin(self.on_close(req))
    }
    fn reopen_dyn(&self, req: ReopenRequest) -> BoxFuture<'_, HandlerResult<Reopen>> {
        Box::pin(self.on_reopen(req))
    }
    fn starter_dyn(&self, req: StarterRequest) -> BoxFuture<'_, HandlerResult<Started>> {
        Box::pin(self.on_starter(req))
    }
}

pub(crate) type HookFn<Req, T> = Arc<dyn Fn(Req) -> BoxFuture<'static, HandlerResult<T>> + Send + Sync>;

/// A hook closure, erased.
pub(crate) fn hook_fn<Req, T, F, Fut>(hook: F) -> HookFn<Req, T>
where
    F: Fn(Req) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = HandlerResult<T>> + Send + 'static,
{
    Arc::new(move |req| Box::pin(hook(req)))
}

/// The agent-wide hooks in force: a [`Hooks`] value, and closures set one
/// hook at a time over it ([`Collie::on_rename`](crate::Collie::on_rename), …).
/// A hook set by neither answers as the trait's default does.
#[derive(Clone, Default)]
pub(crate) struct HookSlots {
    base: Option<Arc<dyn DynHooks>>,
    pub(crate) rename: Option<HookFn<RenameRequest, ()>>,
    pub(crate) close: Option<HookFn<CloseRequest, ()>>,
    pub(crate) reopen: Option<HookFn<ReopenRequest, Reopen>>,
    pub(crate) starter: Option<HookFn<StarterRequest, Started>>,
}

impl HookSlots {
    pub(crate) fn with_base(base: Arc<dyn DynHooks>) -> Self {
        HookSlots { base: Some(base), ..HookSlots::default() }
    }
}

impl DynHooks for HookSlots {
    fn rename_dyn(&self, req: RenameRequest) -> BoxFuture<'_, HandlerResult> {
        match (&self.rename, &self.base) {
            (Some(f), _) => f(req),
            (None, Some(b)) => b.rename_dyn(req),
            (None, None) => Box::pin(async { Ok(()) }),
        }
    }
    fn close_dyn(&self, req: CloseRequest) -> BoxFuture<'_, HandlerResult> {
        match (&self.close, &self.base) {
            (Some(f), _) => f(req),
            (None, Some(b)) => b.close_dyn(req),
            (None, None) => Box::pin(async { Ok(()) }),
        }
    }
    fn reopen_dyn(&self, req: ReopenRequest) -> BoxFuture<'_, HandlerResult<Reopen>> {
        match (&self.reopen, &self.base) {
            (Some(f), _) => f(req),
            (None, Some(b)) => b.reopen_dyn(req),
            (None, None) => Box::pin(async { Ok(Reopen::Restore) }),
        }
    }
    fn starter_dyn(&self, req: StarterRequest) -> BoxFuture<'_, HandlerResult<Started>> {
        match (&self.starter, &self.base) {
            (Some(f), _) => f(req),
            (None, Some(b)) => b.starter_dyn(req),
            (None, None) => Box::pin(async { Err(Refusal::not_supported()) }),
        }
    }
}

/// A pane's own handlers, or the agent-wide ones.
#[derive(Clone, Default)]
pub(crate) struct PaneTakers {
    pub(crate) chat: Option<Arc<dyn DynChat>>,
    pub(crate) actions: Option<Arc<dyn DynActions>>,
}

impl PaneTakers {
    pub(crate) fn is_empty(&self) -> bool {
        self.chat.is_none() && self.actions.is_none()
    }
}
