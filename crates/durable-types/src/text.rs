//! Text sanitizing and truncation (contract §6.1): one home for the rule;
//! the title rule (a title or label must show something once cleaned,
//! [`clean_title`]); and how an error message shows a value ([`quoted`]).
//!
//! Control characters are removed (body text keeps `\n` and `\t`; titles and
//! lines keep none, and also lose the line and paragraph separators U+2028
//! and U+2029), and so are invisible characters ([`is_invisible`]):
//! zero-width characters, bidi marks, overrides and isolates, the BOM, the
//! soft hyphen, invisible fillers, interlinear annotation marks and tag
//! characters. Text over its limit is cut on a UTF-8 boundary (bytes) or
//! after a whole character (push text, whose limits count characters).

use crate::RuleError;

/// Text after cleaning, and whether anything was removed or cut.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cleaned {
    /// The cleaned text.
    pub text: String,
    /// True when a character was removed or the text was truncated.
    pub changed: bool,
}

/// Whether `c` is one of the invisible characters the rule removes, in body
/// text and in lines alike.
pub fn is_invisible(c: char) -> bool {
    matches!(
        c,
        '\u{00AD}'                  // soft hyphen
        | '\u{034F}'                // combining grapheme joiner
        | '\u{061C}'                // arabic letter mark
        | '\u{115F}' | '\u{1160}'   // hangul choseong / jungseong fillers
        | '\u{180E}'                // mongolian vowel separator
        | '\u{200B}'..='\u{200F}'   // zero-width space/joiners, LRM, RLM
        | '\u{202A}'..='\u{202E}'   // bidi embeddings and overrides
        | '\u{2060}'..='\u{2064}'   // word joiner, invisible operators
        | '\u{2066}'..='\u{2069}'   // bidi isolates
        | '\u{3164}'                // hangul filler
        | '\u{FEFF}'                // BOM / zero-width no-break space
        | '\u{FFA0}'                // halfwidth hangul filler
        | '\u{FFF9}'..='\u{FFFB}'   // interlinear annotation anchor, separator, terminator
        | '\u{E0000}'..='\u{E007F}' // tag characters
    )
}

/// Whether `c` ends a line without being a control character: the line
/// separator U+2028 and the paragraph separator U+2029. Body text keeps
/// them; titles and lines remove them.
pub fn is_line_separator(c: char) -> bool {
    matches!(c, '\u{2028}' | '\u{2029}')
}

/// Whether the body-text rule removes `c`.
pub fn is_forbidden_in_body(c: char) -> bool {
    (c.is_control() && c != '\n' && c != '\t') || is_invisible(c)
}

/// Whether the title/line rule removes `c`: every control character, the
/// line and paragraph separators, and the invisible characters.
pub fn is_forbidden_in_line(c: char) -> bool {
    c.is_control() || is_line_separator(c) || is_invisible(c)
}

/// How much of a value an error message shows: its escaped text is cut to
/// this many bytes (after a whole escape), and [`QUOTED_CUT`] follows the
/// closing quote when it was cut.
pub const QUOTED_MAX: usize = 64;

/// What follows a value [`quoted`] had to cut.
pub const QUOTED_CUT: &str = "…";

/// A value as an error message shows it: in double quotes, escaped as Rust
/// escapes a `char` (`\"`, `\\`, `\n`, `\u{7f}`, …, so a control or
/// invisible character is seen, never acted on), the escaped text cut to
/// [`QUOTED_MAX`] bytes on a whole escape, then [`QUOTED_CUT`] after the
/// closing quote when anything was left out.
pub fn quoted(value: &str) -> String {
    let mut out = String::with_capacity(value.len().min(QUOTED_MAX) + 2 + QUOTED_CUT.len());
    out.push('"');
    let mut shown = 0;
    let mut cut = false;
    for c in value.chars() {
        let escaped = c.escape_debug();
        let len: usize = escaped.clone().map(char::len_utf8).sum();
        if shown + len > QUOTED_MAX {
            cut = true;
            break;
        }
        out.extend(escaped);
        shown += len;
    }
    out.push('"');
    if cut {
        out.push_str(QUOTED_CUT);
    }
    out
}

/// Whether a cleaned title shows nothing: it is empty, or only white space.
pub fn is_blank(text: &str) -> bool {
    text.trim().is_empty()
}

/// Cleans a title or label by the line rule ([`clean_line`], cut to
/// `max_bytes`) and checks the title rule: what is left must show
/// something (not [`is_blank`]). The error names the rule, the `field`
/// (`"title"`, `"label"`) and what it belongs to (`owner`, e.g.
/// `workspace "support"`).
pub fn clean_title(text: &str, max_bytes: usize, field: &str, owner: &str) -> Result<String, RuleError> {
    let cleaned = clean_line(text, max_bytes).text;
    check_title(&cleaned, field, owner)?;
    Ok(cleaned)
}

/// The title rule on text already cleaned: an `Err` ([`title_error`]) when
/// it [`is_blank`].
pub fn check_title(cleaned: &str, field: &str, owner: &str) -> Result<(), RuleError> {
    if is_blank(cleaned) {
        return Err(title_error(field, owner));
    }
    Ok(())
}

/// The error of a `field` (`"title"`, `"label"`) of `owner` that breaks the
/// title rule: rule `"title"`, invalid argument.
pub fn title_error(field: &str, owner: &str) -> RuleError {
    RuleError::invalid(
        "title",
        format!(
            "title rule: the {field} of {owner} must not be empty (once control and invisible characters are removed; white space alone counts as empty)"
        ),
    )
}

/// Cuts `s` to at most `max` bytes on a UTF-8 boundary.
pub fn truncate_bytes(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// Removes every character `forbidden` names, in place; true when one was.
fn remove(text: &mut String, forbidden: fn(char) -> bool) -> bool {
    if !text.chars().any(forbidden) {
        return false;
    }
    text.retain(|c| !forbidden(c));
    true
}

/// Cuts `text` to at most `max` bytes on a UTF-8 boundary; true when it was cut.
fn cut_bytes(text: &mut String, max: usize) -> bool {
    if text.len() <= max {
        return false;
    }
    let keep = truncate_bytes(text, max).len();
    text.truncate(keep);
    true
}

/// Removes what `forbidden` names, then cuts to `max_bytes`; true when
/// either changed the text.
fn remove_and_cut(text: &mut String, forbidden: fn(char) -> bool, max_bytes: usize) -> bool {
    let removed = remove(text, forbidden);
    let cut = cut_bytes(text, max_bytes);
    removed || cut
}

/// [`clean_body`] in place, for text already owned: nothing is copied when
/// nothing changes. True when a character was removed or the text was cut.
pub fn sanitize_body(text: &mut String, max_bytes: usize) -> bool {
    remove_and_cut(text, is_forbidden_in_body, max_bytes)
}

/// [`clean_line`] in place (see [`sanitize_body`]).
pub fn sanitize_line(text: &mut String, max_bytes: usize) -> bool {
    remove_and_cut(text, is_forbidden_in_line, max_bytes)
}

/// [`clean_line_chars`] in place (see [`sanitize_body`]).
pub fn sanitize_line_chars(text: &mut String, max_chars: usize) -> bool {
    let removed = remove(text, is_forbidden_in_line);
    let cut = match text.char_indices().nth(max_chars) {
        Some((idx, _)) => {
            text.truncate(idx);
            true
        }
        None => false,
    };
    removed || cut
}

/// A copy of `s` after `rule` (one of the `sanitize_*` functions).
fn cleaned(s: &str, rule: fn(&mut String, usize) -> bool, max: usize) -> Cleaned {
    let mut text = s.to_owned();
    let changed = rule(&mut text, max);
    Cleaned { text, changed }
}

/// Cleans body text (items, reasons): keeps `\n` and `\t`, cuts to `max` bytes.
pub fn clean_body(s: &str, max_bytes: usize) -> Cleaned {
    cleaned(s, sanitize_body, max_bytes)
}

/// Cleans a title or one-line text: no control character, cut to `max` bytes.
pub fn clean_line(s: &str, max_bytes: usize) -> Cleaned {
    cleaned(s, sanitize_line, max_bytes)
}

/// Cleans one-line text whose limit counts characters (push title and line).
pub fn clean_line_chars(s: &str, max_chars: usize) -> Cleaned {
    cleaned(s, sanitize_line_chars, max_chars)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn body_text_keeps_newline_and_tab_but_drops_other_controls() {
        let c = clean_body("a\nb\tc\u{7}d\re", 100);
        assert_eq!(c.text, "a\nb\tcde");
        assert!(c.changed);
    }

    #[test]
    fn titles_keep_no_control_character() {
        assert_eq!(clean_line("a\nb\tc", 100).text, "abc");
    }

    #[test]
    fn invisible_characters_are_removed() {
        let c = clean_line("a\u{200B}b\u{202E}c\u{2066}d\u{FEFF}e\u{AD}f", 100);
        assert_eq!(c.text, "abcdef");
        assert!(c.changed);
    }

    #[test]
    fn text_rule_lines_remove_line_and_paragraph_separators() {
        let c = clean_line("a\u{2028}b\u{2029}c", 100);
        assert_eq!(c.text, "abc");
        assert!(c.changed);
        assert_eq!(clean_line_chars("a\u{2028}b", 60).text, "ab");
        // Body text keeps them as they are.
        let c = clean_body("a\u{2028}b\u{2029}c", 100);
        assert_eq!(c.text, "a\u{2028}b\u{2029}c");
        assert!(!c.changed);
    }

    #[test]
    fn text_rule_removes_invisible_fillers_and_tag_characters() {
        let fillers = [
            '\u{034F}',
            '\u{115F}',
            '\u{1160}',
            '\u{3164}',
            '\u{FFA0}',
            '\u{FFF9}',
            '\u{FFFA}',
            '\u{FFFB}',
            '\u{E0000}',
            '\u{E0001}',
            '\u{E0020}',
            '\u{E007F}',
        ];
        for f in fillers {
            let s = format!("a{f}b");
            assert_eq!(clean_line(&s, 100).text, "ab", "{f:?} in a line");
            assert_eq!(clean_body(&s, 100).text, "ab", "{f:?} in body text");
        }
        // Their neighbours stay.
        for kept in ['\u{034E}', '\u{1161}', '\u{3165}', '\u{FFA1}', '\u{FFFC}', '\u{E0080}', '\u{E0100}'] {
            assert!(!is_invisible(kept), "{kept:?}");
        }
    }

    #[test]
    fn truncation_happens_on_a_utf8_boundary() {
        let c = clean_body("ééé", 5);
        assert_eq!(c.text, "éé");
        assert!(c.changed);
        let c = clean_body("abc", 3);
        assert_eq!(c.text, "abc");
        assert!(!c.changed);
    }

    #[test]
    fn push_limits_count_characters() {
        let c = clean_line_chars(&"é".repeat(61), 60);
        assert_eq!(c.text.chars().count(), 60);
        assert!(c.changed);
    }

    #[test]
    fn sanitizing_owned_text_keeps_its_buffer_when_nothing_changes() {
        let rules: [fn(&mut String, usize) -> bool; 3] = [sanitize_body, sanitize_line, sanitize_line_chars];
        for sanitize in rules {
            let mut text = String::from("Refund order #1042 — 120 €");
            let buffer = text.as_ptr();
            assert!(!sanitize(&mut text, 100));
            assert_eq!(text.as_ptr(), buffer, "unchanged text is not copied");
            assert_eq!(text, "Refund order #1042 — 120 €");
        }
        // What each rule leaves, written out: removal, a cut on a UTF-8
        // boundary (bytes) or after whole characters (push text).
        let run = |rule: fn(&mut String, usize) -> bool, input: &str, max: usize| {
            let mut text = input.to_owned();
            let changed = rule(&mut text, max);
            (text, changed)
        };
        assert_eq!(
            run(sanitize_body, "a\u{200B}b\u{7}c\u{2028}d\ne", 100),
            ("abc\u{2028}d\ne".to_owned(), true)
        );
        assert_eq!(run(sanitize_line, "a\u{200B}b\u{7}c\u{2028}d\ne", 100), ("abcde".to_owned(), true));
        assert_eq!(run(sanitize_line, "héllo wörld", 4), ("hél".to_owned(), true));
        assert_eq!(run(sanitize_body, "héllo", 2), ("h".to_owned(), true));
        assert_eq!(run(sanitize_line_chars, "héllo wörld", 4), ("héll".to_owned(), true));
        assert_eq!(run(sanitize_line_chars, "a\u{FEFF}ééé", 3), ("aéé".to_owned(), true));
        assert_eq!(run(sanitize_line_chars, "héllo", 5), ("héllo".to_owned(), false));
        assert_eq!(run(sanitize_body, "tab\there", 8), ("tab\there".to_owned(), false));
    }
}
