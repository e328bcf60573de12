//! The phone on a real pseudo-terminal (tmux), driven by keys against the
//! support desk: each ask kind answered on its card, allow-always with its
//! second Enter, a send whose reply streams in, a stop, the refund action's
//! approval, the same over HTTPS with a pinned certificate, and wide text
//! (emoji, CJK) laid out by the columns it takes.

mod support;

use std::process::Command;

use support::{Desk, PATIENCE, TestDir, Tmux, durable};

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

/// The phone in a tmux server of this file's own, for what `support::Tmux`
/// does not tell: where the terminal's cursor is.
struct Pane {
    server: String,
}

impl Pane {
    fn phone(dir: &TestDir, desk: &Desk, width: u16, height: u16) -> Pane {
        let server = format!("wide-{}-{}", std::process::id(), dir.0.file_name().unwrap().to_str().unwrap());
        let config = dir.0.join("wide.conf");
        std::fs::write(&config, "set -g remain-on-exit on\nset -g status off\n").unwrap();
        let out = Command::new(support::tmux_binary())
            // -u: UTF-8 whatever the locale says.
            .args(["-u", "-L", &server, "-f", config.to_str().unwrap()])
            .args(["new-session", "-d", "-s", "phone", "-x", &width.to_string(), "-y", &height.to_string()])
            .arg(durable())
            .arg("phone")
            .args(desk.args())
            .env_remove("TMUX")
            .env_remove("COLLIE_DURABLE_SOCKET")
            .env_remove("COLLIE_TOKEN")
            .env("TERM", "xterm")
            .output()
            .expect("running tmux");
        assert!(out.status.success(), "tmux new-session failed: {}", String::from_utf8_lossy(&out.stderr));
        Pane { server }
    }

    fn tmux(&self, args: &[&str]) -> String {
        let out = Command::new("tmux").args(["-L", &self.server]).args(args).output().expect("running tmux");
        assert!(out.status.success(), "tmux {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn screen(&self) -> String {
        self.tmux(&["capture-pane", "-p", "-t", "phone"])
    }

    fn type_text(&self, text: &str) {
        self.tmux(&["send-keys", "-t", "phone", "-l", text]);
    }

    fn enter(&self) {
        self.tmux(&["send-keys", "-t", "phone", "Enter"]);
    }

    /// The cursor's column and row on the terminal.
    fn cursor(&self) -> (usize, usize) {
        let at = self.tmux(&["display-message", "-p", "-t", "phone", "#{cursor_x} #{cursor_y}"]);
        let (x, y) = at.trim().split_once(' ').expect("x y");
        (x.parse().unwrap(), y.parse().unwrap())
    }

    fn wait_until(&self, what: &str, check: impl Fn(&str) -> bool) -> String {
        let deadline = std::time::Instant::now() + PATIENCE;
        loop {
            let screen = self.screen();
            if check(&screen) {
                return screen;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the screen never showed {what:?}; it shows:\n{screen}"
            );
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }

    fn wait_for(&self, text: &str) -> String {
        self.wait_until(text, |s| s.contains(text))
    }
}

impl Drop for Pane {
    fn drop(&mut self) {
        let _ = Command::new("tmux").args(["-L", &self.server, "kill-server"]).output();
    }
}

/// The screen without its blanks: text the phone wrapped, read whole.
fn squash(text: &str) -> String {
    text.chars().filter(|c| !c.is_whitespace()).collect()
}

#[test]
fn pty_wide_text_keeps_the_layout() {
    let dir = TestDir::new("pty-wide");
    let desk = Desk::socket(&dir, &[]);
    let (width, height) = (60, 24);
    let t = Pane::phone(&dir, &desk, width, height);
    t.wait_for("> ticket-1  Maria Lopez · idle");
    t.wait_for(" ticket-1 · Maria Lopez · idle");

    // The composer's cursor counts columns: "> " and three CJK characters.
    t.type_text("日本語");
    t.wait_for("> 日本語");
    let (x, y) = t.cursor();
    assert_eq!((x, y), (8, usize::from(height) - 1), "{}", t.screen());
    t.enter();

    let hello = "héllo 👋 日本語";
    t.type_text(hello);
    t.enter();
    let screen = t.wait_for(&format!("agent: Got it: {hello}"));
    assert!(screen.lines().any(|l| l.trim_end() == format!(" you: {hello}")), "{screen}");

    // Wider than the pane in columns, though not in characters: it wraps,
    // and every row stays where it belongs.
    let long = "日本語の長い文章です".repeat(3);
    assert!(long.chars().count() + " agent: Got it: ".len() < usize::from(width));
    t.type_text(&long);
    t.enter();
    let whole = squash(&format!("agent: Got it: {long}"));
    let screen = t.wait_until("the long reply, whole", |s| squash(s).contains(&whole));
    let lines: Vec<&str> = screen.lines().collect();
    assert_eq!(lines.len(), usize::from(height), "{screen}");
    assert!(lines[0].starts_with(" desk · ready · 0 open asks"), "{screen}");
    assert!(lines[height as usize - 1].starts_with('>'), "{screen}");
    assert!(lines[height as usize - 2].starts_with(" agent answered: send: sent"), "{screen}");
    // The chat: its title, then each row starts in the margin.
    let title =
        lines.iter().position(|l| l.starts_with(" ticket-1 · Maria Lopez")).expect("the chat's title");
    for line in &lines[title + 1..height as usize - 3] {
        assert!(line.is_empty() || line.starts_with(' '), "a row spilled over:\n{screen}");
    }
    assert!(squash(&screen).contains(&squash(&format!("you: {long}"))), "{screen}");
    assert!(squash(&screen).contains(&squash(&format!("you: {hello}"))), "{screen}");
}
