//! `cargo xtask fuzz`: the fuzz targets of `fuzz/` (cargo-fuzz, libFuzzer),
//! with the nightly toolchain. Installs cargo-fuzz into `<repo>/.tools/`
//! (ignored by git) when it is missing, builds the targets once, then runs
//! each in turn from its checked-in seeds (`fuzz/corpus/<target>/`) and a
//! working corpus of its own (`fuzz/target/corpus/<target>/`, kept between
//! runs on one machine), and prints what each run did: inputs, time,
//! executions per second, coverage gained, and any crash (its input is
//! saved under `fuzz/artifacts/<target>/`).
//!
//! - `cargo xtask fuzz --smoke`: every target for a few seconds (CI).
//! - `cargo xtask fuzz --runs 10000000 [TARGET…]`: the long run.
//! - `cargo xtask fuzz --time SECS [TARGET…]`: a run bounded in time.
//!
//! `docs/reliability.md` ("Fuzzing") says what each target asserts and
//! holds the long runs' figures.

use std::fs;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::Instant;

/// The cargo-fuzz the targets are run with.
const CARGO_FUZZ_VERSION: &str = "0.13.2";
/// How long `--smoke` runs each target, in seconds.
const SMOKE_SECS: u64 = 10;
/// The longest input, in bytes.
const MAX_LEN: u32 = 4096;
/// The longest one input may run, in seconds, before libFuzzer calls it a hang.
const INPUT_TIMEOUT_SECS: u32 = 10;

const USAGE: &str =
    "usage: cargo xtask fuzz (--smoke | --runs N | --time SECS) [--sanitizer address|none] [TARGET…]";

/// How long each target runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Bound {
    Runs(u64),
    Secs(u64),
}

#[derive(Debug, PartialEq, Eq)]
struct Args {
    bound: Bound,
    sanitizer: String,
    targets: Vec<String>,
}

fn parse_args(args: &[String]) -> Result<Args, String> {
    let mut bound = None;
    let mut sanitizer = "none".to_owned();
    let mut targets = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = |name: &str| it.next().cloned().ok_or_else(|| format!("{name} needs a value"));
        match a.as_str() {
            "--smoke" => bound = Some(Bound::Secs(SMOKE_SECS)),
            "--runs" => {
                let n = value("--runs")?.replace('_', "");
                bound = Some(Bound::Runs(n.parse().map_err(|_| format!("--runs {n}: not a number"))?));
            }
            "--time" => {
                let n = value("--time")?;
                bound = Some(Bound::Secs(n.parse().map_err(|_| format!("--time {n}: not a number"))?));
            }
            "--sanitizer" => sanitizer = value("--sanitizer")?,
            t if !t.starts_with('-') => targets.push(t.to_owned()),
            other => return Err(format!("unknown option {other}")),
        }
    }
    let bound = bound.ok_or("say how long: --smoke, --runs N or --time SECS")?;
    Ok(Args { bound, sanitizer, targets })
}

pub(crate) fn main(args: &[String]) -> ExitCode {
    let args = match parse_args(args) {
        Ok(a) => a,
        Err(why) => {
            eprintln!("fuzz: {why}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    match run(&args) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(why) => {
            eprintln!("fuzz: {why}");
            ExitCode::FAILURE
        }
    }
}

/// The targets: one file each in `fuzz/fuzz_targets/`.
fn all_targets(fuzz: &Path) -> Result<Vec<String>, String> {
    let dir = fuzz.join("fuzz_targets");
    let mut names: Vec<String> = fs::read_dir(&dir)
        .map_err(|e| format!("cannot read {}: {e}", dir.display()))?
        .flatten()
        .filter_map(|e| e.path().file_stem().map(|s| s.to_string_lossy().into_owned()))
        .collect();
    names.sort();
    Ok(names)
}

fn run(args: &Args) -> Result<bool, String> {
    let root = crate::project_root();
    let fuzz = root.join("fuzz");
    let known = all_targets(&fuzz)?;
    let targets = if args.targets.is_empty() { known.clone() } else { args.targets.clone() };
    if let Some(bad) = targets.iter().find(|t| !known.contains(t)) {
        return Err(format!("no target {bad} (known: {})", known.join(", ")));
    }
    check_nightly()?;
    let cargo_fuzz = install_cargo_fuzz(&root.join(".tools"))?;
    let flags = ["--sanitizer", args.sanitizer.as_str(), "--debug-assertions"];

    let started = Instant::now();
    println!(
        "fuzz: building {} ({}, debug assertions on)",
        targets.join(", "),
        sanitizer_label(&args.sanitizer)
    );
    let mut build = Command::new("cargo");
    build
        .args(["+nightly", "fuzz", "build"])
        .args(flags)
        .current_dir(&fuzz)
        .env("PATH", path_with(&cargo_fuzz));
    // Building one target alone would leave the others stale; build all named.
    if targets.len() == 1 {
        build.arg(&targets[0]);
    }
    let status = build.status().map_err(|e| format!("cannot run cargo +nightly fuzz build: {e}"))?;
    if !status.success() {
        return Err(format!("cargo +nightly fuzz build failed ({status})"));
    }
    println!("fuzz: built in {:.0} s", started.elapsed().as_secs_f64());

    let mut all_ok = true;
    let mut table = Vec::new();
    for target in &targets {
        let stats = run_target(&fuzz, &cargo_fuzz, &flags, target, args.bound)?;
        println!("{}", stats.line(target));
        all_ok &= stats.crash.is_none();
        table.push((target.clone(), stats));
    }
    println!("\n| target | inputs | time | exec/s | coverage (start → end) | new corpus entries | crash |");
    println!("|---|---|---|---|---|---|---|");
    for (target, s) in &table {
        println!(
            "| `{target}` | {} | {} | {} | {} → {} | {} | {} |",
            s.runs,
            duration(s.secs),
            s.exec_per_sec,
            s.cov_start,
            s.cov_end,
            s.new_units,
            s.crash.as_deref().unwrap_or("none")
        );
    }
    println!("\nfuzz: {} in {:.0} s", if all_ok { "ok" } else { "FAILED" }, started.elapsed().as_secs_f64());
    Ok(all_ok)
}

fn sanitizer_label(s: &str) -> String {
    if s == "none" { "no sanitizer".to_owned() } else { format!("{s} sanitizer") }
}

fn duration(secs: u64) -> String {
    if secs >= 60 { format!("{}m{:02}s", secs / 60, secs % 60) } else { format!("{secs}s") }
}

/// The nightly toolchain must be there (rustup's `+nightly`).
fn check_nightly() -> Result<(), String> {
    let out = Command::new("cargo")
        .args(["+nightly", "--version"])
        .output()
        .map_err(|e| format!("cannot run cargo +nightly: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err("the nightly toolchain is needed (rustup toolchain install nightly)".into())
    }
}

/// `PATH` with `.tools/bin` first, so that `cargo fuzz` finds our cargo-fuzz.
fn path_with(cargo_fuzz: &Path) -> std::ffi::OsString {
    let bin = cargo_fuzz.parent().unwrap_or(Path::new(".")).to_path_buf();
    let mut paths = vec![bin];
    if let Some(p) = std::env::var_os("PATH") {
        paths.extend(std::env::split_paths(&p));
    }
    std::env::join_paths(paths).unwrap_or_default()
}

/// `.tools/bin/cargo-fuzz` at the pinned version, installed from crates.io
/// when missing or of another version.
fn install_cargo_fuzz(tools: &Path) -> Result<PathBuf, String> {
    let bin = tools.join("bin").join(format!("cargo-fuzz{}", std::env::consts::EXE_SUFFIX));
    let version_ok = |bin: &Path| {
        Command::new(bin).arg("--version").output().ok().is_some_and(|o| {
            String::from_utf8_lossy(&o.stdout).trim() == format!("cargo-fuzz {CARGO_FUZZ_VERSION}")
        })
    };
    if version_ok(&bin) {
        return Ok(bin);
    }
    println!("fuzz: installing cargo-fuzz {CARGO_FUZZ_VERSION} into {}", tools.display());
    let started = Instant::now();
    let status = Command::new("cargo")
        .args(["install", "--locked", "--version", CARGO_FUZZ_VERSION, "--root"])
        .arg(tools)
        .arg("cargo-fuzz")
        .status()
        .map_err(|e| format!("cannot run cargo install: {e}"))?;
    if !status.success() || !version_ok(&bin) {
        return Err(format!("cargo install cargo-fuzz {CARGO_FUZZ_VERSION} failed ({status})"));
    }
    println!("fuzz: cargo-fuzz installed in {:.0} s", started.elapsed().as_secs_f64());
    Ok(bin)
}

/// What libFuzzer said of one run.
#[derive(Debug, Default, PartialEq, Eq)]
struct Stats {
    runs: u64,
    secs: u64,
    exec_per_sec: u64,
    cov_start: u64,
    cov_end: u64,
    new_units: u64,
    crash: Option<String>,
}

impl Stats {
    fn line(&self, target: &str) -> String {
        format!(
            "fuzz: {target}: {} inputs in {} ({} exec/s), coverage {} → {}, {} new corpus entries, {}",
            self.runs,
            duration(self.secs),
            self.exec_per_sec,
            self.cov_start,
            self.cov_end,
            self.new_units,
            match &self.crash {
                None => "no crash".to_owned(),
                Some(c) => format!("CRASH: {c}"),
            }
        )
    }

    /// Reads one line of libFuzzer's output.
    fn read(&mut self, line: &str) {
        let num_after = |key: &str| -> Option<u64> {
            let at = line.find(key)? + key.len();
            line[at..].trim_start().split(|c: char| !c.is_ascii_digit()).next()?.parse().ok()
        };
        // `#2\tINITED cov: …`: a tab, not a space, before the word.
        if line.split_whitespace().nth(1) == Some("INITED") {
            self.cov_start = num_after("cov:").unwrap_or(0);
        }
        if let Some(cov) = num_after("cov:") {
            self.cov_end = cov;
        }
        if let Some(n) = num_after("stat::number_of_executed_units:") {
            self.runs = n;
        }
        if let Some(n) = num_after("stat::average_exec_per_sec:") {
            self.exec_per_sec = n;
        }
        if let Some(n) = num_after("stat::new_units_added:") {
            self.new_units = n;
        }
        if let Some(rest) = line.strip_prefix("Done ") {
            // `Done 19276 runs in 31 second(s)`
            let words: Vec<&str> = rest.split_whitespace().collect();
            if let (Some(r), Some(s)) = (words.first(), words.get(3)) {
                self.runs = r.parse().unwrap_or(self.runs);
                self.secs = s.parse().unwrap_or(self.secs);
            }
        }
        if line.starts_with("==") && line.contains("ERROR: libFuzzer:") {
            self.crash = Some(line.split("ERROR: libFuzzer:").nth(1).unwrap_or("").trim().to_owned());
        }
        if line.starts_with("artifact_prefix=") || line.contains("Test unit written to") {
            let what = line.rsplit(' ').next().unwrap_or(line).to_owned();
            self.crash = Some(match self.crash.take() {
                Some(c) if !c.contains(&what) => format!("{c} ({what})"),
                Some(c) => c,
                None => what,
            });
        }
    }
}

fn run_target(
    fuzz: &Path,
    cargo_fuzz: &Path,
    flags: &[&str],
    target: &str,
    bound: Bound,
) -> Result<Stats, String> {
    let work = fuzz.join("target/corpus").join(target);
    let seeds = fuzz.join("corpus").join(target);
    fs::create_dir_all(&work).map_err(|e| format!("cannot create {}: {e}", work.display()))?;
    let logs = fuzz.join("target/logs");
    fs::create_dir_all(&logs).map_err(|e| format!("cannot create {}: {e}", logs.display()))?;
    let log_path = logs.join(format!("{target}.log"));
    let limit = match bound {
        Bound::Runs(n) => format!("-runs={n}"),
        Bound::Secs(s) => format!("-max_total_time={s}"),
    };
    println!("fuzz: {target}: running ({limit}), log in {}", log_path.display());
    let started = Instant::now();
    let mut child = Command::new("cargo")
        .args(["+nightly", "fuzz", "run"])
        .args(flags)
        .arg(target)
        .arg(&work)
        .arg(&seeds)
        .arg("--")
        .arg(limit)
        .arg(format!("-max_len={MAX_LEN}"))
        .arg(format!("-timeout={INPUT_TIMEOUT_SECS}"))
        .arg("-print_final_stats=1")
        // Edges only, not their hit counts: the targets run a lot of code
        // per input (hyper, tokio, the core), and libFuzzer's per-input
        // bookkeeping of counters cost a third of the `http` target's time.
        .arg("-use_counters=0")
        .current_dir(fuzz)
        .env("PATH", path_with(cargo_fuzz))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run cargo +nightly fuzz run: {e}"))?;
    let mut log =
        fs::File::create(&log_path).map_err(|e| format!("cannot write {}: {e}", log_path.display()))?;
    let mut stats = Stats::default();
    let mut tail: std::collections::VecDeque<String> = std::collections::VecDeque::new();
    if let Some(err) = child.stderr.take() {
        for line in BufReader::new(err).lines().map_while(Result::ok) {
            use std::io::Write as _;
            let _ = writeln!(log, "{line}");
            stats.read(&line);
            if line.starts_with("#") && line.contains("pulse") {
                println!("fuzz: {target}: {line}");
            }
            tail.push_back(line);
            if tail.len() > 40 {
                tail.pop_front();
            }
        }
    }
    let status = child.wait().map_err(|e| format!("waiting for the fuzzer: {e}"))?;
    if stats.secs == 0 {
        stats.secs = started.elapsed().as_secs();
    }
    if !status.success() && stats.crash.is_none() {
        stats.crash = Some(format!("the fuzzer exited with {status}"));
    }
    if stats.crash.is_some() {
        eprintln!("fuzz: {target}: the end of its log:");
        for line in tail {
            eprintln!("  {line}");
        }
    }
    Ok(stats)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn fuzz_args_name_the_bound_the_sanitizer_and_the_targets() {
        let a = parse_args(&strings(&["--smoke"])).unwrap();
        assert_eq!(a.bound, Bound::Secs(SMOKE_SECS));
        assert_eq!(a.sanitizer, "none");
        assert!(a.targets.is_empty());
        let a = parse_args(&strings(&["--runs", "10_000_000", "http", "--sanitizer", "address"])).unwrap();
        assert_eq!(
            a,
            Args { bound: Bound::Runs(10_000_000), sanitizer: "address".into(), targets: strings(&["http"]) }
        );
        assert!(parse_args(&strings(&["request"])).is_err(), "no bound");
        assert!(parse_args(&strings(&["--runs", "x"])).is_err());
        assert!(parse_args(&strings(&["--bogus", "--smoke"])).is_err());
    }

    #[test]
    fn fuzz_stats_are_read_from_libfuzzer_output() {
        let mut s = Stats::default();
        for line in [
            "#2\tINITED cov: 100 ft: 120 corp: 8/1200b exec/s: 0 rss: 40Mb",
            "#4096\tpulse  cov: 150 ft: 300 corp: 20/2kb lim: 29 exec/s: 2048 rss: 50Mb",
            "#10000\tDONE   cov: 180 ft: 400 corp: 30/3kb lim: 40 exec/s: 5000 rss: 60Mb",
            "Done 10000 runs in 2 second(s)",
            "stat::number_of_executed_units: 10000",
            "stat::average_exec_per_sec:     5000",
            "stat::new_units_added:          22",
        ] {
            s.read(line);
        }
        assert_eq!(
            s,
            Stats {
                runs: 10000,
                secs: 2,
                exec_per_sec: 5000,
                cov_start: 100,
                cov_end: 180,
                new_units: 22,
                crash: None
            }
        );
        s.read("==123== ERROR: libFuzzer: deadly signal");
        s.read("artifact_prefix='artifacts/request/'; Test unit written to artifacts/request/crash-abc");
        assert_eq!(s.crash.as_deref(), Some("deadly signal (artifacts/request/crash-abc)"));
    }
}
