//! The SDK's examples, as `[[example]]` targets of this package:
//! `cargo run --example hello` (the seed's ten-line quick start).

// The desk's modules, compiled here under test (at the crate root, as in
// the desk) so that their unit tests run with `cargo test`; the desk example
// itself is built as a plain binary, which `tests/desk*.rs` start as a child.
#[cfg(test)]
#[allow(dead_code, unreachable_pub)]
#[path = "durable-member/asks.rs"]
mod asks;
#[cfg(test)]
#[allow(dead_code, unreachable_pub)]
#[path = "durable-member/cli.rs"]
mod cli;
#[cfg(test)]
#[allow(dead_code, unreachable_pub)]
#[path = "durable-member/desk.rs"]
mod desk;
#[cfg(test)]
#[allow(dead_code, unreachable_pub)]
#[path = "durable-member/history.rs"]
mod history;
#[cfg(test)]
#[allow(dead_code, unreachable_pub)]
#[path = "durable-member/store.rs"]
mod store;

/// Installs the examples' `tracing` subscriber: the SDK's logs (and the
/// program's own) on standard error, so that `listening …` stays the only
/// line on standard output; filtered by `RUST_LOG` (for example
/// `RUST_LOG=durable_core=debug` for every request), `info` when it is
/// unset — the start, Collie's hello, asks raised and decided, warnings,
/// but not every poll. An agent of your own does the same with
/// `tracing-subscriber` (features `fmt` and `env-filter`).
pub fn logs() {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    // `try_init`: a second call (or a program that set its own) keeps the first.
    let _ = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).try_init();
}

/// Waits for SIGINT or SIGTERM: the examples' cue to close their `Collie`
/// gracefully (`Collie::close`) before they exit.
#[cfg(unix)]
pub async fn shutdown_signal() -> std::io::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
    Ok(())
}

/// Turns a write past the process's file-size limit (`ulimit -f`) into an
/// error on that write, and says so on standard error. Without it the
/// kernel's `SIGXFSZ` ends the process at once, with no word (the SDK's
/// stores commit before they answer, so nothing acknowledged is lost, but
/// the agent is gone). With it the write fails with "File too large", the
/// store's caller gets the error (a request answers `500`), and the agent
/// keeps serving what it can. Call it once, inside the runtime.
#[cfg(unix)]
pub fn report_file_size_limit() -> std::io::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut xfsz = signal(SignalKind::from_raw(nix::sys::signal::Signal::SIGXFSZ as i32))?;
    tokio::spawn(async move {
        while xfsz.recv().await.is_some() {
            tracing::error!(
                "a write passed this process's file-size limit (ulimit -f) and failed with \
                 \"File too large\": raise the limit, or move the data folder to where it may grow"
            );
        }
    });
    Ok(())
}

/// Creates a folder only its user can open (0700; an existing one is left
/// as it is): an agent's data and sessions hold its users' conversations.
#[cfg(unix)]
pub fn private_folder(dir: &std::path::Path) -> Result<(), String> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| format!("cannot create {}: {e}", dir.display()))
}
