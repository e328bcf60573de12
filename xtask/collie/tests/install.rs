//! `durable` as an author gets it: `cargo install --path crates/durable-cli`
//! into a fresh root, then that binary (not this build's) run against the
//! support desk and the shop example over the socket and over HTTPS:
//! `durable doctor` passes, `durable phone --plain` answers the refund card
//! and sees the refund issued, and `durable conformance` (the generic tier,
//! read-only, then `--writes`) ends `N passed, 0 failed`.
//!
//! The install shares this build's target folder (`CARGO_TARGET_DIR`), so
//! it compiles at most `durable-cli` itself, and runs `--offline` (every
//! crate is in cargo's cache once the tests are built) and `--locked` (the
//! workspace's `Cargo.lock`).

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use support::{Desk, Lines, TestDir, run_durable, text};

/// `cargo install --path crates/durable-cli --root <root> --debug --locked
/// --offline`: the installed `durable`.
fn install(root: &Path) -> PathBuf {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let started = std::time::Instant::now();
    let out = Command::new(cargo)
        .args(["install", "--path", "crates/durable-cli", "--root"])
        .arg(root)
        .args(["--debug", "--locked", "--offline", "--quiet"])
        .env("CARGO_TARGET_DIR", support::target_dir())
        .current_dir(support::root())
        .output()
        .expect("running cargo install");
    assert!(out.status.success(), "cargo install failed:\n{}", text(&out));
    // For CI's log (not checked: no test rests on the clock).
    eprintln!("cargo install: {:.1} s", started.elapsed().as_secs_f64());
    let bin = root.join("bin").join("durable");
    assert!(bin.is_file(), "no {} after cargo install:\n{}", bin.display(), text(&out));
    bin
}

/// Doctor, phone and conformance from `bin` against `agent`, whose refund
/// button sits on `pane`.
fn check(bin: &Path, name: &str, agent: &Desk, pane: &str) {
    let token = agent.token.as_deref();
    let out = run_durable(bin, "doctor", &agent.args(), token);
    let t = text(&out);
    assert!(out.status.success(), "{name}: durable doctor:\n{t}");
    assert!(t.contains("doctor: every check passed"), "{name}: durable doctor:\n{t}");

    let mut args = agent.args();
    args.push("--plain".into());
    let mut p = Lines::start_bin(bin, &args, token);
    p.send(&format!("open {pane}"));
    p.send("action refund");
    p.expect("action refund: done");
    p.expect("refund wants to run");
    p.send("answer #1 allow");
    p.expect("answered (decided by phone)");
    p.expect("Refund of 40 issued");
    p.send("quit");
    let seen = p.seen.join("\n");
    assert!(!seen.contains("panicked"), "{name}: durable phone:\n{seen}");
    if let Some(token) = token {
        assert!(!seen.contains(token), "{name}: the token shows:\n{seen}");
    }
    assert!(p.finish().success(), "{name}: durable phone:\n{seen}");

    for writes in [false, true] {
        let mut args = agent.args();
        if writes {
            args.push("--writes".into());
        }
        let out = run_durable(bin, "conformance", &args, token);
        let t = text(&out);
        let last = String::from_utf8_lossy(&out.stdout).lines().last().unwrap_or_default().to_owned();
        assert!(
            out.status.success() && last.ends_with(" passed, 0 failed") && !last.starts_with("0 passed"),
            "{name}: durable conformance {args:?} ({:?}):\n{t}",
            out.status.code()
        );
        if let Some(token) = token {
            assert!(!t.contains(token), "{name}: the token shows:\n{t}");
        }
    }
}

#[test]
fn installed_durable_checks_answers_and_conforms_the_desk_and_the_shop() {
    let root = TestDir::new("install");
    let bin = install(&root.0);
    let out = Command::new(&bin).arg("--version").output().expect("running the installed durable");
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("durable "), "{}", text(&out));

    // Each agent on a folder of its own; the four at once.
    let dirs: Vec<TestDir> = (0..4).map(|n| TestDir::new(&format!("inst{n}"))).collect();
    std::thread::scope(|s| {
        let bin = &bin;
        let dirs = &dirs;
        s.spawn(move || check(bin, "desk on its socket", &Desk::socket(&dirs[0], &[]), "ticket-1"));
        s.spawn(move || check(bin, "desk over HTTPS", &Desk::https(&dirs[1], &[]), "ticket-1"));
        s.spawn(move || check(bin, "shop on its socket", &Desk::shop_socket(&dirs[2]), "orders"));
        s.spawn(move || check(bin, "shop over HTTPS", &Desk::shop_https(&dirs[3]), "orders"));
    });
}
