//! `durable-agent acp` as a user without privileges (`nobody` when
//! the tests run as root; else this user, unprivileged already): it starts,
//! keeps its data folder private, and pi-acp and Pi run as that user: a
//! streamed reply, then a `bash` call through its card. Needs `cargo xtask
//! install-pi`; never skips.
#![cfg(feature = "acp")]

mod acp;

use std::os::unix::fs::{MetadataExt, PermissionsExt};

use acp::{Acp, Start, scratch, unprivileged};
use serde_json::json;

/// The real user id in `/proc/<pid>/status`.
fn uid_of(pid: u32) -> Option<u32> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("Uid:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

#[test]
fn the_example_and_its_agent_run_as_an_unprivileged_user() {
    let user = unprivileged();
    let uid = user.unwrap_or_else(|| nix::unistd::geteuid().as_raw());
    let dir = scratch("nobody");
    let agent = Acp::start_with(&dir, Start { user, ..Start::default() });
    let pane = agent.new_conversation("st-1", "hello");
    agent.wait_text(&pane, "reply", "You said: hello");
    agent.idle(&pane);
    agent.send(&pane, "r-1", "use bash: id -u");
    let ask = agent.open_ask();
    let (status, r) = agent.answer(&ask, "a-1", "choice-0");
    assert_eq!((status, r["result"].clone()), (200, json!("answered")), "{r}");
    let tool = agent.finished_tool(&pane, "id -u");
    assert_eq!((tool["status"].clone(), tool["output"].clone()), (json!("ok"), json!(format!("{uid}\n"))));
    agent.idle(&pane);

    let agents = agent.agents();
    assert_eq!(agents.len(), 1, "{agents:?}");
    for pid in acp::descendants(agents[0]).into_iter().chain(agents) {
        assert_eq!(uid_of(pid), Some(uid), "{pid} ({}) runs as the user", acp::cmdline(pid));
    }
    let data = std::fs::metadata(dir.join("data")).unwrap();
    assert_eq!(
        (data.uid(), data.permissions().mode() & 0o777),
        (uid, 0o700),
        "the data folder is the user's alone"
    );
    let socket_dir = std::fs::metadata(dir.join("sock")).unwrap();
    assert_eq!((socket_dir.uid(), socket_dir.permissions().mode() & 0o777), (uid, 0o700));
}
