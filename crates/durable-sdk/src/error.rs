//! [`Error`]: why the SDK could not start or serve.

use std::fmt;

use durable_types::RuleError;

/// Why [`open_collie`](crate::open_collie), [`create_core`](crate::create_core)
/// or [`Collie::serve`](crate::Collie::serve) failed. Each message names the
/// rule broken and the value (never a token).
#[derive(thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An option or a layout call breaks a rule.
    #[error(transparent)]
    Rule(#[from] RuleError),
    /// The socket could not be served (path, privacy, in use, IO).
    #[cfg(all(feature = "socket", unix))]
    #[error(transparent)]
    Socket(#[from] durable_socket::SocketError),
    /// HTTPS could not be served (certificate, token, address).
    #[cfg(feature = "tls")]
    #[error(transparent)]
    Tls(#[from] durable_tls::TlsError),
    /// A transport option was given to the transport it does not belong to
    /// (a caller check on HTTPS, a certificate on the socket).
    #[error("transport rule: {option} is not an option of {transport}")]
    Misapplied {
        /// The option.
        option: &'static str,
        /// The transport it was given to.
        transport: &'static str,
    },
    /// The receipt store failed (reading the asks the last run kept).
    #[error("receipt store: {0}")]
    Store(#[from] durable_runtime::StoreError),
    /// [`open_collie`](crate::open_collie) was given no transport where the
    /// private socket does not exist (Windows, or the `socket` feature off).
    #[error(
        "transport rule: no transport given, and the private socket needs Linux or macOS and the `socket` feature: give OpenOptions::transport(Transport::https(..))"
    )]
    NoTransport,
}

impl Error {
    /// Whether another process already serves the socket path.
    pub fn is_in_use(&self) -> bool {
        #[cfg(all(feature = "socket", unix))]
        if let Error::Socket(durable_socket::SocketError::InUse { .. }) = self {
            return true;
        }
        false
    }
}

/// The message, also for `Debug`: a `main` that returns this error prints it
/// with `Debug`, and the message names the rule (and the folder, in octal).
impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "durable_sdk::Error: {self}")
    }
}

/// `?` on the SDK's errors inside a handler refuses the write with the
/// error's words (`409 refused`, nothing stored).
impl From<Error> for durable_runtime::Refusal {
    fn from(e: Error) -> Self {
        durable_runtime::Refusal::new(e.to_string())
    }
}
