//! Serving an agent on transports: what a transport implements
//! ([`Serve`], [`Served`]) so that [`Collie::serve`] can start it and
//! [`Collie::close`] stop it, and what the agent keeps of those it serves.

use std::future::Future;
use std::pin::Pin;
use std::sync::PoisonError;
use std::time::Duration;

use durable_core::data::caller_check::CallerCheckMode;

use crate::core::{Collie, Driver, Shared};

/// How long [`Collie::close`] lets running turns go on before serving
/// stops, unless a transport served says otherwise (its
/// [`Serve::shutdown_grace`]): 10 s.
pub const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// A transport, as [`Collie::serve`] starts it: the SDK's `Transport`,
/// `durable_socket::SocketOptions` and `durable_tls::TlsOptions` implement
/// it; so can a transport of your own (its server driving the
/// [`Driver`] it is given).
pub trait Serve {
    /// What starting it fails with.
    type Error;

    /// How long [`Collie::close`] lets running turns go on while this
    /// transport still serves their replies.
    fn shutdown_grace(&self) -> Duration {
        DEFAULT_SHUTDOWN_GRACE
    }

    /// Starts serving `driver`'s agent; resolves once it accepts
    /// connections.
    fn serve(self, driver: Driver) -> impl Future<Output = Result<Box<dyn Served>, Self::Error>> + Send;
}

/// A transport being served, as [`Collie`] keeps it until
/// [`close`](Collie::close).
pub trait Served: Send + Sync {
    /// What Collie attaches to: a socket path, or `https://host:port`.
    fn address(&self) -> String;

    /// The SHA-256 fingerprint of a self-signed certificate the transport
    /// serves, for Collie to pin (`None`: none).
    fn fingerprint(&self) -> Option<String> {
        None
    }

    /// Who may answer through it (`GET /hello`'s `callerCheck`).
    fn caller_check(&self) -> CallerCheckMode;

    /// Stops serving: no new connection; requests in flight finish within
    /// the transport's grace.
    fn close(self: Box<Self>) -> Pin<Box<dyn Future<Output = ()> + Send>>;
}

/// A transport served, with what it said of itself when it started (asked
/// then, so that no call into a transport is made under the lock).
struct Entry {
    served: Box<dyn Served>,
    address: String,
    fingerprint: Option<String>,
    caller_check: CallerCheckMode,
}

/// The transports an agent serves, in the order served, and the longest
/// of their shutdown graces.
pub(crate) struct Serving {
    served: Vec<Entry>,
    grace: Duration,
}

impl Default for Serving {
    fn default() -> Self {
        Serving { served: Vec::new(), grace: DEFAULT_SHUTDOWN_GRACE }
    }
}

fn serving(shared: &Shared) -> std::sync::MutexGuard<'_, Serving> {
    shared.serving.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Takes the transports served out of `shared` (to stop them: dropping a
/// server stops it).
pub(crate) fn take_served(shared: &Shared) -> Vec<Box<dyn Served>> {
    std::mem::take(&mut serving(shared).served).into_iter().map(|e| e.served).collect()
}

impl Collie {
    fn serving(&self) -> std::sync::MutexGuard<'_, Serving> {
        serving(&self.shared)
    }

    /// Serves the agent on a transport (call again to serve it on another
    /// too: the socket and HTTPS at once): the SDK's `Transport`,
    /// `durable_socket::SocketOptions`, `durable_tls::TlsOptions`, or any
    /// [`Serve`]. Over HTTPS this turns allow-always off unless the
    /// transport keeps it. Must be awaited inside a tokio runtime.
    pub async fn serve<T: Serve>(&self, transport: T) -> Result<(), T::Error> {
        let grace = transport.shutdown_grace();
        let served = transport.serve(self.driver()).await?;
        let entry = Entry {
            address: served.address(),
            fingerprint: served.fingerprint(),
            caller_check: served.caller_check(),
            served,
        };
        tracing::info!(address = %entry.address, "serving");
        let mut serving = self.serving();
        if serving.served.is_empty() || grace > serving.grace {
            serving.grace = grace;
        }
        serving.served.push(entry);
        Ok(())
    }

    /// What Collie attaches to: the socket path, or `https://host:port`
    /// (`http://` for loopback plain HTTP) — of the first transport served;
    /// empty before [`serve`](Self::serve).
    pub fn address(&self) -> String {
        self.serving().served.first().map(|e| e.address.clone()).unwrap_or_default()
    }

    /// Every served transport's address, in the order served.
    pub fn addresses(&self) -> Vec<String> {
        self.serving().served.iter().map(|e| e.address.clone()).collect()
    }

    /// The SHA-256 fingerprint of the self-signed certificate, when a
    /// transport serves one, for Collie to pin.
    pub fn fingerprint(&self) -> Option<String> {
        self.serving().served.iter().find_map(|e| e.fingerprint.clone())
    }

    /// Who may answer on the first transport: the socket's caller check, or
    /// `token` over HTTPS (`None` before [`serve`](Self::serve)). `GET
    /// /hello` says the socket's check, whichever transport came first
    /// ([`Driver::caller_check`]).
    pub fn caller_check(&self) -> Option<CallerCheckMode> {
        self.serving().served.first().map(|e| e.caller_check)
    }

    /// Stops gracefully. First no new turn starts (a send is `409 busy`,
    /// unstored, for the phone to send again once the agent is back; sends
    /// already queued stay queued for the next start) and the turns running
    /// get the shutdown grace (the transports' limits, 10 s by default) to
    /// end as they would; the transports go on serving meanwhile, so their
    /// replies still reach the phone. Then serving stops: no new
    /// connection, requests in flight finish within the grace, a socket
    /// file is removed. A turn still running past the grace is cut, and a
    /// store that keeps sends closes it with a notice at the next start.
    /// Open asks stay open: a shutdown is not an answer. What the panes
    /// showed is in a store that keeps conversations before serving stops
    /// (within a grace of its own). Must be awaited inside a tokio runtime
    /// with its timer on (the grace is tokio's `timeout`).
    pub async fn close(&self) {
        let driver = self.driver();
        driver.begin_stop();
        let grace = self.serving().grace;
        let _ = tokio::time::timeout(grace, driver.turns_done()).await;
        // The store's job runs on the transports' driver: before they stop.
        let _ = tokio::time::timeout(grace, self.conversations_kept()).await;
        for served in take_served(&self.shared) {
            served.close().await;
        }
    }
}
