//! A streamed chat with steer and stop, in one closure: each text the phone
//! sends is answered word by word; a steer joins the reply, a stop ends it
//! with what it had.
//!
//! `cargo run --example echo`, then attach it in Collie with
//! `collie durable attach echo --socket <the path it prints>`.

use std::time::Duration;

use durable_sdk::{PaneOptions, Turn, open_collie};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    durable_examples::logs(); // on standard error, filtered by RUST_LOG (lib.rs)
    let collie = open_collie("echo").await?;
    let tab = collie.workspace("echo", "Echo")?.tab("main", "Chats")?;
    // The SDK runs one turn per send, queues sends that arrive meanwhile,
    // and sets the pane idle when the turn returns.
    tab.pane("chat", PaneOptions::new("Echo").harness("echo"))?.on_send(|mut turn: Turn| async move {
        let mut reply = String::from("You said:");
        for word in turn.text().to_owned().split_whitespace() {
            tokio::select! {
                () = tokio::time::sleep(Duration::from_millis(300)) => {}
                () = turn.stopped() => break, // the phone's Stop: keep what we have
            }
            reply.push(' ');
            reply.push_str(word);
            for steer in turn.take_steers() {
                reply.push_str(&format!(" [steered: {steer}]"));
            }
            turn.partial(reply.clone()); // a growing reply, at most every 250 ms
        }
        turn.reply(reply); // the final text, not partial
    })?;
    collie.ready();
    println!("listening {}", collie.address());
    tokio::signal::ctrl_c().await?;
    collie.close().await;
    Ok(())
}
