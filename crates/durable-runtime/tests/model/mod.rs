//! An exhaustive interleaving checker for the core's own futures (issue
//! #15). A schedule is built from scratch by a scenario: cores, a model
//! receipt store, and the futures that race (duplicate `Driver::handle`
//! calls, the program's side). The scheduler polls one runnable future at a
//! time, where a future is runnable once it was woken (every future starts
//! woken); whenever more than one is runnable, which one goes next is a
//! choice. Every job a core queues (`Driver::poll_job`) joins the schedule as
//! one more future, as a driver would spawn it.
//!
//! Duplicates are twins: two futures of one request at one core are the
//! same until polled, so only the first of the twins not yet polled is
//! offered at a choice (polling another instead gives the same schedules
//! with the names swapped). That is the only pruning; a future that a
//! scenario may drop (a caller that goes away, [`World::drop_at_any_point`])
//! is nobody's twin, and its drop is offered only while it runs (dropping
//! a finished future is nothing).
//!
//! [`explore`] visits every sequence of choices depth first: each schedule
//! is replayed from a fresh world along a recorded prefix of choices, then
//! branches at the last choice that has an untried option, until none is
//! left. Nothing is sampled. A schedule fails when a future is still
//! pending once nothing is runnable (a deadlock, or a future nobody will
//! ever wake), when it runs too long, or when a scenario's check fails;
//! the failure names the schedule and replays it with its trace.

// `pub` for the test file that uses the module (as in `harness`).
#![allow(unreachable_pub)]

pub mod store;

use std::fmt::Write as _;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};

use durable_runtime::Collie;

/// What happened in one schedule, in order; recorded only when a failing
/// schedule is replayed to be reported (formatting every line of every
/// schedule would cost more than the schedules themselves).
#[derive(Clone, Default)]
pub struct Trace {
    lines: Arc<Mutex<Vec<String>>>,
    on: Arc<AtomicBool>,
}

impl Trace {
    /// Adds a line, when the trace is on.
    pub fn note(&self, line: impl FnOnce() -> String) {
        if self.on.load(Ordering::Relaxed) {
            self.lines.lock().unwrap().push(line());
        }
    }

    pub fn push(&self, line: String) {
        self.note(|| line);
    }

    fn recording() -> Trace {
        let trace = Trace::default();
        trace.on.store(true, Ordering::Relaxed);
        trace
    }

    fn text(&self) -> String {
        self.lines.lock().unwrap().join("\n")
    }
}

type Task = Pin<Box<dyn Future<Output = ()>>>;

/// One schedule's world, as a scenario builds it.
pub struct World {
    tasks: Vec<(String, Option<String>, Task)>,
    /// Droppers: (name, the future each drops).
    drops: Vec<(String, String)>,
    cores: Vec<(String, Collie)>,
    checks: Vec<Box<dyn FnOnce() -> Result<(), String>>>,
}

impl World {
    pub fn new() -> World {
        World { tasks: Vec::new(), drops: Vec::new(), cores: Vec::new(), checks: Vec::new() }
    }

    /// A future that races the others.
    pub fn spawn(&mut self, name: impl Into<String>, future: impl Future<Output = ()> + 'static) {
        self.tasks.push((name.into(), None, Box::pin(future)));
    }

    /// A future that races the others, and is the twin of every other
    /// future spawned with the same `twins` key: the same request to the
    /// same core (so equal until polled).
    pub fn spawn_twin(
        &mut self,
        name: impl Into<String>,
        twins: impl Into<String>,
        future: impl Future<Output = ()> + 'static,
    ) {
        self.tasks.push((name.into(), Some(twins.into()), Box::pin(future)));
    }

    /// A step that drops the future `target` wherever it stands (a caller
    /// that went away), at every point of the schedule in turn.
    pub fn drop_at_any_point(&mut self, name: impl Into<String>, target: impl Into<String>) {
        self.drops.push((name.into(), target.into()));
    }

    /// Runs `core`'s jobs as futures of the schedule (named `<name> job <n>`).
    pub fn drive_jobs_of(&mut self, name: impl Into<String>, core: &Collie) {
        self.cores.push((name.into(), core.clone()));
    }

    /// A check made once every future is done (in the order added).
    pub fn check(&mut self, check: impl FnOnce() -> Result<(), String> + 'static) {
        self.checks.push(Box::new(check));
    }
}

/// What a schedule chose at one branching: the `chosen`-th of `options`
/// runnable futures, in the order they were spawned.
#[derive(Debug, Clone, Copy)]
struct Choice {
    chosen: usize,
    options: usize,
}

/// A future's wake-up: a flag the scheduler reads.
struct Woken(AtomicBool);

impl Wake for Woken {
    fn wake(self: Arc<Self>) {
        self.0.store(true, Ordering::SeqCst);
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.0.store(true, Ordering::SeqCst);
    }
}

struct Slot {
    name: String,
    /// Its twins' key, until it is first polled.
    unpolled_twin: Option<String>,
    future: Option<Task>,
    /// For a dropper: the slot whose future it drops.
    drops: Option<usize>,
    woken: Arc<Woken>,
    waker: Waker,
}

impl Slot {
    fn new(name: String, twins: Option<String>, future: Task) -> Slot {
        let woken = Arc::new(Woken(AtomicBool::new(true)));
        let waker = Waker::from(woken.clone());
        Slot { name, unpolled_twin: twins, future: Some(future), drops: None, woken, waker }
    }

    fn runnable(&self) -> bool {
        self.future.is_some() && self.woken.0.load(Ordering::SeqCst)
    }
}

/// Polls past this many in one schedule are a livelock.
const MAX_STEPS: usize = 2_000;
/// More schedules than this in one scenario: the state space is not what
/// the scenario was sized for.
const MAX_SCHEDULES: u64 = 100_000;

/// What [`explore`] visited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Explored {
    /// Schedules run, each a distinct sequence of choices.
    pub schedules: u64,
    /// The most polls in one schedule.
    pub longest: usize,
}

/// One schedule's end: every choice it made, its polls, and whether it held.
struct Ran {
    choices: Vec<Choice>,
    steps: usize,
    verdict: Result<(), String>,
}

/// Runs one schedule along `prefix`, then the first option at every later
/// branching.
fn run_one(setup: &dyn Fn(&Trace) -> World, prefix: &[Choice], trace: &Trace) -> Ran {
    let world = setup(trace);
    let mut slots: Vec<Slot> = world.tasks.into_iter().map(|(n, t, f)| Slot::new(n, t, f)).collect();
    for (name, target) in world.drops {
        let target =
            slots.iter().position(|s| s.name == target).expect("a dropper's target is spawned first");
        // Not a twin any more: only it may be dropped.
        slots[target].unpolled_twin = None;
        let mut dropper = Slot::new(name, None, Box::pin(std::future::ready(())));
        dropper.drops = Some(target);
        slots.push(dropper);
    }
    let mut jobs = 0;
    let mut ran = Ran { choices: Vec::new(), steps: 0, verdict: Ok(()) };
    loop {
        for (name, core) in &world.cores {
            while let Some(job) = core.driver().poll_job() {
                jobs += 1;
                slots.push(Slot::new(format!("{name} job {jobs}"), None, job));
            }
        }
        // A dropper whose future is done already has nothing left to drop.
        for i in 0..slots.len() {
            if slots[i].drops.is_some_and(|target| slots[target].future.is_none()) {
                slots[i].future = None;
            }
        }
        let runnable: Vec<usize> = (0..slots.len())
            .filter(|&i| slots[i].runnable())
            .filter(|&i| match &slots[i].unpolled_twin {
                // A later twin not yet polled: the same as the first one.
                Some(key) => {
                    !slots[..i].iter().any(|s| s.runnable() && s.unpolled_twin.as_ref() == Some(key))
                }
                None => true,
            })
            .collect();
        if runnable.is_empty() {
            break;
        }
        let pick = if runnable.len() == 1 {
            0
        } else {
            let at = ran.choices.len();
            let chosen = match prefix.get(at) {
                Some(c) if c.options != runnable.len() => {
                    ran.verdict = Err(format!(
                        "not deterministic: branching {at} had {} options when first run, {} on replay",
                        c.options,
                        runnable.len()
                    ));
                    return ran;
                }
                Some(c) => c.chosen,
                None => 0,
            };
            ran.choices.push(Choice { chosen, options: runnable.len() });
            chosen
        };
        ran.steps += 1;
        if ran.steps > MAX_STEPS {
            ran.verdict = Err(format!("still running after {MAX_STEPS} polls (a livelock)"));
            return ran;
        }
        let index = runnable[pick];
        trace.note(|| {
            let names: Vec<&str> = runnable.iter().map(|&i| slots[i].name.as_str()).collect();
            format!("step {}: poll {}   (runnable: {})", ran.steps, slots[index].name, names.join(", "))
        });
        if let Some(target) = slots[index].drops {
            slots[index].future = None;
            if slots[target].future.take().is_some() {
                trace.note(|| format!("  {} dropped", slots[target].name));
            }
            continue;
        }
        let slot = &mut slots[index];
        slot.unpolled_twin = None;
        slot.woken.0.store(false, Ordering::SeqCst);
        let mut cx = Context::from_waker(&slot.waker);
        let future = slot.future.as_mut().expect("a runnable future is there");
        if let Poll::Ready(()) = future.as_mut().poll(&mut cx) {
            slot.future = None;
            trace.note(|| format!("  {} is done", slots[index].name));
        }
    }
    let pending: Vec<&str> = slots.iter().filter(|s| s.future.is_some()).map(|s| s.name.as_str()).collect();
    if !pending.is_empty() {
        ran.verdict = Err(format!(
            "nothing is runnable, yet these never finished (a deadlock): {}",
            pending.join(", ")
        ));
        return ran;
    }
    for check in world.checks {
        if let Err(why) = check() {
            ran.verdict = Err(why);
            return ran;
        }
    }
    ran
}

/// Runs every schedule of `setup`'s world, depth first; panics with the
/// first failing schedule, replayed with its trace.
pub fn explore(scenario: &str, setup: impl Fn(&Trace) -> World) -> Explored {
    let quiet = Trace::default();
    let mut prefix: Vec<Choice> = Vec::new();
    let mut explored = Explored { schedules: 0, longest: 0 };
    loop {
        let ran = run_one(&setup, &prefix, &quiet);
        explored.schedules += 1;
        explored.longest = explored.longest.max(ran.steps);
        if let Err(why) = ran.verdict {
            fail(scenario, &setup, explored.schedules, &ran.choices, &why);
        }
        assert!(
            explored.schedules < MAX_SCHEDULES,
            "scenario `{scenario}`: over {MAX_SCHEDULES} schedules, more than it was sized for"
        );
        // The next schedule: the last branching with an option left takes
        // its next option; the choices after it start again from the first.
        prefix = ran.choices;
        loop {
            match prefix.pop() {
                None => return explored,
                Some(c) if c.chosen + 1 < c.options => {
                    prefix.push(Choice { chosen: c.chosen + 1, options: c.options });
                    break;
                }
                Some(_) => {}
            }
        }
    }
}

/// Replays a failing schedule with its trace on, and panics with both.
fn fail(scenario: &str, setup: &dyn Fn(&Trace) -> World, number: u64, choices: &[Choice], why: &str) -> ! {
    let trace = Trace::recording();
    let again = run_one(setup, choices, &trace);
    let picks: Vec<String> = choices.iter().map(|c| format!("{}/{}", c.chosen, c.options)).collect();
    let mut report = format!(
        "scenario `{scenario}`, schedule #{number} fails: {why}\n\
         choices (the chosen-th of the runnable futures, at each branching): [{}]\n",
        picks.join(" ")
    );
    if again.verdict.as_ref().err().map(String::as_str) != Some(why) {
        let _ = writeln!(report, "(its replay ended otherwise: {:?})", again.verdict);
    }
    let _ = write!(report, "trace:\n{}", trace.text());
    panic!("{report}");
}

/// Drives a future to its end outside any schedule (for the checks made
/// after one): polled until ready, as nothing else runs meanwhile.
pub fn drive<F: Future>(future: F) -> F::Output {
    let mut future = std::pin::pin!(future);
    let mut cx = Context::from_waker(Waker::noop());
    for _ in 0..1_000 {
        if let Poll::Ready(v) = future.as_mut().poll(&mut cx) {
            return v;
        }
    }
    panic!("a future driven alone never finished")
}
