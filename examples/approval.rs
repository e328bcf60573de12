//! A button behind an approval card that survives a restart, with history:
//! the pane `orders` has an action `refund`; pressing it raises "refund
//! wants to run" on the phone, and Allow or Deny decides. With `--data DIR`
//! the receipts, the open cards and the chat are kept in SQLite: kill the
//! agent while the card is open, start it again, and the card comes back
//! with the same id — an Allow sent meanwhile, or after, issues the refund.
//! History is the SDK's own: the store keeps what the pane showed, so the
//! recipe has no history code.
//!
//! ```text
//! cargo run --example approval -- [--socket PATH] [--data DIR] [--https ADDR] [--raise-delay-ms N]
//! ```
//!
//! `--socket` defaults to the SDK's path for `approval`; `--data` to none
//! (everything in memory: a card open at a stop is gone). `--https ADDR`
//! serves over HTTPS instead (self-signed; the token from `COLLIE_TOKEN`;
//! Allow and Deny only). `--raise-delay-ms N` raises the kept cards N ms
//! after serving, to see an answer sent in between held, then applied.

use std::path::PathBuf;

use durable_sdk::asks::{ApprovalFuture, KeptAsk};
use durable_sdk::handlers::ActionHandler;
use durable_sdk::stores::SqliteReceiptStore;
use durable_sdk::transport::socket_path_for;
use durable_sdk::types::NoticeTone;
use durable_sdk::{
    ActionRequest, ApprovalOptions, Collie, CoreOptions, HandlerResult, Item, Pane, PaneOptions, Transport,
    create_core, json, require_approval,
};

struct Refund;

impl ActionHandler for Refund {
    async fn action(&self, req: ActionRequest) -> HandlerResult {
        // The write answers once the work is started: the card is awaited
        // on a task of its own, never inside the handler.
        // The press's request id is the card's tool call id: it is an ID
        // already (128 bytes at most), so it always fits, where
        // `call-{id}` may not.
        let options = ApprovalOptions::new(&req.pane, req.request_id.as_str())
            .timeout_ms(600_000)
            // Kept with the card: after a restart it says what to refund.
            .agent_data(json!({"order": "5521", "amount": 40}));
        let approval = require_approval("refund", &json!({"order": "5521", "amount": 40}), options)?; // a rule broken here refuses the press: `409 refused`
        tokio::spawn(issue_when_decided(approval, req.pane));
        Ok(())
    }
}

/// Waits for the card's answer; an Allow issues the refund.
async fn issue_when_decided(approval: ApprovalFuture, pane: Pane) {
    let a = approval.await;
    let text = if a.approved {
        "Refund of 40 issued".into()
    } else {
        format!("Refund not issued ({})", a.decided_by)
    };
    // Ids made from the card's id (32 hex digits) always fit the ID rule.
    let Ok(item) = Item::notice(&format!("notice-{}", a.ask_id), text, NoticeTone::Info) else { return };
    let _ = pane.write(item);
}

/// Raises the kept refund cards again, each with the task that issues the
/// refund on Allow; any other kept card is closed ("Stopped before an
/// answer" in the chat).
fn take_up(collie: &Collie, kept: Vec<KeptAsk>) {
    for kept in kept {
        let is_refund = kept.agent_data().is_some_and(|d| d["order"] == "5521");
        match collie.pane(kept.pane()) {
            Some(pane) if is_refund => {
                let call = kept.tool_call_id().to_owned();
                match kept.raise_approval() {
                    Ok(approval) => {
                        tokio::spawn(issue_when_decided(approval, pane));
                    }
                    Err(e) => collie.warn(&format!("approval: the card of {call} was not raised again: {e}")),
                }
            }
            _ => kept.close(),
        }
    }
}

/// The command line.
#[derive(Default)]
struct Args {
    socket: Option<PathBuf>,
    data: Option<PathBuf>,
    https: Option<String>,
    raise_delay_ms: u64,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args::default();
    let mut words = std::env::args().skip(1);
    while let Some(flag) = words.next() {
        let mut value = || words.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--socket" => args.socket = Some(value()?.into()),
            "--data" => args.data = Some(value()?.into()),
            "--https" => args.https = Some(value()?),
            "--raise-delay-ms" => {
                args.raise_delay_ms =
                    value()?.parse().map_err(|_| "--raise-delay-ms needs a number".to_owned())?
            }
            _ => return Err(format!("unknown argument {flag}")),
        }
    }
    Ok(args)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    durable_examples::logs(); // on standard error, filtered by RUST_LOG (lib.rs)
    durable_examples::report_file_size_limit()?; // a write past `ulimit -f` is an error, not a silent death (lib.rs)
    let args = parse_args().map_err(|e| {
        format!("{e}\nusage: approval [--socket PATH] [--data DIR] [--https ADDR] [--raise-delay-ms N]")
    })?;
    let transport = match args.https {
        // The token from COLLIE_TOKEN (at least 32 bytes); no allow-always options over HTTPS.
        Some(addr) => Transport::https(addr).self_signed(),
        None => Transport::socket_at(args.socket.unwrap_or_else(|| socket_path_for("approval"))),
    };
    let mut options = CoreOptions::builder().host_name("shop");
    if let Some(dir) = &args.data {
        std::fs::create_dir_all(dir)?;
        // Receipts, open cards and the chat, kept across restarts.
        options = options.receipts(SqliteReceiptStore::open(dir.join("receipts.sqlite3"))?);
    }
    let collie = create_core(options)?;
    let tab = collie.workspace("shop", "Shop")?.tab("main", "Orders")?;
    let pane = tab.pane("orders", PaneOptions::new("Orders").harness("shop"))?;
    pane.action("refund", "Refund", Some("check"))?;
    pane.on_action(Refund)?;

    // Cards open when the agent last stopped come back with the same id:
    // an Allow the phone sends again now lands. (With --raise-delay-ms they
    // come back that long after serving: an answer sent meanwhile is held,
    // then lands.)
    let mut kept = collie.kept_asks().await?;
    if args.raise_delay_ms == 0 {
        take_up(&collie, std::mem::take(&mut kept));
    }
    collie.serve(transport).await?;
    collie.ready();
    println!("listening {}", collie.address());
    if !kept.is_empty() {
        let collie = collie.clone();
        let delay = std::time::Duration::from_millis(args.raise_delay_ms);
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            take_up(&collie, kept);
        });
    }
    tokio::signal::ctrl_c().await?;
    collie.close().await;
    Ok(())
}
