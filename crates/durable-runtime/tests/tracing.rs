//! What the core tells `tracing`, under its module paths (`durable_core::…`,
//! so `RUST_LOG=durable_core=debug` finds it): asks raised and decided,
//! refused callers, Collie's hello, each request's answer — and the spans
//! an author's own events carry inside a turn (`turn`: pane, turn), a
//! request (`request`: route, pane, request id) and an ask (`ask`: pane,
//! ask id). The subscriber is this thread's default only (`with_default` on
//! a current-thread runtime), so tests running at the same time neither see
//! nor disturb it.
use durable_runtime::test_util as harness;

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex};

use durable_runtime::types::exchange::Caller;
use durable_runtime::{ChatHandler, Turn};
use serde_json::json;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;

use harness::Harness;

/// A span as an event saw it: its name and fields.
#[derive(Debug, Clone)]
struct SpanSeen {
    name: String,
    fields: BTreeMap<String, String>,
}

/// One event as recorded: its target, level, fields as text, and the spans
/// it sat in, innermost first.
#[derive(Debug, Clone)]
struct Recorded {
    target: String,
    level: Level,
    fields: BTreeMap<String, String>,
    spans: Vec<SpanSeen>,
}

impl Recorded {
    fn field(&self, name: &str) -> Option<&str> {
        self.fields.get(name).map(String::as_str)
    }

    /// A field of the innermost span named `span`.
    fn span_field(&self, span: &str, name: &str) -> Option<&str> {
        self.spans.iter().find(|s| s.name == span)?.fields.get(name).map(String::as_str)
    }

    fn span_names(&self) -> Vec<&str> {
        self.spans.iter().map(|s| s.name.as_str()).collect()
    }
}

/// A layer that keeps every event, with the fields of the spans around it.
#[derive(Clone, Default)]
struct Recorder(Arc<Mutex<Vec<Recorded>>>);

struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl Visit for Fields<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
}

/// A span's fields, kept in its extensions.
struct SpanFields(BTreeMap<String, String>);

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Recorder {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut fields = BTreeMap::new();
        attrs.record(&mut Fields(&mut fields));
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(SpanFields(fields));
        }
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(id) {
            if let Some(fields) = span.extensions_mut().get_mut::<SpanFields>() {
                values.record(&mut Fields(&mut fields.0));
            }
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let mut fields = BTreeMap::new();
        event.record(&mut Fields(&mut fields));
        let spans = ctx
            .event_scope(event)
            .into_iter()
            .flatten()
            .map(|span| SpanSeen {
                name: span.name().to_owned(),
                fields: span.extensions().get::<SpanFields>().map(|f| f.0.clone()).unwrap_or_default(),
            })
            .collect();
        let meta = event.metadata();
        self.0.lock().unwrap().push(Recorded {
            target: meta.target().to_owned(),
            level: *meta.level(),
            fields,
            spans,
        });
    }
}

impl Recorder {
    fn events(&self, message: &str) -> Vec<Recorded> {
        self.0.lock().unwrap().iter().filter(|e| e.field("message") == Some(message)).cloned().collect()
    }
}

/// Runs `test` on a current-thread runtime with `recorder` as this thread's
/// subscriber (the core's jobs are spawned on that runtime, so they run on
/// this thread too).
fn recorded<F: std::future::Future<Output = ()>>(test: impl FnOnce() -> F) -> Recorder {
    let recorder = Recorder::default();
    let subscriber = tracing_subscriber::registry().with(recorder.clone());
    tracing::subscriber::with_default(subscriber, || {
        // Another test's thread (no subscriber) may have cached these
        // callsites as "never" at the same moment: ask again.
        tracing::callsite::rebuild_interest_cache();
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        rt.block_on(test());
    });
    recorder
}

const ASK: &str = "970f8a0b30368fbbcab73013d31d2d51"; // ask_id_for("ticket-1", "call-1")

#[test]
fn an_ask_raised_and_decided_are_info_events_with_id_kind_pane_outcome_and_who() {
    let rec = recorded(|| async {
        let h = Harness::new();
        let spec = durable_runtime::approval_spec("refund", &json!({"order": "5521"}), "call-1");
        let ask = h.pane().ask(spec).unwrap();
        let hash = h.state().await.json["asks"][0]["hash"].as_str().unwrap().to_owned();
        let body = json!({"requestId": "r-1", "answer": {"optionIds": ["allow"]}, "hash": hash});
        assert_eq!(h.answer(ASK, body).await.status, 200);
        ask.decided().await.unwrap();
    });

    let raised = rec.events("ask raised");
    assert_eq!(raised.len(), 1, "{raised:?}");
    let e = &raised[0];
    assert_eq!((e.target.as_str(), e.level), ("durable_core::asks", Level::INFO));
    assert_eq!(e.field("ask_id"), Some(ASK));
    assert_eq!(e.field("kind"), Some("choice"));
    assert_eq!(e.field("pane"), Some("ticket-1"));
    // Inside the ask's own span.
    assert_eq!(e.span_field("ask", "ask_id"), Some(ASK), "{e:?}");
    assert_eq!(e.span_field("ask", "pane"), Some("ticket-1"), "{e:?}");

    let decided = rec.events("ask decided");
    assert_eq!(decided.len(), 1, "{decided:?}");
    let e = &decided[0];
    assert_eq!((e.target.as_str(), e.level), ("durable_core::asks", Level::INFO));
    assert_eq!(e.field("ask_id"), Some(ASK));
    assert_eq!(e.field("outcome"), Some("answered"));
    assert_eq!(e.field("decided_by"), Some("phone"));
    assert_eq!(e.span_field("ask", "ask_id"), Some(ASK), "{e:?}");
}

#[test]
fn a_refused_caller_is_an_info_event_naming_the_check() {
    let rec = recorded(|| async {
        let h = Harness::new();
        h.pane();
        let r =
            h.post_as("/v1/panes/ticket-1/stop", json!({"requestId": "r-1"}), Caller::SelfOrDescendant).await;
        assert_eq!(r.status, 403);
        assert_eq!(h.get_as("/v1/state", Caller::OtherUser).await.status, 403);
    });
    let refused = rec.events("caller refused");
    let checks: Vec<_> = refused.iter().map(|e| (e.level, e.field("check").unwrap_or(""))).collect();
    assert_eq!(checks, [(Level::INFO, "self-or-descendant"), (Level::INFO, "other-user")]);
    assert!(refused.iter().all(|e| e.target == "durable_core::routes"), "{refused:?}");
    // Told inside the request's span, which names the route.
    assert_eq!(refused[0].span_field("request", "route"), Some("/v1/panes/{pane}/stop"), "{refused:?}");
}

/// A chat handler that logs as an author would, with `tracing` of its own.
struct Logging;

impl ChatHandler for Logging {
    async fn turn(&self, turn: Turn) {
        tracing::info!(target: "my_agent", words = turn.text().split_whitespace().count(), "thinking");
        // And once more after an await: the span goes with the future.
        tokio::task::yield_now().await;
        tracing::info!(target: "my_agent", "replying");
        turn.reply("done");
    }
}

#[test]
fn an_authors_events_inside_a_turn_carry_the_pane_and_the_turn() {
    let rec = recorded(|| async {
        let h = Harness::new();
        h.pane().on_send(Logging).unwrap();
        let r =
            h.post("/v1/panes/ticket-1/send", json!({"requestId": "r-7", "text": "refund order 5521"})).await;
        assert_eq!(r.json["result"], "sent", "{:?}", r.json);
        h.settle().await;
    });
    for message in ["thinking", "replying"] {
        let events = rec.events(message);
        assert_eq!(events.len(), 1, "{message}: {events:?}");
        let e = &events[0];
        assert_eq!(e.target, "my_agent");
        assert_eq!(e.span_field("turn", "pane"), Some("ticket-1"), "{e:?}");
        assert_eq!(e.span_field("turn", "turn"), Some("r-7"), "{e:?}");
        // The turn outlives its request: a root of its own, not under it.
        assert_eq!(e.span_names(), ["turn"], "{e:?}");
    }
    assert_eq!(rec.events("thinking")[0].field("words"), Some("3"));
}

#[test]
fn an_ask_raised_in_a_turn_sits_under_the_turn_and_an_authors_wait_can_join_it() {
    struct Asking;
    impl ChatHandler for Asking {
        async fn turn(&self, turn: Turn) {
            let spec = durable_runtime::approval_spec("refund", &json!({"order": "5521"}), "call-1");
            let ask = turn.pane().ask(spec).unwrap();
            let span = ask.span().clone();
            let _entered = span.enter();
            tracing::info!(target: "my_agent", "waiting for the card");
        }
    }
    let rec = recorded(|| async {
        let h = Harness::new();
        h.pane().on_send(Asking).unwrap();
        let r = h.post("/v1/panes/ticket-1/send", json!({"requestId": "r-8", "text": "refund"})).await;
        assert_eq!(r.json["result"], "sent", "{:?}", r.json);
        h.settle().await;
    });
    let raised = rec.events("ask raised");
    assert_eq!(raised.len(), 1, "{raised:?}");
    assert_eq!(raised[0].span_names(), ["ask", "turn"], "{raised:?}");
    assert_eq!(raised[0].span_field("turn", "turn"), Some("r-8"));
    let waiting = rec.events("waiting for the card");
    assert_eq!(waiting.len(), 1, "{waiting:?}");
    assert_eq!(waiting[0].span_field("ask", "ask_id"), Some(ASK), "{waiting:?}");
    assert_eq!(waiting[0].span_field("ask", "pane"), Some("ticket-1"), "{waiting:?}");
    assert_eq!(waiting[0].span_field("turn", "pane"), Some("ticket-1"), "{waiting:?}");
}

#[test]
fn a_request_is_a_span_with_its_route_pane_and_request_id_and_a_debug_event_with_its_status() {
    let rec = recorded(|| async {
        let h = Harness::new();
        h.pane()
            .on_action(|_req: durable_runtime::ActionRequest| async move {
                tracing::info!(target: "my_agent", "refund pressed");
                Ok(())
            })
            .unwrap();
        h.pane().action("refund", "Refund", None).unwrap();
        let r = h.post("/v1/panes/ticket-1/actions/refund", json!({"requestId": "r-9"})).await;
        assert_eq!(r.status, 200, "{:?}", r.json);
        let state = h.state().await;
        let etag = state.etag.unwrap();
        // The poll as Collie sends it: answered at once, from a borrowed read.
        let read = durable_runtime::types::exchange::Read {
            path: "/v1/state",
            query: None,
            if_none_match: Some(&etag),
            caller: Caller::OtherProcess,
        };
        assert_eq!(h.core.driver().answer_read(&read).unwrap().status, 304);
    });

    let pressed = rec.events("refund pressed");
    assert_eq!(pressed.len(), 1, "{pressed:?}");
    let e = &pressed[0];
    assert_eq!(e.span_field("request", "route"), Some("/v1/panes/{pane}/actions/{action}"), "{e:?}");
    assert_eq!(e.span_field("request", "pane"), Some("ticket-1"), "{e:?}");
    assert_eq!(e.span_field("request", "request_id"), Some("r-9"), "{e:?}");
    assert_eq!(e.span_field("request", "method"), Some("POST"), "{e:?}");

    let answered = rec.events("answered");
    let seen: Vec<_> = answered
        .iter()
        .map(|e| {
            (e.target.as_str(), e.level, e.field("status").unwrap_or(""), e.span_field("request", "route"))
        })
        .collect();
    assert_eq!(
        seen,
        [
            ("durable_core::routes", Level::DEBUG, "200", Some("/v1/panes/{pane}/actions/{action}")),
            ("durable_core::routes", Level::DEBUG, "200", Some("/v1/state")),
            ("durable_core::routes", Level::DEBUG, "304", Some("/v1/state")),
        ]
    );
    // Nothing of a body in a span: the action's body is its request id only,
    // and the span names it as a field, never as the body's text.
    let told = format!("{:?}", rec.0.lock().unwrap());
    assert!(!told.contains("requestId"), "{told}");
}

#[test]
fn collies_hello_is_an_info_event_once_per_collie_version() {
    let rec = recorded(|| async {
        let h = Harness::new();
        for version in ["1.22.0", "1.22.0", "1.23.0"] {
            let body = json!({"collie": {"version": version}, "wire": {"min": 1, "max": 1}});
            assert_eq!(h.post("/hello", body).await.status, 200);
        }
        let old = json!({"collie": {"version": "0.9.0\nforged line"}, "wire": {"min": 2, "max": 3}});
        assert_eq!(h.post("/hello", old).await.json["compatible"], false);
    });
    let hellos = rec.events("Collie said hello");
    let seen: Vec<_> = hellos
        .iter()
        .map(|e| {
            assert_eq!((e.target.as_str(), e.level), ("durable_core::poll", Level::INFO));
            (
                e.field("collie_version").unwrap_or(""),
                e.field("collie_wire").unwrap_or(""),
                e.field("compatible"),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            ("1.22.0", "v1", Some("true")),
            ("1.23.0", "v1", Some("true")),
            // One line whatever the network sent.
            ("0.9.0forged line", "v2..3", Some("false")),
        ]
    );
}
