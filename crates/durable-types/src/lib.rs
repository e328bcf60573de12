//! Wire types and rules of the durable wire v1.
//!
//! This crate holds what both sides of the wire agree on and nothing that
//! does IO: the serde types of every message (camelCase, optional fields
//! omitted when absent), the ID and cursor rules, text sanitizing and limits,
//! the constants of the contract, [`ask_id_for`], [`call_summary`],
//! [`arguments_view`], the ask hash, and the plain request/response values the
//! core exchanges with the servers ([`exchange`]).
//!
//! Every rule has one home here or in `durable-core`, and a test that names it.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod asks;
mod canonical;
mod caps;
pub mod constants;
mod error;
mod errors;
mod events;
pub mod exchange;
mod fields;
mod hello;
mod history;
mod ids;
mod items;
mod layout;
pub mod text;
mod time;
mod writes;

pub use caps::{ALL_CAPS, CAP_NAMES, Cap, Caps, CapsView};
pub use constants::*;
pub use error::{RuleError, RuleKind};
pub use errors::{ErrorBody, ErrorCode};
pub use ids::{
    Cursor, Id, ScopeId, check_cursor, check_cursor_for, check_id, check_id_for, check_scope_id,
    check_scope_id_for, decode_path_segment, tab_wire_id,
};
pub use time::Timestamp;

mod hash;
mod summary;
pub use asks::{
    AGENT_DATA_MAX, Answer, AnswerBody, AnswerRequest, Ask, AskKind, AskOption, AskSpec, DecidedBy, Expiry,
    FieldType, FormField, OptionStyle, Outcome, Push, SelectOption, ToolInfo,
};
pub use events::{Event, EventBody, EventsPage, PaneSnapshot, PaneState};
pub use hash::{
    ASK_HASH_EXCLUDED, ask_hash, ask_hash_input, ask_id_for, canonical_json, is_hash, is_hash_any_case,
};
pub use hello::{CollieInfo, HelloPostResponse, HelloRequest, HelloResponse, SdkInfo, WireRange};
pub use history::{ConversationPage, ConversationState, HistoryPage, HistoryRow};
pub use items::{
    Badge, BadgeTone, Item, ItemBody, NoticeTone, ToolStatus, check_badge, check_href, check_lang,
    check_progress,
};
pub use layout::{ActionView, ClosedView, PaneView, StarterView, StateResponse, TabView, WorkspaceView};
pub use summary::{arguments_view, call_summary};
pub use writes::{
    CloseBody, PlainBody, RenameBody, ReopenBody, SendBody, StarterBody, SteerBody, Target, WriteBody,
    WriteResponse,
};

// The README's example is compiled as a doctest, so the registry page shows
// code that builds.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
