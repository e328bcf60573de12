//! The read path through `&self` (`Machine::answer_read_kept`), driven as
//! a sequence on the machine alone — no runtime, no lock: every read it
//! answers is exactly what `Machine::answer_read` (through `&mut self`)
//! answers the same read, and it answers the polls between two changes —
//! the state's `304` and kept answers, a pane's encoded tail or kept
//! snapshot — while anything that must be made is `NeedsWrite`.

mod standard;

use durable_core::PaneOptions;
use durable_core::machine::{Machine, MachineConfig};
use durable_core::routes::NeedsWrite;
use durable_core::types::exchange::{Caller, Read, Response};
use durable_core::types::{Id, Item, Timestamp};

fn machine(tail_limit: usize) -> (Machine, Id) {
    let mut m = Machine::new(MachineConfig { tail_limit, ..standard::config() });
    let ws = m.add_workspace("support", "Support").unwrap();
    let tab = m.add_tab(&ws, "main", "Tickets").unwrap();
    let pane = m.add_pane(&tab, "ticket-1", PaneOptions::new("Maria")).unwrap();
    (m, pane)
}

fn write(m: &mut Machine, pane: &Id, n: u32) {
    let item = Item::reply(&format!("r-{n}"), format!("reply {n}")).unwrap();
    m.write_item(pane, item, Timestamp::from_millis(1_000 + u64::from(n))).unwrap();
}

fn read<'a>(path: &'a str, query: Option<&'a str>, if_none_match: Option<&'a str>) -> Read<'a> {
    Read { path, query, if_none_match, caller: Caller::OtherProcess }
}

/// The read through `&self`, which must answer it.
fn kept(m: &Machine, r: &Read<'_>) -> Option<Response> {
    m.answer_read_kept(r)
        .unwrap_or_else(|NeedsWrite| panic!("{} {:?}: not answered through &self", r.path, r.query))
}

/// The read through `&mut self`, after checking that `&self` could not
/// answer it (the answer is to be made).
fn made(m: &mut Machine, r: &Read<'_>) -> Option<Response> {
    assert_eq!(m.answer_read_kept(r), Err(NeedsWrite), "{} {:?}: nothing kept yet", r.path, r.query);
    m.answer_read(r)
}

#[test]
fn the_state_between_two_changes_is_answered_through_ref_with_the_same_bytes_and_tag() {
    let (mut m, pane) = machine(100);
    let full = read("/v1/state", None, None);
    let first = made(&mut m, &full).unwrap();
    assert_eq!(first.status, 200);
    assert_eq!(kept(&m, &full), Some(first.clone()), "the kept answer is the one made");
    assert_eq!(m.answer_read(&full), Some(first.clone()), "and the one the write path gives again");
    let tag = first.etag.clone().unwrap();
    let same = read("/v1/state", Some("since=0"), Some(tag.as_str()));
    let not_modified = kept(&m, &same).unwrap();
    assert_eq!((not_modified.status, not_modified.etag.as_ref()), (304, Some(&tag)));
    assert_eq!(m.answer_read(&same), Some(not_modified));

    // A change: the tag is new, so nothing is kept for it.
    write(&mut m, &pane, 1);
    let after_change = made(&mut m, &same).unwrap();
    assert_eq!(after_change.status, 200, "the old tag no longer matches");
    assert_ne!(after_change.etag.as_ref(), Some(&tag));
    assert_eq!(kept(&m, &same), Some(after_change.clone()));
    // A delta since the first answer's seq: made once, then kept.
    let seq = serde_json::from_slice::<serde_json::Value>(&first.body).unwrap()["seq"].as_u64().unwrap();
    let since = format!("since={seq}");
    let delta_read = read("/v1/state", Some(&since), None);
    let delta = made(&mut m, &delta_read).unwrap();
    assert_eq!(serde_json::from_slice::<serde_json::Value>(&delta.body).unwrap()["full"], false);
    assert_eq!(kept(&m, &delta_read), Some(delta));
    // The tag of the current seq matches through &self too.
    let current = after_change.etag.unwrap();
    let again = read("/v1/state", None, Some(current.as_str()));
    assert_eq!(kept(&m, &again).map(|r| r.status), Some(304));
}

#[test]
fn a_panes_events_are_answered_through_ref_once_encoded_and_its_snapshot_once_kept() {
    let (mut m, pane) = machine(4);
    write(&mut m, &pane, 1);
    let path = format!("/v1/panes/{pane}/events");
    let tail = read(&path, Some("after=0"), None);
    let page = made(&mut m, &tail).unwrap();
    assert_eq!(page.status, 200);
    assert_eq!(kept(&m, &tail), Some(page.clone()), "every event after 0 is encoded now");
    let later = read(&path, Some("after=1"), None);
    assert_eq!(kept(&m, &later), m.answer_read(&later), "a later page of encoded events");
    // A new event is not encoded yet.
    write(&mut m, &pane, 2);
    let page2 = made(&mut m, &tail).unwrap();
    assert_ne!(page2.body, page.body);
    assert_eq!(kept(&m, &tail), Some(page2));
    // Fallen behind the tail (4 events): a snapshot, made once, then kept.
    for n in 3..12 {
        write(&mut m, &pane, n);
    }
    let behind = read(&path, Some("after=1"), None);
    let snapshot = made(&mut m, &behind).unwrap();
    assert_eq!(serde_json::from_slice::<serde_json::Value>(&snapshot.body).unwrap()["snapshot"], true);
    assert_eq!(kept(&m, &behind), Some(snapshot));
}

#[test]
fn refusals_hello_and_other_routes_answer_through_ref_as_the_write_path_does() {
    let (mut m, _) = machine(100);
    for (path, query) in [
        ("/hello", None),
        ("/v1/nowhere", None),
        ("/v1/panes/nobody/events", None),
        ("/v1/panes/a%2Fb/events", None),
        ("/v1/state", Some("since=x")),
        ("/v1/panes/ticket-1/events", Some("after=-1")),
    ] {
        let r = read(path, query, None);
        let through_ref = kept(&m, &r);
        assert!(through_ref.as_ref().is_some_and(|a| a.status != 0), "{path}");
        assert_eq!(through_ref, m.answer_read(&r), "{path} {query:?}");
    }
    // Another user is refused first; history waits for the program (None).
    let other = Read { caller: Caller::OtherUser, ..read("/v1/state", None, None) };
    assert_eq!(kept(&m, &other).map(|r| r.status), Some(403));
    assert_eq!(kept(&m, &read("/v1/history", None, None)), None);
    assert_eq!(m.answer_read(&read("/v1/history", None, None)), None);
}

/// A reader caught up from the state's `lastSeq` on a pane nobody read yet
/// asks for an empty tail: it must go through `&mut self`, which marks the
/// pane's events read (a restore then starts the tail again rather than
/// renumbering it under the reader). Found by review.
#[test]
fn a_caught_up_reader_of_a_pane_never_read_goes_through_the_write_path() {
    let (mut m, pane) = machine(100);
    write(&mut m, &pane, 1);
    let path = format!("/v1/panes/{pane}/events");
    let last = m.state.pane(&pane).unwrap().last_seq();
    let query = format!("after={last}");
    let caught_up = read(&path, Some(&query), None);
    let page = made(&mut m, &caught_up).unwrap();
    assert!(m.state.pane(&pane).unwrap().events_were_read());
    assert_eq!(kept(&m, &caught_up), Some(page));
}

#[test]
fn tag_lists_a_since_ahead_and_a_snapshot_after_a_change_agree_with_the_write_path() {
    let (mut m, pane) = machine(100);
    write(&mut m, &pane, 1);
    let tag = m.answer_read(&read("/v1/state", None, None)).unwrap().etag.unwrap();
    for if_none_match in [format!("\"x\", {}", tag.as_str()), "*".to_owned()] {
        let r = read("/v1/state", None, Some(&if_none_match));
        assert_eq!(kept(&m, &r).map(|a| a.status), Some(304));
        assert_eq!(kept(&m, &r), m.answer_read(&r));
    }
    // A `since` past the seq is a full answer: the one kept.
    let ahead = read("/v1/state", Some("since=999999"), None);
    assert_eq!(kept(&m, &ahead), m.answer_read(&ahead));
    for n in 2..200 {
        write(&mut m, &pane, n);
    }
    let path = format!("/v1/panes/{pane}/events");
    let behind = read(&path, Some("after=0"), None);
    let snapshot = made(&mut m, &behind).unwrap();
    assert_eq!(kept(&m, &behind), Some(snapshot));
    let past_the_end = read(&path, Some("after=99999"), None);
    assert_eq!(kept(&m, &past_the_end), m.answer_read(&past_the_end), "ahead: the same snapshot");
    write(&mut m, &pane, 500);
    assert_eq!(m.answer_read_kept(&behind), Err(NeedsWrite), "a change makes the snapshot anew");
}
