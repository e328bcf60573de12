//! `rules`: the rules of `durable-types` that network text meets — the ID
//! and cursor rules and path-segment decoding, time parsing, the caps list,
//! text sanitizing and cutting, the item rules (`Item::sanitized`, `lang`,
//! `href`, badges, progress), the hash shapes and canonical JSON.
//!
//! Asserts: no panic; each check agrees with the rule written out plainly
//! here (`docs/wire.md` §2, §6.1, §7); what a rule lets through passes it
//! again; sanitizing is idempotent and leaves no forbidden character and
//! nothing over its limit; times and caps survive their own wire form;
//! canonical JSON reads back as the same value and is stable.
#![no_main]

use arbitrary::{Arbitrary, Unstructured};
use durable_types::text::{
    clean_body, clean_line, clean_line_chars, is_forbidden_in_body, is_forbidden_in_line, truncate_bytes,
};
use durable_types::{
    Badge, BadgeTone, CURSOR_MAX, Cap, Caps, CapsView, Cursor, ID_MAX, Id, Item, ItemBody, NoticeTone,
    ScopeId, Timestamp, ToolStatus, canonical_json, check_cursor, check_href, check_id, check_lang,
    check_scope_id, decode_path_segment, is_hash, is_hash_any_case,
};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

/// An input is one byte naming the rule, then its text (or, for the
/// structured rules, the bytes `arbitrary` reads an item or a number from),
/// so that a seed is readable: `\x03` then `2026-11-30T05:00:00.000Z`.
fn run(data: &[u8]) {
    let Some((&rule, rest)) = data.split_first() else { return };
    let text = std::str::from_utf8(rest);
    match (rule % 13, text) {
        (0, Ok(s)) => id(s),
        (1, Ok(s)) => segment(s),
        (2, Ok(s)) => cursor(s),
        (3, Ok(s)) => time(s),
        (4, _) => {
            if let Ok(ms) = u64::arbitrary_take_rest(Unstructured::new(rest)) {
                millis(ms);
            }
        }
        (5, Ok(s)) => caps(s),
        (6, Ok(s)) => {
            let (max, s) = s.split_once('|').unwrap_or(("64", s));
            text_rules(s, max.parse().unwrap_or(64));
        }
        (7, _) => {
            if let Ok(i) = ItemIn::arbitrary_take_rest(Unstructured::new(rest)) {
                item(i);
            }
        }
        (8, _) => item_json(rest),
        (9, Ok(s)) => lang(s),
        (10, Ok(s)) => href(s),
        (11, Ok(s)) => hash(s),
        (12, _) => json(rest),
        _ => {}
    }
}

/// An item as the program could write it, any text in any field.
#[derive(Debug, Arbitrary)]
struct ItemIn<'a> {
    kind: u8,
    flag: bool,
    value: f64,
    big: u32,
    badge: Option<(&'a str, u8)>,
    other: Option<&'a str>,
    text: &'a str,
}

fuzz_target!(|data: &[u8]| run(data));

/// The ID rule, written out (`docs/wire.md` §2).
fn id_rule(s: &str) -> bool {
    (1..=ID_MAX).contains(&s.len())
        && !s.chars().any(|c| c.is_control() || c.is_whitespace() || matches!(c, '/' | '?' | '#'))
}

fn id(s: &str) {
    let ok = id_rule(s);
    assert_eq!(check_id(s).is_ok(), ok, "check_id({s:?})");
    assert_eq!(Id::new(s).is_ok(), ok);
    assert_eq!(check_scope_id(s).is_ok(), ok && !s.contains(':'), "check_scope_id({s:?})");
    assert_eq!(ScopeId::new(s).is_ok(), ok && !s.contains(':'));
    if let Err(e) = check_id(s) {
        assert!(e.is_invalid_argument() && e.rule() == "id");
    }
    if ok {
        // Percent-encoded whole, as Collie writes a path, it decodes to itself.
        let enc: String = s.bytes().map(|b| format!("%{b:02x}")).collect();
        assert_eq!(Id::from_path_segment(&enc).map(Id::into_string).as_deref(), Ok(s));
        let id = Id::new(s).expect("checked");
        let json = serde_json::to_string(&id).expect("an id is JSON");
        assert_eq!(serde_json::from_str::<Id>(&json).expect("reads back"), id);
    }
}

fn segment(s: &str) {
    let decoded = decode_path_segment(s);
    let b = s.as_bytes();
    let malformed = b.iter().enumerate().any(|(i, &c)| {
        c == b'%'
            && !(b.get(i + 1).is_some_and(u8::is_ascii_hexdigit)
                && b.get(i + 2).is_some_and(u8::is_ascii_hexdigit))
    });
    if malformed {
        assert!(decoded.is_err(), "a lone % must be refused: {s:?}");
    }
    if !s.contains('%') {
        assert_eq!(decoded.as_deref(), Ok(s), "nothing to decode in {s:?}");
    }
    if let Ok(d) = &decoded {
        assert!(d.len() <= s.len());
        assert_eq!(Id::from_path_segment(s).is_ok(), id_rule(d), "segment {s:?} → {d:?}");
    } else {
        assert!(Id::from_path_segment(s).is_err());
    }
}

fn cursor(s: &str) {
    let ok = (1..=CURSOR_MAX).contains(&s.len()) && s.bytes().all(|b| (0x21..=0x7e).contains(&b));
    assert_eq!(check_cursor(s).is_ok(), ok, "check_cursor({s:?})");
    assert_eq!(Cursor::new(s).is_ok(), ok);
}

fn time(s: &str) {
    let Ok(t) = Timestamp::parse(s) else { return };
    // A time that parses has a wire form that parses back to it (up to
    // the last instant the wire can write).
    let wire = t.to_rfc3339();
    assert_eq!(wire.len(), 24, "{wire}");
    if t <= Timestamp::MAX {
        assert_eq!(Timestamp::parse(&wire).ok(), Some(t), "{s:?} → {wire}");
    }
}

fn millis(ms: u64) {
    let t = Timestamp::from_millis(ms);
    let wire = t.to_rfc3339();
    assert_eq!(wire.len(), 24, "{wire}");
    assert!(wire.ends_with('Z'));
    let back = Timestamp::parse(&wire).expect("the wire form of a time parses");
    assert_eq!(back, t.min(Timestamp::MAX), "{ms} → {wire}");
    let json = serde_json::to_string(&t).expect("a time is JSON");
    assert_eq!(serde_json::from_str::<Timestamp>(&json).ok(), Some(t.min(Timestamp::MAX)));
    assert!(t.plus_millis(ms) >= t);
    assert_eq!(t.millis_since(t.plus_millis(1)), 0);
}

fn caps(s: &str) {
    let Ok(c) = Caps::parse_list(s) else { return };
    assert!(!c.has(Cap::Terminal), "terminal is never on");
    assert_eq!(Caps::from(CapsView::from(c)), c);
    let names: Vec<&str> = c.iter().map(Cap::name).collect();
    assert_eq!(Caps::parse_list(&names.join(",")).ok(), Some(c));
    for name in s.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        let cap = Cap::from_name(name).expect("a name the list took is known");
        assert_eq!(c.has(cap), cap != Cap::Terminal);
    }
}

fn text_rules(s: &str, max: usize) {
    type Clean = fn(&str, usize) -> durable_types::text::Cleaned;
    let cases: [(Clean, fn(char) -> bool); 2] =
        [(clean_body, is_forbidden_in_body), (clean_line, is_forbidden_in_line)];
    for (clean, forbidden) in cases {
        let c = clean(s, max);
        assert!(c.text.len() <= max, "over {max} bytes");
        assert!(!c.text.chars().any(forbidden), "a forbidden character stays: {:?}", c.text);
        assert_eq!(c.changed, c.text != s, "changed says whether the text changed");
        let again = clean(&c.text, max);
        assert_eq!(again.text, c.text, "cleaning is idempotent");
        assert!(!again.changed);
        // What is kept is the start of the text with the forbidden characters removed.
        let filtered: String = s.chars().filter(|ch| !forbidden(*ch)).collect();
        if filtered.len() <= max {
            assert_eq!(c.text, filtered, "nothing is cut under the limit");
        } else {
            assert!(filtered.starts_with(&c.text) && max - c.text.len() < 4, "cut on the last character");
        }
    }
    let c = clean_line_chars(s, max);
    assert!(c.text.chars().count() <= max);
    assert!(!c.text.chars().any(is_forbidden_in_line));
    assert_eq!(clean_line_chars(&c.text, max).text, c.text);
    let cut = truncate_bytes(s, max);
    assert!(s.starts_with(cut) && cut.len() <= max);
    assert!(s.len() <= max || max - cut.len() < 4);
}

fn item(i: ItemIn<'_>) {
    let text = i.text.to_owned();
    let big = |n: usize| text.repeat(1 + (i.big as usize % n));
    let badge = i.badge.map(|(t, tone)| {
        let tone =
            [BadgeTone::Neutral, BadgeTone::Good, BadgeTone::Warn, BadgeTone::Bad][usize::from(tone) % 4];
        Badge::new(t, tone)
    });
    let other = i.other.map(str::to_owned);
    let body = match i.kind % 9 {
        0 => ItemBody::User { text: big(64), request_id: other.and_then(|o| Id::new(o).ok()) },
        1 => ItemBody::Reply { text: big(256), partial: i.flag },
        2 => ItemBody::Markdown { text: big(256), partial: i.flag },
        3 => ItemBody::Thinking { text: big(64), partial: i.flag },
        4 => ItemBody::Notice { text: big(8), partial: i.flag, tone: i.flag.then_some(NoticeTone::Warn) },
        5 => ItemBody::Code { text, lang: other },
        6 => ItemBody::Tool {
            name: text.clone(),
            call: big(16),
            status: if i.flag { ToolStatus::Ok } else { ToolStatus::Running },
            output: other,
            badge,
        },
        7 => ItemBody::Link { text, href: other.unwrap_or_default() },
        _ => ItemBody::Progress { label: text, value: i.value, badge },
    };
    let Ok(item) = Id::new("item-1").map(|id| Item::new(id, body)) else { return };
    sanitized_item(item);
}

fn item_json(b: &[u8]) {
    if let Ok(item) = serde_json::from_slice::<Item>(b) {
        sanitized_item(item);
    }
}

fn sanitized_item(item: Item) {
    let Ok((clean, _)) = item.clone().sanitized() else { return };
    assert_eq!(clean.body.kind(), item.body.kind());
    let (again, changed) = clean.clone().sanitized().expect("a clean item stays valid");
    assert!(!changed, "sanitizing is idempotent: {clean:?}");
    assert_eq!(again, clean);
    // Its wire form reads back as the same item.
    let json = serde_json::to_vec(&clean).expect("an item is JSON");
    let back: Item = serde_json::from_slice(&json).expect("an item reads back");
    assert_eq!(back, clean);
}

fn lang(s: &str) {
    let b = s.as_bytes();
    let ok = (1..=32).contains(&b.len())
        && (b[0].is_ascii_lowercase() || b[0].is_ascii_digit())
        && b[1..].iter().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || b"+#._-".contains(c));
    assert_eq!(check_lang(s).is_ok(), ok, "check_lang({s:?})");
}

fn href(s: &str) {
    if check_href(s).is_ok() {
        assert!(s.len() <= 2048);
        assert!(s.starts_with("https://") || s.starts_with("http://"));
        assert!(!s.chars().any(|c| c.is_control() || c.is_whitespace()));
    }
}

fn hash(s: &str) {
    let any = s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit());
    assert_eq!(is_hash_any_case(s), any);
    assert_eq!(is_hash(s), any && !s.bytes().any(|b| b.is_ascii_uppercase()));
    if any {
        assert!(is_hash(&s.to_ascii_lowercase()));
    }
}

fn json(b: &[u8]) {
    let Ok(v) = serde_json::from_slice::<Value>(b) else { return };
    let canon = canonical_json(&v);
    let back: Value = serde_json::from_str(&canon).expect("canonical JSON is JSON");
    assert_eq!(back, v, "canonical JSON reads back as the same value");
    assert_eq!(canonical_json(&back), canon, "canonical JSON is stable");
    let _ = durable_types::ask_hash(&v);
    let _ = durable_types::call_summary("f", &v);
    let _ = durable_types::arguments_view(&v);
}
