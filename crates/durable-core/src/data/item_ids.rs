//! The ids of the items the SDK writes itself for a send and its turn:
//! derived from the request's id, so that a repeat, a restart or a history
//! provider names the same item.

use durable_types::Id;

/// The id of the `user` item the SDK writes when it delivers a send:
/// `user-<requestId>`, or `user-<digest>` when that would pass 128 bytes. A
/// history provider that keeps the conversation uses it to write the same
/// item under the same id.
pub fn user_item_id(request_id: &Id) -> Id {
    derived_item_id("user", request_id.as_str())
}

/// `<prefix>-<id>`, or `<prefix>-<digest of id>` when that would pass 128
/// bytes: the ids of the items the SDK writes for a send and its turn.
pub fn derived_item_id(prefix: &str, id: &str) -> Id {
    Id::new(format!("{prefix}-{id}"))
        .or_else(|_| Id::new(format!("{prefix}-{}", durable_types::ask_id_for(prefix, id))))
        .unwrap_or_else(|_| Id::new(prefix).unwrap_or_else(|_| unreachable!("a short prefix is an id")))
}
