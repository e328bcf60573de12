//! `PgReceiptStore` against a real PostgreSQL server (started by the test
//! in a temporary folder, see `pg_support`): the memory store's semantics,
//! the sends journal, the schema's version, claims shared by two agent
//! processes, secrets kept out of messages, and a `500` that runs nothing
//! while the database is down.
#![cfg(feature = "postgres")]

// The test support durable-runtime's own tests use too (its
// `test-util` feature), so that both run the same scenarios.
use durable_runtime::test_util as harness;
mod pg_support;

use std::sync::Arc;
use std::time::Duration;

use durable_runtime::{
    ConversationOp, KEPT_ITEMS_PER_CONVERSATION, KeptAskRecord, Lookup, MemoryReceiptStore, PendingSend,
    Receipt, ReceiptStore, SendState,
};
use durable_sdk::Item;
use durable_sdk::stores::{PG_SCHEMA_VERSION, PgReceiptOptions, PgReceiptStore};
use durable_sdk::types::Timestamp;
use harness::Harness;
use harness::recorder::{Log, PaneExt, Recorder};
use pg_support::{PASSWORD, PgServer, fresh_schema};
use serde_json::json;

fn receipt(n: u64) -> Receipt {
    Receipt::of_json(200, &json!({"ok": true, "result": "sent", "n": n, "replayed": false}))
}

async fn store_on(server: &PgServer, schema: &str, per_group: usize) -> PgReceiptStore {
    let options =
        PgReceiptOptions::builder().url(server.url()).schema(schema).per_group(per_group).build().unwrap();
    PgReceiptStore::connect(options).await.unwrap()
}

async fn store(name: &str, per_group: usize) -> PgReceiptStore {
    store_on(PgServer::shared(), &fresh_schema(name), per_group).await
}

/// `store`'s claim of `request_id`, on a task of its own (it may wait for
/// another process's).
fn claim_in_background(
    store: &PgReceiptStore,
    request_id: &'static str,
) -> tokio::task::JoinHandle<Result<Lookup, durable_sdk::stores::StoreError>> {
    let store = store.clone();
    tokio::spawn(async move { store.claim(request_id).await })
}

/// A plain connection, to look at the tables.
async fn psql(server: &PgServer) -> tokio_postgres::Client {
    let (client, conn) = tokio_postgres::connect(&server.url(), tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(conn);
    client
}

#[tokio::test]
async fn put_then_get_returns_the_first_answer_whatever_the_group() {
    let store = store("first", 1000).await;
    assert_eq!(store.get("r-1").await.unwrap(), Lookup::Unknown);
    store.put("r-1", receipt(1), "pane:ticket-1").await.unwrap();
    assert_eq!(store.get("r-1").await.unwrap(), Lookup::Found(receipt(1)));
    store.put("r-1", receipt(2), "renames").await.unwrap();
    assert_eq!(store.get("r-1").await.unwrap(), Lookup::Found(receipt(1)), "the first answer stays");
    // The body comes back byte for byte as it was sent: key order and
    // spacing kept.
    let body = r#"{"z": 1,"a":{"y":[1, 2],"b":null},"replayed":false}"#;
    store.put("r-2", Receipt::new(200, body), "starters").await.unwrap();
    let Lookup::Found(got) = store.get("r-2").await.unwrap() else { panic!("kept") };
    assert_eq!(String::from_utf8_lossy(&got.body), body);
}

#[tokio::test]
async fn a_group_keeps_per_group_receipts_and_remembers_evicted_ids_for_ten_times_more() {
    let store = store("evict", 2).await;
    store.put("a-0", receipt(0), "pane:a").await.unwrap();
    store.put("a-1", receipt(1), "pane:a").await.unwrap();
    store.put("b-0", receipt(9), "pane:b").await.unwrap();
    store.put("a-2", receipt(2), "pane:a").await.unwrap();
    assert_eq!(store.get("a-0").await.unwrap(), Lookup::Evicted);
    assert_eq!(store.get("a-1").await.unwrap(), Lookup::Found(receipt(1)));
    assert_eq!(store.get("b-0").await.unwrap(), Lookup::Found(receipt(9)), "other groups untouched");
    for n in 3..=21 {
        store.put(&format!("a-{n}"), receipt(n), "pane:a").await.unwrap();
    }
    assert_eq!(store.get("a-0").await.unwrap(), Lookup::Evicted, "19 ids passed: remembered");
    store.put("a-22", receipt(22), "pane:a").await.unwrap();
    assert_eq!(store.get("a-0").await.unwrap(), Lookup::Unknown, "20 ids passed: forgotten, as in memory");
    assert_eq!(store.get("a-1").await.unwrap(), Lookup::Evicted);
}

#[tokio::test]
async fn eviction_matches_the_memory_store_and_the_default_is_1000_per_group() {
    let pg = store("like-memory", 3).await;
    let memory = MemoryReceiptStore::with_capacity(3);
    let groups = ["pane:x", "pane:y", "starters"];
    for n in 0..80u64 {
        let g = groups[(n as usize * 7 + n as usize / 5) % 3];
        let id = format!("r-{n}");
        pg.put(&id, receipt(n), g).await.unwrap();
        memory.put(&id, receipt(n), g).await.unwrap();
    }
    for n in 0..80u64 {
        let id = format!("r-{n}");
        assert_eq!(pg.get(&id).await.unwrap(), memory.get(&id).await.unwrap(), "{id}");
    }
    let options = PgReceiptOptions::builder().url(PgServer::shared().url()).build().unwrap();
    assert_eq!(options.per_group(), durable_sdk::types::RECEIPTS_PER_GROUP);
}

#[tokio::test]
async fn receipts_evicted_ids_and_sends_survive_a_new_store_on_the_same_schema() {
    let schema = fresh_schema("reopen");
    let server = PgServer::shared();
    {
        let store = store_on(server, &schema, 1).await;
        store.put("r-1", receipt(1), "closes").await.unwrap();
        store.put("r-2", receipt(2), "closes").await.unwrap();
        for (id, text) in [("s-1", "one"), ("s-2", "two"), ("s-3", "three")] {
            store.record_send(PendingSend::new(id, "ticket-1", text, SendState::Queued)).await.unwrap();
        }
        store.set_send_state("s-1", SendState::Running).await.unwrap();
        store.set_send_state("s-2", SendState::Done).await.unwrap();
        store.set_send_state("s-9", SendState::Done).await.unwrap(); // not recorded: ignored
        // Recorded again (a retry of one never answered): last in line.
        store.record_send(PendingSend::new("s-1", "ticket-1", "one again", SendState::Queued)).await.unwrap();
    }
    let store = store_on(server, &schema, 1).await;
    assert_eq!(store.get("r-2").await.unwrap(), Lookup::Found(receipt(2)));
    assert_eq!(store.get("r-1").await.unwrap(), Lookup::Evicted);
    store.put("r-3", receipt(3), "closes").await.unwrap();
    assert_eq!(store.get("r-2").await.unwrap(), Lookup::Evicted, "the group's sequence goes on");
    let left = store.unfinished_sends().await.unwrap();
    let got: Vec<(&str, &str, SendState)> =
        left.iter().map(|s| (s.request_id.as_str(), s.text.as_str(), s.state)).collect();
    assert_eq!(got, [("s-3", "three", SendState::Queued), ("s-1", "one again", SendState::Queued)]);
    assert_eq!(store.send_state("s-2").await.unwrap(), Some(SendState::Done));
    assert_eq!(store.send_state("s-9").await.unwrap(), None);
    store.set_send_state("s-3", SendState::Closed).await.unwrap();
    assert_eq!(store.unfinished_sends().await.unwrap().len(), 1);
}

#[tokio::test]
async fn the_store_creates_its_schema_at_its_version_once_and_refuses_a_newer_one() {
    let server = PgServer::shared();
    let schema = fresh_schema("version");
    // Four processes starting at once migrate once.
    let stores = futures_util::future::join_all((0..4).map(|_| store_on(server, &schema, 10))).await;
    drop(stores);
    let db = psql(server).await;
    let rows = db.query(&format!("SELECT version FROM \"{schema}\".schema_version"), &[]).await.unwrap();
    let versions: Vec<i32> = rows.iter().map(|r| r.get(0)).collect();
    assert_eq!(versions, [PG_SCHEMA_VERSION]);
    let tables: Vec<String> = db
        .query(
            "SELECT table_name::text FROM information_schema.tables WHERE table_schema = $1 ORDER BY 1",
            &[&schema],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(
        tables,
        [
            "conversation",
            "conversation_item",
            "evicted",
            "kept_ask",
            "pending_send",
            "receipt",
            "receipt_group",
            "schema_version"
        ]
    );
    // A schema from a newer SDK is not touched.
    db.execute(&format!("UPDATE \"{schema}\".schema_version SET version = 99"), &[]).await.unwrap();
    let options = PgReceiptOptions::builder().url(server.url()).schema(&schema).build().unwrap();
    let err = PgReceiptStore::connect(options).await.unwrap_err().to_string();
    assert!(err.contains("version 99") && err.contains("newer"), "{err}");
}

#[tokio::test]
async fn the_password_is_in_no_debug_no_error_and_a_wrong_one_says_so() {
    let server = PgServer::shared();
    let store = store("secret", 10).await;
    let shown = format!("{store:?} {}", store.target());
    assert!(!shown.contains(PASSWORD), "{shown}");
    assert!(shown.contains("postgres://postgres@"), "{shown}");
    let wrong = "Wrong-Pass-0xdeadbeef";
    let options = PgReceiptOptions::builder().url(server.url_with_password(wrong)).build().unwrap();
    assert!(!format!("{options:?}").contains(wrong));
    let err = PgReceiptStore::connect(options).await.unwrap_err().to_string();
    assert!(!err.contains(wrong), "{err}");
    assert!(err.contains("password authentication failed"), "{err}");
    assert!(err.contains("postgres://postgres@"), "names where it connects: {err}");
}

#[tokio::test]
async fn a_claim_makes_another_process_wait_then_replay_and_a_release_lets_it_run() {
    let schema = fresh_schema("claims");
    let a = store_on(PgServer::shared(), &schema, 10).await;
    let b = store_on(PgServer::shared(), &schema, 10).await;
    // A claims r-1 and runs it; B's claim waits until A's receipt is committed.
    assert_eq!(a.claim("r-1").await.unwrap(), Lookup::Unknown);
    let waiting = claim_in_background(&b, "r-1");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!waiting.is_finished(), "B waits for A's claim");
    a.put("r-1", receipt(1), "pane:p").await.unwrap();
    a.release("r-1");
    assert_eq!(waiting.await.unwrap().unwrap(), Lookup::Found(receipt(1)), "then replays A's answer");
    // A refused write releases its claim: B runs it.
    assert_eq!(a.claim("r-2").await.unwrap(), Lookup::Unknown);
    let waiting = claim_in_background(&b, "r-2");
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!waiting.is_finished());
    a.release("r-2");
    assert_eq!(waiting.await.unwrap().unwrap(), Lookup::Unknown);
    b.put("r-2", receipt(2), "pane:p").await.unwrap();
    b.release("r-2");
    assert_eq!(a.get("r-2").await.unwrap(), Lookup::Found(receipt(2)));
}

/// A put whose caller goes away midway (the agent's request dropped as its
/// receipt was being kept) still commits: it holds the id's claim, and a
/// duplicate waiting at another process replays the answer instead of
/// running the write again.
#[tokio::test]
async fn a_put_dropped_midway_still_commits_and_a_waiting_process_replays_it() {
    let schema = fresh_schema("dropped_put");
    let a = store_on(PgServer::shared(), &schema, 10).await;
    let b = store_on(PgServer::shared(), &schema, 10).await;
    assert_eq!(a.claim("r-1").await.unwrap(), Lookup::Unknown);
    let waiting = claim_in_background(&b, "r-1");
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!waiting.is_finished(), "B waits for A's claim");
    // Polled once (it starts), then dropped, as a request's future is.
    let mut put = Box::pin(a.put("r-1", receipt(1), "pane:p"));
    assert!(tokio::time::timeout(Duration::ZERO, &mut put).await.is_err(), "it is under way");
    drop(put);
    let replayed = tokio::time::timeout(Duration::from_secs(10), waiting).await.unwrap().unwrap().unwrap();
    assert_eq!(replayed, Lookup::Found(receipt(1)), "B replays A's answer; it does not run the write");
    a.release("r-1");
}

#[tokio::test]
async fn a_claim_waits_at_most_claim_wait_then_fails() {
    let schema = fresh_schema("wait");
    let a = store_on(PgServer::shared(), &schema, 10).await;
    let options = PgReceiptOptions::builder()
        .url(PgServer::shared().url())
        .schema(&schema)
        .claim_wait(Duration::from_millis(300))
        .build()
        .unwrap();
    let b = PgReceiptStore::connect(options).await.unwrap();
    assert_eq!(a.claim("r-1").await.unwrap(), Lookup::Unknown);
    let err = b.claim("r-1").await.unwrap_err().to_string();
    assert!(err.contains("being run by another process"), "{err}");
    a.release("r-1");
}

#[tokio::test]
async fn two_agent_processes_sharing_the_database_run_a_duplicate_write_once() {
    let schema = fresh_schema("two-cores");
    let log = Log::default();
    let mut cores = Vec::new();
    for _ in 0..2 {
        let store = store_on(PgServer::shared(), &schema, 10).await;
        let h = Harness::with(|b| b.receipts(store));
        h.pane().handlers(Recorder::new("pane", &log)).unwrap();
        cores.push(h);
    }
    for n in 0..20 {
        let body = json!({"requestId": format!("r-{n}"), "text": format!("hi {n}")});
        let (x, y) = tokio::join!(
            cores[0].post("/v1/panes/ticket-1/send", body.clone()),
            cores[1].post("/v1/panes/ticket-1/send", body.clone())
        );
        assert_eq!((x.status, y.status), (200, 200), "{:?} {:?}", x.json, y.json);
        let firsts = [&x, &y].iter().filter(|r| r.json["replayed"] == false).count();
        assert_eq!(firsts, 1, "one process ran it, the other replayed: {:?} {:?}", x.json, y.json);
        assert_eq!(harness::without_replayed(&x.json), harness::without_replayed(&y.json));
    }
    let calls = log.per_request();
    assert_eq!(calls.len(), 20);
    assert!(calls.values().all(|&n| n == 1), "{calls:?}");
}

#[tokio::test]
async fn with_the_database_down_a_write_is_500_and_runs_nothing_then_works_again() {
    let mut server = PgServer::start();
    let store = Arc::new(store_on(&server, "desk", 10).await);
    let log = Log::default();
    let h = Harness::with(|b| b.receipts(store.clone()));
    h.pane().handlers(Recorder::new("pane", &log)).unwrap();
    let send = |id: &str| json!({"requestId": id, "text": "hi"});
    assert_eq!(h.post("/v1/panes/ticket-1/send", send("r-1")).await.status, 200);

    server.stop();
    let r = h.post("/v1/panes/ticket-1/send", send("r-2")).await;
    assert_eq!((r.status, r.code()), (500, "internal"), "{:?}", r.json);
    let message = r.json["message"].as_str().unwrap();
    assert!(message.contains("cannot reach the database"), "{message}");
    assert!(!message.contains(PASSWORD), "{message}");
    assert_eq!(log.count("r-2"), 0, "nothing ran");
    let r = h.post("/v1/panes/ticket-1/send", send("r-1")).await;
    assert_eq!((r.status, r.code()), (500, "internal"), "a replay cannot be read either: {:?}", r.json);

    server.run();
    let r = h.post("/v1/panes/ticket-1/send", send("r-2")).await;
    assert_eq!(r.status, 200, "the pool connects again: {:?}", r.json);
    assert_eq!(h.post("/v1/panes/ticket-1/send", send("r-1")).await.json["replayed"], true);
    assert_eq!((log.count("r-1"), log.count("r-2")), (1, 1));
}

#[test]
fn without_postgresql_the_tests_fail_and_say_how_to_install_it() {
    let nowhere = std::path::Path::new("/nonexistent-postgresql-versions");
    for ci in [false, true] {
        let why = pg_support::server_bin_dir_in(Some("/nonexistent-bin".into()), nowhere, ci).unwrap_err();
        assert!(why.contains("apt-get install -y --no-install-recommends postgresql"), "{why}");
        assert_eq!(why.contains("required in CI"), ci, "{why}");
    }
    // Here it is installed (CI installs it): the server the tests use.
    assert!(pg_support::server_bin_dir().unwrap().join("initdb").is_file());
}

fn kept(call: &str) -> KeptAskRecord {
    use durable_runtime::types::{AskOption, AskSpec, Id, Timestamp};
    let ask = AskSpec::choice(call, "refund wants to run", [AskOption::new("allow", "Allow")])
        .build(&Id::new("ticket-1").unwrap(), Timestamp::from_millis(1_796_014_800_000), false)
        .unwrap();
    KeptAskRecord::new(ask, Some(json!({"order": call})))
}

#[tokio::test]
async fn a_version_1_schema_is_migrated_to_keep_asks_and_its_receipts_stay() {
    let server = PgServer::shared();
    let schema = fresh_schema("v1");
    let store = store_on(server, &schema, 10).await;
    store.put("r-old", receipt(1), "starters").await.unwrap();
    drop(store);
    // Back to the layout of version 1, as an older SDK left it.
    let db = psql(server).await;
    db.batch_execute(&format!(
        "DROP TABLE \"{schema}\".kept_ask; DROP TABLE \"{schema}\".conversation_item; \
         DROP TABLE \"{schema}\".conversation; UPDATE \"{schema}\".schema_version SET version = 1"
    ))
    .await
    .unwrap();
    let store = store_on(server, &schema, 10).await;
    assert_eq!(store.get("r-old").await.unwrap(), Lookup::Found(receipt(1)));
    store.keep_ask(kept("a")).await.unwrap();
    store.keep_conversation(vec![reply("p", "a", "kept")], Timestamp::EPOCH).await.unwrap();
    let version: i32 =
        db.query_one(&format!("SELECT version FROM \"{schema}\".schema_version"), &[]).await.unwrap().get(0);
    assert_eq!(version, PG_SCHEMA_VERSION);
    assert_eq!(PG_SCHEMA_VERSION, 4);
}

#[tokio::test]
async fn a_version_2_schema_is_migrated_to_keep_conversations_and_its_asks_stay() {
    let server = PgServer::shared();
    let schema = fresh_schema("v2");
    let store = store_on(server, &schema, 10).await;
    store.put("r-old", receipt(1), "starters").await.unwrap();
    store.keep_ask(kept("a")).await.unwrap();
    drop(store);
    // Back to the layout of version 2, as the last SDK left it.
    let db = psql(server).await;
    db.batch_execute(&format!(
        "DROP TABLE \"{schema}\".conversation_item; DROP TABLE \"{schema}\".conversation; \
         UPDATE \"{schema}\".schema_version SET version = 2"
    ))
    .await
    .unwrap();
    let store = store_on(server, &schema, 10).await;
    assert_eq!(store.get("r-old").await.unwrap(), Lookup::Found(receipt(1)));
    let taken = wait_for(|| store.kept_asks(), |asks| !asks.is_empty()).await;
    assert_eq!(taken, [kept("a")], "the asks of the process before the migration");
    store.keep_conversation(vec![reply("p", "a", "kept")], Timestamp::EPOCH).await.unwrap();
    assert_eq!(texts(&store, "p").await, ["kept"]);
}

#[tokio::test]
async fn a_version_3_schema_gets_times_and_keeps_its_conversations() {
    let server = PgServer::shared();
    let schema = fresh_schema("v3");
    let store = store_on(server, &schema, 10).await;
    store
        .keep_conversation(vec![reply("old", "a", "one"), reply("old", "b", "two")], Timestamp::EPOCH)
        .await
        .unwrap();
    drop(store);
    // Back to the layout of version 3, as the last SDK left it.
    let db = psql(server).await;
    db.batch_execute(&format!(
        "DROP INDEX \"{schema}\".conversation_by_start; \
         ALTER TABLE \"{schema}\".conversation DROP COLUMN started_at, DROP COLUMN written_at; \
         UPDATE \"{schema}\".schema_version SET version = 3"
    ))
    .await
    .unwrap();
    let before =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64;
    let store = store_on(server, &schema, 10).await;
    assert_eq!(texts(&store, "old").await, ["one", "two"], "its items stay");
    let rows = store.conversation_rows(None, 10).await.unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!((rows[0].pane.as_str(), rows[0].items), ("old", 2));
    // Clocks of the test and the server may differ by a little.
    assert!(rows[0].started_at.as_millis() + 60_000 >= before, "started at the upgrade: {:?}", rows[0]);
    assert_eq!(rows[0].written_at, rows[0].started_at);
}

#[tokio::test]
async fn the_rows_are_newest_first_by_start_with_their_times_and_counts_and_page_from_a_place() {
    let schema = fresh_schema("rows");
    let store = store_on(PgServer::shared(), &schema, 10).await;
    let at = Timestamp::from_millis;
    store.keep_conversation(vec![reply("a", "1", "1"), reply("a", "2", "2")], at(1_000)).await.unwrap();
    store.keep_conversation(vec![ConversationOp::title("b", "B")], at(2_000)).await.unwrap();
    store.keep_conversation(vec![reply("c", "1", "1")], at(2_000)).await.unwrap();
    store.keep_conversation(vec![reply("a", "3", "3")], at(3_000)).await.unwrap();
    let rows = |r: Vec<durable_sdk::stores::KeptConversationRow>| {
        r.into_iter()
            .map(|r| (r.pane, r.title, r.started_at.as_millis(), r.written_at.as_millis(), r.items))
            .collect::<Vec<_>>()
    };
    let all = rows(store.conversation_rows(None, 10).await.unwrap());
    assert_eq!(
        all,
        [
            ("c".into(), None, 2_000, 2_000, 1),
            ("b".into(), Some("B".into()), 2_000, 2_000, 0),
            ("a".into(), None, 1_000, 3_000, 3)
        ]
    );
    let first = store.conversation_rows(None, 1).await.unwrap();
    assert_eq!(rows(store.conversation_rows(Some(first[0].place()), 10).await.unwrap()), all[1..]);
    let kept = store.kept_conversation("a").await.unwrap().unwrap();
    assert_eq!((kept.started_at, kept.written_at), (Some(at(1_000)), Some(at(3_000))));
}

#[tokio::test]
async fn the_rows_leave_out_what_another_running_process_writes_until_it_is_gone() {
    let server = PgServer::shared();
    let schema = fresh_schema("rows_owners");
    let first = store_on(server, &schema, 10).await;
    first.keep_conversation(vec![reply("ap", "a", "first's")], Timestamp::from_millis(1)).await.unwrap();
    let second = store_on(server, &schema, 10).await;
    second.keep_conversation(vec![reply("bp", "b", "second's")], Timestamp::from_millis(2)).await.unwrap();
    let panes = |rows: Vec<durable_sdk::stores::KeptConversationRow>| {
        rows.into_iter().map(|r| r.pane).collect::<Vec<_>>()
    };
    assert_eq!(panes(first.conversation_rows(None, 10).await.unwrap()), ["ap"]);
    assert_eq!(panes(second.conversation_rows(None, 10).await.unwrap()), ["bp"]);
    drop(first);
    let rows = wait_for(|| second.conversation_rows(None, 10), |rows| rows.len() == 2).await;
    assert_eq!(panes(rows), ["bp", "ap"], "the first's, once it is gone");
}

/// An op that writes a reply item on a pane.
fn reply(pane: &str, id: &str, text: &str) -> ConversationOp {
    ConversationOp::item(pane, Item::reply(id, text).unwrap())
}

/// The texts of a pane's kept items, in order (empty: nothing kept).
async fn texts(store: &PgReceiptStore, pane: &str) -> Vec<String> {
    let kept = store.kept_conversation(pane).await.unwrap();
    kept.map(|k| {
        k.items
            .iter()
            .map(|i| serde_json::to_value(i).unwrap()["text"].as_str().unwrap().to_owned())
            .collect()
    })
    .unwrap_or_default()
}

/// Calls `f` every 50 ms until its answer passes `done`, or 30 s went by
/// (the server takes a moment to see a session end).
async fn wait_for<T, F: std::future::Future<Output = Result<T, durable_runtime::StoreError>>>(
    mut f: impl FnMut() -> F,
    done: impl Fn(&T) -> bool,
) -> T {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let got = f().await.unwrap();
        if done(&got) || std::time::Instant::now() > deadline {
            return got;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn conversations_are_kept_as_last_written_in_order_forgotten_on_request_and_bounded() {
    let server = PgServer::shared();
    let schema = fresh_schema("conversations");
    let store = store_on(server, &schema, 10).await;
    assert!(store.keeps_conversations());
    store
        .keep_conversation(vec![reply("p", "a", "one"), reply("p", "b", "two")], Timestamp::EPOCH)
        .await
        .unwrap();
    store
        .keep_conversation(
            vec![
                reply("p", "a", "one, edited"),
                reply("p", "c", "three"),
                ConversationOp::title("p", "Maria Lopez"),
                reply("q", "a", "other pane"),
            ],
            Timestamp::EPOCH,
        )
        .await
        .unwrap();
    drop(store);

    // Another store on the schema (the next run) reads what the last one wrote.
    let store = store_on(server, &schema, 10).await;
    assert_eq!(texts(&store, "p").await, ["one, edited", "two", "three"]);
    let kept = store.kept_conversation("p").await.unwrap().unwrap();
    assert_eq!(
        (kept.title.as_deref(), kept.dropped, kept.title_by_phone),
        (Some("Maria Lopez"), false, false)
    );
    store
        .keep_conversation(vec![ConversationOp::title_from_phone("p", "Refund 5521")], Timestamp::EPOCH)
        .await
        .unwrap();
    let kept = store.kept_conversation("p").await.unwrap().unwrap();
    assert_eq!(
        (kept.title.as_deref(), kept.title_by_phone),
        (Some("Refund 5521"), true),
        "the phone's title"
    );
    assert_eq!(store.kept_conversation("nobody").await.unwrap(), None);
    store.keep_conversation(vec![ConversationOp::forget("p")], Timestamp::EPOCH).await.unwrap();
    assert_eq!(store.kept_conversation("p").await.unwrap(), None);
    assert_eq!(texts(&store, "q").await, ["other pane"], "only p forgotten");
    // Forgotten, then written again in the same batch: a new conversation.
    store
        .keep_conversation(
            vec![reply("q", "x", "old"), ConversationOp::forget("q"), reply("q", "y", "new")],
            Timestamp::EPOCH,
        )
        .await
        .unwrap();
    assert_eq!(texts(&store, "q").await, ["new"]);

    // Past the bound the oldest go, and the conversation says so.
    let limit = KEPT_ITEMS_PER_CONVERSATION;
    let ops: Vec<_> = (0..limit + 5).map(|n| reply("long", &format!("i{n}"), &format!("n{n}"))).collect();
    store.keep_conversation(ops, Timestamp::EPOCH).await.unwrap();
    let kept = store.kept_conversation("long").await.unwrap().unwrap();
    assert!(kept.dropped);
    assert_eq!(kept.items.len(), limit);
    assert_eq!(kept.items[0].id.as_str(), "i5");
    // Written again, a dropped id comes back at the end.
    store.keep_conversation(vec![reply("long", "i0", "back")], Timestamp::EPOCH).await.unwrap();
    let kept = store.kept_conversation("long").await.unwrap().unwrap();
    assert_eq!((kept.items.len(), kept.items.last().unwrap().id.as_str()), (limit, "i0"));
}

#[tokio::test]
async fn a_batch_with_a_damaged_item_row_reads_the_others() {
    let server = PgServer::shared();
    let schema = fresh_schema("conv_damaged");
    let store = store_on(server, &schema, 10).await;
    store
        .keep_conversation(vec![reply("p", "a", "one"), reply("p", "b", "two")], Timestamp::EPOCH)
        .await
        .unwrap();
    let db = psql(server).await;
    db.execute(
        &format!("UPDATE \"{schema}\".conversation_item SET body = '{{not json' WHERE item_id = 'a'"),
        &[],
    )
    .await
    .unwrap();
    assert_eq!(texts(&store, "p").await, ["two"], "the damaged row is skipped, not the conversation");
}

#[tokio::test]
async fn one_process_writes_a_conversation_at_a_time_and_the_next_takes_it_once_the_first_is_gone() {
    let server = PgServer::shared();
    let schema = fresh_schema("conv_owners");
    let first = store_on(server, &schema, 10).await;
    first.keep_conversation(vec![reply("p", "a", "from the first")], Timestamp::EPOCH).await.unwrap();

    // A second process while the first runs: it can neither read nor write
    // p; its batch keeps the rest (q) and fails naming p.
    let second = store_on(server, &schema, 10).await;
    let read = second.kept_conversation("p").await.unwrap_err().to_string();
    assert!(read.contains("pane p") && read.contains("another running process"), "{read}");
    let write = second
        .keep_conversation(
            vec![reply("q", "z", "elsewhere"), reply("p", "b", "from the second")],
            Timestamp::EPOCH,
        )
        .await
        .unwrap_err()
        .to_string();
    assert!(
        write.contains("pane(s) p ") && write.contains("one process writes a conversation at a time"),
        "{write}"
    );
    assert_eq!(texts(&first, "p").await, ["from the first"]);
    assert_eq!(texts(&second, "q").await, ["elsewhere"], "the other pane's change is kept");
    first.keep_conversation(vec![reply("p", "c", "still the first's")], Timestamp::EPOCH).await.unwrap();

    // The first process goes (its sessions end): the second reads p and writes it.
    drop(first);
    let kept = wait_for(|| async { Ok(second.kept_conversation("p").await.ok()) }, Option::is_some).await;
    let texts_now: Vec<String> = kept
        .flatten()
        .map(|k| {
            k.items
                .iter()
                .map(|i| serde_json::to_value(i).unwrap()["text"].as_str().unwrap().to_owned())
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(texts_now, ["from the first", "still the first's"]);
    second.keep_conversation(vec![reply("p", "b", "from the second")], Timestamp::EPOCH).await.unwrap();
    // Now the second's: a third process while it runs is refused in turn.
    let third = store_on(server, &schema, 10).await;
    let refused = third
        .keep_conversation(vec![reply("p", "d", "third")], Timestamp::EPOCH)
        .await
        .unwrap_err()
        .to_string();
    assert!(refused.contains("pane(s) p ") && refused.contains("another running process"), "{refused}");
    assert_eq!(texts(&second, "p").await, ["from the first", "still the first's", "from the second"]);
}

#[tokio::test]
async fn a_process_is_handed_the_asks_of_a_process_that_is_gone_never_of_one_running() {
    let server = PgServer::shared();
    let schema = fresh_schema("owners");
    let first = store_on(server, &schema, 10).await;
    assert!(first.keeps_asks());
    first.keep_ask(kept("a")).await.unwrap();
    first.keep_ask(kept("b")).await.unwrap();
    first.forget_ask(&kept("b").ask.id).await.unwrap();
    first.keep_ask(kept("c")).await.unwrap();

    // A second process while the first runs: nothing for it.
    let second = store_on(server, &schema, 10).await;
    assert_eq!(second.kept_asks().await.unwrap(), Vec::<KeptAskRecord>::new());

    // The first process goes (its sessions end): the next start takes its asks, in order, once.
    drop(first);
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let taken = loop {
        let taken = second.kept_asks().await.unwrap();
        if !taken.is_empty() || std::time::Instant::now() > deadline {
            break taken;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(taken, [kept("a"), kept("c")]);
    let third = store_on(server, &schema, 10).await;
    assert!(third.kept_asks().await.unwrap().is_empty(), "now the second's own, and it runs");
    drop(second);
}

#[tokio::test]
async fn the_store_keeps_the_conversations_written_to_last_and_forgets_the_oldest_whole() {
    let server = PgServer::shared();
    let schema = fresh_schema("conv_retention");
    let options =
        PgReceiptOptions::builder().url(server.url()).schema(&schema).kept_conversations(3).build().unwrap();
    assert_eq!(options.kept_conversations(), 3);
    let store = PgReceiptStore::connect(options).await.unwrap();
    for pane in ["a", "b", "c"] {
        store.keep_conversation(vec![reply(pane, "i", pane)], Timestamp::EPOCH).await.unwrap();
    }
    // `a` written again: `b` is now the one written to least recently.
    store.keep_conversation(vec![reply("a", "i", "a again")], Timestamp::EPOCH).await.unwrap();
    store.keep_conversation(vec![ConversationOp::title("d", "New")], Timestamp::EPOCH).await.unwrap();
    assert_eq!(store.kept_conversation("b").await.unwrap(), None, "the oldest, forgotten whole");
    for pane in ["a", "c", "d"] {
        assert!(store.kept_conversation(pane).await.unwrap().is_some(), "{pane} kept");
    }
    let db = psql(server).await;
    let orphans: i64 = db
        .query_one(
            &format!(
                "SELECT COUNT(*) FROM \"{schema}\".conversation_item WHERE pane NOT IN (SELECT pane FROM \"{schema}\".conversation)"
            ),
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(orphans, 0, "no item outlives its conversation");
    let default = PgReceiptOptions::builder().url(server.url()).build().unwrap();
    assert_eq!(default.kept_conversations(), durable_sdk::stores::KEPT_CONVERSATIONS);
}

#[tokio::test]
async fn a_turns_end_is_kept_with_its_items_and_stays_running_where_its_conversation_is_anothers() {
    let server = PgServer::shared();
    let schema = fresh_schema("turn_end");
    let first = store_on(server, &schema, 10).await;
    for id in ["s-1", "s-2"] {
        first.record_send(PendingSend::new(id, "p", "hello", SendState::Running)).await.unwrap();
    }
    first
        .keep_conversation_and_end_sends(
            vec![reply("p", "a", "did: hello")],
            vec!["s-1".into()],
            Timestamp::EPOCH,
        )
        .await
        .unwrap();
    assert_eq!(texts(&first, "p").await, ["did: hello"]);
    assert_eq!(first.send_state("s-1").await.unwrap(), Some(SendState::Done), "done with its items");
    assert_eq!(first.send_state("s-2").await.unwrap(), Some(SendState::Running), "only the sends named");
    // A turn's end alone (its items went in an earlier write).
    first.keep_conversation_and_end_sends(Vec::new(), vec!["s-2".into()], Timestamp::EPOCH).await.unwrap();
    assert_eq!(first.send_state("s-2").await.unwrap(), Some(SendState::Done));

    // Another running process owns p: its items are not kept, so its send
    // is not done either (a restart closes it as cut, with its notice); a
    // send on q, kept in the same batch, is.
    let second = store_on(server, &schema, 10).await;
    second.record_send(PendingSend::new("s-3", "p", "again", SendState::Running)).await.unwrap();
    second.record_send(PendingSend::new("s-4", "q", "elsewhere", SendState::Running)).await.unwrap();
    let refused = second
        .keep_conversation_and_end_sends(
            vec![reply("p", "b", "did: again"), reply("q", "c", "did: elsewhere")],
            vec!["s-3".into(), "s-4".into()],
            Timestamp::EPOCH,
        )
        .await
        .unwrap_err()
        .to_string();
    assert!(refused.contains("pane(s) p ") && refused.contains("another running process"), "{refused}");
    assert_eq!(second.send_state("s-3").await.unwrap(), Some(SendState::Running));
    assert_eq!(second.send_state("s-4").await.unwrap(), Some(SendState::Done));
    assert_eq!(texts(&first, "p").await, ["did: hello"]);
    assert_eq!(texts(&second, "q").await, ["did: elsewhere"]);
}
