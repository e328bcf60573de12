//! The phone's writes other than a send (§8), the machine's side: steer,
//! stop, a pane action, rename, close, reopen and a starter. For each,
//! the machine says who decides it — a chat or action handler (the
//! pane's own, then the agent-wide one, until one says anything but
//! "not supported"), or the program's hook — and, once it has heard them,
//! applies it and makes the phone's answer.
//!
//! Nothing is kept between the driver's calls: the driver hands the write
//! back each time with what it heard last ([`Machine::phone_write`]), so a
//! write dropped midway leaves nothing behind. The pane's write (who
//! holds it, `409 busy`), the handlers and hooks themselves are the
//! driver's; [`Machine::write_needs_pane`] says which pane's write to hold.

use durable_types::exchange::Response;
use durable_types::{ErrorCode, Id, PaneState, ScopeId, Target, Timestamp, WriteResponse};
use serde_json::Value;

use crate::machine::Machine;
use crate::respond;
use crate::state::{ChatSlot, TabKey};
use crate::writes::stopping;

/// One of the phone's writes other than a send, as its route read it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum PhoneWrite {
    /// Steer the pane's running turn with `text`.
    Steer { pane: Id, text: String },
    /// Stop the pane's turn (it never waits for the pane's write).
    Stop { pane: Id },
    /// Run one of the pane's actions.
    Action { pane: Id, action: Id },
    /// Rename a workspace, tab (`ws:tab`) or pane.
    Rename { target: Target, id: String, title: String },
    /// Close a workspace, tab (`ws:tab`) or pane.
    Close { target: Target, id: String },
    /// Reopen a closed conversation.
    Reopen { id: Id },
    /// Run a starter, with the phone's first text if any.
    Starter { starter: Id, text: Option<String> },
}

/// Who decides a write, for the driver to ask.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Decider {
    /// A chat handler (steer, stop).
    Chat(ChatSlot),
    /// An action handler.
    Actions(ChatSlot),
    /// The program's hook for this write (rename, close, reopen, starter).
    Hook,
}

/// The handlers and hooks the program set for a write's pane, as the
/// driver sees them when it asks the machine.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Deciders {
    /// The pane's own chat handler.
    pub pane_chat: bool,
    /// The agent-wide chat handler.
    pub wide_chat: bool,
    /// The pane's own action handler.
    pub pane_actions: bool,
    /// The agent-wide action handler.
    pub wide_actions: bool,
    /// The program's hooks.
    pub hooks: bool,
}

impl Deciders {
    fn has(&self, decider: Decider) -> bool {
        match decider {
            Decider::Chat(ChatSlot::Pane) => self.pane_chat,
            Decider::Chat(_) => self.wide_chat,
            Decider::Actions(ChatSlot::Pane) => self.pane_actions,
            Decider::Actions(_) => self.wide_actions,
            Decider::Hook => self.hooks,
        }
    }
}

/// What a decider said.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Heard {
    /// It takes the write (a hook lets the SDK do it; a reopen hook says
    /// `Restore`).
    Takes,
    /// The reopen hook reopened the conversation itself.
    Reopened,
    /// The starter hook started, opening this pane (or none).
    Started(Option<Id>),
    /// It refuses, with a reason for the phone (`409 refused`).
    Refuses(String),
    /// It does not take this write (`409 not-supported`, or the next
    /// handler is asked).
    NotSupported,
}

/// What comes of a write.
#[derive(Debug, PartialEq)]
pub enum WriteNext {
    /// Ask this decider, then hand the write back with what it said.
    Ask(Decider),
    /// The write is over: this is the phone's answer.
    Answer(WriteAnswer),
}

/// A write's answer, and where its receipt goes.
#[derive(Debug, PartialEq)]
pub struct WriteAnswer {
    /// The phone's answer.
    pub response: Response,
    /// The receipt's group when the write was applied (its receipt is
    /// stored); `None` for a refusal (nothing to keep: the phone may send
    /// it again).
    pub group: Option<String>,
}

impl WriteAnswer {
    fn applied(what: WriteResponse, group: String) -> WriteNext {
        WriteNext::Answer(WriteAnswer { response: respond::json(200, &what), group: Some(group) })
    }

    fn refused(response: Response) -> WriteNext {
        WriteNext::Answer(WriteAnswer { response, group: None })
    }
}

fn refused(reason: String) -> WriteNext {
    WriteAnswer::refused(respond::refused(reason))
}

fn not_supported(what: &str) -> WriteNext {
    WriteAnswer::refused(respond::not_supported(what))
}

/// A rename or close target, found in the layout.
enum Found {
    Workspace(ScopeId),
    Tab(TabKey),
    Pane(Id),
}

/// The first decider of `kind` from `slot` on that the program set.
fn first_of(kind: fn(ChatSlot) -> Decider, deciders: Deciders, slot: ChatSlot) -> Option<WriteNext> {
    let slots: &[ChatSlot] =
        if slot == ChatSlot::Pane { &[ChatSlot::Pane, ChatSlot::Wide] } else { &[ChatSlot::Wide] };
    slots.iter().map(|s| kind(*s)).find(|d| deciders.has(*d)).map(WriteNext::Ask)
}

/// The decider after `asked`, once it said "not supported".
fn next_after(asked: Decider, deciders: Deciders) -> Option<WriteNext> {
    match asked {
        Decider::Chat(ChatSlot::Pane) => first_of(Decider::Chat, deciders, ChatSlot::Wide),
        Decider::Actions(ChatSlot::Pane) => first_of(Decider::Actions, deciders, ChatSlot::Wide),
        _ => None,
    }
}

/// The answer to a hook that did not let the write through, if it did not.
fn hook_refusal(heard: &Heard, what: &str) -> Option<WriteNext> {
    match heard {
        Heard::Refuses(reason) => Some(refused(reason.clone())),
        Heard::NotSupported => Some(not_supported(what)),
        _ => None,
    }
}

/// One call of [`Machine::phone_write`]: what every write's rule reads.
struct Call<'a> {
    request_id: &'a Id,
    deciders: Deciders,
    heard: Option<(Decider, Heard)>,
    now: Timestamp,
}

/// The write applied: `200` with `result`, its receipt kept in `group`.
fn done(request_id: &Id, result: &str, group: String) -> WriteNext {
    WriteAnswer::applied(WriteResponse::new(result, request_id.clone()), group)
}

impl Machine {
    /// Which pane's write the driver holds before it hands `write` to
    /// [`Machine::phone_write`]: a steer's, an action's, a pane renamed
    /// or closed. `None` for the rest (a stop never waits behind a stuck
    /// write); a target that is not open is the write's `404`, answered
    /// by `phone_write`.
    pub fn write_needs_pane(&self, write: &PhoneWrite) -> Option<Id> {
        match write {
            PhoneWrite::Steer { pane, .. } | PhoneWrite::Action { pane, .. } => Some(pane.clone()),
            PhoneWrite::Rename { target: Target::Pane, id, .. }
            | PhoneWrite::Close { target: Target::Pane, id } => {
                Id::new(id).ok().filter(|pane| self.state.is_open(pane))
            }
            _ => None,
        }
    }

    /// Moves `write` (request `request_id`) on: `heard` is what the last
    /// [`WriteNext::Ask`]'s decider said (`None` the first time).
    /// `deciders` are the handlers the program set, as the driver sees
    /// them now. `now` dates what the write changes.
    pub fn phone_write(
        &mut self,
        request_id: &Id,
        write: &PhoneWrite,
        deciders: Deciders,
        heard: Option<(Decider, Heard)>,
        now: Timestamp,
    ) -> WriteNext {
        let c = Call { request_id, deciders, heard, now };
        match write {
            PhoneWrite::Steer { pane, text } => self.steer(c, pane, text),
            PhoneWrite::Stop { pane } => self.stop(c, pane),
            PhoneWrite::Action { pane, action } => self.action(c, pane, action),
            PhoneWrite::Rename { target, id, title } => self.rename(c, *target, id, title),
            PhoneWrite::Close { target, id } => self.close_from_phone(c, *target, id),
            PhoneWrite::Reopen { id } => self.reopen(c, id),
            PhoneWrite::Starter { starter, .. } => self.starter(c, starter),
        }
    }

    /// A steer: the running turn hears it once a chat handler takes it.
    fn steer(&mut self, c: Call<'_>, pane: &Id, text: &str) -> WriteNext {
        let Some((asked, heard)) = c.heard else { return self.look_at_steer(pane, c.deciders) };
        match heard {
            Heard::NotSupported => next_after(asked, c.deciders).unwrap_or_else(|| not_supported("steer")),
            Heard::Refuses(reason) => refused(reason),
            _ => {
                // The running turn hears it.
                self.state.steer_turn(pane, text.to_owned());
                done(c.request_id, "steered", format!("pane:{pane}"))
            }
        }
    }

    /// A stop: the turn's signal fires and the pane's asks abort unless a
    /// chat handler refuses (with none, the stop is the SDK's alone).
    fn stop(&mut self, c: Call<'_>, pane: &Id) -> WriteNext {
        let heard = match c.heard {
            None => {
                if let Some(refusal) = self.pane_takers(pane, c.deciders, "stop") {
                    return refusal;
                }
                // With no chat handler, the stop is the SDK's alone.
                match first_of(Decider::Chat, c.deciders, ChatSlot::Pane) {
                    Some(ask) => return ask,
                    None => Heard::NotSupported,
                }
            }
            Some((asked, Heard::NotSupported)) => match next_after(asked, c.deciders) {
                Some(ask) => return ask,
                None => Heard::NotSupported,
            },
            Some((_, heard)) => heard,
        };
        if let Heard::Refuses(reason) = heard {
            return refused(reason);
        }
        // Taken, or no handler minds: the turn and the pane's asks stop.
        self.state.stop_turn(pane);
        self.abort_asks_of(pane, c.now);
        done(c.request_id, "stopped", format!("pane:{pane}"))
    }

    /// One of the pane's actions, asked of its action handlers.
    fn action(&mut self, c: Call<'_>, pane: &Id, action: &Id) -> WriteNext {
        let Some((asked, heard)) = c.heard else {
            if let Some(refusal) = self.pane_takers(pane, c.deciders, "actions") {
                return refusal;
            }
            if !self.state.pane(pane).is_some_and(|p| p.has_action(action)) {
                return WriteAnswer::refused(respond::not_found(format!(
                    "pane {pane} has no action {action}"
                )));
            }
            return first_of(Decider::Actions, c.deciders, ChatSlot::Pane)
                .unwrap_or_else(|| not_supported("this action"));
        };
        match heard {
            Heard::NotSupported => {
                next_after(asked, c.deciders).unwrap_or_else(|| not_supported("this action"))
            }
            Heard::Refuses(reason) => refused(reason),
            _ => done(c.request_id, "done", format!("pane:{pane}")),
        }
    }

    /// A rename of a workspace, tab or pane, through the program's hook.
    fn rename(&mut self, c: Call<'_>, target: Target, id: &str, title: &str) -> WriteNext {
        if let Some(answer) = self.before_layout_write(&c, target, id, "rename") {
            return answer;
        }
        let applied = match self.find(target, id) {
            Some(Found::Workspace(ws)) => self.rename_workspace(&ws, title),
            Some(Found::Tab(key)) => self.rename_tab(&key, title),
            Some(Found::Pane(pane)) => self.rename_pane_from_phone(&pane, title, c.now).map(drop),
            // Closed by the hook meanwhile: renamed as far as the phone is concerned.
            None => Ok(()),
        };
        match applied {
            // The route refused a title breaking the title rule
            // already; should one get here, it is the same `400`.
            Err(e) if !e.is_closed() => {
                WriteAnswer::refused(respond::error(ErrorCode::BadRequest, format!("title: {e}")))
            }
            _ => done(c.request_id, "renamed", "renames".into()),
        }
    }

    /// A close of a workspace, tab or pane, through the program's hook.
    fn close_from_phone(&mut self, c: Call<'_>, target: Target, id: &str) -> WriteNext {
        if let Some(answer) = self.before_layout_write(&c, target, id, "close") {
            return answer;
        }
        match self.find(target, id) {
            Some(Found::Workspace(ws)) => self.close_workspace(&ws, c.now),
            Some(Found::Tab(key)) => self.close_tab(&key, c.now),
            Some(Found::Pane(pane)) => self.close_pane(&pane, c.now),
            None => false,
        };
        done(c.request_id, "closed", "closes".into())
    }

    /// A reopen: the hook's, or the SDK restores a pane this process closed.
    fn reopen(&mut self, c: Call<'_>, id: &Id) -> WriteNext {
        if c.heard.is_none() && c.deciders.hooks {
            return WriteNext::Ask(Decider::Hook);
        }
        if let Some((_, heard)) = c.heard {
            if let Some(answer) = hook_refusal(&heard, "reopen") {
                return answer;
            }
            if heard == Heard::Reopened {
                return done(c.request_id, "reopened", "reopens".into());
            }
        }
        if !self.restore_pane(id, c.now) {
            return WriteAnswer::refused(respond::not_found(format!(
                "pane {id} was not closed by this process; a conversation closed before a restart needs an on_reopen hook"
            )));
        }
        // Sends acknowledged as `queued` before the close go out now.
        if self.state.pane(id).is_some_and(|p| p.has_queued()) {
            self.state.effect(crate::state::Effect::DeliverQueued(id.clone()));
        }
        done(c.request_id, "reopened", "reopens".into())
    }

    /// A starter: the program's hook runs it.
    fn starter(&mut self, c: Call<'_>, starter: &Id) -> WriteNext {
        let Some((_, heard)) = c.heard else {
            if self.is_stopping() {
                // A starter opens a conversation and often its first turn.
                return WriteAnswer::refused(stopping());
            }
            if !self.state.has_starter(starter) {
                return WriteAnswer::refused(respond::not_found(format!("no starter {starter}")));
            }
            if !c.deciders.hooks {
                return not_supported("starters");
            }
            return WriteNext::Ask(Decider::Hook);
        };
        if let Some(answer) = hook_refusal(&heard, "starters") {
            return answer;
        }
        let pane = match heard {
            Heard::Started(Some(pane)) => Value::String(pane.to_string()),
            _ => Value::Null,
        };
        WriteAnswer::applied(
            WriteResponse::new("started", c.request_id.clone()).with("pane", pane),
            "starters".into(),
        )
    }

    /// What a rename or close answers before it is applied: `404` when
    /// nothing is at `id`, the program's hook asked first, and its refusal;
    /// `None` once it may be applied.
    fn before_layout_write(&self, c: &Call<'_>, target: Target, id: &str, verb: &str) -> Option<WriteNext> {
        match &c.heard {
            None if self.find(target, id).is_none() => {
                Some(WriteAnswer::refused(respond::not_found(format!("nothing to {verb} at {id}"))))
            }
            None if c.deciders.hooks => Some(WriteNext::Ask(Decider::Hook)),
            None => None,
            Some((_, heard)) => hook_refusal(heard, verb),
        }
    }

    /// A steer's first look: its pane, its handlers, and whether a turn runs.
    fn look_at_steer(&self, pane: &Id, deciders: Deciders) -> WriteNext {
        if let Some(refusal) = self.pane_takers(pane, deciders, "steer") {
            return refusal;
        }
        let Some(ask) = first_of(Decider::Chat, deciders, ChatSlot::Pane) else {
            return not_supported("steer");
        };
        if self.state.pane(pane).is_none_or(|p| p.state() != PaneState::Working) {
            return refused("not-working".into());
        }
        ask
    }

    /// A pane's handlers: `404` for a pane that is not open, `409
    /// not-supported` for one with no handler at all.
    fn pane_takers(&self, pane: &Id, deciders: Deciders, what: &str) -> Option<WriteNext> {
        if !self.state.is_open(pane) {
            return Some(WriteAnswer::refused(respond::no_pane(pane)));
        }
        let none =
            !(deciders.pane_chat || deciders.wide_chat || deciders.pane_actions || deciders.wide_actions);
        none.then(|| not_supported(what))
    }

    /// A rename or close target in the layout now.
    fn find(&self, target: Target, id: &str) -> Option<Found> {
        match target {
            Target::Workspace => {
                let ws = ScopeId::new(id).ok()?;
                self.state.has_workspace(&ws).then_some(Found::Workspace(ws))
            }
            Target::Tab => {
                let (w, t) = id.split_once(':')?;
                let key = TabKey { ws: ScopeId::new(w).ok()?, tab: ScopeId::new(t).ok()? };
                self.state.has_tab(&key).then_some(Found::Tab(key))
            }
            Target::Pane => {
                let pane = Id::new(id).ok()?;
                self.state.is_open(&pane).then_some(Found::Pane(pane))
            }
            #[allow(unreachable_patterns)]
            _ => None,
        }
    }
}
