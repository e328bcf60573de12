//! `durable-agent acp` with pi-acp driving the real Pi (scripted
//! model and tool gate: `tests/acp/faux.ts`), over the socket as Collie
//! would: the agent killed mid-turn; the example killed (`SIGKILL`) and
//! started again on the same `--data`; a closed conversation in history.
//! Needs `cargo xtask install-pi`; never skips.
#![cfg(feature = "acp")]

mod acp;

use std::process::Command;

use acp::{Acp, Start, alive, eventually, scratch};
use serde_json::json;

#[test]
fn an_agent_killed_mid_turn_leaves_a_notice_and_the_next_send_starts_it_again() {
    let dir = scratch("agent-killed");
    let agent = Acp::start_with(&dir, Start { tokens_per_second: Some(100), ..Start::default() });
    let pane = agent.new_conversation("st-1", "long");
    let partial = eventually("a partial reply", || {
        agent.items(&pane).into_iter().find(|i| i["kind"] == "reply" && i["partial"] == true)
    });
    let agents = agent.agents();
    assert_eq!(agents.len(), 1, "one agent for the one conversation: {agents:?}");
    let killed = Command::new("kill").args(["-KILL", &agents[0].to_string()]).status().unwrap();
    assert!(killed.success());
    agent.idle(&pane);
    let items = agent.items(&pane);
    let reply = items.iter().find(|i| i["id"] == partial["id"]).unwrap();
    assert!(reply.get("partial").is_none(), "the text so far stays, final: {reply}");
    let notice = items.iter().find(|i| i["kind"] == "notice").expect("a notice of the exit");
    assert_eq!(notice["tone"], "error", "{notice}");
    let text = notice["text"].as_str().unwrap();
    assert!(text.contains("signal") && text.contains('9'), "the exit status: {text}");
    assert_eq!(agent.state()["asks"], json!([]));

    // The next send starts the agent again, on the same conversation.
    agent.send(&pane, "r-1", "still there?");
    agent.wait_text(&pane, "reply", "You said: still there?");
    agent.idle(&pane);
    let now = agent.agents();
    assert_eq!(now.len(), 1, "{now:?}");
    assert_ne!(now, agents, "a new agent process");
}

#[test]
fn the_example_killed_and_started_again_on_its_data_brings_its_conversations_back() {
    let dir = scratch("example-killed");
    let agent = Acp::start(&dir);
    let first = agent.new_conversation("st-1", "hello one");
    agent.wait_text(&first, "reply", "You said: hello one");
    agent.idle(&first);
    let second = agent.new_conversation("st-2", "use bash: echo two");
    let ask = agent.open_ask();
    agent.answer(&ask, "a-1", "choice-0");
    agent.wait_text(&second, "reply", "The tool said: two");
    agent.idle(&second);
    // A third left waiting on its card.
    let third =
        agent.new_conversation("st-3", &format!("use bash: touch {}", dir.join("never-ran").display()));
    let card = agent.open_ask();
    assert_eq!(card["pane"], third.as_str());

    let agents = agent.agents();
    assert_eq!(agents.len(), 3, "one agent per live conversation: {agents:?}");
    agent.kill9();
    // Nothing the example started outlives it.
    eventually("the agents gone with the example", || agents.iter().all(|&pid| !alive(pid)).then_some(()));

    let agent = Acp::start(&dir);
    let mut panes = agent.panes();
    panes.sort();
    let mut want = vec![first.clone(), second.clone(), third.clone()];
    want.sort();
    assert_eq!(panes, want, "the same conversations, the same panes");
    agent.wait_text(&first, "user", "hello one");
    agent.wait_text(&first, "reply", "You said: hello one");
    agent.wait_text(&second, "reply", "The tool said: two");
    // The card's agent is gone: its session is loaded again, and pi-acp
    // does not ask again, so the card is closed, and says so.
    assert_eq!(agent.state()["asks"], json!([]));
    let notice = eventually("the card's closing line", || {
        agent.items(&third).into_iter().find(|i| {
            i["kind"] == "notice"
                && i["text"].as_str().is_some_and(|t| t.starts_with("Stopped before an answer"))
        })
    });
    assert!(notice["text"].as_str().unwrap().contains("never-ran"), "{notice}");
    let (status, r) = agent.answer(&card, "a-2", "choice-0");
    assert_eq!((status, r["code"].clone()), (409, json!("ask-closed")), "{r}");
    assert!(!dir.join("never-ran").exists());
    // The agent loaded for the card stops once it is closed.
    eventually("no agent before a send", || agent.agents().is_empty().then_some(()));
    assert_eq!(agent.state()["asks"], json!([]));

    // The first conversation goes on, its agent started on its session.
    agent.send(&first, "r-1", "again");
    agent.wait_text(&first, "reply", "You said: again");
    agent.idle(&first);
    // The items came back from the receipt store: the records keep none.
    for pane in [&first, &second, &third] {
        assert_eq!(record_items(&dir, pane), 0, "{pane}'s record keeps no items");
    }
}

/// How many items the example's own record of `pane` holds
/// (`conversations/<pane>.json`): the receipt store keeps them.
fn record_items(dir: &std::path::Path, pane: &str) -> usize {
    let path = dir.join(format!("data/conversations/{pane}.json"));
    let record: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    assert_eq!(record["paneId"], pane, "{record}");
    record["items"].as_array().map_or(0, Vec::len)
}

#[test]
fn a_closed_conversation_is_listed_in_history_and_read_without_an_agent() {
    let dir = scratch("history");
    let agent = Acp::start(&dir);
    let pane = agent.new_conversation("st-1", "first words");
    agent.wait_text(&pane, "reply", "You said: first words");
    agent.idle(&pane);
    let open = agent.new_conversation("st-2", "still open");
    agent.wait_text(&open, "reply", "You said: still open");
    agent.idle(&open);

    agent.write("/v1/close", json!({"requestId": "c-1", "target": "pane", "id": pane}));
    assert!(!agent.panes().contains(&pane));
    let row = |agent: &Acp| {
        let rows = agent.get("/v1/history");
        rows["rows"].as_array().into_iter().flatten().find(|r| r["id"] == pane.as_str()).cloned()
    };
    let closed = eventually("the closed conversation's row", || row(&agent));
    assert_eq!(closed["state"], "closed", "{closed}");
    assert!(closed["startedAt"].is_string() && closed["items"].as_u64() >= Some(2), "{closed}");
    let read = |agent: &Acp| {
        let page = agent.get(&format!("/v1/history/{pane}"));
        let texts: Vec<(String, String)> = page["items"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|i| {
                (i["kind"].as_str().unwrap_or("").to_owned(), i["text"].as_str().unwrap_or("").to_owned())
            })
            .collect();
        texts
    };
    let texts = read(&agent);
    for want in [("user", "first words"), ("reply", "You said: first words")] {
        assert!(texts.iter().any(|(k, t)| (k.as_str(), t.as_str()) == want), "{want:?} not in {texts:?}");
    }

    // Started again: still listed and readable, from what the example
    // kept, with no agent started for it.
    drop(agent);
    let agent = Acp::start(&dir);
    assert_eq!(agent.panes(), vec![open.clone()]);
    assert_eq!(row(&agent).map(|r| r["state"].clone()), Some(json!("closed")));
    assert_eq!(read(&agent), texts);
    assert!(agent.agents().is_empty(), "a read starts no agent");

    assert_eq!(record_items(&dir, &pane), 0, "the receipt store keeps them, not the record");

    // Reopened, it shows what it showed (from the receipt store), and
    // takes a send again.
    agent.write("/v1/reopen", json!({"requestId": "o-1", "id": pane}));
    assert!(agent.panes().contains(&pane));
    agent.wait_text(&pane, "user", "first words");
    agent.wait_text(&pane, "reply", "You said: first words");
    agent.send(&pane, "r-1", "back again");
    agent.wait_text(&pane, "reply", "You said: back again");
    agent.idle(&pane);
}

/// A record as an earlier version of the example wrote it, items inside.
fn old_record(session: &str, title: &str, closed: bool, user: &str, reply: &str) -> serde_json::Value {
    json!({
        "sessionId": session, "paneId": session, "title": title,
        "startedAt": 1_700_000_000_000_u64, "updatedAt": 1_700_000_100_000_u64, "closed": closed,
        "items": [
            {"id": format!("{session}-u"), "kind": "user", "text": user},
            {"id": format!("{session}-r"), "kind": "reply", "text": reply},
        ],
    })
}

#[test]
fn records_an_earlier_version_wrote_with_items_move_them_onto_the_receipt_store() {
    let dir = scratch("moved");
    let conversations = dir.join("data/conversations");
    std::fs::create_dir_all(&conversations).unwrap();
    for record in [
        old_record("old-open", "Kept open", false, "hello from before", "an answer from before"),
        old_record("old-closed", "Kept closed", true, "closed question", "closed answer"),
    ] {
        let path = conversations.join(format!("{}.json", record["paneId"].as_str().unwrap()));
        std::fs::write(path, record.to_string()).unwrap();
    }
    let agent = Acp::start(&dir);
    assert_eq!(agent.panes(), vec!["old-open".to_owned()]);
    agent.wait_text("old-open", "user", "hello from before");
    agent.wait_text("old-open", "reply", "an answer from before");
    eventually("both records without their items", || {
        (record_items(&dir, "old-open") == 0 && record_items(&dir, "old-closed") == 0).then_some(())
    });
    let page = agent.get("/v1/history/old-closed");
    let texts: Vec<&str> =
        page["items"].as_array().unwrap().iter().filter_map(|i| i["text"].as_str()).collect();
    assert_eq!(texts, ["closed question", "closed answer"], "{page}");
    assert_eq!((&page["row"]["title"], &page["row"]["items"]), (&json!("Kept closed"), &json!(2)), "{page}");

    // Killed and started again: the receipt store alone gives them back.
    agent.kill9();
    let agent = Acp::start(&dir);
    agent.wait_text("old-open", "user", "hello from before");
    agent.wait_text("old-open", "reply", "an answer from before");
    let again = agent.get("/v1/history/old-closed");
    assert_eq!(again["items"], page["items"], "{again}");
    let rows = agent.get("/v1/history");
    let row = |id: &str| rows["rows"].as_array().unwrap().iter().find(|r| r["id"] == id).cloned();
    assert_eq!(row("old-open").map(|r| r["items"].clone()), Some(json!(2)), "{rows}");
    assert_eq!(row("old-closed").map(|r| r["state"].clone()), Some(json!("closed")), "{rows}");
    assert_eq!((record_items(&dir, "old-open"), record_items(&dir, "old-closed")), (0, 0));
}
