//! History (contract §10, our decision): an open pane's conversation is
//! always readable. When the provider knows no conversation by an id that
//! is the `sessionId` of a pane open now, `GET /v1/history/{sessionId}`
//! serves the pane's own view (its items, paged, and a row describing the
//! pane); a page the provider gives wins, the rows list stays the
//! provider's, and a closed pane is read from the provider only.
use durable_runtime::test_util as harness;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use durable_runtime::types::{
    Caps, ConversationState, Cursor, HistoryRow, Id, Item, ItemBody, Timestamp, VIEW_LIMIT,
};
use durable_runtime::{HistoryError, HistoryProvider, ItemsPage, PaneOptions, RowsPage};
use harness::{Harness, T0};
use serde_json::{Value, json};

/// A store that knows the conversations put in it (none at first), and
/// answers `None` for every other id. It records the ids it is asked for.
#[derive(Clone, Default)]
struct Store {
    known: Arc<Mutex<HashMap<String, HistoryRow>>>,
    asked: Arc<Mutex<Vec<String>>>,
    fail: bool,
}

impl Store {
    /// The store now knows `id`, a closed conversation of one item.
    fn knows(&self, id: &str) {
        let row = HistoryRow {
            id: id.to_owned(),
            title: format!("Stored {id}"),
            subtitle: None,
            workspace_id: None,
            tab_id: None,
            started_at: Timestamp::from_millis(T0 - 60_000),
            ended_at: Some(Timestamp::from_millis(T0 - 30_000)),
            state: ConversationState::Closed,
            items: 1,
        };
        self.known.lock().unwrap().insert(id.to_owned(), row);
    }

    fn forgets(&self, id: &str) {
        self.known.lock().unwrap().remove(id);
    }

    fn asked(&self) -> Vec<String> {
        self.asked.lock().unwrap().clone()
    }
}

impl HistoryProvider for Store {
    async fn rows(&self, _after: Option<Cursor>, _limit: usize) -> Result<RowsPage, HistoryError> {
        let mut rows: Vec<HistoryRow> = self.known.lock().unwrap().values().cloned().collect();
        rows.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(RowsPage { rows, next: None })
    }

    async fn items(
        &self,
        session_id: &str,
        _after: Option<Cursor>,
        _limit: usize,
    ) -> Result<Option<ItemsPage>, HistoryError> {
        self.asked.lock().unwrap().push(session_id.to_owned());
        if self.fail {
            return Err(HistoryError::new("the ticket store is offline"));
        }
        let Some(row) = self.known.lock().unwrap().get(session_id).cloned() else { return Ok(None) };
        let items = vec![reply("stored-1", "from the store")];
        Ok(Some(ItemsPage { row, items, next: None, dropped: false }))
    }
}

fn reply(id: &str, text: &str) -> Item {
    Item::new(Id::new(id).unwrap(), ItemBody::Reply { text: text.into(), partial: false })
}

fn with_store() -> (Harness, Store) {
    let h = Harness::new();
    let store = Store::default();
    h.core.history(store.clone());
    (h, store)
}

fn item_ids(page: &Value) -> Vec<String> {
    page["items"].as_array().unwrap().iter().map(|i| i["id"].as_str().unwrap().to_owned()).collect()
}

/// Every item of `path` after `after`, read `limit` at a time through
/// `next`, and the number of pages it took.
async fn pages_after(h: &Harness, path: &str, after: Option<String>, limit: usize) -> (Vec<String>, usize) {
    let (mut ids, mut pages, mut after) = (Vec::new(), 0, after);
    loop {
        let url = match &after {
            None => format!("{path}?limit={limit}"),
            Some(a) => format!("{path}?limit={limit}&after={a}"),
        };
        let r = h.get(&url).await;
        assert_eq!(r.status, 200, "{url}: {:?}", r.json);
        pages += 1;
        let got = item_ids(&r.json);
        assert!(got.len() <= limit, "{url}: {} items", got.len());
        ids.extend(got);
        match r.json.get("next") {
            None => return (ids, pages),
            Some(next) => after = Some(next.as_str().unwrap().to_owned()),
        }
        assert!(pages < 1000, "the pages never end");
    }
}

/// Every item of `path`, read `limit` at a time.
async fn all_pages(h: &Harness, path: &str, limit: usize) -> (Vec<String>, usize) {
    pages_after(h, path, None, limit).await
}

#[tokio::test]
async fn an_open_pane_the_provider_does_not_know_is_read_from_its_view_with_a_row_of_the_pane() {
    let (h, store) = with_store();
    h.advance(1_000).await;
    let pane = h.pane();
    h.advance(500).await;
    pane.write(reply("r1", "one")).unwrap();
    h.advance(500).await;
    pane.write(Item::new(Id::new("u1").unwrap(), ItemBody::User { text: "hi".into(), request_id: None }))
        .unwrap();
    pane.write(reply("r2", "two")).unwrap();
    // Rewritten under a known id: in place, as in the view.
    pane.write(reply("r1", "one, again")).unwrap();
    assert_eq!(h.state().await.json["panes"][0]["sessionId"], "ticket-1");

    let r = h.get("/v1/history/ticket-1").await;
    assert_eq!(r.status, 200, "{:?}", r.json);
    assert_eq!(store.asked(), ["ticket-1"], "the provider is asked first");
    assert_eq!(r.json["ok"], true);
    assert_eq!(
        r.json["row"],
        json!({"id": "ticket-1", "title": "Maria Lopez", "workspaceId": "support", "tabId": "support:main",
               "startedAt": "2026-11-30T05:00:01.500Z", "state": "open", "items": 3})
    );
    // The same items the live view holds, in order, as the snapshot writes them.
    let snapshot = h.events("ticket-1", 1_000).await.json;
    assert_eq!(snapshot["snapshot"], true);
    assert_eq!(r.json["items"], snapshot["items"]);
    assert_eq!(item_ids(&r.json), ["r1", "u1", "r2"]);
    assert_eq!(r.json["items"][0]["text"], "one, again");
    assert_eq!(r.json["dropped"], false);
    assert!(r.json.get("next").is_none(), "{:?}", r.json);

    // The row follows the pane: a rename is seen at the next read.
    pane.rename("Maria L.").unwrap();
    assert_eq!(h.get("/v1/history/ticket-1").await.json["row"]["title"], "Maria L.");

    // The rows list stays the provider's: it knows no conversation.
    let rows = h.get("/v1/history").await;
    assert_eq!(rows.status, 200);
    assert_eq!(rows.json["rows"], json!([]));
}

#[tokio::test]
async fn an_open_pane_is_found_by_its_session_id_not_its_pane_id_and_an_empty_one_started_at_the_read() {
    let (h, _store) = with_store();
    let tab = h.core.workspace("ops", "Ops").unwrap().tab("desk", "Desk").unwrap();
    let named = tab.pane("ticket-2", PaneOptions::new("Two").session_id("store-42")).unwrap();
    named.write(reply("a", "A")).unwrap();
    let r = h.get("/v1/history/store-42").await;
    assert_eq!(r.status, 200, "{:?}", r.json);
    assert_eq!(r.json["row"]["id"], "store-42");
    assert_eq!(r.json["row"]["tabId"], "ops:desk");
    assert_eq!(r.json["row"]["workspaceId"], "ops");
    assert_eq!(item_ids(&r.json), ["a"]);
    // Its pane id is not its session id.
    let r = h.get("/v1/history/ticket-2").await;
    assert_eq!((r.status, r.code()), (404, "not-found"));

    // A pane without events: no items, started (as far as the core knows) now.
    h.advance(2_000).await;
    tab.pane("ticket-3", PaneOptions::new("Three")).unwrap();
    let r = h.get("/v1/history/ticket-3").await;
    assert_eq!(r.status, 200, "{:?}", r.json);
    assert_eq!(r.json["items"], json!([]));
    assert_eq!(r.json["row"]["items"], 0);
    assert_eq!(r.json["row"]["startedAt"], "2026-11-30T05:00:02.000Z");
    assert!(r.json.get("next").is_none());
}

#[tokio::test]
async fn an_open_panes_view_pages_with_limit_and_after_like_a_provider_page() {
    let (h, _store) = with_store();
    let pane = h.pane();
    for i in 0..7 {
        pane.write(reply(&format!("r{i}"), "x")).unwrap();
    }
    let whole: Vec<String> = (0..7).map(|i| format!("r{i}")).collect();
    let r = h.get("/v1/history/ticket-1?limit=3").await;
    assert_eq!(item_ids(&r.json), ["r0", "r1", "r2"]);
    let next = r.json["next"].as_str().expect("a next cursor").to_owned();
    assert!(Cursor::new(next.clone()).is_ok(), "{next} follows the cursor rule");
    let r = h.get(&format!("/v1/history/ticket-1?limit=3&after={next}")).await;
    assert_eq!(item_ids(&r.json), ["r3", "r4", "r5"]);
    // The default limit (50) serves the rest, and the last page has no `next`.
    let last = r.json["next"].as_str().unwrap().to_owned();
    let r = h.get(&format!("/v1/history/ticket-1?after={last}")).await;
    assert_eq!(item_ids(&r.json), ["r6"]);
    assert!(r.json.get("next").is_none(), "{:?}", r.json);
    assert_eq!(r.json["row"]["items"], 7);
    for limit in [1, 2, 7, 200] {
        let (ids, pages) = all_pages(&h, "/v1/history/ticket-1", limit).await;
        assert_eq!(ids, whole, "limit={limit}");
        assert_eq!(pages, 7usize.div_ceil(limit), "limit={limit}");
    }

    // A cursor holds while the view changes: an item rewritten before it
    // stays before it, a new one comes after.
    let r = h.get("/v1/history/ticket-1?limit=2").await;
    let after = r.json["next"].as_str().unwrap().to_owned();
    pane.write(reply("r0", "rewritten")).unwrap();
    pane.write(reply("r7", "new")).unwrap();
    let (rest, _) = pages_after(&h, "/v1/history/ticket-1", Some(after), 50).await;
    assert_eq!(rest, ["r2", "r3", "r4", "r5", "r6", "r7"]);

    // The route's query rules hold, and a cursor the view never gave is 400.
    for q in ["limit=0", "limit=201", "after=", "after=a%20b", "after=c-9", "after=view-x"] {
        let r = h.get(&format!("/v1/history/ticket-1?{q}")).await;
        assert_eq!((r.status, r.code()), (400, "bad-request"), "{q}: {:?}", r.json);
    }
}

#[tokio::test]
async fn an_open_panes_view_past_the_view_limit_is_dropped_and_its_cursor_survives_the_drop() {
    let (h, _store) = with_store();
    let pane = h.pane();
    for i in 0..VIEW_LIMIT + 3 {
        pane.write(reply(&format!("r{i}"), "x")).unwrap();
    }
    let r = h.get("/v1/history/ticket-1?limit=2").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json["dropped"], true);
    assert_eq!(r.json["row"]["items"], VIEW_LIMIT);
    assert_eq!(item_ids(&r.json), ["r3", "r4"]);
    let after = r.json["next"].as_str().unwrap().to_owned();
    // Ten more items push ten more out of the front: the page after the
    // cursor starts at the oldest item still kept, none skipped twice.
    for i in VIEW_LIMIT + 3..VIEW_LIMIT + 13 {
        pane.write(reply(&format!("r{i}"), "x")).unwrap();
    }
    let r = h.get(&format!("/v1/history/ticket-1?limit=2&after={after}")).await;
    assert_eq!(item_ids(&r.json), ["r13", "r14"]);
    let (ids, _) = all_pages(&h, "/v1/history/ticket-1", 200).await;
    assert_eq!(ids.len(), VIEW_LIMIT);
    assert_eq!(ids.last().unwrap(), &format!("r{}", VIEW_LIMIT + 12));
}

#[tokio::test]
async fn an_id_that_is_neither_provided_nor_an_open_panes_session_stays_404() {
    let (h, store) = with_store();
    let tab = h.core.workspace("support", "Support").unwrap().tab("main", "Tickets").unwrap();
    tab.pane("ticket-1", PaneOptions::new("One")).unwrap().write(reply("r1", "x")).unwrap();
    tab.pane("ticket-9", PaneOptions::new("Nine").no_session_id()).unwrap().write(reply("r9", "x")).unwrap();
    // The open pane with that session id is served...
    assert_eq!(h.get("/v1/history/ticket-1").await.status, 200);
    // ...an id no pane and no conversation has is not, nor a pane whose
    // session id is null, nor a pane's item id.
    for id in ["no-such-session", "ticket-9", "r1", "ticket-1x"] {
        let r = h.get(&format!("/v1/history/{id}")).await;
        assert_eq!((r.status, r.code()), (404, "not-found"), "{id}: {:?}", r.json);
    }
    // A cursor of the view for an id of no pane is still 404, not 400.
    let r = h.get("/v1/history/no-such-session?after=view-1").await;
    assert_eq!((r.status, r.code()), (404, "not-found"));
    assert!(store.asked().contains(&"ticket-9".to_owned()));
}

#[tokio::test]
async fn a_provider_page_for_an_open_panes_session_wins_over_the_panes_view() {
    let (h, store) = with_store();
    let pane = h.pane();
    pane.write(reply("r1", "live")).unwrap();
    store.knows("ticket-1");
    let r = h.get("/v1/history/ticket-1").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json["row"]["title"], "Stored ticket-1");
    assert_eq!(r.json["row"]["state"], "closed");
    assert_eq!(item_ids(&r.json), ["stored-1"]);
    // The provider's rows are the list, the open pane's among them only as
    // the provider has it.
    let rows = h.get("/v1/history").await.json;
    assert_eq!(rows["rows"].as_array().unwrap().len(), 1);
    assert_eq!(rows["rows"][0]["title"], "Stored ticket-1");
    // Once the provider answers `None` for it, the pane's view serves it.
    store.forgets("ticket-1");
    let r = h.get("/v1/history/ticket-1").await;
    assert_eq!(r.status, 200);
    assert_eq!(
        (r.json["row"]["title"].clone(), r.json["row"]["state"].clone()),
        (json!("Maria Lopez"), json!("open"))
    );
    assert_eq!(item_ids(&r.json), ["r1"]);
}

#[tokio::test]
async fn a_pane_closed_by_the_program_is_not_served_from_its_view() {
    // Caps given in full: reopen is on without hooks. A store that keeps no
    // conversations: the provider's are the only closed ones.
    let h = Harness::with(|o| o.caps(Caps::all()).receipts(harness::KeepsNoConversations::default()));
    let store = Store::default();
    h.core.history(store.clone());
    let pane = h.pane();
    pane.write(reply("r1", "x")).unwrap();
    assert_eq!(h.get("/v1/history/ticket-1").await.status, 200, "served while open");
    pane.close();
    assert_eq!(h.state().await.json["closed"][0]["sessionId"], "ticket-1");
    let r = h.get("/v1/history/ticket-1").await;
    assert_eq!((r.status, r.code()), (404, "not-found"), "{:?}", r.json);
    // Closed, it is read from the provider, which may know it.
    store.knows("ticket-1");
    let r = h.get("/v1/history/ticket-1").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json["row"]["title"], "Stored ticket-1");
    // Reopened (restored by the SDK), it is open again: its view serves it.
    store.forgets("ticket-1");
    let r = h.post("/v1/reopen", json!({"requestId": "reopen-1", "id": "ticket-1"})).await;
    assert_eq!(r.status, 200, "{:?}", r.json);
    let r = h.get("/v1/history/ticket-1").await;
    assert_eq!(r.status, 200, "{:?}", r.json);
    assert_eq!(item_ids(&r.json), ["r1"]);
}

#[tokio::test]
async fn a_provider_error_for_an_open_panes_session_is_still_500() {
    let h = Harness::new();
    h.core.history(Store { fail: true, ..Default::default() });
    h.pane().write(reply("r1", "x")).unwrap();
    let r = h.get("/v1/history/ticket-1").await;
    assert_eq!((r.status, r.code()), (500, "internal"));
    assert!(r.json["message"].as_str().unwrap().contains("offline"), "{:?}", r.json);
}

#[tokio::test]
async fn without_a_provider_an_open_pane_is_not_served_409() {
    // A store that keeps no conversations: no history of the SDK's own.
    let h = Harness::without_history();
    h.core
        .workspace("support", "Support")
        .unwrap()
        .tab("main", "Tickets")
        .unwrap()
        .pane("ticket-1", PaneOptions::new("One").session_id("ticket-1"))
        .unwrap()
        .write(reply("r1", "x"))
        .unwrap();
    assert_eq!(h.state().await.json["panes"][0]["sessionId"], "ticket-1");
    let r = h.get("/v1/history/ticket-1").await;
    assert_eq!((r.status, r.code()), (409, "not-supported"));
    // With a provider, the same pane is served.
    h.core.history(Store::default());
    assert_eq!(h.get("/v1/history/ticket-1").await.status, 200);
}
