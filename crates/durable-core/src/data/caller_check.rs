//! What `GET /hello` says of who may write (§1.2).

/// What `GET /hello` says of the caller check, set by the transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CallerCheckMode {
    /// Socket, and the platform tells the peer: writes from the agent and
    /// its descendants are refused.
    On,
    /// Socket, and the program turned the check off.
    Off,
    /// Socket, and the platform cannot tell the peer.
    Unavailable,
    /// HTTPS: the bearer token is the check.
    Token,
}

impl CallerCheckMode {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            CallerCheckMode::On => "on",
            CallerCheckMode::Off => "off",
            CallerCheckMode::Unavailable => "unavailable",
            CallerCheckMode::Token => "token",
        }
    }
}
