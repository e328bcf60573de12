//! §1.1 the private Unix socket, as far as it shows from outside: modes, refusals
//! at start-up, the stale socket after a crash.

use std::os::unix::fs::PermissionsExt;

use super::Ctx;
use crate::check::{CaseResult, ensure};
use crate::desk::{Desk, Started, private_dir};

async fn expect_refused(spec: crate::desk::DeskSpec, what: &str, mention: &str) -> CaseResult {
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

pub(crate) async fn socket_folder_not_private_refused_at_startup(cx: Ctx) -> CaseResult {
    let mut spec = cx.spec(&[]);
    let open = spec.data.parent().ok_or("no desk folder")?.join("open");
    private_dir(&open)?;
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).map_err(|e| e.to_string())?;
    spec.socket = open.join("app.sock");
    expect_refused(spec, "a socket folder with mode 777", &open.display().to_string()).await
}

pub(crate) async fn socket_path_over_103_bytes_refused_at_startup(cx: Ctx) -> CaseResult {
    let mut spec = cx.spec(&[]);
    let base = spec.data.parent().ok_or("no desk folder")?.join("s");
    let len = base.as_os_str().len() + 1;
    spec.socket = base.join("x".repeat(104usize.saturating_sub(len).max(1)));
    ensure!(spec.socket.as_os_str().len() == 104, "built a {}-byte path", spec.socket.as_os_str().len());
    expect_refused(spec, "a 104-byte socket path", "103").await
}

pub(crate) async fn socket_in_use_refused_at_startup(cx: Ctx) -> CaseResult {
    let first = cx.desk(&[]).await?;
    let mut spec = cx.spec(&[]);
    spec.socket = first.spec.socket.clone();
    expect_refused(spec, "a second desk on a socket in use", "already in use").await?;
    first.client.get("/hello").await?.ok()?;
    Ok(())
}

pub(crate) async fn stale_socket_replaced_after_sigkill(cx: Ctx) -> CaseResult {
    let desk = cx.desk(&[]).await?;
    let socket = desk.spec.socket.clone();
    let spec = desk.kill().await?;
    ensure!(socket.exists(), "SIGKILL left no socket file (nothing to test)");
    let desk = Desk::start(spec).await?;
    desk.client.get("/hello").await?.ok()?;
    Ok(())
}
