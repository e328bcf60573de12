//! The driver: runs the core's jobs and fires its deadlines with tokio time.

use std::sync::Arc;
use std::time::Duration;

use durable_runtime::{Driver, Job};
use durable_types::Timestamp;
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// The longest the driver sleeps before looking at the clock again, so that
/// a wall clock set forward still fires deadlines close to on time.
const MAX_SLEEP: Duration = Duration::from_secs(30);

/// After a tick that left a deadline still due (a core that does not move
/// its deadline), wait at least this long rather than spin.
const MIN_RETICK: Duration = Duration::from_millis(10);

/// The driver's view of the core (a trait so that tests can drive a stand-in).
pub(crate) trait Drive: Send + Sync + 'static {
    fn next_deadline(&self) -> Option<Timestamp>;
    fn tick(&self, now: Timestamp);
    fn poll_job(&self) -> Option<Job>;
    fn set_wakeup(&self, wake: Box<dyn Fn() + Send + Sync>);
    fn now(&self) -> Timestamp;
}

impl Drive for Driver {
    fn next_deadline(&self) -> Option<Timestamp> {
        Driver::next_deadline(self)
    }
    fn tick(&self, now: Timestamp) {
        Driver::tick(self, now)
    }
    fn poll_job(&self) -> Option<Job> {
        Driver::poll_job(self)
    }
    fn set_wakeup(&self, wake: Box<dyn Fn() + Send + Sync>) {
        Driver::set_wakeup(self, wake)
    }
    fn now(&self) -> Timestamp {
        self.collie().now()
    }
}

/// Spawns the loop that drives `core` until `stop` is cancelled:
///
/// 1. every job from [`Driver::poll_job`] is spawned on the runtime;
/// 2. the loop sleeps until [`Driver::next_deadline`] (by the core's own
///    clock) or until the core wakes it ([`Driver::set_wakeup`]: a job queued,
///    a deadline moved earlier);
/// 3. a deadline reached is fired with [`Driver::tick`] at the clock's time.
///
/// The driver registers the core's wake-up; a core has one driver. Stop it
/// only after the connections have finished: a request in flight may wait on
/// a deadline. Must be called inside a tokio runtime.
pub fn spawn_driver(core: Driver, stop: CancellationToken) -> JoinHandle<()> {
    spawn_drive(core, stop)
}

pub(crate) fn spawn_drive<D: Drive>(target: D, stop: CancellationToken) -> JoinHandle<()> {
    let notify = Arc::new(Notify::new());
    let waker = notify.clone();
    target.set_wakeup(Box::new(move || waker.notify_one()));
    tokio::spawn(async move {
        let mut last_tick: Option<Timestamp> = None;
        loop {
            while let Some(job) = target.poll_job() {
                tokio::spawn(job);
            }
            let now = target.now();
            let wait = match target.next_deadline() {
                None => MAX_SLEEP,
                Some(due) => {
                    let wait = Duration::from_millis(due.millis_since(now)).min(MAX_SLEEP);
                    if last_tick.is_some_and(|t| due <= t) { wait.max(MIN_RETICK) } else { wait }
                }
            };
            let deadline_passed = tokio::select! {
                biased;
                () = stop.cancelled() => return,
                () = notify.notified() => false,
                () = tokio::time::sleep(wait) => true,
            };
            if deadline_passed {
                let now = target.now();
                if target.next_deadline().is_some_and(|due| due <= now) {
                    target.tick(now);
                    last_tick = Some(now);
                }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use durable_runtime::{Clock, ManualClock};

    use super::*;
    use crate::system::SystemClock;

    /// A core stand-in: a deadline list, a job queue, a wake-up, ticks seen.
    #[derive(Default)]
    struct Fake {
        deadlines: Mutex<Vec<Timestamp>>,
        jobs: Mutex<Vec<Job>>,
        wake: Mutex<Option<Box<dyn Fn() + Send + Sync>>>,
        ticks: Mutex<Vec<Timestamp>>,
    }

    impl Fake {
        fn wake(&self) {
            if let Some(w) = self.wake.lock().unwrap().as_ref() {
                w();
            }
        }
    }

    impl Drive for Arc<Fake> {
        fn next_deadline(&self) -> Option<Timestamp> {
            self.deadlines.lock().unwrap().iter().min().copied()
        }
        fn tick(&self, now: Timestamp) {
            self.deadlines.lock().unwrap().retain(|d| *d > now);
            self.ticks.lock().unwrap().push(now);
        }
        fn poll_job(&self) -> Option<Job> {
            self.jobs.lock().unwrap().pop()
        }
        fn set_wakeup(&self, wake: Box<dyn Fn() + Send + Sync>) {
            *self.wake.lock().unwrap() = Some(wake);
        }
        fn now(&self) -> Timestamp {
            SystemClock.now()
        }
    }

    async fn eventually(what: &str, f: impl Fn() -> bool) {
        for _ in 0..200 {
            if f() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("never happened: {what}");
    }

    #[tokio::test]
    async fn the_driver_fires_a_deadline_when_it_is_reached() {
        let fake = Arc::new(Fake::default());
        let stop = CancellationToken::new();
        let due = SystemClock.now().plus_millis(150);
        fake.deadlines.lock().unwrap().push(due);
        let driver = spawn_drive(fake.clone(), stop.clone());
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(fake.ticks.lock().unwrap().is_empty(), "ticked before the deadline");
        eventually("tick", || !fake.ticks.lock().unwrap().is_empty()).await;
        assert!(fake.ticks.lock().unwrap()[0] >= due);
        stop.cancel();
        driver.await.unwrap();
    }

    #[tokio::test]
    async fn a_deadline_moved_earlier_wakes_the_driver() {
        let fake = Arc::new(Fake::default());
        let stop = CancellationToken::new();
        fake.deadlines.lock().unwrap().push(SystemClock.now().plus_millis(3_600_000));
        let driver = spawn_drive(fake.clone(), stop.clone());
        tokio::time::sleep(Duration::from_millis(20)).await;
        fake.deadlines.lock().unwrap().push(SystemClock.now().plus_millis(30));
        fake.wake();
        eventually("tick after wake-up", || fake.ticks.lock().unwrap().len() == 1).await;
        stop.cancel();
        driver.await.unwrap();
    }

    #[tokio::test]
    async fn queued_jobs_run_on_the_runtime() {
        let fake = Arc::new(Fake::default());
        let stop = CancellationToken::new();
        let driver = spawn_drive(fake.clone(), stop.clone());
        let ran = Arc::new(AtomicUsize::new(0));
        for _ in 0..3 {
            let ran = ran.clone();
            fake.jobs.lock().unwrap().push(Box::pin(async move {
                ran.fetch_add(1, Ordering::SeqCst);
            }));
        }
        fake.wake();
        eventually("three jobs", || ran.load(Ordering::SeqCst) == 3).await;
        stop.cancel();
        driver.await.unwrap();
    }

    #[tokio::test]
    async fn the_driver_stops_on_shutdown() {
        let clock = ManualClock::new(Timestamp::from_millis(1));
        let core = durable_runtime::create_core(
            durable_runtime::CoreOptions::builder().clock(clock).epoch("0123456789abcdef").build().unwrap(),
        );
        let stop = CancellationToken::new();
        let driver = spawn_driver(core.driver(), stop.clone());
        stop.cancel();
        tokio::time::timeout(Duration::from_secs(5), driver).await.unwrap().unwrap();
    }
}
