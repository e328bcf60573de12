//! The program's side of what the state names by number: asks'
//! awaitables, turns' steer inboxes and stop signals, panes' handlers,
//! waiters' wake-ups, repeats of a request id waiting for its first; and
//! the agent-wide handlers, hooks and history
//! provider. The state holds only the numbers ([`Link`]) and asks for
//! changes as [`Effect`]s; the core applies them here under the same lock,
//! and drops the handlers let go of (`released`) once the lock is gone.

use std::collections::HashMap;
use std::sync::Arc;

use tokio::sync::{mpsc, oneshot};

use crate::handlers::{DynActions, DynChat, HookSlots, PaneTakers};
use crate::history::DynHistory;
use crate::signal::AbortController;
use durable_core::data::decided::{AskClosed, Decided};
use durable_core::data::receipt::Receipt;
use durable_core::state::{Effect, Link, Takers};

/// An open ask's awaitable and the watcher of its abort signal.
struct AskLink {
    decided: oneshot::Sender<Result<Decided, AskClosed>>,
    closed: oneshot::Sender<()>,
}

/// Everything the state names by number.
#[derive(Default)]
pub(crate) struct Links {
    last: Link,
    asks: HashMap<Link, AskLink>,
    stops: HashMap<Link, AbortController>,
    turns: HashMap<Link, mpsc::UnboundedSender<String>>,
    chats: HashMap<Link, Arc<dyn DynChat>>,
    actions: HashMap<Link, Arc<dyn DynActions>>,
    wakes: HashMap<Link, oneshot::Sender<()>>,
    /// Repeats of a request id waiting for its first request's outcome.
    settles: HashMap<Link, oneshot::Sender<Option<Receipt>>>,
    /// The agent-wide chat and action handlers (a pane without its own).
    pub(crate) wide: PaneTakers,
    /// The agent-wide layout hooks.
    pub(crate) hooks: Option<Arc<HookSlots>>,
    /// The history provider.
    pub(crate) history: Option<Arc<dyn DynHistory>>,
    /// Handlers let go of, dropped once the lock is gone: a program's
    /// `Drop` may call the core.
    released: Vec<Box<dyn std::any::Any + Send + Sync>>,
}

impl Links {
    fn next(&mut self) -> Link {
        self.last += 1;
        self.last
    }

    pub(crate) fn add_ask(
        &mut self,
        decided: oneshot::Sender<Result<Decided, AskClosed>>,
        closed: oneshot::Sender<()>,
    ) -> Link {
        let link = self.next();
        self.asks.insert(link, AskLink { decided, closed });
        link
    }

    /// An ask that could not be raised: its awaitable goes.
    pub(crate) fn forget_ask(&mut self, link: Link) {
        self.asks.remove(&link);
    }

    pub(crate) fn add_stop(&mut self, stop: AbortController) -> Link {
        let link = self.next();
        self.stops.insert(link, stop);
        link
    }

    pub(crate) fn forget_stop(&mut self, link: Link) {
        self.stops.remove(&link);
    }

    pub(crate) fn add_turn(&mut self, steers: mpsc::UnboundedSender<String>) -> Link {
        let link = self.next();
        self.turns.insert(link, steers);
        link
    }

    pub(crate) fn forget_turn(&mut self, link: Link) {
        self.turns.remove(&link);
    }

    pub(crate) fn add_chat(&mut self, handler: Arc<dyn DynChat>) -> Link {
        let link = self.next();
        self.chats.insert(link, handler);
        link
    }

    pub(crate) fn add_actions(&mut self, handler: Arc<dyn DynActions>) -> Link {
        let link = self.next();
        self.actions.insert(link, handler);
        link
    }

    pub(crate) fn forget_handler(&mut self, link: Link) {
        if let Some(chat) = self.chats.remove(&link) {
            self.release(chat);
        }
        if let Some(actions) = self.actions.remove(&link) {
            self.release(actions);
        }
    }

    /// Keeps a value of the program's to drop after the lock.
    pub(crate) fn release(&mut self, value: impl std::any::Any + Send + Sync) {
        self.released.push(Box::new(value));
    }

    pub(crate) fn has_released(&self) -> bool {
        !self.released.is_empty()
    }

    /// The values let go of since the last call.
    pub(crate) fn take_released(&mut self) -> Vec<Box<dyn std::any::Any + Send + Sync>> {
        std::mem::take(&mut self.released)
    }

    /// A pane's own handlers.
    pub(crate) fn takers(&self, takers: Takers) -> PaneTakers {
        PaneTakers {
            chat: takers.chat.and_then(|l| self.chats.get(&l).cloned()),
            actions: takers.actions.and_then(|l| self.actions.get(&l).cloned()),
        }
    }

    /// A number for a waiter whose wake-up may be set later
    /// ([`set_wake`](Self::set_wake)): a pane's writer.
    pub(crate) fn new_link(&mut self) -> Link {
        self.next()
    }

    pub(crate) fn set_wake(&mut self, link: Link, wake: oneshot::Sender<()>) {
        self.wakes.insert(link, wake);
    }

    /// A waiter that stopped waiting: its wake-up goes unsent.
    pub(crate) fn forget_wake(&mut self, link: Link) {
        self.wakes.remove(&link);
    }

    /// A repeat that stopped waiting: its settle goes unsent.
    pub(crate) fn forget_settle(&mut self, link: Link) {
        self.settles.remove(&link);
    }

    /// A waiter: its number, for the machine, and what it awaits until an
    /// [`Effect::Wake`] of that number.
    pub(crate) fn add_waiter(&mut self) -> (Link, oneshot::Receiver<()>) {
        let (wake, woken) = oneshot::channel();
        let link = self.next();
        self.wakes.insert(link, wake);
        (link, woken)
    }

    /// Wakes a waiter (gone already when it stopped waiting: nothing to do).
    pub(crate) fn wake(&mut self, link: Link) {
        if let Some(wake) = self.wakes.remove(&link) {
            let _ = wake.send(());
        }
    }

    /// A repeat waiting for the first request of its id (`link` is its
    /// request's): what it awaits until an [`Effect::Settle`] of that number.
    pub(crate) fn settle_for(&mut self, link: Link) -> oneshot::Receiver<Option<Receipt>> {
        let (settle, settled) = oneshot::channel();
        self.settles.insert(link, settle);
        settled
    }

    /// How many things of the program's side are named now (tests: a
    /// waiter that went away must leave nothing behind).
    #[cfg(feature = "test-util")]
    pub(crate) fn len(&self) -> usize {
        self.asks.len()
            + self.stops.len()
            + self.turns.len()
            + self.chats.len()
            + self.actions.len()
            + self.wakes.len()
            + self.settles.len()
    }

    /// Applies an effect that touches a link.
    pub(crate) fn apply(&mut self, effect: Effect) {
        match effect {
            Effect::Decide { ask, result } => {
                if let Some(open) = self.asks.remove(&ask) {
                    let _ = open.decided.send(result);
                    let _ = open.closed.send(());
                }
            }
            Effect::Abort(stop) => {
                if let Some(stop) = self.stops.remove(&stop) {
                    stop.abort();
                }
            }
            Effect::ForgetStop(stop) => self.forget_stop(stop),
            Effect::Steer { turn, text } => {
                if let Some(steers) = self.turns.get(&turn) {
                    let _ = steers.send(text);
                }
            }
            Effect::ForgetHandler(link) => self.forget_handler(link),
            Effect::ForgetTurn(turn) => self.forget_turn(turn),
            Effect::Wake(waiter) => self.wake(waiter),
            Effect::Settle { waiter, receipt } => {
                // A repeat that stopped waiting (its request dropped) is gone.
                if let Some(settle) = self.settles.remove(&waiter) {
                    let _ = settle.send(receipt);
                }
            }
            // The core's own, applied by the state guard: no link to touch.
            Effect::Warn(_)
            | Effect::WakeDriver
            | Effect::DrainAsks
            | Effect::DrainConversations
            | Effect::DeliverQueued(_)
            | Effect::OfferKeptTitle { .. }
            | Effect::PutHeldReceipt { .. } => {}
        }
    }
}
