//! The Windows recipe: no private socket there, so the core is served over
//! HTTPS with a bearer token — the same code runs on any platform.
//!
//! ```text
//! set COLLIE_TOKEN=<at least 32 bytes, e.g. from `openssl rand -hex 32`>
//! cargo run --example windows -- 127.0.0.1:8443
//! ```
//!
//! It builds with `durable-sdk` and only its `tls` feature:
//! `durable-sdk = { version = "0.1", default-features = false, features = ["tls"] }`.

use durable_sdk::tls::TlsOptions;
use durable_sdk::{ChatHandler, CoreOptions, PaneOptions, Turn, create_core, serve};

struct Echo;

impl ChatHandler for Echo {
    async fn turn(&self, turn: Turn) {
        turn.reply(format!("You said: {}", turn.text()));
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let listen = std::env::args().nth(1).unwrap_or_else(|| "127.0.0.1:8443".into());
    // Over HTTPS the token is the only barrier: Allow and Deny only.
    let core = create_core(CoreOptions::builder().host_name("windows").allow_always(false))?;
    let tab = core.workspace("win", "Windows")?.tab("main", "Chats")?;
    tab.pane("chat", PaneOptions::new("Echo"))?.on_send(Echo)?;
    // A self-signed certificate for development: Collie pins its fingerprint.
    let server = serve(&core, TlsOptions::builder().listen(listen).self_signed().build()?).await?;
    core.ready();
    println!("listening {} fingerprint {}", server.address(), server.fingerprint().unwrap_or_default());
    tokio::signal::ctrl_c().await?;
    server.close().await;
    Ok(())
}
