//! One agent served on its socket and over HTTPS at once, driven with curl
//! the way Collie would: each transport says its own caller check, the
//! driver runs the turns whichever transport the send came by, serving over
//! HTTPS turns allow-always off, and `close` ends both.
#![cfg(all(unix, feature = "socket", feature = "tls"))]

mod common;

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::TempDir;
use durable_sdk::handlers::ChatHandler;
use durable_sdk::transport::CallerCheck;
use durable_sdk::{
    AskOption, AskSpec, CoreOptions, Error, OpenOptions, PaneOptions, Transport, Turn, create_core,
    open_collie,
};

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
async fn one_agent_on_a_socket_and_over_https_keeps_each_transports_check_and_one_driver() {
    let dir = TempDir::new("two");
    let socket = dir.0.join("run/app.sock");
    // The caller check is off: curl runs as this test's child.
    let transport = Transport::socket_at(&socket).caller_check(CallerCheck::Off);
    let collie = open_collie(OpenOptions::new("two").transport(transport).warn(|_| {})).await.unwrap();
    let pane =
        collie.workspace("w", "W").unwrap().tab("t", "T").unwrap().pane("p", PaneOptions::new("P")).unwrap();
    let delivered = Arc::new(AtomicUsize::new(0));
    pane.on_send(Count(delivered.clone())).unwrap();
    collie.ready();
    assert!(collie.allow_always(), "the private socket keeps allow-always");
    collie.serve(Transport::https("127.0.0.1:0").self_signed().token(TOKEN)).await.unwrap();
    assert!(!collie.allow_always(), "serving over HTTPS turned allow-always off");
    let always = AskOption::new("always", "Allow always").always();
    let refused =
        pane.ask(AskSpec::choice("c-1", "Go?", [AskOption::new("yes", "Yes"), always])).unwrap_err();
    assert!(refused.to_string().contains("allow-always"), "{refused}");

    let addresses = collie.addresses();
    assert_eq!(addresses.len(), 2, "{addresses:?}");
    assert_eq!(collie.address(), socket.display().to_string(), "the first transport served");
    assert!(collie.fingerprint().is_some(), "the self-signed certificate's fingerprint");
    let https = addresses[1].clone();
    let hello = curl(over_socket(&socket, "/hello")).await;
    assert_eq!(hello["callerCheck"], "off");
    let bearer = format!("Authorization: Bearer {TOKEN}");
    let hello = curl(vec!["-k".into(), "-H".into(), bearer.clone(), format!("{https}/hello")]).await;
    assert_eq!(hello["callerCheck"], "token");

    // A send queued over HTTPS during a turn is delivered when the pane goes idle.
    pane.working("t-1").unwrap();
    let send = vec![
        "-k".into(),
        "-H".into(),
        bearer,
        "-H".into(),
        "Content-Type: application/json".into(),
        "-d".into(),
        r#"{"requestId":"q1","text":"later"}"#.into(),
        format!("{https}/v1/panes/p/send"),
    ];
    assert_eq!(curl(send).await["result"], "queued");
    pane.idle().unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while delivered.load(Ordering::SeqCst) == 0 {
        assert!(Instant::now() < deadline, "the queued send was never delivered");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    collie.close().await;
    assert!(!socket.exists(), "close ended the socket");
    assert!(collie.addresses().is_empty());
    let after = curl(vec!["-k".into(), "--max-time".into(), "5".into(), format!("{https}/hello")]).await;
    assert_eq!(after, serde_json::Value::Null, "close ended HTTPS: {after}");
}

/// A transport option given to the other transport is an error naming it,
/// not silently dropped.
#[tokio::test]
async fn an_option_of_the_other_transport_is_refused_by_name() {
    let collie = create_core(CoreOptions::builder().warn(|_| {})).unwrap();
    let https_with_check =
        Transport::https("127.0.0.1:0").self_signed().token(TOKEN).caller_check(CallerCheck::Off);
    let err = collie.serve(https_with_check).await.unwrap_err();
    assert!(matches!(err, Error::Misapplied { option: "caller_check", .. }), "{err}");
    assert_eq!(err.to_string(), "transport rule: caller_check is not an option of HTTPS");
    let dir = TempDir::new("misapplied");
    let socket_with_cert = Transport::socket_at(dir.0.join("app.sock")).self_signed();
    let err = collie.serve(socket_with_cert).await.unwrap_err();
    assert_eq!(err.to_string(), "transport rule: self_signed is not an option of the socket");
    assert!(collie.addresses().is_empty(), "nothing was served");
}

#[tokio::test]
async fn an_open_error_printed_with_debug_says_the_rule() {
    let options = OpenOptions::new("agent").transport(Transport::socket_at("relative/app.sock")).warn(|_| {});
    let err = open_collie(options).await.unwrap_err();
    let printed = format!("{err:?}");
    assert!(printed.contains("must be absolute"), "{printed}");
}
