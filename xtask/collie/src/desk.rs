//! The support desk as a child process: started with a data folder, knobs and a
//! transport, read until it prints `listening <address>`, killed with SIGKILL.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::process::{Child, Command};

use crate::check::CaseResult;
use durable_cli::conformance::client::{Client, fingerprint_in};

/// How long a desk may take from spawn to `listening`.
const START_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Transport {
    Socket,
    Tls,
}

impl Transport {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Transport::Socket => "socket",
            Transport::Tls => "tls",
        }
    }
}

/// Everything needed to start (and restart) one desk.
#[derive(Clone, Debug)]
pub(crate) struct DeskSpec {
    pub(crate) bin: PathBuf,
    pub(crate) transport: Transport,
    /// The desk's data folder (kept across restarts).
    pub(crate) data: PathBuf,
    /// The socket path (socket transport).
    pub(crate) socket: PathBuf,
    pub(crate) knobs: Vec<String>,
    /// `COLLIE_TOKEN` (HTTPS).
    pub(crate) token: String,
    /// `COLLIE_TOKEN_NEXT` (HTTPS).
    pub(crate) token_next: String,
}

/// What a child wrote, kept for checks and for failure messages.
#[derive(Clone, Default, Debug)]
pub(crate) struct Output(Arc<Mutex<String>>);

impl Output {
    pub(crate) fn text(&self) -> String {
        self.0.lock().expect("output lock").clone()
    }

    fn push(&self, line: &str) {
        let mut text = self.0.lock().expect("output lock");
        text.push_str(line);
        text.push('\n');
    }

    /// The last lines, for a failure message.
    pub(crate) fn tail(&self, lines: usize) -> String {
        let text = self.text();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join(" | ")
    }
}

/// A running desk.
pub(crate) struct Desk {
    child: Child,
    pub(crate) spec: DeskSpec,
    pub(crate) client: Client,
    pub(crate) stderr: Output,
    /// The address after `listening`.
    pub(crate) address: String,
    /// HTTPS: whether the certificate is pinned to a printed fingerprint (else to
    /// the first one seen).
    pub(crate) pinned: bool,
}

/// How a start went when it may legitimately fail (start-up refusals).
pub(crate) enum Started {
    Listening(Box<Desk>),
    Exited { status: ExitStatus, stderr: String, stdout: String },
}

impl DeskSpec {
    fn command(&self) -> Command {
        let mut cmd = Command::new(&self.bin);
        match self.transport {
            Transport::Socket => {
                cmd.arg("--socket").arg(&self.socket);
            }
            Transport::Tls => {
                cmd.args(["--listen", "127.0.0.1:0", "--self-signed"]);
            }
        }
        cmd.arg("--data").arg(&self.data).args(&self.knobs);
        cmd.env("COLLIE_TOKEN", &self.token)
            .env("COLLIE_TOKEN_NEXT", &self.token_next)
            .env_remove("COLLIE_DURABLE_SOCKET")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        cmd
    }
}

impl Desk {
    /// Starts a desk and waits for `listening`; an early exit is an error.
    pub(crate) async fn start(spec: DeskSpec) -> CaseResult<Desk> {
        match Desk::try_start(spec).await? {
            Started::Listening(desk) => Ok(*desk),
            Started::Exited { status, stderr, .. } => Err(format!(
                "the desk exited before listening ({status}); stderr: {}",
                last_lines(&stderr, 6)
            )),
        }
    }

    /// Starts a desk; an exit before `listening` is reported, not an error.
    pub(crate) async fn try_start(spec: DeskSpec) -> CaseResult<Started> {
        let mut child =
            spec.command().spawn().map_err(|e| format!("starting {}: {e}", spec.bin.display()))?;
        let stdout = Output::default();
        let stderr = Output::default();
        drain(child.stderr.take().expect("piped stderr"), stderr.clone());
        let mut lines = BufReader::new(child.stdout.take().expect("piped stdout")).lines();

        let mut printed_pin = None;
        let wait_listening = async {
            while let Ok(Some(line)) = lines.next_line().await {
                stdout.push(&line);
                if spec.transport == Transport::Tls && !line.contains(&spec.token) {
                    if let Some(pin) = fingerprint_in(&line) {
                        printed_pin = Some(pin);
                    }
                }
                if let Some(address) = line.strip_prefix("listening ") {
                    return Some(address.trim().to_owned());
                }
            }
            None
        };
        let address = match tokio::time::timeout(START_TIMEOUT, wait_listening).await {
            Ok(Some(address)) => address,
            Ok(None) => {
                // stdout closed: the desk is exiting.
                let status = tokio::time::timeout(Duration::from_secs(10), child.wait())
                    .await
                    .map_err(|_| {
                        "the desk closed its stdout without printing `listening` or exiting".to_owned()
                    })?
                    .map_err(|e| format!("waiting for the desk: {e}"))?;
                // Let the stderr reader catch up.
                tokio::time::sleep(Duration::from_millis(100)).await;
                return Ok(Started::Exited { status, stderr: stderr.text(), stdout: stdout.text() });
            }
            Err(_) => {
                let _ = child.start_kill();
                return Err(format!(
                    "the desk printed no `listening` line in {} s; stderr: {}",
                    START_TIMEOUT.as_secs(),
                    stderr.tail(6)
                ));
            }
        };
        if spec.transport == Transport::Tls && printed_pin.is_none() {
            // `--self-signed` prints its fingerprint on stderr; give that reader a moment.
            for _ in 0..25 {
                printed_pin =
                    stderr.text().lines().filter(|l| !l.contains(&spec.token)).find_map(fingerprint_in);
                if printed_pin.is_some() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        let pinned = printed_pin.is_some();
        let rest = stdout.clone();
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                rest.push(&line);
            }
        });
        let client = match spec.transport {
            Transport::Socket => Client::socket(spec.socket.clone()),
            Transport::Tls => {
                let addr = parse_tcp_address(&address)?;
                Client::https(addr, printed_pin, Some(spec.token.clone()))
            }
        };
        Ok(Started::Listening(Box::new(Desk { child, spec, client, stderr, address, pinned })))
    }

    /// SIGKILL, then reap.
    pub(crate) async fn kill(mut self) -> CaseResult<DeskSpec> {
        self.child.start_kill().map_err(|e| format!("killing the desk: {e}"))?;
        tokio::time::timeout(Duration::from_secs(10), self.child.wait())
            .await
            .map_err(|_| "the killed desk did not exit in 10 s".to_owned())?
            .map_err(|e| format!("reaping the desk: {e}"))?;
        Ok(self.spec.clone())
    }

    /// SIGKILL and start again on the same data folder (and socket path) with these knobs.
    pub(crate) async fn restart(self, knobs: &[&str]) -> CaseResult<Desk> {
        let mut spec = self.kill().await?;
        spec.knobs = knobs.iter().map(|k| (*k).to_owned()).collect();
        Desk::start(spec).await
    }

    /// Whether the child has exited (for crash reports).
    pub(crate) fn exited(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }
}

fn drain<S>(stream: S, into: Output)
where
    S: AsyncRead + Unpin + Send + 'static,
{
    tokio::spawn(async move {
        let mut reader = BufReader::new(stream).lines();
        while let Ok(Some(line)) = reader.next_line().await {
            into.push(&line);
        }
    });
}

/// `https://127.0.0.1:4000`, `127.0.0.1:4000/`, `tls://…` → the socket address.
fn parse_tcp_address(address: &str) -> CaseResult<SocketAddr> {
    let word = address.split_whitespace().next().unwrap_or("");
    let rest = word.split_once("://").map_or(word, |(_, rest)| rest);
    let rest = rest.trim_end_matches('/');
    rest.parse().map_err(|_| format!("cannot read a TCP address in `listening {address}`"))
}

fn last_lines(text: &str, n: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(n)..].join(" | ")
}

/// A private folder for one desk: `<root>/<n>` with mode 0700.
pub(crate) fn private_dir(path: &Path) -> CaseResult<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(path)
        .map_err(|e| format!("creating {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::parse_tcp_address;

    #[test]
    fn listening_addresses_are_read_with_or_without_a_scheme() {
        for a in ["https://127.0.0.1:4000", "127.0.0.1:4000", "https://127.0.0.1:4000/ (self-signed)"] {
            assert_eq!(parse_tcp_address(a).unwrap().port(), 4000, "{a}");
        }
        assert!(parse_tcp_address("/tmp/x.sock").is_err());
    }
}
