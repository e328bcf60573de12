//! §10 history: rows, paging by cursor, the limit and cursor rules, one session.

use serde_json::Value;

use super::Ctx;
use crate::check::{CaseResult, arr_of, bool_of, cut, ensure, send_ok, str_of, time_of, wait_idle};
use durable_cli::conformance::client::Client;

/// The cursor rule: 1 to 512 bytes of printable ASCII without space.
fn is_cursor(s: &str) -> bool {
    (1..=512).contains(&s.len()) && s.bytes().all(|b| (0x21..=0x7e).contains(&b))
}

fn encode(cursor: &str) -> String {
    cursor
        .bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// Follows `next` from the first page to the last; returns every row (or item) and the page count.
async fn pages(c: &Client, base: &str, list: &str, limit: u32) -> CaseResult<(Vec<Value>, usize)> {
    let sep = if base.contains('?') { '&' } else { '?' };
    let mut after: Option<String> = None;
    let mut all = Vec::new();
    for page in 1..=500 {
        let path = match &after {
            None => format!("{base}{sep}limit={limit}"),
            Some(cursor) => format!("{base}{sep}limit={limit}&after={}", encode(cursor)),
        };
        let r = c.get(&path).await?;
        let body = r.ok()?;
        let got = arr_of(body, list)?;
        ensure!(got.len() <= limit as usize, "{path}: {} {list} for limit {limit}", got.len());
        all.extend(got.iter().cloned());
        match body.get("next") {
            None => return Ok((all, page)),
            Some(next) => {
                let next = next.as_str().ok_or_else(|| format!("`next` is {next}, not a cursor string"))?;
                ensure!(is_cursor(next), "`next` {next:?} breaks the cursor rule");
                after = Some(next.to_owned());
            }
        }
    }
    Err(format!("{base}: more than 500 pages"))
}

pub(crate) async fn history_rows_of_tickets_page_with_cursors(cx: Ctx) -> CaseResult {
    let c = cx.client()?;
    let first = c.get("/v1/history").await?;
    if arr_of(first.ok()?, "rows")?.len() < 2 {
        super::writes::new_ticket(&c).await?;
    }
    let (whole, _) = pages(&c, "/v1/history", "rows", 200).await?;
    ensure!(whole.len() >= 2, "history has {} rows (at least ticket-1 and a started ticket)", whole.len());
    for row in &whole {
        str_of(row, "id")?;
        str_of(row, "title")?;
        time_of(row, "startedAt")?;
        ensure!(row["state"] == "open" || row["state"] == "closed", "row state {}", row["state"]);
        ensure!(row["items"].is_u64(), "row items {} is not a count", row["items"]);
    }
    ensure!(whole.iter().any(|r| r["id"] == "ticket-1"), "ticket-1 is not in the history");
    let (paged, count) = pages(&c, "/v1/history", "rows", 1).await?;
    ensure!(count >= 2, "limit=1 over {} rows gave {count} page(s): `next` never appeared", whole.len());
    let ids = |rows: &[Value]| rows.iter().map(|r| r["id"].to_string()).collect::<Vec<_>>();
    ensure!(
        ids(&paged) == ids(&whole),
        "paging by 1 gave {:?}, one page of 200 gave {:?}",
        ids(&paged),
        ids(&whole)
    );
    Ok(())
}

pub(crate) async fn history_session_items_page(cx: Ctx) -> CaseResult {
    let c = cx.client()?;
    let r = c.get("/v1/history/ticket-1").await?;
    if arr_of(r.ok()?, "items")?.len() < 2 {
        wait_idle(&c, "ticket-1").await?;
        send_ok(&c, "ticket-1", "history probe").await?;
        wait_idle(&c, "ticket-1").await?;
    }
    let r = c.get("/v1/history/ticket-1").await?;
    let body = r.ok()?;
    ensure!(body["row"]["id"] == "ticket-1", "row {}", cut(&body["row"]));
    bool_of(body, "dropped")?;
    let (whole, _) = pages(&c, "/v1/history/ticket-1", "items", 200).await?;
    let (paged, count) = pages(&c, "/v1/history/ticket-1", "items", 1).await?;
    ensure!(whole.len() >= 2, "ticket-1's history has {} items", whole.len());
    ensure!(count >= 2, "limit=1 over {} items gave {count} page(s)", whole.len());
    let ids = |items: &[Value]| items.iter().map(|i| i["id"].to_string()).collect::<Vec<_>>();
    ensure!(ids(&paged) == ids(&whole), "paging items by 1 differs from one page of 200");
    for item in &whole {
        ensure!(item["id"].is_string() && item["kind"].is_string(), "history item {}", cut(item));
    }
    Ok(())
}
