//! Pi on the phone through Collie: a live Pi behind a pane, a risky tool
//! call as an approval card, Pi's session files read and followed, a
//! sessions folder as history.
//!
//! [Pi](https://www.npmjs.com/package/@earendil-works/pi-coding-agent) (the
//! coding agent, 1.6) keeps each session in one JSONL file (format version
//! 3). This crate reads those files; it never writes them (Pi owns them).
//! Live conversations run Pi itself as a child process in RPC mode; the
//! program that starts Pi is the user's to give ([`PiCommand`]). What Pi's
//! tools start never outlives the agent, whatever signal ends it (a watcher
//! beside each Pi, and a sweep at start: see [`live`]).
//!
//! | part | module | what |
//! |---|---|---|
//! | the format | [`session`] | [`Session`]: the header, every entry type, the tree through `parentId`, the branch shown |
//! | following a file | [`follow`] | [`Follower`]: reads what Pi appends, holding a torn last line back until its newline |
//! | conversation → pane | [`items`] | [`pane_view`], [`items_since`]: entries as items with stable ids, the name as the title |
//! | a sessions folder | [`folder`] | [`SessionFolder`]: the sessions listed newest first |
//! | the store trait | [`store`] | [`ConversationStore`]: what the history reads; a sessions folder is one, a Pi Durable reader could be another |
//! | store → history | [`history`] | [`PiHistory`]: a [`HistoryProvider`](durable_runtime::HistoryProvider) over a store |
//! | Pi Durable's store | [`durable`] | [`DurableFolder`]: the JSONL storage (format 1) read as it grows, a second [`ConversationStore`] |
//! | a live Pi | [`live`] | [`PiConversation`]: `pi --mode rpc` behind a pane (send, steer, stop, rename), streaming as partial items, the gate that turns a risky call into a card ([`GateOptions`]) |
//!
//! What Pi writes, as read here:
//! - The file `<session-dir>/<ISO time with - for : and .>_<session id>.jsonl`
//!   appears at the first user message, with the entries Pi held until then
//!   (model and thinking level, the system prompt, the user message; a
//!   `--name` given at start comes first, as a root `session_info`). Then
//!   one line is appended per finished message or event; streaming deltas
//!   are never written.
//! - Entry ids are 8 hex characters (a UUID on a collision), unique in a file
//!   but not across files: a fork (`/fork`, RPC `fork`) is a new file that
//!   copies the entries before the fork point with their ids, and whose
//!   header names the parent file (`parentSession`, an absolute path).
//! - A branch inside one file comes from going back to an earlier entry
//!   (`/tree`): nothing is written until the next entry, whose parent is
//!   then that earlier entry (with a `branch_summary` first when Pi
//!   summarizes the path left). `label` and `session_info` entries join the
//!   chain like any entry, so the leaf is always the file's last entry.
//! - Message times: an entry's `timestamp` is an ISO string; a message's own
//!   `timestamp` is milliseconds. A stopped reply is saved with the text it
//!   had (`stopReason: "aborted"`).
//! - When Pi opens a file whose last line has no newline, it appends one, so
//!   a torn line ends up as a malformed line in the middle of the file.
//!
//! Errors are [`Error`]; bad input never panics: a malformed line is skipped
//! and counted ([`Session::malformed`]).
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod durable;
mod entry_index;
pub mod folder;
pub mod follow;
pub mod history;
mod index;
pub mod items;
mod json;
pub mod live;
pub mod session;
pub mod store;

use std::path::PathBuf;

pub use durable::DurableFolder;
pub use folder::{SessionFolder, SessionSummary};
pub use follow::{Follower, Progress};
pub use history::{PiHistory, RELIST_AFTER};
pub use items::{PaneView, item_count, item_id, items_since, pane_view};
pub use live::{GateOptions, PiCommand, PiConversation, PiOptions};
pub use session::{Block, Entry, EntryKind, Header, Line, Message, Session, StopReason};
pub use store::{Conversation, ConversationInfo, ConversationStore};

/// What went wrong reading Pi's store.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A file or folder could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A file's first object is not a session header (or the file is empty).
    #[error("{} is not a Pi session file: its first line is not a session header", path.display())]
    NotASession {
        /// The file.
        path: PathBuf,
    },
    /// Pi's command line could not be split into words. The line itself is
    /// not repeated: it may hold a key (`--api-key …`).
    #[error("Pi's command line cannot start Pi: {why}")]
    BadCommand {
        /// Why.
        why: String,
    },
    /// An option breaks a rule.
    #[error("{value:?} breaks the rule: {rule}")]
    BadOption {
        /// The rule.
        rule: &'static str,
        /// The value given.
        value: String,
    },
    /// Pi could not be started.
    #[error("cannot start Pi ({program}): {source}")]
    Spawn {
        /// The program.
        program: String,
        /// Why.
        source: std::io::Error,
    },
    /// Pi refused a command, exited, or did not start.
    #[error("{why}")]
    Pi {
        /// What happened.
        why: String,
    },
    /// The pane refused a write (it was closed).
    #[error("the pane refused: {why}")]
    Pane {
        /// Why.
        why: String,
    },
    /// A history cursor that this history did not give.
    #[error("history cursor {cursor:?} is not one this history gave")]
    BadCursor {
        /// The cursor.
        cursor: String,
    },
}

/// `?` on Pi's errors inside a handler refuses the write with the error's
/// words (`409 refused`, nothing stored).
impl From<Error> for durable_runtime::Refusal {
    fn from(e: Error) -> Self {
        durable_runtime::Refusal::new(e.to_string())
    }
}

impl Error {
    /// The error without file paths, for a phone (history errors reach it
    /// as `500 internal` with this text).
    pub fn public_message(&self) -> String {
        match self {
            Error::Io { source, .. } => format!("cannot read Pi's sessions: {}", source.kind()),
            Error::NotASession { .. } => "a Pi session file is not readable as one".to_owned(),
            Error::Spawn { .. } => "Pi could not be started".to_owned(),
            Error::BadCursor { .. }
            | Error::BadCommand { .. }
            | Error::BadOption { .. }
            | Error::Pi { .. }
            | Error::Pane { .. } => self.to_string(),
        }
    }
}
