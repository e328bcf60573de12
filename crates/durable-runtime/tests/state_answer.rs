//! The state answer is written from the core's own data, not through the
//! wire type: read back as `StateResponse` and written again, it must come
//! out byte for byte (the same fields, names, order and omissions).
use durable_runtime::test_util as harness;

use durable_runtime::types::exchange::{Caller, Request};
use durable_runtime::types::{AskOption, AskSpec, Cap, Caps, StateResponse};
use durable_runtime::{AskHandle, Pane, PaneOptions};
use harness::Harness;

/// An agent whose panes show every field of a pane view, each way it can
/// be: a `cwd` or none, a session id given, derived or `null`, a turn, open
/// asks, actions; with a closed pane and a starter. The asks stay open while
/// their handles are kept.
fn varied(h: &Harness) -> (Vec<Pane>, Vec<AskHandle>) {
    let tab = h.core.workspace("support", "Support").unwrap().tab("main", "Tickets").unwrap();
    let plain = tab.pane("plain", PaneOptions::new("Plain").harness("desk")).unwrap();
    let full = tab
        .pane("full", PaneOptions::new("Maria \"Lopez\" ✓").harness("pi").cwd("/srv/desk").session_id("s-42"))
        .unwrap();
    let unnamed =
        tab.pane("unnamed", PaneOptions::new("No session").harness("desk").no_session_id()).unwrap();
    let gone = tab.pane("gone", PaneOptions::new("Closed one").harness("desk")).unwrap();
    full.working("t-1").unwrap();
    full.action("refund", "Refund", Some("undo")).unwrap();
    full.action("escalate", "Escalate", None).unwrap();
    let yes_no =
        |call: &str| AskSpec::choice(call, "Go?", [AskOption::new("yes", "Yes"), AskOption::new("no", "No")]);
    let asks = vec![
        full.ask(yes_no("call-1")).unwrap(),
        full.ask(yes_no("call-2")).unwrap(),
        plain.ask(yes_no("call-3")).unwrap(),
    ];
    gone.close();
    h.core.starter("new", "New ticket").unwrap();
    (vec![plain, full, unnamed], asks)
}

async fn assert_is_its_wire_type(h: &Harness, path: &str) -> serde_json::Value {
    let r = h.core.driver().handle(Request::get(path, Caller::OtherProcess)).await;
    assert_eq!(r.status, 200, "{path}");
    let typed: StateResponse = serde_json::from_slice(&r.body).expect("the answer reads as StateResponse");
    let again = serde_json::to_vec(&typed).unwrap();
    assert_eq!(String::from_utf8_lossy(&again), String::from_utf8_lossy(&r.body), "{path}");
    serde_json::from_slice(&r.body).unwrap()
}

#[tokio::test]
async fn the_state_answer_is_its_wire_type_written_whole_or_as_a_delta() {
    for caps in [Caps::all(), Caps::all().without(Cap::History)] {
        let h = Harness::with_caps(caps);
        let (panes, _asks) = varied(&h);
        let full = assert_is_its_wire_type(&h, "/v1/state").await;
        // Every variant is in it, so the comparison covers each.
        let views = full["panes"].as_array().unwrap();
        assert_eq!(views.len(), 3);
        assert!(views.iter().any(|p| p.get("cwd").is_some()) && views.iter().any(|p| p.get("cwd").is_none()));
        assert!(views.iter().any(|p| p["sessionId"].is_null()));
        assert!(views.iter().any(|p| p["openAsks"].as_array().unwrap().len() == 2));
        assert!(views.iter().any(|p| p["actions"].as_array().unwrap().len() == 2));
        assert!(views.iter().any(|p| p["turnId"] == "t-1"));
        assert_eq!(full["asks"].as_array().unwrap().len(), 3);
        assert_eq!(full["closed"].as_array().unwrap().len(), 1);
        assert_eq!(full["starters"].as_array().unwrap().len(), 1);

        let seq = full["seq"].as_u64().unwrap();
        panes[0].working("t-9").unwrap();
        let delta = assert_is_its_wire_type(&h, &format!("/v1/state?since={seq}")).await;
        assert_eq!(delta["full"], false);
        assert_eq!(delta["panes"].as_array().unwrap().len(), 1);
        assert!(delta.get("workspaces").is_none(), "no layout change, no layout fields");
    }
}
