//! Rules of the contract (`docs/wire.md` §1.1) that no other test
//! checked, found by the coverage audit. Each test names its rule.

mod common;

use std::fs;
use std::path::Path;

use common::{TempDir, core, set_mode};
use durable_socket::{PrivacyRule, SocketError, SocketOptions, SocketServer, serve};

async fn serve_at(path: &Path) -> Result<SocketServer, SocketError> {
    serve(core().driver(), SocketOptions::builder().path(path).build()).await
}

/// §1.1 "Private means: … no ancestor folder is writable by group or
/// others unless it has the sticky bit": an ancestor writable by *others*
/// only (the existing test covers group-writable) is refused, naming it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn privacy_rule_an_ancestor_writable_by_others_without_the_sticky_bit_is_refused() {
    let dir = TempDir::new();
    let shared = dir.join("shared");
    fs::create_dir(&shared).unwrap();
    let path = shared.join("run/app.sock");
    for bad in [0o757, 0o703, 0o702] {
        set_mode(&shared, bad);
        match serve_at(&path).await {
            Err(e @ SocketError::NotPrivate { .. }) => {
                let text = e.to_string();
                assert!(text.starts_with("socket-not-private: "), "{text}");
                assert!(text.contains(&shared.display().to_string()), "{text}");
                let SocketError::NotPrivate { component, rule } = e else { unreachable!() };
                assert_eq!(component, shared);
                assert_eq!(rule, PrivacyRule::AncestorWritable { mode: bad });
            }
            other => panic!("mode {bad:o}: expected socket-not-private, got {other:?}"),
        }
        assert!(!shared.join("run").exists(), "mode {bad:o}: nothing created below a refused ancestor");
    }
    // Writable by others but sticky (like /tmp) is allowed.
    set_mode(&shared, 0o1757);
    let server = serve_at(&path).await.unwrap();
    server.close().await;
}
