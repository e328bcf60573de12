//! What the core tells `tracing` (target `durable`): asks raised and
//! decided, refused callers. The subscriber is this thread's default only
//! (`with_default` on a current-thread runtime), so tests running at the
//! same time neither see nor disturb it.
mod harness;

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex};

use durable_core::types::exchange::Caller;
use serde_json::json;
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};

use harness::Harness;

/// One event as recorded: its target, level and fields as text.
#[derive(Debug, Clone)]
struct Recorded {
    target: String,
    level: Level,
    fields: BTreeMap<String, String>,
}

impl Recorded {
    fn field(&self, name: &str) -> Option<&str> {
        self.fields.get(name).map(String::as_str)
    }
}

/// A layer that keeps every event.
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

impl<S: Subscriber> Layer<S> for Recorder {
    fn on_event(&self, event: &Event<'_>, _: Context<'_, S>) {
        let mut fields = BTreeMap::new();
        event.record(&mut Fields(&mut fields));
        let meta = event.metadata();
        self.0.lock().unwrap().push(Recorded {
            target: meta.target().to_owned(),
            level: *meta.level(),
            fields,
        });
    }
}

impl Recorder {
    fn events(&self, message: &str) -> Vec<Recorded> {
        self.0.lock().unwrap().iter().filter(|e| e.field("message") == Some(message)).cloned().collect()
    }
}

/// Runs `test` on a current-thread runtime with `recorder` as this thread's
/// subscriber.
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
        let spec = durable_core::approval_spec("refund", &json!({"order": "5521"}), "call-1");
        let ask = h.pane().ask(spec).unwrap();
        let hash = h.state().await.json["asks"][0]["hash"].as_str().unwrap().to_owned();
        let body = json!({"requestId": "r-1", "answer": {"optionIds": ["allow"]}, "hash": hash});
        assert_eq!(h.answer(ASK, body).await.status, 200);
        ask.decided().await.unwrap();
    });

    let raised = rec.events("ask raised");
    assert_eq!(raised.len(), 1, "{raised:?}");
    let e = &raised[0];
    assert_eq!((e.target.as_str(), e.level), ("durable", Level::INFO));
    assert_eq!(e.field("ask_id"), Some(ASK));
    assert_eq!(e.field("kind"), Some("choice"));
    assert_eq!(e.field("pane"), Some("ticket-1"));

    let decided = rec.events("ask decided");
    assert_eq!(decided.len(), 1, "{decided:?}");
    let e = &decided[0];
    assert_eq!((e.target.as_str(), e.level), ("durable", Level::INFO));
    assert_eq!(e.field("ask_id"), Some(ASK));
    assert_eq!(e.field("outcome"), Some("answered"));
    assert_eq!(e.field("decided_by"), Some("phone"));
}

#[test]
fn a_refused_caller_is_a_warning_naming_the_check() {
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
    assert_eq!(checks, [(Level::WARN, "self-or-descendant"), (Level::WARN, "other-user")]);
    assert!(refused.iter().all(|e| e.target == "durable"));
}
