//! The core: shared state, construction, and the driver's side (deadlines,
//! jobs, wake-up).

use std::collections::VecDeque;
use std::fmt;
use std::future::Future;
use std::ops::{Deref, DerefMut};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};

use durable_types::exchange::{Read, Request, Response};
use durable_types::{Caps, Timestamp};

use crate::handlers::{
    ActionHandler, ChatHandler, CloseRequest, DynHooks, HandlerResult, HookSlots, Hooks, RenameRequest,
    Reopen, ReopenRequest, Started, StarterRequest, hook_fn,
};
use crate::options::CoreOptions;
use crate::signal::AbortController;
use durable_core::machine::{Machine, MachineConfig};
use durable_core::state::{Effect, State};

/// Work that belongs to no request; the driver runs it to completion.
pub type Job = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

use durable_core::data::caller_check::CallerCheckMode;

/// A durable agent: the layout the phone shows, its handlers, and the
/// transports it is served on. The seed's `collie`. Cheap to clone: clones
/// share one agent.
///
/// The layout goes [`workspace`](Self::workspace) →
/// [`tab`](crate::Workspace::tab) → [`pane`](crate::Tab::pane); a pane
/// takes its chat and buttons ([`Pane::on_send`](crate::Pane::on_send),
/// [`Pane::on_action`](crate::Pane::on_action)) and raises asks
/// ([`Pane::ask`](crate::Pane::ask),
/// [`require_approval`](crate::require_approval)). Call
/// [`ready`](Self::ready) once the layout is set, and
/// [`serve`](Self::serve) it on a transport. What a transport calls is
/// its [`driver`](Self::driver).
///
/// The transports served stop when the last `Collie` the program holds
/// (the one [`create_core`] returned, or a clone of it) is dropped, as a
/// server value does when it is; [`close`](Self::close) stops them
/// gracefully. The handles the SDK hands out — a pane's
/// [`collie`](crate::Pane::collie), a [`Driver`] — do not keep them up.
#[derive(Clone)]
pub struct Collie {
    pub(crate) shared: Arc<Shared>,
    /// Held by the program's handles only: the last one dropped stops the
    /// transports. The handles the runtime keeps (panes, drivers, jobs)
    /// hold none, or a server's own driver would keep it serving forever.
    _program: Option<Arc<ProgramHandle>>,
}

/// What the program's last [`Collie`] stops as it is dropped.
struct ProgramHandle {
    shared: std::sync::Weak<Shared>,
}

impl Drop for ProgramHandle {
    fn drop(&mut self) {
        if let Some(shared) = self.shared.upgrade() {
            // Dropping a server stops it (without waiting: that is `close`).
            drop(crate::serve::take_served(&shared));
        }
    }
}

pub(crate) struct Shared {
    pub(crate) options: CoreOptions,
    /// Written by what changes the machine; read (shared) by the polls
    /// answered from what earlier ones kept (`Machine::answer_read_kept`).
    pub(crate) state: RwLock<Locked>,
    pub(crate) driver: Mutex<DriverState>,
    pub(crate) wake_pending: AtomicBool,
    /// The transports served ([`Collie::serve`]).
    pub(crate) serving: Mutex<crate::serve::Serving>,
}

/// What the state lock guards: the state, and the program's side of what
/// it names by number.
pub(crate) struct Locked {
    machine: Machine,
    links: crate::links::Links,
}

pub(crate) struct DriverState {
    jobs: VecDeque<Job>,
    wakeups: Vec<Arc<dyn Fn() + Send + Sync>>,
}

impl fmt::Debug for Collie {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Collie")
            .field("host_name", &self.shared.options.host_name())
            .field("addresses", &self.addresses())
            .finish_non_exhaustive()
    }
}

/// The transports' side of an agent ([`Collie::driver`]): requests go in
/// ([`handle`](Self::handle), [`answer_read`](Self::answer_read)), and the
/// work that belongs to no request comes out as jobs
/// ([`poll_job`](Self::poll_job)) and deadlines
/// ([`next_deadline`](Self::next_deadline), [`tick`](Self::tick)), with a
/// wake-up ([`set_wakeup`](Self::set_wakeup)) when either changes. The
/// servers of `durable-http`, `durable-socket` and `durable-tls` take one;
/// so does a custom transport. Cheap to clone: clones share one agent.
#[derive(Clone)]
pub struct Driver {
    collie: Collie,
}

impl fmt::Debug for Driver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Driver")
            .field("host_name", &self.collie.options().host_name())
            .finish_non_exhaustive()
    }
}

impl Driver {
    /// The agent this drives: its options, its clock and warn sink.
    pub fn collie(&self) -> &Collie {
        &self.collie
    }

    /// Answers one request from Collie. The future is `Send + 'static`:
    /// a server awaits many at once.
    ///
    /// The future runs inside the request's `tracing` span (`request`, at
    /// `DEBUG`: method, route, pane, ask id, request id), made here so that
    /// its parent is the span current where the transport calls this (its
    /// connection's), even when the future runs on a task of its own.
    pub fn handle(&self, request: Request) -> impl Future<Output = Response> + Send + use<> {
        use tracing::Instrument;
        let core = self.collie.clone();
        let span = durable_core::routes::request_span(&request.method, &request.path);
        async move { crate::dispatch::route(&core, request).await }.instrument(span)
    }

    /// Answers a read at once from a request borrowed from the transport
    /// (nothing copied), or `None` when the read must wait — the history
    /// routes ask the program's provider — and goes to [`Driver::handle`]
    /// instead. An answer is exactly what [`Driver::handle`] would give the
    /// same request as a `GET`: the same checks in the same order (another
    /// user, the route, the method), the same bytes and `ETag`.
    ///
    /// Why: a poll comes every 2 s from each phone that watches; this way
    /// it costs no owned copy of its path, query and `If-None-Match`, and
    /// no future.
    pub fn answer_read(&self, read: &Read<'_>) -> Option<Response> {
        let span = durable_core::routes::request_span(&durable_types::exchange::Method::Get, read.path);
        let _in_span = span.enter();
        let kept = self.collie.read_lock().locked().machine.answer_read_kept(read);
        let response = match kept {
            Ok(response) => response,
            Err(durable_core::routes::NeedsWrite) => self.collie.lock().machine_mut().answer_read(read),
        };
        // `None` goes on to `handle`, whose own span says how it ended.
        if let Some(response) = &response {
            durable_core::routes::answered(response);
        }
        response
    }

    /// The earliest time at which the driver must call [`Driver::tick`].
    pub fn next_deadline(&self) -> Option<Timestamp> {
        self.collie.lock().machine().next_deadline()
    }

    /// Fires every deadline at or before `now`: ask expiry, held answers,
    /// the `busy` wait.
    pub fn tick(&self, now: Timestamp) {
        self.collie.lock().machine_mut().handle_timeout(now);
    }

    /// The next job to run, if any.
    pub fn poll_job(&self) -> Option<Job> {
        self.collie.driver_state().jobs.pop_front()
    }

    /// Registers a driver's wake-up: called when a job is queued or the
    /// next deadline may have moved earlier. Each server that serves this
    /// core (a socket and a TLS server may serve one core together) adds its
    /// own; all are called. A wake-up may call back into the core.
    pub fn set_wakeup(&self, wake: impl Fn() + Send + Sync + 'static) {
        self.collie.driver_state().wakeups.push(Arc::new(wake));
    }

    /// Tells the core what the socket transport's caller check is (for
    /// `GET /hello`). A request that carries `Caller::Token` (HTTPS) always
    /// hears `token`, so the TLS server need not set it.
    pub fn set_caller_check(&self, mode: CallerCheckMode) {
        self.collie.lock().machine_mut().set_caller_check(mode);
    }

    /// Begins a graceful stop (a driver's call, made by `close()`): from now
    /// on no turn starts — a new send is `409 busy` ("the agent is
    /// stopping"), unstored, for the phone to send again once the agent is
    /// back, and sends already queued stay queued for the next start — while
    /// the turns running go on to their end ([`Driver::turns_done`]).
    pub fn begin_stop(&self) {
        self.collie.lock().machine_mut().begin_stop();
    }

    /// Whether [`Driver::begin_stop`] was called.
    pub fn is_stopping(&self) -> bool {
        self.collie.is_stopping()
    }

    /// How many turns of sends run now.
    pub fn turns_running(&self) -> usize {
        self.collie.lock().turns_running()
    }

    /// Resolves once no turn of a send runs (at once if none does). A
    /// driver bounds the wait with its own timer: the shutdown grace.
    pub async fn turns_done(&self) {
        loop {
            // The count and the wait are one step under the lock: a last
            // turn ending in between still wakes it. Looked at again once
            // woken: a turn may have begun since.
            let idle = {
                let mut st = self.collie.lock();
                if st.turns_running() == 0 {
                    return;
                }
                let (waiter, idle) = st.links().add_waiter();
                st.wait_for_idle(waiter);
                idle
            };
            let _ = idle.await;
        }
    }

    /// Turns allow-always off for the asks raised from now on (a driver's
    /// call: the HTTPS transport makes it when its options do not keep
    /// allow-always, contract §1.2). There is no turning it back on.
    pub fn forbid_allow_always(&self) {
        self.collie.lock().machine_mut().forbid_allow_always();
    }

    /// What `GET /hello` says of the caller check.
    pub fn caller_check(&self) -> CallerCheckMode {
        self.collie.lock().machine().caller_check()
    }
}

/// Builds an agent from its options, not served yet (the seed's
/// `createCore`; the SDK's `create_core` fills in the system clock, an
/// epoch and the warn sink first).
pub fn create_core(options: CoreOptions) -> Collie {
    Collie::new(options)
}

impl Collie {
    /// Builds an agent from its options ([`create_core`]).
    pub fn new(options: CoreOptions) -> Collie {
        let machine = Machine::new(MachineConfig {
            host_name: options.host_name.clone(),
            runtime: options.runtime.clone(),
            caps: options.caps,
            epoch: options.epoch.clone(),
            tail_limit: options.tail_limit,
            allow_always: options.allow_always,
            keeps_asks: options.receipts.keeps_asks_dyn(),
            keeps_conversations: options.receipts.keeps_conversations_dyn(),
            // A store that outlives the process: its sends journal does.
            shows_items_once_kept: options.receipts.keeps_sends_dyn(),
            hold_ms: options.hold_ms,
            held_answer_bytes: options.held_answer_bytes,
        });
        let shared = Arc::new(Shared {
            options,
            state: RwLock::new(Locked { machine, links: crate::links::Links::default() }),
            driver: Mutex::new(DriverState { jobs: VecDeque::new(), wakeups: Vec::new() }),
            wake_pending: AtomicBool::new(false),
            serving: Mutex::new(crate::serve::Serving::default()),
        });
        let program = Some(Arc::new(ProgramHandle { shared: Arc::downgrade(&shared) }));
        Collie { shared, _program: program }
    }

    /// This agent as the runtime keeps it (in a pane, a driver, a job): a
    /// handle that does not keep the transports up ([`Collie`]'s docs).
    pub(crate) fn inner(&self) -> Collie {
        Collie { shared: self.shared.clone(), _program: None }
    }

    /// The transports' side of this agent: what a server or a custom
    /// driver calls (requests in, jobs and deadlines out). Cheap: it shares
    /// this agent's state.
    pub fn driver(&self) -> Driver {
        Driver { collie: self.inner() }
    }

    /// Whether a graceful stop began ([`Collie::close`], [`Driver::begin_stop`]).
    pub(crate) fn is_stopping(&self) -> bool {
        self.lock().machine().is_stopping()
    }

    pub(crate) fn turn_ended(&self) {
        self.lock().turn_ended();
    }

    /// Writes one line through the warn sink.
    pub fn warn(&self, line: &str) {
        (self.shared.options.warn)(line);
    }

    /// The current time, from the agent's clock (an ask's expiry is
    /// counted from it).
    pub fn now(&self) -> Timestamp {
        self.shared.options.clock.now()
    }

    /// The options the core was built with.
    pub fn options(&self) -> &CoreOptions {
        &self.shared.options
    }

    /// Marks the agent ready: `GET /hello` and the state say `ready: true`
    /// (until then Collie shows "starting").
    ///
    /// The first call also takes up the sends a restart left (§9.1), with a
    /// receipt store that keeps them: those still queued are delivered as
    /// their panes go idle, and those whose turn the restart cut are closed
    /// with a notice. So call it once the panes and their handlers are set.
    ///
    /// It also closes the asks the last run left open that the agent did not
    /// claim from [`kept_asks`](Self::kept_asks) (§7.2), each with the chat
    /// line `Stopped before an answer: <title>`.
    pub fn ready(&self) {
        // A store without the sends journal has nothing to put back. Asked
        // before the lock: it is the program's code.
        let keeps_sends = self.shared.options.receipts.keeps_sends_dyn();
        let first = {
            let mut st = self.lock();
            let first = st.machine_mut().ready();
            if first && keeps_sends {
                st.begin_send_recovery();
            }
            first
        };
        if first {
            let core = self.inner();
            self.push_job(async move {
                // However this job ends (the kept asks' settle panicking
                // included), the phone's writes are not held back for ever.
                let _over = crate::writes::RecoveryOver(&core);
                // The panes get their kept items back before anything the
                // recovery writes into them.
                core.conversations_restored().await;
                core.settle_kept().await;
                core.recover_sends().await;
            });
        }
    }

    /// The capabilities in force: the ones given, or what this agent can
    /// do (§4): `asks` always; `send`, `steer` and `abort` once a chat
    /// handler is set; `actions` (and `abort`) once an action handler is
    /// set; `rename`, `close` and `reopen` once hooks are set; `starters`
    /// once hooks are set and a starter is declared; `history` once a
    /// provider is set.
    pub fn caps(&self) -> Caps {
        self.lock().machine().caps()
    }

    /// Sets the agent-wide hooks of layout writes: rename, close, reopen,
    /// starters (replacing earlier ones, closures included).
    pub fn set_hooks(&self, hooks: impl Hooks) {
        self.update_hooks(|slots| *slots = HookSlots::with_base(Arc::new(hooks)));
    }

    /// What runs when the phone renames a workspace, tab or pane: `Ok` and
    /// the SDK sets the title. A closure's form of [`Hooks::on_rename`]; it
    /// replaces that one hook only.
    pub fn on_rename<F, Fut>(&self, hook: F)
    where
        F: Fn(RenameRequest) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = HandlerResult> + Send + 'static,
    {
        self.update_hooks(|slots| slots.rename = Some(hook_fn(hook)));
    }

    /// What runs when the phone closes a workspace, tab or pane: `Ok` and
    /// the SDK closes it. A closure's form of [`Hooks::on_close`].
    pub fn on_close<F, Fut>(&self, hook: F)
    where
        F: Fn(CloseRequest) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = HandlerResult> + Send + 'static,
    {
        self.update_hooks(|slots| slots.close = Some(hook_fn(hook)));
    }

    /// What runs when the phone reopens a closed pane. A closure's form of
    /// [`Hooks::on_reopen`].
    pub fn on_reopen<F, Fut>(&self, hook: F)
    where
        F: Fn(ReopenRequest) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = HandlerResult<Reopen>> + Send + 'static,
    {
        self.update_hooks(|slots| slots.reopen = Some(hook_fn(hook)));
    }

    /// What runs when the phone presses a starter declared with
    /// [`Collie::starter`]. A closure's form of [`Hooks::on_starter`].
    pub fn on_starter<F, Fut>(&self, hook: F)
    where
        F: Fn(StarterRequest) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = HandlerResult<Started>> + Send + 'static,
    {
        self.update_hooks(|slots| slots.starter = Some(hook_fn(hook)));
    }

    fn update_hooks(&self, change: impl FnOnce(&mut HookSlots)) {
        let mut st = self.lock();
        let links = st.links();
        let mut slots = links.hooks.as_deref().cloned().unwrap_or_default();
        change(&mut slots);
        if let Some(old) = links.hooks.replace(Arc::new(slots)) {
            links.release(old);
        }
        st.note_hooks();
    }

    /// Whether asks may offer allow-always options (`always: true`): the
    /// options' [`allow_always`](crate::CoreOptionsBuilder::allow_always)
    /// until a transport turns it off — an HTTPS transport does, unless its
    /// options keep it (contract §1.2). Read it before raising a card that
    /// offers "Allow always".
    pub fn allow_always(&self) -> bool {
        self.lock().machine().allow_always()
    }

    /// Sets what runs when the phone sends text to a pane that has no chat
    /// handler of its own ([`Pane::on_send`](crate::Pane::on_send)).
    pub fn on_send(&self, handler: impl ChatHandler) {
        let mut st = self.lock();
        let links = st.links();
        if let Some(old) = links.wide.chat.replace(Arc::new(handler)) {
            links.release(old);
        }
        st.note_chat_handler();
    }

    /// Sets what runs when the phone presses an action button on a pane
    /// that has no action handler of its own ([`Pane::on_action`](crate::Pane::on_action)).
    pub fn on_action(&self, handler: impl ActionHandler) {
        let mut st = self.lock();
        let links = st.links();
        if let Some(old) = links.wide.actions.replace(Arc::new(handler)) {
            links.release(old);
        }
        st.note_action_handler();
    }

    pub(crate) fn hooks(&self) -> Option<Arc<dyn DynHooks>> {
        let slots = self.lock().links_ref().hooks.clone();
        slots.map(|s| s as Arc<dyn DynHooks>)
    }

    /// Makes a turn the pane's current one: its stop signal and steer inbox.
    /// Returns the turn's token.
    pub(crate) fn install_turn(
        &self,
        pane: &durable_types::Id,
        controller: AbortController,
        inbox: tokio::sync::mpsc::UnboundedSender<String>,
    ) -> Result<u64, durable_types::RuleError> {
        let mut st = self.lock();
        let stop = st.links().add_stop(controller);
        let turn = st.links().add_turn(inbox);
        if st.install_turn(pane, stop, turn) {
            return Ok(turn);
        }
        st.links().forget_stop(stop);
        st.links().forget_turn(turn);
        Err(durable_core::layout::closed_pane(pane))
    }

    /// Forgets the pane's current turn if it is this one; says whether it was.
    pub(crate) fn uninstall_turn(&self, pane: &durable_types::Id, token: u64) -> bool {
        let mut st = self.lock();
        st.links().forget_turn(token);
        st.uninstall_turn(pane, token)
    }

    /// The state, shared with other readers.
    fn read_lock(&self) -> ReadGuard<'_> {
        ReadGuard { guard: Some(self.shared.state.read().unwrap_or_else(|e| e.into_inner())), core: self }
    }

    pub(crate) fn lock(&self) -> StateGuard<'_> {
        StateGuard { guard: Some(self.shared.state.write().unwrap_or_else(|e| e.into_inner())), core: self }
    }

    pub(crate) fn driver_state(&self) -> MutexGuard<'_, DriverState> {
        self.shared.driver.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues a job and wakes the driver (once no state lock is held: the
    /// driver's wake-up may call back into the core).
    pub(crate) fn push_job(&self, job: impl Future<Output = ()> + Send + 'static) {
        self.driver_state().jobs.push_back(Box::pin(job));
        self.wake_soon();
    }

    /// Stores the receipt of an answer the machine applied from a hold (a
    /// job: the store is async); a receipt the store refuses stays in memory.
    fn put_held_receipt(&self, request_id: durable_types::Id, receipt: crate::Receipt, group: String) {
        let core = self.inner();
        self.push_job(async move {
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

    /// Asks for a wake-up, made when the state lock is next released (at
    /// once if nobody holds it). The flag is set first, so either this call
    /// takes the lock and wakes, or the holder wakes when it lets go.
    fn wake_soon(&self) {
        self.shared.wake_pending.store(true, Ordering::SeqCst);
        // Ordered before the lock's check, which is not SeqCst itself: with
        // the fence in `wake_if_pending`, either this sees the lock free or
        // the holder, once it let go, sees the flag.
        std::sync::atomic::fence(Ordering::SeqCst);
        if let Ok(guard) = self.shared.state.try_write() {
            drop(StateGuard { guard: Some(guard), core: self });
        }
    }

    fn wake_if_pending(&self) {
        std::sync::atomic::fence(Ordering::SeqCst);
        if self.shared.wake_pending.swap(false, Ordering::SeqCst) {
            let wakeups = self.driver_state().wakeups.clone();
            for w in wakeups {
                w();
            }
        }
    }
}

/// The state, shared with other readers (a poll answered through
/// `&self`). Releasing it makes any wake-up asked for meanwhile — also
/// when a panic unwinds it: `wake_soon` cannot take the lock while a
/// reader holds it, and leaves the wake-up to the holder.
struct ReadGuard<'a> {
    guard: Option<RwLockReadGuard<'a, Locked>>,
    core: &'a Collie,
}

impl ReadGuard<'_> {
    fn locked(&self) -> &Locked {
        self.guard.as_deref().unwrap_or_else(|| unreachable!("the guard is held until drop"))
    }
}

impl Drop for ReadGuard<'_> {
    fn drop(&mut self) {
        drop(self.guard.take());
        self.core.wake_if_pending();
    }
}

/// The state, locked. Releasing it applies what the state asked of the
/// program's side (still under the lock, so in order), then makes any
/// wake-up asked for meanwhile, after the lock is gone.
pub(crate) struct StateGuard<'a> {
    guard: Option<RwLockWriteGuard<'a, Locked>>,
    core: &'a Collie,
}

impl StateGuard<'_> {
    /// The protocol machine.
    pub(crate) fn machine(&self) -> &Machine {
        &self.locked_ref().machine
    }

    pub(crate) fn machine_mut(&mut self) -> &mut Machine {
        &mut self.locked().machine
    }

    fn locked_ref(&self) -> &Locked {
        self.guard.as_deref().unwrap_or_else(|| unreachable!("the guard is held until drop"))
    }

    fn locked(&mut self) -> &mut Locked {
        self.guard.as_deref_mut().unwrap_or_else(|| unreachable!("the guard is held until drop"))
    }

    /// The program's side of what the state names by number.
    pub(crate) fn links(&mut self) -> &mut crate::links::Links {
        &mut self.locked().links
    }

    /// The program's side, read.
    pub(crate) fn links_ref(&self) -> &crate::links::Links {
        &self.locked_ref().links
    }
}

impl Deref for StateGuard<'_> {
    type Target = State;
    fn deref(&self) -> &State {
        &self.machine().state
    }
}

impl DerefMut for StateGuard<'_> {
    fn deref_mut(&mut self) -> &mut State {
        &mut self.locked().machine.state
    }
}

impl Drop for StateGuard<'_> {
    fn drop(&mut self) {
        let mut warnings = Vec::new();
        let mut released = Vec::new();
        if let Some(Locked { machine, links }) = self.guard.as_deref_mut() {
            // A poll asks for nothing: it pays two length checks here.
            for effect in machine.state.drain_effects() {
                match effect {
                    Effect::Warn(line) => warnings.push(line),
                    Effect::WakeDriver => self.core.shared.wake_pending.store(true, Ordering::SeqCst),
                    Effect::DrainAsks => self.core.drain_asks(),
                    Effect::DrainConversations => self.core.drain_conversations(),
                    Effect::DeliverQueued(pane) => {
                        let core = self.core.clone();
                        self.core.push_job(async move { core.deliver_queued(&pane) });
                    }
                    Effect::OfferKeptTitle { pane, title, instead_of, restore } => {
                        self.core.offer_kept_title(pane, title, instead_of, restore)
                    }
                    Effect::PutHeldReceipt { request_id, receipt, group } => {
                        self.core.put_held_receipt(request_id, receipt, group)
                    }
                    link => links.apply(link),
                }
            }
            if links.has_released() {
                released = links.take_released();
            }
        }
        drop(self.guard.take());
        drop(released);
        // The program's sink runs with no lock held: it may call the core.
        for line in warnings {
            self.core.warn(&line);
        }
        self.core.wake_if_pending();
    }
}
