//! `ItemCadence`: partial items at most once per interval, an unchanged item
//! not written twice.

use std::time::{Duration, Instant};

use durable_runtime::ItemCadence;
use durable_runtime::types::Item;

#[test]
fn partial_items_go_at_most_once_per_interval() {
    let start = Instant::now();
    let mut cadence = ItemCadence::new(Duration::from_millis(250));
    assert!(cadence.partial_due(start), "nothing went yet: due at once");
    assert_eq!(cadence.next_partial_at(), None);
    cadence.partials_written(start);
    assert!(!cadence.partial_due(start + Duration::from_millis(100)));
    assert!(!cadence.partial_due(start + Duration::from_millis(249)));
    assert!(cadence.partial_due(start + Duration::from_millis(250)));
    assert_eq!(cadence.next_partial_at(), Some(start + Duration::from_millis(250)));
}

#[test]
fn an_item_given_again_unchanged_is_dropped_and_a_new_body_is_written() {
    let mut cadence = ItemCadence::new(Duration::from_millis(250));
    let reply = Item::reply("r1", "Hello").unwrap();
    assert_eq!(cadence.changed(vec![reply.clone()]).len(), 1);
    assert!(cadence.changed(vec![reply.clone()]).is_empty(), "unchanged: not written again");
    let grown = Item::reply("r1", "Hello!").unwrap();
    let other = Item::reply("r2", "Hello").unwrap();
    let out = cadence.changed(vec![reply.clone(), grown.clone(), other.clone()]);
    assert_eq!(out, vec![grown, other], "in order, the unchanged one left out");
    assert_eq!(cadence.remembered_items(), 2);
}

#[test]
fn reset_forgets_what_was_written_and_when() {
    let start = Instant::now();
    let mut cadence = ItemCadence::new(Duration::from_millis(250));
    let reply = Item::reply("r1", "Hello").unwrap();
    cadence.partials_written(start);
    assert_eq!(cadence.changed(vec![reply.clone()]).len(), 1);
    cadence.reset();
    assert_eq!(cadence.remembered_items(), 0);
    assert!(cadence.partial_due(start));
    assert_eq!(cadence.changed(vec![reply]).len(), 1);
}
