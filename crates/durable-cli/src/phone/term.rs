//! The terminal under the phone's screen, through `crossterm` (Unix and
//! Windows): raw mode and the alternate screen (restored when dropped, a
//! panic included), the window's size, keys and resizes read on a thread of
//! their own, and a painter that rewrites only the rows that changed, each
//! fitted to the width in columns ([`super::width`]).

use std::io::Write;
use std::time::Duration;

use crossterm::cursor::{Hide, MoveTo, Show};
use crossterm::event::{self, Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use crossterm::style::{Attribute, Print, SetAttribute};
use crossterm::terminal::{self, Clear, ClearType, EnterAlternateScreen, LeaveAlternateScreen};
use crossterm::{execute, queue};
use tokio::sync::mpsc;

use super::width::fit;

/// The terminal in raw mode on the alternate screen, put back as it was
/// when dropped.
#[derive(Debug)]
pub(crate) struct Raw(());

impl Raw {
    pub(crate) fn enter() -> Result<Raw, String> {
        terminal::enable_raw_mode().map_err(|e| format!("setting raw mode: {e}"))?;
        let raw = Raw(());
        execute!(std::io::stdout(), EnterAlternateScreen, Clear(ClearType::All), MoveTo(0, 0))
            .map_err(|e| format!("opening the alternate screen: {e}"))?;
        Ok(raw)
    }
}

impl Drop for Raw {
    fn drop(&mut self) {
        let _ = execute!(std::io::stdout(), SetAttribute(Attribute::Reset), Show, LeaveAlternateScreen);
        let _ = terminal::disable_raw_mode();
    }
}

/// Columns and rows (80×24 when the terminal does not say).
pub(crate) fn size() -> (usize, usize) {
    match terminal::size() {
        Ok((cols, rows)) if cols > 0 && rows > 0 => (usize::from(cols), usize::from(rows)),
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

/// What the terminal tells the phone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Input {
    Key(Key),
    /// The window changed size: paint it all again.
    Resize,
}

/// The phone's key for a key event; `None` for keys it does not use and
/// for releases (Windows reports those too).
pub(crate) fn key_of(event: KeyEvent) -> Option<Key> {
    if event.kind == KeyEventKind::Release {
        return None;
    }
    let ctrl = event.modifiers.contains(KeyModifiers::CONTROL);
    Some(match event.code {
        // Ctrl-H is a backspace on many terminals, Ctrl-J a newline.
        KeyCode::Char('h') if ctrl => Key::Backspace,
        KeyCode::Char('j') if ctrl => Key::Enter,
        KeyCode::Char(c) if ctrl && c.is_ascii_alphabetic() => Key::Ctrl(c.to_ascii_lowercase()),
        KeyCode::Char(_) if ctrl => return None,
        // Alt and a key: the key alone.
        KeyCode::Char(c) => Key::Char(c),
        KeyCode::Enter => Key::Enter,
        KeyCode::Backspace => Key::Backspace,
        KeyCode::Tab if event.modifiers.contains(KeyModifiers::SHIFT) => Key::BackTab,
        KeyCode::Tab => Key::Tab,
        KeyCode::BackTab => Key::BackTab,
        KeyCode::Esc => Key::Esc,
        KeyCode::Up => Key::Up,
        KeyCode::Down => Key::Down,
        KeyCode::Left => Key::Left,
        KeyCode::Right => Key::Right,
        KeyCode::PageUp => Key::PageUp,
        KeyCode::PageDown => Key::PageDown,
        _ => return None,
    })
}

/// What the phone does with a terminal event, if anything.
pub(crate) fn input_of(event: Event) -> Option<Input> {
    match event {
        Event::Key(key) => key_of(key).map(Input::Key),
        Event::Resize(..) => Some(Input::Resize),
        _ => None,
    }
}

/// Reads the terminal's events on a thread of its own (crossterm's reads
/// block) and hands over what the phone uses. The channel closes when the
/// terminal cannot be read; the thread ends soon after the receiver goes.
pub(crate) fn read_input() -> mpsc::UnboundedReceiver<Input> {
    let (tx, rx) = mpsc::unbounded_channel();
    std::thread::spawn(move || {
        loop {
            match event::poll(Duration::from_millis(200)) {
                Ok(true) => match event::read() {
                    Ok(event) => {
                        if let Some(input) = input_of(event) {
                            if tx.send(input).is_err() {
                                return;
                            }
                        }
                    }
                    Err(_) => return,
                },
                Ok(false) if tx.is_closed() => return,
                Ok(false) => {}
                Err(_) => return,
            }
        }
    });
    rx
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

fn coord(n: usize) -> u16 {
    u16::try_from(n).unwrap_or(u16::MAX)
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
        let mut out = std::io::stdout().lock();
        let _ = self.paint_to(&mut out, rows, width, cursor);
    }

    /// Forgets what is on the screen: the next frame paints every row.
    pub(crate) fn invalidate(&mut self) {
        self.last.clear();
        self.width = 0;
    }

    fn paint_to(
        &mut self,
        out: &mut impl Write,
        rows: &[Row],
        width: usize,
        cursor: (usize, usize),
    ) -> std::io::Result<()> {
        queue!(out, Hide)?;
        if width != self.width || rows.len() != self.last.len() {
            queue!(out, SetAttribute(Attribute::Reset), Clear(ClearType::All))?;
            self.last.clear();
            self.width = width;
        }
        for (n, row) in rows.iter().enumerate() {
            if self.last.get(n) == Some(row) {
                continue;
            }
            queue!(out, MoveTo(0, coord(n)))?;
            if row.strong {
                queue!(out, SetAttribute(Attribute::Reverse))?;
            }
            queue!(out, Print(fit(&row.text, width)))?;
            if row.strong {
                queue!(out, SetAttribute(Attribute::Reset))?;
            }
        }
        queue!(out, MoveTo(coord(cursor.0), coord(cursor.1)), Show)?;
        self.last = rows.to_vec();
        out.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_events_become_the_phones_keys() {
        let k = |code, modifiers| key_of(KeyEvent::new(code, modifiers));
        let none = KeyModifiers::NONE;
        let ctrl = KeyModifiers::CONTROL;
        assert_eq!(k(KeyCode::Char('a'), none), Some(Key::Char('a')));
        assert_eq!(k(KeyCode::Char('語'), none), Some(Key::Char('語')));
        assert_eq!(k(KeyCode::Char('x'), KeyModifiers::ALT), Some(Key::Char('x')));
        assert_eq!(k(KeyCode::Char('c'), ctrl), Some(Key::Ctrl('c')));
        assert_eq!(k(KeyCode::Char('N'), ctrl | KeyModifiers::SHIFT), Some(Key::Ctrl('n')));
        assert_eq!(k(KeyCode::Char('h'), ctrl), Some(Key::Backspace));
        assert_eq!(k(KeyCode::Char('j'), ctrl), Some(Key::Enter));
        assert_eq!(k(KeyCode::Char('4'), ctrl), None);
        assert_eq!(k(KeyCode::Enter, none), Some(Key::Enter));
        assert_eq!(k(KeyCode::Tab, KeyModifiers::SHIFT), Some(Key::BackTab));
        assert_eq!(k(KeyCode::BackTab, KeyModifiers::SHIFT), Some(Key::BackTab));
        assert_eq!(k(KeyCode::PageUp, none), Some(Key::PageUp));
        assert_eq!(k(KeyCode::F(5), none), None);
        // Windows reports releases as well: one key, one press.
        let release = KeyEvent::new_with_kind(KeyCode::Char('a'), none, KeyEventKind::Release);
        assert_eq!(key_of(release), None);
        assert_eq!(input_of(Event::Resize(80, 24)), Some(Input::Resize));
        assert_eq!(input_of(Event::FocusGained), None);
    }

    /// The text the painter wrote, its escape sequences left out.
    fn printed(bytes: &[u8]) -> String {
        let text = String::from_utf8(bytes.to_vec()).unwrap();
        let mut out = String::new();
        let mut chars = text.chars();
        while let Some(c) = chars.next() {
            if c == '\u{1b}' {
                // CSI: parameters, then a final byte in @..~.
                if chars.next() == Some('[') {
                    for c in chars.by_ref() {
                        if ('@'..='~').contains(&c) {
                            break;
                        }
                    }
                }
            } else {
                out.push(c);
            }
        }
        out
    }

    #[test]
    fn the_painter_rewrites_changed_rows_fitted_to_the_columns() {
        let mut p = Painter::default();
        let rows = [Row::strong(" title"), Row::plain(" agent: Got it: héllo 👋 日本語 and more")];
        let mut out = Vec::new();
        p.paint_to(&mut out, &rows, 20, (0, 1)).unwrap();
        let text = printed(&out);
        assert_eq!(text, format!("{:20}{}", " title", " agent: Got it: hél…"));
        assert!(String::from_utf8(out).unwrap().contains("\u{1b}[7m"), "the title in reverse video");
        // Only the changed row again.
        let rows = [Row::strong(" title"), Row::plain(" 日本語日本語日本語日本語")];
        let mut out = Vec::new();
        p.paint_to(&mut out, &rows, 20, (0, 1)).unwrap();
        assert_eq!(printed(&out), " 日本語日本語日本語…");
        assert_eq!(super::super::width::width(&printed(&out)), 20);
    }
}
