//! The durable agent's HTTPS server with bearer tokens: the second way Collie
//! reaches a durable agent (contract §1.2) — the only one on Windows, and the
//! way for an agent deployed on a server.
//!
//! [`serve`] takes a [`Driver`] and [`TlsOptions`] and serves
//! the core over TLS (rustls with the `ring` provider, ALPN `http/1.1`):
//!
//! - **Certificate**: a chain and key from PEM files
//!   ([`cert_pem_files`](TlsOptionsBuilder::cert_pem_files)), or, for
//!   development, a self-signed certificate generated at start
//!   ([`self_signed`](TlsOptionsBuilder::self_signed)) whose SHA-256
//!   fingerprint is written through the core's warn sink and given by
//!   [`TlsServer::fingerprint`].
//! - **Tokens**: every request, `GET /hello` included, must carry
//!   `Authorization: Bearer <token>`; anything else is answered
//!   `401 token-refused` and nothing more, and the core never sees it. The
//!   token comes from the options, else from `COLLIE_TOKEN`; during a
//!   rotation a second one (the `next_token` option, or `COLLIE_TOKEN_NEXT`
//!   when set) is accepted too, so neither side is locked out. Both are read
//!   once, when the options are built. A token is at least
//!   [`TOKEN_MIN`](durable_types::TOKEN_MIN) (32) bytes of printable ASCII —
//!   `openssl rand -hex 32` makes one — or start-up fails naming the variable.
//!   The comparison is constant-time ([`subtle`] over SHA-256 digests), and a
//!   token never appears in a log line, an error, a `Debug` print or a panic.
//!   `GET /hello` says `"callerCheck": "token"`.
//! - **Plain HTTP** ([`plain_http`](TlsOptionsBuilder::plain_http)) is served
//!   only on `127.0.0.1` or `localhost` with an explicit port, for an agent on
//!   the same machine as Collie; any other plain-HTTP address is refused
//!   ([`TlsError::PlainHttpNotLoopback`]), since the token would cross the
//!   network unencrypted. The token is still required.
//! - **Allow always**: over HTTPS the token is the only barrier — anyone who
//!   holds it can read every conversation and answer every card — so an agent
//!   served this way offers only Allow and Deny, never a permanent permission.
//!   [`serve`] therefore turns allow-always off on the core it serves,
//!   unless the options say
//!   [`allow_always(true)`](TlsOptionsBuilder::allow_always).
//! - Each connection's TLS handshake runs on its own task, within a timeout
//!   ([`handshake_timeout`](TlsOptionsBuilder::handshake_timeout), 10 s), so
//!   a slow client never holds up the others.
//! - **Connections** are bounded by time and by number, never by a client's
//!   good will: a request refused for its token is answered with
//!   `Connection: close` and the connection closes; headers must be whole
//!   within the header-read timeout of the [`Limits`]
//!   (30 s, also the idle keep-alive limit), a body within its body-read
//!   timeout (30 s); an answer the client stops reading is dropped after its
//!   write timeout (30 s) without progress; and at most its
//!   `max_connections` (64) are held,
//!   a connection that has shown the token keeping its place under any
//!   flood.
//!
//! The crate has no Unix-only dependency: an agent on Windows uses
//! `durable-core` (the types) and `durable-tls` alone, which re-exports the
//! agent's handle and options (`examples/core_agent.rs`; the Windows check
//! builds it).
//!
//! # Example
//!
//! ```no_run
//! use durable_tls::{CoreOptions, SystemClock, TlsOptions, create_core, random_epoch, stderr_warn};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let collie = create_core(
//!     CoreOptions::builder()
//!         .host_name("desk")
//!         .clock(SystemClock)
//!         .epoch(random_epoch())
//!         .warn(stderr_warn())
//!         .build()?,
//! );
//! // The token from COLLIE_TOKEN (and COLLIE_TOKEN_NEXT during a rotation).
//! let options = TlsOptions::builder()
//!     .listen("0.0.0.0:8443")
//!     .cert_pem_files("/etc/desk/cert.pem", "/etc/desk/key.pem")
//!     .build()?;
//! collie.serve(options).await?; // or `serve(collie.driver(), options)`, for a server of your own to close
//! println!("listening {}", collie.address());
//! collie.ready();
//! // … until the agent stops:
//! collie.close().await;
//! # Ok(())
//! # }
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod cert;
mod error;
mod options;
mod server;
mod token;

pub use durable_http::Limits;
/// What an agent built without the SDK needs around this server — its
/// handle and options, the system clock, a fresh epoch, warn lines on
/// standard error — so that it depends on `durable-core` (the types) and
/// this crate alone: an agent on Windows, where HTTPS is the only
/// transport (`examples/core_agent.rs`).
pub use durable_http::{SystemClock, random_epoch, stderr_warn};
#[doc(no_inline)]
pub use durable_runtime::{Collie, CoreOptions, CoreOptionsBuilder, Driver, Turn, create_core};
pub use error::TlsError;
pub use options::{TlsOptions, TlsOptionsBuilder};
pub use server::{TlsServer, serve};
pub use token::{TOKEN_ENV, TOKEN_NEXT_ENV};
