//! The `acp` group: what relaying an ACP agent through durable-acp costs a
//! turn. The agent is pi-acp driving the real Pi with the scripted model of
//! `examples/tests/acp/faux.ts` (all from `cargo xtask install-pi`), which
//! answers `"You said: <text>"` at once, so the figure is the relay's.
//!
//! - direct: this client speaks ACP to pi-acp itself (JSON lines on its
//!   stdin and stdout): from writing `session/prompt` until its response,
//!   which comes after the turn's last chunk;
//! - relayed: `durable-agent acp` (a release build, run as a process: this
//!   package stays on Rust 1.85 and durable-acp needs 1.88) over its
//!   socket: from the `send` until a client polling the pane's events in a
//!   tight loop reads the reply final (writes on one kept-alive
//!   connection, polls on another, as Collie keeps them);
//! - floor: the same client against the least relay that keeps the wire's
//!   §9.1 (a send committed to SQLite before its prompt), this program's
//!   `bench-relay` ([`crate::relay`]), in a process of its own: what any
//!   relay costs on this machine, so that the relayed figure reads as
//!   durable-acp's own part (relayed ÷ floor) and the part no relay can
//!   avoid (floor ÷ direct).
//!
//! The three sides run at once and take their turns in rounds (direct,
//! floor, relayed), so that the load of a neighbour on a shared machine
//! falls on all three alike; one warm-up round, then [`TURNS`] rounds; the
//! median and the 90th percentile of each side, and the ratios of the
//! medians.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use http_body_util::BodyExt;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};

use crate::load::{self, Call, Target};
use crate::{project_root, relay};

/// Measured turns on each side.
const TURNS: usize = 40;
/// A turn that takes longer has failed.
const TURN_LIMIT: Duration = Duration::from_secs(30);

/// Median and 90th percentile, in ms.
struct Times {
    p50: f64,
    p90: f64,
}

fn times(mut ms: Vec<f64>) -> Times {
    ms.sort_by(f64::total_cmp);
    let at = |q: f64| ms[((ms.len() - 1) as f64 * q).round() as usize];
    Times { p50: at(0.5), p90: at(0.9) }
}

pub(crate) async fn run(dir: &Path) -> Result<(), String> {
    let tools = project_root().join(".tools/bin");
    let (pi_acp, pi_faux) = (tools.join("pi-acp"), tools.join("pi-faux"));
    if !pi_acp.exists() || !pi_faux.exists() {
        // As the node baseline: a figure the machine cannot give is said, not failed.
        println!();
        println!(
            "acp: not measured: pi-acp and Pi are not in {} (`cargo xtask install-pi`)",
            tools.display()
        );
        return Ok(());
    }
    let exe = build_example()?;
    println!();
    println!(
        "acp: a scripted turn (pi-acp 0.0.34 + Pi 1.6.0, faux model), send → final reply, {TURNS} turns after one"
    );
    // The three sides run at once, idle but for their turn, and take
    // their turns in rounds (direct, floor, relayed): a neighbour's load
    // on this shared machine falls on all three alike, not on one block.
    let mut direct = Direct::start(&setup(dir, "acp-direct")?, &pi_acp, &pi_faux).await?;
    let root = setup(dir, "acp-floor")?;
    let mut floor = Relayed::start(floor_relay(&root, &pi_acp, &pi_faux)?, &root).await?;
    let root = setup(dir, "acp-relayed")?;
    let mut relayed = Relayed::start(example(&root, &exe, &pi_acp, &pi_faux), &root).await?;
    let (mut direct_ms, mut floor_ms, mut relayed_ms) = (Vec::new(), Vec::new(), Vec::new());
    for turn in 0..=TURNS {
        let (d, f, r) = (direct.turn(turn).await?, floor.turn(turn).await?, relayed.turn(turn).await?);
        // The first round warms each side up.
        if turn > 0 {
            direct_ms.push(d);
            floor_ms.push(f);
            relayed_ms.push(r);
        }
    }
    direct.end().await;
    drop((floor, relayed));
    let (direct, floor, relayed) = (times(direct_ms), times(floor_ms), times(relayed_ms));
    println!("{:<48} {:>9} {:>9}", "", "p50 ms", "p90 ms");
    println!("{:<48} {:>9.1} {:>9.1}", "direct over ACP (JSON lines to pi-acp)", direct.p50, direct.p90);
    println!(
        "{:<48} {:>9.1} {:>9.1}",
        "floor: a bare relay, one commit (socket, polled)", floor.p50, floor.p90
    );
    println!(
        "{:<48} {:>9.1} {:>9.1}",
        "relayed through durable-acp (socket, polled)", relayed.p50, relayed.p90
    );
    println!("floor ÷ direct (medians): {:.2}×", floor.p50 / direct.p50);
    println!("relayed ÷ floor (medians): {:.2}×", relayed.p50 / floor.p50);
    println!("relayed ÷ direct (medians): {:.2}×", relayed.p50 / direct.p50);
    Ok(())
}

/// `cargo build --release -p durable-agents`: the binary.
fn build_example() -> Result<PathBuf, String> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let status = Command::new(cargo)
        .args(["build", "--release", "--quiet", "-p", "durable-agents", "--bin", "durable-agent"])
        .current_dir(project_root())
        .status()
        .map_err(|e| format!("cargo build of durable-agent: {e}"))?;
    if !status.success() {
        return Err(format!("cargo build of durable-agent: {status}"));
    }
    let target =
        std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| project_root().join("target"), PathBuf::from);
    Ok(target.join("release/durable-agent"))
}

/// A fresh folder: `home` (pi-acp's `HOME`), `pi` (Pi's folder, quiet
/// start-up), `project` (the session's cwd).
fn setup(dir: &Path, name: &str) -> Result<PathBuf, String> {
    let root = dir.join(name);
    let _ = std::fs::remove_dir_all(&root);
    for sub in ["home", "pi", "project"] {
        std::fs::create_dir_all(root.join(sub)).map_err(|e| e.to_string())?;
    }
    std::fs::write(root.join("pi/settings.json"), "{\"quietStartup\": true}\n").map_err(|e| e.to_string())?;
    Ok(root)
}

/// The environment pi-acp and Pi run with, on either side.
fn agent_env(cmd: &mut impl EnvTarget, root: &Path, pi_faux: &Path) {
    let path = std::env::var_os("PATH").unwrap_or_default();
    // With a `pi` on PATH pi-acp asks it and npm for versions.
    let dirs: Vec<PathBuf> = std::env::split_paths(&path).filter(|d| !d.join("pi").exists()).collect();
    let path = std::env::join_paths(dirs).unwrap_or_default();
    cmd.set("HOME", root.join("home").as_os_str());
    cmd.set("PI_CODING_AGENT_DIR", root.join("pi").as_os_str());
    cmd.set("PI_ACP_PI_COMMAND", pi_faux.as_os_str());
    cmd.set("PI_FAUX_EXTENSION", project_root().join("examples/tests/acp/faux.ts").as_os_str());
    cmd.set("PI_OFFLINE", "1".as_ref());
    cmd.set("PI_SKIP_VERSION_CHECK", "1".as_ref());
    cmd.set("PI_TELEMETRY", "0".as_ref());
    cmd.set("PATH", &path);
}

/// `env` on a std or a tokio command.
trait EnvTarget {
    fn set(&mut self, key: &str, value: &std::ffi::OsStr);
}

impl EnvTarget for Command {
    fn set(&mut self, key: &str, value: &std::ffi::OsStr) {
        self.env(key, value);
    }
}

impl EnvTarget for tokio::process::Command {
    fn set(&mut self, key: &str, value: &std::ffi::OsStr) {
        self.env(key, value);
    }
}

/// pi-acp on pipes: requests out, the response to each read back.
struct Direct {
    child: tokio::process::Child,
    stdin: tokio::process::ChildStdin,
    lines: tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
    next_id: u64,
    session: String,
}

impl Direct {
    /// Sends a request and reads lines until its response (updates are
    /// skipped; pi-acp asks nothing of a client in these turns).
    async fn call(&mut self, method: &str, params: Value) -> Result<Value, String> {
        self.next_id += 1;
        let id = self.next_id;
        let line = relay::request_line(id, method, params);
        self.stdin.write_all(line.as_bytes()).await.map_err(|e| format!("pi-acp's stdin: {e}"))?;
        let read = async {
            loop {
                let line = self.lines.next_line().await.map_err(|e| e.to_string())?;
                let line = line.ok_or("pi-acp ended its output")?;
                let Ok(msg) = serde_json::from_str::<Value>(&line) else { continue };
                if msg["id"] == id && msg.get("method").is_none() {
                    return relay::result_of(method, &msg);
                }
            }
        };
        tokio::time::timeout(TURN_LIMIT, read).await.map_err(|_| format!("{method}: no response"))?
    }
}

impl Direct {
    /// pi-acp started, initialized, with a session of its own.
    async fn start(root: &Path, pi_acp: &Path, pi_faux: &Path) -> Result<Direct, String> {
        let mut cmd = tokio::process::Command::new(pi_acp);
        agent_env(&mut cmd, root, pi_faux);
        let mut child = cmd
            .current_dir(root.join("project"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("{}: {e}", pi_acp.display()))?;
        let stdin = child.stdin.take().ok_or("no stdin")?;
        let lines = tokio::io::BufReader::new(child.stdout.take().ok_or("no stdout")?).lines();
        let mut agent = Direct { child, stdin, lines, next_id: 0, session: String::new() };
        agent.call("initialize", json!({"protocolVersion": 1, "clientCapabilities": {}})).await?;
        let cwd = root.join("project");
        let session = agent.call("session/new", json!({"cwd": cwd, "mcpServers": []})).await?;
        agent.session = session["sessionId"].as_str().ok_or("session/new gave no sessionId")?.to_owned();
        Ok(agent)
    }

    /// One turn: `session/prompt` until its response, in ms.
    async fn turn(&mut self, turn: usize) -> Result<f64, String> {
        let prompt =
            json!({"sessionId": self.session, "prompt": [{"type": "text", "text": format!("hello {turn}")}]});
        let t = Instant::now();
        let r = self.call("session/prompt", prompt).await?;
        let elapsed = t.elapsed().as_secs_f64() * 1000.0;
        if r["stopReason"] != "end_turn" {
            return Err(format!("direct turn {turn}: {r}"));
        }
        Ok(elapsed)
    }

    /// Its input closed: pi-acp ends, and its Pi.
    async fn end(self) {
        let Direct { mut child, stdin, .. } = self;
        drop(stdin);
        let _ = child.wait().await;
    }
}

/// A relay (the example, or the floor relay), ended when dropped.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        // SIGTERM: the example ends its agents on the way out, the floor
        // relay its pi-acp (which ends its Pi). Both stay in the bench's
        // process group, so a Ctrl-C reaches them too.
        let pid = i32::try_from(self.0.id()).ok().and_then(rustix::process::Pid::from_raw);
        if let Some(pid) = pid {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline && !matches!(self.0.try_wait(), Ok(Some(_))) {
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `call` on the kept-alive connection `sender`, as Collie sends its
/// requests: when the agent has ended that connection, on a new one (a
/// write sent again is replayed by its request id, never run twice).
async fn kept(
    sender: &mut load::Sender,
    target: &Target,
    call: &Call,
) -> Result<(u16, bytes::Bytes), String> {
    for _ in 0..3 {
        let resp = match sender.send_request(load::request(target, call)).await {
            Ok(resp) => resp,
            Err(e) if e.is_canceled() || e.is_closed() => {
                *sender = load::connect(target).await?;
                continue;
            }
            Err(e) => return Err(e.to_string()),
        };
        let status = resp.status().as_u16();
        let body = resp.into_body().collect().await.map_err(|e| e.to_string())?.to_bytes();
        return Ok((status, body));
    }
    Err(format!("{}: the connection kept closing", call.path))
}

/// A `POST` that must answer 200: its body.
async fn post(sender: &mut load::Sender, target: &Target, path: &str, body: Value) -> Result<Value, String> {
    let (status, answer) = kept(sender, target, &Call::post(path, body.to_string())).await?;
    if status != 200 {
        return Err(format!("POST {path}: {status} {}", String::from_utf8_lossy(&answer)));
    }
    serde_json::from_slice(&answer).map_err(|e| e.to_string())
}

/// `durable-agent acp` on pi-acp, on a socket in `root`.
fn example(root: &Path, exe: &Path, pi_acp: &Path, pi_faux: &Path) -> Command {
    let mut cmd = Command::new(exe);
    cmd.args(["acp", "--agent"])
        .arg(pi_acp)
        .arg("--cwd")
        .arg(root.join("project"))
        .arg("--data")
        .arg(root.join("data"))
        .arg("--socket")
        .arg(root.join("sock/app.sock"));
    agent_env(&mut cmd, root, pi_faux);
    cmd
}

/// The floor relay (`xtask-bench bench-relay`, this program) on pi-acp,
/// on a socket in `root`.
fn floor_relay(root: &Path, pi_acp: &Path, pi_faux: &Path) -> Result<Command, String> {
    let exe = std::env::current_exe().map_err(|e| format!("this program's path: {e}"))?;
    let mut cmd = Command::new(exe);
    cmd.arg("bench-relay")
        .arg("--agent")
        .arg(pi_acp)
        .arg("--cwd")
        .arg(root.join("project"))
        .arg("--db")
        .arg(root.join("data/sends.sqlite3"))
        .arg("--socket")
        .arg(root.join("sock/app.sock"));
    agent_env(&mut cmd, root, pi_faux);
    Ok(cmd)
}

/// A relay and its client: writes on one kept-alive connection, polls on
/// another, as Collie does.
struct Relayed {
    // Dropped last: the relay ends after its client.
    writer: load::Sender,
    poller: load::Sender,
    target: Target,
    pane: String,
    after: u64,
    _server: Server,
}

impl Relayed {
    /// Starts the relay `cmd` (it prints `listening <socket>`) and its
    /// conversation (a starter, answered).
    async fn start(mut cmd: Command, root: &Path) -> Result<Relayed, String> {
        let socket = root.join("sock/app.sock");
        let program = cmd.get_program().to_string_lossy().into_owned();
        let mut child = cmd
            .env_remove("COLLIE_TOKEN")
            .env_remove("COLLIE_TOKEN_NEXT")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("{program}: {e}"))?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let server = Server(child);
        let first = BufReader::new(stdout).lines().next().and_then(Result::ok).unwrap_or_default();
        if first.strip_prefix("listening ") != socket.to_str() {
            return Err(format!("{program} said {first:?}"));
        }
        let target = Target::from_address(socket.to_str().ok_or("a socket path that is not UTF-8")?, "");
        let mut writer = load::connect(&target).await?;
        let started = post(
            &mut writer,
            &target,
            "/v1/starters/new-conversation",
            json!({"requestId": "st-0", "text": "hello"}),
        )
        .await?;
        let pane =
            started["pane"].as_str().ok_or_else(|| format!("the starter answered {started}"))?.to_owned();
        let mut poller = load::connect(&target).await?;
        let mut after = 0u64;
        wait_reply(&mut poller, &target, &pane, &mut after, "You said: hello").await?;
        wait_idle(&mut writer, &target, &pane).await?;
        Ok(Relayed { writer, poller, target, pane, after, _server: server })
    }

    /// One turn: from the send until the poller reads the final reply, in
    /// ms; then the turn's end (the pane idle), as on the direct side.
    async fn turn(&mut self, turn: usize) -> Result<f64, String> {
        let text = format!("hello {turn}");
        let send = json!({"requestId": format!("r-{turn}"), "text": text});
        let t = Instant::now();
        post(&mut self.writer, &self.target, &format!("/v1/panes/{}/send", self.pane), send).await?;
        let reply = format!("You said: {text}");
        wait_reply(&mut self.poller, &self.target, &self.pane, &mut self.after, &reply).await?;
        let elapsed = t.elapsed().as_secs_f64() * 1000.0;
        wait_idle(&mut self.writer, &self.target, &self.pane).await?;
        Ok(elapsed)
    }
}

/// Polls the pane's events after `after`, without pause, until a final
/// `reply` item with `text`.
async fn wait_reply(
    poller: &mut load::Sender,
    target: &Target,
    pane: &str,
    after: &mut u64,
    text: &str,
) -> Result<(), String> {
    let deadline = Instant::now() + TURN_LIMIT;
    while Instant::now() < deadline {
        let call = Call::get(format!("/v1/panes/{pane}/events?after={after}"));
        let (_, body) = kept(poller, target, &call).await?;
        let page: Value = serde_json::from_slice(&body).map_err(|e| e.to_string())?;
        if let Some(next) = page["next"].as_u64() {
            *after = next;
        }
        let items = page["events"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|e| e["type"] == "item")
            .map(|e| &e["item"]);
        // A reader behind the tail gets the view instead.
        let items = items.chain(page["items"].as_array().into_iter().flatten());
        let mut found = false;
        for item in items {
            if item["kind"] == "reply" && item["text"] == text && item.get("partial").is_none() {
                found = true;
            }
        }
        if found {
            return Ok(());
        }
    }
    Err(format!("no reply {text:?} within {TURN_LIMIT:?}"))
}

async fn wait_idle(sender: &mut load::Sender, target: &Target, pane: &str) -> Result<(), String> {
    let deadline = Instant::now() + TURN_LIMIT;
    while Instant::now() < deadline {
        let (_, body) = kept(sender, target, &Call::get("/v1/state")).await?;
        let state: Value = serde_json::from_slice(&body).map_err(|e| e.to_string())?;
        let idle =
            state["panes"].as_array().into_iter().flatten().any(|p| p["id"] == pane && p["state"] == "idle");
        if idle {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    Err(format!("{pane} still working after {TURN_LIMIT:?}"))
}

#[cfg(test)]
mod tests {
    #[test]
    fn median_and_ninetieth_percentile() {
        let t = super::times((1..=10).map(f64::from).collect());
        assert_eq!((t.p50, t.p90), (6.0, 9.0));
        let t = super::times(vec![3.0]);
        assert_eq!((t.p50, t.p90), (3.0, 3.0));
    }
}
