//! [`Collie`], the one handle an agent holds, and the two ways to get it:
//! [`open_collie`] (served at once) and [`create_core`] (served later, with
//! what only it takes: a receipt store, `allow_always`).

use std::fmt;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use durable_runtime::{
    ActionHandler, CallerCheckMode, ChatHandler, CloseRequest, Core, CoreOptions, CoreOptionsBuilder,
    HandlerResult, HistoryProvider, Hooks, KeptAsk, Pane, RenameRequest, Reopen, ReopenRequest, Started,
    StarterRequest, Workspace,
};
use durable_types::{Caps, Item, RuleError, Timestamp};

use crate::error::Error;
use crate::serving::{Limits, Served, Transport};
use crate::warn::default_warn;

/// What [`open_collie`] takes: the agent's name, where to serve it, and
/// the core's everyday options. A receipt store and `allow_always` are
/// [`create_core`]'s alone. A name alone is options too:
/// `open_collie("hello")`.
pub struct OpenOptions {
    host_name: String,
    transport: Option<Transport>,
    /// The core's options as given: `open_collie` builds the core from them.
    core: CoreOptionsBuilder,
}

impl fmt::Debug for OpenOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenOptions")
            .field("host_name", &self.host_name)
            .field("transport", &self.transport)
            .finish_non_exhaustive()
    }
}

impl OpenOptions {
    /// The options of an agent named `host_name` (its name on the phone,
    /// `host` in `GET /hello`, and the default socket's folder).
    pub fn new(host_name: impl Into<String>) -> Self {
        let host_name = host_name.into();
        OpenOptions { core: CoreOptions::builder().host_name(host_name.clone()), host_name, transport: None }
    }

    /// Where to serve (default [`Transport::socket`] on Linux and macOS;
    /// required elsewhere, where only HTTPS exists).
    pub fn transport(mut self, transport: Transport) -> Self {
        self.transport = Some(transport);
        self
    }

    /// The complete list of capabilities (default: what the agent's
    /// handlers can do, plus `history` once a provider is set).
    pub fn caps(mut self, caps: Caps) -> Self {
        self.core = self.core.caps(caps);
        self
    }

    /// Raw events each pane keeps (default 500).
    pub fn tail_limit(mut self, n: usize) -> Self {
        self.core = self.core.tail_limit(n);
        self
    }

    /// How long an answer to an unknown ask is held, in ms (default 10 min).
    pub fn hold_ms(mut self, ms: u64) -> Self {
        self.core = self.core.hold_ms(ms);
        self
    }

    /// Where warn lines go (default: a `tracing` warning, target
    /// `durable_sdk::warn`, when the program's subscriber records it, else
    /// one line on standard error).
    pub fn warn(mut self, sink: impl Fn(&str) + Send + Sync + 'static) -> Self {
        self.core = self.core.warn(sink);
        self
    }
}

impl From<&str> for OpenOptions {
    fn from(host_name: &str) -> Self {
        OpenOptions::new(host_name)
    }
}

impl From<String> for OpenOptions {
    fn from(host_name: String) -> Self {
        OpenOptions::new(host_name)
    }
}

/// Opens the agent: builds its core and serves it on the transport of the
/// options (the private socket unless told otherwise). Must be awaited
/// inside a tokio runtime.
///
/// ```no_run
/// use durable_sdk::{OpenOptions, Transport, open_collie};
///
/// # #[cfg(feature = "tls")]
/// # async fn run() -> Result<(), durable_sdk::Error> {
/// let collie = open_collie("hello").await?; // the private socket
/// # collie.close().await;
/// // HTTPS (feature `tls`), the token from COLLIE_TOKEN:
/// let options = OpenOptions::new("hello").transport(Transport::https("0.0.0.0:8443").self_signed());
/// let collie = open_collie(options).await?;
/// # collie.close().await;
/// # Ok(()) }
/// ```
pub async fn open_collie(options: impl Into<OpenOptions>) -> Result<Collie, Error> {
    let o = options.into();
    let collie = create_core(o.core)?;
    let transport = match o.transport {
        Some(t) => t,
        #[cfg(all(feature = "socket", unix))]
        None => Transport::socket(),
        #[cfg(not(all(feature = "socket", unix)))]
        None => return Err(Error::NoTransport),
    };
    collie.serve(transport).await?;
    Ok(collie)
}

/// The seed's `createCore`: the agent's handle, not served yet — for a
/// core with what [`open_collie`] does not take (a persistent receipt
/// store, `allow_always(false)`); then [`Collie::serve`] it. What a running
/// program needs and the options leave unset is filled in: the system
/// clock, a fresh random epoch, warn lines to `tracing` when the program's
/// subscriber records them, else on standard error.
///
/// ```no_run
/// use durable_sdk::stores::MemoryReceiptStore;
/// use durable_sdk::{CoreOptions, Transport, create_core};
///
/// # async fn run() -> Result<(), durable_sdk::Error> {
/// let collie = create_core(CoreOptions::builder().host_name("desk").receipts(MemoryReceiptStore::new()))?;
/// // … the layout and handlers …
/// collie.serve(Transport::socket()).await?;
/// collie.ready();
/// # Ok(()) }
/// ```
pub fn create_core(options: CoreOptionsBuilder) -> Result<Collie, Error> {
    let options = options.or_system(durable_http::SystemClock, durable_http::random_epoch, default_warn());
    Ok(Collie::from_core(durable_runtime::create_core(options.build()?)))
}

/// A durable agent: the layout the phone shows, its handlers, and the
/// transports it is served on. The seed's `collie`. Cheap to clone: clones
/// share one agent.
///
/// The layout goes [`workspace`](Self::workspace) →
/// [`tab`](Workspace::tab) → [`pane`](crate::Tab::pane); a pane takes its
/// chat and buttons ([`Pane::on_send`], [`Pane::on_action`]) and raises
/// asks ([`Pane::ask`], [`require_approval`](crate::require_approval)).
/// Call [`ready`](Self::ready) once the layout is set.
#[derive(Clone)]
pub struct Collie {
    core: Core,
    served: Arc<Mutex<Vec<Served>>>,
    /// The longest shutdown grace of the transports served: how long
    /// [`close`](Self::close) lets running turns go on.
    grace: Arc<Mutex<Duration>>,
}

impl fmt::Debug for Collie {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Collie")
            .field("host_name", &self.core.options().host_name())
            .field("addresses", &self.addresses())
            .finish_non_exhaustive()
    }
}

impl Collie {
    /// The handle of a core built by hand ([`driver::Core::new`](crate::driver::Core::new)),
    /// for a test or a custom transport; [`create_core`] is the usual way.
    pub fn from_core(core: Core) -> Self {
        Collie {
            core,
            served: Arc::new(Mutex::new(Vec::new())),
            grace: Arc::new(Mutex::new(Limits::DEFAULT_SHUTDOWN_GRACE)),
        }
    }

    fn served(&self) -> std::sync::MutexGuard<'_, Vec<Served>> {
        self.served.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Serves the agent on a transport (call again to serve it on another
    /// too: the socket and HTTPS at once). Over HTTPS this turns
    /// allow-always off unless the transport keeps it. Must be awaited
    /// inside a tokio runtime.
    pub async fn serve(&self, transport: Transport) -> Result<(), Error> {
        let grace = transport.shutdown_grace();
        let served = transport.serve(&self.core, self.core.options().host_name()).await?;
        {
            let mut longest = self.grace.lock().unwrap_or_else(PoisonError::into_inner);
            if self.served().is_empty() || grace > *longest {
                *longest = grace;
            }
        }
        self.served().push(served);
        Ok(())
    }

    /// What Collie attaches to: the socket path, or `https://host:port`
    /// (`http://` for loopback plain HTTP) — of the first transport served;
    /// empty before [`serve`](Self::serve).
    pub fn address(&self) -> String {
        self.served().first().map(Served::address).unwrap_or_default()
    }

    /// Every served transport's address, in the order served.
    pub fn addresses(&self) -> Vec<String> {
        self.served().iter().map(Served::address).collect()
    }

    /// The SHA-256 fingerprint of the self-signed certificate, when a
    /// transport serves one, for Collie to pin.
    pub fn fingerprint(&self) -> Option<String> {
        self.served().iter().find_map(Served::fingerprint)
    }

    /// Who may answer on the first transport: the socket's caller check, or
    /// `token` over HTTPS (`None` before [`serve`](Self::serve)).
    pub fn caller_check(&self) -> Option<CallerCheckMode> {
        self.served().first().map(Served::caller_check)
    }

    /// Stops gracefully. First no new turn starts (a send is `409 busy`,
    /// unstored, for the phone to send again once the agent is back; sends
    /// already queued stay queued for the next start) and the turns running
    /// get the shutdown grace (the transports' [`Limits`](crate::Limits),
    /// 10 s by default) to end as they would; the transports go on serving
    /// meanwhile, so their replies still reach the phone. Then serving
    /// stops: no new connection, requests in flight finish within the
    /// grace, a socket file is removed. A turn still running past the grace
    /// is cut, and a store that keeps sends closes it with a notice at the
    /// next start. Open asks stay open: a shutdown is not an answer. What
    /// the panes showed is in a store that keeps conversations before
    /// serving stops (within a grace of its own).
    pub async fn close(&self) {
        self.core.begin_stop();
        let grace = *self.grace.lock().unwrap_or_else(PoisonError::into_inner);
        let _ = tokio::time::timeout(grace, self.core.turns_done()).await;
        // The store's job runs on the transports' driver: before they stop.
        let _ = tokio::time::timeout(grace, self.core.conversations_kept()).await;
        let served = std::mem::take(&mut *self.served());
        for s in served {
            s.close().await;
        }
    }

    /// The workspace with this id, created with `title` if it does not exist.
    pub fn workspace(&self, id: &str, title: &str) -> Result<Workspace, RuleError> {
        self.core.workspace(id, title)
    }

    /// The open pane with this id, wherever it is.
    pub fn pane(&self, id: &str) -> Option<Pane> {
        self.core.pane(id)
    }

    /// Marks the agent ready: Collie shows "starting" until then. The first
    /// call also takes up the sends a restart left, and closes the asks the
    /// last run left open that [`kept_asks`](Self::kept_asks) handed out and
    /// nobody claimed, so call it once the panes and their handlers are set.
    pub fn ready(&self) {
        self.core.ready();
    }

    /// Waits until a store that keeps conversations has what every pane
    /// showed so far, and the panes declared so far have their kept items
    /// back (immediate with a store that keeps none). No write waits for
    /// this; [`close`](Self::close) does.
    pub async fn conversations_kept(&self) {
        self.core.conversations_kept().await
    }

    /// Whether the receipt store keeps conversations (`SqliteReceiptStore`
    /// and the in-memory default do): then each pane declared gets back the
    /// items kept under its id, and the program need not show them again.
    pub fn keeps_conversations(&self) -> bool {
        self.core.keeps_conversations()
    }

    /// Deletes the conversation kept under `pane` (a pane id) from a store
    /// that keeps conversations: a pane declared under that id later
    /// starts empty. An open pane of that id keeps what it shows.
    pub fn forget_conversation(&self, pane: &str) {
        self.core.forget_conversation(pane)
    }

    /// Whether the receipt store keeps conversations where they outlive
    /// the process (`SqliteReceiptStore`, `PgReceiptStore`; not the
    /// in-memory default): then the program need keep no copy of its
    /// panes' items.
    pub fn keeps_conversations_across_restarts(&self) -> bool {
        self.core.keeps_conversations_across_restarts()
    }

    /// Keeps `items`, oldest first, under `title` as the conversation of
    /// the pane `pane`, one this run has not declared: for a program that
    /// kept its chats itself and moves them onto the receipt store. History
    /// reads it, and a pane declared later under that id shows it. It is
    /// kept in the background: [`conversations_kept`](Self::conversations_kept)
    /// waits for it, [`kept_conversation`](Self::kept_conversation) reads
    /// what the store has — check there before deleting your own copy.
    ///
    /// `Ok(false)`: the store keeps no conversations. A bad pane id, a
    /// title empty once cleaned, an item that breaks the item rules, or a
    /// pane this run shows or lists as closed is an `Err` naming the rule.
    pub fn import_conversation(&self, pane: &str, title: &str, items: Vec<Item>) -> Result<bool, RuleError> {
        self.core.import_conversation(pane, title, items)
    }

    /// What the receipt store keeps of the conversation of the pane `pane`
    /// now (`None`: nothing, or a store that keeps no conversations).
    pub async fn kept_conversation(
        &self,
        pane: &str,
    ) -> Result<Option<crate::stores::KeptConversation>, crate::stores::StoreError> {
        self.core.kept_conversation(pane).await
    }

    /// A page of history's rows as the SDK lists them with no provider
    /// (the conversations the receipt store keeps, newest first: the wire,
    /// §10), for a provider that adds something of its own — a subtitle —
    /// and leaves each conversation to the SDK (`items` answering `None`).
    /// Pass the phone's `after` and `limit` through.
    pub async fn kept_history_rows(
        &self,
        after: Option<crate::types::Cursor>,
        limit: usize,
    ) -> Result<crate::history::RowsPage, crate::history::HistoryError> {
        self.core.kept_history_rows(after, limit).await
    }

    /// The asks (cards) open when the agent last stopped, kept by a receipt
    /// store that keeps asks (`SqliteReceiptStore`, `PgReceiptStore`; the
    /// default store, in memory, keeps nothing). Call it before
    /// [`ready`](Self::ready), once the panes are set, and claim each
    /// [`KeptAsk`](crate::asks::KeptAsk): raise it again by its id (an
    /// answer the phone sent meanwhile then lands), now or later, or close
    /// it. Those left unclaimed are closed at `ready()`, each with the chat
    /// line `Stopped before an answer: <title>` ([`wire`](crate::wire) §7.2).
    ///
    /// ```no_run
    /// # async fn f(collie: durable_sdk::Collie) -> Result<(), durable_sdk::Error> {
    /// for kept in collie.kept_asks().await? {
    ///     // The value given with `ApprovalOptions::agent_data` finds the work again.
    ///     let order = kept.agent_data().and_then(|d| d["order"].as_str()).map(str::to_owned);
    ///     match order {
    ///         // An `Err` (its pane is gone) leaves it to `ready()`, which closes it.
    ///         Some(order) => match kept.raise_approval() {
    ///             Ok(approval) => {
    ///                 tokio::spawn(async move {
    ///                     if approval.await.approved {
    ///                         println!("refund of order {order} issued");
    ///                     }
    ///                 });
    ///             }
    ///             Err(e) => collie.warn(&format!("a kept card was not raised again: {e}")),
    ///         },
    ///         None => kept.close(),
    ///     }
    /// }
    /// collie.ready();
    /// # Ok(()) }
    /// ```
    pub async fn kept_asks(&self) -> Result<Vec<KeptAsk>, Error> {
        Ok(self.core.kept_asks().await?)
    }

    /// Serves history from the agent's own store; turns the `history` cap
    /// on when caps were omitted.
    pub fn history(&self, provider: impl HistoryProvider) {
        self.core.history(provider);
    }

    /// What runs when the phone sends text to a pane without a chat handler
    /// of its own: a [`ChatHandler`](crate::handlers::ChatHandler), or a
    /// closure `|turn: Turn| async move { … }`.
    pub fn on_send(&self, handler: impl ChatHandler) {
        self.core.on_send(handler);
    }

    /// What runs when the phone presses a button on a pane without an
    /// action handler of its own: an
    /// [`ActionHandler`](crate::handlers::ActionHandler), or a closure
    /// `|req: ActionRequest| async move { … Ok(()) }`.
    pub fn on_action(&self, handler: impl ActionHandler) {
        self.core.on_action(handler);
    }

    /// Adds a starter button (the phone's "new" menu); what it does is
    /// [`on_starter`](Self::on_starter)'s.
    pub fn starter(&self, id: &str, label: &str) -> Result<(), RuleError> {
        self.core.starter(id, label)
    }

    /// Removes a starter button.
    pub fn remove_starter(&self, id: &str) {
        self.core.remove_starter(id);
    }

    /// Sets the agent-wide hooks of the phone's layout writes at once, as a
    /// [`Hooks`](crate::handlers::Hooks) value (replacing earlier ones).
    /// Setting any hook turns on the `rename`, `close` and `reopen` caps
    /// when caps were omitted.
    pub fn set_hooks(&self, hooks: impl Hooks) {
        self.core.set_hooks(hooks);
    }

    /// What runs when the phone renames a workspace, tab or pane: `Ok` and
    /// the SDK sets the title.
    pub fn on_rename<F, Fut>(&self, hook: F)
    where
        F: Fn(RenameRequest) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = HandlerResult> + Send + 'static,
    {
        self.core.on_rename(hook);
    }

    /// What runs when the phone closes a workspace, tab or pane: `Ok` and
    /// the SDK closes it (its open asks close as aborted).
    pub fn on_close<F, Fut>(&self, hook: F)
    where
        F: Fn(CloseRequest) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = HandlerResult> + Send + 'static,
    {
        self.core.on_close(hook);
    }

    /// What runs when the phone reopens a closed pane.
    pub fn on_reopen<F, Fut>(&self, hook: F)
    where
        F: Fn(ReopenRequest) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = HandlerResult<Reopen>> + Send + 'static,
    {
        self.core.on_reopen(hook);
    }

    /// What runs when the phone presses a starter: open a pane and say
    /// which ([`Started`](crate::handlers::Started)).
    pub fn on_starter<F, Fut>(&self, hook: F)
    where
        F: Fn(StarterRequest) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = HandlerResult<Started>> + Send + 'static,
    {
        self.core.on_starter(hook);
    }

    /// The capabilities in force.
    pub fn caps(&self) -> Caps {
        self.core.caps()
    }

    /// Whether asks may offer "Allow always" now (off once served over
    /// HTTPS, unless the transport keeps it).
    pub fn allow_always(&self) -> bool {
        self.core.allow_always()
    }

    /// The current time, from the agent's clock (an ask's expiry is
    /// counted from it).
    pub fn now(&self) -> Timestamp {
        self.core.now()
    }

    /// Writes one line through the warn sink.
    pub fn warn(&self, line: &str) {
        self.core.warn(line);
    }

    /// The core underneath, with the driver's calls (requests, deadlines,
    /// jobs): for tests and custom transports.
    pub fn core(&self) -> &Core {
        &self.core
    }
}
