//! §7 asks: the cards as shown, checked against our own ask id and hash,
//! and answered once as a careful phone would (`--writes`).

use std::time::Duration;

use serde_json::{Value, json};

use super::{Ctx, pane_now};
use crate::conformance::check::{
    CaseResult, answer as post_answer, arr_of, ask_hash, ask_id_for, bool_of, check_answered, cut, ensure,
    events_after, ids, is_lower_hex, open_asks, pane_in, replayed, rid, state, str_of, time_of, u64_of,
    wait_for,
};
use crate::conformance::client::Client;

/// What every ask object carries (§7), checked against our own ask id and hash.
pub(crate) fn check_card(ask: &Value) -> CaseResult {
    let id = str_of(ask, "id")?;
    ensure!(is_lower_hex(id, 32), "ask id {id:?} is not 32 lowercase hex");
    let pane = str_of(ask, "pane")?;
    let kind = str_of(ask, "kind")?;
    ensure!(["choice", "multi", "text", "form"].contains(&kind), "ask {id}: kind {kind:?}");
    let tool_call = str_of(ask, "toolCallId")?;
    ensure!(id == ask_id_for(pane, tool_call), "ask id {id} is not askIdFor({pane}, {tool_call})");
    str_of(ask, "itemId")?;
    let title = str_of(ask, "title")?;
    ensure!(!title.is_empty() && title.len() <= 256, "ask {id}: title {title:?}");
    time_of(ask, "createdAt")?;
    if ask.get("expiresAt").is_some() {
        time_of(ask, "expiresAt")?;
    }
    bool_of(ask, "readable")?;
    bool_of(ask, "cleaned")?;
    let nulls: Vec<&String> =
        ask.as_object().into_iter().flatten().filter(|(_, v)| v.is_null()).map(|(k, _)| k).collect();
    ensure!(nulls.is_empty(), "ask {id}: absent optional fields are omitted, never null: {nulls:?}");
    let hash = str_of(ask, "hash")?;
    ensure!(is_lower_hex(hash, 64), "ask {id}: hash {hash:?} is not 64 lowercase hex");
    let want = ask_hash(ask);
    ensure!(hash == want, "ask {id}: hash {hash} differs from SHA-256 of its canonical JSON ({want})");
    if kind == "choice" || kind == "multi" {
        let options = arr_of(ask, "options")?;
        ensure!(!options.is_empty(), "ask {id}: a {kind} without options");
        for o in options {
            str_of(o, "id")?;
            str_of(o, "label")?;
        }
    }
    if kind == "form" {
        for f in arr_of(ask, "fields")? {
            str_of(f, "id")?;
            str_of(f, "type")?;
        }
    }
    if let Some(tool) = ask.get("tool") {
        for f in ["name", "call", "args"] {
            ensure!(tool.get(f).is_some(), "ask {id}: the tool lacks `{f}`: {}", cut(tool));
        }
    }
    Ok(())
}

pub(crate) async fn asks_in_the_state_are_well_formed(cx: Ctx) -> CaseResult {
    let s = state(&cx.client()).await?;
    for ask in open_asks(&s) {
        check_card(&ask)?;
        let pane = ask["pane"].as_str().unwrap_or("");
        let row =
            pane_in(&s, pane).ok_or_else(|| format!("ask {} names pane {pane}, not in panes", ask["id"]))?;
        ensure!(
            row["openAsks"].as_array().is_some_and(|o| o.contains(&ask["id"])),
            "pane {pane}: openAsks {} lacks {}",
            row["openAsks"],
            ask["id"]
        );
    }
    Ok(())
}

/// The option a careful phone picks: a decline when there is one, else the first.
fn decline(ask: &Value) -> Value {
    // Never an allow-always option: a careful phone does not pick one to
    // decline (and it would need the second tap, `confirmAlways`).
    let once: Vec<Value> =
        ask["options"].as_array().into_iter().flatten().filter(|o| o["always"] != true).cloned().collect();
    let options = ids(&once);
    let pick = ["deny", "no", "decline", "reject", "cancel", "skip"]
        .iter()
        .find_map(|d| options.iter().find(|o| o.eq_ignore_ascii_case(d)))
        .or_else(|| options.first())
        .cloned()
        .unwrap_or_default();
    match ask["kind"].as_str() {
        Some("text") => json!({"text": "conformance"}),
        Some("form") => {
            let mut values = serde_json::Map::new();
            for f in ask["fields"].as_array().into_iter().flatten() {
                if f["required"] != true {
                    continue;
                }
                let id = f["id"].as_str().unwrap_or_default().to_owned();
                let value = match f["type"].as_str() {
                    Some("number") => f.get("min").cloned().unwrap_or(json!(0)),
                    Some("bool") => json!(false),
                    Some("select") => f["options"][0]["id"].clone(),
                    _ => json!("conformance"),
                };
                values.insert(id, value);
            }
            json!({"values": values})
        }
        _ => json!({"optionIds": [pick]}),
    }
}

/// Answers one open card as a careful phone would and checks what follows.
pub(crate) async fn answer_card(c: &Client, ask: &Value) -> CaseResult {
    check_card(ask)?;
    let id = str_of(ask, "id")?;
    let pane = str_of(ask, "pane")?;
    let hash = str_of(ask, "hash")?;
    let m = u64_of(&pane_now(c, pane).await?, "lastSeq")?;
    let request_id = rid("answer");
    let answer = decline(ask);
    let r = post_answer(c, id, &request_id, answer.clone(), Some(hash)).await?;
    if r.status == 409 && r.json["code"] == "ask-closed" {
        return Ok(()); // it closed meanwhile (an expiry, the program)
    }
    let first = r.ok().map_err(|e| format!("answering {} with {answer}: {e}", cut(ask)))?.clone();
    check_answered(&first, id, &request_id, false)?;
    let closed = wait_for(&format!("an ask-closed event for {id}"), Duration::from_secs(10), || async {
        Ok(events_after(c, pane, m)
            .await?
            .into_iter()
            .find(|e| e["type"] == "ask-closed" && e["askId"] == id))
    })
    .await?;
    ensure!(
        closed["decidedBy"] == "phone" && closed["outcome"] == "answered",
        "ask-closed event {}",
        cut(&closed)
    );
    // The receipt, replayed; a second request id finds the card closed.
    let again = post_answer(c, id, &request_id, answer.clone(), Some(hash)).await?;
    ensure!(*again.ok()? == replayed(&first), "the answer's replay: {}", again.body_text());
    let second = post_answer(c, id, &rid("second"), answer, Some(hash)).await?;
    let body = second.refused(409, "ask-closed")?;
    ensure!(body["decidedBy"] == "phone", "ask-closed decidedBy {} (expected phone)", body["decidedBy"]);
    let s = state(c).await?;
    ensure!(!ids(&open_asks(&s)).contains(&id.to_owned()), "the answered ask {id} is still open");
    Ok(())
}

pub(crate) async fn asks_raised_are_answered_once(cx: Ctx) -> CaseResult {
    let c = cx.client();
    let asks = open_asks(&state(&c).await?);
    for ask in &asks {
        answer_card(&c, ask).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_careful_phone_declines_when_it_can() {
        let ask = json!({"kind": "choice", "options": [{"id": "allow"}, {"id": "deny"}]});
        assert_eq!(decline(&ask), json!({"optionIds": ["deny"]}));
        let ask = json!({"kind": "choice", "options": [{"id": "red"}, {"id": "blue"}]});
        assert_eq!(decline(&ask), json!({"optionIds": ["red"]}));
        // Never an allow-always option, even first.
        let ask = json!({"kind": "choice", "options": [{"id": "switch", "always": true}, {"id": "keep"}]});
        assert_eq!(decline(&ask), json!({"optionIds": ["keep"]}));
        let ask = json!({"kind": "form", "fields": [{"id": "n", "type": "number", "required": true, "min": 2},
                                                     {"id": "s", "type": "text"}]});
        assert_eq!(decline(&ask), json!({"values": {"n": 2}}));
    }
}
