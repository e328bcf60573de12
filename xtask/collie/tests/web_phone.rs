//! `durable phone --web` in a real Chromium: the page
//! (`crates/durable-cli/web/`) served by the CLI in front of the support
//! desk (or a fake agent), driven through chromedriver with WebDriver
//! (`fantoccini`): the desk's refund, every kind of card, a message and its
//! streamed reply, stop, a closed conversation read from history, every
//! item kind, the agent row's states, text from the agent that tries to be
//! HTML and must stay text, and the requests the server must refuse.
//!
//! Needs `/usr/bin/chromium` and `/usr/bin/chromedriver` (Debian's
//! `chromium` and `chromium-driver`). The tests take turns (one browser at
//! a time): the machines that run them are small.

mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::os::unix::net::UnixListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};
use support::{Desk, PATIENCE, TestDir, durable};

/// One browser at a time.
static TURN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

/// A child process killed when dropped.
struct Kid(Child);

impl Drop for Kid {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// The browser's fresh profile folder. When dropped (after chromedriver),
/// the Chromium processes started on it are killed too: a test that fails
/// never ends its session, and chromedriver's death leaves them running.
struct Profile(TestDir);

impl Drop for Profile {
    fn drop(&mut self) {
        let flag = format!("--user-data-dir={}", self.0.0.display());
        let Ok(procs) = std::fs::read_dir("/proc") else { return };
        for entry in procs.flatten() {
            let name = entry.file_name();
            let Some(pid) = name.to_str().filter(|n| n.bytes().all(|b| b.is_ascii_digit())) else { continue };
            let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else { continue };
            if cmdline.split(|b| *b == 0).any(|arg| arg == flag.as_bytes()) {
                let _ = Command::new("kill").args(["-9", pid]).status();
            }
        }
    }
}

/// chromedriver on a free port, and a browser session on it with a fresh
/// profile.
struct Browser {
    client: Client,
    _driver: Kid,
    _profile: Profile,
}

impl Browser {
    async fn start() -> Browser {
        for bin in [CHROMIUM, CHROMEDRIVER] {
            assert!(Path::new(bin).exists(), "{bin} is missing: apt-get install -y chromium chromium-driver");
        }
        let port = free_port();
        let driver = Kid(Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting chromedriver"));
        let deadline = Instant::now() + PATIENCE;
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "chromedriver never listened on {port}");
            std::thread::sleep(Duration::from_millis(50));
        }
        let profile = Profile(TestDir::new("chrome"));
        let mut caps = serde_json::Map::new();
        caps.insert(
            "goog:chromeOptions".into(),
            json!({
                "binary": CHROMIUM,
                "args": [
                    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                    "--no-first-run", "--disable-background-networking", "--disable-component-update",
                    "--disable-sync", "--disable-quic", "--window-size=412,915",
                    format!("--user-data-dir={}", profile.0.0.display()),
                ],
            }),
        );
        // chromedriver is plain HTTP on loopback; fantoccini's rustls still
        // wants the process's crypto provider chosen.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = ClientBuilder::rustls()
            .expect("rustls")
            .capabilities(caps)
            .connect(&format!("http://127.0.0.1:{port}"))
            .await
            .expect("a browser session");
        Browser { client, _driver: driver, _profile: profile }
    }

    async fn close(self) {
        let Browser { client, _driver, _profile } = self;
        let _ = client.close().await;
    }

    async fn goto(&self, url: &str) {
        self.client.goto(url).await.unwrap_or_else(|e| panic!("opening {url}: {e}"));
    }

    async fn run(&self, script: &str, args: Vec<Value>) -> Value {
        self.client.execute(script, args).await.unwrap_or_else(|e| panic!("{script}: {e}"))
    }

    /// The text of every element `css` finds.
    async fn texts(&self, css: &str) -> Vec<String> {
        let v = self
            .run(
                "return Array.from(document.querySelectorAll(arguments[0]), e => e.textContent);",
                vec![json!(css)],
            )
            .await;
        v.as_array().unwrap().iter().map(|t| t.as_str().unwrap_or("").to_owned()).collect()
    }

    /// Waits until an element `css` finds has a text `check` takes; that text.
    async fn wait_for(&self, css: &str, what: &str, check: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let texts = self.texts(css).await;
            if let Some(t) = texts.iter().find(|t| check(t)) {
                return t.clone();
            }
            if Instant::now() > deadline {
                let page = self.texts("#app").await.join("\n");
                panic!("never saw {what} ({css}); it shows {texts:?}\nthe page: {page}");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn wait_text(&self, css: &str, text: &str) -> String {
        self.wait_for(css, text, |t| t.contains(text)).await
    }

    /// Waits until nothing `css` finds has a text `check` takes.
    async fn wait_gone(&self, css: &str, what: &str, check: impl Fn(&str) -> bool) {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let texts = self.texts(css).await;
            if !texts.iter().any(|t| check(t)) {
                return;
            }
            assert!(Instant::now() < deadline, "{what} never went ({css}): {texts:?}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Clicks the element `css` finds, as a person would (WebDriver's
    /// click), trying again while the page draws it anew.
    async fn click(&self, css: &str) {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let clicked = match self.client.find(Locator::Css(css)).await {
                Ok(e) => e.click().await.map_err(|e| e.to_string()),
                Err(e) => Err(e.to_string()),
            };
            match clicked {
                Ok(()) => return,
                Err(e) if Instant::now() > deadline => panic!("cannot click {css}: {e}"),
                Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
    }

    /// Types into the element `css` finds (`\u{E007}` is Enter).
    async fn type_into(&self, css: &str, text: &str) {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let typed = match self.client.find(Locator::Css(css)).await {
                Ok(e) => e.send_keys(text).await.map_err(|e| e.to_string()),
                Err(e) => Err(e.to_string()),
            };
            match typed {
                Ok(()) => return,
                Err(e) if Instant::now() > deadline => panic!("cannot type into {css}: {e}"),
                Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
    }

    async fn attr(&self, css: &str, name: &str) -> Option<String> {
        let v = self
            .run(
                "const e = document.querySelector(arguments[0]); return e ? e.getAttribute(arguments[1]) : null;",
                vec![json!(css), json!(name)],
            )
            .await;
        v.as_str().map(str::to_owned)
    }

    async fn count(&self, css: &str) -> usize {
        self.texts(css).await.len()
    }

    /// Sends a message from the open chat's composer with Enter.
    async fn say(&self, text: &str) {
        // What a refused send left in it goes first.
        self.run("const c = document.querySelector('[data-test=composer]'); if (c) c.value = '';", vec![])
            .await;
        self.type_into("[data-test=composer]", &format!("{text}\u{E007}")).await;
    }

    /// What a script of the agent's text would have changed, had it run.
    async fn owned(&self) -> Value {
        self.run("return [document.title, window.__owned === undefined ? null : window.__owned];", vec![])
            .await
    }
}

/// `durable phone --web <args>`: the page's address, and the server.
struct Web {
    url: String,
    _child: Kid,
}

impl Web {
    fn start(args: &[String]) -> Web {
        let mut child = Command::new(durable())
            .args(["phone", "--web"])
            .args(args)
            .env_remove("COLLIE_DURABLE_SOCKET")
            .env_remove("COLLIE_TOKEN")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting durable phone --web");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let _ = tx.send(line);
            }
        });
        let child = Kid(child);
        let deadline = Instant::now() + PATIENCE;
        let url = loop {
            let line = rx
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
                .expect("durable phone --web prints its address");
            if line.starts_with("http://127.0.0.1:") && line.ends_with('/') {
                break line;
            }
        };
        Web { url, _child: child }
    }

    fn desk(desk: &Desk) -> Web {
        Web::start(&desk.args())
    }

    /// `http://127.0.0.1:<port>`
    fn origin(&self) -> String {
        let rest = &self.url["http://".len()..];
        format!("http://{}", &rest[..rest.find('/').unwrap()])
    }
}

async fn open_pane(b: &Browser, pane: &str) {
    b.click(&format!("[data-test=pane-row][data-pane='{pane}']")).await;
    b.wait_for("[data-test=chat]", "the chat", |_| true).await;
}

async fn back_home(b: &Browser) {
    b.click("[data-test=back]").await;
    b.wait_for("[data-test=pane-list]", "the list", |_| true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn web_refund_is_asked_on_a_card_and_issued() {
    let _turn = TURN.lock().await;
    let dir = TestDir::new("web-refund");
    let desk = Desk::socket(&dir, &[]);
    let web = Web::desk(&desk);
    let b = Browser::start().await;
    b.goto(&web.url).await;
    // The agent's row: its name, the badge, its runtime and where it runs.
    assert_eq!(b.wait_text("[data-test=agent-name]", "desk").await, "desk");
    b.wait_text("[data-test=agent-badge]", "Experimental").await;
    b.wait_text("[data-test=agent-facts]", "rust · runs here").await;
    b.wait_text("[data-test=agent-status]", "ready").await;
    b.wait_text("[data-test=agent-open]", "open").await;
    assert_eq!(b.count("[data-test=agent-waiting]").await, 0, "nothing waits yet");
    b.wait_text("[data-test=pane-row][data-pane='ticket-1']", "Maria Lopez").await;

    open_pane(&b, "ticket-1").await;
    b.wait_text("[data-test=action][data-action=refund]", "Refund").await;
    assert_eq!(b.count("[data-test=action][data-action=refund] svg").await, 1, "the check icon");
    b.click("[data-test=action][data-action=refund]").await;
    b.wait_text("[data-test=send-result]", "done").await;
    // The card: the agent's name, the question, the tool line and its arguments.
    let card = "[data-test=card][data-kind=choice]";
    b.wait_text(&format!("{card} [data-test=card-agent]"), "desk asks").await;
    b.wait_text(&format!("{card} [data-test=card-title]"), "refund wants to run").await;
    let tool =
        b.wait_text(&format!("{card} [data-test=card-tool]"), "refund(order: \"5521\", amount: 40)").await;
    assert!(tool.contains("order: \"5521\"") && tool.contains("amount: 40"), "{tool}");
    b.wait_text("[data-test=chat-state]", "waiting for you").await;

    // The list puts it first, in the attention colour.
    back_home(&b).await;
    b.wait_text("[data-test=agent-waiting]", "1 waiting for you").await;
    assert_eq!(
        b.attr("[data-test=pane-list] [data-test=pane-row]", "data-pane").await.as_deref(),
        Some("ticket-1")
    );
    assert_eq!(b.attr("[data-pane='ticket-1']", "data-waiting").await.as_deref(), Some("true"));

    open_pane(&b, "ticket-1").await;
    b.click(&format!("{card} [data-test=option][data-option=allow]")).await;
    b.wait_text("[data-test=card-line]", "Answered: Allow").await;
    let notice = b.wait_text("[data-test=item][data-kind=notice]", "Refund of 40 issued").await;
    assert_eq!(notice, "Refund of 40 issued");
    b.wait_gone("[data-test=card]", "the card", |_| true).await;
    b.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn web_answers_every_kind_of_card() {
    let _turn = TURN.lock().await;
    let dir = TestDir::new("web-cards");
    let desk = Desk::socket(&dir, &[]);
    let web = Web::desk(&desk);
    let b = Browser::start().await;
    b.goto(&format!("{}#/pane/ticket-1", web.url)).await;
    b.wait_text("[data-test=chat-title]", "Maria Lopez").await;
    let reply = "[data-test=item][data-kind=reply]";

    // A choice.
    b.say("/ask choice").await;
    b.wait_text("[data-test=card][data-kind=choice] [data-test=card-title]", "Is the problem solved?").await;
    // A send while the card is open: refused, with a way to the card.
    b.say("hello").await;
    b.wait_text("[data-test=send-result]", "ask-open").await;
    b.click("[data-test=show-card]").await;
    b.click("[data-test=card] [data-test=option][data-option=no]").await;
    b.wait_text(reply, r#"Answer: {"optionIds":["no"]}"#).await;
    b.wait_text("[data-test=card-line]", "Answered: No").await;

    // A multi: two picked, then answered.
    b.say("/ask multi").await;
    let multi = "[data-test=card][data-kind=multi]";
    b.wait_text(&format!("{multi} [data-test=card-title]"), "Which colours?").await;
    b.click(&format!("{multi} [data-option=red]")).await;
    b.click(&format!("{multi} [data-option=blue]")).await;
    b.click(&format!("{multi} [data-test=card-submit]")).await;
    b.wait_text(reply, r#"Answer: {"optionIds":["red","blue"]}"#).await;

    // A text, sent with Enter.
    b.say("/ask text").await;
    let text = "[data-test=card][data-kind=text]";
    b.wait_text(&format!("{text} [data-test=card-title]"), "What should the reply say?").await;
    b.type_into(&format!("{text} [data-test=card-text]"), "Ship it, now\u{E007}").await;
    b.wait_text(reply, r#"Answer: {"text":"Ship it, now"}"#).await;

    // A form: a required field left out is the agent's 400, on the card.
    b.say("/ask form").await;
    let form = "[data-test=card][data-kind=form]";
    b.wait_text(&format!("{form} [data-test=card-title]"), "Order details").await;
    b.type_into(&format!("{form} [data-field=qty]"), "2").await;
    b.click(&format!("{form} [data-test=card-submit]")).await;
    b.wait_text(&format!("{form} [data-test=card-note]"), "bad-request").await;
    b.type_into(&format!("{form} [data-field=name]"), "Ana Lopez").await;
    b.click(&format!("{form} [data-field=gift]")).await;
    b.client
        .find(Locator::Css(&format!("{form} [data-field=size]")))
        .await
        .unwrap()
        .select_by_value("m")
        .await
        .unwrap();
    b.click(&format!("{form} [data-test=card-submit]")).await;
    b.wait_text(reply, r#"Answer: {"values":{"gift":true,"name":"Ana Lopez","qty":2,"size":"m"}}"#).await;

    // Allow always asks for a second tap.
    b.say("/ask approve").await;
    let approve = "[data-test=card][data-kind=choice]";
    b.wait_text(&format!("{approve} [data-test=card-tool]"), "escalate(ticket: \"ticket-1\")").await;
    b.click(&format!("{approve} [data-option=allow-always]")).await;
    b.wait_text(
        &format!("{approve} [data-test=confirm-always]"),
        "\u{201c}Allow always\u{201d} holds beyond this question. Tap it again to confirm.",
    )
    .await;
    b.wait_text(&format!("{approve} [data-option=allow-always]"), "Confirm: Allow always").await;
    // Past the page's window in which a second tap is the same gesture (a
    // double-click), and long enough for a request the first tap sent to be
    // answered: nothing was.
    tokio::time::sleep(std::time::Duration::from_millis(800)).await;
    assert!(!b.texts(reply).await.iter().any(|t| t.contains("allow-always")), "one tap sent nothing");
    b.click(&format!("{approve} [data-option=allow-always]")).await;
    b.wait_text(reply, r#"Answer: {"optionIds":["allow-always"]}"#).await;

    // A card with little time shows it, then the agent's line when it ran out.
    b.say("/ask choice 3s").await;
    b.wait_for("[data-test=card] [data-test=card-time]", "the time left", |t| {
        t.starts_with("expires in ") && t.ends_with('s')
    })
    .await;
    b.wait_text("[data-test=item][data-kind=notice]", "Timed out before an answer: Is the problem solved?")
        .await;
    b.wait_gone("[data-test=card]", "the expired card", |_| true).await;
    b.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn web_a_message_streams_its_reply_in_place_and_stop_ends_a_turn() {
    let _turn = TURN.lock().await;
    let dir = TestDir::new("web-stream");
    let desk = Desk::socket(&dir, &["--turn-ms", "10000"]);
    let web = Web::desk(&desk);
    let b = Browser::start().await;
    b.goto(&format!("{}#/pane/ticket-1", web.url)).await;
    b.wait_text("[data-test=chat-title]", "Maria Lopez").await;
    b.say("hi there").await;
    b.wait_text("[data-test=send-result]", "sent").await;
    b.wait_text("[data-test=item][data-kind=user]", "hi there").await;
    b.wait_text("[data-test=chat-state]", "working").await;
    // The reply grows in place: one element, partial, then whole.
    let partial = "[data-test=item][data-kind=reply][data-partial=true]";
    let first = b.wait_for(partial, "a partial reply", |t| t.starts_with("Got")).await;
    let id = b.attr(partial, "data-item").await.expect("the reply's id");
    b.wait_for(partial, "the reply grown", |t| t.len() > first.len()).await;
    b.say("and more").await;
    b.wait_text("[data-test=send-result]", "queued").await;
    let whole = format!("[data-test=item][data-item='{id}']:not([data-partial])");
    assert_eq!(b.wait_text(&whole, "Got it: hi there").await, "Got it: hi there");
    assert_eq!(b.count(&format!("[data-item='{id}']")).await, 1, "one element for the reply");

    // The queued message runs its own turn; stop ends it with what it had.
    b.wait_for(partial, "the queued turn's partial reply", |t| t.starts_with("Got")).await;
    b.click("[data-test=stop]").await;
    b.wait_text("[data-test=send-result]", "stopped").await;
    b.wait_text("[data-test=chat-state]", "idle").await;
    b.wait_gone(partial, "the partial reply", |_| true).await;
    assert!(
        !b.texts("[data-test=item][data-kind=reply]").await.iter().any(|t| t == "Got it: and more"),
        "the stopped turn did not finish"
    );
    // Steer on an idle pane is not offered.
    let disabled = b.run("return document.querySelector('[data-test=steer]').disabled;", vec![]).await;
    assert_eq!(disabled, json!(true));
    b.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn web_renames_closes_and_reads_a_closed_conversation_from_history() {
    let _turn = TURN.lock().await;
    let dir = TestDir::new("web-history");
    let desk = Desk::socket(&dir, &["--turn-ms", "0"]);
    let web = Web::desk(&desk);
    let b = Browser::start().await;
    b.goto(&web.url).await;
    b.click("[data-test=starter][data-starter=new-ticket]").await;
    b.wait_for("[data-test=chat][data-pane='ticket-2']", "the new ticket", |_| true).await;
    b.say("Where is my parcel?").await;
    b.wait_text("[data-test=item][data-kind=reply]", "Got it: Where is my parcel?").await;
    b.click("[data-test=rename]").await;
    b.run("document.querySelector('[data-test=rename-input]').value = '';", vec![]).await;
    b.type_into("[data-test=rename-input]", "Ana Ruiz\u{E007}").await;
    b.wait_text("[data-test=chat-title]", "Ana Ruiz").await;
    b.click("[data-test=close]").await;
    b.click("[data-test=close-confirm]").await;
    // Back on the list: gone from the open ones, under Closed.
    b.wait_text("[data-test=closed-row][data-session='ticket-2']", "Ana Ruiz").await;
    b.wait_gone("[data-test=pane-row]", "ticket-2 among the open", |t| t.contains("Ana Ruiz")).await;
    b.click("[data-test=closed-row][data-session='ticket-2']").await;
    b.wait_text("[data-test=history] [data-test=chat-state]", "closed · read only").await;
    b.wait_text("[data-test=history] [data-test=item][data-kind=user]", "Where is my parcel?").await;
    b.wait_text("[data-test=history] [data-test=item][data-kind=reply]", "Got it: Where is my parcel?").await;
    assert_eq!(b.count("[data-test=composer]").await, 0, "read only");
    back_home(&b).await;
    b.click("[data-test=reopen][data-pane='ticket-2']").await;
    b.wait_for("[data-test=chat][data-pane='ticket-2']", "the reopened ticket", |_| true).await;
    back_home(&b).await;
    b.wait_text("[data-test=pane-row][data-pane='ticket-2']", "Ana Ruiz").await;
    b.close().await;
}

/// Text that would run, were it drawn as HTML.
const SCRIPT: &str = "<script>document.title='owned';window.__owned=1</script>";
const IMG: &str = "<img src=x onerror=\"document.title='owned';window.__owned=2\">";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn web_shows_the_desks_html_as_text_and_runs_none_of_it() {
    let _turn = TURN.lock().await;
    let dir = TestDir::new("web-inject");
    let desk = Desk::socket(&dir, &["--turn-ms", "0"]);
    let web = Web::desk(&desk);
    let b = Browser::start().await;
    b.goto(&format!("{}#/pane/ticket-1", web.url)).await;
    b.wait_text("[data-test=chat-title]", "Maria Lopez").await;
    let title = b.owned().await;
    let payload = format!("{SCRIPT} and {IMG}");
    b.say(&payload).await;
    // The desk echoes it: a reply with the markup, shown as the text it is.
    let echo = format!("Got it: {payload}");
    assert_eq!(b.wait_text("[data-test=item][data-kind=reply]", &echo).await, echo);
    assert_eq!(b.wait_text("[data-test=item][data-kind=user]", &payload).await, payload);
    // A title too.
    b.click("[data-test=rename]").await;
    b.run("document.querySelector('[data-test=rename-input]').value = '';", vec![]).await;
    b.type_into("[data-test=rename-input]", &format!("{IMG}\u{E007}")).await;
    assert_eq!(b.wait_text("[data-test=chat-title]", IMG).await, IMG);
    back_home(&b).await;
    b.wait_text("[data-test=pane-row][data-pane='ticket-1']", IMG).await;
    // Nothing ran, and nothing of it became an element.
    assert_eq!(b.owned().await, title);
    assert_eq!(b.count("#app img").await, 0);
    assert_eq!(b.count("script").await, 1, "only app.js");
    b.close().await;
}

/// A request as a fake agent reads it.
struct Req {
    method: String,
    /// The path, its query left out.
    path: String,
    /// The query, without its `?`.
    query: String,
    if_none_match: Option<String>,
    /// The body, as text.
    body: String,
}

/// How a fake agent answers a request: a status and a body (`304` sends
/// none).
type Route = Box<dyn Fn(&Req) -> (u16, String) + Send + Sync>;

/// A fake agent on a socket: each request gets the answer `route` gives,
/// with `ETag: "e-1"`.
fn fake_agent(dir: &TestDir, route: impl Fn(&Req) -> (u16, String) + Send + Sync + 'static) -> String {
    let path = dir.0.join("fake.sock");
    let listener = UnixListener::bind(&path).unwrap();
    let route = std::sync::Arc::new(route);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { break };
            let route = route.clone();
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut head = String::new();
                if reader.read_line(&mut head).unwrap_or(0) == 0 {
                    return;
                }
                let mut length = 0;
                let mut if_none_match = None;
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 {
                        return;
                    }
                    let lower = line.to_ascii_lowercase();
                    if let Some(v) = lower.strip_prefix("content-length:") {
                        length = v.trim().parse().unwrap_or(0);
                    }
                    if lower.starts_with("if-none-match:") {
                        if_none_match = Some(line["if-none-match:".len()..].trim().to_owned());
                    }
                    if line == "\r\n" {
                        break;
                    }
                }
                let mut body = vec![0; length];
                let _ = reader.read_exact(&mut body);
                let mut words = head.split_whitespace();
                let method = words.next().unwrap_or("").to_owned();
                let target = words.next().unwrap_or("");
                let (path, query) = target.split_once('?').unwrap_or((target, ""));
                let body = String::from_utf8_lossy(&body).into_owned();
                let req = Req { method, path: path.to_owned(), query: query.to_owned(), if_none_match, body };
                let (status, text) = route(&req);
                let _ = if status == 304 {
                    write!(stream, "HTTP/1.1 304 Not Modified\r\netag: \"e-1\"\r\nconnection: close\r\n\r\n")
                } else {
                    write!(
                        stream,
                        "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\netag: \"e-1\"\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{text}",
                        text.len()
                    )
                };
            });
        }
    });
    path.to_str().unwrap().to_owned()
}

fn hello(min: u32, max: u32, ready: bool) -> String {
    json!({"ok": true, "wire": {"min": min, "max": max}, "sdk": {"name": "fake", "version": "0"},
        "host": "fake", "runtime": "node", "ready": ready, "epoch": "0123456789abcdef", "callerCheck": "on",
        "caps": {"asks": true, "starters": false, "send": true, "steer": true, "abort": true, "rename": false,
            "close": false, "actions": true, "history": false, "reopen": false, "terminal": false}})
    .to_string()
}

/// The fake's ask: its words are markup; the hash follows the title.
fn fake_ask(title: &str) -> Value {
    let hash = if title == IMG { "a" } else { "b" }.repeat(64);
    json!({"id": "a1b2c3d4e5f60718293a4b5c6d7e8f90", "pane": "p1", "kind": "choice",
        "title": title, "reason": SCRIPT, "itemId": "t1", "toolCallId": "t1",
        "tool": {"name": "deploy", "call": format!("deploy(note: {IMG:?})"), "args": [["note", format!("{IMG:?}")]]},
        "options": [{"id": "go", "label": SCRIPT}, {"id": "img", "label": IMG},
            {"id": "always", "label": "Always", "always": true}],
        "createdAt": "2026-11-30T05:00:00.000Z", "readable": false, "cleaned": true, "hash": hash})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn web_draws_every_item_kind_and_an_agents_markup_stays_text() {
    let _turn = TURN.lock().await;
    let dir = TestDir::new("web-items");
    let items = json!([
        {"id": "u1", "kind": "user", "text": "hello"},
        {"id": "r1", "kind": "reply", "text": format!("line one\n{SCRIPT}")},
        {"id": "m1", "kind": "markdown", "text": "# Title\n**bold** <b>not bold</b>"},
        {"id": "t1", "kind": "thinking", "text": "hmm", "partial": true},
        {"id": "n1", "kind": "notice", "text": "careful", "tone": "warn"},
        {"id": "c1", "kind": "code", "text": "fn main() {}", "lang": "rust"},
        {"id": "k1", "kind": "tool", "name": "refund", "call": "refund(order: \"5521\")", "status": "ok",
            "output": "done", "badge": {"text": "40 €", "tone": "good"}},
        {"id": "l1", "kind": "link", "text": "The order", "href": "https://example.invalid/o/1"},
        {"id": "l2", "kind": "link", "text": "Not a link", "href": "javascript:window.__owned=3"},
        {"id": "g1", "kind": "progress", "label": "Upload", "value": 0.5, "badge": {"text": "half", "tone": "neutral"}}
    ]);
    let snapshot = json!({"ok": true, "pane": "p1", "snapshot": true, "next": 9, "state": "idle",
        "turnId": null, "asks": [], "dropped": true, "items": items})
    .to_string();
    let state = json!({"ok": true, "epoch": "0123456789abcdef", "seq": 1, "ready": true, "full": true,
        "workspaces": [{"id": "w", "title": "W", "tabs": [{"id": "w:t", "title": "T", "panes": ["p1"]}]}],
        "panes": [{"id": "p1", "tab": "w:t", "title": SCRIPT, "harness": "fake", "sessionId": null,
            "state": "idle", "turnId": null, "lastSeq": 9, "openAsks": ["a1b2c3d4e5f60718293a4b5c6d7e8f90"],
            "actions": []}],
        "removed": [], "closed": [], "starters": [], "asks": [fake_ask(IMG)]})
    .to_string();
    let socket = fake_agent(&dir, move |r: &Req| match (r.method.as_str(), r.path.as_str()) {
        ("GET", "/hello") => (200, hello(1, 1, true)),
        ("POST", "/hello") => {
            (200, r#"{"ok": true, "wire": {"min": 1, "max": 1}, "compatible": true}"#.into())
        }
        ("GET", "/v1/state") => (200, state.clone()),
        ("GET", "/v1/panes/p1/events") => (200, snapshot.clone()),
        // The question changed meanwhile: the card as it is now.
        ("POST", a) if a.starts_with("/v1/asks/") => (
            409,
            json!({"ok": false, "code": "hash-mismatch", "message": "the ask changed",
                "ask": fake_ask("Deploy to production now?")})
            .to_string(),
        ),
        _ => (404, r#"{"ok": false, "code": "not-found", "message": "no"}"#.into()),
    });
    let web = Web::start(&["--socket".into(), socket]);
    let b = Browser::start().await;
    b.goto(&web.url).await;
    let before = b.owned().await;
    b.wait_text("[data-test=agent-waiting]", "1 waiting for you").await;
    b.wait_text("[data-test=agent-facts]", "node · runs here").await;
    assert_eq!(
        b.wait_text("[data-test=pane-row][data-pane=p1]", SCRIPT).await,
        format!("{SCRIPT}waiting for you")
    );
    open_pane(&b, "p1").await;

    // Every kind, by its hook; the text as sent.
    let item = |id: &str| format!("[data-test=item][data-item={id}]");
    b.wait_text(
        "[data-test=skipped]",
        "Older messages were skipped: the durable agent no longer keeps them.",
    )
    .await;
    assert_eq!(b.wait_text(&item("u1"), "hello").await, "hello");
    assert_eq!(b.wait_text(&item("r1"), "line one").await, format!("line one\n{SCRIPT}"));
    assert_eq!(
        b.wait_text(&item("m1"), "Title").await,
        "# Title\n**bold** <b>not bold</b>",
        "markdown as text"
    );
    assert_eq!(b.count("#app b, #app h1, #app strong").await, 0, "no markdown or HTML rendered");
    assert_eq!(b.attr(&item("t1"), "data-partial").await.as_deref(), Some("true"));
    assert_eq!(b.attr(&item("n1"), "data-tone").await.as_deref(), Some("warn"));
    assert_eq!(b.attr(&item("c1"), "data-lang").await.as_deref(), Some("rust"));
    b.wait_text(&format!("{} code", item("c1")), "fn main() {}").await;
    assert_eq!(b.attr(&item("k1"), "data-status").await.as_deref(), Some("ok"));
    b.wait_text(&format!("{} [data-test=badge][data-tone=good]", item("k1")), "40 €").await;
    b.wait_text(&item("k1"), "done").await;
    assert_eq!(
        b.attr(&format!("{} a", item("l1")), "href").await.as_deref(),
        Some("https://example.invalid/o/1")
    );
    assert_eq!(b.attr(&format!("{} a", item("l1")), "rel").await.as_deref(), Some("noopener noreferrer"));
    assert_eq!(b.count(&format!("{} a", item("l2"))).await, 0, "a javascript: link is no link");
    b.wait_text(&item("l2"), "Not a link").await;
    assert_eq!(
        b.run(&format!("return document.querySelector('{} progress').value;", item("g1")), vec![]).await,
        json!(0.5)
    );
    b.wait_text(&item("g1"), "50%").await;

    // The card: markup in its title, reason, tool line and labels, as text;
    // no allow-always on a cleaned ask.
    let card = "[data-test=card]";
    assert_eq!(b.wait_text(&format!("{card} [data-test=card-title]"), IMG).await, IMG);
    assert_eq!(b.wait_text(&format!("{card} [data-test=card-reason]"), SCRIPT).await, SCRIPT);
    b.wait_text(&format!("{card} [data-test=card-tool]"), "deploy(note: ").await;
    assert_eq!(b.wait_text(&format!("{card} [data-option=go]"), SCRIPT).await, SCRIPT);
    assert_eq!(b.wait_text(&format!("{card} [data-option=img]"), IMG).await, IMG);
    assert_eq!(b.count(&format!("{card} [data-option=always]")).await, 0, "no allow-always on a cleaned ask");
    // An answer to a question that changed: refused, the card as it is now.
    b.click(&format!("{card} [data-option=go]")).await;
    b.wait_text(&format!("{card} [data-test=card-title]"), "Deploy to production now?").await;
    b.wait_text(&format!("{card} [data-test=card-note]"), "The question changed: look at it again.").await;
    assert_eq!(b.count("[data-test=card-line]").await, 0, "not answered");

    assert_eq!(b.owned().await, before, "no script of the agent ran");
    assert_eq!(b.count("#app img").await, 0);
    assert_eq!(b.count("script").await, 1, "only app.js");
    b.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn web_agent_row_says_starting_incompatible_refused_and_unreachable() {
    let _turn = TURN.lock().await;
    let dir = TestDir::new("web-row");
    let b = Browser::start().await;
    let empty_state = r#"{"ok": true, "epoch": "0123456789abcdef", "seq": 1, "ready": false, "full": true, "workspaces": [], "panes": [], "removed": [], "asks": [], "closed": [], "starters": []}"#;
    let cases: Vec<(&str, Route, &str)> = vec![
        (
            "starting",
            Box::new(move |r: &Req| match (r.method.as_str(), r.path.as_str()) {
                ("GET", "/hello") => (200, hello(1, 1, false)),
                ("GET", "/v1/state") => (200, empty_state.to_owned()),
                _ => (200, r#"{"ok": true, "compatible": true}"#.into()),
            }),
            "starting",
        ),
        (
            "later",
            Box::new(|r: &Req| match (r.method.as_str(), r.path.as_str()) {
                ("GET", "/hello") => (200, hello(2, 3, true)),
                _ => (200, r#"{"ok": true, "wire": {"min": 2, "max": 3}, "compatible": false}"#.into()),
            }),
            "durable-hello: incompatible: the durable agent speaks 2..3, this Collie speaks 1..1",
        ),
        (
            "token",
            Box::new(|_: &Req| {
                (401, r#"{"ok": false, "code": "token-refused", "message": "no token"}"#.into())
            }),
            "The durable agent refused the token (401)",
        ),
    ];
    for (name, route, says) in cases {
        let sub = TestDir::new(name);
        let socket = fake_agent(&sub, route);
        let web = Web::start(&["--socket".into(), socket]);
        b.goto(&web.url).await;
        let status = b.wait_text("[data-test=agent-status]", says).await;
        if name == "later" {
            assert_eq!(status, says, "Collie's sentence, exactly");
        }
    }
    // Nobody on the socket: unreachable, with the reason.
    let socket = dir.0.join("nobody.sock");
    let web = Web::start(&["--socket".into(), socket.to_str().unwrap().to_owned()]);
    b.goto(&web.url).await;
    let status = b.wait_text("[data-test=agent-status]", "Unreachable: ").await;
    assert!(status.len() > "Unreachable: ".len(), "with its reason: {status}");
    b.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn web_polls_with_since_and_if_none_match() {
    let _turn = TURN.lock().await;
    let dir = TestDir::new("web-poll");
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let log = seen.clone();
    let state = json!({"ok": true, "epoch": "0123456789abcdef", "seq": 1, "ready": true, "full": true,
        "workspaces": [{"id": "w", "title": "W", "tabs": [{"id": "w:t", "title": "T", "panes": ["p1"]}]}],
        "panes": [{"id": "p1", "tab": "w:t", "title": "Still here", "harness": "fake", "sessionId": null,
            "state": "idle", "turnId": null, "lastSeq": 0, "openAsks": [], "actions": []}],
        "removed": [], "closed": [], "starters": [], "asks": []})
    .to_string();
    let socket = fake_agent(&dir, move |r: &Req| {
        let mut log = log.lock().unwrap();
        log.push(format!(
            "{} {}?{} {}",
            r.method,
            r.path,
            r.query,
            r.if_none_match.as_deref().unwrap_or("-")
        ));
        match (r.method.as_str(), r.path.as_str()) {
            ("GET", "/hello") => (200, hello(1, 1, true)),
            // Nothing changed: the cheap answer.
            ("GET", "/v1/state") if r.if_none_match.as_deref() == Some("\"e-1\"") => (304, String::new()),
            ("GET", "/v1/state") => (200, state.clone()),
            _ => (200, r#"{"ok": true, "compatible": true}"#.into()),
        }
    });
    let web = Web::start(&["--socket".into(), socket]);
    let b = Browser::start().await;
    b.goto(&web.url).await;
    b.wait_text("[data-test=pane-row][data-pane=p1]", "Still here").await;
    let deadline = Instant::now() + PATIENCE;
    loop {
        let polls: Vec<String> =
            seen.lock().unwrap().iter().filter(|l| l.starts_with("GET /v1/state")).cloned().collect();
        // The first poll reads everything; the next ones ask for what
        // changed after seq 1, with the tag they hold, and get 304s.
        if polls.len() >= 3 {
            assert_eq!(polls[0], "GET /v1/state? -", "{polls:?}");
            assert!(polls[1..].iter().all(|p| p == "GET /v1/state?since=1 \"e-1\""), "{polls:?}");
            break;
        }
        assert!(Instant::now() < deadline, "fewer than 3 polls: {polls:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // A 304 keeps what the page shows.
    b.wait_text("[data-test=pane-row][data-pane=p1]", "Still here").await;
    b.wait_text("[data-test=agent-status]", "ready").await;
    b.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn web_an_answered_cards_line_sits_in_the_chat_and_the_buttons_done_goes() {
    let _turn = TURN.lock().await;
    let dir = TestDir::new("web-order");
    let desk = Desk::socket(&dir, &["--turn-ms", "0"]);
    let web = Web::desk(&desk);
    let b = Browser::start().await;
    b.goto(&format!("{}#/pane/ticket-1", web.url)).await;
    b.wait_text("[data-test=chat-title]", "Maria Lopez").await;
    b.say("before the refund").await;
    b.wait_text("[data-test=item][data-kind=reply]", "Got it: before the refund").await;
    b.click("[data-test=action][data-action=refund]").await;
    b.wait_text("[data-test=send-result]", "done").await;
    let card = "[data-test=card][data-kind=choice]";
    b.wait_text(&format!("{card} [data-test=card-title]"), "refund wants to run").await;
    b.click(&format!("{card} [data-option=allow]")).await;
    b.wait_text("[data-test=card-line]", "Answered: Allow").await;
    b.wait_text("[data-test=item][data-kind=notice]", "Refund of 40 issued").await;
    // The refund button's `done` went with its card.
    assert_eq!(b.texts("[data-test=send-result]").await, [""], "a button's word outlived its card");
    b.say("after the refund").await;
    b.wait_text("[data-test=item][data-kind=reply]", "Got it: after the refund").await;
    // The line is the chat's, in its order: after the messages before the
    // answer, before the agent's notice and the messages after.
    let order = b
        .run(
            "return Array.from(document.querySelectorAll('#items > *'), e =>
                e.dataset.test === 'card-line' ? 'LINE' : e.textContent);",
            vec![],
        )
        .await;
    let order: Vec<String> = serde_json::from_value(order).unwrap();
    let at = |what: &str| {
        order.iter().position(|t| t.contains(what)).unwrap_or_else(|| panic!("no {what:?} in {order:?}"))
    };
    assert!(at("Got it: before the refund") < at("LINE"), "{order:?}");
    assert!(at("LINE") < at("Refund of 40 issued"), "{order:?}");
    assert!(at("Refund of 40 issued") < at("Got it: after the refund"), "{order:?}");
    assert_eq!(b.count("#cards [data-test=card-line]").await, 0, "the line is not left above the composer");
    b.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn web_panes_dot_and_dot_dot_show_their_chat_and_take_writes() {
    let _turn = TURN.lock().await;
    let dir = TestDir::new("web-dots");
    let log = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let seen = log.clone();
    let state = json!({"ok": true, "epoch": "0123456789abcdef", "seq": 1, "ready": true, "full": true,
        "workspaces": [{"id": "w", "title": "W", "tabs": [{"id": "w:t", "title": "T", "panes": [".", ".."]}]}],
        "panes": [
            {"id": ".", "tab": "w:t", "title": "Dot", "harness": "fake", "sessionId": null,
                "state": "idle", "turnId": null, "lastSeq": 1, "openAsks": [], "actions": []},
            {"id": "..", "tab": "w:t", "title": "Dot dot", "harness": "fake", "sessionId": null,
                "state": "idle", "turnId": null, "lastSeq": 1, "openAsks": [],
                "actions": [{"id": "..", "label": "Up"}]}],
        "removed": [], "closed": [], "starters": [], "asks": []})
    .to_string();
    let events = |pane: &str, text: &str| {
        json!({"ok": true, "pane": pane, "snapshot": true, "next": 1, "state": "idle", "turnId": null,
            "asks": [], "dropped": false, "items": [{"id": "i1", "kind": "reply", "text": text}]})
        .to_string()
    };
    let socket = fake_agent(&dir, move |r: &Req| {
        if r.method == "POST" && r.path.starts_with("/v1/panes/") {
            seen.lock().unwrap().push(format!("{} {}", r.path, r.body));
        }
        match (r.method.as_str(), r.path.as_str()) {
            ("GET", "/hello") => (200, hello(1, 1, true)),
            ("GET", "/v1/state") => (200, state.clone()),
            // The proxy sends the ids percent-encoded.
            ("GET", "/v1/panes/%2E%2E/events") => (200, events("..", "in dot dot")),
            ("GET", "/v1/panes/%2E/events") => (200, events(".", "in dot")),
            ("POST", "/v1/panes/%2E%2E/send" | "/v1/panes/%2E/send") => {
                (200, r#"{"ok": true, "result": "sent", "replayed": false}"#.into())
            }
            ("POST", "/v1/panes/%2E%2E/actions/%2E%2E") => (200, r#"{"ok": true}"#.into()),
            ("POST", "/hello") => {
                (200, r#"{"ok": true, "wire": {"min": 1, "max": 1}, "compatible": true}"#.into())
            }
            _ => (404, r#"{"ok": false, "code": "not-found", "message": "no"}"#.into()),
        }
    });
    let web = Web::start(&["--socket".into(), socket]);
    let b = Browser::start().await;
    b.goto(&web.url).await;
    b.wait_text("[data-test=pane-row][data-pane='..']", "Dot dot").await;
    open_pane(&b, "..").await;
    b.wait_text("[data-test=item]", "in dot dot").await;
    b.say("up there").await;
    b.wait_text("[data-test=send-result]", "sent").await;
    b.click("[data-test=action][data-action='..']").await;
    b.wait_text("[data-test=send-result]", "done").await;
    back_home(&b).await;
    open_pane(&b, ".").await;
    b.wait_text("[data-test=item]", "in dot").await;
    b.say("right here").await;
    b.wait_text("[data-test=send-result]", "sent").await;
    let log = log.lock().unwrap().clone();
    assert_eq!(log.len(), 3, "{log:?}");
    assert!(log[0].starts_with("/v1/panes/%2E%2E/send ") && log[0].contains("up there"), "{log:?}");
    assert!(log[1].starts_with("/v1/panes/%2E%2E/actions/%2E%2E "), "{log:?}");
    assert!(log[2].starts_with("/v1/panes/%2E/send ") && log[2].contains("right here"), "{log:?}");
    b.close().await;
}

/// Characters an agent could hide or reverse a card's words with: a bidi
/// override and isolate, ESC (a terminal's colour), C1 controls (CSI, NEL),
/// BEL, a zero width space, a byte order mark, a tag character, CR and tab.
const HIDING: &str = "\u{202E}\u{1b}[31m\u{9b}\u{85}\u{7}\u{200B}\u{2066}\u{FEFF}\u{E0041}\r\t";

/// `text` cut in two at its middle character.
fn halves(text: &str) -> (&str, &str) {
    let at = text.char_indices().nth(text.chars().count() / 2).map_or(text.len(), |(i, _)| i);
    text.split_at(at)
}

/// `text` with [`HIDING`] in its middle.
fn hiding(text: &str) -> String {
    let (a, b) = halves(text);
    format!("{a}{HIDING}{b}")
}

/// What the page shows of `hiding(text)` on one line, as the terminal
/// phone's `clean`: the hidden characters gone (ESC's `[31m` is plain
/// text), CR and tab a space each.
fn shown(text: &str) -> String {
    let (a, b) = halves(text);
    format!("{a}[31m  {b}")
}

/// The same in body text (`clean_lines`): a tab is four spaces.
fn shown_body(text: &str) -> String {
    let (a, b) = halves(text);
    format!("{a}[31m     {b}")
}

/// Every piece of text the page shows (text nodes, the shown attributes,
/// the values of fields) that holds a character of [`HIDING`] but `[31m`.
async fn hidden_characters_shown(b: &Browser) -> Vec<String> {
    let found = b
        .run(
            r"const bad = /[\u0000-\u0009\u000B-\u001F\u007F-\u009F\u200B\u2066\u202E\uFEFF\u{E0041}]/u;
            const out = [];
            const walk = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
            while (walk.nextNode()) if (bad.test(walk.currentNode.data)) out.push(JSON.stringify(walk.currentNode.data));
            for (const e of document.querySelectorAll('*')) {
                for (const a of ['placeholder', 'aria-label', 'title', 'alt']) {
                    const v = e.getAttribute(a);
                    if (v !== null && bad.test(v)) out.push(a + '=' + JSON.stringify(v));
                }
                if ((e.tagName === 'INPUT' || e.tagName === 'TEXTAREA') && bad.test(e.value)) out.push('value=' + JSON.stringify(e.value));
            }
            return out;",
            vec![],
        )
        .await;
    serde_json::from_value(found).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn web_shows_no_control_or_bidi_character_of_the_agent() {
    let _turn = TURN.lock().await;
    let dir = TestDir::new("web-bidi");
    let h = hiding;
    let mut caps_hello: Value = serde_json::from_str(&hello(1, 1, true)).unwrap();
    caps_hello["host"] = json!(h("fake agent"));
    caps_hello["runtime"] = json!(h("node"));
    for cap in ["history", "starters", "reopen"] {
        caps_hello["caps"][cap] = json!(true);
    }
    let ask = "a1b2c3d4e5f60718293a4b5c6d7e8f90";
    let text_ask = "b1b2c3d4e5f60718293a4b5c6d7e8f90";
    let asks = json!([
        {"id": ask, "pane": "p1", "kind": "choice", "title": h("Pay Bob 40"), "reason": h("the\nreason"),
            "itemId": "k1", "toolCallId": "k1",
            "tool": {"name": h("pay"), "call": h("pay(to: \"bob\")"), "args": [[h("to"), h("\"bob\"")]]},
            "options": [{"id": "yes", "label": h("Allow")}, {"id": "no", "label": h("Deny")}],
            "createdAt": "2026-11-30T05:00:00.000Z", "readable": true, "hash": "a".repeat(64)},
        {"id": text_ask, "pane": "p1", "kind": "text", "title": h("Your name"), "placeholder": h("Ana"),
            "createdAt": "2026-11-30T05:00:00.000Z", "readable": true, "hash": "b".repeat(64)},
    ]);
    let state = json!({"ok": true, "epoch": "0123456789abcdef", "seq": 1, "ready": true, "full": true,
        "workspaces": [{"id": "w", "title": "W", "tabs": [{"id": "w:t", "title": "T", "panes": ["p1"]}]}],
        "panes": [{"id": "p1", "tab": "w:t", "title": h("Maria Lopez"), "harness": "fake", "sessionId": null,
            "state": h("idle"), "turnId": null, "lastSeq": 9, "openAsks": [ask, text_ask],
            "actions": [{"id": "go", "label": h("Refund")}]}],
        "removed": [], "closed": [{"id": "c1", "title": h("Old ticket"), "sessionId": "s1"}],
        "starters": [{"id": "st", "label": h("New ticket")}], "asks": asks})
    .to_string();
    let items = json!([
        {"id": "u1", "kind": "user", "text": h("hello there")},
        {"id": "r1", "kind": "reply", "text": h("line one\nline two")},
        {"id": "m1", "kind": "markdown", "text": h("# Title")},
        {"id": "t1", "kind": "thinking", "text": h("hmm hmm")},
        {"id": "n1", "kind": "notice", "text": h("careful now"), "tone": "warn"},
        {"id": "c1", "kind": "code", "text": h("fn main() {}"), "lang": h("rust")},
        {"id": "k1", "kind": "tool", "name": h("pay"), "call": h("pay(to: \"bob\")"), "status": "ok",
            "output": h("paid\nin full"), "badge": {"text": h("40 €"), "tone": "good"}},
        {"id": "l1", "kind": "link", "text": h("The order"), "href": "https://example.invalid/o/1"},
        {"id": "g1", "kind": "progress", "label": h("Upload"), "value": 0.5}
    ]);
    let snapshot = json!({"ok": true, "pane": "p1", "snapshot": true, "next": 9, "state": "idle",
        "turnId": null, "asks": [], "dropped": false, "items": items})
    .to_string();
    let rows = json!({"ok": true, "rows": [{"id": "s1", "title": h("Old ticket"), "subtitle": h("last week"),
        "state": "closed"}], "next": null})
    .to_string();
    let session = json!({"ok": true, "row": {"id": "s1", "title": h("Old ticket"), "state": "closed"},
        "items": [{"id": "o1", "kind": "reply", "text": h("an old reply")}], "next": null, "dropped": false})
    .to_string();
    let refused = json!({"ok": false, "code": "refused", "message": h("not now"), "reason": h("busy busy")})
        .to_string();
    let hello_text = caps_hello.to_string();
    let socket = fake_agent(&dir, move |r: &Req| match (r.method.as_str(), r.path.as_str()) {
        ("GET", "/hello") => (200, hello_text.clone()),
        ("POST", "/hello") => {
            (200, r#"{"ok": true, "wire": {"min": 1, "max": 1}, "compatible": true}"#.into())
        }
        ("GET", "/v1/state") => (200, state.clone()),
        ("GET", "/v1/panes/p1/events") => (200, snapshot.clone()),
        ("GET", "/v1/history") => (200, rows.clone()),
        ("GET", "/v1/history/s1") => (200, session.clone()),
        ("POST", "/v1/panes/p1/send") => (409, refused.clone()),
        _ => (404, r#"{"ok": false, "code": "not-found", "message": "no"}"#.into()),
    });
    let web = Web::start(&["--socket".into(), socket]);
    let b = Browser::start().await;
    b.goto(&web.url).await;

    // The list: the agent's row, a pane, a starter, a closed conversation.
    assert_eq!(b.wait_text("[data-test=agent-name]", "[31m").await, shown("fake agent"));
    b.wait_text("[data-test=agent-facts]", &shown("node")).await;
    b.wait_text("[data-test=pane-row][data-pane=p1]", &shown("Maria Lopez")).await;
    b.wait_text("[data-test=closed-row][data-session=s1]", &shown("Old ticket")).await;
    b.wait_text("[data-test=closed-row][data-session=s1]", &shown("last week")).await;
    assert_eq!(b.wait_text("[data-test=starter]", "[31m").await, shown("New ticket"));
    assert_eq!(hidden_characters_shown(&b).await, Vec::<String>::new(), "the list");

    // The chat: every kind of item, both cards, an action, a refusal.
    open_pane(&b, "p1").await;
    b.wait_text("[data-test=item][data-item=g1]", &shown("Upload")).await;
    // A body keeps its line breaks.
    assert_eq!(b.wait_text("[data-test=item][data-item=r1]", "line").await, shown_body("line one\nline two"));
    let out = b.wait_text("[data-test=item][data-item=k1] pre", "paid").await;
    assert_eq!(out, shown_body("paid\nin full"));
    let card = format!("[data-test=card][data-ask='{ask}']");
    assert_eq!(b.wait_text(&format!("{card} [data-test=card-title]"), "Pay").await, shown("Pay Bob 40"));
    assert_eq!(b.wait_text(&format!("{card} [data-option=yes]"), "Al").await, shown("Allow"));
    assert_eq!(
        b.wait_text(&format!("{card} [data-test=card-reason]"), "the").await,
        shown_body("the\nreason")
    );
    b.wait_text(&format!("{card} [data-test=card-tool]"), &shown("pay(to: \"bob\")")).await;
    let text_card = format!("[data-test=card][data-ask='{text_ask}']");
    b.wait_text(&format!("{text_card} [data-test=card-title]"), &shown("Your name")).await;
    assert_eq!(
        b.attr(&format!("{text_card} [data-test=card-text]"), "placeholder").await,
        Some(shown("Ana"))
    );
    b.wait_text("[data-test=action][data-action=go]", &shown("Refund")).await;
    b.say("hi").await;
    b.wait_text("[data-test=send-result]", &shown("busy busy")).await;
    assert_eq!(hidden_characters_shown(&b).await, Vec::<String>::new(), "the chat");

    // A closed conversation, read from history.
    back_home(&b).await;
    b.click("[data-test=closed-row][data-session=s1]").await;
    b.wait_text("[data-test=history] [data-test=item]", &shown_body("an old reply")).await;
    b.wait_text("[data-test=history] [data-test=chat-title]", &shown("Old ticket")).await;
    assert_eq!(hidden_characters_shown(&b).await, Vec::<String>::new(), "a closed conversation");
    b.close().await;
}

/// A page on another origin (another port of 127.0.0.1), from a thread.
fn other_origin() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { break };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
            }
            let body = "<!doctype html><title>elsewhere</title><p>another site</p>";
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\ncontent-type: text/html\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    port
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn web_refuses_a_request_without_the_secret_and_a_cross_site_post() {
    let _turn = TURN.lock().await;
    let dir = TestDir::new("web-guard");
    let desk = Desk::socket(&dir, &["--turn-ms", "0"]);
    let web = Web::desk(&desk);
    let b = Browser::start().await;
    // The page itself, as a control.
    b.goto(&web.url).await;
    b.wait_text("[data-test=agent-status]", "ready").await;
    let fetch = "const [url, method, body, cb] = arguments;
        fetch(url, method === 'GET' ? {cache: 'no-store'} : {method, body, mode: 'no-cors', headers: {'content-type': 'text/plain'}})
          .then(r => cb(r.type === 'opaque' ? 'opaque' : r.status)).catch(e => cb('failed: ' + e));";
    let get = |url: String| vec![json!(url), json!("GET"), json!(null)];
    let status = b.client.execute_async(fetch, get(format!("{}wire/hello", web.url))).await.unwrap();
    assert_eq!(status, json!(200), "the page reaches the wire");
    // Without the secret, or with another: nothing but a 404.
    let wrong = format!("{}/{}/", web.origin(), "0".repeat(64));
    for url in [
        format!("{}/", web.origin()),
        wrong.clone(),
        format!("{wrong}wire/hello"),
        format!("{}/wire/hello", web.origin()),
    ] {
        let status = b.client.execute_async(fetch, get(url.clone())).await.unwrap();
        assert_eq!(status, json!(404), "{url}");
    }
    b.goto(&format!("{}/", web.origin())).await;
    assert_eq!(b.count("[data-test=app]").await, 0, "no page without the secret");
    assert_eq!(b.count("script").await, 0);

    // A page of another site posts a send to the agent through the page's
    // server: it must not arrive.
    let port = other_origin();
    b.goto(&format!("http://127.0.0.1:{port}/")).await;
    b.wait_text("p", "another site").await;
    let send = format!("{}wire/v1/panes/ticket-1/send", web.url);
    let body = json!({"requestId": "cross-site-1", "text": "from another site"}).to_string();
    let answer = b.client.execute_async(fetch, vec![json!(send), json!("POST"), json!(body)]).await.unwrap();
    assert!(
        answer == json!("opaque") || answer.as_str().is_some_and(|a| a.starts_with("failed")),
        "{answer}"
    );
    // Then a send from the page itself: once its reply is there, the desk
    // took every send before it.
    b.goto(&format!("{}#/pane/ticket-1", web.url)).await;
    b.wait_text("[data-test=chat-title]", "Maria Lopez").await;
    b.say("from the page").await;
    b.wait_text("[data-test=item][data-kind=reply]", "Got it: from the page").await;
    let said = b.texts("[data-test=item]").await;
    assert!(!said.iter().any(|t| t.contains("from another site")), "the cross-site send arrived: {said:?}");
    b.close().await;
}

/// Saves PNGs of the main screens into `docs/web-phone-*.png`
/// (`cargo test -p xtask-collie --test web_phone -- --ignored screenshots`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "writes docs/web-phone-*.png: run it on purpose"]
async fn screenshots() {
    let _turn = TURN.lock().await;
    let dir = TestDir::new("web-shots");
    let desk = Desk::socket(&dir, &["--turn-ms", "0"]);
    let web = Web::desk(&desk);
    let b = Browser::start().await;
    b.goto(&format!("{}#/pane/ticket-1", web.url)).await;
    b.wait_text("[data-test=chat-title]", "Maria Lopez").await;
    b.say("Where is my refund?").await;
    b.wait_text("[data-test=item][data-kind=reply]", "Got it: Where is my refund?").await;
    b.click("[data-test=action][data-action=refund]").await;
    b.wait_text("[data-test=card] [data-test=card-title]", "refund wants to run").await;
    let docs = support::root().join("docs");
    std::fs::write(docs.join("web-phone-card.png"), b.client.screenshot().await.unwrap()).unwrap();
    back_home(&b).await;
    b.wait_text("[data-test=agent-waiting]", "1 waiting for you").await;
    std::fs::write(docs.join("web-phone-list.png"), b.client.screenshot().await.unwrap()).unwrap();
    b.close().await;
}
