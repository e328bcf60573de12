//! A refused token is a `tracing` event (`INFO`) naming the check, never the
//! token. In a test binary of its own: tracing's global level and callsite
//! caches are shared by every thread of a process, and a parallel test with
//! no subscriber can make them skip an event.

use std::fmt;
use std::sync::Arc;

use durable_http::CallerSource;
use hyper::header::{AUTHORIZATION, HeaderMap, HeaderValue};

fn headers(auth: &[&str]) -> HeaderMap {
    let mut h = HeaderMap::new();
    for a in auth {
        h.append(AUTHORIZATION, HeaderValue::from_str(a).unwrap());
    }
    h
}

/// Every event's fields, as `name=value` text.
#[derive(Clone, Default)]
struct Recorder(Arc<std::sync::Mutex<Vec<String>>>);

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Recorder {
    fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        struct Text(String);
        impl tracing::field::Visit for Text {
            fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
                self.0.push_str(&format!("{}={value} ", field.name()));
            }
            fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn fmt::Debug) {
                self.0.push_str(&format!("{}={value:?} ", field.name()));
            }
        }
        let mut text = Text(format!("{} {} ", event.metadata().level(), event.metadata().target()));
        event.record(&mut text);
        self.0.lock().unwrap().push(text.0);
    }
}

#[test]
fn a_refused_token_is_an_info_event_naming_the_check_and_never_the_token() {
    use tracing_subscriber::layer::SubscriberExt;
    let recorder = Recorder::default();
    let subscriber = tracing_subscriber::registry().with(recorder.clone());
    let source = CallerSource::bearer(|t| t == b"good-token");
    tracing::subscriber::with_default(subscriber, || {
        // A test on another thread (no subscriber) may have registered
        // these callsites as "never" at the same moment: ask again.
        tracing::callsite::rebuild_interest_cache();
        assert!(source.admit(&headers(&["Bearer bad-token"])).is_err());
        assert!(source.admit(&headers(&[])).is_err());
        assert!(source.admit(&headers(&["Bearer good-token"])).is_ok());
    });
    let events = recorder.0.lock().unwrap().clone();
    assert_eq!(events.len(), 2, "{events:?}");
    assert!(events[0].starts_with("INFO durable_http::caller "), "{events:?}");
    assert!(
        events[0].contains("check=bearer-token") && events[0].contains("reason=not accepted"),
        "{events:?}"
    );
    assert!(events[1].contains("reason=missing"), "{events:?}");
    let told = |e: &String| e.contains("bad-token") || e.contains("good-token") || e.contains("Bearer");
    assert!(!events.iter().any(told), "{events:?}");
}
