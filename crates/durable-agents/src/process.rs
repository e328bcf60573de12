//! What the program does for itself, whatever agent it runs: its logs, its
//! stop signals, its private folder, and a write past the file-size limit.

/// The logs on standard error (standard output keeps the one `listening`
/// line), filtered by `RUST_LOG`, `info` when it is unset.
pub(crate) fn logs() {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).try_init();
}

/// Waits for SIGINT or SIGTERM (a service manager's stop, or Ctrl-C).
#[cfg(unix)]
pub(crate) async fn shutdown_signal() -> std::io::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
    Ok(())
}

/// Waits for Ctrl-C.
#[cfg(not(unix))]
pub(crate) async fn shutdown_signal() -> std::io::Result<()> {
    tokio::signal::ctrl_c().await
}

/// Turns a write past the file-size limit (`ulimit -f`, a unit's
/// `LimitFSIZE`) into an error on that write, with a log line, where the
/// kernel's `SIGXFSZ` would end the program with no word.
#[cfg(unix)]
pub(crate) fn report_file_size_limit() -> std::io::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut xfsz = signal(SignalKind::from_raw(nix::sys::signal::Signal::SIGXFSZ as i32))?;
    tokio::spawn(async move {
        while xfsz.recv().await.is_some() {
            tracing::error!(
                "a write passed this process's file-size limit (ulimit -f) and failed with \
                 \"File too large\": raise the limit, or move --data to where it may grow"
            );
        }
    });
    Ok(())
}

/// Nothing to do where there is no `SIGXFSZ`.
#[cfg(not(unix))]
pub(crate) fn report_file_size_limit() -> std::io::Result<()> {
    Ok(())
}

/// Creates a folder only its user can open (0700; an existing one is left
/// as it is): it holds the user's conversations.
pub(crate) fn private_folder(dir: &std::path::Path) -> Result<(), String> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))
}
