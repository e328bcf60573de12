//! Put a durable agent on its user's phone through Collie — approval cards
//! for risky tool calls, questions of four kinds, a live chat view of each
//! conversation, history, and the phone's actions — with no UI code in the
//! agent. The Rust form of the npm `@colliepwa/durable-sdk`.
//!
//! # Quick start
//!
//! ```no_run
//! use durable_sdk::{open_collie, socket_path_for, AskOption, AskSpec, Caps, Cap, OpenOptions, PaneOptions};
//!
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! // $COLLIE_DURABLE_SOCKET, else $XDG_RUNTIME_DIR/hello/app.sock, else /tmp/durable-<uid>/hello/app.sock
//! let socket = socket_path_for("hello");
//! let options = OpenOptions::builder().socket(socket).host_name("hello").caps(Caps::none().with(Cap::Asks));
//! let collie = open_collie(options).await?;
//! let pane = collie.workspace("hello", "Hello")?.tab("main", "Questions")?.pane("deploy", PaneOptions::new("Deploy").harness("hello"))?;
//! collie.ready();
//! println!("listening {}", collie.address());
//! let options = [AskOption::new("yes", "Yes"), AskOption::new("no", "No")];
//! let answer = pane.ask(AskSpec::choice("deploy-1", "Deploy to staging?", options).item_id("deploy-1"))?.await?;
//! println!("answer: {}", answer.option_id().unwrap_or("none"));
//! collie.close().await;
//! # Ok(()) }
//! ```
//!
//! [`open_collie`] creates the private socket (its path from the options or
//! `$COLLIE_DURABLE_SOCKET`, the variable Collie reads too), serves the core
//! on it, and returns the [`Collie`] handle that sets the layout the phone
//! shows. Then attach the agent on the Collie side:
//! `collie durable attach hello --socket <the path printed>`.
//!
//! # A chat agent
//!
//! A pane's conversation is a [`ChatHandler`]: the SDK runs one
//! [`Turn`] per send from the phone (queuing sends that arrive meanwhile),
//! hands it the phone's steers and stop, and sets the pane idle when the
//! turn returns. `examples/echo.rs` is the whole program:
//!
//! ```no_run
//! use durable_sdk::{ChatHandler, Turn};
//!
//! struct Echo;
//!
//! impl ChatHandler for Echo {
//!     async fn turn(&self, mut turn: Turn) {
//!         turn.partial("…");
//!         let steers = turn.take_steers();
//!         turn.reply(format!("You said: {} {}", turn.text(), steers.join(" ")));
//!     }
//! }
//! // pane.on_send(Echo)?;
//! ```
//!
//! # Entry points (the npm package's, in Rust)
//! - [`open_collie`] (feature `socket`, on by default; Linux and macOS): the
//!   whole agent in one call, on its private socket.
//! - [`create_core`] + [`serve`]: a core with options `open_collie` does not
//!   take (a persistent [`ReceiptStore`], `allow_always` off), served on the
//!   socket ([`socket::SocketOptions`]) or over HTTPS with a token
//!   ([`tls::TlsOptions`], feature `tls`; the only transport on Windows).
//!   Both give a [`Server`].
//! - [`types`]: every wire type and rule; [`core`]: the transport-free core
//!   (the npm `./core`); [`socket`], [`tls`]; `pi` (feature `pi`).
//! - The rules the SDK applies, for programs that want them directly:
//!   [`ask_id_for`], [`call_summary`], [`arguments_view`], [`require_approval`],
//!   the ID and cursor rules ([`Id`], [`Cursor`]) and the constants
//!   ([`RECEIPTS_PER_GROUP`], [`TAIL_LIMIT`], …).
//! - [`serde_json`], [`json!`] and [`Value`], for `require_approval`'s
//!   arguments, re-exported so that `durable_sdk` is the only dependency.
//!
//! What the SDK has to say goes to standard error (warn lines) and, for
//! programs with a `tracing` subscriber, to `tracing` (target `durable`):
//! warn lines, asks raised and decided, refused callers, server errors.
//!
//! The wire itself — every route, body and rule, both sides — is in the
//! repository's `docs/wire.md`.
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
//! environment (`Command::env_remove` of [`TOKEN_ENV`] and
//! [`TOKEN_NEXT_ENV`]; durable-pi does so for Pi). That is not enough
//! against a tool that means harm either: a process of the same user reads
//! the agent's own start-up environment in `/proc/<pid>/environ`. Such tools
//! need another user id, or a process namespace of their own.
#![forbid(unsafe_code)]
#![deny(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

#[cfg(all(feature = "socket", unix))]
mod open;
#[cfg(all(feature = "socket", not(unix)))]
mod open_unsupported;
#[cfg(feature = "postgres")]
mod pg_receipts;
#[cfg(any(feature = "socket", feature = "tls"))]
mod serve;
#[cfg(feature = "sqlite-receipts")]
mod sqlite_receipts;

#[cfg(all(feature = "socket", unix))]
#[cfg_attr(docsrs, doc(cfg(all(feature = "socket", unix))))]
pub use open::{Collie, OpenError, OpenOptions, OpenOptionsBuilder, open_collie, socket_path_for};
#[cfg(all(feature = "socket", not(unix)))]
pub use open_unsupported::{OpenError, OpenOptions, open_collie};

#[cfg(any(all(feature = "socket", unix), feature = "tls"))]
#[cfg_attr(docsrs, doc(cfg(any(feature = "socket", feature = "tls"))))]
pub use serve::serve;
#[cfg(any(feature = "socket", feature = "tls"))]
#[cfg_attr(docsrs, doc(cfg(any(feature = "socket", feature = "tls"))))]
pub use serve::{ServeError, Server, Transport, create_core, default_warn};

#[cfg(feature = "postgres")]
#[cfg_attr(docsrs, doc(cfg(feature = "postgres")))]
pub use pg_receipts::{PG_SCHEMA_VERSION, PgReceiptOptions, PgReceiptOptionsBuilder, PgReceiptStore};
#[cfg(feature = "sqlite-receipts")]
#[cfg_attr(docsrs, doc(cfg(feature = "sqlite-receipts")))]
pub use sqlite_receipts::SqliteReceiptStore;

/// Every wire type and rule (the npm package's `src/core/types.ts`).
pub mod types {
    #[doc(inline)]
    pub use durable_types::*;
}

/// The transport-free protocol core (the npm package's `./core`): request
/// value in, response value out; time injected; deadlines and jobs driven
/// by a server. [`crate::serve`] drives it for you.
pub mod core {
    #[doc(inline)]
    pub use durable_core::*;
}

/// The private Unix socket transport: path privacy, stale sockets, the
/// caller check. Serve a core on it with [`crate::serve`].
#[cfg(all(feature = "socket", unix))]
#[cfg_attr(docsrs, doc(cfg(all(feature = "socket", unix))))]
pub mod socket {
    #[doc(inline)]
    pub use durable_socket::{
        CallerCheck, PrivacyRule, SOCKET_ENV, SocketError, SocketOptions, SocketOptionsBuilder,
    };

    #[doc(inline)]
    pub use crate::open::socket_path_for;
}

/// The HTTPS transport with bearer tokens (rotation, constant-time
/// comparison, loopback-only plain HTTP, self-signed development
/// certificates). Serve a core on it with [`crate::serve`]:
///
/// ```no_run
/// use durable_sdk::tls::TlsOptions;
/// use durable_sdk::{CoreOptions, create_core, serve};
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// // Over HTTPS the token is the only barrier: Allow and Deny only.
/// let core = create_core(CoreOptions::builder().host_name("desk").allow_always(false))?;
/// // The token comes from COLLIE_TOKEN (and COLLIE_TOKEN_NEXT during a rotation).
/// let server = serve(&core, TlsOptions::builder().listen("127.0.0.1:8443").self_signed().build()?).await?;
/// println!("listening {} (fingerprint {:?})", server.address(), server.fingerprint());
/// core.ready();
/// # Ok(()) }
/// ```
#[cfg(feature = "tls")]
#[cfg_attr(docsrs, doc(cfg(feature = "tls")))]
pub mod tls {
    #[doc(inline)]
    pub use durable_tls::{TOKEN_ENV, TOKEN_NEXT_ENV, TlsError, TlsOptions, TlsOptionsBuilder};
}

/// Pi's session files (JSONL, version 3) as conversations: their items for
/// a pane, a follower for a file Pi appends to, and a history provider over
/// a sessions folder.
#[cfg(feature = "pi")]
#[cfg_attr(docsrs, doc(cfg(feature = "pi")))]
pub mod pi {
    #[doc(inline)]
    pub use durable_pi::*;
}

pub use durable_core::{
    AbortController, AbortSignal, ActionHandler, ActionRequest, Approval, ApprovalFuture, ApprovalOptions,
    AskClosed, AskHandle, CallerCheckMode, ChatHandler, Clock, CloseRequest, Core, CoreOptions,
    CoreOptionsBuilder, Decided, HELD_ANSWER_BYTES, HandlerResult, HistoryError, HistoryProvider, Hooks,
    ItemsPage, Lookup, ManualClock, MemoryReceiptStore, Pane, PaneOptions, PendingSend, Receipt,
    ReceiptStore, Refusal, RenameRequest, Reopen, ReopenRequest, RowsPage, SendRequest, SendState, Started,
    StarterRequest, SteerRequest, StopRequest, StoreError, Tab, Turn, WarnSink, Workspace, approval_spec,
    require_approval, user_item_id,
};
pub use durable_types::*;

/// The README's code, compiled as doctests so that it cannot drift.
#[cfg(all(doctest, feature = "socket", unix))]
#[doc = include_str!("../../../README.md")]
struct ReadmeDoctests;

/// JSON, for `require_approval`'s arguments and `Answer` values: the
/// `serde_json` the SDK is built with.
pub use serde_json;
pub use serde_json::{Value, json};
