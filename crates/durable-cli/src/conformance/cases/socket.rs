//! §1.1 the private socket: it and its folder are the user's alone.

#[cfg(unix)]
use std::os::unix::fs::{FileTypeExt, PermissionsExt};

use super::Ctx;
use crate::conformance::check::CaseResult;
#[cfg(unix)]
use crate::conformance::check::ensure;

#[cfg(not(unix))]
pub(crate) async fn socket_and_its_folder_are_private(cx: Ctx) -> CaseResult {
    Err(format!("{:?}: the private socket is Unix-only", cx.socket))
}

#[cfg(unix)]
pub(crate) async fn socket_and_its_folder_are_private(cx: Ctx) -> CaseResult {
    let socket = cx.socket.clone().ok_or("no socket path")?;
    let meta = std::fs::metadata(&socket).map_err(|e| format!("{}: {e}", socket.display()))?;
    ensure!(meta.file_type().is_socket(), "{} is not a socket", socket.display());
    let m = meta.permissions().mode() & 0o777;
    ensure!(m & 0o077 == 0, "the socket has mode {m:o}: group/other bits set");
    let dir = socket.parent().ok_or("a socket without a folder")?;
    let d =
        std::fs::metadata(dir).map_err(|e| format!("{}: {e}", dir.display()))?.permissions().mode() & 0o777;
    ensure!(d & 0o077 == 0, "the socket's folder {} has mode {d:o}: group/other bits set", dir.display());
    Ok(())
}
