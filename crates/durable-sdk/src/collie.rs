//! The two ways to get [`Collie`], the one handle an agent holds:
//! [`open_collie`] (served at once) and [`create_core`] (served later, with
//! what only it takes: a receipt store, `allow_always`).

use std::fmt;

use durable_runtime::{Collie, CoreOptions, CoreOptionsBuilder};
use durable_types::Caps;

use crate::error::Error;
use crate::serving::Transport;
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
    Ok(durable_runtime::create_core(options.build()?))
}
