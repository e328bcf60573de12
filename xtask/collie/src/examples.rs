//! `conformance --examples`: `durable conformance`'s generic tier against
//! each of the SDK's examples that stays up, started by the run (so that
//! the restart cases run too) with `--writes`; `hello`, which exits after
//! its one answer, read-only.

use std::path::Path;
use std::time::Instant;

use durable_cli::conformance::{Baseline, Generic, Tally, run_generic};

use crate::check::CaseResult;
use crate::{build_examples, free_port, private_dir, random_hex, shell_quote, temp_root};

/// How an example is served and what the run may do with it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Example {
    /// The example's name (`cargo run --example NAME`).
    pub(crate) name: &'static str,
    /// Its arguments after the binary: `{socket}`, `{data}` and `{port}` are
    /// filled in (each quoted for `sh`).
    pub(crate) args: &'static str,
    /// Served over HTTPS on `127.0.0.1:{port}` (else on the socket).
    pub(crate) https: bool,
    /// The run may act (`--writes`).
    pub(crate) writes: bool,
    /// Its receipts are kept in its data folder across a SIGKILL.
    pub(crate) persist: bool,
}

/// The examples the run checks, in order.
pub(crate) const EXAMPLES: [Example; 7] = [
    Example { name: "echo", args: "", https: false, writes: true, persist: false },
    Example { name: "shop", args: "", https: false, writes: true, persist: false },
    Example { name: "shop", args: "--https 127.0.0.1:{port}", https: true, writes: true, persist: false },
    Example {
        name: "approval",
        args: "--socket {socket} --data {data}",
        https: false,
        writes: true,
        persist: true,
    },
    Example { name: "windows", args: "127.0.0.1:{port}", https: true, writes: true, persist: false },
    Example {
        name: "pi",
        args: "--no-pi --data {data} --socket {socket}",
        https: false,
        writes: true,
        persist: true,
    },
    Example { name: "hello", args: "", https: false, writes: false, persist: false },
];

impl Example {
    /// The shell command that starts it, and the socket path or URL it serves at.
    pub(crate) fn command(
        &self,
        bin: &Path,
        dir: &Path,
        port: u16,
    ) -> (String, Option<String>, Option<String>) {
        let socket = dir.join("s").join("app.sock");
        let data = dir.join("data");
        let args = self
            .args
            .replace("{socket}", &shell_quote(&socket.display().to_string()))
            .replace("{data}", &shell_quote(&data.display().to_string()))
            .replace("{port}", &port.to_string());
        let mut cmd = format!("exec {}", shell_quote(&bin.display().to_string()));
        if !args.is_empty() {
            cmd.push(' ');
            cmd.push_str(&args);
        }
        if self.https {
            (cmd, None, Some(format!("https://127.0.0.1:{port}")))
        } else {
            (cmd, Some(socket.display().to_string()), None)
        }
    }
}

pub(crate) async fn run(filter: Option<String>) -> CaseResult<Tally> {
    let started = Instant::now();
    let mut names: Vec<&str> = EXAMPLES.iter().map(|e| e.name).collect();
    names.dedup();
    let bins = build_examples(&names)?;
    println!("conformance: examples built in {:.1} s", started.elapsed().as_secs_f64());
    let tmp = temp_root("examples");
    private_dir(&tmp)?;
    let token = random_hex(32);
    let baseline = Baseline::default();
    let mut tally = Tally::default();
    for (n, example) in EXAMPLES.iter().enumerate() {
        let bin =
            names.iter().position(|x| *x == example.name).map(|i| bins[i].clone()).ok_or("no binary")?;
        let dir = tmp.join(format!("{}{n}", example.name));
        private_dir(&dir.join("data"))?;
        let (cmd, socket, url) = example.command(&bin, &dir, free_port());
        let mut env = vec![("COLLIE_TOKEN".to_owned(), token.clone())];
        if let Some(socket) = &socket {
            env.push(("COLLIE_DURABLE_SOCKET".to_owned(), socket.clone()));
        }
        let g = Generic {
            socket: socket.map(Into::into),
            url,
            insecure: example.https,
            token: Some(token.clone()),
            writes: example.writes,
            agent_cmd: Some(cmd.clone()),
            agent_env: env,
            receipts_persist: example.persist,
            filter: filter.clone(),
            ..Generic::default()
        };
        let one = Instant::now();
        println!(
            "== {} ({}{})",
            example.name,
            if example.writes { "--writes, " } else { "read-only, " },
            cmd
        );
        match run_generic(&g, &baseline).await {
            Ok(t) => {
                println!(
                    "== {}: {} passed, {} failed in {:.1} s",
                    example.name,
                    t.passed,
                    t.failed,
                    one.elapsed().as_secs_f64()
                );
                tally.merge(t);
            }
            Err(why) => {
                println!("FAIL {}: {why}", example.name);
                tally.failed += 1;
            }
        }
    }
    let _ = std::fs::remove_dir_all(&tmp);
    println!("conformance: examples {:.1} s", started.elapsed().as_secs_f64());
    Ok(tally)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_example_that_stays_up_is_written_to_and_hello_only_read() {
        for e in EXAMPLES {
            assert_eq!(e.writes, e.name != "hello", "{}", e.name);
        }
        for name in ["echo", "shop", "approval", "windows", "pi", "hello"] {
            assert!(EXAMPLES.iter().any(|e| e.name == name), "{name}");
        }
        assert!(EXAMPLES.iter().any(|e| e.name == "windows" && e.https));
    }

    #[test]
    fn commands_fill_in_quoted_paths_and_the_port() {
        let approval = EXAMPLES.iter().find(|e| e.name == "approval").unwrap();
        let (cmd, socket, url) = approval.command(Path::new("/b/approval"), Path::new("/t/a 1"), 9);
        assert_eq!(cmd, "exec '/b/approval' --socket '/t/a 1/s/app.sock' --data '/t/a 1/data'");
        assert_eq!((socket.as_deref(), url), (Some("/t/a 1/s/app.sock"), None));
        let windows = EXAMPLES.iter().find(|e| e.name == "windows").unwrap();
        let (cmd, socket, url) = windows.command(Path::new("/b/windows"), Path::new("/t"), 8443);
        assert_eq!(cmd, "exec '/b/windows' 127.0.0.1:8443");
        assert_eq!((socket, url.as_deref()), (None, Some("https://127.0.0.1:8443")));
    }
}
