//! A live Pi behind a pane: `pi --mode rpc` as a child process, one per
//! open conversation.
//!
//! | the phone | Pi |
//! |---|---|
//! | send | `prompt` (a send during a turn waits in the pane's queue, as the contract says) |
//! | steer | `steer`: Pi joins it to the run after the current model turn |
//! | stop | `abort`; the stopped reply keeps its text, then `Stopped.` |
//! | rename (through [`PiConversation::rename`]) | `set_session_name` |
//!
//! What Pi streams becomes items as it comes ([`crate::items`] tells what
//! each message gives): text and thinking as `partial` items written no
//! more often than every 250 ms, then final; tool calls as `tool` items,
//! `running` until their result. The pane is `working` from the send to
//! Pi's `agent_settled`. When Pi exits or crashes the turn ends with an
//! error notice saying how, and the next send starts Pi again on the same
//! session: a pane never hangs on a dead Pi.
//!
//! # What Pi's tools start never outlives the agent
//! Pi's `bash` tool runs each call in a session of its own, out of reach of
//! Pi's process group. Pi kills a running call's process group itself
//! when its input closes (the agent ended or died), but not when it is
//! killed with the agent (`SIGKILL` to the group, the OOM killer), nor what
//! a call moved out of that group. So each Pi is started with a mark in its
//! environment (`DURABLE_AGENT_RUN`), which all it starts inherits, and beside
//! it a small watcher (`sh`, in a process group of its own) holding a pipe
//! from the agent. When Pi ends or the agent dies — by `SIGTERM`,
//! `SIGKILL`, or killed with its Pi — the pipe closes and the watcher stops
//! what ran under that Pi: the processes carrying the mark, their children,
//! and the members of the sessions they lead (so a call that cleared its
//! environment, `env -i`, goes too). A conversation attached on the same
//! sessions folder first stops what the runs of agents no longer alive left
//! (were their watchers killed too); it tells a dead agent from a live one
//! by the pid and start time in the mark, and never signals a process whose
//! pid was reused (a pidfd). Not reached: a process that clears its
//! environment, forks away from its parent and leaves its call's session —
//! under systemd the service's cgroup stops that one.
//!
//! On Linux this reads `/proc`. On macOS the watcher lists processes with
//! `ps -E` and stops the marked ones and their children (no sessions: an
//! `env -i` call whose parent ended escapes), and a start does not look for
//! the leftovers of dead agents: a call of a Pi killed together with its
//! agent and watcher may outlive them there. Not on Windows.
//!
//! # The gate: a risky call becomes a card
//! A small Pi extension shipped with this crate (loaded with `-e`) stops
//! each call of a gated tool (by default `bash`, `write`, `edit`; see
//! [`GateOptions`]) and asks the agent, with the call's id and arguments.
//! The agent raises the card with ask id `ask_id_for(pane, <toolCallId>)`
//! (whatever a custom card function says) and answers Pi: Allow runs the
//! call; Deny blocks it with a reason the model reads. A card whose call
//! ends without an answer, or whose turn is stopped or whose Pi exits, is
//! closed by the agent (`aborted`).
//!
//! A card open when the agent stops comes back (with a receipt store that
//! keeps asks): Pi aborts the call as its input closes, but the card is
//! kept with the session, the tool and a digest of the arguments, and
//! [`PiConversation::take_up`] raises it again at the next start by the same
//! id — an answer sent during the restart lands then. Allow tells Pi in a
//! turn of the agent's own that the call was approved, and lets exactly that
//! call (same tool, same arguments) through the gate once; Deny tells Pi it
//! was refused. A call Pi does not make again, a card closed unanswered, and
//! a card no conversation takes up ([`close_kept_card`]) leave a notice that
//! the call did not run. Other extensions' dialogs are
//! answered `cancelled` (the phone has no place for them), and their
//! notifications are notices.

mod conversation;
mod options;
mod resume;
mod rpc;
mod stream;

pub use conversation::PiConversation;
pub use options::{
    CardFn, DEFAULT_DENIED_REASON, DEFAULT_UNANSWERED_REASON, GateOptions, PiCommand, PiOptions,
    PiOptionsBuilder,
};
pub use resume::close_kept_card;

/// The gate extension Pi loads (`-e`), in TypeScript.
pub const GATE_EXTENSION: &str = include_str!("../../extension/gate.ts");

/// The title of the gate's dialog, which tells it from other extensions'.
pub(crate) const GATE_TITLE: &str = "durable-pi:approval";
