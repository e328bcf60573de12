//! The crate's errors.

use std::path::PathBuf;

/// What went wrong.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An option or argument the program gave breaks a rule.
    #[error("{rule}: got {value:?}")]
    BadOption {
        /// The rule.
        rule: &'static str,
        /// The value given.
        value: String,
    },
    /// The agent's program could not be started.
    #[error("cannot start the agent {program:?}: {source}")]
    Spawn {
        /// The program.
        program: String,
        /// Why.
        source: std::io::Error,
    },
    /// A file in the data folder could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The agent failed, refused or exited (its words, or how it ended).
    #[error("{why}")]
    Agent {
        /// What happened.
        why: String,
    },
    /// The pane refused a write (it was closed, or a rule).
    #[error("the pane refused: {why}")]
    Pane {
        /// Why.
        why: String,
    },
}

impl Error {
    pub(crate) fn agent(why: impl Into<String>) -> Error {
        Error::Agent { why: why.into() }
    }
}
