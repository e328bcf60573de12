//! One agent process: spawned, connected through the protocol crate's
//! client side over its standard input and output, initialized, and
//! stopped — with what its tools started.
//!
//! What the agent sends comes out as [`AgentEvent`]s, in order, on one
//! channel: the conversation's pump reads them all the time (a callback of
//! the protocol crate only hands them on, so its dispatch loop never waits
//! on the phone). Agent → client requests other than
//! `session/request_permission` (`fs/*`, `terminal/*`, anything else) get
//! the protocol's "method not found" from the crate; the client advertises
//! neither `fs` nor `terminal`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{
    CancelNotification, ClientCapabilities, CloseSessionRequest, ContentBlock, CreateElicitationRequest,
    CreateElicitationResponse, ElicitationAction, ElicitationCapabilities, ElicitationFormCapabilities,
    ElicitationUrlCapabilities, Implementation, InitializeRequest, ListSessionsRequest, ListSessionsResponse,
    LoadSessionRequest, NewSessionRequest, PromptRequest, PromptResponse, RequestPermissionRequest,
    RequestPermissionResponse, ResumeSessionRequest, SessionModeState, SessionNotification,
    SetSessionModeRequest, TextContent,
};
use agent_client_protocol::v1::{ConnectionTo, Responder};
use agent_client_protocol::{Agent, Client, Lines};
use durable_process::{AgentChild, RunMark, Watcher, describe_exit, kill_process_group};
use futures::StreamExt;
use tokio::io::AsyncWriteExt;
use tokio::sync::{Semaphore, mpsc, oneshot, watch};

use crate::lines::{agent_lines, update_gate};
use crate::modes::{ModeChoice, mode_to_select};
use crate::{AcpOptions, Error};

/// Events handed on and not yet read by the pump, at most (the protocol
/// crate's dispatch waits meanwhile).
const EVENTS_QUEUED: usize = 256;
/// How long a stopped agent (its input closed) has to exit, and what it
/// started to end, before they are killed.
const EXIT_GRACE: Duration = Duration::from_secs(2);
/// How long an agent whose output closed has to exit on its own before it
/// is ended (an agent exiting closes its output a moment before it ends).
const OUTPUT_CLOSED_GRACE: Duration = Duration::from_secs(1);

/// What the agent says, in the order it said it.
#[derive(Debug)]
pub(crate) enum AgentEvent {
    /// A `session/update`.
    Update(SessionNotification),
    /// A `session/request_permission`, with its responder.
    Permission(RequestPermissionRequest, Responder<RequestPermissionResponse>),
    /// An `elicitation/create` (a form to fill, or a page to open), with its responder.
    Elicitation(CreateElicitationRequest, Responder<CreateElicitationResponse>),
    /// Everything the agent said before the barrier was sent has been read.
    Barrier(oneshot::Sender<()>),
    /// The agent exited: how, and its last line on standard error.
    Exited(String),
}

impl AgentEvent {
    /// Answers a request that nobody will show (a permission `cancelled`,
    /// an elicitation `cancel`); any other event is dropped.
    pub(crate) fn refuse(self) {
        match self {
            AgentEvent::Permission(_, responder) => {
                let _ = responder.respond(RequestPermissionResponse::new(
                    agent_client_protocol::v1::schema::RequestPermissionOutcome::Cancelled,
                ));
            }
            AgentEvent::Elicitation(_, responder) => {
                let _ = responder.respond(CreateElicitationResponse::new(ElicitationAction::Cancel));
            }
            AgentEvent::Update(_) | AgentEvent::Barrier(_) | AgentEvent::Exited(_) => {}
        }
    }
}

/// Gemini CLI's name in `initialize` (`agentInfo.name`). Two quirks of its
/// 0.61 `session/load` are met by name: in the minute a session began, a
/// load overwrites the session's own file with an empty record (the
/// session is lost for good), so no load is tried then; and it streams its
/// replay after it answers the load (ACP says before), so the replay is
/// waited out before the next prompt.
pub(crate) const GEMINI_CLI: &str = "gemini-cli";

/// What `initialize` said the agent can do.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Abilities {
    pub load: bool,
    pub list: bool,
    /// `session/resume`: the session goes on without a replay.
    pub resume: bool,
    /// `session/close`: the agent frees what it holds for the session.
    pub close: bool,
}

/// A running agent.
pub(crate) struct AgentProcess {
    cx: ConnectionTo<Agent>,
    pid: Option<u32>,
    alive: Arc<AtomicBool>,
    close: Arc<std::sync::Mutex<Option<oneshot::Sender<()>>>>,
    exited: watch::Receiver<Option<String>>,
    events: mpsc::Sender<AgentEvent>,
    /// Permits of `session/update` lines (see `lines`): the pump gives one
    /// back per update read.
    pub(crate) gate: Arc<Semaphore>,
    pub(crate) abilities: Abilities,
    /// The agent's name, as `initialize` gave it (`agentInfo.name`): what
    /// tells an agent with a quirk of its own (`GEMINI_CLI`).
    pub(crate) agent_name: Option<String>,
    /// `session/update`s the pump has read (a replay that goes on after
    /// its load's answer is waited out by this count).
    pub(crate) updates_read: std::sync::atomic::AtomicU64,
    /// We are ending it (idle, closed, shutdown): its exit is no news.
    pub(crate) ending: AtomicBool,
    /// The mode its sessions run in (cards by default, `modes`).
    mode: ModeChoice,
    /// Its session's modes as last known: what `session/new` or
    /// `session/load` offered, with the current one kept up to date.
    modes: std::sync::Mutex<Option<SessionModeState>>,
    /// The mode asked for with `session/set_mode`, until the agent says it
    /// took it (its `current_mode_update` may come before the answer).
    mode_asked: std::sync::Mutex<Option<String>>,
    /// The watcher of its run: dropped once it stopped, it stops what the
    /// agent's tools left running (`durable_process::reaper`).
    watcher: std::sync::Mutex<Option<Watcher>>,
    mark: RunMark,
}

impl std::fmt::Debug for AgentProcess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentProcess")
            .field("pid", &self.pid)
            .field("alive", &self.is_alive())
            .finish_non_exhaustive()
    }
}

impl AgentProcess {
    /// Starts the agent and initializes it; the events come on the
    /// receiver. An agent that does not answer `initialize` within the
    /// options' timeout is killed, and that is the error.
    pub(crate) async fn start(
        options: &AcpOptions,
    ) -> Result<(Arc<AgentProcess>, mpsc::Receiver<AgentEvent>), Error> {
        let program = options.command.program().to_string_lossy().into_owned();
        // In a group of its own: a stop ends it with what it started there.
        let AgentChild { mut child, stdin, stdout, stderr: tail, mark, watcher, .. } =
            AgentChild::builder(options.command.command(&options.cwd))
                .run_tag(durable_process::folder_tag(&options.data_dir))
                .own_process_group()
                .spawn()
                .map_err(|source| Error::Spawn { program, source })?;
        let pid = child.id();
        let gate = update_gate();
        let (events_tx, events_rx) = mpsc::channel(EVENTS_QUEUED);
        let (cx_tx, cx_rx) = oneshot::channel::<ConnectionTo<Agent>>();
        let (close_tx, close_rx) = oneshot::channel::<()>();
        let (exited_tx, exited_rx) = watch::channel(None);
        let alive = Arc::new(AtomicBool::new(true));
        let sink = futures::sink::unfold(stdin, |mut stdin, line: String| async move {
            stdin.write_all(line.as_bytes()).await?;
            stdin.write_all(b"\n").await?;
            stdin.flush().await?;
            Ok::<_, std::io::Error>(stdin)
        });
        // The end of the agent's output, seen by the exit watcher below.
        let (eof_tx, mut eof_rx) = watch::channel(false);
        let eof = futures::stream::once(async move {
            let _ = eof_tx.send(true);
            None::<std::io::Result<String>>
        })
        .filter_map(futures::future::ready);
        let incoming = agent_lines(stdout, gate.clone()).chain(eof);
        let transport = Lines::new(Box::pin(sink), Box::pin(incoming));
        let (on_update, on_permission, on_elicitation) =
            (events_tx.clone(), events_tx.clone(), events_tx.clone());
        let connection = Client
            .v1()
            .name("durable-acp")
            .on_receive_notification(
                async move |n: SessionNotification, _cx| {
                    let _ = on_update.send(AgentEvent::Update(n)).await;
                    Ok(())
                },
                agent_client_protocol::on_receive_notification!(),
            )
            .on_receive_request(
                async move |r: RequestPermissionRequest, responder, _cx| {
                    if let Err(mpsc::error::SendError(AgentEvent::Permission(_, responder))) =
                        on_permission.send(AgentEvent::Permission(r, responder)).await
                    {
                        // No conversation reads any more: the request is not answered by anyone.
                        let cancelled = RequestPermissionResponse::new(
                            agent_client_protocol::v1::schema::RequestPermissionOutcome::Cancelled,
                        );
                        let _ = responder.respond(cancelled);
                    }
                    Ok(())
                },
                agent_client_protocol::on_receive_request!(),
            )
            .on_receive_request(
                async move |r: CreateElicitationRequest, responder, _cx| {
                    if let Err(mpsc::error::SendError(AgentEvent::Elicitation(_, responder))) =
                        on_elicitation.send(AgentEvent::Elicitation(r, responder)).await
                    {
                        let _ = responder.respond(CreateElicitationResponse::new(ElicitationAction::Cancel));
                    }
                    Ok(())
                },
                agent_client_protocol::on_receive_request!(),
            )
            .connect_with(transport, async move |cx: ConnectionTo<Agent>| {
                let _ = cx_tx.send(cx);
                let _ = close_rx.await;
                Ok(())
            });
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::warn!(error = %e, "acp: the connection to the agent ended");
            }
        });
        let close = Arc::new(std::sync::Mutex::new(Some(close_tx)));
        {
            // The exit, watched apart from the connection (whose end waits for us).
            let (alive, events_tx, close) = (alive.clone(), events_tx.clone(), close.clone());
            tokio::spawn(async move {
                // An agent whose output closes can no longer be heard, even
                // if it lives on: after a moment to exit it is ended, and
                // counts as gone (its conversation can start it again).
                let eof = async {
                    // The reader dropped unfinished (the connection ended on
                    // our side) is no end of the agent's output.
                    if eof_rx.wait_for(|e| *e).await.is_err() {
                        std::future::pending::<()>().await;
                    }
                };
                let output_closed = tokio::select! {
                    status = child.wait() => Err(status),
                    () = eof => Ok(()),
                };
                let status = match output_closed {
                    Err(status) => status.map(|s| describe_exit(&s)),
                    Ok(()) => match tokio::time::timeout(OUTPUT_CLOSED_GRACE, child.wait()).await {
                        Ok(status) => status.map(|s| describe_exit(&s)),
                        Err(_) => {
                            if let Some(pid) = pid {
                                kill_process_group(pid);
                            }
                            let _ = child.start_kill();
                            child.wait().await.map(|s| {
                                format!("it closed its output and was stopped, {}", describe_exit(&s))
                            })
                        }
                    },
                };
                let status = status.unwrap_or_else(|e| format!("its end was not seen: {e}"));
                alive.store(false, Ordering::SeqCst);
                // What it wrote before it ended is read first (a moment at
                // most: a process it started may hold its output open), and
                // the standard error reader catches the last lines.
                let _ = tokio::time::timeout(Duration::from_secs(1), eof_rx.wait_for(|e| *e)).await;
                tokio::time::sleep(Duration::from_millis(50)).await;
                let how = match tail.last_line() {
                    Some(last) => format!("{status}; last words: {last}"),
                    None => status,
                };
                let _ = exited_tx.send(Some(how.clone()));
                let _ = events_tx.send(AgentEvent::Exited(how)).await;
                let close = close.lock().unwrap_or_else(|e| e.into_inner()).take();
                if let Some(close) = close {
                    let _ = close.send(());
                }
            });
        }
        let mut process = AgentProcess {
            cx: match cx_rx.await {
                Ok(cx) => cx,
                Err(_) => return Err(Error::agent("the connection to the agent could not start")),
            },
            pid,
            alive,
            close,
            exited: exited_rx,
            events: events_tx,
            gate,
            abilities: Abilities::default(),
            agent_name: None,
            updates_read: std::sync::atomic::AtomicU64::new(0),
            ending: AtomicBool::new(false),
            mode: options.mode.clone(),
            modes: std::sync::Mutex::new(None),
            mode_asked: std::sync::Mutex::new(None),
            watcher: std::sync::Mutex::new(watcher),
            mark,
        };
        // On an error the process is dropped here, which kills it.
        (process.abilities, process.agent_name) = process.initialize(options.init_timeout).await?;
        Ok((Arc::new(process), events_rx))
    }

    async fn initialize(&self, timeout: Duration) -> Result<(Abilities, Option<String>), Error> {
        let request = InitializeRequest::new(ProtocolVersion::V1)
            // Forms and pages to open are cards (`elicitation`); files and
            // terminals are the agent's own business.
            .client_capabilities(
                ClientCapabilities::default().elicitation(
                    ElicitationCapabilities::new()
                        .form(ElicitationFormCapabilities::new())
                        .url(ElicitationUrlCapabilities::new()),
                ),
            )
            .client_info(Implementation::new("durable-acp", env!("CARGO_PKG_VERSION")));
        let answer = tokio::time::timeout(timeout, self.cx.send_request(request).block_task()).await;
        match answer {
            Ok(Ok(r)) => {
                let caps = r.agent_capabilities;
                let sessions = &caps.session_capabilities;
                let abilities = Abilities {
                    load: caps.load_session,
                    list: sessions.list.is_some(),
                    resume: sessions.resume.is_some(),
                    close: sessions.close.is_some(),
                };
                Ok((abilities, r.agent_info.map(|info| info.name)))
            }
            Ok(Err(e)) => Err(Error::agent(format!("the agent failed to initialize: {}", self.why(e).await))),
            Err(_) => Err(Error::agent(format!(
                "the agent did not answer initialize within {} s",
                timeout.as_secs_f32()
            ))),
        }
    }

    /// Why a request failed: the agent's exit when it exited, else the error.
    async fn why(&self, e: agent_client_protocol::Error) -> String {
        match self.exit_status(Duration::from_millis(500)).await {
            Some(how) => format!("the agent exited ({how})"),
            // One line: an agent's error data may be pretty-printed JSON.
            None => e.to_string().split_whitespace().collect::<Vec<_>>().join(" "),
        }
    }

    /// How the agent exited, once it did (waiting at most `wait`).
    pub(crate) async fn exit_status(&self, wait: Duration) -> Option<String> {
        let mut exited = self.exited.clone();
        let got = tokio::time::timeout(wait, exited.wait_for(Option::is_some)).await;
        match got {
            Ok(Ok(how)) => how.clone(),
            _ => None,
        }
    }

    /// Whether the agent still runs.
    pub(crate) fn is_alive(&self) -> bool {
        self.alive.load(Ordering::SeqCst)
    }

    /// A barrier in the event stream: resolves once the pump has read
    /// every event the agent sent before now.
    pub(crate) async fn settle(&self) {
        let (tx, rx) = oneshot::channel();
        if self.events.send(AgentEvent::Barrier(tx)).await.is_ok() {
            let _ = tokio::time::timeout(Duration::from_secs(5), rx).await;
        }
    }

    /// `session/new` in `cwd`: the new session's id.
    pub(crate) async fn new_session(&self, cwd: &std::path::Path) -> Result<String, Error> {
        match self.cx.send_request(NewSessionRequest::new(cwd)).block_task().await {
            Ok(r) => {
                let session_id = r.session_id.0.to_string();
                self.select_mode(&session_id, r.modes.as_ref(), true).await?;
                Ok(session_id)
            }
            Err(e) => Err(Error::agent(format!("session/new failed: {}", self.why(e).await))),
        }
    }

    /// Cards by default: switches the session to the mode it runs in
    /// (`modes`), or fails when it cannot. A mode the user named that the
    /// agent offers no modes for fails a new session only: a load or a
    /// resume may leave `modes` out (the session keeps the mode it had).
    async fn select_mode(
        &self,
        session_id: &str,
        modes: Option<&SessionModeState>,
        new: bool,
    ) -> Result<(), Error> {
        if modes.is_some() || new {
            *self.modes.lock().unwrap_or_else(|e| e.into_inner()) = modes.cloned();
        }
        let Some(state) = modes else {
            return match &self.mode {
                ModeChoice::Chosen(mode) if new => {
                    Err(Error::agent(format!("the agent offers no session modes, so not {mode:?}")))
                }
                ModeChoice::Chosen(_) | ModeChoice::AsksFirst => Ok(()),
            };
        };
        let mode = match mode_to_select(state, &self.mode) {
            Ok(Some(mode)) => mode,
            Ok(None) => return Ok(()),
            Err(why) => return Err(Error::agent(why)),
        };
        self.set_mode(session_id, &mode).await
    }

    /// `session/set_mode`; the mode kept as the current one once the agent took it.
    pub(crate) async fn set_mode(&self, session_id: &str, mode: &str) -> Result<(), Error> {
        *self.mode_asked.lock().unwrap_or_else(|e| e.into_inner()) = Some(mode.to_owned());
        let request = SetSessionModeRequest::new(session_id.to_owned(), mode.to_owned());
        let answer = self.cx.send_request(request).block_task().await;
        // The mode is current before the asked one is forgotten: the
        // agent's `current_mode_update` for it, read meanwhile by the pump,
        // then finds it asked or current, never news. From then on an
        // update is the agent's own doing.
        if answer.is_ok() {
            self.mode_changed(mode);
        }
        self.mode_asked.lock().unwrap_or_else(|e| e.into_inner()).take();
        match answer {
            Ok(_) => {
                tracing::info!(session = session_id, mode = %mode, "acp: session mode set");
                Ok(())
            }
            Err(e) => Err(Error::agent(format!("session/set_mode {mode:?} failed: {}", self.why(e).await))),
        }
    }

    /// The session's modes as last known (`None`: the agent offers none).
    pub(crate) fn modes(&self) -> Option<SessionModeState> {
        self.modes.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The session's current mode is now `mode` (set here, or by the agent).
    pub(crate) fn mode_changed(&self, mode: &str) {
        if let Some(state) = self.modes.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
            state.current_mode_id = mode.to_owned().into();
        }
    }

    /// The agent says its session's mode is now `mode`
    /// (`current_mode_update`): kept, and whether the agent changed it on
    /// its own (not as asked here, and not the mode it had).
    pub(crate) fn agent_set_mode(&self, mode: &str) -> bool {
        let asked = {
            let mut asked = self.mode_asked.lock().unwrap_or_else(|e| e.into_inner());
            if asked.as_deref() == Some(mode) { asked.take() } else { None }
        };
        let before = self.modes().map(|s| s.current_mode_id.0.to_string());
        self.mode_changed(mode);
        asked.is_none() && before.is_some_and(|b| b != mode)
    }

    /// `session/load`: the agent replays the session as updates before it answers.
    pub(crate) async fn load_session(&self, session_id: &str, cwd: &std::path::Path) -> Result<(), Error> {
        match self.cx.send_request(LoadSessionRequest::new(session_id.to_owned(), cwd)).block_task().await {
            Ok(r) => self.select_mode(session_id, r.modes.as_ref(), false).await,
            Err(e) => Err(Error::agent(format!("session/load failed: {}", self.why(e).await))),
        }
    }

    /// `session/resume`: the session goes on, without a replay (the pane
    /// shows it already).
    pub(crate) async fn resume_session(&self, session_id: &str, cwd: &std::path::Path) -> Result<(), Error> {
        match self.cx.send_request(ResumeSessionRequest::new(session_id.to_owned(), cwd)).block_task().await {
            Ok(r) => self.select_mode(session_id, r.modes.as_ref(), false).await,
            Err(e) => Err(Error::agent(format!("session/resume failed: {}", self.why(e).await))),
        }
    }

    /// `session/close`, when the agent offers it: it frees what it holds for
    /// the session (the session stays: it can be loaded again). Bounded: an
    /// agent that does not answer is stopped anyway.
    pub(crate) async fn close_session(&self, session_id: &str) {
        if !self.abilities.close {
            return;
        }
        let request = self.cx.send_request(CloseSessionRequest::new(session_id.to_owned())).block_task();
        match tokio::time::timeout(Duration::from_secs(2), request).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => tracing::warn!(error = %e, "acp: session/close failed"),
            Err(_) => tracing::warn!("acp: session/close got no answer in 2 s"),
        }
    }

    /// One page of `session/list` in `cwd`.
    pub(crate) async fn list_sessions(
        &self,
        cwd: &std::path::Path,
        cursor: Option<String>,
    ) -> Result<ListSessionsResponse, Error> {
        let request = ListSessionsRequest::new().cwd(cwd.to_path_buf()).cursor(cursor);
        match self.cx.send_request(request).block_task().await {
            Ok(r) => Ok(r),
            Err(e) => Err(Error::agent(format!("session/list failed: {}", self.why(e).await))),
        }
    }

    /// `session/prompt` with one text block; resolves with the turn's end.
    pub(crate) async fn prompt(&self, session_id: &str, text: &str) -> Result<PromptResponse, Error> {
        let prompt = vec![ContentBlock::Text(TextContent::new(text.to_owned()))];
        match self.cx.send_request(PromptRequest::new(session_id.to_owned(), prompt)).block_task().await {
            Ok(r) => Ok(r),
            Err(e) => Err(Error::agent(self.why(e).await)),
        }
    }

    /// `session/cancel` (a notification: the prompt's answer says the rest).
    pub(crate) fn cancel(&self, session_id: &str) {
        let _ = self.cx.send_notification(CancelNotification::new(session_id.to_owned()));
    }

    /// Ends the agent: its input closes (it saves and exits), and after
    /// [`EXIT_GRACE`] it and what it started are killed.
    pub(crate) async fn stop(&self) {
        self.ending.store(true, Ordering::SeqCst);
        let close = self.close.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(close) = close {
            let _ = close.send(());
        }
        let started = tokio::time::Instant::now();
        if self.exit_status(EXIT_GRACE).await.is_none() {
            self.kill();
            let _ = self.exit_status(EXIT_GRACE).await;
        }
        // What it started gets the rest of the grace to end on its own (Pi
        // saves the session after pi-acp exits)…
        // (Where that cannot be told, the whole grace.)
        while started.elapsed() < EXIT_GRACE && self.mark.any_alive() != Some(false) {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        // …then the watcher stops what is left.
        drop(self.watcher.lock().unwrap_or_else(|e| e.into_inner()).take());
    }

    /// Kills the agent and its process group at once.
    pub(crate) fn kill(&self) {
        if let Some(pid) = self.pid {
            kill_process_group(pid);
        }
        let close = self.close.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(close) = close {
            let _ = close.send(());
        }
    }
}

impl Drop for AgentProcess {
    fn drop(&mut self) {
        if self.is_alive() {
            self.kill();
        }
    }
}
