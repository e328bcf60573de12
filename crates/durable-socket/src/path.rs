//! The socket path's rules: where it comes from, its shape, and privacy
//! (contract §1.1) — checked, and the folder created, before binding.

use std::ffi::OsString;
use std::fmt;
use std::fs::{self, DirBuilder, File, Metadata, OpenOptions};
use std::io::ErrorKind;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::os::unix::net::UnixStream;
use std::path::{Component, Path, PathBuf};

use durable_types::SOCKET_PATH_MAX;
use nix::fcntl::{Flock, FlockArg};

use crate::error::{PrivacyRule, SocketError};

/// The path: the option, else the environment variable's value (an empty
/// value counts as unset), else [`SocketError::NoPath`].
pub(crate) fn resolve(option: Option<&Path>, env: Option<OsString>) -> Result<PathBuf, SocketError> {
    match (option, env) {
        (Some(path), _) => Ok(path.to_owned()),
        (None, Some(value)) if !value.is_empty() => Ok(PathBuf::from(value)),
        _ => Err(SocketError::NoPath),
    }
}

/// The shape rule: absolute, at most 103 bytes, no control character,
/// naming a file (not ending in `/`, `/.` or `/..`), no `..`.
pub(crate) fn check_shape(path: &Path) -> Result<(), SocketError> {
    if !path.is_absolute() {
        return Err(SocketError::NotAbsolute { path: path.to_owned() });
    }
    let bytes = path.as_os_str().as_bytes();
    if bytes.len() > SOCKET_PATH_MAX {
        return Err(SocketError::TooLong { path: path.to_owned(), len: bytes.len() });
    }
    if bytes.iter().any(u8::is_ascii_control) {
        return Err(SocketError::ControlCharacter { path: path.to_owned() });
    }
    // `Path` forgets a trailing `/` or `/.` (its file name is then the
    // folder's): look at the bytes.
    let last = bytes.rsplit(|&b| b == b'/').next().unwrap_or_default();
    if matches!(last, b"" | b"." | b"..")
        || path.file_name().is_none()
        || path.components().any(|c| c == Component::ParentDir)
    {
        return Err(SocketError::NotAFilePath { path: path.to_owned() });
    }
    Ok(())
}

/// What is at the socket path once the folders are checked.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Existing {
    /// Nothing: bind.
    Nothing,
    /// A socket nobody accepts on (left by a crash): it was removed.
    StaleRemoved,
}

/// The lock an agent holds on its socket path from before it looks at the
/// path until its server is gone: `flock` on `<socket>.lock` beside the
/// socket. Two agents starting at once on one stale socket would otherwise
/// both find it stale, and the second would remove the first's new socket.
/// The kernel drops the lock with the process, so a crash leaves none.
pub(crate) struct PathLock {
    _lock: Flock<File>,
}

impl fmt::Debug for PathLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("PathLock")
    }
}

/// The lock file's path: the socket's with `.lock` added.
pub(crate) fn lock_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".lock");
    PathBuf::from(name)
}

/// Takes the path's lock without waiting: held by another agent, the path
/// is in use. The file is created with mode 0600 and never removed (removing
/// it while another agent opens it would let both hold "the" lock).
fn lock(path: &Path) -> Result<PathLock, SocketError> {
    let lock_path = lock_path(path);
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(nix::fcntl::OFlag::O_NOFOLLOW.bits())
        .open(&lock_path)
        .map_err(|e| SocketError::io("open the lock file", &lock_path, e))?;
    match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
        Ok(lock) => Ok(PathLock { _lock: lock }),
        Err((_, nix::errno::Errno::EWOULDBLOCK)) => Err(SocketError::InUse { path: path.to_owned() }),
        Err((_, errno)) => Err(SocketError::io("lock", &lock_path, errno.into())),
    }
}

/// Walks the path from `/`: every ancestor folder must be a real folder,
/// owned by root or `uid`, not writable by group or others unless sticky;
/// missing folders are created
/// with mode 0700; the socket's folder must belong to `uid` with mode 0700.
/// Then takes the path's [lock](PathLock) and looks at the socket path
/// itself: a symbolic link, something not a socket, another user's socket
/// or a live one are refused; a stale one of ours is removed.
pub(crate) fn prepare(path: &Path, uid: u32) -> Result<(Existing, PathLock), SocketError> {
    let folder = path.parent().ok_or_else(|| SocketError::NotAFilePath { path: path.to_owned() })?;
    let mut current = PathBuf::new();
    for component in folder.components() {
        match component {
            Component::RootDir | Component::Prefix(_) => current.push(component.as_os_str()),
            Component::Normal(name) => current.push(name),
            Component::CurDir => continue,
            Component::ParentDir => return Err(SocketError::NotAFilePath { path: path.to_owned() }),
        }
        let is_folder = current == folder;
        let meta = match fs::symlink_metadata(&current) {
            Ok(meta) => meta,
            Err(e) if e.kind() == ErrorKind::NotFound => create_private_folder(&current)?,
            Err(e) => return Err(SocketError::io("inspect", &current, e)),
        };
        if is_folder {
            check_folder(&current, &meta, uid)?;
        } else {
            check_ancestor(&current, &meta, uid)?;
        }
    }
    let lock = lock(path)?;
    Ok((check_existing_socket(path, uid)?, lock))
}

fn create_private_folder(path: &Path) -> Result<Metadata, SocketError> {
    match DirBuilder::new().mode(0o700).create(path) {
        Ok(()) => {
            // The umask may have taken bits away; set exactly 0700.
            fs::set_permissions(path, fs::Permissions::from_mode(0o700))
                .map_err(|e| SocketError::io("set the mode of", path, e))?;
        }
        Err(e) if e.kind() == ErrorKind::AlreadyExists => {} // created meanwhile: checked below
        Err(e) => return Err(SocketError::io("create the folder", path, e)),
    }
    fs::symlink_metadata(path).map_err(|e| SocketError::io("inspect", path, e))
}

fn check_dir_kind(path: &Path, meta: &Metadata) -> Result<(), SocketError> {
    if meta.file_type().is_symlink() {
        return Err(SocketError::not_private(path, PrivacyRule::SymbolicLink));
    }
    if !meta.is_dir() {
        return Err(SocketError::not_private(path, PrivacyRule::NotAFolder));
    }
    Ok(())
}

/// An ancestor of the socket's folder. Its owner can rename the entries
/// inside it whatever its mode, so it must be root or the user (OpenSSH's
/// rule); others may not write in it unless it is sticky.
fn check_ancestor(path: &Path, meta: &Metadata, uid: u32) -> Result<(), SocketError> {
    check_dir_kind(path, meta)?;
    if meta.uid() != 0 && meta.uid() != uid {
        return Err(SocketError::not_private(
            path,
            PrivacyRule::AncestorOwner { owner: meta.uid(), user: uid },
        ));
    }
    let mode = meta.mode() & 0o7777;
    if mode & 0o022 != 0 && mode & 0o1000 == 0 {
        return Err(SocketError::not_private(path, PrivacyRule::AncestorWritable { mode }));
    }
    Ok(())
}

fn check_folder(path: &Path, meta: &Metadata, uid: u32) -> Result<(), SocketError> {
    check_dir_kind(path, meta)?;
    if meta.uid() != uid {
        return Err(SocketError::not_private(
            path,
            PrivacyRule::FolderOwner { owner: meta.uid(), user: uid },
        ));
    }
    let mode = meta.mode() & 0o7777;
    if mode & 0o777 != 0o700 {
        return Err(SocketError::not_private(path, PrivacyRule::FolderMode { mode }));
    }
    Ok(())
}

/// The socket path itself. A socket of ours that nobody accepts on is
/// replaced whatever its mode (the new one gets 0600); a live one is refused
/// — as not private when others can reach it, else as already in use.
fn check_existing_socket(path: &Path, uid: u32) -> Result<Existing, SocketError> {
    let meta = match fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Existing::Nothing),
        Err(e) => return Err(SocketError::io("inspect", path, e)),
    };
    if meta.file_type().is_symlink() {
        return Err(SocketError::not_private(path, PrivacyRule::SymbolicLink));
    }
    if !meta.file_type().is_socket() {
        return Err(SocketError::NotASocket { path: path.to_owned() });
    }
    if meta.uid() != uid {
        return Err(SocketError::not_private(
            path,
            PrivacyRule::SocketOwner { owner: meta.uid(), user: uid },
        ));
    }
    match UnixStream::connect(path) {
        Ok(_) => {
            let mode = meta.mode() & 0o7777;
            if mode & 0o077 != 0 {
                Err(SocketError::not_private(path, PrivacyRule::SocketMode { mode }))
            } else {
                Err(SocketError::InUse { path: path.to_owned() })
            }
        }
        Err(e) if e.kind() == ErrorKind::ConnectionRefused => match fs::remove_file(path) {
            Ok(()) => Ok(Existing::StaleRemoved),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(Existing::Nothing),
            Err(e) => Err(SocketError::io("remove the stale socket", path, e)),
        },
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(Existing::Nothing),
        Err(e) => Err(SocketError::io("connect to the existing socket", path, e)),
    }
}

/// After binding: give the socket mode 0600 and check it is ours and private.
pub(crate) fn seal_socket(path: &Path, uid: u32) -> Result<Metadata, SocketError> {
    fs::set_permissions(path, fs::Permissions::from_mode(0o600))
        .map_err(|e| SocketError::io("set the mode of", path, e))?;
    let meta = fs::symlink_metadata(path).map_err(|e| SocketError::io("inspect", path, e))?;
    if meta.uid() != uid {
        return Err(SocketError::not_private(
            path,
            PrivacyRule::SocketOwner { owner: meta.uid(), user: uid },
        ));
    }
    let mode = meta.mode() & 0o7777;
    if mode & 0o077 != 0 {
        return Err(SocketError::not_private(path, PrivacyRule::SocketMode { mode }));
    }
    Ok(meta)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_option_wins_over_the_environment_variable() {
        let p = resolve(Some(Path::new("/a/b.sock")), Some("/c/d.sock".into())).unwrap();
        assert_eq!(p, Path::new("/a/b.sock"));
        assert_eq!(resolve(None, Some("/c/d.sock".into())).unwrap(), Path::new("/c/d.sock"));
    }

    #[test]
    fn no_path_and_no_variable_is_an_error_naming_the_variable() {
        for env in [None, Some(OsString::new())] {
            let e = resolve(None, env).unwrap_err();
            assert!(matches!(e, SocketError::NoPath));
            assert!(e.to_string().contains("COLLIE_DURABLE_SOCKET"), "{e}");
        }
    }

    #[test]
    fn the_socket_path_must_be_absolute() {
        let e = check_shape(Path::new("run/app.sock")).unwrap_err();
        assert!(matches!(e, SocketError::NotAbsolute { .. }));
        assert!(e.to_string().contains("absolute"), "{e}");
    }

    #[test]
    fn the_socket_path_is_at_most_103_bytes() {
        let ok = format!("/{}", "a".repeat(102));
        assert!(check_shape(Path::new(&ok)).is_ok());
        let long = format!("/{}", "a".repeat(103));
        let e = check_shape(Path::new(&long)).unwrap_err();
        assert!(matches!(e, SocketError::TooLong { len: 104, .. }), "{e:?}");
        assert!(e.to_string().contains("103"), "{e}");
    }

    #[test]
    fn the_socket_path_names_a_file_without_parent_components() {
        assert!(matches!(check_shape(Path::new("/")), Err(SocketError::NotAFilePath { .. })));
        assert!(matches!(check_shape(Path::new("/tmp/../x.sock")), Err(SocketError::NotAFilePath { .. })));
    }

    #[test]
    fn the_socket_path_names_a_file_not_a_folder_with_a_trailing_slash() {
        for bad in ["/run/app.sock/", "/run/app.sock//", "/run/app.sock/.", "/run/x/.."] {
            let e = check_shape(Path::new(bad)).unwrap_err();
            assert!(matches!(e, SocketError::NotAFilePath { .. }), "{bad}: {e:?}");
            assert!(e.to_string().contains("must name a file"), "{e}");
        }
        assert!(check_shape(Path::new("/run/.app.sock")).is_ok());
        assert!(check_shape(Path::new("/run//app.sock")).is_ok());
    }

    #[test]
    fn the_socket_path_holds_no_control_character() {
        for bad in ["/run/app\n.sock", "/run\r/app.sock", "/run/app.sock\t", "/run/\x1b[2J.sock", "/run/\x7f"]
        {
            let e = check_shape(Path::new(bad)).unwrap_err();
            assert!(matches!(e, SocketError::ControlCharacter { .. }), "{bad:?}: {e:?}");
            let text = e.to_string();
            assert!(text.contains("no control character"), "{text}");
            assert!(
                !text.contains(['\n', '\r', '\t', '\x1b', '\x7f']),
                "the message stays one line: {text:?}"
            );
        }
        assert!(check_shape(Path::new("/run/café.sock")).is_ok(), "non-ASCII is not control");
    }
}
