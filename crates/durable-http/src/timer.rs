//! The header-read timer: one tokio sleep per connection, re-armed for each
//! request instead of made anew.
//!
//! hyper drops its header-read [`Sleep`] once a request's head is in and
//! asks its timer for a new one when it waits for the next request. With
//! hyper-util's `TokioTimer` each of those is a fresh tokio sleep: a box, an
//! entry put into tokio's timer wheel under the driver's lock, and taken out
//! again under it when dropped, about 1,800 instructions a request
//! (`docs/benchmarks.md`). A [`ConnectionTimer`] keeps one tokio sleep for
//! its connection and lends it to each sleep hyper asks for: re-arming it at
//! a later deadline only moves its expiry (tokio leaves its wheel alone for
//! that), so a request costs a small box and an uncontended lock.
//!
//! Only one sleep holds the connection's at a time; one asked for while it
//! is lent is a plain tokio sleep of its own, so any number of sleeps stays
//! correct. A lent sleep's deadline stays armed after it is dropped: at
//! worst the connection's task is woken once for nothing.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use hyper::rt::{Sleep, Timer};

/// A [`Timer`] for one connection's hyper state, reusing one tokio sleep.
#[derive(Clone)]
pub(crate) struct ConnectionTimer {
    shared: Arc<Shared>,
}

struct Shared {
    /// The connection's tokio sleep; armed at the deadline of the sleep
    /// that holds it, if any.
    sleep: Mutex<Pin<Box<tokio::time::Sleep>>>,
    /// Whether a [`Lent`] holds `sleep`.
    lent: AtomicBool,
}

impl Shared {
    fn sleep(&self) -> MutexGuard<'_, Pin<Box<tokio::time::Sleep>>> {
        // Nothing panics while holding the lock; a poisoned one is still
        // a sleep.
        self.sleep.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl ConnectionTimer {
    /// A timer whose sleep is not armed yet. Must be made inside a tokio
    /// runtime with time enabled.
    pub(crate) fn new() -> Self {
        // Armed for real by the first sleep lent; until then never polled,
        // so never in tokio's wheel.
        let idle = tokio::time::sleep(Duration::from_secs(24 * 3600));
        ConnectionTimer {
            shared: Arc::new(Shared { sleep: Mutex::new(Box::pin(idle)), lent: AtomicBool::new(false) }),
        }
    }
}

impl Timer for ConnectionTimer {
    fn sleep(&self, duration: Duration) -> Pin<Box<dyn Sleep>> {
        self.sleep_until(self.now() + duration)
    }

    fn sleep_until(&self, deadline: Instant) -> Pin<Box<dyn Sleep>> {
        if self.shared.lent.swap(true, Ordering::Acquire) {
            return Box::pin(Own { inner: Box::pin(tokio::time::sleep_until(deadline.into())) });
        }
        self.shared.sleep().as_mut().reset(deadline.into());
        Box::pin(Lent { shared: self.shared.clone() })
    }

    fn reset(&self, sleep: &mut Pin<Box<dyn Sleep>>, new_deadline: Instant) {
        if let Some(lent) = sleep.as_mut().downcast_mut_pin::<Lent>() {
            lent.shared.sleep().as_mut().reset(new_deadline.into());
        } else if let Some(mut own) = sleep.as_mut().downcast_mut_pin::<Own>() {
            own.inner.as_mut().reset(new_deadline.into());
        } else {
            *sleep = self.sleep_until(new_deadline);
        }
    }

    fn now(&self) -> Instant {
        tokio::time::Instant::now().into()
    }
}

/// A sleep holding its connection's tokio sleep.
struct Lent {
    shared: Arc<Shared>,
}

impl Future for Lent {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        self.shared.sleep().as_mut().poll(cx)
    }
}

impl Sleep for Lent {}

impl Drop for Lent {
    fn drop(&mut self) {
        self.shared.lent.store(false, Ordering::Release);
    }
}

/// A sleep of its own, for when the connection's is lent already.
struct Own {
    inner: Pin<Box<tokio::time::Sleep>>,
}

impl Future for Own {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        self.inner.as_mut().poll(cx)
    }
}

impl Sleep for Own {}

#[cfg(test)]
mod tests {
    use std::future::poll_fn;

    use super::*;

    fn is_ready(sleep: &mut Pin<Box<dyn Sleep>>) -> bool {
        let waker = futures_util::task::noop_waker();
        sleep.as_mut().poll(&mut Context::from_waker(&waker)).is_ready()
    }

    #[tokio::test]
    async fn a_lent_sleep_ends_at_its_deadline_and_the_next_one_reuses_the_connections() {
        let timer = ConnectionTimer::new();
        let start = Instant::now();
        let mut first = timer.sleep(Duration::from_millis(30));
        assert!(first.is::<Lent>());
        assert!(!is_ready(&mut first));
        poll_fn(|cx| first.as_mut().poll(cx)).await;
        assert!(start.elapsed() >= Duration::from_millis(30));
        drop(first);

        // The connection's sleep is free again: the next one holds it, at
        // its own (later) deadline, not the elapsed one.
        let mut second = timer.sleep(Duration::from_millis(40));
        assert!(second.is::<Lent>());
        assert!(!is_ready(&mut second), "a reused sleep starts over");
        let armed = Instant::now();
        poll_fn(|cx| second.as_mut().poll(cx)).await;
        assert!(armed.elapsed() >= Duration::from_millis(35));
    }

    #[tokio::test]
    async fn a_sleep_asked_for_while_the_connections_is_lent_is_its_own() {
        let timer = ConnectionTimer::new();
        let long = timer.sleep(Duration::from_secs(60));
        let mut short = timer.sleep(Duration::from_millis(20));
        assert!(long.is::<Lent>());
        assert!(short.is::<Own>(), "two sleeps never share one deadline");
        poll_fn(|cx| short.as_mut().poll(cx)).await;
        let mut long = long;
        assert!(!is_ready(&mut long), "the lent sleep keeps its own deadline");
    }

    #[tokio::test]
    async fn reset_moves_either_kind_of_sleep() {
        let timer = ConnectionTimer::new();
        let mut lent = timer.sleep(Duration::from_secs(60));
        let mut own = timer.sleep(Duration::from_secs(60));
        let soon = Instant::now() + Duration::from_millis(20);
        timer.reset(&mut lent, soon);
        timer.reset(&mut own, soon);
        assert!(lent.is::<Lent>() && own.is::<Own>(), "reset keeps the sleep it was given");
        poll_fn(|cx| lent.as_mut().poll(cx)).await;
        poll_fn(|cx| own.as_mut().poll(cx)).await;
        assert!(Instant::now() >= soon);

        // An earlier deadline than the one armed is honoured too.
        let mut again = {
            drop(lent);
            timer.sleep(Duration::from_secs(60))
        };
        assert!(again.is::<Lent>());
        timer.reset(&mut again, Instant::now() + Duration::from_millis(10));
        tokio::time::timeout(Duration::from_secs(5), poll_fn(|cx| again.as_mut().poll(cx)))
            .await
            .expect("an earlier deadline fires");
    }
}
