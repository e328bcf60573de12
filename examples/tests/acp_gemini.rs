//! Gemini CLI on the phone, out of the box: `durable-agent acp -- gemini
//! --acp` (0.61.0, run by the node 22 of `cargo xtask install-pi`),
//! offline against a scripted Gemini API of the tests' own
//! (`acp/fake_gemini.py`), driven the way Collie would (curl over the
//! socket). Gemini CLI asks before it runs a command in its `default`
//! mode, the one its sessions start in: a command waits for a card, Allow
//! runs it, Deny refuses it, and a stop with the card open ends the turn
//! at once (Gemini CLI answers a cancel only once its question is
//! answered, which the bridge does with the stop).
//!
//! The agent runs as `nobody` when the tests run as root, as users run it.
#![cfg(feature = "acp")]

#[path = "agent/mod.rs"]
mod agent;
#[path = "acp/live.rs"]
mod live;

use std::path::PathBuf;

use live::{LiveAgent, Setup, has_reply, repo};
use serde_json::json;

/// node (`.tools/bin/node`) and Gemini CLI's bundle in `.tools/node_modules`,
/// or a failure naming the command that installs them.
fn gemini_cli() -> (PathBuf, PathBuf) {
    let node = repo().join(".tools/bin/node");
    let bundle = repo().join(".tools/node_modules/@google/gemini-cli/bundle/gemini.js");
    assert!(
        node.exists() && bundle.exists(),
        "Gemini CLI is not installed: run `cargo xtask install-pi` (it puts node 22 and \
         @google/gemini-cli 0.61.0 in {}); this test needs it and never skips",
        repo().join(".tools").display()
    );
    (node, bundle)
}

/// durable-agent on Gemini CLI, against the scripted Gemini API.
fn start(test: &str) -> LiveAgent {
    let (node, gemini_js) = gemini_cli();
    // Settings in the private home that keep Gemini CLI off the network
    // (no usage statistics, telemetry or update check) and on one model
    // (its default, "auto", asks the model to route each turn); its
    // sessions are kept, as a clean-up could remove one the bridge loads
    // again.
    let settings = json!({
        "privacy": {"usageStatisticsEnabled": false},
        "telemetry": {"enabled": false},
        "general": {
            "enableAutoUpdate": false,
            "enableAutoUpdateNotification": false,
            "sessionRetention": {"enabled": false}
        },
        "model": {"name": "gemini-2.5-flash"}
    })
    .to_string();
    let setup = Setup {
        agent: "gemini",
        model: "fake_gemini.py",
        folders: &["home/.gemini", "tmp"],
        files: &[("home/.gemini/settings.json", &settings)],
    };
    LiveAgent::start(&setup, test, |command, dir, port| {
        command
            .arg(node)
            .arg(gemini_js)
            .arg("--acp")
            // A temporary folder of its own; the model is the scripted one
            // (with a base URL, Gemini CLI needs no sign-in).
            .env("TMPDIR", dir.join("tmp"))
            .env("GOOGLE_GEMINI_BASE_URL", format!("http://127.0.0.1:{port}"))
            .env("GEMINI_API_KEY", "scripted-model-key")
            // Else the process the bridge starts is a parent that ignores
            // SIGTERM and runs Gemini CLI again as its child.
            .env("GEMINI_CLI_NO_RELAUNCH", "true")
            .env_remove("GOOGLE_API_KEY")
            .env_remove("GOOGLE_CLOUD_PROJECT");
    })
}

#[test]
fn gemini_asks_before_it_runs_a_command_and_allow_and_deny_reach_it() {
    let gemini = start("cards");
    let made = gemini.dir.join("project/made-by-gemini");

    let pane = gemini.new_conversation("please run bash");
    let ask = gemini.eventually("the card for the command", || gemini.open_ask());
    assert_eq!(ask["pane"], pane.as_str(), "{ask}");
    let call = ask["tool"]["call"].as_str().unwrap_or_default();
    assert!(call.contains("mkdir -p made-by-gemini"), "the card shows the command: {ask}");
    assert!(!made.exists(), "the command ran before the card was answered");
    gemini.answer(&ask, &["proceed_once"], "a-1");
    gemini.eventually("the folder the command makes", || made.exists().then_some(()));
    gemini.eventually("the turn's end", || gemini.idle(&pane).then_some(()));
    let items = gemini.items(&pane);
    assert!(has_reply(&items, "Done:"), "the reply after the command: {items:?}");

    // The same once more, denied: nothing runs, the call shows it.
    std::fs::remove_dir(&made).unwrap();
    let (status, r) = gemini
        .post(&format!("/v1/panes/{pane}/send"), json!({"requestId": "s-2", "text": "please run bash"}));
    assert_eq!(status, 200, "{r}");
    let ask = gemini.eventually("the second card", || gemini.open_ask());
    gemini.answer(&ask, &["cancel"], "a-2");
    gemini.eventually("the denied turn's end", || gemini.idle(&pane).then_some(()));
    assert!(!made.exists(), "a denied command ran");
}

#[test]
fn gemini_stopped_with_a_card_open_ends_its_turn_at_once() {
    let gemini = start("stop");
    let pane = gemini.new_conversation("please run bash");
    let ask = gemini.eventually("the card for the command", || gemini.open_ask());
    let (status, r) = gemini.post(&format!("/v1/panes/{pane}/stop"), json!({"requestId": "x-1"}));
    assert_eq!(status, 200, "{r}");
    gemini.eventually("the turn's end after the stop", || gemini.idle(&pane).then_some(()));
    assert!(gemini.open_ask().is_none(), "the card stayed open after the stop: {ask}");
    let items = gemini.items(&pane);
    // "Stopped." is the agent's own answer (`cancelled`); a turn the bridge
    // had to end by killing the agent would say so instead.
    assert!(
        items.iter().any(|i| i["kind"] == "notice" && i["text"] == "Stopped."),
        "the agent's answer to the stop: {items:?}"
    );
    assert!(!items.iter().any(|i| i["tone"] == "error"), "the stop went wrong: {items:?}");
    assert!(!gemini.dir.join("project/made-by-gemini").exists(), "the command ran after a stop");

    // The conversation goes on with the same agent.
    let (status, r) =
        gemini.post(&format!("/v1/panes/{pane}/send"), json!({"requestId": "s-2", "text": "hello"}));
    assert_eq!(status, 200, "{r}");
    gemini
        .eventually("the next turn's reply", || has_reply(&gemini.items(&pane), "Echo: hello").then_some(()));
}

#[test]
fn gemini_through_the_bridge_passes_conformance_with_writes() {
    start("conformance").assert_passes_conformance("Gemini CLI");
}
