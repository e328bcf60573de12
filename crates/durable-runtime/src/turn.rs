//! A turn as a value: the pane works while a [`Turn`] lives, and goes idle
//! when it ends or is dropped — so a program cannot forget `idle()` and
//! leave queued sends stuck. The turn hears the phone: its steers arrive in
//! the turn ([`Turn::next_steer`]) and its stop fires [`Turn::stopped`].

use std::fmt;

use durable_types::{Id, Item, RuleError};
use tokio::sync::mpsc;

use crate::handles::layout::Pane;
use crate::signal::{AbortController, AbortSignal};

/// A running turn on a pane: given to [`ChatHandler::turn`](crate::ChatHandler::turn)
/// for a send from the phone, or made by [`Pane::start_turn`] for a turn
/// the program starts itself.
///
/// Write the growing reply with [`partial`](Turn::partial) (at most every
/// 250 ms), the final text with [`reply`](Turn::reply); [`end`](Turn::end)
/// it (or drop it) to set the pane idle, which delivers the next queued
/// send. Writes to a pane the phone has closed meanwhile are dropped:
/// [`is_open`](Turn::is_open) tells.
#[must_use = "dropping a Turn ends it at once: the pane goes idle"]
pub struct Turn {
    pane: Pane,
    id: String,
    token: u64,
    text: String,
    request_id: Option<Id>,
    signal: AbortSignal,
    steers: mpsc::UnboundedReceiver<String>,
    ended: bool,
    span: tracing::Span,
}

impl fmt::Debug for Turn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Turn")
            .field("pane", &self.pane.id())
            .field("id", &self.id)
            .field("request_id", &self.request_id)
            .field("stopped", &self.signal.is_aborted())
            .finish_non_exhaustive()
    }
}

/// How a turn begins: from a send (text and request id), or by the program.
pub(crate) struct TurnStart {
    pub(crate) turn_id: String,
    pub(crate) text: String,
    pub(crate) request_id: Option<Id>,
    pub(crate) controller: AbortController,
}

impl Pane {
    /// Starts a turn the program drives itself (not from a send): the pane
    /// is `working` with this turn id until the returned [`Turn`] ends or is
    /// dropped; the phone's steers and stop reach it. The id follows the ID
    /// rule.
    pub fn start_turn(&self, turn_id: &str) -> Result<Turn, RuleError> {
        Id::new(turn_id)?;
        self.begin_turn(TurnStart {
            turn_id: turn_id.to_owned(),
            text: String::new(),
            request_id: None,
            controller: AbortController::new(),
        })
    }

    pub(crate) fn begin_turn(&self, start: TurnStart) -> Result<Turn, RuleError> {
        let (tx, rx) = mpsc::unbounded_channel();
        let token = self.collie().install_turn(self.id_ref(), start.controller.clone(), tx)?;
        if let Err(e) = self.working(&start.turn_id) {
            // Closed meanwhile: no turn holds the inbox, so nothing else forgets it.
            self.collie().uninstall_turn(self.id_ref(), token);
            return Err(e);
        }
        // A root of its own: a turn outlives the request that began it (and
        // its connection), which it only follows from.
        let span = tracing::info_span!(target: "durable_core::turn", parent: None, "turn", pane = self.id(), turn = start.turn_id.as_str());
        span.follows_from(tracing::Span::current());
        Ok(Turn {
            pane: self.clone(),
            id: start.turn_id,
            token,
            text: start.text,
            request_id: start.request_id,
            signal: start.controller.signal(),
            steers: rx,
            ended: false,
            span,
        })
    }
}

impl Turn {
    /// The turn id (for a send, its request id).
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The pane.
    pub fn pane(&self) -> &Pane {
        &self.pane
    }

    /// The text the phone sent (empty for a turn the program started).
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The send's request id (none for a turn the program started).
    pub fn request_id(&self) -> Option<&Id> {
        self.request_id.as_ref()
    }

    /// The turn's `tracing` span (`turn`, at `INFO`: `pane`, `turn`). A
    /// send's turn already runs inside it, so the handler's own events carry
    /// both fields; a turn the program started ([`Pane::start_turn`]) runs
    /// where the program runs it: `.instrument(turn.span().clone())`
    /// (`tracing::Instrument`) puts that work inside it too.
    pub fn span(&self) -> &tracing::Span {
        &self.span
    }

    /// The turn's stop signal, to hand to work that takes one (an ask's
    /// options, a child process).
    pub fn signal(&self) -> &AbortSignal {
        &self.signal
    }

    /// Whether the phone stopped the turn.
    pub fn is_stopped(&self) -> bool {
        self.signal.is_aborted()
    }

    /// Resolves when the phone stops the turn.
    pub async fn stopped(&self) {
        self.signal.aborted().await
    }

    /// The next steer from the phone; `None` once the turn is stopped (steers
    /// that arrived before the stop come first).
    pub async fn next_steer(&mut self) -> Option<String> {
        if let Ok(text) = self.steers.try_recv() {
            return Some(text);
        }
        let signal = self.signal.clone();
        match crate::select::select(self.steers.recv(), signal.aborted()).await {
            crate::select::Either::Left(text) => text,
            crate::select::Either::Right(()) => None,
        }
    }

    /// Every steer that arrived and was not read yet, oldest first.
    pub fn take_steers(&mut self) -> Vec<String> {
        let mut out = Vec::new();
        while let Ok(text) = self.steers.try_recv() {
            out.push(text);
        }
        out
    }

    /// Whether the pane is still open (the phone may close it mid-turn).
    pub fn is_open(&self) -> bool {
        self.pane.is_open()
    }

    /// The id of the turn's reply item: `reply-<turn id>` (a digest when
    /// that would pass 128 bytes).
    pub fn reply_id(&self) -> Id {
        durable_core::data::item_ids::derived_item_id("reply", &self.id)
    }

    /// Writes the turn's reply as still growing (`partial: true`). Write it
    /// again as it grows, at most every 250 ms.
    pub fn partial(&self, text: impl Into<String>) {
        self.write_reply(text.into(), true);
    }

    /// Writes the turn's reply with its final text (no `partial`).
    pub fn reply(&self, text: impl Into<String>) {
        self.write_reply(text.into(), false);
    }

    fn write_reply(&self, text: String, partial: bool) {
        let body = durable_types::ItemBody::Reply { text, partial };
        // The only failure left is a closed pane: the write has nowhere to go.
        let _ = self.pane.write(Item::new(self.reply_id(), body));
    }

    /// Writes any item on the pane (see [`Pane::write`]).
    pub fn write(&self, item: Item) -> Result<(), RuleError> {
        self.pane.write(item)
    }

    /// Ends the turn: the pane goes idle (partial items left are finalized
    /// with one warning) and the next queued send is delivered.
    pub fn end(mut self) {
        self.finish();
    }

    fn finish(&mut self) {
        if !self.ended {
            self.ended = true;
            // Only the pane's current turn sets it idle: a turn the program
            // replaced, or a pane closed meanwhile, has nothing to end.
            if self.pane.collie().uninstall_turn(self.pane.id_ref(), self.token) {
                let _ = self.pane.idle();
            }
        }
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        self.finish();
    }
}
