//! The recipes driven the way Collie would, each in its own process: the
//! echo chat (a streamed reply, a steer, a stop), the approval button (a
//! card answered from the phone, then history) and the two-pane shop. Each
//! runs as a user without privileges (`nobody` when the tests run as root),
//! as users run them.
mod agent;

use agent::{Agent, as_user, eventually, unprivileged};
use serde_json::json;

#[test]
fn echo_streams_a_reply_a_steer_joins_it_and_a_stop_keeps_what_it_had() {
    let a = Agent::start_as("echo", unprivileged());
    let (_, hello) = a.curl(&["http://collie/hello"]);
    assert_eq!((hello["caps"]["send"].clone(), hello["caps"]["rename"].clone()), (json!(true), json!(false)));
    let send = json!({"requestId": "r-1", "text": "one two three four"});
    let (status, r) = a.post("/v1/panes/chat/send", send);
    assert_eq!((status, r["result"].clone()), (200, json!("sent")), "{r}");
    let (_, r) = a.post("/v1/panes/chat/steer", json!({"requestId": "s-1", "text": "left"}));
    assert_eq!(r["result"], "steered", "{r}");
    let reply = eventually("the final reply", || {
        let item = a.item("chat", "reply-r-1");
        (item["text"].is_string() && item.get("partial").is_none()).then_some(item)
    });
    assert_eq!(reply["text"], "You said: one [steered: left] two three four");

    let (_, r) = a.post("/v1/panes/chat/send", json!({"requestId": "r-2", "text": "a b c d e f g h"}));
    assert_eq!(r["result"], "sent", "{r}");
    eventually("a partial reply", || a.item("chat", "reply-r-2")["partial"].as_bool());
    let (_, r) = a.post("/v1/panes/chat/stop", json!({"requestId": "x-1"}));
    assert_eq!(r["result"], "stopped", "{r}");
    let stopped = eventually("the reply after the stop", || {
        let item = a.item("chat", "reply-r-2");
        item.get("partial").is_none().then_some(item)
    });
    let text = stopped["text"].as_str().unwrap();
    assert!(text.starts_with("You said: a") && !text.ends_with(" h"), "{text}");
    eventually("the pane idle", || {
        let (_, s) = a.curl(&["http://collie/v1/state"]);
        (s["panes"][0]["state"] == "idle").then_some(())
    });
}

#[test]
fn approval_raises_a_card_for_the_button_and_the_phones_allow_issues_the_refund() {
    let a = Agent::start_as("approval", unprivileged());
    // The longest request id the wire takes (128 bytes): the card's ids fit.
    let press = format!("b-{}", "1".repeat(126));
    let (_, r) = a.post("/v1/panes/orders/actions/refund", json!({"requestId": press}));
    assert_eq!(r["result"], "done", "{r}");
    let (_, state) = a.curl(&["http://collie/v1/state"]);
    let ask = state["asks"][0].clone();
    assert_eq!(ask["toolCallId"], press.as_str(), "{ask}");
    assert_eq!(ask["title"], "refund wants to run");
    assert_eq!(ask["tool"]["call"], "refund(order: \"5521\", amount: 40)");
    let answer = json!({"requestId": "a-1", "answer": {"optionIds": ["allow"]}, "hash": ask["hash"]});
    let (status, r) = a.post(&format!("/v1/asks/{}", ask["id"].as_str().unwrap()), answer);
    assert_eq!((status, r["result"].clone()), (200, json!("answered")), "{r}");
    let notice = eventually("the refund notice", || {
        let item = a.item("orders", &format!("notice-{}", ask["id"].as_str().unwrap()));
        item["text"].as_str().map(str::to_owned)
    });
    assert_eq!(notice, "Refund of 40 issued");
    let (_, history) = a.curl(&["http://collie/v1/history/orders"]);
    assert_eq!(history["items"][0]["text"], "Refund of 40 issued", "{history}");
}

/// The approval recipe on a data folder of its own, its refund card open
/// when it is killed (`SIGKILL`): the folder, the data path, the user, the
/// card and the socket it listened on.
struct KilledWithACard {
    dir: std::path::PathBuf,
    data: String,
    user: Option<u32>,
    ask: serde_json::Value,
    id: String,
    socket: String,
}

fn approval_killed_with_its_card_open(name: &str) -> KilledWithACard {
    let dir = Agent::fresh_dir(name);
    let data = dir.join("data").to_str().unwrap().to_owned();
    let user = unprivileged();
    let a = Agent::start_in("approval", user, &dir, &["--data", &data]);
    let (_, r) = a.post("/v1/panes/orders/actions/refund", json!({"requestId": "b-1"}));
    assert_eq!(r["result"], "done", "{r}");
    let (_, state) = a.curl(&["http://collie/v1/state"]);
    let ask = state["asks"][0].clone();
    let id = ask["id"].as_str().unwrap().to_owned();
    let socket = a.socket.clone();
    a.kill9();
    KilledWithACard { dir, data, user, ask, id, socket }
}

#[test]
fn approvals_card_survives_a_sigkill_and_an_allow_sent_while_the_agent_is_down_issues_the_refund() {
    let KilledWithACard { dir, data, user, ask, id, socket } =
        approval_killed_with_its_card_open("approval-restart");
    let data = data.as_str();

    // The phone answers while the agent is down: refused (nobody listens).
    let answer = json!({"requestId": "a-1", "answer": {"optionIds": ["allow"]}, "hash": ask["hash"]});
    let (status, _) = agent::curl_as(user, &socket, &["http://collie/v1/state"]);
    assert_eq!(status, 0, "nothing listens on {socket}");

    // Started again on the same data: the same card, by the same id.
    let a = Agent::start_in("approval", user, &dir, &["--data", data]);
    let (_, state) = a.curl(&["http://collie/v1/state"]);
    assert_eq!(state["asks"].as_array().map(Vec::len), Some(1), "{state}");
    assert_eq!(state["asks"][0]["id"], id.as_str());
    assert_eq!(state["asks"][0]["hash"], ask["hash"]);
    assert_eq!(state["asks"][0]["tool"]["call"], "refund(order: \"5521\", amount: 40)");
    // Collie sends the answer again, with the same request id.
    let (status, r) = a.post(&format!("/v1/asks/{id}"), answer.clone());
    assert_eq!((status, r["result"].clone()), (200, json!("answered")), "{r}");
    let notice = eventually("the refund notice", || {
        a.item("orders", &format!("notice-{id}"))["text"].as_str().map(str::to_owned)
    });
    assert_eq!(notice, "Refund of 40 issued");

    // Once decided, the card is not kept: another restart raises nothing,
    // and the answer's repeat replays its first answer.
    a.kill9();
    let a = Agent::start_in("approval", user, &dir, &["--data", data]);
    let (_, state) = a.curl(&["http://collie/v1/state"]);
    assert_eq!(state["asks"], json!([]), "{state}");
    let (status, r) = a.post(&format!("/v1/asks/{id}"), answer);
    assert_eq!((status, r["replayed"].clone()), (200, json!(true)), "{r}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_allow_sent_after_a_restart_before_the_card_is_back_is_held_and_issues_the_refund() {
    let KilledWithACard { dir, data, user, ask, id, .. } =
        approval_killed_with_its_card_open("approval-held");
    let data = data.as_str();

    // Back, but its card comes back 3 s after it serves: the Allow in between is held.
    let a = Agent::start_in("approval", user, &dir, &["--data", data, "--raise-delay-ms", "3000"]);
    let answer = json!({"requestId": "a-1", "answer": {"optionIds": ["allow"]}, "hash": ask["hash"]});
    let (status, r) = a.post(&format!("/v1/asks/{id}"), answer.clone());
    assert_eq!((status, r["result"].clone()), (202, json!("held")), "{r}");
    let notice = eventually("the refund notice", || {
        a.item("orders", &format!("notice-{id}"))["text"].as_str().map(str::to_owned)
    });
    assert_eq!(notice, "Refund of 40 issued");
    let (status, r) = a.post(&format!("/v1/asks/{id}"), answer);
    assert_eq!((status, r["replayed"].clone()), (200, json!(true)), "the held answer was applied: {r}");
    drop(a);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `curl` over HTTPS with the bearer token (the certificate is self-signed).
fn curl_https(token: &str, args: &[&str]) -> (u16, serde_json::Value) {
    let out = std::process::Command::new("curl")
        .args(["-sS", "-k", "-H", &format!("Authorization: Bearer {token}"), "-w", "\n%{http_code}"])
        .args(args)
        .output()
        .expect("curl runs");
    let text = String::from_utf8_lossy(&out.stdout);
    let (body, code) = text.rsplit_once('\n').expect("status line");
    (code.trim().parse().expect("status"), serde_json::from_str(body).unwrap_or(serde_json::Value::Null))
}

#[test]
fn the_two_pane_shop_chats_and_refunds_on_the_socket_and_over_https() {
    let a = Agent::start_as("shop", unprivileged());
    let (_, hello) = a.curl(&["http://collie/hello"]);
    for cap in ["send", "steer", "abort", "actions", "history"] {
        assert_eq!(hello["caps"][cap], true, "{cap}: {hello}");
    }
    let (_, r) = a.post("/v1/panes/chat/send", json!({"requestId": "r-1", "text": "hi there"}));
    assert_eq!(r["result"], "sent", "{r}");
    eventually("the chat's reply", || {
        (a.item("chat", "reply-r-1")["text"] == "You said: hi there").then_some(())
    });
    let press = format!("b-{}", "2".repeat(126));
    let (_, r) = a.post("/v1/panes/orders/actions/refund", json!({"requestId": press}));
    assert_eq!(r["result"], "done", "{r}");
    let (_, state) = a.curl(&["http://collie/v1/state"]);
    let ask = state["asks"][0].clone();
    let answer = json!({"requestId": "a-1", "answer": {"optionIds": ["deny"]}, "hash": ask["hash"]});
    a.post(&format!("/v1/asks/{}", ask["id"].as_str().unwrap()), answer);
    eventually("the refund's notice", || {
        let notice = a.item("orders", &format!("notice-{}", ask["id"].as_str().unwrap()));
        (notice["text"] == "No refund (phone)").then_some(())
    });
    let (_, history) = a.curl(&["http://collie/v1/history/orders"]);
    assert_eq!(history["items"][0]["text"], "No refund (phone)", "{history}");
    // History is the SDK's: both panes are rows, and each pane's sessionId
    // reads its conversation.
    let (_, rows) = a.curl(&["http://collie/v1/history"]);
    let mut ids: Vec<&str> =
        rows["rows"].as_array().unwrap().iter().filter_map(|r| r["id"].as_str()).collect();
    ids.sort_unstable();
    assert_eq!(ids, ["chat", "orders"], "{rows}");
    let (_, state) = a.curl(&["http://collie/v1/state"]);
    let chat = state["panes"][0].clone();
    assert_eq!((chat["id"].as_str(), chat["sessionId"].as_str()), (Some("chat"), Some("chat")), "{state}");
    let (status, history) = a.curl(&["http://collie/v1/history/chat"]);
    assert_eq!(status, 200, "{history}");
    let items = history["items"].as_array().cloned().unwrap_or_default();
    let reply = items.iter().find(|i| i["id"] == "reply-r-1");
    assert_eq!(reply.map(|i| i["text"].clone()), Some(json!("You said: hi there")), "{history}");
    drop(a);

    // The same agent over HTTPS, behind its one flag.
    let token = "7c3e1f0a9b8d7c6e5f4a3b2c1d0e9f8a7b6c5d4e3f2a1b0c";
    let mut child = as_user(unprivileged(), agent::example("shop"))
        .args(["--https", "127.0.0.1:0"])
        .env("COLLIE_TOKEN", token)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("the example was built by cargo test");
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(child.stdout.take().unwrap()));
    let first = lines.next().expect("a line").expect("utf-8");
    let url = first.strip_prefix("listening ").expect("listening <url>").to_owned();
    let (status, _) = curl_https("wrong-token-wrong-token-wrong-token", &[&format!("{url}/v1/state")]);
    assert_eq!(status, 401);
    let (status, hello) = curl_https(token, &[&format!("{url}/hello")]);
    assert_eq!((status, hello["caps"]["actions"].clone()), (200, json!(true)), "{hello}");
    let body = json!({"requestId": "r-1", "text": "over tls"}).to_string();
    let (_, r) = curl_https(
        token,
        &["-H", "Content-Type: application/json", "-d", &body, &format!("{url}/v1/panes/chat/send")],
    );
    assert_eq!(r["result"], "sent", "{r}");
    let _ = child.kill();
    let _ = child.wait();
}
