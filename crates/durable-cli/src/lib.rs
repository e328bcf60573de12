//! The `durable` command line: Collie's side of a durable agent, for the
//! agent's author.
//!
//! - `durable phone` looks at an agent and answers it from a terminal as
//!   Collie's phone would: the chat, the cards, every write.
//! - `durable doctor` runs the checks Collie runs before it shows an agent,
//!   one line each with a fix when one fails.
//! - `durable conformance` plays Collie against an agent and checks what
//!   the wire promises for what the agent declares.
//!
//! Each takes the agent as `--socket PATH` (its private Unix socket) or
//! `--url URL` with `--fingerprint SHA-256` (or `--insecure` on loopback);
//! over HTTPS the token comes from `COLLIE_TOKEN` and is never printed.
//!
//! This crate is a program: its library holds what the binary runs, and
//! [`run`] is its only stable item.

#![forbid(unsafe_code)]
#![deny(missing_docs)]

use std::ffi::OsString;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[doc(hidden)]
pub mod conformance;
mod doctor;
mod link;
mod phone;
mod pin;
mod text;
mod web;

/// `durable`: Collie's side of a durable agent.
#[derive(Debug, Parser)]
#[command(name = "durable", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Look at an agent and answer it as Collie's phone would.
    Phone(phone::Args),
    /// Run the checks Collie runs before it shows an agent.
    Doctor(doctor::Args),
    /// Check that an agent speaks the wire as Collie expects.
    Conformance(conformance::Args),
}

/// Runs `durable` with these arguments (the first is the program's name):
/// the exit code is 0 when all went well, 1 when a check failed or the
/// agent could not be reached, 2 for a usage error.
pub fn run<I, T>(args: I) -> ExitCode
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => {
            // `--help` and `--version` print and succeed; a usage error exits 2.
            let _ = e.print();
            return if e.use_stderr() { ExitCode::from(2) } else { ExitCode::SUCCESS };
        }
    };
    match cli.command {
        Command::Phone(args) => phone::main(args),
        Command::Doctor(args) => doctor::main(args),
        Command::Conformance(args) => conformance::main(args),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }
}
