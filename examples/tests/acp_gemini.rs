//! Gemini CLI on the phone, out of the box: `durable-agent acp -- gemini
//! --acp` (0.61.0, run by the node 22 of `cargo xtask install-pi`),
//! offline against a scripted Gemini API of the tests' own
//! (`acp/fake_gemini.py`), driven the way Collie would (curl over the
//! socket). Gemini CLI asks before it runs a command in its `default`
//! mode, the one its sessions start in: a command waits for a card, Allow
//! runs it, Deny refuses it, and a stop with the card open ends the turn
//! at once (Gemini CLI answers a cancel only once its question is
//! answered, which the bridge does with the stop). A session Gemini CLI
//! cannot load in the minute it began (it names its files by the minute)
//! stays readable on the phone after a crash, says so, and loads at a send
//! in the next minute.
//!
//! The agent runs as `nobody` when the tests run as root, as users run it.
#![cfg(feature = "acp")]

#[path = "agent/mod.rs"]
mod agent;
#[path = "acp/live.rs"]
mod live;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

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
    LiveAgent::start(&setup, test, gemini_command)
}

/// Gemini CLI's command line and environment on durable-agent's command,
/// given the private folder and the scripted model's port.
fn gemini_command(command: &mut Command, dir: &Path, port: u16) {
    let (node, gemini_js) = gemini_cli();
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

/// Seconds since the epoch, by the wall clock (Gemini CLI names its
/// session files by the UTC minute; a minute is the same 60 s in UTC).
fn now_secs() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).expect("after 1970").as_secs()
}

#[test]
fn gemini_that_cannot_load_its_session_in_the_minute_it_began_leaves_the_pane_readable_and_loads_it_the_next()
{
    let mut gemini = start("same-minute-load");
    // The session is made early in a minute, so that the crash, the start
    // again and the send's `session/load` all come within that minute
    // (Gemini's start takes seconds on a loaded machine; 40 s is room).
    if now_secs() % 60 > 20 {
        std::thread::sleep(Duration::from_secs(60 - now_secs() % 60));
    }
    let made = now_secs() / 60;
    let pane = gemini.new_conversation("hello");
    assert_eq!(now_secs() / 60, made, "the session was made across a minute's end");
    gemini.eventually("the first reply", || has_reply(&gemini.items(&pane), "Echo: hello").then_some(()));
    gemini.eventually("the first turn's end", || gemini.idle(&pane).then_some(()));
    let before = gemini.items(&pane);

    // durable-agent crashes and starts again at once: the pane shows what
    // the SDK kept, with no agent started for it.
    gemini.crash_and_start_again(gemini_command);
    assert_eq!(gemini.items(&pane), before, "the pane after the start again");

    // The next send starts Gemini CLI on the session, which it cannot load
    // in the minute the session began: the pane keeps what it showed, the
    // send's turn ends with a notice that says so, and nothing reached the
    // model.
    let asked_before = gemini.api_log().lines().count();
    let (status, r) =
        gemini.post(&format!("/v1/panes/{pane}/send"), json!({"requestId": "s-2", "text": "still there?"}));
    assert_eq!((status, &r["result"]), (200, &json!("sent")), "{r}");
    let notice = gemini.eventually("the notice of the failed load", || {
        gemini.items(&pane).into_iter().find(|i| i["kind"] == "notice")
    });
    assert_eq!(
        now_secs() / 60,
        made,
        "the load came after the session's minute (a machine too slow for this test): {notice}"
    );
    gemini.eventually("the failed send's turn end", || gemini.idle(&pane).then_some(()));
    assert_eq!(notice["tone"], "error", "{notice}");
    assert!(
        notice["text"].as_str().is_some_and(|t| t.ends_with("The next message tries again.")),
        "the notice says the message was not taken and the next one tries again: {notice}"
    );
    let items = gemini.items(&pane);
    assert_eq!(items[..before.len()], before[..], "the items kept, as they were: {items:?}");
    let after: Vec<_> = items[before.len()..].iter().map(|i| (&i["kind"], &i["text"])).collect();
    assert_eq!(
        after,
        [(&json!("user"), &json!("still there?")), (&json!("notice"), &notice["text"])],
        "the send, then the notice, and nothing else: {items:?}"
    );
    assert_eq!(gemini.api_log().lines().count(), asked_before, "the model was asked:\n{}", gemini.api_log());

    // Once the minute has passed, the next send loads the session and the
    // reply comes.
    let next_minute = (made + 1) * 60;
    std::thread::sleep(Duration::from_secs(next_minute.saturating_sub(now_secs())));
    let (status, r) =
        gemini.post(&format!("/v1/panes/{pane}/send"), json!({"requestId": "s-3", "text": "and now?"}));
    assert_eq!((status, &r["result"]), (200, &json!("sent")), "{r}");
    gemini.eventually("the answer to the send", || {
        let items = gemini.items(&pane);
        let sent = items.iter().position(|i| i["text"] == "and now?")?;
        items[sent + 1..].iter().find(|i| i["kind"] == "reply" || i["kind"] == "notice").cloned()
    });
    gemini.eventually("the turn's end", || gemini.idle(&pane).then_some(()));
    let items = gemini.items(&pane);
    assert!(has_reply(&items, "Echo: and now?"), "the reply after the load: {items:?}");
    // What the load replays is shown already: nothing of it again.
    assert_eq!(items[..before.len()], before[..], "the items kept: {items:?}");
    let after: Vec<_> = items[before.len()..].iter().map(|i| (&i["kind"], &i["text"])).collect();
    assert_eq!(
        after,
        [
            (&json!("user"), &json!("still there?")),
            (&json!("notice"), &notice["text"]),
            (&json!("user"), &json!("and now?")),
            (&json!("reply"), &json!("Echo: and now?")),
        ],
        "the sends, the notice and the reply, and nothing else: {items:?}"
    );
}
