//! `cargo xtask flood`: does the desk give memory back after a flood?
//! (`docs/reliability.md`, "Memory after a flood").
//!
//! Against a fresh release desk per transport, with its cap raised above the
//! flood: `--conns` connections each poll the full state and stay open;
//! `--bodies` POSTs of 1,000,000 bytes arrive at once (a send whose text is
//! over 64 KiB: read whole, parsed, `400`); `--held` answers of the same size
//! to unknown asks are held (`202`; the desk holds them 3 s). Then every
//! connection closes. The desk's resident memory is read before, every
//! 100 ms from the flood on (the peak), and 1, 5 and 15 s after the close.
//!
//! It fails (exit 1) when a request did not get its answer, or when less than
//! half of what the flood added (peak − before) is given back 15 s after it.

use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::task::JoinSet;

use super::{
    CAP_ROOM, Desk, Transport, desk_binary, exchange, mib, raise_fd_limit, rerun_release, temp_root,
};
use xtask_bench::load::{self, Call, Sender, Target};

/// The share of the flood's memory that must be back 15 s after it, in %.
const MIN_RETURNED_PCT: f64 = 50.0;
/// The size of a large body: under the 1 MiB limit, so it is read and parsed.
const LARGE_BODY: usize = 1_000_000;
/// How long the desk holds an answer to an unknown ask, in ms.
const HOLD_MS: &str = "3000";
/// Connections opened at once.
const BATCH: usize = 250;
/// When the memory is read after the close.
const AFTER: [Duration; 3] = [Duration::from_secs(1), Duration::from_secs(5), Duration::from_secs(15)];

const USAGE: &str = "usage: cargo xtask flood [--conns N] [--bodies N] [--held N] [--transport socket|https|both] [--desk PATH]";

#[derive(Debug, PartialEq)]
struct Options {
    conns: usize,
    bodies: usize,
    held: usize,
    transports: Vec<Transport>,
    desk: Option<std::path::PathBuf>,
}

fn parse(args: &[String]) -> Result<Options, String> {
    let mut o = Options {
        conns: 4000,
        bodies: 200,
        held: 64,
        transports: vec![Transport::Socket, Transport::Https],
        desk: None,
    };
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let value = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let number =
            |v: &str| v.parse::<usize>().map_err(|_| format!("{flag} takes a whole number, not {v:?}"));
        match flag.as_str() {
            "--conns" => o.conns = number(value)?,
            "--bodies" => o.bodies = number(value)?,
            "--held" => o.held = number(value)?,
            "--desk" => o.desk = Some(value.into()),
            "--transport" => {
                o.transports = match value.as_str() {
                    "socket" => vec![Transport::Socket],
                    "https" => vec![Transport::Https],
                    "both" => vec![Transport::Socket, Transport::Https],
                    other => return Err(format!("--transport is socket, https or both, not {other:?}")),
                }
            }
            other => return Err(format!("unknown argument {other:?}\n{USAGE}")),
        }
    }
    if o.conns + o.bodies + o.held == 0 {
        return Err("nothing to flood with: --conns, --bodies and --held are all 0".into());
    }
    Ok(o)
}

pub(crate) fn main(args: &[String]) -> ExitCode {
    if cfg!(debug_assertions) {
        return rerun_release("flood", args);
    }
    let o = match parse(args) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("flood: {e}");
            return ExitCode::from(2);
        }
    };
    let result = raise_fd_limit(2 * (o.conns + o.bodies + o.held + CAP_ROOM) + 256)
        .and_then(|()| desk_binary(o.desk.as_deref()))
        .and_then(|bin| {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build();
            rt.map_err(|e| e.to_string())?.block_on(run(&o, &bin))
        });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("flood: FAILED: {e}");
            ExitCode::FAILURE
        }
    }
}

/// What the flood did to a desk's memory, in KiB.
#[derive(Debug, PartialEq)]
struct Figures {
    before: u64,
    peak: u64,
    /// At each of [`AFTER`].
    after: Vec<u64>,
}

impl Figures {
    /// The share of what the flood added that is gone at `after[i]`, in %.
    fn returned_pct(&self, i: usize) -> f64 {
        let added = self.peak.saturating_sub(self.before);
        let kept = self.after.get(i).map_or(self.peak, |a| a.saturating_sub(self.before));
        if added == 0 { 100.0 } else { (1.0 - kept as f64 / added as f64) * 100.0 }
    }
}

/// One request on a new connection, kept open: the connection, or why not.
async fn open_with(target: Target, call: Call, expect: u16) -> Result<Sender, String> {
    let mut sender = None;
    match exchange(&target, &mut sender, &call).await? {
        (status, ..) if status == expect => Ok(sender.expect("connected")),
        (status, _, body) => {
            let body = String::from_utf8_lossy(&body[..body.len().min(200)]).into_owned();
            Err(format!("{} {} answered {status}, not {expect}: {body}", call.method, call.path))
        }
    }
}

/// Runs these requests, each on a new connection, `BATCH` at a time; the
/// connections stay open in `open`, the failures are counted in `errors`.
async fn flood(
    target: &Target,
    calls: Vec<(Call, u16)>,
    open: &mut Vec<Sender>,
    errors: &mut Vec<String>,
) -> Result<(), String> {
    let mut calls = calls.into_iter().peekable();
    while calls.peek().is_some() {
        let mut set = JoinSet::new();
        for (call, expect) in calls.by_ref().take(BATCH) {
            set.spawn(open_with(target.clone(), call, expect));
        }
        while let Some(joined) = set.join_next().await {
            match joined.map_err(|e| e.to_string())? {
                Ok(sender) => open.push(sender),
                Err(why) => errors.push(why),
            }
        }
    }
    Ok(())
}

fn large_bodies(o: &Options) -> Vec<(Call, u16)> {
    let post = |path: String, json: String| Call {
        method: hyper::Method::POST,
        body: Some(Bytes::from(json)),
        ..Call::get(path)
    };
    // `{"requestId":…,"text":"aaa…"}` padded to LARGE_BODY bytes.
    let pad = |head: &str, tail: &str| "a".repeat(LARGE_BODY.saturating_sub(head.len() + tail.len()));
    let mut calls = Vec::new();
    for i in 0..o.bodies {
        let head = format!(r#"{{"requestId":"flood-{i}","text":""#);
        let json = format!("{head}{}\"}}", pad(&head, "\"}"));
        calls.push((post("/v1/panes/ticket-1/send".into(), json), 400));
    }
    for i in 0..o.held {
        let head = format!(r#"{{"requestId":"held-{i}","hash":"{}","answer":{{"text":""#, "0".repeat(64));
        let json = format!("{head}{}\"}}}}", pad(&head, "\"}}"));
        calls.push((post(format!("/v1/asks/{i:032x}"), json), 202));
    }
    calls
}

/// Reads `pid`'s memory every 100 ms until told to stop; the most seen.
fn peak_sampler(pid: u32) -> (Arc<AtomicBool>, tokio::task::JoinHandle<u64>) {
    let stop = Arc::new(AtomicBool::new(false));
    let peak = Arc::new(AtomicU64::new(0));
    let (s, p) = (stop.clone(), peak.clone());
    let task = tokio::spawn(async move {
        while !s.load(Ordering::Relaxed) {
            if let Ok(kib) = load::rss_kib(pid) {
                p.fetch_max(kib, Ordering::Relaxed);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        p.load(Ordering::Relaxed)
    });
    (stop, task)
}

async fn flood_one(
    o: &Options,
    bin: &std::path::Path,
    dir: &std::path::Path,
    t: Transport,
) -> Result<(Figures, Vec<String>), String> {
    let cap = o.conns + o.bodies + o.held + CAP_ROOM;
    let mut desk = Desk::start(bin, dir, t, cap, &["--hold-ms", HOLD_MS])?;
    let state = Call::get("/v1/state");
    tokio::time::sleep(Duration::from_secs(1)).await;
    open_with(desk.target.clone(), state.clone(), 200).await?;
    let before = load::rss_kib(desk.pid)?;
    let (stop, sampler) = peak_sampler(desk.pid);
    let mut open = Vec::new();
    let mut errors = Vec::new();
    flood(&desk.target, vec![(state.clone(), 200); o.conns], &mut open, &mut errors).await?;
    flood(&desk.target, large_bodies(o), &mut open, &mut errors).await?;
    desk.alive()?;
    let closed_at = Instant::now();
    drop(open);
    let mut after = Vec::new();
    for at in AFTER {
        tokio::time::sleep((closed_at + at).saturating_duration_since(Instant::now())).await;
        after.push(load::rss_kib(desk.pid)?);
    }
    // The peak may come while the connections close.
    stop.store(true, Ordering::Relaxed);
    let peak = sampler.await.map_err(|e| e.to_string())?.max(before);
    // Still serving.
    if let Err(why) = open_with(desk.target.clone(), state, 200).await {
        errors.push(format!("after the flood: {why}"));
    }
    desk.alive()?;
    Ok((Figures { before, peak, after }, errors))
}

async fn run(o: &Options, bin: &std::path::Path) -> Result<(), String> {
    let dir = temp_root("flood")?;
    println!(
        "flood: {} cores; desk {}; {} connections (each a full GET /v1/state, kept open), {} POSTs of {LARGE_BODY} B at once (`400`), {} held answers of {LARGE_BODY} B (`202`, held {HOLD_MS} ms); all closed, then RSS after {} s",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        bin.display(),
        o.conns,
        o.bodies,
        o.held,
        AFTER.map(|d| d.as_secs().to_string()).join(", ")
    );
    println!(
        "{:<9} {:>8} {:>8} {:>8} {:>8} {:>8} {:>10} {:>7}",
        "transport", "before", "peak", "+1 s", "+5 s", "+15 s", "returned", "errors"
    );
    let mut why = Vec::new();
    for &t in &o.transports {
        let (f, errors) = flood_one(o, bin, &dir, t).await?;
        let after: Vec<String> = f.after.iter().map(|k| format!("{:>8.1}", mib(*k))).collect();
        let returned = f.returned_pct(AFTER.len() - 1);
        println!(
            "{:<9} {:>8.1} {:>8.1} {} {:>9.0}% {:>7}   (MiB)",
            t.name(),
            mib(f.before),
            mib(f.peak),
            after.join(" "),
            returned,
            errors.len()
        );
        for e in errors.iter().take(5) {
            println!("  {} error: {e}", t.name());
        }
        if !errors.is_empty() {
            why.push(format!("{}: {} requests failed", t.name(), errors.len()));
        }
        if returned < MIN_RETURNED_PCT {
            why.push(format!(
                "{}: {returned:.0} % of the flood's memory given back after 15 s (at least {MIN_RETURNED_PCT} %)",
                t.name()
            ));
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    if why.is_empty() {
        println!("flood: ok: every request answered, memory given back");
        Ok(())
    } else {
        Err(why.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn flags_and_their_defaults() {
        let o = parse(&[]).unwrap();
        assert_eq!((o.conns, o.bodies, o.held, o.transports.len(), o.desk), (4000, 200, 64, 2, None));
        let o =
            parse(&args(&["--conns", "10", "--bodies", "0", "--transport", "https", "--desk", "/x/desk"]))
                .unwrap();
        assert_eq!((o.conns, o.bodies, o.transports), (10, 0, vec![Transport::Https]));
        assert_eq!(o.desk.as_deref(), Some(std::path::Path::new("/x/desk")));
        assert!(parse(&args(&["--transport", "carrier-pigeon"])).is_err());
        assert!(parse(&args(&["--conns", "-1"])).is_err());
        assert!(parse(&args(&["--conns", "0", "--bodies", "0", "--held", "0"])).is_err());
    }

    #[test]
    fn returned_is_the_share_of_the_flood_given_back() {
        let f = Figures { before: 10_000, peak: 210_000, after: vec![200_000, 110_000, 10_000] };
        assert!((f.returned_pct(0) - 5.0).abs() < 1e-9);
        assert!((f.returned_pct(1) - 50.0).abs() < 1e-9);
        assert!((f.returned_pct(2) - 100.0).abs() < 1e-9);
        // Below the start counts as all of it; a flood that added nothing returned all.
        assert!((Figures { before: 10, peak: 20, after: vec![5] }.returned_pct(0) - 100.0).abs() < 1e-9);
        assert_eq!(Figures { before: 10, peak: 10, after: vec![10] }.returned_pct(0), 100.0);
    }

    #[test]
    fn large_bodies_are_valid_json_of_the_large_size() {
        let o = Options { conns: 0, bodies: 2, held: 2, transports: vec![], desk: None };
        let calls = large_bodies(&o);
        assert_eq!(calls.len(), 4);
        for (call, expect) in &calls {
            let body = call.body.as_ref().unwrap();
            assert_eq!(body.len(), LARGE_BODY, "{}", call.path);
            let v: serde_json::Value = serde_json::from_slice(body).unwrap();
            assert!(v["requestId"].is_string());
            if *expect == 202 {
                assert!(call.path.starts_with("/v1/asks/") && call.path.len() == "/v1/asks/".len() + 32);
                assert!(v["answer"]["text"].is_string() && v["hash"].as_str().unwrap().len() == 64);
            } else {
                assert_eq!((call.path.as_str(), *expect), ("/v1/panes/ticket-1/send", 400));
            }
        }
    }
}
