//! The cap on a server's connections, and who keeps a place under it.
//!
//! Every accepted connection takes a slot before anything else happens to
//! it (its TLS handshake included). A connection is *proven* once it has
//! made a request its transport accepted — over HTTPS one with an accepted
//! bearer token; on the socket one from a process of the agent's own user
//! outside the agent's own tree (the agent's own processes are served but
//! never proven) — and a proven connection keeps its slot until it closes.
//!
//! When every slot is taken, a new connection displaces one that has not
//! proven itself: from the peer address (IPv6: the /64) holding the most
//! such connections, its oldest. A connection of Collie's that has shown
//! its token is thus never displaced by a flood, and a new one displaces
//! the flood's connections rather than the other way round when the flood
//! comes from other addresses. When every slot holds a proven connection,
//! the new one is refused: closed at once, before a byte is read.
//!
//! Displaced and refused connections are counted and told in one `tracing`
//! warning at most every 10 s.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

/// The shortest time between two warnings about the cap.
const WARN_EVERY: Duration = Duration::from_secs(10);

/// The slots of one server.
#[derive(Debug)]
pub(crate) struct Slots {
    max: usize,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    next_id: u64,
    /// Oldest first.
    open: Vec<Entry>,
    /// Since the last warning.
    displaced: u64,
    refused: u64,
    warned: Option<Instant>,
}

#[derive(Debug)]
struct Entry {
    id: u64,
    group: Option<u128>,
    proven: bool,
    kick: Arc<Notify>,
}

/// The peers whose connections compete with each other: one IPv4 address,
/// or one IPv6 /64 (what one host or one home network holds).
fn group_of(ip: IpAddr) -> u128 {
    match ip {
        IpAddr::V4(v4) => v4.to_ipv6_mapped().to_bits(),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => group_of(IpAddr::V4(v4)),
            None => v6.to_bits() & !u128::from(u64::MAX),
        },
    }
}

impl Slots {
    /// At most `max` connections at once (at least 1).
    pub(crate) fn new(max: usize) -> Arc<Slots> {
        Arc::new(Slots { max: max.max(1), state: Mutex::new(State::default()) })
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A slot for a connection just accepted from `peer`, displacing an
    /// unproven connection when all are taken; `None` when every slot holds
    /// a proven connection (the new one is refused).
    pub(crate) fn admit(self: &Arc<Self>, peer: Option<IpAddr>) -> Option<Slot> {
        let mut state = self.state();
        if state.open.len() >= self.max {
            match victim(&state.open) {
                Some(i) => {
                    let displaced = state.open.remove(i);
                    displaced.kick.notify_one();
                    state.displaced += 1;
                    self.warn(&mut state);
                }
                None => {
                    state.refused += 1;
                    self.warn(&mut state);
                    return None;
                }
            }
        }
        let id = state.next_id;
        state.next_id += 1;
        let kick = Arc::new(Notify::new());
        state.open.push(Entry { id, group: peer.map(group_of), proven: false, kick: kick.clone() });
        Some(Slot { slots: self.clone(), id, kick, proven: AtomicBool::new(false) })
    }

    /// How many connections hold a slot.
    #[cfg(test)]
    pub(crate) fn open(&self) -> usize {
        self.state().open.len()
    }

    fn warn(&self, state: &mut State) {
        let now = Instant::now();
        if state.warned.is_some_and(|at| now.duration_since(at) < WARN_EVERY) {
            return;
        }
        tracing::warn!(
            max_connections = self.max,
            displaced = state.displaced,
            refused = state.refused,
            "connection cap reached: connections without an accepted request were displaced, or new ones refused"
        );
        state.displaced = 0;
        state.refused = 0;
        state.warned = Some(now);
    }
}

/// The connection to displace: not proven, from the group holding the most
/// unproven connections, the oldest of them; `None` when all are proven.
fn victim(open: &[Entry]) -> Option<usize> {
    let mut counts: HashMap<Option<u128>, usize> = HashMap::new();
    for entry in open.iter().filter(|e| !e.proven) {
        *counts.entry(entry.group).or_default() += 1;
    }
    let most = counts.values().copied().max()?;
    open.iter().position(|e| !e.proven && counts[&e.group] == most)
}

/// One connection's place under the cap; dropping it frees the place.
#[derive(Debug)]
pub(crate) struct Slot {
    slots: Arc<Slots>,
    id: u64,
    kick: Arc<Notify>,
    proven: AtomicBool,
}

impl Slot {
    /// Marks the connection proven (it keeps its slot from now on). False
    /// when it was displaced meanwhile: it must then close without serving
    /// the request.
    pub(crate) fn prove(&self) -> bool {
        if self.proven.load(Ordering::Acquire) {
            return true;
        }
        let mut state = self.slots.state();
        match state.open.iter_mut().find(|e| e.id == self.id) {
            Some(entry) => {
                entry.proven = true;
                self.proven.store(true, Ordering::Release);
                true
            }
            None => false,
        }
    }

    /// Completes when a newer connection displaced this one.
    pub(crate) async fn displaced(&self) {
        self.kick.notified().await;
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut state = self.slots.state();
        if let Some(i) = state.open.iter().position(|e| e.id == self.id) {
            state.open.remove(i);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::future::Future;
    use std::pin::pin;
    use std::task::{Context, Poll, Waker};

    use super::*;

    fn ip(s: &str) -> Option<IpAddr> {
        Some(s.parse().unwrap())
    }

    fn is_displaced(slot: &Slot) -> bool {
        let mut cx = Context::from_waker(Waker::noop());
        matches!(pin!(slot.displaced()).poll(&mut cx), Poll::Ready(()))
    }

    #[test]
    fn past_the_cap_the_oldest_unproven_connection_is_displaced() {
        let slots = Slots::new(3);
        let a = slots.admit(None).unwrap();
        let b = slots.admit(None).unwrap();
        let c = slots.admit(None).unwrap();
        assert!(a.prove());
        let d = slots.admit(None).unwrap();
        assert_eq!(slots.open(), 3);
        assert!(is_displaced(&b), "the oldest unproven goes");
        assert!(!is_displaced(&a) && !is_displaced(&c) && !is_displaced(&d));
        // Displaced, it cannot prove itself any more.
        assert!(!b.prove());
        drop(b);
        assert_eq!(slots.open(), 3);
    }

    #[test]
    fn when_every_slot_is_proven_a_new_connection_is_refused() {
        let slots = Slots::new(2);
        let a = slots.admit(None).unwrap();
        let b = slots.admit(None).unwrap();
        assert!(a.prove() && b.prove());
        assert!(slots.admit(None).is_none());
        drop(a);
        assert!(slots.admit(None).is_some(), "a freed slot is taken again");
    }

    #[test]
    fn the_peer_with_the_most_unproven_connections_loses_one_first() {
        let slots = Slots::new(4);
        let collie = slots.admit(ip("192.0.2.1")).unwrap();
        let flood: Vec<Slot> = (0..3).map(|_| slots.admit(ip("198.51.100.7")).unwrap()).collect();
        // Collie's new connection is the oldest unproven one, yet the flood's
        // address holds more.
        let more: Vec<Slot> = (0..10).map(|_| slots.admit(ip("198.51.100.7")).unwrap()).collect();
        assert!(!is_displaced(&collie));
        assert!(flood.iter().all(is_displaced));
        assert_eq!(more.iter().filter(|s| is_displaced(s)).count(), 7);
        assert!(collie.prove());
    }

    #[test]
    fn an_ipv6_slash_64_is_one_peer_and_a_mapped_ipv4_address_is_its_ipv4_address() {
        assert_eq!(group_of("2001:db8::1".parse().unwrap()), group_of("2001:db8::ffff:2".parse().unwrap()));
        assert_ne!(group_of("2001:db8::1".parse().unwrap()), group_of("2001:db8:0:1::1".parse().unwrap()));
        assert_eq!(group_of("::ffff:192.0.2.1".parse().unwrap()), group_of("192.0.2.1".parse().unwrap()));
        assert_ne!(group_of("192.0.2.1".parse().unwrap()), group_of("192.0.2.2".parse().unwrap()));
    }

    #[test]
    fn a_cap_of_zero_is_one() {
        let slots = Slots::new(0);
        let a = slots.admit(None).unwrap();
        let _b = slots.admit(None).unwrap();
        assert!(is_displaced(&a));
        assert_eq!(slots.open(), 1);
    }

    #[test]
    fn a_dropped_slot_frees_its_place() {
        let slots = Slots::new(1);
        let a = slots.admit(None).unwrap();
        assert!(a.prove());
        drop(a);
        assert_eq!(slots.open(), 0);
        let b = slots.admit(None).unwrap();
        assert!(b.prove());
    }
}
