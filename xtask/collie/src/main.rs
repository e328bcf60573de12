//! Collie's side of a durable agent, run by `cargo xtask <task>`:
//! `conformance` plays Collie against the support desk over both transports;
//! `phone` looks at an agent and answers it from a terminal as Collie's
//! phone would; `doctor` runs the checks Collie runs before it shows an
//! agent; `soak` polls the desk as many phones would for a minute, and
//! `flood` measures its memory after a flood of connections and bodies.

mod conformance;
mod doctor;
mod link;
mod phone;
mod pin;
mod soak;

use std::process::ExitCode;

use xtask_bench::project_root;

/// Each task's own arguments are in `cargo xtask help` and the task's
/// usage line.
const USAGE: &str =
    "usage: cargo xtask (conformance | phone | doctor | soak | flood) ARGS (cargo xtask help lists them)";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("conformance") => conformance::main(&args[1..]),
        Some("phone") => phone::main(&args[1..]),
        Some("doctor") => doctor::main(&args[1..]),
        // Many pollers against the desk for a minute; memory after a flood.
        Some("soak") => soak::main(&args[1..]),
        Some("flood") => soak::flood_main(&args[1..]),
        Some("-h" | "--help" | "help") => {
            println!("{USAGE}");
            ExitCode::SUCCESS
        }
        _ => {
            eprintln!("{USAGE}");
            ExitCode::from(2)
        }
    }
}
