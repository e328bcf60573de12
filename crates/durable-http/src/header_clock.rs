//! The header-read timeout of one connection, kept by the connection
//! instead of by hyper.
//!
//! The clock runs while the connection waits for a request: from its open,
//! and again from the moment an answer has been written (each write's
//! progress moves it on, so a slow reader that keeps reading is not cut
//! off). It stops while a request is being served, its body read included
//! (that has its own timeout). Bytes of a head trickling in do not restart
//! it. Past it, the connection is dropped without an answer.
//!
//! Why not hyper's `header_read_timeout`: with it, hyper asks its timer for
//! a fresh sleep at every request and, to start it, reads the socket once
//! more after each answer (a read that finds nothing) — about 900
//! instructions and a system call per request (`docs/benchmarks.md`). Here
//! a request costs two atomic stores and a clock read per write of its
//! answer that makes progress (one, for a small answer); the one sleep (in
//! [`HeaderClock::expired`]) wakes once per timeout at most. An answer whose
//! write never makes progress is left to the write timeout; should the
//! watch find the wait still pending, it starts it then, so the connection
//! still closes, at most two timeouts after the answer.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::time::Instant;

use crate::server::later_by;

/// While a request is being served.
const SERVING: u64 = u64::MAX;
/// A request has its answer, not yet written: the write starts the wait
/// (reading the clock once per request, not at the answer and again at the
/// write). Should no write come, the watch starts it when it next looks.
const ANSWERED: u64 = u64::MAX - 1;

/// The clock of one connection; shared by its service, its writes and the
/// watch in [`HeaderClock::expired`].
#[derive(Debug)]
pub(crate) struct HeaderClock {
    opened: Instant,
    timeout: Duration,
    /// Milliseconds after `opened` at which the wait began, or `SERVING`,
    /// or `ANSWERED`.
    waiting_since: AtomicU64,
}

impl HeaderClock {
    /// A clock running from now.
    pub(crate) fn start(timeout: Duration) -> Arc<HeaderClock> {
        Arc::new(HeaderClock { opened: Instant::now(), timeout, waiting_since: AtomicU64::new(0) })
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.opened.elapsed().as_millis()).unwrap_or(ANSWERED - 1)
    }

    /// Stops the clock until the returned guard is dropped (the request has
    /// its answer); it starts again when the answer is written.
    pub(crate) fn serving(self: &Arc<Self>) -> Serving {
        self.waiting_since.store(SERVING, Ordering::Relaxed);
        Serving(self.clone())
    }

    /// An answer's write made progress: the wait starts again from now.
    pub(crate) fn wrote(&self) {
        let now = self.now_ms();
        // Never over `SERVING`: a write while a request is served (there is
        // none in HTTP/1.1 without pipelining's answers) leaves it stopped.
        let _ = self
            .waiting_since
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |since| (since != SERVING).then_some(now));
    }

    /// Ends when the connection has waited for a request longer than the
    /// timeout. Polled only when its own sleep wakes (see `until`).
    pub(crate) async fn expired(&self) {
        loop {
            let mut since = self.waiting_since.load(Ordering::Relaxed);
            if since == ANSWERED {
                // An answer no write followed (yet): the wait starts now,
                // unless a write or a new request came in between.
                let now = self.now_ms();
                since = match self.waiting_since.compare_exchange(
                    ANSWERED,
                    now,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => now,
                    Err(current) => current,
                };
            }
            let from = if since == SERVING { self.now_ms() } else { since };
            let deadline = later_by(self.opened + Duration::from_millis(from), self.timeout);
            if since != SERVING && Instant::now() >= deadline {
                return;
            }
            tokio::time::sleep_until(deadline).await;
        }
    }
}

/// A request being served: the clock stands still until this is dropped,
/// and then until the answer's first write (or the watch's next look).
#[derive(Debug)]
pub(crate) struct Serving(Arc<HeaderClock>);

impl Drop for Serving {
    fn drop(&mut self) {
        self.0.waiting_since.store(ANSWERED, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The clock runs out 30 s from now, not sooner (on tokio's paused
    /// clock, waiting costs nothing).
    async fn runs_out_in_30_s(clock: &HeaderClock, what: &str) {
        let from = Instant::now();
        assert!(tokio::time::timeout(Duration::from_secs(29), clock.expired()).await.is_err(), "{what}");
        clock.expired().await;
        let ran = from.elapsed();
        assert!(ran >= Duration::from_secs(30) && ran <= Duration::from_secs(31), "{what}: {ran:?}");
    }

    /// `Duration::MAX` means "never": the deadline is past what the clock
    /// holds, which must not panic, and it does not run out.
    #[tokio::test(start_paused = true)]
    async fn an_endless_timeout_never_runs_out() {
        let clock = HeaderClock::start(Duration::MAX);
        tokio::time::advance(Duration::from_secs(5)).await;
        drop(clock.serving());
        clock.wrote();
        let waited = tokio::time::timeout(Duration::from_secs(3 * 365 * 86_400), clock.expired()).await;
        assert!(waited.is_err(), "an endless header-read timeout ran out");
    }

    #[tokio::test(start_paused = true)]
    async fn the_clock_runs_from_the_open_and_stops_while_a_request_is_served() {
        let clock = HeaderClock::start(Duration::from_secs(30));
        tokio::time::advance(Duration::from_secs(20)).await;
        let serving = clock.serving();
        // Served for longer than the timeout: not expired.
        assert!(tokio::time::timeout(Duration::from_secs(60), clock.expired()).await.is_err());
        drop(serving);
        clock.wrote();
        runs_out_in_30_s(&clock, "the wait starts again at the answer's write").await;
    }

    #[tokio::test(start_paused = true)]
    async fn each_write_of_an_answer_starts_the_wait_again() {
        let clock = HeaderClock::start(Duration::from_secs(30));
        for _ in 0..5 {
            tokio::time::advance(Duration::from_secs(20)).await;
            clock.wrote();
        }
        // 100 s since the open, 0 since the last write.
        assert!(tokio::time::timeout(Duration::from_secs(29), clock.expired()).await.is_err());
        let serving = clock.serving();
        clock.wrote();
        assert!(tokio::time::timeout(Duration::from_secs(60), clock.expired()).await.is_err(), "stopped");
        drop(serving);
    }

    #[tokio::test(start_paused = true)]
    async fn the_wait_starts_at_the_write_of_the_answer_not_at_the_answer() {
        let clock = HeaderClock::start(Duration::from_secs(30));
        drop(clock.serving());
        // The answer took 25 s to be written (a slow reader).
        tokio::time::advance(Duration::from_secs(25)).await;
        clock.wrote();
        runs_out_in_30_s(&clock, "from the write").await;
    }

    #[tokio::test(start_paused = true)]
    async fn an_answer_no_write_follows_still_lets_the_clock_run_out() {
        let clock = HeaderClock::start(Duration::from_secs(30));
        drop(clock.serving());
        // The watch's first look comes after the answer here, so the wait
        // runs one timeout from it (had the watch been asleep since before
        // the answer, it would be up to two).
        runs_out_in_30_s(&clock, "from the watch's look").await;
    }
}
