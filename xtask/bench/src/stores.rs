//! The `stores` group: what one receipt's `put` costs in the memory store,
//! in the SQLite store as it was before witnesses
//! (`SqliteReceiptStore::bench_open_without_witness`) and in the SQLite
//! store with its witness, in the same run, rounds taken by turns so that
//! the disk's moods fall on all three; the witness's write alone, in place
//! (what the store does) against a new file renamed into place (the
//! alternative); what the checks cost `open` on a store of 100,000
//! receipts, against an open without them; and a scripted instant turn
//! (a send, its turn's reply, the store's writes) with the memory store,
//! the SQLite store keeping no conversations, the SQLite store, and the
//! PostgreSQL store (a server of this machine's, started for the run with
//! `fsync` on, as the SDK's tests start one — left out, with the reason,
//! when none is installed); and
//! what a batch of one item and a pane's restore read cost in a SQLite
//! store at its bound of conversations (10,000) against one holding one.

use std::io::{Seek, SeekFrom, Write};
use std::path::Path;
use std::time::Instant;

use durable_sdk::driver::exchange::{Caller, Request};
use durable_sdk::stores::{
    ConversationOp, KEPT_CONVERSATIONS, KEPT_ITEMS_PER_CONVERSATION, KeptAskRecord, Lookup,
    MemoryReceiptStore, PendingSend, PgReceiptOptions, PgReceiptStore, Receipt, ReceiptStore, SendState,
    SqliteReceiptStore, StoreError,
};
use durable_sdk::types::Timestamp;
use durable_sdk::{Collie, CoreOptions, PaneOptions, Turn};

use crate::pi::middle;

/// A PostgreSQL server in a temporary folder, as the SDK's tests start one.
#[path = "../../../crates/durable-sdk/tests/pg_support/mod.rs"]
mod pg_support;

/// Rounds of each case; the median is printed.
const ROUNDS: usize = 7;
/// Puts in a round.
const PUTS: usize = 200;
/// Receipts in the store whose open is timed.
const LARGE: usize = 100_000;

fn receipt(n: usize) -> Receipt {
    Receipt::of_json(200, &serde_json::json!({"ok": true, "result": "sent", "n": n, "replayed": false}))
}

/// µs per put over one round of `PUTS` puts, ids from `first`.
async fn round(store: &impl ReceiptStore, first: usize) -> Result<f64, String> {
    let started = Instant::now();
    for n in first..first + PUTS {
        store.put(&format!("r-{n}"), receipt(n), "pane:bench").await.map_err(|e| e.to_string())?;
    }
    Ok(started.elapsed().as_secs_f64() * 1e6 / PUTS as f64)
}

pub(crate) async fn run(dir: &Path) -> Result<(), String> {
    let dir = dir.join("stores");
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let err = |e: durable_sdk::stores::StoreError| e.to_string();

    let memory = MemoryReceiptStore::new();
    let plain = SqliteReceiptStore::bench_open_without_witness(dir.join("plain.sqlite3")).map_err(err)?;
    let witnessed = SqliteReceiptStore::open(dir.join("witnessed.sqlite3")).map_err(err)?;
    let (mut mem_t, mut plain_t, mut wit_t) = (Vec::new(), Vec::new(), Vec::new());
    for r in 0..ROUNDS {
        let first = r * PUTS;
        mem_t.push(round(&memory, first).await?);
        plain_t.push(round(&plain, first).await?);
        wit_t.push(round(&witnessed, first).await?);
    }
    drop((plain, witnessed));
    let (mem, plain, wit) = (middle(mem_t), middle(plain_t), middle(wit_t));
    println!("stores: µs per put, the median of {ROUNDS} rounds of {PUTS} (taken by turns)");
    println!("  memory store                               {mem:>9.1}");
    println!("  SQLite, no witness (as before)             {plain:>9.1}  {:>7.0} puts/s", 1e6 / plain);
    println!(
        "  SQLite with its witness                    {wit:>9.1}  {:>7.0} puts/s  {:.2}× the store without (+{:.0} µs)",
        1e6 / wit,
        wit / plain,
        wit - plain
    );

    // The witness's write alone: one 64-byte record into a 1 KiB file.
    let (mut in_place_t, mut renamed_t) = (Vec::new(), Vec::new());
    let path = dir.join("alone.witness");
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&path)
        .map_err(|e| e.to_string())?;
    file.write_all(&[0u8; 1024]).map_err(|e| e.to_string())?;
    file.sync_all().map_err(|e| e.to_string())?;
    let record = [7u8; 64];
    let folder = std::fs::File::open(&dir).map_err(|e| e.to_string())?;
    for _ in 0..ROUNDS {
        let started = Instant::now();
        for n in 0..PUTS {
            file.seek(SeekFrom::Start(if n % 2 == 0 { 0 } else { 512 })).map_err(|e| e.to_string())?;
            file.write_all(&record).map_err(|e| e.to_string())?;
            file.sync_data().map_err(|e| e.to_string())?;
        }
        in_place_t.push(started.elapsed().as_secs_f64() * 1e6 / PUTS as f64);
        let started = Instant::now();
        let tmp = dir.join("alone.witness.tmp");
        for _ in 0..PUTS {
            let mut t = std::fs::File::create(&tmp).map_err(|e| e.to_string())?;
            t.write_all(&[7u8; 1024]).map_err(|e| e.to_string())?;
            t.sync_all().map_err(|e| e.to_string())?;
            std::fs::rename(&tmp, &path).map_err(|e| e.to_string())?;
            folder.sync_all().map_err(|e| e.to_string())?;
        }
        renamed_t.push(started.elapsed().as_secs_f64() * 1e6 / PUTS as f64);
    }
    let (in_place, renamed) = (middle(in_place_t), middle(renamed_t));
    println!(
        "  the witness's write alone: in place + fdatasync {in_place:.1} µs; new file + fsync + rename + folder fsync {renamed:.1} µs ({:.2}×)",
        renamed / in_place
    );

    // Open on a large store: with the checks (quick_check, the witness)
    // against without, both migrating the same file.
    let large = dir.join("large.sqlite3");
    drop(SqliteReceiptStore::open(&large).map_err(err)?);
    fill(&large)?;
    drop(SqliteReceiptStore::open(&large).map_err(err)?); // the witness catches up
    let size = std::fs::metadata(&large).map_err(|e| e.to_string())?.len();
    let (mut checked_t, mut unchecked_t) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        let started = Instant::now();
        drop(SqliteReceiptStore::bench_open_without_witness(&large).map_err(err)?);
        unchecked_t.push(started.elapsed().as_secs_f64() * 1e3);
        let started = Instant::now();
        drop(SqliteReceiptStore::open(&large).map_err(err)?);
        checked_t.push(started.elapsed().as_secs_f64() * 1e3);
    }
    let (checked, unchecked) = (middle(checked_t), middle(unchecked_t));
    println!(
        "  open + close, {LARGE} receipts ({:.1} MiB, warm cache), median of {ROUNDS}: without the checks {unchecked:.1} ms, with them {checked:.1} ms ({:.2}×)",
        size as f64 / (1024.0 * 1024.0),
        checked / unchecked
    );
    full_store(&dir).await?;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// The `turns` group: a scripted instant turn with each store, one pane
/// at a time and eight at once.
pub(crate) async fn run_turns(dir: &Path) -> Result<(), String> {
    let dir = dir.join("turns");
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    turns(&dir).await?;
    turn_calls(&dir).await?;
    concurrent_turns(&dir).await?;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// The store calls a turn makes, one after the other, in the order a send
/// makes them: µs per call over a round of `TURNS` (each call's own ids),
/// rounds taken by turns; the median of `ROUNDS`.
async fn turn_calls(dir: &Path) -> Result<(), String> {
    let err = |e: StoreError| e.to_string();
    let store = SqliteReceiptStore::open(dir.join("calls.sqlite3")).map_err(err)?;
    let names = ["claim (a read)", "the send recorded", "its receipt", "an item kept", "the send done"];
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); names.len()];
    for r in 0..ROUNDS {
        let mut round = vec![0f64; names.len()];
        for n in r * TURNS..(r + 1) * TURNS {
            let id = format!("c-{n}");
            let item = durable_sdk::Item::reply(&format!("i-{n}"), format!("did: hello {n}"))
                .map_err(|e| e.to_string())?;
            // Adds the time since the last lap to call `i`'s.
            let mut t = Instant::now();
            let mut lap = |i: usize| {
                round[i] += t.elapsed().as_secs_f64() * 1e6;
                t = Instant::now();
            };
            store.claim(&id).await.map_err(err)?;
            lap(0);
            store
                .record_send(PendingSend::new(id.as_str(), "p", "hello", SendState::Running))
                .await
                .map_err(err)?;
            lap(1);
            store.put(&id, receipt(n), "pane:p").await.map_err(err)?;
            lap(2);
            store
                .keep_conversation(vec![ConversationOp::item("p", item)], Timestamp::EPOCH)
                .await
                .map_err(err)?;
            lap(3);
            store.set_send_state(&id, SendState::Done).await.map_err(err)?;
            lap(4);
        }
        for (i, total) in round.iter().enumerate() {
            times[i].push(total / TURNS as f64);
        }
    }
    println!(
        "a turn's store calls, one by one (SQLite): µs per call, the median of {ROUNDS} rounds of {TURNS}"
    );
    let mut sum = 0.0;
    for (name, t) in names.iter().zip(times) {
        let us = middle(t);
        sum += us;
        println!("  {name:<40}   {us:>9.1}");
    }
    println!("  all five                                   {sum:>9.1}");
    Ok(())
}

/// Turns in a round of the turn case.
const TURNS: usize = 100;

/// The SQLite store with its conversations hidden: what a turn cost before
/// stores kept them.
struct WithoutConversations(SqliteReceiptStore);

impl ReceiptStore for WithoutConversations {
    async fn get(&self, request_id: &str) -> Result<Lookup, StoreError> {
        self.0.get(request_id).await
    }
    async fn put(&self, request_id: &str, receipt: Receipt, group: &str) -> Result<(), StoreError> {
        self.0.put(request_id, receipt, group).await
    }
    async fn claim(&self, request_id: &str) -> Result<Lookup, StoreError> {
        self.0.claim(request_id).await
    }
    fn release(&self, request_id: &str) {
        self.0.release(request_id)
    }
    async fn record_send(&self, send: PendingSend) -> Result<(), StoreError> {
        self.0.record_send(send).await
    }
    async fn set_send_state(&self, request_id: &str, state: SendState) -> Result<(), StoreError> {
        self.0.set_send_state(request_id, state).await
    }
    async fn send_state(&self, request_id: &str) -> Result<Option<SendState>, StoreError> {
        self.0.send_state(request_id).await
    }
    async fn unfinished_sends(&self) -> Result<Vec<PendingSend>, StoreError> {
        self.0.unfinished_sends().await
    }
    fn keeps_sends(&self) -> bool {
        true
    }
    fn keeps_asks(&self) -> bool {
        true
    }
    async fn keep_ask(&self, ask: KeptAskRecord) -> Result<(), StoreError> {
        self.0.keep_ask(ask).await
    }
    async fn forget_ask(&self, ask_id: &str) -> Result<(), StoreError> {
        self.0.forget_ask(ask_id).await
    }
    async fn kept_asks(&self) -> Result<Vec<KeptAskRecord>, StoreError> {
        self.0.kept_asks().await
    }
}

/// An agent over `store` with one pane whose turns reply at once, its jobs
/// run on this runtime as a transport's driver runs them.
fn agent(store: impl ReceiptStore) -> Result<Collie, String> {
    agent_with_panes(store, &["p"])
}

/// [`agent`] with the panes `panes`.
fn agent_with_panes(store: impl ReceiptStore, panes: &[&str]) -> Result<Collie, String> {
    let collie =
        durable_sdk::create_core(CoreOptions::builder().receipts(store)).map_err(|e| e.to_string())?;
    let core = collie.driver().clone();
    collie.driver().set_wakeup(move || {
        while let Some(job) = core.poll_job() {
            tokio::spawn(job);
        }
    });
    let tab =
        collie.workspace("bench", "Bench").and_then(|w| w.tab("main", "Main")).map_err(|e| e.to_string())?;
    for id in panes {
        let pane = tab.pane(id, PaneOptions::new("Bench")).map_err(|e| e.to_string())?;
        pane.on_send(|turn: Turn| async move { turn.reply(format!("did: {}", turn.text())) })
            .map_err(|e| e.to_string())?;
    }
    collie.ready();
    Ok(collie)
}

/// µs per turn over `TURNS` sends, one after the other, each counted until
/// its turn ended and the store has what the pane showed.
async fn turn_round(collie: &Collie, first: usize) -> Result<f64, String> {
    let started = Instant::now();
    for n in first..first + TURNS {
        let body = format!(r#"{{"requestId":"t-{n}","text":"hello {n}"}}"#);
        let r = collie.driver().handle(Request::post("/v1/panes/p/send", body, Caller::OtherProcess)).await;
        if r.status != 200 {
            return Err(format!("a send was refused: {}", r.status));
        }
        collie.driver().turns_done().await;
        collie.conversations_kept().await;
    }
    Ok(started.elapsed().as_secs_f64() * 1e6 / TURNS as f64)
}

/// Panes whose turns run at once in the concurrent case.
const AT_ONCE: [&str; 8] = ["c0", "c1", "c2", "c3", "c4", "c5", "c6", "c7"];

/// µs per turn over `TURNS` sends on each of [`AT_ONCE`]'s panes, the
/// panes' clients sending at once (each its next send once the last was
/// answered: a send on a busy pane waits in its queue, and one refused for
/// a full queue is sent again); counted until every turn ended and the
/// store has what the panes showed.
async fn concurrent_round(collie: &Collie, first: usize) -> Result<f64, String> {
    let started = Instant::now();
    let mut clients = tokio::task::JoinSet::new();
    for pane in AT_ONCE {
        let collie = collie.clone();
        clients.spawn(async move {
            for n in first..first + TURNS {
                let body = format!(r#"{{"requestId":"{pane}-{n}","text":"hello {n}"}}"#);
                let path = format!("/v1/panes/{pane}/send");
                loop {
                    let r = collie
                        .driver()
                        .handle(Request::post(&path, body.clone(), Caller::OtherProcess))
                        .await;
                    // Only a full queue (`409 busy`) is waited out; any other
                    // refusal is the bench's mistake.
                    match (r.status, r.body_json()["code"].as_str()) {
                        (200, _) => break,
                        (409, Some("busy")) => tokio::time::sleep(std::time::Duration::from_millis(1)).await,
                        (status, _) => return Err(format!("a send was refused: {status}")),
                    }
                }
            }
            Ok::<(), String>(())
        });
    }
    while let Some(done) = clients.join_next().await {
        done.map_err(|e| e.to_string())??;
    }
    collie.driver().turns_done().await;
    collie.conversations_kept().await;
    Ok(started.elapsed().as_secs_f64() * 1e6 / (TURNS * AT_ONCE.len()) as f64)
}

/// Turns on eight panes at once: the memory store, the SQLite store
/// committing each write alone (as before group commits) and the SQLite
/// store as it is, rounds taken by turns.
async fn concurrent_turns(dir: &Path) -> Result<(), String> {
    let err = |e: StoreError| e.to_string();
    let memory = agent_with_panes(MemoryReceiptStore::new(), &AT_ONCE)?;
    let alone = agent_with_panes(
        SqliteReceiptStore::bench_open_one_write_per_transaction(dir.join("at-once-alone.sqlite3"))
            .map_err(err)?,
        &AT_ONCE,
    )?;
    let grouped =
        agent_with_panes(SqliteReceiptStore::open(dir.join("at-once.sqlite3")).map_err(err)?, &AT_ONCE)?;
    let (mut mem_t, mut alone_t, mut grouped_t) = (Vec::new(), Vec::new(), Vec::new());
    for r in 0..ROUNDS {
        let first = r * TURNS;
        mem_t.push(concurrent_round(&memory, first).await?);
        alone_t.push(concurrent_round(&alone, first).await?);
        grouped_t.push(concurrent_round(&grouped, first).await?);
    }
    let (mem, alone, grouped) = (middle(mem_t), middle(alone_t), middle(grouped_t));
    println!(
        "turns at once on {} panes: µs per turn (wall time ÷ turns), the median of {ROUNDS} rounds of {TURNS} per pane",
        AT_ONCE.len()
    );
    println!("  memory store                               {mem:>9.1}");
    println!(
        "  SQLite, each write its own commit          {alone:>9.1}  {:.2}× the memory store",
        alone / mem
    );
    println!(
        "  SQLite, writes queued together committed   {grouped:>9.1}  {:.2}× the memory store, {:.2}× each write alone",
        grouped / mem,
        grouped / alone
    );
    Ok(())
}

/// A scripted instant turn with each store, rounds taken by turns.
async fn turns(dir: &Path) -> Result<(), String> {
    let err = |e: StoreError| e.to_string();
    let memory = agent(MemoryReceiptStore::new())?;
    let bare =
        agent(WithoutConversations(SqliteReceiptStore::open(dir.join("turns-bare.sqlite3")).map_err(err)?))?;
    let kept = agent(SqliteReceiptStore::open(dir.join("turns.sqlite3")).map_err(err)?)?;
    // PostgreSQL on this machine, durable as a real one: the test server's
    // `fsync=off` turned back on.
    let pg = match pg_support::server_bin_dir() {
        Ok(_) => {
            let server =
                pg_support::PgServer::start_with(&["fsync=on".into(), "full_page_writes=on".into()], &[]);
            let options = PgReceiptOptions::builder().url(server.url()).build().map_err(err)?;
            let store = PgReceiptStore::connect(options).await.map_err(err)?;
            Some((server, agent(store)?))
        }
        Err(why) => {
            println!("  (PostgreSQL is left out: {why})");
            None
        }
    };
    let (mut mem_t, mut bare_t, mut kept_t, mut pg_t) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for r in 0..ROUNDS {
        let first = r * TURNS;
        mem_t.push(turn_round(&memory, first).await?);
        bare_t.push(turn_round(&bare, first).await?);
        kept_t.push(turn_round(&kept, first).await?);
        if let Some((_, pg)) = &pg {
            pg_t.push(turn_round(pg, first).await?);
        }
    }
    let (mem, bare, kept_us) = (middle(mem_t), middle(bare_t), middle(kept_t));
    println!(
        "turns: µs per scripted instant turn (send, reply, the store's writes), the median of {ROUNDS} rounds of {TURNS}"
    );
    println!("  memory store (conversations in memory)     {mem:>9.1}");
    println!("  SQLite, no conversations                   {bare:>9.1}  {:.2}× the memory store", bare / mem);
    println!(
        "  SQLite keeping conversations               {kept_us:>9.1}  {:.2}× the memory store, {:.2}× SQLite without (+{:.0} µs)",
        kept_us / mem,
        kept_us / bare,
        kept_us - bare
    );
    if pg.is_some() {
        let pg_us = middle(pg_t);
        println!(
            "  PostgreSQL keeping conversations           {pg_us:>9.1}  {:.2}× the memory store, {:.2}× SQLite keeping them",
            pg_us / mem,
            pg_us / kept_us
        );
    }
    // The store's size after many turns: retention holds it (the pane's
    // 2,000 newest items, 1,000 receipts per group and the ids evicted).
    let mut done = ROUNDS * TURNS;
    while done < MANY_TURNS {
        turn_round(&kept, done).await?;
        done += TURNS;
    }
    let size = |name: &str| std::fs::metadata(dir.join(name)).map_or(0, |m| m.len());
    let (db, wal) = (size("turns.sqlite3"), size("turns.sqlite3-wal"));
    println!(
        "  SQLite store after {done} turns on one pane   {:>6.1} MiB (database {:.1} MiB, WAL {:.1} MiB)",
        (db + wal) as f64 / 1048576.0,
        db as f64 / 1048576.0,
        wal as f64 / 1048576.0
    );
    Ok(())
}

/// Turns run before the store's size is read.
const MANY_TURNS: usize = 10_000;

/// Batches timed in a round.
const BATCHES: usize = 50;

/// µs per one-item batch over `BATCHES` batches, each on a pane of its own.
async fn batch_round(store: &SqliteReceiptStore, round: usize) -> Result<f64, String> {
    let started = Instant::now();
    for k in 0..BATCHES {
        let item = durable_sdk::Item::reply(&format!("r{round}"), format!("round {round}"))
            .map_err(|e| e.to_string())?;
        store
            .keep_conversation(vec![ConversationOp::item(format!("p{k}"), item)], Timestamp::EPOCH)
            .await
            .map_err(|e| e.to_string())?;
    }
    Ok(started.elapsed().as_secs_f64() * 1e6 / BATCHES as f64)
}

/// µs per read of the 2,000-item conversation `long` (a pane's restore).
async fn restore_round(store: &SqliteReceiptStore) -> Result<f64, String> {
    let started = Instant::now();
    for _ in 0..BATCHES {
        let kept = store.kept_conversation("long").await.map_err(|e| e.to_string())?;
        if kept.map_or(0, |k| k.items.len()) != KEPT_ITEMS_PER_CONVERSATION {
            return Err("the long conversation was not read back whole".into());
        }
    }
    Ok(started.elapsed().as_secs_f64() * 1e6 / BATCHES as f64)
}

/// A batch of one item and a restore read in a store at its bound of
/// conversations (each of 10 items) against one holding only the long one.
async fn full_store(dir: &Path) -> Result<(), String> {
    let err = |e: StoreError| e.to_string();
    let item = |id: String, text: String| durable_sdk::Item::reply(&id, text).map_err(|e| e.to_string());
    let small = SqliteReceiptStore::open(dir.join("conversations-one.sqlite3")).map_err(err)?;
    let full = SqliteReceiptStore::open(dir.join("conversations-full.sqlite3")).map_err(err)?;
    let long: Vec<ConversationOp> = (0..KEPT_ITEMS_PER_CONVERSATION)
        .map(|n| {
            item(format!("i{n}"), format!("message {n} of a long conversation"))
                .map(|i| ConversationOp::item("long", i))
        })
        .collect::<Result<_, _>>()?;
    small.keep_conversation(long.clone(), Timestamp::EPOCH).await.map_err(err)?;
    full.keep_conversation(long, Timestamp::EPOCH).await.map_err(err)?;
    let mut fill = Vec::new();
    for n in 0..KEPT_CONVERSATIONS - 1 {
        for k in 0..10 {
            fill.push(ConversationOp::item(
                format!("p{n}"),
                item(format!("i{k}"), format!("item {k} of pane {n}"))?,
            ));
        }
    }
    let started = Instant::now();
    full.keep_conversation(fill, Timestamp::EPOCH).await.map_err(err)?;
    let filled = started.elapsed();
    let (mut small_t, mut full_t, mut small_r, mut full_r) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for r in 0..ROUNDS {
        small_t.push(batch_round(&small, r).await?);
        full_t.push(batch_round(&full, r).await?);
        small_r.push(restore_round(&small).await?);
        full_r.push(restore_round(&full).await?);
    }
    drop((small, full));
    let size: u64 = ["conversations-full.sqlite3", "conversations-full.sqlite3-wal"]
        .iter()
        .filter_map(|f| std::fs::metadata(dir.join(f)).ok())
        .map(|m| m.len())
        .sum();
    let (small_t, full_t, small_r, full_r) =
        (middle(small_t), middle(full_t), middle(small_r), middle(full_r));
    println!(
        "conversations: µs per call, the median of {ROUNDS} rounds of {BATCHES}; a store at its bound ({KEPT_CONVERSATIONS} conversations, {:.1} MiB, filled in {:.1} s) against one holding one",
        size as f64 / (1024.0 * 1024.0),
        filled.as_secs_f64()
    );
    println!(
        "  a batch of one item          one: {small_t:>9.1}   at the bound: {full_t:>9.1}  {:.2}×",
        full_t / small_t
    );
    println!(
        "  a restore of 2,000 items     one: {small_r:>9.1}   at the bound: {full_r:>9.1}  {:.2}×",
        full_r / small_r
    );
    Ok(())
}

/// `LARGE` receipts in 1,000 groups, written in one transaction straight
/// into the store's tables, the write count moved on as many puts would.
fn fill(path: &Path) -> Result<(), String> {
    let e = |e: rusqlite::Error| e.to_string();
    let mut conn = rusqlite::Connection::open(path).map_err(e)?;
    let tx = conn.transaction().map_err(e)?;
    {
        let mut insert = tx
            .prepare("INSERT INTO receipt (request_id, grp, seq, status, body) VALUES (?1, ?2, ?3, 200, ?4)")
            .map_err(e)?;
        for n in 0..LARGE {
            let body = format!(r#"{{"ok":true,"result":"sent","n":{n},"replayed":false}}"#);
            insert
                .execute(rusqlite::params![
                    format!("r-{n}"),
                    format!("pane:{}", n % 1000),
                    n / 1000 + 1,
                    body
                ])
                .map_err(e)?;
        }
        tx.execute(
            "INSERT OR REPLACE INTO receipt_group (grp, last_seq) SELECT grp, MAX(seq) FROM receipt GROUP BY grp",
            [],
        )
        .map_err(e)?;
        tx.execute("UPDATE store_identity SET writes = writes + ?1", [LARGE as i64]).map_err(e)?;
    }
    tx.commit().map_err(e)?;
    conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(())).map_err(e)?;
    Ok(())
}
