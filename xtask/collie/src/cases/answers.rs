//! §7.1 the answer check order, answers that do not fit, `confirmAlways`,
//! the answer receipt.

use serde_json::{Value, json};

use super::Ctx;
use crate::check::{
    CaseResult, answer, answer_ok, check_answered, cut, ensure, mark, raise, rid, str_of, wait_answer_echo,
};
use crate::desk::Transport;

const P: &str = "ticket-1";

pub(crate) async fn answer_decided_ask_is_ask_closed_before_hash_check(cx: Ctx) -> CaseResult {
    let c = cx.client()?;
    let ask = raise(&c, P, "choice").await?;
    answer_ok(&c, &ask, json!({"optionIds": ["no"]})).await?;
    let stale = "c".repeat(64);
    answer(&c, str_of(&ask, "id")?, &rid("late"), json!({"optionIds": ["nope"]}), Some(&stale))
        .await?
        .refused(409, "ask-closed")?;
    Ok(())
}

pub(crate) async fn answer_stale_hash_checked_before_fit(cx: Ctx) -> CaseResult {
    let c = cx.client()?;
    let ask = raise(&c, P, "choice").await?;
    let stale = "d".repeat(64);
    let r = answer(&c, str_of(&ask, "id")?, &rid("a"), json!({"optionIds": ["maybe"]}), Some(&stale)).await;
    answer_ok(&c, &ask, json!({"optionIds": ["no"]})).await?;
    r?.refused(409, "hash-mismatch")?;
    Ok(())
}

pub(crate) async fn answer_misfit_400_stores_nothing_then_same_id_succeeds(cx: Ctx) -> CaseResult {
    let c = cx.client()?;
    let ask = raise(&c, P, "choice").await?;
    let id = str_of(&ask, "id")?;
    let hash = str_of(&ask, "hash")?;
    let request_id = rid("misfit");
    for misfit in [
        json!({"optionIds": ["maybe"]}),
        json!({"optionIds": ["yes", "no"]}),
        json!({"optionIds": []}),
        json!({"text": "yes"}),
    ] {
        let r = answer(&c, id, &request_id, misfit.clone(), Some(hash)).await?;
        if let Err(why) = r.refused(400, "bad-request") {
            let _ = answer_ok(&c, &ask, json!({"optionIds": ["no"]})).await;
            return Err(format!("choice answered {misfit}: {why}"));
        }
    }
    let m = mark(&c, P).await?;
    let r = answer(&c, id, &request_id, json!({"optionIds": ["yes"]}), Some(hash)).await?;
    check_answered(r.ok()?, id, &request_id, false)?;
    wait_answer_echo(&c, P, m, &json!({"optionIds": ["yes"]})).await?;
    Ok(())
}

pub(crate) async fn answer_misfit_multi_and_form_400(cx: Ctx) -> CaseResult {
    let c = cx.client()?;
    let multi = raise(&c, P, "multi").await?;
    let mut wrong = Vec::new();
    for misfit in [json!({"optionIds": []}), json!({"optionIds": ["purple"]}), json!({"values": {}})] {
        let r = answer(&c, str_of(&multi, "id")?, &rid("m"), misfit.clone(), Some(str_of(&multi, "hash")?))
            .await?;
        if r.refused(400, "bad-request").is_err() {
            wrong.push(format!("multi {misfit}: {} {}", r.status, r.body_text()));
        }
    }
    answer_ok(&c, &multi, json!({"optionIds": ["green"]})).await?;
    let form = raise(&c, P, "form").await?;
    for misfit in [
        json!({"values": {"qty": 2, "gift": true, "size": "m"}}),
        json!({"values": {"name": "Ana", "qty": "two"}}),
        json!({"values": {"name": "Ana", "gift": "yes"}}),
        json!({"values": {"name": "Ana", "size": "xl"}}),
    ] {
        let r =
            answer(&c, str_of(&form, "id")?, &rid("f"), misfit.clone(), Some(str_of(&form, "hash")?)).await?;
        if r.refused(400, "bad-request").is_err() {
            wrong.push(format!("form {misfit}: {} {}", r.status, r.body_text()));
        }
    }
    answer_ok(&c, &form, json!({"values": {"name": "Ana"}})).await?;
    ensure!(wrong.is_empty(), "answers that do not fit must be 400: {}", wrong.join("; "));
    Ok(())
}

pub(crate) async fn answer_confirm_always_for_allow_always(cx: Ctx) -> CaseResult {
    let c = cx.client()?;
    let ask = raise(&c, P, "approve").await?;
    let id = str_of(&ask, "id")?.to_owned();
    let hash = str_of(&ask, "hash")?.to_owned();
    let post = |answer_body: Value, confirm: Option<bool>, request_id: String| {
        let mut body = json!({"requestId": request_id, "answer": answer_body, "hash": hash});
        if let Some(confirm) = confirm {
            body["confirmAlways"] = json!(confirm);
        }
        let c = c.clone();
        let path = format!("/v1/asks/{id}");
        async move { c.post(&path, &body).await }
    };
    let result = async {
        if cx.transport() == Transport::Tls {
            // Over HTTPS there is no allow-always: the option is not offered, and picking it does not fit.
            let always: Vec<&Value> = ask["options"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|o| o.get("always").is_some())
                .collect();
            ensure!(
                always.is_empty(),
                "the HTTPS approve card offers always options: {}",
                cut(&ask["options"])
            );
            post(json!({"optionIds": ["allow-always"]}), Some(true), rid("c"))
                .await?
                .refused(400, "bad-request")?;
            let m = mark(&c, P).await?;
            let request_id = rid("c");
            let r = post(json!({"optionIds": ["allow"]}), Some(true), request_id.clone()).await?;
            check_answered(r.ok()?, &id, &request_id, false)?;
            wait_answer_echo(&c, P, m, &json!({"optionIds": ["allow"]})).await?;
            return Ok(());
        }
        let always = ask["options"].as_array().into_iter().flatten().find(|o| o["id"] == "allow-always");
        ensure!(
            always.is_some_and(|o| o["always"] == true),
            "the socket approve card has no allow-always option with always: true: {}",
            cut(&ask["options"])
        );
        post(json!({"optionIds": ["allow-always"]}), None, rid("c"))
            .await?
            .refused(409, "confirm-required")?;
        post(json!({"optionIds": ["allow-always"]}), Some(false), rid("c"))
            .await?
            .refused(409, "confirm-required")?;
        // Fit (6) is checked before confirmation (7).
        post(json!({"optionIds": ["allow-always", "deny"]}), None, rid("c"))
            .await?
            .refused(400, "bad-request")?;
        let m = mark(&c, P).await?;
        let request_id = rid("c");
        let r = post(json!({"optionIds": ["allow-always"]}), Some(true), request_id.clone()).await?;
        check_answered(r.ok()?, &id, &request_id, false)?;
        wait_answer_echo(&c, P, m, &json!({"optionIds": ["allow-always"]})).await?;
        Ok(())
    }
    .await;
    if result.is_err() {
        let _ = answer_ok(&c, &ask, json!({"optionIds": ["deny"]})).await;
    }
    result
}

pub(crate) async fn answer_receipt_replayed_before_ask_checks(cx: Ctx) -> CaseResult {
    let c = cx.client()?;
    let ask = raise(&c, P, "choice").await?;
    let id = str_of(&ask, "id")?;
    let request_id = rid("replay");
    let first =
        answer(&c, id, &request_id, json!({"optionIds": ["yes"]}), Some(str_of(&ask, "hash")?)).await?;
    let first = first.ok()?.clone();
    check_answered(&first, id, &request_id, false)?;
    // The same request id, even with another answer and no hash: the receipt, replayed.
    let again = answer(&c, id, &request_id, json!({"optionIds": ["no"]}), None).await?;
    let again = again.ok()?.clone();
    let mut want = first.clone();
    want["replayed"] = json!(true);
    ensure!(
        again == want,
        "replay body {} differs from the first with replayed true {}",
        cut(&again),
        cut(&want)
    );
    Ok(())
}
