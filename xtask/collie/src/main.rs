//! `cargo xtask conformance`: the support desk's conformance run, in this
//! repository only (the desk and its knobs are not the published
//! binary's business).
//!
//! It builds the desk once, then over each transport (the private socket,
//! HTTPS with a pinned self-signed certificate) runs `durable
//! conformance`'s generic tier against a desk it starts (`--writes`, with
//! the desk's command for the restarts), then the desk's own cases, which
//! know its content: `ticket-1`, `/ask`, the refund button, the knobs.
//! One line per case, then `N passed, M failed` over both tiers; the exit
//! code is 1 when M is not 0. The strict baseline of expected failures is
//! `xtask/collie/conformance/expected-failures.txt`, for both tiers.
//!
//! `--examples` runs the generic tier against the SDK's examples instead:
//! `echo`, `shop`, `approval` and `pi --no-pi` on the socket and `windows`
//! over HTTPS with `--writes`; `hello`, which exits after its one answer,
//! read-only.

mod cases;
mod check;
mod desk;
mod examples;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use cases::{Case, Ctx, Shared, Uses};
use check::CaseResult;
use desk::{Desk, DeskSpec, Transport, private_dir};
use durable_cli::conformance::{Baseline, Generic, Kind, Outcome, Tally, generic_names, report, run_generic};

const USAGE: &str = "usage: xtask-collie conformance [--transport socket|tls|both] [--tier generic|desk|both] [--filter SUBSTR]
       xtask-collie conformance --examples [--filter SUBSTR]";

/// The repository's root.
fn project_root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().and_then(Path::parent).unwrap_or(manifest).to_path_buf()
}

/// How long one case may take, desks and restarts included.
const CASE_TIMEOUT: Duration = Duration::from_secs(90);

/// One transport's run: the desk binary, a folder for its desks, the tokens.
#[derive(Debug)]
pub(crate) struct Suite {
    pub(crate) transport: Transport,
    bin: PathBuf,
    root: PathBuf,
    pub(crate) token: String,
    pub(crate) token_next: String,
    next_dir: AtomicU32,
}

impl Suite {
    /// A fresh private folder `<root>/<t><n>` holding `data/` and `s/app.sock`.
    pub(crate) fn spec(&self, knobs: &[&str]) -> DeskSpec {
        let dir = self.dir();
        DeskSpec {
            bin: self.bin.clone(),
            transport: self.transport,
            data: dir.join("data"),
            socket: dir.join("s").join("app.sock"),
            knobs: knobs.iter().map(|k| (*k).to_owned()).collect(),
            token: self.token.clone(),
            token_next: self.token_next.clone(),
        }
    }

    fn dir(&self) -> PathBuf {
        let n = self.next_dir.fetch_add(1, Ordering::Relaxed);
        let dir = self.root.join(format!("{}{n}", &self.transport.name()[..1]));
        if let Err(why) = private_dir(&dir) {
            eprintln!("conformance: {why}");
        }
        dir
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Options {
    transports: Vec<Transport>,
    generic: bool,
    desk: bool,
    examples: bool,
    filter: Option<String>,
}

fn parse(args: &[String]) -> Result<Options, String> {
    let mut o = Options {
        transports: vec![Transport::Socket, Transport::Tls],
        generic: true,
        desk: true,
        examples: false,
        filter: None,
    };
    let mut it = args.iter();
    match it.next().map(String::as_str) {
        Some("conformance") => {}
        Some(other) => return Err(format!("unknown task {other:?}")),
        None => return Err("no task".into()),
    }
    while let Some(arg) = it.next() {
        let (name, inline) = match arg.split_once('=') {
            Some((n, v)) => (n, Some(v.to_owned())),
            None => (arg.as_str(), None),
        };
        let mut value =
            || inline.clone().or_else(|| it.next().cloned()).ok_or(format!("{name} needs a value"));
        match name {
            "--transport" => {
                o.transports = match value()?.as_str() {
                    "socket" => vec![Transport::Socket],
                    "tls" => vec![Transport::Tls],
                    "both" => vec![Transport::Socket, Transport::Tls],
                    other => return Err(format!("--transport {other}: socket, tls or both")),
                }
            }
            "--tier" => {
                (o.generic, o.desk) = match value()?.as_str() {
                    "generic" => (true, false),
                    "desk" => (false, true),
                    "both" => (true, true),
                    other => return Err(format!("--tier {other}: generic, desk or both")),
                }
            }
            "--filter" => o.filter = Some(value()?),
            "--examples" => o.examples = true,
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(o)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let options = match parse(&args) {
        Ok(options) => options,
        Err(why) => {
            eprintln!("xtask-collie: {why}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("xtask-collie: a tokio runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = if options.examples {
        runtime.block_on(examples::run(options.filter.clone()))
    } else {
        runtime.block_on(run(options))
    };
    match result {
        Ok(tally) => {
            println!("{tally}");
            if tally.failed == 0 { ExitCode::SUCCESS } else { ExitCode::FAILURE }
        }
        Err(why) => {
            eprintln!("conformance: {why}");
            ExitCode::FAILURE
        }
    }
}

fn kind_of(t: Transport) -> Kind {
    match t {
        Transport::Socket => Kind::Socket,
        Transport::Tls => Kind::Tls,
    }
}

/// The baseline of both tiers against the desk.
fn baseline_path() -> PathBuf {
    project_root().join("xtask/collie/conformance/expected-failures.txt")
}

async fn run(options: Options) -> CaseResult<Tally> {
    let started = Instant::now();
    let path = baseline_path();
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let baseline = Baseline::parse(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    let cases = cases::all();
    let bin = build_examples(&["desk"])?.remove(0);
    let built = started.elapsed();
    let started = Instant::now();
    let tmp = temp_root("desk");
    private_dir(&tmp)?;
    let (token, token_next) = (random_hex(32), random_hex(32));

    let suites: Vec<Arc<Suite>> = options
        .transports
        .iter()
        .map(|t| {
            Arc::new(Suite {
                transport: *t,
                bin: bin.clone(),
                root: tmp.clone(),
                token: token.clone(),
                token_next: token_next.clone(),
                next_dir: AtomicU32::new(0),
            })
        })
        .collect();
    let selected = |t: Transport| -> Vec<&Case> {
        cases
            .iter()
            .filter(|c| {
                c.runs_on(t) && options.filter.as_ref().is_none_or(|f| c.name(t).contains(f.as_str()))
            })
            .collect()
    };
    println!(
        "conformance: the generic tier{} over {} against {}",
        if options.desk { " and the desk's cases" } else { "" },
        suites.iter().map(|s| s.transport.name()).collect::<Vec<_>>().join(" and "),
        bin.display()
    );
    // The transports run side by side (each sequential inside); every line is printed as it comes.
    let one = |suite: Arc<Suite>| {
        let cases = if options.desk { selected(suite.transport) } else { Vec::new() };
        let (generic, baseline) = (options.generic, &baseline);
        let filter = options.filter.clone();
        async move {
            let mut tally = Tally::default();
            if generic {
                match run_generic(&desk_generic(&suite, filter), baseline).await {
                    Ok(t) => tally.merge(t),
                    Err(why) => {
                        println!("FAIL generic tier [{}]: {why}", suite.transport.name());
                        tally.failed += 1;
                    }
                }
            }
            for outcome in run_suite(suite, cases, baseline).await {
                tally.add(outcome);
            }
            tally
        }
    };
    let mut tally = Tally::default();
    match suites.as_slice() {
        [a] => tally.merge(one(a.clone()).await),
        [a, b] => {
            let (x, y) = tokio::join!(one(a.clone()), one(b.clone()));
            tally.merge(x);
            tally.merge(y);
        }
        _ => {}
    }
    let _ = std::fs::remove_dir_all(&tmp);
    tally.fail_stale(&baseline, &every_name(&cases));
    println!(
        "conformance: cases {:.1} s, desk build {:.1} s",
        started.elapsed().as_secs_f64(),
        built.as_secs_f64()
    );
    Ok(tally)
}

/// The generic tier against a desk of its own: the desk's command (for the
/// restarts), `--writes`, and the desk's receipts kept in its data folder.
fn desk_generic(suite: &Suite, filter: Option<String>) -> Generic {
    let dir = suite.dir();
    let data = dir.join("data");
    let bin = shell_quote(&suite.bin.display().to_string());
    let (socket, url, cmd) = match suite.transport {
        Transport::Socket => {
            let socket = dir.join("s").join("app.sock");
            let cmd = format!(
                "exec {bin} --socket {} --data {}",
                shell_quote(&socket.display().to_string()),
                shell_quote(&data.display().to_string())
            );
            (Some(socket), None, cmd)
        }
        Transport::Tls => {
            let port = free_port();
            let cmd = format!(
                "exec {bin} --listen 127.0.0.1:{port} --self-signed --data {}",
                shell_quote(&data.display().to_string())
            );
            (None, Some(format!("https://127.0.0.1:{port}")), cmd)
        }
    };
    Generic {
        socket,
        url,
        token: Some(suite.token.clone()),
        token_next: Some(suite.token_next.clone()),
        writes: true,
        agent_cmd: Some(cmd),
        agent_env: vec![
            ("COLLIE_TOKEN".into(), suite.token.clone()),
            ("COLLIE_TOKEN_NEXT".into(), suite.token_next.clone()),
        ],
        receipts_persist: true,
        filter,
        ..Generic::default()
    }
}

/// A port nothing listens on now (the agent's, across its restarts).
pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or(47_913)
}

/// `'text'` for `sh -c`.
pub(crate) fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', "'\\''"))
}

async fn run_suite(suite: Arc<Suite>, cases: Vec<&Case>, baseline: &Baseline) -> Vec<Outcome> {
    let t = suite.transport;
    let mut outcomes = Vec::new();
    let mut shared: Option<Desk> = None;
    let mut shared_error: Option<String> = None;
    for case in cases {
        let name = case.name(t);
        let result = match case.uses {
            Uses::Own => run_case(case, Ctx { suite: suite.clone(), shared: None }).await,
            Uses::Shared => {
                if let Some(status) = shared.as_mut().and_then(Desk::exited) {
                    let stderr = shared.as_ref().map(|d| d.stderr.tail(4)).unwrap_or_default();
                    println!(
                        "note: the shared {} desk exited ({status}); starting another. stderr: {stderr}",
                        t.name()
                    );
                    shared = None;
                }
                if shared.is_none() && shared_error.is_none() {
                    match Desk::start(suite.spec(&[])).await {
                        Ok(desk) => {
                            if t == Transport::Tls {
                                println!(
                                    "note: tls desk at {}: certificate pinned to {}",
                                    desk.address,
                                    if desk.pinned {
                                        "the SHA-256 fingerprint it printed"
                                    } else {
                                        "the first leaf seen (it printed no fingerprint)"
                                    }
                                );
                            }
                            shared = Some(desk);
                        }
                        Err(why) => shared_error = Some(why),
                    }
                }
                match (&mut shared, &shared_error) {
                    (Some(desk), _) => {
                        let _ = check::settle(&desk.client).await;
                        let view = Shared { client: desk.client.clone(), stderr: desk.stderr.clone() };
                        let result = run_case(case, Ctx { suite: suite.clone(), shared: Some(view) }).await;
                        match (result, desk.exited()) {
                            (Err(why), Some(status)) => Err(format!(
                                "{why} (the desk exited: {status}; stderr: {})",
                                desk.stderr.tail(3)
                            )),
                            (result, _) => result,
                        }
                    }
                    (None, Some(why)) => Err(format!("the shared {} desk did not start: {why}", t.name())),
                    (None, None) => Err("no shared desk".to_owned()),
                }
            }
        };
        outcomes.push(report(&name, result, baseline));
    }
    if let Some(desk) = shared {
        let _ = desk.kill().await;
    }
    outcomes
}

async fn run_case(case: &Case, cx: Ctx) -> CaseResult {
    match tokio::time::timeout(CASE_TIMEOUT, (case.run)(cx)).await {
        Ok(result) => result,
        Err(_) => Err(format!("the case took more than {} s", CASE_TIMEOUT.as_secs())),
    }
}

/// The name of every case of both tiers on every transport it runs on, as printed.
fn every_name(cases: &[Case]) -> Vec<String> {
    let desk = cases.iter().flat_map(|c| {
        [Transport::Socket, Transport::Tls].into_iter().filter(|t| c.runs_on(*t)).map(|t| c.name(t))
    });
    let generic = [Transport::Socket, Transport::Tls].into_iter().flat_map(|t| generic_names(kind_of(t)));
    desk.chain(generic).collect()
}

/// `cargo build --example <name> -p durable-examples` for each, into the
/// invoking cargo's target folder; the binaries' paths.
pub(crate) fn build_examples(names: &[&str]) -> CaseResult<Vec<PathBuf>> {
    let root = project_root();
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let target = match std::env::var_os("CARGO_TARGET_DIR").filter(|d| !d.is_empty()) {
        Some(dir) => {
            let dir = PathBuf::from(dir);
            if dir.is_absolute() {
                dir
            } else {
                std::env::current_dir().map_err(|e| e.to_string())?.join(dir)
            }
        }
        None => root.join("target"),
    };
    let mut args = vec!["build".to_owned(), "-p".to_owned(), "durable-examples".to_owned()];
    for name in names {
        args.push("--example".to_owned());
        args.push((*name).to_owned());
    }
    eprintln!("conformance: building the examples (cargo {})", args.join(" "));
    let status = std::process::Command::new(cargo)
        .args(&args)
        .current_dir(&root)
        .env("CARGO_TARGET_DIR", &target)
        .status()
        .map_err(|e| format!("running cargo: {e}"))?;
    if !status.success() {
        return Err(format!("building the examples failed ({status})"));
    }
    names
        .iter()
        .map(|name| {
            let bin = target.join("debug").join("examples").join(name);
            if bin.exists() {
                Ok(bin)
            } else {
                Err(format!("{name} built, but {} is not there", bin.display()))
            }
        })
        .collect()
}

/// A short private folder for this run's agents (socket paths stay far under 103 bytes).
pub(crate) fn temp_root(what: &str) -> PathBuf {
    let base = std::env::temp_dir();
    let base = if base.as_os_str().len() <= 40 { base } else { PathBuf::from("/tmp") };
    base.join(format!("durable-{what}-{}", std::process::id()))
}

/// `bytes` random bytes as lowercase hex (a token of `2 * bytes` characters).
pub(crate) fn random_hex(bytes: usize) -> String {
    let mut buf = vec![0u8; bytes];
    let read = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut buf));
    if read.is_err() {
        let seed = format!("{:?}{}{bytes}", std::time::SystemTime::now(), std::process::id());
        return check::sha256_hex(seed.as_bytes())[..2 * bytes.min(32)].to_owned();
    }
    buf.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn options_read_transport_tier_filter_and_examples() {
        let o = parse(&strings(&["conformance", "--transport", "tls", "--filter=ask_"])).unwrap();
        assert_eq!(o.transports, vec![Transport::Tls]);
        assert_eq!(o.filter.as_deref(), Some("ask_"));
        assert!(o.generic && o.desk && !o.examples);
        let o = parse(&strings(&["conformance", "--tier", "desk", "--examples"])).unwrap();
        assert!(!o.generic && o.desk && o.examples);
        assert_eq!(parse(&strings(&["conformance"])).unwrap().transports.len(), 2);
        assert!(parse(&strings(&["conformance", "--transport", "pigeon"])).is_err());
        assert!(parse(&strings(&["conformance", "--filter"])).is_err());
        assert!(parse(&strings(&["phone"])).is_err());
    }

    #[test]
    fn the_desks_command_is_quoted_for_sh() {
        assert_eq!(shell_quote("/a b/it's"), "'/a b/it'\\''s'");
    }

    /// The shipped baseline, empty or not: the file is there and parses,
    /// every line that is not a comment is an entry (none is dropped), no
    /// entry is stale against the real case names of both tiers — and that
    /// check is live even while the file lists nothing: the same text with
    /// a real case added is accepted, with a made-up one it is stale.
    #[test]
    fn the_shipped_baseline_parses_and_names_real_cases() {
        let text = std::fs::read_to_string(baseline_path()).expect("the baseline file is shipped");
        let baseline = Baseline::parse(&text).unwrap();
        let lines = text.lines().filter(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#')).count();
        assert_eq!(baseline.entries.len(), lines, "every non-comment line is an entry the run checks");

        let names = every_name(&cases::all());
        assert!(
            names.len() >= 164,
            "both tiers name at least the 164 checks of the old run: {}",
            names.len()
        );
        let unique: std::collections::BTreeSet<&String> = names.iter().collect();
        assert_eq!(unique.len(), names.len(), "each case name is printed once, across both tiers");
        assert!(names.iter().all(|n| n.ends_with(" [socket]") || n.ends_with(" [tls]")), "{names:?}");
        let stale = durable_cli::conformance::stale_entries(&baseline, &names);
        assert!(stale.is_empty(), "{stale:?}");

        let real = &names[0];
        let with_real = Baseline::parse(&format!("{text}\n{real}\tthe rule (§0) and what the desk did\n"))
            .expect("an entry in the documented format, after the shipped text, parses");
        assert!(durable_cli::conformance::stale_entries(&with_real, &names).is_empty());
        assert!(report(real, Err("why".into()), &with_real) == Outcome::ExpectedFail);
        let made_up = "no_such_rule [tls]".to_owned();
        let with_made_up = Baseline::parse(&format!("{text}\n{made_up}\tgone\n")).unwrap();
        assert_eq!(durable_cli::conformance::stale_entries(&with_made_up, &names), [&made_up]);
    }
}
