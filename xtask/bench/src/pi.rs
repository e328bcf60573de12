//! The `pi` group: `examples/pi.rs --no-pi` (a release build) over a
//! sessions folder of 100, 1,000 and 10,000 sessions, each a copy under a
//! new id of a session the real Pi wrote (`crates/durable-pi/tests/fixtures/
//! plain.jsonl`), their activity spread over twelve months, the oldest one
//! long. For each size: the start to the first
//! `GET /v1/state` answered and the first history page after it, with no
//! index yet (cold) and again on the same data (warm: the sessions index in
//! the data folder; five starts, the median), the warm first page checked
//! to be the one the history's listing gives; on the warm start a later page, pages of 200 items of
//! the long conversation (200, 2,000 and 10,000 message pairs long at the
//! three sizes: the first page read in the run, the same page again, the
//! last page), and the agent's resident memory after the cold start and
//! after reading every history page and every page of the long
//! conversation; each with its ratio to the 100-session figure of the same
//! run. Each file's modification time is its last entry's, as Pi leaves it.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::load::{self, Call, Target};
use crate::project_root;

/// Sessions, and the long conversation's message pairs.
const SIZES: [(usize, usize); 3] = [(100, 200), (1_000, 2_000), (10_000, 10_000)];
/// Items in a page of the long conversation (the wire's most).
const LONG_LIMIT: usize = 200;
/// Twelve months, in milliseconds.
const SPREAD_MS: u64 = 365 * 24 * 3600 * 1000;
/// 2026-12-01T00:00:00Z.
const NEWEST_MS: u64 = 1_796_083_200_000;

/// The figures of one size.
struct Figures {
    cold_ms: f64,
    cold_page_ms: f64,
    warm_ms: f64,
    first_page_ms: f64,
    later_page_ms: f64,
    /// The long conversation's first page, first read in the run.
    long_first_ms: f64,
    /// The same page again (median).
    long_ms: f64,
    /// Its last page (median).
    long_last_ms: f64,
    rss_mib: f64,
    /// After reading every history page and every page of the long conversation.
    rss_read_mib: f64,
}

pub(crate) async fn run(dir: &Path) -> Result<(), String> {
    let exe = build_example()?;
    let template =
        std::fs::read_to_string(project_root().join("crates/durable-pi/tests/fixtures/plain.jsonl"))
            .map_err(|e| format!("the Pi session fixture: {e}"))?;
    let mut all = Vec::new();
    for (n, pairs) in SIZES {
        let sessions = dir.join(format!("pi-sessions-{n}"));
        let long_id = generate(&sessions, &template, n, pairs)?;
        let data = dir.join(format!("pi-data-{n}"));
        all.push((n, pairs, measure(&exe, &sessions, &data, &long_id, n).await?));
        let _ = std::fs::remove_dir_all(&sessions);
        let _ = std::fs::remove_dir_all(&data);
    }
    let base = &all[0].2;
    let ratio = |v: f64, b: f64| if b > 0.0 { format!("({:.1}x)", v / b) } else { String::new() };
    println!();
    println!("pi: examples/pi.rs --no-pi over Pi sessions (copies of one the real Pi wrote), --open 20");
    println!(
        "{:>8} {:>12} {:>12} {:>12} {:>12} {:>12} {:>9}",
        "sessions", "cold→state", "cold 1st pg", "warm→state", "warm 1st pg", "later page", "RSS MiB"
    );
    for (n, _, f) in &all {
        println!(
            "{n:>8} {:>7.1} ms {:>5} {:>7.1} ms {:>5} {:>7.1} ms {:>5} {:>7.2} ms {:>5} {:>7.2} ms {:>5} {:>5.1} {:>5}",
            f.cold_ms,
            ratio(f.cold_ms, base.cold_ms),
            f.cold_page_ms,
            ratio(f.cold_page_ms, base.cold_page_ms),
            f.warm_ms,
            ratio(f.warm_ms, base.warm_ms),
            f.first_page_ms,
            ratio(f.first_page_ms, base.first_page_ms),
            f.later_page_ms,
            ratio(f.later_page_ms, base.later_page_ms),
            f.rss_mib,
            ratio(f.rss_mib, base.rss_mib),
        );
    }
    println!();
    println!(
        "pi: the long conversation, pages of {LONG_LIMIT} items (warm start); memory after reading it all"
    );
    println!(
        "{:>8} {:>6} {:>12} {:>12} {:>12} {:>14}",
        "sessions", "pairs", "1st read", "page again", "last page", "RSS read MiB"
    );
    for (n, pairs, f) in &all {
        println!(
            "{n:>8} {pairs:>6} {:>7.2} ms {:>5} {:>7.2} ms {:>5} {:>7.2} ms {:>5} {:>8.1} {:>5}",
            f.long_first_ms,
            ratio(f.long_first_ms, base.long_first_ms),
            f.long_ms,
            ratio(f.long_ms, base.long_ms),
            f.long_last_ms,
            ratio(f.long_last_ms, base.long_last_ms),
            f.rss_read_mib,
            ratio(f.rss_read_mib, base.rss_read_mib),
        );
    }
    Ok(())
}

/// `cargo build --release -p durable-examples --example pi`: the binary.
fn build_example() -> Result<PathBuf, String> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let status = Command::new(cargo)
        .args(["build", "--release", "--quiet", "-p", "durable-examples", "--example", "pi"])
        .current_dir(project_root())
        .status()
        .map_err(|e| format!("cargo build of the pi example: {e}"))?;
    if !status.success() {
        return Err(format!("cargo build of the pi example: {status}"));
    }
    let target =
        std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| project_root().join("target"), PathBuf::from);
    Ok(target.join("release/examples/pi"))
}

fn iso(ms: u64) -> String {
    // Civil date from days since the epoch (Howard Hinnant's algorithm).
    let (days, rem) = ((ms / 86_400_000) as i64, ms % 86_400_000);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    let (h, mi, s, milli) = (rem / 3_600_000, rem / 60_000 % 60, rem / 1000 % 60, rem % 1000);
    format!("{y:04}-{m:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{milli:03}Z")
}

/// Writes `n` sessions into `dir` (the last one `pairs` message pairs
/// long); returns the long one's id.
fn generate(dir: &Path, template: &str, n: usize, pairs: usize) -> Result<String, String> {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    let lines: Vec<Value> =
        template.lines().map(serde_json::from_str).collect::<Result<_, _>>().map_err(|e| e.to_string())?;
    let mut long_id = String::new();
    for k in 0..n {
        let id = format!("0b7d6c2e-5a0f-4a55-9a1e-{k:012x}");
        let at = NEWEST_MS - (k as u64 * SPREAD_MS / n as u64);
        let mut out = String::new();
        let mut push = |mut v: Value, t: u64| {
            if v["type"] == "session" {
                v["id"] = Value::from(id.clone());
            }
            v["timestamp"] = Value::from(iso(t));
            if let Some(m) = v.get_mut("message") {
                m["timestamp"] = Value::from(t);
            }
            out.push_str(&v.to_string());
            out.push('\n');
        };
        for (i, line) in lines.iter().enumerate() {
            push(line.clone(), at + i as u64);
        }
        if k == n - 1 {
            long_id = id.clone();
            // The template's last two messages (a user's, the answer), again and again.
            let (user, answer) = (&lines[lines.len() - 2], &lines[lines.len() - 1]);
            let mut parent = answer["id"].as_str().unwrap_or("").to_owned();
            for p in 0..pairs {
                for (j, msg) in [user, answer].into_iter().enumerate() {
                    let mut v = msg.clone();
                    let entry = format!("l{p:05}{j}");
                    v["id"] = Value::from(entry.clone());
                    v["parentId"] = Value::from(parent);
                    parent = entry;
                    push(v, at + 100 + (2 * p + j) as u64);
                }
            }
        }
        let name = format!("{}_{id}.jsonl", iso(at).replace(':', "-"));
        let path = dir.join(name);
        std::fs::write(&path, out).map_err(|e| e.to_string())?;
        // Pi appends each entry as it is made: the file's time is its last
        // entry's (a second after it here).
        let last = at + 100 + if k == n - 1 { 2 * pairs as u64 } else { lines.len() as u64 };
        std::fs::File::options()
            .write(true)
            .open(&path)
            .and_then(|f| f.set_modified(std::time::UNIX_EPOCH + Duration::from_millis(last + 1_000)))
            .map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(long_id)
}

/// The example, started; killed when dropped.
struct Agent {
    child: Child,
    target: Target,
    started: Instant,
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start(exe: &Path, sessions: &Path, data: &Path) -> Result<Agent, String> {
    let socket = data.with_extension("sock-dir").join("app.sock");
    let started = Instant::now();
    let mut child = Command::new(exe)
        .args(["--no-pi", "--open", "20", "--sessions"])
        .arg(sessions)
        .arg("--data")
        .arg(data)
        .arg("--socket")
        .arg(&socket)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("the pi example: {e}"))?;
    let stdout = child.stdout.take().ok_or("no stdout")?;
    let first = BufReader::new(stdout).lines().next().and_then(Result::ok).unwrap_or_default();
    let address = first.strip_prefix("listening ").ok_or_else(|| format!("the pi example said {first:?}"))?;
    Ok(Agent { target: Target::from_address(address, ""), child, started })
}

async fn get(target: &Target, path: &str) -> Result<(f64, Value), String> {
    let t = Instant::now();
    let (status, body) = load::once(target, &Call::get(path)).await?;
    let ms = t.elapsed().as_secs_f64() * 1000.0;
    if status != 200 {
        return Err(format!("GET {path}: {status}"));
    }
    Ok((ms, serde_json::from_slice(&body).map_err(|e| e.to_string())?))
}

/// Warm starts, each measured once (the first page after a start is asked once per start).
const WARM_STARTS: usize = 5;

/// The median of `times`.
pub(crate) fn middle(mut times: Vec<f64>) -> f64 {
    times.sort_by(f64::total_cmp);
    times.get(times.len() / 2).copied().unwrap_or(0.0)
}

/// The median of five runs of `GET path`, in ms.
async fn median(target: &Target, path: &str) -> Result<f64, String> {
    let mut times = Vec::new();
    for _ in 0..5 {
        times.push(get(target, path).await?.0);
    }
    Ok(middle(times))
}

async fn measure(
    exe: &Path,
    sessions: &Path,
    data: &Path,
    long_id: &str,
    n: usize,
) -> Result<Figures, String> {
    let _ = std::fs::remove_dir_all(data);
    // Cold: no index yet. The first page waits for the history's listing,
    // which reads every file once.
    let agent = start(exe, sessions, data)?;
    get(&agent.target, "/v1/state").await?;
    let cold_ms = agent.started.elapsed().as_secs_f64() * 1000.0;
    let (cold_page_ms, page) = get(&agent.target, "/v1/history?limit=50").await?;
    if page["rows"].as_array().map(Vec::len) != Some(50) {
        return Err(format!("{n} sessions: the first history page is not 50 rows"));
    }
    // Settled: the follow tasks have read their files once.
    tokio::time::sleep(Duration::from_millis(600)).await;
    let rss_mib = load::rss_kib(agent.child.id())? as f64 / 1024.0;
    drop(agent);
    // Warm: the index in the data folder. The first page after a start is
    // asked once per start: five starts, the median of each figure.
    let (mut warm, mut firsts) = (Vec::new(), Vec::new());
    let mut last = None;
    for _ in 0..WARM_STARTS {
        drop(last.take()); // its socket is the next one's
        let agent = start(exe, sessions, data)?;
        get(&agent.target, "/v1/state").await?;
        warm.push(agent.started.elapsed().as_secs_f64() * 1000.0);
        let (ms, page) = get(&agent.target, "/v1/history?limit=50").await?;
        firsts.push(ms);
        last = Some((agent, page));
    }
    let (agent, first_page) = last.ok_or("no warm start")?;
    let (warm_ms, first_page_ms) = (middle(warm), middle(firsts));
    let next = first_page["next"].as_str().ok_or_else(|| format!("{n} sessions: no second history page"))?;
    let later = format!("/v1/history?limit=50&after={next}");
    let later_page_ms = median(&agent.target, &later).await?;
    let long = format!("/v1/history/{long_id}?limit={LONG_LIMIT}");
    let (long_first_ms, page) = get(&agent.target, &long).await?;
    let total = page["row"]["items"].as_u64().ok_or_else(|| format!("{n} sessions: no item count"))?;
    let long_ms = median(&agent.target, &long).await?;
    let last = format!("{long}&after=i{}", total.saturating_sub(LONG_LIMIT as u64));
    let long_last_ms = median(&agent.target, &last).await?;
    // Every history page, then every page of the long conversation.
    read_all(&agent.target, "/v1/history?limit=50", "rows").await?;
    read_all(&agent.target, &long, "items").await?;
    // The first page, told before the listing, is the listing's.
    let (_, listed) = get(&agent.target, "/v1/history?limit=50").await?;
    if listed["rows"] != first_page["rows"] || listed["next"] != first_page["next"] {
        let rows = |p: &Value| p["rows"].as_array().cloned().unwrap_or_default();
        let (told, listed_rows) = (rows(&first_page), rows(&listed));
        let at = told.iter().zip(&listed_rows).position(|(a, b)| a != b);
        return Err(format!(
            "{n} sessions: the first page after the start is not the listing's: {} rows and {}, first different {at:?}: {} and {}",
            told.len(),
            listed_rows.len(),
            at.map_or(String::new(), |i| told[i].to_string()),
            at.map_or(String::new(), |i| listed_rows[i].to_string()),
        ));
    }
    let rss_read_mib = load::rss_kib(agent.child.id())? as f64 / 1024.0;
    Ok(Figures {
        cold_ms,
        cold_page_ms,
        warm_ms,
        first_page_ms,
        later_page_ms,
        long_first_ms,
        long_ms,
        long_last_ms,
        rss_mib,
        rss_read_mib,
    })
}

/// Follows `path`'s pages to the end; the number of `key` read.
async fn read_all(target: &Target, path: &str, key: &str) -> Result<usize, String> {
    let (mut read, mut after) = (0, None::<String>);
    loop {
        let page_path = match &after {
            None => path.to_owned(),
            Some(cursor) => format!("{path}&after={cursor}"),
        };
        let (_, page) = get(target, &page_path).await?;
        read += page[key].as_array().map_or(0, Vec::len);
        match page["next"].as_str() {
            Some(next) => after = Some(next.to_owned()),
            None => return Ok(read),
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn times_are_written_as_pi_writes_them() {
        assert_eq!(super::iso(super::NEWEST_MS), "2026-12-01T00:00:00.000Z");
        assert_eq!(super::iso(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(super::iso(951_782_400_123), "2000-02-29T00:00:00.123Z");
    }
}
