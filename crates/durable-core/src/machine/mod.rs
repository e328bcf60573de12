//! The protocol machine: the state, what the transports set (the caller
//! check, whether asks may offer allow-always) and where the agent stands
//! (ready once, stopping), changed only through
//! `&mut self`, with what it needs done outside handed out as
//! [`Effect`]s, in order.
//!
//! Today the machine answers the reads (`GET /hello`, the state poll, a
//! pane's events) and the capability gate, and keeps the rules of the
//! layout (`layout.rs`) and of asks and answers (`asks.rs`); the writes,
//! receipts and the kept asks' journal still run in durable-runtime around it
//! (issue #41's plan, `docs/design/core-machine.md`, moves them in step by
//! step).

use std::sync::Arc;

use durable_types::{Cap, Caps, Timestamp};

use crate::data::caller_check::CallerCheckMode;
use crate::state::{Effect, State};
use crate::timers::Timer;

/// What the machine is built with and never changes.
#[derive(Debug, Clone)]
pub struct MachineConfig {
    /// `GET /hello`'s `host`.
    pub host_name: String,
    /// `GET /hello`'s `runtime`.
    pub runtime: String,
    /// The capabilities declared, or `None` to say what was registered.
    pub caps: Option<Caps>,
    /// This run's epoch.
    pub epoch: String,
    /// Raw events each pane keeps.
    pub tail_limit: usize,
    /// Whether asks may offer allow-always options until a transport says not.
    pub allow_always: bool,
    /// Whether the receipt store keeps open asks (§7.2): each raise and
    /// close is then journalled.
    pub keeps_asks: bool,
    /// Whether the receipt store keeps conversations: what each pane shows
    /// is then journalled, and a pane is restored as it is first declared.
    pub keeps_conversations: bool,
    /// Whether the store keeps them across processes (its sends journal
    /// outlives the process too): a pane's item is then shown to readers
    /// only once the store has it (docs/wire.md §9.2).
    pub shows_items_once_kept: bool,
    /// How long an answer to an ask not raised yet is held (§7.1).
    pub hold_ms: u64,
    /// The bytes all held answers may keep.
    pub held_answer_bytes: usize,
}

/// The protocol's state and rules, owned by one caller at a time.
#[derive(Clone, Debug)]
pub struct Machine {
    pub state: State,
    pub config: Arc<MachineConfig>,
    allow_always: bool,
    caller_check: CallerCheckMode,
    /// A graceful stop began: no new turn starts.
    stopping: bool,
    /// `ready()` was called once: the sends the last run left were taken up.
    readied: bool,
}

// The machine is plain data: it can cross threads, and a search over its
// schedules clones it (tests/exactly_once_machine.rs).
const _: fn() = || {
    fn plain_data<T: Send + Sync + Clone>() {}
    plain_data::<Machine>();
};

impl Machine {
    pub fn new(config: MachineConfig) -> Machine {
        let mut state = State::new(config.tail_limit);
        if config.keeps_asks {
            state.show_asks_once_kept();
        }
        if config.keeps_conversations {
            state.keep_conversations();
            // History by default: the store serves the conversations
            // (docs/wire.md §10), and each pane's session id names its own
            // — unless the program declared caps without history, where a
            // session id would name what the phone cannot read.
            if config.caps.is_none_or(|c| c.has(Cap::History)) {
                state.enable_history();
            }
            if config.shows_items_once_kept {
                state.show_items_once_kept();
            }
        }
        Machine {
            state,
            allow_always: config.allow_always,
            caller_check: CallerCheckMode::Unavailable,
            stopping: false,
            readied: false,
            config: Arc::new(config),
        }
    }

    /// The capabilities: the declared ones, or what the program registered
    /// (§4: asks always; send, steer and abort with a chat handler; actions
    /// and abort with an action handler; the layout hooks; starters with a
    /// hook and a starter; history with a provider).
    pub fn caps(&self) -> Caps {
        if let Some(c) = self.config.caps {
            return c;
        }
        let st = &self.state;
        let mut caps = Caps::none().with(Cap::Asks);
        if st.has_chat() {
            caps = caps.with(Cap::Send).with(Cap::Steer).with(Cap::Abort);
        }
        if st.has_actions() {
            caps = caps.with(Cap::Actions).with(Cap::Abort);
        }
        if st.has_hooks() {
            caps = caps.with(Cap::Rename).with(Cap::Close).with(Cap::Reopen);
            if !st.starters().is_empty() {
                caps = caps.with(Cap::Starters);
            }
        }
        if st.has_history() {
            caps = caps.with(Cap::History);
        }
        caps
    }

    /// What `GET /hello` says of the caller check on the socket.
    pub fn caller_check(&self) -> CallerCheckMode {
        self.caller_check
    }

    pub fn set_caller_check(&mut self, mode: CallerCheckMode) {
        self.caller_check = mode;
    }

    /// Whether asks may offer allow-always options (§1.2).
    pub fn allow_always(&self) -> bool {
        self.allow_always
    }

    /// An HTTPS transport serves the agent: allow-always is off for good.
    pub fn forbid_allow_always(&mut self) {
        self.allow_always = false;
    }

    /// A graceful stop begins: from now on no turn starts.
    pub fn begin_stop(&mut self) {
        self.stopping = true;
    }

    /// Whether a graceful stop began.
    pub fn is_stopping(&self) -> bool {
        self.stopping
    }

    /// The agent is ready (`GET /hello` and the state say so). `true` the
    /// first time: the sends and asks the last run left are taken up then.
    pub fn ready(&mut self) -> bool {
        self.state.mark_ready();
        !std::mem::replace(&mut self.readied, true)
    }

    /// Whether `ready()` was called.
    pub fn was_readied(&self) -> bool {
        self.readied
    }

    /// Asks for a line in the program's warn sink.
    pub fn warn(&mut self, line: String) {
        self.state.effect(Effect::Warn(line));
    }

    /// Adds a deadline; the driver is woken when it is the earliest.
    pub fn add_timer(&mut self, at: Timestamp, timer: Timer) {
        if self.state.add_timer(at, timer) {
            self.state.effect(Effect::WakeDriver);
        }
    }

    /// The earliest deadline, when the driver is to call
    /// [`handle_timeout`](Self::handle_timeout).
    pub fn next_deadline(&self) -> Option<Timestamp> {
        self.state.next_deadline()
    }

    /// Fires every deadline at or before `now`: an ask past its expiry
    /// closes (`timeout`), an answer held past `hold_ms` goes, and a
    /// writer's wait for a pane that ran out (`409 busy`) is woken
    /// ([`Effect::Wake`]).
    pub fn handle_timeout(&mut self, now: Timestamp) {
        for timer in self.state.take_due(now) {
            match timer {
                Timer::AskExpiry(id) => self.close_if_expired(&id, now),
                Timer::HoldExpiry(id) => self.state.expire_hold(&id, now),
                Timer::Wake(link) => self.state.effect(Effect::Wake(link)),
            }
        }
    }
}
