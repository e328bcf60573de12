//! Claude Code on the phone, out of the box: `durable-agent acp --
//! claude-agent-acp` (0.101.0, with the Claude Code it ships, from `cargo
//! xtask install-pi`), offline against a scripted Anthropic Messages API
//! of the tests' own (`acp/fake_anthropic.py`), driven the way Collie would
//! (curl over the socket). Claude starts its sessions in its `auto` mode,
//! in which it runs tools without asking; through the bridge a tool call
//! waits for a card, Allow runs it and Deny refuses it, with nothing of
//! Claude's settings written.
//!
//! Claude Code refuses its unattended modes as root, and users do not run
//! it as root: the agent runs as `nobody` when the tests run as root.
#![cfg(feature = "acp")]

#[path = "agent/mod.rs"]
mod agent;
#[path = "acp/live.rs"]
mod live;

use std::path::PathBuf;

use live::{LiveAgent, Setup, has_reply, repo};
use serde_json::json;

/// `.tools/bin/claude-agent-acp`, or a failure naming the command that installs it.
fn claude_agent_acp() -> PathBuf {
    let bin = repo().join(".tools/bin/claude-agent-acp");
    assert!(
        bin.exists(),
        "claude-agent-acp is not installed: run `cargo xtask install-pi` (it puts node 22, Pi, pi-acp \
         and claude-agent-acp 0.101.0 in {}); this test needs it and never skips",
        bin.parent().unwrap().display()
    );
    bin
}

/// durable-agent on Claude Code, against the scripted Messages API.
fn start(test: &str) -> LiveAgent {
    let agent = claude_agent_acp();
    let setup = Setup { agent: "claude", model: "fake_anthropic.py", folders: &["claude"], files: &[] };
    LiveAgent::start(&setup, test, |command, dir, port| {
        let path = format!("{}:/usr/local/bin:/usr/bin:/bin", repo().join(".tools/bin").display());
        command
            .arg(agent)
            // A Claude config folder of its own; the model is the scripted
            // one; nothing else goes out.
            .env("CLAUDE_CONFIG_DIR", dir.join("claude"))
            .env("ANTHROPIC_BASE_URL", format!("http://127.0.0.1:{port}"))
            .env("ANTHROPIC_API_KEY", "scripted-model-key")
            .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
            .env("DISABLE_TELEMETRY", "1")
            .env("DISABLE_AUTOUPDATER", "1")
            .env("DISABLE_ERROR_REPORTING", "1")
            // claude-agent-acp is a node script: node 22 of `.tools/bin` first.
            .env("PATH", path);
    })
}

#[test]
fn claude_code_asks_before_it_runs_a_command_and_allow_and_deny_reach_it() {
    let claude = start("cards");
    let made = claude.dir.join("project/made-by-claude");

    // A new conversation whose first prompt makes Claude run a command.
    let pane = claude.new_conversation("please run bash");
    let ask = claude.eventually("the card for the command", || claude.open_ask());
    assert_eq!(ask["pane"], pane.as_str(), "{ask}");
    let call = ask["tool"]["call"].as_str().unwrap_or_default();
    assert!(call.contains("mkdir -p made-by-claude"), "the card shows the command: {ask}");
    assert!(!made.exists(), "the command ran before the card was answered");
    claude.answer(&ask, &["allow", "allow-once"], "a-1");
    claude.eventually("the folder the command makes", || made.exists().then_some(()));
    claude.eventually("the turn's end", || claude.idle(&pane).then_some(()));
    let items = claude.items(&pane);
    assert!(has_reply(&items, "Done"), "the reply after the command: {items:?}");

    // The same once more, denied: nothing runs, the call shows it.
    std::fs::remove_dir(&made).unwrap();
    let (status, r) = claude
        .post(&format!("/v1/panes/{pane}/send"), json!({"requestId": "s-2", "text": "please run bash"}));
    assert_eq!(status, 200, "{r}");
    let ask = claude.eventually("the second card", || claude.open_ask());
    claude.answer(&ask, &["reject", "reject-once"], "a-2");
    claude.eventually("the denied turn's end", || claude.idle(&pane).then_some(()));
    assert!(!made.exists(), "a denied command ran");
    // Nothing of the user's (or of Claude's own settings) was written to make it ask.
    assert!(!claude.dir.join("claude/settings.json").exists(), "the bridge wrote Claude's settings");
}

#[test]
fn claude_code_through_the_bridge_passes_conformance_with_writes() {
    start("conformance").assert_passes_conformance("Claude Code");
}
