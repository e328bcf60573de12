//! Text measured in terminal columns, not characters: an emoji or a CJK
//! character takes two columns, a combining mark none (Unicode's East Asian
//! Width, through `unicode-width`). The screen wraps, cuts and pads by
//! these, and puts the composer's cursor after what was typed.
//!
//! Each character is measured on its own and the widths added up, as a
//! terminal advances its cursor; a row cut here is cut the same way there.

use unicode_width::UnicodeWidthChar;

/// What ends a row that was cut short.
const ELLIPSIS: char = '…';

/// The columns one character takes (0 for one that draws nothing).
pub(crate) fn char_width(c: char) -> usize {
    c.width().unwrap_or(0)
}

/// The columns `text` takes on a terminal.
pub(crate) fn width(text: &str) -> usize {
    text.chars().map(char_width).sum()
}

/// `text` in exactly `cols` columns: padded with spaces, or cut with `…` at
/// its end when it is wider (a wide character that would cross the edge is
/// left out, its column padded).
pub(crate) fn fit(text: &str, cols: usize) -> String {
    let mut out = String::with_capacity(text.len() + cols);
    let mut used = 0;
    if width(text) <= cols {
        out.push_str(text);
        used = width(text);
    } else if cols > 0 {
        for c in text.chars() {
            let w = char_width(c);
            if used + w > cols - 1 {
                break;
            }
            out.push(c);
            used += w;
        }
        out.push(ELLIPSIS);
        used += 1;
    }
    out.extend(std::iter::repeat_n(' ', cols - used));
    out
}

/// The end of `text` that fits in `cols` columns (what a one-line
/// composer shows of a long input: the part the cursor is at).
pub(crate) fn tail(text: &str, cols: usize) -> &str {
    let mut used = 0;
    let mut start = text.len();
    for (at, c) in text.char_indices().rev() {
        let w = char_width(c);
        if used + w > cols {
            break;
        }
        used += w;
        start = at;
    }
    // A combining mark whose base was left out goes too.
    let rest = &text[start..];
    let skip: usize = rest.chars().take_while(|c| char_width(*c) == 0).map(char::len_utf8).sum();
    &rest[skip..]
}

/// `text` broken into lines of at most `cols` columns (`cols` ≥ 2), at
/// spaces where it can be, inside a word longer than a line where it must.
/// Spaces at a break are dropped; leading spaces (an indent) are kept.
pub(crate) fn wrap(text: &str, cols: usize) -> Vec<String> {
    let cols = cols.max(2);
    let mut lines = Vec::new();
    let mut line = String::new();
    let mut used = 0;
    for word in words(text) {
        let w = width(word);
        if used + w <= cols {
            line.push_str(word);
            used += w;
            continue;
        }
        if word.starts_with(' ') {
            // A break: the spaces go.
            if used > 0 {
                lines.push(std::mem::take(&mut line));
                used = 0;
            }
            continue;
        }
        if used > 0 && w <= cols {
            lines.push(std::mem::take(&mut line).trim_end().to_owned());
            used = 0;
        }
        // A word wider than what is left: cut it by characters.
        for c in word.chars() {
            let cw = char_width(c);
            if used + cw > cols && used > 0 {
                lines.push(std::mem::take(&mut line).trim_end().to_owned());
                used = 0;
            }
            line.push(c);
            used += cw;
        }
    }
    lines.push(line.trim_end().to_owned());
    lines
}

/// Runs of spaces and runs of anything else, in order.
fn words(text: &str) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || {
        let first = rest.chars().next()?;
        let space = first == ' ';
        let end = rest.find(|c: char| (c == ' ') != space).unwrap_or(rest.len());
        let (word, after) = rest.split_at(end);
        rest = after;
        Some(word)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const HELLO: &str = "héllo 👋 日本語";

    #[test]
    fn wide_characters_take_two_columns_and_combining_marks_none() {
        assert_eq!(width("abc"), 3);
        assert_eq!(width("👋"), 2);
        assert_eq!(width("日本語"), 6);
        // e + COMBINING ACUTE ACCENT: one column, though two characters.
        assert_eq!(width("cafe\u{301}"), 4);
        assert_eq!(width(HELLO), 15);
    }

    #[test]
    fn rows_are_padded_or_cut_to_the_columns() {
        assert_eq!(fit("abc", 5), "abc  ");
        assert_eq!(fit("abcdef", 4), "abc…");
        assert_eq!(fit("é€", 3), "é€ ");
        // A combining mark does not count: the word fits whole.
        assert_eq!(fit("cafe\u{301}", 4), "cafe\u{301}");
        assert_eq!(fit("cafe\u{301}!", 4), "caf…");
        // Wide characters: cut by columns, a half column padded.
        assert_eq!(fit("日本語です", 6), "日本… ");
        assert_eq!(fit("日本語", 6), "日本語");
        assert_eq!(fit("a👋b", 3), "a… ");
        assert_eq!(fit("日本", 1), "…");
        assert_eq!(fit("x", 0), "");
        for cols in 0..20 {
            for text in [HELLO, "日本語の長い文章です", "👋👋👋👋👋", "cafe\u{301} cafe\u{301}", ""]
            {
                assert_eq!(width(&fit(text, cols)), cols, "{text:?} in {cols}");
            }
        }
    }

    #[test]
    fn lines_wrap_by_columns() {
        assert_eq!(wrap(HELLO, 8), ["héllo 👋", "日本語"]);
        assert_eq!(wrap(HELLO, 7), ["héllo", "👋", "日本語"]);
        assert_eq!(wrap("日本語の長い文章です", 8), ["日本語の", "長い文章", "です"]);
        assert_eq!(wrap("日本語の長い文章です", 7), ["日本語", "の長い", "文章で", "す"]);
        assert_eq!(wrap("cafe\u{301} cafe\u{301}", 9), ["cafe\u{301} cafe\u{301}"]);
        assert_eq!(wrap("  | indented", 20), ["  | indented"]);
        assert_eq!(wrap("", 10), [""]);
        assert_eq!(wrap("          x", 5), ["x"]);
        for cols in 2..24 {
            for text in
                [HELLO, "agent: Got it: 日本語の長い文章です 👋👋", "aaaaaaaaaaaaaaaaaaaaa b", "x 日本語"]
            {
                let lines = wrap(text, cols);
                assert!(lines.iter().all(|l| width(l) <= cols), "{text:?} in {cols}: {lines:?}");
                // Nothing is lost but the spaces at the breaks.
                let kept: String = lines.concat().chars().filter(|c| *c != ' ').collect();
                let all: String = text.chars().filter(|c| *c != ' ').collect();
                assert_eq!(kept, all, "{text:?} in {cols}");
            }
        }
    }

    #[test]
    fn the_composer_shows_the_end_that_fits() {
        assert_eq!(tail("hello", 10), "hello");
        assert_eq!(tail("hello", 3), "llo");
        assert_eq!(tail("ab日本", 5), "b日本");
        assert_eq!(tail("ab日本", 4), "日本");
        assert_eq!(tail("ab日本", 3), "本");
        // A mark is not shown without its base.
        assert_eq!(tail("xe\u{301}", 1), "e\u{301}");
        assert_eq!(tail("e\u{301}", 0), "");
    }
}
