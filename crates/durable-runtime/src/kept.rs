//! Asks kept across a restart (§7.2): an open ask is kept by a receipt
//! store that keeps asks, handed back to the agent at its next start, and
//! raised again by it (same id, so an answer the phone sent meanwhile, held,
//! lands) or closed — by the agent, or by the core at `ready()` for those
//! nobody claimed, with the chat line "Stopped before an answer: …".

use std::fmt;

use durable_types::{Ask, AskSpec, Id, RuleError};
use serde_json::Value;

use crate::core::Collie;
use crate::handles::asks::{ApprovalFuture, AskHandle, approval_of};
use durable_core::data::receipt::{KeptAskRecord, StoreError};
use durable_core::state::{AskOp, JournalName, KeptLoad};

use crate::journals::{InFlight, Lost};

/// A read of the last run's asks from the store, this caller's to make:
/// dropped before it says how it went, it failed, and the next caller
/// reads again (nobody waits for it for ever).
struct KeptLoadTurn<'a> {
    core: &'a Collie,
    done: bool,
}

impl KeptLoadTurn<'_> {
    /// The read ended with `records`, which this caller takes at once:
    /// under the same lock, so that `ready()` woken by the end of the read
    /// never closes them first.
    fn loaded_and_taken(mut self, records: Vec<KeptAskRecord>) -> Vec<KeptAskRecord> {
        self.done = true;
        let mut st = self.core.lock();
        st.kept_loaded(records);
        st.take_kept()
    }
}

impl Drop for KeptLoadTurn<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.core.lock().kept_load_failed();
        }
    }
}

/// An ask that was open when the agent last stopped, handed back by
/// `Collie::kept_asks` in `durable_sdk` ([`Collie::kept_asks`] on a core built
/// by hand). Claim it — [`raise`](Self::raise) it again now,
/// [`raise_approval`](Self::raise_approval) for a
/// [`require_approval`](crate::require_approval) card, or take its card with
/// [`claim`](Self::claim) to raise later — or [`close`](Self::close) it. One
/// dropped unclaimed before [`Collie::ready`] is closed there, with the chat
/// line `Stopped before an answer: <title>`; one dropped after, at once.
#[must_use = "an ask dropped unclaimed is closed: raise it, claim it, or close it"]
pub struct KeptAsk {
    core: Collie,
    /// Boxed: a kept ask is moved around (and handed back in `Err`s) whole.
    record: Option<Box<KeptAskRecord>>,
}

impl fmt::Debug for KeptAsk {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeptAsk").field("record", &self.record).finish_non_exhaustive()
    }
}

impl KeptAsk {
    fn record(&self) -> &KeptAskRecord {
        self.record.as_deref().unwrap_or_else(|| unreachable!("a kept ask holds its record until consumed"))
    }

    /// The ask id (`ask_id_for(pane, tool_call_id)`): the same once raised again.
    pub fn id(&self) -> &str {
        &self.record().ask.id
    }

    /// Its pane's id.
    pub fn pane(&self) -> &str {
        self.record().ask.pane.as_str()
    }

    /// The tool call it was raised for.
    pub fn tool_call_id(&self) -> &str {
        self.record().ask.tool_call_id.as_str()
    }

    /// The card as it was raised, with its kept expiry (`expires_at`).
    pub fn ask(&self) -> &Ask {
        &self.record().ask
    }

    /// The value the agent kept with it
    /// ([`AskSpec::agent_data`](durable_types::AskSpec::agent_data)).
    pub fn agent_data(&self) -> Option<&Value> {
        self.record().agent_data.as_ref()
    }

    /// The card to raise again: the same words, options, item, tool line and
    /// expiry, and the agent data, so the same id and hash. Change the
    /// expiry before raising if you like: what is raised is what counts.
    pub fn spec(&self) -> AskSpec {
        let record = self.record();
        let mut spec = AskSpec::from_ask(&record.ask);
        spec.agent_data = record.agent_data.clone();
        spec
    }

    /// Raises the ask again on its pane, now, with the same id: an answer
    /// held for it meanwhile applies at once. On an `Err` (its pane is
    /// closed, or an allow-always option where allow-always is now off) the
    /// ask stays unclaimed, and `ready()` closes it.
    pub fn raise(mut self) -> Result<AskHandle, RuleError> {
        let spec = self.spec();
        let pane = Id::named("pane id", self.pane())?;
        let raised = self.core.raise_ask(&pane, spec, None);
        if raised.is_ok() {
            self.record = None;
        }
        raised
    }

    /// [`raise`](Self::raise) for a card of
    /// [`require_approval`](crate::require_approval): the awaitable of its
    /// [`Approval`](crate::Approval).
    pub fn raise_approval(self) -> Result<ApprovalFuture, RuleError> {
        self.raise().map(approval_of)
    }

    /// Claims the ask without raising it: its card, for the agent to raise
    /// later (with [`Pane::ask`](crate::Pane::ask)). Until then an answer
    /// the phone sends is held (for the core's `hold_ms`); if the agent
    /// stops before, the next start hands the ask out again.
    pub fn claim(mut self) -> AskSpec {
        let spec = self.spec();
        self.record = None;
        spec
    }

    /// Closes the ask now: the chat line
    /// `Stopped before an answer: <title>` on its pane (none when the pane
    /// is gone), an answer for it is refused as decided
    /// (`409 ask-closed`), and the store forgets it.
    pub fn close(mut self) {
        if let Some(record) = self.record.take() {
            self.core.close_kept(*record);
        }
    }
}

impl Drop for KeptAsk {
    fn drop(&mut self) {
        let Some(record) = self.record.take() else { return };
        let left = self.core.lock().give_back_kept(*record);
        if let Some(record) = left {
            self.core.close_kept(record);
        }
    }
}

impl Collie {
    /// The asks open when the agent last stopped, for it to claim before
    /// [`ready`](Self::ready) (§7.2): each is raised again by its id, now
    /// or later, or closed; those left unclaimed at `ready()` are closed
    /// with the chat line `Stopped before an answer: <title>`. Empty with a
    /// store that keeps no asks (the default, in memory), after `ready()`,
    /// and on a second call (the first handed them all out).
    pub async fn kept_asks(&self) -> Result<Vec<KeptAsk>, StoreError> {
        let records = match self.kept_load_turn().await {
            Some(turn) => turn.loaded_and_taken(self.load_kept().await?),
            None => self.lock().take_kept(),
        };
        Ok(records
            .into_iter()
            .map(|record| KeptAsk { core: self.inner(), record: Some(Box::new(record)) })
            .collect())
    }

    /// This caller's turn to read the last run's asks (`Some`), once any
    /// other read ended; `None` when they were read already.
    async fn kept_load_turn(&self) -> Option<KeptLoadTurn<'_>> {
        loop {
            let read = {
                let mut st = self.lock();
                match st.begin_kept_load() {
                    KeptLoad::Load => return Some(KeptLoadTurn { core: self, done: false }),
                    KeptLoad::Done => return None,
                    _ => {
                        let (waiter, read) = st.links().add_waiter();
                        st.wait_for_kept_load(waiter);
                        read
                    }
                }
            };
            let _ = read.await;
        }
    }

    async fn load_kept(&self) -> Result<Vec<KeptAskRecord>, StoreError> {
        let store = &self.shared.options.receipts;
        if !store.keeps_asks_dyn() {
            return Ok(Vec::new());
        }
        store.kept_asks_dyn().await
    }

    /// At `ready()`: closes the last run's asks nobody claimed, and says
    /// once when the store keeps no asks at all.
    pub(crate) async fn settle_kept(&self) {
        let store = &self.shared.options.receipts;
        if !store.keeps_asks_dyn() && !self.shared.options.receipts_in_memory {
            self.warn(
                "collie: the receipt store keeps no asks: a card open when the agent stops is gone at its next start (see ReceiptStore::keeps_asks)",
            );
        }
        let mut records = Vec::new();
        let turn = self.kept_load_turn().await;
        if turn.is_some() {
            match self.load_kept().await {
                Ok(found) => records = found,
                Err(e) => {
                    self.warn(&format!("collie: the asks left open by the last run could not be read ({e})"))
                }
            }
        }
        // Settled while the read is still this caller's: an agent's
        // `kept_asks()` waiting for it wakes to nothing more handed out,
        // and never reads them again after `ready()`.
        records.extend(self.lock().settle_kept());
        if let Some(mut turn) = turn {
            turn.done = true;
        }
        for record in records {
            self.close_kept(record);
        }
    }

    /// Closes an ask of the last run that is not open in this one (the
    /// machine's `close_kept_ask`).
    pub(crate) fn close_kept(&self, record: KeptAskRecord) {
        let now = self.now();
        self.lock().machine_mut().close_kept_ask(record.ask, now);
    }

    /// The job that applies the store's journal of asks, one op at a time
    /// and in order, until none is left (the machine asked for it:
    /// `Effect::DrainAsks`).
    pub(crate) fn drain_asks(&self) {
        let core = self.inner();
        self.push_job(async move {
            loop {
                let Some(op) = core.lock().next_ask_op() else { return };
                let in_flight = InFlight::new(&core, JournalName::Asks, 1, LOST_ASK_OP);
                let store = &core.shared.options.receipts;
                let (what, id, result) = match op {
                    AskOp::Keep(record) => {
                        let id = record.ask.id.clone();
                        ("kept", id, store.keep_ask_dyn(*record).await)
                    }
                    AskOp::Forget(id) => {
                        let result = store.forget_ask_dyn(&id).await;
                        ("forgotten", id, result)
                    }
                };
                if let Err(e) = result {
                    core.warn(&format!("collie: ask {id} could not be {what} by the receipt store ({e})"));
                }
                in_flight.finish();
            }
        });
    }
}

/// What a job's ask op lost to a store that stopped midway says.
const LOST_ASK_OP: Lost = Lost { doing: "writing an ask", costs: "that card may not survive a restart" };
