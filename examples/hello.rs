//! The seed's ten-line `hello.mjs`, in Rust: one question on the phone.
//!
//! `cargo run --example hello`, then in a second terminal
//! `collie durable attach hello --socket <the path it prints>` and
//! `collie restart`. Tap Yes or No on the phone.

use durable_sdk::{AskOption, AskSpec, Cap, Caps, OpenOptions, PaneOptions, open_collie};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    durable_examples::logs(); // on standard error, filtered by RUST_LOG (lib.rs)
    let collie = open_collie(OpenOptions::new("hello").caps(Caps::none().with(Cap::Asks))).await?;
    let tab = collie.workspace("hello", "Hello")?.tab("main", "Questions")?;
    let pane = tab.pane("deploy", PaneOptions::new("Deploy").harness("hello"))?;
    collie.ready();
    println!("listening {}", collie.address());
    let options = [AskOption::new("yes", "Yes"), AskOption::new("no", "No")];
    let answer =
        pane.ask(AskSpec::choice("deploy-1", "Deploy to staging?", options).item_id("deploy-1"))?.await?;
    println!("answer: {}", answer.option_id().unwrap_or_default());
    collie.close().await;
    Ok(())
}
