//! The socket path's rules (contract §1.1), checked against real folders and
//! sockets: each refusal, the created modes, stale and live sockets, close.

mod common;

use std::fs;
use std::os::unix::fs::{MetadataExt, symlink};
use std::path::Path;

use common::{Need, TempDir, core, curl_async, mode, needs, set_mode};
use durable_socket::{PrivacyRule, SocketError, SocketOptions, SocketServer, serve};

async fn serve_at(path: &Path) -> Result<SocketServer, SocketError> {
    serve(core().driver(), SocketOptions::builder().path(path).build()).await
}

fn expect_not_private(result: Result<SocketServer, SocketError>, component: &Path) -> PrivacyRule {
    match result {
        Err(e @ SocketError::NotPrivate { .. }) => {
            let text = e.to_string();
            assert!(text.starts_with("socket-not-private: "), "{text}");
            assert!(text.contains(&component.display().to_string()), "{text}");
            let SocketError::NotPrivate { component: c, rule } = e else { unreachable!() };
            assert_eq!(c, component);
            rule
        }
        other => panic!("expected socket-not-private on {component:?}, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relative_socket_path_is_refused() {
    let e = serve_at(Path::new("run/app.sock")).await.unwrap_err();
    assert!(matches!(e, SocketError::NotAbsolute { .. }), "{e:?}");
    assert!(e.to_string().contains("must be absolute"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_socket_path_over_103_bytes_is_refused() {
    let dir = TempDir::new();
    let long = dir.path().join("x".repeat(103 - dir.path().as_os_str().len()));
    assert_eq!(long.as_os_str().len(), 104);
    let e = serve_at(&long).await.unwrap_err();
    assert!(matches!(e, SocketError::TooLong { len: 104, .. }), "{e:?}");
    assert!(e.to_string().contains("at most 103"), "{e}");
    assert!(!long.exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_folder_with_group_or_other_bits_is_refused() {
    let dir = TempDir::new();
    let folder = dir.join("run");
    fs::create_dir(&folder).unwrap();
    for bad in [0o750, 0o705, 0o770] {
        set_mode(&folder, bad);
        let rule = expect_not_private(serve_at(&folder.join("app.sock")).await, &folder);
        assert_eq!(rule, PrivacyRule::FolderMode { mode: bad });
        assert!(rule.to_string().contains("0700"), "{rule}");
    }
    assert!(!folder.join("app.sock").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_symbolic_link_in_the_path_is_refused() {
    let dir = TempDir::new();
    let real = dir.join("real");
    fs::create_dir(&real).unwrap();
    set_mode(&real, 0o700);
    let link = dir.join("link");
    symlink(&real, &link).unwrap();
    // The link as the socket's folder, and as an ancestor of it.
    assert_eq!(expect_not_private(serve_at(&link.join("app.sock")).await, &link), PrivacyRule::SymbolicLink);
    assert_eq!(
        expect_not_private(serve_at(&link.join("run/app.sock")).await, &link),
        PrivacyRule::SymbolicLink
    );
    assert!(!real.join("run").exists(), "nothing created through the link");
    // The socket path itself a link.
    let target = dir.join("real/other.sock");
    let at = real.join("app.sock");
    symlink(&target, &at).unwrap();
    assert_eq!(expect_not_private(serve_at(&at).await, &at), PrivacyRule::SymbolicLink);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_writable_ancestor_without_the_sticky_bit_is_refused() {
    let dir = TempDir::new();
    let shared = dir.join("shared");
    fs::create_dir(&shared).unwrap();
    set_mode(&shared, 0o770);
    let path = shared.join("run/app.sock");
    let rule = expect_not_private(serve_at(&path).await, &shared);
    assert_eq!(rule, PrivacyRule::AncestorWritable { mode: 0o770 });
    assert!(rule.to_string().contains("sticky"), "{rule}");
    assert!(!shared.join("run").exists(), "nothing created below a refused ancestor");

    // The same folder with the sticky bit (like /tmp) is allowed.
    set_mode(&shared, 0o1777);
    let server = serve_at(&path).await.unwrap();
    server.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_socket_is_refused_as_already_in_use() {
    let dir = TempDir::new();
    let path = dir.join("run/app.sock");
    let first = serve_at(&path).await.unwrap();
    let ino = fs::metadata(&path).unwrap().ino();
    let e = serve_at(&path).await.unwrap_err();
    assert!(matches!(e, SocketError::InUse { .. }), "{e:?}");
    assert!(e.to_string().contains("already in use"), "{e}");
    // The live socket is untouched and still answers.
    assert_eq!(fs::metadata(&path).unwrap().ino(), ino);
    let (status, _) = curl_async(&path, "GET", "/hello", None).await;
    assert_ne!(status, 0, "the first server still answers");
    first.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_missing_folders_are_created_0700_and_the_socket_is_0600() {
    let dir = TempDir::new();
    let path = dir.join("a/b/app.sock");
    let server = serve_at(&path).await.unwrap();
    assert_eq!(mode(&dir.join("a")), 0o700);
    assert_eq!(mode(&dir.join("a/b")), 0o700);
    assert_eq!(mode(&path), 0o600);
    assert!(fs::symlink_metadata(&path).unwrap().file_type().is_socket_like());
    assert_eq!(server.address(), path);
    server.close().await;
}

trait IsSocket {
    fn is_socket_like(&self) -> bool;
}

impl IsSocket for fs::FileType {
    fn is_socket_like(&self) -> bool {
        std::os::unix::fs::FileTypeExt::is_socket(self)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_socket_is_replaced() {
    let dir = TempDir::new();
    let folder = dir.join("run");
    fs::create_dir(&folder).unwrap();
    set_mode(&folder, 0o700);
    let path = folder.join("app.sock");
    stale_socket_at(&path);
    let server = serve_at(&path).await.unwrap();
    assert!(std::os::unix::net::UnixStream::connect(&path).is_ok(), "a live socket replaced the stale one");
    assert_eq!(mode(&path), 0o600);
    assert_eq!(mode(&folder.join("app.sock.lock")), 0o600, "the start-up lock beside it is private");
    let (status, _) = curl_async(&path, "GET", "/hello", None).await;
    assert_ne!(status, 0, "the new socket answers");
    server.close().await;
}

/// A socket left by a crash: bound, never accepted on, listener gone.
fn stale_socket_at(path: &Path) {
    drop(std::os::unix::net::UnixListener::bind(path).unwrap());
    let refused = std::os::unix::net::UnixStream::connect(path).unwrap_err();
    assert_eq!(refused.kind(), std::io::ErrorKind::ConnectionRefused);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_agents_starting_at_once_on_one_stale_socket_leave_one_serving() {
    let dir = TempDir::new();
    let folder = dir.join("run");
    fs::create_dir(&folder).unwrap();
    set_mode(&folder, 0o700);
    let path = folder.join("app.sock");
    let handle = tokio::runtime::Handle::current();
    // Without the lock, both find the socket stale, and the second removes
    // the socket the first just bound: two agents "serving", one reachable.
    for round in 0..40 {
        stale_socket_at(&path);
        let barrier = std::sync::Arc::new(std::sync::Barrier::new(2));
        let start = |barrier: std::sync::Arc<std::sync::Barrier>| {
            let (handle, path) = (handle.clone(), path.clone());
            tokio::task::spawn_blocking(move || {
                barrier.wait();
                handle.block_on(serve_at(&path))
            })
        };
        let (a, b) = (start(barrier.clone()), start(barrier));
        let (a, b) = (a.await.unwrap(), b.await.unwrap());
        let (server, refused) = match (a, b) {
            (Ok(server), Err(e)) | (Err(e), Ok(server)) => (server, e),
            (Ok(_), Ok(_)) => panic!("round {round}: both agents started on one socket path"),
            (Err(a), Err(b)) => panic!("round {round}: neither started: {a}; {b}"),
        };
        assert!(matches!(refused, SocketError::InUse { .. }), "round {round}: {refused:?}");
        assert!(refused.to_string().contains("already in use"), "{refused}");
        let (status, _) = curl_async(&path, "GET", "/hello", None).await;
        assert_eq!(status, 200, "round {round}: the agent that started answers on the path");
        server.close().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_holding_the_start_up_lock_keeps_the_stale_socket_from_others() {
    use nix::fcntl::{Flock, FlockArg};
    let dir = TempDir::new();
    let folder = dir.join("run");
    fs::create_dir(&folder).unwrap();
    set_mode(&folder, 0o700);
    let path = folder.join("app.sock");
    stale_socket_at(&path);
    let lock_file = fs::File::create(folder.join("app.sock.lock")).unwrap();
    let held = Flock::lock(lock_file, FlockArg::LockExclusiveNonblock).unwrap();
    let e = serve_at(&path).await.unwrap_err();
    assert!(matches!(e, SocketError::InUse { .. }), "{e:?}");
    assert!(fs::symlink_metadata(&path).is_ok(), "the other agent's path is left alone");
    // Released (the other agent exited): the stale socket is replaced.
    drop(held);
    let server = serve_at(&path).await.unwrap();
    server.close().await;
    assert!(folder.join("app.sock.lock").exists(), "the lock file stays: removing it would race");
    serve_at(&path).await.unwrap().close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn something_that_is_not_a_socket_is_left_alone() {
    let dir = TempDir::new();
    let path = dir.join("app.sock");
    fs::write(&path, "keep me").unwrap();
    let e = serve_at(&path).await.unwrap_err();
    assert!(matches!(e, SocketError::NotASocket { .. }), "{e:?}");
    assert_eq!(fs::read_to_string(&path).unwrap(), "keep me");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_stops_accepting_and_removes_the_socket_file() {
    let dir = TempDir::new();
    let path = dir.join("run/app.sock");
    let server = serve_at(&path).await.unwrap();
    server.close().await;
    assert!(!path.exists());
    assert!(std::os::unix::net::UnixStream::connect(&path).is_err());
    // The folder stays, private; serving again works.
    assert_eq!(mode(&dir.join("run")), 0o700);
    serve_at(&path).await.unwrap().close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_folder_owned_by_another_user_is_refused() {
    if !needs(Need::Root, "a_folder_owned_by_another_user_is_refused") {
        return;
    }
    let dir = TempDir::new();
    let folder = dir.join("run");
    fs::create_dir(&folder).unwrap();
    set_mode(&folder, 0o700);
    std::os::unix::fs::chown(&folder, Some(65534), Some(65534)).unwrap();
    let rule = expect_not_private(serve_at(&folder.join("app.sock")).await, &folder);
    assert_eq!(rule, PrivacyRule::FolderOwner { owner: 65534, user: 0 });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_socket_owned_by_another_user_is_refused() {
    if !needs(Need::Root, "a_socket_owned_by_another_user_is_refused") {
        return;
    }
    let dir = TempDir::new();
    let path = dir.join("app.sock");
    drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
    std::os::unix::fs::chown(&path, Some(65534), Some(65534)).unwrap();
    let rule = expect_not_private(serve_at(&path).await, &path);
    assert_eq!(rule, PrivacyRule::SocketOwner { owner: 65534, user: 0 });
    assert!(path.exists(), "another user's socket is not removed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ancestor_owned_by_another_user_is_refused() {
    if !needs(Need::Root, "an_ancestor_owned_by_another_user_is_refused") {
        return;
    }
    // The other user cannot write in it by its mode (0755), but as its owner
    // it can rename what is inside: the socket's folder could be swapped.
    let dir = TempDir::new();
    let theirs = dir.join("theirs");
    fs::create_dir(&theirs).unwrap();
    set_mode(&theirs, 0o755);
    std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).unwrap();
    let path = theirs.join("run/app.sock");
    let rule = expect_not_private(serve_at(&path).await, &theirs);
    assert_eq!(rule, PrivacyRule::AncestorOwner { owner: 65534, user: 0 });
    let text = rule.to_string();
    assert!(text.contains("owned by root or by the current user") && text.contains("65534"), "{text}");
    assert!(!theirs.join("run").exists(), "nothing created below a refused ancestor");
    // Given back to root it is fine (root owns /, /tmp…).
    std::os::unix::fs::chown(&theirs, Some(0), Some(0)).unwrap();
    serve_at(&path).await.unwrap().close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_socket_path_with_a_control_character_is_refused() {
    let dir = TempDir::new();
    let path = dir.join("run\n/app.sock");
    let e = serve_at(&path).await.unwrap_err();
    assert!(matches!(e, SocketError::ControlCharacter { .. }), "{e:?}");
    let text = e.to_string();
    assert!(text.starts_with("socket path rule: the path must hold no control character"), "{text}");
    assert!(!text.contains('\n'), "the message is one line: {text:?}");
    assert!(!dir.join("run\n").exists(), "nothing created");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_socket_path_ending_in_a_slash_is_not_a_file_path() {
    let dir = TempDir::new();
    for end in ["/", "/."] {
        let path = std::path::PathBuf::from(format!("{}{end}", dir.join("run/app.sock").display()));
        let e = serve_at(&path).await.unwrap_err();
        assert!(matches!(e, SocketError::NotAFilePath { .. }), "{path:?}: {e:?}");
        assert!(e.to_string().contains("no trailing `/`"), "{e}");
    }
    assert!(!dir.join("run").exists(), "nothing created");
}
