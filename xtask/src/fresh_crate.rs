//! The README's agent, built the way a newcomer builds it: a fresh crate
//! outside the workspace, the README's own `cargo add` lines, the README's
//! first agent as its `main.rs`. Then the README's other Rust blocks, with
//! the feature the README names for the receipt store. Nothing else is
//! added: a block that needs another crate fails here.
//!
//! The crate lives in `target/fresh-crate/` with a target folder of its
//! own (a nested cargo on the workspace's would wait for the lock of the
//! `cargo test` running this); it starts from the workspace's lock file, so
//! it resolves offline to the versions the workspace tests.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::project_root;

/// The `## Your own agent` section of the README.
fn own_agent_section(readme: &str) -> &str {
    let start = readme.find("## Your own agent").expect("the README has a section `## Your own agent`");
    let rest = &readme[start + 3..];
    let end = rest.find("\n## ").map_or(readme.len(), |e| start + 3 + e);
    &readme[start..end]
}

/// The fenced blocks of `text` whose info string starts with `lang`.
fn blocks<'a>(text: &'a str, lang: &str) -> Vec<&'a str> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(open) = rest.find("```") {
        let after = &rest[open + 3..];
        let Some(line_end) = after.find('\n') else { break };
        let info = &after[..line_end];
        let body = &after[line_end + 1..];
        let Some(close) = body.find("```") else { break };
        if info.trim().starts_with(lang) {
            out.push(&body[..close]);
        }
        rest = &body[close + 3..];
    }
    out
}

/// The `cargo add` lines of the section's shell block as cargo's arguments
/// (`add …`), with the checkout's path put in and `--offline` added (this machine reaches no registry but
/// its cache).
fn cargo_add_lines(section: &str, root: &Path) -> Vec<Vec<String>> {
    let sdk = root.join("crates/durable-sdk");
    blocks(section, "sh")
        .iter()
        .flat_map(|b| b.lines())
        .filter(|l| l.trim_start().starts_with("cargo add "))
        .map(|l| {
            let mut words: Vec<String> = l.split_whitespace().skip(1).map(str::to_owned).collect();
            for w in &mut words {
                if w.starts_with("/path/to/durable-sdk") {
                    *w = sdk.display().to_string();
                }
            }
            words.push("--offline".into());
            words
        })
        .collect()
}

/// A README block as a file: hidden lines shown, and a `main` when it has
/// none (a snippet in an `async fn`).
fn as_program(block: &str) -> String {
    let mut out: String = block
        .lines()
        .map(|l| l.strip_prefix("# ").or_else(|| (l == "#").then_some("")).unwrap_or(l))
        .collect::<Vec<_>>()
        .join("\n");
    if !out.contains("fn main") {
        out.push_str("\n\nfn main() {}\n");
    }
    out
}

fn cargo(dir: &Path, target: &Path, args: &[String]) {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = Command::new(cargo)
        .args(args)
        .current_dir(dir)
        .env("CARGO_TARGET_DIR", target)
        .env_remove("RUSTFLAGS")
        .output()
        .expect("cargo runs");
    assert!(
        out.status.success(),
        "`cargo {}` in the fresh crate failed:\n{}{}",
        args.join(" "),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn fresh_crate(root: &Path) -> (PathBuf, PathBuf) {
    let base = root.join("target/fresh-crate");
    let dir = base.join("readme-agent");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("src")).unwrap();
    std::fs::write(
        dir.join("Cargo.toml"),
        "[package]\nname = \"readme-agent\"\nversion = \"0.1.0\"\nedition = \"2024\"\n\n[dependencies]\n\n[workspace]\n",
    )
    .unwrap();
    std::fs::write(dir.join("src/main.rs"), "fn main() {}\n").unwrap();
    std::fs::copy(root.join("Cargo.lock"), dir.join("Cargo.lock")).unwrap();
    (dir, base.join("target"))
}

#[test]
fn the_readme_agent_builds_in_a_fresh_crate_with_the_readme_dependencies() {
    let root = project_root();
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let section = own_agent_section(&readme);
    let adds = cargo_add_lines(section, &root);
    assert_eq!(adds.len(), 2, "the README gives two `cargo add` lines (durable-sdk, tokio): {adds:?}");
    assert!(adds[0].contains(&"durable-sdk".to_owned()) && adds[1].contains(&"tokio".to_owned()), "{adds:?}");
    let rust = blocks(section, "rust");
    assert!(rust.len() >= 2, "the README's first agent and its other recipes: {} blocks", rust.len());

    let (dir, target) = fresh_crate(&root);
    for add in &adds {
        cargo(&dir, &target, add);
    }
    let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
    let deps = manifest.split("[dependencies]").nth(1).unwrap_or_default();
    let names: Vec<&str> = deps
        .lines()
        .filter_map(|l| l.split(['=', ' ']).next())
        .filter(|n| !n.is_empty() && !n.starts_with('['))
        .collect();
    assert_eq!(names, ["durable-sdk", "tokio"], "exactly the two dependencies:\n{manifest}");
    std::fs::write(dir.join("src/main.rs"), rust[0]).unwrap();
    cargo(&dir, &target, &["build".into(), "--offline".into()]);

    // The other blocks; the receipt store's feature is the one the README names.
    let feature = "sqlite-receipts";
    assert!(section.contains(&format!("feature `{feature}`")), "the README names the store's feature");
    let mut add: Vec<String> = adds[0].iter().filter(|w| *w != "--offline").cloned().collect();
    add.extend(["--features".into(), feature.into(), "--offline".into()]);
    cargo(&dir, &target, &add);
    std::fs::create_dir_all(dir.join("examples")).unwrap();
    for (n, block) in rust.iter().enumerate().skip(1) {
        std::fs::write(dir.join(format!("examples/readme_{n}.rs")), as_program(block)).unwrap();
    }
    cargo(&dir, &target, &["build".into(), "--offline".into(), "--examples".into()]);
}

#[test]
fn the_readme_parsers_find_blocks_and_cargo_add_lines() {
    let text = "## Your own agent\n```sh\ncargo add durable-sdk --path /path/to/durable-sdk/crates/durable-sdk\ncargo add tokio --features macros\n```\n```rust,no_run\nfn main() {}\n```\n```rust\n# async fn f() {}\nlet x = 1;\n```\n## Next\n```rust\nnot this\n```\n";
    let section = own_agent_section(text);
    assert!(!section.contains("not this"));
    let adds = cargo_add_lines(section, Path::new("/repo"));
    assert_eq!(adds[0], ["add", "durable-sdk", "--path", "/repo/crates/durable-sdk", "--offline"]);
    assert_eq!(adds[1], ["add", "tokio", "--features", "macros", "--offline"]);
    let rust = blocks(section, "rust");
    assert_eq!(rust, ["fn main() {}\n", "# async fn f() {}\nlet x = 1;\n"]);
    assert_eq!(as_program(rust[1]), "async fn f() {}\nlet x = 1;\n\nfn main() {}\n");
}
