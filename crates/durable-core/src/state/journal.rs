//! The store's journals: ops the machine pushes and a job of the runtime
//! applies to the receipt store, in order, while the machine goes on.
//!
//! - Asks (§7.2): with a store that keeps asks, each ask raised is kept and
//!   each closed is forgotten, in the order they opened and closed, applied
//!   one at a time (an ask closed right after it opened is never kept
//!   after its forget). A write that raised or closed an ask answers once
//!   the store has applied every op pushed before its answer.
//! - Conversations: each item and title a pane shows, in order, applied in
//!   batches (one commit each); no write waits for them.

use std::collections::VecDeque;

use super::{Effect, Link};
use crate::data::receipt::KeptAskRecord;

/// One store write about asks.
#[derive(Clone, Debug)]
pub enum AskOp {
    /// Keep an ask that opened.
    Keep(Box<KeptAskRecord>),
    /// Forget an ask that closed, by its id.
    Forget(String),
}

/// The journal of asks.
pub type AsksJournal = Journal<AskOp>;

/// Which of the state's journals a waiter or a job means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JournalName {
    /// The kept asks' ([`AsksJournal`]).
    Asks,
    /// The conversations' (`ConversationsJournal`).
    Conversations,
}

/// The ops waiting for the store, and who waits for them.
#[derive(Clone, Debug)]
pub struct Journal<Op> {
    ops: VecDeque<Op>,
    /// A job applies the ops now (the journal's drain effect started it).
    draining: bool,
    /// The effect that starts the job.
    drain: fn() -> Effect,
    /// Ops pushed and ops applied (or failed, or dropped), ever.
    pushed: u64,
    applied: u64,
    /// Writes waiting for the ops pushed before them: (that count, waiter).
    waiters: Vec<(u64, Link)>,
}

impl<Op> Journal<Op> {
    /// An empty journal whose job `drain` starts.
    pub fn new(drain: fn() -> Effect) -> Self {
        Journal { ops: VecDeque::new(), draining: false, drain, pushed: 0, applied: 0, waiters: Vec::new() }
    }

    /// An op for the store; a job is started to apply it when none runs.
    pub fn push(&mut self, op: Op, effects: &mut Vec<Effect>) {
        self.ops.push_back(op);
        self.pushed += 1;
        if !std::mem::replace(&mut self.draining, true) {
            effects.push((self.drain)());
        }
    }

    /// The op pushed as number `index` (0 is the first ever pushed), while
    /// it still waits for the job.
    pub fn queued_mut(&mut self, index: u64) -> Option<&mut Op> {
        let first = self.pushed - self.ops.len() as u64;
        let at = index.checked_sub(first)?;
        self.ops.get_mut(usize::try_from(at).ok()?)
    }

    /// How many ops wait for the job.
    pub fn queued(&self) -> usize {
        self.ops.len()
    }

    /// The next op to apply, or `None`: the job ends (the next push starts
    /// another).
    pub fn take_next(&mut self) -> Option<Op> {
        let op = self.ops.pop_front();
        if op.is_none() {
            self.draining = false;
        }
        op
    }

    /// The next op when `fits` says it joins the batch the job is taking
    /// (the job goes on either way: it asks [`take_next`](Self::take_next)
    /// once the batch is applied).
    pub fn take_next_if(&mut self, fits: impl FnOnce(&Op) -> bool) -> Option<Op> {
        if self.ops.front().is_some_and(fits) { self.ops.pop_front() } else { None }
    }

    /// The store applied (or failed) the `count` ops the job took last.
    pub fn applied(&mut self, count: u64, effects: &mut Vec<Effect>) {
        self.applied += count;
        let applied = self.applied;
        self.waiters.retain(|(target, waiter)| {
            let done = *target <= applied;
            if done {
                effects.push(Effect::Wake(*waiter));
            }
            !done
        });
    }

    /// The `count` ops the job took were dropped before the store said
    /// anything (its future panicked, or the job was dropped): they count
    /// as applied, and the rest goes on in a new job, so that no write
    /// waits for ever.
    pub fn dropped(&mut self, count: u64, effects: &mut Vec<Effect>) {
        self.applied(count, effects);
        self.draining = !self.ops.is_empty();
        if self.draining {
            effects.push((self.drain)());
        }
    }

    /// How many ops were pushed so far: what a write waits for.
    pub fn pushed(&self) -> u64 {
        self.pushed
    }

    /// `waiter` is woken once the store applied the first `target` ops (at
    /// once if it has).
    pub fn wait(&mut self, target: u64, waiter: Link, effects: &mut Vec<Effect>) {
        if self.applied >= target {
            effects.push(Effect::Wake(waiter));
        } else {
            self.waiters.push((target, waiter));
        }
    }

    /// `waiter` stopped waiting (its request was dropped).
    pub fn stop_waiting(&mut self, waiter: Link) {
        self.waiters.retain(|(_, w)| *w != waiter);
    }

    /// How many ops the store applied (or failed, or dropped) so far: the
    /// ops numbered below it are done.
    pub fn applied_so_far(&self) -> u64 {
        self.applied
    }

    /// Whether the store applied the first `target` ops.
    pub fn has_applied(&self, target: u64) -> bool {
        self.applied >= target
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn woken(effects: &[Effect]) -> Vec<Link> {
        effects.iter().filter_map(|e| if let Effect::Wake(l) = e { Some(*l) } else { None }).collect()
    }

    fn drains(effects: &[Effect]) -> usize {
        effects.iter().filter(|e| matches!(e, Effect::DrainAsks)).count()
    }

    #[test]
    fn ops_go_in_order_on_one_job_and_writes_wake_once_theirs_are_applied() {
        let (mut j, mut fx) = (AsksJournal::new(|| Effect::DrainAsks), Vec::new());
        j.push(AskOp::Forget("a".into()), &mut fx);
        j.push(AskOp::Forget("b".into()), &mut fx);
        assert_eq!(drains(&fx), 1, "one job for both");
        j.wait(j.pushed(), 7, &mut fx);
        j.wait(1, 8, &mut fx);
        assert!(matches!(j.take_next(), Some(AskOp::Forget(id)) if id == "a"));
        j.applied(1, &mut fx);
        assert_eq!(woken(&fx), [8]);
        assert!(matches!(j.take_next(), Some(AskOp::Forget(id)) if id == "b"));
        j.applied(1, &mut fx);
        assert_eq!(woken(&fx), [8, 7]);
        assert!(j.take_next().is_none());
        j.push(AskOp::Forget("c".into()), &mut fx);
        assert_eq!(drains(&fx), 2, "the job ended: a new one");
        j.wait(1, 9, &mut fx);
        assert_eq!(woken(&fx), [8, 7, 9], "applied already");
    }

    #[test]
    fn a_dropped_op_counts_as_applied_and_the_rest_goes_on() {
        let (mut j, mut fx) = (AsksJournal::new(|| Effect::DrainAsks), Vec::new());
        j.push(AskOp::Forget("a".into()), &mut fx);
        j.push(AskOp::Forget("b".into()), &mut fx);
        j.wait(1, 5, &mut fx);
        let _ = j.take_next();
        j.dropped(1, &mut fx);
        assert_eq!((woken(&fx), drains(&fx)), (vec![5], 2));
        let _ = j.take_next();
        j.dropped(1, &mut fx);
        assert_eq!(drains(&fx), 2, "nothing left: no new job");
        assert!(j.has_applied(2));
    }
}
