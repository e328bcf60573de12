//! One `pi --mode rpc` child: commands written as JSON lines, responses
//! matched by id, everything else handed on as events, and the exit noticed.

use std::collections::HashMap;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, ChildStdin};
use tokio::sync::{mpsc, oneshot};
use tokio_util::codec::{AnyDelimiterCodec, AnyDelimiterCodecError, Decoder};

use crate::Error;

/// How much of Pi's standard error is kept, for the notice of a crash.
const STDERR_KEPT: usize = 2048;

/// What Pi says that is not the response to a command.
#[derive(Debug)]
pub(crate) enum PiEvent {
    /// An event or an extension's request, as Pi wrote it.
    Line(Value),
    /// Pi exited (or closed its output): how, and its last words on
    /// standard error.
    Exited(String),
}

type Pending = Arc<Mutex<HashMap<String, oneshot::Sender<Value>>>>;

/// A running Pi.
pub(crate) struct PiProcess {
    stdin: tokio::sync::Mutex<Option<ChildStdin>>,
    pending: Pending,
    next_id: AtomicU64,
    alive: Arc<AtomicBool>,
    child: Arc<Mutex<Option<Child>>>,
    /// The events, read by one turn at a time.
    pub(crate) events: tokio::sync::Mutex<mpsc::UnboundedReceiver<PiEvent>>,
}

impl std::fmt::Debug for PiProcess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PiProcess").field("alive", &self.is_alive()).finish_non_exhaustive()
    }
}

impl PiProcess {
    /// Starts Pi and its reader tasks (on the current tokio runtime).
    /// `watcher`, if any, lives until Pi's output closes: then it stops
    /// what Pi's tools left running (see `reaper`). It starts first, so no
    /// instant of the run goes unwatched.
    pub(crate) fn spawn(
        mut command: tokio::process::Command,
        watcher: impl FnOnce() -> Option<super::reaper::Watcher>,
    ) -> Result<PiProcess, std::io::Error> {
        command.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).kill_on_drop(true);
        let watcher = watcher();
        let mut child = command.spawn()?;
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().ok_or_else(|| std::io::Error::other("Pi's output is not piped"))?;
        let stderr = child.stderr.take();
        let (tx, rx) = mpsc::unbounded_channel();
        let pending: Pending = Arc::default();
        let alive = Arc::new(AtomicBool::new(true));
        let child = Arc::new(Mutex::new(Some(child)));
        let tail = Arc::new(Mutex::new(String::new()));
        if let Some(mut stderr) = stderr {
            let tail = tail.clone();
            tokio::spawn(async move {
                let mut buf = [0u8; 1024];
                while let Ok(n) = stderr.read(&mut buf).await {
                    if n == 0 {
                        break;
                    }
                    let mut t = tail.lock().unwrap_or_else(|e| e.into_inner());
                    t.push_str(&String::from_utf8_lossy(&buf[..n]));
                    if t.len() > STDERR_KEPT {
                        let cut = t.len() - STDERR_KEPT;
                        let cut = (cut..t.len()).find(|&i| t.is_char_boundary(i)).unwrap_or(t.len());
                        t.drain(..cut);
                    }
                }
            });
        }
        {
            let (pending, alive, child) = (pending.clone(), alive.clone(), child.clone());
            tokio::spawn(async move {
                let mut lines = RpcLines::new(stdout);
                while let Some(line) = lines.next().await {
                    if line.iter().all(u8::is_ascii_whitespace) {
                        continue;
                    }
                    let Ok(value) = crate::json::parse(&line) else {
                        tracing::warn!(bytes = line.len(), "pi: a line of Pi's output is not JSON; skipped");
                        continue;
                    };
                    if value.get("type").and_then(Value::as_str) == Some("response") {
                        let id = value.get("id").and_then(Value::as_str).map(str::to_owned);
                        let waiter =
                            id.and_then(|id| pending.lock().unwrap_or_else(|e| e.into_inner()).remove(&id));
                        if let Some(waiter) = waiter {
                            let _ = waiter.send(value);
                        }
                        continue;
                    }
                    let _ = tx.send(PiEvent::Line(value));
                }
                alive.store(false, Ordering::SeqCst);
                // Waiters of commands Pi never answered get a closed channel.
                pending.lock().unwrap_or_else(|e| e.into_inner()).clear();
                let status = wait_briefly(&child).await;
                // Give the standard error reader a moment to catch the last lines.
                tokio::time::sleep(Duration::from_millis(50)).await;
                let last = last_line(&tail.lock().unwrap_or_else(|e| e.into_inner()));
                let how = match (status, last) {
                    (Some(status), Some(last)) => format!("{status}: {last}"),
                    (Some(status), None) => status,
                    (None, Some(last)) => format!("its output closed: {last}"),
                    (None, None) => "its output closed".to_owned(),
                };
                // Pi is gone: what its tools still run goes with it.
                drop(watcher);
                let _ = tx.send(PiEvent::Exited(how));
            });
        }
        Ok(PiProcess {
            stdin: tokio::sync::Mutex::new(stdin),
            pending,
            next_id: AtomicU64::new(1),
            alive,
            child,
            events: tokio::sync::Mutex::new(rx),
        })
    }

    /// Whether Pi's output is still open.
    pub(crate) fn is_alive(&self) -> bool {
        self.alive.load(Ordering::SeqCst)
    }

    /// Writes one line to Pi.
    pub(crate) async fn write(&self, message: &Value) -> Result<(), Error> {
        let mut line = serde_json::to_vec(message).map_err(|e| Error::Pi { why: e.to_string() })?;
        line.push(b'\n');
        let mut stdin = self.stdin.lock().await;
        let pipe = stdin.as_mut().ok_or_else(|| Error::Pi { why: "Pi's input is closed".to_owned() })?;
        pipe.write_all(&line).await.map_err(|e| Error::Pi { why: format!("writing to Pi: {e}") })?;
        pipe.flush().await.map_err(|e| Error::Pi { why: format!("writing to Pi: {e}") })
    }

    /// Sends a command and returns the waiter of its response (the id is
    /// set here). Pi answers some commands only after events (abort waits
    /// for the run to settle): await the waiter when that is wanted.
    pub(crate) async fn command(&self, mut command: Value) -> Result<oneshot::Receiver<Value>, Error> {
        let id = format!("d{}", self.next_id.fetch_add(1, Ordering::SeqCst));
        if let Some(obj) = command.as_object_mut() {
            obj.insert("id".to_owned(), json!(id));
        }
        let (tx, rx) = oneshot::channel();
        self.pending.lock().unwrap_or_else(|e| e.into_inner()).insert(id.clone(), tx);
        if let Err(e) = self.write(&command).await {
            self.pending.lock().unwrap_or_else(|e| e.into_inner()).remove(&id);
            return Err(e);
        }
        Ok(rx)
    }

    /// Sends a command and waits for its response; an error when Pi says
    /// it failed or exits first.
    pub(crate) async fn call(&self, command: Value) -> Result<Value, Error> {
        let what = command.get("type").and_then(Value::as_str).unwrap_or("command").to_owned();
        let response = self
            .command(command)
            .await?
            .await
            .map_err(|_| Error::Pi { why: format!("Pi exited before answering {what}") })?;
        if response.get("success").and_then(Value::as_bool) == Some(true) {
            return Ok(response.get("data").cloned().unwrap_or(Value::Null));
        }
        let why = response.get("error").and_then(Value::as_str).unwrap_or("no reason given");
        Err(Error::Pi { why: format!("Pi refused {what}: {why}") })
    }

    /// Ends Pi: its input closes (Pi stops the run, saves, and exits); after
    /// `grace`, it is killed.
    pub(crate) async fn shutdown(&self, grace: Duration) {
        drop(self.stdin.lock().await.take());
        let deadline = tokio::time::Instant::now() + grace;
        while self.is_alive() && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        self.kill();
    }

    /// Kills Pi at once.
    pub(crate) fn kill(&self) {
        if let Some(child) = self.child.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
            let _ = child.start_kill();
        }
    }
}

/// The exit status, when Pi exits within a second of closing its output.
async fn wait_briefly(child: &Mutex<Option<Child>>) -> Option<String> {
    for _ in 0..50 {
        let status = {
            let mut guard = child.lock().unwrap_or_else(|e| e.into_inner());
            match guard.as_mut().map(Child::try_wait) {
                Some(Ok(Some(status))) => Some(status),
                Some(Ok(None)) => None,
                _ => return None,
            }
        };
        if let Some(status) = status {
            return Some(match status.code() {
                Some(code) => format!("exit code {code}"),
                None => describe_signal(&status),
            });
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    None
}

#[cfg(unix)]
fn describe_signal(status: &std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    status.signal().map_or_else(|| status.to_string(), |s| format!("killed by signal {s}"))
}

#[cfg(not(unix))]
fn describe_signal(status: &std::process::ExitStatus) -> String {
    status.to_string()
}

fn last_line(text: &str) -> Option<String> {
    text.lines().map(str::trim).rfind(|l| !l.is_empty()).map(|l| l.chars().take(300).collect())
}

/// Pi's standard output as lines of at most [`MAX_LINE`](crate::follow::MAX_LINE)
/// bytes. A longer line is dropped as it comes (memory stays bounded by the
/// limit), with a warn event, and reading goes on at the next line; so
/// does a line that is not UTF-8 or not JSON (the caller's to skip). Only
/// the end of the output, or an error reading it, ends the lines.
pub(crate) struct RpcLines<R> {
    reader: R,
    codec: AnyDelimiterCodec,
    buf: BytesMut,
    eof: bool,
}

impl<R: AsyncRead + Unpin> RpcLines<R> {
    pub(crate) fn new(reader: R) -> Self {
        RpcLines::with_max(reader, crate::follow::MAX_LINE)
    }

    pub(crate) fn with_max(reader: R, max: usize) -> Self {
        let codec = AnyDelimiterCodec::new_with_max_length(b"\n".to_vec(), Vec::new(), max);
        RpcLines { reader, codec, buf: BytesMut::with_capacity(8 * 1024), eof: false }
    }

    /// The next line, without its `\n` (and a `\r` before it); `None` at the end.
    pub(crate) async fn next(&mut self) -> Option<Bytes> {
        loop {
            let decoded = if self.eof {
                self.codec.decode_eof(&mut self.buf)
            } else {
                self.codec.decode(&mut self.buf)
            };
            match decoded {
                Ok(Some(line)) => return Some(strip_cr(line)),
                Ok(None) if self.eof => return None,
                Ok(None) => match self.reader.read_buf(&mut self.buf).await {
                    Ok(0) => self.eof = true,
                    Ok(_) => {}
                    Err(e) => {
                        tracing::warn!(error = %e, "pi: reading Pi's output failed");
                        return None;
                    }
                },
                Err(AnyDelimiterCodecError::MaxChunkLengthExceeded) => {
                    // The codec drops the rest of that line itself.
                    tracing::warn!("pi: a line of Pi's output is over its limit; dropped");
                }
                Err(AnyDelimiterCodecError::Io(e)) => {
                    tracing::warn!(error = %e, "pi: reading Pi's output failed");
                    return None;
                }
            }
        }
    }
}

fn strip_cr(line: Bytes) -> Bytes {
    match line.last() {
        Some(b'\r') => line.slice(..line.len() - 1),
        _ => line,
    }
}

#[cfg(test)]
mod lines_tests {
    use super::*;

    async fn all(input: &[u8], max: usize) -> Vec<Vec<u8>> {
        let mut lines = RpcLines::with_max(input, max);
        let mut out = Vec::new();
        while let Some(l) = lines.next().await {
            out.push(l.to_vec());
        }
        out
    }

    #[tokio::test]
    async fn lines_over_the_bound_and_not_utf8_are_passed_over_and_reading_goes_on() {
        let mut input = b"{\"a\":1}\r\n".to_vec();
        input.extend(std::iter::repeat_n(b'x', 100));
        input.extend(b"\n\xff\xfe not utf-8\n{\"b\":2}\n{\"c\":3}");
        let got = all(&input, 64).await;
        let want: Vec<Vec<u8>> = vec![
            b"{\"a\":1}".to_vec(),
            b"\xff\xfe not utf-8".to_vec(),
            b"{\"b\":2}".to_vec(),
            b"{\"c\":3}".to_vec(),
        ];
        assert_eq!(
            got, want,
            "the 100-byte line is dropped; the rest, the last without its newline, come through"
        );
    }

    #[tokio::test]
    async fn a_line_far_over_the_bound_keeps_the_buffer_bounded() {
        // 8 MiB with no newline, then a short line: the buffer never holds the long one.
        let mut input = vec![b'y'; 8 * 1024 * 1024];
        input.extend(b"\n{\"ok\":true}\n");
        let mut lines = RpcLines::with_max(&input[..], 1024);
        let line = lines.next().await.expect("the line after the long one");
        assert_eq!(&line[..], b"{\"ok\":true}");
        assert!(lines.buf.capacity() < 1024 * 1024, "buffer grew to {}", lines.buf.capacity());
        assert!(lines.next().await.is_none());
    }
}
