//! Running an agent as a child process, the one way durable-pi and
//! durable-acp both do it, so a fix for one agent's leftovers holds for
//! every agent:
//!
//! - [`AgentChild`]: the process started with its three pipes, in a
//!   process group of its own if asked, a mark in its environment and a
//!   [`Watcher`] beside it;
//! - [`Watcher`] and [`stop_leftovers`]: what the agent's tools start never
//!   outlives it — not even when this program is killed with `SIGKILL`
//!   (the module [`reaper`] says how, and what escapes it);
//! - [`StderrTail`]: the last words of its standard error, for the notice
//!   of its exit;
//! - [`LineReader`]: its output as lines of at most a bound, a longer line
//!   dropped as it streams, never held whole.
//!
//! The protocol spoken over the pipes (Pi's RPC, ACP's JSON-RPC) is the
//! caller's. Needs a tokio runtime; the watcher needs `sh` (Unix).

#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod child;
mod lines;
pub mod reaper;
mod stderr;

pub use child::{AgentChild, AgentChildBuilder, describe_exit, kill_process_group};
pub use lines::LineReader;
pub use reaper::{RUN_ENV, RunMark, Watcher, folder_tag, stop_leftovers};
pub use stderr::{STDERR_KEPT, StderrTail};
