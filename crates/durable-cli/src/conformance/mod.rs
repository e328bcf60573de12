//! `cargo xtask conformance`: a client playing Collie against the support desk.
//!
//! It builds the desk once, starts it as a child (a fresh data folder per run, and
//! per case that needs knobs or restarts), talks to it over the private Unix socket
//! and over HTTPS with a pinned self-signed certificate, and runs every case over
//! both transports. One line per case (`PASS name` / `FAIL name: why` /
//! `XFAIL name: reason`), then the closing line `N passed, M failed`, where M counts
//! the unexpected results only; the exit code is non-zero when M is.

mod baseline;
mod cases;
mod check;
mod client;
mod desk;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use baseline::Baseline;
use cases::{Case, Ctx, Shared, Uses};
use check::R;
use desk::{Desk, DeskSpec, Transport, private_dir};

/// The repository's root (the desk tier runs in this repository only).
fn project_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `durable conformance`'s command line.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Which transports to run over: socket, tls or both.
    #[arg(long, default_value = "both")]
    transport: String,
    /// Only the cases whose name holds this.
    #[arg(long, value_name = "SUBSTR")]
    filter: Option<String>,
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
        let n = self.next_dir.fetch_add(1, Ordering::Relaxed);
        let dir = self.root.join(format!("{}{n}", &self.transport.name()[..1]));
        if let Err(why) = private_dir(&dir) {
            eprintln!("conformance: {why}");
        }
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
}

struct Options {
    transports: Vec<Transport>,
    filter: Option<String>,
}

fn parse(args: &Args) -> Result<Options, String> {
    let transports = match args.transport.as_str() {
        "socket" => vec![Transport::Socket],
        "tls" => vec![Transport::Tls],
        "both" => vec![Transport::Socket, Transport::Tls],
        other => return Err(format!("--transport {other}: socket, tls or both")),
    };
    Ok(Options { transports, filter: args.filter.clone() })
}

pub(crate) fn main(args: Args) -> ExitCode {
    let options = match parse(&args) {
        Ok(options) => options,
        Err(why) => {
            eprintln!("conformance: {why} (durable conformance --help)");
            return ExitCode::from(2);
        }
    };
    let runtime =
        tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a tokio runtime");
    match runtime.block_on(run(options)) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(why) => {
            eprintln!("conformance: {why}");
            ExitCode::FAILURE
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Outcome {
    Pass,
    Fail,
    ExpectedFail,
}

async fn run(options: Options) -> R<bool> {
    let started = Instant::now();
    let root = project_root();
    let baseline_path = root.join("xtask/collie/conformance/expected-failures.txt");
    let baseline = match std::fs::read_to_string(&baseline_path) {
        Ok(text) => Baseline::parse(&text).map_err(|e| format!("{}: {e}", baseline_path.display()))?,
        Err(e) => return Err(format!("{}: {e}", baseline_path.display())),
    };
    let cases = cases::all();
    let every_name = every_name(&cases);
    let bin = build_desk(&root)?;
    let built = started.elapsed();
    let started = Instant::now();
    let tmp = temp_root();
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
    let count: usize = suites.iter().map(|s| selected(s.transport).len()).sum();
    println!(
        "conformance: {count} cases over {} against {}",
        suites.iter().map(|s| s.transport.name()).collect::<Vec<_>>().join(" and "),
        bin.display()
    );
    // The transports run side by side (each sequential inside); every line is printed as it comes.
    let outcomes: Vec<Outcome> = match suites.as_slice() {
        [one] => run_suite(one.clone(), selected(one.transport), &baseline).await,
        [a, b] => {
            let (x, y) = tokio::join!(
                run_suite(a.clone(), selected(a.transport), &baseline),
                run_suite(b.clone(), selected(b.transport), &baseline)
            );
            x.into_iter().chain(y).collect()
        }
        _ => Vec::new(),
    };
    let _ = std::fs::remove_dir_all(&tmp);

    let mut failed = outcomes.iter().filter(|o| **o == Outcome::Fail).count();
    for name in stale_entries(&baseline, &every_name) {
        println!("FAIL {name}: listed in expected-failures.txt but matches no case");
        failed += 1;
    }
    let passed = outcomes.iter().filter(|o| **o == Outcome::Pass).count();
    let xfail = outcomes.iter().filter(|o| **o == Outcome::ExpectedFail).count();
    println!(
        "conformance: {xfail} expected failure{} (XFAIL, counted in neither number below); cases {:.1} s, desk build {:.1} s",
        if xfail == 1 { "" } else { "s" },
        started.elapsed().as_secs_f64(),
        built.as_secs_f64()
    );
    println!("{passed} passed, {failed} failed");
    Ok(failed == 0)
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
                        let view = Shared {
                            client: desk.client.clone(),
                            stdout: desk.stdout.clone(),
                            stderr: desk.stderr.clone(),
                            socket: desk.spec.socket.clone(),
                        };
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

async fn run_case(case: &Case, cx: Ctx) -> R {
    match tokio::time::timeout(CASE_TIMEOUT, (case.run)(cx)).await {
        Ok(result) => result,
        Err(_) => Err(format!("the case took more than {} s", CASE_TIMEOUT.as_secs())),
    }
}

/// The name of every case on every transport it runs on, as printed.
fn every_name(cases: &[Case]) -> Vec<String> {
    cases
        .iter()
        .flat_map(|c| {
            [Transport::Socket, Transport::Tls].into_iter().filter(|t| c.runs_on(*t)).map(|t| c.name(t))
        })
        .collect()
}

/// Baseline entries that name no case of this run: each fails the run.
fn stale_entries<'a>(baseline: &'a Baseline, every_name: &[String]) -> Vec<&'a String> {
    baseline.entries.keys().filter(|n| !every_name.contains(n)).collect()
}

fn report(name: &str, result: R, baseline: &Baseline) -> Outcome {
    let one_line = |s: &str| s.replace('\n', " ");
    match (result, baseline.reason(name)) {
        (Ok(()), None) => {
            println!("PASS {name}");
            Outcome::Pass
        }
        (Ok(()), Some(_)) => {
            println!("FAIL {name}: listed as expected failure but passed");
            Outcome::Fail
        }
        (Err(why), None) => {
            println!("FAIL {name}: {}", one_line(&why));
            Outcome::Fail
        }
        (Err(why), Some(reason)) => {
            println!("XFAIL {name}: {reason} (this run: {})", one_line(&why));
            Outcome::ExpectedFail
        }
    }
}

/// `cargo build --example desk -p durable-examples` into the invoking cargo's target folder.
fn build_desk(root: &Path) -> R<PathBuf> {
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
    eprintln!("conformance: building the desk (cargo build --example desk -p durable-examples)");
    let status = std::process::Command::new(cargo)
        .args(["build", "--example", "desk", "-p", "durable-examples"])
        .current_dir(root)
        .env("CARGO_TARGET_DIR", &target)
        .status()
        .map_err(|e| format!("running cargo: {e}"))?;
    if !status.success() {
        return Err(format!("building the desk failed ({status})"));
    }
    let bin = target.join("debug").join("examples").join("desk");
    if !bin.exists() {
        return Err(format!("the desk built, but {} is not there", bin.display()));
    }
    Ok(bin)
}

/// A short private folder for this run's desks (socket paths stay far under 103 bytes).
fn temp_root() -> PathBuf {
    let base = std::env::temp_dir();
    let base = if base.as_os_str().len() <= 40 { base } else { PathBuf::from("/tmp") };
    base.join(format!("durable-xtask-{}", std::process::id()))
}

/// `bytes` random bytes as lowercase hex (a token of `2 * bytes` characters).
fn random_hex(bytes: usize) -> String {
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

    #[test]
    fn options_read_transport_and_filter() {
        let args = |a: &[&str]| {
            use clap::Parser;
            #[derive(Parser)]
            struct Cli {
                #[command(flatten)]
                conformance: Args,
            }
            Cli::parse_from(std::iter::once("conformance").chain(a.iter().copied())).conformance
        };
        let o = parse(&args(&["--transport", "tls", "--filter=ask_"])).unwrap();
        assert_eq!(o.transports, vec![Transport::Tls]);
        assert_eq!(o.filter.as_deref(), Some("ask_"));
        assert_eq!(parse(&args(&[])).unwrap().transports.len(), 2);
        assert!(parse(&args(&["--transport", "pigeon"])).is_err());
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
    }

    /// The shipped baseline, empty or not: the file is there and parses,
    /// every line that is not a comment is an entry (none is dropped), no
    /// entry is stale against the real case names — and that check is live
    /// even while the file lists nothing: the same text with a real case
    /// added is accepted, with a made-up one it is stale.
    #[test]
    fn the_shipped_baseline_parses_and_names_real_cases() {
        let path = project_root().join("xtask/collie/conformance/expected-failures.txt");
        let text = std::fs::read_to_string(&path).expect("the baseline file is shipped");
        let baseline = Baseline::parse(&text).unwrap();
        let lines = text.lines().filter(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#')).count();
        assert_eq!(baseline.entries.len(), lines, "every non-comment line is an entry the run checks");

        let names = every_name(&cases::all());
        assert!(names.len() >= 2, "the cases the runner knows: {names:?}");
        let unique: std::collections::BTreeSet<&String> = names.iter().collect();
        assert_eq!(unique.len(), names.len(), "each case name is printed once");
        assert!(names.iter().all(|n| n.ends_with(" [socket]") || n.ends_with(" [tls]")), "{names:?}");
        assert!(stale_entries(&baseline, &names).is_empty(), "{:?}", stale_entries(&baseline, &names));

        let real = &names[0];
        let with_real = Baseline::parse(&format!("{text}\n{real}\tthe rule (§0) and what the desk did\n"))
            .expect("an entry in the documented format, after the shipped text, parses");
        assert!(with_real.entries.contains_key(real.as_str()));
        assert!(stale_entries(&with_real, &names).is_empty(), "a real case is not stale");
        assert!(report(real, Err("why".into()), &with_real) == Outcome::ExpectedFail);
        let made_up = "no_such_rule [tls]".to_owned();
        let with_made_up = Baseline::parse(&format!("{text}\n{made_up}\tgone\n")).unwrap();
        assert_eq!(stale_entries(&with_made_up, &names), [&made_up], "a made-up name is stale");
    }
}
