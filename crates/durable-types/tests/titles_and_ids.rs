//! The title rule and how id errors show their value (issue 28), on the
//! types alone: `text::clean_title`, `text::quoted`, the `*_for` id checks
//! and the phone's rename body.

use durable_types::text::{QUOTED_CUT, QUOTED_MAX, clean_title, is_blank, quoted};
use durable_types::{
    AskSpec, Cursor, Id, RenameBody, ScopeId, Target, Timestamp, check_cursor_for, check_id_for,
    check_scope_id_for,
};

#[test]
fn the_title_rule_refuses_a_title_empty_once_cleaned_and_keeps_the_rest_as_cleaned() {
    for blank in ["", "\u{0}\u{1b}\r\n", "\u{200B}\u{2060}\u{E0041}", "\u{2029}", "  \u{2003}"] {
        assert!(is_blank(&durable_types::text::clean_line(blank, 256).text), "{blank:?}");
        let e = clean_title(blank, 256, "title", r#"workspace "ops""#).unwrap_err();
        assert_eq!(e.rule(), "title");
        assert!(e.is_invalid_argument());
        assert!(
            e.to_string().starts_with(r#"title rule: the title of workspace "ops" must not be empty"#),
            "{e}"
        );
    }
    assert_eq!(clean_title("\u{7}Ops\u{200B}", 256, "title", "w").unwrap(), "Ops");
    assert_eq!(clean_title(" a ", 256, "title", "w").unwrap(), " a ", "kept as cleaned, not trimmed");
    // Cut first, then checked: what is left after the cut counts.
    assert_eq!(clean_title("abc", 2, "label", "s").unwrap(), "ab");
}

#[test]
fn an_ask_title_empty_once_cleaned_names_the_title_rule_and_the_tool_call() {
    let pane = Id::new("ticket-1").unwrap();
    for blank in ["", "\u{200B}", " \u{a0}"] {
        let e = AskSpec::text("call-1", blank).build(&pane, Timestamp::EPOCH, true).unwrap_err();
        assert_eq!(e.rule(), "title", "{blank:?}");
        assert!(e.to_string().contains(r#"the ask for tool call "call-1" must not be empty"#), "{e}");
    }
}

#[test]
fn quoted_escapes_and_cuts_the_escaped_text_to_64_bytes_on_a_whole_escape() {
    assert_eq!(quoted("a b"), "\"a b\"");
    assert_eq!(quoted("a\"\\\n\u{7f}\u{200B}"), r#""a\"\\\n\u{7f}\u{200b}""#);
    assert_eq!(quoted(&"x".repeat(QUOTED_MAX)), format!("\"{}\"", "x".repeat(QUOTED_MAX)), "fits: no marker");
    assert_eq!(quoted(&"x".repeat(QUOTED_MAX + 1)), format!("\"{}\"{QUOTED_CUT}", "x".repeat(QUOTED_MAX)));
    // Every cut value stays within the bound, whatever it holds.
    for value in ["é".repeat(200), "\u{1}".repeat(200), "€a".repeat(50), "😀".repeat(40), "\"".repeat(100)]
    {
        let q = quoted(&value);
        let inner = q.strip_prefix('"').and_then(|q| q.strip_suffix(&format!("\"{QUOTED_CUT}"))).unwrap();
        assert!(inner.len() <= QUOTED_MAX, "{q}");
        assert!(inner.len() > QUOTED_MAX - 10, "cut no more than one escape short: {q}");
    }
    // Never half an escape: 21 of `\"` (2 bytes) would be 66.
    assert_eq!(quoted(&"\"".repeat(40)), format!("\"{}\"{QUOTED_CUT}", r#"\""#.repeat(32)));
}

#[test]
fn id_checks_for_a_role_name_it_and_show_the_value() {
    let e = check_id_for("pane id", "a?b").unwrap_err();
    assert!(e.to_string().starts_with(r#"pane id "a?b": id rule: an id may not contain '?'"#), "{e}");
    let e = check_id_for("action id", "").unwrap_err();
    assert_eq!(e.to_string(), r#"action id "": id rule: an id must not be empty"#);
    let e = check_scope_id_for("tab id", "a:b").unwrap_err();
    assert!(e.to_string().starts_with(r#"tab id "a:b": id rule: "#), "{e}");
    let e = check_cursor_for("after", "a b").unwrap_err();
    assert_eq!(e.rule(), "cursor");
    assert!(e.to_string().starts_with(r#"after "a b": cursor rule: "#), "{e}");
    // The named constructors and the plain ones.
    let e = Id::named("starter id", "x y").unwrap_err();
    assert!(e.to_string().starts_with(r#"starter id "x y": "#), "{e}");
    let e = ScopeId::named("workspace id", "w\u{7}").unwrap_err();
    assert!(e.to_string().starts_with(r#"workspace id "w\u{7}": "#), "{e}");
    let e = Cursor::named("next", "").unwrap_err();
    assert!(e.to_string().starts_with(r#"next "": cursor rule: "#), "{e}");
    let e = Id::new("x".repeat(200)).unwrap_err();
    let m = e.to_string();
    assert!(m.starts_with(&format!("id \"{}\"{QUOTED_CUT}: id rule: ", "x".repeat(QUOTED_MAX))), "{m}");
    assert!(Id::named("pane id", "ticket-1").is_ok());
    // A path segment that does not decode shows the segment.
    let e = Id::from_path_segment("a%zz").unwrap_err();
    assert!(e.to_string().starts_with(r#"path segment "a%zz": "#), "{e}");
}

#[test]
fn the_phones_rename_body_refuses_an_empty_title_and_names_the_target() {
    let body = |target: &str, id: &str, title: &str| {
        serde_json::json!({"requestId": "r-1", "target": target, "id": id, "title": title}).to_string()
    };
    for blank in ["", "   ", "\u{7}\u{200B}", "\t\n"] {
        let e = RenameBody::parse(body("pane", "ticket-1", blank).as_bytes()).unwrap_err();
        assert!(e.starts_with(r#"title: title rule: the title of pane "ticket-1" must not be empty"#), "{e}");
        let e = RenameBody::parse(body("tab", "support:main", blank).as_bytes()).unwrap_err();
        assert!(e.contains(r#"tab "support:main""#), "{e}");
    }
    let ok = RenameBody::parse(body("workspace", "support", " Help\u{7}").as_bytes()).unwrap();
    assert_eq!(ok.target, Target::Workspace);
    assert_eq!(ok.title, " Help\u{7}", "the body keeps the title as sent; the layout cleans it");
    let e = RenameBody::parse(body("pane", "a/b", "T").as_bytes()).unwrap_err();
    assert!(e.starts_with(r#"id: pane id "a/b": id rule: "#), "{e}");
}
