//! §1.1 the private Unix socket, as far as it shows from outside: modes, refusals
//! at start-up, the stale socket after a crash.

use std::os::unix::fs::{FileTypeExt, PermissionsExt};

use super::Ctx;
use crate::conformance::check::{R, ensure};
use crate::conformance::desk::{Desk, Started, private_dir};

fn mode(path: &std::path::Path) -> R<u32> {
    Ok(std::fs::metadata(path).map_err(|e| format!("{}: {e}", path.display()))?.permissions().mode() & 0o777)
}

pub(crate) async fn socket_and_its_folder_are_private(cx: Ctx) -> R {
    let socket = cx.shared_socket()?;
    let meta = std::fs::metadata(&socket).map_err(|e| format!("{}: {e}", socket.display()))?;
    ensure!(meta.file_type().is_socket(), "{} is not a socket", socket.display());
    let m = mode(&socket)?;
    ensure!(m & 0o077 == 0, "the socket has mode {m:o}: group/other bits set");
    let dir = socket.parent().ok_or("socket without a folder")?;
    let d = mode(dir)?;
    ensure!(d == 0o700, "the socket folder {} (created by the SDK) has mode {d:o}, not 700", dir.display());
    Ok(())
}

async fn expect_refused(spec: crate::conformance::desk::DeskSpec, what: &str, mention: &str) -> R {
    match Desk::try_start(spec).await? {
        Started::Listening(desk) => Err(format!("{what}: the desk started anyway at {}", desk.address)),
        Started::Exited { status, stderr, stdout } => {
            ensure!(!status.success(), "{what}: the desk exited with success");
            ensure!(
                stderr.contains(mention) || stdout.contains(mention),
                "{what}: the refusal does not name {mention:?}: {}",
                stderr.lines().last().unwrap_or("")
            );
            Ok(())
        }
    }
}

pub(crate) async fn socket_folder_not_private_refused_at_startup(cx: Ctx) -> R {
    let mut spec = cx.spec(&[]);
    let open = spec.data.parent().ok_or("no desk folder")?.join("open");
    private_dir(&open)?;
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).map_err(|e| e.to_string())?;
    spec.socket = open.join("app.sock");
    expect_refused(spec, "a socket folder with mode 777", &open.display().to_string()).await
}

pub(crate) async fn socket_path_over_103_bytes_refused_at_startup(cx: Ctx) -> R {
    let mut spec = cx.spec(&[]);
    let base = spec.data.parent().ok_or("no desk folder")?.join("s");
    let len = base.as_os_str().len() + 1;
    spec.socket = base.join("x".repeat(104usize.saturating_sub(len).max(1)));
    ensure!(spec.socket.as_os_str().len() == 104, "built a {}-byte path", spec.socket.as_os_str().len());
    expect_refused(spec, "a 104-byte socket path", "103").await
}

pub(crate) async fn socket_in_use_refused_at_startup(cx: Ctx) -> R {
    let first = cx.desk(&[]).await?;
    let mut spec = cx.spec(&[]);
    spec.socket = first.spec.socket.clone();
    expect_refused(spec, "a second desk on a socket in use", "already in use").await?;
    first.client.get("/hello").await?.ok()?;
    Ok(())
}

pub(crate) async fn stale_socket_replaced_after_sigkill(cx: Ctx) -> R {
    let desk = cx.desk(&[]).await?;
    let socket = desk.spec.socket.clone();
    let spec = desk.kill().await?;
    ensure!(socket.exists(), "SIGKILL left no socket file (nothing to test)");
    let desk = Desk::start(spec).await?;
    desk.client.get("/hello").await?.ok()?;
    Ok(())
}
