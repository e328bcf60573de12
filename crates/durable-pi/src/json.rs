//! Pi's JSON lines read as Pi reads them. `JSON.parse` takes a lone
//! surrogate escape (`"\ud83d"`: what `JSON.stringify` writes for half of
//! an emoji cut by a length limit), serde_json refuses it. A line Pi reads
//! back must not be lost here: later entries name it as their parent, and
//! an event dropped from Pi's output leaves an item running for ever. The
//! lone half reads as U+FFFD, as a lossy UTF-8 decoder would have it.

use serde_json::Value;

/// Parses a line; a lone surrogate escape reads as `\ufffd`.
pub(crate) fn parse(line: &[u8]) -> Result<Value, serde_json::Error> {
    serde_json::from_slice(line).or_else(|e| match without_lone_surrogates(line) {
        Some(repaired) => serde_json::from_slice(&repaired).map_err(|_| e),
        None => Err(e),
    })
}

/// The line with each lone surrogate escape replaced by `\ufffd`, or `None`
/// when it has none (its error is another one).
fn without_lone_surrogates(line: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(line.len());
    let mut changed = false;
    let mut i = 0;
    while i < line.len() {
        if line[i] != b'\\' {
            out.push(line[i]);
            i += 1;
            continue;
        }
        match unit_at(line, i) {
            Some(0xD800..=0xDBFF) if matches!(unit_at(line, i + 6), Some(0xDC00..=0xDFFF)) => {
                out.extend_from_slice(&line[i..i + 12]);
                i += 12;
            }
            Some(0xD800..=0xDFFF) => {
                out.extend_from_slice(b"\\ufffd");
                changed = true;
                i += 6;
            }
            // Any other escape: its two first bytes together, so that the
            // second of `\\` never starts an escape.
            _ => {
                let end = (i + 2).min(line.len());
                out.extend_from_slice(&line[i..end]);
                i = end;
            }
        }
    }
    changed.then_some(out)
}

/// The code unit of a `\uXXXX` escape at `i`.
fn unit_at(line: &[u8], i: usize) -> Option<u16> {
    let escape = line.get(i..i + 6)?;
    if !escape.starts_with(b"\\u") || !escape[2..].iter().all(u8::is_ascii_hexdigit) {
        return None;
    }
    u16::from_str_radix(std::str::from_utf8(&escape[2..]).ok()?, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(line: &str) -> String {
        parse(line.as_bytes()).unwrap()["t"].as_str().unwrap().to_owned()
    }

    #[test]
    fn a_lone_half_of_a_pair_reads_as_the_replacement_character() {
        assert_eq!(text(r#"{"t":"half \ud83d"}"#), "half \u{fffd}");
        assert_eq!(text(r#"{"t":"\ude00 low first"}"#), "\u{fffd} low first");
        assert_eq!(text(r#"{"t":"\ud83d\ud83d\ude00"}"#), "\u{fffd}😀", "a high one, then a whole pair");
        assert!(
            serde_json::from_slice::<Value>(br#"{"t":"\ud83d"}"#).is_err(),
            "serde_json alone refuses it"
        );
    }

    #[test]
    fn whole_pairs_and_escaped_backslashes_are_left_as_they_are() {
        assert_eq!(text(r#"{"t":"\ud83d\ude00 \u00e9"}"#), "😀 é");
        // `\\ud83d` is a backslash and the letters "ud83d", no escape; the
        // line's one lone half is the last.
        assert_eq!(text(r#"{"t":"\\ud83d \ud83d"}"#), "\\ud83d \u{fffd}");
        assert_eq!(without_lone_surrogates(br#"{"t":"\\ud83d"}"#), None);
    }

    #[test]
    fn a_line_broken_otherwise_stays_an_error() {
        assert!(parse(br#"{"t":"\ud83d"#).is_err(), "a torn line");
        assert!(parse(b"not json").is_err());
        assert!(parse(br#"{"t":"\ud83d" "#).is_err(), "repaired, still torn");
    }
}
