//! Tidy checks as tests (rust-analyzer style): the sans-IO core names no IO
//! and is a machine of plain data (no lock, channel, future or tokio, in its
//! sources or its dependency tree; the runtime's tree holds no tokio
//! runtime or IO feature), the crates a Windows
//! agent uses pull no Unix-only crate, and no tracked file leans on a contract
//! outside the repository (`docs/wire.md` is the contract).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::project_root;

/// Names the IO-free crates must not contain, comments included.
const FORBIDDEN_IN_CORE: [&str; 8] = [
    "std::fs",
    "std::net",
    "SystemTime::now",
    "Instant::now",
    "println!",
    "eprintln!",
    "tokio::spawn",
    "tokio::time",
];

/// Names that mean a lock, an atomic, a channel, a future, a thread or a
/// runtime: what durable-core, the machine, must not contain, comments
/// included. `Arc` is fine: immutable sharing.
const FORBIDDEN_IN_MACHINE: [&str; 30] = [
    "dyn Future",
    "BoxFuture",
    "std::thread",
    "dyn Fn",
    "tokio",
    "futures",
    "async fn",
    "async move",
    "async {",
    ".await",
    "impl Future",
    "Pin<",
    "Waker",
    "Mutex",
    "RwLock",
    "Condvar",
    "Barrier",
    "Cell<",
    "RefCell",
    "OnceCell",
    "OnceLock",
    "LazyLock",
    "Atomic",
    "mpsc",
    "oneshot",
    "watch::",
    "Notify",
    "Semaphore",
    "thread_local!",
    "static mut",
];

/// durable-core's top-level modules, each with the modules of the crate it
/// may use: the layers of the machine, so that they form no cycle (the
/// rules — `asks`, `delivery`, `history`, `layout`, `machine`, `once`,
/// `phone_writes`, `poll`, `recovery`, `routes`, `writes` — use the plain
/// data and one another; the plain data uses only plain data). A module
/// not listed fails the check, so a new one says where it stands.
const MACHINE: &[&str] = &[
    "asks", "data", "layout", "machine", "once", "poll", "recovery", "request", "respond", "routes", "state",
    "timers", "writes",
];
const CORE_MODULES: [(&str, &[&str]); 17] = [
    ("asks", MACHINE),
    ("history", MACHINE),
    ("writes", MACHINE),
    ("delivery", MACHINE),
    ("phone_writes", MACHINE),
    ("once", MACHINE),
    ("recovery", MACHINE),
    ("layout", MACHINE),
    ("data", &["data"]),
    ("state", &["data", "state", "timers"]),
    ("timers", &[]),
    ("request", &[]),
    ("respond", &["request"]),
    ("machine", MACHINE),
    ("routes", MACHINE),
    ("poll", MACHINE),
    ("cadence", &[]),
];

/// Crates that mean a runtime, a lock or a channel (by name or by the
/// start of their name): none may be in durable-core's normal dependency
/// tree.
const FORBIDDEN_IN_CORE_TREE: [&str; 8] =
    ["tokio", "futures", "async-", "crossbeam", "parking_lot", "flume", "event-listener", "smol"];

/// The crates of a tree that [`FORBIDDEN_IN_CORE_TREE`] names.
fn runtime_crates(names: &BTreeSet<String>) -> Vec<String> {
    names.iter().filter(|n| FORBIDDEN_IN_CORE_TREE.iter().any(|f| n.starts_with(f))).cloned().collect()
}

/// tokio features that mean a runtime, sockets, processes or files:
/// durable-runtime holds none of them (the program or a transport starts
/// the runtime and opens what it serves on). Its timers (`time`: the
/// shutdown grace of `Collie::close`) are its own, as the machine's
/// deadlines are its driver's.
const FORBIDDEN_TOKIO_FEATURES: [&str; 8] =
    ["rt", "rt-multi-thread", "net", "fs", "process", "signal", "io-std", "io-util"];

/// Crates that only build or only mean something on Unix.
const UNIX_ONLY: [&str; 8] =
    ["nix", "signal-hook", "signal-hook-registry", "users", "uzers", "termios", "procfs", "daemonize"];

/// Every `.rs` file under `dir`.
pub(crate) fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Every `file:line: name` where a forbidden name appears.
fn forbidden_names(files: &[(String, String)]) -> Vec<String> {
    names_in(files, &FORBIDDEN_IN_CORE)
}

/// Every `file:line: name` where one of `names` appears.
fn names_in(files: &[(String, String)], names: &[&str]) -> Vec<String> {
    let mut hits = Vec::new();
    for (file, text) in files {
        for (n, line) in text.lines().enumerate() {
            for name in names {
                if line.contains(name) {
                    hits.push(format!("{file}:{}: {name}", n + 1));
                }
            }
        }
    }
    hits
}

#[test]
fn core_and_types_sources_name_no_io() {
    let root = project_root();
    let mut files = Vec::new();
    for krate in ["crates/durable-core/src", "crates/durable-types/src"] {
        let mut paths = Vec::new();
        rust_files(&root.join(krate), &mut paths);
        assert!(!paths.is_empty(), "no sources under {krate}");
        for path in paths {
            let text = std::fs::read_to_string(&path).unwrap();
            files.push((path.strip_prefix(&root).unwrap().display().to_string(), text));
        }
    }
    let hits = forbidden_names(&files);
    assert!(hits.is_empty(), "the IO-free crates name IO (comments count too):\n{}", hits.join("\n"));
}

/// What `crate_modules_named` calls a use of an item of the crate's root
/// (`crate::Core`, or `super::` from a top-level module): it reaches every
/// module `lib.rs` re-exports from, so no machine module may.
const CRATE_ROOT: &str = "crate root";

/// The crate modules a source names: `crate::<module>`, each item of a
/// `crate::{a::X, b}` group, and [`CRATE_ROOT`] for an item of the root
/// named in code (in a doc comment it is a link, not a use). With
/// `top_level`, the file is a top-level module's own, where `super::` is
/// the crate's root too.
fn crate_modules_named(text: &str, top_level: bool) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let ident_end = |s: &str| s.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(s.len());
    for (at, _) in text.match_indices("crate::") {
        let line_start = text[..at].rfind('\n').map_or(0, |n| n + 1);
        let line = text[line_start..at].trim_start();
        let in_doc = line.starts_with("///") || line.starts_with("//!");
        let rest = &text[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            // The first segment of each item at the group's top level.
            let mut depth = 0usize;
            let mut item_start = true;
            for (i, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => item_start = true,
                    c if item_start && (c.is_ascii_alphanumeric() || c == '_') => {
                        let name = &group[i..i + ident_end(&group[i..])];
                        let upper = name.starts_with(|c: char| c.is_ascii_uppercase());
                        found.insert(if upper { CRATE_ROOT.to_owned() } else { name.to_owned() });
                        item_start = false;
                    }
                    _ => {}
                }
            }
            continue;
        }
        let name = &rest[..ident_end(rest)];
        if name.starts_with(|c: char| c.is_ascii_lowercase()) {
            found.insert(name.to_owned());
        } else if !name.is_empty() && !in_doc {
            found.insert(CRATE_ROOT.to_owned());
        }
    }
    // Unindented, `super::` is the file's parent: the crate's root; indented
    // (inside `mod tests`), it is the file itself.
    if top_level
        && text.lines().any(|l| l.starts_with("use super::") || l.starts_with("pub(crate) use super::"))
    {
        found.insert(CRATE_ROOT.to_owned());
    }
    found
}

/// Whether a durable-core source file is a top-level module's own file
/// (`src/<m>.rs` or `src/<m>/mod.rs`), where `super` is the crate's root.
fn is_top_level_module_file(path: &str) -> bool {
    let Some(inside) = path.split("/src/").nth(1) else { return false };
    let parts: Vec<&str> = inside.split('/').collect();
    parts.len() == 1 || (parts.len() == 2 && parts[1] == "mod.rs")
}

/// The files of one top-level module of durable-core (`src/<m>.rs` or
/// `src/<m>/`), as `(path, text)`.
fn core_module_files(module: &str) -> Vec<(String, String)> {
    let root = project_root();
    let src = root.join("crates/durable-core/src");
    let mut paths = Vec::new();
    rust_files(&src.join(module), &mut paths);
    let single = src.join(format!("{module}.rs"));
    if single.is_file() {
        paths.push(single);
    }
    assert!(!paths.is_empty(), "durable-core has no module {module}");
    paths
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p).unwrap();
            (p.strip_prefix(&root).unwrap().display().to_string(), text)
        })
        .collect()
}

#[test]
fn core_is_a_machine_of_plain_data() {
    let root = project_root();
    let src = root.join("crates/durable-core/src");
    let mut paths = Vec::new();
    rust_files(&src, &mut paths);
    let files: Vec<(String, String)> = paths
        .iter()
        .map(|p| (p.strip_prefix(&root).unwrap().display().to_string(), std::fs::read_to_string(p).unwrap()))
        .collect();
    assert!(files.len() > 10, "durable-core's sources: {}", files.len());
    let hits = names_in(&files, &FORBIDDEN_IN_MACHINE);
    assert!(
        hits.is_empty(),
        "durable-core holds more than plain data (comments count too):\n{}",
        hits.join("\n")
    );
    // Every top-level module is listed, and uses only what its layer may.
    for path in &paths {
        let inside = path.strip_prefix(&src).unwrap();
        let first = inside.components().next().unwrap().as_os_str().to_string_lossy().into_owned();
        let module = first.trim_end_matches(".rs");
        assert!(
            module == "lib" || CORE_MODULES.iter().any(|(m, _)| *m == module),
            "durable-core's module {module} is not in tidy's CORE_MODULES: say which modules it may use"
        );
    }
    for (module, may_use) in CORE_MODULES {
        for (file, text) in &core_module_files(module) {
            for used in crate_modules_named(text, is_top_level_module_file(file)) {
                assert!(
                    may_use.contains(&used.as_str()),
                    "{file} uses crate::{used}: {module} may use only {may_use:?} (it would make a cycle)"
                );
            }
        }
    }
}

/// A cycle in `edges` (module → the modules it uses), as the modules on
/// it in order, or `None` when the graph is a DAG (a module's use of
/// itself is not a cycle).
fn find_cycle(edges: &std::collections::BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    // Depth first, with the path kept: grey nodes are on it.
    fn visit(
        node: &str,
        edges: &std::collections::BTreeMap<String, BTreeSet<String>>,
        done: &mut BTreeSet<String>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|p| p == node) {
            let mut cycle = path[at..].to_vec();
            cycle.push(node.to_owned());
            return Some(cycle);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_owned());
        for next in edges.get(node).into_iter().flatten().filter(|n| *n != node) {
            if let Some(cycle) = visit(next, edges, done, path) {
                return Some(cycle);
            }
        }
        path.pop();
        done.insert(node.to_owned());
        None
    }
    let mut done = BTreeSet::new();
    edges.keys().find_map(|node| visit(node, edges, &mut done, &mut Vec::new()))
}

#[test]
fn core_modules_form_no_cycle() {
    let edges = CORE_MODULES
        .iter()
        .map(|(module, _)| {
            let used = core_module_files(module)
                .iter()
                .flat_map(|(file, text)| crate_modules_named(text, is_top_level_module_file(file)))
                .collect();
            (module.to_string(), used)
        })
        .collect();
    if let Some(cycle) = find_cycle(&edges) {
        panic!("durable-core's modules use each other in a circle: {}", cycle.join(" → "));
    }
}

#[test]
fn a_cycle_is_found_and_a_dag_passes() {
    let graph = |pairs: &[(&str, &[&str])]| {
        pairs
            .iter()
            .map(|(m, uses)| (m.to_string(), uses.iter().map(|u| u.to_string()).collect()))
            .collect::<std::collections::BTreeMap<String, BTreeSet<String>>>()
    };
    let dag = graph(&[("a", &["b", "c", "a"]), ("b", &["c"]), ("c", &[])]);
    assert_eq!(find_cycle(&dag), None);
    let circle = graph(&[("a", &["b"]), ("b", &["c"]), ("c", &["a"])]);
    assert_eq!(find_cycle(&circle), Some(vec!["a".into(), "b".into(), "c".into(), "a".into()]));
}

#[test]
fn machine_names_and_crate_paths_are_found() {
    let files = vec![(
        "a.rs".to_owned(),
        "use tokio::sync::oneshot;\n// no lock here\nlet m = Mutex::new(());".to_owned(),
    )];
    assert_eq!(
        names_in(&files, &FORBIDDEN_IN_MACHINE),
        ["a.rs:1: tokio", "a.rs:1: oneshot", "a.rs:3: Mutex"]
    );
    let named = crate_modules_named(
        "use crate::data::receipt::Receipt;\nuse crate::timers::{Timer};\n/// [`x`](crate::Turn)",
        false,
    );
    assert_eq!(named.into_iter().collect::<Vec<_>>(), ["data", "timers"]);
    let grouped = crate_modules_named(
        "use crate::{\n    core::Core,\n    handlers::{DynChat, Hooks},\n    Pane,\n};",
        false,
    );
    assert_eq!(grouped.into_iter().collect::<Vec<_>>(), ["core", CRATE_ROOT, "handlers"]);
    assert_eq!(crate_modules_named("let m = crate::CallerCheckMode::On;", false).len(), 1);
    assert!(crate_modules_named("use super::core::Core;", true).contains(CRATE_ROOT));
    assert!(crate_modules_named("mod tests {\n    use super::*;\n}", true).is_empty());
    assert!(crate_modules_named("use super::Link;", false).is_empty());
    assert!(is_top_level_module_file("crates/durable-core/src/asks.rs"));
    assert!(is_top_level_module_file("crates/durable-core/src/machine/mod.rs"));
    assert!(!is_top_level_module_file("crates/durable-core/src/state/asks.rs"));
}

#[test]
fn forbidden_names_are_found_in_code_and_comments() {
    let files =
        vec![("a.rs".to_owned(), "// uses Instant::now here\nlet x = 1;\nstd::fs::read(p);".to_owned())];
    assert_eq!(forbidden_names(&files), ["a.rs:1: Instant::now", "a.rs:3: std::fs"]);
}

fn cargo(args: &[&str]) -> String {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = Command::new(cargo).args(args).current_dir(project_root()).output().expect("running cargo");
    assert!(out.status.success(), "cargo {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).expect("cargo prints UTF-8")
}

/// The tokio features in a `cargo tree -e normal,features` output.
fn tokio_features(tree: &str) -> BTreeSet<String> {
    let marker = "tokio feature \"";
    let mut found = BTreeSet::new();
    for line in tree.lines() {
        let mut rest = line;
        while let Some(at) = rest.find(marker) {
            rest = &rest[at + marker.len()..];
            if let Some(end) = rest.find('"') {
                found.insert(rest[..end].to_owned());
            }
        }
    }
    found
}

/// The crate names in a `cargo tree` output (`├── nix v0.30.1 (…)` → `nix`).
fn crate_names(tree: &str) -> BTreeSet<String> {
    tree.lines()
        .filter_map(|line| {
            let start = line.find(|c: char| c.is_ascii_alphanumeric())?;
            let mut words = line[start..].split_whitespace();
            let name = words.next()?;
            words.next().filter(|v| v.starts_with('v')).map(|_| name.to_owned())
        })
        .collect()
}

#[test]
fn core_dependency_tree_has_no_runtime_lock_or_channel() {
    let tree = cargo(&["tree", "-p", "durable-core", "-e", "normal"]);
    let names = crate_names(&tree);
    assert!(names.contains("durable-types"), "cargo tree of durable-core:\n{tree}");
    let bad = runtime_crates(&names);
    assert!(bad.is_empty(), "durable-core's dependency tree holds {bad:?}:\n{tree}");
    // Its tests are sequences on the machine alone: no runtime, no async
    // runtime among their dependencies either (the tests that drive the
    // machine through the handles are durable-runtime's).
    let tree = cargo(&["tree", "-p", "durable-core", "-e", "normal,dev"]);
    let mut names = crate_names(&tree);
    let ours = names.remove("durable-runtime");
    let bad = runtime_crates(&names);
    assert!(!ours && bad.is_empty(), "durable-core's tests depend on the runtime or {bad:?}:\n{tree}");
    // durable-runtime's may hold tokio and its timers, but never its
    // runtime, sockets, processes or files: the program and the transports
    // bring those.
    let tree = cargo(&["tree", "-p", "durable-runtime", "-e", "normal,features"]);
    let bad: Vec<String> = tokio_features(&tree)
        .into_iter()
        .filter(|f| FORBIDDEN_TOKIO_FEATURES.contains(&f.as_str()))
        .collect();
    assert!(bad.is_empty(), "durable-runtime's tree enables tokio features {bad:?}");
}

#[test]
fn runtime_crates_are_found_by_name_or_prefix() {
    let names: BTreeSet<String> = ["serde", "tokio-util", "futures-core", "async-channel", "bytes"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    assert_eq!(runtime_crates(&names), ["async-channel", "futures-core", "tokio-util"]);
}

#[test]
fn tokio_feature_parser_sees_a_runtime() {
    let sample = r#"durable-core v0.1.0 (/w/crates/durable-core)
├── tokio feature "default"
│   └── tokio v1.54.1
├── tokio feature "rt"
│   └── tokio v1.54.1
└── tokio feature "sync"
    └── tokio v1.54.1
"#;
    let found = tokio_features(sample);
    assert_eq!(found, ["default", "rt", "sync"].iter().map(|s| s.to_string()).collect());
    assert!(found.iter().any(|f| FORBIDDEN_TOKIO_FEATURES.contains(&f.as_str())));
    assert!(!tokio_features("tokio feature \"rt-multi-thread\"").contains("rt"));
}

fn workspace_packages() -> BTreeSet<String> {
    let metadata = cargo(&["metadata", "--no-deps", "--format-version", "1"]);
    let v: serde_json::Value = serde_json::from_str(&metadata).expect("cargo metadata is JSON");
    v["packages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p["name"].as_str().map(str::to_owned))
        .collect()
}

#[test]
fn windows_agent_crates_pull_no_unix_only_crate() {
    let packages = workspace_packages();
    for krate in ["durable-core", "durable-runtime", "durable-http", "durable-tls", "durable-process"] {
        if !packages.contains(krate) {
            println!("tidy: skipping {krate}: not a package of the workspace yet");
            continue;
        }
        let tree = cargo(&["tree", "-p", krate, "--target", "x86_64-pc-windows-msvc", "-e", "normal"]);
        let bad: Vec<String> =
            crate_names(&tree).into_iter().filter(|c| UNIX_ONLY.contains(&c.as_str())).collect();
        assert!(bad.is_empty(), "{krate} pulls Unix-only crates on Windows: {bad:?}");
    }
}

#[test]
fn crate_name_parser_reads_tree_lines() {
    let sample = "durable-http v0.1.0 (/w/crates/durable-http)\n├── nix v0.30.1\n│   └── bitflags v2.9.0\n└── tokio v1.54.1 (*)\n";
    let names = crate_names(sample);
    assert!(names.contains("nix") && names.contains("bitflags") && names.contains("durable-http"));
    assert!(names.iter().any(|c| UNIX_ONLY.contains(&c.as_str())));
}

/// Where each `struct <name>` (public or not) is defined among the crates'
/// sources, tests excluded.
fn struct_definitions(files: &[(String, String)], name: &str) -> Vec<String> {
    let mut found = Vec::new();
    for (file, text) in files {
        if file.contains("/tests/") {
            continue;
        }
        for (n, line) in text.lines().enumerate() {
            let code = line.trim_start();
            let code = code.strip_prefix("pub(crate) ").or_else(|| code.strip_prefix("pub ")).unwrap_or(code);
            let rest = code.strip_prefix("struct ").map(|r| r.trim_start());
            if rest.is_some_and(|r| {
                r.strip_prefix(name)
                    .is_some_and(|t| !t.starts_with(|c: char| c.is_alphanumeric() || c == '_'))
            }) {
                found.push(format!("{file}:{}", n + 1));
            }
        }
    }
    found
}

/// The author's handle is one type, durable-runtime's (issue #41: not a
/// wrapper in the SDK forwarding to a second handle of the same names),
/// and no crate brings back the handle it replaced (`Core`).
#[test]
fn collie_is_one_handle_defined_by_the_runtime() {
    let mut paths = Vec::new();
    rust_files(&project_root().join("crates"), &mut paths);
    let root = project_root();
    let files: Vec<(String, String)> = paths
        .iter()
        .filter_map(|p| {
            let text = std::fs::read_to_string(p).ok()?;
            Some((p.strip_prefix(&root).unwrap_or(p).display().to_string(), text))
        })
        .collect();
    let collie = struct_definitions(&files, "Collie");
    assert_eq!(collie.len(), 1, "struct Collie defined at {collie:?}");
    assert!(collie[0].starts_with("crates/durable-runtime/src/"), "struct Collie defined at {collie:?}");
    let core = struct_definitions(&files, "Core");
    assert!(core.is_empty(), "struct Core defined at {core:?}");
}

#[test]
fn struct_definitions_are_found_by_whole_name() {
    let files = vec![
        (
            "crates/a/src/lib.rs".to_owned(),
            "pub struct Collie {\n}\nstruct CollieInfo;\n// struct Collie\n".to_owned(),
        ),
        ("crates/b/src/x.rs".to_owned(), "    pub(crate) struct Collie(u8);\n".to_owned()),
        ("crates/b/tests/t.rs".to_owned(), "struct Collie;\n".to_owned()),
    ];
    assert_eq!(struct_definitions(&files, "Collie"), ["crates/a/src/lib.rs:1", "crates/b/src/x.rs:1"]);
}

/// The README's test command: the line of its set-up block that says so.
fn readme_test_command(readme: &str) -> Option<String> {
    readme
        .lines()
        .find(|l| l.trim_end().ends_with("# the tests"))
        .and_then(|l| l.split('#').next())
        .map(|cmd| cmd.trim().to_owned())
        .filter(|cmd| !cmd.is_empty())
}

#[test]
fn ci_runs_the_test_command_written_in_the_readme() {
    let root = project_root();
    let readme = std::fs::read_to_string(root.join("README.md")).expect("README.md");
    let ci = std::fs::read_to_string(root.join(".ci/run")).expect(".ci/run");
    let cmd = readme_test_command(&readme).expect("the README names its test command with `# the tests`");
    assert!(
        ci.lines().any(|l| l.trim() == cmd),
        ".ci/run must run the README's test command `{cmd}` on a line of its own"
    );
}

#[test]
fn readme_test_command_parser_reads_the_set_up_block() {
    let readme =
        "```sh\ncargo run --example desk     # the support desk agent\ncargo test -p x    # the tests\n```";
    assert_eq!(readme_test_command(readme).as_deref(), Some("cargo test -p x"));
    assert_eq!(readme_test_command("no command here"), None);
}

/// What names the contract and seed files outside the repository, which
/// `docs/wire.md` replaces. Built in pieces so that this file does not name
/// them itself.
const OUTSIDE_CONTRACT: [&str; 3] =
    [concat!("shared", "/spec"), concat!("shared", "/seeds"), concat!("wire-v1", ".md")];

/// The paths `git ls-files -z` printed, but those under `.ci/`.
fn checked_paths(ls_files: &[u8]) -> Vec<String> {
    ls_files
        .split(|b| *b == 0)
        .filter(|p| !p.is_empty())
        .map(|p| String::from_utf8_lossy(p).into_owned())
        .filter(|p| !p.starts_with(".ci/"))
        .collect()
}

/// Every `file:line: name` where a file names the outside contract.
fn outside_references(files: &[(String, String)]) -> Vec<String> {
    let mut hits = Vec::new();
    for (file, text) in files {
        for (n, line) in text.lines().enumerate() {
            for name in OUTSIDE_CONTRACT {
                if line.contains(name) {
                    hits.push(format!("{file}:{}: {name}", n + 1));
                }
            }
        }
    }
    hits
}

#[test]
fn tracked_files_name_no_contract_outside_the_repository() {
    let root = project_root();
    let out = Command::new("git")
        .args(["ls-files", "-z"])
        .current_dir(&root)
        .output()
        .expect("running git ls-files");
    assert!(out.status.success(), "git ls-files failed: {}", String::from_utf8_lossy(&out.stderr));
    let mut files = Vec::new();
    for path in checked_paths(&out.stdout) {
        // A tracked file deleted in the work tree names nothing.
        let Ok(bytes) = std::fs::read(root.join(&path)) else { continue };
        files.push((path, String::from_utf8_lossy(&bytes).into_owned()));
    }
    assert!(!files.is_empty(), "git ls-files listed no file");
    let hits = outside_references(&files);
    assert!(
        hits.is_empty(),
        "the repository must stand alone: docs/wire.md is the contract, but these tracked files name one outside it:\n{}",
        hits.join("\n")
    );
}

#[test]
fn outside_references_are_found_and_ci_files_skipped() {
    let [spec, seeds, wire] = OUTSIDE_CONTRACT;
    let text = format!("// see ../{spec}/{wire}\nlet x = 1;\n// and {seeds}/000.txt");
    let files = vec![("a.rs".to_owned(), text)];
    assert_eq!(
        outside_references(&files),
        [format!("a.rs:1: {spec}"), format!("a.rs:1: {wire}"), format!("a.rs:3: {seeds}")]
    );
    assert!(outside_references(&[("b.md".to_owned(), "docs/wire.md §7.1".to_owned())]).is_empty());
    assert_eq!(checked_paths(b".ci/run\0README.md\0docs/wire.md\0"), ["README.md", "docs/wire.md"]);
}

/// The fuzz targets' names: one file each in `fuzz/fuzz_targets/`.
fn fuzz_target_names(root: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(root.join("fuzz/fuzz_targets"))
        .expect("fuzz/fuzz_targets")
        .flatten()
        .filter_map(|e| e.path().file_stem().map(|s| s.to_string_lossy().into_owned()))
        .collect();
    names.sort();
    names
}

#[test]
fn every_fuzz_target_is_a_bin_of_the_fuzz_crate_with_seeds() {
    let root = project_root();
    let names = fuzz_target_names(&root);
    assert!(!names.is_empty(), "no fuzz target in fuzz/fuzz_targets");
    let manifest = std::fs::read_to_string(root.join("fuzz/Cargo.toml")).expect("fuzz/Cargo.toml");
    for name in &names {
        assert!(
            manifest.contains(&format!("name = \"{name}\"\npath = \"fuzz_targets/{name}.rs\"")),
            "fuzz/Cargo.toml has no [[bin]] for the target {name}"
        );
        let seeds = std::fs::read_dir(root.join("fuzz/corpus").join(name))
            .map(|d| d.flatten().filter(|e| e.file_name().to_string_lossy().starts_with("seed-")).count())
            .unwrap_or(0);
        assert!(seeds > 0, "the fuzz target {name} has no seed in fuzz/corpus/{name}/ (files named seed-*)");
    }
    let root_manifest = std::fs::read_to_string(root.join("Cargo.toml")).expect("Cargo.toml");
    assert!(root_manifest.contains("exclude = [\"fuzz\"]"), "the fuzz crate stays outside the workspace");
    let ci = std::fs::read_to_string(root.join(".ci/run")).expect(".ci/run");
    assert!(ci.lines().any(|l| l.trim() == "cargo xtask fuzz --smoke"), ".ci/run runs the fuzz smoke");
}

/// The names a `pub use` (or `use`) statement brings in: the last segment
/// of each path, or its `as` name; `*` for a glob.
fn use_names(statement: &str) -> Vec<String> {
    let body = statement.trim().trim_end_matches(';');
    let body = body.split_once("use ").map_or(body, |(_, b)| b);
    let leaves: Vec<&str> = match (body.find('{'), body.rfind('}')) {
        (Some(open), Some(close)) => body[open + 1..close].split(',').collect(),
        _ => vec![body],
    };
    leaves
        .iter()
        .map(|l| l.trim())
        .filter(|l| !l.is_empty())
        .map(|l| match l.split_once(" as ") {
            Some((_, alias)) => alias.trim().to_owned(),
            None => l.rsplit("::").next().unwrap_or(l).trim().to_owned(),
        })
        .collect()
}

/// The crate a `use` statement takes from: its path's first segment
/// (`crate` for the SDK's own items).
fn use_source(statement: &str) -> String {
    let body = statement.trim();
    let body = body.split_once("use ").map_or(body, |(_, b)| b);
    body.split("::").next().unwrap_or("").trim().to_owned()
}

/// An exported name and the crate it comes from: two names alike from two
/// crates are two items (`types::PaneView`, `pi::PaneView`).
type Export = (String, String);

/// What a lib.rs exports: the names at its root, and each inline `pub mod`
/// with the names its `pub use` statements bring (items defined in the
/// root are counted too).
fn exports(lib: &str) -> (Vec<Export>, Vec<(String, Vec<Export>)>) {
    let mut root: Vec<Export> = Vec::new();
    let mut modules: Vec<(String, Vec<Export>)> = Vec::new();
    let mut depth = 0usize;
    let mut statement = String::new();
    for line in lib.lines() {
        let code = line.split("//").next().unwrap_or("");
        let trimmed = code.trim();
        if statement.is_empty() && trimmed.starts_with("pub mod ") && trimmed.ends_with('{') && depth == 0 {
            let name = trimmed["pub mod ".len()..].trim_end_matches('{').trim().to_owned();
            modules.push((name, Vec::new()));
        } else if !statement.is_empty() || trimmed.starts_with("pub use ") {
            statement.push_str(code);
            statement.push(' ');
            if trimmed.ends_with(';') {
                let source = use_source(&statement);
                let names = use_names(&statement).into_iter().map(|n| (n, source.clone()));
                match (depth, modules.last_mut()) {
                    (0, _) => root.extend(names),
                    (_, Some((_, m))) => m.extend(names),
                    (_, None) => {}
                }
                statement.clear();
            }
            continue;
        } else if depth == 0 {
            for kind in [
                "pub fn ",
                "pub struct ",
                "pub enum ",
                "pub trait ",
                "pub type ",
                "pub const ",
                "pub static ",
            ] {
                if let Some(rest) = trimmed.strip_prefix(kind) {
                    let name: String =
                        rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
                    root.push((name, "crate".to_owned()));
                }
            }
        }
        depth += code.matches('{').count();
        depth = depth.saturating_sub(code.matches('}').count());
    }
    root.sort();
    root.dedup(); // one name under two `cfg`s is one name
    (root, modules)
}

/// The most names `durable_sdk`'s root may hold (issue 28: what recipes
/// type, about 25, at most 30; its modules are not counted).
const ROOT_MAX: usize = 30;

#[test]
fn the_sdk_root_holds_at_most_30_names_and_each_item_has_one_path() {
    let lib = std::fs::read_to_string(project_root().join("crates/durable-sdk/src/lib.rs")).unwrap();
    let (root, modules) = exports(&lib);
    let names: Vec<&str> = root.iter().map(|(n, _)| n.as_str()).collect();
    assert!(!names.contains(&"*"), "no glob at the root: {names:?}");
    assert!(root.len() >= 10, "the parser found the root's names: {names:?}");
    assert!(
        root.len() <= ROOT_MAX,
        "{} names at durable_sdk's root, at most {ROOT_MAX}: {names:?}",
        root.len()
    );
    let mut seen: Vec<(Export, String)> = root.iter().map(|e| (e.clone(), "the root".to_owned())).collect();
    for (module, exported) in &modules {
        // One glob is the contract's constants (`durable_types::constants`), which nothing else exports.
        let globs = exported.iter().filter(|(n, _)| n == "*").count();
        assert!(
            globs <= usize::from(module == "types"),
            "no glob in durable_sdk::{module} but the constants"
        );
        for export in exported {
            if let Some((_, first)) = seen.iter().find(|(e, _)| e == export) {
                panic!(
                    "{} (from {}) is exported twice: at {first} and in durable_sdk::{module}",
                    export.0, export.1
                );
            }
            seen.push((export.clone(), format!("durable_sdk::{module}")));
        }
    }
    assert!(modules.iter().any(|(m, _)| m == "driver"), "the driver's module: {modules:?}");
}

#[test]
fn the_export_parser_reads_roots_modules_and_aliases() {
    let lib = "pub use a::{B, C as D};\n#[cfg(x)]\npub use e::F;\n#[cfg(not(x))]\npub use e::F;\npub fn h() {}\npub mod m {\n    pub use n::{\n        O, P,\n    };\n    pub use q::*;\n    pub fn inner() {}\n}\n";
    let (root, modules) = exports(lib);
    let e = |n: &str, s: &str| (n.to_owned(), s.to_owned());
    assert_eq!(root, [e("B", "a"), e("D", "a"), e("F", "e"), e("h", "crate")]);
    assert_eq!(modules, [("m".to_owned(), vec![e("O", "n"), e("P", "n"), e("*", "q")])]);
}

/// The `durable_sdk` names a file types: in its `use durable_sdk::…`
/// statements and its `durable_sdk::…` paths.
fn sdk_names(source: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut statement = String::new();
    for line in source.lines() {
        let code = line.split("//").next().unwrap_or("");
        if !statement.is_empty() || code.trim_start().starts_with("use durable_sdk") {
            statement.push_str(code);
            if code.trim_end().ends_with(';') {
                names.extend(use_names(&statement));
                statement.clear();
            }
        } else {
            for (i, _) in code.match_indices("durable_sdk::") {
                let rest = &code[i + "durable_sdk::".len()..];
                let path: String =
                    rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':').collect();
                // The item: the first segment past the SDK's modules (`types::Timestamp::EPOCH` is `Timestamp`).
                let modules = ["types", "asks", "handlers", "history", "stores", "transport", "driver", "pi"];
                let mut segments = path.split("::").filter(|s| !s.is_empty());
                if let Some(item) = segments.find(|s| !modules.contains(s)) {
                    names.insert(item.to_owned());
                }
            }
        }
    }
    names
}

#[test]
fn the_shop_recipe_keeps_its_budget_of_20_names_and_90_lines() {
    let shop = std::fs::read_to_string(project_root().join("examples/shop.rs")).unwrap();
    let names = sdk_names(&shop);
    assert!(names.len() >= 5, "the parser found the shop's names: {names:?}");
    assert!(names.len() <= 20, "{} durable_sdk names in the shop, at most 20: {names:?}", names.len());
    let lines = shop.lines().count();
    assert!(lines <= 90, "the shop is {lines} lines, at most 90");
    // History is the SDK's own (no provider): nothing of it in the recipe.
    for feature in ["on_send", "turn.stopped()", "take_steers", "require_approval", "--https"] {
        assert!(shop.contains(feature), "the shop keeps its features: {feature}");
    }
}

#[test]
fn sdk_names_are_read_from_uses_and_paths() {
    let src = "use durable_sdk::history::{A, B};\nuse durable_sdk::{\n    C,\n    d,\n};\nfn f() { durable_sdk::types::E::new(); }\n";
    let names: Vec<String> = sdk_names(src).into_iter().collect();
    assert_eq!(names, ["A", "B", "C", "E", "d"]);
}
