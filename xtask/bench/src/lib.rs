//! `cargo xtask bench`: what a poll costs the agent, against a bare hyper
//! server serving the same bytes, in the same run.
//!
//! It runs from a release build of this package (`cargo xtask bench` runs
//! `cargo run --release -p xtask-bench`), so that a fresh clone builds the
//! measured code once and nothing more. Each server runs in a process of
//! its own (`xtask-bench bench-serve`, see
//! [`serve`]); the client ([`load`]) shares the machine's cores, so the
//! figure that counts is the server's CPU time per request (user + system,
//! from `/proc/<pid>/stat` over the measured window) and its ratio to the
//! baseline's. Requests per second and latencies are printed for context:
//! they move with whatever else the machine does.
//!
//! `--window-ms N` (default 2000) sets each case's measured window,
//! `--conns N` (default 16) the keep-alive connections, `--memory-seconds N`
//! (default 60) how long the 10,000-pane agent is polled before its memory
//! is read again, `--only GROUP,…` runs some of the groups of cases:
//! `polls` (the full state and the `304`, both transports), `answers` (the
//! answer round trip, both transports), `deltas` (10 and 10,000 panes, the
//! full state at 10,000, memory), `events` (a pane's events, memory of a
//! full pane), `pi` (the Pi example over 100, 1,000 and 10,000 sessions:
//! the start to the first state, history pages, memory; `pi.rs`) and `acp`
//! (a scripted turn relayed through durable-acp against the same turn
//! driven over ACP directly, and through a bare relay as the floor;
//! `acp.rs`, `relay.rs`) and `stores` (a receipt's `put` in each receipt
//! store, the SQLite store with and without its witness, and the cost of
//! its checks at open, a store at its bound of conversations; `stores.rs`)
//! and `turns` (a scripted instant turn with each store, one pane at a
//! time and eight at once; `stores.rs`). Where
//! `cargo xtask install-pi` has put node in `.tools/`,
//! each case is also served by `node:http` (`node:https` over HTTPS) alone
//! (`bare.js`).

mod acp;
mod instructions;
pub mod load;
mod pi;
pub mod relay;
pub mod serve;
mod stores;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use load::{Call, Figures, Target};

const TOKEN: &str = "bench-token-0123456789abcdef0123456789abcdef";

struct Options {
    window: Duration,
    conns: usize,
    /// How long the 10,000-pane agent is polled before its memory is read
    /// again.
    memory_window: Duration,
    /// `--only`: the groups of cases to run (all when empty).
    only: Vec<String>,
    /// `--instructions`: count instructions under callgrind instead.
    instructions: bool,
    /// `--keep-dumps`: leave the callgrind dumps for `callgrind_annotate`.
    keep_dumps: bool,
}

/// The groups of cases, for `--only`.
const GROUPS: [&str; 8] = ["polls", "answers", "deltas", "events", "pi", "acp", "stores", "turns"];

impl Options {
    fn wants(&self, group: &str) -> bool {
        self.only.is_empty() || self.only.iter().any(|g| g == group)
    }
}

fn parse(args: &[String]) -> Result<Options, String> {
    let mut o = Options {
        window: Duration::from_millis(2000),
        conns: 16,
        memory_window: Duration::from_secs(60),
        only: Vec::new(),
        instructions: false,
        keep_dumps: false,
    };
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let mut value = || it.next().cloned().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--window-ms" => o.window = Duration::from_millis(value()?.parse().map_err(|e| format!("{e}"))?),
            "--conns" => o.conns = value()?.parse().map_err(|e| format!("{e}"))?,
            "--memory-seconds" => {
                o.memory_window = Duration::from_secs(value()?.parse().map_err(|e| format!("{e}"))?)
            }
            "--instructions" => o.instructions = true,
            "--keep-dumps" => o.keep_dumps = true,
            "--only" => {
                for group in value()?.split(',') {
                    if !GROUPS.contains(&group) {
                        return Err(format!("--only takes {}, not {group:?}", GROUPS.join(",")));
                    }
                    o.only.push(group.to_owned());
                }
            }
            other => {
                return Err(format!(
                    "unknown argument {other:?} (--window-ms N, --conns N, --memory-seconds N, --only {}, --instructions, --keep-dumps)",
                    GROUPS.join(",")
                ));
            }
        }
    }
    Ok(o)
}

/// `cargo xtask bench ARGS`: runs the cases and prints one line each.
pub fn main(args: &[String]) -> ExitCode {
    // Figures of an unoptimized build say nothing; `cargo xtask bench` runs
    // this from a release build.
    if cfg!(debug_assertions) {
        eprintln!(
            "bench: this is an unoptimized build; run `cargo xtask bench` (it builds xtask-bench in release mode)"
        );
        return ExitCode::from(2);
    }
    let options = match parse(args) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("bench: {e}");
            return ExitCode::from(2);
        }
    };
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build();
    let run = |rt: tokio::runtime::Runtime| match options.instructions {
        true => rt.block_on(instructions::run(&options)),
        false => rt.block_on(run(&options)),
    };
    match rt.map_err(|e| e.to_string()).and_then(run) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bench: {e}");
            ExitCode::FAILURE
        }
    }
}

/// A server process, killed when dropped.
struct Server {
    child: Child,
    target: Target,
    seq: u64,
    /// The hash of the agent's bench asks (`--asks`).
    hash: Option<String>,
    /// Requests each connection has sent under `--instructions`, so that
    /// the next count goes on with new request numbers.
    counted: std::cell::Cell<u64>,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    fn pid(&self) -> u32 {
        self.child.id()
    }
}

#[derive(Clone, Copy, PartialEq)]
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

fn start(dir: &Path, name: &str, transport: Transport, args: &[&str]) -> Result<Server, String> {
    start_under(dir, name, transport, args, None)
}

/// [`start`], under `valgrind --tool=callgrind` writing its counts to
/// `callgrind_dir/cg.<pid>.out*` when that is given.
fn start_under(
    dir: &Path,
    name: &str,
    transport: Transport,
    args: &[&str],
    callgrind_dir: Option<&Path>,
) -> Result<Server, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut cmd = match callgrind_dir {
        Some(out) => {
            let mut cmd = Command::new("valgrind");
            cmd.args(["--tool=callgrind", "--quiet"])
                .arg(format!("--callgrind-out-file={}", out.join("cg.%p.out").display()))
                .arg(exe);
            cmd
        }
        None => Command::new(exe),
    };
    cmd.arg("bench-serve").args(args).env("COLLIE_TOKEN", TOKEN);
    match transport {
        Transport::Socket => cmd.arg("--socket").arg(dir.join(name).join("app.sock")),
        Transport::Https => cmd.args(["--https", "127.0.0.1:0"]),
    };
    let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::null()).spawn().map_err(|e| e.to_string())?;
    let mut lines = BufReader::new(child.stdout.take().ok_or("no stdout")?).lines();
    let mut next =
        || lines.next().and_then(Result::ok).ok_or_else(|| format!("{name}: the server did not start"));
    let address = next()?.strip_prefix("listening ").ok_or("no `listening` line")?.to_owned();
    let seq = next()?.strip_prefix("seq ").and_then(|s| s.parse().ok()).ok_or("no `seq` line")?;
    let hash = match args.contains(&"--asks") {
        true => Some(next()?.strip_prefix("hash ").ok_or("no `hash` line")?.to_owned()),
        false => None,
    };
    Ok(Server {
        child,
        target: Target::from_address(&address, TOKEN),
        seq,
        hash,
        counted: Default::default(),
    })
}

/// One line of the report.
struct Line {
    case: String,
    agent: Figures,
    baseline: Option<Figures>,
    /// The node baseline (`node:http` on the same socket), when node is there.
    node: Option<Figures>,
}

fn print(line: &Line) {
    let a = &line.agent;
    let (base, ratio) = match &line.baseline {
        Some(b) => (format!("{:>8.1}", b.cpu_us), format!("{:>6.2}×", a.cpu_us / b.cpu_us)),
        None => ("       –".to_owned(), "      –".to_owned()),
    };
    // How many times cheaper than node the agent is.
    let node = match &line.node {
        Some(n) => format!("{:>8.1} {:>6.2}×", n.cpu_us, n.cpu_us / a.cpu_us),
        None => "       –       –".to_owned(),
    };
    let errors = if a.errors > 0 { format!("  ({} errors)", a.errors) } else { String::new() };
    println!(
        "{:<44} {:>8.1} {base} {ratio} {node} {:>9.0} {:>7.0} {:>7.0}{errors}",
        line.case, a.cpu_us, a.rps, a.p50_us, a.p99_us
    );
}

async fn run(o: &Options) -> Result<(), String> {
    let dir = std::env::temp_dir().join(format!("durable-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let started = Instant::now();
    // Not shorter: with 300 ms, the first case measured on new connections
    // often read 1.5–3× its CPU (and ~1 ms at p99) for the whole window,
    // whichever server it was; from 1 s on, three runs in a row agreed
    // within a few percent (`docs/benchmarks.md`).
    let warmup = Duration::from_millis(1000);
    println!(
        "machine: {} cores; {} connections, one request in flight each; window {} ms after {} ms warm-up",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        o.conns,
        o.window.as_millis(),
        warmup.as_millis()
    );
    println!(
        "{:<44} {:>8} {:>8} {:>7} {:>8} {:>7} {:>9} {:>7} {:>7}",
        "case (server CPU µs per request)",
        "agent",
        "bare",
        "ratio",
        "node",
        "÷agent",
        "agent r/s",
        "p50 µs",
        "p99 µs"
    );
    let node = node_binary();
    if node.is_none() {
        println!("(no node baseline: node is installed by `cargo xtask install-pi`)");
    }
    let measure = |server: &Server, call: &Call, expect: u16| {
        let (target, call, pid) = (server.target.clone(), call.clone(), server.pid());
        async move { load::run(&target, &call, expect, pid, o.conns, warmup, o.window).await }
    };
    // The node baseline serving `body` on the socket, measured on `call`
    // with the bare servers' tag.
    let measure_node = |name: String, transport: Transport, body: bytes::Bytes, call: Call, expect: u16| {
        let node = node.clone();
        let dir = dir.clone();
        async move {
            let Some(node) = node else { return Ok::<_, String>(None) };
            let server = start_node(&node, &dir, &name, transport, &body)?;
            let call = Call { if_none_match: call.if_none_match.map(|_| "\"bench-1\"".to_owned()), ..call };
            Ok(Some(measure(&server, &call, expect).await?))
        }
    };
    let mut lines: Vec<Line> = Vec::new();

    for transport in [Transport::Socket, Transport::Https] {
        let t = transport.name();
        if o.wants("polls") {
            // A 100-pane agent: the full state, and the 304 poll.
            let agent =
                start(&dir, &format!("agent100-{t}"), transport, &["--kind", "agent", "--panes", "100"])?;
            let state = Call::get("/v1/state");
            let (body, epoch) = state_and_epoch(&agent.target).await?;
            let bare = start_bare(&dir, &format!("bare100-{t}"), transport, &body)?;
            let full_a = measure(&agent, &state, 200).await?;
            let full_b = measure(&bare, &state, 200).await?;
            let full_n =
                measure_node(format!("node100-{t}"), transport, body.clone(), state.clone(), 200).await?;
            lines.push(Line {
                case: format!("[{t}] full state, 100 panes ({} B)", body.len()),
                agent: full_a,
                baseline: Some(full_b),
                node: full_n,
            });
            print(lines.last().expect("just pushed"));
            let tag_a = Call { if_none_match: Some(format!("\"{epoch}-{}\"", agent.seq)), ..state.clone() };
            let tag_b = Call { if_none_match: Some("\"bench-1\"".to_owned()), ..state.clone() };
            let nm_a = measure(&agent, &tag_a, 304).await?;
            let nm_b = measure(&bare, &tag_b, 304).await?;
            let nm_n =
                measure_node(format!("node304-{t}"), transport, body.clone(), tag_b.clone(), 304).await?;
            lines.push(Line {
                case: format!("[{t}] 304 poll"),
                agent: nm_a,
                baseline: Some(nm_b),
                node: nm_n,
            });
            print(lines.last().expect("just pushed"));
            drop((agent, bare));
        }

        if o.wants("answers") {
            // The answer round trip: the agent raises an ask, the phone POSTs
            // its answer, `ask()` resolves and the 200 arrives; against a bare
            // POST of the same bytes.
            let agent = start(
                &dir,
                &format!("agent-asks-{t}"),
                transport,
                &["--kind", "agent", "--panes", "1", "--asks", &o.conns.to_string()],
            )?;
            let answers = answer_calls(agent.hash.clone().ok_or("the agent printed no ask hash")?);
            let bare = start_bare(&dir, &format!("bare-asks-{t}"), transport, b"{}")?;
            let measure_each = |server: &Server| {
                let (target, answers, pid) = (server.target.clone(), answers.clone(), server.pid());
                async move { load::run_each(&target, answers, 200, pid, o.conns, warmup, o.window).await }
            };
            let a = measure_each(&agent).await?;
            let b = measure_each(&bare).await?;
            let n = match &node {
                Some(node) => {
                    let server = start_node(node, &dir, &format!("node-asks-{t}"), transport, b"{}")?;
                    Some(measure_each(&server).await?)
                }
                None => None,
            };
            lines.push(Line {
                case: format!("[{t}] answer round trip (vs a bare POST)"),
                agent: a,
                baseline: Some(b),
                node: n,
            });
            print(lines.last().expect("just pushed"));
        }
    }

    if o.wants("deltas") {
        // Deltas of one changed pane, at 10 and at 10,000 panes, and the full state at 10,000.
        let mut delta_cost = Vec::new();
        for panes in [10usize, 10_000] {
            let agent = start(
                &dir,
                &format!("agent{panes}"),
                Transport::Socket,
                &["--kind", "agent", "--panes", &panes.to_string()],
            )?;
            let delta = Call::get(format!("/v1/state?since={}", agent.seq - 1));
            let (_, body) = load::once(&agent.target, &delta).await?;
            let bare = start_bare(&dir, &format!("bare-delta{panes}"), Transport::Socket, &body)?;
            let a = measure(&agent, &delta, 200).await?;
            let b = measure(&bare, &delta, 200).await?;
            let n = measure_node(
                format!("node-delta{panes}"),
                Transport::Socket,
                body.clone(),
                delta.clone(),
                200,
            )
            .await?;
            delta_cost.push(a.cpu_us);
            lines.push(Line {
                case: format!("[socket] delta, 1 of {panes} panes changed"),
                agent: a,
                baseline: Some(b),
                node: n,
            });
            print(lines.last().expect("just pushed"));
            if panes == 10_000 {
                let rss_idle = load::rss_kib(agent.pid())?;
                let state = Call::get("/v1/state");
                let (_, full) = load::once(&agent.target, &state).await?;
                let bare = start_bare(&dir, "bare-full10k", Transport::Socket, &full)?;
                let a = measure(&agent, &state, 200).await?;
                let b = measure(&bare, &state, 200).await?;
                let n = measure_node(
                    "node-full10k".to_owned(),
                    Transport::Socket,
                    full.clone(),
                    state.clone(),
                    200,
                )
                .await?;
                lines.push(Line {
                    case: format!("[socket] full state, 10,000 panes ({} KiB)", full.len() / 1024),
                    agent: a,
                    baseline: Some(b),
                    node: n,
                });
                print(lines.last().expect("just pushed"));
                // Memory after a while of full polls, against the idle figure.
                let polled =
                    load::run(&agent.target, &state, 200, agent.pid(), o.conns, warmup, o.memory_window)
                        .await?;
                let rss_polled = load::rss_kib(agent.pid())?;
                // The same binary with one pane: what is the process's, not the panes'.
                let empty =
                    start(&dir, "agent-empty10k", Transport::Socket, &["--kind", "agent", "--panes", "1"])?;
                let rss_empty = load::rss_kib(empty.pid())?;
                println!(
                    "memory: 10,000 idle panes {:.1} MiB ({:.1} MiB over a one-pane agent); after {:.0} s of full polls ({:.0} requests) {:.1} MiB ({:+.1} %)",
                    rss_idle as f64 / 1024.0,
                    rss_idle.saturating_sub(rss_empty) as f64 / 1024.0,
                    (warmup + o.window).as_secs_f64() * 3.0 + o.memory_window.as_secs_f64(),
                    polled.rps * o.memory_window.as_secs_f64(),
                    rss_polled as f64 / 1024.0,
                    (rss_polled as f64 / rss_idle as f64 - 1.0) * 100.0
                );
            }
        }
        println!(
            "delta at 10,000 panes costs {:.2}× its cost at 10 (server CPU per request)",
            delta_cost[1] / delta_cost[0]
        );
    }

    if o.wants("events") {
        // Reading a pane's events, and the memory of one full pane.
        let empty = start(&dir, "agent-empty", Transport::Socket, &["--kind", "agent", "--panes", "1"])?;
        let full_pane = start(
            &dir,
            "agent-events",
            Transport::Socket,
            &["--kind", "agent", "--panes", "1", "--events", "2000"],
        )?;
        let events = Call::get("/v1/panes/p0/events?after=1700");
        let (_, body) = load::once(&full_pane.target, &events).await?;
        let bare = start_bare(&dir, "bare-events", Transport::Socket, &body)?;
        let a = measure(&full_pane, &events, 200).await?;
        let b = measure(&bare, &events, 200).await?;
        let n = measure_node("node-events".to_owned(), Transport::Socket, body.clone(), events.clone(), 200)
            .await?;
        lines.push(Line {
            case: format!("[socket] events read, 300 events from the tail ({} KiB)", body.len() / 1024),
            agent: a,
            baseline: Some(b),
            node: n,
        });
        print(lines.last().expect("just pushed"));
        let behind = Call::get("/v1/panes/p0/events?after=0");
        let (_, body) = load::once(&full_pane.target, &behind).await?;
        let bare = start_bare(&dir, "bare-snapshot", Transport::Socket, &body)?;
        let a = measure(&full_pane, &behind, 200).await?;
        let b = measure(&bare, &behind, 200).await?;
        let n =
            measure_node("node-snapshot".to_owned(), Transport::Socket, body.clone(), behind.clone(), 200)
                .await?;
        lines.push(Line {
            case: format!("[socket] behind the tail: the view, 2,000 items ({} KiB)", body.len() / 1024),
            agent: a,
            baseline: Some(b),
            node: n,
        });
        print(lines.last().expect("just pushed"));
        let (rss_empty, rss_full) = (load::rss_kib(empty.pid())?, load::rss_kib(full_pane.pid())?);
        println!(
            "memory: one full pane (2,000 items of 200 B, 500 events kept) {:.1} MiB over an empty agent ({:.1} MiB)",
            rss_full.saturating_sub(rss_empty) as f64 / 1024.0,
            rss_empty as f64 / 1024.0
        );
    }
    if o.wants("pi") {
        pi::run(&dir).await?;
    }
    if o.wants("acp") {
        acp::run(&dir).await?;
    }
    if o.wants("stores") {
        stores::run(&dir).await?;
    }
    if o.wants("turns") {
        stores::run_turns(&dir).await?;
    }
    let errors: u64 = lines.iter().map(|l| l.agent.errors).sum();
    println!("bench: {} cases in {:.0} s, {errors} errors", lines.len(), started.elapsed().as_secs_f64());
    let _ = std::fs::remove_dir_all(&dir);
    if errors > 0 {
        return Err(format!("{errors} requests did not get the expected answer"));
    }
    Ok(())
}

/// The agent's full state answer and its epoch.
async fn state_and_epoch(target: &Target) -> Result<(bytes::Bytes, String), String> {
    let (status, body) = load::once(target, &Call::get("/v1/state")).await?;
    if status != 200 {
        return Err(format!("the agent answered {status} to GET /v1/state"));
    }
    #[derive(serde::Deserialize)]
    struct Epoch {
        epoch: String,
    }
    let epoch = serde_json::from_slice::<Epoch>(&body).map_err(|e| e.to_string())?.epoch;
    Ok((body, epoch))
}

/// Connection `c`'s `n`th answer: `yes` to the bench agent's ask
/// `t<c>-<n>` on pane `p0`, with the ask's hash, as Collie sends it.
fn answer_calls(hash: String) -> load::Calls {
    std::sync::Arc::new(move |c, n| {
        let ask = durable_sdk::ask_id_for("p0", &serve::ask_call_id(c, n));
        let body = format!(r#"{{"requestId":"r{c}-{n}","answer":{{"optionIds":["yes"]}},"hash":"{hash}"}}"#);
        Call::post(format!("/v1/asks/{ask}"), body)
    })
}

/// The workspace root, two folders above this crate's manifest folder
/// (`xtask/bench`; `xtask/collie` uses it too).
pub fn project_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("xtask/bench sits two folders below the workspace root")
        .to_path_buf()
}

/// `.tools/bin/node`, installed by `cargo xtask install-pi`, if it is there.
fn node_binary() -> Option<PathBuf> {
    let node = project_root().join(".tools").join("bin").join("node");
    node.exists().then_some(node)
}

/// The node baseline: `bare.js` serving `body` on a socket under `dir`, or
/// over HTTPS on loopback with a self-signed certificate written there.
fn start_node(
    node: &Path,
    dir: &Path,
    name: &str,
    transport: Transport,
    body: &[u8],
) -> Result<Server, String> {
    let (file, script) = (dir.join(format!("{name}.json")), dir.join("bare.js"));
    std::fs::write(&file, body).map_err(|e| e.to_string())?;
    std::fs::write(&script, include_str!("bare.js")).map_err(|e| e.to_string())?;
    let mut cmd = Command::new(node);
    cmd.arg(&script).arg("--body").arg(&file);
    match transport {
        Transport::Socket => cmd.arg("--socket").arg(dir.join(name).join("app.sock")),
        Transport::Https => {
            let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()])
                .map_err(|e| e.to_string())?;
            let (cert_file, key_file) = (dir.join(format!("{name}.crt")), dir.join(format!("{name}.key")));
            std::fs::write(&cert_file, cert.cert.pem()).map_err(|e| e.to_string())?;
            std::fs::write(&key_file, cert.key_pair.serialize_pem()).map_err(|e| e.to_string())?;
            cmd.args(["--https", "127.0.0.1:0", "--cert"]).arg(cert_file).arg("--key").arg(key_file)
        }
    };
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("{}: {e}", node.display()))?;
    let mut lines = BufReader::new(child.stdout.take().ok_or("no stdout")?).lines();
    let line = lines.next().and_then(Result::ok).ok_or_else(|| format!("{name}: node did not start"))?;
    let address = line.strip_prefix("listening ").ok_or("no `listening` line")?.to_owned();
    Ok(Server {
        child,
        target: Target::from_address(&address, TOKEN),
        seq: 0,
        hash: None,
        counted: Default::default(),
    })
}

fn start_bare(dir: &Path, name: &str, transport: Transport, body: &[u8]) -> Result<Server, String> {
    start_bare_under(dir, name, transport, body, None)
}

/// [`start_bare`], under callgrind when `callgrind_dir` is given (see [`start_under`]).
fn start_bare_under(
    dir: &Path,
    name: &str,
    transport: Transport,
    body: &[u8],
    callgrind_dir: Option<&Path>,
) -> Result<Server, String> {
    let file: PathBuf = dir.join(format!("{name}.json"));
    std::fs::write(&file, body).map_err(|e| e.to_string())?;
    let file = file.to_str().ok_or("a temp path that is not UTF-8")?.to_owned();
    start_under(dir, name, transport, &["--kind", "bare", "--body", &file], callgrind_dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn only_takes_known_groups_and_instructions_is_a_flag() {
        let o = parse(&args(&["--only", "polls,answers", "--instructions"])).unwrap();
        assert!(o.instructions && !o.keep_dumps);
        assert!(parse(&args(&["--instructions", "--keep-dumps"])).unwrap().keep_dumps);
        assert!(o.wants("polls") && o.wants("answers"));
        assert!(!o.wants("deltas") && !o.wants("events"));
        let all = parse(&[]).unwrap();
        assert!(!all.instructions);
        assert!(GROUPS.iter().all(|g| all.wants(g)), "no --only runs every group");
        let e = parse(&args(&["--only", "polls,nope"])).err().unwrap();
        assert!(e.contains("nope") && e.contains("polls,answers,deltas,events"), "{e}");
    }

    #[test]
    fn each_answer_goes_to_its_own_ask_with_its_own_request_id() {
        let calls = answer_calls("ab".repeat(32));
        let (a, b) = (calls(0, 7), calls(1, 7));
        assert_eq!(a.method, hyper::Method::POST);
        assert_eq!(a.path, format!("/v1/asks/{}", durable_sdk::ask_id_for("p0", "t0-7")));
        assert_ne!(a.path, b.path);
        let body: serde_json::Value = serde_json::from_slice(a.body.as_deref().unwrap()).unwrap();
        assert_eq!(body["requestId"], "r0-7");
        assert_eq!(body["answer"]["optionIds"][0], "yes");
        assert_eq!(body["hash"], "ab".repeat(32));
        assert_eq!(serve::ask_call_id(0, 7), "t0-7");
    }
}
