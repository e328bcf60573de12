//! History (contract §10): the list of conversations and one
//! conversation's items, served from the agent's own store through a
//! `HistoryProvider`; each test names the rule it checks.
use durable_runtime::test_util as harness;

use std::sync::{Arc, Mutex};

use durable_runtime::types::{
    Cap, Caps, ConversationState, Cursor, HistoryRow, Id, Item, ItemBody, NoticeTone, Timestamp,
};
use durable_runtime::{HistoryError, HistoryProvider, ItemsPage, PaneOptions, RowsPage};
use harness::{Harness, T0};
use serde_json::{Value, json};

/// One call to the provider: what, `after`, `limit`.
type ProviderCall = (String, Option<String>, usize);

/// A store of `n` conversations `conv-0 … conv-{n-1}`; `conv-k` has `k`
/// items. Cursors are `at-<index>`. It records every call it gets.
#[derive(Clone, Default)]
struct Store {
    n: usize,
    calls: Arc<Mutex<Vec<ProviderCall>>>,
    fail: bool,
}

impl Store {
    fn new(n: usize) -> Store {
        Store { n, ..Default::default() }
    }

    fn calls(&self) -> Vec<ProviderCall> {
        self.calls.lock().unwrap().clone()
    }

    fn row(&self, k: usize) -> HistoryRow {
        HistoryRow {
            id: format!("conv-{k}"),
            title: format!("Conversation {k}"),
            subtitle: (k % 2 == 0).then(|| format!("sub {k}")),
            workspace_id: (k == 0).then(|| "support".to_owned()),
            tab_id: (k == 0).then(|| "support:main".to_owned()),
            started_at: Timestamp::from_millis(T0 + k as u64),
            ended_at: (k % 2 == 1).then(|| Timestamp::from_millis(T0 + 1000 + k as u64)),
            state: if k % 2 == 1 { ConversationState::Closed } else { ConversationState::Open },
            items: k as u64,
        }
    }
}

fn start_of(after: Option<Cursor>) -> usize {
    after.and_then(|c| c.as_str().strip_prefix("at-").and_then(|n| n.parse().ok())).unwrap_or(0)
}

fn page_cursor(next: usize, total: usize) -> Option<Cursor> {
    (next < total).then(|| Cursor::new(format!("at-{next}")).unwrap())
}

impl HistoryProvider for Store {
    async fn rows(&self, after: Option<Cursor>, limit: usize) -> Result<RowsPage, HistoryError> {
        self.calls.lock().unwrap().push((
            "rows".into(),
            after.as_ref().map(|c| c.as_str().to_owned()),
            limit,
        ));
        if self.fail {
            return Err(HistoryError::new("the ticket store is offline"));
        }
        let start = start_of(after);
        let end = (start + limit).min(self.n);
        Ok(RowsPage { rows: (start..end).map(|k| self.row(k)).collect(), next: page_cursor(end, self.n) })
    }

    async fn items(
        &self,
        session_id: &str,
        after: Option<Cursor>,
        limit: usize,
    ) -> Result<Option<ItemsPage>, HistoryError> {
        self.calls.lock().unwrap().push((
            format!("items:{session_id}"),
            after.as_ref().map(|c| c.as_str().to_owned()),
            limit,
        ));
        let Some(k) = session_id.strip_prefix("conv-").and_then(|k| k.parse::<usize>().ok()) else {
            return Ok(None);
        };
        if k >= self.n {
            return Ok(None);
        }
        let start = start_of(after);
        let end = (start + limit).min(k);
        let items = (start..end)
            .map(|i| {
                Item::new(
                    Id::new(format!("i-{i}")).unwrap(),
                    ItemBody::Notice {
                        text: format!("item {i}"),
                        partial: false,
                        tone: Some(NoticeTone::Info),
                    },
                )
            })
            .collect();
        Ok(Some(ItemsPage { row: self.row(k), items, next: page_cursor(end, k), dropped: k == 7 }))
    }
}

fn with_store(n: usize) -> (Harness, Store) {
    let h = Harness::new();
    let store = Store::new(n);
    h.core.history(store.clone());
    (h, store)
}

fn ids(rows: &Value) -> Vec<String> {
    rows.as_array().unwrap().iter().map(|r| r["id"].as_str().unwrap().to_owned()).collect()
}

#[tokio::test]
async fn history_list_limit_defaults_to_50_and_next_pages_through_the_providers_cursor() {
    let (h, store) = with_store(120);
    let r = h.get("/v1/history").await;
    assert_eq!(r.status, 200, "{:?}", r.json);
    assert_eq!(r.json["ok"], true);
    assert_eq!(r.json["rows"].as_array().unwrap().len(), 50);
    assert_eq!(r.json["next"], "at-50");
    assert_eq!(store.calls()[0], ("rows".into(), None, 50));
    let r = h.get("/v1/history?after=at-50&limit=60").await;
    assert_eq!(ids(&r.json["rows"])[0], "conv-50");
    assert_eq!(r.json["rows"].as_array().unwrap().len(), 60);
    assert_eq!(r.json["next"], "at-110");
    assert_eq!(store.calls()[1], ("rows".into(), Some("at-50".into()), 60));
    // The last page has no `next`: the list ends.
    let r = h.get("/v1/history?after=at-110").await;
    assert_eq!(r.json["rows"].as_array().unwrap().len(), 10);
    assert!(!r.json.as_object().unwrap().contains_key("next"), "{:?}", r.json);
}

#[tokio::test]
async fn history_list_rows_have_the_contract_shape_without_absent_optionals() {
    let (h, _) = with_store(2);
    let r = h.get("/v1/history").await;
    assert_eq!(
        r.json["rows"][0],
        json!({"id": "conv-0", "title": "Conversation 0", "subtitle": "sub 0", "workspaceId": "support",
               "tabId": "support:main", "startedAt": "2026-11-30T05:00:00.000Z", "state": "open", "items": 0})
    );
    assert_eq!(
        r.json["rows"][1],
        json!({"id": "conv-1", "title": "Conversation 1", "startedAt": "2026-11-30T05:00:00.001Z",
               "endedAt": "2026-11-30T05:00:01.001Z", "state": "closed", "items": 1})
    );
}

#[tokio::test]
async fn history_limit_is_1_to_200_and_outside_is_400() {
    let (h, store) = with_store(300);
    assert_eq!(h.get("/v1/history?limit=1").await.json["rows"].as_array().unwrap().len(), 1);
    assert_eq!(h.get("/v1/history?limit=200").await.json["rows"].as_array().unwrap().len(), 200);
    let asked = store.calls().len();
    for q in [
        "limit=0",
        "limit=201",
        "limit=-1",
        "limit=abc",
        "limit=",
        "limit=1.5",
        "limit=99999999999999999999999",
    ] {
        let r = h.get(&format!("/v1/history?{q}")).await;
        assert_eq!(r.status, 400, "{q}: {:?}", r.json);
        assert_eq!(r.code(), "bad-request", "{q}");
        let r = h.get(&format!("/v1/history/conv-3?{q}")).await;
        assert_eq!(r.status, 400, "{q}: {:?}", r.json);
    }
    assert_eq!(store.calls().len(), asked, "a bad request reaches no provider");
}

#[tokio::test]
async fn history_after_breaking_the_cursor_rule_is_400_empty_included() {
    let (h, store) = with_store(3);
    let long = "x".repeat(513);
    for after in ["", "a%20b", "%C3%A9", "tab%09x", "%7F", long.as_str()] {
        let r = h.get(&format!("/v1/history?after={after}")).await;
        assert_eq!(r.status, 400, "after={after:?}: {:?}", r.json);
        assert_eq!(r.code(), "bad-request");
        let r = h.get(&format!("/v1/history/conv-2?after={after}")).await;
        assert_eq!(r.status, 400, "after={after:?}: {:?}", r.json);
    }
    assert!(store.calls().is_empty());
    // Printable ASCII without space, up to 512 bytes, is a cursor.
    let max = "y".repeat(512);
    for after in ["at-1", "a~!+*%24", max.as_str()] {
        let r = h.get(&format!("/v1/history?after={after}")).await;
        assert_eq!(r.status, 200, "after={after:?}: {:?}", r.json);
    }
    assert_eq!(store.calls()[1].1.as_deref(), Some("a~!+*$"));
}

/// A value that does not decode is refused, not passed on as its raw text:
/// `%FF` and `%80abc` are bytes that are not UTF-8, `%zz` and `a%` hold a
/// `%` that starts no escape.
#[tokio::test]
async fn history_after_that_does_not_decode_is_400_not_its_raw_text() {
    let (h, store) = with_store(3);
    for after in ["%FF", "%80abc", "%zz", "a%", "%4"] {
        for path in ["/v1/history", "/v1/history/conv-2"] {
            let r = h.get(&format!("{path}?after={after}")).await;
            assert_eq!(r.status, 400, "{path}?after={after:?}: {:?}", r.json);
            assert_eq!(r.code(), "bad-request");
            assert!(r.json["message"].as_str().unwrap_or("").contains("after"), "{:?}", r.json);
        }
    }
    assert!(store.calls().is_empty(), "the provider was asked: {:?}", store.calls());
    // An unknown parameter that does not decode is ignored, as any unknown one.
    assert_eq!(h.get("/v1/history?x=%zz").await.status, 200);
}

#[tokio::test]
async fn history_conversation_serves_row_items_next_and_dropped_and_404_for_an_unknown_session() {
    let (h, store) = with_store(10);
    let r = h.get("/v1/history/conv-7?limit=5").await;
    assert_eq!(r.status, 200, "{:?}", r.json);
    assert_eq!(r.json["ok"], true);
    assert_eq!(r.json["row"]["id"], "conv-7");
    assert_eq!(r.json["row"]["state"], "closed");
    let items: Vec<_> = r.json["items"].as_array().unwrap().iter().map(|i| i["id"].clone()).collect();
    assert_eq!(items, vec![json!("i-0"), json!("i-1"), json!("i-2"), json!("i-3"), json!("i-4")]);
    assert_eq!(r.json["items"][0]["kind"], "notice");
    assert_eq!(r.json["next"], "at-5");
    assert_eq!(r.json["dropped"], true);
    let r = h.get("/v1/history/conv-7?after=at-5").await;
    assert_eq!(r.json["items"].as_array().unwrap().len(), 2);
    assert!(!r.json.as_object().unwrap().contains_key("next"), "{:?}", r.json);
    assert_eq!(store.calls()[1], ("items:conv-7".into(), Some("at-5".into()), 50));
    let r = h.get("/v1/history/conv-2").await;
    assert_eq!(r.json["dropped"], false);
    // Unknown session: 404; a session id breaking the ID rule: 400.
    let r = h.get("/v1/history/conv-99").await;
    assert_eq!((r.status, r.code()), (404, "not-found"));
    let r = h.get("/v1/history/a%20b").await;
    assert_eq!((r.status, r.code()), (400, "bad-request"));
    // Percent-decoded before the provider sees it.
    let r = h.get("/v1/history/conv%2D3").await;
    assert_eq!(r.json["row"]["id"], "conv-3");
}

#[tokio::test]
async fn history_a_closed_conversation_is_always_read_from_the_provider() {
    let (h, store) = with_store(4);
    let pane = h
        .core
        .workspace("support", "Support")
        .unwrap()
        .tab("main", "Tickets")
        .unwrap()
        .pane("conv-3", PaneOptions::new("Three"))
        .unwrap();
    pane.close();
    let r = h.get("/v1/history/conv-3").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json["row"]["title"], "Conversation 3");
    assert_eq!(store.calls().last().unwrap().0, "items:conv-3");
}

#[tokio::test]
async fn history_a_provider_error_is_500_internal_with_its_message() {
    let h = Harness::new();
    h.core.history(Store { n: 3, fail: true, ..Default::default() });
    let r = h.get("/v1/history").await;
    assert_eq!((r.status, r.code()), (500, "internal"));
    assert!(r.json["message"].as_str().unwrap().contains("offline"), "{:?}", r.json);
}

#[tokio::test]
async fn history_cap_is_on_once_a_provider_is_set_with_caps_omitted() {
    // A store that keeps no conversations: history is only a provider's.
    let h = Harness::without_history();
    assert_eq!(h.get("/hello").await.json["caps"]["history"], false);
    let r = h.get("/v1/history").await;
    assert_eq!((r.status, r.code()), (409, "not-supported"));
    assert_eq!(h.get("/v1/history/conv-1").await.status, 409);
    h.core.history(Store::new(2));
    let hello = h.get("/hello").await.json;
    assert_eq!(hello["caps"]["history"], true);
    assert_eq!(hello["caps"]["terminal"], false);
    assert_eq!(h.get("/v1/history").await.status, 200);
}

#[tokio::test]
async fn history_cap_stays_off_when_caps_are_given_without_history_even_with_a_provider() {
    let h = Harness::with_caps(Caps::all().without(Cap::History));
    let store = Store::new(2);
    h.core.history(store.clone());
    assert_eq!(h.get("/hello").await.json["caps"]["history"], false);
    // The cap is checked before the query: a bad limit is 409 too.
    for path in ["/v1/history", "/v1/history/conv-1", "/v1/history?limit=0"] {
        let r = h.get(path).await;
        assert_eq!((r.status, r.code()), (409, "not-supported"), "{path}");
    }
    assert!(store.calls().is_empty());
    // Given with history: on.
    let h = Harness::with_caps(Caps::none().with(Cap::History));
    h.core.history(Store::new(2));
    assert_eq!(h.get("/hello").await.json["caps"]["history"], true);
    assert_eq!(h.get("/v1/history").await.status, 200);
}

#[tokio::test]
async fn history_routes_are_reads_post_is_405() {
    let (h, _) = with_store(1);
    let r = h.post("/v1/history", json!({})).await;
    assert_eq!((r.status, r.code()), (405, "method-not-allowed"));
    assert_eq!(r.allow, Some("GET"));
    assert_eq!(h.post("/v1/history/conv-0", json!({})).await.status, 405);
}

#[tokio::test]
async fn history_session_id_is_the_pane_id_once_a_provider_is_set_unless_tab_pane_names_another_or_null() {
    let h = Harness::without_history();
    let tab = h.core.workspace("support", "Support").unwrap().tab("main", "Tickets").unwrap();
    let plain = tab.pane("ticket-1", PaneOptions::new("One")).unwrap();
    tab.pane("ticket-2", PaneOptions::new("Two").session_id("store-42")).unwrap();
    tab.pane("ticket-3", PaneOptions::new("Three").no_session_id()).unwrap();
    tab.pane("ticket-4", PaneOptions::new("Four")).unwrap().close();
    let sessions = |s: &Value| -> Vec<Value> {
        s["panes"].as_array().unwrap().iter().map(|p| p["sessionId"].clone()).collect()
    };
    // Without a provider: what tab.pane() was given, else null.
    let before = h.state().await.json;
    assert_eq!(sessions(&before), vec![Value::Null, json!("store-42"), Value::Null]);
    assert_eq!(before["closed"][0]["sessionId"], Value::Null);
    let seq = before["seq"].as_u64().unwrap();
    h.core.history(Store::new(0));
    assert_eq!(plain.session_id().as_deref(), Some("ticket-1"));
    // The change is visible to a `since` poll.
    let since = h.state_since(seq).await.json;
    assert_eq!(since["full"], false);
    let changed: Vec<_> = since["panes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["id"].clone(), p["sessionId"].clone()))
        .collect();
    assert!(changed.contains(&(json!("ticket-1"), json!("ticket-1"))), "{changed:?}");
    let after = h.state().await.json;
    assert_eq!(sessions(&after), vec![json!("ticket-1"), json!("store-42"), Value::Null]);
    // A pane closed before the provider was set gets its session id too.
    assert_eq!(after["closed"][0], json!({"id": "ticket-4", "title": "Four", "sessionId": "ticket-4"}));
    // A pane closed after the provider was set keeps its session id in `closed`.
    plain.close();
    let closed = h.state().await.json["closed"].clone();
    let ids: Vec<_> =
        closed.as_array().unwrap().iter().map(|c| (c["id"].clone(), c["sessionId"].clone())).collect();
    assert!(ids.contains(&(json!("ticket-1"), json!("ticket-1"))), "{ids:?}");
}

#[tokio::test]
async fn history_never_serves_more_than_limit_even_from_a_provider_that_gives_more() {
    struct Greedy;
    impl HistoryProvider for Greedy {
        async fn rows(&self, _after: Option<Cursor>, _limit: usize) -> Result<RowsPage, HistoryError> {
            Ok(RowsPage { rows: (0..10).map(|k| Store::new(10).row(k)).collect(), next: None })
        }
        async fn items(
            &self,
            _: &str,
            _: Option<Cursor>,
            _: usize,
        ) -> Result<Option<ItemsPage>, HistoryError> {
            let items = (0..10)
                .map(|i| {
                    Item::new(
                        Id::new(format!("i-{i}")).unwrap(),
                        ItemBody::User { text: "x".into(), request_id: None },
                    )
                })
                .collect();
            Ok(Some(ItemsPage { row: Store::new(1).row(0), items, next: None, dropped: false }))
        }
    }
    let h = Harness::new();
    h.core.history(Greedy);
    assert_eq!(h.get("/v1/history?limit=3").await.json["rows"].as_array().unwrap().len(), 3);
    assert_eq!(h.get("/v1/history/conv-0?limit=4").await.json["items"].as_array().unwrap().len(), 4);
}
