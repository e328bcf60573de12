//! Conversations kept in the SQLite store across restarts: a pane declared
//! again comes back with what the phone was shown, and the notice the SDK
//! writes for a turn a restart cut is still there after a second restart.
//! Each run is a new core over the database opened again; the run a
//! "crash" ends is left as it is, never dropped (nothing of it runs again:
//! its turn is stuck, as in a process killed in it).
#![cfg(feature = "sqlite-receipts")]

use std::path::PathBuf;

use durable_runtime::test_util::Harness;
use durable_runtime::{ChatHandler, Turn};
use durable_sdk::Item;
use durable_sdk::stores::{ReceiptStore, RowPlace, SqliteReceiptStore};
use durable_sdk::types::Timestamp;
use serde_json::{Value, json};

mod common;
use common::TempDir;

fn db(dir: &TempDir) -> PathBuf {
    dir.0.join("receipts.sqlite3")
}

/// The first run's chat: its turn never ends (the process dies in it).
struct Stuck;

impl ChatHandler for Stuck {
    async fn turn(&self, turn: Turn) {
        turn.reply("Checking the order…");
        std::future::pending::<()>().await
    }
}

/// The later runs' chat: answers at once.
struct Echo;

impl ChatHandler for Echo {
    async fn turn(&self, turn: Turn) {
        turn.reply(format!("did: {}", turn.text()));
    }
}

/// One run: the store opened again, the pane declared, `ready()`, and the
/// panes given their kept items back.
async fn run(dir: &TempDir, chat: impl ChatHandler) -> Harness {
    let store = SqliteReceiptStore::open(db(dir)).expect("the store opens");
    let h = Harness::with(|b| b.receipts(store));
    h.pane().on_send(chat).unwrap();
    h.core.ready();
    h.core.conversations_kept().await;
    h.settle().await;
    h
}

/// The pane's item texts once they are `want` (the recovery reads the
/// store on its thread: it takes a few turns of the runtime), or as they
/// stand after 10 s.
async fn texts_once(h: &Harness, want: &[&str]) -> Vec<String> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let shown = texts(&h.view("ticket-1").await);
        if shown == want || std::time::Instant::now() > deadline {
            return shown;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

fn texts(view: &Value) -> Vec<String> {
    view["items"].as_array().unwrap().iter().map(|i| i["text"].as_str().unwrap_or("").to_owned()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_notice_of_a_turn_a_restart_cut_is_in_the_pane_after_a_second_restart() {
    let dir = TempDir::new("conversations-notice");
    let first = run(&dir, Stuck).await;
    let sent =
        first.post("/v1/panes/ticket-1/send", json!({"requestId": "r-1", "text": "refund 5521"})).await;
    assert_eq!(sent.json["result"], "sent", "{:?}", sent.json);
    first.settle().await;
    first.core.conversations_kept().await;
    assert_eq!(texts(&first.view("ticket-1").await), ["refund 5521", "Checking the order…"]);
    // The crash: nothing of the first run happens again.
    std::mem::forget(first);

    let second = run(&dir, Echo).await;
    let notice = "The agent restarted while answering “refund 5521”; that answer did not finish.";
    let want = ["refund 5521", "Checking the order…", notice];
    assert_eq!(texts_once(&second, &want).await, want, "restored, then the notice");
    second.core.conversations_kept().await;
    drop(second);

    let third = run(&dir, Echo).await;
    assert_eq!(
        texts_once(&third, &want).await,
        want,
        "the second restart keeps the notice: the user's message is never left without a word"
    );
    let replay =
        third.post("/v1/panes/ticket-1/send", json!({"requestId": "r-1", "text": "refund 5521"})).await;
    assert_eq!(replay.json["replayed"], true, "{:?}", replay.json);
    assert_eq!(texts(&third.view("ticket-1").await).len(), 3, "a replay adds nothing");
}

#[tokio::test]
async fn items_are_kept_as_last_written_in_order_and_a_new_pane_under_the_id_starts_afresh() {
    let dir = TempDir::new("conversations-kept");
    let store = SqliteReceiptStore::open(db(&dir)).unwrap();
    assert!(store.keeps_conversations());
    let ops = |pane: &str, items: &[(&str, &str)]| {
        items
            .iter()
            .map(|(id, text)| {
                durable_sdk::stores::ConversationOp::item(pane, Item::reply(id, *text).unwrap())
            })
            .collect::<Vec<_>>()
    };
    store.keep_conversation(ops("p", &[("a", "one"), ("b", "two")]), Timestamp::EPOCH).await.unwrap();
    store
        .keep_conversation(ops("p", &[("a", "one, edited"), ("c", "three")]), Timestamp::EPOCH)
        .await
        .unwrap();
    store.keep_conversation(ops("q", &[("a", "other pane")]), Timestamp::EPOCH).await.unwrap();
    drop(store);

    let store = SqliteReceiptStore::open(db(&dir)).unwrap();
    let kept = store.kept_conversation("p").await.unwrap().expect("kept");
    let texts: Vec<Value> =
        kept.items.iter().map(|i| serde_json::to_value(i).unwrap()["text"].clone()).collect();
    assert_eq!(texts, [json!("one, edited"), json!("two"), json!("three")]);
    assert!(!kept.dropped);
    assert_eq!(store.kept_conversation("nobody").await.unwrap(), None);
    // Whose title it is: the phone's, then the program's again.
    assert!(!kept_title_by_phone(&store, "q").await);
    store
        .keep_conversation(
            vec![durable_sdk::stores::ConversationOp::title_from_phone("q", "Q!")],
            Timestamp::EPOCH,
        )
        .await
        .unwrap();
    assert!(kept_title_by_phone(&store, "q").await);
    store
        .keep_conversation(vec![durable_sdk::stores::ConversationOp::title("q", "Q")], Timestamp::EPOCH)
        .await
        .unwrap();
    assert!(!kept_title_by_phone(&store, "q").await);
    store
        .keep_conversation(vec![durable_sdk::stores::ConversationOp::forget("p")], Timestamp::EPOCH)
        .await
        .unwrap();
    assert_eq!(store.kept_conversation("p").await.unwrap(), None);
    assert_eq!(store.kept_conversation("q").await.unwrap().unwrap().items.len(), 1, "only p forgotten");
}

#[tokio::test]
async fn a_conversation_past_its_bound_drops_its_oldest_items_and_says_so() {
    let dir = TempDir::new("conversations-bound");
    let store = SqliteReceiptStore::open(db(&dir)).unwrap();
    let limit = durable_sdk::stores::KEPT_ITEMS_PER_CONVERSATION;
    let ops: Vec<_> = (0..limit + 5)
        .map(|n| {
            durable_sdk::stores::ConversationOp::item(
                "p",
                Item::reply(&format!("i{n}"), format!("n{n}")).unwrap(),
            )
        })
        .collect();
    store.keep_conversation(ops, Timestamp::EPOCH).await.unwrap();
    let kept = store.kept_conversation("p").await.unwrap().unwrap();
    assert!(kept.dropped);
    assert_eq!(kept.items.len(), limit);
    assert_eq!(kept.items[0].id.as_str(), "i5");
    // Written again, a dropped id comes back at the end.
    store
        .keep_conversation(
            vec![durable_sdk::stores::ConversationOp::item("p", Item::reply("i0", "back").unwrap())],
            Timestamp::EPOCH,
        )
        .await
        .unwrap();
    let kept = store.kept_conversation("p").await.unwrap().unwrap();
    assert_eq!((kept.items.len(), kept.items.last().unwrap().id.as_str()), (limit, "i0"));
}

#[tokio::test]
async fn the_store_keeps_the_conversations_written_to_last_and_forgets_the_oldest_whole() {
    let dir = TempDir::new("conversations-retention");
    let store = SqliteReceiptStore::open(db(&dir)).unwrap().with_kept_conversations(3);
    assert_eq!(store.kept_conversations(), 3);
    let reply = |pane: &str, text: &str| {
        durable_sdk::stores::ConversationOp::item(pane, Item::reply("i", text).unwrap())
    };
    for pane in ["a", "b", "c"] {
        store.keep_conversation(vec![reply(pane, pane)], Timestamp::EPOCH).await.unwrap();
    }
    // `a` written again: `b` is now the one written to least recently.
    store.keep_conversation(vec![reply("a", "a again")], Timestamp::EPOCH).await.unwrap();
    store
        .keep_conversation(vec![durable_sdk::stores::ConversationOp::title("d", "New")], Timestamp::EPOCH)
        .await
        .unwrap();
    drop(store);

    let store = SqliteReceiptStore::open(db(&dir)).unwrap();
    assert_eq!(store.kept_conversation("b").await.unwrap(), None, "the oldest, forgotten whole");
    for pane in ["a", "c", "d"] {
        assert!(store.kept_conversation(pane).await.unwrap().is_some(), "{pane} kept");
    }
    let conn = rusqlite::Connection::open(db(&dir)).unwrap();
    let orphans: i64 = conn
        .query_row(
            "SELECT COUNT(*) FROM conversation_item WHERE pane NOT IN (SELECT pane FROM conversation)",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(orphans, 0, "no item outlives its conversation");
    // The default bound, at open.
    assert_eq!(store.kept_conversations(), durable_sdk::stores::KEPT_CONVERSATIONS);
}

async fn kept_title_by_phone(store: &SqliteReceiptStore, pane: &str) -> bool {
    store.kept_conversation(pane).await.unwrap().expect("kept").title_by_phone
}

/// The rows of what `store` keeps: pane, title, start, last write, items.
async fn kept_rows(
    store: &SqliteReceiptStore,
    after: Option<RowPlace>,
    limit: usize,
) -> Vec<(String, u64, u64, u64)> {
    store
        .conversation_rows(after, limit)
        .await
        .unwrap()
        .into_iter()
        .map(|r| (r.pane, r.started_at.as_millis(), r.written_at.as_millis(), r.items))
        .collect()
}

#[tokio::test]
async fn the_rows_are_newest_first_by_start_with_their_times_and_counts_and_page_from_a_place() {
    let dir = TempDir::new("conversations-rows");
    let store = SqliteReceiptStore::open(db(&dir)).unwrap();
    let reply =
        |pane: &str, id: &str| durable_sdk::stores::ConversationOp::item(pane, Item::reply(id, id).unwrap());
    let at = Timestamp::from_millis;
    store.keep_conversation(vec![reply("a", "1"), reply("a", "2")], at(1_000)).await.unwrap();
    store
        .keep_conversation(vec![durable_sdk::stores::ConversationOp::title("b", "B")], at(2_000))
        .await
        .unwrap();
    store.keep_conversation(vec![reply("c", "1")], at(2_000)).await.unwrap();
    // `a` written again later: its start stays, its last write moves.
    store.keep_conversation(vec![reply("a", "3")], at(3_000)).await.unwrap();
    drop(store);

    let store = SqliteReceiptStore::open(db(&dir)).unwrap();
    let all = kept_rows(&store, None, 10).await;
    assert_eq!(
        all,
        [("c".into(), 2_000, 2_000, 1), ("b".into(), 2_000, 2_000, 0), ("a".into(), 1_000, 3_000, 3)],
        "newest first; the same start by pane id, descending"
    );
    let first = store.conversation_rows(None, 1).await.unwrap();
    let rest = kept_rows(&store, Some(first[0].place()), 10).await;
    assert_eq!(rest, all[1..], "the page after a place");
    let kept = store.kept_conversation("a").await.unwrap().unwrap();
    assert_eq!((kept.started_at, kept.written_at), (Some(at(1_000)), Some(at(3_000))));
}

#[tokio::test]
async fn a_store_of_the_layout_before_times_gets_them_and_keeps_its_conversations() {
    let dir = TempDir::new("conversations-v4");
    let store = SqliteReceiptStore::open(db(&dir)).unwrap();
    let reply =
        |pane: &str, id: &str| durable_sdk::stores::ConversationOp::item(pane, Item::reply(id, id).unwrap());
    store
        .keep_conversation(vec![reply("old", "1"), reply("old", "2")], Timestamp::from_millis(5))
        .await
        .unwrap();
    drop(store);
    // Back to layout 4, as an SDK before times wrote it.
    let conn = rusqlite::Connection::open(db(&dir)).unwrap();
    conn.execute_batch(
        "DROP INDEX conversation_by_start;
         ALTER TABLE conversation DROP COLUMN started_at;
         ALTER TABLE conversation DROP COLUMN written_at;
         PRAGMA user_version = 4;",
    )
    .unwrap();
    drop(conn);

    let before =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64;
    let store = SqliteReceiptStore::open(db(&dir)).unwrap();
    let rows = kept_rows(&store, None, 10).await;
    assert_eq!(rows.len(), 1);
    let (pane, started, written, items) = rows[0].clone();
    assert_eq!((pane.as_str(), items), ("old", 2));
    assert!(started >= before && written == started, "kept before times: started at the upgrade ({started})");
    let kept = store.kept_conversation("old").await.unwrap().unwrap();
    assert_eq!(kept.items.len(), 2, "its items stay");
    drop(store);
    let conn = rusqlite::Connection::open(db(&dir)).unwrap();
    let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap();
    assert_eq!(version, durable_sdk::stores::SQLITE_SCHEMA_VERSION);
}
