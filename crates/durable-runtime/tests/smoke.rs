//! A first pass through the harness: hello, state, an ask answered.
use durable_runtime::test_util as harness;

use durable_runtime::types::{AskOption, AskSpec};
use harness::Harness;
use serde_json::json;

#[tokio::test]
async fn hello_state_and_an_answer_end_to_end() {
    let h = Harness::new();
    let pane = h.pane();
    let hello = h.get("/hello").await;
    assert_eq!(hello.status, 200);
    assert_eq!(hello.json["ready"], false);
    h.core.ready();
    assert_eq!(h.get("/hello").await.json["ready"], true);

    let ask = pane
        .ask(AskSpec::choice(
            "deploy-1",
            "Deploy to staging?",
            [AskOption::new("yes", "Yes"), AskOption::new("no", "No")],
        ))
        .unwrap();
    let state = h.get("/v1/state").await;
    assert_eq!(state.status, 200);
    assert_eq!(state.json["asks"][0]["id"], ask.id());
    let r = h
        .post(
            &format!("/v1/asks/{}", ask.id()),
            json!({"requestId": "r-1", "answer": {"optionIds": ["yes"]}}),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.json);
    assert_eq!(r.json["result"], "answered");
    let answer = ask.await.unwrap();
    assert_eq!(answer.option_id(), Some("yes"));
    let again = h
        .post(
            &format!("/v1/asks/{}", "970f8a0b30368fbbcab73013d31d2d51"),
            json!({"requestId": "r-1", "answer": {"optionIds": ["yes"]}}),
        )
        .await;
    assert_eq!(again.status, 200);
    assert_eq!(again.json["replayed"], true);
}
