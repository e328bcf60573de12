//! What the report prints of the agent's text, made safe for a terminal.
//!
//! An agent's hello, ids and answers reach the report's lines (its header,
//! the reasons of `FAIL` lines, the error that ends a run). Written raw, an
//! `ESC ]0;…BEL` would retitle the terminal, an `ESC [2J` clear it, a C1
//! `CSI` (U+009B) do the same on terminals that take it, and a bidi override
//! (U+202E) turn a line around. So every such character is shown as an
//! escape (`\u{1b}`) instead: the reader sees what the agent sent, and the
//! terminal obeys none of it. The phone drops the same characters
//! (`phone/draw.rs`, `clean`); a report shows them, since they may be what
//! the case is about.

use std::fmt::Write;

use crate::text::invisible;

/// The longest reason a report line prints, in characters: an agent's id
/// or body of megabytes in a message is cut, saying how much.
pub(crate) const REASON_MAX: usize = 2_000;

/// The longest agent value (a name, a version, a host) the header prints.
pub(crate) const VALUE_MAX: usize = 80;

/// `text` as one line for a terminal: every control character (C0 with tab
/// and newline, DEL, C1) and every invisible or bidi character written as
/// an escape (`\u{1b}`, `\u{202e}`), and past `max_chars` characters cut,
/// saying how many were left out.
pub(crate) fn line(text: &str, max_chars: usize) -> String {
    let mut out = String::with_capacity(text.len().min(max_chars.saturating_mul(4)));
    let mut chars = text.chars();
    for (shown, c) in chars.by_ref().enumerate() {
        if shown == max_chars {
            let left = 1 + chars.count();
            let _ = write!(out, "... ({left} more characters)");
            return out;
        }
        if c.is_control() || invisible(c) {
            let _ = write!(out, "{}", c.escape_unicode());
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::line;

    #[test]
    fn control_c1_and_bidi_characters_are_shown_as_escapes() {
        let hostile =
            "a\u{1b}]0;owned\u{7}b\u{1b}[2Jc\u{9b}31md\u{202e}e\u{2066}f\u{200f}g\u{61c}h\ni\rj\tk\u{7f}";
        let shown = line(hostile, 1000);
        assert_eq!(
            shown,
            "a\\u{1b}]0;owned\\u{7}b\\u{1b}[2Jc\\u{9b}31md\\u{202e}e\\u{2066}f\\u{200f}g\\u{61c}h\\u{a}i\\u{d}j\\u{9}k\\u{7f}"
        );
        assert!(shown.chars().all(|c| !c.is_control() && c.is_ascii()), "{shown}");
        assert_eq!(line("plain text, été 🙂", 1000), "plain text, été 🙂");
    }

    #[test]
    fn a_long_text_is_cut_saying_how_much() {
        assert_eq!(line("abcdef", 4), "abcd... (2 more characters)");
        assert_eq!(line("abcd", 4), "abcd");
        assert_eq!(line(&"é".repeat(10), 3), "ééé... (7 more characters)");
    }
}
