//! One conversation: a pane, a Pi session, and the Pi running it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use durable_runtime::{AbortController, ChatHandler, HandlerResult, Pane, Refusal, SteerRequest, Turn};
use durable_types::{AskSpec, Item, NoticeTone};
use serde_json::{Value, json};
use tokio::time::Instant;

use super::options::{GateOptions, PiOptions};
use super::rpc::{PiEvent, PiProcess};
use super::stream::Stream;
use super::{GATE_EXTENSION, GATE_TITLE};
use crate::{Error, SessionFolder, pane_view};

/// How long Pi has to answer its first command after it starts.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// A Pi conversation behind a pane: the pane's sends, steers and stops go
/// to a `pi --mode rpc` child that runs the session `session_id` in the
/// sessions folder (see the [module docs](super)).
///
/// Pi starts on the first send (or [`start`](Self::start)) and resumes the
/// session when its file exists; [`attach`](Self::attach) shows what the
/// file holds. Cloning gives another handle to the same conversation.
///
/// ```no_run
/// use durable_sdk::PaneOptions;
/// use durable_sdk::pi::{PiCommand, PiConversation, PiOptions};
///
/// # async fn f(tab: durable_sdk::Tab) -> Result<(), Box<dyn std::error::Error>> {
/// let options = PiOptions::builder(PiCommand::new("pi"), "/home/me/.local/state/my-agent/sessions").build()?;
/// let session = "0b7d6c2e-5a0f-4a55-9a1e-3f1c2d4e5f60";
/// let pane = tab.pane(session, PaneOptions::new("Pi").harness("pi"))?;
/// let pi = PiConversation::attach(&pane, session, options)?;
/// // The phone's sends now reach Pi; a `bash` call waits for a card.
/// # let _ = pi; Ok(()) }
/// ```
#[derive(Clone)]
pub struct PiConversation {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for PiConversation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PiConversation")
            .field("pane", &self.inner.pane.id())
            .field("session_id", &self.inner.session_id)
            .finish_non_exhaustive()
    }
}

struct Inner {
    pane: Pane,
    session_id: String,
    options: PiOptions,
    process: tokio::sync::Mutex<Option<Arc<PiProcess>>>,
    /// The open cards, by tool call id: closing one answers Pi "unanswered".
    cards: Mutex<HashMap<String, AbortController>>,
    /// Calls approved on a card taken up after a restart: each lets the
    /// same call (tool, arguments' digest) through the gate once.
    passes: Mutex<Vec<(String, String)>>,
    /// The agent is ending this Pi ([`PiConversation::shutdown`]): its open
    /// cards stay open (a shutdown is not an answer), for a store that
    /// keeps asks to hand them back at the next start.
    stopping: std::sync::atomic::AtomicBool,
}

impl PiConversation {
    /// Puts the session `session_id` behind `pane`: the pane's chat handler
    /// is set, and what the session's file holds (when it exists) is written
    /// to the pane, its name as the title. The id is Pi's session id (a
    /// UUID for the sessions Pi makes); a new id starts a new session.
    pub fn attach(pane: &Pane, session_id: &str, options: PiOptions) -> Result<PiConversation, Error> {
        if session_id.trim().is_empty() || session_id.starts_with('-') {
            return Err(Error::BadOption {
                rule: "a session id is not empty and does not start with '-'",
                value: session_id.to_owned(),
            });
        }
        // What the Pis of a dead agent on this folder left running goes first.
        stop_leftovers_once(&durable_process::folder_tag(&options.session_dir));
        if let Some(session) = SessionFolder::new(&options.session_dir).read(session_id)? {
            let view = pane_view(&session);
            if let Some(title) = &view.title {
                let _ = pane.rename(title);
            }
            for item in view.items {
                let _ = pane.write(item);
            }
        }
        let inner = Arc::new(Inner {
            pane: pane.clone(),
            session_id: session_id.to_owned(),
            options,
            process: tokio::sync::Mutex::new(None),
            cards: Mutex::new(HashMap::new()),
            passes: Mutex::new(Vec::new()),
            stopping: std::sync::atomic::AtomicBool::new(false),
        });
        pane.on_send(PiChat(inner.clone())).map_err(|e| Error::Pane { why: e.to_string() })?;
        Ok(PiConversation { inner })
    }

    /// The pane.
    pub fn pane(&self) -> &Pane {
        &self.inner.pane
    }

    /// Pi's session id.
    pub fn session_id(&self) -> &str {
        &self.inner.session_id
    }

    /// Whether a Pi is running for this conversation.
    pub async fn is_running(&self) -> bool {
        self.inner.process.lock().await.as_ref().is_some_and(|p| p.is_alive())
    }

    /// Starts Pi now rather than at the first send; an error says why it
    /// could not (the program missing, Pi exiting at once and its last
    /// words).
    pub async fn start(&self) -> Result<(), Error> {
        self.inner.process().await.map(|_| ())
    }

    /// Names the session (Pi's `set_session_name`, kept in its file) and
    /// renames the pane. Starts Pi when it is not running.
    pub async fn rename(&self, name: &str) -> Result<(), Error> {
        let pi = self.inner.process().await?;
        pi.call(json!({"type": "set_session_name", "name": name})).await?;
        self.inner.pane.rename(name).map_err(|e| Error::Pane { why: e.to_string() })
    }

    /// Sends `text` to Pi as a turn of the program's own (a starter's first
    /// text, a scheduled task): the pane shows it as a `user` item and works
    /// until Pi settles; this resolves then. The phone can steer and stop it
    /// like any turn.
    pub async fn prompt(&self, text: &str) -> Result<(), Error> {
        let turn_id = format!("prompt-{}", unique());
        let pane_error = |e: durable_types::RuleError| Error::Pane { why: e.to_string() };
        let turn = self.inner.pane.start_turn(&turn_id).map_err(pane_error)?;
        let user = durable_types::Id::new(format!("user-{turn_id}")).map_err(pane_error)?;
        let body = durable_types::ItemBody::User { text: text.to_owned(), request_id: None };
        self.inner.pane.write(Item::new(user, body)).map_err(pane_error)?;
        self.inner.clone().run_turn(turn, text.to_owned()).await;
        Ok(())
    }

    /// Lets the call `tool` with arguments of digest `digest` through the
    /// gate once, without a card.
    pub(super) fn allow_once(&self, tool: &str, digest: &str) {
        self.inner
            .passes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((tool.to_owned(), digest.to_owned()));
    }

    /// Takes the pass of such a call, if it is still there.
    pub(super) fn take_pass(&self, tool: &str, digest: &str) -> bool {
        self.inner.take_pass(tool, digest)
    }

    /// A new session id: a random UUID (version 4), as Pi makes them.
    pub fn new_session_id() -> String {
        let mut b = [0u8; 16];
        // Without the system's randomness, time and a counter still give
        // an id not used before on this machine.
        if getrandom::fill(&mut b).is_err() {
            let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
            b[..8].copy_from_slice(&(t.as_nanos() as u64).to_le_bytes());
            b[8..].copy_from_slice(&unique().to_le_bytes());
        }
        b[6] = (b[6] & 0x0f) | 0x40;
        b[8] = (b[8] & 0x3f) | 0x80;
        let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
        format!("{}-{}-{}-{}-{}", &hex[..8], &hex[8..12], &hex[12..16], &hex[16..20], &hex[20..])
    }

    /// Ends Pi, if it runs: its input closes, so Pi stops the run and saves
    /// the session; after two seconds it is killed. Open cards stay open: a
    /// shutdown is not an answer, and with a receipt store that keeps asks
    /// the next start hands them back ([`take_up`](Self::take_up)). The
    /// next send starts Pi again.
    pub async fn shutdown(&self) {
        self.inner.stopping.store(true, std::sync::atomic::Ordering::SeqCst);
        self.inner.cards.lock().unwrap_or_else(|e| e.into_inner()).clear();
        let pi = self.inner.process.lock().await.take();
        if let Some(pi) = pi {
            pi.shutdown(Duration::from_secs(2)).await;
        }
    }
}

impl Inner {
    /// The running Pi, started when there is none (or it exited).
    async fn process(&self) -> Result<Arc<PiProcess>, Error> {
        let mut slot = self.process.lock().await;
        if let Some(pi) = slot.as_ref().filter(|p| p.is_alive()) {
            return Ok(pi.clone());
        }
        if let Some(old) = slot.take() {
            // It died between turns: say so once.
            if let Some(how) = exited(&old).await {
                self.notice(format!("Pi had exited ({how}); it starts again."), NoticeTone::Warn);
            }
        }
        let pi = Arc::new(self.spawn()?);
        self.stopping.store(false, std::sync::atomic::Ordering::SeqCst);
        match tokio::time::timeout(START_TIMEOUT, pi.call(json!({"type": "get_state"}))).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => {
                let why = exited(&pi).await.unwrap_or_else(|| e.to_string());
                pi.kill();
                return Err(Error::Pi { why: format!("Pi did not start: {why}") });
            }
            Err(_) => {
                pi.kill();
                return Err(Error::Pi {
                    why: format!("Pi did not answer within {}s of starting", START_TIMEOUT.as_secs()),
                });
            }
        }
        *slot = Some(pi.clone());
        Ok(pi)
    }

    fn spawn(&self) -> Result<PiProcess, Error> {
        let options = &self.options;
        let mut command = options.command.command();
        command.arg("--mode").arg("rpc");
        command.arg("--session-dir").arg(&options.session_dir);
        std::fs::create_dir_all(&options.session_dir)
            .map_err(|source| Error::Io { path: options.session_dir.clone(), source })?;
        // An existing session is opened by its file: `--session-id` finds
        // only a session made in Pi's current folder, and would start a new,
        // empty one with the same id when the agent runs elsewhere now.
        match SessionFolder::new(&options.session_dir).find(&self.session_id)? {
            Some(found) => command.arg("--session").arg(found.path),
            None => command.arg("--session-id").arg(&self.session_id),
        };
        if !options.gate.tools.is_empty() {
            let path = write_extension(&options.extension_dir)?;
            command.arg("-e").arg(path);
            command.env("DURABLE_PI_GATE_TOOLS", options.gate.tools.join(","));
            command.env("DURABLE_PI_GATE_UNANSWERED", &options.gate.unanswered_reason);
        }
        // Everything this Pi starts carries its run's mark; its watcher stops
        // them when Pi ends or the agent dies (`durable_process::reaper`).
        let tag = durable_process::folder_tag(&options.session_dir);
        PiProcess::spawn(command, &tag).map_err(|source| Error::Spawn {
            program: options.command.program().to_string_lossy().into_owned(),
            source,
        })
    }

    /// A notice outside any turn, under an id of its own.
    fn notice(&self, text: String, tone: NoticeTone) {
        if let Ok(id) = durable_types::Id::new(format!("pi-notice-{}", unique())) {
            if let Ok((item, _)) = Item::new(id, crate::items::notice(text, tone)).sanitized() {
                let _ = self.pane.write(item);
            }
        }
    }

    fn close_cards(&self) {
        let cards: Vec<_> = self.cards.lock().unwrap_or_else(|e| e.into_inner()).drain().collect();
        if self.stopping.load(std::sync::atomic::Ordering::SeqCst) {
            return; // left open (see `stopping`)
        }
        for (_, card) in cards {
            card.abort();
        }
    }

    fn close_card(&self, call_id: &str) {
        let card = self.cards.lock().unwrap_or_else(|e| e.into_inner()).remove(call_id);
        if let Some(card) = card {
            card.abort();
        }
    }

    /// A dialog or notification from an extension.
    fn on_ui_request(
        self: &Arc<Self>,
        pi: &Arc<PiProcess>,
        request: &Value,
        stream: &mut Stream,
        turn: &Turn,
    ) {
        let id = request.get("id").and_then(Value::as_str).unwrap_or("").to_owned();
        let method = request.get("method").and_then(Value::as_str).unwrap_or("");
        let title = request.get("title").and_then(Value::as_str);
        match method {
            "input" if title == Some(GATE_TITLE) => {
                let call = request
                    .get("placeholder")
                    .and_then(Value::as_str)
                    .and_then(|p| serde_json::from_str::<Value>(p).ok())
                    .unwrap_or(Value::Null);
                let call_id = call.get("toolCallId").and_then(Value::as_str).unwrap_or("");
                let item = stream.tool_item(call_id).cloned();
                tokio::spawn(self.clone().gate(pi.clone(), id, call, item));
            }
            "select" | "confirm" | "input" | "editor" => {
                let pi = pi.clone();
                tokio::spawn(async move {
                    let _ = pi
                        .write(&json!({"type": "extension_ui_response", "id": id, "cancelled": true}))
                        .await;
                });
            }
            "notify" => {
                let text = request.get("message").and_then(Value::as_str).unwrap_or("").to_owned();
                let tone = match request.get("notifyType").and_then(Value::as_str) {
                    Some("error") => NoticeTone::Error,
                    Some("warning") => NoticeTone::Warn,
                    _ => NoticeTone::Info,
                };
                for item in stream.notice(text, tone) {
                    let _ = turn.write(item);
                }
            }
            _ => {}
        }
    }

    fn take_pass(&self, tool: &str, digest: &str) -> bool {
        let mut passes = self.passes.lock().unwrap_or_else(|e| e.into_inner());
        match passes.iter().position(|(t, d)| t == tool && d == digest) {
            Some(at) => {
                passes.remove(at);
                true
            }
            None => false,
        }
    }

    /// Raises the card of a gated call and answers Pi with the decision.
    async fn gate(
        self: Arc<Self>,
        pi: Arc<PiProcess>,
        request_id: String,
        call: Value,
        item: Option<durable_types::Id>,
    ) {
        let gate = &self.options.gate;
        let call_id = call.get("toolCallId").and_then(Value::as_str).unwrap_or("").to_owned();
        let tool = call.get("toolName").and_then(Value::as_str).unwrap_or("tool");
        let input = call.get("input").cloned().unwrap_or(Value::Null);
        let digest = super::resume::input_digest(&input);
        // The call approved on a card taken up after a restart runs once, as approved.
        if self.take_pass(tool, &digest) {
            let response = json!({"type": "extension_ui_response", "id": request_id, "value": json!({"allow": true}).to_string()});
            let _ = pi.write(&response).await;
            return;
        }
        let mut spec = card_of(gate, tool, &input, &call_id, item.as_ref());
        // Kept with the card: after a restart, `take_up` finds the call again.
        spec.agent_data = Some(super::resume::card_data(&self.session_id, tool, &digest));
        let card = AbortController::new();
        self.cards.lock().unwrap_or_else(|e| e.into_inner()).insert(call_id.clone(), card.clone());
        let unanswered = || json!({"allow": false, "reason": gate.unanswered_reason});
        let answer = match self.pane.ask_with(spec, Some(card.signal())) {
            Ok(handle) => match handle.decided().await {
                Ok(d) if d.answer.option_id() == Some("allow") => json!({"allow": true}),
                Ok(_) => json!({"allow": false, "reason": gate.denied_reason}),
                Err(_) => unanswered(),
            },
            Err(e) => {
                self.pane
                    .collie()
                    .warn(&format!("durable-pi: the card of tool call {call_id} was not raised: {e}"));
                unanswered()
            }
        };
        self.cards.lock().unwrap_or_else(|e| e.into_inner()).remove(&call_id);
        let response =
            json!({"type": "extension_ui_response", "id": request_id, "value": answer.to_string()});
        let _ = pi.write(&response).await;
    }

    /// One turn, from `prompt` to Pi's `agent_settled`.
    async fn run_turn(self: Arc<Self>, mut turn: Turn, text: String) {
        let mut stream = Stream::new(turn.id(), self.options.partial_every);
        let write = |items: Vec<Item>, turn: &Turn| {
            for item in items {
                let _ = turn.write(item);
            }
        };
        let pi = match self.process().await {
            Ok(pi) => pi,
            Err(e) => return write(stream.notice(e.to_string(), NoticeTone::Error), &turn),
        };
        let mut events = pi.events.lock().await;
        // What an earlier run left (a turn ended by a timeout) is not this one's.
        while events.try_recv().is_ok() {}
        if let Err(e) = pi.call(json!({"type": "prompt", "message": text})).await {
            return write(stream.notice(e.to_string(), NoticeTone::Error), &turn);
        }
        let grace = self.options.stop_grace;
        let mut stop_by: Option<Instant> = None;
        loop {
            let wake = match (stream.flush_at().map(Instant::from_std), stop_by) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            tokio::select! {
                event = events.recv() => match event {
                    Some(PiEvent::Line(event)) => {
                        let kind = event.get("type").and_then(Value::as_str).unwrap_or("");
                        if kind == "extension_ui_request" {
                            self.on_ui_request(&pi, &event, &mut stream, &turn);
                            continue;
                        }
                        write(stream.on_event(&event, std::time::Instant::now()), &turn);
                        if kind == "tool_execution_end" {
                            if let Some(call) = event.get("toolCallId").and_then(Value::as_str) {
                                self.close_card(call);
                            }
                        }
                        if kind == "agent_settled" {
                            break;
                        }
                    }
                    Some(PiEvent::Exited(how)) => {
                        write(stream.finish(), &turn);
                        let text = format!("Pi exited ({how}). The next message starts it again.");
                        write(stream.notice(text, NoticeTone::Error), &turn);
                        break;
                    }
                    None => break,
                },
                () = turn.stopped(), if stop_by.is_none() => {
                    stop_by = Some(grace_from_now(grace));
                    self.close_cards();
                    // Pi answers an abort only once the run settled: the loop waits for that.
                    let _ = pi.command(json!({"type": "abort"})).await;
                }
                () = tokio::time::sleep_until(wake.unwrap_or_else(Instant::now)), if wake.is_some() => {
                    if stop_by.is_some_and(|at| Instant::now() >= at) {
                        pi.kill();
                        write(stream.finish(), &turn);
                        let text = format!("Pi did not stop within {}s; it was ended.", grace.as_secs());
                        write(stream.notice(text, NoticeTone::Error), &turn);
                        break;
                    }
                    write(stream.flush(std::time::Instant::now()), &turn);
                }
            }
            // Steers went to Pi itself (see `steer`): the turn's copy is not needed.
            let _ = turn.take_steers();
        }
        self.close_cards();
        turn.end();
    }
}

/// The pane's chat handler.
struct PiChat(Arc<Inner>);

impl ChatHandler for PiChat {
    async fn turn(&self, turn: Turn) {
        let text = turn.text().to_owned();
        self.0.clone().run_turn(turn, text).await
    }

    async fn steer(&self, req: SteerRequest) -> HandlerResult {
        let pi = self.0.process.lock().await.clone().filter(|p| p.is_alive());
        let Some(pi) = pi else { return Err(Refusal::new("Pi is not running a turn")) };
        match pi.call(json!({"type": "steer", "message": req.text})).await {
            Ok(_) => Ok(()),
            Err(e) => Err(Refusal::new(e.to_string())),
        }
    }
}

/// How an exited Pi ended, if its exit was seen.
async fn exited(pi: &PiProcess) -> Option<String> {
    let mut events = pi.events.try_lock().ok()?;
    let deadline = Instant::now() + Duration::from_millis(1500);
    loop {
        match tokio::time::timeout_at(deadline, events.recv()).await {
            Ok(Some(PiEvent::Exited(how))) => return Some(how),
            Ok(Some(PiEvent::Line(_))) => continue,
            Ok(None) | Err(_) => return None,
        }
    }
}

/// Writes the gate extension where Pi can load it; rewritten when it differs.
fn write_extension(dir: &std::path::Path) -> Result<std::path::PathBuf, Error> {
    let path = dir.join("gate.ts");
    if std::fs::read(&path).ok().as_deref() != Some(GATE_EXTENSION.as_bytes()) {
        std::fs::create_dir_all(dir).map_err(|source| Error::Io { path: dir.to_owned(), source })?;
        let tmp = dir.join(format!(".gate.ts.{}", unique()));
        std::fs::write(&tmp, GATE_EXTENSION).map_err(|source| Error::Io { path: tmp.clone(), source })?;
        std::fs::rename(&tmp, &path).map_err(|source| Error::Io { path: path.clone(), source })?;
    }
    Ok(path)
}

/// A number not given twice in this process.
/// Stops, once per sessions folder and process, what the Pi runs of dead
/// agents on it left running.
fn stop_leftovers_once(tag: &str) {
    static DONE: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    let mut done = DONE.lock().unwrap_or_else(|e| e.into_inner());
    if !done.iter().any(|t| t == tag) {
        done.push(tag.to_owned());
        durable_process::stop_leftovers(tag);
    }
}

fn unique() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed) ^ ((std::process::id() as u64) << 32)
}

/// `grace` from now; a grace too large for the clock (`Duration::MAX`, for
/// "wait as long as Pi takes") is far in the future, not a panic: tokio's
/// `sleep` already makes that deadline, so it is taken from there.
fn grace_from_now(grace: Duration) -> Instant {
    tokio::time::sleep(grace).deadline()
}

/// The card of a gated call: the gate's card function's words, with what
/// durable-pi promises whatever the function says: the ask's id is
/// `ask_id_for(pane, call id)` (the same after a restart of either side;
/// a card function's own `tool_call_id` would break that, and a constant one
/// would refuse the second call as already open), the card sits by the
/// call's `tool` item, and the gate's timeout applies.
fn card_of(
    gate: &GateOptions,
    tool: &str,
    input: &Value,
    call_id: &str,
    item: Option<&durable_types::Id>,
) -> AskSpec {
    let mut spec = (gate.card)(tool, input, call_id);
    spec.tool_call_id = call_id.to_owned();
    if let Some(item) = item {
        spec = spec.item_id(item.as_str());
    }
    if let Some(ms) = gate.timeout_ms {
        spec = spec.expires_in_ms(ms);
    }
    spec
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tokio::time::Instant;

    /// A card function that names its own tool call id (or a constant one)
    /// does not change the ask's id: it stays the call's, so that it is the
    /// same after a restart and two calls get two cards.
    #[test]
    fn a_custom_card_keeps_the_call_s_ask_id_by_its_item_with_the_timeout() {
        use durable_types::{AskOption, AskSpec, Expiry, Id};
        let gate = super::GateOptions::default().timeout_ms(5_000).card(|tool, _, _| {
            AskSpec::choice("my-card", format!("{tool}?"), [AskOption::new("allow", "Yes")])
        });
        let item = Id::new("pi-r-1-0-1").unwrap();
        let spec =
            super::card_of(&gate, "bash", &serde_json::json!({"command": "ls"}), "call-7", Some(&item));
        assert_eq!(spec.tool_call_id, "call-7");
        assert_eq!(spec.title, "bash?", "the card's own words stay");
        assert_eq!(spec.item_id.as_deref(), Some("pi-r-1-0-1"));
        assert!(matches!(spec.expires, Some(Expiry::In(5_000))), "{:?}", spec.expires);
    }

    #[tokio::test]
    async fn an_endless_stop_grace_does_not_overflow_the_clock() {
        assert!(super::grace_from_now(Duration::MAX) > Instant::now());
        let five = super::grace_from_now(Duration::from_secs(5)) - Instant::now();
        assert!(five <= Duration::from_secs(5) && five > Duration::from_secs(4));
    }
}
