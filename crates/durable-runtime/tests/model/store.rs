//! A model receipt store: one in-memory "database" shared by the agent
//! processes of a schedule, each process holding its own handle (as each
//! `PgReceiptStore` of one database does). Its `claim` is a real claim
//! across processes: a claimed id makes every other claimer (and a `put`
//! from another process) wait until `put` or `release`. Every async method
//! yields once before it acts (the sends journal's can be told not to), so
//! that each of the core's awaits on the store is a point where the
//! scheduler may run another future.

use std::collections::HashMap;
use std::future::{Future, poll_fn};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

use durable_runtime::{Lookup, PendingSend, Receipt, ReceiptStore, SendState, StoreError};

use super::Trace;

/// The shared database of the model store.
pub struct Database {
    inner: Mutex<Inner>,
    trace: Trace,
}

#[derive(Default)]
struct Inner {
    receipts: HashMap<String, Receipt>,
    /// The claimed ids, and which process holds each.
    claims: HashMap<String, usize>,
    /// Futures waiting for a claim to end.
    waiting: Vec<Waker>,
    sends: HashMap<String, PendingSend>,
    /// How many of the next `put`s / `claim`s fail (failure injection).
    failing_puts: usize,
    failing_claims: usize,
    /// Receipts kept, in order (a second `put` of an id is counted too).
    puts: Vec<String>,
    /// Breaches of the store's contract by the core (`claim` of an id
    /// its own process already holds).
    breaches: Vec<String>,
    /// The sends journal's calls do not yield (they are not on the
    /// exactly-once path; without their yields a scenario of sends across
    /// two processes stays small enough to run in full).
    quiet_journal: bool,
}

impl Database {
    pub fn new(trace: &Trace) -> Arc<Database> {
        Arc::new(Database { inner: Mutex::default(), trace: trace.clone() })
    }

    /// The handle of one agent process.
    pub fn process(self: &Arc<Self>, process: usize) -> ModelStore {
        ModelStore { db: self.clone(), process }
    }

    /// The next `n` puts fail.
    pub fn fail_puts(&self, n: usize) {
        self.lock().failing_puts = n;
    }

    /// The next `n` claims fail.
    pub fn fail_claims(&self, n: usize) {
        self.lock().failing_claims = n;
    }

    /// The sends journal's calls (`record_send`, `set_send_state`,
    /// `send_state`, `unfinished_sends`) act at once, without yielding.
    pub fn journal_without_yields(&self) {
        self.lock().quiet_journal = true;
    }

    /// The ids put, in order.
    pub fn puts(&self) -> Vec<String> {
        self.lock().puts.clone()
    }

    /// The ids still claimed (none once every request is over).
    pub fn claimed(&self) -> Vec<String> {
        let mut ids: Vec<String> = self.lock().claims.keys().cloned().collect();
        ids.sort();
        ids
    }

    pub fn breaches(&self) -> Vec<String> {
        self.lock().breaches.clone()
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn note(&self, line: impl FnOnce() -> String) {
        self.trace.note(line);
    }
}

impl Inner {
    fn end_claim(&mut self, request_id: &str, process: usize) {
        if self.claims.get(request_id) == Some(&process) {
            self.claims.remove(request_id);
            for w in self.waiting.drain(..) {
                w.wake();
            }
        }
    }

    /// Whether `request_id` is claimed by another process than `process`;
    /// if so, the caller waits (its waker is kept).
    fn held_by_other(&mut self, request_id: &str, process: usize, cx: &Context<'_>) -> Option<usize> {
        let holder = *self.claims.get(request_id)?;
        if holder == process {
            return None;
        }
        self.waiting.push(cx.waker().clone());
        Some(holder)
    }
}

/// A put under way: dropped before it ends, it ends all the same (the
/// receipt kept, the claim ended), as the SDK's stores do. Not for a put
/// that waits for another process's claim or is to fail: those do nothing.
struct PutInFlight<'a> {
    store: &'a ModelStore,
    request_id: &'a str,
    receipt: &'a Receipt,
    over: bool,
}

impl Drop for PutInFlight<'_> {
    fn drop(&mut self) {
        if self.over {
            return;
        }
        let (db, process, id) = (&self.store.db, self.store.process, self.request_id);
        let mut inner = db.lock();
        if inner.claims.get(id) == Some(&process) && inner.failing_puts == 0 {
            db.note(|| format!("  store p{process}: put {id} (its caller dropped it; it ends all the same)"));
            inner.receipts.entry(id.to_owned()).or_insert_with(|| self.receipt.clone());
            inner.puts.push(id.to_owned());
            inner.end_claim(id, process);
        }
    }
}

/// One process's handle on the shared database.
pub struct ModelStore {
    db: Arc<Database>,
    process: usize,
}

/// Returns `Pending` once (waking itself at once): a point where the
/// scheduler may run another future before this one goes on.
pub fn yield_once() -> impl Future<Output = ()> {
    let mut yielded = false;
    poll_fn(move |cx| {
        if yielded {
            return Poll::Ready(());
        }
        yielded = true;
        cx.waker().wake_by_ref();
        Poll::Pending
    })
}

impl ModelStore {
    fn lookup(inner: &Inner, request_id: &str) -> Lookup {
        match inner.receipts.get(request_id) {
            Some(r) => Lookup::Found(r.clone()),
            None => Lookup::Unknown,
        }
    }

    /// Yields once, unless the journal was told not to.
    async fn journal_yield(&self) {
        let quiet = self.db.lock().quiet_journal;
        if !quiet {
            yield_once().await;
        }
    }

    fn found(lookup: &Lookup) -> &'static str {
        match lookup {
            Lookup::Found(_) => "found",
            _ => "unknown",
        }
    }
}

impl ReceiptStore for ModelStore {
    async fn get(&self, request_id: &str) -> Result<Lookup, StoreError> {
        yield_once().await;
        let lookup = Self::lookup(&self.db.lock(), request_id);
        self.db.note(|| format!("  store p{}: get {request_id} → {}", self.process, Self::found(&lookup)));
        Ok(lookup)
    }

    async fn claim(&self, request_id: &str) -> Result<Lookup, StoreError> {
        yield_once().await;
        let mut noted_wait = false;
        poll_fn(|cx| {
            let mut inner = self.db.lock();
            if inner.claims.get(request_id) == Some(&self.process) {
                // The core makes a repeat in one process wait for the first,
                // so it never claims an id its own process holds.
                let breach = format!("p{} claimed {request_id} while it already held it", self.process);
                if !inner.breaches.contains(&breach) {
                    self.db.note(|| format!("  store: BREACH {breach}"));
                    inner.breaches.push(breach);
                }
                // A second transaction of the same process would wait on the lock too.
                inner.waiting.push(cx.waker().clone());
                return Poll::Pending;
            }
            if let Some(holder) = inner.held_by_other(request_id, self.process, cx) {
                if !noted_wait {
                    noted_wait = true;
                    self.db.note(|| {
                        format!("  store p{}: claim {request_id} waits for p{holder}", self.process)
                    });
                }
                return Poll::Pending;
            }
            if inner.failing_claims > 0 {
                inner.failing_claims -= 1;
                self.db.note(|| format!("  store p{}: claim {request_id} → FAILS (injected)", self.process));
                return Poll::Ready(Err(StoreError::new("injected claim failure")));
            }
            let lookup = Self::lookup(&inner, request_id);
            if lookup == Lookup::Unknown {
                inner.claims.insert(request_id.to_owned(), self.process);
            }
            self.db.note(|| {
                format!(
                    "  store p{}: claim {request_id} → {}",
                    self.process,
                    match lookup {
                        Lookup::Unknown => "unknown, claimed",
                        _ => "found",
                    }
                )
            });
            Poll::Ready(Ok(lookup))
        })
        .await
    }

    fn release(&self, request_id: &str) {
        let mut inner = self.db.lock();
        if inner.claims.get(request_id) == Some(&self.process) {
            self.db.note(|| format!("  store p{}: release {request_id}", self.process));
        }
        inner.end_claim(request_id, self.process);
    }

    async fn put(&self, request_id: &str, receipt: Receipt, _group: &str) -> Result<(), StoreError> {
        // As the SDK's stores: a put once begun is not cancelled by its
        // future being dropped (SQLite's thread and PostgreSQL's spawned
        // commit finish it), so the receipt is kept and the claim ends
        // with it. (A put that let the claim go with no receipt made (7c)
        // run the write twice.)
        let mut in_flight = PutInFlight { store: self, request_id, receipt: &receipt, over: false };
        yield_once().await;
        let put = poll_fn(|cx| {
            let mut inner = self.db.lock();
            // Not claimed here (a held answer's receipt): wait for another
            // process's claim, as a database lock would.
            if inner.held_by_other(request_id, self.process, cx).is_some() {
                return Poll::Pending;
            }
            if inner.failing_puts > 0 {
                inner.failing_puts -= 1;
                // A failed put ends the claim too (its transaction is gone).
                inner.end_claim(request_id, self.process);
                self.db.note(|| format!("  store p{}: put {request_id} → FAILS (injected)", self.process));
                return Poll::Ready(Err(StoreError::new("injected put failure")));
            }
            inner.receipts.entry(request_id.to_owned()).or_insert(receipt.clone());
            inner.puts.push(request_id.to_owned());
            inner.end_claim(request_id, self.process);
            self.db.note(|| format!("  store p{}: put {request_id}", self.process));
            Poll::Ready(Ok(()))
        })
        .await;
        in_flight.over = true;
        put
    }

    async fn record_send(&self, send: PendingSend) -> Result<(), StoreError> {
        self.journal_yield().await;
        self.db.note(|| format!("  store p{}: record send {}", self.process, send.request_id));
        self.db.lock().sends.insert(send.request_id.clone(), send);
        Ok(())
    }

    async fn set_send_state(&self, request_id: &str, state: SendState) -> Result<(), StoreError> {
        self.journal_yield().await;
        if let Some(send) = self.db.lock().sends.get_mut(request_id) {
            send.state = state;
        }
        self.db.note(|| format!("  store p{}: send {request_id} is {state}", self.process));
        Ok(())
    }

    async fn send_state(&self, request_id: &str) -> Result<Option<SendState>, StoreError> {
        self.journal_yield().await;
        Ok(self.db.lock().sends.get(request_id).map(|s| s.state))
    }

    fn keeps_sends(&self) -> bool {
        true
    }

    async fn unfinished_sends(&self) -> Result<Vec<PendingSend>, StoreError> {
        self.journal_yield().await;
        let inner = self.db.lock();
        Ok(inner
            .sends
            .values()
            .filter(|s| matches!(s.state, SendState::Queued | SendState::Running))
            .cloned()
            .collect())
    }
}
