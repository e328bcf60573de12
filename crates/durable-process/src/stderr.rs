//! The tail of an agent's standard error, for the notice of its exit.

use std::sync::{Arc, Mutex};

use tokio::io::{AsyncRead, AsyncReadExt};

/// How much of an agent's standard error is kept.
pub const STDERR_KEPT: usize = 4096;

/// The longest last line given, in characters.
const LAST_LINE_MAX: usize = 300;

/// The last [`STDERR_KEPT`] bytes an agent wrote on its standard error,
/// read by a task of its own (on the current tokio runtime) until the
/// stream ends; what came before is dropped as it comes. Cloning shares the
/// tail.
#[derive(Debug, Clone, Default)]
pub struct StderrTail {
    kept: Arc<Mutex<String>>,
}

impl StderrTail {
    /// Starts reading `stderr` (needs a tokio runtime).
    pub fn spawn<R>(stderr: R) -> StderrTail
    where
        R: AsyncRead + Unpin + Send + 'static,
    {
        let tail = StderrTail::default();
        tokio::spawn(tail.clone().keep(stderr));
        tail
    }

    async fn keep<R: AsyncRead + Unpin>(self, mut stderr: R) {
        let mut buf = [0u8; 4096];
        while let Ok(n) = stderr.read(&mut buf).await {
            if n == 0 {
                break;
            }
            self.push(&buf[..n]);
        }
    }

    fn push(&self, bytes: &[u8]) {
        let mut kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        kept.push_str(&String::from_utf8_lossy(bytes));
        if kept.len() > STDERR_KEPT {
            let cut = kept.len() - STDERR_KEPT;
            let cut = (cut..kept.len()).find(|&i| kept.is_char_boundary(i)).unwrap_or(kept.len());
            kept.drain(..cut);
        }
    }

    /// The last line that is not blank, trimmed, cut at 300 characters
    /// (with `…`); `None` when the agent wrote nothing.
    pub fn last_line(&self) -> Option<String> {
        let kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        let line = kept.lines().map(str::trim).rfind(|l| !l.is_empty())?;
        let mut chars = line.char_indices();
        Some(match chars.nth(LAST_LINE_MAX) {
            Some((cut, _)) => format!("{}…", &line[..cut]),
            None => line.to_owned(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_line_is_the_last_written_and_long_ones_are_cut_on_a_char() {
        let tail = StderrTail::default();
        assert_eq!(tail.last_line(), None);
        tail.push(b"starting\nError: boom \n\n  ");
        assert_eq!(tail.last_line().as_deref(), Some("Error: boom"));
        tail.push("é".repeat(400).as_bytes());
        let last = tail.last_line().unwrap();
        assert_eq!(last.chars().count(), LAST_LINE_MAX + 1, "300 characters and the ellipsis");
        assert!(last.ends_with('…'));
    }

    #[test]
    fn only_the_tail_is_kept_and_on_a_char_boundary() {
        let tail = StderrTail::default();
        for _ in 0..1000 {
            tail.push("ünïcode line\n".as_bytes());
        }
        let kept = tail.kept.lock().unwrap().len();
        assert!(kept <= STDERR_KEPT, "{kept}");
        assert!(kept > STDERR_KEPT - 16, "{kept}");
        assert_eq!(tail.last_line().as_deref(), Some("ünïcode line"));
    }

    #[tokio::test]
    async fn a_spawned_tail_reads_the_stream_to_its_end() {
        let tail = StderrTail::spawn(&b"one\ntwo\n"[..]);
        for _ in 0..100 {
            if tail.last_line().is_some() {
                break;
            }
            tokio::task::yield_now().await;
        }
        assert_eq!(tail.last_line().as_deref(), Some("two"));
    }
}
