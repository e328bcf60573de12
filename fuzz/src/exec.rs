//! A driver for the core without a runtime: futures polled by hand with a
//! no-op waker, the core's jobs run in between, its deadlines fired on a
//! manual clock. Deterministic, and cheap enough for every input.

use std::future::Future;
use std::pin::{Pin, pin};
use std::task::{Context, Poll, Waker};

use durable_runtime::types::{BUSY_MS, Timestamp};
use durable_runtime::{Clock, Collie, Job, ManualClock};

/// Rounds of polling before the clock is moved past the `busy` wait.
const ROUNDS_BEFORE_BUSY: usize = 16;
/// Rounds of polling in all before a request counts as hung.
const ROUNDS_MAX: usize = 64;

/// The core, its clock, and the jobs it handed out that have not ended.
pub struct Driver {
    /// The core.
    pub core: Collie,
    /// Its clock.
    pub clock: ManualClock,
    jobs: Vec<Job>,
}

impl std::fmt::Debug for Driver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Driver").field("jobs", &self.jobs.len()).finish_non_exhaustive()
    }
}

fn poll_once<F: Future + ?Sized>(f: Pin<&mut F>) -> Poll<F::Output> {
    f.poll(&mut Context::from_waker(Waker::noop()))
}

impl Driver {
    /// A driver for `core`, whose clock is `clock`.
    pub fn new(core: Collie, clock: ManualClock) -> Self {
        Driver { core, clock, jobs: Vec::new() }
    }

    /// Polls every job once (taking new ones from the core first); drops
    /// the ended ones.
    pub fn run_jobs(&mut self) {
        for _ in 0..4 {
            while let Some(job) = self.core.driver().poll_job() {
                self.jobs.push(job);
            }
            self.jobs.retain_mut(|job| poll_once(job.as_mut()).is_pending());
        }
    }

    /// Moves the clock and fires what is due.
    pub fn advance(&mut self, ms: u64) {
        self.clock.advance(ms);
        self.tick();
    }

    /// Fires what is due now.
    pub fn tick(&mut self) {
        let now: Timestamp = self.clock.now();
        self.core.driver().tick(now);
        self.run_jobs();
    }

    /// Runs `fut` to its end, running jobs in between; past a few rounds
    /// the clock moves beyond the `busy` wait (a write waiting for its
    /// pane's lock then gives up). Panics when it never ends: every request
    /// must be answered.
    pub fn block_on<F: Future>(&mut self, fut: F, what: &dyn std::fmt::Debug) -> F::Output {
        let mut fut = pin!(fut);
        for round in 0..ROUNDS_MAX {
            if let Poll::Ready(out) = poll_once(fut.as_mut()) {
                self.run_jobs();
                return out;
            }
            self.run_jobs();
            if round == ROUNDS_BEFORE_BUSY {
                self.advance(BUSY_MS + 1);
            }
        }
        panic!("no answer after {ROUNDS_MAX} rounds and the busy wait: {what:?}");
    }
}
