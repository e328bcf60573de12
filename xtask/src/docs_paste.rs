//! Docs an author can paste: every code example in the doc comments of the
//! published crates names only `durable_sdk`, the one crate an agent depends
//! on. Rustdoc shows an item re-exported by durable-sdk with its own docs, so
//! an example on `durable_runtime::ChatHandler` is read on
//! `durable_sdk::handlers::ChatHandler`'s page: it must say
//! `durable_sdk::handlers::ChatHandler` (the inner crates have durable-sdk as
//! a path-only dev-dependency, so the example still runs as their doctest).
//!
//! Checked: every fenced block in `///` and `//!` comments under the crates'
//! `src/` but `text`, `sh`, `json` and `console` blocks; lines rustdoc hides
//! (`# …`) are not checked. Left out: the crate-level docs (`//!` in
//! `src/lib.rs`) of the inner crates, which durable-sdk's pages never show
//! (durable-pi's modules are inlined under `durable_sdk::pi`, so their `//!`
//! docs are checked).

use crate::project_root;
use crate::tidy::rust_files;

/// The crates whose doc comments an author reads on durable-sdk's pages.
const CRATES: [&str; 8] = [
    "durable-types",
    "durable-core",
    "durable-runtime",
    "durable-socket",
    "durable-tls",
    "durable-pi",
    "durable-http",
    "durable-sdk",
];

/// Crates an author does not depend on.
const FORBIDDEN: [&str; 9] = [
    "durable_core::",
    "durable_runtime::",
    "durable_types::",
    "durable_socket::",
    "durable_tls::",
    "durable_http::",
    "durable_pi::",
    "durable_process::",
    "serde_json::",
];

/// Fences whose blocks are not Rust.
const NOT_RUST: [&str; 4] = ["text", "sh", "json", "console"];

/// Fewer blocks than this means the scan lost its way (the crates hold
/// about thirty).
const MIN_BLOCKS: usize = 20;

/// What the scan of some files found.
#[derive(Debug, Default, PartialEq)]
struct Scan {
    /// The code blocks checked.
    blocks: usize,
    /// `file:line: what`, for each line that breaks the rule.
    hits: Vec<String>,
}

/// A line's doc comment, if it is one: its kind (`///` or `//!`) and its
/// text after the marker and one space.
fn doc_line(line: &str) -> Option<(&'static str, &str)> {
    let line = line.trim_start();
    let (kind, rest) = if let Some(rest) = line.strip_prefix("//!") {
        ("//!", rest)
    } else if let Some(rest) = line.strip_prefix("///") {
        if rest.starts_with('/') {
            return None; // `////` is a plain comment
        }
        ("///", rest)
    } else {
        return None;
    };
    Some((kind, rest.strip_prefix(' ').unwrap_or(rest)))
}

/// Whether rustdoc hides the line in the rendered example.
fn hidden(code: &str) -> bool {
    let code = code.trim_start();
    code == "#" || code.starts_with("# ")
}

/// Whether a fence's info string (after the backticks) marks a block that
/// is not Rust.
fn not_rust(info: &str) -> bool {
    info.split([',', ' ']).map(str::trim).any(|word| NOT_RUST.contains(&word))
}

/// Scans one file. `skip_crate_docs`: leave out its `//!` docs (an inner
/// crate's `src/lib.rs`).
fn scan_file(file: &str, text: &str, skip_crate_docs: bool, scan: &mut Scan) {
    // The open block: the kind of comment it is in, whether it is checked,
    // the line of its fence.
    let mut open: Option<(&str, bool, usize)> = None;
    for (n, line) in text.lines().enumerate() {
        let n = n + 1;
        let doc = doc_line(line);
        let Some((kind, body)) = doc else {
            if let Some((_, _, start)) = open.take() {
                scan.hits.push(format!("{file}:{start}: code block not closed before its doc comment ends"));
            }
            continue;
        };
        let fence = body.trim_start().strip_prefix("```");
        match (open, fence) {
            (None, Some(info)) => {
                let checked = !(not_rust(info) || (skip_crate_docs && kind == "//!"));
                if checked {
                    scan.blocks += 1;
                }
                open = Some((kind, checked, n));
            }
            (Some((open_kind, _, start)), _) if open_kind != kind => {
                scan.hits.push(format!("{file}:{start}: code block not closed before its doc comment ends"));
                open = None;
            }
            (Some(_), Some(_)) => open = None,
            (Some((_, true, _)), None) if !hidden(body) => {
                for name in FORBIDDEN {
                    if body.contains(name) {
                        scan.hits.push(format!("{file}:{n}: {name}"));
                    }
                }
            }
            _ => {}
        }
    }
    if let Some((_, _, start)) = open {
        scan.hits.push(format!("{file}:{start}: code block not closed at the end of the file"));
    }
}

#[test]
fn doc_examples_name_only_durable_sdk() {
    let root = project_root();
    let mut scan = Scan::default();
    for krate in CRATES {
        let src = root.join("crates").join(krate).join("src");
        let mut paths = Vec::new();
        rust_files(&src, &mut paths);
        assert!(!paths.is_empty(), "no sources under {}", src.display());
        paths.sort();
        for path in paths {
            let text = std::fs::read_to_string(&path).unwrap();
            let file = format!("crates/{krate}/src/{}", path.strip_prefix(&src).unwrap().display());
            let skip_crate_docs = krate != "durable-sdk" && path == src.join("lib.rs");
            scan_file(&file, &text, skip_crate_docs, &mut scan);
        }
    }
    assert!(
        scan.hits.is_empty(),
        "doc examples name a crate an author does not have; use the path durable_sdk exports \
         (`durable_sdk::handlers::ChatHandler`, `durable_sdk::json!`, …):\n{}",
        scan.hits.join("\n")
    );
    assert!(scan.blocks >= MIN_BLOCKS, "only {} doc code blocks found: the scan is lost", scan.blocks);
}

#[test]
fn forbidden_names_are_found_in_shown_lines_of_rust_blocks() {
    let text = "\
//! ```
//! use durable_core::Core;
//! ```
/// A handler.
///
/// ```no_run
/// # use durable_types::Hidden;
/// use durable_sdk::handlers::ChatHandler;
///     let v = serde_json::json!({});
/// ```
///
/// ```text
/// durable_core::Core in prose
/// ```
//// ```
//// durable_core::NotDocs
//// ```
pub trait ChatHandler {}
    /// ```rust,ignore
    /// durable_pi::Session::parse(b\"\");
    /// ```
";
    let mut lib = Scan::default();
    scan_file("lib.rs", text, true, &mut lib);
    assert_eq!(
        lib,
        Scan { blocks: 2, hits: vec!["lib.rs:9: serde_json::".into(), "lib.rs:20: durable_pi::".into()] }
    );
    let mut module = Scan::default();
    scan_file("m.rs", text, false, &mut module);
    assert_eq!(module.blocks, 3);
    assert_eq!(module.hits, ["m.rs:2: durable_core::", "m.rs:9: serde_json::", "m.rs:20: durable_pi::"]);
}

#[test]
fn unclosed_blocks_are_reported() {
    let mut scan = Scan::default();
    scan_file("a.rs", "/// ```\n/// let x = 1;\nfn a() {}\n//! ```\n", false, &mut scan);
    assert_eq!(
        scan.hits,
        [
            "a.rs:1: code block not closed before its doc comment ends",
            "a.rs:4: code block not closed at the end of the file"
        ]
    );
}
