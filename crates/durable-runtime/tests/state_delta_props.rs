//! The state poll's delta (§5) against a reference model, for any sequence
//! of pane changes: `?since=N` carries exactly the open panes changed after
//! `N`, in layout order, and a full poll between changes is the same bytes
//! as the one before (the answer is kept per change sequence).
use durable_runtime::test_util as harness;

use std::collections::HashMap;

use durable_runtime::types::{Item, ItemBody};
use durable_runtime::{Pane, PaneOptions};
use harness::Harness;
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    /// Opens pane `i` in tab `tab` (if closed).
    Open(usize, bool),
    /// Writes an item on pane `i` (if open).
    Write(usize),
    /// Renames pane `i` (if open).
    Rename(usize),
    /// Closes pane `i` (if open).
    Close(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        2 => (0..8usize, any::<bool>()).prop_map(|(i, t)| Op::Open(i, t)),
        4 => (0..8usize).prop_map(Op::Write),
        1 => (0..8usize).prop_map(Op::Rename),
        1 => (0..8usize).prop_map(Op::Close),
    ]
}

fn pane_ids(state: &serde_json::Value) -> Vec<String> {
    state["panes"].as_array().unwrap().iter().map(|p| p["id"].as_str().unwrap().to_owned()).collect()
}

fn check(ops: &[Op]) -> Result<(), TestCaseError> {
    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    rt.block_on(async {
        let h = Harness::new();
        let ws = h.core.workspace("support", "Support").unwrap();
        let tabs = [ws.tab("a", "A").unwrap(), ws.tab("b", "B").unwrap()];
        let mut open: HashMap<usize, Pane> = HashMap::new();
        // The seq after each op, and which pane the op changed (if any).
        let mut history: Vec<(u64, Option<usize>)> = vec![(h.seq().await, None)];
        for (k, op) in ops.iter().enumerate() {
            let touched = match op {
                Op::Open(i, t) if !open.contains_key(i) => {
                    let pane = tabs[usize::from(*t)].pane(&format!("p{i}"), PaneOptions::new("P")).unwrap();
                    open.insert(*i, pane);
                    Some(*i)
                }
                Op::Write(i) => open.get(i).map(|p| {
                    let item = Item::new(
                        durable_runtime::types::Id::new(format!("it-{k}")).unwrap(),
                        ItemBody::Reply { text: format!("{k}"), partial: false },
                    );
                    p.write(item).unwrap();
                    *i
                }),
                Op::Rename(i) => open.get(i).map(|p| {
                    p.rename(&format!("P{k}")).unwrap();
                    *i
                }),
                Op::Close(i) => {
                    if let Some(p) = open.remove(i) {
                        p.close();
                    }
                    None
                }
                _ => None,
            };
            history.push((h.seq().await, touched));
        }
        let full = h.state().await;
        let order = pane_ids(&full.json);
        // A full poll again, nothing changed: the same bytes.
        let again = h.state().await;
        prop_assert_eq!(&again.json, &full.json);
        for (k, (n, _)) in history.iter().enumerate() {
            if *n == 0 {
                continue;
            }
            let delta = h.state_since(*n).await;
            prop_assert_eq!(&delta.json["full"], &serde_json::json!(false));
            let changed_after: Vec<usize> = history[k + 1..].iter().filter_map(|(_, t)| *t).collect();
            let expected: Vec<String> = order
                .iter()
                .filter(|id| changed_after.iter().any(|i| format!("p{i}") == **id))
                .cloned()
                .collect();
            prop_assert_eq!(pane_ids(&delta.json), expected, "since {}", n);
        }
        Ok(())
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn prop_a_delta_carries_exactly_the_open_panes_changed_since_in_layout_order(
        ops in prop::collection::vec(op(), 0..60)
    ) {
        check(&ops)?;
    }
}
