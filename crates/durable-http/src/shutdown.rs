//! The shutdown signal an accept loop shares with its connections, and the
//! count of the core's work in flight under it.

use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::{Notify, watch};

/// A one-way signal: once triggered it stays triggered. Clones share it.
///
/// The accept loop stops accepting when it fires; each connection served by
/// [`serve_connection`](crate::serve_connection) then finishes the request
/// in flight, if any, and closes instead of waiting for the next one.
///
/// It also counts the core's work in flight: each request that
/// [`serve_connection`](crate::serve_connection) hands the handler runs on a
/// task of its own (so that a client going away cannot cut a write in half),
/// and that task is counted here until it ends — even when its connection is
/// gone. [`drained`](Self::drained) waits for the count to reach zero, so
/// that a server can let that work finish before its runtime goes away.
#[derive(Debug, Clone)]
pub struct Shutdown {
    tx: Arc<watch::Sender<bool>>,
    in_flight: Arc<Count>,
}

/// The tasks in flight: a counter, and a wake-up when it reaches zero.
/// Not a `watch` channel: counting a task in and out through one cost
/// about 900 instructions a write, this costs two atomic operations
/// (`docs/benchmarks.md`).
#[derive(Debug, Default)]
struct Count {
    n: AtomicUsize,
    zero: Notify,
}

impl Default for Shutdown {
    fn default() -> Self {
        Self::new()
    }
}

impl Shutdown {
    /// A signal not yet triggered.
    pub fn new() -> Self {
        Shutdown { tx: Arc::new(watch::Sender::new(false)), in_flight: Arc::default() }
    }

    /// Fires the signal (again is harmless).
    pub fn trigger(&self) {
        self.tx.send_replace(true);
    }

    /// Whether the signal has fired.
    pub fn is_triggered(&self) -> bool {
        *self.tx.borrow()
    }

    /// Waits until the signal fires; returns at once if it already has.
    pub async fn triggered(&self) {
        let mut rx = self.tx.subscribe();
        // The sender lives as long as `self`, so this cannot fail.
        let _ = rx.wait_for(|fired| *fired).await;
    }

    /// How many of the handler's tasks started under this signal are still
    /// running.
    pub fn in_flight(&self) -> usize {
        self.in_flight.n.load(Ordering::Acquire)
    }

    /// Waits until no handler task started under this signal is running;
    /// returns at once if none is. Bound it with a timeout: a handler may
    /// take long.
    pub async fn drained(&self) {
        loop {
            // Registered before the check: a last task that ends between
            // the check and the await still wakes it.
            let mut zero = pin!(self.in_flight.zero.notified());
            zero.as_mut().enable();
            if self.in_flight() == 0 {
                return;
            }
            zero.await;
        }
    }

    /// Counts one more task in flight until the returned guard is dropped.
    pub(crate) fn track(&self) -> InFlight {
        self.in_flight.n.fetch_add(1, Ordering::AcqRel);
        InFlight(self.in_flight.clone())
    }
}

/// One handler task counted by [`Shutdown::in_flight`]; dropping it (the
/// task ended, or was dropped with its runtime) uncounts it.
#[derive(Debug)]
pub(crate) struct InFlight(Arc<Count>);

impl Drop for InFlight {
    fn drop(&mut self) {
        // Each guard counted one in: the count never goes below zero.
        if self.0.n.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.0.zero.notify_waiters();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_triggered_shutdown_stays_triggered_for_every_clone() {
        let s = Shutdown::new();
        let c = s.clone();
        assert!(!c.is_triggered());
        let waiter = tokio::spawn(async move { c.triggered().await });
        s.trigger();
        waiter.await.unwrap();
        assert!(s.is_triggered());
        s.clone().triggered().await;
    }

    #[tokio::test]
    async fn drained_waits_for_every_tracked_task() {
        let s = Shutdown::new();
        s.drained().await; // nothing in flight
        let a = s.track();
        let b = s.clone().track();
        assert_eq!(s.in_flight(), 2);
        let waiter = tokio::spawn({
            let s = s.clone();
            async move { s.drained().await }
        });
        drop(a);
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished());
        drop(b);
        tokio::time::timeout(std::time::Duration::from_secs(5), waiter).await.unwrap().unwrap();
        assert_eq!(s.in_flight(), 0);
    }
}
