//! The asks the last run left open (§7.2), as this run hands them out:
//! read from the store once — by the agent's `kept_asks()` or by
//! `ready()`, whichever comes first, the other waiting for it — handed to
//! the agent, taken back when it drops one unclaimed, and closed at
//! `ready()` when nobody claimed them.

use super::{Effect, Link};
use crate::data::receipt::KeptAskRecord;

/// Where the asks of the last run stand in this one.
#[derive(Clone, Debug, Default)]
pub enum KeptPhase {
    /// Not read from the store yet.
    #[default]
    NotLoaded,
    /// Being read; these wait for the read to end.
    Loading(Vec<Link>),
    /// Read; these are not handed to the agent (or were handed back).
    Loaded(Vec<KeptAskRecord>),
    /// `ready()` closed those nobody claimed: nothing more is handed out.
    Settled,
}

/// What a caller that wants the kept asks does next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KeptLoad {
    /// Read them from the store, then say how it went
    /// ([`KeptPhase::loaded`] or [`KeptPhase::load_failed`]).
    Load,
    /// Another caller reads them: wait for it ([`KeptPhase::wait`]).
    Wait,
    /// They were read already.
    Done,
}

impl KeptPhase {
    /// Who reads the asks from the store.
    pub fn begin_load(&mut self) -> KeptLoad {
        match self {
            KeptPhase::NotLoaded => {
                *self = KeptPhase::Loading(Vec::new());
                KeptLoad::Load
            }
            KeptPhase::Loading(_) => KeptLoad::Wait,
            KeptPhase::Loaded(_) | KeptPhase::Settled => KeptLoad::Done,
        }
    }

    /// `waiter` is woken when the read ends (at once if none runs).
    pub fn wait(&mut self, waiter: Link, effects: &mut Vec<Effect>) {
        match self {
            KeptPhase::Loading(waiters) => waiters.push(waiter),
            _ => effects.push(Effect::Wake(waiter)),
        }
    }

    /// The read ended with `records` (kept unless `ready()` settled
    /// meanwhile, which a read never outlives: its caller settles).
    pub fn loaded(&mut self, records: Vec<KeptAskRecord>, effects: &mut Vec<Effect>) {
        if matches!(self, KeptPhase::Loading(_)) {
            self.wake(effects);
            *self = KeptPhase::Loaded(records);
        }
    }

    /// The read failed or was dropped: the next caller reads again.
    pub fn load_failed(&mut self, effects: &mut Vec<Effect>) {
        if matches!(self, KeptPhase::Loading(_)) {
            self.wake(effects);
            *self = KeptPhase::NotLoaded;
        }
    }

    fn wake(&mut self, effects: &mut Vec<Effect>) {
        if let KeptPhase::Loading(waiters) = self {
            effects.extend(waiters.drain(..).map(Effect::Wake));
        }
    }

    /// The asks read and not handed out yet, handed out now.
    pub fn take(&mut self) -> Vec<KeptAskRecord> {
        match self {
            KeptPhase::Loaded(left) => std::mem::take(left),
            _ => Vec::new(),
        }
    }

    /// An ask handed out and dropped unclaimed comes back, or, once
    /// nothing more is handed out, is the caller's to close (`Some`).
    pub fn give_back(&mut self, record: KeptAskRecord) -> Option<KeptAskRecord> {
        match self {
            KeptPhase::Loaded(left) => {
                left.push(record);
                None
            }
            _ => Some(record),
        }
    }

    /// `ready()`: nothing more is handed out; what is left is the caller's
    /// to close. Who waited for a read is woken.
    pub fn settle(&mut self, effects: &mut Vec<Effect>) -> Vec<KeptAskRecord> {
        self.wake(effects);
        match std::mem::replace(self, KeptPhase::Settled) {
            KeptPhase::Loaded(left) => left,
            _ => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_reader_the_others_wait_and_a_failed_read_lets_the_next_one_read() {
        let (mut k, mut fx) = (KeptPhase::default(), Vec::new());
        assert_eq!(k.begin_load(), KeptLoad::Load);
        assert_eq!(k.begin_load(), KeptLoad::Wait);
        k.wait(3, &mut fx);
        k.load_failed(&mut fx);
        assert!(matches!(fx[..], [Effect::Wake(3)]));
        assert_eq!(k.begin_load(), KeptLoad::Load, "read again");
        k.loaded(Vec::new(), &mut fx);
        assert_eq!(k.begin_load(), KeptLoad::Done);
        k.load_failed(&mut fx);
        assert_eq!(k.begin_load(), KeptLoad::Done, "a late failure changes nothing");
        assert!(k.take().is_empty());
        assert!(k.settle(&mut fx).is_empty());
        assert_eq!(k.begin_load(), KeptLoad::Done);
    }
}
