//! Put a durable agent on its user's phone through Collie — approval cards
//! for risky tool calls, questions of four kinds, a live chat view of each
//! conversation, history, and the phone's actions — with no UI code in the
//! agent. The Rust form of the npm `@colliepwa/durable-sdk`.
//!
//! An agent depends on `durable-sdk` and on tokio (the SDK's servers run on
//! it): `cargo add durable-sdk` and
//! `cargo add tokio --features macros,rt-multi-thread,signal,time`.
//!
//! The SDK turns on `serde_json`'s `preserve_order` for the whole program
//! (every `serde_json::Value` keeps its keys in insertion order): an
//! approval card's tool line shows the arguments in the program's order
//! (`refund(order: "5521", amount: 40)`), the ask hash's test vector
//! depends on it, and the ACP protocol crate (feature `acp`) turns it on
//! anyway.
//!
//! # Quick start
//!
//! ```no_run
//! use durable_sdk::{AskOption, AskSpec, PaneOptions, open_collie};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let collie = open_collie("hello").await?; // the private socket, named after the agent
//! let tab = collie.workspace("hello", "Hello")?.tab("main", "Questions")?;
//! let pane = tab.pane("deploy", PaneOptions::new("Deploy").harness("hello"))?;
//! collie.ready();
//! println!("listening {}", collie.address());
//! let options = [AskOption::new("yes", "Yes"), AskOption::new("no", "No")];
//! let answer = pane.ask(AskSpec::choice("deploy-1", "Deploy to staging?", options))?.await?;
//! println!("answer: {}", answer.option_id().unwrap_or("none"));
//! collie.close().await;
//! # Ok(()) }
//! ```
//!
//! [`open_collie`] builds the agent's core, serves it on a [`Transport`]
//! (the private socket unless the options say otherwise: its path is
//! `$COLLIE_DURABLE_SOCKET`, the variable Collie reads too, else one named
//! after the agent) and returns the [`Collie`] handle that sets the layout
//! the phone shows. Then attach the agent on the Collie side:
//! `collie durable attach hello --socket <the path printed>`.
//!
//! # One handle, any transport
//!
//! Every agent holds one [`Collie`]. [`open_collie`] returns it served;
//! [`create_core`] returns it unserved, for what only it takes (a
//! persistent receipt store from [`stores`], `allow_always(false)`), and
//! [`Collie::serve`] serves it. A [`Transport`] is a value — the socket or
//! HTTPS with a token — and carries the connection [`Limits`]; moving an
//! agent to HTTPS (feature `tls`) is one line:
//!
//! ```no_run
//! use durable_sdk::{OpenOptions, Transport, open_collie};
//!
//! # #[cfg(feature = "tls")]
//! # async fn run() -> Result<(), durable_sdk::Error> {
//! let https = Transport::https("0.0.0.0:8443").self_signed(); // the token from COLLIE_TOKEN
//! let collie = open_collie(OpenOptions::new("shop").transport(https)).await?;
//! println!("listening {} (fingerprint {:?})", collie.address(), collie.fingerprint());
//! # Ok(()) }
//! ```
//!
//! Over HTTPS the token is the only barrier, so serving there turns
//! allow-always off — the asks raised from then on offer only Allow and
//! Deny; serve before raising asks — unless the transport says
//! `allow_always(true)`.
//!
//! # Handlers are closures (or traits)
//!
//! A pane's conversation runs one [`Turn`] per send from the phone
//! (queuing sends that arrive meanwhile), hears the phone's steers and
//! stop, and goes idle when the turn returns. A button runs its action. A
//! closure does for either — its argument's type written out
//! (`|turn: Turn|`, `|req: ActionRequest|`), as Rust cannot infer it through
//! the handler traits; so does a type implementing
//! [`handlers::ChatHandler`] or [`handlers::ActionHandler`] (for a chat
//! that also vets sends, steers and stops). `?` inside a handler on the
//! SDK's errors refuses the write with their words.
//!
//! ```no_run
//! use durable_sdk::{ActionRequest, Collie, Item, PaneOptions, Turn};
//!
//! # fn run(collie: &Collie) -> Result<(), durable_sdk::Error> {
//! let tab = collie.workspace("echo", "Echo")?.tab("main", "Chats")?;
//! tab.pane("chat", PaneOptions::new("Echo"))?.on_send(|mut turn: Turn| async move {
//!     turn.partial("…");
//!     let steers = turn.take_steers().join(" ");
//!     turn.reply(format!("You said: {} {steers}", turn.text()));
//! })?;
//! let ops = tab.pane("ops", PaneOptions::new("Ops"))?;
//! ops.action("ping", "Ping", None)?;
//! ops.on_action(|req: ActionRequest| async move {
//!     // `?` on the SDK's rules: the phone hears `409 refused` with the rule, nothing is stored.
//!     // The request id is an ID already: as the item's id it always fits.
//!     req.pane.write(Item::reply(req.request_id.as_str(), "pong")?)?;
//!     Ok(())
//! })?;
//! # Ok(()) }
//! ```
//!
//! # Where everything is
//! The root holds what recipes type. Everything else the seeds export — every
//! wire type, hook payload and rule — is one path away, in a module named for
//! what it holds:
//! - [`types`]: the wire's items, events, layout views, ids, cursors, times,
//!   rules and constants;
//! - [`asks`]: ask handles, approvals and the ask's wire types;
//! - [`handlers`]: the handler traits and what the phone's writes carry;
//! - [`history`]: the history provider and its rows and pages;
//! - [`stores`]: receipt stores (memory, SQLite, PostgreSQL);
//! - [`transport`]: the caller check, the socket path, the transports'
//!   errors;
//! - [`driver`]: what drives an agent ([`Collie::driver`]), its requests and
//!   responses, clocks — for tests and custom transports;
//! - `pi` (feature `pi`): Pi's sessions as conversations, panes and history.
//! - `acp` (feature `acp`): any ACP agent's sessions as conversations,
//!   panes and history.
//!
//! # The npm names in Rust
//!
//! | npm | Rust |
//! |---|---|
//! | `openCollie({ hostName, socket })` | [`open_collie`]`(`[`OpenOptions`]`::new(host).transport(`[`Transport::socket_at`]`(path)))` |
//! | `createCore({ receipts, allowAlways })` | [`create_core`]`(`[`CoreOptions`]`::builder().receipts(..).allow_always(..))`, then [`Collie::serve`] |
//! | `collie.address` | [`Collie::address`] |
//! | `collie.workspace / tab / pane` | [`Collie::workspace`], [`Workspace::tab`], [`Tab::pane`] |
//! | `pane.ask(spec)` | [`Pane::ask`] with an [`AskSpec`] |
//! | `requireApproval(tool, args, opts)` | [`require_approval`] with [`ApprovalOptions`] |
//! | `askIdFor(pane, callId)` | [`ask_id_for`] |
//! | `callSummary`, `argumentsView` | [`asks::call_summary`], [`asks::arguments_view`] |
//! | `AskClosed` | [`asks::AskClosed`] |
//! | `ALL_CAPS`, `{...ALL_CAPS, steer: false}` | [`Caps::all`], `Caps::all().without(`[`Cap::Steer`]`)` |
//! | `RECEIPTS_PER_GROUP`, `TAIL_LIMIT`, … | [`types::RECEIPTS_PER_GROUP`], [`types::TAIL_LIMIT`], … |
//! | `MemoryReceiptStore`, `ReceiptStore { get, put }` | [`stores::MemoryReceiptStore`], [`stores::ReceiptStore`] |
//! | `tailLimit`, `holdMs` | [`OpenOptions::tail_limit`], [`OpenOptions::hold_ms`] |
//! | `callerCheck: "off"` | [`Transport::caller_check`]`(`[`transport::CallerCheck::Off`]`)` |
//! | `onSend`, `onAction`, `hooks: { onRename, … }` | [`Pane::on_send`], [`Pane::on_action`], [`Collie::on_rename`], … |
//! | `TypeError`, `RangeError` | `Err(`[`types::RuleError`]`)` of a [`types::RuleKind`] |
//!
//! # Logs
//!
//! What the SDK has to say goes to [`tracing`](https://docs.rs/tracing),
//! under the module path of the code that says it (the runtime's under
//! the machine's, `durable_core`), so a filter by crate
//! works: `RUST_LOG=durable_core=debug` (the protocol: requests, turns,
//! asks), `durable_http` (connections, the server's errors),
//! `durable_sdk` (serving, the stores, the warn lines), `durable_pi`,
//! `durable_acp`. The SDK installs no subscriber: the program does (the
//! examples use `tracing-subscriber`'s `fmt` with an `EnvFilter` from
//! `RUST_LOG`).
//!
//! - Events: `Collie said hello` (`INFO`, `durable_core`: Collie's version
//!   and wire range, the first time each version says `POST /hello` in this
//!   process — the first thing to look for when the phone does not show
//!   the agent); `caller refused` (`INFO`: which check — `bearer-token`,
//!   `self-or-descendant`, `other-user` — never a token or a header); `ask
//!   raised` and `ask decided` (`INFO`); each request's `answered`
//!   (`DEBUG`, its status); the server's errors (`WARN`).
//! - Spans, so that a program's own events carry where they happen:
//!   `connection` (`DEBUG`, `durable_http`: `transport`, `peer` for TCP,
//!   `caller` as its transport found it) › `request` (`durable_core`:
//!   `method`, `route` such as `/v1/panes/{pane}/send`, `pane`, `ask_id`,
//!   `request_id` — never a token or a body; `INFO` for a write, `DEBUG`
//!   for a read, so the poll costs nothing unless asked for); `turn`
//!   (`INFO`: `pane`, `turn`) around each send's turn, so what a
//!   [`ChatHandler`](handlers::ChatHandler) logs carries both
//!   ([`Turn::span`] for a turn the program runs itself); `ask` (`INFO`:
//!   `pane`, `ask_id`) under the turn that raised it
//!   ([`AskHandle::span`](asks::AskHandle::span)). A span counts only where
//!   the filter lets it through: `RUST_LOG=my_agent=info` alone drops the
//!   SDK's spans too; `RUST_LOG=info` or `my_agent=info,durable_core=info`
//!   keeps them.
//! - Warn lines (the core's and the program's [`Collie::warn`]) are written
//!   once: as a `WARN` event of target `durable_sdk::warn` when the
//!   subscriber in force records it, else as one line on standard error —
//!   so a program without a subscriber still sees them, and one with a
//!   subscriber sees each once.
//!
//! The wire itself — every route, body and rule, both sides, and each
//! decision this SDK took — is the module [`wire`].
//!
//! # Who can answer
//! On Linux the socket server reads each caller's process: a write (an
//! answer, a send, …) from the agent itself or a process it launched — while
//! that process's chain of parents still leads to the agent — is refused
//! with `403 caller-refused`, and a caller it cannot place is refused too.
//! That guards against accidents (a tool answering its own card), not
//! against a tool that means harm: one that detaches from the agent
//! (`setsid`, `nohup … &`, `systemd-run --user`, tmux) escapes it, and on
//! other Unixes there is no check at all. Run the agent's tools in a sandbox
//! that cannot reach the socket, and over HTTPS keep the token out of their
//! environment (`Command::env_remove` of [`types::TOKEN_ENV`] and
//! [`types::TOKEN_NEXT_ENV`]; durable-pi does so for Pi). That is not
//! enough against a tool that means harm either: a process of the same user
//! reads the agent's own start-up environment in `/proc/<pid>/environ`. Such
//! tools need another user id, or a process namespace of their own.
//!
//! # A full disk, a file-size limit
//! The stores commit a write before it is answered, so a write the disk
//! refuses is answered `500` and nothing acknowledged is lost. One case ends
//! the process instead: past its file-size limit (`ulimit -f`, a service
//! manager's `LimitFSIZE`) the kernel sends `SIGXFSZ`, whose default ends
//! the process with no word. Listening for it once, inside the runtime,
//! turns it into an error on the write ("File too large") and a line of
//! your own, with no `unsafe`:
//!
//! ```no_run
//! # #[cfg(unix)]
//! # async fn f() -> std::io::Result<()> {
//! use tokio::signal::unix::{SignalKind, signal};
//! // SIGXFSZ: 25 on Linux (x86, ARM) and macOS; `libc::SIGXFSZ` or nix's
//! // `Signal::SIGXFSZ` give it on every system.
//! let mut xfsz = signal(SignalKind::from_raw(25))?;
//! tokio::spawn(async move {
//!     while xfsz.recv().await.is_some() {
//!         eprintln!("a write passed the file-size limit (ulimit -f)");
//!     }
//! });
//! # Ok(()) }
//! ```
//!
//! # Feature flags
//!
#![doc = document_features::document_features!()]
#![forbid(unsafe_code)]
#![deny(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

// Said at build time rather than at start-up: the socket does not exist
// off Unix, and without `tls` there would be no transport at all.
#[cfg(all(feature = "socket", not(unix), not(feature = "tls")))]
compile_error!(
    "durable-sdk: the private socket (feature `socket`, on by default) is Unix-only; on Windows take `durable-sdk = { default-features = false, features = [\"tls\"] }` and serve over HTTPS (`Transport::https`)"
);

#[cfg(any(all(feature = "socket", unix), feature = "tls"))]
mod collie;
mod error;
#[cfg(feature = "postgres")]
mod pg_receipts;
#[cfg(feature = "postgres")]
mod pg_tls;
#[cfg(any(all(feature = "socket", unix), feature = "tls"))]
mod serving;
#[cfg(feature = "sqlite-receipts")]
mod sqlite_receipts;
#[cfg(feature = "sqlite-receipts")]
mod sqlite_witness;
#[cfg(any(all(feature = "socket", unix), feature = "tls"))]
mod warn;

// The root: what recipes type.
#[cfg(any(all(feature = "socket", unix), feature = "tls"))]
#[cfg_attr(docsrs, doc(cfg(any(all(feature = "socket", unix), feature = "tls"))))]
pub use collie::{OpenOptions, create_core, open_collie};
pub use durable_runtime::Collie;
pub use durable_runtime::{
    ActionRequest, ApprovalOptions, CoreOptions, CoreOptionsBuilder, HandlerResult, Pane, PaneOptions,
    Refusal, Tab, Turn, Workspace, require_approval,
};
pub use durable_types::{Answer, AskOption, AskSpec, Cap, Caps, Item, ask_id_for};
pub use error::Error;
/// JSON values, for `require_approval`'s arguments and answers' values.
#[doc(no_inline)]
pub use serde_json::{Value, json};
#[cfg(any(all(feature = "socket", unix), feature = "tls"))]
#[cfg_attr(docsrs, doc(cfg(any(all(feature = "socket", unix), feature = "tls"))))]
pub use serving::{Limits, Transport};

/// The wire's types and rules: items, events, layout views, ids, cursors,
/// times, the hello exchange, the phone's write bodies, error codes and the
/// contract's constants.
pub mod types {
    pub use durable_runtime::{HELD_ANSWER_BYTES, user_item_id};
    pub use durable_types::constants::*;
    pub use durable_types::text;
    pub use durable_types::{
        ALL_CAPS, ActionView, Badge, BadgeTone, CAP_NAMES, CapsView, CloseBody, ClosedView, CollieInfo,
        Cursor, ErrorBody, ErrorCode, Event, EventBody, EventsPage, HelloPostResponse, HelloRequest,
        HelloResponse, Id, ItemBody, NoticeTone, PaneSnapshot, PaneState, PaneView, PlainBody, RenameBody,
        ReopenBody, RuleError, RuleKind, ScopeId, SdkInfo, SendBody, StarterBody, StarterView, StateResponse,
        SteerBody, TabView, Target, Timestamp, ToolStatus, WireRange, WorkspaceView, WriteBody,
        WriteResponse, check_badge, check_cursor, check_href, check_id, check_lang, check_progress,
        check_scope_id, decode_path_segment, tab_wire_id,
    };
}

/// Asks beyond the root's [`AskSpec`]: the handle a raised
/// ask gives, approvals, how an ask closes, and the ask's wire types and
/// rules (its id, hash and summary).
pub mod asks {
    pub use durable_runtime::{
        Approval, ApprovalFuture, AskClosed, AskHandle, Decided, KeptAsk, approval_spec,
    };
    pub use durable_types::{
        AGENT_DATA_MAX, ASK_HASH_EXCLUDED, AnswerBody, AnswerRequest, Ask, AskKind, DecidedBy, Expiry,
        FieldType, FormField, OptionStyle, Outcome, Push, SelectOption, ToolInfo, arguments_view, ask_hash,
        ask_hash_input, call_summary, canonical_json, is_hash, is_hash_any_case,
    };
}

/// The handler traits — for a type that handles a pane's conversation,
/// buttons or the layout hooks (a closure does too) — and what the phone's
/// writes carry to them.
pub mod handlers {
    pub use durable_runtime::{
        AbortController, AbortSignal, ActionHandler, ChatHandler, CloseRequest, Hooks, RenameRequest, Reopen,
        ReopenRequest, SendRequest, Started, StarterRequest, SteerRequest, StopRequest,
    };
}

/// History: the provider an agent gives [`Collie::history`],
/// and the rows and pages it answers with.
pub mod history {
    pub use durable_runtime::{HistoryError, HistoryProvider, ItemsPage, RowsPage};
    pub use durable_types::{ConversationPage, ConversationState, HistoryPage, HistoryRow};
}

/// Receipt stores: what keeps the phone's acknowledged writes, so that a
/// replay after a restart returns the first answer (§9). The default is in
/// memory; `SqliteReceiptStore` (feature `sqlite-receipts`) keeps them in a
/// file, `PgReceiptStore` (feature `postgres`) in PostgreSQL.
pub mod stores {
    pub use durable_runtime::{
        ConversationOp, KEPT_CONVERSATIONS, KEPT_ITEMS_PER_CONVERSATION, KeptAskRecord, KeptConversation,
        KeptConversationRow, Lookup, MemoryReceiptStore, PendingSend, Receipt, ReceiptStore, RowPlace,
        SendState, StoreError,
    };

    #[cfg(feature = "postgres")]
    #[cfg_attr(docsrs, doc(cfg(feature = "postgres")))]
    pub use crate::pg_receipts::{
        PG_SCHEMA_VERSION, PgReceiptOptions, PgReceiptOptionsBuilder, PgReceiptStore,
    };
    #[cfg(feature = "postgres")]
    #[cfg_attr(docsrs, doc(cfg(feature = "postgres")))]
    pub use crate::pg_tls::PgSslMode;
    #[cfg(feature = "sqlite-receipts")]
    #[cfg_attr(docsrs, doc(cfg(feature = "sqlite-receipts")))]
    pub use crate::sqlite_receipts::{SQLITE_SCHEMA_VERSION, SqliteReceiptStore};
}

/// What a [`Transport`] is made of, beyond its own
/// methods: the socket's caller check and path, the transports' errors.
/// (The token variables are [`types::TOKEN_ENV`]
/// and [`types::TOKEN_NEXT_ENV`].)
pub mod transport {
    #[cfg(all(feature = "socket", unix))]
    #[cfg_attr(docsrs, doc(cfg(all(feature = "socket", unix))))]
    pub use crate::serving::socket_path_for;
    #[cfg(all(feature = "socket", unix))]
    #[cfg_attr(docsrs, doc(cfg(all(feature = "socket", unix))))]
    pub use durable_socket::{CallerCheck, PrivacyRule, SOCKET_ENV, SocketError};
    #[cfg(feature = "tls")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tls")))]
    pub use durable_tls::TlsError;
}

/// What drives a [`Collie`]: its [`Driver`](driver::Driver) (requests in,
/// deadlines and jobs out), the request and response values, clocks. For
/// tests that play Collie without a socket, and for custom transports
/// ([`Serve`](driver::Serve), [`Served`](driver::Served));
/// [`Collie::driver`] hands out an agent's driver.
pub mod driver {
    pub use durable_runtime::{
        CallerCheckMode, Clock, DEFAULT_SHUTDOWN_GRACE, Driver, Job, ManualClock, Serve, Served, WarnSink,
    };
    pub use durable_types::exchange;
}

/// Pi's session files (JSONL, version 3) as conversations: their items for
/// a pane, a follower for a file Pi appends to, and a history provider over
/// a sessions folder.
#[cfg(feature = "pi")]
#[cfg_attr(docsrs, doc(cfg(feature = "pi")))]
pub mod pi {
    pub use durable_pi::durable::RESET;
    pub use durable_pi::follow::MAX_LINE;
    pub use durable_pi::items::{BRANCH_SUMMARY_PREFIX, COMPACTION_PREFIX, FAILED, STOPPED};
    pub use durable_pi::live::{
        CardFn, DEFAULT_DENIED_REASON, DEFAULT_UNANSWERED_REASON, GATE_EXTENSION, PiOptionsBuilder,
        close_kept_card,
    };
    pub use durable_pi::session::SESSION_VERSION;
    pub use durable_pi::{
        Block, Conversation, ConversationInfo, ConversationStore, DurableFolder, Entry, EntryKind, Error,
        Follower, GateOptions, Header, Line, Message, PaneView, PiCommand, PiConversation, PiHistory,
        PiOptions, Progress, RELIST_AFTER, Session, SessionFolder, SessionSummary, StopReason, item_count,
        item_id, items_since, pane_view,
    };
}

#[doc = include_str!("../docs/wire.md")]
pub mod wire {}

// The README's example is compiled as a doctest, so the registry page shows
// code that builds.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

/// Any ACP (Agent Client Protocol) agent as conversations: one agent
/// process per live conversation behind its pane, its permission requests
/// as cards, its sessions as history (the `durable-acp` crate; Rust 1.88).
#[cfg(feature = "acp")]
#[cfg_attr(docsrs, doc(cfg(feature = "acp")))]
pub use durable_acp as acp;
