//! The SDK's examples, as `[[example]]` targets of this package:
//! `cargo run --example hello` (the seed's ten-line quick start).

// The desk's modules, compiled here under test (at the crate root, as in
// the desk) so that their unit tests run with `cargo test`; the desk example
// itself is built as a plain binary, which `tests/desk*.rs` start as a child.
#[cfg(test)]
#[allow(dead_code, unreachable_pub)]
#[path = "durable-member/asks.rs"]
mod asks;
#[cfg(test)]
#[allow(dead_code, unreachable_pub)]
#[path = "durable-member/cli.rs"]
mod cli;
#[cfg(test)]
#[allow(dead_code, unreachable_pub)]
#[path = "durable-member/desk.rs"]
mod desk;
#[cfg(test)]
#[allow(dead_code, unreachable_pub)]
#[path = "durable-member/history.rs"]
mod history;
#[cfg(test)]
#[allow(dead_code, unreachable_pub)]
#[path = "durable-member/store.rs"]
mod store;
