//! The warn sink the SDK installs when the program gives none.
//!
//! Each warn line is written once: as a `tracing` event when a subscriber
//! would record it, else as one line on standard error (the seeds'
//! behaviour). Why `tracing::enabled!` rather than
//! `tracing::dispatcher::has_been_set()`: it asks the subscriber in force
//! where the line is written — a global one, or one set for this thread
//! only (`tracing::subscriber::with_default`, as tests do), which
//! `has_been_set` does not see — whether it records a warning of this
//! target, so a line its filter would drop (`RUST_LOG=error`, or a filter
//! naming only the program's own crate) still reaches standard error
//! rather than nowhere. A program that wants the lines elsewhere, or
//! nowhere, gives its own sink (`OpenOptions::warn`, `CoreOptionsBuilder::warn`).

use std::io::Write;

/// The default warn sink: each line once, to `tracing` (`WARN`, target
/// `durable_sdk::warn`) when the subscriber in force records it, else one
/// line on standard error (control characters inside it replaced by spaces).
pub(crate) fn default_warn() -> impl Fn(&str) + Send + Sync + Clone + 'static {
    |line: &str| {
        if tracing::enabled!(tracing::Level::WARN) {
            tracing::warn!("{line}");
        } else {
            write_stderr(line);
        }
    }
}

fn write_stderr(line: &str) {
    let mut out: String = line.chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
    out.push('\n');
    let _ = std::io::stderr().lock().write_all(out.as_bytes());
}
