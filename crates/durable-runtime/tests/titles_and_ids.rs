//! Bad input from the program (issue 28): a title or label that is empty,
//! or empty once cleaned, is an `Err` of the title rule; an id error names
//! which id it was and shows its value, escaped and cut to 64 bytes; the
//! phone's rename to an empty title is `400`.
use durable_runtime::test_util as harness;

use durable_runtime::PaneOptions;
use durable_runtime::types::text::{QUOTED_CUT, QUOTED_MAX};
use durable_runtime::types::{AskSpec, Caps, RuleError};
use harness::recorder::{Handled, Log, Recorder};
use harness::{Harness, Reply};
use serde_json::{Value, json};

/// Titles that show nothing: plain empty, and empty once cleaned (control
/// characters, invisible characters, line separators, white space alone).
const BLANK: [&str; 5] = ["", "\u{7}\n\t", "\u{200B}\u{FEFF}\u{202E}", "\u{2028}\u{AD}", " \u{3000}\u{a0} "];

/// The error is the title rule's, of the invalid-argument kind, and its
/// message names the rule and what the title belongs to.
fn assert_title_rule(r: Result<impl std::fmt::Debug, RuleError>, owner: &str, what: &str) {
    let e = r.expect_err(what);
    assert_eq!(e.rule(), "title", "{what}: {e:?}");
    assert!(e.is_invalid_argument(), "{what}: {e:?}");
    let m = e.to_string();
    assert!(m.contains("title rule") && m.contains("must not be empty"), "{what}: {m}");
    assert!(m.contains(owner), "{what}: {m:?} does not name {owner:?}");
}

async fn state(h: &Harness) -> Value {
    h.state().await.json
}

#[tokio::test]
async fn an_empty_workspace_tab_or_pane_title_is_a_title_rule_err_and_creates_nothing() {
    let h = Harness::new();
    let ws = h.core.workspace("support", "Support").unwrap();
    let tab = ws.tab("main", "Tickets").unwrap();
    for blank in BLANK {
        assert_title_rule(
            h.core.workspace("ops", blank),
            r#"workspace "ops""#,
            &format!("workspace {blank:?}"),
        );
        assert_title_rule(ws.tab("night", blank), r#"tab "support:night""#, &format!("tab {blank:?}"));
        assert_title_rule(
            tab.pane("p-1", PaneOptions::new(blank)),
            r#"pane "p-1""#,
            &format!("pane {blank:?}"),
        );
    }
    let s = state(&h).await;
    assert_eq!(
        s["workspaces"],
        json!([{"id": "support", "title": "Support",
        "tabs": [{"id": "support:main", "title": "Tickets", "panes": []}]}])
    );
    assert_eq!(s["panes"], json!([]));
    // Text around the cleaned characters is a title, cleaned.
    h.core.workspace("ops", " \u{200B}Ops\u{7}").unwrap();
    assert_eq!(state(&h).await["workspaces"][1]["title"], " Ops");
}

#[tokio::test]
async fn an_empty_action_or_starter_label_is_a_title_rule_err_and_adds_nothing() {
    let h = Harness::new();
    let pane = h.pane();
    for blank in BLANK {
        assert_title_rule(
            pane.action("refund", blank, Some("check")),
            r#"action "refund" of pane "ticket-1""#,
            &format!("action {blank:?}"),
        );
        assert_title_rule(h.core.starter("new", blank), r#"starter "new""#, &format!("starter {blank:?}"));
    }
    let s = state(&h).await;
    assert_eq!(s["panes"][0]["actions"], json!([]));
    assert_eq!(s["starters"], json!([]));
    let e = pane.action("refund", "", None).unwrap_err();
    assert!(e.to_string().contains("the label of"), "{e}");
}

#[tokio::test]
async fn the_programs_renames_to_an_empty_title_are_title_rule_errs_and_change_nothing() {
    let h = Harness::new();
    let pane = h.pane();
    let ws = h.core.workspace("support", "Support").unwrap();
    let tab = ws.tab("main", "Tickets").unwrap();
    let before = h.all_events("ticket-1").await.len();
    for blank in BLANK {
        assert_title_rule(ws.rename(blank), r#"workspace "support""#, &format!("workspace rename {blank:?}"));
        assert_title_rule(tab.rename(blank), r#"tab "support:main""#, &format!("tab rename {blank:?}"));
        assert_title_rule(pane.rename(blank), r#"pane "ticket-1""#, &format!("pane rename {blank:?}"));
    }
    let s = state(&h).await;
    assert_eq!(s["workspaces"][0]["title"], "Support");
    assert_eq!(s["workspaces"][0]["tabs"][0]["title"], "Tickets");
    assert_eq!(s["panes"][0]["title"], "Maria Lopez");
    assert_eq!(h.all_events("ticket-1").await.len(), before, "no title event");
    // A good title still renames; a closed workspace or tab is `closed`.
    ws.rename("Help").unwrap();
    tab.rename("Inbox").unwrap();
    assert_eq!(state(&h).await["workspaces"][0]["tabs"][0]["title"], "Inbox");
    tab.close();
    assert!(tab.rename("Again").unwrap_err().is_closed());
    ws.close();
    assert!(ws.rename("Again").unwrap_err().is_closed());
}

#[tokio::test]
async fn an_ask_title_of_white_space_alone_is_a_title_rule_err() {
    let h = Harness::new();
    let pane = h.pane();
    for blank in BLANK {
        assert_title_rule(
            pane.ask(AskSpec::text("call-1", blank)),
            r#"the ask for tool call "call-1""#,
            &format!("ask {blank:?}"),
        );
    }
    assert!(pane.open_asks().is_empty());
}

/// The value an id error shows: what follows `<role> ` up to `: id rule`.
fn shown<'a>(message: &'a str, role: &str) -> &'a str {
    let start = message.find(&format!("{role} \"")).unwrap_or_else(|| panic!("{message:?} names no {role}"));
    let rest = &message[start + role.len() + 1..];
    let end = rest.find(": id rule").unwrap_or_else(|| panic!("{message:?}: no id rule"));
    &rest[..end]
}

#[tokio::test]
async fn id_errors_from_the_layout_and_asks_name_the_role_and_the_escaped_value() {
    let h = Harness::new();
    let pane = h.pane();
    let ws = h.core.workspace("support", "Support").unwrap();
    let tab = ws.tab("main", "Tickets").unwrap();
    let bad = "a/b\u{7}\"c";
    let escaped = r#""a/b\u{7}\"c""#;
    let cases: Vec<(&str, RuleError)> = vec![
        ("workspace id", h.core.workspace(bad, "W").unwrap_err()),
        ("tab id", ws.tab(bad, "T").unwrap_err()),
        ("pane id", tab.pane(bad, PaneOptions::new("P")).unwrap_err()),
        ("session id", tab.pane("p-2", PaneOptions::new("P").session_id(bad)).unwrap_err()),
        ("action id", pane.action(bad, "Go", None).unwrap_err()),
        ("starter id", h.core.starter(bad, "New").unwrap_err()),
        ("turn id", pane.working(bad).unwrap_err()),
        ("ask id", pane.decide(bad, durable_runtime::types::Answer::option("yes")).unwrap_err()),
    ];
    for (role, e) in cases {
        let m = e.to_string();
        assert_eq!(e.rule(), "id", "{role}: {m}");
        assert!(e.is_invalid_argument(), "{role}: {m}");
        assert_eq!(shown(&m, role), escaped, "{role}: {m}");
        assert!(!m.contains('\u{7}'), "{role}: the raw control character is in {m:?}");
    }
    // A `:` in a workspace or tab id names the role too.
    let e = h.core.workspace("a:b", "W").unwrap_err();
    assert!(e.to_string().starts_with(r#"workspace id "a:b": id rule: "#), "{e}");
    // An ask's tool call id keeps its field in front.
    let e = pane.ask(AskSpec::text("call 1", "Why?")).unwrap_err();
    assert!(e.to_string().starts_with(r#"ask toolCallId: id "call 1": id rule: "#), "{e}");
    // Nothing was added by the failed calls.
    assert_eq!(state(&h).await["workspaces"][0]["tabs"][0]["panes"], json!(["ticket-1"]));
}

#[tokio::test]
async fn a_long_id_value_is_cut_to_64_bytes_on_a_whole_character_with_a_marker() {
    let h = Harness::new();
    let ws = h.core.workspace("support", "Support").unwrap();
    // 300 bytes: over ID_MAX, so the length is what is wrong.
    let e = ws.tab(&"x".repeat(300), "T").unwrap_err();
    let m = e.to_string();
    let s = shown(&m, "tab id");
    assert_eq!(s, format!("\"{}\"{QUOTED_CUT}", "x".repeat(QUOTED_MAX)), "{m}");
    assert!(m.contains("this one has 300"), "{m}");
    // Two-byte characters after one byte: the cut falls before the
    // character that would cross 64 bytes, never inside it.
    let e = ws.tab(&format!("a{}", "é".repeat(100)), "T").unwrap_err();
    let m = e.to_string();
    let s = shown(&m, "tab id");
    let inner = s.strip_prefix('"').and_then(|s| s.strip_suffix(&format!("\"{QUOTED_CUT}"))).unwrap();
    assert_eq!(inner, format!("a{}", "é".repeat(31)), "{m}");
    assert!(inner.len() <= QUOTED_MAX);
    // Escapes are never split: 13 of `\u{1}` would be 65 bytes.
    let e = ws.tab(&"\u{1}".repeat(40), "T").unwrap_err();
    let m = e.to_string();
    let s = shown(&m, "tab id");
    assert_eq!(s, format!("\"{}\"{QUOTED_CUT}", r"\u{1}".repeat(12)), "{m}");
    // A value that fits is shown whole, with no marker.
    let e = ws.tab("a b", "T").unwrap_err();
    assert_eq!(shown(&e.to_string(), "tab id"), "\"a b\"", "{e}");
    assert!(!e.to_string().contains(QUOTED_CUT), "{e}");
}

fn rename(rid: &str, target: &str, id: &str, title: &str) -> Value {
    json!({"requestId": rid, "target": target, "id": id, "title": title})
}

fn assert_refused_title(r: &Reply, what: &str) {
    assert_eq!(r.status, 400, "{what}: {:?}", r.json);
    assert_eq!(r.json["ok"], false, "{what}");
    assert_eq!(r.code(), "bad-request", "{what}: {:?}", r.json);
    let m = r.json["message"].as_str().unwrap_or("");
    assert!(m.contains("title rule") && m.contains("must not be empty"), "{what}: {m}");
}

#[tokio::test]
async fn the_phones_rename_to_an_empty_title_is_400_before_the_hook_and_stores_nothing() {
    let h = Harness::with_caps(Caps::all());
    h.pane();
    let log = Log::default();
    h.core.set_hooks(Recorder::with("hook", &log, |_| Handled::Accepted));
    let targets = [("workspace", "support"), ("tab", "support:main"), ("pane", "ticket-1")];
    for (i, blank) in BLANK.iter().enumerate() {
        for (target, id) in targets {
            let rid = format!("e-{i}-{target}");
            let r = h.post("/v1/rename", rename(&rid, target, id, blank)).await;
            assert_refused_title(&r, &format!("{target} {blank:?}"));
            let m = r.json["message"].as_str().unwrap_or("");
            assert!(m.contains(&format!("{target} \"{id}\"")), "{m}");
        }
    }
    assert!(log.calls().is_empty(), "the hook heard an empty rename: {:?}", log.calls());
    let s = state(&h).await;
    assert_eq!(s["workspaces"][0]["title"], "Support");
    assert_eq!(s["workspaces"][0]["tabs"][0]["title"], "Tickets");
    assert_eq!(s["panes"][0]["title"], "Maria Lopez");
    // Nothing was stored: the same request id with a title is applied.
    let r = h.post("/v1/rename", rename("e-0-pane", "pane", "ticket-1", "Maria L.")).await;
    assert_eq!(r.status, 200, "{:?}", r.json);
    assert_eq!(r.json["replayed"], false);
    assert_eq!(state(&h).await["panes"][0]["title"], "Maria L.");
}

#[tokio::test]
async fn the_phones_rename_with_a_bad_id_names_the_target_role_and_the_value() {
    let h = Harness::with_caps(Caps::all());
    h.pane();
    let cases = [
        ("pane", "a b", r#"pane id "a b""#),
        ("workspace", "a\u{1}", r#"workspace id "a\u{1}""#),
        ("tab", "support:x y", r#"tab id "x y""#),
        ("tab", "main", r#"tab id "main""#),
    ];
    for (target, id, named) in cases {
        let r = h.post("/v1/rename", rename("b-1", target, id, "T")).await;
        assert_eq!(r.status, 400, "{:?}", r.json);
        assert_eq!(r.code(), "bad-request");
        let m = r.json["message"].as_str().unwrap_or("");
        assert!(m.contains(named), "{m:?} does not name {named}");
    }
}
