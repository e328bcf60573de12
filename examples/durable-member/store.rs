//! The desk's own store: tickets (and the announcements pane), their titles,
//! orders and closed flags, renamed or closed workspaces and tabs, and the
//! counters that keep turn, ask and ticket ids unique across restarts.
//! (Undecided asks and every conversation's items are kept by the SDK's
//! receipt store; the `ask` and `item` tables of older files are left
//! unread.)
//!
//! One SQLite file (`desk.sqlite3` in the data folder) in WAL mode with
//! `synchronous = NORMAL`: every change is one committed transaction, so it
//! survives the process being killed (the receipts, which must also survive
//! a power loss, live in the SDK's own store with `FULL`). Calls are short
//! and made under one mutex; the history provider reads the tickets'
//! orders on a blocking thread (`spawn_blocking`).

use std::path::Path;
use std::sync::{Mutex, MutexGuard};

use rusqlite::{Connection, OptionalExtension, Row, params};
use serde_json::Value;

pub(crate) type Result<T> = std::result::Result<T, rusqlite::Error>;

/// The workspace and its tabs.
pub(crate) const WORKSPACE: (&str, &str) = ("support", "Support");
pub(crate) const TAB_MAIN: (&str, &str) = ("main", "Tickets");
pub(crate) const TAB_BOARD: (&str, &str) = ("board", "Board");

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS pane (
    n INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    tab TEXT NOT NULL,
    title TEXT NOT NULL,
    harness TEXT NOT NULL,
    ticket INTEGER NOT NULL,
    order_no TEXT,
    amount TEXT,
    closed INTEGER NOT NULL DEFAULT 0,
    started_at INTEGER NOT NULL,
    ended_at INTEGER
);
CREATE TABLE IF NOT EXISTS scope (
    key TEXT PRIMARY KEY NOT NULL,
    title TEXT,
    closed INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS ask (
    id TEXT PRIMARY KEY NOT NULL,
    pane TEXT NOT NULL,
    kind TEXT NOT NULL,
    tool_call_id TEXT NOT NULL,
    expires_at INTEGER,
    raised_at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS counter (
    name TEXT PRIMARY KEY NOT NULL,
    value INTEGER NOT NULL
);
";

/// A ticket, or the announcements pane.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PaneRow {
    /// Insertion order.
    pub(crate) n: i64,
    pub(crate) id: String,
    /// `main` or `board`.
    pub(crate) tab: String,
    pub(crate) title: String,
    pub(crate) harness: String,
    /// A ticket has handlers and the refund action; the announcements pane has neither.
    pub(crate) ticket: bool,
    pub(crate) order: Option<String>,
    pub(crate) amount: Option<Value>,
    pub(crate) closed: bool,
    pub(crate) started_at: u64,
    pub(crate) ended_at: Option<u64>,
}

pub(crate) struct Store {
    conn: Mutex<Connection>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").finish_non_exhaustive()
    }
}

fn pane_row(r: &Row<'_>) -> Result<PaneRow> {
    let amount: Option<String> = r.get("amount")?;
    Ok(PaneRow {
        n: r.get("n")?,
        id: r.get("id")?,
        tab: r.get("tab")?,
        title: r.get("title")?,
        harness: r.get("harness")?,
        ticket: r.get("ticket")?,
        order: r.get("order_no")?,
        amount: amount.and_then(|a| serde_json::from_str(&a).ok()),
        closed: r.get("closed")?,
        started_at: r.get::<_, i64>("started_at")? as u64,
        ended_at: r.get::<_, Option<i64>>("ended_at")?.map(|t| t as u64),
    })
}

fn ms(t: u64) -> i64 {
    i64::try_from(t).unwrap_or(i64::MAX)
}

impl Store {
    pub(crate) fn open(path: &Path) -> Result<Store> {
        let conn = Connection::open(path)?;
        let _: String = conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))?;
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        conn.execute_batch(SCHEMA)?;
        Ok(Store { conn: Mutex::new(conn) })
    }

    fn db(&self) -> MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A fresh store gets `ticket-1` ("Maria Lopez") and the announcements pane.
    pub(crate) fn seed_if_empty(&self, now: u64) -> Result<bool> {
        let mut db = self.db();
        let tx = db.transaction()?;
        let count: i64 = tx.query_row("SELECT COUNT(*) FROM pane", [], |r| r.get(0))?;
        if count > 0 {
            return Ok(false);
        }
        tx.execute(
            "INSERT INTO pane (id, tab, title, harness, ticket, order_no, amount, started_at)
             VALUES ('ticket-1', 'main', 'Maria Lopez', 'desk', 1, '5521', '40', ?1)",
            [ms(now)],
        )?;
        tx.execute(
            "INSERT INTO pane (id, tab, title, harness, ticket, started_at)
             VALUES ('announcements', 'board', 'Announcements', 'desk', 0, ?1)",
            [ms(now)],
        )?;
        tx.execute("INSERT OR REPLACE INTO counter (name, value) VALUES ('ticket', 1)", [])?;
        tx.commit()?;
        Ok(true)
    }

    pub(crate) fn panes(&self) -> Result<Vec<PaneRow>> {
        let db = self.db();
        let mut q = db.prepare("SELECT * FROM pane ORDER BY n")?;
        q.query_map([], pane_row)?.collect()
    }

    pub(crate) fn pane(&self, id: &str) -> Result<Option<PaneRow>> {
        self.db().query_row("SELECT * FROM pane WHERE id = ?1", [id], pane_row).optional()
    }

    /// The next value of a counter (1, 2, …), kept across restarts.
    /// Whether the announcements pane's welcome was kept (by the SDK's
    /// store) once.
    pub(crate) fn welcomed(&self) -> Result<bool> {
        self.db()
            .query_row("SELECT COUNT(*) FROM counter WHERE name = 'welcomed'", [], |r| r.get::<_, i64>(0))
            .map(|n| n > 0)
    }

    /// The welcome is kept: a later start does not write it again.
    pub(crate) fn set_welcomed(&self) -> Result<()> {
        self.db().execute("INSERT OR REPLACE INTO counter (name, value) VALUES ('welcomed', 1)", [])?;
        Ok(())
    }

    /// The items an older desk kept in this file for history (its `item`
    /// table), which this desk leaves unread: the SDK's store keeps
    /// conversations now.
    pub(crate) fn items_left_unread(&self) -> Result<i64> {
        let db = self.db();
        let has_table: i64 = db.query_row(
            "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'item'",
            [],
            |r| r.get(0),
        )?;
        if has_table == 0 {
            return Ok(0);
        }
        db.query_row("SELECT COUNT(*) FROM item", [], |r| r.get(0))
    }

    pub(crate) fn next(&self, name: &str) -> Result<u64> {
        let db = self.db();
        let v: i64 = db.query_row(
            "INSERT INTO counter (name, value) VALUES (?1, 1)
             ON CONFLICT (name) DO UPDATE SET value = value + 1 RETURNING value",
            [name],
            |r| r.get(0),
        )?;
        Ok(v as u64)
    }

    /// Creates the next ticket (`ticket-<n>`, "Ticket <n>").
    #[cfg(test)]
    pub(crate) fn new_ticket(&self, now: u64) -> Result<PaneRow> {
        let n = self.next("ticket")?;
        self.new_ticket_numbered(n, now)
    }

    /// Creates ticket `n` (`ticket-<n>`, "Ticket <n>"), its number taken
    /// with `next("ticket")`.
    pub(crate) fn new_ticket_numbered(&self, n: u64, now: u64) -> Result<PaneRow> {
        let id = format!("ticket-{n}");
        let order = (5520 + n).to_string();
        let amount = Value::from(25 * n);
        self.db().execute(
            "INSERT INTO pane (id, tab, title, harness, ticket, order_no, amount, started_at)
             VALUES (?1, 'main', ?2, 'desk', 1, ?3, ?4, ?5)",
            params![id, format!("Ticket {n}"), order, amount.to_string(), ms(now)],
        )?;
        self.pane(&id)?.ok_or(rusqlite::Error::QueryReturnedNoRows)
    }

    pub(crate) fn set_title(&self, pane: &str, title: &str) -> Result<bool> {
        Ok(self.db().execute("UPDATE pane SET title = ?2 WHERE id = ?1", params![pane, title])? > 0)
    }

    pub(crate) fn set_closed(&self, pane: &str, closed: bool, now: u64) -> Result<bool> {
        let ended = closed.then_some(ms(now));
        Ok(self.db().execute(
            "UPDATE pane SET closed = ?2, ended_at = ?3 WHERE id = ?1",
            params![pane, closed, ended],
        )? > 0)
    }

    /// Closes every pane of a tab (`Some(tab)`) or of the workspace (`None`).
    pub(crate) fn close_panes_of(&self, tab: Option<&str>, now: u64) -> Result<()> {
        let db = self.db();
        match tab {
            Some(t) => db.execute(
                "UPDATE pane SET closed = 1, ended_at = ?2 WHERE tab = ?1 AND closed = 0",
                params![t, ms(now)],
            )?,
            None => {
                db.execute("UPDATE pane SET closed = 1, ended_at = ?1 WHERE closed = 0", params![ms(now)])?
            }
        };
        Ok(())
    }

    /// A workspace (`workspace:<id>`) or tab (`tab:<ws>:<tab>`) renamed or closed.
    pub(crate) fn scope(&self, key: &str) -> Result<(Option<String>, bool)> {
        Ok(self
            .db()
            .query_row("SELECT title, closed FROM scope WHERE key = ?1", [key], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .optional()?
            .unwrap_or((None, false)))
    }

    pub(crate) fn set_scope_title(&self, key: &str, title: &str) -> Result<()> {
        self.db().execute(
            "INSERT INTO scope (key, title) VALUES (?1, ?2) ON CONFLICT (key) DO UPDATE SET title = ?2",
            params![key, title],
        )?;
        Ok(())
    }

    pub(crate) fn set_scope_closed(&self, key: &str, closed: bool) -> Result<()> {
        self.db().execute(
            "INSERT INTO scope (key, closed) VALUES (?1, ?2) ON CONFLICT (key) DO UPDATE SET closed = ?2",
            params![key, closed],
        )?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("desk-store-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn a_fresh_store_has_ticket_1_and_keeps_changes_across_a_reopen() {
        let dir = temp("reopen");
        let path = dir.join("desk.sqlite3");
        {
            let s = Store::open(&path).unwrap();
            assert!(s.seed_if_empty(1000).unwrap());
            assert!(!s.seed_if_empty(1000).unwrap());
            let t1 = s.pane("ticket-1").unwrap().unwrap();
            assert_eq!(
                (t1.title.as_str(), t1.order.as_deref(), t1.amount.clone()),
                ("Maria Lopez", Some("5521"), Some(Value::from(40)))
            );
            let t2 = s.new_ticket(2000).unwrap();
            assert_eq!(t2.id, "ticket-2");
            s.set_title("ticket-1", "Maria L.").unwrap();
            s.set_closed("ticket-2", true, 3000).unwrap();
            assert_eq!(s.next("turn").unwrap(), 1);
        }
        let s = Store::open(&path).unwrap();
        assert_eq!(s.pane("ticket-1").unwrap().unwrap().title, "Maria L.");
        let t2 = s.pane("ticket-2").unwrap().unwrap();
        assert!(t2.closed);
        assert_eq!(t2.ended_at, Some(3000));
        assert_eq!(s.next("turn").unwrap(), 2);
        assert_eq!(s.new_ticket(4000).unwrap().id, "ticket-3");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
