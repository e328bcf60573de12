//! The default warn sink writes each line once: to `tracing` when the
//! subscriber in force records it, else one line on standard error. Each
//! case runs in a process of its own (this test binary again, told which
//! case by an environment variable set on the child only), since a global
//! subscriber cannot be taken back within a process.

use std::process::Command;

/// The variable that makes this binary a child running one case.
const CASE: &str = "DURABLE_WARN_ONCE_CASE";
const LINE: &str = "warn-once test: a line\u{7} of the core";
/// `LINE` as standard error gets it: a control character is a space.
const LINE_ON_STDERR: &str = "warn-once test: a line  of the core";
const THIS_TEST: &str = "a_warn_line_is_written_once_to_tracing_or_else_to_standard_error";

/// Writes `LINE` once through the SDK's default sink.
fn warn_through_the_default_sink() {
    let collie = durable_sdk::create_core(durable_sdk::CoreOptions::builder().host_name("warn-once"))
        .expect("a core with the system's clock, epoch and warn sink");
    collie.warn(LINE);
}

/// The child's side: a subscriber (or none) as the case says, then the line.
fn child(case: &str) {
    use tracing_subscriber::filter::LevelFilter;
    let subscriber = |level: LevelFilter| {
        // Events on standard output, to tell them from the sink's own line.
        tracing_subscriber::fmt().with_max_level(level).with_writer(std::io::stdout).finish()
    };
    match case {
        "none" => {}
        "subscriber" => tracing::subscriber::set_global_default(subscriber(LevelFilter::INFO)).unwrap(),
        "subscriber-dropping-warnings" => {
            tracing::subscriber::set_global_default(subscriber(LevelFilter::ERROR)).unwrap();
        }
        other => panic!("unknown case {other}"),
    }
    warn_through_the_default_sink();
}

/// Runs one case in a child process: its standard output and error.
fn run(case: &str) -> (String, String) {
    let out = Command::new(std::env::current_exe().unwrap())
        .args([THIS_TEST, "--exact", "--nocapture", "--test-threads=1"])
        .env(CASE, case)
        .env_remove("RUST_LOG")
        .env_remove("COLLIE_TOKEN")
        .env_remove("COLLIE_TOKEN_NEXT")
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    assert!(out.status.success(), "case {case}: {}\n{stdout}\n{stderr}", out.status);
    (stdout, stderr)
}

#[test]
fn a_warn_line_is_written_once_to_tracing_or_else_to_standard_error() {
    if let Ok(case) = std::env::var(CASE) {
        return child(&case);
    }
    let count = |text: &str, what: &str| text.lines().filter(|l| l.contains(what)).count();

    // No subscriber: one line on standard error, as the seeds write it.
    let (stdout, stderr) = run("none");
    let lines: Vec<&str> = stderr.lines().filter(|l| l.contains("warn-once test")).collect();
    assert_eq!(lines, [LINE_ON_STDERR], "stderr:\n{stderr}");
    assert_eq!(count(&stdout, "warn-once test"), 0, "stdout:\n{stdout}");

    // A subscriber that records warnings: one event, nothing on standard error.
    let (stdout, stderr) = run("subscriber");
    assert_eq!(count(&stderr, "warn-once test"), 0, "stderr:\n{stderr}");
    let events: Vec<&str> = stdout.lines().filter(|l| l.contains("warn-once test")).collect();
    assert_eq!(events.len(), 1, "stdout:\n{stdout}");
    assert!(events[0].contains("WARN") && events[0].contains("durable_sdk::warn"), "{events:?}");

    // A subscriber whose filter drops warnings: the line is not lost, it
    // goes to standard error (and once).
    let (stdout, stderr) = run("subscriber-dropping-warnings");
    assert_eq!(count(&stderr, "warn-once test"), 1, "stderr:\n{stderr}");
    assert_eq!(count(&stdout, "warn-once test"), 0, "stdout:\n{stdout}");
}
