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
//! # Entry points
//! - [`open_collie`] (feature `socket`, on by default; Linux and macOS): the
//!   whole agent in one call.
//! - [`create_core`] and a server of your choice: the transport-free core
//!   (`durable-core`) is re-exported here; serve it on a socket with
//!   `durable-socket` or behind TLS with a token with `durable-tls` (the
//!   only way on Windows).
//! - The rules the SDK applies, for programs that want them directly:
//!   [`ask_id_for`], [`call_summary`], [`arguments_view`], [`require_approval`],
//!   the ID and cursor rules ([`Id`], [`Cursor`]) and the constants
//!   ([`RECEIPTS_PER_GROUP`], [`TAIL_LIMIT`], …).
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
//! environment (`Command::env_remove("COLLIE_TOKEN")`).
#![forbid(unsafe_code)]
#![deny(missing_docs)]

#[cfg(all(feature = "socket", unix))]
mod open;
#[cfg(all(feature = "socket", not(unix)))]
mod open_unsupported;
#[cfg(feature = "sqlite-receipts")]
mod sqlite_receipts;

#[cfg(all(feature = "socket", unix))]
pub use open::{Collie, OpenError, OpenOptions, OpenOptionsBuilder, open_collie, socket_path_for};
#[cfg(all(feature = "socket", not(unix)))]
pub use open_unsupported::{OpenError, OpenOptions, open_collie};

#[cfg(feature = "sqlite-receipts")]
pub use sqlite_receipts::SqliteReceiptStore;

/// The HTTPS server with bearer tokens: `tls::serve(core, TlsOptions)`.
#[cfg(feature = "tls")]
pub use durable_tls as tls;

#[cfg(all(feature = "socket", unix))]
pub use durable_socket::{CallerCheck, SocketError, SocketOptions, SocketServer};

pub use durable_core::{
    AbortController, AbortSignal, ActionRequest, Approval, ApprovalFuture, ApprovalOptions, AskClosed,
    AskHandle, CallerCheckMode, Clock, CloseRequest, Core, CoreOptions, CoreOptionsBuilder, Decided, Handled,
    HistoryError, HistoryProvider, Hooks, ItemsPage, Lookup, ManualClock, MemoryReceiptStore, Pane,
    PaneHandlers, PaneOptions, Receipt, ReceiptStore, RenameRequest, ReopenRequest, RowsPage, SendRequest,
    StarterRequest, SteerRequest, StopRequest, StoreError, Tab, Turn, WarnSink, Workspace, approval_spec,
    async_trait, create_core, require_approval, user_item_id,
};

/// What [`create_core`] needs from the system, for a core served with
/// `tls::serve` or a socket server of your own: the clock, a fresh epoch,
/// and the default warn sink (standard error).
#[cfg(any(feature = "socket", feature = "tls"))]
pub use durable_http::{SystemClock, random_epoch, stderr_warn};
pub use durable_types::*;
