//! The desk as a user without privileges (`nobody` when the tests run as
//! root): it starts, makes its folders private, serves a send, and takes
//! a refund through its card — as root it would prove nothing about users.

mod desk_support;

use desk_support::{Desk, TestDir, unprivileged};
use serde_json::json;

#[test]
fn the_desk_runs_as_an_unprivileged_user() {
    let user = unprivileged();
    let dir = TestDir::new("nobody");
    let desk = Desk::start_as(&dir, user, &["--turn-ms", "50"]);
    let (status, r) = desk.send("ticket-1", "r-1", "hello");
    assert_eq!((status, r["result"].clone()), (200, json!("sent")), "{r}");
    desk.wait_text("ticket-1", "Got it: hello");
    let (status, r) = desk.post("/v1/panes/ticket-1/actions/refund", json!({"requestId": "b-1"}));
    assert_eq!(status, 200, "{r}");
    let ask = desk.wait_ask("ticket-1");
    let (status, r) = desk.answer(&ask, "a-1", json!({"optionIds": ["allow"]}));
    assert_eq!(status, 200, "{r}");

    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let data = std::fs::metadata(dir.data()).unwrap();
    let uid = user.unwrap_or_else(|| nix::unistd::geteuid().as_raw());
    assert_eq!(
        (data.uid(), data.permissions().mode() & 0o777),
        (uid, 0o700),
        "the data folder is the user's alone"
    );
    let socket_dir = std::fs::metadata(std::path::Path::new(&dir.socket()).parent().unwrap()).unwrap();
    assert_eq!(socket_dir.uid(), uid);
}
