//! Shared pieces of the fuzz targets (`fuzz_targets/`): the agent they talk
//! to, the checks every answer must pass, a runtime-free driver for the
//! core, and the structured requests the `request` and `http` targets build.
//!
//! Run them with `cargo xtask fuzz` (see `docs/reliability.md`, "Fuzzing").

pub mod agent;
pub mod check;
pub mod exec;
pub mod wire;
