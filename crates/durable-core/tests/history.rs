//! History's routing (§10) as a sequence on the machine alone: the test
//! plays the driver — the program's provider and the receipt store are
//! whatever it hands back — and reads which source the machine asks for,
//! the cursors it gives, and its answers.

mod standard;

use standard::{NOW, warnings};

use durable_core::data::conversation::{KeptConversation, KeptConversationRow, RowPlace};
use durable_core::history::{
    HistoryError, HistoryInput, HistoryNext, HistoryRead, HistoryRoute, ItemsPage, RowsNext, RowsPage,
};
use durable_core::machine::{Machine, MachineConfig};
use durable_core::types::exchange::{Caller, Request, Response};
use durable_core::types::{Cursor, HistoryRow, Id, Item, ItemBody, Timestamp};
use durable_core::{PaneOptions, StoreError};
use serde_json::{Value, json};

/// The desk (pane `ticket-1`), over a store that keeps conversations: the
/// history cap is on with no provider.
fn keeping_desk() -> Machine {
    let mut m = Machine::new(MachineConfig { keeps_conversations: true, ..standard::config() });
    let ws = m.add_workspace("support", "Support").unwrap();
    let tab = m.add_tab(&ws, "main", "Tickets").unwrap();
    m.add_pane(&tab, "ticket-1", PaneOptions::new("Maria")).unwrap();
    m
}

fn get(path: &str) -> Request {
    Request::get(path, Caller::OtherProcess)
}

fn rows_route() -> HistoryRoute {
    HistoryRoute::Rows
}

fn conversation(session: &str) -> HistoryRoute {
    HistoryRoute::Conversation(session.into())
}

fn body(r: &Response) -> Value {
    serde_json::from_slice(&r.body).unwrap()
}

fn answered(next: HistoryNext) -> Response {
    match next {
        HistoryNext::Respond(r) => r,
        other => panic!("the read asked for {other:?}, not an answer"),
    }
}

fn user(id: &str, text: &str) -> Item {
    Item::new(Id::new(id).unwrap(), ItemBody::User { text: text.into(), request_id: None })
}

fn step(m: &mut Machine, read: &mut HistoryRead, input: HistoryInput) -> HistoryNext {
    m.history_step(read, input, NOW)
}

#[test]
fn without_the_cap_every_read_is_not_supported_before_its_paging_is_looked_at() {
    let (mut m, _) = standard::desk();
    for (path, route) in [("/v1/history?limit=0", rows_route()), ("/v1/history/x?limit=0", conversation("x"))]
    {
        let (_, next) = m.begin_history(&get(path), route, false, NOW);
        let r = answered(next);
        assert_eq!((r.status, body(&r)["code"].clone()), (409, json!("not-supported")), "{path}");
    }
}

#[test]
fn with_the_cap_a_bad_limit_or_session_id_is_400_and_no_source_at_all_is_not_supported() {
    let (mut m, _) = standard::desk();
    m.state.enable_history();
    let (_, next) = m.begin_history(&get("/v1/history?limit=100000"), rows_route(), true, NOW);
    assert_eq!(answered(next).status, 400);
    let (_, next) = m.begin_history(&get("/v1/history/a%20b"), conversation("a%20b"), true, NOW);
    assert_eq!(answered(next).status, 400, "the session id breaks the ID rule");
    // The cap declared, but neither a provider nor a store that keeps.
    let (_, next) = m.begin_history(&get("/v1/history"), rows_route(), false, NOW);
    let r = answered(next);
    assert!(body(&r)["message"].as_str().unwrap().contains("no history provider"), "{:?}", body(&r));
}

#[test]
fn a_providers_rows_are_cut_to_the_limit_and_a_row_breaking_the_id_rule_is_left_out_with_a_warn_line() {
    let (mut m, _) = standard::desk();
    m.state.enable_history();
    let (mut read, next) = m.begin_history(&get("/v1/history?limit=2&after=c-1"), rows_route(), true, NOW);
    let HistoryNext::ProviderRows { after, limit } = next else { panic!("{next:?}") };
    assert_eq!((after.map(Cursor::into_string), limit), (Some("c-1".into()), 2));
    let rows = vec![
        HistoryRow::open("bad id", "Broken", NOW),
        HistoryRow::open("s-1", "x".repeat(300), NOW),
        HistoryRow::open("s-2", "Third", NOW),
    ];
    let page = RowsPage { rows, next: Some(Cursor::new("c-2").unwrap()) };
    let r = answered(step(&mut m, &mut read, HistoryInput::ProviderRows(Ok(page))));
    let b = body(&r);
    // Cut to the limit first: the bad row takes a place and goes.
    assert_eq!(b["rows"].as_array().unwrap().len(), 1, "{b}");
    assert_eq!((b["rows"][0]["id"].clone(), b["next"].clone()), (json!("s-1"), json!("c-2")));
    assert!(b["rows"][0]["title"].as_str().unwrap().len() <= 256, "the title is cut");
    assert!(warnings(&mut m).iter().any(|w| w.contains("breaks the ID rule")));
}

#[test]
fn a_providers_error_is_500_with_its_message_and_a_bad_cursor_of_its_own_is_400() {
    let (mut m, _) = standard::desk();
    m.state.enable_history();
    for (error, status) in
        [(HistoryError::new("disk gone"), 500), (HistoryError::bad_cursor("not mine"), 400)]
    {
        let (mut read, _) = m.begin_history(&get("/v1/history/s-1"), conversation("s-1"), true, NOW);
        let r = answered(step(&mut m, &mut read, HistoryInput::ProviderItems(Err(error))));
        assert_eq!(r.status, status);
    }
}

#[test]
fn a_conversation_the_provider_does_not_know_is_the_open_panes_view_paged_with_view_cursors() {
    let mut m = keeping_desk();
    let pane = Id::new("ticket-1").unwrap();
    for (id, text) in [("u-1", "one"), ("u-2", "two"), ("u-3", "three")] {
        m.write_item(&pane, user(id, text), NOW).unwrap();
    }
    let (mut read, next) =
        m.begin_history(&get("/v1/history/ticket-1?limit=2"), conversation("ticket-1"), true, NOW);
    assert!(matches!(next, HistoryNext::ProviderItems { .. }), "the provider is asked first: {next:?}");
    let r = answered(step(&mut m, &mut read, HistoryInput::ProviderItems(Ok(None))));
    let b = body(&r);
    assert_eq!(
        (b["row"]["id"].clone(), b["row"]["state"].clone()),
        (json!("ticket-1"), json!("open")),
        "{b}"
    );
    assert_eq!(b["items"].as_array().unwrap().len(), 2);
    let next = b["next"].as_str().unwrap().to_owned();
    assert!(next.starts_with("view-"), "{next}");
    let path = format!("/v1/history/ticket-1?after={next}");
    // No provider: the open pane's view at once.
    let (_, next) = m.begin_history(&get(&path), conversation("ticket-1"), false, NOW);
    let b = body(&answered(next));
    assert_eq!((b["items"][0]["text"].clone(), b["next"].clone()), (json!("three"), Value::Null), "{b}");
    // A page the provider gives always wins.
    let (mut read, _) = m.begin_history(&get("/v1/history/ticket-1"), conversation("ticket-1"), true, NOW);
    let page = ItemsPage {
        row: HistoryRow::open("ticket-1", "Its own", NOW),
        items: vec![],
        next: None,
        dropped: false,
    };
    let b = body(&answered(step(&mut m, &mut read, HistoryInput::ProviderItems(Ok(Some(page))))));
    assert_eq!(b["row"]["title"], json!("Its own"));
}

#[test]
fn a_conversation_no_pane_shows_is_read_from_the_store_as_a_closed_row_paged_with_kept_cursors() {
    let mut m = keeping_desk();
    let (mut read, next) =
        m.begin_history(&get("/v1/history/ticket-9?limit=2"), conversation("ticket-9"), false, NOW);
    let HistoryNext::KeptConversation { pane } = next else { panic!("{next:?}") };
    assert_eq!(pane, "ticket-9");
    let items = vec![user("u-1", "one"), user("u-2", "two"), user("u-3", "three")];
    let at = Timestamp::from_millis(500);
    let kept = KeptConversation::new(Some("Old".into()), items, true).with_times(at, NOW);
    let input = HistoryInput::KeptConversation(Ok(Some(kept.clone())));
    let b = body(&answered(step(&mut m, &mut read, input)));
    assert_eq!(
        (b["row"]["state"].clone(), b["row"]["title"].clone()),
        (json!("closed"), json!("Old")),
        "{b}"
    );
    assert_eq!((b["items"].as_array().unwrap().len(), b["next"].clone()), (2, json!("kept-2")));
    assert_eq!(b["dropped"], json!(true), "the store dropped older items: the page says so");

    let (mut read, _) =
        m.begin_history(&get("/v1/history/ticket-9?after=kept-2"), conversation("ticket-9"), false, NOW);
    let b = body(&answered(step(&mut m, &mut read, HistoryInput::KeptConversation(Ok(Some(kept))))));
    assert_eq!((b["items"][0]["text"].clone(), b["next"].clone()), (json!("three"), Value::Null));

    let (mut read, _) =
        m.begin_history(&get("/v1/history/ticket-9?after=view-1"), conversation("ticket-9"), false, NOW);
    let kept = KeptConversation::new(None, vec![], false);
    let r = answered(step(&mut m, &mut read, HistoryInput::KeptConversation(Ok(Some(kept)))));
    assert_eq!(r.status, 400, "a cursor of another kind");

    let (mut read, _) = m.begin_history(&get("/v1/history/ticket-9"), conversation("ticket-9"), false, NOW);
    assert_eq!(answered(step(&mut m, &mut read, HistoryInput::KeptConversation(Ok(None)))).status, 404);
}

#[test]
fn an_open_pane_named_by_another_session_id_is_not_read_under_its_pane_id() {
    let mut m = keeping_desk();
    let ws = m.add_workspace("sales", "Sales").unwrap();
    let tab = m.add_tab(&ws, "main", "Leads").unwrap();
    m.add_pane(&tab, "lead-1", PaneOptions::new("Ana").session_id("s-9")).unwrap();
    let (_, next) = m.begin_history(&get("/v1/history/lead-1"), conversation("lead-1"), false, NOW);
    assert_eq!(answered(next).status, 404, "not the store's conversation of lead-1 either");
    let (_, next) = m.begin_history(&get("/v1/history/s-9"), conversation("s-9"), false, NOW);
    assert_eq!(body(&answered(next))["row"]["title"], json!("Ana"), "its session id reads it");
}

#[test]
fn a_store_that_fails_a_read_is_500_with_a_plain_message_and_its_own_error_goes_to_the_warn_line() {
    let mut m = keeping_desk();
    let (mut read, _) = m.begin_history(&get("/v1/history/ticket-9"), conversation("ticket-9"), false, NOW);
    let failed = StoreError::new("/var/lib/agent/receipts.sqlite3: disk I/O error");
    let r = answered(step(&mut m, &mut read, HistoryInput::KeptConversation(Err(failed))));
    assert_eq!(r.status, 500);
    assert!(!String::from_utf8_lossy(&r.body).contains("/var/lib"), "the phone gets no path");
    assert!(warnings(&mut m).iter().any(|w| w.contains("/var/lib/agent")), "the program's log does");
}

#[test]
fn the_stores_rows_list_the_open_pane_under_its_session_and_the_others_closed_with_a_cursor_between_pages() {
    let mut m = keeping_desk();
    let (mut read, next) = m.begin_history(&get("/v1/history?limit=2"), rows_route(), false, NOW);
    let HistoryNext::KeptRows { place, limit } = next else { panic!("{next:?}") };
    assert_eq!((place, limit), (None, 3), "one more than the page: it says whether a next page exists");
    let row = |pane: &str, ms: u64| {
        KeptConversationRow::new(pane, Some(format!("{pane}'s")), Timestamp::from_millis(ms), NOW, 4)
    };
    let batch = vec![row("ticket-1", 900), row("ticket-7", 800), row("ticket-5", 700)];
    let b = body(&answered(step(&mut m, &mut read, HistoryInput::KeptRows(Ok(batch)))));
    let rows = b["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "{b}");
    assert_eq!((rows[0]["id"].clone(), rows[0]["state"].clone()), (json!("ticket-1"), json!("open")));
    assert_eq!(rows[0]["title"], json!("Maria"), "an open pane's row says what the pane shows");
    assert_eq!((rows[1]["id"].clone(), rows[1]["state"].clone()), (json!("ticket-7"), json!("closed")));
    let cursor = b["next"].as_str().unwrap().to_owned();

    // The next page goes on after ticket-7.
    let (mut read, next) =
        m.begin_history(&get(&format!("/v1/history?after={cursor}")), rows_route(), false, NOW);
    let HistoryNext::KeptRows { place, .. } = next else { panic!("{next:?}") };
    assert_eq!(place, Some(RowPlace { started_at: Timestamp::from_millis(800), pane: "ticket-7".into() }));
    let b = body(&answered(step(&mut m, &mut read, HistoryInput::KeptRows(Ok(vec![row("ticket-5", 700)])))));
    assert_eq!((b["rows"][0]["id"].clone(), b["next"].clone()), (json!("ticket-5"), Value::Null));

    let (_, next) = m.begin_history(&get("/v1/history?after=kept-2"), rows_route(), false, NOW);
    assert_eq!(answered(next).status, 400, "a cursor this never gave");
}

#[test]
fn a_read_of_kept_rows_for_a_provider_reads_on_past_rows_left_out_and_a_store_failure_is_its_error() {
    let mut m = keeping_desk();
    // A closed conversation under the id the open pane uses as its
    // session id is left out: the open pane is what that id reads.
    let (mut read, next) = m.begin_kept_rows(None, 1).unwrap();
    assert!(matches!(next, RowsNext::Read { limit: 2, .. }));
    let row = |pane: &str, ms: u64| KeptConversationRow::new(pane, None, Timestamp::from_millis(ms), NOW, 1);
    m.close_pane(&Id::new("ticket-1").unwrap(), NOW);
    let ws = m.add_workspace("support2", "Support").unwrap();
    let tab = m.add_tab(&ws, "main", "Tickets").unwrap();
    m.add_pane(&tab, "ticket-2", PaneOptions::new("Ana").session_id("old-1")).unwrap();
    let batch = vec![row("old-1", 900), row("ticket-3", 800)];
    // `old-1` is left out, so the page is not full: the read asks again,
    // after it.
    let next = m.kept_rows_step(&mut read, Ok(batch));
    let RowsNext::Read { place, .. } = next else { panic!("{next:?}") };
    assert_eq!(place.map(|p| p.pane), Some("old-1".into()));
    let next = m.kept_rows_step(&mut read, Ok(vec![row("ticket-3", 800), row("ticket-4", 700)]));
    let RowsNext::Page(Ok(page)) = next else { panic!("{next:?}") };
    assert_eq!(page.rows.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(), ["ticket-3"]);
    let cursor = page.next.expect("ticket-4 is left for a next page");
    let (_, next) = m.begin_kept_rows(Some(&cursor), 1).unwrap();
    let RowsNext::Read { place, .. } = next else { panic!("{next:?}") };
    assert_eq!(place.map(|p| p.pane), Some("ticket-3".into()));

    let (mut read, _) = m.begin_kept_rows(None, 1).unwrap();
    let next = m.kept_rows_step(&mut read, Err(StoreError::new("locked")));
    assert!(matches!(next, RowsNext::Page(Err(_))));
    assert!(warnings(&mut m).iter().any(|w| w.contains("locked")));
    assert!(m.begin_kept_rows(Some(&Cursor::new("view-3").unwrap()), 1).is_err(), "a cursor it never gave");
}

#[test]
fn an_outcome_the_read_did_not_ask_for_is_a_500_not_a_panic() {
    let mut m = keeping_desk();
    let (mut read, _) = m.begin_history(&get("/v1/history/ticket-9"), conversation("ticket-9"), false, NOW);
    let r = answered(step(&mut m, &mut read, HistoryInput::KeptRows(Ok(vec![]))));
    assert_eq!(r.status, 500);
}

#[test]
fn a_view_cursor_is_digits_only_and_a_rows_read_asked_for_a_page_out_of_bounds_is_an_error_naming_it() {
    let mut m = keeping_desk();
    let (_, next) =
        m.begin_history(&get("/v1/history/ticket-1?after=view-%2B1"), conversation("ticket-1"), false, NOW);
    assert_eq!(answered(next).status, 400, "view-+1 is no cursor this gave");
    for limit in [0, 201, usize::MAX] {
        let Err(e) = m.begin_kept_rows(None, limit) else { panic!("limit {limit} is out of bounds") };
        assert!(e.to_string().contains(&format!("limit {limit}")), "{e}");
    }
    assert!(m.begin_kept_rows(None, 200).is_ok());
}
