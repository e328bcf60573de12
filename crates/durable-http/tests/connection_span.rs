//! Each connection a server takes is a `tracing` span (`connection`: its
//! transport, the peer's address, the caller its transport found — never a
//! token), and the core's request spans and events sit inside it. In a test
//! binary of its own, its subscriber this thread's default on a
//! current-thread runtime (the server's tasks run on it too).

use std::collections::BTreeMap;
use std::fmt;
use std::io;
use std::sync::{Arc, Mutex};

use durable_http::{Accepted, CallerSource, Limits, Listen, Server};
use durable_runtime::{CoreOptions, ManualClock, create_core};
use durable_types::Timestamp;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Subscriber};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;

const TOKEN: &[u8] = b"connection-span-token-0123456789abcdef";

/// An event as recorded: its message and target, and the spans around it
/// (innermost first) with their fields.
#[derive(Debug, Clone)]
struct Recorded {
    message: String,
    target: String,
    spans: Vec<(String, BTreeMap<String, String>)>,
}

impl Recorded {
    fn span_field(&self, span: &str, name: &str) -> Option<&str> {
        self.spans.iter().find(|(n, _)| n == span)?.1.get(name).map(String::as_str)
    }
}

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
            .map(|s| {
                let fields = s.extensions().get::<SpanFields>().map(|f| f.0.clone()).unwrap_or_default();
                (s.name().to_owned(), fields)
            })
            .collect();
        self.0.lock().unwrap().push(Recorded {
            message: fields.remove("message").unwrap_or_default(),
            target: event.metadata().target().to_owned(),
            spans,
        });
    }
}

/// Plain TCP on loopback, every connection's requests checked for `TOKEN`.
struct TcpListen(TcpListener);

impl Listen for TcpListen {
    type Io = TcpStream;

    async fn accept(&mut self) -> io::Result<Accepted<TcpStream>> {
        let (stream, peer) = self.0.accept().await?;
        let callers = CallerSource::bearer(|presented| presented == TOKEN);
        Ok(Accepted::new(Box::pin(async move { Ok((stream, callers)) })).peer(peer.ip()))
    }

    fn transport(&self) -> &'static str {
        "test-tcp"
    }
}

/// One request on a new connection; the status line of its answer.
async fn status_of(address: std::net::SocketAddr, token: &str) -> String {
    let mut stream = TcpStream::connect(address).await.unwrap();
    let request = format!(
        "GET /hello HTTP/1.1\r\nHost: agent\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await.unwrap();
    answer.lines().next().unwrap_or_default().to_owned()
}

#[test]
fn a_connections_span_holds_its_transport_peer_and_caller_and_the_core_speaks_inside_it() {
    let recorder = Recorder::default();
    let subscriber = tracing_subscriber::registry().with(recorder.clone());
    tracing::subscriber::with_default(subscriber, || {
        tracing::callsite::rebuild_interest_cache();
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let options = CoreOptions::builder()
                .clock(ManualClock::new(Timestamp::from_millis(1_000)))
                .epoch("0123456789abcdef")
                .build()
                .unwrap();
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let address = listener.local_addr().unwrap();
            let server = Server::start(create_core(options).driver(), TcpListen(listener), Limits::new());
            assert_eq!(status_of(address, std::str::from_utf8(TOKEN).unwrap()).await, "HTTP/1.1 200 OK");
            assert!(status_of(address, "a-wrong-token").await.starts_with("HTTP/1.1 401"));
            server.close().await;
        });
    });
    let events = recorder.0.lock().unwrap().clone();

    let answered: Vec<_> = events.iter().filter(|e| e.message == "answered").collect();
    assert_eq!(answered.len(), 1, "{events:?}");
    let e = answered[0];
    assert_eq!(e.target, "durable_core::routes");
    assert_eq!(e.span_field("request", "route"), Some("/hello"), "{e:?}");
    assert_eq!(e.span_field("connection", "transport"), Some("test-tcp"), "{e:?}");
    assert_eq!(e.span_field("connection", "peer"), Some("127.0.0.1"), "{e:?}");
    assert_eq!(e.span_field("connection", "caller"), Some("bearer-token"), "{e:?}");
    let names: Vec<&str> = e.spans.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["request", "connection"], "{e:?}");

    let refused: Vec<_> = events.iter().filter(|e| e.message == "caller refused").collect();
    assert_eq!(refused.len(), 1, "{events:?}");
    assert_eq!(refused[0].target, "durable_http::caller");
    assert_eq!(refused[0].span_field("connection", "peer"), Some("127.0.0.1"), "{refused:?}");

    let told = format!("{events:?}");
    for secret in [std::str::from_utf8(TOKEN).unwrap(), "a-wrong-token", "Bearer"] {
        assert!(!told.contains(secret), "{secret:?} in {told}");
    }
}
