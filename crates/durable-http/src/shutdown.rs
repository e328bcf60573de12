//! The shutdown signal an accept loop shares with its connections.

use std::sync::Arc;

use tokio::sync::watch;

/// A one-way signal: once triggered it stays triggered. Clones share it.
///
/// The accept loop stops accepting when it fires; each connection served by
/// [`serve_connection`](crate::serve_connection) then finishes the request
/// in flight, if any, and closes instead of waiting for the next one.
#[derive(Debug, Clone)]
pub struct Shutdown {
    tx: Arc<watch::Sender<bool>>,
}

impl Default for Shutdown {
    fn default() -> Self {
        Self::new()
    }
}

impl Shutdown {
    /// A signal not yet triggered.
    pub fn new() -> Self {
        Shutdown { tx: Arc::new(watch::Sender::new(false)) }
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
}
