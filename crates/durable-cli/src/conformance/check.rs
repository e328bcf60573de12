//! What the cases share: the result type, JSON getters, the contract's own
//! computations done independently (ask id, ask hash, canonical JSON, time format),
//! and the polling helpers a Collie-like client needs (wait for idle, for an ask,
//! for an item).

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use super::client::{Client, Resp};

/// A case's result: `Err` carries the one-line reason.
pub type CaseResult<T = ()> = Result<T, String>;

/// `ensure!(cond, "why {}", x)`: fail the case with that reason.
macro_rules! ensure {
    ($cond:expr, $($arg:tt)+) => {
        if !$cond {
            return Err(format!($($arg)+));
        }
    };
}
pub(crate) use ensure;

/// A fresh request id (unique in this run).
pub fn rid(prefix: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    format!("{prefix}-{}-{}", run_tag(), NEXT.fetch_add(1, Ordering::Relaxed))
}

/// Eight hex characters drawn once per process: request ids of this run
/// never meet the receipts an agent kept from an earlier run.
fn run_tag() -> &'static str {
    static TAG: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    TAG.get_or_init(|| {
        let seed = format!("{:?} {} {:?}", std::time::SystemTime::now(), std::process::id(), Instant::now());
        sha256_hex(seed.as_bytes())[..8].to_owned()
    })
}

// ---------------------------------------------------------------- JSON getters

pub fn field<'a>(v: &'a Value, key: &str) -> CaseResult<&'a Value> {
    v.get(key).ok_or_else(|| format!("no `{key}` in {}", cut(v)))
}

pub fn str_of<'a>(v: &'a Value, key: &str) -> CaseResult<&'a str> {
    field(v, key)?.as_str().ok_or_else(|| format!("`{key}` is not a string in {}", cut(v)))
}

pub fn u64_of(v: &Value, key: &str) -> CaseResult<u64> {
    field(v, key)?.as_u64().ok_or_else(|| format!("`{key}` is not a whole number in {}", cut(v)))
}

pub fn bool_of(v: &Value, key: &str) -> CaseResult<bool> {
    field(v, key)?.as_bool().ok_or_else(|| format!("`{key}` is not a bool in {}", cut(v)))
}

pub fn arr_of<'a>(v: &'a Value, key: &str) -> CaseResult<&'a Vec<Value>> {
    field(v, key)?.as_array().ok_or_else(|| format!("`{key}` is not a list in {}", cut(v)))
}

/// A value shortened for a message.
pub fn cut(v: &Value) -> String {
    let s = v.to_string();
    if s.chars().count() <= 240 { s } else { format!("{}...", s.chars().take(240).collect::<String>()) }
}

/// The ids of a list of objects.
pub fn ids(list: &[Value]) -> Vec<String> {
    list.iter().filter_map(|v| v.get("id").and_then(Value::as_str)).map(str::to_owned).collect()
}

// ---------------------------------------------------------------- the contract's computations

/// Compact JSON with object keys sorted at every level (§7 hash, the desk's echo).
pub fn canonical(v: &Value) -> String {
    fn sorted(v: &Value) -> Value {
        match v {
            Value::Object(map) => {
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort();
                let mut out = Map::new();
                for k in keys {
                    out.insert(k.clone(), sorted(&map[k]));
                }
                Value::Object(out)
            }
            Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
            other => other.clone(),
        }
    }
    serde_json::to_string(&sorted(v)).expect("a JSON value serializes")
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// `askIdFor(pane, toolCallId)`: the first 32 hex of SHA-256(pane, 0x00, toolCallId).
pub fn ask_id_for(pane: &str, tool_call_id: &str) -> String {
    let mut input = pane.as_bytes().to_vec();
    input.push(0);
    input.extend_from_slice(tool_call_id.as_bytes());
    sha256_hex(&input)[..32].to_owned()
}

/// The ask hash: SHA-256 of the ask as sent, less the fields that say who and
/// when, as canonical JSON.
pub fn ask_hash(ask: &Value) -> String {
    let mut object = ask.as_object().cloned().unwrap_or_default();
    for key in super::wire::ASK_HASH_EXCLUDED {
        object.remove(key);
    }
    sha256_hex(canonical(&Value::Object(object)).as_bytes())
}

pub fn is_lower_hex(s: &str, len: usize) -> bool {
    s.len() == len && s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// `2026-11-30T05:00:00.000Z`: RFC 3339, UTC, milliseconds.
pub fn is_wire_time(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 24
        && b.iter().enumerate().all(|(i, c)| match i {
            4 | 7 => *c == b'-',
            10 => *c == b'T',
            13 | 16 => *c == b':',
            19 => *c == b'.',
            23 => *c == b'Z',
            _ => c.is_ascii_digit(),
        })
}

pub fn time_of<'a>(v: &'a Value, key: &str) -> CaseResult<&'a str> {
    let t = str_of(v, key)?;
    ensure!(is_wire_time(t), "`{key}` is {t:?}, not an RFC 3339 UTC time with milliseconds");
    Ok(t)
}

/// Milliseconds since 1970 of a wire time (for comparing two times).
pub fn wire_time_ms(s: &str) -> Option<i64> {
    if !is_wire_time(s) {
        return None;
    }
    let n = |a: usize, b: usize| s[a..b].parse::<i64>().ok();
    let (y, mo, d) = (n(0, 4)?, n(5, 7)?, n(8, 10)?);
    let (h, mi, se, ms) = (n(11, 13)?, n(14, 16)?, n(17, 19)?, n(20, 23)?);
    // Days from civil (Howard Hinnant).
    let y = if mo <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (mo + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(((days * 24 + h) * 60 + mi) * 60_000 + se * 1000 + ms)
}

// ---------------------------------------------------------------- polling

/// Polls `probe` every 100 ms until it gives `Some`, for at most `limit`.
pub async fn wait_for<T, F, Fut>(what: &str, limit: Duration, mut probe: F) -> CaseResult<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = CaseResult<Option<T>>>,
{
    let start = Instant::now();
    loop {
        if let Some(found) = probe().await? {
            return Ok(found);
        }
        if start.elapsed() > limit {
            return Err(format!("waited {:.1} s for {what}", limit.as_secs_f64()));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

pub async fn state(c: &Client) -> CaseResult<Value> {
    Ok(c.get("/v1/state").await?.ok()?.clone())
}

pub fn pane_in<'a>(state: &'a Value, pane: &str) -> Option<&'a Value> {
    state.get("panes")?.as_array()?.iter().find(|p| p.get("id").and_then(Value::as_str) == Some(pane))
}

pub async fn pane(c: &Client, pane: &str) -> CaseResult<Value> {
    let s = state(c).await?;
    pane_in(&s, pane).cloned().ok_or_else(|| format!("pane {pane} is not in the state"))
}

/// The pane's last event seq: a mark for "what happened after this".
pub async fn mark(c: &Client, p: &str) -> CaseResult<u64> {
    u64_of(&pane(c, p).await?, "lastSeq")
}

pub async fn wait_state(c: &Client, p: &str, want: &str, limit: Duration) -> CaseResult<Value> {
    wait_for(&format!("{p} to be {want}"), limit, || async {
        let pane = pane(c, p).await?;
        Ok((pane.get("state").and_then(Value::as_str) == Some(want)).then_some(pane))
    })
    .await
}

pub async fn wait_idle(c: &Client, p: &str) -> CaseResult<Value> {
    wait_state(c, p, "idle", Duration::from_secs(10)).await
}

/// The events of a pane after `after` (`snapshot: false` expected).
pub async fn events_after(c: &Client, p: &str, after: u64) -> CaseResult<Vec<Value>> {
    let r = c.get(&format!("/v1/panes/{}/events?after={after}", crate::link::enc(p))).await?;
    let body = r.ok()?;
    if bool_of(body, "snapshot")? {
        return Err(format!("events of {p} after {after}: got the snapshot view, expected events"));
    }
    Ok(arr_of(body, "events")?.clone())
}

/// The pane's items written after `after`, each at its latest version, in order
/// of first appearance (the view Collie builds from events).
pub async fn items_after(c: &Client, p: &str, after: u64) -> CaseResult<Vec<Value>> {
    let mut items: Vec<Value> = Vec::new();
    for event in events_after(c, p, after).await? {
        if event.get("type").and_then(Value::as_str) != Some("item") {
            continue;
        }
        let item = field(&event, "item")?.clone();
        let id = item.get("id").cloned();
        match items.iter_mut().find(|known| known.get("id") == id.as_ref()) {
            Some(known) => *known = item,
            None => items.push(item),
        }
    }
    Ok(items)
}

pub fn kind_is(item: &Value, kind: &str) -> bool {
    item.get("kind").and_then(Value::as_str) == Some(kind)
}

pub fn text_is(item: &Value, text: &str) -> bool {
    item.get("text").and_then(Value::as_str) == Some(text)
}

pub fn is_partial(item: &Value) -> bool {
    item.get("partial").and_then(Value::as_bool) == Some(true)
}

/// Waits for a final (not partial) item of this kind and text after `after`.
pub async fn wait_item(c: &Client, p: &str, after: u64, kind: &str, text: &str) -> CaseResult<Value> {
    let found = wait_for(&format!("a {kind} item {text:?} in {p}"), Duration::from_secs(10), || async {
        let items = items_after(c, p, after).await?;
        Ok(items.into_iter().find(|i| kind_is(i, kind) && text_is(i, text) && !is_partial(i)))
    })
    .await;
    match found {
        Ok(item) => Ok(item),
        Err(why) => {
            let seen: Vec<String> = items_after(c, p, after)
                .await
                .unwrap_or_default()
                .iter()
                .map(|i| {
                    format!("{}:{}", i["kind"].as_str().unwrap_or("?"), i["text"].as_str().unwrap_or(""))
                })
                .collect();
            Err(format!("{why}; items seen: {seen:?}"))
        }
    }
}

// ---------------------------------------------------------------- writes and asks

pub async fn send(c: &Client, p: &str, text: &str, request_id: &str) -> CaseResult<Resp> {
    c.post(
        &format!("/v1/panes/{}/send", crate::link::enc(p)),
        &json!({"requestId": request_id, "text": text}),
    )
    .await
}

/// A send that must answer `sent`.
pub async fn send_ok(c: &Client, p: &str, text: &str) -> CaseResult<Value> {
    let r = send(c, p, text, &rid("send")).await?;
    let body = r.ok()?.clone();
    ensure!(body["result"] == "sent", "send {text:?}: result {} (expected sent)", body["result"]);
    Ok(body)
}

pub fn open_asks(state: &Value) -> Vec<Value> {
    state.get("asks").and_then(Value::as_array).cloned().unwrap_or_default()
}

pub async fn answer(
    c: &Client,
    ask_id: &str,
    request_id: &str,
    answer: Value,
    hash: Option<&str>,
) -> CaseResult<Resp> {
    let mut body = json!({"requestId": request_id, "answer": answer});
    if let Some(hash) = hash {
        body["hash"] = json!(hash);
    }
    c.post(&format!("/v1/asks/{}", crate::link::enc(ask_id)), &body).await
}

/// The body a repeat must give: the first, with `replayed: true`.
pub fn replayed(first: &Value) -> Value {
    let mut want = first.clone();
    want["replayed"] = json!(true);
    want
}

/// Posts `body` to `path` again: the answer must be the first, replayed.
pub async fn expect_replay(c: &Client, path: &str, body: &Value, first: &Value) -> CaseResult {
    let again = c.post(path, body).await?;
    let got = again.ok()?;
    ensure!(*got == replayed(first), "{path} replay: {} (expected {})", cut(got), cut(&replayed(first)));
    Ok(())
}

/// Answers an open ask with its hash and checks the `answered` body.
pub async fn answer_ok(c: &Client, ask: &Value, answer_body: Value) -> CaseResult<Value> {
    let id = str_of(ask, "id")?;
    let request_id = rid("answer");
    let r = answer(c, id, &request_id, answer_body, Some(str_of(ask, "hash")?)).await?;
    let body = r.ok()?.clone();
    check_answered(&body, id, &request_id, false)?;
    Ok(body)
}

/// The `200 answered` body of §7.1.
pub fn check_answered(body: &Value, ask_id: &str, request_id: &str, replayed: bool) -> CaseResult<()> {
    ensure!(body["result"] == "answered", "result {} (expected answered)", body["result"]);
    ensure!(body["askId"] == ask_id, "askId {} (expected {ask_id})", body["askId"]);
    ensure!(body["requestId"] == request_id, "requestId {} (expected {request_id})", body["requestId"]);
    ensure!(body["replayed"] == replayed, "replayed {} (expected {replayed})", body["replayed"]);
    time_of(body, "decidedAt")?;
    ensure!(body["decidedBy"] == "phone", "decidedBy {} (expected phone)", body["decidedBy"]);
    Ok(())
}

/// The closing event of an ask after `after`.
pub async fn wait_ask_closed(c: &Client, p: &str, after: u64, ask_id: &str) -> CaseResult<Value> {
    wait_for(&format!("an ask-closed event for {ask_id}"), Duration::from_secs(10), || async {
        Ok(events_after(c, p, after)
            .await?
            .into_iter()
            .find(|e| e["type"] == "ask-closed" && e["askId"] == ask_id))
    })
    .await
}

/// Leaves the shared desk as a case expects to find it: no open ask, every pane idle.
pub async fn settle(c: &Client) -> CaseResult<()> {
    for _ in 0..3 {
        let s = state(c).await?;
        let asks = open_asks(&s);
        for ask in &asks {
            if let Some(p) = ask.get("pane").and_then(Value::as_str) {
                let _ = c
                    .post(
                        &format!("/v1/panes/{}/stop", crate::link::enc(p)),
                        &json!({"requestId": rid("settle")}),
                    )
                    .await;
            }
        }
        let panes = s.get("panes").and_then(Value::as_array).cloned().unwrap_or_default();
        let busy: Vec<String> = panes
            .iter()
            .filter(|p| p["state"] != "idle")
            .filter_map(|p| p["id"].as_str().map(str::to_owned))
            .collect();
        if asks.is_empty() && busy.is_empty() {
            return Ok(());
        }
        for p in busy {
            wait_idle(c, &p).await?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ask_id_rule_matches_the_contract_vectors() {
        assert_eq!(ask_id_for("ticket-1", "call-1"), "970f8a0b30368fbbcab73013d31d2d51");
        assert_eq!(ask_id_for("deploy", "deploy-1"), "f5286b923e30e7081ee2a5464db467ec");
    }

    #[test]
    fn ask_hash_rule_matches_the_contract_vector() {
        let ask = json!({
            "id": "970f8a0b30368fbbcab73013d31d2d51", "pane": "ticket-1", "kind": "choice",
            "title": "refund wants to run", "itemId": "call-1", "toolCallId": "call-1",
            "tool": {"name": "refund", "call": "refund(order: \"5521\", amount: 40)",
                     "args": [["order", "\"5521\""], ["amount", "40"]]},
            "push": {"title": "refund needs a yes"},
            "options": [{"id": "allow", "label": "Allow"}, {"id": "deny", "label": "Deny"}],
            "createdAt": "2026-11-30T05:00:00.000Z", "readable": true, "cleaned": false,
            "hash": "x"
        });
        assert_eq!(ask_hash(&ask), "cb8b64234d06250d254d479dcdd28c57083cae57ba257f035c7f409be9de57ce");
    }

    #[test]
    fn canonical_json_sorts_keys_at_every_level() {
        let v = json!({"values": {"size": "m", "gift": true, "qty": 2, "name": "Ana"}});
        assert_eq!(canonical(&v), r#"{"values":{"gift":true,"name":"Ana","qty":2,"size":"m"}}"#);
    }

    #[test]
    fn wire_times_are_rfc3339_utc_with_milliseconds() {
        assert!(is_wire_time("2026-11-30T05:00:00.000Z"));
        assert!(!is_wire_time("2026-11-30T05:00:00Z"));
        assert!(!is_wire_time("2026-11-30T05:00:00.000+00:00"));
        assert_eq!(wire_time_ms("1970-01-01T00:00:01.500Z"), Some(1500));
        assert_eq!(wire_time_ms("2000-03-01T00:00:00.000Z"), Some(951_868_800_000));
    }
}
