//! `durable-agent acp` with pi-acp driving the real Pi (scripted
//! model and tool gate: `tests/acp/faux.ts`), driven over the socket as
//! Collie would: a reply streamed as partials then one final text; a card
//! Allowed runs its call, one Denied refuses it; a stop mid-stream and a
//! stop with a card open; the agent's tools refused as callers and blind
//! to the tokens. Needs `cargo xtask install-pi`; never skips.
#![cfg(feature = "acp")]

mod acp;

use acp::{Acp, Start, environ, eventually, long_text, scratch};
use durable_sdk::ask_id_for;
use serde_json::{Value, json};

/// The item events of `pane` for the item `id`, in order.
fn writes_of(agent: &Acp, pane: &str, id: &Value) -> Vec<Value> {
    agent
        .events(pane)
        .into_iter()
        .filter(|e| e["type"] == "item" && e["item"]["id"] == *id)
        .map(|e| e["item"].clone())
        .collect()
}

#[test]
fn a_reply_streams_as_partials_then_one_final_text() {
    let dir = scratch("stream");
    // ~2,400 characters at ~3 a token: about two seconds of streaming.
    let agent = Acp::start_with(&dir, Start { tokens_per_second: Some(400), ..Start::default() });
    let hello = agent.get("/hello");
    for (cap, on) in
        [("send", true), ("abort", true), ("starters", true), ("history", true), ("steer", false)]
    {
        assert_eq!(hello["caps"][cap], on, "{cap}: {hello}");
    }
    let starters = agent.state()["starters"].clone();
    assert!(starters.as_array().into_iter().flatten().any(|s| s["id"] == "new-conversation"), "{starters}");

    let pane = agent.new_conversation("st-1", "say something long");
    let reply = agent.wait_text(&pane, "reply", &long_text());
    agent.idle(&pane);
    let writes = writes_of(&agent, &pane, &reply["id"]);
    let (last, before) = writes.split_last().expect("the reply was written");
    assert!(!before.is_empty(), "the reply came in parts before its final text: {writes:?}");
    for w in before {
        assert_eq!(w["partial"], true, "{w}");
        let text = w["text"].as_str().unwrap();
        assert!(long_text().starts_with(text), "a prefix: {text}");
    }
    let shortest = before.iter().filter_map(|w| w["text"].as_str()).map(str::len).min();
    assert!(shortest < Some(long_text().len()), "a part came before the whole text: {writes:?}");
    assert!(last.get("partial").is_none(), "{last}");
    let items = agent.items(&pane);
    let user = items.iter().position(|i| i["kind"] == "user" && i["text"] == "say something long");
    let answer = items.iter().position(|i| i["id"] == reply["id"]);
    assert!(user.is_some() && user < answer, "the starter's text, then the reply: {items:?}");
}

#[test]
fn a_card_allowed_runs_its_call_and_one_denied_refuses_it() {
    let dir = scratch("cards");
    let agent = Acp::start(&dir);
    let pane = agent.new_conversation("st-1", "hello");
    agent.wait_text(&pane, "reply", "You said: hello");
    agent.idle(&pane);

    let allowed = dir.join("allowed-ran");
    agent.send(&pane, "r-1", &format!("use bash: touch {} && echo allowed", allowed.display()));
    let ask = agent.open_ask();
    assert_eq!(ask["pane"], pane.as_str());
    let request = ask["toolCallId"].as_str().expect("the request's tool call id");
    assert!(request.starts_with("pi-ui-"), "pi-acp's id for a dialog: {request}");
    assert_eq!(ask["id"], ask_id_for(&pane, request), "the card's id comes from the request");
    let title = ask["title"].as_str().unwrap();
    assert!(
        title.starts_with("bash: touch ") && title.contains("allowed-ran"),
        "what the request says: {title}"
    );
    let options: Vec<(Value, Value)> =
        ask["options"].as_array().unwrap().iter().map(|o| (o["id"].clone(), o["label"].clone())).collect();
    assert_eq!(options, [(json!("choice-0"), json!("Allow")), (json!("choice-1"), json!("Deny"))]);
    assert!(!allowed.exists(), "nothing runs before the answer");
    let (status, r) = agent.answer(&ask, "a-1", "choice-0");
    assert_eq!((status, r["result"].clone()), (200, json!("answered")), "{r}");
    let tool = agent.finished_tool(&pane, "allowed-ran");
    assert_eq!(tool["status"], "ok", "{tool}");
    assert_eq!(tool["output"], "allowed\n", "{tool}");
    agent.wait_text(&pane, "reply", "The tool said: allowed");
    agent.idle(&pane);
    assert!(allowed.exists(), "the allowed call ran");

    let denied = dir.join("denied-ran");
    agent.send(&pane, "r-2", &format!("use bash: touch {}", denied.display()));
    let ask = agent.open_ask();
    let (status, r) = agent.answer(&ask, "a-2", "choice-1");
    assert_eq!((status, r["result"].clone()), (200, json!("answered")), "{r}");
    let tool = agent.finished_tool(&pane, "denied-ran");
    assert!(tool["status"] == "error" || tool["status"] == "denied", "{tool}");
    agent.wait_text(&pane, "reply", "The tool failed: Denied by the user.");
    agent.idle(&pane);
    assert!(!denied.exists(), "the denied call never ran");
    assert_eq!(agent.state()["asks"], json!([]));
}

#[test]
fn a_stop_ends_a_streaming_turn_and_one_waiting_on_a_card() {
    let dir = scratch("stop");
    // The long reply takes about eight seconds at this rate.
    let agent = Acp::start_with(&dir, Start { tokens_per_second: Some(100), ..Start::default() });
    let pane = agent.new_conversation("st-1", "long");
    let partial = eventually("a partial reply", || {
        agent.items(&pane).into_iter().find(|i| i["kind"] == "reply" && i["partial"] == true)
    });
    agent.stop(&pane, "x-1");
    agent.idle(&pane);
    let items = agent.items(&pane);
    let reply = items.iter().find(|i| i["id"] == partial["id"]).unwrap();
    assert!(reply.get("partial").is_none(), "final once the turn ends: {reply}");
    let text = reply["text"].as_str().unwrap();
    assert!(text.starts_with("word1") && !text.ends_with("word300"), "cut short: {text}");

    // A card open at the stop: closed as aborted, the agent told, the call never run.
    let never = dir.join("never-ran");
    agent.send(&pane, "r-1", &format!("use bash: touch {}", never.display()));
    let ask = agent.open_ask();
    agent.stop(&pane, "x-2");
    agent.idle(&pane);
    assert_eq!(agent.state()["asks"], json!([]));
    let closed =
        agent.events(&pane).into_iter().find(|e| e["type"] == "ask-closed" && e["askId"] == ask["id"]);
    let closed = closed.expect("the card's close is an event");
    assert_eq!(closed["outcome"], "aborted", "{closed}");
    let (status, r) = agent.answer(&ask, "a-1", "choice-0");
    assert_eq!((status, r["code"].clone()), (409, json!("ask-closed")), "{r}");
    let tool = agent.finished_tool(&pane, "never-ran");
    assert_ne!(tool["status"], "ok", "{tool}");
    assert!(!never.exists(), "the stopped call never ran");

    // The conversation takes the next send at once.
    agent.send(&pane, "r-2", "after");
    agent.wait_text(&pane, "reply", "You said: after");
    agent.idle(&pane);
}

/// The agent and what its tools start are the example's descendants: the
/// caller check refuses their writes (here an answer curled into the
/// socket) while the test's own curl passes it; and none of them inherits
/// `COLLIE_TOKEN` / `COLLIE_TOKEN_NEXT` (the rest of the environment does).
#[test]
fn the_agents_tools_are_refused_as_callers_and_never_see_the_tokens() {
    let dir = scratch("safety");
    let envs = vec![
        ("COLLIE_TOKEN".to_owned(), "t".repeat(40)),
        ("COLLIE_TOKEN_NEXT".to_owned(), "n".repeat(40)),
        ("DURABLE_TEST_MARK".to_owned(), "kept".to_owned()),
    ];
    let agent = Acp::start_with(&dir, Start { envs, ..Start::default() });
    let pane = agent.new_conversation("st-1", "hello");
    agent.wait_text(&pane, "reply", "You said: hello");
    let agents = agent.agents();
    assert_eq!(agents.len(), 1, "one agent for the one conversation: {agents:?}");
    // pi-acp and the Pi it runs.
    for pid in acp::descendants(agents[0]).into_iter().chain(agents) {
        let env = environ(pid);
        assert!(env.iter().any(|e| e == "DURABLE_TEST_MARK=kept"), "{pid}: {}", acp::cmdline(pid));
        assert!(!env.iter().any(|e| e.starts_with("COLLIE_TOKEN")), "{pid} inherits a token");
    }
    agent.idle(&pane);

    let ask_url = format!("http://collie/v1/asks/{}", "0".repeat(32));
    let answer =
        json!({"requestId": "evil-1", "answer": {"optionIds": ["choice-0"]}, "hash": "0".repeat(64)});
    let command = format!(
        "echo ${{COLLIE_TOKEN:-none}} ${{COLLIE_TOKEN_NEXT:-none}} ${{DURABLE_TEST_MARK:-none}}; \
         curl -sS --unix-socket {} -H 'Content-Type: application/json' -d '{answer}' -w ' %{{http_code}}' {ask_url}",
        agent.socket
    );
    agent.send(&pane, "r-1", &format!("use bash: {command}"));
    let ask = agent.open_ask();
    agent.answer(&ask, "a-1", "choice-0");
    let tool = agent.finished_tool(&pane, "unix-socket");
    let output = tool["output"].as_str().unwrap_or_default();
    let mut lines = output.lines();
    assert_eq!(lines.next(), Some("none none kept"), "{tool}");
    let refused = lines.next().unwrap_or_default();
    assert!(refused.contains("caller-refused") && refused.ends_with(" 403"), "{tool}");
    agent.idle(&pane);
    // The same answer from the test (not a descendant) passes the check:
    // held for a card that may yet be raised.
    let (status, r) = agent.post(&format!("/v1/asks/{}", "0".repeat(32)), answer);
    assert_eq!((status, r["result"].clone()), (202, json!("held")), "{r}");
}
