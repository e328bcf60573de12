//! The agent the `request` and `http` targets talk to: a core with a layout
//! of two panes, asks raised, a chat handler whose turns wait for a steer or
//! a stop, an action, hooks, a starter and a small history — so that every
//! route has something to find.

use std::sync::Arc;

use durable_runtime::types::{
    AskOption, AskSpec, Caps, Cursor, FieldType, FormField, HistoryRow, Id, Item, Timestamp,
};
use durable_runtime::{
    ActionHandler, ActionRequest, AskHandle, ChatHandler, Clock, CloseRequest, Collie, CoreOptions,
    HandlerResult, HistoryError, HistoryProvider, Hooks, ItemsPage, PaneOptions, Refusal, RenameRequest,
    Reopen, ReopenRequest, RowsPage, SendRequest, Started, StarterRequest, SteerRequest, StopRequest, Turn,
    create_core,
};

/// The agent's start time: 2026-11-30T05:00:00.000Z.
pub const T0: u64 = 1_796_014_800_000;

/// Ids the agent knows, for inputs to pick from: panes, the action, the
/// starter, the workspace and tab, the history's sessions and cursors.
pub const KNOWN: [&str; 16] = [
    "ticket-1",
    "ticket-2",
    "refund",
    "new-ticket",
    "support",
    "support:main",
    "s1",
    "s2",
    "c1",
    "c2",
    "r1",
    "r2",
    "r3",
    "yes",
    "no",
    "allow-always",
];

/// How the agent is built, from the first bytes of an input.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, arbitrary::Arbitrary)]
pub struct Setup {
    /// Capabilities fixed to all (else: what the handlers give).
    pub all_caps: bool,
    /// Asks may carry allow-always options.
    pub allow_always: bool,
    /// A tail of 4 events (snapshots early) instead of 500.
    pub short_tail: bool,
    /// No hooks (rename, close, reopen and starters are not supported).
    pub no_hooks: bool,
}

/// A built agent, and the asks raised on it.
#[derive(Debug)]
pub struct Agent {
    /// The core.
    pub core: Collie,
    /// The asks raised at setup (dropping one leaves its ask open).
    pub asks: Vec<AskHandle>,
}

/// Builds the agent on `clock`.
pub fn build(setup: Setup, clock: Arc<dyn Clock>) -> Agent {
    let mut b = CoreOptions::builder()
        .host_name("fuzz")
        .clock_arc(clock)
        .epoch("0123456789abcdef")
        .allow_always(setup.allow_always);
    if setup.all_caps {
        b = b.caps(Caps::all());
    }
    if setup.short_tail {
        b = b.tail_limit(4);
    }
    let core = create_core(b.build().expect("the fuzz agent's options are valid"));
    core.on_send(Chat);
    if !setup.no_hooks {
        core.set_hooks(Layout);
        core.starter("new-ticket", "New ticket").expect("a starter id");
    }
    core.history(History);
    let tab = core.workspace("support", "Support").and_then(|w| w.tab("main", "Tickets")).expect("layout");
    let one = tab.pane("ticket-1", PaneOptions::new("Maria Lopez").harness("desk")).expect("pane");
    let two = tab.pane("ticket-2", PaneOptions::new("Sam").session_id("s2")).expect("pane");
    one.action("refund", "Refund", None).expect("action");
    one.on_action(Actions).expect("action handler");
    one.write(Item::reply("hello", "How can I help?").expect("item")).expect("write");
    let mut asks = Vec::new();
    let mut options = vec![AskOption::new("yes", "Yes"), AskOption::new("no", "No")];
    if setup.allow_always {
        options.push(AskOption::new("allow-always", "Always").always());
    }
    asks.push(
        one.ask(AskSpec::choice("call-1", "Refund 40 €?", options).expires_in_ms(60_000)).expect("ask"),
    );
    let form = AskSpec::form(
        "call-2",
        "Details",
        [
            FormField::new("name", "Name", FieldType::Text).required(),
            FormField::new("n", "Count", FieldType::Number),
            FormField::new("ok", "OK", FieldType::Bool),
            FormField::new("pick", "Pick", FieldType::Select).options([("a", "A"), ("b", "B")]),
        ],
    );
    asks.push(two.ask(form).expect("ask"));
    core.ready();
    Agent { core, asks }
}

/// The ask ids the agent raised at setup.
pub fn ask_ids() -> [String; 2] {
    [
        durable_runtime::types::ask_id_for("ticket-1", "call-1"),
        durable_runtime::types::ask_id_for("ticket-2", "call-2"),
    ]
}

/// The chat handler: a send whose text starts with `refuse` is refused, one
/// with `pass` is not taken; a turn writes a partial reply, then waits for a
/// steer or a stop (a text starting with `quick` ends at once).
#[derive(Debug, Clone, Copy)]
pub struct Chat;

fn verdict(s: &str) -> HandlerResult {
    if s.starts_with("refuse") {
        Err(Refusal::new("no"))
    } else if s.starts_with("pass") {
        Err(Refusal::not_supported())
    } else {
        Ok(())
    }
}

impl ChatHandler for Chat {
    async fn turn(&self, mut turn: Turn) {
        turn.partial(format!("Working on {}", turn.text()));
        if turn.text().starts_with("quick") {
            turn.reply("done");
            return;
        }
        if turn.text().starts_with("ask") {
            let spec = AskSpec::text(format!("t-{}", turn.id()), "Which order?");
            if let Ok(ask) = turn.pane().ask(spec) {
                let _ = ask.await;
            }
        }
        let stop = turn.signal().clone();
        let steer = tokio::select! {
            biased;
            s = turn.next_steer() => s,
            () = stop.aborted() => None,
        };
        turn.reply(format!("steered: {steer:?}"));
    }

    async fn check_send(&self, req: SendRequest) -> HandlerResult {
        verdict(&req.text)
    }

    async fn steer(&self, req: SteerRequest) -> HandlerResult {
        verdict(&req.text)
    }

    async fn stop(&self, req: StopRequest) -> HandlerResult {
        verdict(req.request_id.as_str())
    }
}

/// The action handler of `ticket-1`.
#[derive(Debug, Clone, Copy)]
pub struct Actions;

impl ActionHandler for Actions {
    async fn action(&self, req: ActionRequest) -> HandlerResult {
        verdict(req.request_id.as_str())
    }
}

/// The layout hooks: a request id starting with `refuse` is refused, one
/// with `pass` is left to the SDK.
#[derive(Debug, Clone, Copy)]
pub struct Layout;

impl Hooks for Layout {
    async fn on_rename(&self, req: RenameRequest) -> HandlerResult {
        verdict(req.request_id.as_str()).or_else(|r| if r.is_not_supported() { Ok(()) } else { Err(r) })
    }

    async fn on_close(&self, req: CloseRequest) -> HandlerResult {
        verdict(req.request_id.as_str()).or_else(|r| if r.is_not_supported() { Ok(()) } else { Err(r) })
    }

    async fn on_reopen(&self, req: ReopenRequest) -> HandlerResult<Reopen> {
        verdict(req.request_id.as_str()).map(|()| Reopen::Restore)
    }

    async fn on_starter(&self, req: StarterRequest) -> HandlerResult<Started> {
        verdict(req.request_id.as_str())?;
        Ok(match req.text.as_deref() {
            Some(_) => Started::from_id(Id::new("ticket-2").map_err(|_| Refusal::new("id"))?),
            None => Started::without_pane(),
        })
    }
}

/// Two conversations, `s1` (closed) and `s2`, paged one row at a time
/// through cursors `c1` and `c2`; `s1` has three items, paged the same way.
#[derive(Debug, Clone, Copy)]
pub struct History;

fn row(id: &str) -> HistoryRow {
    let row = HistoryRow::open(id, format!("Conversation {id}"), Timestamp::from_millis(T0 - 60_000))
        .in_tab("support", "main")
        .with_items(3);
    if id == "s1" { row.closed(Timestamp::from_millis(T0 - 1_000)) } else { row }
}

fn cursor(s: &str) -> Option<Cursor> {
    Cursor::new(s).ok()
}

impl HistoryProvider for History {
    async fn rows(&self, after: Option<Cursor>, limit: usize) -> Result<RowsPage, HistoryError> {
        let (rows, next) = match after.as_ref().map(Cursor::as_str) {
            None => (vec![row("s2")], cursor("c1")),
            Some("c1") => (vec![row("s1")], None),
            Some("fail") => return Err(HistoryError::new("the store is down")),
            Some(_) => (Vec::new(), None),
        };
        Ok(RowsPage { rows: rows.into_iter().take(limit).collect(), next })
    }

    async fn items(
        &self,
        session_id: &str,
        after: Option<Cursor>,
        limit: usize,
    ) -> Result<Option<ItemsPage>, HistoryError> {
        if session_id != "s1" {
            return Ok(None);
        }
        let all: Vec<Item> =
            ["one", "two", "three"].iter().filter_map(|t| Item::reply(&format!("i-{t}"), *t).ok()).collect();
        let start = match after.as_ref().map(Cursor::as_str) {
            None => 0,
            Some("c1") => 1,
            Some("c2") => 2,
            Some(_) => 3,
        };
        let items: Vec<Item> = all.into_iter().skip(start).take(limit).collect();
        let next = match start + items.len() {
            1 => cursor("c1"),
            2 => cursor("c2"),
            _ => None,
        };
        Ok(Some(ItemsPage { row: row("s1"), items, next, dropped: false }))
    }
}

/// A clock that reads tokio's (virtual, when paused) time, from [`T0`].
#[derive(Debug, Clone)]
pub struct TokioClock {
    start: tokio::time::Instant,
}

impl TokioClock {
    /// A clock at [`T0`] now.
    pub fn new() -> Self {
        TokioClock { start: tokio::time::Instant::now() }
    }
}

impl Default for TokioClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for TokioClock {
    fn now(&self) -> Timestamp {
        let ms = u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX);
        Timestamp::from_millis(T0.saturating_add(ms))
    }
}
