//! Who a test runs an agent as: CI and the developers' machines run as root,
//! users do not, so an agent test also runs its agent as `nobody`.
#![allow(dead_code, unreachable_pub)]

use std::process::Command;

/// The user an agent test runs its agent as: `nobody` when the tests run as
/// root (CI), else this user, who is unprivileged already.
pub fn unprivileged() -> Option<u32> {
    (nix::unistd::geteuid().is_root()).then_some(65534)
}

/// `program` run as `user` through `setpriv`, or as this process.
pub fn as_user(user: Option<u32>, program: impl AsRef<std::ffi::OsStr>) -> Command {
    match user {
        None => Command::new(program),
        Some(uid) => {
            let mut c = Command::new("setpriv");
            c.arg(format!("--reuid={uid}")).arg(format!("--regid={uid}")).arg("--clear-groups").arg("--");
            c.arg(program);
            c
        }
    }
}
