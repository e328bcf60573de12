//! The desk over HTTPS (`--listen` with `--self-signed`, the token from
//! `COLLIE_TOKEN`): the token is the only barrier, so `/ask approve` offers
//! no allow-always option there.

mod desk_support;

use desk_support::{Desk, TestDir};
use serde_json::json;

const TOKEN: &str = "desk-test-token-0123456789abcdef-0123456789";

#[test]
fn desk_over_https_takes_the_token_and_offers_no_allow_always() {
    let dir = TestDir::new("https");
    let desk = Desk::start_https(&dir, TOKEN, &[]);
    let (status, hello) = desk.get("/hello");
    assert_eq!(status, 200, "{hello}");
    assert_eq!(hello["host"], "desk");
    assert_eq!(hello["callerCheck"], "token");

    // Without the token: 401 and nothing else.
    let out = std::process::Command::new("curl")
        .args(["-sk", "-o", "/dev/null", "-w", "%{http_code}", &format!("{}/hello", desk.address)])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "401");

    let (status, sent) = desk.send("ticket-1", "s-1", "/ask approve");
    assert_eq!(status, 200, "{sent}");
    let ask = desk.wait_ask("ticket-1");
    assert_eq!(ask["options"], json!([{"id": "allow", "label": "Allow"}, {"id": "deny", "label": "Deny"}]));
    assert_eq!(ask["tool"]["name"], "escalate");
    let (status, _) = desk.answer(&ask, "a-1", json!({"optionIds": ["deny"]}));
    assert_eq!(status, 200);
    desk.wait_text("ticket-1", r#"Answer: {"optionIds":["deny"]}"#);
}
