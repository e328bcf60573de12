//! `durable-agent` as a user meets it: `--help` succeeds and says how to
//! name the agent; a command line it cannot use is a usage error (exit 2)
//! that says what is missing, never a panic; an agent command line it
//! cannot split is an error naming it, before anything serves.

use std::process::{Command, Output};

fn durable_agent(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_durable-agent"))
        .args(args)
        .env_remove("COLLIE_TOKEN")
        .env_remove("COLLIE_TOKEN_NEXT")
        .output()
        .expect("durable-agent runs")
}

fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

#[test]
fn help_succeeds_and_says_how_to_name_the_agent() {
    let out = durable_agent(&["--help"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(text(&out).contains("acp"), "{}", text(&out));
    let out = durable_agent(&["acp", "--help"]);
    let t = text(&out);
    assert_eq!(out.status.code(), Some(0), "{t}");
    assert!(t.contains("-- <AGENT COMMAND>") && t.contains("claude-agent-acp"), "{t}");
    let out = durable_agent(&["--version"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
}

#[test]
fn a_command_line_it_cannot_use_exits_2_and_says_why() {
    for (args, says) in [
        (&["acp"][..], "AGENT COMMAND"),
        (&["acp", "--listen", "127.0.0.1:0", "--", "x"][..], "--self-signed"),
        (&["acp", "--agent", "a", "--", "b"][..], "cannot be used with"),
        (&["acp", "--max-agents", "many", "--", "x"][..], "--max-agents"),
        (&["nothing"][..], "unrecognized subcommand"),
    ] {
        let out = durable_agent(args);
        let t = text(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {t}");
        assert!(t.contains(says) && !t.contains("panicked"), "{args:?}: {t}");
    }
}

#[test]
fn an_agent_command_line_it_cannot_split_is_named_before_anything_serves() {
    let dir = std::env::temp_dir().join(format!("durable-agent-cli-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let socket = dir.join("app.sock");
    let data = dir.join("data");
    let out = durable_agent(&[
        "acp",
        "--socket",
        socket.to_str().unwrap(),
        "--data",
        data.to_str().unwrap(),
        "--agent",
        "node 'unclosed",
    ]);
    let t = text(&out);
    assert_eq!(out.status.code(), Some(1), "{t}");
    assert!(t.contains("balanced quotes") && t.contains("unclosed"), "{t}");
    assert!(!socket.exists(), "it served before refusing the agent's command line");
    let _ = std::fs::remove_dir_all(&dir);
}
