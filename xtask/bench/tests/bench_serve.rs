//! The bench's agent with `--asks`, driven with curl as Collie answers a
//! card: every answer to the next ask of a slot is `200 answered`, the
//! slot keeps four asks open whatever was answered, and an ask the agent
//! has not raised yet holds the answer instead (so the bench's round trips
//! measure real asks, not refusals).

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use common::{Folder, Served, curl};
use durable_sdk::ask_id_for;

fn answer(socket: &str, call_id: &str, request_id: &str, hash: &str) -> serde_json::Value {
    let body = format!(r#"{{"requestId":"{request_id}","answer":{{"optionIds":["yes"]}},"hash":"{hash}"}}"#);
    curl(socket, &format!("/v1/asks/{}", ask_id_for("p0", call_id)), Some(&body))
}

#[test]
fn the_bench_agent_raises_the_next_ask_as_each_is_answered() {
    let dir = Folder::new("asks");
    let socket = dir.0.join("s").join("app.sock").to_str().expect("a UTF-8 path").to_owned();
    let mut child = Command::new(env!("CARGO_BIN_EXE_xtask-bench"))
        .args(["bench-serve", "--kind", "agent", "--panes", "1", "--asks", "1", "--socket", &socket])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("xtask-bench bench-serve starts");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let served = Served(child);
    let mut next = || lines.next().expect("a line").expect("stdout");
    assert_eq!(next(), format!("listening {socket}"));
    assert!(next().starts_with("seq "));
    let hash = next().strip_prefix("hash ").expect("a `hash` line").to_owned();
    assert!(durable_sdk::asks::is_hash(&hash), "{hash}");

    for n in 0..10 {
        let a = answer(&socket, &format!("t0-{n}"), &format!("r0-{n}"), &hash);
        assert_eq!(a["result"], "answered", "answer {n}: {a}");
        assert_eq!(a["askId"], ask_id_for("p0", &format!("t0-{n}")));
    }
    // Four open again: t0-10 … t0-13 (the last raised once t0-9 resolved).
    let mut open = Vec::new();
    for _ in 0..100 {
        let state = curl(&socket, "/v1/state", None);
        open = state["asks"].as_array().unwrap().iter().map(|a| a["toolCallId"].clone()).collect();
        if open.len() == 4 && open.contains(&"t0-13".into()) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let want: Vec<serde_json::Value> = (10..14).map(|n| format!("t0-{n}").into()).collect();
    assert_eq!(open, want);
    // An ask not raised yet: the answer is held, not answered.
    let early = answer(&socket, "t0-20", "r0-20", &hash);
    assert_eq!(early["result"], "held", "{early}");
    drop(served);
}
