//! Workspace tasks, rust-analyzer style: `cargo xtask <task>`.
//!
//! This package is kept light (its one dependency is serde_json) because
//! cargo builds it before it runs any task. The tasks that need hyper, rustls
//! and the SDK live in packages of their own, and this one hands them over
//! with `cargo run`:
//!
//! - `durable-cli` (`crates/durable-cli`, the `durable` binary authors
//!   install), Collie's side of an agent: `phone` and `doctor` run
//!   `durable phone` and `durable doctor`.
//! - `xtask-collie` (`xtask/collie`): `conformance` runs `durable
//!   conformance`'s generic tier and the support desk's own cases against
//!   the desk over both transports; `conformance --examples`, the generic
//!   tier with `--writes` against each example.
//! - `xtask-bench` (`xtask/bench`): `bench` measures what a poll and an
//!   answer cost against a bare hyper server; `soak` and `flood` load the
//!   desk. They run from a release build (figures of an unoptimized build
//!   say nothing), so that a fresh clone builds the measured code once and
//!   nothing else.
//!
//! Here: `install-pi` puts node 22 and the real Pi in `.tools/` for
//! `durable-pi`'s live tests; `fuzz` installs cargo-fuzz and runs the fuzz
//! targets of `fuzz/`; `cargo test -p xtask` runs the tidy checks that keep
//! the sans-IO core honest.

#[cfg(test)]
mod docs_paste;
#[cfg(test)]
mod fresh_crate;
mod fuzz;
mod install_pi;
#[cfg(test)]
mod tidy;
#[cfg(test)]
mod tidy_package;

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

const USAGE: &str = "usage: cargo xtask conformance [--transport socket|tls|both] [--tier generic|desk|both] [--filter SUBSTR]
       cargo xtask conformance --examples [--filter SUBSTR]
       cargo xtask phone ARGS (durable phone; --help lists them)
       cargo xtask doctor ARGS (durable doctor; --help lists them)
       cargo xtask install-pi
       cargo xtask bench [--window-ms N] [--conns N] [--memory-seconds N] [--only GROUPS] [--instructions [--keep-dumps]]
       cargo xtask screenshots
       cargo xtask fuzz (--smoke | --runs N | --time SECS) [--sanitizer address|none] [TARGET...]
       cargo xtask soak [--seconds N] [--socket-pollers N] [--https-pollers N]
       cargo xtask flood [--conns N] [--bodies N] [--held N] [--transport socket|https|both] [--desk PATH]";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(task) = args.first().map(String::as_str) else {
        eprintln!("{USAGE}");
        return ExitCode::from(2);
    };
    match task {
        "install-pi" => install_pi::main(&args[1..]),
        "fuzz" => fuzz::main(&args[1..]),
        "screenshots" => screenshots(),
        "bench" | "soak" | "flood" => hand_over(Package::Bench, &args),
        "conformance" => hand_over(Package::Collie, &args),
        "phone" | "doctor" => hand_over(Package::Cli, &args),
        "-h" | "--help" | "help" => {
            println!("{USAGE}");
            ExitCode::SUCCESS
        }
        _ => {
            eprintln!("{USAGE}");
            ExitCode::from(2)
        }
    }
}

/// The packages that hold the heavier tasks.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Package {
    Bench,
    Cli,
    Collie,
}

/// The `cargo` arguments that run `args` (the task and its own arguments)
/// from `package`, in the workspace whose manifest is `manifest`. The task
/// runs in the caller's folder, as every `cargo run` does, so a relative
/// path among its arguments means what it meant where it was typed.
fn cargo_run_args(package: Package, manifest: &Path, args: &[String]) -> Vec<String> {
    let run: &[&str] = match package {
        // Built in release mode and nothing else: the bench measures that build.
        Package::Bench => &["run", "--release", "-p", "xtask-bench", "--bin", "xtask-bench"],
        Package::Cli => &["run", "-p", "durable-cli", "--bin", "durable"],
        // The desk's tier and the examples' run: this repository's, not the published binary's.
        Package::Collie => &["run", "-p", "xtask-collie", "--bin", "xtask-collie"],
    };
    let manifest = ["--manifest-path".to_owned(), manifest.display().to_string(), "--".to_owned()];
    run.iter().map(|s| s.to_string()).chain(manifest).chain(args.iter().cloned()).collect()
}

/// Runs the task with `cargo run` in this process's place (on Unix), so the
/// task owns the terminal, its signals and its exit status.
fn hand_over(package: Package, args: &[String]) -> ExitCode {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(&cargo);
    cmd.args(cargo_run_args(package, &project_root().join("Cargo.toml"), args));
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        let e = cmd.exec();
        eprintln!("xtask: cannot run {}: {e}", Path::new(&cargo).display());
        ExitCode::FAILURE
    }
    #[cfg(not(unix))]
    match cmd.status() {
        Ok(s) if s.success() => ExitCode::SUCCESS,
        // A code that is no byte (a Windows crash code is negative as an
        // `i32`), or none at all, is still a failure.
        Ok(s) => s
            .code()
            .and_then(|c| u8::try_from(c).ok())
            .filter(|&c| c != 0)
            .map_or(ExitCode::FAILURE, ExitCode::from),
        Err(e) => {
            eprintln!("xtask: cannot run {}: {e}", Path::new(&cargo).display());
            ExitCode::FAILURE
        }
    }
}

/// The web phone's screens as PNGs in `docs/` (`docs/web-phone-*.png`,
/// shown in the README), taken by the same Chromium as its tests: an
/// ignored test of `xtask-collie`, run on purpose, not by every test run.
fn screenshots() -> ExitCode {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let status = Command::new(&cargo)
        .args([
            "test",
            "-p",
            "xtask-collie",
            "--test",
            "web_phone",
            "--",
            "--ignored",
            "--exact",
            "screenshots",
        ])
        .current_dir(project_root())
        .status();
    match status {
        Ok(s) if s.success() => {
            println!("screenshots: docs/web-phone-card.png and docs/web-phone-list.png");
            ExitCode::SUCCESS
        }
        Ok(_) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("xtask: cannot run {}: {e}", Path::new(&cargo).display());
            ExitCode::FAILURE
        }
    }
}

/// The workspace root: the parent of this crate's manifest folder.
pub(crate) fn project_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("xtask sits in the workspace root").to_path_buf()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn the_bench_runs_from_a_release_build_of_its_own_package() {
        let run = cargo_run_args(
            Package::Bench,
            Path::new("/w/Cargo.toml"),
            &strings(&["bench", "--only", "polls"]),
        );
        let want = ["run", "--release", "-p", "xtask-bench", "--bin", "xtask-bench"];
        assert_eq!(run[..6], strings(&want)[..]);
        assert_eq!(
            run[6..],
            strings(&["--manifest-path", "/w/Cargo.toml", "--", "bench", "--only", "polls"])[..]
        );
    }

    #[test]
    fn collie_tasks_run_the_durable_binary_from_a_dev_build_with_their_arguments() {
        let run = cargo_run_args(
            Package::Cli,
            Path::new("/w/Cargo.toml"),
            &strings(&["phone", "--socket", "/tmp/a b.sock"]),
        );
        assert!(!run.contains(&"--release".to_owned()));
        assert_eq!(run[..5], strings(&["run", "-p", "durable-cli", "--bin", "durable"])[..]);
        assert_eq!(
            run[5..],
            strings(&["--manifest-path", "/w/Cargo.toml", "--", "phone", "--socket", "/tmp/a b.sock"])[..]
        );
    }

    #[test]
    fn conformance_runs_the_desks_suite_from_xtask_collie() {
        let run = cargo_run_args(
            Package::Collie,
            Path::new("/w/Cargo.toml"),
            &strings(&["conformance", "--examples"]),
        );
        assert_eq!(run[..5], strings(&["run", "-p", "xtask-collie", "--bin", "xtask-collie"])[..]);
        assert_eq!(
            run[5..],
            strings(&["--manifest-path", "/w/Cargo.toml", "--", "conformance", "--examples"])[..]
        );
    }
}
