//! The desk's own conformance cases (this repository's CI): run by `cargo
//! xtask conformance` after `durable conformance`'s generic tier.

fn main() {}
