//! `durable phone`: a terminal client that looks at a durable agent the
//! way Collie does (docs/wire.md): it polls `GET /v1/state` every 2 s with
//! `If-None-Match` and `since` (§5), reads the open pane's events `after`
//! what it has (§6), draws the chat and the open asks as cards (§7), and
//! sends every write of §8 with a fresh request id, printing the agent's
//! answer. On a terminal it draws a screen driven by keys (`tui`); otherwise
//! (or with `--plain`) it reads one command per line from stdin and prints
//! the screen's changes as lines (`lines`), so scripts can drive it.

mod answer;
mod draw;
mod lines;
mod model;
mod term;
mod tui;
mod width;

use std::io::{IsTerminal, Read};
use std::process::ExitCode;
use std::time::Duration;

use serde_json::{Value, json};

use crate::link::{AgentArgs, AnswerLimit, Link, LinkError, Target, Token, Url, enc};
use model::{Ask, Hello, Model, View, WIRE, short_id};

// The doctor's too: one copy of Collie's words.
pub(crate) use draw::{clean, incompatible};

/// `durable phone`'s command line.
#[derive(Debug, clap::Args)]
#[command(after_help = "On a terminal: type a message and Enter to send it; `:` starts a command \
(`:help` lists them); Tab moves to the cards. Without a terminal: one command a line on stdin \
(`help` lists them), the screen's changes printed as lines.")]
pub(crate) struct Args {
    #[command(flatten)]
    agent: AgentArgs,
    /// The line interface even on a terminal.
    #[arg(long)]
    plain: bool,
    /// Show the agent in your browser instead: serve a page on 127.0.0.1
    /// and print its address (with a secret drawn for this run) on stdout.
    #[arg(long, conflicts_with = "plain")]
    web: bool,
    /// The port of --web's page (default 0: any free port).
    #[arg(long, value_name = "N", requires = "web")]
    port: Option<u16>,
}

/// How often the phone polls while you look at it (§1).
pub(crate) const POLL: Duration = Duration::from_secs(2);

/// How many history rows or items one page asks for.
const PAGE: u32 = 20;

pub(crate) const HELP: &str = "commands:
  open <pane>                       show a pane's chat (and its cards first)
  send <text>                       send to the open pane (on a terminal: just type)
  steer <text> | stop               steer or stop the open pane's turn
  action <id>                       tap one of the open pane's buttons
  answer <ask> <option>             a choice (id, label or number); <ask> is an id, its start, or #1
  answer <ask> <opt>,<opt>          a multi
  answer <ask> <text…>              a text ask
  answer <ask> field=value …        a form (\"quotes\" keep spaces)
  confirm [<ask>]                   the second confirmation of an allow-always answer
  starter <id> [text]               start a new conversation
  rename [pane|tab|workspace] <id> <title…>
  close [pane|tab|workspace] <id>   | reopen <pane>
  history [<session>] | more        page through the agent's history
  panes | asks | refresh | wait <ms> | help | quit";

#[derive(Debug)]
struct Given {
    target: Target,
    pin: Option<[u8; 32]>,
    insecure: bool,
    plain: bool,
    answer_limit: AnswerLimit,
}

fn given(args: &Args) -> Result<Given, String> {
    let target = match args.agent.place()? {
        Ok(path) => socket(path)?,
        Err(url) => Target::Url(Url::parse(&url)?),
    };
    Ok(Given {
        target,
        pin: args.agent.fingerprint,
        insecure: args.agent.insecure,
        plain: args.plain,
        answer_limit: args.agent.answer_limit(),
    })
}

/// The agent's private socket (§1.1).
#[cfg(unix)]
fn socket(path: std::path::PathBuf) -> Result<Target, String> {
    Ok(Target::Socket(path))
}

/// The private socket is Unix-only: elsewhere the agent is reached over
/// HTTPS (§1.2).
#[cfg(not(unix))]
fn socket(path: std::path::PathBuf) -> Result<Target, String> {
    Err(format!(
        "--socket {}: the agent's private socket is Unix-only; here, reach it with --url https://HOST:PORT",
        path.display()
    ))
}

/// The link the arguments ask for, or why not (the rules of §1.2).
fn link_for(args: &Given) -> Result<Link, String> {
    #[cfg(unix)]
    if let Target::Socket(path) = &args.target {
        if !path.is_absolute() {
            return Err(format!(
                "the socket path {} is not absolute (docs/wire.md §1.1; `durable doctor` checks the rest)",
                path.display()
            ));
        }
        return Ok(Link::new(args.target.clone(), None, None).with_answer_limit(args.answer_limit));
    }
    // Elsewhere than on Unix the agent is only a URL away (`given` refuses
    // a socket there), whether or not the link still names sockets.
    #[allow(irrefutable_let_patterns)]
    let Target::Url(url) = &args.target else {
        return Err("the agent's private socket is Unix-only: reach it with --url".into());
    };
    url.rule().map_err(|e| format!("{e} (docs/wire.md §1.2)"))?;
    let token = Token::from_env().ok_or("set COLLIE_TOKEN to the agent's token (docs/wire.md §1.2)")?;
    if url.https && args.pin.is_none() {
        if !args.insecure {
            return Err(
                "an https agent needs --fingerprint SHA256 (the agent prints it with --self-signed), \
                        or --insecure on loopback"
                    .into(),
            );
        }
        if !url.is_loopback() {
            return Err("--insecure is for loopback only: give --fingerprint SHA256".into());
        }
    }
    Ok(Link::new(args.target.clone(), Some(token), args.pin).with_answer_limit(args.answer_limit))
}

pub(crate) fn main(args: Args) -> ExitCode {
    let web = args.web.then(|| {
        let target = match args.agent.place() {
            Ok(Ok(path)) => path.display().to_string(),
            Ok(Err(url)) => url,
            Err(_) => String::new(),
        };
        (crate::web::About { target }, args.port.unwrap_or(0))
    });
    let args = match given(&args) {
        Ok(a) => a,
        Err(why) => {
            eprintln!("phone: {why} (durable phone --help)");
            return ExitCode::from(2);
        }
    };
    let link = match link_for(&args) {
        Ok(l) => l,
        Err(why) => {
            eprintln!("phone: {why}");
            return ExitCode::from(2);
        }
    };
    if let Some((about, port)) = web {
        return crate::web::main(link, about, port);
    }
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("phone: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let terminal = !args.plain && std::io::stdout().is_terminal() && std::io::stdin().is_terminal();
    let session = Session::new(link);
    let result =
        if terminal { runtime.block_on(tui::run(session)) } else { runtime.block_on(lines::run(session)) };
    // Do not wait for the blocking stdin reader.
    runtime.shutdown_background();
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(why) => {
            eprintln!("phone: {why}");
            ExitCode::FAILURE
        }
    }
}

/// One command, from a line or from the terminal's `:` prompt.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Command {
    Help,
    Panes,
    Asks,
    Refresh,
    Quit,
    Wait(u64),
    Open(String),
    Send(String),
    Steer(String),
    Stop,
    Action(String),
    Starter(String, Option<String>),
    Rename { target: String, id: String, title: String },
    Close { target: String, id: String },
    Reopen(String),
    Answer { ask: String, text: String },
    Confirm(Option<String>),
    History(Option<String>),
    More,
}

/// The first word and the rest (its leading blanks removed).
fn split_word(text: &str) -> (&str, &str) {
    let text = text.trim_start();
    match text.find(char::is_whitespace) {
        Some(at) => (&text[..at], text[at..].trim_start()),
        None => (text, ""),
    }
}

/// `[pane|tab|workspace] <id> <rest>`: the target defaults to the pane.
fn target_id(rest: &str) -> (String, &str, &str) {
    let (first, after) = split_word(rest);
    if matches!(first, "pane" | "tab" | "workspace") {
        let (id, rest) = split_word(after);
        (first.to_owned(), id, rest)
    } else {
        ("pane".to_owned(), first, after)
    }
}

pub(crate) fn parse_command(line: &str) -> Result<Command, String> {
    let (word, rest) = split_word(line);
    let need =
        |what: &str| if rest.is_empty() { Err(format!("{word} needs {what}")) } else { Ok(rest.to_owned()) };
    Ok(match word {
        "help" | "?" => Command::Help,
        "panes" | "state" => Command::Panes,
        "asks" | "cards" => Command::Asks,
        "refresh" => Command::Refresh,
        "quit" | "exit" | "q" => Command::Quit,
        "wait" => Command::Wait(rest.trim().parse().map_err(|_| "wait takes milliseconds".to_owned())?),
        "open" => Command::Open(need("a pane id")?.trim().to_owned()),
        "send" => Command::Send(need("text")?),
        "steer" => Command::Steer(need("text")?),
        "stop" => Command::Stop,
        "action" | "tap" => Command::Action(need("an action id")?.trim().to_owned()),
        "starter" | "start" => {
            let rest = need("a starter id")?;
            let (id, text) = split_word(&rest);
            Command::Starter(id.to_owned(), (!text.is_empty()).then(|| text.to_owned()))
        }
        "rename" => {
            let (target, id, title) = target_id(rest);
            if id.is_empty() || title.is_empty() {
                return Err("rename [pane|tab|workspace] <id> <title>".into());
            }
            Command::Rename { target, id: id.to_owned(), title: title.to_owned() }
        }
        "close" => {
            let (target, id, _) = target_id(rest);
            if id.is_empty() {
                return Err("close [pane|tab|workspace] <id>".into());
            }
            Command::Close { target, id: id.to_owned() }
        }
        "reopen" => Command::Reopen(need("a pane id")?.trim().to_owned()),
        "answer" => {
            let (ask, text) = split_word(rest);
            if ask.is_empty() {
                return Err("answer <ask> <answer>".into());
            }
            Command::Answer { ask: ask.to_owned(), text: text.to_owned() }
        }
        "confirm" => Command::Confirm((!rest.trim().is_empty()).then(|| rest.trim().to_owned())),
        "history" => Command::History((!rest.trim().is_empty()).then(|| rest.trim().to_owned())),
        "more" => Command::More,
        "" => return Err("an empty command".into()),
        other => return Err(format!("unknown command {other:?} (help lists them)")),
    })
}

/// Where `more` goes on.
#[derive(Clone, Debug)]
enum Paging {
    Rows(String),
    Items(String, String),
}

/// A write that reached no agent, kept to be sent again, with the same
/// request id, once the agent answers (as Collie's bridge keeps a write):
/// the agent runs it once, or replays what it did with it (§9).
#[derive(Clone, Debug)]
struct KeptWrite {
    what: String,
    path: String,
    body: Value,
    request_id: String,
}

/// At most this many writes are kept while the agent does not answer; one
/// more is not kept, and its line says so.
const KEPT_WRITES_MAX: usize = 32;

/// The phone's side of the conversation with one agent, shared by both
/// faces: it polls, writes, and says what changed as lines.
#[derive(Debug)]
pub(crate) struct Session {
    link: Link,
    pub(crate) model: Model,
    run: String,
    writes: u64,
    /// An allow-always answer waiting for `confirm`: the ask and its body.
    pending_always: Option<(String, Value)>,
    paging: Option<Paging>,
    /// The last trouble the poll met, printed once until it changes.
    trouble: Option<String>,
    /// The line of the agent's answer to the last write, until taken.
    outcome: Option<String>,
    /// Writes that reached no agent, oldest first, sent again once it answers.
    kept: std::collections::VecDeque<KeptWrite>,
    /// Whether the agent ever answered (a script's phone that never
    /// reached it exits 1).
    pub(crate) reached: bool,
}

/// 8 random hex digits for this run's request ids.
fn run_id() -> String {
    let mut buf = [0u8; 4];
    if std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut buf)).is_err() {
        let t = model::now_ms() as u64 ^ u64::from(std::process::id());
        buf = (t as u32).to_le_bytes();
    }
    buf.iter().map(|b| format!("{b:02x}")).collect()
}

impl Session {
    pub(crate) fn new(link: Link) -> Session {
        Session {
            link,
            model: Model::default(),
            run: run_id(),
            writes: 0,
            pending_always: None,
            paging: None,
            trouble: None,
            outcome: None,
            kept: std::collections::VecDeque::new(),
            reached: false,
        }
    }

    pub(crate) fn target(&self) -> String {
        self.link.target().to_string()
    }

    /// The line of the agent's answer to the last write, once.
    pub(crate) fn take_outcome(&mut self) -> Option<String> {
        self.outcome.take()
    }

    /// A fresh request id (§9).
    fn request_id(&mut self) -> String {
        self.writes += 1;
        format!("phone-{}-{}", self.run, self.writes)
    }

    /// A line for an answer that is not the expected JSON.
    fn refusal(what: &str, status: u16, json: Option<&Value>) -> String {
        match json {
            Some(v) if v.get("ok") == Some(&Value::Bool(false)) => format!(
                "{what}: {status} {}: {}",
                draw::clean(v.get("code").and_then(Value::as_str).unwrap_or("")),
                draw::clean(v.get("message").and_then(Value::as_str).unwrap_or(""))
            ),
            Some(_) => format!("{what}: the agent answered {status}"),
            None => format!("{what}: the agent answered {status} without a JSON body"),
        }
    }

    /// `GET /hello` then `POST /hello` (§3), then the first poll.
    pub(crate) async fn start(&mut self) -> Vec<String> {
        let mut out = vec![format!("phone: looking at {}", draw::clean(&self.target()))];
        let hello = self.link.get("/hello", &[]).await;
        self.reached |= hello.is_ok();
        match hello {
            Ok(a) if a.status == 200 => match a.json.as_ref().map(Hello::parse) {
                Some(Ok(hello)) => {
                    let caps: Vec<&str> =
                        hello.caps.iter().filter(|(_, on)| *on).map(|(n, _)| n.as_str()).collect();
                    out.push(format!(
                        "agent {}: wire {}..{}, {}, caller check {}, caps: {}",
                        draw::clean(&hello.host),
                        hello.wire.0,
                        hello.wire.1,
                        if hello.ready { "ready" } else { "starting" },
                        draw::clean(&hello.caller_check),
                        draw::clean(&caps.join(" "))
                    ));
                    if hello.wire.1 < WIRE.0 || hello.wire.0 > WIRE.1 {
                        out.push(draw::incompatible(hello.wire, WIRE));
                    }
                    self.model.hello = Some(hello);
                }
                Some(Err(why)) => out.push(format!("hello: {why}")),
                None => out.push("hello: the answer is not JSON".into()),
            },
            Ok(a) => out.push(Session::refusal("hello", a.status, a.json.as_ref())),
            Err(e @ LinkError::TooLarge(_)) => {
                out.push(format!("hello: {e}"));
                return out;
            }
            Err(e) => {
                // Nothing more to ask now: the polls go on trying.
                out.push(format!("hello: {e} (is the agent running? `durable doctor` says why)"));
                return out;
            }
        }
        let collie = concat!("durable-phone-", env!("CARGO_PKG_VERSION"));
        let intro = json!({"wire": {"min": WIRE.0, "max": WIRE.1}, "collie": {"version": collie}});
        if let Ok(a) = self.link.post("/hello", &intro).await {
            let said = out.iter().any(|l| l.starts_with("durable-hello: incompatible"));
            let v = a.json.unwrap_or_default();
            if v.get("compatible") == Some(&Value::Bool(false)) && !said {
                // The agent's versions from its answer, when it gives them.
                let at = |k: &str| v.get("wire").and_then(|w| w.get(k)).and_then(Value::as_u64);
                out.push(match (at("min"), at("max")) {
                    (Some(min), Some(max)) => draw::incompatible((min, max), WIRE),
                    _ => "durable-hello: incompatible: the durable agent says this Collie's wire is not one it speaks"
                        .into(),
                });
            }
        }
        out.extend(self.poll().await);
        out
    }

    /// One poll: the state (with `If-None-Match` and `since`), then the open
    /// pane's new events.
    pub(crate) async fn poll(&mut self) -> Vec<String> {
        let mut out = Vec::new();
        for _ in 0..2 {
            let path = self.model.state_path();
            let etag = self.model.etag.clone();
            let headers: Vec<(&str, &str)> = etag.iter().map(|t| ("if-none-match", t.as_str())).collect();
            let answer = match self.link.get(&path, &headers).await {
                Ok(a) => {
                    self.reached = true;
                    a
                }
                Err(e) => {
                    self.trouble(&mut out, format!("cannot reach the agent: {e} (trying again every 2 s)"));
                    return out;
                }
            };
            if answer.status == 304 {
                break;
            }
            if answer.status != 200 {
                self.trouble(&mut out, Session::refusal("state", answer.status, answer.json.as_ref()));
                return out;
            }
            let etag = answer.header("etag").map(str::to_owned);
            let Some(json) = answer.json else {
                self.trouble(&mut out, "state: the agent answered 200 without a JSON body".into());
                return out;
            };
            match self.model.apply_state(&json, etag.as_deref()) {
                Ok(applied) => {
                    self.clear_trouble(&mut out);
                    out.extend(applied.lines);
                    if !applied.read_again {
                        break;
                    }
                }
                Err(why) => {
                    self.trouble(&mut out, format!("state: a bad answer from the agent: {why}"));
                    return out;
                }
            }
        }
        out.extend(self.send_kept().await);
        out.extend(self.read_events().await);
        if let Some((ask, _)) = &self.pending_always {
            if self.model.ask(ask).is_none() {
                self.pending_always = None;
            }
        }
        out
    }

    fn trouble(&mut self, out: &mut Vec<String>, line: String) {
        if self.trouble.as_ref() != Some(&line) {
            out.push(line.clone());
            self.trouble = Some(line);
        }
    }

    fn clear_trouble(&mut self, out: &mut Vec<String>) {
        if self.trouble.take().is_some() {
            out.push("the agent answers again".into());
        }
    }

    /// The open pane's events after what the phone has read (§6).
    async fn read_events(&mut self) -> Vec<String> {
        let Some((pane, after)) = self.model.view_behind() else { return Vec::new() };
        let path = format!("/v1/panes/{}/events?after={after}", enc(&pane));
        match self.link.get(&path, &[]).await {
            Ok(a) if a.status == 200 => match a.json.as_ref().map(|v| self.model.apply_events(v)) {
                Some(Ok(lines)) => lines,
                Some(Err(why)) => vec![format!("events: a bad answer from the agent: {why}")],
                None => vec!["events: the agent answered 200 without a JSON body".into()],
            },
            Ok(a) => {
                if a.status == 404 {
                    self.model.view = None;
                }
                vec![Session::refusal("events", a.status, a.json.as_ref())]
            }
            Err(e) => vec![format!("events: {e}")],
        }
    }

    /// A control only for a capability the agent declares (§4).
    fn offers(&self, cap: &str) -> Result<(), String> {
        match &self.model.hello {
            Some(hello) if !hello.has(cap) => {
                Err(format!("the agent does not offer {cap} (its caps, docs/wire.md §4)"))
            }
            _ => Ok(()),
        }
    }

    /// The open pane, or a line saying to open one.
    fn open_pane(&self) -> Result<String, String> {
        self.model
            .view
            .as_ref()
            .map(|v| v.pane.clone())
            .ok_or_else(|| "open a pane first: open <pane>".to_owned())
    }

    /// Finds an ask by id, by the start of its id, or by `#n` / `n` (its
    /// place among the open asks).
    pub(crate) fn find_ask(&self, key: &str) -> Result<Ask, String> {
        let asks = &self.model.asks;
        let number = key.strip_prefix('#').unwrap_or(key).parse::<usize>().ok();
        if let Some(n) = number.filter(|n| (1..=asks.len()).contains(n)).filter(|_| key.len() < 8) {
            return Ok(asks[n - 1].clone());
        }
        let found: Vec<&Ask> = asks.iter().filter(|a| a.id.starts_with(key)).collect();
        match found.as_slice() {
            [one] => Ok((*one).clone()),
            [] => Err(format!("no open ask {key:?} (asks lists them)")),
            _ => Err(format!("{key:?} starts several asks' ids: write more of it")),
        }
    }

    /// A write (§8): its body gets a fresh request id; the line says what
    /// the agent answered; then a poll shows what it did. A write that
    /// reached no agent is kept and sent again by the polls.
    async fn write(&mut self, what: &str, path: &str, mut body: Value) -> (Vec<String>, Option<Value>) {
        let request_id = self.request_id();
        body["requestId"] = Value::String(request_id.clone());
        let mut out = Vec::new();
        // Behind writes already kept: the agent gets them in the order given.
        let answer = if self.kept.is_empty() { Some(self.link.post(path, &body).await) } else { None };
        let (line, json) = match answer {
            Some(Ok(a)) => (draw::outcome(what, &request_id, a.status, a.json.as_ref()), a.json),
            // The agent answered, too much: it has the write, nothing to send again.
            Some(Err(e @ LinkError::TooLarge(_))) => (format!("{what}: {e} [request {request_id}]"), None),
            Some(Err(e)) => (self.keep(what, path, body, &request_id, Some(&e)), None),
            None => (self.keep(what, path, body, &request_id, None), None),
        };
        out.push(line.clone());
        self.outcome = Some(line);
        out.extend(self.poll().await);
        (out, json)
    }

    /// Keeps a write that reached no agent (`why`; `None`: earlier writes
    /// wait), or says why it is not kept.
    fn keep(
        &mut self,
        what: &str,
        path: &str,
        body: Value,
        request_id: &str,
        why: Option<&LinkError>,
    ) -> String {
        let why =
            why.map_or_else(|| "earlier writes wait for the agent".to_owned(), |e| format!("no answer: {e}"));
        if self.kept.len() >= KEPT_WRITES_MAX {
            return format!(
                "{what}: {why}; not kept: {KEPT_WRITES_MAX} writes already wait for the agent [request {request_id}]"
            );
        }
        self.kept.push_back(KeptWrite {
            what: what.to_owned(),
            path: path.to_owned(),
            body,
            request_id: request_id.to_owned(),
        });
        format!(
            "{what}: {why}; kept: it is sent again, with the same request id, once the agent answers [request {request_id}]"
        )
    }

    /// Sends the kept writes again, oldest first, while the agent answers.
    async fn send_kept(&mut self) -> Vec<String> {
        let mut out = Vec::new();
        while let Some(kept) = self.kept.front().cloned() {
            let line = match self.link.post(&kept.path, &kept.body).await {
                Ok(a) => draw::outcome(
                    &format!("{} (sent again)", kept.what),
                    &kept.request_id,
                    a.status,
                    a.json.as_ref(),
                ),
                Err(e @ LinkError::TooLarge(_)) => {
                    format!("{} (sent again): {e} [request {}]", kept.what, kept.request_id)
                }
                // Still no agent: the next poll tries again.
                Err(_) => break,
            };
            self.kept.pop_front();
            out.push(line.clone());
            self.outcome = Some(line);
        }
        out
    }

    /// Runs a command; the lines say what happened.
    pub(crate) async fn exec(&mut self, command: Command) -> Vec<String> {
        match self.exec_inner(command).await {
            Ok(lines) => lines,
            Err(line) => vec![line],
        }
    }

    async fn exec_inner(&mut self, command: Command) -> Result<Vec<String>, String> {
        Ok(match command {
            Command::Help => HELP.lines().map(str::to_owned).collect(),
            Command::Quit | Command::Wait(_) => Vec::new(),
            Command::Refresh => {
                self.model.etag = None;
                self.model.seq = 0;
                self.poll().await
            }
            Command::Panes => {
                let mut lines: Vec<String> = self.model.panes.iter().map(draw::pane_line).collect();
                if lines.is_empty() {
                    lines.push("no panes".into());
                }
                lines
            }
            Command::Asks => {
                let now = model::now_ms();
                let mut lines: Vec<String> = Vec::new();
                for (n, ask) in self.model.asks.iter().enumerate() {
                    let card = draw::card_lines(ask, Some(now));
                    lines.push(format!("#{} {}", n + 1, card[0]));
                    lines.extend(card[1..].iter().cloned());
                }
                if lines.is_empty() {
                    lines.push("no open asks".into());
                }
                lines
            }
            Command::Open(pane) => {
                let p =
                    self.model.pane(&pane).ok_or_else(|| format!("no pane {pane:?} (panes lists them)"))?;
                let mut out = vec![format!("open {} {}", draw::clean(&p.id), draw::quoted(&p.title))];
                self.model.view = Some(View::new(&pane));
                out.extend(self.read_events().await);
                out
            }
            Command::Send(text) => {
                self.offers("send")?;
                let pane = self.open_pane()?;
                let turn = self.model.pane(&pane).and_then(|p| p.turn_id.clone());
                let path = format!("/v1/panes/{}/send", enc(&pane));
                self.write("send", &path, json!({"text": text, "turnId": turn})).await.0
            }
            Command::Steer(text) => {
                self.offers("steer")?;
                let pane = self.open_pane()?;
                self.write("steer", &format!("/v1/panes/{}/steer", enc(&pane)), json!({"text": text})).await.0
            }
            Command::Stop => {
                self.offers("abort")?;
                let pane = self.open_pane()?;
                self.write("stop", &format!("/v1/panes/{}/stop", enc(&pane)), json!({})).await.0
            }
            Command::Action(action) => {
                self.offers("actions")?;
                let pane = self.open_pane()?;
                let path = format!("/v1/panes/{}/actions/{}", enc(&pane), enc(&action));
                self.write(&format!("action {}", draw::clean(&action)), &path, json!({})).await.0
            }
            Command::Starter(id, text) => {
                self.offers("starters")?;
                let body = match text {
                    Some(t) => json!({"text": t}),
                    None => json!({}),
                };
                let (mut out, answer) = self
                    .write(
                        &format!("starter {}", draw::clean(&id)),
                        &format!("/v1/starters/{}", enc(&id)),
                        body,
                    )
                    .await;
                let started =
                    answer.as_ref().and_then(|v| v.get("pane")).and_then(Value::as_str).map(str::to_owned);
                if let Some(pane) = started.filter(|p| self.model.pane(p).is_some()) {
                    out.extend(Box::pin(self.exec_inner(Command::Open(pane))).await?);
                }
                out
            }
            Command::Rename { target, id, title } => {
                self.offers("rename")?;
                let body = json!({"target": target, "id": id, "title": title});
                self.write(&format!("rename {target} {}", draw::clean(&id)), "/v1/rename", body).await.0
            }
            Command::Close { target, id } => {
                self.offers("close")?;
                let body = json!({"target": target, "id": id});
                self.write(&format!("close {target} {}", draw::clean(&id)), "/v1/close", body).await.0
            }
            Command::Reopen(id) => {
                self.offers("reopen")?;
                self.write(&format!("reopen {}", draw::clean(&id)), "/v1/reopen", json!({"id": id})).await.0
            }
            Command::Answer { ask, text } => {
                self.offers("asks")?;
                let ask = self.find_ask(&ask)?;
                let answer = answer::parse(&ask, &text)?;
                self.answer(&ask, answer, false).await
            }
            Command::Confirm(key) => {
                let (id, body) =
                    self.pending_always.clone().ok_or("no allow-always answer waits for its confirmation")?;
                if let Some(key) = key {
                    if !id.starts_with(key.trim_start_matches('#')) && self.find_ask(&key)?.id != id {
                        return Err(format!(
                            "the answer waiting for confirmation is for ask {}",
                            short_id(&id)
                        ));
                    }
                }
                let ask = self.model.ask(&id).cloned().ok_or("that ask is closed")?;
                self.pending_always = None;
                self.answer(&ask, answer::Answer { body, always: None }, true).await
            }
            Command::History(session) => {
                self.offers("history")?;
                self.paging = None;
                self.history(session, None).await?
            }
            Command::More => match self.paging.take() {
                Some(Paging::Rows(next)) => self.history(None, Some(next)).await?,
                Some(Paging::Items(session, next)) => self.history(Some(session), Some(next)).await?,
                None => vec!["no more: history first".into()],
            },
        })
    }

    /// Sends an answer (§7.1) with the ask's hash as the phone saw it; an
    /// allow-always pick first asks for its confirmation.
    pub(crate) async fn answer(&mut self, ask: &Ask, answer: answer::Answer, confirmed: bool) -> Vec<String> {
        if let (Some(label), false) = (&answer.always, confirmed) {
            self.pending_always = Some((ask.id.clone(), answer.body));
            // The option's own words say what it lets through (an agent's
            // "always" may switch a mode, not just allow one tool): no guess.
            return vec![format!(
                "ask {}: {} holds beyond this question: confirm to send it",
                ask.short(),
                draw::quoted(label)
            )];
        }
        let body = json!({"answer": answer.body, "hash": ask.hash, "confirmAlways": confirmed});
        let (mut out, json) =
            self.write(&format!("answer {}", ask.short()), &format!("/v1/asks/{}", enc(&ask.id)), body).await;
        if let Some(v) = json.filter(|v| v.get("code").and_then(Value::as_str) == Some("hash-mismatch")) {
            if let Some(Ok(now)) = v.get("ask").map(|a| Ask::parse(a, "ask")) {
                out.push(format!("ask {}: the question changed; look at it again:", ask.short()));
                out.extend(draw::card_lines(&now, Some(model::now_ms())));
            }
        }
        out
    }

    /// A page of the history list, or of one conversation (§10).
    async fn history(
        &mut self,
        session: Option<String>,
        after: Option<String>,
    ) -> Result<Vec<String>, String> {
        let after_q = after.as_deref().map(|a| format!("&after={}", enc(a))).unwrap_or_default();
        let path = match &session {
            None => format!("/v1/history?limit={PAGE}{after_q}"),
            Some(s) => format!("/v1/history/{}?limit={PAGE}{after_q}", enc(s)),
        };
        let a = self.link.get(&path, &[]).await.map_err(|e| format!("history: {e}"))?;
        let v = match a.json {
            Some(v) if a.status == 200 && v.get("ok") == Some(&Value::Bool(true)) => v,
            json => return Err(Session::refusal("history", a.status, json.as_ref())),
        };
        let mut out = Vec::new();
        let next = v.get("next").and_then(Value::as_str).map(str::to_owned);
        match &session {
            None => {
                let rows =
                    v.get("rows").and_then(Value::as_array).ok_or("history: the answer has no rows")?;
                for row in rows {
                    out.push(history_row(row));
                }
                if rows.is_empty() {
                    out.push("history: no conversations".into());
                }
                self.paging = next.clone().map(Paging::Rows);
            }
            Some(s) => {
                if let Some(row) = v.get("row") {
                    out.push(history_row(row));
                }
                let items =
                    v.get("items").and_then(Value::as_array).ok_or("history: the answer has no items")?;
                let prefix = format!("[history {}] ", draw::clean(s));
                for item in items {
                    for (n, line) in draw::item_lines(item).into_iter().enumerate() {
                        out.push(if n == 0 {
                            format!("{prefix}{line}")
                        } else {
                            format!("{prefix}  {line}")
                        });
                    }
                }
                if v.get("dropped") == Some(&Value::Bool(true)) {
                    out.push(format!("{prefix}{}", draw::SKIPPED));
                }
                self.paging = next.clone().map(|n| Paging::Items(s.clone(), n));
            }
        }
        out.push(if next.is_some() { "history: more with `more`".into() } else { "history: end".into() });
        Ok(out)
    }
}

fn history_row(row: &Value) -> String {
    let s = |k: &str| draw::clean(row.get(k).and_then(Value::as_str).unwrap_or(""));
    let subtitle = row
        .get("subtitle")
        .and_then(Value::as_str)
        .map(|t| format!(" ({})", draw::clean(t)))
        .unwrap_or_default();
    let items = row.get("items").and_then(Value::as_u64).unwrap_or(0);
    format!(
        "history: {} {}{subtitle} {}, {items} items, started {}",
        s("id"),
        draw::quoted(row.get("title").and_then(Value::as_str).unwrap_or("")),
        s("state"),
        s("startedAt")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_are_read_from_lines() {
        assert_eq!(parse_command("open ticket-1").unwrap(), Command::Open("ticket-1".into()));
        assert_eq!(parse_command("send  /ask choice").unwrap(), Command::Send("/ask choice".into()));
        assert_eq!(
            parse_command("answer 970f yes").unwrap(),
            Command::Answer { ask: "970f".into(), text: "yes".into() }
        );
        assert_eq!(
            parse_command("answer #1 name=\"Ana Lopez\" qty=2").unwrap(),
            Command::Answer { ask: "#1".into(), text: "name=\"Ana Lopez\" qty=2".into() }
        );
        assert_eq!(
            parse_command("rename tab support:main Open tickets").unwrap(),
            Command::Rename { target: "tab".into(), id: "support:main".into(), title: "Open tickets".into() }
        );
        assert_eq!(
            parse_command("rename ticket-1 Ana").unwrap(),
            Command::Rename { target: "pane".into(), id: "ticket-1".into(), title: "Ana".into() }
        );
        assert_eq!(
            parse_command("close ticket-1").unwrap(),
            Command::Close { target: "pane".into(), id: "ticket-1".into() }
        );
        assert_eq!(
            parse_command("starter new-ticket hello there").unwrap(),
            Command::Starter("new-ticket".into(), Some("hello there".into()))
        );
        assert_eq!(parse_command("wait 1500").unwrap(), Command::Wait(1500));
        assert_eq!(parse_command("history ticket-1").unwrap(), Command::History(Some("ticket-1".into())));
        assert!(parse_command("send").is_err());
        assert!(parse_command("teleport").unwrap_err().contains("unknown command"));
        assert!(parse_command("wait soon").is_err());
    }

    #[test]
    fn arguments_follow_the_transport_rules() {
        let args = |a: &[&str]| -> Result<Given, String> {
            use clap::Parser;
            #[derive(Parser)]
            struct Cli {
                #[command(flatten)]
                phone: Args,
            }
            let cli = Cli::try_parse_from(std::iter::once("phone").chain(a.iter().copied()))
                .map_err(|e| e.to_string())?;
            given(&cli.phone)
        };
        assert!(args(&["--socket", "/run/x.sock", "--url", "https://127.0.0.1:1"]).is_err());
        #[cfg(not(unix))]
        assert!(args(&["--socket", "C:\\agent.sock"]).unwrap_err().contains("Unix-only"));
        let a = args(&["--url", "https://127.0.0.1:8443", "--fingerprint", &"AB:".repeat(32)[..95]]).unwrap();
        assert_eq!(a.pin, Some([0xab; 32]));
        assert!(args(&["--url", "https://127.0.0.1:8443", "--fingerprint", "abc"]).is_err());
        #[cfg(unix)]
        {
            let rel = args(&["--socket", "rel/app.sock"]).unwrap();
            assert!(link_for(&rel).unwrap_err().contains("not absolute"));
        }
        let plain = args(&["--url", "http://10.1.2.3:80"]).unwrap();
        assert!(link_for(&plain).unwrap_err().contains("only for 127.0.0.1"));
    }
}
