//! `xtask-bench bench ARGS` runs the bench (`cargo xtask bench` starts it
//! from a release build); `xtask-bench bench-serve ARGS` is one of the
//! servers it measures, each in a process of its own; `soak` and `flood`
//! load the desk as many phones would (`cargo xtask soak`, `cargo xtask
//! flood`).

mod soak;

use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("bench") => xtask_bench::main(&args[1..]),
        Some("bench-serve") => xtask_bench::serve::main(&args[1..]),
        // The floor of the `acp` group: the least relay that keeps §9.1.
        Some("bench-relay") => xtask_bench::relay::main(&args[1..]),
        // Many pollers against the desk for a minute; memory after a flood.
        Some("soak") => soak::main(&args[1..]),
        Some("flood") => soak::flood_main(&args[1..]),
        _ => {
            eprintln!(
                "usage: cargo xtask bench [--window-ms N] [--conns N] [--memory-seconds N] [--only GROUPS] [--instructions [--keep-dumps]]"
            );
            ExitCode::from(2)
        }
    }
}
