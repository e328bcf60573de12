//! The phone's writes (§8): send, steer, stop, pane actions, rename, close,
//! reopen and starters. Each goes through the receipt step ([`Collie::once`]);
//! all writes on one pane but answers and stop share one lock, waited for at
//! most 5 s from the request's arrival (`409 busy`).

use std::sync::Arc;

use durable_types::exchange::Response;
use durable_types::{
    BUSY_MS, CloseBody, ErrorBody, ErrorCode, Id, Item, ItemBody, NoticeTone, PlainBody, RenameBody,
    ReopenBody, ScopeId, SendBody, StarterBody, SteerBody, Target, Timestamp, WriteResponse,
};
use serde_json::Value;
use tokio::sync::oneshot;
use tracing::Instrument;

use crate::core::Collie;
use crate::handlers::{
    ActionRequest, BoxFuture, CloseRequest, HandlerResult, PaneTakers, Refusal, RenameRequest, Reopen,
    ReopenRequest, SendRequest, StarterRequest, SteerRequest, StopRequest,
};
use crate::handles::layout::Pane;
use crate::once::Ran;
use crate::select::{Either, select};
use crate::signal::AbortController;
use crate::turn::TurnStart;
use durable_core::data::receipt::{PendingSend, SendState};
use durable_core::recovery::{RecoveryInput, RecoveryNext};
use durable_core::respond;
use durable_core::state::{Link, TabKey};
use durable_core::timers::Timer;
use durable_core::user_item_id;
use durable_core::writes::SendLook;

/// A pane's write, held or waited for (the machine's `Writers`): when it
/// ends — done, given up, or its request dropped — the next writer holds
/// the pane.
pub(crate) struct PaneWrite<'a> {
    core: &'a Collie,
    pane: Id,
    writer: Link,
}

impl Drop for PaneWrite<'_> {
    fn drop(&mut self) {
        let mut st = self.core.lock();
        st.end_write(&self.pane, self.writer);
        // A waiter that gave up (busy, or its request dropped) was never
        // woken: its wake-up goes too.
        st.links().forget_wake(self.writer);
    }
}

/// Marks the recovery of the sends over when dropped: an early return, or
/// a recovery dropped midway, never keeps the panes' writes waiting (were
/// it never to end, they would wait their 5 s and answer `409 busy`).
pub(crate) struct RecoveryOver<'a>(pub(crate) &'a Collie);

impl Drop for RecoveryOver<'_> {
    fn drop(&mut self) {
        self.0.lock().end_send_recovery();
    }
}

/// What the handlers said of a write.
pub(crate) enum Taken<T> {
    /// A handler took it.
    Yes(T),
    /// A handler refused it, with a reason (`409 refused`).
    Refused(String),
    /// No handler took it (`409 not-supported`).
    NotSupported,
}

/// Asks a pane's own handler, then the agent-wide one, until one answers
/// anything but [`Refusal::not_supported`]; returns the verdict and who gave it.
async fn first<H: ?Sized, T>(
    handlers: [&Option<Arc<H>>; 2],
    call: impl Fn(Arc<H>) -> BoxFuture<'static, HandlerResult<T>>,
) -> (Taken<T>, Option<Arc<H>>) {
    for h in handlers.into_iter().flatten() {
        match call(h.clone()).await {
            Ok(v) => return (Taken::Yes(v), Some(h.clone())),
            Err(r) => {
                if let Some(reason) = r.reason() {
                    return (Taken::Refused(reason.to_owned()), Some(h.clone()));
                }
            }
        }
    }
    (Taken::NotSupported, None)
}

/// Who may take a pane's write: its own handlers, then the agent-wide ones.
pub(crate) type Takers = (PaneTakers, PaneTakers);

fn ok(resp: WriteResponse, group: String) -> Ran {
    Ran::stored(respond::json(200, &resp), group)
}

fn refused(reason: String) -> Ran {
    Ran::unstored(respond::failure(
        ErrorBody::new(ErrorCode::Refused, format!("refused: {reason}")).with("reason", reason),
    ))
}

/// A hook's `Err`: `409 refused` with its reason, or `409 not-supported`.
fn refusal(r: Refusal, what: &str) -> Ran {
    match r.reason() {
        Some(reason) => refused(reason.to_owned()),
        None => not_supported(what),
    }
}

fn not_supported(what: &str) -> Ran {
    Ran::unstored(respond::error(
        ErrorCode::NotSupported,
        format!("no handler and no hook takes {what} here"),
    ))
}

fn no_pane(pane: &Id) -> Ran {
    Ran::unstored(respond::not_found(format!("no open pane {pane}")))
}

impl Collie {
    /// Asks for the pane's write and waits for it: at most until `arrival
    /// + 5 s` for a write from the phone (`409 busy`, and it waits first
    /// for the sends the last run left to be back in their queues: a send
    /// that arrives meanwhile goes behind them, and a repeat of one of
    /// them is decided once the recovery has looked at it, never twice —
    /// issue 29), for ever for a delivery of queued sends (`arrival` `None`).
    pub(crate) async fn write_pane(
        &self,
        pane: &Id,
        arrival: Option<Timestamp>,
    ) -> Result<PaneWrite<'_>, Ran> {
        let (write, granted, busy) = {
            let mut st = self.lock();
            // No write waits for a pane that is not open (the route answers 404).
            if arrival.is_some() && !st.is_open(pane) {
                return Err(no_pane(pane));
            }
            let writer = st.links().new_link();
            if st.request_write(pane, writer, arrival.is_some()) {
                return Ok(PaneWrite { core: self, pane: pane.clone(), writer });
            }
            let (tx, granted) = oneshot::channel();
            st.links().set_wake(writer, tx);
            let busy = arrival.map(|arrival| {
                let (wake, busy) = st.links().add_waiter();
                st.machine_mut().add_timer(arrival.plus_millis(BUSY_MS), Timer::Wake(wake));
                busy
            });
            (PaneWrite { core: self, pane: pane.clone(), writer }, granted, busy)
        };
        let Some(busy) = busy else {
            let _ = granted.await;
            return self.woken(pane, write);
        };
        match select(granted, busy).await {
            Either::Left(_) => self.woken(pane, write),
            // Granted as the wait ran out: it holds the pane, and goes on.
            Either::Right(_) if self.lock().holds_write(pane, write.writer) => Ok(write),
            Either::Right(_) => Err(Ran::unstored(respond::error(
                ErrorCode::Busy,
                format!("pane {pane} is busy with another write; try again"),
            ))),
        }
    }

    /// A waiting write woken: it holds the pane — or the pane closed
    /// meanwhile (`404`: a pane opened again under its id is written by
    /// those who ask for it from then on).
    #[allow(clippy::result_large_err)]
    fn woken<'a>(&'a self, pane: &Id, write: PaneWrite<'a>) -> Result<PaneWrite<'a>, Ran> {
        if self.lock().holds_write(pane, write.writer) { Ok(write) } else { Err(no_pane(pane)) }
    }

    /// The pane's handlers and the agent-wide ones; `None` when the pane is closed.
    fn handlers_of(&self, pane: &Id) -> Option<Takers> {
        let st = self.lock();
        let own = st.links_ref().takers(st.pane(pane)?.takers());
        Some((own, st.links_ref().wide.clone()))
    }

    /// Who takes a pane write: `404` for a pane that is not open, `409
    /// not-supported` for one with no handlers at all.
    // The refusal is the answer itself, moved once to the caller; a box
    // would only add an allocation to each refused write.
    #[allow(clippy::result_large_err)]
    fn takers(&self, pane: &Id, what: &str) -> Result<Takers, Ran> {
        match self.handlers_of(pane) {
            None => Err(no_pane(pane)),
            Some((own, wide)) if own.is_empty() && wide.is_empty() => Err(not_supported(what)),
            Some(found) => Ok(found),
        }
    }

    /// [`takers`](Self::takers) under the pane's write lock (waited for at
    /// most until `arrival + 5 s`).
    async fn locked_takers(
        &self,
        pane: &Id,
        arrival: Timestamp,
        what: &str,
    ) -> Result<(PaneWrite<'_>, Takers), Ran> {
        let write = self.write_pane(pane, Some(arrival)).await?;
        Ok((write, self.takers(pane, what)?))
    }

    fn pane_handle(&self, pane: &Id) -> Pane {
        Pane::from_parts(self.inner(), pane.clone())
    }

    /// Offers a send to the chat handlers; once one takes it, starts its
    /// turn (the pane works, turn id = request id), writes the `user` item
    /// naming the request id, and queues the turn as a job.
    ///
    /// `Err(Stopping)` when a graceful stop began: nothing was done. The
    /// turn is counted from here, before the stop is looked at, so either
    /// the stop sees this turn (and waits for it) or this sees the stop.
    ///
    /// `recorded` is the state the send was recorded in: one recorded
    /// `Running` already (a send delivered as it arrives) is not marked
    /// again, which saves the store a commit on the way to the turn.
    async fn deliver(
        &self,
        pane: &Id,
        takers: &Takers,
        request_id: &Id,
        text: &str,
        recorded: SendState,
    ) -> Result<Taken<()>, Stopping> {
        let running = TurnRunning::begin(self.inner());
        if self.is_stopping() {
            return Err(Stopping);
        }
        // The turn's signal is armed before the handler decides: a stop that
        // arrives while it is still deciding (or stuck) fires it.
        let controller = AbortController::new();
        self.arm_turn_stop(pane, controller.clone());
        let req = SendRequest {
            pane: self.pane_handle(pane),
            request_id: request_id.clone(),
            text: text.to_owned(),
            signal: controller.signal(),
        };
        let (verdict, handler) = first([&takers.0.chat, &takers.1.chat], |h| {
            let req = req.clone();
            Box::pin(async move { h.check_send_dyn(req).await })
        })
        .await;
        let (Taken::Yes(()), Some(handler)) = (&verdict, handler) else { return Ok(verdict) };
        let start = TurnStart {
            turn_id: request_id.to_string(),
            text: text.to_owned(),
            request_id: Some(request_id.clone()),
            controller,
        };
        let receipts = self.shared.options.receipts.clone();
        let marked = match recorded {
            SendState::Running => Ok(()),
            _ => receipts.set_send_state_dyn(request_id.as_str(), SendState::Running).await,
        };
        if let Err(e) = marked {
            // Without the mark a restart would take the turn for one not
            // begun and run it again: better not to begin it.
            return Ok(Taken::Refused(format!("the send's turn could not be recorded ({e})")));
        }
        let turn = match self.pane_handle(pane).begin_turn(start) {
            Ok(turn) => turn,
            Err(e) => return Ok(Taken::Refused(e.to_string())),
        };
        {
            let now = self.now();
            let mut st = self.lock();
            let item = Item::new(
                user_item_id(request_id),
                ItemBody::User { text: text.to_owned(), request_id: Some(request_id.clone()) },
            );
            if let Ok((item, _)) = item.sanitized() {
                st.pane_event(pane, now, durable_types::EventBody::Item { item: item.into() });
            }
        }
        // The turn runs on the driver; it ends (the pane goes idle) when the
        // handler returns and drops it.
        // It runs inside the turn's span: the handler's own `tracing` events
        // carry the pane and the turn.
        let (core, id) = (self.inner(), request_id.clone());
        let span = turn.span().clone();
        self.push_job(
            async move {
                // Counted until the turn ends, or its job is dropped unpolled.
                let _running = running;
                handler.turn_dyn(turn).await;
                // `done` only once the store has what the turn showed: a
                // restart then never brings back a done send's reply in an
                // earlier form (a cut one is closed with its notice).
                if receipts.keeps_sends_dyn() {
                    core.conversations_kept().await;
                }
                if let Err(e) = receipts.set_send_state_dyn(id.as_str(), SendState::Done).await {
                    core.warn(&format!(
                        "send {id}: its end could not be recorded ({e}); a restart will close it as cut"
                    ));
                }
            }
            .instrument(span),
        );
        Ok(Taken::Yes(()))
    }

    /// The sends a restart left (§9.1), decided by the machine
    /// (`durable_core::recovery`): this does the store calls it asks for,
    /// then delivers the sends it put back in their queues. The phone's
    /// writes held back meanwhile go once the job that runs this ends (its
    /// `RecoveryOver`, however it ends).
    pub(crate) async fn recover_sends(&self) {
        let receipts = self.shared.options.receipts.clone();
        let mut next = self.lock().machine_mut().begin_recovering_sends();
        loop {
            let input = match next {
                RecoveryNext::ReadSends => RecoveryInput::Sends(receipts.unfinished_sends_dyn().await),
                RecoveryNext::Lookup(id) => RecoveryInput::Lookup(receipts.get_dyn(id.as_str()).await),
                RecoveryNext::Close(id) => {
                    RecoveryInput::Closed(receipts.set_send_state_dyn(id.as_str(), SendState::Closed).await)
                }
                RecoveryNext::Over { deliver } => {
                    for pane in deliver {
                        self.deliver_queued(&pane);
                    }
                    return;
                }
            };
            let now = self.now();
            next = self.lock().machine_mut().recovering_sends(input, now);
        }
    }

    /// A pane went idle: deliver its oldest queued send, as a job.
    pub(crate) fn deliver_queued(&self, pane: &Id) {
        let has_queued = self.lock().pane(pane).is_some_and(|p| p.has_queued());
        if !has_queued {
            return;
        }
        let core = self.inner();
        let pane = pane.clone();
        self.push_job(async move {
            let Ok(_write) = core.write_pane(&pane, None).await else { return };
            // Deliver in order while the pane stays idle: a handler that
            // starts a turn stops the loop (the rest waits for that turn);
            // one that accepts and stays idle lets the next one through.
            loop {
                // A graceful stop starts no turn: what is queued stays
                // queued (a store that keeps sends delivers it at the next start).
                if core.is_stopping() {
                    return;
                }
                // Not over an open ask: it goes once the ask closes.
                let next = core.lock().next_queued_send(&pane);
                let Some(send) = next else { return };
                let Some(takers) = core.handlers_of(&pane) else { return };
                let why =
                    match core.deliver(&pane, &takers, &send.request_id, &send.text, SendState::Queued).await
                    {
                        Ok(Taken::Refused(reason)) => Some(reason),
                        Ok(Taken::NotSupported) => Some("no handler takes send here".to_owned()),
                        Ok(Taken::Yes(())) => None,
                        Err(Stopping) => {
                            // Back where it was, for the next start.
                            core.lock().requeue_send(&pane, send);
                            return;
                        }
                    };
                if let Some(reason) = why {
                    let receipts = &core.shared.options.receipts;
                    if let Err(e) =
                        receipts.set_send_state_dyn(send.request_id.as_str(), SendState::Closed).await
                    {
                        core.warn(&format!(
                            "send {}: its close could not be recorded ({e})",
                            send.request_id
                        ));
                    }
                    let notice = Item::new(
                        user_item_id(&send.request_id),
                        ItemBody::Notice {
                            text: format!("A queued message was not delivered: {reason}"),
                            partial: false,
                            tone: Some(NoticeTone::Warn),
                        },
                    );
                    let _ = core.pane_handle(&pane).write(notice);
                }
            }
        });
    }
}

pub(crate) async fn send(core: &Collie, pane: Id, body: SendBody, arrival: Timestamp) -> Response {
    let SendBody { request_id, text, turn_id, .. } = body;
    let run = || async {
        let (_guard, takers) = match core.locked_takers(&pane, arrival, "send").await {
            Ok(found) => found,
            Err(ran) => return ran,
        };
        // Recorded before anything runs, under the pane's write (§9.1): a
        // restart finds it, and finds it answered only if its receipt was
        // kept. The machine says in which state (`look_at_send`); after
        // each store write it looks again: a turn the program began itself
        // may start or end meanwhile (the sends queued behind the pane only
        // change under its write, held here).
        let mut recorded: Option<SendState> = None;
        let (queued, current_turn) = loop {
            let look =
                core.lock().machine_mut().look_at_send(&pane, &request_id, &text, turn_id.as_ref(), recorded);
            let want = match look {
                SendLook::Record(want) => want,
                SendLook::Refused(response) => return Ran::unstored(response),
                SendLook::Queued { turn_id, deliver_now } => break (Some(deliver_now), turn_id),
                SendLook::RunNow { turn_id } => break (None, turn_id),
            };
            // Written without the state lock, then looked at again.
            let receipts = &core.shared.options.receipts;
            let written = match recorded {
                None => {
                    let record = PendingSend::new(request_id.as_str(), pane.as_str(), text.as_str(), want);
                    receipts.record_send_dyn(record).await
                }
                Some(_) => receipts.set_send_state_dyn(request_id.as_str(), want).await,
            };
            if let Err(e) = written {
                return Ran::unstored(respond::error(
                    ErrorCode::Internal,
                    format!("the send could not be recorded ({e}); nothing ran, retry it"),
                ));
            }
            recorded = Some(want);
        };
        let turn = current_turn.map_or(Value::Null, Value::String);
        let group = format!("pane:{pane}");
        if let Some(deliver_now) = queued {
            if deliver_now {
                core.deliver_queued(&pane);
            }
            return ok(WriteResponse::new("queued", request_id.clone()).with("turnId", turn), group);
        }
        match core.deliver(&pane, &takers, &request_id, &text, SendState::Running).await {
            Ok(Taken::Yes(())) => {
                ok(WriteResponse::new("sent", request_id.clone()).with("turnId", turn), group)
            }
            Ok(Taken::Refused(reason)) => refused(reason),
            Ok(Taken::NotSupported) => not_supported("send"),
            Err(Stopping) => stopping(),
        }
    };
    core.once(&request_id, |_| None, run).await
}

pub(crate) async fn steer(core: &Collie, pane: Id, body: SteerBody, arrival: Timestamp) -> Response {
    let SteerBody { request_id, text, .. } = body;
    let run = || async {
        let (_guard, (own, wide)) = match core.locked_takers(&pane, arrival, "steer").await {
            Ok(found) => found,
            Err(ran) => return ran,
        };
        if own.chat.is_none() && wide.chat.is_none() {
            return not_supported("steer");
        }
        let working = core.lock().pane(&pane).is_some_and(|p| p.state() == durable_types::PaneState::Working);
        if !working {
            return refused("not-working".into());
        }
        let sreq = SteerRequest {
            pane: core.pane_handle(&pane),
            request_id: request_id.clone(),
            text: text.clone(),
        };
        let (verdict, _) = first([&own.chat, &wide.chat], |h| {
            let req = sreq.clone();
            Box::pin(async move { h.steer_dyn(req).await })
        })
        .await;
        match verdict {
            Taken::Yes(()) => {
                // The running turn hears it.
                core.lock().steer_turn(&pane, text);
                ok(WriteResponse::new("steered", request_id.clone()), format!("pane:{pane}"))
            }
            Taken::Refused(reason) => refused(reason),
            Taken::NotSupported => not_supported("steer"),
        }
    };
    core.once(&request_id, |_| None, run).await
}

/// Stop never waits behind the pane's lock: a stuck send cannot keep it
/// from acting.
pub(crate) async fn stop(core: &Collie, pane: Id, body: PlainBody) -> Response {
    let request_id = body.request_id;
    let run = || async {
        let (own, wide) = match core.takers(&pane, "stop") {
            Ok(found) => found,
            Err(ran) => return ran,
        };
        let sreq = StopRequest { pane: core.pane_handle(&pane), request_id: request_id.clone() };
        let (verdict, _) = first([&own.chat, &wide.chat], |h| {
            let req = sreq.clone();
            Box::pin(async move { h.stop_dyn(req).await })
        })
        .await;
        if let Taken::Refused(reason) = verdict {
            return refused(reason);
        }
        let now = core.now();
        let mut st = core.lock();
        st.stop_turn(&pane);
        st.machine_mut().abort_asks_of(&pane, now);
        drop(st);
        ok(WriteResponse::new("stopped", request_id.clone()), format!("pane:{pane}"))
    };
    core.once(&request_id, |_| None, run).await
}

pub(crate) async fn action(
    core: &Collie,
    pane: Id,
    action: Id,
    body: PlainBody,
    arrival: Timestamp,
) -> Response {
    let request_id = body.request_id;
    let run = || async {
        let (_guard, (own, wide)) = match core.locked_takers(&pane, arrival, "actions").await {
            Ok(found) => found,
            Err(ran) => return ran,
        };
        let known = core.lock().pane(&pane).is_some_and(|p| p.has_action(&action));
        if !known {
            return Ran::unstored(respond::not_found(format!("pane {pane} has no action {action}")));
        }
        let areq = ActionRequest {
            pane: core.pane_handle(&pane),
            request_id: request_id.clone(),
            action: action.clone(),
        };
        let (verdict, _) = first([&own.actions, &wide.actions], |h| {
            let req = areq.clone();
            Box::pin(async move { h.action_dyn(req).await })
        })
        .await;
        match verdict {
            Taken::Yes(()) => ok(WriteResponse::new("done", request_id.clone()), format!("pane:{pane}")),
            Taken::Refused(reason) => refused(reason),
            Taken::NotSupported => not_supported("this action"),
        }
    };
    core.once(&request_id, |_| None, run).await
}

/// A rename or close target, resolved against the layout.
enum Resolved {
    Workspace(ScopeId),
    Tab(TabKey),
    Pane(Id),
}

fn resolve(core: &Collie, target: Target, id: &str) -> Option<Resolved> {
    let st = core.lock();
    match target {
        Target::Workspace => {
            let ws = ScopeId::new(id).ok()?;
            st.has_workspace(&ws).then_some(Resolved::Workspace(ws))
        }
        Target::Tab => {
            let (w, t) = id.split_once(':')?;
            let key = TabKey { ws: ScopeId::new(w).ok()?, tab: ScopeId::new(t).ok()? };
            st.has_tab(&key).then_some(Resolved::Tab(key))
        }
        Target::Pane => {
            let pane = Id::new(id).ok()?;
            st.is_open(&pane).then_some(Resolved::Pane(pane))
        }
        #[allow(unreachable_patterns)]
        _ => None,
    }
}

/// Finds a rename or close target (`404` when there is none) and, for a
/// pane, waits for its write lock (`409 busy` after 5 s).
async fn resolve_and_lock<'a>(
    core: &'a Collie,
    target: Target,
    id: &str,
    arrival: Timestamp,
    verb: &str,
) -> Result<(Resolved, Option<PaneWrite<'a>>), Ran> {
    let Some(resolved) = resolve(core, target, id) else {
        return Err(Ran::unstored(respond::not_found(format!("nothing to {verb} at {id}"))));
    };
    let guard = match &resolved {
        Resolved::Pane(p) => Some(core.write_pane(p, Some(arrival)).await?),
        _ => None,
    };
    Ok((resolved, guard))
}

pub(crate) async fn rename(core: &Collie, body: RenameBody, arrival: Timestamp) -> Response {
    let RenameBody { request_id, target, id, title, .. } = body;
    let run = || async {
        let (resolved, _guard) = match resolve_and_lock(core, target, &id, arrival, "rename").await {
            Ok(found) => found,
            Err(ran) => return ran,
        };
        if let Some(h) = core.hooks() {
            let rreq = RenameRequest {
                request_id: request_id.clone(),
                target,
                id: id.clone(),
                title: title.clone(),
                kept: false,
            };
            if let Err(r) = h.rename_dyn(rreq).await {
                return refusal(r, "rename");
            }
        }
        let now = core.now();
        let applied = match resolved {
            Resolved::Workspace(ws) => core.workspace_handle(&ws).rename(&title),
            Resolved::Tab(key) => core.tab_handle(&key).rename(&title),
            Resolved::Pane(p) => core.lock().machine_mut().rename_pane_from_phone(&p, &title, now).map(drop),
        };
        match applied {
            // A target the hook closed meanwhile is renamed as far as the
            // phone is concerned (as before the rename returned a result).
            Err(e) if !e.is_closed() => {
                // `RenameBody::parse` refused a title breaking the title rule
                // already; should one get here, it is the same `400`.
                Ran::unstored(respond::error(ErrorCode::BadRequest, format!("title: {e}")))
            }
            _ => ok(WriteResponse::new("renamed", request_id.clone()), "renames".into()),
        }
    };
    core.once(&request_id, |_| None, run).await
}

pub(crate) async fn close(core: &Collie, body: CloseBody, arrival: Timestamp) -> Response {
    let CloseBody { request_id, target, id, .. } = body;
    let run = || async {
        let (resolved, _guard) = match resolve_and_lock(core, target, &id, arrival, "close").await {
            Ok(found) => found,
            Err(ran) => return ran,
        };
        if let Some(h) = core.hooks() {
            let creq = CloseRequest { request_id: request_id.clone(), target, id: id.clone() };
            if let Err(r) = h.close_dyn(creq).await {
                return refusal(r, "close");
            }
        }
        let now = core.now();
        let mut st = core.lock();
        let m = st.machine_mut();
        match resolved {
            Resolved::Workspace(ws) => m.close_workspace(&ws, now),
            Resolved::Tab(key) => m.close_tab(&key, now),
            Resolved::Pane(p) => m.close_pane(&p, now),
        };
        drop(st);
        ok(WriteResponse::new("closed", request_id.clone()), "closes".into())
    };
    core.once(&request_id, |_| None, run).await
}

pub(crate) async fn reopen(core: &Collie, body: ReopenBody) -> Response {
    let ReopenBody { request_id, id, .. } = body;
    let run = || async {
        if let Some(h) = core.hooks() {
            match h.reopen_dyn(ReopenRequest { request_id: request_id.clone(), id: id.clone() }).await {
                Err(r) => return refusal(r, "reopen"),
                Ok(Reopen::Reopened) => {
                    return ok(WriteResponse::new("reopened", request_id.clone()), "reopens".into());
                }
                Ok(_) => {}
            }
        }
        let now = core.now();
        let restored = core.lock().machine_mut().restore_pane(&id, now);
        if restored {
            // Sends acknowledged as `queued` before the close go out now.
            core.deliver_queued(&id);
            ok(WriteResponse::new("reopened", request_id.clone()), "reopens".into())
        } else {
            Ran::unstored(respond::not_found(format!(
                "pane {id} was not closed by this process; a conversation closed before a restart needs an on_reopen hook"
            )))
        }
    };
    core.once(&request_id, |_| None, run).await
}

pub(crate) async fn starter(core: &Collie, starter: Id, body: StarterBody) -> Response {
    let StarterBody { request_id, text, .. } = body;
    let run = || async {
        if core.is_stopping() {
            // A starter opens a conversation and often its first turn.
            return stopping();
        }
        let known = core.lock().has_starter(&starter);
        if !known {
            return Ran::unstored(respond::not_found(format!("no starter {starter}")));
        }
        let Some(h) = core.hooks() else { return not_supported("starters") };
        let sreq =
            StarterRequest { request_id: request_id.clone(), starter: starter.clone(), text: text.clone() };
        match h.starter_dyn(sreq).await {
            Ok(started) => {
                let pane = started.pane_id().map_or(Value::Null, |p| Value::String(p.to_string()));
                ok(WriteResponse::new("started", request_id.clone()).with("pane", pane), "starters".into())
            }
            Err(r) => refusal(r, "starters"),
        }
    };
    core.once(&request_id, |_| None, run).await
}

/// A graceful stop began ([`Driver::begin_stop`]): no turn starts.
pub(crate) struct Stopping;

/// `409 busy`, unstored: the phone sends it again once the agent is back.
fn stopping() -> Ran {
    Ran::unstored(durable_core::writes::stopping())
}

/// A running turn, counted until it ends or its job is dropped.
struct TurnRunning(Collie);

impl TurnRunning {
    fn begin(core: Collie) -> Self {
        core.turn_began();
        TurnRunning(core)
    }
}

impl Drop for TurnRunning {
    fn drop(&mut self) {
        self.0.turn_ended();
    }
}
