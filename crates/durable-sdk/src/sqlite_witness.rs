//! The witness of a [`SqliteReceiptStore`](crate::stores::SqliteReceiptStore):
//! a small file beside the database (`<database>.witness`) holding the
//! store's id and how many write transactions it had committed when the
//! last write was acknowledged. Why it exists and what it catches: the
//! store's module docs, "Damage".
//!
//! Layout: two records of 64 bytes, at offsets 0 and 512 (each in a sector
//! of its own, so that a torn sector write damages one of them at most).
//! A record is `DURWIT01`, the 16-byte store id, the count of commits
//! (u64, little-endian), and the SHA-256 of those 32 bytes. Commit `n`
//! goes to record `n % 2`, in place, then `fdatasync`: a crash while
//! writing it leaves the other record, one commit older, intact. Reading takes the
//! intact record with the larger count.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

const MAGIC: &[u8; 8] = b"DURWIT01";
const RECORD_LEN: usize = 64;
/// Where record 1 starts (record 0 starts at 0).
const SECOND_RECORD_AT: u64 = 512;
const FILE_LEN: usize = 1024;

/// A store's identity and progress, as the witness records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Seen {
    pub(crate) store_id: [u8; 16],
    pub(crate) writes: u64,
}

/// What reading the witness found.
#[derive(Debug)]
pub(crate) enum Found {
    /// No witness file.
    Missing,
    Intact(Seen),
    /// A file is there, but no intact record (why, in words).
    Unreadable(String),
}

/// `<database>.witness`.
pub(crate) fn path_for(database: &Path) -> PathBuf {
    let mut name = database.as_os_str().to_owned();
    name.push(".witness");
    PathBuf::from(name)
}

/// The store id in hexadecimal, as messages show it.
pub(crate) fn hex(id: &[u8; 16]) -> String {
    id.iter().map(|b| format!("{b:02x}")).collect()
}

fn encode(seen: Seen) -> [u8; RECORD_LEN] {
    let mut out = [0u8; RECORD_LEN];
    out[..8].copy_from_slice(MAGIC);
    out[8..24].copy_from_slice(&seen.store_id);
    out[24..32].copy_from_slice(&seen.writes.to_le_bytes());
    let sum = Sha256::digest(&out[..32]);
    out[32..].copy_from_slice(&sum);
    out
}

fn decode(record: &[u8]) -> Option<Seen> {
    let record = record.get(..RECORD_LEN)?;
    if &record[..8] != MAGIC || Sha256::digest(&record[..32]).as_slice() != &record[32..] {
        return None;
    }
    let mut store_id = [0u8; 16];
    store_id.copy_from_slice(&record[8..24]);
    let mut writes = [0u8; 8];
    writes.copy_from_slice(&record[24..32]);
    Some(Seen { store_id, writes: u64::from_le_bytes(writes) })
}

/// Reads the witness at `path`; never panics on a bad file.
pub(crate) fn read(path: &Path) -> Found {
    let mut bytes = Vec::with_capacity(FILE_LEN);
    let opened = File::open(path);
    let mut file = match opened {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Found::Missing,
        Err(e) => return Found::Unreadable(format!("it cannot be read: {e}")),
    };
    // A longer file is damaged as well; its first bytes are all that matter.
    if let Err(e) = (&mut file).take(FILE_LEN as u64 + 1).read_to_end(&mut bytes) {
        return Found::Unreadable(format!("it cannot be read: {e}"));
    }
    let first = decode(&bytes);
    let second = bytes.get(SECOND_RECORD_AT as usize..).and_then(decode);
    match (first, second) {
        (Some(a), Some(b)) if a.store_id != b.store_id => {
            Found::Unreadable("its two records name different stores".to_owned())
        }
        (Some(a), Some(b)) => Found::Intact(if a.writes >= b.writes { a } else { b }),
        (Some(one), None) | (None, Some(one)) => Found::Intact(one),
        (None, None) => Found::Unreadable(format!(
            "neither of its two records is intact ({} bytes, {FILE_LEN} expected)",
            bytes.len()
        )),
    }
}

/// The witness, open for writing; the store's thread owns it.
#[derive(Debug)]
pub(crate) struct Witness {
    file: File,
    path: PathBuf,
    store_id: [u8; 16],
}

impl Witness {
    /// Writes a new witness (both records) to a temporary file, then
    /// renames it into place and syncs the folder: a crash meanwhile leaves
    /// no witness rather than a torn one, which would refuse the store.
    pub(crate) fn create(path: &Path, seen: Seen) -> std::io::Result<Witness> {
        let mut tmp_name = path.as_os_str().to_owned();
        tmp_name.push(".tmp");
        let tmp = PathBuf::from(tmp_name);
        let mut bytes = vec![0u8; FILE_LEN];
        bytes[..RECORD_LEN].copy_from_slice(&encode(seen));
        let at = SECOND_RECORD_AT as usize;
        bytes[at..at + RECORD_LEN].copy_from_slice(&encode(seen));
        {
            let mut file = private_options().write(true).create(true).truncate(true).open(&tmp)?;
            file.write_all(&bytes)?;
            file.sync_all()?;
        }
        std::fs::rename(&tmp, path)?;
        sync_folder(path)?;
        Witness::open(path, seen.store_id)
    }

    /// The existing witness of the store `store_id`, to write records into.
    pub(crate) fn open(path: &Path, store_id: [u8; 16]) -> std::io::Result<Witness> {
        let file = std::fs::OpenOptions::new().write(true).open(path)?;
        Ok(Witness { file, path: path.to_path_buf(), store_id })
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Records that the store has committed `writes` write transactions:
    /// in place, in record `writes % 2`, and synced before it returns.
    pub(crate) fn record(&mut self, writes: u64) -> std::io::Result<()> {
        let at = if writes % 2 == 0 { 0 } else { SECOND_RECORD_AT };
        self.file.seek(SeekFrom::Start(at))?;
        self.file.write_all(&encode(Seen { store_id: self.store_id, writes }))?;
        // Only the data: the file's size and place never change.
        self.file.sync_data()
    }
}

fn private_options() -> std::fs::OpenOptions {
    #[allow(unused_mut)] // narrowed on Unix only
    let mut options = std::fs::OpenOptions::new();
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    options
}

/// Makes a rename in the folder of `path` durable (a no-op where folders
/// cannot be opened, as on Windows).
fn sync_folder(path: &Path) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        let folder = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        File::open(folder)?.sync_all()?;
    }
    #[cfg(not(unix))]
    let _ = path;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_round_trips_and_any_changed_byte_spoils_it() {
        let seen = Seen { store_id: [7; 16], writes: 12_345 };
        let record = encode(seen);
        assert_eq!(decode(&record), Some(seen));
        for i in 0..RECORD_LEN {
            let mut bad = record;
            bad[i] ^= 0x40;
            assert_eq!(decode(&bad), None, "byte {i}");
        }
        assert_eq!(decode(&record[..RECORD_LEN - 1]), None, "short");
    }
}
