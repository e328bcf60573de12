//! `--agent-cmd`: the agent as a child of the run, for what needs a restart.
//! Started with `sh -c` in a process group of its own, so that `SIGKILL`
//! reaches the agent and not only the shell; read until it answers
//! `GET /hello`; over HTTPS its certificate is pinned to the fingerprint it
//! printed (or, with `--insecure` on loopback, the first leaf seen).

use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::process::{Child, Command};

use super::check::CaseResult;
use super::client::Client;
use crate::link::{AnswerLimit, Target, Token};
use crate::pin::fingerprint_in;

/// How long an agent may take from its start to its first answer.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// The longest line of the agent's output kept (the rest of it is
/// dropped): an agent that prints without a newline must not take the
/// run's memory.
const LINE_MAX: usize = 64 * 1024;

/// What a child wrote, kept for checks and for failure messages.
#[derive(Clone, Default, Debug)]
pub(crate) struct Output(Arc<Mutex<String>>);

impl Output {
    pub(crate) fn text(&self) -> String {
        self.0.lock().map(|t| t.clone()).unwrap_or_default()
    }

    fn push(&self, line: &str) {
        if let Ok(mut text) = self.0.lock() {
            // A chatty agent: keep the last 1 MiB.
            if text.len() > 1 << 20 {
                let cut = text.len() - (1 << 19);
                let cut = (cut..text.len()).find(|i| text.is_char_boundary(*i)).unwrap_or(0);
                text.drain(..cut);
            }
            text.push_str(line);
            text.push('\n');
        }
    }

    /// The last lines, for a failure message.
    pub(crate) fn tail(&self, lines: usize) -> String {
        let text = self.text();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join(" | ")
    }
}

/// How to start the agent and reach it.
#[derive(Clone)]
pub(crate) struct AgentSpec {
    /// The command, run with `sh -c`.
    pub(crate) cmd: String,
    /// Variables added to the agent's environment.
    pub(crate) env: Vec<(String, String)>,
    pub(crate) target: Target,
    pub(crate) token: Option<Token>,
    /// HTTPS: the pin to use when the agent prints no fingerprint.
    pub(crate) pin: Option<[u8; 32]>,
    /// HTTPS: trust the first leaf seen when no fingerprint is known.
    pub(crate) insecure: bool,
    /// The most read of one answer (`--max-answer-mib`).
    pub(crate) answer_limit: AnswerLimit,
}

impl std::fmt::Debug for AgentSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The environment's names only: `COLLIE_TOKEN`'s value is a secret.
        let env: Vec<&str> = self.env.iter().map(|(name, _)| name.as_str()).collect();
        f.debug_struct("AgentSpec")
            .field("cmd", &self.cmd)
            .field("env", &env)
            .field("target", &self.target)
            .field("token", &self.token)
            .field("insecure", &self.insecure)
            .finish_non_exhaustive()
    }
}

/// A running agent.
#[derive(Debug)]
pub(crate) struct Agent {
    pub(crate) spec: AgentSpec,
    child: Child,
    pub(crate) stdout: Output,
    pub(crate) stderr: Output,
    pub(crate) client: Client,
}

fn drain<S>(stream: S, into: Output)
where
    S: AsyncRead + Unpin + Send + 'static,
{
    tokio::spawn(async move {
        let mut reader = BufReader::new(stream);
        let mut line = Vec::new();
        while let Ok(true) = next_line(&mut reader, &mut line, LINE_MAX).await {
            into.push(&String::from_utf8_lossy(&line));
        }
    });
}

/// Reads the next line (without its newline) into `line`, keeping at most
/// `max` bytes of it and dropping the rest; `false` at the end of the
/// output. Bytes that are not UTF-8 do not stop the reading (the pipe is
/// drained to its end, or the agent would block writing to it).
async fn next_line<S>(reader: &mut BufReader<S>, line: &mut Vec<u8>, max: usize) -> std::io::Result<bool>
where
    S: AsyncRead + Unpin,
{
    line.clear();
    let mut read_any = false;
    loop {
        let buf = reader.fill_buf().await?;
        if buf.is_empty() {
            return Ok(read_any);
        }
        read_any = true;
        let (taken, ended) = match buf.iter().position(|b| *b == b'\n') {
            Some(at) => (at, true),
            None => (buf.len(), false),
        };
        let room = max.saturating_sub(line.len());
        line.extend_from_slice(&buf[..taken.min(room)]);
        reader.consume(if ended { taken + 1 } else { taken });
        if ended {
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            return Ok(true);
        }
    }
}

/// The agent's output for a message, the token (should the agent print
/// it) replaced.
fn redact(text: &str, secret: Option<&str>) -> String {
    match secret {
        Some(secret) if !secret.is_empty() => text.replace(secret, "<token>"),
        _ => text.to_owned(),
    }
}

impl Agent {
    /// Starts the agent and waits until it answers `GET /hello`.
    pub(crate) async fn start(spec: AgentSpec) -> CaseResult<Agent> {
        let mut cmd = Command::new("sh");
        cmd.arg("-c").arg(&spec.cmd);
        for (name, value) in &spec.env {
            cmd.env(name, value);
        }
        cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).kill_on_drop(true);
        // A group of its own: a kill reaches what the command started.
        #[cfg(unix)]
        cmd.process_group(0);
        let mut child = cmd.spawn().map_err(|e| format!("starting `sh -c {:?}`: {e}", spec.cmd))?;
        let (stdout, stderr) = (Output::default(), Output::default());
        if let Some(out) = child.stdout.take() {
            drain(out, stdout.clone());
        }
        if let Some(err) = child.stderr.take() {
            drain(err, stderr.clone());
        }
        let https = matches!(&spec.target, Target::Url(u) if u.https);
        let secret = spec.token.as_ref().map(|t| t.secret().to_owned());
        let started = Instant::now();
        let mut agent = Agent { spec, child, stdout, stderr, client: Client::socket(Default::default()) };
        // Why the last try failed, for the message if none succeeds.
        let mut last_failure = String::new();
        loop {
            if let Ok(Some(status)) = agent.child.try_wait() {
                tokio::time::sleep(Duration::from_millis(100)).await;
                return Err(format!(
                    "the agent exited before it answered ({status}); stderr: {}",
                    redact(&agent.stderr.tail(4), secret.as_deref())
                ));
            }
            let printed = if https {
                let text = format!("{}\n{}", agent.stdout.text(), agent.stderr.text());
                text.lines()
                    .rev()
                    .filter(|l| secret.as_ref().is_none_or(|s| !l.contains(s.as_str())))
                    .find_map(fingerprint_in)
            } else {
                None
            };
            if started.elapsed() > START_TIMEOUT {
                agent.kill().await;
                let pin = if https && printed.is_none() && agent.spec.pin.is_none() && !agent.spec.insecure {
                    " (over HTTPS: it printed no fingerprint; give --fingerprint, or --insecure on loopback)"
                } else {
                    ""
                };
                return Err(format!(
                    "the agent did not answer GET /hello within {} s{pin}{}; stderr: {}",
                    START_TIMEOUT.as_secs(),
                    redact(&last_failure, secret.as_deref()),
                    redact(&agent.stderr.tail(4), secret.as_deref())
                ));
            }
            // A pin the user gave wins over a fingerprint read from the output.
            let pin = agent.spec.pin.or(printed);
            if !https || pin.is_some() || agent.spec.insecure {
                let spec = &agent.spec;
                let client = Client::at(spec.target.clone(), spec.token.clone(), pin, spec.answer_limit);
                match client.get("/hello").await {
                    Ok(r) if r.status == 200 => {
                        agent.client = client;
                        return Ok(agent);
                    }
                    Ok(r) if r.status == 401 => {
                        agent.kill().await;
                        return Err("the agent refused the token (401): is COLLIE_TOKEN the agent's?".into());
                    }
                    Ok(r) => last_failure = format!(" (last: {} {})", r.status, r.body_text()),
                    Err(e) => last_failure = format!(" (last: {e})"),
                }
            } else if agent.stdout.text().contains("listening") && started.elapsed() > Duration::from_secs(5)
            {
                agent.kill().await;
                return Err("the agent serves HTTPS but printed no fingerprint: give --fingerprint, or --insecure on loopback".into());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// `SIGKILL` to the agent's process group, then reap.
    pub(crate) async fn kill(&mut self) {
        kill_group(&self.child);
        let _ = self.child.start_kill();
        let _ = tokio::time::timeout(Duration::from_secs(10), self.child.wait()).await;
    }

    /// `SIGKILL`, then the same command again.
    pub(crate) async fn restart(&mut self) -> CaseResult<()> {
        self.kill().await;
        let next = Agent::start(self.spec.clone()).await?;
        *self = next;
        Ok(())
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        kill_group(&self.child);
    }
}

/// `SIGKILL` to the process group the agent leads (its own and what it
/// started); elsewhere, the agent's process alone.
fn kill_group(child: &tokio::process::Child) {
    #[cfg(unix)]
    if let Some(pid) = child.id().and_then(|id| rustix::process::Pid::from_raw(id as i32)) {
        let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
    }
    #[cfg(not(unix))]
    let _ = child;
}

#[cfg(test)]
mod tests {
    use super::redact;

    #[test]
    fn the_token_never_reaches_a_message() {
        assert_eq!(redact("got s3cret here", Some("s3cret")), "got <token> here");
        assert_eq!(redact("nothing", None), "nothing");
    }

    /// A line without end is cut at the limit, the rest of it dropped; what
    /// is not UTF-8 and `\r\n` endings do not stop the reading.
    #[tokio::test]
    async fn the_agents_output_is_read_in_lines_of_at_most_line_max() {
        let mut output = b"first\r\n".to_vec();
        output.extend(std::iter::repeat_n(b'x', 3 * super::LINE_MAX + 5));
        output.extend_from_slice(b"\nnot utf-8 \xff\nlast without newline");
        let mut reader = tokio::io::BufReader::with_capacity(1000, &output[..]);
        let mut line = Vec::new();
        let mut lines = Vec::new();
        while super::next_line(&mut reader, &mut line, super::LINE_MAX).await.unwrap() {
            lines.push(String::from_utf8_lossy(&line).into_owned());
        }
        assert_eq!(lines.len(), 4, "{:?}", lines.iter().map(|l| l.len()).collect::<Vec<_>>());
        assert_eq!(lines[0], "first");
        assert_eq!(lines[1], "x".repeat(super::LINE_MAX));
        assert_eq!(lines[2], "not utf-8 \u{fffd}");
        assert_eq!(lines[3], "last without newline");
    }

    #[test]
    fn the_specs_debug_names_the_environment_without_its_values() {
        let spec = super::AgentSpec {
            cmd: "agent".into(),
            env: vec![("COLLIE_TOKEN".into(), "s3cret-s3cret".into())],
            target: crate::link::Target::Socket("/tmp/a.sock".into()),
            token: Some(crate::link::Token::new("s3cret-s3cret".into())),
            pin: None,
            insecure: false,
            answer_limit: crate::link::AnswerLimit::default(),
        };
        let shown = format!("{spec:?}");
        assert!(shown.contains("COLLIE_TOKEN") && !shown.contains("s3cret"), "{shown}");
    }
}
