//! A write the phone sends while the agent is down (a restart, a crash) is
//! not dropped: the phone keeps it, says so, and sends it again with the
//! same request id once the agent answers, as Collie's bridge keeps a
//! write; the agent runs it once.

mod support;

use support::{Desk, Lines, TestDir};

/// The request id at the end of a write's line.
fn request_id(line: &str) -> String {
    let at = line.rfind("[request ").unwrap_or_else(|| panic!("no request id in {line:?}"));
    line[at + 9..].trim_end_matches(']').to_owned()
}

#[test]
fn a_write_that_found_no_agent_is_sent_again_with_its_request_id_once_the_agent_is_back() {
    let dir = TestDir::new("kept-writes");
    let desk = Desk::socket(&dir, &[]);
    let mut p = Lines::start(&desk);
    p.send("open ticket-1");
    p.expect("open ticket-1 \"Maria Lopez\"");
    desk.kill();

    // Two writes while nothing listens: both kept, in order, each with its id.
    p.send("rename pane ticket-1 Maria (kept)");
    let first = p.expect("rename pane ticket-1: no answer");
    assert!(first.contains("kept: it is sent again, with the same request id"), "{first}");
    p.send("send where is my refund?");
    let second = p.expect("send: ");
    assert!(second.contains("kept: it is sent again"), "{second}");
    let (first_id, second_id) = (request_id(&first), request_id(&second));
    assert_ne!(first_id, second_id);

    // The agent again, on the same data: the polls send both, oldest first,
    // each with its own request id, and the agent runs each.
    let _desk = Desk::socket(&dir, &[]);
    let again = p.expect("rename pane ticket-1 (sent again): ");
    assert_eq!(request_id(&again), first_id, "{again}");
    assert!(again.contains(": done") || again.contains("renamed"), "{again}");
    let sent = p.expect("send (sent again): ");
    assert_eq!(request_id(&sent), second_id, "{sent}");
    assert!(sent.contains("send (sent again): sent") || sent.contains("queued"), "{sent}");
    p.expect("where is my refund?");
    p.send("quit");
    let seen = p.seen.join("\n");
    assert!(!seen.contains("panicked"), "{seen}");
    // Sent once each: no second "sent again" line for either.
    assert_eq!(seen.matches("(sent again)").count(), 2, "{seen}");
    assert!(p.finish().success(), "{seen}");
}
