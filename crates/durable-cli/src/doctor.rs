//! `durable doctor`: the checks Collie runs before it shows an agent, one
//! line each with the rule's name and, when it fails, a fix; the exit code
//! is 1 when one fails, 2 when the command line is unusable. The rules are
//! those of docs/wire.md: the socket's path and privacy and stale sockets
//! (§1.1), the URL, the token and the certificate (§1.2), then `GET
//! /hello`: it answers whole, in time and in JSON, the wire ranges meet
//! (said in Collie's words), the caps and `ready` (§3, §4). The wire's
//! names and limits come from `durable_types`, as the SDK's do.

#[cfg(unix)]
use std::io::ErrorKind;
#[cfg(unix)]
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

#[cfg(unix)]
use durable_types::SOCKET_PATH_MAX;
use durable_types::{CAP_NAMES, TOKEN_MIN, WIRE_MAX, WIRE_MIN};
use serde_json::Value;

use crate::link::{AgentArgs, Answer, AnswerLimit, Link, LinkError, Target, Token, Url};
use crate::pin::fingerprint_text;

/// `durable doctor`'s command line.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Each check prints one line (ok, FAIL with a fix, or skip); the exit code is 1 when one fails, 2 for an unusable command line.\n\
Over https without --fingerprint and off loopback, the agent is asked without the token, for the fingerprint to pin."
)]
pub(crate) struct Args {
    #[command(flatten)]
    agent: AgentArgs,
}

/// How long the doctor waits for `GET /hello`: a hello does no work, so an
/// agent that says nothing for this long is stuck (the link's own limit is
/// for writes, which may wait 5 s for a pane's lock).
const HELLO_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Debug, PartialEq)]
enum Verdict {
    Ok(String),
    Fail { what: String, fix: String },
    Skip(String),
}

#[derive(Debug)]
struct Report {
    lines: Vec<(String, Verdict)>,
}

impl Report {
    fn ok(&mut self, rule: &str, what: impl Into<String>) {
        self.push(rule, Verdict::Ok(what.into()));
    }

    fn fail(&mut self, rule: &str, what: impl Into<String>, fix: impl Into<String>) {
        self.push(rule, Verdict::Fail { what: what.into(), fix: fix.into() });
    }

    fn skip(&mut self, rule: &str, why: impl Into<String>) {
        self.push(rule, Verdict::Skip(why.into()));
    }

    fn push(&mut self, rule: &str, verdict: Verdict) {
        let line = match &verdict {
            Verdict::Ok(what) => format!("ok    {rule}: {what}"),
            Verdict::Fail { what, fix } => format!("FAIL  {rule}: {what} -- fix: {fix}"),
            Verdict::Skip(why) => format!("skip  {rule}: {why}"),
        };
        println!("{line}");
        self.lines.push((rule.to_owned(), verdict));
    }

    fn failed(&self) -> usize {
        self.lines.iter().filter(|(_, v)| matches!(v, Verdict::Fail { .. })).count()
    }
}

/// Which agent, as given.
#[derive(Debug)]
enum Agent {
    Socket(PathBuf),
    Url(Url),
    /// A `--url` that does not read as one, and why.
    BadUrl(String),
}

#[derive(Debug)]
struct Given {
    agent: Agent,
    pin: Option<[u8; 32]>,
    insecure: bool,
    answer_limit: AnswerLimit,
}

fn given(args: &Args) -> Result<Given, String> {
    let agent = match args.agent.place()? {
        Ok(path) => Agent::Socket(path),
        // The URL's shape is the first check.
        Err(url) => Url::parse(&url).map_or_else(Agent::BadUrl, Agent::Url),
    };
    Ok(Given {
        agent,
        pin: args.agent.fingerprint,
        insecure: args.agent.insecure,
        answer_limit: args.agent.answer_limit(),
    })
}

pub(crate) fn main(args: Args) -> ExitCode {
    let args = match given(&args) {
        Ok(a) => a,
        Err(why) => {
            eprintln!("doctor: {why} (durable doctor --help)");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("doctor: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut report = Report { lines: Vec::new() };
    runtime.block_on(async {
        match &args.agent {
            Agent::Socket(path) => socket(&mut report, path, args.answer_limit).await,
            Agent::Url(url) => https(&mut report, url, &args).await,
            Agent::BadUrl(why) => {
                report.fail(
                    "url-scheme",
                    why,
                    "write https://HOST:PORT, or http://127.0.0.1:PORT (docs/wire.md §1.2)",
                );
                skip_rest(&mut report, "needs an address Collie takes");
            }
        }
    });
    let failed = report.failed();
    if failed == 0 {
        println!("doctor: every check passed: Collie can show this agent");
        ExitCode::SUCCESS
    } else {
        println!("doctor: {failed} check{} failed", if failed == 1 { "" } else { "s" });
        ExitCode::FAILURE
    }
}

/// Off Unix there is no private socket (docs/wire.md §1.1): one line says so.
#[cfg(not(unix))]
async fn socket(report: &mut Report, path: &Path, _answer_limit: AnswerLimit) {
    report.fail(
        "socket-path-absolute",
        format!("{} is a socket path, and the private socket is Unix-only", path.display()),
        "give the agent's address with --url https://HOST:PORT (docs/wire.md §1.2)",
    );
    skip_rest(report, "needs an address Collie takes");
}

/// The socket's checks (§1.1), then hello's.
#[cfg(unix)]
async fn socket(report: &mut Report, path: &Path, answer_limit: AnswerLimit) {
    let shown = path.display().to_string();
    let absolute = path.is_absolute();
    if absolute {
        report.ok("socket-path-absolute", format!("{shown} is absolute"));
    } else {
        report.fail(
            "socket-path-absolute",
            format!("{shown} is a relative path"),
            "give the socket's absolute path, e.g. $XDG_RUNTIME_DIR/<agent>/app.sock (docs/wire.md §1.1)",
        );
    }
    let len = path.as_os_str().len();
    if len <= SOCKET_PATH_MAX {
        report.ok("socket-path-length", format!("{len} bytes, at most {SOCKET_PATH_MAX}"));
    } else {
        report.fail(
            "socket-path-length",
            format!("the path has {len} bytes, more than the {SOCKET_PATH_MAX} a Unix socket address holds"),
            "a shorter path, e.g. $XDG_RUNTIME_DIR/<agent>/app.sock (docs/wire.md §1.1)",
        );
    }
    if !absolute || len > SOCKET_PATH_MAX {
        for rule in ["socket-not-private", "socket-stale", "hello", "wire-range", "caps", "ready"] {
            report.skip(rule, "needs a usable socket path");
        }
        return;
    }
    // Nothing at the path (or no folder): one line says so, and what to do.
    let fix_missing = "start the agent, and give the path it prints (`listening <path>`)";
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == ErrorKind::NotFound => {
            let folder = path.parent().unwrap_or(path);
            let what = if folder.is_dir() {
                format!("there is no socket at {shown}")
            } else {
                format!("there is no socket at {shown}: its folder {} does not exist", folder.display())
            };
            report.skip("socket-not-private", "no socket to check");
            report.fail("socket-stale", what, fix_missing);
            return skip_hello(report);
        }
        Ok(meta) if !meta.file_type().is_socket() && !meta.file_type().is_symlink() => {
            report.fail(
                "socket-not-private",
                format!("{shown} is not a socket"),
                "give the path the agent prints (`listening <path>`)",
            );
            report.skip("socket-stale", "not a socket");
            return skip_hello(report);
        }
        _ => {}
    }
    let uid = rustix::process::geteuid().as_raw();
    match privacy(path, uid) {
        Ok(what) => report.ok("socket-not-private", what),
        Err((what, fix)) => report.fail("socket-not-private", what, format!("{fix} (docs/wire.md §1.1)")),
    }
    let mut link = Link::new(Target::Socket(path.to_owned()), None, None).with_answer_limit(answer_limit);
    let answer = match get_hello(&mut link).await {
        Ok(answer) => {
            report.ok("socket-stale", "the agent accepts connections on it");
            answer
        }
        Err(LinkError::Connect { kind: ErrorKind::ConnectionRefused, .. }) => {
            report.fail(
                "socket-stale",
                format!("connection refused: {shown} is a socket file nobody listens on (the agent stopped without removing it)"),
                "start the agent again: it replaces a stale socket (docs/wire.md §1.1)",
            );
            return skip_hello(report);
        }
        Err(LinkError::Connect { kind: ErrorKind::NotFound, .. }) => {
            report.fail("socket-stale", format!("there is no socket at {shown}"), fix_missing);
            return skip_hello(report);
        }
        Err(e @ LinkError::Connect { .. }) => {
            report.fail("socket-stale", e.to_string(), fix_missing);
            return skip_hello(report);
        }
        Err(e) => {
            // Connected: the socket is not stale, the answer is what broke.
            report.ok("socket-stale", "the agent accepts connections on it");
            return broken_hello(report, &e);
        }
    };
    hello(report, &answer);
}

/// `GET /hello` within [`HELLO_TIMEOUT`].
async fn get_hello(link: &mut Link) -> Result<Answer, LinkError> {
    match tokio::time::timeout(HELLO_TIMEOUT, link.get("/hello", &[])).await {
        Ok(result) => result,
        Err(_) => Err(LinkError::Http(format!("GET /hello: no answer in {} s", HELLO_TIMEOUT.as_secs()))),
    }
}

/// The agent took the connection, but no whole answer came back.
fn broken_hello(report: &mut Report, e: &LinkError) {
    report.fail(
        "hello",
        format!("no whole answer to GET /hello: {e}"),
        "is a durable agent listening there? Check its log; GET /hello must answer {\"ok\": true, …} at once (docs/wire.md §3)",
    );
    for rule in ["wire-range", "caps", "ready"] {
        report.skip(rule, "needs a hello answer");
    }
}

fn skip_rest(report: &mut Report, why: &str) {
    for rule in ["certificate", "token", "hello", "wire-range", "caps", "ready"] {
        report.skip(rule, why);
    }
}

fn skip_hello(report: &mut Report) {
    for rule in ["hello", "wire-range", "caps", "ready"] {
        report.skip(rule, "needs an agent that answers");
    }
}

/// Every component of the socket's path, as §1.1 wants it: no symbolic
/// link; ancestors owned by root or the user and not writable by others
/// (unless sticky); the socket's folder the user's with mode 0700; the
/// socket the user's with no group or other bits. `Err((what, fix))`; the
/// phone's start may call it too, for a warning line.
#[cfg(unix)]
pub(crate) fn privacy(path: &Path, uid: u32) -> Result<String, (String, String)> {
    let folder =
        path.parent().ok_or_else(|| ("the path has no folder".to_owned(), "give a path".to_owned()))?;
    let mut ancestors: Vec<&Path> = folder.ancestors().collect();
    ancestors.reverse();
    for dir in &ancestors {
        let shown = dir.display();
        let meta = std::fs::symlink_metadata(dir).map_err(|e| {
            (
                format!("the folder {shown} cannot be read: {e}"),
                "start the agent: it creates its folder with mode 0700".to_owned(),
            )
        })?;
        if meta.file_type().is_symlink() {
            return Err((
                format!("{shown} is a symbolic link"),
                "give the real path, with no link on the way".to_owned(),
            ));
        }
        if !meta.is_dir() {
            return Err((format!("{shown} is not a folder"), "give a path through folders".to_owned()));
        }
        let mode = meta.mode() & 0o7777;
        if *dir == folder {
            if meta.uid() != uid {
                return Err((
                    format!(
                        "the socket's folder {shown} belongs to uid {}, not to you (uid {uid})",
                        meta.uid()
                    ),
                    "a folder of your own, mode 0700".to_owned(),
                ));
            }
            if mode & 0o077 != 0 {
                return Err((
                    format!("the socket's folder {shown} is open to group or others (mode {mode:04o})"),
                    format!("chmod 700 {shown}"),
                ));
            }
        } else {
            if meta.uid() != 0 && meta.uid() != uid {
                return Err((
                    format!("{shown} belongs to uid {}, neither root nor you", meta.uid()),
                    "a path through folders of root's or your own".to_owned(),
                ));
            }
            if mode & 0o022 != 0 && mode & 0o1000 == 0 {
                return Err((
                    format!(
                        "{shown} is writable by group or others without the sticky bit (mode {mode:04o})"
                    ),
                    format!("chmod go-w {shown}"),
                ));
            }
        }
    }
    let shown = path.display();
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == ErrorKind::NotFound => {
            Ok(format!("the folder {} is private; no socket in it yet", folder.display()))
        }
        Err(e) => Err((format!("{shown} cannot be read: {e}"), "check the path".to_owned())),
        Ok(meta) => {
            let mode = meta.mode() & 0o7777;
            if meta.file_type().is_symlink() {
                Err((format!("{shown} is a symbolic link"), "give the socket's real path".to_owned()))
            } else if !meta.file_type().is_socket() {
                Err((
                    format!("{shown} is not a socket"),
                    "give the path the agent prints (`listening <path>`)".to_owned(),
                ))
            } else if meta.uid() != uid {
                Err((
                    format!("the socket {shown} belongs to uid {}, not to you (uid {uid})", meta.uid()),
                    "run the agent as yourself".to_owned(),
                ))
            } else if mode & 0o077 != 0 {
                Err((
                    format!("the socket {shown} is open to group or others (mode {mode:04o})"),
                    format!("chmod 600 {shown}"),
                ))
            } else {
                Ok(format!("the folder {} is 0700 and the socket {mode:04o}, both yours", folder.display()))
            }
        }
    }
}

/// The URL's checks (§1.2), then hello's.
async fn https(report: &mut Report, url: &Url, args: &Given) {
    match url.rule() {
        Ok(()) => report.ok(
            "url-scheme",
            format!("{url}: {}", if url.https { "https" } else { "plain http on loopback with a port" }),
        ),
        Err(why) => {
            report.fail(
                "url-scheme",
                why,
                "use https://HOST:PORT; plain http only as http://127.0.0.1:PORT (docs/wire.md §1.2)",
            );
            return skip_rest(report, "needs an address Collie takes");
        }
    }
    let token = Token::from_env();
    let token_problem = match &token {
        None => Some("COLLIE_TOKEN is not set".to_owned()),
        Some(t) if t.len() < TOKEN_MIN => {
            Some(format!("the token has {} bytes; the agent takes at least {TOKEN_MIN}", t.len()))
        }
        Some(t) if !t.is_printable() => Some("the token holds bytes that are not printable ASCII".to_owned()),
        Some(_) => None,
    };
    // The token goes only to a server whose certificate is verified (pinned,
    // or --insecure on loopback): an unpinned https address is first asked
    // without it, for the fingerprint to pin, and the token stays here.
    let verified = !url.https || args.pin.is_some() || (args.insecure && url.is_loopback());
    let mut link = Link::new(Target::Url(url.clone()), if verified { token } else { None }, args.pin)
        .with_answer_limit(args.answer_limit);
    let result = get_hello(&mut link).await;
    let seen = link.seen_fingerprint();
    // The certificate first: nothing else can be trusted without it.
    if url.https {
        match (seen, args.pin) {
            (None, _) => {
                let why = match &result {
                    Err(e) => e.to_string(),
                    Ok(_) => "no certificate seen".to_owned(),
                };
                report.fail("certificate", why, "check the address, and that the agent serves HTTPS there (--listen ADDR)");
            }
            (Some(seen), Some(pin)) if seen != pin => report.fail(
                "certificate",
                format!(
                    "the agent's certificate has the SHA-256 fingerprint {}, not the pinned {}",
                    fingerprint_text(&seen),
                    fingerprint_text(&pin)
                ),
                "pin the fingerprint the agent printed at start-up; if it did not change, something else answers on this address",
            ),
            (Some(seen), Some(_)) => report.ok("certificate", format!("matches the pinned fingerprint {}", fingerprint_text(&seen))),
            (Some(seen), None) if args.insecure && url.is_loopback() => report.ok(
                "certificate",
                format!("not pinned (--insecure on loopback); its fingerprint is {}", fingerprint_text(&seen)),
            ),
            (Some(seen), None) => report.fail(
                "certificate",
                format!("not pinned; the certificate's SHA-256 fingerprint is {}", fingerprint_text(&seen)),
                format!("check it against the one the agent printed, then pass --fingerprint {}", fingerprint_text(&seen)),
            ),
        }
    } else {
        report.skip("certificate", "plain http on loopback carries none");
    }
    if !verified {
        let why = "not sent to a server whose certificate is not pinned";
        match token_problem {
            Some(problem) => {
                report.fail("token", problem, "export COLLIE_TOKEN=<the agent's token> (docs/wire.md §1.2)")
            }
            None => report.skip("token", why),
        }
        for rule in ["hello", "wire-range", "caps", "ready"] {
            report.skip(rule, "needs the token, which needs a pinned certificate");
        }
        return;
    }
    let answer = match result {
        Ok(a) => a,
        Err(e) => {
            if let Some(problem) = token_problem {
                report.fail("token", problem, "export COLLIE_TOKEN=<the agent's token> (docs/wire.md §1.2)");
            } else {
                report.skip("token", "needs an answer from the agent");
            }
            match e {
                LinkError::Tls(_) => skip_hello(report),
                LinkError::Connect { .. } => {
                    report.fail(
                        "hello",
                        e.to_string(),
                        "start the agent with --listen ADDR, and give that address",
                    );
                    for rule in ["wire-range", "caps", "ready"] {
                        report.skip(rule, "needs an agent that answers");
                    }
                }
                LinkError::Http(_) if url.https && seen.is_none() => skip_hello(report),
                LinkError::Http(_) | LinkError::TooLarge(_) => broken_hello(report, &e),
            }
            return;
        }
    };
    match (answer.status, token_problem) {
        (401, problem) => report.fail(
            "token",
            format!(
                "the agent refused the token (401 token-refused){}",
                problem.map(|p| format!(": {p}")).unwrap_or_default()
            ),
            "use the token the agent was started with (its COLLIE_TOKEN, or COLLIE_TOKEN_NEXT during a rotation)",
        ),
        (_, Some(problem)) => report.fail("token", problem, "export COLLIE_TOKEN=<the agent's token> (docs/wire.md §1.2)"),
        (200..=299, None) => report.ok("token", "the agent accepted the token"),
        (_, None) => report.skip("token", "needs a hello answer"),
    }
    if answer.status == 401 {
        return skip_hello(report);
    }
    hello(report, &answer);
}

/// `GET /hello`'s checks: it answers, the wire ranges overlap, the caps
/// are all named, the agent is ready.
fn hello(report: &mut Report, answer: &Answer) {
    let v = match &answer.json {
        Some(v) if answer.status == 200 && v.get("ok") == Some(&Value::Bool(true)) => v,
        json => {
            let said = json
                .as_ref()
                .and_then(|v| v.get("code"))
                .and_then(Value::as_str)
                .map(|c| format!(" {}", crate::phone::clean(c)))
                .unwrap_or_default();
            let not_durable = "is a durable agent listening there? GET /hello must answer {\"ok\": true, …} (docs/wire.md §3)";
            let (what, fix) = match (answer.status, json) {
                (403, _) => (
                    format!("GET /hello answered 403{said}"),
                    "run Collie (and this doctor) as the agent's user, outside the agent's own processes",
                ),
                (status @ 500..=599, _) => (
                    format!("GET /hello answered {status}{said}: the agent failed"),
                    "look at the agent's log (its standard error) for why, and start it again",
                ),
                (200, None) => ("GET /hello answered 200 without a JSON body".to_owned(), not_durable),
                (200, Some(_)) => ("GET /hello answered 200 without \"ok\": true".to_owned(), not_durable),
                (status, _) => (format!("GET /hello answered {status}{said}"), not_durable),
            };
            report.fail("hello", what, fix);
            for rule in ["wire-range", "caps", "ready"] {
                report.skip(rule, "needs a hello answer");
            }
            return;
        }
    };
    let text = |k: &str| crate::phone::clean(v.get(k).and_then(Value::as_str).unwrap_or("?"));
    report.ok("hello", format!("agent {} ({}, {})", text("host"), text("runtime"), text("callerCheck")));

    // Collie's own words for the versions (docs/wire.md §3).
    let collie = format!("this Collie speaks {WIRE_MIN}..{WIRE_MAX}");
    let wire = v.get("wire").and_then(|w| Some((w.get("min")?.as_u64()?, w.get("max")?.as_u64()?)));
    match wire {
        Some((min, max)) if min > max => report.fail(
            "wire-range",
            format!("durable-hello: the durable agent's wire range {min}..{max} ends before it starts"),
            "update the agent's SDK (docs/wire.md §3)",
        ),
        Some((min, max)) if max >= u64::from(WIRE_MIN) && min <= u64::from(WIRE_MAX) => {
            report.ok("wire-range", format!("durable-hello: the durable agent speaks {min}..{max}, {collie}"))
        }
        Some((min, max)) => report.fail(
            "wire-range",
            crate::phone::incompatible((min, max), (u64::from(WIRE_MIN), u64::from(WIRE_MAX))),
            if min > u64::from(WIRE_MAX) {
                "update Collie (and durable-cli), or build the agent on an SDK that still speaks this Collie's version"
            } else {
                "update the agent's SDK (docs/wire.md §3)"
            },
        ),
        None => report.fail(
            "wire-range",
            "durable-hello: the answer has no wire range {\"min\", \"max\"}",
            "update the agent's SDK (docs/wire.md §3)",
        ),
    }

    match v.get("caps").and_then(Value::as_object) {
        None => report.fail("caps", "hello has no caps object", "update the agent's SDK (docs/wire.md §4)"),
        Some(caps) => {
            let missing: Vec<&str> =
                CAP_NAMES.iter().copied().filter(|n| !caps.get(*n).is_some_and(Value::is_boolean)).collect();
            let on: Vec<&str> =
                CAP_NAMES.iter().copied().filter(|n| caps.get(*n) == Some(&Value::Bool(true))).collect();
            if !missing.is_empty() {
                report.fail(
                    "caps",
                    format!("caps does not say true or false for: {}", missing.join(", ")),
                    "update the agent's SDK: every capability is named (docs/wire.md §4)",
                );
            } else if caps.get("terminal") == Some(&Value::Bool(true)) {
                report.fail(
                    "caps",
                    "terminal is true, but a durable agent has no screen",
                    "declare terminal false (docs/wire.md §4)",
                );
            } else if on.is_empty() {
                report.fail(
                    "caps",
                    "every capability is off: the phone would show nothing to do",
                    "declare what the agent can do (docs/wire.md §4)",
                );
            } else {
                report.ok("caps", format!("on: {}", on.join(" ")));
            }
        }
    }

    match v.get("ready") {
        Some(Value::Bool(true)) => report.ok("ready", "the agent is ready"),
        Some(Value::Bool(false)) => report.fail(
            "ready",
            "the agent has not called ready(): Collie shows it as starting",
            "call ready() once the agent has set up its panes (docs/wire.md §3)",
        ),
        _ => report.fail("ready", "hello has no ready flag", "update the agent's SDK (docs/wire.md §3)"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn private_dir(name: &str) -> PathBuf {
        use std::os::unix::fs::DirBuilderExt;
        let dir = std::env::temp_dir().join(format!("xtask-doctor-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::DirBuilder::new().mode(0o700).create(&dir).unwrap();
        dir
    }

    #[test]
    fn privacy_names_the_component_that_breaks_it() {
        use std::os::unix::fs::PermissionsExt;
        let uid = rustix::process::geteuid().as_raw();
        let dir = private_dir("privacy");
        let sock = dir.join("app.sock");
        assert!(privacy(&sock, uid).unwrap().contains("no socket in it yet"));
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let (what, fix) = privacy(&sock, uid).unwrap_err();
        assert!(what.contains(&dir.display().to_string()) && what.contains("0755"), "{what}");
        assert_eq!(fix, format!("chmod 700 {}", dir.display()));
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        std::fs::write(&sock, "").unwrap();
        assert!(privacy(&sock, uid).unwrap_err().0.contains("not a socket"));
        let link = dir.join("link");
        std::os::unix::fs::symlink(&dir, &link).unwrap();
        assert!(privacy(&link.join("app.sock"), uid).unwrap_err().0.contains("symbolic link"));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn hello_checks_read_ranges_caps_and_ready() {
        let answer = |v: Value| Answer { status: 200, headers: Default::default(), json: Some(v) };
        let mut r = Report { lines: Vec::new() };
        let mut caps = serde_json::Map::new();
        for n in CAP_NAMES {
            caps.insert(n.into(), Value::Bool(n != "terminal"));
        }
        hello(
            &mut r,
            &answer(
                serde_json::json!({"ok": true, "host": "desk", "wire": {"min": 1, "max": 1}, "caps": caps, "ready": true}),
            ),
        );
        assert_eq!(r.failed(), 0);
        let mut r = Report { lines: Vec::new() };
        hello(
            &mut r,
            &answer(
                serde_json::json!({"ok": true, "wire": {"min": 2, "max": 3}, "caps": {"asks": true}, "ready": false}),
            ),
        );
        let failed: Vec<&str> = r
            .lines
            .iter()
            .filter(|(_, v)| matches!(v, Verdict::Fail { .. }))
            .map(|(n, _)| n.as_str())
            .collect();
        assert_eq!(failed, ["wire-range", "caps", "ready"]);
        // Collie's own words for the versions.
        assert_eq!(
            r.lines[1].1,
            Verdict::Fail {
                what: "durable-hello: incompatible: the durable agent speaks 2..3, this Collie speaks 1..1".into(),
                fix: "update Collie (and durable-cli), or build the agent on an SDK that still speaks this Collie's version".into(),
            }
        );
    }
}
