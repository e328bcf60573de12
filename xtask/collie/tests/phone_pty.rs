//! The phone on a real pseudo-terminal (tmux), driven by keys against the
//! support desk: each ask kind answered on its card, allow-always with its
//! second Enter, a send whose reply streams in, a stop, the refund action's
//! approval, and the same over HTTPS with a pinned certificate.

mod support;

use support::{Desk, TestDir, Tmux};

/// The phone opened the desk's first ticket.
fn ready(t: &Tmux) {
    t.wait_for("> ticket-1  Maria Lopez · idle");
    t.wait_for(" ticket-1 · Maria Lopez · idle");
}

/// Types a chat message and sends it.
fn say(t: &Tmux, text: &str) {
    t.type_text(text);
    t.keys(&["Enter"]);
}

#[test]
fn pty_answers_every_ask_kind_by_keys() {
    let dir = TestDir::new("pty-asks");
    let desk = Desk::socket(&dir, &[]);
    let t = Tmux::phone(&dir, &desk, 120, 40);
    ready(&t);

    // choice: Down to "No", Enter.
    say(&t, "/ask choice");
    t.wait_for("Is the problem solved?");
    t.wait_for("(Tab to answer)");
    t.keys(&["Tab"]);
    t.wait_for("> (o) Yes");
    t.keys(&["Down"]);
    t.wait_for("> (o) No");
    t.keys(&["Enter"]);
    t.wait_for(r#"agent: Answer: {"optionIds":["no"]}"#);

    // multi: Space picks Red, then Blue.
    say(&t, "/ask multi");
    t.wait_for("Which colours?");
    t.keys(&["Tab", "Space", "Down", "Down", "Space"]);
    t.wait_for("> [x] Blue");
    t.keys(&["Enter"]);
    t.wait_for(r#"agent: Answer: {"optionIds":["red","blue"]}"#);

    // text: typed into the card.
    say(&t, "/ask text");
    t.wait_for("What should the reply say?");
    t.keys(&["Tab"]);
    t.type_text("Ship it");
    t.wait_for("> answer: Ship it");
    t.keys(&["Enter"]);
    t.wait_for(r#"agent: Answer: {"text":"Ship it"}"#);

    // form: a text, a number, a yes/no flipped, a select turned.
    say(&t, "/ask form");
    t.wait_for("Order details");
    t.keys(&["Tab"]);
    t.type_text("Ana");
    t.keys(&["Down"]);
    t.type_text("2");
    t.keys(&["Down", "Space", "Down", "Right", "Right"]);
    t.wait_for("> Size: < Medium >");
    t.wait_for("Gift wrap: [x]");
    t.keys(&["Enter"]);
    t.wait_for(r#"agent: Answer: {"values":{"gift":true,"name":"Ana","qty":2,"size":"m"}}"#);

    // allow-always: the first Enter asks again, Esc goes back, two Enters send it.
    say(&t, "/ask approve");
    t.wait_for("escalate wants to run");
    t.wait_for(r#"tool: escalate(ticket: "ticket-1")"#);
    t.wait_for("push: escalate needs a yes");
    t.keys(&["Tab", "Down", "Enter"]);
    t.wait_for("Enter again to confirm");
    t.keys(&["Escape"]);
    t.wait_until("the confirmation gone", |s| !s.contains("Enter again to confirm"));
    t.keys(&["Enter"]);
    t.wait_for("Enter again to confirm");
    t.keys(&["Enter"]);
    t.wait_for(r#"agent: Answer: {"optionIds":["allow-always"]}"#);
    let screen = t.wait_for("0 open asks");
    assert!(!t.exited(), "{screen}");
}

#[test]
fn pty_send_streams_the_reply_and_stop_ends_the_turn() {
    let dir = TestDir::new("pty-send");
    let desk = Desk::socket(&dir, &["--turn-ms", "10000"]);
    let t = Tmux::phone(&dir, &desk, 120, 40);
    ready(&t);

    say(&t, "hello there");
    t.wait_for("send: sent");
    t.wait_for("you: hello there");
    t.wait_for("ticket-1 · Maria Lopez · working");
    // The reply grows while partial (…), then ends whole.
    let partial =
        t.wait_until("a partial reply", |s| s.lines().any(|l| l.contains("agent: Got") && l.ends_with('…')));
    assert!(!partial.contains("agent: Got it: hello there\n"), "{partial}");
    t.wait_for("agent: Got it: hello there");
    t.wait_for("ticket-1 · Maria Lopez · idle");

    // A second send, stopped with Ctrl-X while it streams.
    say(&t, "a long story");
    t.wait_until("a partial reply to the second send", |s| {
        s.lines().any(|l| l.contains("agent: Got") && l.ends_with('…') && !l.contains("hello"))
    });
    t.keys(&["C-x"]);
    t.wait_for("stop: stopped");
    let screen = t.wait_for("ticket-1 · Maria Lopez · idle");
    assert!(!screen.contains("agent: Got it: a long story"), "the stop cut the reply short:\n{screen}");
    // What it had stays, no longer partial.
    t.wait_until("the cut reply, final", |s| {
        s.lines().any(|l| l.contains("agent: Got") && !l.ends_with('…') && !l.contains("hello"))
    });
}

#[test]
fn pty_refund_action_is_approved_on_its_card() {
    let dir = TestDir::new("pty-refund");
    let desk = Desk::socket(&dir, &[]);
    let t = Tmux::phone(&dir, &desk, 120, 40);
    ready(&t);
    t.wait_for("actions [refund] Refund");
    t.type_text(":action refund");
    t.keys(&["Enter"]);
    t.wait_for("action refund: done");
    t.wait_for("refund wants to run");
    t.wait_for(r#"tool: refund(order: "5521", amount: 40)"#);
    t.wait_for("push: refund needs a yes");
    t.keys(&["Tab"]);
    t.wait_for("> (o) Allow");
    t.keys(&["Enter"]);
    t.wait_for("note: Refund of 40 issued");
    t.wait_for("0 open asks");
    // Ctrl-C quits and gives the terminal back.
    t.keys(&["C-c"]);
    t.wait_until("the phone's exit", |_| t.exited());
}

#[test]
fn pty_over_https_with_the_pinned_certificate() {
    let dir = TestDir::new("pty-https");
    let desk = Desk::https(&dir, &[]);
    let t = Tmux::phone(&dir, &desk, 100, 30);
    ready(&t);
    say(&t, "over tls");
    t.wait_for("agent: Got it: over tls");
    let screen = t.screen();
    assert!(!screen.contains(desk.token.as_deref().unwrap()), "the token shows:\n{screen}");
}
