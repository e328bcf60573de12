//! The terminal under the phone's screen: raw mode and the alternate screen
//! (restored when dropped, a panic included), the window's size, keys read
//! from the bytes a terminal sends, and a painter that rewrites only the
//! rows that changed.

use std::io::Write;

use rustix::termios::{OptionalActions, Termios, tcgetattr, tcgetwinsize, tcsetattr};

/// The terminal in raw mode, put back as it was when dropped.
pub(crate) struct Raw {
    saved: Termios,
}

impl std::fmt::Debug for Raw {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Raw")
    }
}

impl Raw {
    pub(crate) fn enter() -> Result<Raw, String> {
        let stdin = std::io::stdin();
        let saved = tcgetattr(&stdin).map_err(|e| format!("reading the terminal's mode: {e}"))?;
        let mut raw = saved.clone();
        raw.make_raw();
        tcsetattr(&stdin, OptionalActions::Now, &raw).map_err(|e| format!("setting raw mode: {e}"))?;
        // The alternate screen, the cursor hidden while painting.
        let mut out = std::io::stdout();
        let _ = out.write_all(b"\x1b[?1049h\x1b[H\x1b[2J");
        let _ = out.flush();
        Ok(Raw { saved })
    }
}

impl Drop for Raw {
    fn drop(&mut self) {
        let mut out = std::io::stdout();
        let _ = out.write_all(b"\x1b[?25h\x1b[?1049l");
        let _ = out.flush();
        let _ = tcsetattr(std::io::stdin(), OptionalActions::Now, &self.saved);
    }
}

/// Columns and rows (80×24 when the terminal does not say).
pub(crate) fn size() -> (usize, usize) {
    match tcgetwinsize(std::io::stdout()) {
        Ok(w) if w.ws_col > 0 && w.ws_row > 0 => (w.ws_col as usize, w.ws_row as usize),
        _ => (80, 24),
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Key {
    Char(char),
    Enter,
    Backspace,
    Tab,
    BackTab,
    Esc,
    Up,
    Down,
    Left,
    Right,
    PageUp,
    PageDown,
    /// Ctrl and a letter (lower case).
    Ctrl(char),
}

/// Reads keys from the bytes a terminal sent. Bytes of an unfinished
/// escape or UTF-8 sequence wait for the next read.
#[derive(Debug, Default)]
pub(crate) struct Keys {
    pending: Vec<u8>,
}

impl Keys {
    pub(crate) fn feed(&mut self, bytes: &[u8]) -> Vec<Key> {
        self.pending.extend_from_slice(bytes);
        let mut keys = Vec::new();
        let mut at = 0;
        let buf = std::mem::take(&mut self.pending);
        while at < buf.len() {
            let rest = &buf[at..];
            let (key, used) = match rest[0] {
                0x1b => match parse_escape(rest) {
                    Some(parsed) => parsed,
                    None => {
                        self.pending = rest.to_vec();
                        break;
                    }
                },
                b'\r' | b'\n' => (Some(Key::Enter), 1),
                0x7f | 0x08 => (Some(Key::Backspace), 1),
                b'\t' => (Some(Key::Tab), 1),
                c @ 0x01..=0x1a => (Some(Key::Ctrl((b'a' + c - 1) as char)), 1),
                0x00 | 0x1c..=0x1f => (None, 1),
                _ => {
                    let len = match rest[0] {
                        0xc0..=0xdf => 2,
                        0xe0..=0xef => 3,
                        0xf0..=0xf7 => 4,
                        _ => 1,
                    };
                    if rest.len() < len {
                        self.pending = rest.to_vec();
                        break;
                    }
                    let key =
                        std::str::from_utf8(&rest[..len]).ok().and_then(|s| s.chars().next()).map(Key::Char);
                    (key, len)
                }
            };
            keys.extend(key);
            at += used;
        }
        keys
    }
}

/// An escape sequence at the start of `rest`: the key and the bytes it
/// used, or `None` when it is not finished. A lone ESC is the Esc key.
fn parse_escape(rest: &[u8]) -> Option<(Option<Key>, usize)> {
    if rest.len() == 1 {
        return Some((Some(Key::Esc), 1));
    }
    match rest[1] {
        b'[' | b'O' => {
            // CSI / SS3: parameters, then a final byte in 0x40..=0x7e.
            let end = rest[2..].iter().position(|b| (0x40..=0x7e).contains(b))? + 2;
            let params = &rest[2..end];
            let key = match (rest[end], params) {
                (b'A', _) => Some(Key::Up),
                (b'B', _) => Some(Key::Down),
                (b'C', _) => Some(Key::Right),
                (b'D', _) => Some(Key::Left),
                (b'Z', _) => Some(Key::BackTab),
                (b'~', b"5") => Some(Key::PageUp),
                (b'~', b"6") => Some(Key::PageDown),
                _ => None,
            };
            Some((key, end + 1))
        }
        0x1b => Some((Some(Key::Esc), 1)),
        // Alt and a key: the key alone.
        _ => Some((None, 1)),
    }
}

/// A row of the screen: its text, and whether it is drawn in reverse video.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Row {
    pub(crate) text: String,
    pub(crate) strong: bool,
}

impl Row {
    pub(crate) fn plain(text: impl Into<String>) -> Row {
        Row { text: text.into(), strong: false }
    }

    pub(crate) fn strong(text: impl Into<String>) -> Row {
        Row { text: text.into(), strong: true }
    }
}

/// `text` cut or padded to `width` characters (wide characters are rare in
/// what the phone draws; each counts as one).
pub(crate) fn fit(text: &str, width: usize) -> String {
    let mut out: String = text.chars().take(width).collect();
    let n = out.chars().count();
    out.extend(std::iter::repeat_n(' ', width - n));
    out
}

/// Paints frames, rewriting the rows that changed since the last one.
#[derive(Debug, Default)]
pub(crate) struct Painter {
    last: Vec<Row>,
    width: usize,
}

impl Painter {
    /// Paints `rows` (as many as the screen has) and puts the cursor at
    /// `cursor` (column, row), shown.
    pub(crate) fn paint(&mut self, rows: &[Row], width: usize, cursor: (usize, usize)) {
        let mut out = String::from("\x1b[?25l");
        if width != self.width || rows.len() != self.last.len() {
            out.push_str("\x1b[H\x1b[2J");
            self.last.clear();
            self.width = width;
        }
        for (n, row) in rows.iter().enumerate() {
            if self.last.get(n) == Some(row) {
                continue;
            }
            out.push_str(&format!("\x1b[{};1H", n + 1));
            if row.strong {
                out.push_str("\x1b[7m");
            }
            out.push_str(&fit(&row.text, width));
            if row.strong {
                out.push_str("\x1b[0m");
            }
        }
        out.push_str(&format!("\x1b[{};{}H\x1b[?25h", cursor.1 + 1, cursor.0 + 1));
        self.last = rows.to_vec();
        let mut stdout = std::io::stdout();
        let _ = stdout.write_all(out.as_bytes());
        let _ = stdout.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_read_from_terminal_bytes() {
        let mut k = Keys::default();
        assert_eq!(
            k.feed(b"a\r\x1b[A\x1b[B\t\x1b[Z\x7f\x03 \xc3\xa9"),
            [
                Key::Char('a'),
                Key::Enter,
                Key::Up,
                Key::Down,
                Key::Tab,
                Key::BackTab,
                Key::Backspace,
                Key::Ctrl('c'),
                Key::Char(' '),
                Key::Char('é')
            ]
        );
        assert_eq!(k.feed(b"\x1b[5~\x1b[6~\x1bOC"), [Key::PageUp, Key::PageDown, Key::Right]);
        assert_eq!(k.feed(b"\x1b"), [Key::Esc]);
        // A sequence cut between two reads.
        assert_eq!(k.feed(b"\x1b["), []);
        assert_eq!(k.feed(b"D\xc3"), [Key::Left]);
        assert_eq!(k.feed(b"\xa9"), [Key::Char('é')]);
        // Unknown sequences and stray bytes are dropped, never a panic.
        assert_eq!(k.feed(b"\x1b[99;5u\xff\x00x"), [Key::Char('x')]);
    }

    #[test]
    fn rows_are_fitted_to_the_width() {
        assert_eq!(fit("abc", 5), "abc  ");
        assert_eq!(fit("abcdef", 3), "abc");
        assert_eq!(fit("é€", 3), "é€ ");
    }
}
