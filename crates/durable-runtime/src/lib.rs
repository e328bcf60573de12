//! The async runtime layer around `durable-core`'s protocol machine: the
//! program's handles, the jobs that run its handlers and its receipt store,
//! and the deadlines.
//!
//! Today this crate re-exports [`durable_core`] whole: the handles and the
//! jobs still live there, and move here step by step (issue #41; the plan
//! is `docs/design/core-machine.md` in the repository), so that
//! `durable-core` ends as the machine alone — no lock, no channel, no
//! future. The transports and the adapters take their paths from here once
//! they move; an agent's author depends on `durable-sdk`.
//!
//! With the `test-util` feature, `test_util` is the test support the
//! core's and the SDK's tests share.
#![forbid(unsafe_code)]
#![deny(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

/// Everything of the protocol core, re-exported until its runtime half moves here.
pub use durable_core::*;

#[cfg(feature = "test-util")]
#[cfg_attr(docsrs, doc(cfg(feature = "test-util")))]
pub mod test_util;
