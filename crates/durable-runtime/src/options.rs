//! Building a core: [`CoreOptions`].

use std::fmt;
use std::sync::Arc;

use durable_types::{Caps, HOLD_MS, RuleError, TAIL_LIMIT};

use crate::clock::{Clock, WarnSink};
use crate::receipts::{DynReceiptStore, MemoryReceiptStore, ReceiptStore};

/// The bytes of held answers (§7.1) kept at once, at most, unless
/// [`CoreOptionsBuilder::held_answer_bytes`] says otherwise: 64 MiB. Past
/// it the oldest held answers go first, as past the 1,000 held answers.
/// (1,000 answers of up to 1 MiB each could otherwise keep about 1 GB.)
pub const HELD_ANSWER_BYTES: usize = 64 * 1024 * 1024;

/// Everything a core is built from. Built with [`CoreOptions::builder`].
#[derive(Clone)]
pub struct CoreOptions {
    pub(crate) host_name: String,
    pub(crate) runtime: String,
    pub(crate) caps: Option<Caps>,
    pub(crate) allow_always: bool,
    pub(crate) tail_limit: usize,
    pub(crate) hold_ms: u64,
    pub(crate) held_answer_bytes: usize,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) epoch: String,
    pub(crate) warn: WarnSink,
    pub(crate) receipts: Arc<dyn DynReceiptStore>,
    /// The store is the SDK's memory store, which keeps nothing past the
    /// process by design (no warning that it keeps no asks).
    pub(crate) receipts_in_memory: bool,
}

impl CoreOptions {
    /// A builder. A clock and an epoch are required: the core reads neither
    /// the system clock nor a random source (the servers provide both).
    pub fn builder() -> CoreOptionsBuilder {
        CoreOptionsBuilder::default()
    }

    /// The agent's name in `GET /hello`.
    pub fn host_name(&self) -> &str {
        &self.host_name
    }

    /// Whether the options let asks carry allow-always options (a
    /// transport may still turn it off: [`Collie::allow_always`](crate::Collie::allow_always)).
    pub fn allow_always(&self) -> bool {
        self.allow_always
    }

    /// The epoch: 16 lowercase hex characters chosen at each start.
    pub fn epoch(&self) -> &str {
        &self.epoch
    }
}

impl fmt::Debug for CoreOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CoreOptions")
            .field("host_name", &self.host_name)
            .field("runtime", &self.runtime)
            .field("caps", &self.caps)
            .field("allow_always", &self.allow_always)
            .field("tail_limit", &self.tail_limit)
            .field("hold_ms", &self.hold_ms)
            .field("held_answer_bytes", &self.held_answer_bytes)
            .field("epoch", &self.epoch)
            .finish_non_exhaustive()
    }
}

/// Builds [`CoreOptions`].
#[derive(Default)]
pub struct CoreOptionsBuilder {
    host_name: Option<String>,
    runtime: Option<String>,
    caps: Option<Caps>,
    allow_always: Option<bool>,
    tail_limit: Option<usize>,
    hold_ms: Option<u64>,
    held_answer_bytes: Option<usize>,
    clock: Option<Arc<dyn Clock>>,
    epoch: Option<String>,
    warn: Option<WarnSink>,
    receipts: Option<Arc<dyn DynReceiptStore>>,
    receipts_in_memory: bool,
}

impl fmt::Debug for CoreOptionsBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CoreOptionsBuilder").finish_non_exhaustive()
    }
}

impl CoreOptionsBuilder {
    /// The agent's name in `GET /hello` (`host`). Default `durable`.
    pub fn host_name(mut self, name: impl Into<String>) -> Self {
        self.host_name = Some(name.into());
        self
    }

    /// The runtime in `GET /hello`. Default `rust`.
    pub fn runtime(mut self, runtime: impl Into<String>) -> Self {
        self.runtime = Some(runtime.into());
        self
    }

    /// The complete list of capabilities. Omitted: everything the SDK can
    /// do, plus `history` once a history provider is set.
    pub fn caps(mut self, caps: Caps) -> Self {
        self.caps = Some(caps);
        self
    }

    /// Whether asks may carry allow-always options. Default true; serving
    /// over HTTPS turns it off unless the transport's options keep it
    /// ([`Collie::allow_always`](crate::Collie::allow_always) says what is in
    /// force).
    pub fn allow_always(mut self, allow: bool) -> Self {
        self.allow_always = Some(allow);
        self
    }

    /// Raw events each pane keeps for event reads. Default 500.
    pub fn tail_limit(mut self, n: usize) -> Self {
        self.tail_limit = Some(n);
        self
    }

    /// How long an answer to an unknown ask is held, in ms. Default 10 min.
    pub fn hold_ms(mut self, ms: u64) -> Self {
        self.hold_ms = Some(ms);
        self
    }

    /// The bytes of held answers (§7.1) kept at once, at most. Default
    /// [`HELD_ANSWER_BYTES`](HELD_ANSWER_BYTES), 64 MiB. Past it the
    /// oldest held answers go, as past the 1,000 held answers: their request
    /// ids are free again. The newest answer is always held, so a bound
    /// under one answer's size keeps one.
    pub fn held_answer_bytes(mut self, bytes: usize) -> Self {
        self.held_answer_bytes = Some(bytes);
        self
    }

    /// The clock (required).
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.clock = Some(Arc::new(clock));
        self
    }

    /// The clock, shared (required unless [`clock`](Self::clock) is given).
    pub fn clock_arc(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = Some(clock);
        self
    }

    /// The epoch: 16 lowercase hex characters chosen at random at each start
    /// (required).
    pub fn epoch(mut self, epoch: impl Into<String>) -> Self {
        self.epoch = Some(epoch.into());
        self
    }

    /// Where warn lines go. Default: nowhere (the servers install standard
    /// error).
    pub fn warn(mut self, sink: impl Fn(&str) + Send + Sync + 'static) -> Self {
        self.warn = Some(Arc::new(sink));
        self
    }

    /// Where receipts are kept. Default: a [`MemoryReceiptStore`] (gone
    /// with the process). Give a persistent store so that a replay after a
    /// restart still returns the first answer. To keep a handle on the
    /// store, pass an `Arc` of it (an `Arc` of a store is a store).
    pub fn receipts<S: ReceiptStore>(mut self, store: S) -> Self {
        use std::any::TypeId;
        let memory = [TypeId::of::<MemoryReceiptStore>(), TypeId::of::<Arc<MemoryReceiptStore>>()];
        self.receipts_in_memory = memory.contains(&TypeId::of::<S>());
        self.receipts = Some(Arc::new(store));
        self
    }

    /// Fills what the program left unset with what a server takes from the
    /// system: a clock, a fresh epoch, a warn sink. What was set stays.
    /// (The facade's `create_core` and `open_collie` call this, so that
    /// the common case is one builder call.)
    pub fn or_system(
        mut self,
        clock: impl Clock,
        epoch: impl FnOnce() -> String,
        warn: impl Fn(&str) + Send + Sync + 'static,
    ) -> Self {
        if self.clock.is_none() {
            self.clock = Some(Arc::new(clock));
        }
        if self.epoch.is_none() {
            self.epoch = Some(epoch());
        }
        if self.warn.is_none() {
            self.warn = Some(Arc::new(warn));
        }
        self
    }

    /// Checks and builds the options.
    pub fn build(self) -> Result<CoreOptions, RuleError> {
        let clock = self.clock.ok_or_else(|| {
            RuleError::invalid(
                "clock",
                "core options: a clock is required (the core reads no clock of its own)",
            )
        })?;
        let epoch = self.epoch.ok_or_else(|| {
            RuleError::invalid(
                "epoch",
                "core options: an epoch is required (16 random lowercase hex characters)",
            )
        })?;
        if epoch.len() != 16 || !epoch.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
            return Err(RuleError::invalid(
                "epoch",
                "core options: the epoch is 16 lowercase hex characters",
            ));
        }
        let tail_limit = self.tail_limit.unwrap_or(TAIL_LIMIT);
        if tail_limit == 0 {
            return Err(RuleError::out_of_range("tail_limit", "core options: tail_limit is at least 1"));
        }
        Ok(CoreOptions {
            host_name: self.host_name.unwrap_or_else(|| "durable".to_owned()),
            runtime: self.runtime.unwrap_or_else(|| "rust".to_owned()),
            caps: self.caps,
            allow_always: self.allow_always.unwrap_or(true),
            tail_limit,
            hold_ms: self.hold_ms.unwrap_or(HOLD_MS),
            held_answer_bytes: self.held_answer_bytes.unwrap_or(HELD_ANSWER_BYTES),
            clock,
            epoch,
            warn: self.warn.unwrap_or_else(|| Arc::new(|_: &str| {})),
            receipts_in_memory: self.receipts_in_memory || self.receipts.is_none(),
            receipts: self.receipts.unwrap_or_else(|| Arc::new(MemoryReceiptStore::new())),
        })
    }
}
