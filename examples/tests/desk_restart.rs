//! The desk across restarts (`SIGKILL`, then a new process on the same
//! data folder): renames, closes and reopens kept, receipts replayed,
//! undecided asks raised again, an answer held while the desk was down,
//! and history over every ticket.

mod desk_support;

use desk_support::{Desk, TestDir};
use serde_json::json;

#[test]
fn desk_rename_close_reopen_survive_a_restart_and_a_receipt_replays() {
    let dir = TestDir::new("restart");
    let desk = Desk::start(&dir, &[]);
    let rename = json!({"requestId": "rn-1", "target": "pane", "id": "ticket-1", "title": "Maria L."});
    let (status, renamed) = desk.post("/v1/rename", rename.clone());
    assert_eq!(status, 200, "{renamed}");
    let (status, started) = desk.post("/v1/starters/new-ticket", json!({"requestId": "new-1"}));
    assert_eq!((status, started["pane"].as_str()), (200, Some("ticket-2")));
    let (status, closed) =
        desk.post("/v1/close", json!({"requestId": "cl-1", "target": "pane", "id": "ticket-2"}));
    assert_eq!(status, 200, "{closed}");
    desk.kill();

    let desk = Desk::start(&dir, &[]);
    let state = desk.state();
    assert_eq!(Desk::pane(&state, "ticket-1").unwrap()["title"], "Maria L.");
    assert!(Desk::pane(&state, "ticket-2").is_none(), "ticket-2 stays closed");
    // The same request id replays the first answer, executing nothing.
    let (status, replay) = desk.post(
        "/v1/rename",
        json!({"requestId": "rn-1", "target": "pane", "id": "ticket-1", "title": "Other"}),
    );
    assert_eq!(status, 200);
    let mut expected = renamed.clone();
    expected["replayed"] = json!(true);
    assert_eq!(replay, expected);
    assert_eq!(Desk::pane(&desk.state(), "ticket-1").unwrap()["title"], "Maria L.");
    // History serves the closed ticket.
    let (status, history) = desk.get("/v1/history");
    assert_eq!(status, 200, "{history}");
    let row = history["rows"].as_array().unwrap().iter().find(|r| r["id"] == "ticket-2").unwrap().clone();
    assert_eq!(row["state"], "closed");
    assert!(row["endedAt"].is_string());
    // Reopen it (closed before this restart: the desk's hook brings it back).
    let (status, reopened) = desk.post("/v1/reopen", json!({"requestId": "ro-1", "id": "ticket-2"}));
    assert_eq!(status, 200, "{reopened}");
    assert_eq!(reopened["result"], "reopened");
    let state = desk.state();
    assert_eq!(Desk::pane(&state, "ticket-2").unwrap()["actions"][0]["id"], "refund");
    desk.kill();

    let desk = Desk::start(&dir, &[]);
    let state = desk.state();
    assert!(Desk::pane(&state, "ticket-2").is_some(), "the reopen survived the restart");
    assert_eq!(state["workspaces"][0]["tabs"][0]["panes"], json!(["ticket-1", "ticket-2"]));
    let (status, replay) = desk.post("/v1/reopen", json!({"requestId": "ro-1", "id": "ticket-2"}));
    assert_eq!((status, replay["replayed"].as_bool()), (200, Some(true)));
}

#[test]
fn desk_answer_held_while_down_lands_when_the_ask_is_raised_again() {
    let dir = TestDir::new("held");
    let desk = Desk::start(&dir, &[]);
    let (status, _) = desk.send("ticket-1", "s-1", "/ask choice");
    assert_eq!(status, 200);
    let ask = desk.wait_ask("ticket-1");
    desk.kill();

    let desk = Desk::start(&dir, &["--raise-delay-ms", "1500"]);
    assert_eq!(desk.state()["asks"], json!([]), "not raised yet");
    let (status, held) = desk.answer(&ask, "a-1", json!({"optionIds": ["yes"]}));
    assert_eq!(status, 202, "{held}");
    assert_eq!(held["result"], "held");
    desk.wait_text("ticket-1", r#"Answer: {"optionIds":["yes"]}"#);
    assert_eq!(desk.state()["asks"], json!([]));
    let (status, replay) = desk.answer(&ask, "a-1", json!({"optionIds": ["yes"]}));
    assert_eq!(status, 200, "{replay}");
    assert_eq!(replay["result"], "answered");
    assert_eq!(replay["replayed"], true);
    assert_eq!(replay["askId"], ask["id"]);
}

#[test]
fn desk_undecided_asks_are_raised_again_with_their_id_and_expiry() {
    let dir = TestDir::new("raise");
    let desk = Desk::start(&dir, &[]);
    assert_eq!(desk.send("ticket-1", "s-1", "/ask form 600s").0, 200);
    let form = desk.wait_ask("ticket-1");
    assert_eq!(desk.post("/v1/starters/new-ticket", json!({"requestId": "new-1"})).0, 200);
    assert_eq!(desk.send("ticket-2", "s-2", "/ask text 1s").0, 200);
    let short = desk.wait_ask("ticket-2");
    // An action still runs while its pane has an open ask: a refund card too.
    assert_eq!(desk.post("/v1/panes/ticket-2/actions/refund", json!({"requestId": "rf-1"})).0, 200);
    let refund = desk.wait_for("the refund card", |d| {
        d.state()["asks"].as_array()?.iter().find(|a| a["title"] == "refund wants to run").cloned()
    });
    desk.kill();
    // Past the short ask's expiry.
    std::thread::sleep(std::time::Duration::from_millis(1200));

    let desk = Desk::start(&dir, &[]);
    let state = desk.state();
    let asks = state["asks"].as_array().unwrap();
    let again = asks.iter().find(|a| a["id"] == form["id"]).expect("the form ask is raised again");
    assert_eq!(again["expiresAt"], form["expiresAt"]);
    assert_eq!(again["toolCallId"], form["toolCallId"]);
    assert_eq!(again["hash"], form["hash"]);
    assert!(asks.iter().all(|a| a["id"] != short["id"]), "past its expiry: closed at once");
    desk.wait_text("ticket-2", "Timed out before an answer: What should the reply say?");
    let refund_again =
        asks.iter().find(|a| a["id"] == refund["id"]).expect("the refund card is raised again");
    assert_eq!(refund_again["hash"], refund["hash"]);
    let (status, _) = desk.answer(refund_again, "allow-1", json!({"optionIds": ["allow"]}));
    assert_eq!(status, 200);
    desk.wait_text("ticket-2", "Refund of 50 issued");
}

#[test]
fn desk_history_pages_rows_and_items() {
    let dir = TestDir::new("history");
    let desk = Desk::start(&dir, &["--turn-ms", "100"]);
    assert_eq!(desk.send("ticket-1", "s-1", "hello").0, 200);
    desk.wait_text("ticket-1", "Got it: hello");
    let (status, page) = desk.get("/v1/history?limit=1");
    assert_eq!(status, 200, "{page}");
    assert_eq!(page["rows"].as_array().unwrap().len(), 1);
    assert_eq!(page["rows"][0]["id"], "ticket-1");
    assert_eq!(page["rows"][0]["state"], "open");
    assert_eq!(page["rows"][0]["tabId"], "support:main");
    let next = page["next"].as_str().expect("a next cursor").to_owned();
    let (_, page) = desk.get(&format!("/v1/history?limit=1&after={next}"));
    assert_eq!(page["rows"][0]["id"], "announcements");
    assert!(page.get("next").is_none());

    let (status, conv) = desk.get("/v1/history/ticket-1?limit=1");
    assert_eq!(status, 200, "{conv}");
    assert_eq!(conv["items"][0]["kind"], "user");
    assert_eq!(conv["items"][0]["text"], "hello");
    let next = conv["next"].as_str().unwrap().to_owned();
    let (_, conv) = desk.get(&format!("/v1/history/ticket-1?limit=10&after={next}"));
    assert_eq!(conv["items"][0]["text"], "Got it: hello");
    assert!(conv["items"][0].get("partial").is_none());
    assert_eq!(conv["row"]["items"], 2);
    assert_eq!(desk.get("/v1/history/nobody").0, 404);
}

/// The welcome on the announcements pane, in its view and in history.
fn welcomes(desk: &Desk) -> (usize, usize) {
    let shown = desk.items("announcements").iter().filter(|i| i["id"] == "welcome").count();
    let (status, page) = desk.get("/v1/history/announcements");
    assert_eq!(status, 200, "{page}");
    let kept = page["items"].as_array().unwrap().iter().filter(|i| i["id"] == "welcome").count();
    (shown, kept)
}

#[test]
fn the_welcome_is_shown_once_even_after_a_first_start_that_failed_before_serving() {
    let dir = TestDir::new("welcome");
    // A first start that seeds the desk's store, then fails to serve (a
    // socket folder others can read is refused).
    let open_folder = dir.0.join("open");
    std::fs::create_dir_all(&open_folder).unwrap();
    std::fs::set_permissions(&open_folder, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let socket = open_folder.join("app.sock");
    let failed = std::process::Command::new(desk_support::desk_binary())
        .args(["--socket", socket.to_str().unwrap(), "--data", &dir.data()])
        .env_remove("DESK_RECEIPTS_URL")
        .output()
        .unwrap();
    assert!(
        !failed.status.success(),
        "the first start is refused: {}",
        String::from_utf8_lossy(&failed.stderr)
    );

    let desk = Desk::start(&dir, &[]);
    assert_eq!(welcomes(&desk), (1, 1), "the welcome comes on the next start");
    desk.kill();
    let desk = Desk::start(&dir, &[]);
    assert_eq!(welcomes(&desk), (1, 1), "kept once, shown once");
}
