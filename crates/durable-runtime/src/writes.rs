//! The phone's writes (§8): send, steer, stop, pane actions, rename, close,
//! reopen and starters. Each goes through the receipt step ([`Collie::once`]);
//! all writes on one pane but answers and stop share one lock, waited for at
//! most 5 s from the request's arrival (`409 busy`).

use std::sync::Arc;

use durable_types::exchange::Response;
use durable_types::{BUSY_MS, ErrorCode, Id, SendBody, Timestamp, WriteResponse};
use serde_json::Value;
use tokio::sync::oneshot;
use tracing::Instrument;

use crate::core::Collie;
use crate::handlers::{
    ActionRequest, CloseRequest, DynChat, HandlerResult, PaneTakers, RenameRequest, Reopen, ReopenRequest,
    SendRequest, StarterRequest, SteerRequest, StopRequest,
};
use crate::handles::layout::Pane;
use crate::once::Ran;
use crate::select::{Either, select};
use crate::signal::AbortController;
use crate::turn::{Turn, TurnStart};
use durable_core::data::receipt::{PendingSend, SendState};
use durable_core::delivery::{ChatSlot, Delivered, DeliveryInput, DeliveryNext, Verdict};
use durable_core::phone_writes::{Decider, Deciders, Heard, PhoneWrite, WriteAnswer, WriteNext};
use durable_core::recovery::{RecoveryInput, RecoveryNext};
use durable_core::respond;
use durable_core::state::{JournalName, Link, QueuedSend};
use durable_core::timers::Timer;
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

/// Who may take a pane's write: its own handlers, then the agent-wide ones.
pub(crate) type Takers = (PaneTakers, PaneTakers);

fn ok(resp: WriteResponse, group: String) -> Ran {
    Ran::stored(respond::json(200, &resp), group)
}

fn refused(reason: String) -> Ran {
    Ran::unstored(respond::refused(reason))
}

fn no_pane(pane: &Id) -> Ran {
    Ran::unstored(respond::no_pane(pane))
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

    fn pane_handle(&self, pane: &Id) -> Pane {
        Pane::from_parts(self.inner(), pane.clone())
    }

    /// Delivers a send, as the machine's delivery (`durable_core::delivery`)
    /// asks: its handlers' verdicts, the store's marks, the turn begun. A
    /// turn begun runs as a job on the driver; it ends (the pane goes idle)
    /// when the handler returns and drops it. `link` names the delivery;
    /// `controller` is the turn's stop signal, armed by the machine as it
    /// began (`next`).
    async fn deliver(
        &self,
        pane: &Id,
        link: Link,
        send: &QueuedSend,
        controller: AbortController,
        mut next: DeliveryNext,
    ) -> Delivered {
        /// Gives the delivery up if its caller goes away before it ends.
        struct Underway<'a>(&'a Collie, Option<Link>);
        impl Drop for Underway<'_> {
            fn drop(&mut self) {
                if let Some(link) = self.1 {
                    self.0.lock().machine_mut().drop_delivery(link);
                }
            }
        }
        let mut underway = Underway(self, Some(link));
        let receipts = self.shared.options.receipts.clone();
        let request_id = &send.request_id;
        let mut took: Option<Arc<dyn DynChat>> = None;
        let mut turn = None;
        // The conversations' journal's length as the turn began.
        let mut since = 0;
        loop {
            let input = match next {
                DeliveryNext::Check(slot) => {
                    let chat = self.handlers_of(pane).and_then(|(own, wide)| match slot {
                        ChatSlot::Pane => own.chat,
                        _ => wide.chat,
                    });
                    let verdict = match chat {
                        None => Verdict::NotSupported,
                        Some(chat) => {
                            let req = SendRequest {
                                pane: self.pane_handle(pane),
                                request_id: request_id.clone(),
                                text: send.text.clone(),
                                signal: controller.signal(),
                            };
                            match chat.check_send_dyn(req).await {
                                Ok(()) => {
                                    took = Some(chat);
                                    Verdict::Takes
                                }
                                Err(r) => r
                                    .reason()
                                    .map_or(Verdict::NotSupported, |why| Verdict::Refuses(why.to_owned())),
                            }
                        }
                    };
                    DeliveryInput::Checked(verdict)
                }
                DeliveryNext::MarkRunning => DeliveryInput::Marked(
                    receipts.set_send_state_dyn(request_id.as_str(), SendState::Running).await,
                ),
                DeliveryNext::MarkClosed => DeliveryInput::Closed(
                    receipts.set_send_state_dyn(request_id.as_str(), SendState::Closed).await,
                ),
                DeliveryNext::StartTurn => {
                    since = self.lock().journal_pushed(JournalName::Conversations);
                    let start = TurnStart {
                        turn_id: request_id.to_string(),
                        text: send.text.clone(),
                        request_id: Some(request_id.clone()),
                        controller: controller.clone(),
                    };
                    DeliveryInput::Started(match self.pane_handle(pane).begin_turn(start) {
                        Ok(begun) => {
                            turn = Some(begun);
                            Ok(())
                        }
                        Err(e) => Err(e.to_string()),
                    })
                }
                DeliveryNext::Over(delivered) => {
                    underway.1 = None;
                    if let (Delivered::Started, Some(turn), Some(handler)) = (&delivered, turn, took) {
                        self.run_turn(turn, handler, request_id.clone(), pane.clone(), since);
                    }
                    return delivered;
                }
            };
            let now = self.now();
            next = self.lock().machine_mut().delivery_step(link, input, now);
        }
    }

    /// Runs a send's turn as a job on the driver, counted as running (the
    /// machine began counting it) until it ends or its job is dropped
    /// unpolled. It runs inside the turn's span: the handler's own
    /// `tracing` events carry the pane and the turn.
    fn run_turn(&self, turn: Turn, handler: Arc<dyn DynChat>, id: Id, pane: Id, since: u64) {
        let running = TurnRunning(self.inner());
        let (core, receipts) = (self.inner(), self.shared.options.receipts.clone());
        let span = turn.span().clone();
        self.push_job(
            async move {
                let _running = running;
                handler.turn_dyn(turn).await;
                // `done` only with what the turn showed: a restart then
                // never brings back a done send's reply in an earlier form
                // (a cut one is closed with its notice). A store that keeps
                // conversations records it in the write that keeps the
                // turn's last items (one commit); the job that applies the
                // journal warns if that write fails.
                let journaled = match receipts.keeps_sends_dyn() {
                    true => core.lock().journal_send_done(id.clone(), pane, since),
                    false => None,
                };
                match journaled {
                    Some(target) => core.wait_for_journal(JournalName::Conversations, target).await,
                    None => {
                        if let Err(e) = receipts.set_send_state_dyn(id.as_str(), SendState::Done).await {
                            core.warn(&format!(
                                "send {id}: its end could not be recorded ({e}); a restart will close it as cut"
                            ));
                        }
                    }
                }
            }
            .instrument(span),
        );
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

    /// A pane went idle: deliver its queued sends, as a job, in order
    /// while the pane stays idle: a handler that starts a turn stops the
    /// loop (the rest waits for that turn); one that accepts and stays
    /// idle lets the next one through. The machine takes each from the
    /// queue (`begin_queued_delivery`), and closes one not delivered.
    pub(crate) fn deliver_queued(&self, pane: &Id) {
        let has_queued = self.lock().pane(pane).is_some_and(|p| p.has_queued());
        if !has_queued {
            return;
        }
        let core = self.inner();
        let pane = pane.clone();
        self.push_job(async move {
            let Ok(_write) = core.write_pane(&pane, None).await else { return };
            loop {
                let controller = AbortController::new();
                let begun = {
                    let mut st = core.lock();
                    let (link, stop) = (st.links().new_link(), st.links().add_stop(controller.clone()));
                    st.machine_mut()
                        .begin_queued_delivery(link, &pane, stop)
                        .map(|(send, next)| (link, send, next))
                };
                let Some((link, send, next)) = begun else { return };
                if core.deliver(&pane, link, &send, controller, next).await == Delivered::Stopping {
                    return;
                }
            }
        });
    }

    /// Delivers a send recorded `Running` as it arrived (its writer holds the pane).
    async fn deliver_now(&self, pane: &Id, request_id: &Id, text: &str) -> Delivered {
        let controller = AbortController::new();
        let send = QueuedSend { request_id: request_id.clone(), text: text.to_owned() };
        let (link, next) = {
            let mut st = self.lock();
            let (link, stop) = (st.links().new_link(), st.links().add_stop(controller.clone()));
            (link, st.machine_mut().begin_delivery(link, pane, send.clone(), SendState::Running, stop))
        };
        self.deliver(pane, link, &send, controller, next).await
    }
}

pub(crate) async fn send(core: &Collie, pane: Id, body: SendBody, arrival: Timestamp) -> Response {
    let SendBody { request_id, text, turn_id, .. } = body;
    let run = || async {
        let _held = match core.write_pane(&pane, Some(arrival)).await {
            Ok(held) => held,
            Err(ran) => return ran,
        };
        // Its chat handlers are asked as it is delivered: here only whether the pane has any taker.
        let has_takers =
            core.handlers_of(&pane).is_some_and(|(own, wide)| !(own.is_empty() && wide.is_empty()));
        // Recorded before anything runs, under the pane's write (§9.1): a
        // restart finds it, and finds it answered only if its receipt was
        // kept. The machine says in which state (`look_at_send`); after
        // each store write it looks again: a turn the program began itself
        // may start or end meanwhile (the sends queued behind the pane only
        // change under its write, held here).
        let mut recorded: Option<SendState> = None;
        let (queued, current_turn) = loop {
            let look = core.lock().machine_mut().look_at_send(
                &pane,
                &request_id,
                &text,
                turn_id.as_ref(),
                recorded,
                has_takers,
            );
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
        match core.deliver_now(&pane, &request_id, &text).await {
            Delivered::Started => {
                ok(WriteResponse::new("sent", request_id.clone()).with("turnId", turn), group)
            }
            Delivered::Refused(reason) => refused(reason),
            Delivered::Stopping => stopping(),
            Delivered::Failed(why) => Ran::unstored(respond::error(ErrorCode::Internal, why)),
            _ => Ran::unstored(respond::not_supported("send")),
        }
    };
    core.once(&request_id, |_| None, run).await
}

/// One of the phone's writes other than a send, decided by the machine
/// (`durable_core::phone_writes`): this holds the pane's write it names
/// (waited for at most until `arrival + 5 s`), asks the handlers and hooks
/// it names, and hands back what they said, until it answers.
pub(crate) async fn phone_write(
    core: &Collie,
    request_id: Id,
    write: PhoneWrite,
    arrival: Timestamp,
) -> Response {
    let run = || async {
        let pane = core.lock().machine().write_needs_pane(&write);
        let _held = match &pane {
            Some(pane) => match core.write_pane(pane, Some(arrival)).await {
                Ok(held) => Some(held),
                Err(ran) => return ran,
            },
            None => None,
        };
        let mut heard = None;
        loop {
            let (deciders, takers) = core.deciders(&write);
            let now = core.now();
            let next =
                core.lock().machine_mut().phone_write(&request_id, &write, deciders, heard.take(), now);
            match next {
                WriteNext::Answer(WriteAnswer { response, group: Some(group) }) => {
                    return Ran::stored(response, group);
                }
                WriteNext::Answer(WriteAnswer { response, .. }) => return Ran::unstored(response),
                WriteNext::Ask(decider) => {
                    heard = Some((decider, core.ask(decider, takers, &request_id, &write).await));
                }
            }
        }
    };
    core.once(&request_id, |_| None, run).await
}

/// What a handler's or hook's `Result` says to the machine.
fn heard<T>(result: HandlerResult<T>, taken: impl FnOnce(T) -> Heard) -> Heard {
    match result {
        Ok(v) => taken(v),
        Err(r) => r.reason().map_or(Heard::NotSupported, |why| Heard::Refuses(why.to_owned())),
    }
}

impl Collie {
    /// The handlers and hooks the program set for `write`, and the pane's
    /// takers to ask (the pane's own, then the agent-wide ones).
    fn deciders(&self, write: &PhoneWrite) -> (Deciders, Option<Takers>) {
        let pane = match write {
            PhoneWrite::Steer { pane, .. } | PhoneWrite::Stop { pane } | PhoneWrite::Action { pane, .. } => {
                Some(pane)
            }
            _ => None,
        };
        let takers = pane.and_then(|pane| self.handlers_of(pane));
        let (own, wide) = takers.as_ref().map_or((None, None), |(own, wide)| (Some(own), Some(wide)));
        let deciders = Deciders {
            pane_chat: own.is_some_and(|t| t.chat.is_some()),
            wide_chat: wide.is_some_and(|t| t.chat.is_some()),
            pane_actions: own.is_some_and(|t| t.actions.is_some()),
            wide_actions: wide.is_some_and(|t| t.actions.is_some()),
            hooks: self.lock().links_ref().hooks.is_some(),
        };
        (deciders, takers)
    }

    /// Asks `decider` about `write`; one that is gone by now does not
    /// take it.
    async fn ask(
        &self,
        decider: Decider,
        takers: Option<Takers>,
        request_id: &Id,
        write: &PhoneWrite,
    ) -> Heard {
        let slot = |slot: ChatSlot| {
            let (own, wide) = takers.clone()?;
            Some(if slot == ChatSlot::Pane { own } else { wide })
        };
        let request_id = request_id.clone();
        match (decider, write) {
            (Decider::Chat(s), PhoneWrite::Steer { pane, text }) => {
                let Some(chat) = slot(s).and_then(|t| t.chat) else { return Heard::NotSupported };
                let req = SteerRequest { pane: self.pane_handle(pane), request_id, text: text.clone() };
                heard(chat.steer_dyn(req).await, |()| Heard::Takes)
            }
            (Decider::Chat(s), PhoneWrite::Stop { pane }) => {
                let Some(chat) = slot(s).and_then(|t| t.chat) else { return Heard::NotSupported };
                let req = StopRequest { pane: self.pane_handle(pane), request_id };
                heard(chat.stop_dyn(req).await, |()| Heard::Takes)
            }
            (Decider::Actions(s), PhoneWrite::Action { pane, action }) => {
                let Some(actions) = slot(s).and_then(|t| t.actions) else { return Heard::NotSupported };
                let req = ActionRequest { pane: self.pane_handle(pane), request_id, action: action.clone() };
                heard(actions.action_dyn(req).await, |()| Heard::Takes)
            }
            (Decider::Hook, write) => {
                let Some(hooks) = self.hooks() else { return Heard::NotSupported };
                match write.clone() {
                    PhoneWrite::Rename { target, id, title } => {
                        let req = RenameRequest { request_id, target, id, title, kept: false };
                        heard(hooks.rename_dyn(req).await, |()| Heard::Takes)
                    }
                    PhoneWrite::Close { target, id } => {
                        heard(hooks.close_dyn(CloseRequest { request_id, target, id }).await, |()| {
                            Heard::Takes
                        })
                    }
                    PhoneWrite::Reopen { id } => {
                        heard(hooks.reopen_dyn(ReopenRequest { request_id, id }).await, |r| match r {
                            Reopen::Reopened => Heard::Reopened,
                            _ => Heard::Takes,
                        })
                    }
                    PhoneWrite::Starter { starter, text } => {
                        let req = StarterRequest { request_id, starter, text };
                        heard(hooks.starter_dyn(req).await, |started| {
                            Heard::Started(started.pane_id().cloned())
                        })
                    }
                    _ => Heard::NotSupported,
                }
            }
            // The machine asks no such pair; were it to, nobody takes it.
            _ => Heard::NotSupported,
        }
    }
}

/// `409 busy`, unstored: the phone sends it again once the agent is back.
fn stopping() -> Ran {
    Ran::unstored(durable_core::writes::stopping())
}

/// A running turn of a send (counted by the machine as it was delivered),
/// counted until it ends or its job is dropped.
struct TurnRunning(Collie);

impl Drop for TurnRunning {
    fn drop(&mut self) {
        self.0.turn_ended();
    }
}
