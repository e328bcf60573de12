//! Abort signals: the Rust form of the seed's `AbortSignal`, runtime-agnostic.

use std::fmt;

use tokio::sync::watch;

/// Fires an [`AbortSignal`]. Aborting twice does nothing more.
#[derive(Clone)]
pub struct AbortController {
    tx: std::sync::Arc<watch::Sender<bool>>,
}

/// Tells whether work was aborted, and lets a task wait for it.
#[derive(Clone)]
pub struct AbortSignal {
    rx: watch::Receiver<bool>,
}

impl AbortController {
    /// A controller and its signal.
    pub fn new() -> Self {
        let (tx, _rx) = watch::channel(false);
        AbortController { tx: std::sync::Arc::new(tx) }
    }

    /// A signal tied to this controller.
    pub fn signal(&self) -> AbortSignal {
        AbortSignal { rx: self.tx.subscribe() }
    }

    /// Aborts: every signal reports aborted and every waiter wakes.
    pub fn abort(&self) {
        self.tx.send_replace(true);
    }

    /// Whether `abort` was called.
    pub fn is_aborted(&self) -> bool {
        *self.tx.borrow()
    }
}

impl Default for AbortController {
    fn default() -> Self {
        Self::new()
    }
}

impl AbortSignal {
    /// Whether the controller aborted.
    pub fn is_aborted(&self) -> bool {
        *self.rx.borrow()
    }

    /// Resolves once the controller aborts (never, if it is dropped first).
    pub async fn aborted(&self) {
        let mut rx = self.rx.clone();
        if rx.wait_for(|a| *a).await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

impl fmt::Debug for AbortController {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AbortController").field("aborted", &self.is_aborted()).finish()
    }
}

impl fmt::Debug for AbortSignal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AbortSignal").field("aborted", &self.is_aborted()).finish()
    }
}
