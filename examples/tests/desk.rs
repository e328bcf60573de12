//! The support desk driven as Collie would, one scenario per behaviour:
//! layout, each ask kind and its echo, refunds, streamed replies, queued
//! sends, steer, stop, the starter, the pane without handlers, the knobs.

mod desk_support;

use desk_support::{Desk, TestDir};
use serde_json::{Value, json};

#[test]
fn desk_serves_its_layout_hello_and_starter() {
    let dir = TestDir::new("layout");
    let desk = Desk::start(&dir, &[]);
    let (status, hello) = desk.get("/hello");
    assert_eq!(status, 200);
    assert_eq!(hello["host"], "desk");
    assert_eq!(hello["runtime"], "rust");
    assert_eq!(hello["ready"], true);
    for cap in
        ["asks", "starters", "send", "steer", "abort", "rename", "close", "actions", "history", "reopen"]
    {
        assert_eq!(hello["caps"][cap], true, "{cap}");
    }
    assert_eq!(hello["caps"]["terminal"], false);

    let state = desk.state();
    assert_eq!(
        state["workspaces"],
        json!([{"id": "support", "title": "Support", "tabs": [
            {"id": "support:main", "title": "Tickets", "panes": ["ticket-1"]},
            {"id": "support:board", "title": "Board", "panes": ["announcements"]}]}])
    );
    let t1 = Desk::pane(&state, "ticket-1").unwrap();
    assert_eq!(t1["title"], "Maria Lopez");
    assert_eq!(t1["harness"], "desk");
    assert_eq!(t1["sessionId"], "ticket-1");
    assert_eq!(t1["actions"], json!([{"id": "refund", "label": "Refund", "icon": "check"}]));
    let board = Desk::pane(&state, "announcements").unwrap();
    assert_eq!(board["title"], "Announcements");
    assert_eq!(board["actions"], json!([]));
    assert_eq!(state["starters"], json!([{"id": "new-ticket", "label": "New ticket"}]));
}

#[test]
fn desk_each_ask_kind_is_raised_with_its_fields_and_its_answer_echoed() {
    let dir = TestDir::new("asks");
    let desk = Desk::start(&dir, &[]);
    let kinds: [(&str, Value, Value, &str); 5] = [
        ("choice", json!({"optionIds": ["yes"]}), json!(false), r#"Answer: {"optionIds":["yes"]}"#),
        (
            "multi",
            json!({"optionIds": ["red", "blue"]}),
            json!(false),
            r#"Answer: {"optionIds":["red","blue"]}"#,
        ),
        ("text", json!({"text": "Ship it"}), json!(false), r#"Answer: {"text":"Ship it"}"#),
        (
            "form",
            json!({"values": {"size": "m", "name": "Ana", "qty": 2, "gift": true}}),
            json!(false),
            r#"Answer: {"values":{"gift":true,"name":"Ana","qty":2,"size":"m"}}"#,
        ),
        (
            "approve",
            json!({"optionIds": ["allow-always"]}),
            json!(true),
            r#"Answer: {"optionIds":["allow-always"]}"#,
        ),
    ];
    for (n, (kind, answer, confirm, echo)) in kinds.into_iter().enumerate() {
        let (status, sent) = desk.send("ticket-1", &format!("ask-{kind}"), &format!("/ask {kind}"));
        assert_eq!(status, 200, "{sent}");
        let ask = desk.wait_ask("ticket-1");
        assert_eq!(ask["kind"], if kind == "approve" { "choice" } else { kind });
        assert_eq!(ask["toolCallId"], format!("ask-{}", n + 1));
        match kind {
            "choice" => assert_eq!(
                ask["options"],
                json!([{"id": "yes", "label": "Yes"}, {"id": "no", "label": "No"}])
            ),
            "multi" => {
                let ids: Vec<&str> =
                    ask["options"].as_array().unwrap().iter().map(|o| o["id"].as_str().unwrap()).collect();
                assert_eq!(ids, ["red", "green", "blue"]);
            }
            "form" => assert_eq!(
                ask["fields"],
                json!([
                    {"id": "name", "label": "Name", "type": "text", "required": true},
                    {"id": "qty", "label": "Quantity", "type": "number"},
                    {"id": "gift", "label": "Gift wrap", "type": "bool"},
                    {"id": "size", "label": "Size", "type": "select",
                     "options": [{"id": "s", "label": "Small"}, {"id": "m", "label": "Medium"}, {"id": "l", "label": "Large"}]}
                ])
            ),
            "approve" => {
                assert_eq!(
                    ask["options"],
                    json!([{"id": "allow", "label": "Allow"}, {"id": "allow-always", "label": "Allow always", "always": true}, {"id": "deny", "label": "Deny"}])
                );
                assert_eq!(ask["tool"]["name"], "escalate");
                assert_eq!(ask["readable"], false);
                // The second tap the seed asks for.
                let (status, refused) = desk.answer(&ask, "confirm-missing", answer.clone());
                assert_eq!((status, refused["code"].as_str()), (409, Some("confirm-required")), "{refused}");
            }
            _ => {}
        }
        let (status, answered) = desk.post(
            &format!("/v1/asks/{}", ask["id"].as_str().unwrap()),
            json!({"requestId": format!("answer-{kind}"), "answer": answer, "hash": ask["hash"], "confirmAlways": confirm}),
        );
        assert_eq!(status, 200, "{answered}");
        assert_eq!(answered["result"], "answered");
        let reply = desk.wait_text("ticket-1", echo);
        assert_eq!(reply["kind"], "reply");
        assert_eq!(reply["id"], format!("answer-ask-{}", n + 1));
    }
    // A bad command is refused, nothing stored.
    let (status, refused) = desk.send("ticket-1", "bad-ask", "/ask poll");
    assert_eq!((status, refused["code"].as_str()), (409, Some("refused")), "{refused}");
}

#[test]
fn desk_ask_with_an_expiry_times_out() {
    let dir = TestDir::new("expiry");
    let desk = Desk::start(&dir, &[]);
    let (status, _) = desk.send("ticket-1", "r-1", "/ask text 1s");
    assert_eq!(status, 200);
    let ask = desk.wait_ask("ticket-1");
    assert!(ask["expiresAt"].is_string(), "{ask}");
    desk.wait_text("ticket-1", "Timed out before an answer: What should the reply say?");
    assert_eq!(desk.state()["asks"], json!([]));
}

#[test]
fn desk_refund_allowed_then_denied() {
    let dir = TestDir::new("refund");
    let desk = Desk::start(&dir, &[]);
    let (status, done) = desk.post("/v1/panes/ticket-1/actions/refund", json!({"requestId": "refund-a"}));
    assert_eq!(status, 200, "{done}");
    assert_eq!(done["result"], "done");
    let ask = desk.wait_ask("ticket-1");
    assert_eq!(ask["title"], "refund wants to run");
    assert_eq!(ask["tool"]["call"], r#"refund(order: "5521", amount: 40)"#);
    assert_eq!(ask["tool"]["args"], json!([["order", "\"5521\""], ["amount", "40"]]));
    assert_eq!(ask["push"], json!({"title": "refund needs a yes"}));
    assert_eq!(ask["options"], json!([{"id": "allow", "label": "Allow"}, {"id": "deny", "label": "Deny"}]));
    assert_eq!(
        ask["hash"], "cb8b64234d06250d254d479dcdd28c57083cae57ba257f035c7f409be9de57ce",
        "the contract's vector"
    );
    let (status, _) = desk.answer(&ask, "allow-1", json!({"optionIds": ["allow"]}));
    assert_eq!(status, 200);
    desk.wait_text("ticket-1", "Refund of 40 issued");

    let (status, _) = desk.post("/v1/panes/ticket-1/actions/refund", json!({"requestId": "refund-b"}));
    assert_eq!(status, 200);
    let ask = desk.wait_ask("ticket-1");
    let (status, _) = desk.answer(&ask, "deny-1", json!({"optionIds": ["deny"]}));
    assert_eq!(status, 200);
    desk.wait_text("ticket-1", "Refund not issued");
}

#[test]
fn desk_send_streams_a_reply_and_a_send_during_the_turn_is_queued() {
    let dir = TestDir::new("send");
    let desk = Desk::start(&dir, &["--turn-ms", "800"]);
    let (status, sent) = desk.send("ticket-1", "s-1", "hello");
    assert_eq!(status, 200, "{sent}");
    assert_eq!(sent["result"], "sent");
    let state = desk.state();
    let pane = Desk::pane(&state, "ticket-1").unwrap();
    assert_eq!(pane["state"], "working");
    let turn = pane["turnId"].clone();
    let (status, queued) = desk.send("ticket-1", "s-2", "again");
    assert_eq!(status, 200, "{queued}");
    assert_eq!(queued["result"], "queued");
    assert_eq!(queued["turnId"], turn);

    desk.wait_text("ticket-1", "Got it: hello");
    desk.wait_text("ticket-1", "Got it: again");
    desk.wait_idle("ticket-1");
    let reply_id = format!("reply-{}", turn.as_str().unwrap());
    let writes: Vec<Value> = desk
        .events("ticket-1")
        .into_iter()
        .filter(|e| e["type"] == "item" && e["item"]["id"] == reply_id.as_str())
        .map(|e| e["item"].clone())
        .collect();
    assert_eq!(writes.len(), 5, "four partial writes then the final: {writes:?}");
    for w in &writes[..4] {
        assert_eq!(w["partial"], true);
        assert!("Got it: hello".starts_with(w["text"].as_str().unwrap()));
    }
    assert!(writes[4].get("partial").is_none());
    // The queued send was delivered after the turn, with its user item.
    let items = desk.items("ticket-1");
    let ids: Vec<&str> = items.iter().map(|i| i["id"].as_str().unwrap()).collect();
    let pos = |id: &str| ids.iter().position(|x| *x == id).unwrap_or_else(|| panic!("{id} in {ids:?}"));
    assert!(pos("user-s-1") < pos(&reply_id));
    assert!(pos(&reply_id) < pos("user-s-2"));
}

#[test]
fn desk_steer_is_appended_to_the_reply() {
    let dir = TestDir::new("steer");
    let desk = Desk::start(&dir, &["--turn-ms", "1500"]);
    let (status, _) = desk.send("ticket-1", "s-1", "hello");
    assert_eq!(status, 200);
    let (status, steered) =
        desk.post("/v1/panes/ticket-1/steer", json!({"requestId": "st-1", "text": "be brief"}));
    assert_eq!(status, 200, "{steered}");
    assert_eq!(steered["result"], "steered");
    desk.wait_text("ticket-1", "Got it: hello (steer: be brief)");
    desk.wait_idle("ticket-1");
    let (status, refused) =
        desk.post("/v1/panes/ticket-1/steer", json!({"requestId": "st-2", "text": "late"}));
    assert_eq!((status, refused["reason"].as_str()), (409, Some("not-working")), "{refused}");
}

#[test]
fn desk_stop_ends_the_turn_with_what_it_had() {
    let dir = TestDir::new("stop");
    let desk = Desk::start(&dir, &["--turn-ms", "6000"]);
    let (status, _) = desk.send("ticket-1", "s-1", "hello world, how are you");
    assert_eq!(status, 200);
    let state = desk.state();
    let turn = Desk::pane(&state, "ticket-1").unwrap()["turnId"].as_str().unwrap().to_owned();
    let reply_id = format!("reply-{turn}");
    let first =
        desk.wait_for("a partial reply", |d| d.item("ticket-1", &reply_id).filter(|i| i["partial"] == true));
    let (status, stopped) = desk.post("/v1/panes/ticket-1/stop", json!({"requestId": "stop-1"}));
    assert_eq!(status, 200, "{stopped}");
    assert_eq!(stopped["result"], "stopped");
    desk.wait_idle("ticket-1");
    let last = desk.wait_for("the final reply", |d| {
        d.item("ticket-1", &reply_id).filter(|i| i.get("partial").is_none())
    });
    let text = last["text"].as_str().unwrap();
    let full = "Got it: hello world, how are you";
    assert!(full.starts_with(text) && text.len() < full.len(), "{text:?} is what it had");
    assert!(text.len() >= first["text"].as_str().unwrap().len());
}

#[test]
fn desk_starter_opens_the_next_ticket() {
    let dir = TestDir::new("starter");
    let desk = Desk::start(&dir, &[]);
    let (status, started) = desk.post("/v1/starters/new-ticket", json!({"requestId": "new-1"}));
    assert_eq!(status, 200, "{started}");
    assert_eq!(started["result"], "started");
    assert_eq!(started["pane"], "ticket-2");
    let state = desk.state();
    let t2 = Desk::pane(&state, "ticket-2").unwrap();
    assert_eq!(t2["tab"], "support:main");
    assert_eq!(t2["actions"][0]["id"], "refund");
    assert_eq!(state["workspaces"][0]["tabs"][0]["panes"], json!(["ticket-1", "ticket-2"]));
    // The new ticket takes sends too.
    let (status, _) = desk.send("ticket-2", "s-1", "hi");
    assert_eq!(status, 200);
    desk.wait_text("ticket-2", "Got it: hi");
}

#[test]
fn desk_announcements_has_no_handlers() {
    let dir = TestDir::new("board");
    let desk = Desk::start(&dir, &[]);
    let (status, refused) = desk.send("announcements", "s-1", "hello");
    assert_eq!((status, refused["code"].as_str()), (409, Some("not-supported")), "{refused}");
}

#[test]
fn desk_receipts_per_group_provokes_receipt_dropped() {
    let dir = TestDir::new("dropped");
    let desk = Desk::start(&dir, &["--receipts-per-group", "1"]);
    let rename = |rid: &str, title: &str| {
        desk.post("/v1/rename", json!({"requestId": rid, "target": "pane", "id": "ticket-1", "title": title}))
    };
    assert_eq!(rename("rn-1", "One").0, 200);
    assert_eq!(rename("rn-2", "Two").0, 200);
    let (status, replay) = rename("rn-2", "Ignored");
    assert_eq!((status, replay["replayed"].as_bool()), (200, Some(true)));
    let (status, dropped) = rename("rn-1", "Ignored");
    assert_eq!((status, dropped["code"].as_str()), (500, Some("receipt-dropped")), "{dropped}");
    assert_eq!(Desk::pane(&desk.state(), "ticket-1").unwrap()["title"], "Two");
}

#[test]
fn desk_accept_delay_provokes_busy() {
    let dir = TestDir::new("busy");
    let desk = Desk::start(&dir, &["--accept-delay-ms", "6500"]);
    std::thread::scope(|s| {
        let first = s.spawn(|| desk.send("ticket-1", "slow-1", "hello"));
        std::thread::sleep(std::time::Duration::from_millis(300));
        let (status, busy) = desk.send("ticket-1", "slow-2", "again");
        assert_eq!((status, busy["code"].as_str()), (409, Some("busy")), "{busy}");
        let (status, sent) = first.join().unwrap();
        assert_eq!(status, 200, "{sent}");
    });
}

#[test]
fn desk_caps_declares_a_subset() {
    let dir = TestDir::new("caps");
    let desk = Desk::start(&dir, &["--caps", "asks,send"]);
    let (_, hello) = desk.get("/hello");
    assert_eq!(hello["caps"]["send"], true);
    assert_eq!(hello["caps"]["steer"], false);
    assert_eq!(hello["caps"]["history"], false);
    let (status, refused) = desk.post("/v1/panes/ticket-1/steer", json!({"requestId": "st-1", "text": "x"}));
    assert_eq!((status, refused["code"].as_str()), (409, Some("not-supported")));
}

#[test]
fn desk_exits_cleanly_on_sigterm() {
    let dir = TestDir::new("sigterm");
    let mut desk = Desk::start(&dir, &[]);
    let pid = desk.child.id().to_string();
    let killed = std::process::Command::new("kill").args(["-TERM", &pid]).status().unwrap();
    assert!(killed.success());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let status = loop {
        if let Some(s) = desk.child.try_wait().unwrap() {
            break s;
        }
        assert!(std::time::Instant::now() < deadline, "the desk did not exit on SIGTERM");
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    assert!(status.success(), "{status:?}");
    assert!(!std::path::Path::new(&dir.socket()).exists(), "the socket file is removed");
}

/// The spec README: send, steer, stop and actions on the pane without
/// handlers answer `409 not-supported`, though the desk sets agent-wide
/// hooks (for rename, close, reopen and the starter).
#[test]
fn desk_announcements_refuses_steer_stop_and_actions_as_not_supported() {
    let dir = TestDir::new("board-all");
    let desk = Desk::start(&dir, &[]);
    for (route, body) in [
        ("steer", json!({"requestId": "st-1", "text": "x"})),
        ("stop", json!({"requestId": "sp-1"})),
        ("actions/refund", json!({"requestId": "ac-1"})),
    ] {
        let (status, refused) = desk.post(&format!("/v1/panes/announcements/{route}"), body);
        assert_eq!((status, refused["code"].as_str()), (409, Some("not-supported")), "{route}: {refused}");
    }
}

#[test]
fn desk_data_folder_is_made_private_and_its_databases_unreadable_to_others() {
    use std::os::unix::fs::PermissionsExt;
    let dir = TestDir::new("private-data");
    std::fs::create_dir_all(dir.data()).unwrap();
    std::fs::set_permissions(dir.data(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let desk = Desk::start(&dir, &[]);
    let mode = |p: &str| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&dir.data()), 0o700, "an open data folder is narrowed to 0700");
    let receipts = format!("{}/receipts.sqlite3", dir.data());
    assert_eq!(mode(&receipts), 0o600, "the receipt database is private");
    drop(desk);
}
