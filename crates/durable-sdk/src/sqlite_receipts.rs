//! [`SqliteReceiptStore`]: receipts kept in an SQLite file, so that a replay
//! after a restart still returns the first answer (contract §9).
//!
//! # Durability
//! The database runs in WAL mode with `synchronous = FULL`: every write
//! (`put`, a send's state, a kept ask, a conversation's batch) is committed
//! in a transaction that fsyncs the write-ahead log, so a receipt
//! survives a crash of the process *and* a power loss once `put` has
//! returned — and the core sends the response only after that. `NORMAL`
//! would save that fsync but may lose the last commits on a power loss,
//! which would let a replayed request run twice; receipts are written at
//! the pace of a person tapping a phone, so the fsync costs nothing that
//! matters.
//!
//! # Damage
//! A damaged store is never taken as a fresh one. Without a check, a
//! database truncated to 0 bytes opens as a new, empty store, and a WAL cut
//! short replays its intact prefix — an earlier, consistent state that
//! `PRAGMA quick_check` finds nothing wrong with: either way every lost
//! receipt's request id would run again as new.
//!
//! So the store keeps a **witness** beside the database,
//! `<database>.witness` (`receipts.sqlite3.witness`): the store's random id
//! (128 bits, made when the store is) and the number of write transactions
//! it had committed at its last acknowledged write, twice, each copy with
//! its SHA-256. The database holds the same id and its own count (table
//! `store_identity`, layout version 3); every transaction that changes the
//! store — a receipt, a send recorded or moved on, an ask kept or
//! forgotten, a batch of conversation changes, or several of those
//! committed together — adds one to the count. After it commits
//! (fsyncing the WAL) the witness is written and synced, *then* the calls
//! return: every acknowledged write is covered by the witness. A crash
//! between the two leaves the database one commit ahead, writes never
//! acknowledged, which is fine; a witness *ahead* of the database means commits were lost.
//!
//! [`open`](SqliteReceiptStore::open) refuses, with a [`StoreError`] naming
//! the file, the damage and what to do (restore the database and its
//! witness from a backup; or, knowing that every acknowledged request
//! would then run again, delete the database, its `-wal` and `-shm` and the
//! witness to start fresh), a database that is:
//! - missing, or 0 bytes, beside a witness (deleted, emptied; checked
//!   before SQLite opens it, which would take it as new and delete a WAL
//!   left beside it);
//! - without a store identity beside a witness (emptied or replaced);
//! - another store's (its id differs: replaced);
//! - behind its witness (rolled back from N to M commits: a WAL cut or
//!   scribbled, an older copy restored alone);
//! - failing SQLite's `quick_check` (the first problem it reports), or
//!   unreadable to SQLite;
//!
//! and, with a message of its own, a witness neither of whose records is
//! intact (it is not silently written again). A refused store is left as
//! it was found: no checkpoint at close, no file created.
//!
//! Accepted: a new database without a witness (both are created); a
//! database of an SDK that wrote no witness (an upgrade: accepted, an
//! `info` log line, the witness created); a database ahead of its witness.
//!
//! **The witness's write.** Two fixed records, 512 bytes apart, written in
//! place by turns (commit `n` to record `n % 2`) and `fdatasync`ed: one
//! sync per commit, where a new file renamed into place would need the
//! file's and the folder's; a write torn by a crash spoils one record and
//! leaves the other, one commit older, which the database is then ahead of.
//! Only the witness's creation goes through a temporary file and a rename,
//! so that a crash then leaves no witness rather than an unreadable one.
//! The cost per write: `docs/benchmarks.md`, "The SQLite store's witness".
//!
//! **What cannot be seen.** Both files replaced by an older pair that
//! agrees (a backup restored whole: its later receipts are gone without a
//! trace); the witness deleted along with the damage, or a database moved
//! or copied elsewhere without its witness (a database with an identity
//! and no witness is accepted with a `warn` line, as its loss cannot be
//! told from a move); an upgrade's database damaged before its first open
//! by this SDK; damage that leaves the count and id intact but changes a
//! receipt's content and passes `quick_check`; a witness whose newest
//! record alone is damaged, when the database lost just that commit (the
//! writes committed together in it, up to 64). The
//! PostgreSQL store (`PgReceiptStore`) has none of
//! this: a server database has its own guarantees (replication, backups,
//! point-in-time recovery).
//!
//! # Sends
//! The store also keeps every acknowledged send until its turn is over
//! (contract §9.1): a restart then delivers the sends still queued and
//! closes, with a notice, those whose turn it cut; a send's replay says
//! where it stands (the `Durable-Delivery` header). Finished sends are kept for that, the
//! newest 100,000.
//!
//! # Conversations
//! Each pane's conversation is kept too (layout version 4, tables
//! `conversation` and `conversation_item`): its items as last written, in
//! order, each as its JSON text, and its title; the 2,000 newest items
//! ([`KEPT_ITEMS_PER_CONVERSATION`]), older ones dropped and the
//! conversation marked so; and the [`KEPT_CONVERSATIONS`] conversations
//! written to last (or as many as
//! [`with_kept_conversations`](SqliteReceiptStore::with_kept_conversations)
//! says), the one written to least recently forgotten whole past them.
//! The core hands the changes over in batches, one
//! transaction each, and reads a pane's back as the pane is first declared
//! in a run (the wire, §9.2). Each conversation keeps when it started and
//! was last written (layout version 5), and history lists them newest
//! first with no provider (§10). An item whose text no longer reads is skipped
//! with a warning.
//!
//! # Threading
//! SQLite calls block. The store owns one connection on a dedicated thread
//! and talks to it through a channel: `get` and `put` send a command and
//! await the reply on a oneshot, so no executor thread ever waits on the
//! disk, and the store works with any async runtime (it spawns nothing on
//! one). Commands run in order. Writes that queued up while the thread was
//! busy are committed together (a group commit, at most 64): one
//! transaction, each write in a savepoint of its own (one that fails is
//! undone alone and gets its error; the others go on — and when its error
//! ends the whole transaction, a full disk say, each of the others runs
//! again in a transaction of its own), one flush of the
//! WAL and one of the witness; every write of the group hears `Ok` only
//! after both. Writes that arrive together — several panes' turns at once —
//! then share their flushes rather than wait in line for one each
//! (`docs/benchmarks.md`, "Group commit"). A read that came behind them
//! runs after their commit. Dropping the store lets the thread finish the
//! commands already sent, closes the database and joins the thread.
//!
//! # Eviction
//! The same as [`MemoryReceiptStore`](crate::stores::MemoryReceiptStore):
//! each group keeps its `per_group` most recent receipts (default
//! [`RECEIPTS_PER_GROUP`]); an evicted id is remembered — a repeat gets
//! [`Lookup::Evicted`], so the core answers `500 receipt-dropped` and runs
//! nothing — until `10 × per_group` further ids of its group have passed.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::thread::JoinHandle;

use durable_runtime::{
    ConversationOp, KEPT_CONVERSATIONS, KEPT_ITEMS_PER_CONVERSATION, KeptAskRecord, KeptConversation,
    KeptConversationRow, Lookup, PendingSend, Receipt, ReceiptStore, RowPlace, SendState, StoreError,
};
use durable_types::{EVICTED_MEMORY_FACTOR, Item, RECEIPTS_PER_GROUP, Timestamp};
use rusqlite::config::DbConfig;
use rusqlite::{Connection, OptionalExtension, Transaction, TransactionBehavior, params};
use tokio::sync::oneshot;

use crate::sqlite_witness::{self, Found, Seen, Witness};

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS receipt (
    request_id TEXT PRIMARY KEY NOT NULL,
    grp TEXT NOT NULL,
    seq INTEGER NOT NULL,
    status INTEGER NOT NULL,
    body TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS receipt_by_group ON receipt (grp, seq);
CREATE TABLE IF NOT EXISTS evicted (
    request_id TEXT PRIMARY KEY NOT NULL,
    grp TEXT NOT NULL,
    seq INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS evicted_by_group ON evicted (grp, seq);
CREATE TABLE IF NOT EXISTS receipt_group (
    grp TEXT PRIMARY KEY NOT NULL,
    last_seq INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS pending_send (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    request_id TEXT UNIQUE NOT NULL,
    pane TEXT NOT NULL,
    text TEXT NOT NULL,
    state TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS pending_send_by_state ON pending_send (state, seq);
";

/// The layout this SDK writes, in SQLite's `user_version`: version 1 is
/// the receipts, evicted ids, groups and the sends journal, which
/// SDKs before this one wrote as version 0; version 2 adds the kept asks;
/// version 3 the store's identity (its id and write count, which the
/// witness is checked against: see "Damage" in the module's docs);
/// version 4 the conversations; version 5 when each conversation started
/// and was last written (history's rows).
/// A newer file is refused: this SDK would not know its meaning.
pub const SQLITE_SCHEMA_VERSION: i64 = 5;

/// Version 2: the asks open at a stop, each as its record's JSON text.
const KEPT_ASKS: &str = "
CREATE TABLE IF NOT EXISTS kept_ask (
    ask_id TEXT PRIMARY KEY NOT NULL,
    seq INTEGER NOT NULL,
    body TEXT NOT NULL
);
";

/// Version 3: one row, the store's random id and the write transactions it
/// has committed (each commit that changes the store bumps `writes`).
const STORE_IDENTITY: &str = "
CREATE TABLE IF NOT EXISTS store_identity (
    only_row INTEGER PRIMARY KEY CHECK (only_row = 1),
    store_id BLOB NOT NULL,
    writes INTEGER NOT NULL
);
";

/// Version 4: each pane's conversation — its title, its item count, the
/// next item's place, whether older items were dropped, whether the phone
/// gave its title, when it was last
/// written to (a count: the store forgets the oldest past its bound) — and
/// its items as last written, each as its JSON text, by place.
const CONVERSATIONS: &str = "
CREATE TABLE IF NOT EXISTS conversation (
    pane TEXT PRIMARY KEY NOT NULL,
    title TEXT,
    title_by_phone INTEGER NOT NULL DEFAULT 0,
    items INTEGER NOT NULL DEFAULT 0,
    next_place INTEGER NOT NULL DEFAULT 0,
    dropped INTEGER NOT NULL DEFAULT 0,
    written INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS conversation_by_written ON conversation (written);
CREATE TABLE IF NOT EXISTS conversation_item (
    pane TEXT NOT NULL,
    item_id TEXT NOT NULL,
    place INTEGER NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (pane, item_id)
);
CREATE INDEX IF NOT EXISTS conversation_item_by_place ON conversation_item (pane, place);
";

/// Version 5: when each conversation started and was last written to, in
/// milliseconds since the Unix epoch by the program's clock (history's
/// `startedAt` and `endedAt`), and the rows' order (newest first).
const CONVERSATION_TIMES: &str = "
ALTER TABLE conversation ADD COLUMN started_at INTEGER NOT NULL DEFAULT 0;
ALTER TABLE conversation ADD COLUMN written_at INTEGER NOT NULL DEFAULT 0;
CREATE INDEX IF NOT EXISTS conversation_by_start ON conversation (started_at, pane);
";

/// Finished sends (`done`, `closed`) kept for replays to say so; older ones
/// are forgotten (their replay then has no `Durable-Delivery` header).
const FINISHED_SENDS_KEPT: i64 = 100_000;

enum Command {
    Get {
        request_id: String,
        reply: oneshot::Sender<Result<Lookup, StoreError>>,
    },
    Put {
        request_id: String,
        receipt: Receipt,
        group: String,
        reply: oneshot::Sender<Result<(), StoreError>>,
    },
    RecordSend {
        send: PendingSend,
        reply: oneshot::Sender<Result<(), StoreError>>,
    },
    SetSendState {
        request_id: String,
        state: SendState,
        reply: oneshot::Sender<Result<(), StoreError>>,
    },
    SendState {
        request_id: String,
        reply: oneshot::Sender<Result<Option<SendState>, StoreError>>,
    },
    Unfinished {
        reply: oneshot::Sender<Result<Vec<PendingSend>, StoreError>>,
    },
    KeepAsk {
        ask_id: String,
        body: String,
        reply: oneshot::Sender<Result<(), StoreError>>,
    },
    ForgetAsk {
        ask_id: String,
        reply: oneshot::Sender<Result<(), StoreError>>,
    },
    KeptAsks {
        reply: oneshot::Sender<Result<Vec<KeptAskRecord>, StoreError>>,
    },
    KeepConversation {
        ops: Vec<ConversationOp>,
        at: Timestamp,
        /// The conversations to keep, at most.
        kept: usize,
        /// Sends recorded `done` after the changes, in the same transaction.
        ended: Vec<String>,
        reply: oneshot::Sender<Result<(), StoreError>>,
    },
    ConversationRows {
        after: Option<RowPlace>,
        limit: usize,
        reply: oneshot::Sender<Result<Vec<KeptConversationRow>, StoreError>>,
    },
    KeptConversation {
        pane: String,
        reply: oneshot::Sender<Result<Option<KeptConversation>, StoreError>>,
    },
}

/// A [`ReceiptStore`] in an SQLite file (feature `sqlite-receipts`).
///
/// ```no_run
/// use durable_sdk::stores::SqliteReceiptStore;
/// use durable_sdk::{CoreOptions, Transport, create_core};
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let store = SqliteReceiptStore::open("/var/lib/my-agent/receipts.sqlite3")?;
/// let collie = create_core(CoreOptions::builder().host_name("desk").receipts(store))?;
/// // … the layout and handlers …
/// collie.serve(Transport::socket()).await?;
/// collie.ready();
/// # Ok(()) }
/// ```
pub struct SqliteReceiptStore {
    path: PathBuf,
    per_group: usize,
    kept_conversations: usize,
    tx: Option<mpsc::Sender<Command>>,
    thread: Option<JoinHandle<()>>,
}

impl fmt::Debug for SqliteReceiptStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SqliteReceiptStore")
            .field("path", &self.path)
            .field("per_group", &self.per_group)
            .field("kept_conversations", &self.kept_conversations)
            .finish_non_exhaustive()
    }
}

fn sql_err(what: &str, e: rusqlite::Error) -> StoreError {
    StoreError::new(format!("sqlite: {what}: {e}"))
}

/// An error while opening: it names the file, and a file SQLite cannot
/// read is reported as damage, with what to do.
fn open_err(path: &Path, what: &str, e: rusqlite::Error) -> StoreError {
    use rusqlite::ErrorCode::{DatabaseCorrupt, NotADatabase};
    match e.sqlite_error_code() {
        Some(DatabaseCorrupt | NotADatabase) => {
            damaged(path, &format!("SQLite cannot read it ({what}: {e})"))
        }
        _ => StoreError::new(format!("sqlite: {}: {what}: {e}", path.display())),
    }
}

/// The file name of `path`, as the advice in messages spells it.
fn file_name(path: &Path) -> String {
    path.file_name().map_or_else(|| path.display().to_string(), |n| n.to_string_lossy().into_owned())
}

/// The refusal of a damaged database: the file, the damage, what to do.
fn damaged(path: &Path, damage: &str) -> StoreError {
    let name = file_name(path);
    let witness = file_name(&sqlite_witness::path_for(path));
    StoreError::new(format!(
        "sqlite: the receipts database {} is damaged: {damage}. It is not opened, since the requests it \
         acknowledged would run again as new. Restore {name} (with its -wal file, if any) and {witness} \
         together from a backup; or, to start fresh — knowing that every acknowledged request would \
         then run again — delete {name}, {name}-wal, {name}-shm and {witness}",
        path.display()
    ))
}

/// What the witness said before SQLite opened the file, or the refusal of
/// a database it says was deleted or emptied. A file of 0 bytes is refused
/// before SQLite sees it: SQLite would take it as a new database (and
/// delete a WAL left beside it).
fn check_before_open(path: &Path, witness_path: &Path) -> Result<Option<Seen>, StoreError> {
    let seen = match sqlite_witness::read(witness_path) {
        Found::Missing => return Ok(None),
        Found::Intact(seen) => seen,
        Found::Unreadable(why) => {
            let name = file_name(path);
            let witness = file_name(witness_path);
            return Err(StoreError::new(format!(
                "sqlite: the witness {} of the receipts database {name} is unreadable: {why}. The \
                 database cannot be checked against it, so it is not opened. Restore {name} and \
                 {witness} together from a backup; or, if {name} is known to be intact, delete \
                 {witness} alone (a new one is written, and damage from before cannot be seen); or, to \
                 start fresh — knowing that every acknowledged request would then run again — delete \
                 {name}, {name}-wal, {name}-shm and {witness}",
                witness_path.display()
            )));
        }
    };
    match std::fs::metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(damaged(
            path,
            &format!("the file is missing, but its witness records {} writes: it was deleted", seen.writes),
        )),
        Err(e) => Err(StoreError::new(format!("sqlite: {}: {e}", path.display()))),
        Ok(meta) if meta.len() == 0 => Err(damaged(
            path,
            &format!("it is empty (0 bytes), but its witness records {} writes: it was emptied", seen.writes),
        )),
        Ok(_) => Ok(Some(seen)),
    }
}

/// The store's identity in the database: `None` when it has none (a new
/// file, or one written before version 3).
fn identity(conn: &Connection) -> Result<Option<Seen>, rusqlite::Error> {
    let table = conn
        .query_row("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'store_identity'", [], |_| {
            Ok(())
        })
        .optional()?;
    if table.is_none() {
        return Ok(None);
    }
    let row: Option<(Vec<u8>, i64)> = conn
        .query_row("SELECT store_id, writes FROM store_identity WHERE only_row = 1", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .optional()?;
    Ok(row.and_then(|(id, writes)| {
        let store_id: [u8; 16] = id.try_into().ok()?;
        Some(Seen { store_id, writes: u64::try_from(writes).ok()? })
    }))
}

/// How the database stood against its witness at open, when it passed.
enum Standing {
    /// Both agree (the database may be ahead: its last writes were never
    /// acknowledged, or their witness write failed).
    Witnessed,
    /// No witness and no database yet.
    Fresh,
    /// No witness and a database from an SDK that wrote none.
    Upgraded,
    /// No witness, but the database has an identity: the witness was
    /// deleted, or the database moved without it.
    WitnessLost,
}

/// SQLite's `quick_check`, then the database's identity and write count
/// against the witness's.
fn check_against_witness(conn: &Connection, path: &Path, seen: Option<Seen>) -> Result<Standing, StoreError> {
    let check: String = conn
        .query_row("PRAGMA quick_check(1)", [], |r| r.get(0))
        .map_err(|e| open_err(path, "quick_check", e))?;
    if check != "ok" {
        // Its report spans lines; the message keeps to one.
        let report = check.lines().map(str::trim).collect::<Vec<_>>().join(" ");
        return Err(damaged(path, &format!("SQLite's quick_check finds: {report}")));
    }
    let found = identity(conn).map_err(|e| open_err(path, "store identity", e))?;
    let Some(seen) = seen else {
        if found.is_some() {
            return Ok(Standing::WitnessLost);
        }
        let tables: i64 = conn
            .query_row("SELECT COUNT(*) FROM sqlite_master", [], |r| r.get(0))
            .map_err(|e| open_err(path, "tables", e))?;
        return Ok(if tables == 0 { Standing::Fresh } else { Standing::Upgraded });
    };
    let Some(found) = found else {
        return Err(damaged(
            path,
            &format!(
                "it holds no store identity, but its witness records {} writes of store {}: it was \
                 emptied or replaced",
                seen.writes,
                sqlite_witness::hex(&seen.store_id)
            ),
        ));
    };
    if found.store_id != seen.store_id {
        return Err(damaged(
            path,
            &format!(
                "it is store {}, not store {} its witness names: it was replaced by another store's database",
                sqlite_witness::hex(&found.store_id),
                sqlite_witness::hex(&seen.store_id)
            ),
        ));
    }
    if found.writes < seen.writes {
        return Err(damaged(
            path,
            &format!(
                "it was rolled back from {} to {} commits (its witness records {}): the last {} \
                 acknowledged commits are lost",
                seen.writes,
                found.writes,
                seen.writes,
                seen.writes - found.writes
            ),
        ));
    }
    Ok(Standing::Witnessed)
}

/// The witness brought up to the database (just migrated), or created.
fn witness_after_open(
    conn: &Connection,
    path: &Path,
    witness_path: &Path,
    standing: Standing,
) -> Result<Witness, StoreError> {
    let io = |e: std::io::Error| {
        StoreError::new(format!("sqlite: cannot write the witness {}: {e}", witness_path.display()))
    };
    let seen = identity(conn)
        .map_err(|e| open_err(path, "store identity", e))?
        .ok_or_else(|| StoreError::new(format!("sqlite: {}: the store has no identity", path.display())))?;
    match standing {
        Standing::Witnessed => {
            let mut witness = Witness::open(witness_path, seen.store_id).map_err(io)?;
            witness.record(seen.writes).map_err(io)?;
            return Ok(witness);
        }
        Standing::Fresh => {}
        Standing::Upgraded => tracing::info!(
            database = %path.display(),
            witness = %witness_path.display(),
            "sqlite: the receipts database had no witness (an SDK that kept none wrote it); one is created, and damage is seen from now on"
        ),
        // A store that never acknowledged a write loses nothing with its
        // witness (a crash between creating the two files, say).
        Standing::WitnessLost if seen.writes == 0 => {}
        Standing::WitnessLost => tracing::warn!(
            database = %path.display(),
            witness = %witness_path.display(),
            writes = seen.writes,
            "sqlite: the receipts database's witness is missing (deleted, or the database was moved without it); a new one is created, and damage from before cannot be seen"
        ),
    }
    Witness::create(witness_path, seen).map_err(io)
}

impl SqliteReceiptStore {
    /// Opens (or creates) the database at `path`, keeping
    /// [`RECEIPTS_PER_GROUP`] receipts per group. The folder must exist.
    /// Opening blocks briefly (it creates the schema and checks the file):
    /// call it at start-up.
    ///
    /// A database that is damaged — emptied, replaced by another store's,
    /// rolled back behind its witness, or failing SQLite's `quick_check` —
    /// is refused with an error that names the file, the damage and what
    /// to do; so is an unreadable witness (see "Damage" in the module's
    /// docs).
    pub fn open(path: impl AsRef<Path>) -> Result<Self, StoreError> {
        Self::open_with_capacity(path, RECEIPTS_PER_GROUP)
    }

    /// Like [`open`](Self::open), keeping `per_group` receipts per group
    /// (at least 1).
    pub fn open_with_capacity(path: impl AsRef<Path>, per_group: usize) -> Result<Self, StoreError> {
        Self::open_inner(path.as_ref(), per_group, true, GROUP_MAX)
    }

    /// The store as it was before witnesses: no checks at open, no witness
    /// written. Only for `cargo xtask bench --only stores`, which measures
    /// what the witness costs a write; a program never wants it.
    #[doc(hidden)]
    pub fn bench_open_without_witness(path: impl AsRef<Path>) -> Result<Self, StoreError> {
        Self::open_inner(path.as_ref(), RECEIPTS_PER_GROUP, false, GROUP_MAX)
    }

    /// The store as it was before group commits: each write in a
    /// transaction of its own. Only for `cargo xtask bench --only stores`,
    /// which measures what committing the writes queued together saves.
    #[doc(hidden)]
    pub fn bench_open_one_write_per_transaction(path: impl AsRef<Path>) -> Result<Self, StoreError> {
        Self::open_inner(path.as_ref(), RECEIPTS_PER_GROUP, true, 1)
    }

    fn open_inner(
        path: &Path,
        per_group: usize,
        witnessed: bool,
        group_max: usize,
    ) -> Result<Self, StoreError> {
        let path = path.to_path_buf();
        let per_group = per_group.max(1);
        let witness_path = sqlite_witness::path_for(&path);
        let seen = match witnessed {
            true => check_before_open(&path, &witness_path)?,
            false => None,
        };
        private_file(&path)?;
        let mut conn = Connection::open(&path).map_err(|e| open_err(&path, "open", e))?;
        // A refused store is left as it was found: no checkpoint of its WAL
        // at close (turned back on once the checks pass).
        conn.set_db_config(DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, true)
            .map_err(|e| open_err(&path, "no checkpoint on close", e))?;
        // WAL + FULL: a commit fsyncs the log before it returns (see the
        // module's documentation for why not NORMAL).
        let mode: String = conn
            .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
            .map_err(|e| open_err(&path, "journal_mode", e))?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(StoreError::new(format!(
                "sqlite: {}: the database would not switch to WAL (it is {mode})",
                path.display()
            )));
        }
        conn.pragma_update(None, "synchronous", "FULL").map_err(|e| open_err(&path, "synchronous", e))?;
        conn.busy_timeout(std::time::Duration::from_secs(5))
            .map_err(|e| open_err(&path, "busy_timeout", e))?;
        // Room for every statement the store runs (`exec`, `one` and the
        // conversations'), so none is prepared twice.
        conn.set_prepared_statement_cache_capacity(STATEMENTS_CACHED);
        let witness = match witnessed {
            true => {
                let standing = check_against_witness(&conn, &path, seen)?;
                migrate(&mut conn, &path)?;
                Some(witness_after_open(&conn, &path, &witness_path, standing)?)
            }
            false => {
                migrate(&mut conn, &path)?;
                None
            }
        };
        conn.set_db_config(DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, false)
            .map_err(|e| open_err(&path, "checkpoint on close", e))?;
        let (tx, rx) = mpsc::channel::<Command>();
        let mut worker_state = Worker { conn, witness, per_group, group_max };
        let thread = std::thread::Builder::new()
            .name("durable-receipts".into())
            .spawn(move || worker_state.run(rx))
            .map_err(|e| StoreError::new(format!("receipt store thread: {e}")))?;
        Ok(SqliteReceiptStore {
            path,
            per_group,
            kept_conversations: KEPT_CONVERSATIONS,
            tx: Some(tx),
            thread: Some(thread),
        })
    }

    /// Keeps the `n` conversations written to last (at least 1; the default
    /// is [`KEPT_CONVERSATIONS`]): past them, the one written to least
    /// recently is forgotten whole at the next batch that starts a new one.
    ///
    /// ```no_run
    /// use durable_sdk::stores::SqliteReceiptStore;
    /// # fn run() -> Result<(), durable_sdk::stores::StoreError> {
    /// let store = SqliteReceiptStore::open("/var/lib/my-agent/receipts.sqlite3")?.with_kept_conversations(500);
    /// assert_eq!(store.kept_conversations(), 500);
    /// # Ok(()) }
    /// ```
    #[must_use]
    pub fn with_kept_conversations(mut self, n: usize) -> Self {
        self.kept_conversations = n.max(1);
        self
    }

    /// How many conversations it keeps.
    pub fn kept_conversations(&self) -> usize {
        self.kept_conversations
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Receipts kept per group.
    pub fn per_group(&self) -> usize {
        self.per_group
    }

    fn send(&self, cmd: Command) -> Result<(), StoreError> {
        let gone = || StoreError::new("the receipt store's thread is gone");
        self.tx.as_ref().ok_or_else(gone)?.send(cmd).map_err(|_| gone())
    }
}

impl Drop for SqliteReceiptStore {
    fn drop(&mut self) {
        // Closing the channel ends the worker once it has run what was sent.
        self.tx.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl ReceiptStore for SqliteReceiptStore {
    async fn get(&self, request_id: &str) -> Result<Lookup, StoreError> {
        let (reply, rx) = oneshot::channel();
        self.send(Command::Get { request_id: request_id.to_owned(), reply })?;
        rx.await.map_err(|_| StoreError::new("the receipt store's thread stopped"))?
    }

    async fn put(&self, request_id: &str, receipt: Receipt, group: &str) -> Result<(), StoreError> {
        let (reply, rx) = oneshot::channel();
        self.send(Command::Put {
            request_id: request_id.to_owned(),
            receipt,
            group: group.to_owned(),
            reply,
        })?;
        rx.await.map_err(|_| StoreError::new("the receipt store's thread stopped"))?
    }

    async fn record_send(&self, send: PendingSend) -> Result<(), StoreError> {
        let (reply, rx) = oneshot::channel();
        self.send(Command::RecordSend { send, reply })?;
        rx.await.map_err(|_| StoreError::new("the receipt store's thread stopped"))?
    }

    async fn set_send_state(&self, request_id: &str, state: SendState) -> Result<(), StoreError> {
        let (reply, rx) = oneshot::channel();
        self.send(Command::SetSendState { request_id: request_id.to_owned(), state, reply })?;
        rx.await.map_err(|_| StoreError::new("the receipt store's thread stopped"))?
    }

    async fn send_state(&self, request_id: &str) -> Result<Option<SendState>, StoreError> {
        let (reply, rx) = oneshot::channel();
        self.send(Command::SendState { request_id: request_id.to_owned(), reply })?;
        rx.await.map_err(|_| StoreError::new("the receipt store's thread stopped"))?
    }

    async fn unfinished_sends(&self) -> Result<Vec<PendingSend>, StoreError> {
        let (reply, rx) = oneshot::channel();
        self.send(Command::Unfinished { reply })?;
        rx.await.map_err(|_| StoreError::new("the receipt store's thread stopped"))?
    }

    fn keeps_sends(&self) -> bool {
        true
    }

    fn keeps_asks(&self) -> bool {
        true
    }

    async fn keep_ask(&self, ask: KeptAskRecord) -> Result<(), StoreError> {
        let body = ask.to_json_text()?;
        let (reply, rx) = oneshot::channel();
        self.send(Command::KeepAsk { ask_id: ask.ask.id, body, reply })?;
        rx.await.map_err(|_| StoreError::new("the receipt store's thread stopped"))?
    }

    async fn forget_ask(&self, ask_id: &str) -> Result<(), StoreError> {
        let (reply, rx) = oneshot::channel();
        self.send(Command::ForgetAsk { ask_id: ask_id.to_owned(), reply })?;
        rx.await.map_err(|_| StoreError::new("the receipt store's thread stopped"))?
    }

    async fn kept_asks(&self) -> Result<Vec<KeptAskRecord>, StoreError> {
        let (reply, rx) = oneshot::channel();
        self.send(Command::KeptAsks { reply })?;
        rx.await.map_err(|_| StoreError::new("the receipt store's thread stopped"))?
    }

    fn keeps_conversations(&self) -> bool {
        true
    }

    async fn keep_conversation(&self, ops: Vec<ConversationOp>, at: Timestamp) -> Result<(), StoreError> {
        let (reply, rx) = oneshot::channel();
        self.send(Command::KeepConversation {
            ops,
            at,
            kept: self.kept_conversations,
            ended: Vec::new(),
            reply,
        })?;
        rx.await.map_err(|_| StoreError::new("the receipt store's thread stopped"))?
    }

    /// One transaction: the changes, then the sends `done` (a turn ends in
    /// one commit).
    async fn keep_conversation_and_end_sends(
        &self,
        ops: Vec<ConversationOp>,
        ended: Vec<String>,
        at: Timestamp,
    ) -> Result<(), StoreError> {
        let (reply, rx) = oneshot::channel();
        self.send(Command::KeepConversation { ops, at, kept: self.kept_conversations, ended, reply })?;
        rx.await.map_err(|_| StoreError::new("the receipt store's thread stopped"))?
    }

    async fn conversation_rows(
        &self,
        after: Option<RowPlace>,
        limit: usize,
    ) -> Result<Vec<KeptConversationRow>, StoreError> {
        let (reply, rx) = oneshot::channel();
        self.send(Command::ConversationRows { after, limit, reply })?;
        rx.await.map_err(|_| StoreError::new("the receipt store's thread stopped"))?
    }

    async fn kept_conversation(&self, pane: &str) -> Result<Option<KeptConversation>, StoreError> {
        let (reply, rx) = oneshot::channel();
        self.send(Command::KeptConversation { pane: pane.to_owned(), reply })?;
        rx.await.map_err(|_| StoreError::new("the receipt store's thread stopped"))?
    }
}

/// Brings the file to [`SQLITE_SCHEMA_VERSION`] in one transaction; a
/// store without an identity gets one (a random id, 0 writes).
fn migrate(conn: &mut Connection, path: &Path) -> Result<(), StoreError> {
    let err = |e| open_err(path, "schema", e);
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(err)?;
    let version: i64 = tx.query_row("PRAGMA user_version", [], |r| r.get(0)).map_err(err)?;
    if version > SQLITE_SCHEMA_VERSION {
        return Err(StoreError::new(format!(
            "sqlite: {}: the database is at layout version {version}, newer than this SDK's {SQLITE_SCHEMA_VERSION}: upgrade the SDK",
            path.display()
        )));
    }
    tx.execute_batch(SCHEMA).map_err(err)?;
    tx.execute_batch(KEPT_ASKS).map_err(|e| open_err(path, "schema version 2", e))?;
    tx.execute_batch(STORE_IDENTITY).map_err(|e| open_err(path, "schema version 3", e))?;
    tx.execute_batch(CONVERSATIONS).map_err(|e| open_err(path, "schema version 4", e))?;
    if version < 5 {
        tx.execute_batch(CONVERSATION_TIMES).map_err(|e| open_err(path, "schema version 5", e))?;
        // Conversations kept before times were: they started, as far as
        // this store can say, now.
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
        tx.execute("UPDATE conversation SET started_at = ?1, written_at = ?1", [now])
            .map_err(|e| open_err(path, "schema version 5", e))?;
    }
    let mut store_id = [0u8; 16];
    getrandom::fill(&mut store_id)
        .map_err(|e| StoreError::new(format!("sqlite: no random store id from the system: {e}")))?;
    tx.execute(
        "INSERT OR IGNORE INTO store_identity (only_row, store_id, writes) VALUES (1, ?1, 0)",
        [&store_id[..]],
    )
    .map_err(|e| open_err(path, "schema version 3", e))?;
    tx.pragma_update(None, "user_version", SQLITE_SCHEMA_VERSION).map_err(err)?;
    tx.commit().map_err(err)
}

fn keep_ask(conn: &Connection, ask_id: &str, body: &str) -> Result<(), StoreError> {
    conn.execute(
        "INSERT INTO kept_ask (ask_id, seq, body) VALUES (?1, (SELECT COALESCE(MAX(seq), 0) + 1 FROM kept_ask), ?2) \
         ON CONFLICT (ask_id) DO UPDATE SET body = excluded.body",
        params![ask_id, body],
    )
    .map_err(|e| sql_err("keep ask", e))?;
    Ok(())
}

/// Whether an ask was forgotten (it was kept).
fn forget_ask(conn: &Connection, ask_id: &str) -> Result<bool, StoreError> {
    let gone = conn
        .execute("DELETE FROM kept_ask WHERE ask_id = ?1", [ask_id])
        .map_err(|e| sql_err("forget ask", e))?;
    Ok(gone > 0)
}

/// The kept asks, and the ids of those whose record is damaged.
fn kept_asks(conn: &Connection) -> Result<(Vec<KeptAskRecord>, Vec<String>), StoreError> {
    let err = |e| sql_err("kept asks", e);
    let mut stmt = conn.prepare("SELECT ask_id, body FROM kept_ask ORDER BY seq").map_err(err)?;
    let rows = stmt.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))).map_err(err)?;
    let mut out = Vec::new();
    let mut damaged = Vec::new();
    for row in rows {
        let (ask_id, body) = row.map_err(err)?;
        match KeptAskRecord::from_json_text(&body) {
            Ok(record) => out.push(record),
            // One bad record must not keep the others (and the agent) from starting.
            Err(e) => {
                tracing::warn!(ask_id = %ask_id, error = %e, "sqlite: a kept ask is damaged; it is dropped");
                damaged.push(ask_id);
            }
        }
    }
    Ok((out, damaged))
}

/// The store's thread: its connection, and the witness its writes update.
struct Worker {
    conn: Connection,
    witness: Option<Witness>,
    per_group: usize,
    /// Writes committed together at most ([`GROUP_MAX`]).
    group_max: usize,
}

/// Writes committed together at most: the ones queued behind a write while
/// the thread was busy join its transaction (a group commit), so that
/// writes arriving together pay one flush of the WAL and one of the
/// witness, not one each. Bounded so that the first writer's wait stays
/// short.
const GROUP_MAX: usize = 64;

/// A write's change to the database: whether it changed anything, or why not.
/// `Fn`, not `FnOnce`: a write runs again alone when another write of its
/// group ended the transaction.
type Change<'a> = Box<dyn Fn(&Transaction<'_>) -> Result<bool, StoreError> + 'a>;

/// A write waiting for its transaction: what it is (for errors), the
/// change, and who hears the result once it is committed and witnessed.
struct Write<'a> {
    what: &'static str,
    change: Change<'a>,
    reply: Option<oneshot::Sender<Result<(), StoreError>>>,
}

impl Worker {
    fn run(&mut self, rx: mpsc::Receiver<Command>) {
        // A read that came behind a group of writes runs after their commit,
        // so that the order of the commands holds.
        let mut next: Option<Command> = None;
        loop {
            let cmd = match next.take() {
                Some(cmd) => cmd,
                None => match rx.recv() {
                    Ok(cmd) => cmd,
                    Err(_) => return, // the store was dropped
                },
            };
            let first = match self.as_write(cmd) {
                Ok(write) => write,
                Err(read) => {
                    self.read(read);
                    continue;
                }
            };
            let mut group = vec![first];
            while group.len() < self.group_max {
                let Ok(cmd) = rx.try_recv() else { break };
                match self.as_write(cmd) {
                    Ok(write) => group.push(write),
                    Err(read) => {
                        next = Some(read);
                        break;
                    }
                }
            }
            let replies: Vec<_> = group.iter_mut().map(|w| w.reply.take()).collect();
            for (reply, result) in replies.into_iter().zip(self.commit(&group)) {
                if let Some(reply) = reply {
                    let _ = reply.send(result);
                }
            }
        }
    }

    /// The write a command asks for, or the command back when it reads.
    fn as_write(&self, cmd: Command) -> Result<Write<'static>, Command> {
        let per_group = self.per_group;
        let write = |what, reply, change: Change<'static>| Ok(Write { what, change, reply: Some(reply) });
        match cmd {
            Command::Put { request_id, receipt, group, reply } => {
                write("put", reply, Box::new(move |tx| put(tx, &request_id, &receipt, &group, per_group)))
            }
            Command::RecordSend { send, reply } => {
                write("record send", reply, Box::new(move |tx| record_send(tx, &send).map(|()| true)))
            }
            Command::SetSendState { request_id, state, reply } => {
                write("send state", reply, Box::new(move |tx| set_send_state(tx, &request_id, state)))
            }
            Command::KeepAsk { ask_id, body, reply } => {
                write("keep ask", reply, Box::new(move |tx| keep_ask(tx, &ask_id, &body).map(|()| true)))
            }
            Command::ForgetAsk { ask_id, reply } => {
                write("forget ask", reply, Box::new(move |tx| forget_ask(tx, &ask_id)))
            }
            Command::KeepConversation { ops, at, kept, ended, reply } => write(
                "keep conversation",
                reply,
                Box::new(move |tx| {
                    let mut changed = !ops.is_empty() && keep_conversation(tx, &ops, at, kept)?;
                    for request_id in &ended {
                        changed |= set_send_state(tx, request_id, SendState::Done)?;
                    }
                    Ok(changed)
                }),
            ),
            read => Err(read),
        }
    }

    fn read(&mut self, cmd: Command) {
        match cmd {
            Command::Get { request_id, reply } => {
                let _ = reply.send(get(&self.conn, &request_id));
            }
            Command::SendState { request_id, reply } => {
                let _ = reply.send(send_state(&self.conn, &request_id));
            }
            Command::Unfinished { reply } => {
                let _ = reply.send(unfinished_sends(&self.conn));
            }
            Command::KeptAsks { reply } => {
                let _ = reply.send(self.kept_asks());
            }
            Command::ConversationRows { after, limit, reply } => {
                let _ = reply.send(conversation_rows(&self.conn, after.as_ref(), limit));
            }
            Command::KeptConversation { pane, reply } => {
                let _ = reply.send(kept_conversation(&self.conn, &pane));
            }
            // Writes never come here (`as_write` took them).
            Command::Put { reply, .. }
            | Command::RecordSend { reply, .. }
            | Command::SetSendState { reply, .. }
            | Command::KeepAsk { reply, .. }
            | Command::ForgetAsk { reply, .. }
            | Command::KeepConversation { reply, .. } => {
                let _ = reply.send(Err(StoreError::new("sqlite: a write was taken for a read")));
            }
        }
    }

    /// Runs one write in a transaction of its own (see [`commit`](Self::commit)).
    fn write(
        &mut self,
        what: &'static str,
        change: impl Fn(&Transaction<'_>) -> Result<bool, StoreError>,
    ) -> Result<(), StoreError> {
        let write = Write { what, change: Box::new(change), reply: None };
        self.commit(std::slice::from_ref(&write))
            .pop()
            .unwrap_or_else(|| Err(StoreError::new("sqlite: a write was lost")))
    }

    /// Runs `group`'s changes in one write transaction, each in a savepoint
    /// of its own, so that one that fails is undone alone and answered with
    /// its error while the others go on. When any changed something (each
    /// says so), the store's write count goes up once in the same
    /// transaction, which commits (fsyncing the WAL); then the witness
    /// records the count and is synced, before any caller hears `Ok`. So
    /// every acknowledged write is covered by the witness, and a crash
    /// between the two leaves the database ahead by one unacknowledged
    /// transaction, which the next open accepts. A failure of the
    /// transaction itself (its begin, a savepoint, the commit, the witness)
    /// is every write's error: none of them is acknowledged. A write whose
    /// error ends the whole transaction (a full disk, an I/O error) gets it,
    /// and the group's other writes run again, each alone, as they would
    /// have without the group.
    fn commit(&mut self, group: &[Write<'_>]) -> Vec<Result<(), StoreError>> {
        let n = group.len();
        let all = |why: String| (0..n).map(|_| Err(StoreError::new(why.clone()))).collect::<Vec<_>>();
        let whats = {
            let mut whats: Vec<&str> = Vec::new();
            for write in group {
                if !whats.contains(&write.what) {
                    whats.push(write.what);
                }
            }
            whats.join(", ")
        };
        let tx = match self.conn.transaction_with_behavior(TransactionBehavior::Immediate) {
            Ok(tx) => tx,
            Err(e) => return all(format!("sqlite: begin: {e}")),
        };
        let mut results = Vec::with_capacity(n);
        let mut changed = false;
        let mut ended = None;
        for (i, write) in group.iter().enumerate() {
            if let Err(e) = exec(&tx, "SAVEPOINT one_write", []) {
                return all(format!("sqlite: {}: {e}", write.what));
            }
            match (write.change)(&tx) {
                Ok(c) => {
                    changed |= c;
                    results.push(Ok(()));
                    if let Err(e) = exec(&tx, "RELEASE one_write", []) {
                        return all(format!("sqlite: {}: {e}", write.what));
                    }
                }
                // Some errors (a full disk, say) end the whole transaction:
                // nothing of the group is kept, and the others did nothing
                // wrong.
                Err(e) if tx.is_autocommit() => {
                    ended = Some((i, e));
                    break;
                }
                Err(e) => {
                    results.push(Err(e));
                    if let Err(e) = tx.execute_batch("ROLLBACK TO one_write; RELEASE one_write") {
                        return all(format!("sqlite: {}: {e}", write.what));
                    }
                }
            }
        }
        if let Some((failed, e)) = ended {
            drop(tx);
            if n == 1 {
                return vec![Err(e)];
            }
            let mut e = Some(e);
            return (0..n)
                .map(|i| match i == failed {
                    true => Err(e.take().unwrap_or_else(|| StoreError::new("sqlite: the write failed"))),
                    false => self.commit(std::slice::from_ref(&group[i])).pop().unwrap_or_else(|| {
                        Err(StoreError::new(format!("sqlite: {} was lost", group[i].what)))
                    }),
                })
                .collect();
        }
        if !changed {
            return results; // nothing changed: the transaction rolls back as it drops
        }
        let counted = exec(&tx, "UPDATE store_identity SET writes = writes + 1 WHERE only_row = 1", [])
            .and_then(|_| one(&tx, "SELECT writes FROM store_identity WHERE only_row = 1", [], |r| r.get(0)));
        let writes: i64 = match counted {
            Ok(writes) => writes,
            Err(e) => return all(format!("sqlite: {whats}: {e}")),
        };
        if let Err(e) = tx.commit() {
            return all(format!("sqlite: commit: {e}"));
        }
        if let Some(witness) = &mut self.witness {
            let writes = u64::try_from(writes).unwrap_or(0);
            if let Err(e) = witness.record(writes) {
                return all(format!(
                    "sqlite: {whats} committed, but its witness {} was not written: {e}",
                    witness.path().display()
                ));
            }
        }
        results
    }

    fn kept_asks(&mut self) -> Result<Vec<KeptAskRecord>, StoreError> {
        let (out, damaged) = kept_asks(&self.conn)?;
        if !damaged.is_empty() {
            self.write("forget damaged asks", |tx| {
                for ask_id in &damaged {
                    forget_ask(tx, ask_id)?;
                }
                Ok(true)
            })?;
        }
        Ok(out)
    }
}

fn get(conn: &Connection, request_id: &str) -> Result<Lookup, StoreError> {
    let found: Option<(u16, String)> =
        one(conn, "SELECT status, body FROM receipt WHERE request_id = ?1", [request_id], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .optional()
        .map_err(|e| sql_err("get", e))?;
    if let Some((status, body)) = found {
        let receipt = Receipt::from_json_text(status, body)
            .map_err(|e| StoreError::new(format!("a stored receipt is not JSON: {e}")))?;
        return Ok(Lookup::Found(receipt));
    }
    let evicted = one(conn, "SELECT 1 FROM evicted WHERE request_id = ?1", [request_id], |_| Ok(()))
        .optional()
        .map_err(|e| sql_err("get", e))?;
    Ok(if evicted.is_some() { Lookup::Evicted } else { Lookup::Unknown })
}

/// Whether the receipt was stored (false: the id had one already).
fn put(
    tx: &Transaction<'_>,
    request_id: &str,
    receipt: &Receipt,
    group: &str,
    per_group: usize,
) -> Result<bool, StoreError> {
    let body =
        receipt.json_text().map_err(|e| StoreError::new(format!("a receipt's body is not JSON: {e}")))?;
    let known = one(tx, "SELECT 1 FROM receipt WHERE request_id = ?1", [request_id], |_| Ok(()))
        .optional()
        .map_err(|e| sql_err("put", e))?;
    if known.is_some() {
        return Ok(false); // already kept: the first answer stays
    }
    let last: Option<i64> =
        one(tx, "SELECT last_seq FROM receipt_group WHERE grp = ?1", [group], |r| r.get(0))
            .optional()
            .map_err(|e| sql_err("put", e))?;
    let seq = last.unwrap_or(0) + 1;
    let per_group = i64::try_from(per_group).unwrap_or(i64::MAX / 16);
    let remembered = per_group.saturating_mul(EVICTED_MEMORY_FACTOR as i64);
    let run = |sql: &str, p: &[&dyn rusqlite::ToSql]| exec(tx, sql, p).map_err(|e| sql_err("put", e));
    run(
        "INSERT INTO receipt_group (grp, last_seq) VALUES (?1, ?2) ON CONFLICT (grp) DO UPDATE SET last_seq = ?2",
        params![group, seq],
    )?;
    run("DELETE FROM evicted WHERE request_id = ?1", params![request_id])?;
    run(
        "INSERT INTO receipt (request_id, grp, seq, status, body) VALUES (?1, ?2, ?3, ?4, ?5)",
        params![request_id, group, seq, receipt.status, body],
    )?;
    // The group keeps its `per_group` newest receipts; older ones become
    // evicted ids, remembered for `10 × per_group` further ids.
    let oldest_live = seq - per_group;
    run(
        "INSERT OR REPLACE INTO evicted (request_id, grp, seq) SELECT request_id, grp, seq FROM receipt WHERE grp = ?1 AND seq <= ?2",
        params![group, oldest_live],
    )?;
    run("DELETE FROM receipt WHERE grp = ?1 AND seq <= ?2", params![group, oldest_live])?;
    run(
        "DELETE FROM evicted WHERE grp = ?1 AND seq <= ?2",
        params![group, oldest_live.saturating_sub(remembered)],
    )?;
    Ok(true)
}

/// Applies changes to conversations (one transaction: the caller's), then
/// forgets the conversations written to least recently past `kept`.
/// Whether anything was asked.
fn keep_conversation(
    tx: &Transaction<'_>,
    ops: &[ConversationOp],
    at: Timestamp,
    kept: usize,
) -> Result<bool, StoreError> {
    let err = |e| sql_err("keep conversation", e);
    let at = millis(at);
    let limit = i64::try_from(KEPT_ITEMS_PER_CONVERSATION).unwrap_or(i64::MAX);
    let mut touched: Vec<&str> = Vec::new();
    // Whether the batch starts a conversation (only then may the store be
    // past its bound), by a look at each pane it writes first.
    let mut created = false;
    let mut looked: Vec<&str> = Vec::new();
    for op in ops {
        if let ConversationOp::Forget { pane } = op {
            looked.retain(|p| p != pane);
        } else {
            if !touched.contains(&op.pane()) {
                touched.push(op.pane());
            }
            if !looked.contains(&op.pane()) {
                looked.push(op.pane());
                let known = tx
                    .prepare_cached("SELECT 1 FROM conversation WHERE pane = ?1")
                    .and_then(|mut st| st.exists([op.pane()]))
                    .map_err(err)?;
                created |= !known;
            }
        }
        match op {
            ConversationOp::Item { pane, item } => {
                let body = serde_json::to_string(&**item)
                    .map_err(|e| StoreError::new(format!("an item is not JSON: {e}")))?;
                let rewritten = exec(
                    tx,
                    "UPDATE conversation_item SET body = ?3 WHERE pane = ?1 AND item_id = ?2",
                    params![pane, item.id.as_str(), body],
                )
                .map_err(err)?;
                if rewritten > 0 {
                    continue;
                }
                exec(
                    tx,
                    "INSERT INTO conversation (pane, items, next_place, started_at) VALUES (?1, 1, 1, ?2) \
                     ON CONFLICT (pane) DO UPDATE SET items = items + 1, next_place = next_place + 1",
                    params![pane, at],
                )
                .map_err(err)?;
                let (place, items): (i64, i64) =
                    one(tx, "SELECT next_place, items FROM conversation WHERE pane = ?1", [pane], |r| {
                        Ok((r.get(0)?, r.get(1)?))
                    })
                    .map_err(err)?;
                exec(
                    tx,
                    "INSERT INTO conversation_item (pane, item_id, place, body) VALUES (?1, ?2, ?3, ?4)",
                    params![pane, item.id.as_str(), place, body],
                )
                .map_err(err)?;
                if items > limit {
                    // The oldest go first; the conversation says some went.
                    exec(
                        tx,
                        "DELETE FROM conversation_item WHERE pane = ?1 AND place <= ?2 - ?3",
                        params![pane, place, limit],
                    )
                    .map_err(err)?;
                    exec(
                        tx,
                        "UPDATE conversation SET items = (SELECT COUNT(*) FROM conversation_item WHERE pane = ?1), dropped = 1 WHERE pane = ?1",
                        [pane],
                    )
                    .map_err(err)?;
                }
            }
            ConversationOp::Title { pane, title, by_phone } => {
                exec(
                    tx,
                    "INSERT INTO conversation (pane, title, title_by_phone, started_at) VALUES (?1, ?2, ?3, ?4) \
                     ON CONFLICT (pane) DO UPDATE SET title = ?2, title_by_phone = ?3",
                    params![pane, title, by_phone, at],
                )
                .map_err(err)?;
            }
            ConversationOp::Forget { pane } => {
                exec(tx, "DELETE FROM conversation_item WHERE pane = ?1", [pane]).map_err(err)?;
                exec(tx, "DELETE FROM conversation WHERE pane = ?1", [pane]).map_err(err)?;
            }
            // A later kind of op this store does not know: keeping it wrong
            // would be worse than not keeping it.
            _ => {}
        }
    }
    if touched.is_empty() {
        return Ok(!ops.is_empty());
    }
    // The batch's conversations are the ones written to last.
    let written: i64 =
        one(tx, "SELECT COALESCE(MAX(written), 0) + 1 FROM conversation", [], |r| r.get(0)).map_err(err)?;
    for pane in &touched {
        exec(
            tx,
            "UPDATE conversation SET written = ?2, written_at = ?3 WHERE pane = ?1",
            params![pane, written, at],
        )
        .map_err(err)?;
    }
    if !created {
        return Ok(true);
    }
    let count: i64 = tx.query_row("SELECT COUNT(*) FROM conversation", [], |r| r.get(0)).map_err(err)?;
    let over = count - i64::try_from(kept).unwrap_or(i64::MAX);
    if over > 0 {
        let oldest = "SELECT pane FROM conversation ORDER BY written, pane LIMIT ?1";
        tx.execute(&format!("DELETE FROM conversation_item WHERE pane IN ({oldest})"), [over])
            .map_err(err)?;
        tx.execute(&format!("DELETE FROM conversation WHERE pane IN ({oldest})"), [over]).map_err(err)?;
    }
    Ok(true)
}

/// A pane's kept conversation. An item whose text no longer reads is
/// skipped with a warning: one bad row must not cost the rest.
fn kept_conversation(conn: &Connection, pane: &str) -> Result<Option<KeptConversation>, StoreError> {
    let err = |e| sql_err("kept conversation", e);
    let head: Option<(Option<String>, bool, bool, i64, i64)> = conn
        .query_row(
            "SELECT title, dropped, title_by_phone, started_at, written_at FROM conversation WHERE pane = ?1",
            [pane],
            |r| Ok((r.get(0)?, r.get::<_, i64>(1)? != 0, r.get::<_, i64>(2)? != 0, r.get(3)?, r.get(4)?)),
        )
        .optional()
        .map_err(err)?;
    let Some((title, dropped, title_by_phone, started_at, written_at)) = head else { return Ok(None) };
    let mut stmt = conn
        .prepare("SELECT item_id, body FROM conversation_item WHERE pane = ?1 ORDER BY place")
        .map_err(err)?;
    let rows =
        stmt.query_map([pane], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))).map_err(err)?;
    let mut items = Vec::new();
    for row in rows {
        let (item_id, body) = row.map_err(err)?;
        match serde_json::from_str::<Item>(&body) {
            Ok(item) => items.push(item),
            Err(e) => {
                tracing::warn!(pane = %pane, item_id = %item_id, error = %e, "sqlite: a kept item is damaged; it is skipped");
            }
        }
    }
    Ok(Some(
        KeptConversation::new(title, items, dropped)
            .with_title_by_phone(title_by_phone)
            .with_times(timestamp(started_at), timestamp(written_at)),
    ))
}

/// The kept conversations after `after`, newest first by start.
fn conversation_rows(
    conn: &Connection,
    after: Option<&RowPlace>,
    limit: usize,
) -> Result<Vec<KeptConversationRow>, StoreError> {
    let err = |e| sql_err("conversation rows", e);
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let (after_start, after_pane) = match after {
        Some(a) => (Some(millis(a.started_at)), Some(a.pane.as_str())),
        None => (None, None),
    };
    let mut stmt = conn
        .prepare_cached(
            "SELECT pane, title, started_at, written_at, items FROM conversation \
             WHERE ?1 IS NULL OR (started_at, pane) < (?1, ?2) \
             ORDER BY started_at DESC, pane DESC LIMIT ?3",
        )
        .map_err(err)?;
    let rows = stmt
        .query_map(params![after_start, after_pane, limit], |r| {
            Ok(KeptConversationRow::new(
                r.get::<_, String>(0)?,
                r.get::<_, Option<String>>(1)?,
                timestamp(r.get(2)?),
                timestamp(r.get(3)?),
                u64::try_from(r.get::<_, i64>(4)?).unwrap_or(0),
            ))
        })
        .map_err(err)?;
    rows.collect::<Result<Vec<_>, _>>().map_err(err)
}

/// A time as the store keeps it: milliseconds since the Unix epoch.
fn millis(at: Timestamp) -> i64 {
    i64::try_from(at.as_millis()).unwrap_or(i64::MAX)
}

/// A time the store kept (a negative one, which this SDK never writes, is
/// the epoch).
fn timestamp(ms: i64) -> Timestamp {
    Timestamp::from_millis(u64::try_from(ms).unwrap_or(0))
}

/// A send recorded again (a retry of one never answered) starts over, last
/// in line.
fn record_send(conn: &Connection, send: &PendingSend) -> Result<(), StoreError> {
    let run =
        |sql: &str, p: &[&dyn rusqlite::ToSql]| exec(conn, sql, p).map_err(|e| sql_err("record send", e));
    run("DELETE FROM pending_send WHERE request_id = ?1", params![send.request_id])?;
    run(
        "INSERT INTO pending_send (request_id, pane, text, state) VALUES (?1, ?2, ?3, ?4)",
        params![send.request_id, send.pane, send.text, send.state.as_str()],
    )?;
    Ok(())
}

/// Whether a recorded send changed state (an unrecorded id is ignored).
fn set_send_state(conn: &Connection, request_id: &str, state: SendState) -> Result<bool, StoreError> {
    let err = |e| sql_err("send state", e);
    let changed = exec(
        conn,
        "UPDATE pending_send SET state = ?2 WHERE request_id = ?1",
        params![request_id, state.as_str()],
    )
    .map_err(err)?;
    if changed > 0 && matches!(state, SendState::Done | SendState::Closed) {
        exec(
            conn,
            "DELETE FROM pending_send WHERE state IN ('done', 'closed') \
             AND seq <= (SELECT MAX(seq) FROM pending_send) - ?1",
            params![FINISHED_SENDS_KEPT],
        )
        .map_err(err)?;
    }
    Ok(changed > 0)
}

fn send_state(conn: &Connection, request_id: &str) -> Result<Option<SendState>, StoreError> {
    let word: Option<String> =
        one(conn, "SELECT state FROM pending_send WHERE request_id = ?1", [request_id], |r| r.get(0))
            .optional()
            .map_err(|e| sql_err("send state", e))?;
    Ok(word.as_deref().and_then(SendState::parse))
}

fn unfinished_sends(conn: &Connection) -> Result<Vec<PendingSend>, StoreError> {
    let err = |e| sql_err("unfinished sends", e);
    let mut stmt = conn
        .prepare("SELECT request_id, pane, text, state FROM pending_send WHERE state IN ('queued', 'running') ORDER BY seq")
        .map_err(err)?;
    let rows = stmt
        .query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, String>(3)?,
            ))
        })
        .map_err(err)?;
    let mut out = Vec::new();
    for row in rows {
        let (request_id, pane, text, state) = row.map_err(err)?;
        if let Some(state) = SendState::parse(&state) {
            out.push(PendingSend::new(request_id, pane, text, state));
        }
    }
    Ok(out)
}

/// The database file, created (or narrowed) to mode 0600 before SQLite
/// opens it: receipts hold what the agent answered, and SQLite gives its
/// `-wal` and `-shm` files the database file's mode.
fn private_file(path: &Path) -> Result<(), StoreError> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
        let io = |e: std::io::Error| {
            StoreError::new(format!("sqlite: cannot make {} private: {e}", path.display()))
        };
        std::fs::OpenOptions::new().create(true).append(true).mode(0o600).open(path).map_err(io)?;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(io)?;
    }
    #[cfg(not(unix))]
    let _ = path;
    Ok(())
}

/// Prepared statements the connection keeps (the store has about 40).
const STATEMENTS_CACHED: usize = 64;

/// Runs one statement through the connection's cache of prepared
/// statements: the store runs the same few on every write, and preparing
/// one costs more than running it.
fn exec(conn: &Connection, sql: &str, params: impl rusqlite::Params) -> rusqlite::Result<usize> {
    conn.prepare_cached(sql)?.execute(params)
}

/// Reads one row through the connection's cache of prepared statements.
fn one<T>(
    conn: &Connection,
    sql: &str,
    params: impl rusqlite::Params,
    row: impl FnOnce(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
) -> rusqlite::Result<T> {
    conn.prepare_cached(sql)?.query_row(params, row)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::sync::atomic::{AtomicUsize, Ordering};

    struct TempDir(PathBuf);

    impl TempDir {
        fn new() -> TempDir {
            static N: AtomicUsize = AtomicUsize::new(0);
            let dir = std::env::temp_dir().join(format!(
                "durable-sqlite-receipts-{}-{}",
                std::process::id(),
                N.fetch_add(1, Ordering::SeqCst)
            ));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            TempDir(dir)
        }
        fn db(&self) -> PathBuf {
            self.0.join("receipts.sqlite3")
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn receipt(n: u64) -> Receipt {
        Receipt::of_json(200, &json!({"ok": true, "result": "sent", "n": n, "replayed": false}))
    }

    fn kept(call: &str, data: Option<serde_json::Value>) -> KeptAskRecord {
        use durable_types::{AskOption, AskSpec, Id, Timestamp};
        let ask = AskSpec::choice(call, "refund wants to run", [AskOption::new("allow", "Allow")])
            .build(&Id::new("ticket-1").unwrap(), Timestamp::from_millis(1_796_014_800_000), false)
            .unwrap();
        KeptAskRecord::new(ask, data)
    }

    #[tokio::test]
    async fn open_asks_are_kept_in_order_replaced_by_id_forgotten_and_survive_a_reopen() {
        let dir = TempDir::new();
        let store = SqliteReceiptStore::open(dir.db()).unwrap();
        assert!(store.keeps_asks());
        let (a, b, c) = (kept("a", Some(json!({"n": 1}))), kept("b", None), kept("c", None));
        for r in [&a, &b, &c] {
            store.keep_ask(r.clone()).await.unwrap();
        }
        // Raised again: replaced in place, keeping its place in line.
        let a2 = kept("a", Some(json!({"n": 2})));
        store.keep_ask(a2.clone()).await.unwrap();
        store.forget_ask(&b.ask.id).await.unwrap();
        store.forget_ask("not-kept").await.unwrap();
        drop(store);
        let store = SqliteReceiptStore::open(dir.db()).unwrap();
        assert_eq!(store.kept_asks().await.unwrap(), [a2, c]);
    }

    /// The layout SDKs wrote before layouts had versions (user_version 0).
    const VERSION_1: &str = "
        CREATE TABLE receipt (request_id TEXT PRIMARY KEY NOT NULL, grp TEXT NOT NULL, seq INTEGER NOT NULL, status INTEGER NOT NULL, body TEXT NOT NULL);
        CREATE INDEX receipt_by_group ON receipt (grp, seq);
        CREATE TABLE evicted (request_id TEXT PRIMARY KEY NOT NULL, grp TEXT NOT NULL, seq INTEGER NOT NULL);
        CREATE INDEX evicted_by_group ON evicted (grp, seq);
        CREATE TABLE receipt_group (grp TEXT PRIMARY KEY NOT NULL, last_seq INTEGER NOT NULL);
        CREATE TABLE pending_send (seq INTEGER PRIMARY KEY AUTOINCREMENT, request_id TEXT UNIQUE NOT NULL, pane TEXT NOT NULL, text TEXT NOT NULL, state TEXT NOT NULL);
        CREATE INDEX pending_send_by_state ON pending_send (state, seq);
        INSERT INTO receipt (request_id, grp, seq, status, body) VALUES ('r-old', 'starters', 1, 200, '{\"ok\":true}');
        INSERT INTO receipt_group (grp, last_seq) VALUES ('starters', 1);
    ";

    #[tokio::test]
    async fn a_file_of_the_layout_before_versions_is_migrated_and_a_newer_one_refused() {
        let dir = TempDir::new();
        Connection::open(dir.db()).unwrap().execute_batch(VERSION_1).unwrap();
        let store = SqliteReceiptStore::open(dir.db()).unwrap();
        let Lookup::Found(old) = store.get("r-old").await.unwrap() else { panic!("the old receipt is kept") };
        assert_eq!(String::from_utf8_lossy(&old.body), "{\"ok\":true}");
        store.keep_ask(kept("a", None)).await.unwrap();
        assert_eq!(store.kept_asks().await.unwrap().len(), 1);
        drop(store);
        // No witness before: accepted as an upgrade, and one written now.
        let Found::Intact(seen) = sqlite_witness::read(&sqlite_witness::path_for(&dir.db())) else {
            panic!("the upgrade wrote a witness")
        };
        assert_eq!(seen.writes, 1, "the kept ask");
        let store = SqliteReceiptStore::open(dir.db()).unwrap();
        assert!(matches!(store.get("r-old").await.unwrap(), Lookup::Found(_)), "replays after the upgrade");
        drop(store);
        let conn = Connection::open(dir.db()).unwrap();
        let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap();
        assert_eq!(version, SQLITE_SCHEMA_VERSION);
        conn.pragma_update(None, "user_version", 99).unwrap();
        drop(conn);
        let err = SqliteReceiptStore::open(dir.db()).unwrap_err().to_string();
        assert!(err.contains("version 99") && err.contains("newer"), "{err}");
    }

    #[tokio::test]
    async fn a_damaged_kept_ask_is_dropped_and_the_others_are_handed_out() {
        let dir = TempDir::new();
        let store = SqliteReceiptStore::open(dir.db()).unwrap();
        store.keep_ask(kept("good", None)).await.unwrap();
        drop(store);
        Connection::open(dir.db())
            .unwrap()
            .execute("INSERT INTO kept_ask (ask_id, seq, body) VALUES ('bad-1', 0, '{oops')", [])
            .unwrap();
        let store = SqliteReceiptStore::open(dir.db()).unwrap();
        assert_eq!(store.kept_asks().await.unwrap(), [kept("good", None)]);
        drop(store);
        let left: i64 = Connection::open(dir.db())
            .unwrap()
            .query_row("SELECT COUNT(*) FROM kept_ask WHERE ask_id = 'bad-1'", [], |r| r.get(0))
            .unwrap();
        assert_eq!(left, 0, "the damaged record is gone");
    }

    /// The write count the witness holds.
    fn witnessed(dir: &TempDir) -> u64 {
        match sqlite_witness::read(&sqlite_witness::path_for(&dir.db())) {
            Found::Intact(seen) => seen.writes,
            other => panic!("no witness: {other:?}"),
        }
    }

    #[tokio::test]
    async fn every_write_that_changes_the_store_is_counted_and_witnessed_before_it_returns() {
        let dir = TempDir::new();
        let store = SqliteReceiptStore::open(dir.db()).unwrap();
        assert_eq!(witnessed(&dir), 0);
        store.put("r-1", receipt(1), "starters").await.unwrap();
        assert_eq!(witnessed(&dir), 1);
        store.put("r-1", receipt(2), "starters").await.unwrap();
        assert_eq!(witnessed(&dir), 1, "a put of a known id changes nothing");
        store.record_send(PendingSend::new("s-1", "ticket-1", "hi", SendState::Queued)).await.unwrap();
        assert_eq!(witnessed(&dir), 2);
        store.set_send_state("s-1", SendState::Done).await.unwrap();
        assert_eq!(witnessed(&dir), 3);
        store.set_send_state("s-9", SendState::Done).await.unwrap();
        assert_eq!(witnessed(&dir), 3, "an unrecorded send changes nothing");
        let ask = kept("a", None);
        store.keep_ask(ask.clone()).await.unwrap();
        assert_eq!(witnessed(&dir), 4);
        store.forget_ask(&ask.ask.id).await.unwrap();
        assert_eq!(witnessed(&dir), 5);
        store.forget_ask(&ask.ask.id).await.unwrap();
        assert_eq!(witnessed(&dir), 5, "an ask not kept changes nothing");
        let writes: i64 = Connection::open(dir.db())
            .unwrap()
            .query_row("SELECT writes FROM store_identity", [], |r| r.get(0))
            .unwrap();
        assert_eq!(writes, 5, "the database counts what the witness does");
    }

    #[tokio::test]
    async fn put_then_get_returns_the_first_answer() {
        let dir = TempDir::new();
        let store = SqliteReceiptStore::open(dir.db()).unwrap();
        assert_eq!(store.get("r-1").await.unwrap(), Lookup::Unknown);
        store.put("r-1", receipt(1), "pane:ticket-1").await.unwrap();
        assert_eq!(store.get("r-1").await.unwrap(), Lookup::Found(receipt(1)));
        // A second put of the same id keeps the first answer.
        store.put("r-1", receipt(2), "pane:ticket-1").await.unwrap();
        assert_eq!(store.get("r-1").await.unwrap(), Lookup::Found(receipt(1)));
        // An id is found whatever group it was put in.
        store.put("r-2", receipt(3), "renames").await.unwrap();
        assert_eq!(store.get("r-2").await.unwrap(), Lookup::Found(receipt(3)));
    }

    #[tokio::test]
    async fn a_body_is_kept_byte_for_byte_and_one_that_is_not_json_is_refused() {
        let dir = TempDir::new();
        let store = SqliteReceiptStore::open(dir.db()).unwrap();
        let body = r#"{"z": 1,"a":{"y":[1, 2]},"replayed":false}"#;
        store.put("r-1", Receipt::new(200, body), "starters").await.unwrap();
        let Lookup::Found(got) = store.get("r-1").await.unwrap() else { panic!("kept") };
        assert_eq!(String::from_utf8_lossy(&got.body), body, "key order and spacing kept");
        let err = store.put("r-2", Receipt::new(200, "{oops"), "starters").await.unwrap_err();
        assert!(err.to_string().contains("not JSON"), "{err}");
        assert_eq!(store.get("r-2").await.unwrap(), Lookup::Unknown, "nothing kept");
    }

    #[tokio::test]
    async fn a_group_keeps_per_group_receipts_and_remembers_evicted_ids_for_ten_times_more() {
        let dir = TempDir::new();
        let store = SqliteReceiptStore::open_with_capacity(dir.db(), 2).unwrap();
        store.put("a-0", receipt(0), "pane:a").await.unwrap();
        store.put("a-1", receipt(1), "pane:a").await.unwrap();
        store.put("b-0", receipt(9), "pane:b").await.unwrap();
        store.put("a-2", receipt(2), "pane:a").await.unwrap();
        assert_eq!(store.get("a-0").await.unwrap(), Lookup::Evicted, "the oldest of three with per_group 2");
        assert_eq!(store.get("a-1").await.unwrap(), Lookup::Found(receipt(1)));
        assert_eq!(store.get("a-2").await.unwrap(), Lookup::Found(receipt(2)));
        assert_eq!(store.get("b-0").await.unwrap(), Lookup::Found(receipt(9)), "other groups untouched");
        // a-0 was evicted when a-2 came; it stays remembered until 20
        // (10 × per_group) further ids of the group have passed.
        for n in 3..=21 {
            store.put(&format!("a-{n}"), receipt(n), "pane:a").await.unwrap();
        }
        assert_eq!(
            store.get("a-0").await.unwrap(),
            Lookup::Evicted,
            "19 ids passed since its eviction: remembered"
        );
        store.put("a-22", receipt(22), "pane:a").await.unwrap();
        assert_eq!(
            store.get("a-0").await.unwrap(),
            Lookup::Unknown,
            "20 ids passed: forgotten, as in memory"
        );
        assert_eq!(store.get("a-1").await.unwrap(), Lookup::Evicted);
    }

    #[tokio::test]
    async fn eviction_matches_the_memory_store() {
        use durable_runtime::MemoryReceiptStore;
        let dir = TempDir::new();
        let sqlite = SqliteReceiptStore::open_with_capacity(dir.db(), 3).unwrap();
        let memory = MemoryReceiptStore::with_capacity(3);
        let groups = ["pane:x", "pane:y", "starters"];
        for n in 0..80u64 {
            let g = groups[(n as usize * 7 + n as usize / 5) % 3];
            let id = format!("r-{n}");
            sqlite.put(&id, receipt(n), g).await.unwrap();
            memory.put(&id, receipt(n), g).await.unwrap();
        }
        for n in 0..80u64 {
            let id = format!("r-{n}");
            assert_eq!(sqlite.get(&id).await.unwrap(), memory.get(&id).await.unwrap(), "{id}");
        }
    }

    #[tokio::test]
    async fn receipts_and_evicted_ids_survive_a_reopen() {
        let dir = TempDir::new();
        {
            let store = SqliteReceiptStore::open_with_capacity(dir.db(), 1).unwrap();
            store.put("r-1", receipt(1), "closes").await.unwrap();
            store.put("r-2", receipt(2), "closes").await.unwrap();
        } // dropped: the thread closes the database
        let store = SqliteReceiptStore::open_with_capacity(dir.db(), 1).unwrap();
        assert_eq!(store.get("r-2").await.unwrap(), Lookup::Found(receipt(2)));
        assert_eq!(store.get("r-1").await.unwrap(), Lookup::Evicted);
        // The group's sequence goes on where it was.
        store.put("r-3", receipt(3), "closes").await.unwrap();
        assert_eq!(store.get("r-2").await.unwrap(), Lookup::Evicted);
        assert_eq!(store.get("r-3").await.unwrap(), Lookup::Found(receipt(3)));
    }

    #[tokio::test]
    async fn sends_are_kept_in_order_until_finished_and_survive_a_reopen() {
        let dir = TempDir::new();
        {
            let store = SqliteReceiptStore::open(dir.db()).unwrap();
            for (id, text) in [("r-1", "one"), ("r-2", "two"), ("r-3", "three")] {
                store.record_send(PendingSend::new(id, "ticket-1", text, SendState::Queued)).await.unwrap();
            }
            store.set_send_state("r-1", SendState::Running).await.unwrap();
            store.set_send_state("r-2", SendState::Done).await.unwrap();
            store.set_send_state("r-9", SendState::Done).await.unwrap(); // not recorded: ignored
            // Recorded again (a retry of one never answered): last in line.
            store
                .record_send(PendingSend::new("r-1", "ticket-1", "one again", SendState::Queued))
                .await
                .unwrap();
        }
        let store = SqliteReceiptStore::open(dir.db()).unwrap();
        let left = store.unfinished_sends().await.unwrap();
        let got: Vec<(&str, &str, SendState)> =
            left.iter().map(|s| (s.request_id.as_str(), s.text.as_str(), s.state)).collect();
        assert_eq!(got, [("r-3", "three", SendState::Queued), ("r-1", "one again", SendState::Queued)]);
        assert_eq!(store.send_state("r-2").await.unwrap(), Some(SendState::Done));
        assert_eq!(store.send_state("r-9").await.unwrap(), None);
        store.set_send_state("r-3", SendState::Closed).await.unwrap();
        assert_eq!(store.unfinished_sends().await.unwrap().len(), 1);
    }

    #[tokio::test]
    async fn the_database_is_in_wal_mode_with_full_sync() {
        let dir = TempDir::new();
        let store = SqliteReceiptStore::open(dir.db()).unwrap();
        store.put("r-1", receipt(1), "starters").await.unwrap();
        let conn = Connection::open(dir.db()).unwrap();
        let mode: String = conn.query_row("PRAGMA journal_mode", [], |r| r.get(0)).unwrap();
        assert_eq!(mode, "wal");
        assert_eq!(store.per_group(), RECEIPTS_PER_GROUP);
        drop(store);
    }

    #[cfg(unix)]
    #[test]
    fn the_database_and_its_log_are_private_to_the_user() {
        use std::os::unix::fs::PermissionsExt;
        let dir = TempDir::new();
        std::fs::write(dir.db(), b"").unwrap();
        std::fs::set_permissions(dir.db(), std::fs::Permissions::from_mode(0o644)).unwrap();
        let store = SqliteReceiptStore::open(dir.db()).unwrap();
        drop(store);
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&dir.db()), 0o600);
        let wal = dir.db().with_extension("sqlite3-wal");
        if wal.exists() {
            assert_eq!(mode(&wal), 0o600);
        }
        assert_eq!(mode(&sqlite_witness::path_for(&dir.db())), 0o600);
    }

    /// Sends `puts`' commands to the store's thread while another
    /// connection holds the database's write lock, then lets it go: the
    /// thread finds them all queued (but perhaps the first) and commits
    /// them together. Returns each put's result.
    async fn puts_queued_behind_a_lock(
        store: &SqliteReceiptStore,
        puts: &[(String, Receipt)],
    ) -> Vec<Result<(), StoreError>> {
        use std::future::Future;
        let blocker = Connection::open(store.path()).unwrap();
        blocker.execute_batch("BEGIN IMMEDIATE").unwrap();
        let all = futures_util::future::join_all(
            puts.iter().map(|(id, receipt)| store.put(id, receipt.clone(), "pane:t")),
        );
        let mut all = std::pin::pin!(all);
        // One poll sends every command (the replies are still to come).
        let mut cx = std::task::Context::from_waker(futures_util::task::noop_waker_ref());
        assert!(all.as_mut().poll(&mut cx).is_pending(), "no put is answered while the lock is held");
        blocker.execute_batch("COMMIT").unwrap();
        all.await
    }

    #[tokio::test]
    async fn writes_queued_together_commit_in_one_transaction_counted_once_by_the_witness() {
        let dir = TempDir::new();
        let store = SqliteReceiptStore::open(dir.db()).unwrap();
        let before = witnessed(&dir);
        let puts: Vec<_> = (0..20).map(|n| (format!("r-{n}"), receipt(n))).collect();
        let results = puts_queued_behind_a_lock(&store, &puts).await;
        assert!(results.iter().all(Result::is_ok), "{results:?}");
        // Twenty puts, at most two transactions (the first may have gone
        // alone, before the rest were queued); one each without the group.
        let transactions = witnessed(&dir) - before;
        assert!((1..=2).contains(&transactions), "{transactions} transactions for 20 puts");
        for (id, receipt) in &puts {
            assert_eq!(store.get(id).await.unwrap(), Lookup::Found(receipt.clone()), "{id}");
        }
        // The witness is the database's: a reopen checks them against each other.
        drop(store);
        let store = SqliteReceiptStore::open(dir.db()).unwrap();
        assert_eq!(store.get("r-19").await.unwrap(), Lookup::Found(receipt(19)));

        // The same writes one transaction each, as before group commits.
        drop(store);
        let store = SqliteReceiptStore::bench_open_one_write_per_transaction(dir.db()).unwrap();
        let before = witnessed(&dir);
        let puts: Vec<_> = (20..25).map(|n| (format!("r-{n}"), receipt(n))).collect();
        let results = puts_queued_behind_a_lock(&store, &puts).await;
        assert!(results.iter().all(Result::is_ok), "{results:?}");
        assert_eq!(witnessed(&dir) - before, 5);
    }

    /// Five puts queued together, the third (`r-bad`) refused by a trigger
    /// raising `raise`: checks that it alone failed, and gives the store,
    /// the puts and their results.
    async fn five_puts_one_refused(
        raise: &str,
    ) -> (TempDir, SqliteReceiptStore, Vec<(String, Receipt)>, Vec<Result<(), StoreError>>) {
        let dir = TempDir::new();
        let store = SqliteReceiptStore::open(dir.db()).unwrap();
        Connection::open(dir.db())
            .unwrap()
            .execute_batch(&format!(
                "CREATE TRIGGER refuse_bad BEFORE INSERT ON receipt WHEN NEW.request_id = 'r-bad' \
                 BEGIN SELECT RAISE({raise}); END;"
            ))
            .unwrap();
        let puts: Vec<_> = ["r-1", "r-2", "r-bad", "r-3", "r-4"]
            .iter()
            .enumerate()
            .map(|(n, id)| (id.to_string(), receipt(n as u64)))
            .collect();
        let results = puts_queued_behind_a_lock(&store, &puts).await;
        let failed: Vec<_> =
            puts.iter().zip(&results).filter(|(_, r)| r.is_err()).map(|(p, _)| &p.0).collect();
        assert_eq!(failed, ["r-bad"], "{results:?}");
        (dir, store, puts, results)
    }

    #[tokio::test]
    async fn a_write_that_fails_in_a_group_is_undone_alone_and_gets_its_error() {
        // The receipt table refuses one id, after `put` has already moved
        // its group's sequence: the savepoint must undo that move too.
        let (dir, store, _, results) = five_puts_one_refused("ABORT, 'refused by the test'").await;
        let err = results[2].as_ref().unwrap_err().to_string();
        assert!(err.contains("refused by the test"), "{err}");
        assert_eq!(store.get("r-bad").await.unwrap(), Lookup::Unknown);
        for id in ["r-1", "r-2", "r-3", "r-4"] {
            assert!(matches!(store.get(id).await.unwrap(), Lookup::Found(_)), "{id}");
        }
        drop(store);
        let seq: i64 = Connection::open(dir.db())
            .unwrap()
            .query_row("SELECT last_seq FROM receipt_group WHERE grp = 'pane:t'", [], |r| r.get(0))
            .unwrap();
        assert_eq!(seq, 4, "the failed put's move of the sequence was undone");
    }

    #[tokio::test]
    async fn a_write_whose_error_ends_the_transaction_fails_alone_and_the_others_of_its_group_are_kept() {
        // `RAISE(ROLLBACK)` ends the whole transaction, as a full disk does.
        let (dir, store, puts, _) = five_puts_one_refused("ROLLBACK, 'ends the transaction'").await;
        for (id, receipt) in puts.iter().filter(|(id, _)| id != "r-bad") {
            assert_eq!(store.get(id).await.unwrap(), Lookup::Found(receipt.clone()), "{id}");
        }
        drop(store);
        // The witness counts what was committed: the reopen's check passes.
        let store = SqliteReceiptStore::open(dir.db()).unwrap();
        assert_eq!(store.get("r-bad").await.unwrap(), Lookup::Unknown);
    }

    #[test]
    fn open_fails_cleanly_where_no_database_can_be() {
        let err = SqliteReceiptStore::open("/nonexistent-folder-for-durable/receipts.sqlite3").unwrap_err();
        assert!(err.to_string().contains("sqlite"), "{err}");
    }

    /// The store's count of committed write transactions.
    fn commits(dir: &TempDir) -> i64 {
        Connection::open(dir.db())
            .unwrap()
            .query_row("SELECT writes FROM store_identity WHERE only_row = 1", [], |r| r.get(0))
            .unwrap()
    }

    #[tokio::test]
    async fn a_turns_end_is_one_commit_with_its_items_and_nothing_of_it_when_the_items_fail() {
        let dir = TempDir::new();
        let store = SqliteReceiptStore::open(dir.db()).unwrap();
        for id in ["s-1", "s-2", "s-bad"] {
            store.record_send(PendingSend::new(id, "p", "hello", SendState::Running)).await.unwrap();
        }
        let reply = |id: &str, text: &str| ConversationOp::item("p", Item::reply(id, text).unwrap());
        let before = commits(&dir);
        store
            .keep_conversation_and_end_sends(
                vec![reply("a", "did: hello")],
                vec!["s-1".into()],
                Timestamp::EPOCH,
            )
            .await
            .unwrap();
        assert_eq!(commits(&dir), before + 1, "the items and the send's end: one transaction");
        assert_eq!(store.send_state("s-1").await.unwrap(), Some(SendState::Done));
        assert_eq!(store.send_state("s-2").await.unwrap(), Some(SendState::Running), "only the sends named");
        let kept = store.kept_conversation("p").await.unwrap().unwrap();
        assert_eq!(kept.items.len(), 1);

        // An item the database refuses: the whole write is undone, so the
        // send stays running (a restart closes it as cut, with its notice).
        Connection::open(dir.db())
            .unwrap()
            .execute_batch(
                "CREATE TRIGGER refuse_bad BEFORE INSERT ON conversation_item WHEN NEW.item_id = 'bad' \
                 BEGIN SELECT RAISE(ABORT, 'refused by the test'); END;",
            )
            .unwrap();
        let before = commits(&dir);
        let err = store
            .keep_conversation_and_end_sends(
                vec![reply("b", "kept with it"), reply("bad", "refused")],
                vec!["s-bad".into()],
                Timestamp::EPOCH,
            )
            .await
            .unwrap_err();
        assert!(err.to_string().contains("refused by the test"), "{err}");
        assert_eq!(store.send_state("s-bad").await.unwrap(), Some(SendState::Running));
        assert_eq!(store.kept_conversation("p").await.unwrap().unwrap().items.len(), 1, "nothing of it kept");
        assert_eq!(commits(&dir), before);

        // Items with a send not recorded (nothing to end): the items are kept.
        Connection::open(dir.db()).unwrap().execute_batch("DROP TRIGGER refuse_bad").unwrap();
        store
            .keep_conversation_and_end_sends(
                vec![reply("c", "kept")],
                vec!["s-unknown".into()],
                Timestamp::EPOCH,
            )
            .await
            .unwrap();
        assert_eq!(store.kept_conversation("p").await.unwrap().unwrap().items.len(), 2);
        let before = commits(&dir);

        // Only sends to end: still one commit.
        store
            .keep_conversation_and_end_sends(Vec::new(), vec!["s-2".into()], Timestamp::EPOCH)
            .await
            .unwrap();
        assert_eq!(store.send_state("s-2").await.unwrap(), Some(SendState::Done));
        assert_eq!(commits(&dir), before + 1);
    }
}
