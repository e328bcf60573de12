//! Which characters of an agent's text a terminal must never get as they
//! are: one set for the phone, which drops them, and conformance's report,
//! which shows them as escapes.

/// Characters that draw nothing or reorder text: the bidi controls (U+061C,
/// U+200E–U+200F, U+202A–U+202E, U+2066–U+2069), the zero-width and
/// invisible ones, and the tag characters (the agent's own set, §6.1).
pub(crate) fn invisible(c: char) -> bool {
    matches!(c,
        '\u{00AD}' | '\u{034F}' | '\u{061C}' | '\u{180E}' | '\u{200B}'..='\u{200F}' | '\u{2028}'..='\u{202E}'
        | '\u{2060}'..='\u{2064}' | '\u{2066}'..='\u{206F}' | '\u{FEFF}' | '\u{FFF9}'..='\u{FFFB}'
        | '\u{115F}' | '\u{1160}' | '\u{3164}' | '\u{FFA0}' | '\u{E0000}'..='\u{E007F}')
}

#[cfg(test)]
mod tests {
    use super::invisible;

    #[test]
    fn bidi_zero_width_and_tag_characters_are_invisible_and_letters_are_not() {
        for c in ['\u{202E}', '\u{2066}', '\u{200F}', '\u{061C}', '\u{200B}', '\u{FEFF}', '\u{E0041}'] {
            assert!(invisible(c), "{:?}", c.escape_unicode().to_string());
        }
        for c in ['a', 'é', '語', '🙂', ' '] {
            assert!(!invisible(c), "{c}");
        }
    }
}
