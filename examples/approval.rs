//! A button behind an approval card, with history: the pane `orders` has an
//! action `refund`; pressing it raises "refund wants to run" on the phone,
//! and Allow or Deny decides. Every decision is kept and served as history.
//!
//! `cargo run --example approval` serves it on the private socket;
//! `COLLIE_TOKEN=$(openssl rand -hex 32) cargo run --example approval -- --https 127.0.0.1:8443`
//! serves the same agent over HTTPS (self-signed; Allow and Deny only).

use std::sync::{Arc, Mutex};

use durable_sdk::handlers::ActionHandler;
use durable_sdk::history::{
    ConversationState, HistoryError, HistoryProvider, HistoryRow, ItemsPage, RowsPage,
};
use durable_sdk::transport::socket_path_for;
use durable_sdk::types::{Cursor, NoticeTone, Timestamp};
use durable_sdk::{
    ActionRequest, ApprovalOptions, CoreOptions, HandlerResult, Item, PaneOptions, Transport, create_core,
    json, require_approval,
};

/// What happened, kept for history (a real agent keeps it on disk).
#[derive(Default)]
struct Log(Mutex<Vec<Item>>);

struct Refund(Arc<Log>);

impl ActionHandler for Refund {
    async fn action(&self, req: ActionRequest) -> HandlerResult {
        // The write answers once the work is started: the card is awaited
        // on a task of its own, never inside the handler.
        let call = format!("call-{}", req.request_id);
        let approval = require_approval(
            "refund",
            &json!({"order": "5521", "amount": 40}),
            ApprovalOptions::new(&req.pane, call.clone()).timeout_ms(600_000),
        )?; // a rule broken here refuses the press: `409 refused`, nothing stored
        let log = self.0.clone();
        tokio::spawn(async move {
            let a = approval.await;
            let text = if a.approved {
                "Refund of 40 issued".into()
            } else {
                format!("Refund not issued ({})", a.decided_by)
            };
            // The request id follows the ID rule; only its length could break it.
            let Ok(item) = Item::notice(&format!("notice-{call}"), text, NoticeTone::Info) else { return };
            let _ = req.pane.write(item.clone());
            log.0.lock().unwrap().push(item);
        });
        Ok(())
    }
}

impl HistoryProvider for Log {
    async fn rows(&self, _after: Option<Cursor>, _limit: usize) -> Result<RowsPage, HistoryError> {
        Ok(RowsPage { rows: vec![self.row()], next: None })
    }

    async fn items(
        &self,
        id: &str,
        _after: Option<Cursor>,
        _limit: usize,
    ) -> Result<Option<ItemsPage>, HistoryError> {
        let items = self.0.lock().unwrap().clone();
        Ok((id == "orders").then(|| ItemsPage { row: self.row(), items, next: None, dropped: false }))
    }
}

impl Log {
    fn row(&self) -> HistoryRow {
        HistoryRow {
            id: "orders".into(),
            title: "Orders".into(),
            subtitle: None,
            workspace_id: Some("shop".into()),
            tab_id: Some("shop:main".into()),
            started_at: Timestamp::from_millis(0),
            ended_at: None,
            state: ConversationState::Open,
            items: self.0.lock().unwrap().len() as u64,
        }
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let transport = match std::env::args().skip_while(|a| a != "--https").nth(1) {
        // The token from COLLIE_TOKEN (at least 32 bytes); no allow-always options over HTTPS.
        Some(addr) => Transport::https(addr).self_signed(),
        None => Transport::socket_at(socket_path_for("approval")),
    };
    let collie = create_core(CoreOptions::builder().host_name("shop"))?;
    let log = Arc::new(Log::default());
    let tab = collie.workspace("shop", "Shop")?.tab("main", "Orders")?;
    let pane = tab.pane("orders", PaneOptions::new("Orders").harness("shop"))?;
    pane.action("refund", "Refund", Some("check"))?;
    pane.on_action(Refund(log.clone()))?;
    collie.history(log);
    collie.serve(transport).await?;
    collie.ready();
    println!("listening {}", collie.address());
    tokio::signal::ctrl_c().await?;
    collie.close().await;
    Ok(())
}
