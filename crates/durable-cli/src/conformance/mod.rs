//! `durable conformance`: a client playing Collie against any agent.
//!
//! It reads the agent's hello and caps, finds its panes in the state, and
//! checks what the wire promises for what the agent declares (the generic
//! tier: nothing about the agent's content is assumed). By default it only
//! reads and sends what cannot act; `--writes` adds the writes that act,
//! and `--agent-cmd` lets it start, kill and restart the agent for what
//! needs a restart. One line per case (`PASS name` / `FAIL name: why` /
//! `XFAIL name: reason`), then `N passed, M failed`, M counting the
//! unexpected results only; the exit code is 1 when M is not 0, 2 for a
//! usage error.
//!
//! The items here are public for this repository's own suite (the support
//! desk's cases, in `xtask/collie`), not for anyone else: no promise holds
//! them still.

mod agent;
pub mod baseline;
mod cases;
pub mod check;
pub mod client;
mod terminal;
mod wire;

use std::fmt;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub use baseline::Baseline;
pub use cases::Kind;
use check::CaseResult;

use crate::link::{AgentArgs, AnswerLimit, Target, Token, Url};

/// `durable conformance`'s command line.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    agent: AgentArgs,
    /// Also exercise writes that act: a send to a pane, the panes' declared
    /// actions, the starters, answers to the cards the agent raises (every
    /// card open when the run starts is answered too, declined where it
    /// can be: not against an agent with approvals pending), rename, close
    /// and reopen. Without it, only reads and requests that cannot act.
    #[arg(long)]
    writes: bool,
    /// The command that starts the agent (run with `sh -c`, Unix): the run
    /// starts it, and kills it with SIGKILL and starts it again for what
    /// needs a restart (a new epoch; receipts kept across a crash). The agent
    /// inherits this environment, COLLIE_TOKEN included (it serves with it).
    ///
    /// Over HTTPS, an agent with a self-signed certificate makes a new one
    /// at every start, which no --fingerprint can pin across a restart: leave
    /// --fingerprint out, and after each start the run pins the fingerprint
    /// the agent prints on its stdout or stderr (the SDK's own line, or any
    /// line holding the SHA-256 as 64 hex digits or 32 pairs joined by `:`;
    /// the last one printed). An agent that prints none: --insecure (loopback
    /// only) trusts the certificate each start shows. --fingerprint is for a
    /// certificate that stays the same across restarts: it wins over what
    /// the agent prints.
    #[arg(long, value_name = "COMMAND")]
    agent_cmd: Option<String>,
    /// The agent keeps its receipts across a restart (a persistent receipt
    /// store): with --agent-cmd and --writes, a request repeated after a
    /// SIGKILL must replay its first answer.
    #[arg(long, requires = "agent_cmd")]
    receipts_persist: bool,
    /// Cases expected to fail, one `name<TAB>reason` a line (`#` comments);
    /// a listed case that passes, or a name that matches no case, fails.
    #[arg(long, value_name = "FILE")]
    expected_failures: Option<PathBuf>,
    /// Only the cases whose name holds this.
    #[arg(long, value_name = "SUBSTR")]
    filter: Option<String>,
}

/// One run of the generic tier: where the agent is and what may be done.
#[derive(Clone, Default)]
pub struct Generic {
    /// The agent's private socket.
    pub socket: Option<PathBuf>,
    /// Or its address: `https://HOST:PORT`, or `http://127.0.0.1:PORT`.
    pub url: Option<String>,
    /// HTTPS: the certificate's SHA-256.
    pub pin: Option<[u8; 32]>,
    /// HTTPS on loopback: trust the first leaf seen.
    pub insecure: bool,
    /// The bearer token (TCP only).
    pub token: Option<String>,
    /// The rotation token, when known (`token_next_accepted`).
    pub token_next: Option<String>,
    /// Run the writes that act.
    pub writes: bool,
    /// Start the agent with `sh -c` (and restart it).
    pub agent_cmd: Option<String>,
    /// Variables added to the agent's environment.
    pub agent_env: Vec<(String, String)>,
    /// The agent's receipts outlive it.
    pub receipts_persist: bool,
    /// Only the cases whose name holds this.
    pub filter: Option<String>,
    /// The most read of one answer, in MiB (`--max-answer-mib`); `None`
    /// for the default, 64 MiB.
    pub max_answer_mib: Option<u64>,
}

impl fmt::Debug for Generic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Generic")
            .field("socket", &self.socket)
            .field("url", &self.url)
            .field("insecure", &self.insecure)
            .field("token", &self.token.as_ref().map(|_| "<not shown>"))
            .field("writes", &self.writes)
            .field("agent_cmd", &self.agent_cmd)
            .field("receipts_persist", &self.receipts_persist)
            .field("filter", &self.filter)
            .field("max_answer_mib", &self.max_answer_mib)
            .finish_non_exhaustive()
    }
}

/// Where the run reaches the agent, once the command line is read.
#[derive(Debug)]
struct Place {
    target: Target,
    kind: Kind,
}

impl Generic {
    /// The most read of one answer.
    fn answer_limit(&self) -> AnswerLimit {
        self.max_answer_mib.map(AnswerLimit::from_mib).unwrap_or_default()
    }

    /// The usage rules: a place, a URL that keeps §1.2's rule, a pin or
    /// `--insecure` (loopback only) over HTTPS.
    fn place(&self) -> Result<Place, String> {
        match (&self.socket, &self.url) {
            (Some(path), None) => Ok(Place { target: Target::Socket(path.clone()), kind: Kind::Socket }),
            (None, Some(text)) => {
                let url = Url::parse(text)?;
                url.rule()?;
                if self.insecure && !url.is_loopback() {
                    return Err(format!("--insecure is for loopback only, not {}", url.host));
                }
                if url.https && self.pin.is_none() && !self.insecure && self.agent_cmd.is_none() {
                    return Err(
                        "over HTTPS, give the certificate's --fingerprint (or --insecure on loopback, or \
                         --agent-cmd, which pins the fingerprint the agent prints)"
                            .into(),
                    );
                }
                if self.token.is_none() {
                    return Err("over TCP the token comes from COLLIE_TOKEN, which is not set".into());
                }
                let kind = if url.https { Kind::Tls } else { Kind::Http };
                Ok(Place { target: Target::Url(url), kind })
            }
            _ => Err("say where the agent is: --socket PATH or --url URL".into()),
        }
    }
}

fn from_args(args: Args) -> Result<(Generic, Baseline), String> {
    let place = args.agent.place()?;
    let (socket, url) = match place {
        Ok(path) => (Some(path), None),
        Err(url) => (None, Some(url)),
    };
    let baseline = match &args.expected_failures {
        None => Baseline::default(),
        Some(path) => {
            let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
            Baseline::parse(&text).map_err(|e| format!("{}: {e}", path.display()))?
        }
    };
    let env_token = |name: &str| std::env::var(name).ok().filter(|t| !t.is_empty());
    // The limit as the command line gave it, in whole MiB.
    let max_answer_mib = u64::try_from(args.agent.answer_limit().bytes() >> 20).ok();
    let generic = Generic {
        socket,
        url,
        pin: args.agent.fingerprint,
        insecure: args.agent.insecure,
        token: Token::from_env().map(|t| t.secret().to_owned()),
        token_next: env_token("COLLIE_TOKEN_NEXT"),
        writes: args.writes,
        agent_cmd: args.agent_cmd,
        agent_env: Vec::new(),
        receipts_persist: args.receipts_persist,
        filter: args.filter,
        max_answer_mib,
    };
    generic.place()?;
    Ok((generic, baseline))
}

pub(crate) fn main(args: Args) -> ExitCode {
    let (generic, baseline) = match from_args(args) {
        Ok(read) => read,
        Err(why) => {
            eprintln!("durable conformance: {why} (durable conformance --help)");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("durable conformance: a tokio runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let kind = generic.place().map(|p| p.kind).unwrap_or(Kind::Socket);
    let result = runtime.block_on(async {
        let mut tally = run_generic(&generic, &baseline).await?;
        tally.fail_stale(&baseline, &generic_names(kind));
        Ok::<_, String>(tally)
    });
    match result {
        Ok(tally) => {
            println!("{tally}");
            if tally.failed == 0 { ExitCode::SUCCESS } else { ExitCode::FAILURE }
        }
        Err(why) => {
            eprintln!("durable conformance: {}", terminal::line(&why, terminal::REASON_MAX));
            ExitCode::FAILURE
        }
    }
}

/// How long one case may take, restarts included.
const CASE_TIMEOUT: Duration = Duration::from_secs(120);

/// How a case went, against the baseline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Passed, not listed.
    Pass,
    /// Failed unlisted, or passed though listed.
    Fail,
    /// Failed as listed.
    ExpectedFail,
}

/// The counts of a run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    /// Cases that passed.
    pub passed: usize,
    /// Unexpected results (and stale baseline entries).
    pub failed: usize,
    /// Listed failures.
    pub xfail: usize,
}

impl Tally {
    /// Counts one outcome.
    pub fn add(&mut self, outcome: Outcome) {
        match outcome {
            Outcome::Pass => self.passed += 1,
            Outcome::Fail => self.failed += 1,
            Outcome::ExpectedFail => self.xfail += 1,
        }
    }

    /// Adds another run's counts.
    pub fn merge(&mut self, other: Tally) {
        self.passed += other.passed;
        self.failed += other.failed;
        self.xfail += other.xfail;
    }

    /// Fails (and prints) every baseline entry that names none of `names`.
    pub fn fail_stale(&mut self, baseline: &Baseline, names: &[String]) {
        for name in stale_entries(baseline, names) {
            let name = terminal::line(name, terminal::REASON_MAX);
            println!("FAIL {name}: listed as an expected failure but matches no case");
            self.failed += 1;
        }
    }
}

impl fmt::Display for Tally {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.xfail > 0 {
            writeln!(f, "{} expected failure(s) (XFAIL, counted in neither number below)", self.xfail)?;
        }
        write!(f, "{} passed, {} failed", self.passed, self.failed)
    }
}

/// Baseline entries that name no case of this run: each fails the run.
pub fn stale_entries<'a>(baseline: &'a Baseline, names: &[String]) -> Vec<&'a String> {
    baseline.entries.keys().filter(|n| !names.contains(n)).collect()
}

/// Prints the case's line and says how it went against the baseline.
/// What the agent wrote in a reason reaches the terminal escaped and cut
/// (`terminal::line`).
pub fn report(name: &str, result: CaseResult, baseline: &Baseline) -> Outcome {
    let one_line = |s: &str| terminal::line(s, terminal::REASON_MAX);
    let shown = one_line(name);
    match (result, baseline.reason(name)) {
        (Ok(()), None) => {
            println!("PASS {shown}");
            Outcome::Pass
        }
        (Ok(()), Some(_)) => {
            println!("FAIL {shown}: listed as an expected failure but passed");
            Outcome::Fail
        }
        (Err(why), None) => {
            println!("FAIL {shown}: {}", one_line(&why));
            Outcome::Fail
        }
        (Err(why), Some(reason)) => {
            println!("XFAIL {shown}: {} (this run: {})", one_line(reason), one_line(&why));
            Outcome::ExpectedFail
        }
    }
}

/// The name of every generic case over this transport, as printed.
pub fn generic_names(kind: Kind) -> Vec<String> {
    cases::all().iter().map(|c| c.name(kind)).collect()
}

/// Runs the generic tier and prints one line per case; `Err` when the
/// agent cannot be started or reached, or its hello is no hello.
pub async fn run_generic(g: &Generic, baseline: &Baseline) -> Result<Tally, String> {
    let place = g.place()?;
    let token = g.token.clone().map(Token::new);
    let agent = match &g.agent_cmd {
        Some(cmd) => {
            let spec = agent::AgentSpec {
                cmd: cmd.clone(),
                env: g.agent_env.clone(),
                target: place.target.clone(),
                token: token.clone(),
                pin: g.pin,
                insecure: g.insecure,
                answer_limit: g.answer_limit(),
            };
            Some(agent::Agent::start(spec).await.map_err(|e| format!("--agent-cmd: {e}"))?)
        }
        None => None,
    };
    let client = match &agent {
        Some(agent) => agent.client.clone(),
        None => client::Client::at(place.target.clone(), token, g.pin, g.answer_limit()),
    };
    let hello = client
        .get("/hello")
        .await
        .map_err(|e| format!("no hello from the agent at {}: {e}", place.target))?;
    if hello.status == 401 {
        return Err(format!("{} refused the token (401): is COLLIE_TOKEN the agent's?", place.target));
    }
    let hello_json =
        hello.ok().map_err(|e| format!("the agent at {} gives no hello: {e}", place.target))?.clone();
    let state = client.get("/v1/state").await?;
    let state_json = state.ok().map_err(|e| format!("the agent gives no state: {e}"))?.clone();
    let cx = cases::Ctx {
        client: Arc::new(Mutex::new(client)),
        kind: place.kind,
        hello: hello_json,
        state: state_json,
        token: g.token.clone(),
        token_next: g.token_next.clone(),
        socket: g.socket.clone(),
        agent: agent.map(|a| Arc::new(tokio::sync::Mutex::new(a))),
    };
    let allowed = |needs: cases::Needs| match needs {
        cases::Needs::Read => true,
        cases::Needs::Writes => g.writes,
        cases::Needs::Restart => cx.agent.is_some(),
        cases::Needs::PersistentReceipts => cx.agent.is_some() && g.writes && g.receipts_persist,
    };
    let every_case = cases::all();
    // What is not run, and why: the flags it needs, or what the agent does not declare.
    let mut not_run: Vec<(&str, Vec<&str>)> = vec![
        ("--writes", Vec::new()),
        ("--agent-cmd", Vec::new()),
        ("--agent-cmd --writes --receipts-persist", Vec::new()),
        ("what the agent does not declare, or another transport", Vec::new()),
    ];
    let mut selected = Vec::new();
    for case in &every_case {
        let name = case.name(place.kind);
        if g.filter.as_ref().is_some_and(|f| !name.contains(f.as_str())) {
            continue;
        }
        let why = if allowed(case.needs) {
            if (case.applies)(&cx) {
                selected.push((name, case));
                continue;
            }
            3
        } else {
            match case.needs {
                cases::Needs::Writes => 0,
                cases::Needs::Restart => 1,
                cases::Needs::PersistentReceipts | cases::Needs::Read => 2,
            }
        };
        not_run[why].1.push(case.rule);
    }
    let on: Vec<&str> = wire::CAP_NAMES.iter().copied().filter(|c| cx.cap(c)).collect();
    // The agent's own words, escaped and cut: a hello may hold escape sequences.
    let said = |v: &serde_json::Value| terminal::line(v.as_str().unwrap_or("?"), terminal::VALUE_MAX);
    println!(
        "conformance: {} generic cases against {} ({} {}, host {}; caps on: {}; {} panes)",
        selected.len(),
        terminal::line(&place.target.to_string(), terminal::REASON_MAX),
        said(&cx.hello["sdk"]["name"]),
        said(&cx.hello["sdk"]["version"]),
        said(&cx.hello["host"]),
        if on.is_empty() { "none".to_owned() } else { on.join(",") },
        cx.panes().len(),
    );
    for (needs, rules) in not_run.iter().filter(|(_, rules)| !rules.is_empty()) {
        println!("conformance: not run (needs {needs}): {}", rules.join(", "));
    }
    let started = Instant::now();
    let mut tally = Tally::default();
    for (name, case) in selected {
        let result = match tokio::time::timeout(CASE_TIMEOUT, (case.run)(cx.clone())).await {
            Ok(result) => result,
            Err(_) => Err(format!("the case took more than {} s", CASE_TIMEOUT.as_secs())),
        };
        tally.add(report(&name, result, baseline));
    }
    println!("conformance: generic cases {:.1} s", started.elapsed().as_secs_f64());
    if let Some(agent) = &cx.agent {
        agent.lock().await.kill().await;
    }
    Ok(tally)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Result<(Generic, Baseline), String> {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            conformance: Args,
        }
        let cli = Cli::try_parse_from(std::iter::once("conformance").chain(a.iter().copied()))
            .map_err(|e| e.to_string())?;
        from_args(cli.conformance)
    }

    #[test]
    fn the_command_line_says_where_and_what() {
        let (g, _) = args(&["--socket", "/tmp/a.sock", "--writes", "--filter", "ask_"]).unwrap();
        assert_eq!(g.socket, Some(PathBuf::from("/tmp/a.sock")));
        assert!(g.writes && g.agent_cmd.is_none());
        assert_eq!(g.filter.as_deref(), Some("ask_"));
        assert!(args(&["--socket", "/tmp/a", "--url", "https://127.0.0.1:1"]).is_err());
        assert!(args(&["--receipts-persist", "--socket", "/tmp/a"]).is_err(), "needs --agent-cmd");
        let (g, _) =
            args(&["--socket", "/tmp/a", "--agent-cmd", "my-agent --x", "--receipts-persist"]).unwrap();
        assert_eq!(g.agent_cmd.as_deref(), Some("my-agent --x"));
        assert_eq!(g.answer_limit(), AnswerLimit::default(), "64 MiB unless told");
        let (g, _) = args(&["--socket", "/tmp/a", "--max-answer-mib", "3"]).unwrap();
        assert_eq!((g.max_answer_mib, g.answer_limit()), (Some(3), AnswerLimit::from_mib(3)));
    }

    #[test]
    fn https_needs_a_pin_or_insecure_on_loopback_and_a_token() {
        let g = |url: &str, insecure: bool, token: bool| Generic {
            url: Some(url.to_owned()),
            insecure,
            token: token.then(|| "t".repeat(32)),
            ..Generic::default()
        };
        assert!(g("https://127.0.0.1:8443", true, true).place().is_ok());
        assert!(g("https://127.0.0.1:8443", false, true).place().unwrap_err().contains("--fingerprint"));
        assert!(g("https://10.1.2.3:8443", true, true).place().unwrap_err().contains("loopback"));
        assert!(g("https://127.0.0.1:8443", true, false).place().unwrap_err().contains("COLLIE_TOKEN"));
        assert!(g("http://10.1.2.3:80", false, true).place().is_err());
        let pinned = Generic { pin: Some([7; 32]), ..g("https://agent.example:8443", false, true) };
        assert_eq!(pinned.place().unwrap().kind, Kind::Tls);
        assert!(!format!("{pinned:?}").contains(&"t".repeat(32)), "the token is never in Debug");
    }

    /// The strict rule: a listed case that passes fails, as does a listed
    /// name that matches no case; a listed failure is XFAIL, counted apart.
    #[test]
    fn the_runner_is_strict_about_its_baseline() {
        let baseline = Baseline::parse("known_gap\tthe reason\nvanished_case\tgone since\n").unwrap();
        assert!(report("fine", Ok(()), &baseline) == Outcome::Pass);
        assert!(report("broken", Err("why".into()), &baseline) == Outcome::Fail);
        assert!(report("known_gap", Err("why".into()), &baseline) == Outcome::ExpectedFail);
        assert!(report("known_gap", Ok(()), &baseline) == Outcome::Fail, "a listed case that passes fails");
        let names = vec!["fine".to_owned(), "broken".to_owned(), "known_gap".to_owned()];
        assert_eq!(stale_entries(&baseline, &names), [&"vanished_case".to_owned()]);
        let mut tally = Tally::default();
        tally.fail_stale(&baseline, &names);
        assert_eq!(tally.failed, 1);
    }

    /// What a fake agent answers to `METHOD path` with this body: a status
    /// and a JSON body, or `None` for the default (`200 {"ok": true}`).
    type Route = Arc<dyn Fn(&str, &str, &str) -> Option<(u16, String)> + Send + Sync>;

    /// A hello as the SDK writes it, with these caps on and every other off.
    fn hello_with(on: &[&str]) -> String {
        assert!(on.iter().all(|c| durable_types::CAP_NAMES.contains(c)), "a capability of the wire: {on:?}");
        let caps: serde_json::Map<String, serde_json::Value> = durable_types::CAP_NAMES
            .iter()
            .map(|c| ((*c).to_owned(), serde_json::Value::Bool(on.contains(c))))
            .collect();
        serde_json::json!({"ok": true, "wire": {"min": 1, "max": 1}, "sdk": {"name": "fake", "version": "0"},
            "host": "fake", "runtime": "fake", "ready": true, "epoch": "0123456789abcdef", "callerCheck": "on",
            "caps": caps})
        .to_string()
    }

    /// A state with one idle pane, `p`.
    const ONE_PANE_STATE: &str = r#"{"ok": true, "epoch": "0123456789abcdef", "seq": 3, "ready": true, "full": true,
        "workspaces": [{"id": "w", "title": "W", "tabs": [{"id": "w:t", "title": "T", "panes": ["p"]}]}],
        "panes": [{"id": "p", "tab": "w:t", "title": "P", "state": "idle", "turnId": null, "lastSeq": 0,
                   "openAsks": [], "actions": []}],
        "removed": [], "closed": [], "starters": [], "asks": []}"#;

    /// A fake agent on a socket: its hello and state answer `hello` and
    /// `state`, every other request gets `{"ok": true}`.
    async fn fake_agent(
        dir: &std::path::Path,
        hello: impl Into<Arc<str>>,
        state: impl Into<Arc<str>>,
    ) -> PathBuf {
        fake_agent_routed(dir, hello, state, Arc::new(|_: &str, _: &str, _: &str| None)).await
    }

    /// [`fake_agent`], with `route` answering first.
    async fn fake_agent_routed(
        dir: &std::path::Path,
        hello: impl Into<Arc<str>>,
        state: impl Into<Arc<str>>,
        route: Route,
    ) -> PathBuf {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let (hello, state): (Arc<str>, Arc<str>) = (hello.into(), state.into());
        let path = dir.join("fake.sock");
        let listener = tokio::net::UnixListener::bind(&path).unwrap();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let (route, hello, state) = (route.clone(), hello.clone(), state.clone());
                tokio::spawn(async move {
                    let mut got = Vec::new();
                    let mut buf = [0u8; 65536];
                    let head_end = loop {
                        if let Some(at) = got.windows(4).position(|w| w == b"\r\n\r\n") {
                            break at + 4;
                        }
                        match stream.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => got.extend_from_slice(&buf[..n]),
                        }
                    };
                    let head = String::from_utf8_lossy(&got[..head_end]).to_ascii_lowercase();
                    let length: usize = head
                        .lines()
                        .find_map(|l| l.strip_prefix("content-length:"))
                        .and_then(|v| v.trim().parse().ok())
                        .unwrap_or(0);
                    while got.len() < head_end + length {
                        match stream.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => got.extend_from_slice(&buf[..n]),
                        }
                    }
                    let head = String::from_utf8_lossy(&got[..head_end]).to_string();
                    let mut words = head.split_whitespace();
                    let method = words.next().unwrap_or("").to_owned();
                    let path = words.next().unwrap_or("").to_owned();
                    let body = String::from_utf8_lossy(&got[head_end..]).to_string();
                    let (status, body) = match route(&method, &path, &body) {
                        Some(answer) => answer,
                        None => match path.split('?').next() {
                            Some("/hello") => (200, hello.to_string()),
                            Some("/v1/state") => (200, state.to_string()),
                            _ => (200, "{\"ok\": true}".to_owned()),
                        },
                    };
                    let answer = format!(
                        "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = stream.write_all(answer.as_bytes()).await;
                });
            }
        });
        path
    }

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("durable-cf-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[tokio::test]
    async fn garbage_for_a_hello_is_one_clear_error() {
        let dir = scratch("garbage");
        let socket = fake_agent(&dir, "hello", "[1, 2").await;
        let g = Generic { socket: Some(socket), ..Generic::default() };
        let why = run_generic(&g, &Baseline::default()).await.unwrap_err();
        assert!(why.contains("gives no hello") && !why.contains('\n'), "{why}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// An agent that says yes to everything: the generic tier fails it on
    /// the rules it breaks, case by case, without a panic.
    #[tokio::test]
    async fn an_agent_that_says_yes_to_everything_fails_case_by_case() {
        let dir = scratch("yes");
        let socket = fake_agent(&dir, hello_with(&["asks", "send"]), ONE_PANE_STATE).await;
        let g = Generic { socket: Some(socket), ..Generic::default() };
        let tally = run_generic(&g, &Baseline::default()).await.unwrap();
        assert!(tally.failed >= 10, "{tally:?}");
        assert!(tally.passed >= 1, "its hello itself is fine: {tally:?}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// An agent with one pane, `p`, and only rename on, whose rename hook
    /// answers a rename of `p` with `answer`; the rename case alone is run.
    async fn rename_case_against(name: &str, answer: (u16, &'static str)) -> Tally {
        let dir = scratch(name);
        // The rules that come before the hook (§8): an unknown target is
        // 404, a target of another kind 400; the hook answers the rest.
        let route: Route = Arc::new(move |method: &str, path: &str, body: &str| {
            if method != "POST" || path != "/v1/rename" {
                return None;
            }
            let body: serde_json::Value = serde_json::from_str(body).unwrap_or_default();
            let refusal = |status: u16, code: &str| {
                Some((status, format!(r#"{{"ok": false, "code": "{code}", "message": "Refused here."}}"#)))
            };
            if !["workspace", "tab", "pane"].contains(&body["target"].as_str().unwrap_or("")) {
                return refusal(400, "bad-request");
            }
            if body["id"] != "p" {
                return refusal(404, "not-found");
            }
            Some((answer.0, answer.1.to_owned()))
        });
        let socket = fake_agent_routed(&dir, hello_with(&["rename"]), ONE_PANE_STATE, route).await;
        let g = Generic {
            socket: Some(socket),
            writes: true,
            filter: Some("rename_pane_renamed".into()),
            ..Generic::default()
        };
        let tally = run_generic(&g, &Baseline::default()).await.unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        tally
    }

    /// A hook may refuse a rename (a read-only conversation, §8): `409
    /// refused` with a reason passes the rename case.
    #[tokio::test]
    async fn a_rename_refused_with_a_reason_passes() {
        let refused = r#"{"ok": false, "code": "refused", "reason": "read-only",
                          "message": "This conversation is read-only."}"#;
        let tally = rename_case_against("rename-refused", (409, refused)).await;
        assert_eq!((tally.passed, tally.failed), (1, 0), "{tally:?}");
    }

    /// Any other answer fails it: a `500`, or a refusal without a reason.
    #[tokio::test]
    async fn a_rename_answered_500_or_refused_without_a_reason_fails() {
        let broken = r#"{"ok": false, "code": "internal", "message": "It broke."}"#;
        let tally = rename_case_against("rename-500", (500, broken)).await;
        assert_eq!((tally.passed, tally.failed), (0, 1), "{tally:?}");
        let no_reason = r#"{"ok": false, "code": "refused", "message": "No."}"#;
        let tally = rename_case_against("rename-no-reason", (409, no_reason)).await;
        assert_eq!((tally.passed, tally.failed), (0, 1), "{tally:?}");
    }

    /// `--agent-cmd` over HTTPS cannot pin one fingerprint across restarts
    /// of an agent whose certificate is new at each start: `--help` says
    /// what to do instead.
    #[test]
    fn the_help_says_how_agent_cmd_pins_a_certificate_new_at_each_start() {
        use clap::CommandFactory;
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            conformance: Args,
        }
        let help = Cli::command().render_long_help().to_string();
        let help = help.split_whitespace().collect::<Vec<_>>().join(" ");
        for says in [
            "which no --fingerprint can pin across a restart: leave --fingerprint out",
            "after each start the run pins the fingerprint the agent prints on its stdout or stderr",
            "--insecure (loopback only) trusts the certificate each start shows",
        ] {
            assert!(help.contains(says), "--help does not say {says:?}:\n{help}");
        }
    }

    #[test]
    fn generic_names_carry_their_transport() {
        let names = generic_names(Kind::Tls);
        assert!(names.len() >= 40, "{names:?}");
        assert!(names.iter().all(|n| n.ends_with(" [tls]")));
    }
}
