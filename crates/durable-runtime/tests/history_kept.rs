//! History by default (docs/wire.md §10): with a receipt store that keeps
//! conversations and no provider, `/v1/history` lists what the store keeps
//! — open panes and closed ones, newest first — and
//! `/v1/history/{sessionId}` reads each; with a provider, the store answers
//! for the ids the provider does not know. A restart is a new core over the
//! same memory store (the SQLite store's own test restarts over a file:
//! `durable-sdk/tests/conversations.rs`).
use durable_runtime::test_util as harness;

use std::sync::Arc;

use durable_runtime::types::{Caps, Item};
use durable_runtime::{HistoryError, HistoryProvider, ItemsPage, MemoryReceiptStore, PaneOptions, RowsPage};
use harness::Harness;
use serde_json::{Value, json};

fn reply(id: &str, text: &str) -> Item {
    Item::reply(id, text).unwrap()
}

/// One run over `store`: caps in full (reopen without hooks), the clock at
/// `T0 + offset_ms`.
async fn run(store: &Arc<MemoryReceiptStore>, offset_ms: u64) -> Harness {
    let h = Harness::with(|b| b.receipts(Arc::clone(store)).caps(Caps::all()));
    h.advance(offset_ms).await;
    h
}

/// Declares `id` in the standard tab and writes `n` replies to it, one
/// millisecond apart, kept before it returns.
async fn pane_with(h: &Harness, id: &str, title: &str, n: usize) -> durable_runtime::Pane {
    let tab = h.core.workspace("support", "Support").unwrap().tab("main", "Tickets").unwrap();
    let pane = tab.pane(id, PaneOptions::new(title)).unwrap();
    for i in 0..n {
        pane.write(reply(&format!("{id}-r{i}"), &format!("{title} {i}"))).unwrap();
    }
    h.core.conversations_kept().await;
    h.advance(1).await;
    pane
}

fn rows(page: &Value) -> Vec<(String, String, u64)> {
    page["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["id"].as_str().unwrap().to_owned(),
                r["state"].as_str().unwrap().to_owned(),
                r["items"].as_u64().unwrap(),
            )
        })
        .collect()
}

fn item_ids(page: &Value) -> Vec<String> {
    page["items"].as_array().unwrap().iter().map(|i| i["id"].as_str().unwrap().to_owned()).collect()
}

/// Every page of `path` with `limit`, following `next`.
async fn all_pages(h: &Harness, path: &str, list: &str, limit: usize) -> (Vec<Value>, usize) {
    let mut after: Option<String> = None;
    let mut got = Vec::new();
    for page in 1..=100 {
        let url = match &after {
            None => format!("{path}?limit={limit}"),
            Some(a) => format!("{path}?limit={limit}&after={a}"),
        };
        let r = h.get(&url).await;
        assert_eq!(r.status, 200, "{url}: {:?}", r.json);
        got.extend(r.json[list].as_array().unwrap().iter().cloned());
        match r.json["next"].as_str() {
            Some(next) => after = Some(next.to_owned()),
            None => return (got, page),
        }
    }
    panic!("{path}: more than 100 pages");
}

#[tokio::test]
async fn without_a_provider_history_lists_open_and_closed_conversations_newest_first_with_their_counts() {
    let store = Arc::new(MemoryReceiptStore::new());
    let h = run(&store, 0).await;
    pane_with(&h, "ticket-1", "Maria", 2).await;
    let closed = pane_with(&h, "ticket-2", "Kenji", 3).await;
    pane_with(&h, "ticket-3", "Aiko", 1).await;
    closed.close();
    h.core.conversations_kept().await;

    assert_eq!(h.get("/hello").await.json["caps"]["history"], true, "no provider, yet history is on");
    let page = h.get("/v1/history").await;
    assert_eq!(page.status, 200, "{:?}", page.json);
    assert_eq!(
        rows(&page.json),
        [
            ("ticket-3".into(), "open".into(), 1),
            ("ticket-2".into(), "closed".into(), 3),
            ("ticket-1".into(), "open".into(), 2)
        ],
        "newest first, a closed pane closed, each with its count"
    );
    assert!(page.json.get("next").is_none(), "one page ends the list");
    let open = &page.json["rows"][0];
    assert_eq!((open["title"].clone(), open["tabId"].clone()), (json!("Aiko"), json!("support:main")));
    let ended = &page.json["rows"][1];
    assert!(ended["endedAt"].is_string(), "a closed row says when it ended: {ended}");
    assert_eq!(ended["title"], "Kenji");

    // Each open pane's sessionId is its row's id, and reads it.
    let state = h.state().await.json;
    for pane in state["panes"].as_array().unwrap() {
        let session = pane["sessionId"].as_str().expect("a session id without a provider");
        let r = h.get(&format!("/v1/history/{session}")).await;
        assert_eq!((r.status, r.json["row"]["state"].clone()), (200, json!("open")), "{session}");
        assert_eq!(r.json["row"]["items"].as_u64().unwrap() as usize, item_ids(&r.json).len());
    }
    // The closed pane is read from the store: closed, its items in order.
    let r = h.get("/v1/history/ticket-2").await;
    assert_eq!(r.status, 200, "{:?}", r.json);
    assert_eq!(r.json["row"]["state"], "closed");
    assert_eq!(item_ids(&r.json), ["ticket-2-r0", "ticket-2-r1", "ticket-2-r2"]);
    assert_eq!(r.json["dropped"], false);
    // An id the store does not keep is still 404.
    let r = h.get("/v1/history/ticket-9").await;
    assert_eq!((r.status, r.code()), (404, "not-found"));
}

#[tokio::test]
async fn rows_and_a_closed_conversations_items_page_with_stable_cursors() {
    let store = Arc::new(MemoryReceiptStore::new());
    let h = run(&store, 0).await;
    for n in 0..5 {
        pane_with(&h, &format!("p{n}"), &format!("P{n}"), 0).await;
    }
    h.core.pane("p0").unwrap().write(reply("x", "x")).unwrap();
    let closed = pane_with(&h, "long", "Long", 7).await;
    closed.close();
    h.core.conversations_kept().await;

    let (whole, pages) = all_pages(&h, "/v1/history", "rows", 200).await;
    assert_eq!(pages, 1);
    let (paged, pages) = all_pages(&h, "/v1/history", "rows", 2).await;
    assert_eq!(pages, 3, "six rows by two");
    assert_eq!(paged, whole, "paging gives the same rows in the same order");

    // A cursor stays good while a newer conversation starts: the next page
    // neither repeats a row nor misses one.
    let first = h.get("/v1/history?limit=2").await.json;
    let next = first["next"].as_str().unwrap().to_owned();
    pane_with(&h, "newer", "Newer", 1).await;
    let second = h.get(&format!("/v1/history?limit=10&after={next}")).await.json;
    let ids = |v: &Value| rows(v).into_iter().map(|r| r.0).collect::<Vec<_>>();
    let mut seen = ids(&first);
    seen.extend(ids(&second));
    assert_eq!(seen, whole.iter().map(|r| r["id"].as_str().unwrap().to_owned()).collect::<Vec<_>>());

    let (items, pages) = all_pages(&h, "/v1/history/long", "items", 3).await;
    assert_eq!(pages, 3, "seven items by three");
    assert_eq!(items.len(), 7);
    assert_eq!(items[6]["id"], "long-r6");

    // Cursors that are not the SDK's are refused, not read as the start.
    for path in ["/v1/history?after=view-1", "/v1/history?after=rows-x-p1", "/v1/history/long?after=view-2"] {
        let r = h.get(path).await;
        assert_eq!((r.status, r.code()), (400, "bad-request"), "{path}");
    }
}

#[tokio::test]
async fn after_a_restart_a_pane_not_declared_again_is_a_closed_row_and_stays_readable() {
    let store = Arc::new(MemoryReceiptStore::new());
    let first = run(&store, 0).await;
    pane_with(&first, "ticket-1", "Maria", 2).await;
    pane_with(&first, "ticket-2", "Kenji", 3).await;
    let before = first.get("/v1/history/ticket-2").await.json;
    drop(first);

    // The second run declares ticket-1 only.
    let second = run(&store, 60_000).await;
    pane_with(&second, "ticket-1", "Maria", 0).await;
    second.core.conversations_kept().await;
    let page = second.get("/v1/history").await.json;
    assert_eq!(
        rows(&page),
        [("ticket-2".into(), "closed".into(), 3), ("ticket-1".into(), "open".into(), 2)],
        "{page}"
    );
    // The row keeps when it started (the first run), not the restart.
    let started = |id: &str| {
        page["rows"].as_array().unwrap().iter().find(|r| r["id"] == id).unwrap()["startedAt"].clone()
    };
    assert_eq!(started("ticket-2"), before["row"]["startedAt"]);
    let r = second.get("/v1/history/ticket-2").await.json;
    assert_eq!(item_ids(&r), item_ids(&before));
    assert_eq!(r["row"]["state"], "closed");
    // The closed list of the state poll is this run's closes only.
    assert_eq!(second.state().await.json["closed"], json!([]));
    // Deleted by the program, it is gone from history.
    second.core.forget_conversation("ticket-2");
    second.core.conversations_kept().await;
    assert_eq!(second.get("/v1/history/ticket-2").await.status, 404);
    assert_eq!(rows(&second.get("/v1/history").await.json).len(), 1);
}

/// A provider that knows one conversation, `stored`.
struct OneStored;

impl HistoryProvider for OneStored {
    async fn rows(
        &self,
        _after: Option<durable_runtime::types::Cursor>,
        _limit: usize,
    ) -> Result<RowsPage, HistoryError> {
        Ok(RowsPage {
            rows: vec![durable_runtime::types::HistoryRow::open(
                "stored",
                "Stored",
                durable_runtime::types::Timestamp::EPOCH,
            )],
            next: None,
        })
    }
    async fn items(
        &self,
        session_id: &str,
        _after: Option<durable_runtime::types::Cursor>,
        _limit: usize,
    ) -> Result<Option<ItemsPage>, HistoryError> {
        Ok((session_id == "stored").then(|| ItemsPage {
            row: durable_runtime::types::HistoryRow::open(
                "stored",
                "Stored",
                durable_runtime::types::Timestamp::EPOCH,
            ),
            items: vec![reply("s-1", "from the provider")],
            next: None,
            dropped: false,
        }))
    }
}

#[tokio::test]
async fn with_a_provider_the_store_answers_the_conversations_the_provider_does_not_know() {
    let store = Arc::new(MemoryReceiptStore::new());
    let h = run(&store, 0).await;
    h.core.history(OneStored);
    let closed = pane_with(&h, "ticket-2", "Kenji", 2).await;
    closed.close();
    h.core.conversations_kept().await;
    // The rows are the provider's.
    assert_eq!(rows(&h.get("/v1/history").await.json), [("stored".into(), "open".into(), 0)]);
    // Its conversation is the provider's; the closed pane's is the store's.
    assert_eq!(item_ids(&h.get("/v1/history/stored").await.json), ["s-1"]);
    let r = h.get("/v1/history/ticket-2").await;
    assert_eq!((r.status, r.json["row"]["state"].clone()), (200, json!("closed")), "{:?}", r.json);
    assert_eq!(item_ids(&r.json), ["ticket-2-r0", "ticket-2-r1"]);
}

/// The ids of every row, paged by `limit`.
async fn row_ids_paged(h: &Harness, limit: usize) -> (Vec<String>, usize) {
    let (rows, pages) = all_pages(h, "/v1/history", "rows", limit).await;
    (rows.iter().map(|r| r["id"].as_str().unwrap().to_owned()).collect(), pages)
}

#[tokio::test]
async fn a_pane_id_no_cursor_may_hold_still_pages_and_pages_are_short_only_at_the_end() {
    let store = Arc::new(MemoryReceiptStore::new());
    let h = run(&store, 0).await;
    pane_with(&h, "a", "A", 1).await;
    pane_with(&h, "café", "Café", 1).await;
    let tab = h.core.workspace("support", "Support").unwrap().tab("main", "Tickets").unwrap();
    // Two panes with no session id: not listed while open.
    for id in ["hidden-1", "hidden-2"] {
        tab.pane(id, PaneOptions::new(id).no_session_id())
            .unwrap()
            .write(reply(&format!("{id}-r"), "x"))
            .unwrap();
        h.core.conversations_kept().await;
        h.advance(1).await;
    }
    pane_with(&h, "b", "B", 1).await;
    let (whole, _) = row_ids_paged(&h, 200).await;
    assert_eq!(whole, ["b", "café", "a"]);
    for limit in [1, 2] {
        let (paged, pages) = row_ids_paged(&h, limit).await;
        assert_eq!(paged, whole, "limit {limit}");
        assert_eq!(pages, whole.len().div_ceil(limit), "limit {limit}: no short page before the end");
    }
    // Every cursor handed out keeps the cursor rule (printable ASCII).
    let first = h.get("/v1/history?limit=2").await.json;
    let next = first["next"].as_str().unwrap();
    assert!(next.bytes().all(|b| (0x21..=0x7e).contains(&b)), "{next}");
}

#[tokio::test]
async fn a_pane_with_a_named_session_is_listed_and_read_under_it_open_and_closed() {
    let store = Arc::new(MemoryReceiptStore::new());
    let h = run(&store, 0).await;
    let tab = h.core.workspace("support", "Support").unwrap().tab("main", "Tickets").unwrap();
    let p = tab.pane("p", PaneOptions::new("P").session_id("conv-9")).unwrap();
    p.write(reply("p-1", "one")).unwrap();
    h.core.conversations_kept().await;
    assert_eq!(rows(&h.get("/v1/history").await.json), [("conv-9".into(), "open".into(), 1)]);
    p.close();
    h.core.conversations_kept().await;
    assert_eq!(h.state().await.json["closed"][0]["sessionId"], "conv-9");
    assert_eq!(rows(&h.get("/v1/history").await.json), [("conv-9".into(), "closed".into(), 1)]);
    let r = h.get("/v1/history/conv-9").await;
    assert_eq!((r.status, r.json["row"]["state"].clone()), (200, json!("closed")), "{:?}", r.json);
    assert_eq!(item_ids(&r.json), ["p-1"]);
}

#[tokio::test]
async fn an_open_panes_session_id_wins_over_a_closed_conversation_of_that_id() {
    let store = Arc::new(MemoryReceiptStore::new());
    let h = run(&store, 0).await;
    pane_with(&h, "x", "Old x", 2).await.close();
    let tab = h.core.workspace("support", "Support").unwrap().tab("main", "Tickets").unwrap();
    tab.pane("q", PaneOptions::new("Q").session_id("x")).unwrap().write(reply("q-1", "q")).unwrap();
    h.core.conversations_kept().await;
    assert_eq!(rows(&h.get("/v1/history").await.json), [("x".into(), "open".into(), 1)], "one row per id");
    assert_eq!(item_ids(&h.get("/v1/history/x").await.json), ["q-1"]);
}

#[tokio::test]
async fn caps_declared_without_history_give_no_session_ids() {
    let h = Harness::with_caps(Caps::all().without(durable_runtime::types::Cap::History));
    h.pane();
    let state = h.state().await.json;
    assert_eq!(state["panes"][0]["sessionId"], Value::Null, "a session id would name what cannot be read");
    assert_eq!(h.get("/v1/history").await.code(), "not-supported");
}

/// A memory store whose list of conversations fails, saying where it lives.
#[derive(Default)]
struct RowsFail(MemoryReceiptStore);

impl durable_runtime::ReceiptStore for RowsFail {
    async fn get(&self, id: &str) -> Result<durable_runtime::Lookup, durable_runtime::StoreError> {
        self.0.get(id).await
    }
    async fn put(
        &self,
        id: &str,
        r: durable_runtime::Receipt,
        g: &str,
    ) -> Result<(), durable_runtime::StoreError> {
        self.0.put(id, r, g).await
    }
    fn keeps_conversations(&self) -> bool {
        true
    }
    async fn conversation_rows(
        &self,
        _after: Option<durable_runtime::RowPlace>,
        _limit: usize,
    ) -> Result<Vec<durable_runtime::KeptConversationRow>, durable_runtime::StoreError> {
        Err(durable_runtime::StoreError::new("postgres (postgres://desk@db.internal/agents): gone"))
    }
}

#[tokio::test]
async fn a_store_that_fails_to_list_is_500_with_a_plain_message_and_the_details_in_a_warn_line() {
    let h = Harness::with(|b| b.receipts(RowsFail::default()));
    let r = h.get("/v1/history").await;
    assert_eq!((r.status, r.code()), (500, "internal"));
    let message = r.json["message"].as_str().unwrap();
    assert!(!message.contains("db.internal"), "where the store lives stays off the wire: {message}");
    assert!(h.warns().iter().any(|w| w.contains("db.internal")), "{:?}", h.warns());
}

#[tokio::test]
async fn a_reply_cut_by_its_panes_close_reads_as_final_in_history() {
    let store = Arc::new(MemoryReceiptStore::new());
    let h = run(&store, 0).await;
    let pane = pane_with(&h, "ticket-1", "Maria", 0).await;
    pane.write(Item::partial_reply("r-1", "Got it: ").unwrap()).unwrap();
    h.core.conversations_kept().await;
    pane.close();
    h.core.conversations_kept().await;
    let r = h.get("/v1/history/ticket-1").await;
    assert_eq!(r.status, 200, "{:?}", r.json);
    let item = &r.json["items"][0];
    assert_eq!(item["text"], "Got it: ");
    assert!(item.get("partial").is_none(), "no turn writes a closed conversation again: {item}");
}

/// A provider that lists the SDK's own rows with a subtitle added, and
/// leaves every conversation to the SDK (the desk's shape).
struct Decorated(durable_runtime::Collie);

impl HistoryProvider for Decorated {
    async fn rows(
        &self,
        after: Option<durable_runtime::types::Cursor>,
        limit: usize,
    ) -> Result<RowsPage, HistoryError> {
        let mut page = self.0.kept_history_rows(after, limit).await?;
        for row in &mut page.rows {
            row.subtitle = Some(format!("about {}", row.id));
        }
        Ok(page)
    }
}

#[tokio::test]
async fn a_provider_adds_to_the_sdks_rows_and_a_cursor_it_never_gave_is_400() {
    let store = Arc::new(MemoryReceiptStore::new());
    let h = run(&store, 0).await;
    h.core.history(Decorated(h.core.clone()));
    for n in 0..3 {
        pane_with(&h, &format!("p{n}"), &format!("P{n}"), 1).await;
    }
    let (rows, pages) = all_pages(&h, "/v1/history", "rows", 2).await;
    assert_eq!(pages, 2, "the SDK's cursors go through the provider");
    let ids: Vec<&str> = rows.iter().map(|r| r["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["p2", "p1", "p0"]);
    assert_eq!(rows[0]["subtitle"], "about p2");
    let r = h.get("/v1/history?after=abc").await;
    assert_eq!((r.status, r.code()), (400, "bad-request"), "{:?}", r.json);
}

#[tokio::test]
async fn a_conversation_imported_for_a_pane_not_declared_is_history_and_a_later_pane_of_its_id_shows_it() {
    let store = Arc::new(MemoryReceiptStore::new());
    let h = run(&store, 0).await;
    let mut partial = reply("old-2", "cut mid");
    partial.body = durable_runtime::types::ItemBody::Reply { text: "cut mid".into(), partial: true };
    let kept = h
        .core
        .import_conversation("old-1", "From before", vec![reply("old-1", "kept elsewhere"), partial])
        .unwrap();
    assert!(kept, "the memory store keeps conversations");
    h.core.conversations_kept().await;
    let page = h.get("/v1/history/old-1").await.json;
    assert_eq!(item_ids(&page), ["old-1", "old-2"], "{page}");
    assert_eq!((&page["row"]["title"], &page["row"]["state"]), (&json!("From before"), &json!("closed")));
    assert_eq!(page["items"][1].get("partial"), None, "nothing more comes of it: final");
    assert_eq!(rows(&h.get("/v1/history").await.json), [("old-1".into(), "closed".into(), 2)]);

    // A pane declared under that id shows them.
    let tab = h.core.workspace("support", "Support").unwrap().tab("main", "Tickets").unwrap();
    let pane = tab.pane("old-1", PaneOptions::new("From before")).unwrap();
    h.core.conversations_kept().await;
    let events = h.get("/v1/panes/old-1/events?after=0").await.json;
    let shown: Vec<&str> =
        events["events"].as_array().unwrap().iter().filter_map(|e| e["item"]["id"].as_str()).collect();
    assert_eq!(shown, ["old-1", "old-2"], "{events}");

    // A pane this run declared, open or closed, is kept as it shows:
    // an import for it is an Err naming the rule; so are a bad id, an
    // empty title and an item that breaks the item rules.
    let declared = h.core.import_conversation("old-1", "Again", vec![reply("x", "y")]).unwrap_err();
    assert!(declared.is_invalid_state() && declared.to_string().contains("old-1"), "{declared}");
    pane.close();
    let closed = h.core.import_conversation("old-1", "Again", vec![]).unwrap_err();
    assert!(closed.is_invalid_state(), "{closed}");
    assert!(h.core.import_conversation("no/slash", "T", vec![]).unwrap_err().is_invalid_argument());
    assert!(h.core.import_conversation("fresh", "  ", vec![]).unwrap_err().is_invalid_argument());
    let mut bad = reply("fresh-1", "x");
    bad.body = durable_runtime::types::ItemBody::Code { text: "x".into(), lang: Some("not a lang!".into()) };
    assert!(h.core.import_conversation("fresh", "T", vec![bad]).is_err());
    h.core.conversations_kept().await;
    assert_eq!(h.get("/v1/history/fresh").await.status, 404, "nothing of a refused import is kept");
}

#[tokio::test]
async fn a_store_that_keeps_no_conversations_imports_nothing_and_the_memory_store_none_across_restarts() {
    let memory = Harness::new();
    assert!(memory.core.keeps_conversations() && !memory.core.keeps_conversations_across_restarts());
    let h = Harness::without_history();
    assert!(!h.core.keeps_conversations_across_restarts());
    assert!(!h.core.import_conversation("old-1", "T", vec![reply("a", "b")]).unwrap());
}
