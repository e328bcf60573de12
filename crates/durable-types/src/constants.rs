//! The limits and constants of the contract (§11), each with one home.

use std::time::Duration;

/// The lowest wire version this SDK speaks.
pub const WIRE_MIN: u32 = 1;
/// The highest wire version this SDK speaks.
pub const WIRE_MAX: u32 = 1;
/// The SDK's name in `GET /hello`.
pub const SDK_NAME: &str = "durable-sdk";
/// The SDK's version in `GET /hello`.
pub const SDK_VERSION: &str = env!("CARGO_PKG_VERSION");
/// Receipts the default store keeps per group.
pub const RECEIPTS_PER_GROUP: usize = 1000;
/// How many evicted ids the default store remembers per group, as a multiple
/// of [`RECEIPTS_PER_GROUP`].
pub const EVICTED_MEMORY_FACTOR: usize = 10;
/// Raw events each pane keeps for Collie's event reads (`tail_limit`).
pub const TAIL_LIMIT: usize = 500;
/// Items at most in a pane's view (snapshot, history page).
pub const VIEW_LIMIT: usize = 2000;
/// Sequence numbers the state poll remembers for `since` answers.
pub const STATE_SEQ_MEMORY: u64 = 10_000;
/// Bytes in a title.
pub const TITLE_MAX: usize = 256;
/// Bytes in a harness name.
pub const HARNESS_MAX: usize = 64;
/// Bytes in an id.
pub const ID_MAX: usize = 128;
/// Bytes in a history cursor.
pub const CURSOR_MAX: usize = 512;
/// Bytes in an ask's `reason`.
pub const REASON_MAX: usize = 2048;
/// Characters in a push title.
pub const PUSH_TITLE_MAX: usize = 60;
/// Characters in a push line.
pub const PUSH_LINE_MAX: usize = 120;
/// Bytes in a Unix socket path.
pub const SOCKET_PATH_MAX: usize = 103;
/// Bytes in a bearer token, at least.
pub const TOKEN_MIN: usize = 32;
/// The environment variable holding the token the TLS server reads (§1.2).
pub const TOKEN_ENV: &str = "COLLIE_TOKEN";
/// The environment variable holding the second token accepted during a
/// rotation, when set (§1.2).
pub const TOKEN_NEXT_ENV: &str = "COLLIE_TOKEN_NEXT";
/// Bytes in a request body.
pub const BODY_MAX: usize = 1024 * 1024;
/// The shortest interval between two rewrites of a partial item.
pub const PARTIAL_MIN_INTERVAL: Duration = Duration::from_millis(250);
/// How long an answer to an unknown ask is held, in milliseconds.
pub const HOLD_MS: u64 = 600_000;
/// How long a write waits for its pane's lock before `409 busy`, in ms.
pub const BUSY_MS: u64 = 5_000;
/// Bytes of text the phone may send (send, steer, starter).
pub const PHONE_TEXT_MAX: usize = 64 * 1024;
/// Items in the first history page when `limit` is omitted.
pub const HISTORY_LIMIT_DEFAULT: usize = 50;
/// The largest `limit` of a history read.
pub const HISTORY_LIMIT_MAX: usize = 200;

/// Item text limits in bytes, per kind (contract §6.1).
pub mod item_limits {
    /// `user` text.
    pub const USER_TEXT: usize = 64 * 1024;
    /// `reply` and `markdown` text.
    pub const REPLY_TEXT: usize = 256 * 1024;
    /// `thinking` text.
    pub const THINKING_TEXT: usize = 64 * 1024;
    /// `notice` text.
    pub const NOTICE_TEXT: usize = 2 * 1024;
    /// `code` text.
    pub const CODE_TEXT: usize = 256 * 1024;
    /// `tool` name.
    pub const TOOL_NAME: usize = 64;
    /// `tool` call line.
    pub const TOOL_CALL: usize = 512;
    /// `tool` output.
    pub const TOOL_OUTPUT: usize = 64 * 1024;
    /// `link` text.
    pub const LINK_TEXT: usize = 1024;
    /// `link` href.
    pub const LINK_HREF: usize = 2048;
    /// `progress` label.
    pub const PROGRESS_LABEL: usize = 256;
    /// `badge` text.
    pub const BADGE_TEXT: usize = 24;
}

/// Ask limits (contract §7).
pub mod ask_limits {
    /// Options of a `choice`.
    pub const CHOICE_OPTIONS: usize = 8;
    /// Options of a `multi`.
    pub const MULTI_OPTIONS: usize = 16;
    /// Fields of a `form`.
    pub const FORM_FIELDS: usize = 16;
    /// Bytes in an option label.
    pub const OPTION_LABEL: usize = 64;
    /// Bytes in a field label.
    pub const FIELD_LABEL: usize = 256;
    /// The largest `maxBytes` of a `text` ask.
    pub const TEXT_MAX_BYTES: usize = 64 * 1024;
    /// Bytes in a `text` ask's placeholder.
    pub const PLACEHOLDER: usize = 256;
}

/// The action icon names Collie draws: `play`, `pause`, `check`, `x`,
/// `refresh`, `archive`, `flag`, `star`, `send`, `note`, `search`, `more`.
/// Any other name is sent but draws no icon.
pub const ICON_NAMES: [&str; 12] =
    ["play", "pause", "check", "x", "refresh", "archive", "flag", "star", "send", "note", "search", "more"];
