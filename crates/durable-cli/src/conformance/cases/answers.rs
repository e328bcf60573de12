//! §7.1 answers that cannot act: malformed bodies, unknown asks with and
//! without a hash.

use bytes::Bytes;
use serde_json::json;

use super::{Ctx, json_bytes, unknown_ask};
use crate::conformance::check::{CaseResult, answer as post_answer, ensure, rid};

pub(crate) async fn answer_malformed_body_400_before_anything_else(cx: Ctx) -> CaseResult {
    let c = cx.client();
    let path = format!("/v1/asks/{}", unknown_ask());
    let hash = "a".repeat(64);
    let bodies: Vec<(&str, Bytes)> = vec![
        ("not JSON", Bytes::from_static(b"not json")),
        ("requestId missing", json_bytes(json!({"answer": {"optionIds": ["yes"]}, "hash": hash}))),
        (
            "requestId breaking the ID rule",
            json_bytes(json!({"requestId": "a b", "answer": {"optionIds": ["yes"]}, "hash": hash})),
        ),
        ("answer missing", json_bytes(json!({"requestId": rid("m"), "hash": hash}))),
        ("answer not an object", json_bytes(json!({"requestId": rid("m"), "answer": "yes", "hash": hash}))),
        (
            "optionIds not a list",
            json_bytes(json!({"requestId": rid("m"), "answer": {"optionIds": "yes"}, "hash": hash})),
        ),
        (
            "optionIds not strings",
            json_bytes(json!({"requestId": rid("m"), "answer": {"optionIds": [1]}, "hash": hash})),
        ),
        (
            "hash null",
            json_bytes(json!({"requestId": rid("m"), "answer": {"optionIds": ["yes"]}, "hash": null})),
        ),
        (
            "hash not 64 hex",
            json_bytes(json!({"requestId": rid("m"), "answer": {"optionIds": ["yes"]}, "hash": "abc"})),
        ),
        (
            "confirmAlways not a bool",
            json_bytes(
                json!({"requestId": rid("m"), "answer": {"optionIds": ["yes"]}, "hash": hash, "confirmAlways": "yes"}),
            ),
        ),
    ];
    let mut wrong = Vec::new();
    for (what, body) in bodies {
        let r = c.post_raw(&path, body).await?;
        if r.refused(400, "bad-request").is_err() {
            wrong.push(format!("{what}: {} {}", r.status, r.body_text()));
        }
    }
    ensure!(wrong.is_empty(), "malformed answers to an unknown ask must be 400 first: {}", wrong.join("; "));
    Ok(())
}

pub(crate) async fn answer_unknown_ask_with_hash_202_held(cx: Ctx) -> CaseResult {
    let c = cx.client();
    let id = unknown_ask();
    let request_id = rid("held");
    let r = post_answer(&c, &id, &request_id, json!({"optionIds": ["yes"]}), Some(&"b".repeat(64))).await?;
    let body = r.ok_with(202)?;
    ensure!(body["result"] == "held", "result {} (expected held)", body["result"]);
    ensure!(body["requestId"] == request_id.as_str(), "requestId {}", body["requestId"]);
    let again = post_answer(&c, &id, &request_id, json!({"text": "other"}), None).await?;
    let body = again.ok_with(202)?;
    ensure!(body["result"] == "held", "repeat of a held request id: result {}", body["result"]);
    Ok(())
}

pub(crate) async fn answer_unknown_ask_without_hash_404(cx: Ctx) -> CaseResult {
    post_answer(&cx.client(), &unknown_ask(), &rid("nohash"), json!({"optionIds": ["yes"]}), None)
        .await?
        .refused(404, "not-found")?;
    Ok(())
}
