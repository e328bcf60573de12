//! Why the TLS server could not start.

use std::io;
use std::path::PathBuf;

use durable_types::TOKEN_MIN;

/// Why the HTTPS server could not start: its options (address,
/// certificate, token) or the listening itself. Every message names the
/// rule that was broken.
///
/// No variant holds a token: a token error names where the token came from
/// (`COLLIE_TOKEN`, `COLLIE_TOKEN_NEXT`, or the `token` / `next_token`
/// option) and never its value.
#[derive(thiserror::Error)]
#[non_exhaustive]
pub enum TlsError {
    /// No listen address was given.
    #[error("no listen address: set it with TlsOptions::builder().listen(\"127.0.0.1:8443\")")]
    NoListen,
    /// The listen address is not `HOST:PORT`.
    #[error("listen address rule: {addr:?} {reason}")]
    BadListen {
        /// The address given.
        addr: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// None of `cert_pem_files`, `self_signed` or `plain_http` was chosen.
    #[error(
        "no certificate: choose cert_pem_files(cert, key), self_signed() (development) or plain_http() (loopback only)"
    )]
    NoCertificate,
    /// More than one of `cert_pem_files`, `self_signed` and `plain_http` was chosen.
    #[error("choose only one of cert_pem_files, self_signed and plain_http")]
    ConflictingModes,
    /// Plain HTTP was asked for on an address other than `127.0.0.1` or
    /// `localhost` (contract §1.2: the token would cross the network
    /// unencrypted).
    #[error(
        "plain HTTP rule: plain http:// is served only on 127.0.0.1 or localhost, not on {addr:?}; serve TLS there (cert_pem_files or self_signed)"
    )]
    PlainHttpNotLoopback {
        /// The listen address given.
        addr: String,
    },
    /// Plain HTTP was asked for without an explicit port (port 0).
    #[error(
        "plain HTTP rule: plain http:// needs an explicit port (127.0.0.1:<port> or localhost:<port>), not {addr:?}"
    )]
    PlainHttpNeedsPort {
        /// The listen address given.
        addr: String,
    },
    /// No token: neither the options nor `COLLIE_TOKEN` give one.
    #[error(
        "no token: set COLLIE_TOKEN (at least {TOKEN_MIN} bytes, e.g. `openssl rand -hex 32`) or give one with the transport's `token` option"
    )]
    NoToken,
    /// A token is shorter than 32 bytes.
    #[error(
        "token rule: {which} is {len} bytes, at least {TOKEN_MIN} are required (e.g. `openssl rand -hex 32`)"
    )]
    TokenTooShort {
        /// Where the token came from: `COLLIE_TOKEN`, `COLLIE_TOKEN_NEXT`,
        /// `token` or `next_token`.
        which: &'static str,
        /// Its length in bytes.
        len: usize,
    },
    /// A token holds a byte that cannot be sent in an `Authorization`
    /// header as is (white space, a control character, non-ASCII).
    #[error("token rule: {which} must be printable ASCII without spaces")]
    TokenCharacters {
        /// Where the token came from.
        which: &'static str,
    },
    /// `next_token` was given without `token` (the second token of a
    /// rotation goes with an explicit first one; from the environment it is
    /// `COLLIE_TOKEN_NEXT`).
    #[error("next_token needs token: give both, or neither and set COLLIE_TOKEN (and COLLIE_TOKEN_NEXT)")]
    NextTokenWithoutToken,
    /// The certificate file could not be read or holds no certificate.
    #[error("certificate {path:?}: {reason}")]
    Cert {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        reason: String,
    },
    /// The private key file could not be read or holds no key.
    #[error("private key {path:?}: {reason}")]
    Key {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        reason: String,
    },
    /// rustls refused the certificate and key (for instance, the key does
    /// not match the certificate).
    #[error("TLS configuration: {reason}")]
    TlsConfig {
        /// What rustls said.
        reason: String,
    },
    /// The development certificate could not be generated.
    #[error("self-signed certificate: {reason}")]
    SelfSigned {
        /// What went wrong.
        reason: String,
    },
    /// The listen address could not be bound.
    #[error("could not listen on {addr:?}: {source}")]
    Bind {
        /// The listen address given.
        addr: String,
        /// The system's error.
        #[source]
        source: io::Error,
    },
}

/// The message, also for `Debug`: a `main` that returns this error prints it
/// with `Debug`, and the message names the rule (never the token).
impl std::fmt::Debug for TlsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TlsError: {self}")
    }
}
