//! A reader that follows a session file as Pi appends to it.
//!
//! Pi creates a session file at the first user message (several lines at
//! once) and then appends one line per finished message; a reader that looks
//! while Pi writes can see the last line half written. [`Follower`] reads
//! what was added since its last [`Follower::poll`] and holds an unfinished
//! last line back until its newline arrives. When Pi opens a session file
//! whose last line is torn, it ends that line with a newline and goes on
//! appending: the torn line then reads as one malformed line, skipped and
//! counted, and the entries after it are read.
//!
//! A file that was replaced (another file at the path), cut shorter, or
//! rewritten from the start (Pi rewrites version 1 and 2 files when it
//! migrates them) is read again from the start: [`Progress::reset`] says so.

use std::fs::File;
use std::io::{ErrorKind, Read, Seek, SeekFrom};
use std::ops::Range;
use std::path::{Path, PathBuf};

use crate::Error;
use crate::session::Session;

/// The longest line a follower holds back (64 MiB): a longer one is dropped
/// up to its newline and counted malformed.
pub const MAX_LINE: usize = 64 * 1024 * 1024;

/// How many bytes of the file's start a follower keeps, to notice a rewrite.
const HEAD_BYTES: usize = 256;

/// What one [`Follower::poll`] read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Progress {
    /// The entries added, as indices into [`Session::entries`].
    pub new_entries: Range<usize>,
    /// The file was replaced, cut or rewritten: the session was read again
    /// from the start (every entry is new).
    pub reset: bool,
    /// The entry that was the leaf before this poll is not on the branch
    /// shown any more (Pi went back to an earlier entry and on from there):
    /// items of the old branch are no longer shown, so a pane is rebuilt
    /// from [`pane_view`](crate::pane_view) rather than updated.
    pub branch_moved: bool,
    /// Lines skipped in this poll.
    pub malformed: usize,
}

impl Progress {
    /// Whether anything changed.
    pub fn is_empty(&self) -> bool {
        self.new_entries.is_empty() && !self.reset && self.malformed == 0
    }
}

/// Follows one session file: each [`Follower::poll`] reads what Pi appended.
///
/// ```
/// use std::io::Write;
/// use durable_sdk::pi::Follower;
///
/// let path = std::env::temp_dir().join(format!("durable-pi-doc-follow-{}.jsonl", std::process::id()));
/// let mut file = std::fs::File::create(&path)?;
/// let mut follower = Follower::new(&path);
/// writeln!(file, r#"{{"type":"session","version":3,"id":"s1","timestamp":"2026-12-01T05:00:00.000Z"}}"#)?;
/// // Pi is half way through a line: it is held back.
/// write!(file, r#"{{"type":"message","id":"a","parentId":null,"message":{{"role":"user","#)?;
/// let progress = follower.poll()?;
/// assert!(progress.new_entries.is_empty());
/// assert!(follower.held_back() > 0);
/// writeln!(file, r#""content":"hi"}}}}"#)?;
/// let progress = follower.poll()?;
/// assert_eq!(progress.new_entries, 0..1);
/// assert_eq!(follower.session().entries()[0].id, "a");
/// # std::fs::remove_file(&path)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct Follower {
    path: PathBuf,
    session: Session,
    /// Bytes of the file read so far.
    offset: u64,
    /// The start of a line whose newline has not arrived.
    pending: Vec<u8>,
    /// True while an overlong line is being skipped up to its newline.
    dropping: bool,
    /// The file's first bytes as read.
    head: Vec<u8>,
    /// The file's device and inode, to notice another file at the path.
    identity: Option<(u64, u64)>,
}

impl Follower {
    /// A follower of the file at `path`; nothing is read until
    /// [`Follower::poll`]. The file need not exist yet.
    pub fn new(path: impl Into<PathBuf>) -> Follower {
        Follower {
            path: path.into(),
            session: Session::new(),
            offset: 0,
            pending: Vec::new(),
            dropping: false,
            head: Vec::new(),
            identity: None,
        }
    }

    /// The file followed.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The session as read so far.
    pub fn session(&self) -> &Session {
        &self.session
    }

    /// Bytes of an unfinished last line, held back until its newline.
    pub fn held_back(&self) -> usize {
        self.pending.len()
    }

    /// Reads what was appended since the last poll. A file that does not
    /// exist (yet) reads as nothing new. A file whose first object is not a
    /// session header is [`Error::NotASession`].
    pub fn poll(&mut self) -> Result<Progress, Error> {
        let path = self.path.clone();
        let io = |source| Error::Io { path: path.clone(), source };
        let mut file = match File::open(&self.path) {
            Ok(f) => f,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Progress::default()),
            Err(e) => return Err(io(e)),
        };
        let meta = file.metadata().map_err(io)?;
        let identity = identity(&meta);
        let mut progress = Progress::default();
        if self.offset > 0
            && (identity != self.identity
                || meta.len() < self.offset
                || !self.same_head(&mut file).map_err(io)?)
        {
            *self = Follower::new(self.path.clone());
            progress.reset = true;
        }
        self.identity = identity;
        let old_leaf = self.session.leaf().map(|e| e.id.clone());
        let first_new = self.session.entries().len();
        let malformed_before = self.session.malformed();

        file.seek(SeekFrom::Start(self.offset)).map_err(io)?;
        let mut chunk = Vec::new();
        file.read_to_end(&mut chunk).map_err(io)?;
        if self.head.len() < HEAD_BYTES {
            let take = (HEAD_BYTES - self.head.len()).min(chunk.len());
            self.head.extend_from_slice(&chunk[..take]);
        }
        self.offset += chunk.len() as u64;
        self.feed(&chunk);

        if self.session.is_refused() {
            return Err(Error::NotASession { path: self.path.clone() });
        }
        progress.new_entries = first_new..self.session.entries().len();
        progress.malformed = self.session.malformed() - malformed_before;
        progress.branch_moved = old_leaf.is_some_and(|id| !self.session.is_on_branch(&id));
        Ok(progress)
    }

    /// Whether the file still starts with the bytes read from it.
    fn same_head(&self, file: &mut File) -> std::io::Result<bool> {
        let mut now = vec![0; self.head.len()];
        file.seek(SeekFrom::Start(0))?;
        file.read_exact(&mut now)?;
        Ok(now == self.head)
    }

    /// Splits new bytes into lines; the last, unfinished one is held back.
    fn feed(&mut self, mut bytes: &[u8]) {
        while let Some(nl) = bytes.iter().position(|b| *b == b'\n') {
            let (line, rest) = (&bytes[..nl], &bytes[nl + 1..]);
            if self.dropping {
                self.dropping = false;
            } else if self.pending.is_empty() {
                self.session.push_line(line);
            } else {
                self.pending.extend_from_slice(line);
                let whole = std::mem::take(&mut self.pending);
                self.session.push_line(&whole);
            }
            bytes = rest;
        }
        if self.dropping {
            return;
        }
        if self.pending.len() + bytes.len() > MAX_LINE {
            self.pending = Vec::new();
            self.dropping = true;
            self.session.count_malformed();
        } else {
            self.pending.extend_from_slice(bytes);
        }
    }
}

#[cfg(unix)]
fn identity(meta: &std::fs::Metadata) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    Some((meta.dev(), meta.ino()))
}

#[cfg(not(unix))]
fn identity(_meta: &std::fs::Metadata) -> Option<(u64, u64)> {
    None
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    const HEADER: &str = r#"{"type":"session","version":3,"id":"s","timestamp":"2026-12-01T05:00:00.000Z"}"#;

    fn temp(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("durable-pi-follow-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir.join("s.jsonl")
    }

    fn entry(id: &str, parent: Option<&str>) -> String {
        let parent = parent.map_or("null".to_owned(), |p| format!("\"{p}\""));
        format!(
            r#"{{"type":"message","id":"{id}","parentId":{parent},"message":{{"role":"user","content":"{id}"}}}}"#
        )
    }

    fn append(path: &Path, text: &str) {
        std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(path)
            .unwrap()
            .write_all(text.as_bytes())
            .unwrap();
    }

    #[test]
    fn a_missing_file_reads_as_nothing_yet() {
        let path = temp("missing");
        let mut f = Follower::new(&path);
        assert!(f.poll().unwrap().is_empty());
        append(&path, &format!("{HEADER}\n{}\n", entry("a", None)));
        assert_eq!(f.poll().unwrap().new_entries, 0..1);
    }

    #[test]
    fn a_line_is_held_back_until_its_newline_even_byte_by_byte() {
        let path = temp("bytes");
        let text = format!("{HEADER}\n{}\n{}\n", entry("a", None), entry("b", Some("a")));
        let mut f = Follower::new(&path);
        let mut seen = 0;
        for b in text.as_bytes() {
            append(&path, std::str::from_utf8(std::slice::from_ref(b)).unwrap());
            let p = f.poll().unwrap();
            assert_eq!(p.malformed, 0);
            seen += p.new_entries.len();
            // Each entry appears exactly when its newline arrives.
            assert_eq!(seen, f.session().entries().len());
        }
        assert_eq!(seen, 2);
        assert_eq!(f.held_back(), 0);
    }

    #[test]
    fn a_torn_line_that_pi_ends_with_a_newline_is_skipped_and_reading_goes_on() {
        let path = temp("repair");
        let mut f = Follower::new(&path);
        append(&path, &format!("{HEADER}\n{}\n{{\"type\":\"mess", entry("a", None)));
        let p = f.poll().unwrap();
        assert_eq!((p.new_entries.len(), p.malformed), (1, 0));
        assert!(f.held_back() > 0);
        // Pi opens the file again: it ends the torn line, then appends.
        append(&path, &format!("\n{}\n", entry("b", Some("a"))));
        let p = f.poll().unwrap();
        assert_eq!((p.new_entries, p.malformed, p.reset), (1..2, 1, false));
    }

    #[test]
    fn a_rewritten_or_shorter_file_is_read_again_from_the_start() {
        let path = temp("reset");
        let mut f = Follower::new(&path);
        std::fs::write(&path, format!("{HEADER}\n{}\n{}\n", entry("a", None), entry("b", Some("a"))))
            .unwrap();
        assert_eq!(f.poll().unwrap().new_entries, 0..2);
        // Cut shorter.
        std::fs::write(&path, format!("{HEADER}\n{}\n", entry("a", None))).unwrap();
        let p = f.poll().unwrap();
        assert!(p.reset);
        assert_eq!(p.new_entries, 0..1);
        // Rewritten in place, longer, with another header (a migration).
        let other = HEADER.replace("\"s\"", "\"t\"");
        std::fs::write(&path, format!("{other}\n{}\n{}\n", entry("a", None), entry("c", Some("a")))).unwrap();
        let p = f.poll().unwrap();
        assert!(p.reset);
        assert_eq!(f.session().id(), Some("t"));
        assert_eq!(f.session().entries().len(), 2);
    }

    #[test]
    fn a_move_back_in_the_tree_is_reported() {
        let path = temp("moved");
        let mut f = Follower::new(&path);
        append(&path, &format!("{HEADER}\n{}\n{}\n", entry("a", None), entry("b", Some("a"))));
        assert!(!f.poll().unwrap().branch_moved);
        append(&path, &format!("{}\n", entry("c", Some("b"))));
        assert!(!f.poll().unwrap().branch_moved);
        append(&path, &format!("{}\n", entry("d", Some("a"))));
        assert!(f.poll().unwrap().branch_moved);
    }

    #[test]
    fn a_file_that_is_not_a_session_is_an_error_that_names_it() {
        let path = temp("notsession");
        std::fs::write(&path, format!("{}\n", entry("a", None))).unwrap();
        let err = Follower::new(&path).poll().unwrap_err();
        assert!(matches!(err, Error::NotASession { .. }));
        assert!(err.to_string().contains("s.jsonl"), "{err}");
    }

    #[test]
    fn an_overlong_line_is_dropped_up_to_its_newline_and_counted() {
        let path = temp("long");
        let mut f = Follower::new(&path);
        append(&path, &format!("{HEADER}\n"));
        f.poll().unwrap();
        f.pending = vec![b'x'; MAX_LINE];
        f.feed(b"yy");
        assert!(f.dropping);
        assert_eq!(f.held_back(), 0);
        f.feed(format!("zz\n{}\n", entry("a", None)).as_bytes());
        assert_eq!(f.session().malformed(), 1);
        assert_eq!(f.session().entries().len(), 1);
    }
}
