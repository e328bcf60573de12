//! `durable`: Collie's side of a durable agent on your terminal.
//!
//! `durable phone` looks at an agent and answers it as Collie's phone
//! would, `durable doctor` runs the checks Collie runs before it shows an
//! agent, and `durable conformance` checks that an agent speaks the wire as
//! Collie expects. `durable --help` and `durable <command> --help` say more.

use std::process::ExitCode;

fn main() -> ExitCode {
    durable_cli::run(std::env::args_os())
}
