//! Serving the core over a real Unix socket, spoken to with curl.

mod common;

use std::sync::{Arc, Mutex};

use common::{ANSWER_BODY, ANSWER_PATH, TempDir, core, curl_async};
use durable_runtime::CallerCheckMode;
use durable_socket::{CallerCheck, SocketOptions, serve};
use durable_types::exchange::Caller;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_hello_over_the_socket_with_curl() {
    let dir = TempDir::new();
    let path = dir.join("run/app.sock");
    let server = serve(core().driver(), SocketOptions::builder().path(&path).build()).await.unwrap();
    assert_eq!(server.caller_check(), CallerCheckMode::On);
    let (status, body) = curl_async(&path, "GET", "/hello", None).await;
    assert_eq!(status, 200, "{body}");
    let hello: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(hello["ok"], true);
    assert_eq!(hello["callerCheck"], "on");
    server.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn caller_check_off_reaches_the_core_as_unknown_and_hello_says_off() {
    let dir = TempDir::new();
    let path = dir.join("run/app.sock");
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = seen.clone();
    let options = SocketOptions::builder()
        .path(&path)
        .caller_check(CallerCheck::Off)
        .observe_callers(move |c| record.lock().unwrap().push(c))
        .build();
    let server = serve(core().driver(), options).await.unwrap();
    assert_eq!(server.caller_check(), CallerCheckMode::Off);
    let (status, body) = curl_async(&path, "GET", "/hello", None).await;
    assert_eq!(*seen.lock().unwrap(), [Caller::Unknown]);
    assert_eq!(status, 200, "{body}");
    assert_eq!(serde_json::from_str::<serde_json::Value>(&body).unwrap()["callerCheck"], "off");
    server.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_from_the_agents_own_process_is_self_or_descendant() {
    let dir = TempDir::new();
    let path = dir.join("run/app.sock");
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = seen.clone();
    let options =
        SocketOptions::builder().path(&path).observe_callers(move |c| record.lock().unwrap().push(c)).build();
    let server = serve(core().driver(), options).await.unwrap();
    // curl is this process's child: a descendant of the agent.
    let (status, _) = curl_async(&path, "POST", ANSWER_PATH, Some(ANSWER_BODY)).await;
    assert_ne!(status, 0);
    // So is a connection made by the agent's process itself.
    let _own = tokio::net::UnixStream::connect(&path).await.unwrap();
    for _ in 0..100 {
        if seen.lock().unwrap().len() == 2 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert_eq!(*seen.lock().unwrap(), [Caller::SelfOrDescendant, Caller::SelfOrDescendant]);
    server.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_from_a_descendant_of_the_agent_is_403_caller_refused() {
    let dir = TempDir::new();
    let path = dir.join("run/app.sock");
    let server = serve(core().driver(), SocketOptions::builder().path(&path).build()).await.unwrap();
    let (status, body) = curl_async(&path, "POST", ANSWER_PATH, Some(ANSWER_BODY)).await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(serde_json::from_str::<serde_json::Value>(&body).unwrap()["code"], "caller-refused");
    server.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_over_one_mib_is_413_too_large() {
    let dir = TempDir::new();
    let path = dir.join("run/app.sock");
    let options = SocketOptions::builder().path(&path).caller_check(CallerCheck::Off).build();
    let server = serve(core().driver(), options).await.unwrap();
    let big = dir.join("big.json");
    std::fs::write(&big, vec![b' '; durable_types::BODY_MAX + 1024]).unwrap();
    let arg: &'static str = Box::leak(format!("@{}", big.display()).into_boxed_str());
    let (status, body) = curl_async(&path, "POST", ANSWER_PATH, Some(arg)).await;
    assert_eq!(status, 413, "{body}");
    assert_eq!(serde_json::from_str::<serde_json::Value>(&body).unwrap()["code"], "too-large");
    server.close().await;
}

/// The options as a transport value: `collie.serve(options)` starts the
/// server, the agent says its address and check, and `close` stops it
/// (the socket file goes) — what a program without the SDK writes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn collie_serves_socket_options_and_close_removes_the_socket() {
    let dir = TempDir::new();
    let path = dir.join("run/app.sock");
    let collie = core();
    collie.serve(SocketOptions::builder().path(&path).caller_check(CallerCheck::Off).build()).await.unwrap();
    assert_eq!(collie.address(), path.display().to_string());
    assert_eq!(collie.caller_check(), Some(CallerCheckMode::Off));
    let (status, body) = curl_async(&path, "GET", "/hello", None).await;
    assert_eq!(status, 200, "{body}");
    let hello: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(hello["callerCheck"], "off", "{hello}");
    collie.close().await;
    assert!(!path.exists(), "close removes the socket");
    assert!(collie.addresses().is_empty());
}
