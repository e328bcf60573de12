//! The failover test (§9, §9.1, with `PgReceiptStore`): desk A and desk B
//! on two data folders (two machines) share one PostgreSQL database, which
//! this test starts in a temporary folder. Writes of every kind go to A,
//! each twice at once; A is killed (`SIGKILL`) while a turn runs and sends
//! wait in its queue; B starts with A's identity (the same receipts
//! database and schema). Every request id A acknowledged, replayed against
//! B, returns A's identical body with `replayed: true`; none runs again
//! (no rename runs again — B's ticket shows the title A showed, given back
//! by the database — and no ticket is opened twice); the sends A
//! acknowledged as queued are delivered by B, once; the one whose turn the
//! kill cut is closed with a notice; the conversation A showed comes back
//! on B from the database (§9.2), the notice after it.

mod desk_support;
#[path = "../../crates/durable-sdk/tests/pg_support/mod.rs"]
mod pg_support;

use std::collections::HashSet;

use desk_support::{
    Desk, TestDir, Write, acknowledged, mixed_writes, post_twice_at_once, replay_until_settled,
};
use pg_support::PgServer;
use serde_json::{Value, json};

fn writes() -> Vec<Write> {
    mixed_writes(16, 3)
}

/// The turn ids that started on a pane, in order.
fn turns(desk: &Desk, pane: &str) -> Vec<String> {
    desk.events(pane)
        .iter()
        .filter(|e| e["type"] == "state" && e["state"] == "working")
        .map(|e| e["turnId"].as_str().unwrap_or("").to_owned())
        .collect()
}

#[test]
fn desk_b_keeps_every_promise_desk_a_made_before_it_was_killed() {
    let server = PgServer::start();
    let url = server.url();
    let (dir_a, dir_b) = (TestDir::new("failover-a"), TestDir::new("failover-b"));

    // A reads the database from the environment; B will take the flag.
    let a = Desk::start_with(
        &dir_a,
        None,
        &[("DESK_RECEIPTS_URL", url.as_str())],
        &["--receipts-schema", "desk", "--turn-ms", "1000"],
    );
    // One turn A finishes before the burst: once its replay says `done`,
    // what the turn showed is in the database.
    let first = json!({"requestId": "first", "text": "hello from before"});
    assert_eq!(a.post("/v1/panes/ticket-1/send", first.clone()).0, 200);
    a.wait_idle("ticket-1");
    a.wait_for("the first send done", |a| {
        let (_, _, delivery) = a.post_delivery("/v1/panes/ticket-1/send", first.clone());
        (delivery.as_deref() == Some("done")).then_some(())
    });
    let all = writes();
    let answers = post_twice_at_once(&a, &all);
    let state = a.state();
    assert_eq!(Desk::pane(&state, "ticket-1").unwrap()["state"], "working", "the kill lands mid-turn");
    let turns_a = turns(&a, "ticket-1");
    let title_on_a = Desk::pane(&state, "ticket-1").unwrap()["title"].clone();
    // A title is shown before the store has it (only items wait, §9.2):
    // the kill comes once the database has A's last one.
    let stored = || server.query("SELECT title FROM desk.conversation WHERE pane = 'ticket-1'");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while stored() != title_on_a.as_str().unwrap_or("") {
        assert!(std::time::Instant::now() < deadline, "A's title {title_on_a} never reached the database");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let tickets = |state: &Value| {
        state["panes"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| p["id"].as_str().unwrap().starts_with("ticket-"))
            .count()
    };
    let opened_on_a = tickets(&state);
    let ids_on_a: Vec<String> = state["panes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["id"].as_str().filter(|id| id.starts_with("ticket-")).map(str::to_owned))
        .collect();
    a.kill();

    // Concurrent duplicates got one answer at A: the same, the second replayed.
    let acknowledged = acknowledged(&answers);
    let queued: Vec<&String> =
        acknowledged.keys().filter(|id| acknowledged[*id]["result"] == "queued").collect();
    assert!(queued.len() >= 5, "sends waited in A's queue: {}", queued.len());
    assert!(acknowledged.keys().any(|id| id.starts_with("new-")), "A opened tickets");

    // B: another data folder, the same receipts database (the flag this time).
    let b = Desk::start(&dir_b, &["--receipts", &url, "--receipts-schema", "desk", "--turn-ms", "20"]);
    let deliveries = replay_until_settled(&b, &all, &acknowledged);
    b.wait_idle("ticket-1");

    // Nothing ran again on B: no ticket was opened, no rename ran again —
    // its ticket has the title A showed, given back once by the store
    // (§9.2: offered to the desk's rename hook, which accepts it).
    let state = b.state();
    assert_ne!(title_on_a, "Maria Lopez", "A's ticket was renamed");
    assert_eq!(Desk::pane(&state, "ticket-1").unwrap()["title"], title_on_a, "the title A showed");
    let renames_on_b = b.events("ticket-1").iter().filter(|e| e["type"] == "title").count();
    assert!(renames_on_b <= 1, "one title given back, no rename run again: {renames_on_b}");
    assert!(opened_on_a > 1, "A opened tickets");
    assert_eq!(tickets(&state), 1, "no starter ran on B (A had {opened_on_a} tickets)");

    // B delivered the sends A queued, once each, and none that A had begun.
    let turns_b = turns(&b, "ticket-1");
    let unique: HashSet<&String> = turns_b.iter().collect();
    assert_eq!(unique.len(), turns_b.len(), "a turn started twice on B: {turns_b:?}");
    for id in &turns_b {
        assert!(!turns_a.contains(id), "{id} ran on A and again on B");
        assert_eq!(acknowledged[id]["result"], "queued", "{id}: B runs only what A queued");
    }
    let items = b.items("ticket-1");
    for id in &queued {
        let delivery = &deliveries[*id];
        if turns_a.contains(id) || delivery == "closed" {
            continue;
        }
        assert!(turns_b.contains(id), "{id}: A acknowledged it as queued, B must deliver it ({delivery})");
        let n = id.strip_prefix("snd-").unwrap();
        assert!(
            items.iter().any(|i| i["text"] == format!("Got it: message {n}") && i.get("partial").is_none()),
            "{id}: its reply is on B's ticket"
        );
    }
    assert!(!turns_b.is_empty(), "B delivered A's queued sends");
    // A's conversation came over with the database: the turn A finished is
    // on B's ticket as A showed it — the user's message and the final
    // reply — though B's data folder never saw it.
    let user = items.iter().position(|i| i["id"] == "user-first");
    assert_eq!(user.map(|u| items[u]["text"].clone()), Some(json!("hello from before")), "{items:?}");
    let reply =
        items.iter().position(|i| i["text"] == "Got it: hello from before" && i.get("partial").is_none());
    assert!(reply.is_some() && user < reply, "A's final reply, after the message: {items:?}");
    // The turn the kill cut at A: closed by B with a notice, not run again.
    let cut: Vec<&String> = deliveries.iter().filter(|(_, d)| *d == "closed").map(|(id, _)| id).collect();
    assert!(!cut.is_empty(), "the send whose turn the kill cut is closed: {deliveries:?}");
    for id in cut {
        let notice = items.iter().position(|i| i["id"] == format!("cut-{id}"));
        assert_eq!(
            notice.map(|n| items[n]["kind"].clone()),
            Some(json!("notice")),
            "{id}: closed with a notice"
        );
        let message = items.iter().position(|i| i["id"] == format!("user-{id}"));
        assert!(
            message.is_some() && message < notice,
            "{id}: the message A showed, then B's notice: {items:?}"
        );
    }
    // A ticket B opens is a new one: B's own store is new, but the numbers
    // of A's tickets, whose chats the database keeps, are skipped.
    let (status, opened) = b.post("/v1/starters/new-ticket", json!({"requestId": "b-new", "text": "from B"}));
    assert_eq!(status, 200, "{opened}");
    let new_id = opened["pane"].as_str().expect("the new ticket's pane").to_owned();
    assert!(!ids_on_a.contains(&new_id), "{new_id} is one of A's tickets: {ids_on_a:?}");
    b.wait_idle(&new_id);
    let texts: Vec<Value> = b.items(&new_id).iter().map(|i| i["text"].clone()).collect();
    assert_eq!(texts, [json!("from B"), json!("Got it: from B")], "only its own chat");
    b.kill();
}

/// What a poll showed is kept (§9.2): desk A streams a reply while the
/// database stalls (`SIGSTOP`), a reader polls A all along, A is killed,
/// the database goes on, and desk B takes over. Every item the reader saw
/// is on B in the form seen or a later one: while the database could not
/// keep them, A showed no new form. (With items shown before the store has
/// them, the reader saw forms the database never got, and B came back with
/// earlier ones.)
#[test]
fn what_a_poll_showed_while_the_database_stalled_is_on_the_desk_that_takes_over() {
    let server = PgServer::start();
    let url = server.url();
    let (dir_a, dir_b) = (TestDir::new("stall-a"), TestDir::new("stall-b"));
    let schema = ["--receipts-schema", "stall"];
    let a =
        Desk::start(&dir_a, &[&["--receipts", url.as_str(), "--turn-ms", "3000"][..], &schema[..]].concat());
    assert_eq!(
        a.post("/v1/panes/ticket-1/send", json!({"requestId": "s-1", "text": "a long answer"})).0,
        200
    );
    let reply_shown = |items: &[Value]| {
        items.iter().any(|i| i["kind"] == "reply" && i["text"].as_str().is_some_and(|t| !t.is_empty()))
    };
    a.wait_for("a partial reply", |a| reply_shown(&a.items("ticket-1")).then_some(()));

    // The database stalls for 1.5 s: two more of the reply's five writes.
    server.pause();
    let stalled = std::time::Instant::now();
    // Every form of every item any poll showed.
    let mut seen: Vec<Value> = a.items("ticket-1");
    while stalled.elapsed() < std::time::Duration::from_millis(1500) {
        let now = a.items("ticket-1");
        assert!(reply_shown(&now), "polls answer while the database stalls: {now:?}");
        for item in now {
            if !seen.contains(&item) {
                seen.push(item);
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    a.kill();
    server.resume();
    // A's sessions end as the server reads their closed sockets (the server
    // is this test's own: psql's is the one left).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while server.client_sessions() > 1 {
        assert!(std::time::Instant::now() < deadline, "A's database sessions are still there after 30 s");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }

    let b =
        Desk::start(&dir_b, &[&["--receipts", url.as_str(), "--turn-ms", "20"][..], &schema[..]].concat());
    let back = b.wait_for("A's items on B", |b| {
        let items = b.items("ticket-1");
        seen.iter().all(|s| items.iter().any(|i| i["id"] == s["id"])).then_some(items)
    });
    for shown in &seen {
        let again = back.iter().find(|i| i["id"] == shown["id"]).expect("found above");
        let (was, is) = (shown["text"].as_str().unwrap_or(""), again["text"].as_str().unwrap_or(""));
        // The desk's partial replies grow: a later form extends an earlier one.
        assert!(is.starts_with(was), "{} came back as {is:?}, an earlier form than {was:?}", shown["id"]);
    }
    b.kill();
}
