//! §7 asks: each kind end to end, the ask id and hash, expiry, hash mismatch,
//! single use.

use std::time::Duration;

use serde_json::{Value, json};

use super::Ctx;
use crate::check::{
    CaseResult, answer, answer_ok, arr_of, ask_hash, ask_id_for, bool_of, cut, ensure, ids, is_lower_hex,
    items_after, kind_is, mark, pane, raise, rid, state, str_of, time_of, wait_answer_echo, wait_ask_closed,
    wait_for, wire_time_ms,
};
use crate::desk::Transport;
use durable_cli::conformance::client::Client;

const P: &str = "ticket-1";

/// What every ask object carries (§7), checked against our own ask id and hash.
pub(crate) fn check_card(ask: &Value, pane: &str, kind: &str) -> CaseResult {
    let id = str_of(ask, "id")?;
    ensure!(is_lower_hex(id, 32), "ask id {id:?} is not 32 lowercase hex");
    ensure!(ask["pane"] == pane, "ask pane {} (expected {pane})", ask["pane"]);
    ensure!(ask["kind"] == kind, "ask kind {} (expected {kind})", ask["kind"]);
    let tool_call = str_of(ask, "toolCallId")?;
    ensure!(id == ask_id_for(pane, tool_call), "ask id {id} is not askIdFor({pane}, {tool_call})");
    str_of(ask, "itemId")?;
    let title = str_of(ask, "title")?;
    ensure!(!title.is_empty() && title.len() <= 256, "ask title {title:?}");
    time_of(ask, "createdAt")?;
    bool_of(ask, "readable")?;
    ensure!(ask["cleaned"] == false, "the desk's ask is clean, yet cleaned is {}", ask["cleaned"]);
    let nulls: Vec<&String> =
        ask.as_object().into_iter().flatten().filter(|(_, v)| v.is_null()).map(|(k, _)| k).collect();
    ensure!(nulls.is_empty(), "absent optional fields are omitted, never null: {nulls:?}");
    let hash = str_of(ask, "hash")?;
    ensure!(is_lower_hex(hash, 64), "ask hash {hash:?} is not 64 lowercase hex");
    let want = ask_hash(ask);
    ensure!(hash == want, "ask hash {hash} differs from SHA-256 of its canonical JSON ({want})");
    if let Some(tool) = ask.get("tool") {
        for f in ["name", "call", "args"] {
            ensure!(tool.get(f).is_some(), "the ask's tool lacks `{f}`: {}", cut(tool));
        }
    }
    Ok(())
}

fn option_ids(ask: &Value) -> Vec<String> {
    ask["options"].as_array().map(|o| ids(o)).unwrap_or_default()
}

/// Raise, check the card, answer with the hash, see the echo, the closing event,
/// and the ask gone from the state.
async fn end_to_end(
    c: &Client,
    spec: &str,
    kind: &str,
    card: impl Fn(&Value) -> CaseResult,
    reply: Value,
) -> CaseResult {
    let before = mark(c, P).await?;
    let ask = raise(c, P, spec).await?;
    check_card(&ask, P, kind)?;
    card(&ask)?;
    let id = str_of(&ask, "id")?.to_owned();
    let p = pane(c, P).await?;
    ensure!(
        p["openAsks"].as_array().is_some_and(|o| o.contains(&json!(id))),
        "openAsks {} lacks {id}",
        p["openAsks"]
    );
    let m = mark(c, P).await?;
    let raised = crate::check::events_after(c, P, before).await?;
    ensure!(
        raised.iter().any(|e| e["type"] == "ask" && e["ask"]["id"] == id.as_str()),
        "no `ask` event for {id} in the pane's events"
    );
    answer_ok(c, &ask, reply.clone()).await?;
    wait_answer_echo(c, P, m, &reply).await?;
    let closed = wait_ask_closed(c, P, m, &id).await?;
    ensure!(
        closed["decidedBy"] == "phone" && closed["outcome"] == "answered",
        "ask-closed event {}",
        cut(&closed)
    );
    time_of(&closed, "decidedAt")?;
    let s = state(c).await?;
    ensure!(!ids(arr_of(&s, "asks")?).contains(&id), "the answered ask {id} is still in the state's asks");
    Ok(())
}

pub(crate) async fn ask_choice_end_to_end(cx: Ctx) -> CaseResult {
    let c = cx.client()?;
    let card = |ask: &Value| {
        ensure!(
            ask["options"] == json!([{"id": "yes", "label": "Yes"}, {"id": "no", "label": "No"}]),
            "choice options {}",
            ask["options"]
        );
        ensure!(
            ask["readable"] == true,
            "a choice without an always option is readable, got {}",
            ask["readable"]
        );
        Ok(())
    };
    end_to_end(&c, "choice", "choice", card, json!({"optionIds": ["yes"]})).await
}

pub(crate) async fn ask_multi_end_to_end(cx: Ctx) -> CaseResult {
    let c = cx.client()?;
    let card = |ask: &Value| {
        ensure!(option_ids(ask) == ["red", "green", "blue"], "multi options {}", ask["options"]);
        ensure!(ask["readable"] == false, "multi is not readable, got {}", ask["readable"]);
        Ok(())
    };
    end_to_end(&c, "multi", "multi", card, json!({"optionIds": ["red", "blue"]})).await
}

pub(crate) async fn ask_text_end_to_end(cx: Ctx) -> CaseResult {
    let c = cx.client()?;
    let card = |ask: &Value| {
        ensure!(ask["readable"] == false, "text is not readable, got {}", ask["readable"]);
        Ok(())
    };
    end_to_end(&c, "text", "text", card, json!({"text": "Blue, size M — merci"})).await
}

pub(crate) async fn ask_form_end_to_end(cx: Ctx) -> CaseResult {
    let c = cx.client()?;
    let card = |ask: &Value| {
        let fields = arr_of(ask, "fields")?;
        ensure!(ids(fields) == ["name", "qty", "gift", "size"], "form fields {}", cut(&ask["fields"]));
        let types: Vec<&str> = fields.iter().filter_map(|f| f["type"].as_str()).collect();
        ensure!(types == ["text", "number", "bool", "select"], "form field types {types:?}");
        ensure!(fields[0]["required"] == true, "field name is required, got {}", fields[0]["required"]);
        ensure!(
            ids(arr_of(&fields[3], "options")?) == ["s", "m", "l"],
            "size options {}",
            fields[3]["options"]
        );
        ensure!(ask["readable"] == false, "form is not readable");
        Ok(())
    };
    let reply = json!({"values": {"name": "Ana", "qty": 2, "gift": true, "size": "m"}});
    end_to_end(&c, "form", "form", card, reply).await
}

pub(crate) async fn ask_approve_end_to_end(cx: Ctx) -> CaseResult {
    let c = cx.client()?;
    let tls = cx.transport() == Transport::Tls;
    let card = move |ask: &Value| {
        let tool = ask.get("tool").ok_or("the approve ask has no tool")?;
        ensure!(tool["args"].is_array(), "tool args {}", tool["args"]);
        let want: &[&str] = if tls { &["allow", "deny"] } else { &["allow", "allow-always", "deny"] };
        ensure!(option_ids(ask) == want, "approve options {:?} (expected {want:?})", option_ids(ask));
        ensure!(ask["readable"] == tls, "readable {} (true only without an always option)", ask["readable"]);
        Ok(())
    };
    end_to_end(&c, "approve", "choice", card, json!({"optionIds": ["allow"]})).await
}

pub(crate) async fn ask_expiry_closes_with_timeout_and_one_notice(cx: Ctx) -> CaseResult {
    let c = cx.client()?;
    let ask = raise(&c, P, "choice 1s").await?;
    let m = mark(&c, P).await?;
    let id = str_of(&ask, "id")?.to_owned();
    let title = str_of(&ask, "title")?.to_owned();
    let created = wire_time_ms(time_of(&ask, "createdAt")?).unwrap_or(0);
    let expires = wire_time_ms(time_of(&ask, "expiresAt")?).unwrap_or(0);
    ensure!(
        (800..=2000).contains(&(expires - created)),
        "`/ask choice 1s`: expiresAt - createdAt = {} ms",
        expires - created
    );
    wait_for("the expired ask to leave the state", Duration::from_secs(6), || async {
        Ok((!ids(&crate::check::open_asks(&state(&c).await?)).contains(&id)).then_some(()))
    })
    .await?;
    let closed = wait_ask_closed(&c, P, m, &id).await?;
    ensure!(
        closed["decidedBy"] == "timeout" && closed["outcome"] == "timeout",
        "ask-closed event {}",
        cut(&closed)
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    let want = format!("Timed out before an answer: {title}");
    let notices: Vec<Value> = items_after(&c, P, m)
        .await?
        .into_iter()
        .filter(|i| kind_is(i, "notice") && i["text"].as_str().is_some_and(|t| t.starts_with("Timed out")))
        .collect();
    ensure!(
        notices.len() == 1 && notices[0]["text"] == want.as_str(),
        "expected exactly one notice {want:?}, got {}",
        cut(&Value::Array(notices))
    );
    let late = answer(&c, &id, &rid("late"), json!({"optionIds": ["yes"]}), None).await?;
    let body = late.refused(409, "ask-closed")?;
    ensure!(body["decidedBy"] == "timeout", "ask-closed decidedBy {} (expected timeout)", body["decidedBy"]);
    time_of(body, "decidedAt")?;
    Ok(())
}

pub(crate) async fn answer_hash_mismatch_409_with_current_ask(cx: Ctx) -> CaseResult {
    let c = cx.client()?;
    let ask = raise(&c, P, "choice").await?;
    let id = str_of(&ask, "id")?;
    let m = mark(&c, P).await?;
    let stale = "0".repeat(64);
    let r = answer(&c, id, &rid("stale"), json!({"optionIds": ["yes"]}), Some(&stale)).await?;
    let body = r.refused(409, "hash-mismatch")?;
    let current = body.get("ask").ok_or("hash-mismatch without the current `ask`")?;
    ensure!(
        current["id"] == id && current["hash"] == ask["hash"],
        "hash-mismatch carries ask {}",
        cut(current)
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    let s = state(&c).await?;
    ensure!(
        ids(arr_of(&s, "asks")?).contains(&id.to_owned()),
        "after a hash mismatch the ask is no longer open"
    );
    let echoed = items_after(&c, P, m)
        .await?
        .into_iter()
        .any(|i| kind_is(&i, "reply") && i["text"].as_str().is_some_and(|t| t.starts_with("Answer:")));
    ensure!(!echoed, "a hash-mismatched answer reached the program");
    answer_ok(&c, &ask, json!({"optionIds": ["no"]})).await?;
    Ok(())
}

pub(crate) async fn answer_single_use_second_request_id_409_ask_closed(cx: Ctx) -> CaseResult {
    let c = cx.client()?;
    let ask = raise(&c, P, "choice").await?;
    let id = str_of(&ask, "id")?;
    let first = answer_ok(&c, &ask, json!({"optionIds": ["yes"]})).await?;
    let r =
        answer(&c, id, &rid("second"), json!({"optionIds": ["yes"]}), Some(str_of(&ask, "hash")?)).await?;
    let body = r.refused(409, "ask-closed")?;
    ensure!(body["decidedBy"] == "phone", "decidedBy {} (expected phone)", body["decidedBy"]);
    ensure!(
        body["decidedAt"] == first["decidedAt"],
        "decidedAt {} differs from the answer's {}",
        body["decidedAt"],
        first["decidedAt"]
    );
    Ok(())
}
