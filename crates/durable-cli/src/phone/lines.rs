//! The phone's line interface, for scripts: one command a line on stdin
//! (`open ticket-1`, `send hi`, `answer #1 yes`, …), every change of the
//! screen printed as a line on stdout. It polls every 2 s meanwhile; at the
//! end of stdin it quits (`wait <ms>` keeps it looking first).

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::time::{Instant, MissedTickBehavior};

use super::{Command, POLL, Session, parse_command};

fn print(lines: &[String]) {
    for line in lines {
        println!("{line}");
    }
}

pub(super) async fn run(mut session: Session) -> Result<(), String> {
    print(&session.start().await);
    let mut stdin = BufReader::new(tokio::io::stdin()).lines();
    let mut ticks = tokio::time::interval_at(Instant::now() + POLL, POLL);
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            line = stdin.next_line() => {
                let line = match line {
                    Ok(Some(line)) => line,
                    Ok(None) => return ended(&session),
                    Err(e) => return Err(format!("reading stdin: {e}")),
                };
                let line = line.trim();
                if line.is_empty() || line.starts_with('#') {
                    continue;
                }
                match parse_command(line) {
                    Ok(Command::Quit) => return ended(&session),
                    Ok(Command::Wait(ms)) => {
                        let end = Instant::now() + std::time::Duration::from_millis(ms);
                        loop {
                            tokio::select! {
                                () = tokio::time::sleep_until(end) => break,
                                _ = ticks.tick() => print(&session.poll().await),
                            }
                        }
                        println!("waited {ms} ms");
                    }
                    Ok(command) => print(&session.exec(command).await),
                    Err(why) => println!("{why}"),
                }
            }
            _ = ticks.tick() => print(&session.poll().await),
        }
    }
}

/// The end of a script: an error when the agent never answered, so the
/// script can tell (exit 1).
fn ended(session: &Session) -> Result<(), String> {
    if session.reached { Ok(()) } else { Err("the agent never answered (`durable doctor` says why)".into()) }
}
