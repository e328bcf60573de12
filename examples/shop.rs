//! Two panes, the whole SDK in one screen: `chat` streams its replies (a
//! steer joins, a stop keeps what it had); `orders` has a `refund` button
//! behind an approval card; history lists both conversations, kept by the
//! SDK with no code here.
//!
//! `cargo run --example shop` serves it on the private socket;
//! `COLLIE_TOKEN=$(openssl rand -hex 32) cargo run --example shop -- --https 127.0.0.1:8443`
//! serves the same agent over HTTPS (self-signed; Allow and Deny only).

use std::time::Duration;

use durable_sdk::types::NoticeTone;
use durable_sdk::{
    ActionRequest, ApprovalOptions, HandlerResult, Item, OpenOptions, PaneOptions, Transport, Turn, json,
    open_collie, require_approval,
};

/// The chat: one turn per send, word by word.
async fn chat(mut turn: Turn) {
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

/// The refund button: a card, and a notice once the phone decides.
async fn refund(req: ActionRequest) -> HandlerResult {
    // The press's request id is the card's tool call id: it is an ID
    // already (128 bytes at most), so it always fits, where `call-{id}` may not.
    let options = ApprovalOptions::new(&req.pane, req.request_id.as_str()).timeout_ms(600_000);
    let approval = require_approval("refund", &json!({"order": "5521", "amount": 40}), options)?;
    // The button's answer goes back now; the card is awaited on its own task.
    tokio::spawn(async move {
        let a = approval.await;
        let text =
            if a.approved { "Refund of 40 issued".into() } else { format!("No refund ({})", a.decided_by) };
        // Ids made from the card's id (32 hex digits) fit too.
        if let Ok(notice) = Item::notice(&format!("notice-{}", a.ask_id), text, NoticeTone::Info) {
            let _ = req.pane.write(notice);
        }
    });
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    durable_examples::logs(); // on standard error, filtered by RUST_LOG (lib.rs)
    let mut https = std::env::args().skip_while(|a| a != "--https");
    let transport = match (https.next(), https.next()) {
        (Some(_), Some(addr)) => Transport::https(addr).self_signed(), // the token from COLLIE_TOKEN
        (Some(_), None) => return Err("--https needs an address, e.g. --https 127.0.0.1:8443".into()),
        (None, _) => Transport::socket(),
    };
    let collie = open_collie(OpenOptions::new("shop").transport(transport)).await?;
    let tab = collie.workspace("shop", "Shop")?.tab("main", "Shop")?;
    tab.pane("chat", PaneOptions::new("Chat").harness("shop"))?.on_send(chat)?;
    let orders = tab.pane("orders", PaneOptions::new("Orders").harness("shop"))?;
    orders.action("refund", "Refund", Some("check"))?;
    orders.on_action(refund)?;
    collie.ready();
    println!("listening {}", collie.address());
    tokio::signal::ctrl_c().await?;
    collie.close().await;
    Ok(())
}
