//! Two panes, the whole SDK in about a hundred lines: `chat` streams its
//! replies (steer joins, stop keeps what it had); `orders` has a `refund`
//! button behind an approval card; every refund decision is history.
//!
//! `cargo run --example shop` serves it on the private socket;
//! `COLLIE_TOKEN=$(openssl rand -hex 32) cargo run --example shop -- --https 127.0.0.1:8443`
//! serves the same agent over HTTPS (self-signed).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use durable_sdk::socket::SocketOptions;
use durable_sdk::tls::TlsOptions;
use durable_sdk::{
    ActionHandler, ActionRequest, ApprovalOptions, ChatHandler, CoreOptions, Cursor, HandlerResult,
    HistoryError, HistoryProvider, HistoryRow, Item, ItemsPage, NoticeTone, PaneOptions, Refusal, RowsPage,
    Timestamp, Turn, create_core, json, require_approval, serve, socket_path_for,
};

/// The chat: one `turn` per send, word by word.
struct Chat;

impl ChatHandler for Chat {
    async fn turn(&self, mut turn: Turn) {
        let mut reply = String::from("You said:");
        for word in turn.text().to_owned().split_whitespace() {
            tokio::select! {
                () = tokio::time::sleep(Duration::from_millis(300)) => {}
                () = turn.stopped() => break,
            }
            reply = format!("{reply} {word}");
            for steer in turn.take_steers() {
                reply = format!("{reply} [steered: {steer}]");
            }
            turn.partial(reply.clone());
        }
        turn.reply(reply);
    }
}

/// The refund decisions, kept for history (a real agent keeps them on disk).
#[derive(Clone, Default)]
struct Refunds(Arc<Mutex<Vec<Item>>>);

impl ActionHandler for Refunds {
    async fn action(&self, req: ActionRequest) -> HandlerResult {
        let call = format!("call-{}", req.request_id);
        let args = json!({"order": "5521", "amount": 40});
        let options = ApprovalOptions::new(&req.pane, call.clone()).timeout_ms(600_000);
        let approval = require_approval("refund", &args, options).map_err(|e| Refusal::new(e.to_string()))?;
        // The button's answer goes back now; the card is awaited on its own task.
        let log = self.clone();
        tokio::spawn(async move {
            let a = approval.await;
            let text = if a.approved {
                "Refund of 40 issued".into()
            } else {
                format!("No refund ({})", a.decided_by)
            };
            let Ok(item) = Item::notice(&format!("notice-{call}"), text, NoticeTone::Info) else { return };
            let _ = req.pane.write(item.clone());
            log.0.lock().unwrap().push(item);
        });
        Ok(())
    }
}

impl HistoryProvider for Refunds {
    async fn rows(&self, _after: Option<Cursor>, _limit: usize) -> Result<RowsPage, HistoryError> {
        Ok(RowsPage { rows: vec![self.row()], next: None })
    }

    async fn items(
        &self,
        id: &str,
        _after: Option<Cursor>,
        _n: usize,
    ) -> Result<Option<ItemsPage>, HistoryError> {
        let items = self.0.lock().unwrap().clone();
        Ok((id == "orders").then(|| ItemsPage { row: self.row(), items, next: None, dropped: false }))
    }
}

impl Refunds {
    fn row(&self) -> HistoryRow {
        let items = self.0.lock().unwrap().len() as u64;
        HistoryRow::open("orders", "Orders", Timestamp::EPOCH).in_tab("shop", "shop:main").with_items(items)
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let https = std::env::args().skip_while(|a| a != "--https").nth(1);
    // Over HTTPS the token is the only barrier: no allow-always options.
    let core = create_core(CoreOptions::builder().host_name("shop").allow_always(https.is_none()))?;
    let refunds = Refunds::default();
    let tab = core.workspace("shop", "Shop")?.tab("main", "Shop")?;
    tab.pane("chat", PaneOptions::new("Chat").harness("shop"))?.on_send(Chat)?;
    let orders = tab.pane("orders", PaneOptions::new("Orders").harness("shop"))?;
    orders.action("refund", "Refund", Some("check"))?;
    orders.on_action(refunds.clone())?;
    core.history(refunds);
    let server = match https {
        Some(addr) => {
            serve(&core, TlsOptions::builder().listen(addr).tokens_from_env().self_signed().build()?).await?
        }
        None => serve(&core, SocketOptions::builder().path(socket_path_for("shop"))).await?,
    };
    core.ready();
    println!("listening {}", server.address());
    tokio::signal::ctrl_c().await?;
    server.close().await;
    Ok(())
}
