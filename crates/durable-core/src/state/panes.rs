//! Panes: their fields, views and event tails, their turns and queued
//! sends, and the panes closed by this process (kept for reopen).

use bytes::Bytes;
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use durable_types::{
    ActionView, Ask, ClosedView, Event, EventBody, Id, Item, PaneState, Timestamp, VIEW_LIMIT,
};

use super::layout::TabKey;
use super::{Effect, Link, State};
use crate::data::conversation::{ConversationOp, ItemsInOrder};

/// Closed panes kept for reopen (and listed in the state's `closed`).
const CLOSED_MEMORY: usize = 500;

/// The largest event buffer kept between events (an event past it, a large
/// item, is written into a buffer freed after).
const SCRATCH_KEPT: usize = 64 * 1024;

/// What `tab.pane()` was told of the session id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SessionId {
    /// Nothing: the pane id once a history provider is set, else null.
    Unset,
    /// This id.
    Named(String),
    /// Null: it cannot stay the same after a restart.
    Null,
}

/// What a new pane is opened with (already cleaned to the rules).
#[derive(Clone, Debug)]
pub struct PaneFields {
    pub title: String,
    pub harness: String,
    pub cwd: Option<String>,
    pub session_id: SessionId,
}

/// One pane: its fields, its view and its raw event tail.
#[derive(Clone, Debug)]
pub struct PaneData {
    id: Id,
    tab: TabKey,
    title: String,
    /// The title the program declared the pane with.
    declared_title: String,
    harness: String,
    cwd: Option<String>,
    session_id: SessionId,
    state: PaneState,
    turn_id: Option<String>,
    /// The state and turn readers see: as of the tail's last event (an
    /// event waiting for the store, below, has not happened for them yet).
    shown_state: PaneState,
    shown_turn_id: Option<String>,
    /// Events written but not in the tail yet: an item waits there until
    /// the store has it, and every event after it waits behind it, in
    /// order (`State::show_kept_events`).
    pub(super) pending: VecDeque<PendingEvent>,
    last_seq: u64,
    /// The last seq when the pane was declared: its events since are
    /// `declared_seq + 1 ..= last_seq`.
    declared_seq: u64,
    /// A reader asked for the pane's events since it was declared.
    events_read: bool,
    /// The restore number of the store's kept items this pane is still
    /// owed (`State::restore_conversation`).
    pub(super) restore: Option<u64>,
    /// The tail: each event kept as written until a reader first asks for
    /// it, then as the JSON the events route sends (a read copies bytes, it
    /// never encodes again).
    events: VecDeque<TailEvent>,
    /// The view: items in order of first appearance, the newest
    /// [`VIEW_LIMIT`] kept.
    view: ItemsInOrder,
    actions: Vec<ActionView>,
    /// The time of the pane's first event (history's `startedAt` for an
    /// open pane, §10); `None` until it has one.
    started_at: Option<Timestamp>,
    changed_at: u64,
    /// The layout seq at which the pane's place in the layout was learnt
    /// (`u64::MAX` until it is), and that place
    /// (`State::refresh_layout_order`): kept here, not in a map of ids, so
    /// that learning it allocates nothing.
    layout_pos: (u64, usize),
    warned_partial: bool,
    /// The store fell a tail's worth of events behind on this pane (warned once).
    warned_unkept: bool,
    /// The pane's own handlers (the agent-wide ones serve a pane without).
    takers: Takers,
    /// The stop signal armed for the pane's turn (a stop fires it).
    stop_armed: Option<Link>,
    /// The running durable-runtime's `Turn`'s steer inbox.
    turn: Option<Link>,
    queued: VecDeque<QueuedSend>,
}

/// One event of a pane's tail. It is encoded when the events route first
/// reads it, not when it is written: an agent no phone watches never pays
/// for its events' JSON, and a reader still gets each event's bytes made
/// once. What it holds is immutable (an item or an ask is an `Arc` the
/// writer cannot change), so the bytes are the ones a write-time encoding
/// would have made.
#[derive(Clone, Debug)]
pub enum TailEvent {
    /// As written.
    Written(Event),
    /// As the events route sends it.
    Encoded { seq: u64, json: Bytes },
}

impl TailEvent {
    pub fn seq(&self) -> u64 {
        match self {
            TailEvent::Written(e) => e.seq,
            TailEvent::Encoded { seq, .. } => *seq,
        }
    }

    /// The event's JSON. [`PaneData::encode_tail_after`] encodes the events
    /// a page reads first, under the same lock; an event it did not reach
    /// (none) or could not encode (it never happens: every field is plain
    /// data) reads as `null` rather than being lost from the count.
    pub fn json(&self) -> &[u8] {
        match self {
            TailEvent::Encoded { json, .. } => json,
            TailEvent::Written(_) => b"null",
        }
    }

    /// Whether the events route has encoded it already.
    fn is_encoded(&self) -> bool {
        matches!(self, TailEvent::Encoded { .. })
    }

    /// Encodes the event if it is not yet, through `scratch`.
    fn encode(&mut self, scratch: &mut Vec<u8>) {
        let TailEvent::Written(event) = self else { return };
        scratch.clear();
        let json = match serde_json::to_writer(&mut *scratch, &*event) {
            Ok(()) => Bytes::copy_from_slice(scratch),
            Err(_) => Bytes::from_static(b"null"),
        };
        // A large item (up to 1 MiB) leaves no large buffer behind.
        if scratch.capacity() > SCRATCH_KEPT {
            *scratch = Vec::new();
        }
        *self = TailEvent::Encoded { seq: event.seq, json };
    }
}

/// `durable_types::PaneView` borrowing the pane: the same fields, names
/// and order (a test reads the state answer back as `StateResponse` and
/// writes it again byte for byte).
#[derive(Clone, serde::Serialize, Debug)]
#[serde(rename_all = "camelCase")]
pub struct PaneViewRef<'a> {
    id: &'a Id,
    tab: String,
    title: &'a str,
    harness: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    cwd: Option<&'a str>,
    session_id: Option<String>,
    state: PaneState,
    turn_id: Option<&'a str>,
    last_seq: u64,
    open_asks: &'a [&'a str],
    actions: &'a [ActionView],
}

/// An event waiting for the store before readers see it.
#[derive(Clone, Debug)]
pub(super) struct PendingEvent {
    pub(super) ts: Timestamp,
    pub(super) body: EventBody,
    /// The store's op it waits for (`None`: it waits only for the events
    /// ahead of it).
    pub(super) kept_by: Option<KeptBy>,
}

/// The ask an `ask` event raises.
pub(super) fn raised_ask(body: &EventBody) -> Option<Arc<Ask>> {
    match body {
        EventBody::Ask { ask } => Some(Arc::clone(ask)),
        _ => None,
    }
}

/// The journal op an event waits for before readers see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum KeptBy {
    /// The conversations' op that keeps this item.
    Conversation(u64),
    /// The asks' op that keeps this ask.
    Ask(u64),
}

/// A send that arrived during a turn, delivered once the pane goes idle.
#[derive(Clone, Debug)]
pub struct QueuedSend {
    pub request_id: Id,
    pub text: String,
}

/// A pane's own handlers (the agent-wide ones serve a pane without), by link.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Takers {
    pub chat: Option<Link>,
    pub actions: Option<Link>,
}

/// A pane closed by this process, kept so that reopen can restore it.
#[derive(Clone, Debug)]
pub(crate) struct ClosedPane {
    view: ClosedView,
    data: Box<PaneData>,
}

impl PaneData {
    fn new(id: Id, tab: TabKey, fields: PaneFields, last_seq: u64) -> PaneData {
        PaneData {
            id,
            tab,
            declared_title: fields.title.clone(),
            title: fields.title,
            harness: fields.harness,
            cwd: fields.cwd,
            session_id: fields.session_id,
            state: PaneState::Idle,
            turn_id: None,
            shown_state: PaneState::Idle,
            shown_turn_id: None,
            pending: VecDeque::new(),
            last_seq,
            declared_seq: last_seq,
            events_read: false,
            restore: None,
            events: VecDeque::new(),
            view: ItemsInOrder::new(VIEW_LIMIT),
            actions: Vec::new(),
            started_at: None,
            changed_at: 0,
            layout_pos: (u64::MAX, 0),
            warned_partial: false,
            warned_unkept: false,
            takers: Takers::default(),
            stop_armed: None,
            turn: None,
            queued: VecDeque::new(),
        }
    }

    pub fn id(&self) -> &Id {
        &self.id
    }

    pub fn state(&self) -> PaneState {
        self.state
    }

    pub fn turn_id(&self) -> Option<&str> {
        self.turn_id.as_deref()
    }

    /// The state readers see (the program's own, [`state`](Self::state),
    /// may be ahead while events wait for the store).
    pub fn shown_state(&self) -> PaneState {
        self.shown_state
    }

    /// The turn readers see.
    pub fn shown_turn_id(&self) -> Option<&str> {
        self.shown_turn_id.as_deref()
    }

    pub fn last_seq(&self) -> u64 {
        self.last_seq
    }

    /// The pane's place in the layout, if it was learnt at `layout_seq`.
    pub fn layout_pos_at(&self, layout_seq: u64) -> Option<usize> {
        let (at, pos) = self.layout_pos;
        (at == layout_seq).then_some(pos)
    }

    pub fn set_layout_pos(&mut self, layout_seq: u64, pos: usize) {
        self.layout_pos = (layout_seq, pos);
    }

    /// The sequence of the pane's last change (for `since` in the poll).
    pub fn changed_at(&self) -> u64 {
        self.changed_at
    }

    pub fn takers(&self) -> Takers {
        self.takers
    }

    /// What the pane's program side holds, to forget when the pane is.
    fn links(&self) -> impl Iterator<Item = Effect> {
        let handlers =
            [self.takers.chat, self.takers.actions].into_iter().flatten().map(Effect::ForgetHandler);
        handlers.chain(self.stop_armed.map(Effect::ForgetStop)).chain(self.turn.map(Effect::ForgetTurn))
    }

    pub fn has_action(&self, id: &Id) -> bool {
        self.actions.iter().any(|a| &a.id == id)
    }

    pub fn has_queued(&self) -> bool {
        !self.queued.is_empty()
    }

    pub fn queued_len(&self) -> usize {
        self.queued.len()
    }

    pub fn title(&self) -> &str {
        &self.title
    }

    pub fn tab(&self) -> &TabKey {
        &self.tab
    }

    /// The time of the pane's first event, if it had one.
    pub fn started_at(&self) -> Option<Timestamp> {
        self.started_at
    }

    /// The pane's conversation started at `at` (kept from an earlier run),
    /// unless it started earlier still.
    pub(super) fn started_before(&mut self, at: Timestamp) {
        self.started_at = Some(self.started_at.map_or(at, |s| s.min(at)));
    }

    /// Whether `session` is the pane's session id ([`Self::session_id`]),
    /// without making it.
    fn has_session_id(&self, session: &str, has_history: bool) -> bool {
        match (&self.session_id, has_history) {
            (SessionId::Named(s), _) => s == session,
            (SessionId::Unset, true) => self.id.as_str() == session,
            _ => false,
        }
    }

    pub fn session_id(&self, has_history: bool) -> Option<String> {
        match (&self.session_id, has_history) {
            (SessionId::Named(s), _) => Some(s.clone()),
            (SessionId::Unset, true) => Some(self.id.to_string()),
            _ => None,
        }
    }

    /// The pane as the state poll shows it (`durable_types::PaneView`),
    /// borrowed: written straight into the answer, no owned copy of its
    /// strings.
    pub fn view_ref<'a>(&'a self, has_history: bool, open_asks: &'a [&'a str]) -> PaneViewRef<'a> {
        PaneViewRef {
            id: &self.id,
            tab: self.tab.wire(),
            title: &self.title,
            harness: &self.harness,
            cwd: self.cwd.as_deref(),
            session_id: self.session_id(has_history),
            state: self.shown_state,
            turn_id: self.shown_turn_id.as_deref(),
            last_seq: self.last_seq,
            open_asks,
            actions: &self.actions,
        }
    }

    /// The events of the tail after `after` (seqs are contiguous in the
    /// tail, so the first one is found by its position).
    pub fn events_after(&self, after: u64) -> impl Iterator<Item = &TailEvent> {
        self.events.iter().skip(self.tail_position(after))
    }

    /// Encodes the events of the tail after `after` that are not yet,
    /// through `scratch`, and returns the length of their JSON in all.
    pub fn encode_tail_after(&mut self, after: u64, scratch: &mut Vec<u8>) -> usize {
        let skip = self.tail_position(after);
        let mut bytes = 0;
        for e in self.events.iter_mut().skip(skip) {
            e.encode(scratch);
            bytes += e.json().len();
        }
        bytes
    }

    /// The length of the JSON of the tail's events after `after`, in all,
    /// when every one of them is encoded already (`None`: one is not).
    pub fn encoded_tail_len_after(&self, after: u64) -> Option<usize> {
        self.events_after(after).try_fold(0, |bytes, e| e.is_encoded().then(|| bytes + e.json().len()))
    }

    /// Whether a reader asked for this pane's events (a restore from then
    /// on starts its tail again rather than renumbering it).
    pub fn events_were_read(&self) -> bool {
        self.events_read
    }

    /// Where the event after `after` sits in the tail.
    fn tail_position(&self, after: u64) -> usize {
        let skip = after.saturating_add(1).saturating_sub(self.first_retained());
        usize::try_from(skip).unwrap_or(usize::MAX)
    }

    /// The view's newest items (at most [`VIEW_LIMIT`]), and whether older
    /// ones are no longer kept.
    pub fn view_items(&self) -> (Vec<&Item>, bool) {
        (self.view.iter().map(|i| &**i).collect(), self.view.dropped())
    }

    /// How many items the view holds.
    pub fn view_len(&self) -> usize {
        self.view.len()
    }

    /// Whether the view lost its oldest items to [`VIEW_LIMIT`].
    pub fn view_dropped(&self) -> bool {
        self.view.dropped()
    }

    /// A page of the view for history (§10): at most `limit` items (copied)
    /// whose place in the view comes after `after` (0: from the start), in
    /// order, and the place of the page's last item when more follow. A
    /// place is the item's order of first appearance, so it holds while
    /// items are appended, rewritten in place or dropped from the front.
    pub fn view_page(&self, after: u64, limit: usize) -> (Vec<Item>, Option<u64>) {
        let mut rest = self.view.after(after);
        let mut items = Vec::with_capacity(limit.min(self.view.len()));
        let mut last = after;
        for (order, item) in rest.by_ref().take(limit) {
            items.push(Item::clone(item));
            last = order;
        }
        let next = rest.next().is_some().then_some(last);
        (items, next)
    }

    /// The seq of the oldest event still in the tail (last_seq + 1 if none).
    pub fn first_retained(&self) -> u64 {
        self.events.front().map_or(self.last_seq + 1, TailEvent::seq)
    }

    /// Appends an event to the tail (trimmed to `tail_limit`), as written:
    /// it is encoded when first read ([`TailEvent`]).
    pub(super) fn push_event(&mut self, ts: Timestamp, body: EventBody, tail_limit: usize) {
        self.last_seq += 1;
        self.started_at.get_or_insert(ts);
        match &body {
            EventBody::Item { item } => self.view.put(item.clone()),
            EventBody::State { state, turn_id } => {
                self.shown_state = *state;
                self.shown_turn_id.clone_from(turn_id);
            }
            _ => {}
        }
        self.events.push_back(TailEvent::Written(Event { seq: self.last_seq, ts, body }));
        while self.events.len() > tail_limit {
            self.events.pop_front();
        }
    }

    /// Puts kept items back in front of the view: see
    /// [`State::restore_conversation`].
    pub(super) fn restore_items(
        &mut self,
        kept: Vec<Item>,
        dropped: bool,
        now: Timestamp,
        tail_limit: usize,
    ) {
        let whole_tail = self.events.len() as u64 == self.last_seq - self.declared_seq
            && self.events.iter().all(|e| matches!(e, TailEvent::Written(_)));
        if !self.events_read && whole_tail {
            // No reader has seen the pane's events: the kept items become
            // its first events and what it showed since follows them,
            // renumbered (an item of a kept id lands in that item's place).
            let since = std::mem::take(&mut self.events);
            self.last_seq = self.declared_seq;
            self.view.take_all();
            // Stamped no later than what follows them: the tail's times
            // never go back.
            let ts = match since.front() {
                Some(TailEvent::Written(e)) => e.ts.min(now),
                _ => now,
            };
            for item in kept {
                self.push_event(ts, EventBody::Item { item: Arc::new(item) }, tail_limit);
            }
            for event in since {
                if let TailEvent::Written(e) = event {
                    self.push_event(e.ts, e.body, tail_limit);
                }
            }
            if dropped {
                self.view.mark_dropped();
            }
            return;
        }
        let written_since = self.view.take_all();
        let mut newer: HashMap<Id, Arc<Item>> =
            written_since.iter().map(|i| (i.id.clone(), Arc::clone(i))).collect();
        for item in kept {
            let item = newer.remove(&item.id).unwrap_or_else(|| Arc::new(item));
            self.view.put(item);
        }
        for item in written_since {
            if newer.contains_key(&item.id) {
                self.view.put(item);
            }
        }
        if dropped {
            self.view.mark_dropped();
        }
        self.started_at.get_or_insert(now);
        // The tail starts again past a seq no event has: every reader's
        // `after` is then behind it and gets the view.
        self.events.clear();
        self.last_seq += 1;
    }

    /// The items still marked partial in their newest form (one waiting
    /// for the store is newer than the view's), finalized.
    fn finalized_partials(&self) -> Vec<Item> {
        let waiting: Vec<&Arc<Item>> = self
            .pending
            .iter()
            .filter_map(|e| match &e.body {
                EventBody::Item { item } => Some(item),
                _ => None,
            })
            .collect();
        // The newest form of each waiting item: its last in the queue.
        let newest: HashMap<&Id, usize> = waiting.iter().enumerate().map(|(at, i)| (&i.id, at)).collect();
        let finalized = |i: &Item| {
            let mut item = i.clone();
            item.body.finalize();
            item
        };
        let in_view = self.view.iter().filter(|i| !newest.contains_key(&i.id));
        let in_queue =
            waiting.iter().enumerate().filter(|(at, i)| newest.get(&i.id) == Some(at)).map(|(_, i)| *i);
        in_view.chain(in_queue).filter(|i| i.body.is_partial()).map(|i| finalized(i)).collect()
    }
}

impl State {
    /// The pane whose events a reader asks for: a restore from now on
    /// starts its tail again rather than renumbering it.
    pub fn pane_events_read(&mut self, id: &Id) -> Option<&PaneData> {
        let p = self.panes.get_mut(id)?;
        p.events_read = true;
        Some(p)
    }

    pub fn pane(&self, id: &Id) -> Option<&PaneData> {
        self.panes.get(id).map(|p| &**p)
    }

    /// `pane` with the events of its tail after `after` encoded
    /// ([`PaneData::encode_tail_after`]), and the length of their JSON in
    /// all; `None` for no open pane.
    pub fn encode_tail_after(&mut self, pane: &Id, after: u64) -> Option<(&PaneData, usize)> {
        let p = self.panes.get_mut(pane)?;
        let bytes = p.encode_tail_after(after, &mut self.event_scratch);
        Some((&**p, bytes))
    }

    /// The open pane whose session id is `session` (the first in layout
    /// order, if several name the same one); `None` when no open pane has it.
    /// History serves such a pane's view when the provider knows no
    /// conversation by that id (§10).
    pub fn open_pane_of_session(&self, session: &str) -> Option<&PaneData> {
        let has_history = self.has_history;
        self.panes_in_layout_order().find(|p| p.has_session_id(session, has_history))
    }

    pub fn is_open(&self, id: &Id) -> bool {
        self.panes.contains_key(id)
    }

    /// A pane's field or tail changed.
    pub(super) fn touch_pane(&mut self, pane: &Id) {
        let seq = self.bump();
        if let Some(p) = self.panes.get_mut(pane) {
            let before = std::mem::replace(&mut p.changed_at, seq);
            // The id moves from the pane's last change to this one: no copy.
            let id = self.changes.remove(&before).unwrap_or_else(|| pane.clone());
            self.changes.insert(seq, id);
        }
    }

    /// Appends an event to an open pane and marks it changed.
    /// With a store that keeps conversations, an item or title is
    /// journaled for it.
    pub fn pane_event(&mut self, pane: &Id, ts: Timestamp, body: EventBody) {
        self.pane_event_by(pane, ts, body, false);
    }

    /// [`pane_event`](Self::pane_event), saying whether a title event is
    /// the phone's rename.
    fn pane_event_by(&mut self, pane: &Id, ts: Timestamp, body: EventBody, by_phone: bool) {
        if !self.panes.contains_key(pane) {
            return;
        }
        let kept = match (&body, self.keeps_conversations) {
            (EventBody::Item { item }, true) => {
                Some(ConversationOp::Item { pane: pane.to_string(), item: Arc::clone(item) })
            }
            (EventBody::Title { title }, true) => {
                Some(ConversationOp::Title { pane: pane.to_string(), title: title.clone(), by_phone })
            }
            _ => None,
        };
        let kept_by = kept.and_then(|op| self.keep_conversation(op));
        let waits_for = kept_by.filter(|_| self.items_wait_for_store).map(KeptBy::Conversation);
        self.push_pane_event(pane, ts, body, waits_for);
    }

    /// Appends an event to an open pane's tail, or — when it waits for the
    /// store (`kept_by`), or events ahead of it do — to the events readers
    /// see once the store has them (`show_kept_events`).
    pub(super) fn push_pane_event(
        &mut self,
        pane: &Id,
        ts: Timestamp,
        body: EventBody,
        kept_by: Option<KeptBy>,
    ) {
        let tail_limit = self.tail_limit;
        let Some(p) = self.panes.get_mut(pane) else { return };
        let ask = raised_ask(&body);
        if kept_by.is_none() && p.pending.is_empty() {
            p.push_event(ts, body, tail_limit);
            self.touch_pane(pane);
            self.asks_shown(ask);
            return;
        }
        // Shown once the store has it (and what is ahead of it).
        let item = matches!(body, EventBody::Item { .. });
        match (p.pending.back_mut(), &body) {
            // A reply streamed while the store is behind: the form that
            // waits is replaced, as its journal op was (one entry, not one
            // per partial write).
            (Some(last), EventBody::Item { item: new })
                if last.kept_by == kept_by
                    && matches!(&last.body, EventBody::Item { item: old } if old.id == new.id) =>
            {
                *last = PendingEvent { ts, body, kept_by };
            }
            _ => p.pending.push_back(PendingEvent { ts, body, kept_by }),
        }
        // A store that never answers must not cost memory without end:
        // past a tail's worth, the oldest are shown unkept (with a warning).
        let mut shown_unkept = Vec::new();
        while p.pending.len() > tail_limit {
            let Some(oldest) = p.pending.pop_front() else { break };
            shown_unkept.push(raised_ask(&oldest.body));
            p.push_event(oldest.ts, oldest.body, tail_limit);
        }
        let overflow = !shown_unkept.is_empty();
        let first_overflow = overflow && !std::mem::replace(&mut p.warned_unkept, true);
        self.panes_waiting.insert(pane.clone());
        if first_overflow {
            self.effect(Effect::Warn(format!(
                "collie: the receipt store is {tail_limit} events behind on pane {pane}; its oldest are shown before the store has them (a crash may take them back)"
            )));
        }
        // A title changes what the state poll shows of the pane (its
        // fields) now: a new seq, so no two answers differ at one. An ask
        // waiting is not shown yet.
        if !(item || ask.is_some()) || overflow {
            self.touch_pane(pane);
        }
        self.asks_shown(shown_unkept.into_iter().flatten());
        if overflow {
            // What waited only behind those shown unkept goes out too.
            self.show_kept_events();
        }
    }

    /// Opens a pane at the end of its tab (the caller checked the id is not
    /// open). `false`: the tab is not open.
    pub fn add_pane(&mut self, tab: &TabKey, id: Id, fields: PaneFields) -> bool {
        let Some(t) = self.find_tab_mut(tab) else { return false };
        t.panes.push(id.clone());
        let last_seq = self.seq_floor.get(&id).copied().unwrap_or(0);
        let restore = self.conversation_opened(&id, &fields.title);
        let mut data = PaneData::new(id.clone(), tab.clone(), fields, last_seq);
        data.restore = restore;
        self.forget_closed(&id);
        self.panes.insert(id.clone(), Box::new(data));
        self.bump_layout();
        self.touch_pane(&id);
        true
    }

    /// Takes a pane out of the layout into the closed list, stopping its
    /// turn. Its open asks are the caller's to close first. Returns whether
    /// it was open.
    pub fn close_pane(&mut self, pane: &Id) -> bool {
        let Some(mut data) = self.panes.remove(pane) else { return false };
        self.changes.remove(&data.changed_at);
        if let Some(stop) = data.stop_armed.take() {
            self.effect(Effect::Abort(stop));
        }
        if let Some(tab) = self.find_tab_mut(&data.tab) {
            tab.panes.retain(|p| p != pane);
        }
        let view = ClosedView {
            id: pane.to_string(),
            title: data.title.clone(),
            session_id: data.session_id(self.has_history),
        };
        self.seq_floor.insert(pane.clone(), data.last_seq);
        self.forget_closed(pane);
        self.closed.push(ClosedPane { view, data });
        if self.closed.len() > CLOSED_MEMORY {
            // The oldest is forgotten: reopening it needs the on_reopen hook.
            let oldest = self.closed.remove(0);
            self.effects.extend(oldest.data.links());
        }
        self.bump_layout();
        self.record_removed(pane.clone());
        true
    }

    /// Whether this run declared a pane of this id (open, or closed and
    /// still in the closed list).
    pub(super) fn is_declared(&self, pane: &Id) -> bool {
        self.panes.contains_key(pane) || self.closed.iter().any(|c| &c.data.id == pane)
    }

    /// The pane of this id: the open one, else the closed one.
    pub(super) fn open_or_closed_mut(&mut self, pane: &Id) -> Option<&mut PaneData> {
        if self.panes.contains_key(pane) {
            return self.panes.get_mut(pane).map(|b| &mut **b);
        }
        // At most one closed pane has an id (`forget_closed`).
        self.closed.iter_mut().map(|c| &mut *c.data).find(|p| &p.id == pane)
    }

    /// The pane of this id, open or closed, is owed no kept items any more.
    pub(super) fn cancel_restore(&mut self, pane: &Id) {
        if let Some(p) = self.panes.get_mut(pane) {
            p.restore = None;
        }
        for c in self.closed.iter_mut().filter(|c| &c.data.id == pane) {
            c.data.restore = None;
        }
    }

    /// Forgets a closed pane of this id (a new one takes its place), and
    /// what its program side held.
    fn forget_closed(&mut self, pane: &Id) {
        let Some(pos) = self.closed.iter().position(|c| c.view.id == pane.as_str()) else { return };
        let gone = self.closed.remove(pos);
        self.effects.extend(gone.data.links());
    }

    /// Puts back a pane this process closed (idle; with its tab and
    /// workspace if they are gone). Returns whether it could.
    pub fn restore_pane(&mut self, pane: &Id, now: Timestamp) -> bool {
        let Some(pos) = self.closed.iter().position(|c| c.view.id == pane.as_str()) else { return false };
        if self.panes.contains_key(pane) {
            return false;
        }
        let key = self.closed[pos].data.tab.clone();
        self.ensure_tab(&key);
        let mut data = self.closed.remove(pos).data;
        let was_working = data.state == PaneState::Working;
        data.state = PaneState::Idle;
        let turn_id = data.turn_id.clone();
        if let Some(tab) = self.find_tab_mut(&key) {
            tab.panes.push(pane.clone());
        }
        self.panes.insert(pane.clone(), data);
        self.bump_layout();
        self.touch_pane(pane);
        if was_working {
            // Its turn ended with the close: the tail says so too.
            self.pane_event(pane, now, EventBody::State { state: PaneState::Idle, turn_id });
        }
        true
    }

    /// A history provider was set: every pane (closed ones too) gets its
    /// session id.
    pub fn enable_history(&mut self) {
        self.has_history = true;
        let ids: Vec<_> = self.panes.keys().cloned().collect();
        for id in ids {
            self.touch_pane(&id);
        }
        for closed in &mut self.closed {
            closed.view.session_id = closed.data.session_id(true);
        }
        self.bump_layout();
    }

    /// The session id of the pane `pane` this process closed (`Some(None)`:
    /// closed with none); `None` when it closed no pane of that id.
    pub fn closed_session_id(&self, pane: &str) -> Option<Option<&str>> {
        self.closed.iter().rev().find(|c| c.view.id == pane).map(|c| c.view.session_id.as_deref())
    }

    /// The id of the pane this process closed last whose session id is
    /// `session`, if any: history reads its kept conversation under it.
    pub fn closed_pane_of_session(&self, session: &str) -> Option<&str> {
        self.closed
            .iter()
            .rev()
            .find(|c| c.view.session_id.as_deref() == Some(session))
            .map(|c| c.view.id.as_str())
    }

    pub fn closed_views(&self) -> Vec<ClosedView> {
        self.closed.iter().map(|c| c.view.clone()).collect()
    }

    /// Sets a pane's state and turn (a `state` event). Going idle first
    /// finalizes the items still marked partial. `None`: the pane is not
    /// open; else the ids of the items finalized that the program should
    /// hear about (once per pane; empty otherwise).
    pub fn set_pane_state(
        &mut self,
        pane: &Id,
        state: PaneState,
        turn: Option<String>,
        now: Timestamp,
    ) -> Option<Vec<String>> {
        let p = self.panes.get_mut(pane)?;
        let mut warn = Vec::new();
        if state == PaneState::Idle {
            let partial = p.finalized_partials();
            if !partial.is_empty() && !p.warned_partial {
                p.warned_partial = true;
                warn = partial.iter().map(|i| i.id.to_string()).collect();
            }
            for item in partial {
                self.pane_event(pane, now, EventBody::Item { item: item.into() });
            }
        }
        let p = self.panes.get_mut(pane)?;
        p.state = state;
        if turn.is_some() {
            p.turn_id = turn;
        }
        let turn_id = p.turn_id.clone();
        self.pane_event(pane, now, EventBody::State { state, turn_id });
        Some(warn)
    }

    /// Sets a pane's title (a `title` event), the phone's rename or the
    /// program's. Returns whether it is open.
    pub fn rename_pane(&mut self, pane: &Id, title: String, now: Timestamp, by_phone: bool) -> bool {
        let Some(p) = self.panes.get_mut(pane) else { return false };
        p.title = title.clone();
        self.pane_event_by(pane, now, EventBody::Title { title }, by_phone);
        true
    }

    /// The title the pane was declared with.
    pub fn declared_title(&self, pane: &Id) -> Option<&str> {
        self.panes.get(pane).map(|p| p.declared_title.as_str())
    }

    /// Adds an action button, or replaces the one with its id. Returns
    /// whether the pane is open.
    pub fn set_action(&mut self, pane: &Id, view: ActionView) -> bool {
        let Some(p) = self.panes.get_mut(pane) else { return false };
        match p.actions.iter_mut().find(|a| a.id == view.id) {
            Some(a) => *a = view,
            None => p.actions.push(view),
        }
        self.touch_pane(pane);
        true
    }

    pub fn remove_action(&mut self, pane: &Id, id: &str) {
        if let Some(p) = self.panes.get_mut(pane) {
            p.actions.retain(|a| a.id != id);
            self.touch_pane(pane);
        }
    }

    /// Sets the pane's own chat handler. Returns whether the pane is open.
    pub fn set_pane_chat(&mut self, pane: &Id, handler: Link) -> bool {
        let Some(p) = self.panes.get_mut(pane) else { return false };
        let old = p.takers.chat.replace(handler);
        self.has_chat = true;
        self.effects.extend(old.map(Effect::ForgetHandler));
        true
    }

    /// Sets the pane's own action handler. Returns whether the pane is open.
    pub fn set_pane_actions(&mut self, pane: &Id, handler: Link) -> bool {
        let Some(p) = self.panes.get_mut(pane) else { return false };
        let old = p.takers.actions.replace(handler);
        self.has_actions = true;
        self.effects.extend(old.map(Effect::ForgetHandler));
        true
    }

    // Turns.

    /// Arms a pane's stop signal before its turn starts: a stop that arrives
    /// meanwhile fires it.
    /// Returns whether the pane is open; a stop signal of a closed pane is
    /// the caller's to drop.
    pub fn arm_turn_stop(&mut self, pane: &Id, stop: Link) -> bool {
        let Some(p) = self.panes.get_mut(pane) else { return false };
        let old = p.stop_armed.replace(stop);
        self.effects.extend(old.map(Effect::ForgetStop));
        true
    }

    /// Fires the pane's stop signal, if a turn armed one.
    pub fn stop_turn(&mut self, pane: &Id) {
        if let Some(stop) = self.panes.get_mut(pane).and_then(|p| p.stop_armed.take()) {
            self.effect(Effect::Abort(stop));
        }
    }

    /// Makes a turn the pane's current one: its stop signal and steer
    /// inbox. Returns whether the pane is open (else both are the caller's
    /// to drop).
    pub fn install_turn(&mut self, pane: &Id, stop: Link, turn: Link) -> bool {
        if !self.arm_turn_stop(pane, stop) {
            return false;
        }
        let replaced = self.panes.get_mut(pane).and_then(|p| p.turn.replace(turn));
        self.effects.extend(replaced.map(Effect::ForgetTurn));
        true
    }

    /// Forgets the pane's current turn if it is this one; says whether it was.
    pub fn uninstall_turn(&mut self, pane: &Id, turn: Link) -> bool {
        let Some(p) = self.panes.get_mut(pane) else { return false };
        if p.turn == Some(turn) {
            p.turn = None;
            true
        } else {
            false
        }
    }

    /// Hands a steer to the running turn (a program that set `working` by
    /// hand has no inbox: its handler had the text).
    pub fn steer_turn(&mut self, pane: &Id, text: String) {
        if let Some(turn) = self.panes.get(pane).and_then(|p| p.turn) {
            self.effect(Effect::Steer { turn, text });
        }
    }

    // Queued sends.

    pub fn queue_send(&mut self, pane: &Id, send: QueuedSend) {
        if let Some(p) = self.panes.get_mut(pane) {
            p.queued.push_back(send);
        }
    }

    /// Puts a send taken from the queue back at its head.
    pub fn requeue_send(&mut self, pane: &Id, send: QueuedSend) {
        if let Some(p) = self.panes.get_mut(pane) {
            p.queued.push_front(send);
        }
    }

    /// The oldest queued send, taken, when the pane is idle and asks
    /// nothing: a send is never delivered while a question waits.
    pub fn next_queued_send(&mut self, pane: &Id) -> Option<QueuedSend> {
        let asking = !self.open_asks_of(pane).is_empty();
        match self.panes.get_mut(pane) {
            Some(p) if p.state == PaneState::Idle && !asking => p.queued.pop_front(),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use durable_types::ScopeId;

    fn pane() -> PaneData {
        let tab = TabKey { ws: ScopeId::new("w").unwrap(), tab: ScopeId::new("t").unwrap() };
        let fields =
            PaneFields { title: "P".into(), harness: "h".into(), cwd: None, session_id: SessionId::Unset };
        PaneData::new(Id::new("p").unwrap(), tab, fields, 0)
    }

    fn item_event(p: &mut PaneData, n: u64) -> Event {
        let item = Arc::new(Item::reply(&format!("i{n}"), format!("reply \"{n}\"\n")).unwrap());
        let ts = Timestamp::from_millis(1_000 + n);
        p.push_event(ts, EventBody::Item { item: item.clone() }, 500);
        Event { seq: p.last_seq, ts, body: EventBody::Item { item } }
    }

    #[test]
    fn an_event_is_encoded_at_its_first_read_into_the_bytes_a_write_would_have_made() {
        let mut p = pane();
        let written: Vec<Event> = (1..=3).map(|n| item_event(&mut p, n)).collect();
        assert!(p.events.iter().all(|e| matches!(e, TailEvent::Written(_))), "nothing encoded on write");

        // A reader after seq 1: events 2 and 3 are encoded, event 1 is not.
        let mut scratch = Vec::new();
        let bytes = p.encode_tail_after(1, &mut scratch);
        assert!(matches!(p.events[0], TailEvent::Written(_)));
        let page: Vec<&[u8]> = p.events_after(1).map(TailEvent::json).collect();
        let want: Vec<Vec<u8>> = written[1..].iter().map(|e| serde_json::to_vec(e).unwrap()).collect();
        assert_eq!(page, want.iter().map(Vec::as_slice).collect::<Vec<_>>());
        assert_eq!(bytes, want.iter().map(Vec::len).sum::<usize>());
        assert_eq!(p.events_after(1).map(TailEvent::seq).collect::<Vec<_>>(), [2, 3]);

        // Read again from the start: the same bytes for 2 and 3, and 1 too.
        p.encode_tail_after(0, &mut scratch);
        let all: Vec<Vec<u8>> = p.events_after(0).map(|e| e.json().to_vec()).collect();
        assert_eq!(all, written.iter().map(|e| serde_json::to_vec(e).unwrap()).collect::<Vec<_>>());
        assert_eq!(p.first_retained(), 1);
    }

    #[test]
    fn the_tail_keeps_its_limit_whether_events_were_read_or_not() {
        let mut p = pane();
        for n in 1..=3 {
            item_event(&mut p, n);
        }
        p.encode_tail_after(0, &mut Vec::new());
        let ts = Timestamp::from_millis(9);
        for n in 4..=6 {
            let item = Arc::new(Item::reply(&format!("i{n}"), "x").unwrap());
            p.push_event(ts, EventBody::Item { item }, 4);
        }
        assert_eq!(p.events.len(), 4);
        assert_eq!(p.first_retained(), 3);
        assert_eq!(p.events_after(4).map(TailEvent::seq).collect::<Vec<_>>(), [5, 6]);
        assert_eq!(p.encode_tail_after(6, &mut Vec::new()), 0, "nothing after the last event");
    }
}
