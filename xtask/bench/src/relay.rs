//! `xtask-bench bench-relay`: the least a relay of an ACP agent does while
//! keeping the wire's promise that a send is recorded before it runs (§9.1),
//! as the floor the `acp` group measures durable-acp against.
//!
//! It answers the four requests the bench's client makes, and nothing else:
//! `POST /v1/starters/new-conversation` (`session/new`, then the text as a
//! prompt; `{"pane": <session id>}`), `POST /v1/panes/{pane}/send` (one
//! SQLite row, committed as the SDK's store commits, WAL and `synchronous =
//! FULL`, then `session/prompt`; `200` once the prompt is on its way),
//! `GET /v1/panes/{pane}/events?after=N` (the turns' final replies after
//! `N`) and `GET /v1/state` (the pane idle or working). No receipts read
//! back, no asks, no partial items, no history: each of those costs
//! durable-acp something this does not pay.
//!
//! ```text
//! xtask-bench bench-relay --agent PROGRAM --cwd DIR --db FILE --socket PATH
//! ```
//! The agent runs with this process's environment; it prints `listening
//! <path>` once it serves, and on SIGTERM or SIGINT ends its agent (SIGTERM,
//! SIGKILL after 2 s) and exits.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::{ExitCode, Stdio};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::oneshot;

/// A JSON-RPC request to an ACP agent, as one line.
pub(crate) fn request_line(id: u64, method: &str, params: Value) -> String {
    let mut line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string();
    line.push('\n');
    line
}

/// The result of a JSON-RPC response to `method`, or its error.
pub(crate) fn result_of(method: &str, response: &Value) -> Result<Value, String> {
    match response.get("error") {
        Some(e) => Err(format!("{method}: {e}")),
        None => Ok(response["result"].clone()),
    }
}

struct RelayArgs {
    agent: PathBuf,
    cwd: PathBuf,
    db: PathBuf,
    socket: PathBuf,
}

fn parse(args: &[String]) -> Result<RelayArgs, String> {
    let (mut agent, mut cwd, mut db, mut socket) = (None, None, None, None);
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let value = it.next().cloned().map(PathBuf::from).ok_or_else(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--agent" => agent = Some(value),
            "--cwd" => cwd = Some(value),
            "--db" => db = Some(value),
            "--socket" => socket = Some(value),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    let need = |v: Option<PathBuf>, flag: &str| v.ok_or_else(|| format!("{flag} is needed"));
    Ok(RelayArgs {
        agent: need(agent, "--agent")?,
        cwd: need(cwd, "--cwd")?,
        db: need(db, "--db")?,
        socket: need(socket, "--socket")?,
    })
}

/// `xtask-bench bench-relay ARGS`.
pub fn main(args: &[String]) -> ExitCode {
    let args = match parse(args) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("bench-relay: {e}");
            return ExitCode::from(2);
        }
    };
    // As the example's: two workers.
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build();
    let result = match rt {
        Ok(rt) => rt.block_on(serve(args)),
        Err(e) => Err(e.to_string()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bench-relay: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The relay's one conversation.
#[derive(Default)]
struct Pane {
    session: String,
    working: bool,
    /// The running turn's reply so far.
    reply: String,
    /// Final replies, with their sequence numbers from 1.
    events: Vec<Value>,
}

struct Relay {
    stdin: tokio::sync::Mutex<tokio::process::ChildStdin>,
    next_id: std::sync::atomic::AtomicU64,
    /// The callers waiting for a response, by request id; `None` once the
    /// agent's output has ended (a call then fails at once).
    waiting: Mutex<Option<HashMap<u64, oneshot::Sender<Value>>>>,
    pane: Mutex<Pane>,
    db: Mutex<rusqlite::Connection>,
    cwd: PathBuf,
}

impl Relay {
    /// A request to the agent; its result (or its error, as a string).
    async fn call(&self, method: &str, params: Value) -> Result<Value, String> {
        let id = self.next_id.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        match self.waiting.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
            Some(waiting) => waiting.insert(id, tx),
            None => return Err(format!("{method}: the agent ended")),
        };
        let line = request_line(id, method, params);
        self.stdin
            .lock()
            .await
            .write_all(line.as_bytes())
            .await
            .map_err(|e| format!("the agent's input: {e}"))?;
        let answer = rx.await.map_err(|_| format!("{method}: the agent ended"))?;
        result_of(method, &answer)
    }

    /// Records the send (one committed row), then runs its turn.
    fn send(self: &Arc<Self>, request_id: &str, text: &str) -> Result<(), String> {
        let session = {
            let mut pane = self.pane.lock().unwrap_or_else(|e| e.into_inner());
            if pane.working {
                return Err("a turn runs".into());
            }
            pane.working = true;
            pane.reply.clear();
            pane.session.clone()
        };
        let recorded = self.db.lock().unwrap_or_else(|e| e.into_inner()).execute(
            "INSERT INTO sends (request_id, pane, text, state) VALUES (?1, ?2, ?3, 'running')",
            (request_id, &session, text),
        );
        if let Err(e) = recorded {
            // Not recorded, not run: the pane takes a send again.
            self.pane.lock().unwrap_or_else(|e| e.into_inner()).working = false;
            return Err(e.to_string());
        }
        let relay = self.clone();
        let text = text.to_owned();
        tokio::spawn(async move {
            let prompt = json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]});
            let answer = relay.call("session/prompt", prompt).await;
            let mut pane = relay.pane.lock().unwrap_or_else(|e| e.into_inner());
            let text = match answer {
                Ok(_) => std::mem::take(&mut pane.reply),
                Err(e) => e,
            };
            let seq = pane.events.len() + 1;
            pane.events.push(json!({"seq": seq, "type": "item", "item": {"kind": "reply", "text": text}}));
            pane.working = false;
        });
        Ok(())
    }

    async fn handle(self: Arc<Self>, req: Request<Incoming>) -> Response<Full<Bytes>> {
        let (parts, body) = req.into_parts();
        let path = parts.uri.path().to_owned();
        let body: Value = match body.collect().await {
            Ok(b) => serde_json::from_slice(&b.to_bytes()).unwrap_or(Value::Null),
            Err(_) => Value::Null,
        };
        let text = body["text"].as_str().unwrap_or_default();
        let request_id = body["requestId"].as_str().unwrap_or_default();
        let answer = match (parts.method.as_str(), path.as_str()) {
            ("POST", "/v1/starters/new-conversation") => {
                match self.call("session/new", json!({"cwd": self.cwd, "mcpServers": []})).await {
                    Ok(r) => {
                        let session = r["sessionId"].as_str().unwrap_or_default().to_owned();
                        self.pane.lock().unwrap_or_else(|e| e.into_inner()).session = session.clone();
                        self.send(request_id, text).map(|()| json!({"pane": session}))
                    }
                    Err(e) => Err(e),
                }
            }
            ("POST", p) if p.ends_with("/send") => {
                self.send(request_id, text).map(|()| json!({"result": "sent", "requestId": request_id}))
            }
            ("GET", "/v1/state") => {
                let pane = self.pane.lock().unwrap_or_else(|e| e.into_inner());
                let state = if pane.working { "working" } else { "idle" };
                Ok(json!({"panes": [{"id": pane.session, "state": state}]}))
            }
            ("GET", p) if p.ends_with("/events") => {
                let after: usize = parts
                    .uri
                    .query()
                    .and_then(|q| q.strip_prefix("after="))
                    .and_then(|n| n.parse().ok())
                    .unwrap_or(0);
                let pane = self.pane.lock().unwrap_or_else(|e| e.into_inner());
                let events = pane.events.get(after..).unwrap_or_default();
                Ok(json!({"events": events, "next": pane.events.len()}))
            }
            _ => Err(format!("not served: {} {path}", parts.method)),
        };
        let (status, body) = match answer {
            Ok(v) => (200, v),
            Err(e) => (500, json!({"error": e})),
        };
        Response::builder()
            .status(status)
            .header(hyper::header::CONTENT_TYPE, "application/json")
            .body(Full::new(Bytes::from(body.to_string())))
            .expect("a valid response")
    }

    /// Reads the agent's lines: responses to their callers, message
    /// chunks into the running reply.
    async fn read(self: Arc<Self>, stdout: tokio::process::ChildStdout) {
        let mut lines = tokio::io::BufReader::new(stdout).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            let Ok(msg) = serde_json::from_str::<Value>(&line) else { continue };
            if msg.get("method").is_none() {
                let waiting = msg["id"].as_u64().and_then(|id| {
                    self.waiting.lock().unwrap_or_else(|e| e.into_inner()).as_mut()?.remove(&id)
                });
                if let Some(tx) = waiting {
                    let _ = tx.send(msg);
                }
                continue;
            }
            let update = &msg["params"]["update"];
            if update["sessionUpdate"] == "agent_message_chunk" {
                if let Some(text) = update["content"]["text"].as_str() {
                    self.pane.lock().unwrap_or_else(|e| e.into_inner()).reply.push_str(text);
                }
            }
        }
        // The agent ended: its callers hear it, and later ones fail at once.
        self.waiting.lock().unwrap_or_else(|e| e.into_inner()).take();
    }
}

async fn serve(args: RelayArgs) -> Result<(), String> {
    if let Some(dir) = args.db.parent() {
        std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    }
    let db = rusqlite::Connection::open(&args.db).map_err(|e| e.to_string())?;
    let mode: String =
        db.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0)).map_err(|e| e.to_string())?;
    if mode != "wal" {
        return Err(format!("journal_mode {mode}"));
    }
    db.pragma_update(None, "synchronous", "FULL").map_err(|e| e.to_string())?;
    db.execute(
        "CREATE TABLE IF NOT EXISTS sends (request_id TEXT PRIMARY KEY, pane TEXT, text TEXT, state TEXT)",
        [],
    )
    .map_err(|e| e.to_string())?;
    let mut child = tokio::process::Command::new(&args.agent)
        .current_dir(&args.cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("{}: {e}", args.agent.display()))?;
    let stdin = child.stdin.take().ok_or("no stdin")?;
    let stdout = child.stdout.take().ok_or("no stdout")?;
    let relay = Arc::new(Relay {
        stdin: tokio::sync::Mutex::new(stdin),
        next_id: std::sync::atomic::AtomicU64::new(1),
        waiting: Mutex::new(Some(HashMap::new())),
        pane: Mutex::new(Pane::default()),
        db: Mutex::new(db),
        cwd: args.cwd.clone(),
    });
    tokio::spawn(relay.clone().read(stdout));
    relay.call("initialize", json!({"protocolVersion": 1, "clientCapabilities": {}})).await?;
    if let Some(dir) = args.socket.parent() {
        std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    }
    let _ = std::fs::remove_file(&args.socket);
    let listener = tokio::net::UnixListener::bind(&args.socket).map_err(|e| e.to_string())?;
    println!("listening {}", args.socket.display());
    let mut term = signal(SignalKind::terminate()).map_err(|e| e.to_string())?;
    let mut int = signal(SignalKind::interrupt()).map_err(|e| e.to_string())?;
    loop {
        let (stream, _) = tokio::select! {
            accepted = listener.accept() => accepted.map_err(|e| e.to_string())?,
            _ = term.recv() => break,
            _ = int.recv() => break,
        };
        let relay = relay.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req| {
                let relay = relay.clone();
                async move { Ok::<_, std::convert::Infallible>(relay.handle(req).await) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
    // SIGTERM to the agent, as the example stops its own: pi-acp ends its
    // Pi on the way out (a SIGKILL would leave Pi behind).
    let pid = child.id().and_then(|p| i32::try_from(p).ok()).and_then(rustix::process::Pid::from_raw);
    if let Some(pid) = pid {
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
    }
    if tokio::time::timeout(std::time::Duration::from_secs(2), child.wait()).await.is_err() {
        let _ = child.kill().await;
    }
    let _ = std::fs::remove_file(&args.socket);
    Ok(())
}
