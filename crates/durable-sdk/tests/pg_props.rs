//! The exactly-once property of the memory store (the core's
//! `writes_props.rs`: each request id runs at most once, a repeat replays
//! its first body, an evicted id is `receipt-dropped`, exactly as the
//! reference model says), run against `PgReceiptStore` on a real
//! PostgreSQL server: by one agent process, and by two processes sharing
//! the database (two cores, each with its own store and connection pool),
//! the same write sent to both at once.
#![cfg(feature = "postgres")]

// The test support durable-runtime's own tests use too (its
// `test-util` feature), so that both run the same scenarios.
use durable_runtime::test_util as harness;
mod pg_support;

use durable_sdk::stores::{PgReceiptOptions, PgReceiptStore};
use harness::exactly_once::{At, CAPACITY, op, op_at, scenario};
use pg_support::{PgServer, fresh_schema};
use proptest::prelude::*;

/// `n` stores on a fresh schema (one per agent process).
async fn stores(n: usize) -> Vec<PgReceiptStore> {
    let schema = fresh_schema("props");
    let mut out = Vec::new();
    for _ in 0..n {
        let options = PgReceiptOptions::builder()
            .url(PgServer::shared().url())
            .schema(&schema)
            .per_group(CAPACITY)
            .pool_size(4)
            .build()
            .unwrap();
        out.push(PgReceiptStore::connect(options).await.unwrap());
    }
    out
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, max_shrink_iters: 256, ..ProptestConfig::default() })]

    #[test]
    fn postgres_each_request_id_runs_at_most_once_replays_its_first_body_and_evicted_ids_are_receipt_dropped(
        ops in prop::collection::vec(op(), 1..60)
    ) {
        let ops = ops.into_iter().map(|op| (op, At::One(0))).collect();
        runtime().block_on(async { scenario(ops, stores(1).await).await })?;
    }

    #[test]
    fn postgres_two_agent_processes_writing_at_once_run_each_request_id_at_most_once(
        ops in prop::collection::vec(op_at(), 1..60)
    ) {
        runtime().block_on(async { scenario(ops, stores(2).await).await })?;
    }
}
