//! §10 history: rows and items paged with cursors, and their refusals.

use serde_json::Value;

use super::Ctx;
use crate::conformance::check::{CaseResult, arr_of, bool_of, cut, ensure, str_of, time_of};
use crate::conformance::client::Client;
use crate::conformance::wire;

fn is_cursor(s: &str) -> bool {
    (1..=wire::CURSOR_MAX).contains(&s.len()) && s.bytes().all(|b| (0x21..=0x7e).contains(&b))
}

async fn pages(c: &Client, base: &str, list: &str, limit: usize) -> CaseResult<(Vec<Value>, usize)> {
    let sep = if base.contains('?') { '&' } else { '?' };
    let mut after: Option<String> = None;
    let mut all = Vec::new();
    for page in 1..=500 {
        let path = match &after {
            None => format!("{base}{sep}limit={limit}"),
            Some(cursor) => format!("{base}{sep}limit={limit}&after={}", crate::link::enc(cursor)),
        };
        let r = c.get(&path).await?;
        let body = r.ok()?;
        let got = arr_of(body, list)?;
        ensure!(got.len() <= limit, "{path}: {} {list} for limit {limit}", got.len());
        all.extend(got.iter().cloned());
        match body.get("next") {
            None | Some(Value::Null) => return Ok((all, page)),
            Some(next) => {
                let next = next.as_str().ok_or_else(|| format!("`next` is {next}, not a cursor string"))?;
                ensure!(is_cursor(next), "`next` {next:?} breaks the cursor rule");
                after = Some(next.to_owned());
            }
        }
    }
    Err(format!("{base}: more than 500 pages"))
}

/// The first session the history lists, if any.
async fn a_session(c: &Client) -> CaseResult<Option<String>> {
    let r = c.get("/v1/history?limit=1").await?;
    Ok(arr_of(r.ok()?, "rows")?.first().and_then(|row| row["id"].as_str()).map(str::to_owned))
}

pub(crate) async fn history_rows_page_with_cursors(cx: Ctx) -> CaseResult {
    let c = cx.client();
    let (whole, _) = pages(&c, "/v1/history", "rows", wire::HISTORY_LIMIT_MAX).await?;
    for row in &whole {
        str_of(row, "id")?;
        str_of(row, "title")?;
        time_of(row, "startedAt")?;
        ensure!(row["state"] == "open" || row["state"] == "closed", "row state {}", row["state"]);
        ensure!(row["items"].is_u64(), "row items {} is not a count", row["items"]);
    }
    if whole.len() >= 2 {
        let (paged, count) = pages(&c, "/v1/history", "rows", 1).await?;
        ensure!(count >= 2, "limit=1 over {} rows gave {count} page(s): `next` never appeared", whole.len());
        let row_ids = |rows: &[Value]| rows.iter().map(|r| r["id"].to_string()).collect::<Vec<_>>();
        ensure!(
            row_ids(&paged) == row_ids(&whole),
            "paging by 1 gave {:?}, one page gave {:?}",
            row_ids(&paged),
            row_ids(&whole)
        );
    }
    if let Some(first) = whole.first() {
        let id = str_of(first, "id")?;
        let base = format!("/v1/history/{}", crate::link::enc(id));
        let r = c.get(&base).await?;
        let body = r.ok()?;
        ensure!(body["row"]["id"] == id, "{base}: row {}", cut(&body["row"]));
        bool_of(body, "dropped")?;
        let (items, _) = pages(&c, &base, "items", wire::HISTORY_LIMIT_MAX).await?;
        for item in &items {
            ensure!(item["id"].is_string() && item["kind"].is_string(), "history item {}", cut(item));
        }
        if items.len() >= 2 {
            let (paged, count) = pages(&c, &base, "items", 1).await?;
            ensure!(count >= 2, "limit=1 over {} items gave {count} page(s)", items.len());
            let item_ids = |items: &[Value]| items.iter().map(|i| i["id"].to_string()).collect::<Vec<_>>();
            ensure!(item_ids(&paged) == item_ids(&items), "paging {base} by 1 differs from one page");
        }
    }
    Ok(())
}

pub(crate) async fn history_limit_outside_1_to_200_is_400(cx: Ctx) -> CaseResult {
    let c = cx.client();
    let mut wrong = Vec::new();
    let over = (wire::HISTORY_LIMIT_MAX + 1).to_string();
    for limit in ["0", over.as_str(), "-1", "abc", ""] {
        let r = c.get(&format!("/v1/history?limit={limit}")).await?;
        if r.refused(400, "bad-request").is_err() {
            wrong.push(format!("limit={limit}: {} {}", r.status, r.body_text()));
        }
    }
    for limit in [1, wire::HISTORY_LIMIT_MAX] {
        c.get(&format!("/v1/history?limit={limit}")).await?.ok()?;
    }
    if let Some(session) = a_session(&c).await? {
        let r = c.get(&format!("/v1/history/{}?limit={over}", crate::link::enc(&session))).await?;
        if r.refused(400, "bad-request").is_err() {
            wrong.push(format!("session limit={over}: {} {}", r.status, r.body_text()));
        }
    }
    ensure!(wrong.is_empty(), "{}", wrong.join("; "));
    Ok(())
}

pub(crate) async fn history_cursor_rule_400(cx: Ctx) -> CaseResult {
    let c = cx.client();
    let mut wrong = Vec::new();
    let long = "a".repeat(wire::CURSOR_MAX + 1);
    let mut bases = vec!["/v1/history".to_owned()];
    if let Some(session) = a_session(&c).await? {
        bases.push(format!("/v1/history/{}", crate::link::enc(&session)));
    }
    for after in ["", "%20", "a%20b", "%01", "%C3%A9", long.as_str()] {
        for base in &bases {
            let r = c.get(&format!("{base}?after={after}")).await?;
            if r.refused(400, "bad-request").is_err() {
                wrong.push(format!(
                    "{base}?after={}: {} {}",
                    &after[..after.len().min(12)],
                    r.status,
                    r.body_text()
                ));
            }
        }
    }
    ensure!(wrong.is_empty(), "{}", wrong.join("; "));
    Ok(())
}

pub(crate) async fn history_unknown_session_404(cx: Ctx) -> CaseResult {
    let c = cx.client();
    c.get("/v1/history/no-such-session-conformance").await?.refused(404, "not-found")?;
    c.get("/v1/history/bad%20id").await?.refused(400, "bad-request")?;
    Ok(())
}

/// How many rows of the first page the count case reads (each is a
/// conversation read whole).
const ROWS_COUNTED: usize = 10;

pub(crate) async fn history_rows_count_their_items(cx: Ctx) -> CaseResult {
    let c = cx.client();
    let page = c.get(&format!("/v1/history?limit={ROWS_COUNTED}")).await?;
    let rows = arr_of(page.ok()?, "rows")?.clone();
    let mut wrong = Vec::new();
    for row in &rows {
        let id = str_of(row, "id")?;
        let base = format!("/v1/history/{}", crate::link::enc(id));
        let (items, _) = pages(&c, &base, "items", wire::HISTORY_LIMIT_MAX).await?;
        let counted = row["items"].as_u64().unwrap_or(u64::MAX);
        if counted != items.len() as u64 {
            wrong.push(format!("row {id} says {counted} items, its conversation has {}", items.len()));
        }
    }
    ensure!(wrong.is_empty(), "{}", wrong.join("; "));
    Ok(())
}

pub(crate) async fn history_open_panes_read_their_conversation(cx: Ctx) -> CaseResult {
    let c = cx.client();
    let state = c.get("/v1/state").await?;
    let panes = arr_of(state.ok()?, "panes")?.clone();
    let mut wrong = Vec::new();
    for pane in &panes {
        let Some(session) = pane["sessionId"].as_str() else { continue };
        let path = format!("/v1/history/{}", crate::link::enc(session));
        let r = c.get(&path).await?;
        match r.ok() {
            Ok(body) if body["row"]["id"] == session => {}
            Ok(body) => wrong.push(format!("{path}: row {}", cut(&body["row"]))),
            Err(why) => wrong.push(format!("pane {}: {why}", pane["id"])),
        }
    }
    ensure!(wrong.is_empty(), "{}", wrong.join("; "));
    Ok(())
}
