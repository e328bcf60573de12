//! Codex on the phone, out of the box: `durable-agent acp -- codex-acp`
//! (0.16.0, Codex 0.137.0, the native binary from `cargo xtask
//! install-pi`), offline against a scripted OpenAI Responses API of the
//! tests' own (`acp/fake_openai.py`), driven the way Collie would (curl
//! over the socket). The model provider is given on codex-acp's command
//! line (`-c key=value`): no config file is written anywhere.
//!
//! Codex asks nothing by default: its sessions start in `read-only`, in
//! which a command runs in its sandbox without a card. With
//! `-c approval_policy="untrusted"` on its command line (for this process
//! only) a command waits for a card; Allow runs it, Deny refuses it, and a
//! stop ends the turn at once, card open or command running.
//!
//! Codex's sandbox needs `bwrap` (Debian's `bubblewrap`) and user
//! namespaces. The agent runs as `nobody` when the tests run as root, as
//! users run it.
#![cfg(feature = "acp")]

#[path = "agent/mod.rs"]
mod agent;
#[path = "acp/live.rs"]
mod live;

use std::path::PathBuf;
use std::process::Command;

use live::{LiveAgent, Setup, has_reply, repo};
use serde_json::json;

/// codex-acp's option that makes Codex ask before any command it does not
/// know to be safe: a setting of this process only.
const ASK_FIRST: [&str; 2] = ["-c", "approval_policy=\"untrusted\""];

/// codex-acp's native binary in `.tools/node_modules`, or a failure naming
/// the command that installs it (and bubblewrap, which its sandbox needs).
fn codex_acp() -> PathBuf {
    let arch = match std::env::consts::ARCH {
        "aarch64" => "arm64",
        _ => "x64",
    };
    let bin =
        repo().join(format!(".tools/node_modules/@zed-industries/codex-acp-linux-{arch}/bin/codex-acp"));
    assert!(
        bin.exists(),
        "codex-acp is not installed: run `cargo xtask install-pi` (it puts @zed-industries/codex-acp \
         0.16.0 in {}); this test needs it and never skips",
        repo().join(".tools/node_modules").display()
    );
    let bwrap = Command::new("bwrap").arg("--version").output();
    assert!(
        bwrap.is_ok_and(|o| o.status.success()),
        "bwrap is not installed: Codex's sandbox needs it (`apt-get install bubblewrap`)"
    );
    bin
}

/// durable-agent on codex-acp, against the scripted Responses API, with
/// `extra` on codex-acp's command line.
fn start(test: &str, extra: &[&str]) -> LiveAgent {
    let agent = codex_acp();
    let setup = Setup { agent: "codex", model: "fake_openai.py", folders: &["codex", "tmp"], files: &[] };
    LiveAgent::start(&setup, test, |command, dir, port| {
        let provider = format!("model_providers.fake.base_url=\"http://127.0.0.1:{port}/v1\"");
        command
            .arg(agent)
            // The scripted model as a provider of the command line's own:
            // nothing of Codex's config is read from or written to a file.
            .args(["-c", "model=\"gpt-5.4\"", "-c", "model_provider=\"fake\""])
            .args(["-c", "model_providers.fake.name=\"fake\"", "-c", &provider])
            .args(["-c", "model_providers.fake.wire_api=\"responses\""])
            .args(["-c", "model_providers.fake.env_key=\"FAKE_API_KEY\""])
            .args(extra)
            // A Codex home and temporary folder of its own (the latter
            // outside the Codex home, or its sandbox helper cannot be
            // linked); no key but the scripted model's.
            .env("CODEX_HOME", dir.join("codex"))
            .env("TMPDIR", dir.join("tmp"))
            .env("FAKE_API_KEY", "scripted-model-key")
            .env_remove("OPENAI_API_KEY")
            .env_remove("CODEX_API_KEY");
    })
}

#[test]
fn codex_asked_to_approve_commands_shows_a_card_and_allow_and_deny_reach_it() {
    let codex = start("cards", &ASK_FIRST);
    let made = codex.dir.join("project/made-by-codex");

    let pane = codex.new_conversation("please run bash");
    let ask = codex.eventually("the card for the command", || codex.open_ask());
    assert_eq!(ask["pane"], pane.as_str(), "{ask}");
    let call = ask["tool"]["call"].as_str().unwrap_or_default();
    assert!(call.contains("mkdir -p made-by-codex"), "the card shows the command: {ask}");
    assert!(!made.exists(), "the command ran before the card was answered");
    codex.answer(&ask, &["approved"], "a-1");
    codex.eventually("the folder the command makes", || made.exists().then_some(()));
    codex.eventually("the turn's end", || codex.idle(&pane).then_some(()));
    let items = codex.items(&pane);
    assert!(has_reply(&items, "Done:"), "the reply after the command: {items:?}");

    // The same once more, denied: nothing runs.
    std::fs::remove_dir(&made).unwrap();
    let (status, r) =
        codex.post(&format!("/v1/panes/{pane}/send"), json!({"requestId": "s-2", "text": "please run bash"}));
    assert_eq!(status, 200, "{r}");
    let ask = codex.eventually("the second card", || codex.open_ask());
    codex.answer(&ask, &["abort"], "a-2");
    codex.eventually("the denied turn's end", || codex.idle(&pane).then_some(()));
    assert!(!made.exists(), "a denied command ran");
    // The approval policy was the command line's: no config file was written for it.
    assert!(!codex.dir.join("codex/config.toml").exists(), "a Codex config file was written");
}

#[test]
fn codex_stopped_with_a_card_open_or_a_command_running_ends_its_turn() {
    let codex = start("stop", &ASK_FIRST);

    // A stop while the card is open: the card closes, the turn ends.
    let pane = codex.new_conversation("please run bash");
    let ask = codex.eventually("the card for the command", || codex.open_ask());
    let (status, r) = codex.post(&format!("/v1/panes/{pane}/stop"), json!({"requestId": "x-1"}));
    assert_eq!(status, 200, "{r}");
    codex.eventually("the turn's end after the stop", || codex.idle(&pane).then_some(()));
    assert!(codex.open_ask().is_none(), "the card stayed open after the stop: {ask}");
    assert!(!codex.dir.join("project/made-by-codex").exists(), "the command ran after a stop");

    // A stop while an allowed command runs: the turn ends.
    let (status, r) =
        codex.post(&format!("/v1/panes/{pane}/send"), json!({"requestId": "s-2", "text": "please run slow"}));
    assert_eq!(status, 200, "{r}");
    let ask = codex.eventually("the card for the slow command", || codex.open_ask());
    codex.answer(&ask, &["approved"], "a-2");
    let started = codex.dir.join("project/slow-started");
    codex.eventually("the slow command's start", || started.exists().then_some(()));
    let (status, r) = codex.post(&format!("/v1/panes/{pane}/stop"), json!({"requestId": "x-2"}));
    assert_eq!(status, 200, "{r}");
    codex.eventually("the turn's end after the stop", || codex.idle(&pane).then_some(()));
    let items = codex.items(&pane);
    assert!(
        items.iter().any(|i| i["kind"] == "notice" && i["text"] == "Stopped."),
        "the stop is told: {items:?}"
    );
}

#[test]
fn codex_by_default_runs_a_command_in_its_read_only_sandbox_without_a_card() {
    let codex = start("sandbox", &[]);
    let pane = codex.new_conversation("please run bash");
    codex.eventually("the turn's end", || codex.idle(&pane).then_some(()));
    let items = codex.items(&pane);
    // Its `read-only` mode is one the bridge leaves as it is; the sandbox,
    // not a card, kept the command from writing.
    assert!(has_reply(&items, "Read-only file system"), "the command's failure: {items:?}");
    // (A card would have kept the turn from ending.)
    assert!(!codex.dir.join("project/made-by-codex").exists(), "the read-only sandbox let a command write");
}

#[test]
fn codex_through_the_bridge_passes_conformance_with_writes() {
    start("conformance", &ASK_FIRST).assert_passes_conformance("Codex");
}
