//! `cargo xtask soak`: Collie's polling, many times over, against the desk
//! for a minute — no error, flat memory after warm-up (`docs/reliability.md`,
//! "Soak").
//!
//! Two desks (the release `desk` example): one on the private socket, one over
//! HTTPS (`--self-signed`, the token in `COLLIE_TOKEN`), each with its
//! connection cap raised above its pollers (`--max-connections`). Each poller
//! is one keep-alive connection polling `GET /v1/state` every 2 s with
//! `If-None-Match`, as Collie does; one in 50 polls the full state instead and
//! one in 50 asks for `?since=` deltas. A writer per desk sends a message to
//! `ticket-1` every 3 s, so the state changes and the pollers get `200`s as
//! well as `304`s. The desks' resident memory is read every second.
//!
//! It fails (exit 1) when any request failed — a connection refused or
//! closed, a status other than the one expected, a `200` without an `ETag` —
//! or when a desk's memory at the end is more than 10 % above its memory
//! after the warm-up. `cargo xtask flood` ([`flood`]) is its companion: memory
//! after a flood of connections and large bodies.

mod flood;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::BodyExt;
use tokio::time::MissedTickBehavior;

use xtask_bench::load::{self, Call, Sender, Target};

pub(crate) use flood::main as flood_main;

const TOKEN: &str = "soak-token-0123456789abcdef0123456789abcdef";
/// Collie's poll period.
const POLL_EVERY: Duration = Duration::from_secs(2);
/// The writer's period.
const WRITE_EVERY: Duration = Duration::from_secs(3);
/// One poller in this many polls the full state, one more asks for deltas.
const ODD_ONE_IN: usize = 50;
/// Memory at the end may exceed memory after the warm-up by this much.
const MAX_GROWTH_PCT: f64 = 10.0;
/// Places in a desk's cap above its pollers (the writer, a probe, slack).
const CAP_ROOM: usize = 64;

const USAGE: &str = "usage: cargo xtask soak [--seconds N] [--socket-pollers N] [--https-pollers N]";

#[derive(Debug, PartialEq)]
struct Options {
    seconds: u64,
    socket_pollers: usize,
    https_pollers: usize,
}

fn parse(args: &[String]) -> Result<Options, String> {
    let mut o = Options { seconds: 60, socket_pollers: 1000, https_pollers: 200 };
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let value = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let number =
            |v: &str| v.parse::<u64>().map_err(|_| format!("{flag} takes a whole number, not {v:?}"));
        match flag.as_str() {
            "--seconds" => o.seconds = number(value)?,
            "--socket-pollers" => o.socket_pollers = number(value)? as usize,
            "--https-pollers" => o.https_pollers = number(value)? as usize,
            other => return Err(format!("unknown argument {other:?}\n{USAGE}")),
        }
    }
    if o.seconds < 4 {
        return Err("--seconds is at least 4 (a warm-up, then polls)".into());
    }
    if o.socket_pollers + o.https_pollers == 0 {
        return Err("no pollers: give --socket-pollers or --https-pollers a number above 0".into());
    }
    Ok(o)
}

/// The warm-up: 10 s, or half of a shorter run.
fn warmup_for(seconds: u64) -> Duration {
    Duration::from_secs(seconds).min(Duration::from_secs(20)) / 2
}

pub(crate) fn main(args: &[String]) -> ExitCode {
    if cfg!(debug_assertions) {
        return rerun_release("soak", args);
    }
    let options = match parse(args) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("soak: {e}");
            return ExitCode::from(2);
        }
    };
    let result = raise_fd_limit(2 * (options.socket_pollers + options.https_pollers + CAP_ROOM) + 256)
        .and_then(|()| desk_binary(None))
        .and_then(|bin| {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build();
            rt.map_err(|e| e.to_string())?.block_on(run(&options, &bin))
        });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("soak: FAILED: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Which of Collie's polls a poller makes.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Poll {
    /// `GET /v1/state` with `If-None-Match` (`304` until something changes).
    Tagged,
    /// `GET /v1/state` without a tag: the full state each time.
    Full,
    /// `GET /v1/state?since=<seq>` with `If-None-Match`.
    Delta,
}

impl Poll {
    fn of(i: usize) -> Poll {
        match i % ODD_ONE_IN {
            1 => Poll::Full,
            2 => Poll::Delta,
            _ => Poll::Tagged,
        }
    }

    /// The request, given the last `ETag` seen.
    fn call(self, tag: Option<&str>) -> Call {
        match self {
            Poll::Full => Call::get("/v1/state"),
            Poll::Tagged => Call { if_none_match: tag.map(str::to_owned), ..Call::get("/v1/state") },
            Poll::Delta => Call {
                if_none_match: tag.map(str::to_owned),
                ..Call::get(format!("/v1/state?since={}", tag.and_then(seq_of_tag).unwrap_or(0)))
            },
        }
    }

    fn expects(self, status: u16) -> bool {
        status == 200 || (status == 304 && self != Poll::Full)
    }
}

/// The change sequence in a state `ETag`, `"<epoch>-<seq>"` (`docs/wire.md` §5).
fn seq_of_tag(tag: &str) -> Option<u64> {
    tag.trim_matches('"').rsplit_once('-')?.1.parse().ok()
}

/// What one task (a poller, a writer) saw.
#[derive(Default, Debug)]
struct Stats {
    polls: u64,
    not_modified: u64,
    writes: u64,
    /// Poll latencies, µs.
    latencies: Vec<u32>,
    errors: BTreeMap<String, u64>,
}

impl Stats {
    fn error(&mut self, kind: impl Into<String>) {
        *self.errors.entry(kind.into()).or_default() += 1;
    }

    fn merge(&mut self, other: Stats) {
        self.polls += other.polls;
        self.not_modified += other.not_modified;
        self.writes += other.writes;
        self.latencies.extend(other.latencies);
        for (kind, n) in other.errors {
            *self.errors.entry(kind).or_default() += n;
        }
    }

    fn error_count(&self) -> u64 {
        self.errors.values().sum()
    }
}

/// The `p` quantile (0..=1) of sorted values.
fn quantile(sorted: &[u32], p: f64) -> u32 {
    sorted.get(((sorted.len() as f64 - 1.0) * p).round() as usize).copied().unwrap_or(0)
}

/// One request on a kept-alive connection (opened first if there is none):
/// its status, `ETag` and body, or the kind of error. A failed connection is
/// dropped, to be opened again by the next request.
async fn exchange(
    target: &Target,
    sender: &mut Option<Sender>,
    call: &Call,
) -> Result<(u16, Option<String>, Bytes), String> {
    let s = connected(target, sender).await?;
    let result = async {
        let resp = s.send_request(load::request(target, call)).await.map_err(|e| format!("send: {e}"))?;
        let status = resp.status().as_u16();
        let tag = resp.headers().get("etag").and_then(|v| v.to_str().ok()).map(str::to_owned);
        let body = resp.into_body().collect().await.map_err(|e| format!("body: {e}"))?.to_bytes();
        Ok((status, tag, body))
    }
    .await;
    if result.is_err() {
        *sender = None;
    }
    result
}

/// The kept-alive connection, opened first if there is none.
async fn connected<'a>(target: &Target, sender: &'a mut Option<Sender>) -> Result<&'a mut Sender, String> {
    if sender.is_none() {
        *sender = Some(load::connect(target).await.map_err(|e| format!("connect: {e}"))?);
    }
    Ok(sender.as_mut().expect("just connected"))
}

/// The run's clock: every task stops at `end`.
#[derive(Clone, Copy)]
struct Clock {
    start: Instant,
    end: Instant,
}

impl Clock {
    fn every(&self, first: Duration, period: Duration) -> tokio::time::Interval {
        let mut tick = tokio::time::interval_at((self.start + first).into(), period);
        tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
        tick
    }
}

async fn poller(target: Target, poll: Poll, phase: Duration, clock: Clock) -> Stats {
    let mut stats = Stats::default();
    let mut sender = None;
    let mut tag: Option<String> = None;
    let mut tick = clock.every(phase, POLL_EVERY);
    while tick.tick().await.into_std() < clock.end {
        // The latency is the request's: a connection (a TLS handshake) is opened first.
        if let Err(kind) = connected(&target, &mut sender).await {
            stats.error(kind);
            continue;
        }
        let started = Instant::now();
        match exchange(&target, &mut sender, &poll.call(tag.as_deref())).await {
            Ok((status, new_tag, _)) => {
                stats.polls += 1;
                stats.latencies.push(started.elapsed().as_micros().min(u128::from(u32::MAX)) as u32);
                if !poll.expects(status) {
                    stats.error(format!("{poll:?} poll answered {status}"));
                } else if new_tag.is_none() {
                    stats.error(format!("{poll:?} poll answered {status} without an ETag"));
                } else {
                    stats.not_modified += u64::from(status == 304);
                    tag = new_tag;
                }
            }
            Err(kind) => stats.error(kind),
        }
    }
    stats
}

/// A message to `ticket-1` every [`WRITE_EVERY`]; each must be `200`.
async fn writer(target: Target, clock: Clock) -> Stats {
    let mut stats = Stats::default();
    let mut sender = None;
    let mut tick = clock.every(Duration::from_millis(500), WRITE_EVERY);
    let mut n = 0u64;
    while tick.tick().await.into_std() < clock.end {
        n += 1;
        let body = serde_json::json!({"requestId": format!("soak-{n}"), "text": format!("soak message {n}")});
        let call = Call {
            method: hyper::Method::POST,
            body: Some(Bytes::from(body.to_string())),
            ..Call::get("/v1/panes/ticket-1/send")
        };
        match exchange(&target, &mut sender, &call).await {
            Ok((200, ..)) => stats.writes += 1,
            Ok((status, _, body)) => {
                stats.error(format!("send answered {status}: {}", String::from_utf8_lossy(&body)))
            }
            Err(kind) => stats.error(format!("writer {kind}")),
        }
    }
    stats
}

/// A desk's memory over the run, from its samples.
#[derive(Debug, PartialEq)]
struct Memory {
    /// At the first sample at or after the warm-up.
    warm_kib: u64,
    /// At the last sample.
    end_kib: u64,
    /// The most after the warm-up.
    max_kib: u64,
    /// `end` over `warm`, in %.
    growth_pct: f64,
    /// `max` over `warm`, in %.
    max_growth_pct: f64,
}

/// `None` when no sample was taken at or after the warm-up.
fn memory(samples: &[(Duration, u64)], warmup: Duration) -> Option<Memory> {
    let after = &samples[samples.iter().position(|(t, _)| *t >= warmup)?..];
    let warm_kib = after[0].1;
    let end_kib = after.last()?.1;
    let max_kib = after.iter().map(|s| s.1).max()?;
    let pct = |kib: u64| (kib as f64 / warm_kib.max(1) as f64 - 1.0) * 100.0;
    Some(Memory { warm_kib, end_kib, max_kib, growth_pct: pct(end_kib), max_growth_pct: pct(max_kib) })
}

/// Why the run failed, if it did: `(transport, errors, memory)` per desk.
fn verdict(desks: &[(&str, u64, Option<&Memory>)]) -> Result<(), String> {
    let mut why = Vec::new();
    for (name, errors, memory) in desks {
        if *errors > 0 {
            why.push(format!("{name}: {errors} requests failed"));
        }
        match memory {
            None => why.push(format!("{name}: no memory sample after the warm-up")),
            Some(m) if m.growth_pct > MAX_GROWTH_PCT => why.push(format!(
                "{name}: memory grew {:.1} % after the warm-up (at most {MAX_GROWTH_PCT} %)",
                m.growth_pct
            )),
            Some(_) => {}
        }
    }
    if why.is_empty() { Ok(()) } else { Err(why.join("; ")) }
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

async fn run(o: &Options, bin: &Path) -> Result<(), String> {
    let dir = temp_root("soak")?;
    let warmup = warmup_for(o.seconds);
    let mut desks = Vec::new();
    for (transport, pollers) in [(Transport::Socket, o.socket_pollers), (Transport::Https, o.https_pollers)] {
        if pollers > 0 {
            let extra = ["--turn-ms", "300"];
            desks.push((Desk::start(bin, &dir, transport, pollers + CAP_ROOM, &extra)?, pollers));
        }
    }
    println!(
        "soak: {} cores; {} s, warm-up {} s; a poll every {} s per poller (1 in {ODD_ONE_IN} full, 1 in {ODD_ONE_IN} `?since=`, the rest `If-None-Match`), a send every {} s",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        o.seconds,
        warmup.as_secs(),
        POLL_EVERY.as_secs(),
        WRITE_EVERY.as_secs()
    );
    let start = Instant::now();
    let clock = Clock { start, end: start + Duration::from_secs(o.seconds) };
    let mut tasks = Vec::new();
    for (desk, pollers) in &desks {
        let mut set = Vec::new();
        for i in 0..*pollers {
            // Spread over the period, as many Collies would be.
            let phase = POLL_EVERY.mul_f64(i as f64 / *pollers as f64);
            set.push(tokio::spawn(poller(desk.target.clone(), Poll::of(i), phase, clock)));
        }
        set.push(tokio::spawn(writer(desk.target.clone(), clock)));
        tasks.push(set);
    }
    let mut samples: Vec<Vec<(Duration, u64)>> = vec![Vec::new(); desks.len()];
    let mut tick = clock.every(Duration::ZERO, Duration::from_secs(1));
    while tick.tick().await.into_std() <= clock.end {
        for ((desk, _), samples) in desks.iter_mut().zip(&mut samples) {
            desk.alive()?;
            samples.push((start.elapsed(), load::rss_kib(desk.pid)?));
        }
    }
    println!(
        "{:<9} {:>7} {:>8} {:>6} {:>6} {:>6} {:>7} {:>7} {:>9} {:>8} {:>8} {:>7} {:>7}",
        "transport",
        "pollers",
        "polls",
        "304",
        "writes",
        "errors",
        "p50 ms",
        "p99 ms",
        "RSS warm",
        "end",
        "max MiB",
        "growth",
        "max"
    );
    let mut outcome = Vec::new();
    for (((desk, pollers), set), samples) in desks.iter().zip(tasks).zip(&samples) {
        let mut stats = Stats::default();
        for task in set {
            stats.merge(task.await.map_err(|e| e.to_string())?);
        }
        stats.latencies.sort_unstable();
        let m = memory(samples, warmup);
        let (warm, end, max, growth, max_growth) =
            m.as_ref().map_or((0.0, 0.0, 0.0, f64::NAN, f64::NAN), |m| {
                (mib(m.warm_kib), mib(m.end_kib), mib(m.max_kib), m.growth_pct, m.max_growth_pct)
            });
        println!(
            "{:<9} {:>7} {:>8} {:>6} {:>6} {:>6} {:>7.2} {:>7.2} {:>9.1} {:>8.1} {:>8.1} {:>+6.1}% {:>+6.1}%",
            desk.transport.name(),
            pollers,
            stats.polls,
            stats.not_modified,
            stats.writes,
            stats.error_count(),
            f64::from(quantile(&stats.latencies, 0.5)) / 1000.0,
            f64::from(quantile(&stats.latencies, 0.99)) / 1000.0,
            warm,
            end,
            max,
            growth,
            max_growth
        );
        for (kind, n) in &stats.errors {
            println!("  {} error: {n} × {kind}", desk.transport.name());
        }
        let line: Vec<String> =
            samples.iter().step_by(10).map(|(_, kib)| format!("{:.1}", mib(*kib))).collect();
        println!("  {} RSS every 10 s (MiB): {}", desk.transport.name(), line.join(" "));
        outcome.push((desk.transport.name(), stats.error_count(), m));
    }
    drop(desks);
    let _ = std::fs::remove_dir_all(&dir);
    let verdicts: Vec<(&str, u64, Option<&Memory>)> =
        outcome.iter().map(|(name, errors, m)| (*name, *errors, m.as_ref())).collect();
    verdict(&verdicts)?;
    println!("soak: ok: no error, memory within {MAX_GROWTH_PCT} % of its warm-up figure");
    Ok(())
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Transport {
    Socket,
    Https,
}

impl Transport {
    fn name(self) -> &'static str {
        match self {
            Transport::Socket => "socket",
            Transport::Https => "https",
        }
    }
}

/// A desk process, killed when dropped.
struct Desk {
    child: Child,
    transport: Transport,
    target: Target,
    pid: u32,
}

impl Drop for Desk {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Desk {
    /// Starts the desk on a fresh data folder under `dir` with this cap on
    /// connections, and waits for its `listening` line. Its stderr goes to
    /// `<dir>/<transport>/stderr`.
    fn start(
        bin: &Path,
        dir: &Path,
        transport: Transport,
        cap: usize,
        extra: &[&str],
    ) -> Result<Desk, String> {
        let home = dir.join(transport.name());
        private_dir(&home)?;
        let stderr = std::fs::File::create(home.join("stderr")).map_err(|e| e.to_string())?;
        let mut cmd = Command::new(bin);
        match transport {
            Transport::Socket => cmd.arg("--socket").arg(home.join("app.sock")),
            Transport::Https => cmd.args(["--listen", "127.0.0.1:0", "--self-signed"]),
        };
        cmd.arg("--data")
            .arg(home.join("data"))
            .args(["--max-connections", &cap.to_string()])
            .args(extra)
            .env("COLLIE_TOKEN", TOKEN)
            .env_remove("COLLIE_TOKEN_NEXT")
            .env_remove("COLLIE_DURABLE_SOCKET")
            .env_remove("DESK_RECEIPTS_URL")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(stderr);
        let mut child = cmd.spawn().map_err(|e| format!("starting {}: {e}", bin.display()))?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let pid = child.id();
        let mut desk = Desk { child, transport, target: Target::Unix(PathBuf::new()), pid };
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut lines = BufReader::new(stdout).lines();
            let _ = tx.send(lines.next().and_then(Result::ok));
            for _ in lines {} // keep the pipe drained
        });
        let line = rx.recv_timeout(Duration::from_secs(30)).ok().flatten().ok_or_else(|| {
            let err = std::fs::read_to_string(home.join("stderr")).unwrap_or_default();
            format!("the {} desk did not start: {}", transport.name(), err.trim())
        })?;
        let address =
            line.strip_prefix("listening ").ok_or_else(|| format!("not a listening line: {line}"))?;
        desk.target = Target::from_address(address.trim(), TOKEN);
        Ok(desk)
    }

    /// An error when the desk has exited.
    fn alive(&mut self) -> Result<(), String> {
        match self.child.try_wait() {
            Ok(None) => Ok(()),
            Ok(Some(status)) => Err(format!("the {} desk exited: {status}", self.transport.name())),
            Err(e) => Err(e.to_string()),
        }
    }
}

/// A fresh folder for this run's desks (short: socket paths stay far under
/// 103 bytes).
fn temp_root(task: &str) -> Result<PathBuf, String> {
    let dir = PathBuf::from("/tmp").join(format!("durable-{task}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    private_dir(&dir)?;
    Ok(dir)
}

/// A folder of mode 0700 (the desk wants its socket's folder private).
fn private_dir(path: &Path) -> Result<(), String> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(path)
        .map_err(|e| format!("creating {}: {e}", path.display()))
}

/// Raises this process's soft limit on open files to `needed` (the desks it
/// starts inherit it), up to the hard limit; too low a hard limit is an
/// error that says so.
fn raise_fd_limit(needed: usize) -> Result<(), String> {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let limit = getrlimit(Resource::Nofile);
    let needed = needed as u64;
    if limit.current.is_none_or(|c| c >= needed) {
        return Ok(());
    }
    if limit.maximum.is_some_and(|m| m < needed) {
        return Err(format!(
            "{needed} open files are needed, the hard limit is {} (raise it: `ulimit -Hn {needed}` as root)",
            limit.maximum.unwrap_or(0)
        ));
    }
    setrlimit(Resource::Nofile, Rlimit { current: Some(needed), maximum: limit.maximum })
        .map_err(|e| format!("raising the open-file limit to {needed}: {e}"))
}

/// The release desk beside this release xtask-bench (`target/release/examples/desk`),
/// or the one given.
fn desk_binary(given: Option<&Path>) -> Result<PathBuf, String> {
    let bin = match given {
        Some(path) => path.to_path_buf(),
        None => {
            let exe = std::env::current_exe().map_err(|e| e.to_string())?;
            exe.parent().ok_or("no folder for xtask-bench")?.join("examples").join("desk")
        }
    };
    if !bin.exists() {
        return Err(format!(
            "no desk at {} (`cargo build --release --example desk -p durable-examples` builds it)",
            bin.display()
        ));
    }
    Ok(bin)
}

/// Figures of an unoptimized build say nothing: builds xtask-bench and the desk in
/// release mode (once; cargo keeps them), then runs `task` from that build.
fn rerun_release(task: &str, args: &[String]) -> ExitCode {
    let root = xtask_bench::project_root();
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let build = [
        "build",
        "--release",
        "-p",
        "xtask-bench",
        "-p",
        "durable-examples",
        "--bin",
        "xtask-bench",
        "--example",
        "desk",
    ];
    eprintln!("{task}: building xtask-bench and the desk in release mode (cargo {})", build.join(" "));
    if !Command::new(&cargo).args(build).current_dir(&root).status().is_ok_and(|s| s.success()) {
        eprintln!("{task}: the release build failed");
        return ExitCode::FAILURE;
    }
    let target = std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root.join("target"), PathBuf::from);
    let exe = target.join("release").join("xtask-bench");
    match Command::new(&exe).arg(task).args(args).status() {
        Ok(s) if s.success() => ExitCode::SUCCESS,
        Ok(s) => ExitCode::from(s.code().and_then(|c| u8::try_from(c).ok()).unwrap_or(1)),
        Err(e) => {
            eprintln!("{task}: cannot run {}: {e}", exe.display());
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn flags_have_the_issue_defaults_and_take_numbers() {
        assert_eq!(parse(&[]).unwrap(), Options { seconds: 60, socket_pollers: 1000, https_pollers: 200 });
        let o =
            parse(&args(&["--seconds", "10", "--socket-pollers", "200", "--https-pollers", "0"])).unwrap();
        assert_eq!(o, Options { seconds: 10, socket_pollers: 200, https_pollers: 0 });
        assert!(parse(&args(&["--seconds"])).is_err());
        assert!(parse(&args(&["--seconds", "soon"])).is_err());
        assert!(parse(&args(&["--seconds", "2"])).is_err(), "too short to warm up");
        assert!(parse(&args(&["--socket-pollers", "0", "--https-pollers", "0"])).is_err());
        assert!(parse(&args(&["--pollers", "3"])).unwrap_err().contains("unknown argument"));
    }

    #[test]
    fn the_warm_up_is_ten_seconds_or_half_a_short_run() {
        assert_eq!(warmup_for(60), Duration::from_secs(10));
        assert_eq!(warmup_for(20), Duration::from_secs(10));
        assert_eq!(warmup_for(10), Duration::from_secs(5));
    }

    fn samples(kib: &[u64]) -> Vec<(Duration, u64)> {
        kib.iter().enumerate().map(|(i, k)| (Duration::from_secs(i as u64), *k)).collect()
    }

    #[test]
    fn growth_is_the_end_over_the_first_sample_after_the_warm_up() {
        // The ramp before the warm-up does not count; the peak after it is reported.
        let m =
            memory(&samples(&[1000, 5000, 10_000, 10_500, 12_000, 10_900]), Duration::from_secs(2)).unwrap();
        assert_eq!((m.warm_kib, m.end_kib, m.max_kib), (10_000, 10_900, 12_000));
        assert!((m.growth_pct - 9.0).abs() < 1e-9, "{}", m.growth_pct);
        assert!((m.max_growth_pct - 20.0).abs() < 1e-9);
        assert!(verdict(&[("socket", 0, Some(&m))]).is_ok());
        let shrank = memory(&samples(&[8000, 8000, 7000]), Duration::from_secs(1)).unwrap();
        assert!(shrank.growth_pct < 0.0);
        assert_eq!(memory(&samples(&[1000, 2000]), Duration::from_secs(5)), None);
    }

    #[test]
    fn errors_or_growth_past_ten_percent_fail_the_run() {
        let grew = memory(&samples(&[10_000, 11_001]), Duration::ZERO).unwrap();
        let flat = memory(&samples(&[10_000, 10_000]), Duration::ZERO).unwrap();
        let e = verdict(&[("socket", 0, Some(&grew)), ("https", 0, Some(&flat))]).unwrap_err();
        assert!(e.contains("socket: memory grew 10.0 %"), "{e}");
        let e = verdict(&[("socket", 0, Some(&flat)), ("https", 3, Some(&flat))]).unwrap_err();
        assert_eq!(e, "https: 3 requests failed");
        assert!(verdict(&[("https", 0, None)]).unwrap_err().contains("no memory sample"));
    }

    #[test]
    fn polls_are_mostly_tagged_with_a_few_full_and_delta_ones() {
        let kinds: Vec<Poll> = (0..100).map(Poll::of).collect();
        assert_eq!(kinds.iter().filter(|k| **k == Poll::Full).count(), 2);
        assert_eq!(kinds.iter().filter(|k| **k == Poll::Delta).count(), 2);
        let tag = "\"9f2c4e1a07b3d865-42\"";
        assert_eq!(seq_of_tag(tag), Some(42));
        assert_eq!(seq_of_tag("\"nonsense\""), None);
        let delta = Poll::Delta.call(Some(tag));
        assert_eq!((delta.path.as_str(), delta.if_none_match.as_deref()), ("/v1/state?since=42", Some(tag)));
        assert_eq!(Poll::Delta.call(None).path, "/v1/state?since=0");
        assert_eq!(Poll::Full.call(Some(tag)).if_none_match, None);
        assert!(Poll::Tagged.expects(304) && Poll::Delta.expects(200) && !Poll::Full.expects(304));
        assert!(!Poll::Tagged.expects(503));
    }

    #[test]
    fn quantiles_of_sorted_latencies() {
        let sorted: Vec<u32> = (1..=100).collect();
        assert_eq!((quantile(&sorted, 0.5), quantile(&sorted, 0.99)), (51, 99));
        assert_eq!(quantile(&[], 0.5), 0);
    }
}
