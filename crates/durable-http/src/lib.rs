//! The hyper/tokio glue that both durable servers share.
//!
//! The protocol lives in `durable-core`, served by `durable-runtime`; this
//! crate only carries requests to it and drives it. Both the private Unix
//! socket server (`durable-socket`) and the HTTPS server (`durable-tls`)
//! are built from these pieces:
//!
//! - [`SystemClock`], [`random_epoch`] and [`stderr_warn`]: what a server
//!   hands [`CoreOptions`](durable_runtime::CoreOptions) (the core reads no
//!   clock, no random source and writes nowhere by itself).
//! - [`to_core_request`] (and [`to_core_request_without_body`] for a
//!   bodiless request, [`read_of`] for a `GET` borrowed as the core's
//!   [`Read`](durable_types::exchange::Read)) and [`to_hyper_response`]: translation between
//!   hyper's messages and the core's plain [`Request`] / [`Response`], with
//!   the 1 MiB body limit ([`BODY_MAX`](durable_types::BODY_MAX)) enforced
//!   while the body streams in: past the limit reading stops and the core is
//!   handed [`Body::TooLarge`](durable_types::exchange::Body::TooLarge) (the
//!   core decides the `413`).
//! - [`CallerSource`]: who sent each request on a connection — a fixed
//!   [`Caller`] (the socket's peer) or a bearer-token check (HTTPS: an
//!   accepted token is [`Caller::Token`], anything else an immediate
//!   `401 token-refused`).
//! - [`serve_connection`]: HTTP/1.1 over any `AsyncRead + AsyncWrite`, with
//!   keep-alive, a header-read timeout and a body-read timeout
//!   ([`Limits`]: a client that stalls its body is cut off before the
//!   core sees the request), a write-progress timeout (a client that reads
//!   nothing is cut off), a close after every `401`, and graceful shutdown
//!   when a [`CancellationToken`] is cancelled, within a grace period; the
//!   core's work on each write runs on a [`TaskTracker`]'s task, so that a
//!   server can wait for it.
//! - [`spawn_driver`]: the loop that runs the core's jobs and fires its
//!   deadlines with tokio time.
//! - [`Server`] with a [`Listen`] source: an accept loop plus the driver,
//!   holding at most [`Limits::max_connections`] connections (a
//!   connection that has shown its token keeps its place; past the cap a new
//!   one displaces one that has not), closed with [`Server::close`] (stop
//!   accepting, let requests in flight
//!   and the core's work on them finish — at most
//!   [`Limits::shutdown_grace`], then drop what is left — and stop the
//!   driver).
//!
//! Each connection a [`Server`] takes is a `tracing` span (`connection`,
//! `DEBUG`: the [`Listen::transport`], the peer's address, the caller found),
//! the core's request spans inside it. A caller refused for its token is an
//! `INFO` event naming the check, never the token; what goes wrong on the
//! way is a `tracing` warning: a connection that failed (its handshake, its
//! reading), the core's task failing. The targets are the module paths
//! (`durable_http::…`). A failed accept is a warn line through the core's
//! sink.
//!
//! A server is then short: bind, implement [`Listen`] (accept, then find out
//! who the peer is or do the TLS handshake inside the returned [`Incoming`]
//! future, handed over as an [`Accepted`] with the peer's address), tell the
//! core its caller-check mode, and call [`Server::start`].
//!
//! `docs/reliability.md` ("Connections") in the SDK's source repository
//! (not shipped in this package) lists every limit, its default, why, and
//! the test that proves it.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod caller;
mod connection;
mod driver;
mod header_clock;
mod server;
mod slots;
mod system;
mod translate;
mod until;
mod write_timeout;

pub use caller::{CallerSource, TokenCheck, bearer_token, token_refused};
pub use connection::{Handler, Limits, serve_connection};
pub use driver::spawn_driver;
pub use server::{Accepted, Incoming, Listen, Server};
pub use system::{SystemClock, random_epoch, stderr_warn};
pub use translate::{
    DRAIN_MAX, read_body, read_of, to_core_request, to_core_request_without_body, to_hyper_response,
};

#[doc(no_inline)]
pub use durable_types::exchange::{Caller, Request, Response};
/// tokio-util's, re-exported: what [`serve_connection`] and
/// [`spawn_driver`] take to stop, without a dependency of the caller's own.
#[doc(no_inline)]
pub use tokio_util::{sync::CancellationToken, task::TaskTracker};
