//! The Windows recipe: no private socket there, so the agent is served over
//! HTTPS with a bearer token — the same code runs on any platform.
//!
//! ```text
//! set COLLIE_TOKEN=<at least 32 bytes, e.g. from `openssl rand -hex 32`>
//! cargo run --example windows -- 127.0.0.1:8443
//! ```
//!
//! It builds with `durable-sdk` and only its `tls` feature:
//! `durable-sdk = { version = "0.1", default-features = false, features = ["tls"] }`.

use durable_sdk::{OpenOptions, PaneOptions, Transport, Turn, open_collie};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    durable_examples::logs(); // on standard error, filtered by RUST_LOG (lib.rs)
    let listen = std::env::args().nth(1).unwrap_or_else(|| "127.0.0.1:8443".into());
    // A self-signed certificate for development: Collie pins its
    // fingerprint. Over HTTPS the token is the only barrier: Allow and Deny only.
    let transport = Transport::https(listen).self_signed();
    let collie = open_collie(OpenOptions::new("windows").transport(transport)).await?;
    let tab = collie.workspace("win", "Windows")?.tab("main", "Chats")?;
    tab.pane("chat", PaneOptions::new("Echo"))?.on_send(|turn: Turn| async move {
        turn.reply(format!("You said: {}", turn.text()));
    })?;
    collie.ready();
    println!("listening {} fingerprint {}", collie.address(), collie.fingerprint().unwrap_or_default());
    tokio::signal::ctrl_c().await?;
    collie.close().await;
    Ok(())
}
