//! Workspace tasks, rust-analyzer style: `cargo xtask conformance` plays Collie
//! against the support desk over both transports; `cargo xtask phone` looks at
//! an agent and answers it from a terminal as Collie's phone would;
//! `cargo xtask doctor` runs the checks Collie runs before it shows an agent;
//! `cargo xtask install-pi` puts node 22 and the real Pi in `.tools/` for
//! `durable-pi`'s live tests;
//! `cargo xtask bench` measures what a poll costs against a bare hyper server;
//! `cargo xtask fuzz` installs cargo-fuzz and runs the fuzz targets of `fuzz/`;
//! `cargo test -p xtask` runs the tidy checks that keep the sans-IO core honest.

mod bench;
mod conformance;
mod doctor;
mod fuzz;
mod install_pi;
mod link;
mod phone;
mod pin;
mod soak;
#[cfg(test)]
mod tidy;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

const USAGE: &str = "usage: cargo xtask conformance [--transport socket|tls|both] [--filter SUBSTR]
       cargo xtask phone (--socket PATH | --url URL) [--fingerprint SHA256 | --insecure] [--plain]
       cargo xtask doctor (--socket PATH | --url URL) [--fingerprint SHA256 | --insecure]
       cargo xtask install-pi
       cargo xtask bench [--window-ms N] [--conns N] [--memory-seconds N]
       cargo xtask fuzz (--smoke | --runs N | --time SECS) [--sanitizer address|none] [TARGET...]
       cargo xtask soak [--seconds N] [--socket-pollers N] [--https-pollers N]
       cargo xtask flood [--conns N] [--bodies N] [--held N] [--transport socket|https|both] [--desk PATH]";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("conformance") => conformance::main(&args[1..]),
        Some("install-pi") => install_pi::main(&args[1..]),
        Some("phone") => phone::main(&args[1..]),
        Some("doctor") => doctor::main(&args[1..]),
        Some("bench") => bench::main(&args[1..]),
        Some("fuzz") => fuzz::main(&args[1..]),
        // The bench's servers, each in a process of its own.
        Some("bench-serve") => bench::serve::main(&args[1..]),
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

/// The workspace root: the parent of this crate's manifest folder.
pub(crate) fn project_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("xtask sits in the workspace root").to_path_buf()
}
