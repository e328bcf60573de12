//! The durable agent's private Unix socket server: the socket half of the
//! seed's `openCollie` (contract §1.1).
//!
//! [`serve`] takes a [`Driver`](durable_runtime::Driver) and [`SocketOptions`] and
//! serves the core on a Unix socket that only the current user can reach:
//!
//! - the path comes from the options, else `$COLLIE_DURABLE_SOCKET`, else
//!   start-up fails saying so; it is absolute and at most
//!   [`SOCKET_PATH_MAX`](durable_types::SOCKET_PATH_MAX) (103) bytes;
//! - the socket's folder is created with mode 0700 when missing, and the
//!   whole path checked private — the folder owned by the user with mode
//!   0700, no component a symbolic link, every ancestor owned by root or the
//!   user and not writable by group or others without the sticky bit; a
//!   path that is not is refused with [`SocketError::NotPrivate`], naming
//!   the component and the rule (Collie's `doctor` calls it
//!   `socket-not-private`); a path holding a control character, or ending
//!   in `/`, is refused as a path rule;
//! - the socket file gets mode 0600; a socket left by a crash (nothing
//!   accepts on it) is replaced, a live one refused as already in use; the
//!   agent holds `flock` on `<socket>.lock` beside it while it serves, so
//!   that two agents starting at once on one stale socket cannot both take
//!   it (the second is refused as already in use);
//! - on Linux each connection's peer is read (`SO_PEERCRED`): the agent's own
//!   process and the processes it launched are
//!   [`Caller::SelfOrDescendant`](durable_types::exchange::Caller) (the core
//!   refuses their writes), another user is `OtherUser` (refused outright);
//!   [`CallerCheck::Off`] turns this off. Other Unixes cannot tell the peer:
//!   one warn line at start-up says any process of the user can answer.
//!
//! # What the caller check is, and is not
//!
//! The check guards against *accidents* — the agent's own tools answering
//! its asks because they happen to find the socket — not against a process
//! that sets out to get around it. It reads the peer's parent chain in
//! `/proc`, and a process leaves the agent's tree whenever its parent exits:
//! it is then re-parented to init (or to a child subreaper) and its chain no
//! longer reaches the agent. So a grandchild whose parent has exited, and
//! whatever a tool starts with `setsid -f`, `nohup … &` (once the shell has
//! exited), `systemd-run --user`, or inside a tmux or screen server, is
//! taken for any other process of the user, and its writes are served.
//!
//! Where the check cannot tell, it fails closed: a peer whose `/proc` entry
//! is gone or unreadable (it connected, passed the connection on and exited),
//! a chain with a link gone, a pid reused since the connection was accepted
//! (with `SO_PEERPIDFD`, Linux 6.5 and later: a peer that exited before the
//! check ended),
//! or a peer in a pid namespace the agent cannot see is treated as the
//! agent's own — its writes refused, its reads served. Collie never exits
//! while its connection is open, so Collie itself is always told apart.
//!
//! To keep the agent's tools from answering its asks on purpose, run them in
//! a sandbox that cannot reach the socket (a separate user, a mount
//! namespace without the socket's folder, a container) — on Linux too.
//!
//! # Connections
//!
//! The caller check limits who connects; the limits of `durable-http` hold
//! all the same: at most
//! [`max_connections`](Limits::max_connections) (64) at once,
//! a connection that has made a request keeping its place; headers whole
//! within [`header_read_timeout`](Limits::header_read_timeout)
//! (30 s, also the idle limit), a body within
//! [`body_read_timeout`](Limits::body_read_timeout) (30 s),
//! and an answer the client stops reading dropped after
//! [`write_timeout`](Limits::write_timeout) (30 s) without
//! progress.
//!
//! [`SocketServer::close`] stops accepting, lets requests in flight and the
//! core's work on them finish (within the shutdown grace, 10 s by default),
//! and removes the socket file; open asks stay open.
#![cfg(unix)]
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod error;
mod options;
mod path;
mod peer;
mod server;

pub use durable_http::Limits;
pub use error::{PrivacyRule, SocketError};
pub use options::{CallerCheck, SocketOptions, SocketOptionsBuilder};
#[doc(hidden)]
pub use peer::{PeerCred, classify_peer};
pub use server::{SocketServer, serve};

/// The environment variable naming the socket path when the options do not.
pub const SOCKET_ENV: &str = "COLLIE_DURABLE_SOCKET";
