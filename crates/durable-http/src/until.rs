//! Work raced against a signal, the signal polled only when it has woken
//! the task.
//!
//! A `tokio::select!` of a connection and its shutdown (or displacement)
//! signal polls both at every wake of the connection's task: each
//! request's reads and writes woke the signal's future too, which took a
//! lock in tokio's `Notify` and a random draw for the branch order, about
//! 500 instructions a request (`docs/benchmarks.md`). [`until`] polls the
//! signal under a waker of its own, and again only after that waker fired.

use std::future::{Future, poll_fn};
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, Wake, Waker};

use futures_util::task::AtomicWaker;

/// Runs `work` to its end (`Ok`), unless `signal` ends first (`Err`, with
/// the signal's output): then `work` is dropped where it stands. `work` is
/// polled first at each wake, so work that has ended is never polled again.
pub(crate) async fn until<W: Future, S: Future>(work: W, signal: S) -> Result<W::Output, S::Output> {
    let mut work = pin!(work);
    let mut signal = pin!(signal);
    // Woken: the signal's first poll is owed.
    let tee = Arc::new(Tee { woken: AtomicBool::new(true), task: AtomicWaker::new() });
    let signal_waker = Waker::from(tee.clone());
    poll_fn(|cx| {
        if let Poll::Ready(out) = work.as_mut().poll(cx) {
            return Poll::Ready(Ok(out));
        }
        // Registered before the flag is read: a wake after the read finds
        // this task's waker and polls again.
        tee.task.register(cx.waker());
        if tee.woken.swap(false, Ordering::AcqRel) {
            if let Poll::Ready(out) = signal.as_mut().poll(&mut Context::from_waker(&signal_waker)) {
                return Poll::Ready(Err(out));
            }
        }
        Poll::Pending
    })
    .await
}

/// The signal's waker: notes the wake, then wakes the task.
struct Tee {
    woken: AtomicBool,
    task: AtomicWaker,
}

impl Wake for Tee {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.store(true, Ordering::Release);
        self.task.wake();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;
    use std::time::Duration;

    use tokio::sync::Notify;

    use super::*;

    #[tokio::test]
    async fn work_that_ends_first_is_the_answer() {
        let never = std::future::pending::<()>();
        assert_eq!(until(async { 7 }, never).await, Ok(7));
    }

    #[tokio::test]
    async fn a_signal_that_fires_first_drops_the_work() {
        let notify = Arc::new(Notify::new());
        let fire = notify.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(20)).await;
            fire.notify_one();
        });
        let out = tokio::time::timeout(
            Duration::from_secs(5),
            until(std::future::pending::<u8>(), async move { notify.notified().await }),
        )
        .await
        .expect("the signal ends it");
        assert_eq!(out, Err(()));
    }

    #[tokio::test]
    async fn the_signal_is_polled_once_per_wake_of_its_own_not_per_wake_of_the_work() {
        // Work woken many times by itself; the signal never fires.
        let signal_polls = Arc::new(AtomicUsize::new(0));
        let counted = signal_polls.clone();
        let signal = poll_fn(move |_| {
            counted.fetch_add(1, Ordering::SeqCst);
            Poll::<()>::Pending
        });
        let work = async {
            for _ in 0..50 {
                tokio::task::yield_now().await;
            }
            "done"
        };
        assert_eq!(until(work, signal).await, Ok("done"));
        assert_eq!(signal_polls.load(Ordering::SeqCst), 1, "polled once, at the start");
    }

    #[tokio::test]
    async fn a_signal_that_has_fired_already_ends_it_at_the_first_poll() {
        let notify = Notify::new();
        notify.notify_one();
        assert_eq!(until(std::future::pending::<()>(), notify.notified()).await, Err(()));
    }
}
