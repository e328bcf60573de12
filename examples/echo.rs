//! A streamed chat with steer and stop, in one handler: each text the phone
//! sends is answered word by word; a steer joins the reply, a stop ends it
//! with what it had.
//!
//! `cargo run --example echo`, then attach it in Collie with
//! `collie durable attach echo --socket <the path it prints>`.

use std::time::Duration;

use durable_sdk::{ChatHandler, OpenOptions, PaneOptions, Turn, open_collie, socket_path_for};

/// The conversation: the SDK runs one `turn` per send, queues sends that
/// arrive meanwhile, and sets the pane idle when `turn` returns.
struct Echo;

impl ChatHandler for Echo {
    async fn turn(&self, mut turn: Turn) {
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
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let options = OpenOptions::builder().socket(socket_path_for("echo")).host_name("echo");
    let collie = open_collie(options).await?;
    let tab = collie.workspace("echo", "Echo")?.tab("main", "Chats")?;
    tab.pane("chat", PaneOptions::new("Echo").harness("echo"))?.on_send(Echo)?;
    collie.ready();
    println!("listening {}", collie.address());
    tokio::signal::ctrl_c().await?;
    collie.close().await;
    Ok(())
}
