//! The phone's line interface, for scripts: one command a line on stdin
//! (`open ticket-1`, `send hi`, `answer #1 yes`, …), every change of the
//! screen printed as a line on stdout. It polls every 2 s meanwhile; at the
//! end of stdin it quits (`wait <ms>` keeps it looking first).

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::time::{Instant, MissedTickBehavior};

use super::{Command, POLL, Session, parse_command};

/// The longest line printed: an agent's title or message past it (the wire
/// allows far less) is cut, so a script's output stays the size of what a
/// person can read.
const LINE_MAX_CHARS: usize = 4096;

fn print(lines: &[String]) {
    for line in lines {
        println!("{}", cut(line));
    }
}

/// `line`, or its first [`LINE_MAX_CHARS`] characters and how much was cut.
fn cut(line: &str) -> std::borrow::Cow<'_, str> {
    match line.char_indices().nth(LINE_MAX_CHARS) {
        None => line.into(),
        Some((end, _)) => format!("{}… ({} more bytes not shown)", &line[..end], line.len() - end).into(),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_lines_are_cut_and_say_so() {
        assert_eq!(cut("pane ticket-1 \"Refund\""), "pane ticket-1 \"Refund\"");
        let long = format!("pane p \"{}\"", "é".repeat(10_000));
        let shown = cut(&long);
        assert!(shown.starts_with("pane p \"éé"), "{shown}");
        assert_eq!(shown.split('…').next().unwrap().chars().count(), LINE_MAX_CHARS);
        let cut_bytes = long.len() - shown.split('…').next().unwrap().len();
        assert!(shown.ends_with(&format!("… ({cut_bytes} more bytes not shown)")), "{shown}");
    }
}
