//! Pane, card and option ids from the agent's ids.
//!
//! ACP session ids, tool call ids and option ids are free strings; the
//! wire's ids follow the ID rule (`^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$`).
//! An id that fits is used as it is (so a pane's id is its session id, and
//! a card's option id the agent's `optionId`); one that does not is mapped
//! to a prefix and the first 40 hex digits of its SHA-256, the same on every
//! run.

use durable_types::Id;
use sha2::{Digest, Sha256};

/// The pane id of an ACP session: the session id when it is a valid id
/// other than `.` and `..` (which a URL's normalization breaks), else
/// `acp-` and the first 40 hex digits of its SHA-256.
pub fn pane_id_for(session_id: &str) -> String {
    mapped("acp-", session_id)
}

/// The tool call id a card is raised under (its ask id is
/// `ask_id_for(pane, this)`): the agent's `toolCallId` when it is a valid
/// id other than `.` and `..`, else `call-` and the first 40 hex digits of
/// its SHA-256.
pub fn call_id_for(tool_call_id: &str) -> String {
    mapped("call-", tool_call_id)
}

/// The card option id of the agent's option number `n` (from 0): its
/// `optionId` when that is a valid id, else `option-<n>`.
pub(crate) fn option_id_for(option_id: &str, n: usize) -> String {
    if Id::new(option_id).is_ok() { option_id.to_owned() } else { format!("option-{n}") }
}

fn mapped(prefix: &str, id: &str) -> String {
    // `.` and `..` pass the ID rule, but a browser's URL normalization
    // turns `/v1/panes/../events` into another path: mapped like a `/`.
    if Id::new(id).is_ok() && id != "." && id != ".." {
        return id.to_owned();
    }
    let digest = Sha256::digest(id.as_bytes());
    let hex: String = digest.iter().take(20).map(|b| format!("{b:02x}")).collect();
    format!("{prefix}{hex}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_valid_session_id_is_its_own_pane_id_and_a_bad_one_is_mapped_stably() {
        let uuid = "0b7d6c2e-5a0f-4a55-9a1e-3f1c2d4e5f60";
        assert_eq!(pane_id_for(uuid), uuid);
        let slash = "sessions/2026/one";
        let mapped = pane_id_for(slash);
        assert!(mapped.starts_with("acp-") && mapped.len() == 44, "{mapped}");
        assert_eq!(pane_id_for(slash), mapped, "the same on every call");
        assert_ne!(pane_id_for("sessions/2026/two"), mapped);
        let long = "a".repeat(129);
        assert!(Id::new(pane_id_for(&long)).is_ok());
        assert!(Id::new(pane_id_for("")).is_ok());
        for dots in [".", ".."] {
            let mapped = pane_id_for(dots);
            assert!(mapped.starts_with("acp-") && Id::new(&mapped).is_ok(), "{dots} → {mapped}");
            assert!(call_id_for(dots).starts_with("call-"));
        }
        assert_eq!(pane_id_for("..."), "...", "only `.` and `..` are paths' own names");
        assert_eq!(call_id_for("call_1"), "call_1");
        assert!(call_id_for("pi ui/1").starts_with("call-"));
        assert_eq!(option_id_for("choice-0", 0), "choice-0");
        assert_eq!(option_id_for("allow once!", 3), "option-3");
    }
}
