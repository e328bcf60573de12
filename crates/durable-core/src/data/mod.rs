//! Plain data that the protocol and the program's side share: what a
//! store keeps, what a handler answers, how an ask closed, what `/hello`
//! says of the caller check. These modules import nothing of the crate but
//! each other, so every other module can use them without a cycle.

pub mod answer;
pub mod caller_check;
pub mod conversation;
pub mod decided;
pub mod item_ids;
pub mod receipt;
