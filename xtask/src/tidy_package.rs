//! Tidy checks of what the registry gets: each publishable crate builds
//! from its own folder (no `#[path]`, `include_str!` or `include_bytes!`
//! reaching outside it), ships its README and both license texts (the
//! same as the repository's), and carries the metadata crates.io shows.

use std::path::{Component, Path, PathBuf};

use crate::project_root;
use crate::tidy::rust_files;

/// Every publishable package of the workspace: its name and folder
/// (`publish` unset in its Cargo.toml).
fn publishable_crates() -> Vec<(String, PathBuf, serde_json::Value)> {
    workspace_packages().into_iter().filter(|p| p.2["publish"].is_null()).collect()
}

/// Every package of the workspace, published or not, sorted by name.
fn workspace_packages() -> Vec<(String, PathBuf, serde_json::Value)> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = std::process::Command::new(cargo)
        .args(["metadata", "--no-deps", "--format-version", "1"])
        .current_dir(project_root())
        .output()
        .expect("running cargo metadata");
    assert!(out.status.success(), "cargo metadata failed: {}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("cargo metadata is JSON");
    let mut crates: Vec<(String, PathBuf, serde_json::Value)> = v["packages"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| {
            let manifest = PathBuf::from(p["manifest_path"].as_str().expect("manifest_path"));
            let dir = manifest.parent().expect("a manifest's folder").to_path_buf();
            (p["name"].as_str().expect("name").to_owned(), dir, p.clone())
        })
        .collect();
    crates.sort_by(|a, b| a.0.cmp(&b.0));
    crates
}

/// `a/b/../c` as `a/c`, without touching the file system.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// The string literals in `text` (no escapes: paths hold none).
fn string_literals(text: &str) -> Vec<&str> {
    text.split('"').skip(1).step_by(2).collect()
}

/// The text between the `(` at `open` and its matching `)`.
fn parenthesized(text: &str, open: usize) -> &str {
    let mut depth = 0usize;
    for (i, c) in text[open..].char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    return &text[open + 1..open + i];
                }
            }
            _ => {}
        }
    }
    &text[open + 1..]
}

/// Every `#[path = …]`, `include_str!(…)` and `include_bytes!(…)` of a
/// source file whose path leaves `krate`: `file: the path`. Paths are read
/// relative to the file's folder, or to the crate's with
/// `CARGO_MANIFEST_DIR`; comment lines are skipped.
fn reaches_outside(krate: &Path, file: &Path, source: &str) -> Vec<String> {
    let code: String = source
        .lines()
        .map(|l| if l.trim_start().starts_with("//") { "" } else { l })
        .collect::<Vec<_>>()
        .join("\n");
    let here = file.parent().expect("a source file's folder");
    let mut targets = Vec::new();
    for (at, _) in code.match_indices("#[path") {
        let attribute = &code[at..code[at..].find(']').map_or(code.len(), |end| at + end)];
        if let Some(path) = string_literals(attribute).first() {
            targets.push(here.join(path));
        }
    }
    for mac in ["include_str!", "include_bytes!"] {
        for (at, _) in code.match_indices(mac) {
            let Some(open) = code[at..].find('(').map(|o| at + o) else { continue };
            let args = parenthesized(&code, open);
            let joined: String =
                string_literals(args).into_iter().filter(|l| *l != "CARGO_MANIFEST_DIR").collect();
            let target = if args.contains("CARGO_MANIFEST_DIR") {
                krate.join(joined.trim_start_matches('/'))
            } else {
                here.join(joined)
            };
            targets.push(target);
        }
    }
    let krate = normalize(krate);
    targets
        .into_iter()
        .map(|t| normalize(&t))
        .filter(|t| !t.starts_with(&krate))
        .map(|t| format!("{}: {}", file.display(), t.display()))
        .collect()
}

#[test]
fn publishable_crates_include_nothing_from_outside_their_folder() {
    let crates = publishable_crates();
    assert!(
        crates.len() >= 8,
        "the publishable crates: {:?}",
        crates.iter().map(|c| &c.0).collect::<Vec<_>>()
    );
    let mut hits = Vec::new();
    for (_, dir, _) in &crates {
        let mut files = Vec::new();
        rust_files(dir, &mut files);
        for file in files {
            let source = std::fs::read_to_string(&file).expect("a source file");
            hits.extend(reaches_outside(dir, &file, &source));
        }
    }
    assert!(
        hits.is_empty(),
        "a published crate's tests and docs build from its own folder; these reach outside it:\n{}",
        hits.join("\n")
    );
}

#[test]
fn reaching_outside_is_found_in_paths_and_includes() {
    let krate = Path::new("/w/crates/a");
    let file = Path::new("/w/crates/a/tests/t.rs");
    let source = "#[path = \"../../b/tests/harness/mod.rs\"]\nmod harness;\n#[path = \"common/mod.rs\"]\nmod common;\nconst A: &str = include_str!(\"../README.md\");\nconst B: &[u8] = include_bytes!(\n    \"../../../LICENSE-MIT\");\nconst C: &str = include_str!(concat!(env!(\"CARGO_MANIFEST_DIR\"), \"/../b/x\"));\n// include_str!(\"../../../z\") in a comment\n";
    assert_eq!(
        reaches_outside(krate, file, source),
        [
            "/w/crates/a/tests/t.rs: /w/crates/b/tests/harness/mod.rs",
            "/w/crates/a/tests/t.rs: /w/crates/b/x",
            "/w/crates/a/tests/t.rs: /w/LICENSE-MIT",
        ]
    );
    let inside =
        "#[doc = include_str!(\"../docs/wire.md\")]\nbytes: include_bytes!(concat!(\"../web/\", $name))";
    assert!(reaches_outside(krate, Path::new("/w/crates/a/src/lib.rs"), inside).is_empty());
}

#[test]
fn every_package_ships_the_repository_license_texts() {
    let root = project_root();
    for name in ["LICENSE-MIT", "LICENSE-APACHE"] {
        let text = std::fs::read(root.join(name)).unwrap_or_else(|_| panic!("{name} at the repository root"));
        let wanted = if name == "LICENSE-MIT" { "MIT License" } else { "Apache License" };
        assert!(String::from_utf8_lossy(&text).contains(wanted), "{name} holds the {wanted}");
        for (krate, dir, _) in publishable_crates() {
            let copy = std::fs::read(dir.join(name)).unwrap_or_else(|_| panic!("{krate} has no {name}"));
            assert!(copy == text, "{krate}'s {name} differs from the repository's: copy it again");
        }
    }
}

/// crates.io's category slugs (its `categories.toml`): a category outside
/// them is dropped at publish with a warning.
const CRATES_IO_CATEGORIES: &[&str] = &[
    "algorithms",
    "api-bindings",
    "asynchronous",
    "authentication",
    "caching",
    "command-line-interface",
    "command-line-utilities",
    "compression",
    "computer-vision",
    "config",
    "concurrency",
    "cryptography",
    "cryptography::cryptocurrencies",
    "database",
    "database-implementations",
    "data-structures",
    "date-and-time",
    "development-tools",
    "development-tools::build-utils",
    "development-tools::cargo-plugins",
    "development-tools::debugging",
    "development-tools::ffi",
    "development-tools::procedural-macro-helpers",
    "development-tools::profiling",
    "development-tools::testing",
    "email",
    "embedded",
    "emulators",
    "encoding",
    "external-ffi-bindings",
    "filesystem",
    "game-engines",
    "game-development",
    "games",
    "graphics",
    "gui",
    "hardware-support",
    "internationalization",
    "localization",
    "mathematics",
    "memory-management",
    "multimedia",
    "multimedia::audio",
    "multimedia::video",
    "multimedia::images",
    "multimedia::encoding",
    "network-programming",
    "no-std",
    "os",
    "os::linux-apis",
    "os::macos-apis",
    "os::unix-apis",
    "os::windows-apis",
    "parser-implementations",
    "parsing",
    "rendering",
    "rendering::engine",
    "rendering::graphics-api",
    "rendering::data-formats",
    "rust-patterns",
    "science",
    "science::robotics",
    "simulation",
    "template-engine",
    "text-editors",
    "text-processing",
    "value-formatting",
    "visualization",
    "wasm",
    "web-programming",
    "web-programming::http-client",
    "web-programming::http-server",
    "web-programming::websocket",
];

/// crates.io's keyword rule: at most 20 characters, ASCII letters, digits,
/// `_`, `-` or `+`, starting with a letter.
fn keyword_ok(k: &str) -> bool {
    k.len() <= 20
        && k.starts_with(|c: char| c.is_ascii_alphabetic())
        && k.chars().all(|c| c.is_ascii_alphanumeric() || "_-+".contains(c))
}

/// Link targets in a markdown text (`[x](target)` and `[x]: target`) that
/// a registry page cannot follow: neither an absolute http(s) URL nor an
/// anchor.
fn relative_links(markdown: &str) -> Vec<String> {
    let mut targets = Vec::new();
    for (at, _) in markdown.match_indices("](") {
        let rest = &markdown[at + 2..];
        targets.push(rest[..rest.find(')').unwrap_or(rest.len())].trim().to_owned());
    }
    for line in markdown.lines() {
        let line = line.trim_start();
        if let (true, Some(end)) = (line.starts_with('['), line.find("]:")) {
            targets.push(line[end + 2..].split_whitespace().next().unwrap_or("").to_owned());
        }
    }
    targets
        .into_iter()
        .filter(|t| !(t.starts_with("https://") || t.starts_with("http://") || t.starts_with('#')))
        .collect()
}

#[test]
fn every_package_has_its_registry_page_and_metadata() {
    for (krate, dir, meta) in publishable_crates() {
        assert_eq!(meta["readme"].as_str(), Some("README.md"), "{krate}: readme = \"README.md\"");
        let readme =
            std::fs::read_to_string(dir.join("README.md")).unwrap_or_else(|_| panic!("{krate}/README.md"));
        assert!(readme.starts_with(&format!("# {krate}\n")), "{krate}'s README starts with its name");
        let links = relative_links(&readme);
        assert!(links.is_empty(), "{krate}'s README links where crates.io cannot follow: {links:?}");
        assert!(!readme.contains("example.invalid"), "{krate}'s README holds a placeholder URL");
        let keywords: Vec<&str> =
            meta["keywords"].as_array().into_iter().flatten().filter_map(|k| k.as_str()).collect();
        assert!((1..=5).contains(&keywords.len()), "{krate}: 1 to 5 keywords, not {keywords:?}");
        assert!(
            keywords.iter().all(|k| keyword_ok(k)),
            "{krate}: a keyword breaks crates.io's rule: {keywords:?}"
        );
        let categories: Vec<&str> =
            meta["categories"].as_array().into_iter().flatten().filter_map(|k| k.as_str()).collect();
        assert!((1..=5).contains(&categories.len()), "{krate}: 1 to 5 categories, not {categories:?}");
        for category in &categories {
            assert!(
                CRATES_IO_CATEGORIES.contains(category),
                "{krate}: {category} is not a crates.io category"
            );
        }
        assert_eq!(meta["license"].as_str(), Some("MIT OR Apache-2.0"), "{krate}'s license");
        // No repository until there is a real one: a placeholder misleads.
        let repository = meta["repository"].as_str().unwrap_or("");
        assert!(!repository.contains("example.invalid"), "{krate}: placeholder repository {repository}");
    }
    let root_readme = std::fs::read_to_string(project_root().join("README.md")).expect("README.md");
    assert!(!root_readme.contains("example.invalid"), "the README holds a placeholder URL");
}

#[test]
fn relative_links_and_bad_keywords_are_found() {
    let md = "[a](https://docs.rs/x) [b](docs/wire.md) [c](#features)\n[d]: ../LICENSE-MIT\n[e]: https://crates.io\n";
    assert_eq!(relative_links(md), ["docs/wire.md", "../LICENSE-MIT"]);
    assert!(keyword_ok("unix-socket") && keyword_ok("http2"));
    assert!(!keyword_ok("agent-client-protocol") && !keyword_ok("2fa") && !keyword_ok("a b"));
}

/// The runtime's and the SDK's tests share one test support module,
/// `durable_runtime::test_util`, behind the `test-util` feature (as axum
/// keeps its `test_helpers`): no package keeps a harness of its own (the
/// SDK's used to be a byte-for-byte copy), the feature is off by default,
/// and only dev-dependencies turn it on (the runtime's own tests through a
/// dev-dependency on itself).
#[test]
fn test_support_is_one_module_behind_its_feature() {
    let crates = workspace_packages();
    for (name, dir, _) in &crates {
        assert!(
            !dir.join("tests/harness").exists(),
            "{name} keeps a tests/harness: use durable_runtime::test_util"
        );
    }
    let (_, dir, runtime) = crates.iter().find(|c| c.0 == "durable-runtime").expect("durable-runtime");
    assert!(dir.join("src/test_util/mod.rs").is_file(), "durable-runtime's test_util module");
    let features = runtime["features"].as_object().expect("durable-runtime's features");
    assert!(features.contains_key("test-util"), "durable-runtime has no test-util feature: {features:?}");
    // Every feature the default one turns on, followed through the others.
    let mut on: Vec<String> = vec!["default".to_owned()];
    let mut seen = std::collections::BTreeSet::new();
    while let Some(feature) = on.pop() {
        if !seen.insert(feature.clone()) {
            continue;
        }
        for next in features.get(&feature).and_then(|f| f.as_array()).into_iter().flatten() {
            on.extend(next.as_str().map(str::to_owned));
        }
    }
    assert!(!seen.contains("test-util"), "durable-runtime's default features turn on test-util: {seen:?}");
    let mut users = Vec::new();
    for (name, _, meta) in &crates {
        for dep in meta["dependencies"].as_array().into_iter().flatten() {
            let turns_on = dep["name"] == "durable-runtime"
                && dep["features"].as_array().is_some_and(|f| f.iter().any(|f| f == "test-util"));
            if turns_on {
                assert_eq!(
                    dep["kind"], "dev",
                    "{name} turns on durable-runtime's test-util outside its dev-dependencies"
                );
                users.push(name.as_str());
            }
        }
    }
    assert!(
        users.contains(&"durable-runtime") && users.contains(&"durable-sdk"),
        "the test support's users: {users:?}"
    );
    // Nor through a feature of a package of ours (`x = ["durable-runtime/test-util"]`).
    for (name, _, meta) in &crates {
        for (feature, turns_on) in meta["features"].as_object().into_iter().flatten() {
            for value in turns_on.as_array().into_iter().flatten().filter_map(|v| v.as_str()) {
                let test_util = value == "durable-runtime/test-util" || value == "durable-runtime?/test-util";
                assert!(!test_util, "{name}'s feature {feature} turns on durable-runtime's test-util");
            }
        }
    }
}

#[test]
fn the_sdk_readme_names_every_feature_and_the_wire_has_one_copy() {
    let root = project_root();
    let (_, dir, meta) =
        publishable_crates().into_iter().find(|c| c.0 == "durable-sdk").expect("durable-sdk");
    let readme = std::fs::read_to_string(dir.join("README.md")).unwrap();
    let features = meta["features"].as_object().expect("durable-sdk's features");
    assert!(features.len() > 3, "durable-sdk's features: {features:?}");
    for feature in features.keys().filter(|f| *f != "default") {
        assert!(
            readme.contains(&format!("| `{feature}` |")),
            "durable-sdk's README's feature table lacks `{feature}`"
        );
    }
    // The wire's text is the crate's (it ships as `durable_sdk::wire`);
    // docs/wire.md only points there.
    let wire = std::fs::read_to_string(dir.join("docs/wire.md")).expect("crates/durable-sdk/docs/wire.md");
    let version = meta["version"].as_str().unwrap();
    assert!(
        wire.contains(&format!("\"version\": \"{version}\"")),
        "the wire's hello example names version {version}"
    );
    let pointer = std::fs::read_to_string(root.join("docs/wire.md")).expect("docs/wire.md");
    assert!(
        pointer.contains("crates/durable-sdk/docs/wire.md") && pointer.lines().count() < 30,
        "docs/wire.md points to crates/durable-sdk/docs/wire.md and holds no second copy"
    );
}

/// The files `cargo package --list` would put in `krate`'s `.crate`.
fn packaged_files(krate: &str) -> Vec<String> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = std::process::Command::new(cargo)
        .args(["package", "--list", "--allow-dirty", "-p", krate])
        .current_dir(project_root())
        .output()
        .expect("running cargo package --list");
    assert!(
        out.status.success(),
        "cargo package --list -p {krate}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).lines().map(str::to_owned).collect()
}

#[test]
fn every_package_ships_its_readme_and_license_texts() {
    for (krate, _, _) in publishable_crates() {
        let files = packaged_files(&krate);
        for wanted in ["README.md", "LICENSE-MIT", "LICENSE-APACHE", "Cargo.toml"] {
            assert!(files.iter().any(|f| f == wanted), "{krate}'s package lacks {wanted}: {files:?}");
        }
        if krate == "durable-sdk" {
            assert!(files.iter().any(|f| f == "docs/wire.md"), "durable-sdk ships the wire: {files:?}");
        }
    }
}
