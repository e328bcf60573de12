//! Exactly once, as a property (contract §8–§9): random interleavings of
//! writes (send, steer, stop, action, rename) and turns on several panes,
//! with repeated request ids and a small receipt store, checked against a
//! reference model of the store (per-group FIFO of capacity N, evicted ids
//! remembered for 10 × N further ids of the group) and of the panes. The
//! scenario is `durable_runtime::test_util::exactly_once`, which the PostgreSQL store's
//! tests run too.
use durable_runtime::test_util as harness;

use durable_runtime::MemoryReceiptStore;
use harness::exactly_once::{At, CAPACITY, op, scenario};
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn exactly_once_each_request_id_runs_at_most_once_replays_its_first_body_and_evicted_ids_are_receipt_dropped(
        ops in prop::collection::vec(op(), 1..60)
    ) {
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let ops = ops.into_iter().map(|op| (op, At::One(0))).collect();
        rt.block_on(scenario(ops, vec![MemoryReceiptStore::with_capacity(CAPACITY)]))?;
    }
}
