//! The borrowed read path (`Driver::answer_read`): each read gets the
//! contract's answer, the very answer (status, headers, bytes) the owned
//! path (`Driver::handle`) gives, and only the history routes are left to
//! `handle`.
use durable_runtime::test_util as harness;

use durable_runtime::types::exchange::{Caller, Request};
use durable_runtime::types::{Caps, Item};
use harness::Harness;
use serde_json::{Value, json};

/// What `answer_read` gives the request, and what `handle` gives it.
async fn both(
    h: &Harness,
    req: Request,
) -> (Option<durable_runtime::types::exchange::Response>, durable_runtime::types::exchange::Response) {
    let read = req.as_read().expect("a GET reads as a borrowed read");
    let borrowed = h.core.driver().answer_read(&read);
    let owned = h.core.driver().handle(req.clone()).await;
    (borrowed, owned)
}

/// What the contract says a read gets: its status and what its body is.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Expect {
    /// `GET /hello`.
    Hello,
    /// The full state (`full: true`).
    Full,
    /// A delta (`full: false`).
    Delta,
    /// A page of a pane's events from its tail.
    Tail,
    /// A pane's snapshot (the reader is past the tail).
    Snapshot,
    /// `304`, no body.
    NotModified,
    /// An error: its status and `code`.
    Error(u16, &'static str),
}

fn check(expect: Expect, r: &durable_runtime::types::exchange::Response, shown: &str) {
    let body: Option<Value> = serde_json::from_slice(&r.body).ok();
    let field = |k: &str| body.as_ref().and_then(|b| b.get(k).cloned()).unwrap_or(Value::Null);
    match expect {
        Expect::NotModified => {
            assert_eq!(r.status, 304, "{shown}");
            assert!(r.body.is_empty(), "{shown}");
        }
        Expect::Error(status, code) => {
            assert_eq!((r.status, field("code")), (status, json!(code)), "{shown}");
            assert_eq!(field("ok"), json!(false), "{shown}");
        }
        ok => {
            assert_eq!((r.status, field("ok")), (200, json!(true)), "{shown}");
            match ok {
                Expect::Hello => assert_eq!(field("wire"), json!({"min": 1, "max": 1}), "{shown}"),
                Expect::Full => assert_eq!(field("full"), json!(true), "{shown}"),
                Expect::Delta => assert_eq!(field("full"), json!(false), "{shown}"),
                Expect::Tail => assert_eq!(field("snapshot"), json!(false), "{shown}"),
                Expect::Snapshot => assert_eq!(field("snapshot"), json!(true), "{shown}"),
                _ => unreachable!(),
            }
        }
    }
}

#[tokio::test]
async fn every_read_answered_at_once_is_the_contracts_answer_and_the_one_handle_gives() {
    use Expect::*;
    let h = Harness::new();
    let pane = h.pane();
    pane.write(Item::reply("r1", "hello").unwrap()).unwrap();
    pane.write(Item::reply("r2", "again").unwrap()).unwrap();
    let etag = h.state().await.etag.expect("a state answer has an ETag");
    let seq = h.seq().await;
    let get = |p: &str| Request::get(p, Caller::OtherProcess);

    let mut cases: Vec<(Request, Expect)> = vec![
        (get("/hello"), Hello),
        (get("/v1/state"), Full),
        (get("/v1/state?since=0"), Full),
        (get("/v1/state?since=1"), Delta),
        (get(&format!("/v1/state?since={seq}")), Delta),
        // A `since` this agent never gave: the full state (§5).
        (get("/v1/state?since=99999999"), Full),
        (get("/v1/state?since=banana"), Error(400, "bad-request")),
        (get("/v1/panes/ticket-1/events?after=0"), Tail),
        (get("/v1/panes/ticket-1/events?after=1"), Tail),
        (get("/v1/panes/ticket-1/events"), Tail),
        (get("/v1/panes/ticket-1/events?after=999999"), Snapshot),
        (get("/v1/panes/nobody/events?after=0"), Error(404, "not-found")),
        (get("/v1/panes/%FF/events?after=0"), Error(400, "bad-request")),
        (get("/v1/nothing-here"), Error(404, "not-found")),
        (get("/"), Error(404, "not-found")),
        (get(""), Error(404, "not-found")),
        (get("/v1/state/"), Error(404, "not-found")),
        (get("/v1/panes/ticket-1/send"), Error(405, "method-not-allowed")),
        (get("/v1/asks/a1"), Error(405, "method-not-allowed")),
        (get("/v1/rename"), Error(405, "method-not-allowed")),
        (get("/v1/state").with_if_none_match(&etag), NotModified),
        (get("/v1/state?since=0").with_if_none_match(&etag), NotModified),
        (get("/v1/state").with_if_none_match("\"not-the-tag\""), Full),
    ];
    for caller in [Caller::SelfOrDescendant, Caller::Unknown, Caller::Token] {
        cases.push((Request::get("/v1/state", caller), Full));
        cases.push((Request::get("/hello", caller), Hello));
        // The route and the method are told before the caller of a write.
        cases.push((Request::get("/v1/panes/ticket-1/send", caller), Error(405, "method-not-allowed")));
    }
    for path in ["/v1/state", "/hello", "/v1/panes/ticket-1/send", "/v1/nothing-here"] {
        // Another user is refused before anything about the routes is told.
        cases.push((Request::get(path, Caller::OtherUser), Error(403, "caller-refused")));
    }

    for (req, expect) in cases {
        let shown = format!("{} {:?} {:?} {:?}", req.path, req.query, req.if_none_match, req.caller);
        let (borrowed, owned) = both(&h, req).await;
        let borrowed = borrowed.unwrap_or_else(|| panic!("{shown}: not answered at once"));
        check(expect, &borrowed, &shown);
        assert_eq!(borrowed, owned, "{shown}");
        if let Expect::Error(405, _) = expect {
            assert!(borrowed.allow.is_some(), "{shown}: a 405 names what the route takes");
        }
        if matches!(expect, Full | Delta | NotModified) {
            assert_eq!(borrowed.etag.as_deref(), Some(etag.as_str()), "{shown}");
        }
    }
}

#[tokio::test]
async fn the_history_routes_are_left_to_handle() {
    for caps in [Caps::all(), Caps::none()] {
        let h = Harness::with_caps(caps);
        for path in ["/v1/history", "/v1/history?limit=5", "/v1/history/s-1"] {
            let req = Request::get(path, Caller::OtherProcess);
            let read = req.as_read().unwrap();
            assert_eq!(h.core.driver().answer_read(&read), None, "{path}");
        }
        // Refused before the route is asked: the refusal is at once.
        let req = Request::get("/v1/history", Caller::OtherUser);
        let (borrowed, owned) = both(&h, req).await;
        assert_eq!(borrowed.expect("a refusal is at once").status, 403);
        assert_eq!(owned.status, 403);
    }
}
