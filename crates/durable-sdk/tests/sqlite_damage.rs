//! A damaged SQLite receipt store is never taken as a fresh one: each
//! damage of the attack list (the database emptied or deleted, its WAL cut
//! or scribbled after acknowledged writes, the database replaced by
//! another store's or rolled back, the witness damaged) is refused at open
//! with a message naming the file and the damage; what is not damage (a
//! fresh store reopened, an upgrade from a store without witness, a crash
//! between the database's commit and the witness's write) is accepted.
//!
//! A live store's files are copied to another folder and damaged there: the
//! copy holds what a `SIGKILL` would leave (the WAL not checkpointed), and
//! the store's own thread never sees the damage.
#![cfg(feature = "sqlite-receipts")]

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use durable_sdk::stores::{Lookup, Receipt, ReceiptStore, SqliteReceiptStore};
use serde_json::json;

const DB: &str = "receipts.sqlite3";
const WAL: &str = "receipts.sqlite3-wal";
const WITNESS: &str = "receipts.sqlite3.witness";

struct TempDir(PathBuf);

impl TempDir {
    fn new() -> TempDir {
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "durable-sqlite-damage-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    fn file(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }

    fn db(&self) -> PathBuf {
        self.file(DB)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn receipt(n: usize) -> Receipt {
    Receipt::of_json(200, &json!({"ok": true, "result": "sent", "n": n, "replayed": false}))
}

async fn put_range(store: &SqliteReceiptStore, ids: std::ops::Range<usize>) {
    for n in ids {
        store.put(&format!("r-{n}"), receipt(n), "pane:ticket-1").await.unwrap();
    }
}

/// Copies these files of `from` (those that exist) into `to`, as a crash
/// would leave them.
fn copy(from: &TempDir, to: &TempDir, names: &[&str]) {
    for name in names {
        if from.file(name).exists() {
            std::fs::copy(from.file(name), to.file(name)).unwrap();
        }
    }
}

/// A live store that acknowledged `r-0`…`r-15` (16 writes), still open,
/// and a copy of its database, WAL and witness in another folder.
async fn live_copy() -> (TempDir, SqliteReceiptStore, TempDir) {
    let live = TempDir::new();
    let store = SqliteReceiptStore::open(live.db()).unwrap();
    put_range(&store, 0..16).await;
    let copy_dir = TempDir::new();
    copy(&live, &copy_dir, &[DB, WAL, WITNESS]);
    (live, store, copy_dir)
}

fn refusal(path: &Path) -> String {
    SqliteReceiptStore::open(path).expect_err("a damaged store is refused").to_string()
}

/// What every refusal says: the file, and the two ways out.
fn assert_names_file_and_remedy(err: &str) {
    assert!(err.contains(DB), "names the database: {err}");
    assert!(err.contains("from a backup"), "says to restore: {err}");
    assert!(
        err.contains(&format!("delete {DB}, {DB}-wal, {DB}-shm and {WITNESS}")),
        "says what to delete: {err}"
    );
    assert!(err.contains("would then run again"), "says what starting fresh costs: {err}");
}

async fn assert_all_found(store: &SqliteReceiptStore, ids: std::ops::Range<usize>) {
    for n in ids {
        assert_eq!(store.get(&format!("r-{n}")).await.unwrap(), Lookup::Found(receipt(n)), "r-{n}");
    }
}

#[tokio::test]
async fn a_fresh_store_reopened_is_accepted_and_keeps_its_receipts() {
    let dir = TempDir::new();
    let store = SqliteReceiptStore::open(dir.db()).unwrap();
    put_range(&store, 0..3).await;
    drop(store);
    assert!(dir.file(WITNESS).exists(), "the witness is beside the database");
    for _ in 0..2 {
        let store = SqliteReceiptStore::open(dir.db()).unwrap();
        assert_all_found(&store, 0..3).await;
    }
}

#[tokio::test]
async fn the_wal_of_a_live_store_holds_the_acknowledged_writes_and_its_copy_opens() {
    // The premise of the WAL cases below: the copy is intact and complete.
    let (_live, _store, copy_dir) = live_copy().await;
    let wal = std::fs::metadata(copy_dir.file(WAL)).unwrap().len();
    assert!(wal > 16 * 4096, "the writes are in the WAL, not checkpointed: {wal} bytes");
    let store = SqliteReceiptStore::open(copy_dir.db()).unwrap();
    assert_all_found(&store, 0..16).await;
}

#[tokio::test]
async fn a_database_emptied_to_zero_bytes_is_refused_and_left_as_found() {
    let dir = TempDir::new();
    let store = SqliteReceiptStore::open(dir.db()).unwrap();
    put_range(&store, 0..16).await;
    drop(store);
    std::fs::File::create(dir.db()).unwrap(); // truncated
    let err = refusal(&dir.db());
    assert!(err.contains("emptied") && err.contains("0 bytes") && err.contains("16 writes"), "{err}");
    assert_names_file_and_remedy(&err);
    assert_eq!(std::fs::metadata(dir.db()).unwrap().len(), 0, "not written to");
    // Refused again: nothing was recreated meanwhile.
    assert!(refusal(&dir.db()).contains("emptied"));
}

#[tokio::test]
async fn a_database_emptied_beside_its_live_wal_is_refused_and_the_wal_kept() {
    let (_live, _store, copy_dir) = live_copy().await;
    std::fs::File::create(copy_dir.db()).unwrap();
    let wal = std::fs::metadata(copy_dir.file(WAL)).unwrap().len();
    let err = refusal(&copy_dir.db());
    assert!(err.contains("emptied"), "{err}");
    // SQLite would have deleted the WAL beside an empty database.
    assert_eq!(std::fs::metadata(copy_dir.file(WAL)).unwrap().len(), wal);
}

#[tokio::test]
async fn a_database_deleted_with_its_witness_left_is_refused_and_not_recreated() {
    let dir = TempDir::new();
    let store = SqliteReceiptStore::open(dir.db()).unwrap();
    put_range(&store, 0..4).await;
    drop(store);
    std::fs::remove_file(dir.db()).unwrap();
    let err = refusal(&dir.db());
    assert!(err.contains("missing") && err.contains("deleted") && err.contains("4 writes"), "{err}");
    assert_names_file_and_remedy(&err);
    assert!(!dir.db().exists(), "no new database was made");
}

#[tokio::test]
async fn a_wal_cut_in_half_after_acknowledged_writes_is_refused_as_a_rollback() {
    let (_live, _store, copy_dir) = live_copy().await;
    let wal = std::fs::OpenOptions::new().write(true).open(copy_dir.file(WAL)).unwrap();
    let len = wal.metadata().unwrap().len();
    wal.set_len(len / 2).unwrap();
    let err = refusal(&copy_dir.db());
    assert!(err.contains("rolled back from 16 to"), "{err}");
    assert_names_file_and_remedy(&err);
}

#[tokio::test]
async fn a_wal_scribbled_in_its_middle_is_refused_as_a_rollback() {
    use std::io::{Seek, SeekFrom, Write};
    let (_live, _store, copy_dir) = live_copy().await;
    let mut wal = std::fs::OpenOptions::new().write(true).open(copy_dir.file(WAL)).unwrap();
    let len = wal.metadata().unwrap().len();
    wal.seek(SeekFrom::Start(len / 2)).unwrap();
    wal.write_all(&[0xA5; 512]).unwrap();
    drop(wal);
    let err = refusal(&copy_dir.db());
    assert!(err.contains("rolled back from 16 to"), "{err}");
}

#[tokio::test]
async fn a_database_replaced_by_another_stores_is_refused() {
    let (a, b) = (TempDir::new(), TempDir::new());
    for dir in [&a, &b] {
        let store = SqliteReceiptStore::open(dir.db()).unwrap();
        put_range(&store, 0..20).await; // b is even ahead of a's witness
        drop(store);
    }
    copy(&b, &a, &[DB]);
    let err = refusal(&a.db());
    assert!(err.contains("replaced by another store"), "{err}");
    assert_names_file_and_remedy(&err);
}

#[tokio::test]
async fn a_database_replaced_by_one_without_identity_is_refused() {
    let dir = TempDir::new();
    let store = SqliteReceiptStore::open(dir.db()).unwrap();
    put_range(&store, 0..2).await;
    drop(store);
    std::fs::remove_file(dir.db()).unwrap();
    rusqlite::Connection::open(dir.db()).unwrap().execute_batch("CREATE TABLE other (x INTEGER);").unwrap();
    let err = refusal(&dir.db());
    assert!(err.contains("no store identity") && err.contains("emptied or replaced"), "{err}");
}

#[tokio::test]
async fn an_older_copy_of_the_database_with_the_newer_witness_is_refused_naming_both_counts() {
    let live = TempDir::new();
    let older = TempDir::new();
    let store = SqliteReceiptStore::open(live.db()).unwrap();
    put_range(&store, 0..8).await;
    copy(&live, &older, &[DB, WAL]);
    put_range(&store, 8..16).await;
    copy(&live, &older, &[WITNESS]);
    let err = refusal(&older.db());
    assert!(err.contains("rolled back from 16 to 8 commits") && err.contains("last 8"), "{err}");
    assert_names_file_and_remedy(&err);
}

#[tokio::test]
async fn a_crash_between_the_database_commit_and_the_witness_write_is_accepted() {
    // The database one commit ahead of its witness: the write never
    // returned, so it was never acknowledged.
    let (live, crashed, at_8) = (TempDir::new(), TempDir::new(), TempDir::new());
    let store = SqliteReceiptStore::open(live.db()).unwrap();
    put_range(&store, 0..8).await;
    copy(&live, &crashed, &[WITNESS]);
    copy(&live, &at_8, &[DB, WAL]);
    put_range(&store, 8..9).await;
    copy(&live, &crashed, &[DB, WAL]);
    let reopened = SqliteReceiptStore::open(crashed.db()).unwrap();
    assert_all_found(&reopened, 0..9).await;
    drop(reopened);
    // The witness caught up at that open: going back to 8 is now a rollback.
    copy(&crashed, &at_8, &[WITNESS]);
    let err = refusal(&at_8.db());
    assert!(err.contains("rolled back from 9 to 8"), "{err}");
}

#[tokio::test]
async fn a_witness_with_both_records_damaged_is_refused_with_its_own_message() {
    let dir = TempDir::new();
    let store = SqliteReceiptStore::open(dir.db()).unwrap();
    put_range(&store, 0..3).await;
    drop(store);
    let mut bytes = std::fs::read(dir.file(WITNESS)).unwrap();
    bytes[40] ^= 1;
    bytes[512 + 40] ^= 1;
    std::fs::write(dir.file(WITNESS), &bytes).unwrap();
    let err = refusal(&dir.db());
    assert!(err.contains(WITNESS) && err.contains("unreadable") && err.contains("intact"), "{err}");
    assert!(err.contains(&format!("delete {WITNESS} alone")), "{err}");
    // Not silently recreated: refused again.
    assert!(refusal(&dir.db()).contains("unreadable"));
}

#[tokio::test]
async fn a_witness_with_one_record_damaged_is_read_from_the_other() {
    let dir = TempDir::new();
    let store = SqliteReceiptStore::open(dir.db()).unwrap();
    put_range(&store, 0..3).await; // 3 writes: the last in the second record
    drop(store);
    let mut bytes = std::fs::read(dir.file(WITNESS)).unwrap();
    bytes[512 + 10] ^= 0xff; // a torn write of the newest record
    std::fs::write(dir.file(WITNESS), &bytes).unwrap();
    let store = SqliteReceiptStore::open(dir.db()).unwrap();
    assert_all_found(&store, 0..3).await;
}

#[test]
fn a_witness_of_any_bytes_is_refused_without_a_panic() {
    let dir = TempDir::new();
    drop(SqliteReceiptStore::open(dir.db()).unwrap());
    let mut noise = 0x2545_f491_4f6c_dd1d_u64;
    for len in [0usize, 1, 63, 64, 511, 576, 1024, 1025, 5000] {
        let bytes: Vec<u8> = (0..len)
            .map(|_| {
                noise ^= noise << 13;
                noise ^= noise >> 7;
                noise ^= noise << 17;
                noise as u8
            })
            .collect();
        std::fs::write(dir.file(WITNESS), &bytes).unwrap();
        let err = refusal(&dir.db());
        assert!(err.contains("unreadable"), "{len} bytes: {err}");
    }
}

#[tokio::test]
async fn a_database_failing_quick_check_is_refused_naming_the_problem() {
    let dir = TempDir::new();
    let store = SqliteReceiptStore::open(dir.db()).unwrap();
    put_range(&store, 0..200).await;
    drop(store); // checkpointed: every page in the database file
    let mut bytes = std::fs::read(dir.db()).unwrap();
    assert!(bytes.len() > 8 * 4096, "{} bytes", bytes.len());
    // Scribble a whole page in the middle, past the schema's: an index or
    // table page, its header included (a part of a page may be the unused
    // gap between its cells, which no check reads).
    let at = bytes.len() / 4096 / 2 * 4096;
    for b in &mut bytes[at..at + 4096] {
        *b = 0x5a;
    }
    std::fs::write(dir.db(), &bytes).unwrap();
    let err = refusal(&dir.db());
    assert!(
        err.contains("is damaged") && (err.contains("quick_check") || err.contains("cannot read")),
        "{err}"
    );
    assert_names_file_and_remedy(&err);
}

#[tokio::test]
async fn a_deleted_witness_is_written_again_which_is_a_documented_limit() {
    let dir = TempDir::new();
    let store = SqliteReceiptStore::open(dir.db()).unwrap();
    put_range(&store, 0..4).await;
    drop(store);
    std::fs::remove_file(dir.file(WITNESS)).unwrap();
    let store = SqliteReceiptStore::open(dir.db()).unwrap();
    assert_all_found(&store, 0..4).await;
    drop(store);
    assert!(dir.file(WITNESS).exists());
}
