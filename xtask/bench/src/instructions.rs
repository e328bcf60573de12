//! `cargo xtask bench --instructions`: the same cases counted in
//! instructions instead of CPU time. Each server runs under
//! `valgrind --tool=callgrind`; the client opens its keep-alive
//! connections, sends a warm-up on them, zeroes the server's counters
//! (`callgrind_control --zero`), sends exactly `n` more requests on the
//! same connections, and has the counters dumped (`callgrind_control
//! --dump`): the dump's total over `n` is the server's instructions per
//! request.
//!
//! Why: CPU time on a shared 2-core machine moves by a third from run to run
//! (other jobs, steal time), wider than the margins of the targets, while an
//! instruction count is the same for the same binary and inputs whatever
//! else the machine does. What it does not see: the kernel's side of each
//! request (reads, writes, wake-ups), about the same for the agent and the
//! bare server; and cache misses, which the CPU figures keep.

use std::path::Path;
use std::sync::Arc;

use super::load::{self, Call, Calls};
use super::{Options, Server, Transport, answer_calls, start_bare_under, start_under, state_and_epoch};

/// Connections, one request in flight on each.
const CONNS: usize = 4;
/// Requests sent before the counters are zeroed.
const WARMUP_PER_CONN: u64 = 50;

/// One line of the report: instructions per request.
struct Counted {
    case: String,
    agent: f64,
    bare: f64,
}

pub(super) async fn run(o: &Options) -> Result<(), String> {
    let found = std::process::Command::new("callgrind_control").arg("--version").output();
    if !found.is_ok_and(|out| out.status.success()) {
        return Err("--instructions needs valgrind (apt-get install valgrind)".into());
    }
    let dir = std::env::temp_dir().join(format!("durable-bench-instr-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let started = std::time::Instant::now();
    println!(
        "instructions per request (user space, the server's own; valgrind --tool=callgrind), \
         {CONNS} keep-alive connections, counted after {} warm-up requests on them",
        WARMUP_PER_CONN * CONNS as u64
    );
    println!("{:<48} {:>10} {:>10} {:>7}", "case", "agent", "bare", "ratio");
    let mut lines = Vec::new();
    for transport in [Transport::Socket, Transport::Https] {
        let t = transport.name();
        if o.wants("polls") {
            let agent = start_counted(&dir, &format!("agent100-{t}"), transport, &["--panes", "100"])?;
            let state = Call::get("/v1/state");
            let (body, epoch) = state_and_epoch(&agent.target).await?;
            let bare = start_bare_under(&dir, &format!("bare100-{t}"), transport, &body, Some(&dir))?;
            let a = per_request(&dir, &agent, &same(&state), 200, 100).await?;
            let b = per_request(&dir, &bare, &same(&state), 200, 100).await?;
            lines.push(report(format!("[{t}] full state, 100 panes ({} B)", body.len()), a, b));
            let tag_a = Call { if_none_match: Some(format!("\"{epoch}-{}\"", agent.seq)), ..state.clone() };
            let tag_b = Call { if_none_match: Some("\"bench-1\"".to_owned()), ..state };
            let a = per_request(&dir, &agent, &same(&tag_a), 304, 250).await?;
            let b = per_request(&dir, &bare, &same(&tag_b), 304, 250).await?;
            lines.push(report(format!("[{t}] 304 poll"), a, b));
        }
        if o.wants("answers") {
            let slots = CONNS.to_string();
            let agent = start_counted(
                &dir,
                &format!("agent-asks-{t}"),
                transport,
                &["--panes", "1", "--asks", &slots],
            )?;
            let answers = answer_calls(agent.hash.clone().ok_or("the agent printed no ask hash")?);
            let bare = start_bare_under(&dir, &format!("bare-asks-{t}"), transport, b"{}", Some(&dir))?;
            let a = per_request(&dir, &agent, &answers, 200, 100).await?;
            let b = per_request(&dir, &bare, &answers, 200, 100).await?;
            lines.push(report(format!("[{t}] answer round trip (vs a bare POST)"), a, b));
        }
    }
    if o.wants("deltas") {
        let mut delta = Vec::new();
        for panes in [10usize, 10_000] {
            let agent = start_counted(
                &dir,
                &format!("agent{panes}"),
                Transport::Socket,
                &["--panes", &panes.to_string()],
            )?;
            let call = Call::get(format!("/v1/state?since={}", agent.seq - 1));
            let (_, body) = load::once(&agent.target, &call).await?;
            let bare =
                start_bare_under(&dir, &format!("bare-delta{panes}"), Transport::Socket, &body, Some(&dir))?;
            let a = per_request(&dir, &agent, &same(&call), 200, 250).await?;
            let b = per_request(&dir, &bare, &same(&call), 200, 250).await?;
            delta.push(a);
            lines.push(report(format!("[socket] delta, 1 of {panes} panes changed"), a, b));
            if panes == 10_000 {
                let state = Call::get("/v1/state");
                let (_, full) = load::once(&agent.target, &state).await?;
                let bare = start_bare_under(&dir, "bare-full10k", Transport::Socket, &full, Some(&dir))?;
                let a = per_request(&dir, &agent, &same(&state), 200, 5).await?;
                let b = per_request(&dir, &bare, &same(&state), 200, 5).await?;
                lines.push(report(
                    format!("[socket] full state, 10,000 panes ({} KiB)", full.len() / 1024),
                    a,
                    b,
                ));
            }
        }
        println!(
            "delta at 10,000 panes costs {:.2}× its cost at 10 (instructions per request)",
            delta[1] / delta[0]
        );
    }
    if o.wants("events") {
        let agent =
            start_counted(&dir, "agent-events", Transport::Socket, &["--panes", "1", "--events", "2000"])?;
        for (name, path) in [
            ("events read, 300 events from the tail", "/v1/panes/p0/events?after=1700"),
            ("behind the tail: the view, 2,000 items", "/v1/panes/p0/events?after=0"),
        ] {
            let call = Call::get(path);
            let (_, body) = load::once(&agent.target, &call).await?;
            let bare = start_bare_under(&dir, "bare-events", Transport::Socket, &body, Some(&dir))?;
            let a = per_request(&dir, &agent, &same(&call), 200, 25).await?;
            let b = per_request(&dir, &bare, &same(&call), 200, 25).await?;
            lines.push(report(format!("[socket] {name} ({} KiB)", body.len() / 1024), a, b));
        }
    }
    println!("bench --instructions: {} cases in {:.0} s", lines.len(), started.elapsed().as_secs_f64());
    match o.keep_dumps {
        // One dump per count, in the order of the report's lines, agent
        // then bare (`callgrind_annotate --inclusive=yes <dump>`).
        true => println!("the callgrind dumps are in {}", dir.display()),
        false => {
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
    Ok(())
}

/// The same request every time.
fn same(call: &Call) -> Calls {
    let call = call.clone();
    Arc::new(move |_, _| call.clone())
}

fn start_counted(dir: &Path, name: &str, transport: Transport, args: &[&str]) -> Result<Server, String> {
    let mut all = vec!["--kind", "agent"];
    all.extend_from_slice(args);
    start_under(dir, name, transport, &all, Some(dir))
}

fn report(case: String, agent: f64, bare: f64) -> Counted {
    let line = Counted { case, agent, bare };
    println!("{:<48} {:>10.0} {:>10.0} {:>6.2}×", line.case, line.agent, line.bare, line.agent / line.bare);
    line
}

/// The server's instructions per request over `per_conn` requests on each
/// connection, after the warm-up. Each call continues the request numbers
/// where the last one on this server stopped, so an answer never repeats a
/// request id or an ask.
async fn per_request(
    dir: &Path,
    server: &Server,
    calls: &Calls,
    expect: u16,
    per_conn: u64,
) -> Result<f64, String> {
    let from = server.counted.get();
    // The count's connections are the warm-up's: a connection's own cost
    // (the socket's peer check, about 50,000 instructions) is paid once per
    // keep-alive connection, not per request, and would weigh a fifth of it
    // on each of the 10,000-pane state's few requests.
    let mut conns = load::connect_all(&server.target, CONNS).await?;
    let warmed = load::count(&server.target, calls, expect, &mut conns, from, WARMUP_PER_CONN).await?;
    control(server.pid(), "--zero")?;
    let from = from + WARMUP_PER_CONN;
    let errors = load::count(&server.target, calls, expect, &mut conns, from, per_conn).await?;
    control(server.pid(), "--dump")?;
    server.counted.set(from + per_conn);
    if warmed + errors > 0 {
        return Err(format!("{} requests did not get {expect}", warmed + errors));
    }
    let total = last_dump_total(dir, server.pid())?;
    Ok(total as f64 / (per_conn * CONNS as u64) as f64)
}

fn control(pid: u32, what: &str) -> Result<(), String> {
    let out = std::process::Command::new("callgrind_control")
        .arg(what)
        .arg(pid.to_string())
        .output()
        .map_err(|e| format!("callgrind_control: {e}"))?;
    match out.status.success() {
        true => Ok(()),
        false => Err(format!("callgrind_control {what} {pid}: {}", String::from_utf8_lossy(&out.stderr))),
    }
}

/// The `summary:` of the newest dump of `pid` (`cg.<pid>.out.<n>`).
fn last_dump_total(dir: &Path, pid: u32) -> Result<u64, String> {
    let prefix = format!("cg.{pid}.out.");
    let newest = std::fs::read_dir(dir)
        .map_err(|e| e.to_string())?
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            name.strip_prefix(&prefix).and_then(|n| n.parse::<u32>().ok()).map(|n| (n, e.path()))
        })
        .max_by_key(|(n, _)| *n)
        .ok_or_else(|| format!("no callgrind dump for pid {pid}"))?
        .1;
    let text = std::fs::read_to_string(&newest).map_err(|e| format!("{}: {e}", newest.display()))?;
    parse_summary(&text).ok_or_else(|| format!("{}: no summary line", newest.display()))
}

/// The instruction count of a callgrind dump (its `summary:` line; the
/// first event is `Ir`).
fn parse_summary(dump: &str) -> Option<u64> {
    dump.lines().find_map(|l| l.strip_prefix("summary:"))?.split_whitespace().next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::parse_summary;

    #[test]
    fn the_summary_line_gives_the_instruction_count() {
        let dump = "version: 1\ncreator: callgrind-3.19.0\nevents: Ir\nfn=(1) main\n3 14\nsummary: 7878991\ntotals: 7879314\n";
        assert_eq!(parse_summary(dump), Some(7_878_991));
        assert_eq!(parse_summary("events: Ir\ntotals: 5\n"), None, "no summary line");
        assert_eq!(parse_summary("summary: many\n"), None);
    }
}
