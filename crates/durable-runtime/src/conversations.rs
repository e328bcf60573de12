//! The job that applies the conversations' journal to the receipt store
//! (the machine pushes the steps: `durable_core::state::ConversationStep`),
//! and the wait for it.

use durable_core::data::conversation::KeptConversation;
use durable_core::data::receipt::StoreError;
use durable_core::state::{ConversationStep, JournalName};
use durable_types::{Id, Item, RuleError, Target};

use crate::core::Collie;
use crate::handlers::RenameRequest;
use crate::journals::{InFlight, Lost};

/// Changes a job hands the store in one call (one commit for a store that
/// can): a burst of items is a few commits, not one per item.
const BATCH: usize = 256;

impl Collie {
    /// Waits until the receipt store has what every pane showed so far,
    /// and the panes declared so far have their kept items back. Immediate
    /// with a store that keeps no conversations.
    ///
    /// No write waits for this (a pane's items are kept in the
    /// background); a program that is about to exit, or a test, may.
    pub async fn conversations_kept(&self) {
        let target = self.lock().journal_pushed(JournalName::Conversations);
        self.wait_for_journal(JournalName::Conversations, target).await;
    }

    /// Whether the receipt store keeps conversations: then each pane
    /// declared gets back the items kept under its id (docs/wire.md §9.2).
    pub fn keeps_conversations(&self) -> bool {
        self.lock().keeps_conversations()
    }

    /// Whether the receipt store keeps conversations where they outlive
    /// the process (the SQLite and PostgreSQL stores; not the memory
    /// store, whose conversations last as long as the process): then a
    /// program need keep no copy of its panes' items of its own.
    pub fn keeps_conversations_across_restarts(&self) -> bool {
        self.keeps_conversations() && self.shared.options.receipts.keeps_sends_dyn()
    }

    /// What the receipt store keeps of the conversation of the pane
    /// `pane` (`None`: nothing, or a store that keeps no conversations),
    /// as the store has it now: what a pane of that id declared now would
    /// show. History reads a conversation no pane shows with it; a
    /// history provider may too.
    pub async fn kept_conversation(&self, pane: &str) -> Result<Option<KeptConversation>, StoreError> {
        self.shared.options.receipts.kept_conversation_dyn(pane).await
    }

    /// Deletes the conversation kept under `pane` from a store that keeps
    /// conversations, after what was journaled before: a pane declared
    /// under that id later starts empty. An open pane of that id keeps what
    /// it shows, and what it shows next is kept anew.
    pub fn forget_conversation(&self, pane: &str) {
        self.lock().forget_conversation(pane);
    }

    /// Keeps `items`, oldest first, under `title` as the conversation of
    /// the pane `pane`, one this run has not declared — for a program that
    /// kept conversations itself and moves them onto the receipt store (a
    /// later `Tab::pane` of that id shows them; history reads them). Like
    /// a pane's own items, they are kept in the background:
    /// [`conversations_kept`](Self::conversations_kept) waits for them, and
    /// [`kept_conversation`](Self::kept_conversation) reads what the store
    /// has, before the program deletes its own copy.
    ///
    /// `Ok(false)`: the store keeps no conversations, and nothing was
    /// kept. A bad pane id, a title empty once cleaned, an item that breaks
    /// the item rules, or a pane this run shows or lists as closed (its
    /// items are kept as it shows them) is an `Err` naming the rule.
    pub fn import_conversation(&self, pane: &str, title: &str, items: Vec<Item>) -> Result<bool, RuleError> {
        let items = items
            .into_iter()
            .map(|item| item.sanitized().map(|(item, _)| item))
            .collect::<Result<Vec<_>, _>>()?;
        self.lock().machine_mut().import_conversation(pane, title, items)
    }

    /// The job that applies the journal in order until none is left (the
    /// machine asked for it: `Effect::DrainConversations`): each run of
    /// steps as the restores' reads, in order, each given back to its pane,
    /// then the changes in one call.
    pub(crate) fn drain_conversations(&self) {
        let core = self.inner();
        self.push_job(async move {
            loop {
                let (steps, taken) = {
                    let mut st = core.lock();
                    let steps = st.next_conversation_steps(BATCH);
                    (steps, st.conversation_steps_taken())
                };
                if steps.is_empty() {
                    return;
                }
                let in_flight = InFlight::new(&core, JournalName::Conversations, steps.len(), LOST_STEPS);
                // Until the store says it kept them, the panes changed count
                // as failed (an error, or a job dropped midway).
                let mut failing = Failing { core: &core, panes: Vec::new() };
                let first = taken - steps.len() as u64;
                let store = &core.shared.options.receipts;
                let mut ops = Vec::with_capacity(steps.len());
                let mut ended = Vec::new();
                for (n, step) in (first + 1..).zip(steps) {
                    match step {
                        ConversationStep::Keep(op) => {
                            failing.note(op.pane(), n);
                            ops.push(op);
                        }
                        ConversationStep::SendDone { request_id, pane, since } => {
                            if core.lock().conversation_failed_since(pane.as_str(), since) {
                                core.warn(&format!(
                                    "collie: send {request_id}: a write of pane {pane}'s conversation failed during its turn; it is not recorded done, and a restart will close it with its notice"
                                ));
                            } else {
                                ended.push(request_id.to_string());
                            }
                        }
                        ConversationStep::Restore { pane, restore } => {
                            let kept = match store.kept_conversation_dyn(pane.as_str()).await {
                                Ok(kept) => kept.unwrap_or_default(),
                                Err(e) => {
                                    core.warn(&format!(
                                        "collie: pane {pane}'s kept conversation could not be read from the receipt store ({e}); it starts empty"
                                    ));
                                    KeptConversation::default()
                                }
                            };
                            // The clock is the program's: asked before the lock.
                            let now = core.now();
                            core.lock().restore_conversation(&pane, restore, kept, now);
                        }
                    }
                }
                let count = ops.len();
                let result = match (ops.is_empty(), ended.is_empty()) {
                    (true, true) => Ok(()),
                    (false, true) => store.keep_conversation_dyn(ops, core.now()).await,
                    // A turn's end goes with the items it showed: one write.
                    (_, false) => store.keep_conversation_and_end_sends_dyn(ops, ended.clone(), core.now()).await,
                };
                match result {
                    Ok(()) => failing.panes.clear(),
                    Err(e) if ended.is_empty() => core.warn(&format!(
                        "collie: {count} change(s) of conversations could not be kept by the receipt store ({e}); they will not survive a restart"
                    )),
                    Err(e) => core.warn(&format!(
                        "collie: {count} change(s) of conversations and the end of send(s) {} could not be kept by the receipt store ({e}); a restart will close those sends as cut",
                        ended.join(", ")
                    )),
                }
                in_flight.finish();
            }
        });
    }

    /// Offers a pane the title the phone gave it in an earlier run: with
    /// rename hooks set, the hook decides as for the phone's rename (the
    /// pane's writes wait meanwhile; `Ok`: the pane takes it back, unless
    /// it was renamed from `instead_of` meanwhile); without any, the title
    /// the program declared stays. `restore` numbers the request id, which
    /// is this run's own (`kept-title-<epoch>-<n>`).
    pub(crate) fn offer_kept_title(&self, pane: Id, title: String, instead_of: String, restore: u64) {
        let core = self.inner();
        self.push_job(async move {
            let Some(hooks) = core.hooks() else { return };
            let still_offered =
                |core: &Collie| core.lock().pane(&pane).is_some_and(|p| p.title() == instead_of);
            // As the phone's rename: one write on the pane at a time, and a
            // pane closed meanwhile is asked nothing.
            let Ok(_write) = core.write_pane(&pane, Some(core.now())).await else { return };
            if !still_offered(&core) {
                return;
            }
            let epoch = core.shared.options.epoch.clone();
            let Ok(request_id) = Id::named("request id", format!("kept-title-{epoch}-{restore}")) else {
                return;
            };
            let req = RenameRequest {
                request_id,
                target: Target::Pane,
                id: pane.to_string(),
                title: title.clone(),
                kept: true,
            };
            if hooks.rename_dyn(req).await.is_err() {
                return;
            }
            let now = core.now();
            let mut st = core.lock();
            // Renamed by the program meanwhile: its title stays.
            if st.pane(&pane).is_some_and(|p| p.title() == instead_of) {
                let _ = st.machine_mut().rename_pane_from_phone(&pane, &title, now);
            }
        });
    }

    /// Waits until the panes declared so far have their kept items back
    /// (the restores asked for so far are applied; the changes after them
    /// may still be on their way).
    pub(crate) async fn conversations_restored(&self) {
        let target = self.lock().conversation_restores_pushed();
        self.wait_for_journal(JournalName::Conversations, target).await;
    }
}

/// The panes a write of conversations changes, each with the journal's
/// length up to its last step in it: recorded as failed when dropped
/// before the store said it kept them.
struct Failing<'a> {
    core: &'a Collie,
    panes: Vec<(String, u64)>,
}

impl Failing<'_> {
    fn note(&mut self, pane: &str, upto: u64) {
        match self.panes.iter_mut().find(|(p, _)| p == pane) {
            Some((_, at)) => *at = upto,
            None => self.panes.push((pane.to_owned(), upto)),
        }
    }
}

impl Drop for Failing<'_> {
    fn drop(&mut self) {
        if !self.panes.is_empty() {
            self.core.lock().conversation_write_failed(std::mem::take(&mut self.panes));
        }
    }
}

/// What a job's steps lost to a store that stopped midway says.
const LOST_STEPS: Lost = Lost {
    doing: "keeping conversations or reading one back",
    costs: "some items may not survive a restart, or a pane was not given its kept items",
};
