//! No socket transport off Unix: `open_collie` says what to do instead.

/// Options of `open_collie` (nothing to set where there is no socket).
#[derive(Debug, Clone, Default)]
pub struct OpenOptions {}

/// Why `open_collie` could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OpenError {
    /// There is no private socket transport on this platform.
    #[error(
        "open_collie: a private socket needs Unix file ownership, which this platform lacks; serve the core behind TLS with a token instead (durable-tls)"
    )]
    Unsupported,
}

/// Always fails here: serve `create_core` behind TLS with a token instead.
pub async fn open_collie(_options: impl Into<OpenOptions>) -> Result<std::convert::Infallible, OpenError> {
    Err(OpenError::Unsupported)
}
