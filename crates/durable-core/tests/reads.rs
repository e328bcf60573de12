//! The borrowed read path (`Core::answer_read`) against the owned one
//! (`Core::handle`): the same request as a `GET` gets the same answer —
//! status, headers and bytes — and only the history routes are left to
//! `handle`.
mod harness;

use durable_core::types::exchange::{Caller, Request};
use durable_core::types::{Caps, Id, Item, ItemBody};
use harness::Harness;

fn reply(item: &str, text: &str) -> Item {
    Item::new(Id::new(item).unwrap(), ItemBody::Reply { text: text.into(), partial: false })
}

/// What `answer_read` gives the request, and what `handle` gives it.
async fn both(
    h: &Harness,
    req: Request,
) -> (Option<durable_core::types::exchange::Response>, durable_core::types::exchange::Response) {
    let read = req.as_read().expect("a GET reads as a borrowed read");
    let borrowed = h.core.answer_read(&read);
    let owned = h.core.handle(req.clone()).await;
    (borrowed, owned)
}

#[tokio::test]
async fn every_read_answered_at_once_is_the_answer_handle_gives() {
    let h = Harness::new();
    let pane = h.pane();
    pane.write(reply("r1", "hello")).unwrap();
    pane.write(reply("r2", "again")).unwrap();
    let etag = h.state().await.etag.expect("a state answer has an ETag");
    let seq = h.seq().await;

    let mut cases: Vec<Request> = [
        "/hello",
        "/v1/state",
        "/v1/state?since=0",
        "/v1/state?since=1",
        &format!("/v1/state?since={seq}"),
        "/v1/state?since=banana",
        "/v1/state?since=99999999",
        "/v1/panes/ticket-1/events?after=0",
        "/v1/panes/ticket-1/events?after=1",
        "/v1/panes/ticket-1/events?after=999999",
        "/v1/panes/ticket-1/events",
        "/v1/panes/nobody/events?after=0",
        "/v1/panes/%FF/events?after=0",
        "/v1/nothing-here",
        "/v1/panes/ticket-1/send",
        "/v1/asks/a1",
        "/v1/rename",
        "/",
        "",
        "/v1/state/",
    ]
    .iter()
    .map(|p| Request::get(p, Caller::OtherProcess))
    .collect();
    cases.push(Request::get("/v1/state", Caller::OtherProcess).with_if_none_match(&etag));
    cases.push(Request::get("/v1/state", Caller::OtherProcess).with_if_none_match("\"not-the-tag\""));
    cases.push(Request::get("/v1/state?since=0", Caller::OtherProcess).with_if_none_match(&etag));
    for caller in [Caller::SelfOrDescendant, Caller::OtherUser, Caller::Unknown, Caller::Token] {
        cases.push(Request::get("/v1/state", caller));
        cases.push(Request::get("/hello", caller));
        cases.push(Request::get("/v1/panes/ticket-1/send", caller));
    }

    let mut statuses = Vec::new();
    for req in cases {
        let shown = format!("{} {:?} {:?} {:?}", req.path, req.query, req.if_none_match, req.caller);
        let (borrowed, owned) = both(&h, req).await;
        let borrowed = borrowed.unwrap_or_else(|| panic!("{shown}: not answered at once"));
        assert_eq!(borrowed, owned, "{shown}");
        statuses.push(owned.status);
    }
    // The cases reach every kind of answer, so agreeing means something.
    for status in [200, 304, 400, 403, 404, 405] {
        assert!(statuses.contains(&status), "no case answered {status}: {statuses:?}");
    }
}

#[tokio::test]
async fn the_history_routes_are_left_to_handle() {
    for caps in [Caps::all(), Caps::none()] {
        let h = Harness::with_caps(caps);
        for path in ["/v1/history", "/v1/history?limit=5", "/v1/history/s-1"] {
            let req = Request::get(path, Caller::OtherProcess);
            let read = req.as_read().unwrap();
            assert_eq!(h.core.answer_read(&read), None, "{path}");
        }
        // Refused before the route is asked: the refusal is at once.
        let req = Request::get("/v1/history", Caller::OtherUser);
        let (borrowed, owned) = both(&h, req).await;
        assert_eq!(borrowed.expect("a refusal is at once").status, 403);
        assert_eq!(owned.status, 403);
    }
}
