//! Property tests of the rules: text sanitizing and truncation (§6.1), the ID
//! and cursor rules with percent-decoding (§2), and the canonical JSON that
//! the ask hash is computed over (§7).
//!
//! The strategies favour the characters the rules are about (controls,
//! invisible characters, white space, multibyte characters, the characters
//! the ID rule forbids) rather than plain ASCII.
//!
//! Each property runs proptest's default number of cases; set
//! `PROPTEST_CASES` (e.g. `PROPTEST_CASES=20000`) for a deeper run.

use durable_types::text::{self, Cleaned, is_forbidden_in_body, is_forbidden_in_line, truncate_bytes};
use durable_types::{
    ASK_HASH_EXCLUDED, CURSOR_MAX, Cursor, ID_MAX, Id, ScopeId, ask_hash_input, canonical_json,
};
use proptest::prelude::*;
use serde_json::{Map, Value};

// ---------------------------------------------------------------------------
// Characters

/// Characters the contract calls invisible (§6.1): zero-width characters,
/// bidi marks, embeddings, overrides and isolates, the BOM, the soft hyphen;
/// and, decided with them, the combining grapheme joiner, the Hangul
/// fillers and the interlinear annotation characters. The tag characters
/// U+E0000..=U+E007F are invisible too ([`TAGS`]).
const INVISIBLES: &[char] = &[
    '\u{00AD}', '\u{034F}', '\u{061C}', '\u{115F}', '\u{1160}', '\u{180E}', '\u{200B}', '\u{200C}',
    '\u{200D}', '\u{200E}', '\u{200F}', '\u{202A}', '\u{202B}', '\u{202C}', '\u{202D}', '\u{202E}',
    '\u{2060}', '\u{2061}', '\u{2062}', '\u{2063}', '\u{2064}', '\u{2066}', '\u{2067}', '\u{2068}',
    '\u{2069}', '\u{3164}', '\u{FEFF}', '\u{FFA0}', '\u{FFF9}', '\u{FFFA}', '\u{FFFB}',
];

/// The tag characters, all invisible.
const TAGS: std::ops::RangeInclusive<u32> = 0xE0000..=0xE007F;

/// Whether `c` is in the invisible set, written out independently of the code.
fn is_listed_invisible(c: char) -> bool {
    INVISIBLES.contains(&c) || TAGS.contains(&u32::from(c))
}

/// The line and paragraph separators: removed from lines, kept in body text.
const LINE_SEPARATORS: &[char] = &['\u{2028}', '\u{2029}'];

/// Other format and combining characters the rule keeps, to mix in
/// (variation selectors, a combining accent, the neighbours of removed ones).
const FORMAT_KEPT: &[char] =
    &['\u{FE0F}', '\u{E0100}', '\u{0301}', '\u{034E}', '\u{1161}', '\u{3165}', '\u{FFFC}', '\u{E0080}'];

/// Unicode `White_Space`, written out so that the test does not lean on the
/// same standard-library predicate as the code under test.
const WHITE_SPACE: &[char] = &[
    '\u{0009}', '\u{000A}', '\u{000B}', '\u{000C}', '\u{000D}', '\u{0020}', '\u{0085}', '\u{00A0}',
    '\u{1680}', '\u{2000}', '\u{2001}', '\u{2002}', '\u{2003}', '\u{2004}', '\u{2005}', '\u{2006}',
    '\u{2007}', '\u{2008}', '\u{2009}', '\u{200A}', '\u{2028}', '\u{2029}', '\u{202F}', '\u{205F}',
    '\u{3000}',
];

/// Multibyte characters of two, three and four bytes.
const MULTIBYTE: &[char] = &['é', 'ß', 'Ж', '✓', '中', '€', '\u{FFFD}', '😀', '𝄞', '\u{10FFFF}'];

/// A control character (general category Cc): C0, DEL, C1.
fn is_cc(c: char) -> bool {
    c <= '\u{1F}' || ('\u{7F}'..='\u{9F}').contains(&c)
}

fn control_char() -> impl Strategy<Value = char> {
    prop_oneof![
        (0u32..=0x1F).prop_map(|n| char::from_u32(n).unwrap()),
        Just('\u{7F}'),
        (0x80u32..=0x9F).prop_map(|n| char::from_u32(n).unwrap()),
    ]
}

fn pick(set: &'static [char]) -> impl Strategy<Value = char> {
    prop::sample::select(set)
}

/// A character of the invisible set, tag characters included.
fn invisible_char() -> impl Strategy<Value = char> {
    prop_oneof![
        3 => pick(INVISIBLES),
        1 => TAGS.prop_map(|n| char::from_u32(n).unwrap()),
    ]
}

/// Any character, weighted towards the ones the text rule cares about.
fn texty_char() -> impl Strategy<Value = char> {
    prop_oneof![
        4 => prop::char::range(' ', '~'),
        2 => control_char(),
        2 => invisible_char(),
        1 => pick(FORMAT_KEPT),
        1 => pick(WHITE_SPACE),
        3 => pick(MULTIBYTE),
        2 => any::<char>(),
    ]
}

fn texty_string(max_chars: usize) -> impl Strategy<Value = String> {
    prop::collection::vec(texty_char(), 0..max_chars).prop_map(|v| v.into_iter().collect())
}

// ---------------------------------------------------------------------------
// (a) Text sanitizing and truncation

fn filtered(s: &str, forbidden: fn(char) -> bool) -> String {
    s.chars().filter(|c| !forbidden(*c)).collect()
}

/// Checks one byte-limited cleaning: within the limit, nothing forbidden, a
/// maximal prefix of the filtered input, `changed` telling the truth, and
/// idempotent.
fn check_bytes_rule(
    input: &str,
    max: usize,
    clean: fn(&str, usize) -> Cleaned,
    forbidden: fn(char) -> bool,
) -> Result<(), TestCaseError> {
    let out = clean(input, max);
    prop_assert!(std::str::from_utf8(out.text.as_bytes()).is_ok());
    prop_assert!(out.text.len() <= max, "{} bytes over {max}", out.text.len());
    prop_assert!(!out.text.chars().any(forbidden), "forbidden char left in {:?}", out.text);
    let kept = filtered(input, forbidden);
    prop_assert!(kept.starts_with(&out.text), "not a prefix of the filtered input");
    if out.text.len() < kept.len() {
        // Cut only as far as needed: the next character would not fit.
        let next = kept[out.text.len()..].chars().next().unwrap();
        prop_assert!(out.text.len() + next.len_utf8() > max, "cut more than needed");
    }
    prop_assert_eq!(out.changed, out.text != input);
    let again = clean(&out.text, max);
    prop_assert_eq!(&again.text, &out.text);
    prop_assert!(!again.changed);
    Ok(())
}

proptest! {

    #[test]
    fn text_rule_body_is_clean_within_limit_and_idempotent(s in texty_string(120), max in 0usize..400) {
        check_bytes_rule(&s, max, text::clean_body, is_forbidden_in_body)?;
    }

    #[test]
    fn text_rule_line_is_clean_within_limit_and_idempotent(s in texty_string(120), max in 0usize..400) {
        check_bytes_rule(&s, max, text::clean_line, is_forbidden_in_line)?;
    }

    #[test]
    fn text_rule_push_counts_characters_and_is_idempotent(s in texty_string(120), max in 0usize..150) {
        let out = text::clean_line_chars(&s, max);
        prop_assert!(std::str::from_utf8(out.text.as_bytes()).is_ok());
        prop_assert!(out.text.chars().count() <= max);
        prop_assert!(!out.text.chars().any(is_forbidden_in_line));
        let kept = filtered(&s, is_forbidden_in_line);
        prop_assert!(kept.starts_with(&out.text));
        if out.text.len() < kept.len() {
            prop_assert_eq!(out.text.chars().count(), max, "cut more than needed");
        }
        prop_assert_eq!(out.changed, out.text != s);
        let again = text::clean_line_chars(&out.text, max);
        prop_assert_eq!(&again.text, &out.text);
        prop_assert!(!again.changed);
    }

    #[test]
    fn text_rule_body_keeps_newline_and_tab_and_removes_every_other_control(s in texty_string(120)) {
        let out = text::clean_body(&s, usize::MAX);
        for c in out.text.chars() {
            prop_assert!(!is_cc(c) || c == '\n' || c == '\t', "control {c:?} left");
            prop_assert!(!is_listed_invisible(c), "invisible {c:?} left");
        }
        let kept = |t: &str| t.chars().filter(|c| matches!(c, '\n' | '\t' | '\u{2028}' | '\u{2029}')).count();
        prop_assert_eq!(kept(&out.text), kept(&s), "body text keeps \\n, \\t, U+2028 and U+2029");
    }

    #[test]
    fn text_rule_line_removes_every_control_separator_and_invisible(s in texty_string(120)) {
        let out = text::clean_line(&s, usize::MAX);
        for c in out.text.chars() {
            prop_assert!(!is_cc(c), "control {c:?} left");
            prop_assert!(!LINE_SEPARATORS.contains(&c), "separator {c:?} left");
            prop_assert!(!is_listed_invisible(c), "invisible {c:?} left");
        }
        let push = text::clean_line_chars(&s, usize::MAX);
        prop_assert_eq!(&push.text, &out.text);
    }

    #[test]
    fn text_rule_invisible_set_is_exactly_the_listed_one(c in prop_oneof![any::<char>(), invisible_char(), pick(FORMAT_KEPT)]) {
        prop_assert_eq!(text::is_invisible(c), is_listed_invisible(c), "{:?}", c);
    }

    #[test]
    fn text_rule_truncates_on_a_utf8_boundary(s in texty_string(120), max in 0usize..400) {
        let cut = truncate_bytes(&s, max);
        prop_assert!(cut.len() <= max);
        prop_assert!(s.starts_with(cut));
        if cut.len() < s.len() {
            let next = s[cut.len()..].chars().next().unwrap();
            prop_assert!(cut.len() + next.len_utf8() > max);
        }
    }
}

// ---------------------------------------------------------------------------
// (b) The ID rule and the cursor rule

/// A character the ID rule allows (`colon`: whether `:` may appear).
fn id_char(colon: bool) -> impl Strategy<Value = char> {
    prop_oneof![
        4 => prop::char::range('!', '~'),
        3 => pick(MULTIBYTE),
        1 => invisible_char(), // not forbidden by the ID rule
        2 => any::<char>(),
    ]
    .prop_filter("ID rule", move |c| {
        !is_cc(*c) && !WHITE_SPACE.contains(c) && !matches!(c, '/' | '?' | '#') && (colon || *c != ':')
    })
}

/// A character the ID rule refuses.
fn forbidden_id_char() -> impl Strategy<Value = char> {
    prop_oneof![control_char(), pick(WHITE_SPACE), pick(&['/', '?', '#'])]
}

/// Keeps the longest prefix of `chars` that fits in `max` bytes.
fn fit(chars: Vec<char>, max: usize) -> String {
    let mut s = String::new();
    for c in chars {
        if s.len() + c.len_utf8() > max {
            break;
        }
        s.push(c);
    }
    s
}

fn valid_id(colon: bool) -> impl Strategy<Value = String> {
    prop::collection::vec(id_char(colon), 1..=ID_MAX).prop_map(|v| fit(v, ID_MAX))
}

fn too_long_id(colon: bool) -> impl Strategy<Value = String> {
    prop::collection::vec(id_char(colon), ID_MAX + 1..=ID_MAX * 2)
        .prop_map(|v| v.into_iter().collect::<String>())
}

/// A valid id with one forbidden character put at a random position.
fn id_with(bad: impl Strategy<Value = char>) -> impl Strategy<Value = String> {
    (valid_id(true), bad, any::<prop::sample::Index>()).prop_map(|(id, c, at)| {
        let mut chars: Vec<char> = id.chars().collect();
        let i = at.index(chars.len() + 1);
        chars.insert(i, c);
        chars.into_iter().collect()
    })
}

fn invalid_id() -> impl Strategy<Value = String> {
    prop_oneof![Just(String::new()), too_long_id(true), id_with(forbidden_id_char())]
}

/// Percent-encodes every byte, in upper- or lowercase hex.
fn encode_fully(s: &str, lower: bool) -> String {
    s.bytes().map(|b| if lower { format!("%{b:02x}") } else { format!("%{b:02X}") }).collect()
}

fn cursor_char() -> impl Strategy<Value = char> {
    prop::char::range('!', '~')
}

fn valid_cursor() -> impl Strategy<Value = String> {
    prop::collection::vec(cursor_char(), 1..=CURSOR_MAX).prop_map(|v| v.into_iter().collect())
}

fn invalid_cursor() -> impl Strategy<Value = String> {
    let outside =
        prop_oneof![Just(' '), control_char(), pick(MULTIBYTE), pick(WHITE_SPACE), invisible_char()];
    let with_bad = (valid_cursor(), outside, any::<prop::sample::Index>()).prop_map(|(s, c, at)| {
        let mut s = s;
        s.insert(at.index(s.len() + 1), c); // ASCII: every index is a boundary
        s
    });
    let too_long = prop::collection::vec(cursor_char(), CURSOR_MAX + 1..=CURSOR_MAX + 64)
        .prop_map(|v| v.into_iter().collect::<String>());
    prop_oneof![Just(String::new()), too_long, with_bad]
}

proptest! {

    #[test]
    fn id_rule_accepts_every_valid_id(id in valid_id(true)) {
        prop_assert!(!id.is_empty() && id.len() <= ID_MAX);
        let parsed = Id::new(id.clone());
        prop_assert!(parsed.is_ok(), "{id:?}: {parsed:?}");
        prop_assert_eq!(parsed.unwrap().into_string(), id.as_str());
    }

    #[test]
    fn id_rule_refuses_every_invalid_id(id in invalid_id()) {
        let e = Id::new(id.clone());
        prop_assert!(e.is_err(), "{id:?} accepted");
        let e = e.unwrap_err();
        prop_assert_eq!(e.rule(), "id");
        prop_assert!(e.is_invalid_argument());
    }

    #[test]
    fn scope_id_rule_accepts_every_valid_id_without_colon(id in valid_id(false)) {
        prop_assert!(ScopeId::new(id.clone()).is_ok(), "{id:?}");
    }

    #[test]
    fn scope_id_rule_refuses_colon_and_every_invalid_id(
        id in prop_oneof![invalid_id(), id_with(Just(':'))],
    ) {
        let e = ScopeId::new(id.clone());
        prop_assert!(e.is_err(), "{id:?} accepted");
        prop_assert_eq!(e.unwrap_err().rule(), "id");
    }

    #[test]
    fn id_rule_allows_colon_outside_workspace_and_tab_ids(id in id_with(Just(':'))) {
        prop_assume!(id.len() <= ID_MAX);
        prop_assert!(Id::new(id.clone()).is_ok(), "{id:?}");
    }

    #[test]
    fn cursor_rule_accepts_every_valid_cursor(c in valid_cursor()) {
        prop_assert!(Cursor::new(c.clone()).is_ok(), "{c:?}");
    }

    #[test]
    fn cursor_rule_refuses_every_invalid_cursor(c in invalid_cursor()) {
        let e = Cursor::new(c.clone());
        prop_assert!(e.is_err(), "{c:?} accepted");
        let e = e.unwrap_err();
        prop_assert_eq!(e.rule(), "cursor");
        prop_assert!(e.is_invalid_argument());
    }

    #[test]
    fn id_rule_applies_after_percent_decoding(id in valid_id(true), lower in any::<bool>()) {
        let segment = encode_fully(&id, lower);
        let back = Id::from_path_segment(&segment);
        prop_assert!(back.is_ok(), "{segment:?}: {back:?}");
        prop_assert_eq!(back.unwrap().into_string(), id.as_str());
        let encoded = percent_encoding::utf8_percent_encode(&id, percent_encoding::NON_ALPHANUMERIC)
            .to_string();
        prop_assert_eq!(Id::from_path_segment(&encoded).unwrap().into_string(), id.as_str());
    }

    #[test]
    fn scope_id_rule_applies_after_percent_decoding(id in valid_id(false)) {
        let back = ScopeId::from_path_segment(&encode_fully(&id, false));
        prop_assert_eq!(back.unwrap().into_string(), id.as_str());
    }

    #[test]
    fn id_rule_refuses_invalid_ids_after_percent_decoding(id in invalid_id()) {
        let e = Id::from_path_segment(&encode_fully(&id, false));
        prop_assert!(e.is_err(), "{id:?} accepted");
        prop_assert_eq!(e.unwrap_err().rule(), "id");
    }
}

// ---------------------------------------------------------------------------
// (c) Canonical JSON

fn json_key() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => "[a-z]{1,6}",
        1 => texty_string(8),
    ]
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        // Floats that survive serde_json's default (not `float_roundtrip`)
        // parsing exactly: a few significant digits and a modest exponent.
        (-1_000_000i64..1_000_000, -6i32..6).prop_map(|(m, e)| {
            let text = format!("{m}e{e}");
            let f: f64 = text.parse().unwrap();
            Value::from(f)
        }),
        texty_string(16).prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 64, 8, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..8).prop_map(Value::Array),
            prop::collection::vec((json_key(), inner), 0..8)
                .prop_map(|entries| Value::Object(entries.into_iter().collect())),
        ]
    })
}

/// The same value with every object's entries inserted in reverse order.
fn reversed(v: &Value) -> Value {
    match v {
        Value::Object(map) => {
            let mut out = Map::new();
            for (k, v) in map.iter().rev() {
                out.insert(k.clone(), reversed(v));
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.iter().map(reversed).collect()),
        other => other.clone(),
    }
}

proptest! {

    #[test]
    fn canonical_json_is_stable_through_a_parse(v in json_value()) {
        let text = canonical_json(&v);
        let parsed: Value = serde_json::from_str(&text).unwrap();
        prop_assert_eq!(&parsed, &v);
        prop_assert_eq!(canonical_json(&parsed), text);
    }

    #[test]
    fn canonical_json_ignores_insertion_order(v in json_value()) {
        prop_assert_eq!(canonical_json(&reversed(&v)), canonical_json(&v));
    }

    #[test]
    fn canonical_json_ignores_insertion_order_of_shuffled_entries(
        entries in prop::collection::btree_map(json_key(), json_value(), 0..10)
            .prop_map(|m| m.into_iter().collect::<Vec<_>>())
            .prop_flat_map(|v| (Just(v.clone()), Just(v).prop_shuffle())),
    ) {
        let (sorted, shuffled) = entries;
        let a: Map<String, Value> = sorted.into_iter().collect();
        let b: Map<String, Value> = shuffled.into_iter().collect();
        prop_assert_eq!(canonical_json(&Value::Object(a)), canonical_json(&Value::Object(b)));
    }

    #[test]
    fn canonical_json_is_compact_and_sorted(v in json_value()) {
        prop_assert_eq!(canonical_json(&v), serde_json::to_string(&sorted(&v, false, &[])).unwrap());
    }

    #[test]
    fn the_ask_hash_input_is_that_without_null_fields_or_the_excluded_top_fields(
        v in json_value(),
        excluded in prop::collection::vec(prop::sample::select(&ASK_HASH_EXCLUDED[..]), 0..4),
        nulls in prop::collection::vec(json_key(), 0..3),
    ) {
        // An object with some excluded keys and some null fields on top of
        // whatever was drawn.
        let mut top = match v {
            Value::Object(map) => map,
            other => Map::from_iter([("v".to_owned(), other)]),
        };
        for k in excluded {
            top.insert(k.to_owned(), Value::from(1));
        }
        for k in nulls {
            top.insert(k, Value::Null);
        }
        let v = Value::Object(top);
        let expected = serde_json::to_string(&sorted(&v, true, &ASK_HASH_EXCLUDED)).unwrap();
        prop_assert_eq!(ask_hash_input(&v), expected);
    }
}

/// serde_json's own compact writer's input: a deeply key-sorted copy of
/// `v`, its `null` fields dropped at every level when `drop_nulls`, the
/// `top` keys dropped from the top-level object.
fn sorted(v: &Value, drop_nulls: bool, top: &[&str]) -> Value {
    match v {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map
                .iter()
                .filter(|(k, v)| !(top.contains(&k.as_str()) || (drop_nulls && v.is_null())))
                .map(|(k, _)| k)
                .collect();
            keys.sort();
            Value::Object(keys.into_iter().map(|k| (k.clone(), sorted(&map[k], drop_nulls, &[]))).collect())
        }
        Value::Array(items) => Value::Array(items.iter().map(|i| sorted(i, drop_nulls, &[])).collect()),
        other => other.clone(),
    }
}
