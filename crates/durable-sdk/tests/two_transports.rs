//! One agent served on its socket and over HTTPS at once, driven with curl
//! the way Collie would: each transport says its own caller check, and
//! closing the HTTPS server leaves the socket's driver running.
#![cfg(all(unix, feature = "tls"))]

mod common;

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::TempDir;
use durable_sdk::socket::CallerCheck;
use durable_sdk::tls::TlsOptions;
use durable_sdk::{ChatHandler, OpenOptions, PaneOptions, Turn, open_collie, serve};

const TOKEN: &str = "0123456789abcdef0123456789abcdef-two";

/// `curl` in a blocking thread: the agent runs on this test's runtime.
async fn curl(args: Vec<String>) -> serde_json::Value {
    let out =
        tokio::task::spawn_blocking(move || Command::new("curl").arg("-sS").args(args).output().unwrap())
            .await
            .unwrap();
    serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null)
}

fn over_socket(socket: &Path, path: &str) -> Vec<String> {
    vec!["--unix-socket".into(), socket.display().to_string(), format!("http://agent{path}")]
}

/// Counts the turns that ran (on the driver: nobody else runs them).
struct Count(Arc<AtomicUsize>);

impl ChatHandler for Count {
    async fn turn(&self, _turn: Turn) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_core_on_a_socket_and_over_https_keeps_each_transports_check_and_driver() {
    let dir = TempDir::new("two");
    let socket = dir.0.join("run/app.sock");
    // The caller check is off: curl runs as this test's child.
    let options = OpenOptions::builder().socket(&socket).caller_check(CallerCheck::Off).warn(|_| {});
    let collie = open_collie(options).await.unwrap();
    let pane =
        collie.workspace("w", "W").unwrap().tab("t", "T").unwrap().pane("p", PaneOptions::new("P")).unwrap();
    let delivered = Arc::new(AtomicUsize::new(0));
    pane.on_send(Count(delivered.clone())).unwrap();
    collie.ready();
    // open_collie's core offers allow-always (the socket is private): HTTPS must say it accepts that.
    let https = TlsOptions::builder().listen("127.0.0.1:0").self_signed().token(TOKEN).allow_always(true);
    let tls = serve(collie.core(), https.build().unwrap()).await.unwrap();

    let hello = curl(over_socket(&socket, "/hello")).await;
    assert_eq!(hello["callerCheck"], "off");
    let bearer = format!("Authorization: Bearer {TOKEN}");
    let hello = curl(vec!["-k".into(), "-H".into(), bearer, format!("{}/hello", tls.address())]).await;
    assert_eq!(hello["callerCheck"], "token");

    // Closing the HTTPS server leaves the socket's driver: a send queued
    // during a turn is still delivered when the pane goes idle.
    tls.close().await;
    pane.working("t-1").unwrap();
    let mut send = over_socket(&socket, "/v1/panes/p/send");
    send.extend(["-H".into(), "Content-Type: application/json".into()]);
    send.extend(["-d".into(), r#"{"requestId":"q1","text":"later"}"#.into()]);
    assert_eq!(curl(send).await["result"], "queued");
    pane.idle().unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while delivered.load(Ordering::SeqCst) == 0 {
        assert!(Instant::now() < deadline, "the queued send was never delivered");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    collie.close().await;
}

#[tokio::test]
async fn an_open_error_printed_with_debug_says_the_rule() {
    let err = open_collie(OpenOptions::builder().socket("relative/app.sock").warn(|_| {})).await.unwrap_err();
    let printed = format!("{err:?}");
    assert!(printed.contains("must be absolute"), "{printed}");
}
