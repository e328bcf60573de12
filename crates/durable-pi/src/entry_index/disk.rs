//! An entry index in a file of its own: a compact binary layout (numbers as
//! LEB128, strings length first) ending with the SHA-256 of what precedes
//! it. A file that is cut, damaged, of another layout or another session
//! file's is not read (the index is built again from the session file);
//! every number is checked against what it indexes before it is used, so a
//! damaged one never makes a reader allocate or read out of bounds.

use std::path::Path;
use std::time::{Duration, UNIX_EPOCH};

use durable_types::Timestamp;
use sha2::{Digest, Sha256};

use super::{EntryIndex, HEAD_BYTES, Ids, Indexed, Makes, Stamp, Summary, TAIL_BYTES};
use crate::session::Header;

/// What the file starts with: the layout's name and version.
const MAGIC: &[u8] = b"durable-pi entry index 1\n";

/// Writes `index` of the session file named `name` to `file` (a temporary
/// file renamed over it).
pub(super) fn save(file: &Path, name: &str, index: &EntryIndex) -> std::io::Result<()> {
    let mut out = Writer(Vec::with_capacity(64 + index.entries.len() * 24));
    out.0.extend_from_slice(MAGIC);
    out.str(name);
    let stamp = &index.stamp;
    out.num(stamp.len);
    out.opt(stamp.modified.and_then(|m| m.duration_since(UNIX_EPOCH).ok()), |w, d| {
        w.num(d.as_secs());
        w.num(u64::from(d.subsec_nanos()));
    });
    out.num(stamp.covered);
    out.bytes(&stamp.head);
    out.bytes(&stamp.tail);
    out.opt(index.header.as_ref(), |w, h| {
        w.str(&h.id);
        w.num(h.version);
        w.opt(h.timestamp, |w, t| w.num(t.as_millis()));
        w.opt(h.cwd.as_deref(), Writer::str);
        w.opt(h.parent_session.as_deref(), Writer::str);
    });
    out.num(u64::from(index.refused));
    out.num(index.malformed as u64);
    let summary = &index.summary;
    out.opt(summary.name.as_deref(), Writer::str);
    out.opt(summary.first_user_text.as_deref(), Writer::str);
    out.opt(summary.first_entry_time, |w, t| w.num(t.as_millis()));
    out.opt(summary.last_activity, |w, t| w.num(t.as_millis()));
    out.num(index.ids.len() as u64);
    for id in index.ids.iter() {
        out.str(id);
    }
    out.num(index.entries.len() as u64);
    for e in &index.entries {
        out.num(e.offset);
        out.num(e.len);
        out.num(e.key as u64);
        out.opt(e.parent, |w, p| w.num(p as u64));
        match &e.makes {
            Makes::Items(n) => {
                out.num(0);
                out.num(*n as u64);
            }
            Makes::WithCalls(n, calls) => {
                out.num(1);
                out.num(*n as u64);
                out.num(calls.len() as u64);
                for (id, k) in calls.iter() {
                    out.str(id);
                    out.num(*k as u64);
                }
            }
            Makes::Result(id) => {
                out.num(2);
                out.str(id);
            }
        }
    }
    let digest = Sha256::digest(&out.0);
    out.0.extend_from_slice(&digest);
    let tmp = file.with_extension(format!("tmp.{}", std::process::id()));
    std::fs::write(&tmp, &out.0)?;
    std::fs::rename(&tmp, file)
}

/// Reads the index of the session file named `name` from `file`; `None`
/// when there is none or it cannot be trusted.
pub(super) fn load(file: &Path, name: &str) -> Option<EntryIndex> {
    let bytes = std::fs::read(file).ok()?;
    let (body, digest) = bytes.split_at(bytes.len().checked_sub(32)?);
    if Sha256::digest(body).as_slice() != digest {
        return None;
    }
    let mut r = Reader(body.strip_prefix(MAGIC)?);
    if r.str()? != name {
        return None;
    }
    let len = r.num()?;
    let modified = r.opt(|r| {
        let secs = r.num()?;
        let nanos = u32::try_from(r.num()?).ok().filter(|n| *n < 1_000_000_000)?;
        UNIX_EPOCH.checked_add(Duration::new(secs, nanos))
    })?;
    let covered = r.num().filter(|c| *c <= len)?;
    let head = r.bytes()?.to_vec();
    let tail = r.bytes()?.to_vec();
    if head.len() > HEAD_BYTES.min(covered as usize) || tail.len() > TAIL_BYTES.min(covered as usize) {
        return None;
    }
    let header = r.opt(|r| {
        Some(Header {
            id: r.string()?,
            version: r.num()?,
            timestamp: r.opt(Reader::time)?,
            cwd: r.opt(Reader::string)?,
            parent_session: r.opt(Reader::string)?,
        })
    })?;
    let refused = r.num()? != 0;
    let malformed = usize::try_from(r.num()?).ok()?;
    let summary = Summary {
        name: r.opt(Reader::string)?,
        first_user_text: r.opt(Reader::string)?,
        first_entry_time: r.opt(Reader::time)?,
        last_activity: r.opt(Reader::time)?,
    };
    let id_count = r.count()?;
    let mut ids = Ids::default();
    for _ in 0..id_count {
        ids.push(r.str()?);
    }
    let entry_count = r.count()?;
    let mut entries = Vec::with_capacity(entry_count);
    let mut last_with = vec![None; ids.len()];
    let mut next_offset = 0;
    for position in 0..entry_count {
        let offset = r.num()?;
        let line_len = r.num()?;
        // Lines in file order, each whole with its newline, all indexed.
        if offset < next_offset || offset.checked_add(line_len)?.checked_add(1)? > covered {
            return None;
        }
        next_offset = offset + line_len + 1;
        let key = r.key(ids.len())?;
        let parent = r.opt(|r| r.key(ids.len()))?;
        // An entry gives at most an item per byte of its line.
        let count = |r: &mut Reader<'_>| usize::try_from(r.num()?).ok().filter(|n| *n as u64 <= line_len);
        let makes = match r.num()? {
            0 => Makes::Items(count(&mut r)?),
            1 => {
                let n = count(&mut r)?;
                let calls = (0..r.count()?)
                    .map(|_| Some((Box::from(r.str()?), count(&mut r).filter(|k| *k < n)?)))
                    .collect::<Option<Box<[_]>>>()?;
                Makes::WithCalls(n, calls)
            }
            2 => Makes::Result(Box::from(r.str()?)),
            _ => return None,
        };
        last_with[key] = Some(position);
        entries.push(Indexed { offset, len: line_len, key, parent, makes });
    }
    if !r.0.is_empty() {
        return None;
    }
    let saved = Some(entries.len());
    Some(EntryIndex {
        stamp: Stamp { len, modified, covered, head, tail },
        header,
        refused,
        malformed,
        entries,
        ids,
        last_with,
        summary,
        saved,
    })
}

struct Writer(Vec<u8>);

impl Writer {
    fn num(&mut self, mut n: u64) {
        while n >= 0x80 {
            self.0.push((n as u8) | 0x80);
            n >>= 7;
        }
        self.0.push(n as u8);
    }

    fn bytes(&mut self, b: &[u8]) {
        self.num(b.len() as u64);
        self.0.extend_from_slice(b);
    }

    fn str(&mut self, s: &str) {
        self.bytes(s.as_bytes());
    }

    fn opt<T>(&mut self, value: Option<T>, write: impl FnOnce(&mut Writer, T)) {
        match value {
            None => self.num(0),
            Some(v) => {
                self.num(1);
                write(self, v);
            }
        }
    }
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn num(&mut self) -> Option<u64> {
        let mut n = 0u64;
        for shift in (0..64).step_by(7) {
            let (&byte, rest) = self.0.split_first()?;
            self.0 = rest;
            n |= u64::from(byte & 0x7f).checked_shl(shift)?;
            if byte & 0x80 == 0 {
                return Some(n);
            }
        }
        None
    }

    /// A count of things that each take a byte or more: never more than
    /// the bytes left.
    fn count(&mut self) -> Option<usize> {
        usize::try_from(self.num()?).ok().filter(|n| *n <= self.0.len())
    }

    fn key(&mut self, keys: usize) -> Option<usize> {
        usize::try_from(self.num()?).ok().filter(|k| *k < keys)
    }

    fn bytes(&mut self) -> Option<&'a [u8]> {
        let n = usize::try_from(self.num()?).ok()?;
        if n > self.0.len() {
            return None;
        }
        let (b, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(b)
    }

    fn str(&mut self) -> Option<&'a str> {
        std::str::from_utf8(self.bytes()?).ok()
    }

    fn string(&mut self) -> Option<String> {
        self.str().map(str::to_owned)
    }

    fn time(&mut self) -> Option<Timestamp> {
        Some(Timestamp::from_millis(self.num()?.min(Timestamp::MAX.as_millis())))
    }

    /// An optional value: `Some(None)` when absent, `None` when unreadable.
    fn opt<T>(&mut self, read: impl FnOnce(&mut Self) -> Option<T>) -> Option<Option<T>> {
        match self.num()? {
            0 => Some(None),
            1 => read(self).map(Some),
            _ => None,
        }
    }
}
