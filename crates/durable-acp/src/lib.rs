//! Any ACP agent on the phone through Collie.
//!
//! The Agent Client Protocol (ACP) is how editors drive coding agents —
//! Claude Code through `claude-agent-acp`, Codex through `codex-acp`,
//! Gemini CLI, Goose, Pi through `pi-acp`. This crate is an ACP client (on
//! the ecosystem's `agent-client-protocol` crate) that puts such an
//! agent's conversations on the phone: each ACP session is a pane, its
//! stream a live chat, its permission requests cards, its sessions the
//! history. [`AcpConversations`] does it all for one agent command; the
//! `durable-agents` crate's `durable-agent acp -- <agent command>` is a
//! whole agent on it, for users.
//!
//! # Processes
//! One agent process runs per live conversation (pi-acp keeps one live
//! session per process: a second `session/new` in it ends the first), at
//! most [`AcpOptions`]' `max_agents` at once (default 8): starting one more
//! stops the one idle longest. An agent idle for `idle_stop` (default 10
//! minutes) is stopped; its pane keeps its items, and the next send starts
//! the agent again on the same session (`session/load`; the replay is not
//! written again). The agent inherits the program's environment without
//! `COLLIE_TOKEN` and `COLLIE_TOKEN_NEXT`. Agent → client requests other
//! than `session/request_permission` (`fs/*`, `terminal/*`, others) get
//! the protocol's "method not found", and the client advertises neither
//! `fs` nor `terminal`.
//!
//! Several pi-acp processes share one state file (`~/.pi/pi-acp/session-map.json`,
//! written whole by each): a session one of them drops from it is not
//! lost, as pi-acp 0.0.34 finds a session missing from its map by reading
//! Pi's session files (its `session/load` and `session/list` work from
//! those), so no lock is taken around it.
//!
//! What an agent's tools start never outlives it (Linux and macOS): each
//! agent runs with a mark in its environment, inherited by all it starts,
//! and a small watcher stops every marked process, what runs under it and
//! the members of sessions it leads once the agent is stopped or this
//! program dies (even by `SIGKILL`) — Pi's `bash` calls, which run in
//! sessions of their own, included — with `SIGTERM` first and `SIGKILL` a
//! second later. A start on the same data folder stops what the agents of a
//! program that died with its watchers left. A process that clears its
//! environment, double-forks and leaves its call's session escapes it
//! (durable-process's `reaper` module says how and why).
//!
//! # The phone's actions
//! | the phone | the agent |
//! |---|---|
//! | send | `session/prompt` (a send during a turn waits in the pane's queue) |
//! | stop | `session/cancel`; an open card closes and the agent hears `cancelled` |
//! | the starter `new-conversation` | a new agent, `session/new`, its text the first prompt |
//! | rename | the pane's title, kept in the data folder (ACP has no rename); the agent's own titles (`session_info_update`) show until the phone renames |
//! | close | `session/close` where the agent offers it, then the agent stops; the session stays (never `session/delete`); a turn under way, or a starter's first text not yet sent, leaves a notice |
//! | reopen | the pane again; the agent starts on it at the next send: `session/resume` where it offers it and the pane shows the conversation (no replay), else `session/load` |
//! | a mode button (`mode-<id>`) | `session/set_mode`; a mode that never asks takes a card's second tap first, and has no button over HTTPS |
//!
//! ACP has no steer: give the core `Caps::all().without(Cap::Steer)`.
//!
//! # The stream as items
//! Message chunks are a `reply`, thought chunks `thinking` (both `partial`
//! at most every 250 ms, the first 250 ms into the turn, final before the pane goes idle); a chunk of
//! another `messageId` (or none after one) begins another item, and one
//! marked `_meta.claudeCode.kind: "informational"` is a `notice` of its
//! own. Text past an item's limit (a reply's 256 KiB) is dropped, and a
//! `notice` says so. Each tool call is one `tool` item (`running`, `ok`,
//! `error`, or `denied` when the user refused it; `error` with the output
//! "Stopped before an answer: the call did not run." when its card closed
//! unanswered), its call on one line from its title (or its kind and raw
//! input), its output from `rawOutput` (Claude Code's `Bash` describes the
//! call in its content), else its text content — a whole-fenced block
//! unwrapped, as the output is plain text — else its terminal output
//! (pi-acp's `_meta.terminal_output`); a diff is a `code` item in `diff`;
//! a `plan` is one `markdown` item per turn, rewritten in place within it;
//! a replay's user messages are `user` items, except the agent's
//! interruption markers (`[Request interrupted by user…]`, a `notice`
//! "Stopped."), and a call the marker cut reads `error`, "Interrupted: the
//! call did not run.". Usage and command updates show nothing.
//!
//! # Permission requests as cards
//! A `session/request_permission` is a `choice` card with id
//! `ask_id_for(pane, toolCallId)` ([`call_id_for`] maps a tool call id
//! that breaks the ID rule): its title the request's, its tool line and
//! arguments from the request and the `tool_call` it names (one that
//! arrived first; pi-acp's requests can overtake their updates); its
//! options the request's, with their `optionId`s as ids and `name`s as
//! labels. `allow_always` options are offered only where the SDK allows
//! allow-always (never over HTTPS), with the phone's second tap. The
//! chosen `optionId` goes back to the agent; a stop, a close or the
//! agent's exit closes the card (aborted) and the agent hears `cancelled`.
//! Cards kept from a run before a restart
//! ([`AcpConversations::take_up_kept_asks`]): the process that asked is
//! gone, so each of their conversations loads its session at the start; a
//! card the agent asks for again (the same tool call, during the load or
//! within a second after it) comes back by the same id, and an answer the
//! phone gave meanwhile lands (asked again with other options, the new
//! card takes the id); the others are closed ("Stopped before an
//! answer"), and the agent, had it asked nothing again, stops until the
//! next send. pi-acp never asks again. [`AcpConversations::close_kept_asks`]
//! closes them all at once instead, with no agent started.
//!
//! ## What a pi-acp user gets
//! pi-acp asks only when a Pi extension opens a dialog: Pi runs its tools
//! without asking. Its requests carry a random `pi-ui-…` tool call id and
//! the dialog's text as the title, not the tool call: the card says what
//! the dialog says, and sits apart from the call's `tool` item. To get a
//! card before each risky call, start Pi through `PI_ACP_PI_COMMAND` (an
//! executable that pi-acp runs instead of `pi`, with pi-acp's arguments)
//! that loads a gate extension with `-e` — durable-pi's
//! `durable_pi::live::GATE_EXTENSION` is one (its dialog's text names the
//! call) — for example a script `pi-gated`:
//!
//! ```text
//! #!/bin/sh
//! exec pi -e /path/to/gate.ts "$@"
//! ```
//!
//! and `PI_ACP_PI_COMMAND=/path/to/pi-gated npx pi-acp` as the agent.
//!
//! At most [`CARDS_OPEN_MAX`] (64) cards are open per conversation: a
//! request past them is answered `cancelled` at once, and the pane gets one
//! notice per burst; a stop or a close is linear in the cards open. A
//! request the phone cannot show as a card (more than 8 options, only
//! `allow_always` options over HTTPS, …) is answered `cancelled` and
//! leaves a notice naming why.
//!
//! # Bad input from the agent
//! The agent's output is read by a bounded reader before the protocol
//! crate sees it: a line over 16 MiB is dropped as it streams, a line
//! that is not UTF-8 or not JSON is dropped with a warn event, and at most
//! 1024 updates are in flight (an update flood is read as fast as it is
//! shown, in bounded memory). An update or a permission request for a
//! session the process does not run is dropped (the request answered
//! `cancelled`). An agent that does not answer `initialize` within
//! `init_timeout` (default 30 s) is killed, and the pane says so. An agent
//! that exits or crashes leaves a notice with its exit status and last
//! line on standard error; the pane goes idle, and the next send starts it
//! again on the same session. An agent that closes its output and lives on
//! can no longer be heard: after a second it is killed and counts as
//! exited (the same notice, "it closed its output and was stopped").
//!
//! # Cards by default
//! A session the bridge starts (`session/new`) or loads (`session/load`)
//! runs in a mode in which the agent asks before it acts. An agent that
//! starts its sessions in a mode that never asks — `auto`,
//! `bypassPermissions`, `full-access`, `yolo`, `dontAsk` (Claude Code
//! starts in `auto`) — is switched with `session/set_mode` to `default`
//! (or `ask`, `manual`), else to the first mode it offers that neither
//! never asks nor only plans; a session already in a mode that asks is
//! left as it is. [`AcpOptionsBuilder::mode`] names the mode instead (the
//! user's choice: `auto` keeps the agent acting without cards). A
//! `session/set_mode` that fails ends the start with its error: the bridge
//! never runs a session that would act without the cards it promised.
//!
//! The phone sees the mode and changes it: each mode the agent offers is a
//! pane button (`mode-<id>`, labelled `Mode: <name>`, the current one
//! `(now)`). A press sets it and the chat says so; the phone's choice is
//! set again when the agent loads the session (it lasts while this program
//! runs: a restart starts from the rule above). A mode that never asks is
//! allow-always by another name: its press raises a card whose "switch"
//! option takes the phone's second tap (`confirmAlways`), and where
//! allow-always is off (over HTTPS) it has no button. When the agent
//! changes its mode on its own (Claude Code's "Yes, allow all edits during
//! this session" switches it), the chat says so, with a warning when the
//! new mode never asks.
//!
//! # Forms and pages to open (elicitation)
//! The client advertises ACP elicitation (form and URL). An
//! `elicitation/create` in form mode is a `form` card: string properties
//! are `text` fields (or `select` ones with `enum` / `oneOf`), `integer`
//! and `number` ones `number`, `boolean` ones `bool`, required as the
//! schema says; a property no field kind takes (a multi-select) declines
//! the whole form, and the pane says why. The answer goes back `accept`
//! with each value typed as its property asked. In URL mode the card shows
//! the page's host in its title and the whole address in its reason, and
//! opens nothing: "I opened it and did it" answers `accept`, "Decline"
//! `decline`. A card closed unanswered (a stop, a close) answers `cancel`.
//!
//! # Ids and records
//! A pane's id is its ACP session id, or, for one that breaks the ID rule
//! (a `/`, over 128 bytes) or is `.` or `..` (which a browser's URL
//! normalization turns into another path), `acp-` and 40 hex digits of its SHA-256
//! ([`pane_id_for`]). Each conversation's record — title, start, whether
//! closed — is kept in the data folder as `conversations/<pane id>.json`;
//! a restart on the same folder opens the conversations not closed again
//! from them ([`AcpConversations::restore`]). A pane's items are kept once,
//! under the ids the pane showed: by the SDK's receipt store when it keeps
//! conversations across restarts (SQLite, PostgreSQL), which shows each
//! item once it has it and gives a pane declared again its items back;
//! else (the memory store) in the record, the last [`ITEMS_KEPT`]. Items a
//! record holds while the store keeps them (written by an earlier version,
//! or a session replayed for history) move onto the store, and leave the
//! record once the store is seen to have them. The store's bound holds
//! for them (its 2,000 newest items per conversation, and the 10,000
//! conversations written to last by default): a conversation it forgot
//! reads in history with no items, marked `dropped`.
#![forbid(unsafe_code)]
#![deny(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod conversation;
mod conversations;
mod elicitation;
mod error;
mod history;
mod ids;
mod lines;
mod mapping;
mod modes;
mod options;
mod process;
mod store;

pub use conversation::CARDS_OPEN_MAX;
pub use conversations::{AcpConversations, AcpHooks, NEW_CONVERSATION};
pub use error::Error;
pub use history::AcpHistory;
pub use ids::{call_id_for, pane_id_for};
pub use options::{
    AcpOptions, AcpOptionsBuilder, AgentCommand, DEFAULT_IDLE_STOP, DEFAULT_INIT_TIMEOUT, DEFAULT_MAX_AGENTS,
};
pub use store::ITEMS_KEPT;
