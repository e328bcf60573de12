//! [`PgReceiptStore`]: receipts and acknowledged sends kept in PostgreSQL,
//! shared by every process that runs one agent, so that an agent moved to
//! another machine (a failover) still replays each first answer and still
//! delivers the sends it acknowledged (contract §9, §9.1).
//!
//! # Schema
//! The store creates and migrates its own tables, in a schema of its own
//! (`durable_receipts` unless [`PgReceiptOptionsBuilder::schema`] says
//! otherwise: one schema per agent identity). The schema's `schema_version`
//! table holds the version of its layout; [`PgReceiptStore::connect`]
//! creates the current version in a fresh schema (and migrates an older
//! one, step by step), takes a newer SDK's layout as an
//! error (it would not know its meaning), and runs under an advisory lock
//! so that processes starting together migrate once. Version 1:
//!
//! | table | holds |
//! |---|---|
//! | `receipt (request_id PRIMARY KEY, grp, seq, status, body)` | the kept receipts; `body` is the JSON text as first sent (key order kept) |
//! | `evicted (request_id PRIMARY KEY, grp, seq)` | evicted ids, remembered for `receipt-dropped` |
//! | `receipt_group (grp PRIMARY KEY, last_seq)` | each group's sequence: its row is the lock that orders the group's puts |
//! | `pending_send (seq IDENTITY, request_id UNIQUE, pane, text, state)` | the sends journal (§9.1) |
//!
//! Version 2 adds:
//!
//! | table | holds |
//! |---|---|
//! | `kept_ask (ask_id PRIMARY KEY, seq IDENTITY, owner_pid, owner_start, body)` | the open asks (§7.2): each as its record's JSON text, and the process that owns it |
//!
//! Version 3 adds:
//!
//! | table | holds |
//! |---|---|
//! | `conversation (pane PRIMARY KEY, title, title_by_phone, items, next_place, dropped, owner_pid, owner_start, written, started_at, written_at)` | each pane's kept conversation: its title, its item count, the next item's place, whether older items were dropped, the process that writes it, the order it was last written in (for the bound), and when it started and was last written (milliseconds, the program's clock: history's rows) |
//! | `conversation_item (pane, item_id, place, body; PRIMARY KEY (pane, item_id))` | its items as last written, each as its JSON text, by place |
//!
//! # Exactly once across processes
//! The core runs a write only after [`ReceiptStore::claim`] found its
//! request id unknown, and stores the answer with [`ReceiptStore::put`]
//! before the response leaves. Here a claim opens a transaction (read
//! committed) on a pooled connection and takes a transaction-scoped
//! advisory lock on the request id, then reads; when the id is unknown the
//! transaction stays open while the write runs, and `put` inserts the
//! receipt in it and commits (`synchronous_commit = on`, whatever the
//! server's default): the receipt is on the server's disk before `put`
//! returns. A repeat of the id at another process meanwhile waits on the
//! lock (at most [`claim_wait`](PgReceiptOptionsBuilder::claim_wait)), then
//! reads the committed receipt and replays it: one process runs the write,
//! the others replay its body. A refused write releases the claim (a
//! rollback), and the waiting repeat runs it itself. The insert is also
//! `ON CONFLICT DO NOTHING`: the first answer stays, always.
//!
//! What it cannot promise: a process that dies after running a write and
//! before its commit leaves no receipt (the server rolls the claim back as
//! the connection drops), so a repeat runs the write again, elsewhere —
//! the same as any store after a crash before `put`: the phone never got
//! that answer. A `put` that fails (the database went away mid-write)
//! leaves the receipt in that process's memory only: the core answers
//! `500` there, and another process would run the write again. A claim
//! held longer than [`claim_hold`](PgReceiptOptionsBuilder::claim_hold)
//! (a hung process) is ended by the server, and the same holds.
//!
//! # Eviction
//! The same as [`MemoryReceiptStore`](crate::stores::MemoryReceiptStore):
//! each group keeps its `per_group` most recent receipts (default
//! [`RECEIPTS_PER_GROUP`]); an evicted id is remembered — a repeat gets
//! [`Lookup::Evicted`], so the core answers `500 receipt-dropped` and runs
//! nothing — until `10 × per_group` further ids of its group have passed.
//! Every process sharing a schema should keep the same `per_group`.
//!
//! # Sends
//! As [`SqliteReceiptStore`](crate::SqliteReceiptStore): each acknowledged
//! send is kept until its turn is over (the newest 100,000 finished ones
//! are kept for replays to say where they stand). The process that starts
//! next takes up the sends still queued or running: the journal is made
//! for one process running the agent at a time (a failover, not two
//! processes serving at once, which would both take them up).
//!
//! # Asks
//! Every open ask is kept until it closes (§7.2). Each process names
//! itself by a session of its own, opened at [`PgReceiptStore::connect`]
//! and held for the store's life: its backend pid and start time. At start,
//! [`ReceiptStore::kept_asks`] takes up only the asks whose owner session
//! is gone from `pg_stat_activity` — a process that died, or stopped —
//! never those of a process still running, and makes them its own. (If a
//! running process loses its owner session, a process starting then takes
//! its asks: the database cannot tell a lost connection from a dead process.)
//! The processes sharing a schema connect as the same role: PostgreSQL
//! shows a session's start only to its own role (or `pg_read_all_stats`),
//! and an owner whose start cannot be seen is taken for gone.
//!
//! # Conversations
//! Each pane's conversation is kept (docs/wire.md §9.2), as in
//! [`SqliteReceiptStore`](crate::SqliteReceiptStore): every batch of
//! changes is one transaction, at most
//! [`KEPT_ITEMS_PER_CONVERSATION`](crate::stores::KEPT_ITEMS_PER_CONVERSATION)
//! items per conversation, the oldest dropped first, and the
//! [`kept_conversations`](PgReceiptOptionsBuilder::kept_conversations)
//! written to last (default
//! [`KEPT_CONVERSATIONS`](crate::stores::KEPT_CONVERSATIONS)), the one
//! written to least recently forgotten whole past them. So the process that
//! takes over after a failover gives each pane it declares the items the
//! phone was shown. One process writes a conversation at a time, fenced
//! the way asks are: a conversation belongs to the owner session that
//! last wrote it, and while that session is alive another process can
//! neither read it back nor write it (a batch leaves that conversation's
//! changes out, keeps the rest, and fails naming it); once it is gone, the
//! next writer makes the conversation its own. As with asks, a running
//! process that loses its owner session (the database restarted) is taken
//! for gone: a process starting then may write its conversations too.
//! (A machine that vanishes without closing its
//! connections — power lost, network cut — leaves its session alive until
//! the server's TCP keepalive ends it: set `tcp_keepalives_idle` and its
//! siblings on the server to bound how long a failover waits for its asks
//! and conversations.)
//!
//! # Unreachable database
//! Every call fails with an error that says what broke (and the core
//! answers `500 internal`, running nothing, when the lookup fails). The
//! password of the connection URL appears in no `Debug`, error or log.
//!
//! # Connections
//! A pool of [`pool_size`](PgReceiptOptionsBuilder::pool_size) connections
//! (default 8); claims hold one each while their write runs, at most
//! `pool_size - 1` at once, so that the journal always has a connection.
//!
//! # TLS
//! Over TCP the connections use TLS (rustls) as the URL's `sslmode` asks,
//! with libpq's names ([`PgSslMode`]): `disable`; `prefer`, the default
//! (TLS when the server offers it); `require` (TLS, and no certificate
//! checked: whoever can intercept the connection can pose as the server);
//! `verify-full` (the chain checked against the roots, the name against
//! the host). `verify-full`'s roots are the PEM file of `sslrootcert=<path>`
//! (or [`ssl_root_cert`](PgReceiptOptionsBuilder::ssl_root_cert)), else the
//! system's store (`sslrootcert=system` says so too), where a managed
//! database's CA is installed as often as it is handed out as a file. A
//! root given without a mode means `verify-full`; with a weaker mode it is
//! an error. `verify-ca`, `allow` and client certificates are not
//! supported. A Unix socket is never encrypted.
//!
//! ```no_run
//! use durable_sdk::stores::{PgReceiptOptions, PgSslMode};
//!
//! # fn run() -> Result<(), durable_sdk::stores::StoreError> {
//! // The provider's CA as a file (read when the options are built) …
//! let options = PgReceiptOptions::builder()
//!     .url("postgres://desk:secret@db.example.com/agents?sslmode=verify-full&sslrootcert=/etc/desk/db-ca.pem")
//!     .build()?;
//! assert_eq!(options.ssl_mode(), PgSslMode::VerifyFull);
//! // … or the same through the builder, and the system's roots without it.
//! let options = PgReceiptOptions::builder()
//!     .url("postgres://desk:secret@db.example.com/agents")
//!     .ssl_mode(PgSslMode::VerifyFull)
//!     .ssl_root_cert("/etc/desk/db-ca.pem")
//!     .build()?;
//! # Ok(()) }
//! ```

use std::collections::HashMap;
use std::fmt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Object, Pool, RecyclingMethod, Runtime};
use durable_runtime::{
    ConversationOp, KEPT_CONVERSATIONS, KEPT_ITEMS_PER_CONVERSATION, KeptAskRecord, KeptConversation,
    KeptConversationRow, Lookup, PendingSend, Receipt, ReceiptStore, RowPlace, SendState, StoreError,
};
use durable_types::{EVICTED_MEMORY_FACTOR, Item, RECEIPTS_PER_GROUP, Timestamp};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_postgres::config::Host;

use crate::pg_tls::{PgSslMode, PgTls};

/// The layout this SDK writes (the `schema_version` table's value).
pub const PG_SCHEMA_VERSION: i32 = 4;

/// Finished sends kept for replays to say so.
const FINISHED_SENDS_KEPT: i64 = 100_000;

/// Migrations, in order: `MIGRATIONS[n]` takes the schema from version `n`
/// to `n + 1`. `{s}` is the quoted schema name.
const MIGRATIONS: [&str; 4] = [
    "
CREATE TABLE {s}.receipt (
    request_id TEXT PRIMARY KEY,
    grp TEXT NOT NULL,
    seq BIGINT NOT NULL,
    status INTEGER NOT NULL,
    body TEXT NOT NULL
);
CREATE INDEX receipt_by_group ON {s}.receipt (grp, seq);
CREATE TABLE {s}.evicted (
    request_id TEXT PRIMARY KEY,
    grp TEXT NOT NULL,
    seq BIGINT NOT NULL
);
CREATE INDEX evicted_by_group ON {s}.evicted (grp, seq);
CREATE TABLE {s}.receipt_group (
    grp TEXT PRIMARY KEY,
    last_seq BIGINT NOT NULL
);
CREATE TABLE {s}.pending_send (
    seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    request_id TEXT UNIQUE NOT NULL,
    pane TEXT NOT NULL,
    text TEXT NOT NULL,
    state TEXT NOT NULL
);
CREATE INDEX pending_send_by_state ON {s}.pending_send (state, seq);
",
    "
CREATE TABLE {s}.kept_ask (
    ask_id TEXT PRIMARY KEY,
    seq BIGINT GENERATED ALWAYS AS IDENTITY,
    owner_pid INTEGER NOT NULL,
    owner_start BIGINT NOT NULL,
    body TEXT NOT NULL
);
",
    "
CREATE TABLE {s}.conversation (
    pane TEXT PRIMARY KEY,
    title TEXT,
    title_by_phone BOOLEAN NOT NULL DEFAULT FALSE,
    items BIGINT NOT NULL DEFAULT 0,
    next_place BIGINT NOT NULL DEFAULT 0,
    dropped BOOLEAN NOT NULL DEFAULT FALSE,
    owner_pid INTEGER NOT NULL,
    owner_start BIGINT NOT NULL,
    written BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX conversation_by_written ON {s}.conversation (written);
CREATE TABLE {s}.conversation_item (
    pane TEXT NOT NULL,
    item_id TEXT NOT NULL,
    place BIGINT NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (pane, item_id)
);
CREATE INDEX conversation_item_by_place ON {s}.conversation_item (pane, place);
",
    // Conversations kept before times were started, as far as the store
    // can say, at the migration.
    "
ALTER TABLE {s}.conversation ADD COLUMN started_at BIGINT NOT NULL
    DEFAULT (extract(epoch FROM now()) * 1000)::bigint;
ALTER TABLE {s}.conversation ADD COLUMN written_at BIGINT NOT NULL DEFAULT 0;
UPDATE {s}.conversation SET written_at = started_at;
CREATE INDEX conversation_by_start ON {s}.conversation (started_at, pane);
",
];

/// How to reach the database, and the store's limits. Built with
/// [`PgReceiptOptions::builder`].
///
/// ```
/// use std::time::Duration;
/// use durable_sdk::stores::PgReceiptOptions;
///
/// let options = PgReceiptOptions::builder()
///     .url("postgres://desk:secret@db.internal/agents")
///     .schema("desk")
///     .per_group(1000)
///     .claim_wait(Duration::from_secs(10))
///     .build()
///     .unwrap();
/// assert!(!format!("{options:?}").contains("secret"));
/// ```
#[derive(Clone)]
pub struct PgReceiptOptions {
    config: tokio_postgres::Config,
    tls: PgTls,
    secrets: Vec<String>,
    schema: String,
    per_group: usize,
    kept_conversations: usize,
    pool_size: usize,
    claim_wait: Duration,
    claim_hold: Duration,
}

impl fmt::Debug for PgReceiptOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PgReceiptOptions")
            .field("target", &describe(&self.config))
            .field("tls", &self.tls)
            .field("schema", &self.schema)
            .field("per_group", &self.per_group)
            .field("pool_size", &self.pool_size)
            .field("claim_wait", &self.claim_wait)
            .field("claim_hold", &self.claim_hold)
            .finish_non_exhaustive()
    }
}

impl PgReceiptOptions {
    /// A builder; [`url`](PgReceiptOptionsBuilder::url) is required.
    pub fn builder() -> PgReceiptOptionsBuilder {
        PgReceiptOptionsBuilder::default()
    }

    /// Where it connects, without the password: `postgres://user@host:port/dbname`.
    pub fn target(&self) -> String {
        describe(&self.config)
    }

    /// The schema the tables live in.
    pub fn schema(&self) -> &str {
        &self.schema
    }

    /// Receipts kept per group.
    pub fn per_group(&self) -> usize {
        self.per_group
    }

    /// Conversations kept, at most.
    pub fn kept_conversations(&self) -> usize {
        self.kept_conversations
    }

    /// How the connections use TLS.
    pub fn ssl_mode(&self) -> PgSslMode {
        self.tls.mode()
    }
}

/// Builds [`PgReceiptOptions`].
#[derive(Default, Clone)]
pub struct PgReceiptOptionsBuilder {
    url: Option<String>,
    schema: Option<String>,
    per_group: Option<usize>,
    kept_conversations: Option<usize>,
    pool_size: Option<usize>,
    claim_wait: Option<Duration>,
    claim_hold: Option<Duration>,
    ssl_mode: Option<PgSslMode>,
    ssl_root_cert: Option<PathBuf>,
}

impl fmt::Debug for PgReceiptOptionsBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PgReceiptOptionsBuilder")
            .field("url", &self.url.as_ref().map(|_| "<set>"))
            .field("schema", &self.schema)
            .field("per_group", &self.per_group)
            .field("ssl_mode", &self.ssl_mode)
            .field("ssl_root_cert", &self.ssl_root_cert)
            .finish_non_exhaustive()
    }
}

impl PgReceiptOptionsBuilder {
    /// The database: a URL (`postgres://user:password@host:port/dbname`,
    /// `?host=/run/postgresql` for a Unix socket folder) or libpq's
    /// `key=value` form. Its password is kept out of every message.
    pub fn url(mut self, url: impl Into<String>) -> Self {
        self.url = Some(url.into());
        self
    }

    /// The schema for the tables (default `durable_receipts`): lowercase
    /// letters, digits and `_`, starting with a letter or `_`, at most 63.
    /// Agents of different identities sharing a database use different schemas.
    pub fn schema(mut self, schema: impl Into<String>) -> Self {
        self.schema = Some(schema.into());
        self
    }

    /// Receipts kept per group (default [`RECEIPTS_PER_GROUP`], at least 1).
    pub fn per_group(mut self, n: usize) -> Self {
        self.per_group = Some(n);
        self
    }

    /// Conversations kept (default [`KEPT_CONVERSATIONS`], at least 1): past
    /// them, the one written to least recently is forgotten whole. Every
    /// process sharing a schema should keep the same number.
    pub fn kept_conversations(mut self, n: usize) -> Self {
        self.kept_conversations = Some(n);
        self
    }

    /// Connections in the pool (default 8, at least 2).
    pub fn pool_size(mut self, n: usize) -> Self {
        self.pool_size = Some(n);
        self
    }

    /// How long a write waits for another process that runs the same request
    /// id, or for a free connection, before it fails with `500` (default 10 s).
    pub fn claim_wait(mut self, wait: Duration) -> Self {
        self.claim_wait = Some(wait);
        self
    }

    /// How long a claim may sit idle on the server while its write runs
    /// before the server ends it (default 5 min): what a hung process can
    /// hold up.
    pub fn claim_hold(mut self, hold: Duration) -> Self {
        self.claim_hold = Some(hold);
        self
    }

    /// How the connections use TLS, over the URL's `sslmode` (default:
    /// the URL's, else [`PgSslMode::Prefer`]; see the module's "TLS").
    pub fn ssl_mode(mut self, mode: PgSslMode) -> Self {
        self.ssl_mode = Some(mode);
        self
    }

    /// The roots `verify-full` checks the server's chain against: a PEM
    /// file of CA certificates, over the URL's `sslrootcert` (default: the
    /// URL's, else the system's store). Read by [`build`](Self::build).
    pub fn ssl_root_cert(mut self, pem_file: impl Into<PathBuf>) -> Self {
        self.ssl_root_cert = Some(pem_file.into());
        self
    }

    /// The options, or what is wrong with them (never quoting a password).
    pub fn build(self) -> Result<PgReceiptOptions, StoreError> {
        let url = self.url.ok_or_else(|| StoreError::new("postgres: no database URL given"))?;
        let mut secrets = secrets_in(&url);
        let (url, tls) = PgTls::from_url(&url, self.ssl_mode, self.ssl_root_cert)
            .map_err(|e| StoreError::new(scrub(&e, &secrets)))?;
        let mut config: tokio_postgres::Config = url.parse().map_err(|e: tokio_postgres::Error| {
            StoreError::new(scrub(&format!("postgres: the database URL is not valid: {e}"), &secrets))
        })?;
        config.ssl_mode(tls.tokio_postgres_mode());
        if let Some(p) = config.get_password() {
            secrets.push(String::from_utf8_lossy(p).into_owned());
        }
        secrets.retain(|s| !s.is_empty());
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(Duration::from_secs(5));
        }
        if config.get_application_name().is_none() {
            config.application_name("durable-receipts");
        }
        let schema = self.schema.unwrap_or_else(|| "durable_receipts".to_owned());
        let valid = !schema.is_empty()
            && schema.len() <= 63
            && schema.starts_with(|c: char| c.is_ascii_lowercase() || c == '_')
            && schema.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
        if !valid {
            return Err(StoreError::new(format!(
                "postgres: the schema name {schema:?} is not lowercase letters, digits and _ (at most 63, not starting with a digit)"
            )));
        }
        Ok(PgReceiptOptions {
            config,
            tls,
            secrets,
            schema,
            per_group: self.per_group.unwrap_or(RECEIPTS_PER_GROUP).max(1),
            kept_conversations: self.kept_conversations.unwrap_or(KEPT_CONVERSATIONS).max(1),
            pool_size: self.pool_size.unwrap_or(8).max(2),
            claim_wait: self.claim_wait.unwrap_or(Duration::from_secs(10)),
            claim_hold: self.claim_hold.unwrap_or(Duration::from_secs(300)),
        })
    }
}

/// `postgres://user@host:port/dbname` (a Unix socket folder in brackets),
/// never the password.
fn describe(config: &tokio_postgres::Config) -> String {
    let user = config.get_user().unwrap_or("");
    let hosts: Vec<String> = config
        .get_hosts()
        .iter()
        .enumerate()
        .map(|(i, h)| {
            let host = match h {
                Host::Tcp(name) => name.clone(),
                #[cfg(unix)]
                Host::Unix(path) => format!("[{}]", path.display()),
            };
            match config.get_ports().get(i).or(config.get_ports().first()) {
                Some(port) => format!("{host}:{port}"),
                None => host,
            }
        })
        .collect();
    let db = config.get_dbname().unwrap_or(user);
    let at = if user.is_empty() { String::new() } else { format!("{user}@") };
    format!("postgres://{at}{}/{db}", hosts.join(","))
}

/// The strings of `url` that may be a password: the URL's `user:password@`,
/// raw and percent-decoded, and any `password=` value.
fn secrets_in(url: &str) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(rest) = url.split_once("://").map(|(_, r)| r) {
        let authority = rest.split(['/', '?']).next().unwrap_or("");
        let userinfo = authority.rsplit_once('@').map(|(userinfo, _)| userinfo);
        if let Some((_, pass)) = userinfo.and_then(|u| u.split_once(':')) {
            out.push(pass.to_owned());
            out.push(percent_decode(pass));
        }
    }
    for (i, _) in url.match_indices("password=") {
        let value = &url[i + "password=".len()..];
        let value = value.trim_start_matches('\'');
        let end = value.find(['&', ' ', '\'']).unwrap_or(value.len());
        out.push(value[..end].to_owned());
        out.push(percent_decode(&value[..end]));
    }
    out.retain(|s| !s.is_empty());
    out
}

fn percent_decode(s: &str) -> String {
    percent_encoding::percent_decode_str(s).decode_utf8_lossy().into_owned()
}

/// An error and its causes (tokio-postgres says "error connecting to
/// server" and keeps the why in its source).
fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let more = c.to_string();
        if !text.contains(&more) {
            text = format!("{text}: {more}");
        }
        cause = c.source();
    }
    text
}

/// `text` with every secret replaced by `***`.
fn scrub(text: &str, secrets: &[String]) -> String {
    let mut out = text.to_owned();
    for s in secrets {
        if !s.is_empty() {
            out = out.replace(s.as_str(), "***");
        }
    }
    out
}

/// The SQL, with the schema's name in it.
struct Sql {
    lookup: String,
    lock: String,
    exists: String,
    next_seq: String,
    unevict: String,
    insert: String,
    evict: String,
    forget: String,
    delete_send: String,
    insert_send: String,
    set_send_state: String,
    end_send_unless_on: String,
    prune_sends: String,
    send_state: String,
    unfinished: String,
    keep_ask: String,
    forget_ask: String,
    take_asks: String,
    fresh_sessions: String,
    claim_conversation: String,
    forget_oldest: String,
    conversation_head: String,
    rewrite_item: String,
    next_place: String,
    insert_item: String,
    drop_oldest: String,
    recount: String,
    set_title: String,
    forget_items: String,
    forget_conversation: String,
    kept_items: String,
    rows: String,
}

/// A time the store kept, in milliseconds since the Unix epoch (a negative
/// one, which this SDK never writes, is the epoch).
fn timestamp(ms: i64) -> Timestamp {
    Timestamp::from_millis(u64::try_from(ms).unwrap_or(0))
}

/// The condition "the owner session `{o}.owner_pid`/`{o}.owner_start` is
/// gone": not in `pg_stat_activity` under that pid and start.
fn owner_gone(o: &str) -> String {
    format!(
        "NOT EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.pid = {o}.owner_pid \
         AND (extract(epoch FROM a.backend_start) * 1000000)::bigint = {o}.owner_start)"
    )
}

impl Sql {
    fn new(schema: &str) -> Sql {
        let s = format!("\"{schema}\"");
        Sql {
            lookup: format!(
                "SELECT r.status, r.body, e.request_id IS NOT NULL FROM (SELECT $1::text AS id) q \
                 LEFT JOIN {s}.receipt r ON r.request_id = q.id LEFT JOIN {s}.evicted e ON e.request_id = q.id"
            ),
            // The lock's key: the schema and the id, hashed to 64 bits (two
            // ids sharing a key only wait for each other, briefly).
            lock: "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))".to_owned(),
            exists: format!("SELECT 1 FROM {s}.receipt WHERE request_id = $1"),
            next_seq: format!(
                "INSERT INTO {s}.receipt_group (grp, last_seq) VALUES ($1, 1) \
                 ON CONFLICT (grp) DO UPDATE SET last_seq = {s}.receipt_group.last_seq + 1 RETURNING last_seq"
            ),
            unevict: format!("DELETE FROM {s}.evicted WHERE request_id = $1"),
            insert: format!(
                "INSERT INTO {s}.receipt (request_id, grp, seq, status, body) VALUES ($1, $2, $3, $4, $5) \
                 ON CONFLICT (request_id) DO NOTHING"
            ),
            evict: format!(
                "WITH gone AS (DELETE FROM {s}.receipt WHERE grp = $1 AND seq <= $2 RETURNING request_id, grp, seq) \
                 INSERT INTO {s}.evicted (request_id, grp, seq) SELECT request_id, grp, seq FROM gone \
                 ON CONFLICT (request_id) DO UPDATE SET grp = EXCLUDED.grp, seq = EXCLUDED.seq"
            ),
            forget: format!("DELETE FROM {s}.evicted WHERE grp = $1 AND seq <= $2"),
            delete_send: format!("DELETE FROM {s}.pending_send WHERE request_id = $1"),
            insert_send: format!(
                "INSERT INTO {s}.pending_send (request_id, pane, text, state) VALUES ($1, $2, $3, $4)"
            ),
            set_send_state: format!("UPDATE {s}.pending_send SET state = $2 WHERE request_id = $1"),
            end_send_unless_on: format!(
                "UPDATE {s}.pending_send SET state = 'done' WHERE request_id = $1 AND NOT (pane = ANY($2))"
            ),
            prune_sends: format!(
                "DELETE FROM {s}.pending_send WHERE state IN ('done', 'closed') \
                 AND seq <= (SELECT MAX(seq) FROM {s}.pending_send) - $1"
            ),
            send_state: format!("SELECT state FROM {s}.pending_send WHERE request_id = $1"),
            unfinished: format!(
                "SELECT request_id, pane, text, state FROM {s}.pending_send \
                 WHERE state IN ('queued', 'running') ORDER BY seq"
            ),
            keep_ask: format!(
                "INSERT INTO {s}.kept_ask (ask_id, owner_pid, owner_start, body) VALUES ($1, $2, $3, $4) \
                 ON CONFLICT (ask_id) DO UPDATE SET owner_pid = EXCLUDED.owner_pid, \
                 owner_start = EXCLUDED.owner_start, body = EXCLUDED.body"
            ),
            forget_ask: format!("DELETE FROM {s}.kept_ask WHERE ask_id = $1"),
            // The asks of owners whose session is gone become this
            // process's: an owner is a session (its pid and start), alive
            // while it is in pg_stat_activity. Row locks make two processes
            // starting at once take each ask once.
            take_asks: format!(
                "UPDATE {s}.kept_ask k SET owner_pid = $1, owner_start = $2 \
                 WHERE NOT (k.owner_pid = $1 AND k.owner_start = $2) AND {} \
                 RETURNING k.seq, k.body, k.ask_id",
                owner_gone("k")
            ),
            // A conversation is this process's to write when it is new, its
            // own, or its owner's session is gone; the row lock orders two
            // writers. No row back: another running process owns it.
            fresh_sessions: "SELECT pg_stat_clear_snapshot()".to_owned(),
            // Past the bound, the conversations written to least recently go
            // whole: never one another running process owns, nor one a
            // batch holds now (SKIP LOCKED: it is being written, the
            // newest), so that two processes evicting never wait on each other.
            forget_oldest: format!(
                "WITH gone AS (DELETE FROM {s}.conversation WHERE pane IN \
                 (SELECT c.pane FROM {s}.conversation c \
                 WHERE (c.owner_pid = $2 AND c.owner_start = $3) OR {} \
                 ORDER BY c.written, c.pane \
                 LIMIT GREATEST((SELECT COUNT(*) FROM {s}.conversation) - $1, 0) \
                 FOR UPDATE SKIP LOCKED) RETURNING pane) \
                 DELETE FROM {s}.conversation_item i USING gone WHERE i.pane = gone.pane",
                owner_gone("c")
            ),
            claim_conversation: format!(
                "INSERT INTO {s}.conversation AS c (pane, owner_pid, owner_start, written, started_at, written_at) \
                 VALUES ($1, $2, $3, (extract(epoch FROM clock_timestamp()) * 1000000)::bigint, $4, $4) \
                 ON CONFLICT (pane) DO UPDATE SET owner_pid = EXCLUDED.owner_pid, owner_start = EXCLUDED.owner_start, \
                 written = EXCLUDED.written, written_at = EXCLUDED.written_at \
                 WHERE (c.owner_pid = $2 AND c.owner_start = $3) OR {} \
                 RETURNING (c.xmax = 0)",
                owner_gone("c")
            ),
            conversation_head: format!(
                "SELECT c.title, c.dropped, (c.owner_pid = $2 AND c.owner_start = $3) OR {}, c.owner_pid, \
                 c.title_by_phone, c.started_at, c.written_at \
                 FROM {s}.conversation c WHERE c.pane = $1",
                owner_gone("c")
            ),
            rewrite_item: format!(
                "UPDATE {s}.conversation_item SET body = $3 WHERE pane = $1 AND item_id = $2"
            ),
            next_place: format!(
                "UPDATE {s}.conversation SET items = items + 1, next_place = next_place + 1 \
                 WHERE pane = $1 RETURNING next_place, items"
            ),
            insert_item: format!(
                "INSERT INTO {s}.conversation_item (pane, item_id, place, body) VALUES ($1, $2, $3, $4)"
            ),
            drop_oldest: format!("DELETE FROM {s}.conversation_item WHERE pane = $1 AND place <= $2"),
            recount: format!(
                "UPDATE {s}.conversation SET dropped = TRUE, \
                 items = (SELECT COUNT(*) FROM {s}.conversation_item WHERE pane = $1) WHERE pane = $1"
            ),
            set_title: format!("UPDATE {s}.conversation SET title = $2, title_by_phone = $3 WHERE pane = $1"),
            forget_items: format!("DELETE FROM {s}.conversation_item WHERE pane = $1"),
            forget_conversation: format!("DELETE FROM {s}.conversation WHERE pane = $1"),
            kept_items: format!(
                "SELECT item_id, body FROM {s}.conversation_item WHERE pane = $1 ORDER BY place"
            ),
            // Another running process's conversations are its own to
            // show: listed here they would read as closed, and not read.
            rows: format!(
                "SELECT c.pane, c.title, c.started_at, c.written_at, c.items FROM {s}.conversation c \
                 WHERE ($1::bigint IS NULL OR (c.started_at, c.pane) < ($1, $2::text)) \
                 AND ((c.owner_pid = $4 AND c.owner_start = $5) OR {}) \
                 ORDER BY c.started_at DESC, c.pane DESC LIMIT $3",
                owner_gone("c")
            ),
        }
    }
}

/// A claim's open transaction, and its slot.
struct Held {
    tx: Tx,
    _slot: OwnedSemaphorePermit,
}

/// A pooled connection inside a transaction. Dropped without
/// [`end`](Tx::end), the connection is closed rather than given back (the
/// server then rolls the transaction back and frees its locks): a
/// connection is never pooled mid-transaction.
struct Tx {
    conn: Option<Object>,
}

impl Tx {
    fn conn(&self) -> &Object {
        self.conn.as_ref().expect("a transaction's connection is there until it ends")
    }

    /// `COMMIT` or `ROLLBACK`; the connection goes back to the pool once it
    /// is out of the transaction.
    async fn end(mut self, sql: &str) -> Result<(), tokio_postgres::Error> {
        let result = self.conn().batch_execute(sql).await;
        if result.is_ok() {
            drop(self.conn.take()); // back to the pool
        }
        result
    }
}

impl Drop for Tx {
    fn drop(&mut self) {
        if let Some(conn) = self.conn.take() {
            drop(Object::take(conn)); // closed, not pooled
        }
    }
}

struct Inner {
    pool: Pool,
    sql: Sql,
    schema: String,
    target: String,
    secrets: Vec<String>,
    per_group: usize,
    kept_conversations: usize,
    claim_wait: Duration,
    claim_hold: Duration,
    claim_slots: Arc<Semaphore>,
    claims: Mutex<HashMap<String, Held>>,
    /// This process's session of its own, open for the store's life: its
    /// pid and start name the owner of the asks this process keeps, and
    /// the server ends it when the process dies (see `kept_asks`).
    owner: Owner,
}

/// The owner session's client (dropping it ends the session) and its name.
struct Owner {
    _client: tokio_postgres::Client,
    pid: i32,
    /// Its start, in microseconds since the epoch.
    start: i64,
}

/// A [`ReceiptStore`] in PostgreSQL (feature `postgres`): receipts, evicted
/// ids, the sends journal, open asks and conversations, shared by every
/// process of one agent. See the module documentation for the guarantees.
///
/// ```no_run
/// use durable_sdk::stores::{PgReceiptOptions, PgReceiptStore};
/// use durable_sdk::{CoreOptions, Transport, create_core};
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let url = std::env::var("MY_AGENT_RECEIPTS_URL")?; // postgres://user:password@host/db
/// let store = PgReceiptStore::connect(PgReceiptOptions::builder().url(url).build()?).await?;
/// let collie = create_core(CoreOptions::builder().host_name("desk").receipts(store))?;
/// // … the layout and handlers …
/// collie.serve(Transport::socket()).await?;
/// collie.ready();
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct PgReceiptStore {
    inner: Arc<Inner>,
}

impl fmt::Debug for PgReceiptStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PgReceiptStore")
            .field("target", &self.inner.target)
            .field("schema", &self.inner.schema)
            .field("per_group", &self.inner.per_group)
            .finish_non_exhaustive()
    }
}

impl PgReceiptStore {
    /// Connects, creates or migrates the schema, and returns the store. Call
    /// it at start-up: it fails, saying why, when the database cannot be
    /// reached or its schema is from a newer SDK.
    pub async fn connect(options: PgReceiptOptions) -> Result<PgReceiptStore, StoreError> {
        let target = describe(&options.config);
        let manager = Manager::from_config(
            options.config.clone(),
            options.tls.connector(),
            ManagerConfig { recycling_method: RecyclingMethod::Fast },
        );
        let pool = Pool::builder(manager)
            .max_size(options.pool_size)
            .runtime(Runtime::Tokio1)
            .wait_timeout(Some(options.claim_wait))
            .create_timeout(Some(options.claim_wait))
            .recycle_timeout(Some(options.claim_wait))
            .build()
            .map_err(|e| StoreError::new(format!("postgres: cannot make the connection pool: {e}")))?;
        let owner = Self::owner_session(&options, &target).await?;
        let store = PgReceiptStore {
            inner: Arc::new(Inner {
                pool,
                sql: Sql::new(&options.schema),
                schema: options.schema.clone(),
                target,
                secrets: options.secrets.clone(),
                per_group: options.per_group,
                kept_conversations: options.kept_conversations,
                claim_wait: options.claim_wait,
                claim_hold: options.claim_hold,
                claim_slots: Arc::new(Semaphore::new(options.pool_size - 1)),
                claims: Mutex::new(HashMap::new()),
                owner,
            }),
        };
        store.migrate().await?;
        Ok(store)
    }

    /// Opens the session that names this process as an owner of kept asks.
    async fn owner_session(options: &PgReceiptOptions, target: &str) -> Result<Owner, StoreError> {
        let fail = |e: tokio_postgres::Error| {
            let why = match e.as_db_error() {
                Some(db) => format!("{} ({})", db.message(), db.code().code()),
                None => chain(&e),
            };
            let tls = options.tls.describe();
            let text = format!(
                "postgres ({target}, {tls}): opening the owner session: cannot reach the database: {why}"
            );
            StoreError::new(scrub(&text, &options.secrets))
        };
        let (client, connection) = options.config.connect(options.tls.connector()).await.map_err(fail)?;
        tokio::spawn(async move {
            // Ends with the client (the store dropped) or the server.
            let _ = connection.await;
        });
        let row = client
            .query_one(
                // Microseconds since the epoch: a number, the same whatever
                // each session's TimeZone and DateStyle.
                "SELECT pid, (extract(epoch FROM backend_start) * 1000000)::bigint FROM pg_stat_activity WHERE pid = pg_backend_pid()",
                &[],
            )
            .await
            .map_err(fail)?;
        Ok(Owner { pid: row.get(0), start: row.get(1), _client: client })
    }

    /// Where it connects, without the password.
    pub fn target(&self) -> &str {
        &self.inner.target
    }

    /// The schema its tables are in.
    pub fn schema(&self) -> &str {
        &self.inner.schema
    }

    /// Receipts kept per group.
    pub fn per_group(&self) -> usize {
        self.inner.per_group
    }

    /// An error naming what broke, with no secret in it.
    fn err(&self, what: &str, e: impl fmt::Display) -> StoreError {
        let text = format!("postgres ({}): {what}: {e}", self.inner.target);
        StoreError::new(scrub(&text, &self.inner.secrets))
    }

    fn db_err(&self, what: &str, e: tokio_postgres::Error) -> StoreError {
        match e.as_db_error() {
            Some(db) => self.err(what, format!("{} ({})", db.message(), db.code().code())),
            None if e.is_closed() => self.err(&format!("{what}: cannot reach the database"), chain(&e)),
            None => self.err(what, chain(&e)),
        }
    }

    async fn conn(&self, what: &str) -> Result<Object, StoreError> {
        use deadpool_postgres::PoolError;
        let unreachable = format!("{what}: cannot reach the database");
        self.inner.pool.get().await.map_err(|e| match e {
            PoolError::Backend(e) => match e.as_db_error() {
                Some(db) => self.err(&unreachable, format!("{} ({})", db.message(), db.code().code())),
                None => self.err(&unreachable, chain(&e)),
            },
            PoolError::Timeout(_) => self
                .err(&unreachable, format!("no connection within {} ms", self.inner.claim_wait.as_millis())),
            e => self.err(&unreachable, e),
        })
    }

    /// A transaction (read committed, durable commits) on a pooled connection.
    async fn begin(&self, what: &str, extra: &str) -> Result<Tx, StoreError> {
        let conn = self.conn(what).await?;
        let tx = Tx { conn: Some(conn) };
        tx.conn()
            .batch_execute(&format!(
                "BEGIN ISOLATION LEVEL READ COMMITTED; SET LOCAL synchronous_commit = on;{extra}"
            ))
            .await
            .map_err(|e| self.db_err(what, e))?;
        Ok(tx)
    }

    async fn migrate(&self) -> Result<(), StoreError> {
        let what = "creating the schema";
        let tx = self.begin(what, "").await?;
        let s = format!("\"{}\"", self.inner.schema);
        let c = tx.conn();
        let run = |sql: String| async move { c.batch_execute(&sql).await };
        // One process migrates at a time (the key names this schema's layout).
        c.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))",
            &[&format!("durable-receipts-schema:{}", self.inner.schema)],
        )
        .await
        .map_err(|e| self.db_err(what, e))?;
        run(format!(
            "CREATE SCHEMA IF NOT EXISTS {s}; CREATE TABLE IF NOT EXISTS {s}.schema_version (version INTEGER NOT NULL)"
        ))
        .await
        .map_err(|e| self.db_err(what, e))?;
        let row = c
            .query_opt(&format!("SELECT version FROM {s}.schema_version"), &[])
            .await
            .map_err(|e| self.db_err(what, e))?;
        let version: i32 = row.map(|r| r.get(0)).unwrap_or(0);
        if version > PG_SCHEMA_VERSION {
            return Err(self.err(
                what,
                format!(
                    "the schema {} is at version {version}, newer than this SDK's {PG_SCHEMA_VERSION}: upgrade the SDK",
                    self.inner.schema
                ),
            ));
        }
        for (from, migration) in MIGRATIONS.iter().enumerate().skip(version.max(0) as usize) {
            run(migration.replace("{s}", &s))
                .await
                .map_err(|e| self.db_err(&format!("migrating from version {from}"), e))?;
        }
        if version < PG_SCHEMA_VERSION {
            run(format!(
                "DELETE FROM {s}.schema_version; INSERT INTO {s}.schema_version (version) VALUES ({PG_SCHEMA_VERSION})"
            ))
            .await
            .map_err(|e| self.db_err(what, e))?;
        }
        tx.end("COMMIT").await.map_err(|e| self.db_err(what, e))
    }

    /// The lock key of a request id: this schema's, so that agents in other
    /// schemas never wait for each other.
    fn key(&self, request_id: &str) -> String {
        format!("{}\u{1f}{request_id}", self.inner.schema)
    }

    async fn lookup(&self, conn: &Object, request_id: &str, what: &str) -> Result<Lookup, StoreError> {
        let stmt = conn.prepare_cached(&self.inner.sql.lookup).await.map_err(|e| self.db_err(what, e))?;
        let row = conn.query_one(&stmt, &[&request_id]).await.map_err(|e| self.db_err(what, e))?;
        let status: Option<i32> = row.get(0);
        let body: Option<String> = row.get(1);
        let evicted: bool = row.get(2);
        Ok(match (status, body) {
            (Some(status), Some(body)) => {
                let status = u16::try_from(status).unwrap_or(500);
                let receipt = Receipt::from_json_text(status, body)
                    .map_err(|e| self.err(what, format!("a stored receipt is not JSON: {e}")))?;
                Lookup::Found(receipt)
            }
            _ if evicted => Lookup::Evicted,
            _ => Lookup::Unknown,
        })
    }

    async fn try_claim(&self, request_id: &str) -> Result<Lookup, StoreError> {
        let what = "claiming a request id";
        let slot =
            tokio::time::timeout(self.inner.claim_wait, self.inner.claim_slots.clone().acquire_owned())
                .await
                .map_err(|_| {
                    self.err(
                        what,
                        format!(
                            "{} writes are running already; none ended in time",
                            self.inner.claim_slots.available_permits()
                        ),
                    )
                })?
                .map_err(|_| self.err(what, "the store is closed"))?;
        let extra = format!(
            " SET LOCAL lock_timeout = {}; SET LOCAL idle_in_transaction_session_timeout = {};",
            self.inner.claim_wait.as_millis().max(1),
            self.inner.claim_hold.as_millis().max(1)
        );
        let tx = self.begin(what, &extra).await?;
        let c = tx.conn();
        if let Err(e) = c.execute(&self.inner.sql.lock, &[&self.key(request_id)]).await {
            if e.code() == Some(&tokio_postgres::error::SqlState::LOCK_NOT_AVAILABLE) {
                return Err(self.err(
                    what,
                    format!(
                        "request {request_id} is being run by another process of this agent, still after {} ms",
                        self.inner.claim_wait.as_millis()
                    ),
                ));
            }
            return Err(self.db_err(what, e));
        }
        let found = self.lookup(c, request_id, what).await?;
        if found != Lookup::Unknown {
            tx.end("COMMIT").await.map_err(|e| self.db_err(what, e))?;
            return Ok(found);
        }
        let old = self.claims().insert(request_id.to_owned(), Held { tx, _slot: slot });
        drop(old); // none: the core claims an id once at a time (a stale one is closed)
        Ok(Lookup::Unknown)
    }

    fn claims(&self) -> std::sync::MutexGuard<'_, HashMap<String, Held>> {
        self.inner.claims.lock().unwrap_or_else(|e| e.into_inner())
    }

    async fn put_in(
        &self,
        tx: &Tx,
        request_id: &str,
        receipt: &Receipt,
        group: &str,
    ) -> Result<bool, StoreError> {
        let what = "keeping a receipt";
        let sql = &self.inner.sql;
        let c = tx.conn();
        let e = |e| self.db_err(what, e);
        if c.query_opt(&sql.exists, &[&request_id]).await.map_err(e)?.is_some() {
            return Ok(false); // already kept: the first answer stays
        }
        let seq: i64 = c.query_one(&sql.next_seq, &[&group]).await.map_err(e)?.get(0);
        let body =
            receipt.json_text().map_err(|e| self.err(what, format!("a receipt's body is not JSON: {e}")))?;
        c.execute(&sql.unevict, &[&request_id]).await.map_err(e)?;
        let inserted = c
            .execute(&sql.insert, &[&request_id, &group, &seq, &i32::from(receipt.status), &body])
            .await
            .map_err(e)?;
        if inserted == 0 {
            return Ok(false);
        }
        let per_group = i64::try_from(self.inner.per_group).unwrap_or(i64::MAX / 16);
        let remembered = per_group.saturating_mul(EVICTED_MEMORY_FACTOR as i64);
        let oldest_live = seq - per_group;
        c.execute(&sql.evict, &[&group, &oldest_live]).await.map_err(e)?;
        c.execute(&sql.forget, &[&group, &oldest_live.saturating_sub(remembered)]).await.map_err(e)?;
        Ok(true)
    }

    /// `ReceiptStore::put`'s work, on the task it runs on.
    async fn put_now(&self, request_id: &str, receipt: Receipt, group: &str) -> Result<(), StoreError> {
        let what = "keeping a receipt";
        let held = self.claims().remove(request_id);
        let (tx, _slot) = match held {
            Some(Held { tx, _slot }) => (tx, Some(_slot)),
            None => {
                // Not claimed (a held answer's receipt): the same lock, briefly.
                let tx = self.begin(what, "").await?;
                tx.conn()
                    .execute(&self.inner.sql.lock, &[&self.key(request_id)])
                    .await
                    .map_err(|e| self.db_err(what, e))?;
                (tx, None)
            }
        };
        if self.put_in(&tx, request_id, &receipt, group).await? {
            tx.end("COMMIT").await.map_err(|e| self.db_err("committing a receipt", e))
        } else {
            tx.end("ROLLBACK").await.map_err(|e| self.db_err(what, e))
        }
    }

    /// One transaction for a batch of conversation changes, then the sends
    /// `ended` recorded `done` in it. The changes of a conversation another
    /// running process owns are left out (the others are kept, and the
    /// sends on its pane stay running), and the call then fails naming it.
    async fn keep_changes(
        &self,
        ops: Vec<ConversationOp>,
        ended: &[String],
        at: Timestamp,
    ) -> Result<(), StoreError> {
        let what = "keeping conversations";
        let at = i64::try_from(at.as_millis()).unwrap_or(i64::MAX);
        if ops.is_empty() && ended.is_empty() {
            return Ok(());
        }
        let sql = &self.inner.sql;
        let owner = &self.inner.owner;
        let tx = self.begin(what, "").await?;
        let c = tx.conn();
        let e = |e| self.db_err(what, e);
        let limit = i64::try_from(KEPT_ITEMS_PER_CONVERSATION).unwrap_or(i64::MAX);
        let mut claimed: Vec<&str> = Vec::new();
        let mut fenced: Vec<&str> = Vec::new();
        // Whether the batch starts a conversation: only then may the
        // schema be past its bound.
        let mut created = false;
        for op in &ops {
            let pane = match op {
                ConversationOp::Item { pane, .. }
                | ConversationOp::Title { pane, .. }
                | ConversationOp::Forget { pane } => pane.as_str(),
                // A later kind of op this store does not know: keeping it
                // wrong would be worse than not keeping it.
                _ => continue,
            };
            if fenced.contains(&pane) {
                continue;
            }
            if !claimed.contains(&pane) {
                // The sessions as they are now: a transaction otherwise
                // reads pg_stat_activity as it was at its first look, and
                // would take a session started since for gone.
                c.execute(&sql.fresh_sessions, &[]).await.map_err(e)?;
                let mine = c
                    .query_opt(&sql.claim_conversation, &[&pane, &owner.pid, &owner.start, &at])
                    .await
                    .map_err(e)?;
                let Some(inserted) = mine else {
                    fenced.push(pane);
                    continue;
                };
                created |= inserted.get::<_, bool>(0);
                claimed.push(pane);
            }
            match op {
                ConversationOp::Item { item, .. } => {
                    let body = serde_json::to_string(&**item)
                        .map_err(|e| self.err(what, format!("an item is not JSON: {e}")))?;
                    let id = item.id.as_str();
                    if c.execute(&sql.rewrite_item, &[&pane, &id, &body]).await.map_err(e)? > 0 {
                        continue;
                    }
                    let row = c.query_one(&sql.next_place, &[&pane]).await.map_err(e)?;
                    let (place, items): (i64, i64) = (row.get(0), row.get(1));
                    c.execute(&sql.insert_item, &[&pane, &id, &place, &body]).await.map_err(e)?;
                    if items > limit {
                        // The oldest go first; the conversation says some went.
                        c.execute(&sql.drop_oldest, &[&pane, &(place - limit)]).await.map_err(e)?;
                        c.execute(&sql.recount, &[&pane]).await.map_err(e)?;
                    }
                }
                ConversationOp::Title { title, by_phone, .. } => {
                    c.execute(&sql.set_title, &[&pane, title, by_phone]).await.map_err(e)?;
                }
                ConversationOp::Forget { .. } => {
                    c.execute(&sql.forget_items, &[&pane]).await.map_err(e)?;
                    c.execute(&sql.forget_conversation, &[&pane]).await.map_err(e)?;
                    // Forgotten, it is nobody's: a later op claims it afresh.
                    claimed.retain(|p| *p != pane);
                }
                _ => {}
            }
        }
        if created {
            let kept = i64::try_from(self.inner.kept_conversations).unwrap_or(i64::MAX);
            c.execute(&sql.forget_oldest, &[&kept, &owner.pid, &owner.start]).await.map_err(e)?;
        }
        if !ended.is_empty() {
            // A send on a pane left out stays running: its items are not kept.
            for request_id in ended {
                c.execute(&sql.end_send_unless_on, &[request_id, &fenced]).await.map_err(e)?;
            }
            c.execute(&sql.prune_sends, &[&FINISHED_SENDS_KEPT]).await.map_err(e)?;
        }
        tx.end("COMMIT").await.map_err(e)?;
        if fenced.is_empty() {
            return Ok(());
        }
        Err(self.err(
            what,
            format!(
                "the conversation of pane(s) {} belongs to another running process (its database session is alive): one process writes a conversation at a time; the other panes' changes are kept",
                fenced.join(", ")
            ),
        ))
    }
}

impl ReceiptStore for PgReceiptStore {
    async fn get(&self, request_id: &str) -> Result<Lookup, StoreError> {
        let conn = self.conn("looking up a receipt").await?;
        self.lookup(&conn, request_id, "looking up a receipt").await
    }

    async fn claim(&self, request_id: &str) -> Result<Lookup, StoreError> {
        self.try_claim(request_id).await
    }

    fn release(&self, request_id: &str) {
        let Some(held) = self.claims().remove(request_id) else { return };
        let Held { tx, _slot } = held;
        match tokio::runtime::Handle::try_current() {
            // Rolled back in the background; the slot is freed once it is.
            Ok(rt) => {
                rt.spawn(async move {
                    let _slot = _slot;
                    let _ = tx.end("ROLLBACK").await;
                });
            }
            // No runtime: the connection is closed (the server rolls back).
            Err(_) => drop(tx),
        }
    }

    async fn put(&self, request_id: &str, receipt: Receipt, group: &str) -> Result<(), StoreError> {
        // On a task of its own: a put whose caller goes away midway still
        // commits. It holds the id's claim (the advisory lock in its open
        // transaction), which would otherwise end with no receipt kept —
        // and a duplicate waiting at another process would run the write
        // again. The core puts a dropped write's receipt again; a put of a
        // kept id keeps the first.
        let (store, request_id, group) = (self.clone(), request_id.to_owned(), group.to_owned());
        tokio::spawn(async move { store.put_now(&request_id, receipt, &group).await })
            .await
            .map_err(|e| self.err("keeping a receipt", format!("its task ended before it did ({e})")))?
    }

    async fn record_send(&self, send: PendingSend) -> Result<(), StoreError> {
        let what = "recording a send";
        let sql = &self.inner.sql;
        let tx = self.begin(what, "").await?;
        let c = tx.conn();
        let e = |e| self.db_err(what, e);
        // Recorded again (a retry of one never answered): last in line.
        c.execute(&sql.delete_send, &[&send.request_id]).await.map_err(e)?;
        c.execute(&sql.insert_send, &[&send.request_id, &send.pane, &send.text, &send.state.as_str()])
            .await
            .map_err(e)?;
        tx.end("COMMIT").await.map_err(e)
    }

    async fn set_send_state(&self, request_id: &str, state: SendState) -> Result<(), StoreError> {
        let what = "moving a send on";
        let sql = &self.inner.sql;
        let tx = self.begin(what, "").await?;
        let c = tx.conn();
        let e = |e| self.db_err(what, e);
        c.execute(&sql.set_send_state, &[&request_id, &state.as_str()]).await.map_err(e)?;
        if matches!(state, SendState::Done | SendState::Closed) {
            c.execute(&sql.prune_sends, &[&FINISHED_SENDS_KEPT]).await.map_err(e)?;
        }
        tx.end("COMMIT").await.map_err(e)
    }

    async fn send_state(&self, request_id: &str) -> Result<Option<SendState>, StoreError> {
        let what = "reading a send's state";
        let conn = self.conn(what).await?;
        let row = conn
            .query_opt(&self.inner.sql.send_state, &[&request_id])
            .await
            .map_err(|e| self.db_err(what, e))?;
        Ok(row.and_then(|r| SendState::parse(r.get::<_, &str>(0))))
    }

    fn keeps_sends(&self) -> bool {
        true
    }

    fn keeps_asks(&self) -> bool {
        true
    }

    async fn keep_ask(&self, ask: KeptAskRecord) -> Result<(), StoreError> {
        let what = "keeping an ask";
        let body = ask.to_json_text()?;
        let owner = &self.inner.owner;
        let conn = self.conn(what).await?;
        conn.execute(&self.inner.sql.keep_ask, &[&ask.ask.id, &owner.pid, &owner.start, &body])
            .await
            .map_err(|e| self.db_err(what, e))?;
        Ok(())
    }

    async fn forget_ask(&self, ask_id: &str) -> Result<(), StoreError> {
        let what = "forgetting an ask";
        let conn = self.conn(what).await?;
        conn.execute(&self.inner.sql.forget_ask, &[&ask_id]).await.map_err(|e| self.db_err(what, e))?;
        Ok(())
    }

    /// The asks kept by processes that are gone, now this process's: never
    /// those of a process still running (its owner session is alive).
    async fn kept_asks(&self) -> Result<Vec<KeptAskRecord>, StoreError> {
        let what = "taking up the kept asks";
        let owner = &self.inner.owner;
        let conn = self.conn(what).await?;
        let rows = conn
            .query(&self.inner.sql.take_asks, &[&owner.pid, &owner.start])
            .await
            .map_err(|e| self.db_err(what, e))?;
        let mut taken: Vec<(i64, KeptAskRecord)> = Vec::with_capacity(rows.len());
        for row in &rows {
            match KeptAskRecord::from_json_text(row.get::<_, &str>(1)) {
                Ok(record) => taken.push((row.get(0), record)),
                // One bad record must not keep the others (and the agent) from starting.
                Err(e) => {
                    let ask_id: &str = row.get(2);
                    tracing::warn!(ask_id = %ask_id, error = %e, "postgres: a kept ask is damaged; it is dropped");
                    let _ = conn.execute(&self.inner.sql.forget_ask, &[&ask_id]).await;
                }
            }
        }
        taken.sort_by_key(|(seq, _)| *seq);
        Ok(taken.into_iter().map(|(_, r)| r).collect())
    }

    fn keeps_conversations(&self) -> bool {
        true
    }

    /// One transaction for the batch. The changes of a conversation another
    /// running process owns are left out (the others are kept), and the
    /// call then fails naming it.
    async fn keep_conversation(&self, ops: Vec<ConversationOp>, at: Timestamp) -> Result<(), StoreError> {
        self.keep_changes(ops, &[], at).await
    }

    /// The same transaction, the sends `done` in it with the changes (a
    /// send on a pane whose conversation was left out stays running).
    async fn keep_conversation_and_end_sends(
        &self,
        ops: Vec<ConversationOp>,
        ended: Vec<String>,
        at: Timestamp,
    ) -> Result<(), StoreError> {
        self.keep_changes(ops, &ended, at).await
    }

    /// A pane's kept conversation, unless another running process owns it
    /// (an error: that process is the agent's writer). An item whose text
    /// no longer reads is skipped with a warning.
    async fn kept_conversation(&self, pane: &str) -> Result<Option<KeptConversation>, StoreError> {
        let what = "reading a kept conversation";
        let sql = &self.inner.sql;
        let owner = &self.inner.owner;
        let conn = self.conn(what).await?;
        let e = |e| self.db_err(what, e);
        let Some(head) =
            conn.query_opt(&sql.conversation_head, &[&pane, &owner.pid, &owner.start]).await.map_err(e)?
        else {
            return Ok(None);
        };
        let (title, dropped, mine, owner_pid, title_by_phone): (Option<String>, bool, bool, i32, bool) =
            (head.get(0), head.get(1), head.get(2), head.get(3), head.get(4));
        let (started_at, written_at): (i64, i64) = (head.get(5), head.get(6));
        if !mine {
            return Err(self.err(
                what,
                format!(
                    "pane {pane}'s conversation belongs to another running process (database session {owner_pid} is alive)"
                ),
            ));
        }
        let rows = conn.query(&sql.kept_items, &[&pane]).await.map_err(e)?;
        let mut items = Vec::with_capacity(rows.len());
        for row in &rows {
            match serde_json::from_str::<Item>(row.get::<_, &str>(1)) {
                Ok(item) => items.push(item),
                Err(err) => {
                    let item_id: &str = row.get(0);
                    tracing::warn!(pane = %pane, item_id = %item_id, error = %err, "postgres: a kept item is damaged; it is skipped");
                }
            }
        }
        Ok(Some(
            KeptConversation::new(title, items, dropped)
                .with_title_by_phone(title_by_phone)
                .with_times(timestamp(started_at), timestamp(written_at)),
        ))
    }

    /// The kept conversations, newest first by start: this process's, and
    /// those whose owner is gone (another running process's are left out:
    /// it shows them, and only it reads them).
    async fn conversation_rows(
        &self,
        after: Option<RowPlace>,
        limit: usize,
    ) -> Result<Vec<KeptConversationRow>, StoreError> {
        let what = "listing kept conversations";
        let conn = self.conn(what).await?;
        let (after_start, after_pane) = match &after {
            Some(a) => {
                (Some(i64::try_from(a.started_at.as_millis()).unwrap_or(i64::MAX)), Some(a.pane.as_str()))
            }
            None => (None, None),
        };
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let owner = &self.inner.owner;
        let rows = conn
            .query(&self.inner.sql.rows, &[&after_start, &after_pane, &limit, &owner.pid, &owner.start])
            .await
            .map_err(|e| self.db_err(what, e))?;
        Ok(rows
            .iter()
            .map(|r| {
                KeptConversationRow::new(
                    r.get::<_, String>(0),
                    r.get::<_, Option<String>>(1),
                    timestamp(r.get(2)),
                    timestamp(r.get(3)),
                    u64::try_from(r.get::<_, i64>(4)).unwrap_or(0),
                )
            })
            .collect())
    }

    async fn unfinished_sends(&self) -> Result<Vec<PendingSend>, StoreError> {
        let what = "reading the unfinished sends";
        let conn = self.conn(what).await?;
        let rows = conn.query(&self.inner.sql.unfinished, &[]).await.map_err(|e| self.db_err(what, e))?;
        Ok(rows
            .iter()
            .filter_map(|r| {
                let state = SendState::parse(r.get::<_, &str>(3))?;
                Some(PendingSend::new(
                    r.get::<_, String>(0),
                    r.get::<_, String>(1),
                    r.get::<_, String>(2),
                    state,
                ))
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_password_is_in_no_debug_and_no_error() {
        let o = PgReceiptOptions::builder()
            .url("postgres://desk:s3cr%40t@db.example:5433/agents")
            .build()
            .unwrap();
        let shown = format!("{o:?} {}", o.target());
        assert!(!shown.contains("s3cr") && !shown.contains("s3cr@t"), "{shown}");
        assert!(shown.contains("postgres://desk@db.example:5433/agents"), "{shown}");
        let e = PgReceiptOptions::builder().url("postgres://desk:hunter2@db:notaport/x").build().unwrap_err();
        assert!(!e.to_string().contains("hunter2"), "{e}");
        assert!(e.to_string().contains("not valid"), "{e}");
        let e = PgReceiptOptions::builder().url("host=db password='pa ss' port=x").build().unwrap_err();
        assert!(!e.to_string().contains("pa ss"), "{e}");
        let b = format!("{:?}", PgReceiptOptions::builder().url("postgres://u:hunter2@h/d"));
        assert!(!b.contains("hunter2"), "{b}");
    }

    #[test]
    fn options_have_the_memory_stores_defaults_and_check_the_schema_name() {
        let o = PgReceiptOptions::builder().url("postgres://u@h/d").build().unwrap();
        assert_eq!((o.per_group(), o.schema()), (RECEIPTS_PER_GROUP, "durable_receipts"));
        let o = PgReceiptOptions::builder()
            .url("postgres://u@h/d")
            .per_group(0)
            .schema("desk_2")
            .build()
            .unwrap();
        assert_eq!((o.per_group(), o.schema()), (1, "desk_2"));
        for bad in ["", "Desk", "2desk", "desk;drop", "a\"b"] {
            let e = PgReceiptOptions::builder().url("postgres://u@h/d").schema(bad).build().unwrap_err();
            assert!(e.to_string().contains("schema name"), "{bad}: {e}");
        }
        assert!(PgReceiptOptions::builder().build().unwrap_err().to_string().contains("no database URL"));
    }

    #[test]
    fn secrets_are_found_in_both_forms() {
        assert!(secrets_in("postgres://u:p%2Fw@h/d").contains(&"p/w".to_owned()));
        assert!(secrets_in("postgresql://h/d?password=zz&user=u").contains(&"zz".to_owned()));
        assert!(secrets_in("host=h password=yy").contains(&"yy".to_owned()));
        assert!(secrets_in("postgres://u@h/d").is_empty());
    }
}
