//! How long an agent's transports serve: until `close`, or until the last
//! `Collie` the program holds is dropped — not while the handles the SDK
//! keeps (a pane's handler, a server's own driver) live on. And a
//! transport of the program's own, whose answers call back into the agent,
//! is asked about itself without a deadlock.
#![cfg(all(unix, feature = "socket"))]

mod common;

use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

use common::TempDir;
use durable_sdk::driver::{CallerCheckMode, Driver, Serve, Served};
use durable_sdk::{OpenOptions, PaneOptions, Transport, Turn, open_collie};

/// Waits (up to 10 s) until `done` holds; false if it never did.
async fn eventually(mut done: impl FnMut() -> bool) -> bool {
    let until = Instant::now() + Duration::from_secs(10);
    while Instant::now() < until {
        if done() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    done()
}

fn serves(socket: &Path) -> bool {
    UnixStream::connect(socket).is_ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_program_s_last_collie_stops_serving_though_its_panes_live_on() {
    let dir = TempDir::new("lifetime");
    let socket = dir.0.join("run/app.sock");
    let collie =
        open_collie(OpenOptions::new("lifetime").transport(Transport::socket_at(&socket)).warn(|_| {}))
            .await
            .unwrap();
    let pane =
        collie.workspace("w", "W").unwrap().tab("t", "T").unwrap().pane("p", PaneOptions::new("P")).unwrap();
    // The handler holds a pane (and so the agent's state) for as long as
    // the agent lives: the usual shape of a program.
    let held = pane.clone();
    pane.on_send(move |turn: Turn| {
        let _pane = held.clone();
        async move { turn.reply("ok") }
    })
    .unwrap();
    collie.ready();
    assert!(serves(&socket));

    // A clone the program keeps keeps it serving; a pane's handle does not.
    let clone = collie.clone();
    let through_pane = pane.collie().clone();
    drop(collie);
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(serves(&socket), "a clone of the program's Collie still serves");
    drop(clone);
    assert!(eventually(|| !socket.exists() && !serves(&socket)).await, "still serving after the last Collie");
    // The handles the program kept still work on the agent's state.
    assert_eq!(through_pane.pane("p").map(|p| p.id().to_owned()), Some("p".to_owned()));
}

/// A transport of the program's own whose `address` asks the agent.
struct Curious;
struct CuriousServer(Driver);

impl Serve for Curious {
    type Error = std::convert::Infallible;

    async fn serve(self, driver: Driver) -> Result<Box<dyn Served>, Self::Error> {
        Ok(Box::new(CuriousServer(driver)))
    }
}

impl Served for CuriousServer {
    fn address(&self) -> String {
        // Calls back into the agent: its Debug lists the addresses served.
        format!("curious for {:?}", self.0.collie().options().host_name())
    }

    fn fingerprint(&self) -> Option<String> {
        Some(format!("{:?}", self.0.collie()))
    }

    fn caller_check(&self) -> CallerCheckMode {
        CallerCheckMode::Token
    }

    fn close(self: Box<Self>) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> {
        Box::pin(async move { drop(self.0.collie().addresses()) })
    }
}

/// What the agent says of its transports after serving [`Curious`] (or
/// after closing), asked on a thread of its own: a deadlock there fails
/// the test at the timeout instead of hanging it (a runtime's shutdown
/// would wait for a blocked task of its own).
type Asked = (String, Option<String>, Option<CallerCheckMode>, String);

fn on_a_thread(collie: durable_sdk::Collie, close: bool) -> Asked {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
        let asked = runtime.block_on(async move {
            if close {
                collie.close().await;
            } else {
                collie.serve(Curious).await.unwrap();
            }
            (collie.address(), collie.fingerprint(), collie.caller_check(), format!("{collie:?}"))
        });
        let _ = tx.send(asked);
    });
    rx.recv_timeout(Duration::from_secs(10))
        .expect("a transport that asks the agent about itself deadlocked it")
}

#[test]
fn a_transport_that_calls_back_into_the_agent_is_served_and_closed_without_a_deadlock() {
    let collie = durable_sdk::create_core(durable_sdk::CoreOptions::builder().host_name("curious")).unwrap();
    let asked = on_a_thread(collie.clone(), false);
    assert_eq!(asked.0, "curious for \"curious\"");
    assert!(asked.1.is_some_and(|f| f.contains("Collie")));
    assert_eq!(asked.2, Some(CallerCheckMode::Token));
    assert!(asked.3.contains("curious for"), "{}", asked.3);
    let closed = on_a_thread(collie.clone(), true);
    assert_eq!(closed.0, "", "nothing served after close");
    assert!(collie.addresses().is_empty());
}
