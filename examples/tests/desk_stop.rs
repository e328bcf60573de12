//! A stop that is asked for (`SIGTERM`, as `systemctl restart` sends it):
//! the turn running ends as it would, a send queued behind it stays queued
//! for the next start, and a send in the grace is refused unstored, for the
//! phone to send again.

mod desk_support;

use std::time::{Duration, Instant};

use desk_support::{Desk, TestDir};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::json;

#[test]
fn sigterm_lets_the_running_turn_end_and_keeps_the_queued_send_for_the_next_start() {
    let dir = TestDir::new("stop");
    let mut desk = Desk::start(&dir, &["--turn-ms", "2000"]);
    let (status, sent) = desk.send("ticket-1", "s-1", "first");
    assert_eq!((status, sent["result"].as_str()), (200, Some("sent")), "{sent}");
    let (status, queued) = desk.send("ticket-1", "s-2", "second");
    assert_eq!((status, queued["result"].as_str()), (200, Some("queued")), "{queued}");
    desk.wait_for("the turn's first partial", |d| {
        d.items("ticket-1").into_iter().find(|i| i["text"].as_str().is_some_and(|t| t.starts_with("Got it")))
    });

    kill(Pid::from_raw(desk.child.id() as i32), Signal::SIGTERM).expect("SIGTERM");
    // In the grace the desk still answers, and takes no new send.
    let (status, busy) = desk.send("ticket-1", "s-3", "in the grace");
    assert_eq!((status, busy["code"].as_str()), (409, Some("busy")), "{busy}");
    assert!(busy["message"].as_str().is_some_and(|m| m.contains("stopping")), "{busy}");
    let deadline = Instant::now() + Duration::from_secs(30);
    let exit = loop {
        if let Some(exit) = desk.child.try_wait().expect("wait") {
            break exit;
        }
        assert!(Instant::now() < deadline, "the desk did not stop within 30 s of SIGTERM");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(exit.success(), "the desk stops cleanly: {exit}");
    drop(desk);

    let desk = Desk::start(&dir, &["--turn-ms", "200"]);
    // The turn ended whole before the stop: its final reply is there, and no
    // notice says it was cut.
    desk.wait_text("ticket-1", "Got it: first");
    // The send queued behind it runs now, once.
    desk.wait_text("ticket-1", "Got it: second");
    let items = desk.items("ticket-1");
    let cut: Vec<_> =
        items.iter().filter(|i| i["text"].as_str().is_some_and(|t| t.contains("restarted"))).collect();
    assert!(cut.is_empty(), "no turn was cut: {cut:?}");
    let seconds = items.iter().filter(|i| i["text"] == "Got it: second").count();
    assert_eq!(seconds, 1, "the queued send ran once: {items:?}");
    // The send refused in the grace was not stored: sent again, it runs.
    let (status, again) = desk.send("ticket-1", "s-3", "in the grace");
    assert_eq!(status, 200, "{again}");
    assert_eq!(again["replayed"], json!(false), "{again}");
    desk.wait_text("ticket-1", "Got it: in the grace");
}
