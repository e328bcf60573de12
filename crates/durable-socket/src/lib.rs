//! The durable agent's private Unix socket server: the socket half of the
//! seed's `openCollie` (contract §1.1).
//!
//! [`serve`] takes a [`Core`](durable_core::Core) and [`SocketOptions`] and
//! serves the core on a Unix socket that only the current user can reach:
//!
//! - the path comes from the options, else `$COLLIE_DURABLE_SOCKET`, else
//!   start-up fails saying so; it is absolute and at most
//!   [`SOCKET_PATH_MAX`](durable_types::SOCKET_PATH_MAX) (103) bytes;
//! - the socket's folder is created with mode 0700 when missing, and the
//!   whole path is checked private — the folder owned by the user with mode
//!   0700, no component a symbolic link, no ancestor writable by group or
//!   others without the sticky bit; a path that is not is refused with
//!   [`SocketError::NotPrivate`], naming the component and the rule
//!   (Collie's `doctor` calls it `socket-not-private`);
//! - the socket file gets mode 0600; a socket left by a crash (nothing
//!   accepts on it) is replaced, a live one refused as already in use;
//! - on Linux each connection's peer is read (`SO_PEERCRED`): the agent's own
//!   process and the processes it launched are
//!   [`Caller::SelfOrDescendant`](durable_types::exchange::Caller) (the core
//!   refuses their writes), another user is `OtherUser` (refused outright);
//!   [`CallerCheck::Off`] turns this off. Other Unixes cannot tell the peer:
//!   one warn line at start-up says any process of the user can answer.
//!
//! [`SocketServer::close`] stops accepting, lets requests in flight finish
//! and removes the socket file; open asks stay open.
#![cfg(unix)]
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod error;
mod options;
mod path;
mod peer;
mod server;

pub use error::{PrivacyRule, SocketError};
pub use options::{CallerCheck, SocketOptions, SocketOptionsBuilder};
#[doc(hidden)]
pub use peer::{PeerCred, classify_peer};
pub use server::{SocketServer, serve};

/// The environment variable naming the socket path when the options do not.
pub const SOCKET_ENV: &str = "COLLIE_DURABLE_SOCKET";
