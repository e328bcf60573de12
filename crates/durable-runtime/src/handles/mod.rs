//! The program's handles: [`Workspace`](crate::Workspace),
//! [`Tab`](crate::Tab), [`Pane`](crate::Pane), an ask's awaitable and
//! `require_approval`. Each call takes the core's lock, hands the change to
//! the machine (`layout.rs`, `asks.rs` at the crate's top), and does what
//! lies outside it: channels, jobs, the program's handlers.

pub(crate) mod asks;
pub(crate) mod layout;
