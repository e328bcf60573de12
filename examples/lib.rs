//! The SDK's examples, as `[[example]]` targets of this package:
//! `cargo run --example hello` (the seed's ten-line quick start).
