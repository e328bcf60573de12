//! What the jobs that apply the state's journals (kept asks,
//! conversations) share: the wait for the ops pushed so far, and the guard
//! over the ops a job is applying.

use durable_core::state::{JournalName, Link};

use crate::core::Collie;

impl Collie {
    /// Waits until the store has applied the first `target` ops of
    /// `journal` (at once if it has).
    pub(crate) async fn wait_for_journal(&self, journal: JournalName, target: u64) {
        let (mut waiting, applied) = {
            let mut st = self.lock();
            if st.journal_has_applied(journal, target) {
                return;
            }
            let (waiter, applied) = st.links().add_waiter();
            st.wait_for_journal(journal, target, waiter);
            (Waiting { core: self, journal, waiter, woken: false }, applied)
        };
        let _ = applied.await;
        waiting.woken = true;
    }
}

/// A caller waiting for a journal. Dropped while it waits (its caller went
/// away), it leaves the journal's waiters and the links: a store that hangs
/// with the phone retrying keeps nothing.
struct Waiting<'a> {
    core: &'a Collie,
    journal: JournalName,
    waiter: Link,
    woken: bool,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        if !self.woken {
            let mut st = self.core.lock();
            st.stop_waiting_for_journal(self.journal, self.waiter);
            st.links().forget_wake(self.waiter);
        }
    }
}

/// What a job's ops lost to a store that stopped midway: what the store
/// was doing, and what that may cost.
#[derive(Clone, Copy)]
pub(crate) struct Lost {
    pub(crate) doing: &'static str,
    pub(crate) costs: &'static str,
}

/// Ops a job took from a journal and the store is applying. Dropped before
/// [`finish`](Self::finish) — the store's future panicked, or the job was
/// dropped (the runtime shut down) — they count as applied, with a warning
/// saying which, and the rest of the journal goes on in a new job: nobody
/// waits for ever behind them.
pub(crate) struct InFlight<'a> {
    core: &'a Collie,
    journal: JournalName,
    count: u64,
    lost: Lost,
    done: bool,
}

impl<'a> InFlight<'a> {
    pub(crate) fn new(core: &'a Collie, journal: JournalName, count: usize, lost: Lost) -> Self {
        InFlight { core, journal, count: count as u64, lost, done: false }
    }

    /// The store answered (or failed): the ops count as applied.
    pub(crate) fn finish(mut self) {
        self.done = true;
        self.core.lock().journal_applied(self.journal, self.count);
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        self.core.lock().journal_dropped(self.journal, self.count);
        // A panic unwinds through this drop; a runtime shutting down drops
        // the job without one (a log reader must not hunt a panic then).
        let why = if std::thread::panicking() {
            "it panicked"
        } else {
            "its job was dropped: the runtime shut down"
        };
        let Lost { doing, costs } = self.lost;
        self.core.warn(&format!("collie: the receipt store stopped while {doing} ({why}); {costs}"));
    }
}
