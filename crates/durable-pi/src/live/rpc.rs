//! One `pi --mode rpc` child: commands written as JSON lines, responses
//! matched by id, everything else handed on as events, and the exit noticed.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use durable_process::{AgentChild, LineReader, describe_exit};
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use tokio::process::{Child, ChildStdin};
use tokio::sync::{mpsc, oneshot};

use crate::Error;

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
    /// Starts Pi and its reader tasks (on the current tokio runtime),
    /// with its run's mark under `run_tag` and the run's watcher, which
    /// lives until Pi's output closes: then it stops what Pi's tools left
    /// running (`durable_process::reaper`).
    pub(crate) fn spawn(
        command: tokio::process::Command,
        run_tag: &str,
    ) -> Result<PiProcess, std::io::Error> {
        let AgentChild { child, stdin, stdout, stderr: tail, watcher, .. } =
            AgentChild::builder(command).run_tag(run_tag).spawn()?;
        let (tx, rx) = mpsc::unbounded_channel();
        let pending: Pending = Arc::default();
        let alive = Arc::new(AtomicBool::new(true));
        let child = Arc::new(Mutex::new(Some(child)));
        {
            let (pending, alive, child) = (pending.clone(), alive.clone(), child.clone());
            tokio::spawn(async move {
                let mut lines = LineReader::new(stdout, crate::follow::MAX_LINE);
                loop {
                    let line = match lines.next_line().await {
                        Ok(Some(line)) => line,
                        Ok(None) => break,
                        Err(e) => {
                            tracing::warn!(error = %e, "pi: reading Pi's output failed");
                            break;
                        }
                    };
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
                let how = match (status, tail.last_line()) {
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
            stdin: tokio::sync::Mutex::new(Some(stdin)),
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
            return Some(describe_exit(&status));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    None
}
