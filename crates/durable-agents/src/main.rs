//! `durable-agent`: the coding agent you already use, on your phone
//! through Collie. `durable-agent acp -- <the agent's command>` puts any
//! agent that speaks ACP (the Agent Client Protocol) there: each session is
//! a conversation, each permission request a card, the agent's sessions the
//! history.
//!
//! ```text
//! durable-agent acp [OPTIONS] -- <AGENT COMMAND>...
//! durable-agent acp [OPTIONS] --agent "<AGENT COMMAND>"
//! ```
//!
//! `durable-agent acp --help` lists the options; the crate's README says
//! how to run Claude Code, Codex, Gemini CLI or Pi this way, and how to
//! keep it up as a user service.
//!
//! This crate is a program, built on `durable-sdk` and its ACP bridge
//! (`durable_sdk::acp`): an agent of your own links `durable-sdk`, not this.

#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod acp;
mod process;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// `durable-agent`: the coding agents you use, on your phone through Collie.
#[derive(Debug, Parser)]
#[command(name = "durable-agent", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Put an ACP agent on the phone (Claude Code, Codex, Gemini CLI, Pi
    /// through pi-acp, …).
    Acp(acp::Args),
}

fn main() -> ExitCode {
    process::logs();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // `--help` and `--version` print and succeed; a usage error exits 2.
            let _ = e.print();
            return if e.use_stderr() { ExitCode::from(2) } else { ExitCode::SUCCESS };
        }
    };
    match cli.command {
        Command::Acp(args) => acp::main(args),
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
