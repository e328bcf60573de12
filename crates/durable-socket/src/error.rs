//! Why the socket server could not start.

use std::fmt;
use std::io;
use std::path::PathBuf;

use durable_types::SOCKET_PATH_MAX;

use crate::SOCKET_ENV;

/// Why the socket server could not start. Every message names the rule
/// that was broken.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SocketError {
    /// Neither the options nor `$COLLIE_DURABLE_SOCKET` name a path.
    #[error("no socket path: give one (`Transport::socket_at`, `SocketOptions::path`) or set ${SOCKET_ENV}")]
    NoPath,
    /// The path is not absolute.
    #[error("socket path rule: the path must be absolute, {path:?} is not")]
    NotAbsolute {
        /// The path given.
        path: PathBuf,
    },
    /// The path is longer than 103 bytes.
    #[error("socket path rule: the path is {len} bytes, at most {SOCKET_PATH_MAX} are allowed: {path:?}")]
    TooLong {
        /// The path given.
        path: PathBuf,
        /// Its length in bytes.
        len: usize,
    },
    /// The path has a `..` component or names no file (it ends in `/`,
    /// `/.` or `/..`).
    #[error(
        "socket path rule: the path must name a file (no trailing `/`), without `..` components: {path:?}"
    )]
    NotAFilePath {
        /// The path given.
        path: PathBuf,
    },
    /// The path holds a control character (a newline, say), which would
    /// break the one-line messages that name it.
    #[error("socket path rule: the path must hold no control character: {path:?}")]
    ControlCharacter {
        /// The path given.
        path: PathBuf,
    },
    /// A component of the path is not private (`socket-not-private`).
    #[error("socket-not-private: {component:?}: {rule}")]
    NotPrivate {
        /// The offending component (a folder, or the socket itself).
        component: PathBuf,
        /// The rule it breaks.
        rule: PrivacyRule,
    },
    /// Another process still listens on the socket, or another agent is
    /// starting on it (it holds the lock file beside it).
    #[error("the socket {path:?} is already in use: another process listens on it or is starting on it")]
    InUse {
        /// The socket path.
        path: PathBuf,
    },
    /// Something that is not a socket sits at the path; it is left alone.
    #[error("{path:?} exists and is not a socket; it is left untouched")]
    NotASocket {
        /// The socket path.
        path: PathBuf,
    },
    /// A system call on the path failed.
    #[error("could not {action} {path:?}: {source}")]
    Io {
        /// What was being done (`create the folder`, `bind the socket`, …).
        action: &'static str,
        /// On what.
        path: PathBuf,
        /// The system's error.
        #[source]
        source: io::Error,
    },
}

impl SocketError {
    pub(crate) fn io(action: &'static str, path: impl Into<PathBuf>, source: io::Error) -> Self {
        SocketError::Io { action, path: path.into(), source }
    }

    pub(crate) fn not_private(component: impl Into<PathBuf>, rule: PrivacyRule) -> Self {
        SocketError::NotPrivate { component: component.into(), rule }
    }
}

/// A privacy rule of the socket path (contract §1.1), with what was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum PrivacyRule {
    /// No component of the path may be a symbolic link.
    SymbolicLink,
    /// Every component above the socket must be a folder.
    NotAFolder,
    /// No ancestor folder may be writable by group or others unless it has
    /// the sticky bit (like `/tmp`).
    AncestorWritable {
        /// The folder's permission bits.
        mode: u32,
    },
    /// Every ancestor folder must be owned by root or by the current user
    /// (as OpenSSH requires of the folders above its files): the owner of a
    /// folder can rename what is inside it, whatever its mode.
    AncestorOwner {
        /// The folder's owner.
        owner: u32,
        /// The current user.
        user: u32,
    },
    /// The socket's folder must be owned by the current user.
    FolderOwner {
        /// The folder's owner.
        owner: u32,
        /// The current user.
        user: u32,
    },
    /// The socket's folder must have mode 0700.
    FolderMode {
        /// The folder's permission bits.
        mode: u32,
    },
    /// The socket must be owned by the current user.
    SocketOwner {
        /// The socket's owner.
        owner: u32,
        /// The current user.
        user: u32,
    },
    /// The socket must have no group or other permission bits.
    SocketMode {
        /// The socket's permission bits.
        mode: u32,
    },
}

impl fmt::Display for PrivacyRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            PrivacyRule::SymbolicLink => {
                f.write_str("no component of the socket path may be a symbolic link")
            }
            PrivacyRule::NotAFolder => f.write_str("every component above the socket must be a folder"),
            PrivacyRule::AncestorWritable { mode } => write!(
                f,
                "no ancestor folder may be writable by group or others unless it has the sticky bit (mode {mode:04o})"
            ),
            PrivacyRule::AncestorOwner { owner, user } => write!(
                f,
                "every ancestor folder must be owned by root or by the current user (uid {user}), not uid {owner}"
            ),
            PrivacyRule::FolderOwner { owner, user } => {
                write!(
                    f,
                    "the socket's folder must be owned by the current user (uid {user}), not uid {owner}"
                )
            }
            PrivacyRule::FolderMode { mode } => {
                write!(f, "the socket's folder must have mode 0700, it has {mode:04o}")
            }
            PrivacyRule::SocketOwner { owner, user } => {
                write!(f, "the socket must be owned by the current user (uid {user}), not uid {owner}")
            }
            PrivacyRule::SocketMode { mode } => {
                write!(f, "the socket must have no group or other permission bits, it has {mode:04o}")
            }
        }
    }
}
