//! An agent built from `durable-core` and `durable-tls` alone (and tokio),
//! without the SDK: what an agent on Windows, where HTTPS is the only
//! transport, can depend on. The Windows check builds it.
//!
//! ```sh
//! COLLIE_TOKEN=$(head -c 24 /dev/urandom | base64) cargo run -p durable-tls --example core_agent
//! ```
//!
//! It serves one pane whose chat answers each message, over HTTPS on
//! 127.0.0.1:8443 with a self-signed certificate (its fingerprint is
//! printed, for Collie to pin), until Ctrl-C.

use durable_core::PaneOptions;
use durable_core::types::Item;
use durable_tls::{CoreOptions, SystemClock, TlsOptions, Turn, create_core, random_epoch, stderr_warn};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let collie = create_core(
        CoreOptions::builder()
            .host_name("core-agent")
            .clock(SystemClock)
            .epoch(random_epoch())
            .warn(stderr_warn())
            .build()?,
    );
    let tab = collie.workspace("main", "Main")?.tab("chat", "Chat")?;
    let pane = tab.pane("hello", PaneOptions::new("Hello"))?;
    pane.write(Item::reply("welcome", "Hello: say something.")?)?;
    pane.on_send(|turn: Turn| async move { turn.reply(format!("You said: {}", turn.text())) })?;
    // The token from COLLIE_TOKEN.
    collie.serve(TlsOptions::builder().listen("127.0.0.1:8443").self_signed().build()?).await?;
    println!("serving on {} (fingerprint {})", collie.address(), collie.fingerprint().unwrap_or_default());
    collie.ready();
    tokio::signal::ctrl_c().await?;
    collie.close().await;
    Ok(())
}
