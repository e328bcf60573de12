//! The phone's line interface, as a script drives it: commands on stdin,
//! the screen's changes as lines on stdout, against the support desk (and
//! against a fake agent that answers nonsense, which must never panic it).

mod support;

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixListener;

use support::{Desk, Lines, TestDir};

/// The request id at the end of a write's line.
fn request_id(line: &str) -> String {
    let at = line.rfind("[request ").unwrap_or_else(|| panic!("no request id in {line:?}"));
    line[at + 9..].trim_end_matches(']').to_owned()
}

#[test]
fn lines_show_the_layout_and_answer_every_ask_kind() {
    let dir = TestDir::new("lines-asks");
    let desk = Desk::socket(&dir, &[]);
    let mut p = Lines::start(&desk);
    p.expect("agent desk: wire 1..1, ready, caller check on");
    p.expect("tab support:main \"Tickets\": ticket-1");
    p.expect("pane ticket-1 \"Maria Lopez\" idle, actions: refund");
    p.expect("starters: new-ticket \"New ticket\"");
    p.send("open ticket-1");
    p.expect("open ticket-1 \"Maria Lopez\"");

    let mut ids = BTreeSet::new();
    let mut write = |p: &mut Lines, command: &str, result: &str| {
        p.send(command);
        let line = p.expect(result);
        assert!(ids.insert(request_id(&line)), "a request id used twice: {line}");
    };
    for (kind, card, answer, echo) in [
        ("choice", "(choice): Is the problem solved?", "#1 No", r#"Answer: {"optionIds":["no"]}"#),
        ("multi", "(multi): Which colours?", "1 red,Blue", r#"Answer: {"optionIds":["red","blue"]}"#),
        (
            "text",
            "(text): What should the reply say?",
            "1 Ship it, now",
            r#"Answer: {"text":"Ship it, now"}"#,
        ),
        (
            "form",
            "(form): Order details",
            r#"1 name="Ana Lopez" qty=2 gift=yes size=Medium"#,
            r#"Answer: {"values":{"gift":true,"name":"Ana Lopez","qty":2,"size":"m"}}"#,
        ),
    ] {
        write(&mut p, &format!("send /ask {kind}"), "send: sent");
        let line = p.expect(card);
        let short = line.split_whitespace().nth(1).unwrap().to_owned();
        write(&mut p, &format!("answer {answer}"), &format!("answer {short}: answered (decided by phone)"));
        p.expect(&format!("ask {short} closed"));
        p.expect(&format!("[ticket-1] agent: {echo}"));
    }
    // The form's card lists its fields; a misfit is the agent's 400.
    write(&mut p, "send /ask form", "send: sent");
    p.expect("field size \"Size\" (one of s \"Small\" | m \"Medium\" | l \"Large\")");
    write(&mut p, "answer 1 qty=2", "refused 400 bad-request");
    // A send while the card is open is refused with its reason.
    write(&mut p, "send hello", "refused 409 ask-open");
    write(&mut p, "answer 1 name=Bo", "answered");
    p.expect(r#"Answer: {"values":{"name":"Bo"}}"#);

    // allow-always waits for its confirmation.
    write(&mut p, "send /ask approve", "send: sent");
    p.expect("tool: escalate(ticket: \"ticket-1\")");
    p.expect("push: escalate needs a yes");
    p.expect("allow-always \"Allow always\" (always: asks you to confirm)");
    p.send("answer 1 allow-always");
    p.expect("\"Allow always\" holds beyond this question: confirm to send it");
    write(&mut p, "confirm", "answered (decided by phone)");
    p.expect(r#"Answer: {"optionIds":["allow-always"]}"#);
    p.send("confirm");
    p.expect("no allow-always answer waits for its confirmation");

    // A card that times out shows its time left, then closes.
    write(&mut p, "send /ask choice 3s", "send: sent");
    p.expect_where("the time left", |l| l.starts_with("  expires in ") && l.ends_with('s'));
    p.expect("warning: Timed out before an answer: Is the problem solved?");
    p.send("quit");
    assert!(p.finish().success());
}

#[test]
fn lines_send_steer_queue_stop_and_refusals() {
    let dir = TestDir::new("lines-send");
    let desk = Desk::socket(&dir, &["--turn-ms", "8000"]);
    let mut p = Lines::start(&desk);
    p.send("send before open");
    p.expect("open a pane first: open <pane>");
    p.send("open ticket-1");
    p.send("steer too early");
    p.expect_where("a refused steer with its reason", |l| {
        l.starts_with("steer: refused 409 refused") && l.contains("(reason: not-working)")
    });
    p.send("send hi");
    p.expect("send: sent (no turn before)");
    p.expect_where("working", |l| l.starts_with("pane ticket-1 \"Maria Lopez\" working (turn phone-"));
    p.expect("[ticket-1] you: hi");
    p.expect_where("a partial reply", |l| l.starts_with("[ticket-1] agent: Got") && l.ends_with(" …"));
    p.send("steer and more");
    p.expect("steer: steered");
    p.send("send next");
    p.expect("send: queued (behind turn phone-");
    p.expect("[ticket-1] agent: Got it: hi (steer: and more)");
    // The queued send runs its own turn; stop ends it with what it had.
    p.expect_where("the queued turn", |l| l.starts_with("[ticket-1] agent: Got") && l.ends_with(" …"));
    p.send("stop");
    p.expect("stop: stopped");
    p.expect("pane ticket-1 \"Maria Lopez\" idle");
    p.send("action launch");
    p.expect("action launch: refused 404 not-found");
    p.send("answer 1 yes");
    p.expect("no open ask \"1\"");
    p.send("open nowhere");
    p.expect("no pane \"nowhere\"");
    p.send("teleport");
    p.expect("unknown command \"teleport\"");
    // The pane without handlers refuses.
    p.send("open announcements");
    p.send("send hello");
    p.expect("send: refused 409 not-supported");
    assert!(p.finish().success(), "the end of stdin quits");
}

#[test]
fn lines_starter_rename_close_reopen_and_history() {
    let dir = TestDir::new("lines-layout");
    let desk = Desk::socket(&dir, &[]);
    let mut p = Lines::start(&desk);
    p.send("starter new-ticket Where is my parcel?");
    p.expect("starter new-ticket: started (pane ticket-2)");
    p.expect("open ticket-2");
    p.expect("[ticket-2] you: Where is my parcel?");
    p.expect("[ticket-2] agent: Got it: Where is my parcel?");
    p.send("rename pane ticket-2 Ana Ruiz");
    p.expect("rename pane ticket-2: renamed");
    p.expect("pane ticket-2 \"Ana Ruiz\" idle");
    p.send("rename tab support:main Open tickets");
    p.expect("tab support:main \"Open tickets\": ticket-1, ticket-2");
    p.send("close ticket-2");
    p.expect("close pane ticket-2: closed");
    p.expect("closed (reopen): ticket-2 \"Ana Ruiz\"");
    p.expect("pane ticket-2 removed");
    p.expect("pane ticket-2 is gone");
    p.send("reopen ticket-2");
    p.expect("reopen ticket-2: reopened");
    p.expect("pane ticket-2 \"Ana Ruiz\" idle");
    p.send("history");
    // Newest first: the ticket opened by the starter, then the seeded one.
    p.expect("history: ticket-2 \"Ana Ruiz\"");
    p.expect("history: ticket-1 \"Maria Lopez\" (Order 5521) open");
    p.expect("history: end");
    p.send("history ticket-2");
    p.expect("[history ticket-2] you: Where is my parcel?");
    p.expect("[history ticket-2] agent: Got it: Where is my parcel?");
    p.expect("history: end");
    p.send("more");
    p.expect("no more: history first");
    p.send("history nobody");
    p.expect("history: 404 not-found");
}

#[test]
fn lines_page_through_history() {
    let dir = TestDir::new("lines-pages");
    let desk = Desk::socket(&dir, &["--turn-ms", "0"]);
    let mut p = Lines::start(&desk);
    p.send("open ticket-1");
    for n in 0..12 {
        p.send(&format!("send message {n}"));
        p.expect(&format!("[ticket-1] agent: Got it: message {n}"));
    }
    p.send("history ticket-1");
    p.expect("[history ticket-1] you: message 0");
    p.expect("history: more with `more`");
    p.send("more");
    p.expect("[history ticket-1] agent: Got it: message 11");
    p.expect("history: end");
}

#[test]
fn lines_over_https_pin_and_token() {
    let dir = TestDir::new("lines-https");
    let desk = Desk::https(&dir, &[]);
    let token = desk.token.clone().unwrap();
    let mut p = Lines::start(&desk);
    p.expect("caller check token");
    p.send("open ticket-1");
    p.send("send hi");
    p.expect("[ticket-1] agent: Got it: hi");
    p.send("quit");
    let seen = p.seen.join("\n");
    assert!(p.finish().success());
    assert!(!seen.contains(&token), "the token shows:\n{seen}");

    // Another fingerprint: the phone says so and keeps trying.
    let mut args = desk.args();
    *args.last_mut().unwrap() = "00".repeat(32);
    let mut wrong = Lines::start_with(&args, Some(&token));
    wrong.expect_where("the pin refused", |l| {
        l.starts_with("cannot reach the agent") && l.contains("does not match the pinned SHA-256 fingerprint")
    });
    // No pin at all is refused before anything is sent.
    let mut unpinned = Lines::start_with(&["--url".into(), desk.address.clone()], Some(&token));
    unpinned.expect("needs --fingerprint");
    // A wrong token: the agent's 401, the token never printed.
    let mut refused = Lines::start_with(&desk.args(), Some(&"f".repeat(64)));
    refused.expect("hello: 401 token-refused");
    refused.send("quit");
    let seen = refused.seen.join("\n");
    assert!(!seen.contains(&"f".repeat(64)) && !seen.contains(&token), "{seen}");
}

/// A fake agent on a socket: each request gets the next canned answer.
fn fake_agent(dir: &TestDir, answers: Vec<(u16, String)>) -> String {
    let path = dir.0.join("fake.sock");
    let listener = UnixListener::bind(&path).unwrap();
    std::thread::spawn(move || {
        let mut answers = answers.into_iter().cycle();
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { break };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            // Read one request: the head, then its body.
            let mut length = 0;
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 {
                    break;
                }
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    length = v.trim().parse().unwrap_or(0);
                }
                if line == "\r\n" {
                    break;
                }
            }
            let mut body = vec![0; length];
            let _ = reader.read_exact(&mut body);
            let (status, text) = answers.next().unwrap();
            let _ = write!(
                stream,
                "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{text}",
                text.len()
            );
        }
    });
    path.to_str().unwrap().to_owned()
}

#[test]
fn lines_survive_an_agent_that_answers_nonsense() {
    let dir = TestDir::new("lines-fake");
    let nonsense = vec![
        (200, r#"{"ok": true, "host": "\u001b[2Jfake", "wire": {"min": 7, "max": 9}, "ready": true, "epoch": "e", "caps": {"send": true}}"#.to_owned()),
        (200, "{}".to_owned()),
        (200, r#"{"ok": true, "epoch": 5}"#.to_owned()),
        (200, "not json at all".to_owned()),
        (500, "".to_owned()),
        (200, r#"{"ok": true, "epoch": "e", "seq": 1, "ready": true, "full": true, "workspaces": [], "panes": [{"id": "p\u202e1", "tab": "t", "title": "x\u001b]0;owned\u0007y", "state": "idle", "turnId": null, "lastSeq": 18446744073709551615, "openAsks": [], "actions": []}], "removed": [], "asks": [{"id": "a", "pane": "p1", "kind": "poll", "title": "t", "hash": "h"}]}"#.to_owned()),
        (200, r#"[1, 2, 3]"#.to_owned()),
    ];
    let socket = fake_agent(&dir, nonsense);
    let mut p = Lines::start_with(&["--socket".into(), socket], None);
    p.expect("agent [2Jfake: wire 7..9");
    p.expect("durable-hello: incompatible: the durable agent speaks 7..9, this Collie speaks 1..1");
    for _ in 0..6 {
        p.send("refresh");
        p.send("open p1");
        p.send("send hi");
        p.send("answer 1 x");
    }
    p.send("wait 2500");
    p.expect("waited 2500 ms");
    let seen = p.seen.join("\n");
    assert!(seen.contains("a bad answer from the agent"), "{seen}");
    assert!(!seen.contains('\u{1b}') && !seen.contains('\u{7}') && !seen.contains('\u{202e}'), "{seen}");
    assert!(!seen.contains("panicked"), "{seen}");
    assert!(p.finish().success(), "{seen}");
}

#[test]
fn lines_say_in_collies_words_when_older_messages_were_skipped() {
    let dir = TestDir::new("lines-skipped");
    let hello = r#"{"ok": true, "host": "fake", "wire": {"min": 1, "max": 1}, "ready": true, "epoch": "e", "caps": {"history": true}}"#;
    let state = r#"{"ok": true, "epoch": "e", "seq": 1, "ready": true, "full": true, "workspaces": [{"id": "w", "title": "W", "tabs": [{"id": "t", "title": "T", "panes": ["p1"]}]}], "panes": [{"id": "p1", "tab": "t", "title": "P", "state": "idle", "turnId": null, "lastSeq": 9, "openAsks": [], "actions": []}], "removed": [], "asks": []}"#;
    // The view of a pane that lost its oldest items (docs/wire.md §6), then
    // a page of history that did (§10).
    let view = r#"{"ok": true, "pane": "p1", "snapshot": true, "next": 9, "state": "idle", "turnId": null, "asks": [], "dropped": true, "items": [{"id": "u1", "kind": "user", "text": "hi"}]}"#;
    let history = r#"{"ok": true, "items": [{"id": "u1", "kind": "user", "text": "hi"}], "dropped": true}"#;
    let answers = [hello, r#"{"ok": true, "compatible": true}"#, state, view, history];
    let socket = fake_agent(&dir, answers.iter().map(|a| (200, (*a).to_owned())).collect());
    let mut p = Lines::start_with(&["--socket".into(), socket], None);
    p.expect("pane p1 \"P\" idle");
    p.send("open p1");
    let skipped = "Older messages were skipped: the durable agent no longer keeps them.";
    assert_eq!(p.expect("skipped"), format!("[p1] {skipped}"));
    p.expect("[p1] you: hi");
    p.send("history s1");
    assert_eq!(p.expect("skipped"), format!("[history s1] {skipped}"));
    p.send("quit");
    let seen = p.seen.join("\n");
    assert!(p.finish().success(), "{seen}");
}

#[test]
fn lines_say_in_collies_words_when_the_wire_versions_do_not_meet() {
    let dir = TestDir::new("lines-versions");
    let hello = r#"{"ok": true, "host": "later", "wire": {"min": 2, "max": 3}, "ready": true, "epoch": "e", "caps": {}}"#;
    let intro = r#"{"ok": true, "wire": {"min": 2, "max": 3}, "compatible": false}"#;
    let state = r#"{"ok": true, "epoch": "e", "seq": 1, "ready": true, "full": true, "workspaces": [], "panes": [], "removed": [], "asks": []}"#;
    let socket = fake_agent(&dir, [hello, intro, state].iter().map(|a| (200, (*a).to_owned())).collect());
    let mut p = Lines::start_with(&["--socket".into(), socket], None);
    let line = p.expect("incompatible");
    assert_eq!(line, "durable-hello: incompatible: the durable agent speaks 2..3, this Collie speaks 1..1");
    p.send("wait 100");
    p.expect("waited 100 ms");
    let seen = p.seen.join("\n");
    assert_eq!(seen.matches("incompatible").count(), 1, "said once:\n{seen}");
    assert!(p.finish().success(), "{seen}");
}
