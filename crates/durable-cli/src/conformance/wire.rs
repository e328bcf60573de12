//! The wire's names and limits, written out here on purpose: an oracle that
//! took the SDK's constants would share their bugs. A test says they match
//! `durable_types` (docs/wire.md §11); a change to the contract changes both.

/// The wire versions this suite checks (§3).
pub(crate) const WIRE_VERSION: u64 = 1;
/// `sdk.name` in the hello (§3).
pub(crate) const SDK_NAME: &str = "durable-sdk";
/// Every capability, in wire order (§4).
pub(crate) const CAP_NAMES: [&str; 11] = [
    "asks", "starters", "send", "steer", "abort", "rename", "close", "actions", "history", "reopen",
    "terminal",
];
/// The fields the ask hash leaves out (§7).
pub(crate) const ASK_HASH_EXCLUDED: [&str; 9] =
    ["id", "pane", "hash", "createdAt", "expiresAt", "readable", "cleaned", "itemId", "toolCallId"];
/// The largest request body (§2).
pub(crate) const BODY_MAX: usize = 1024 * 1024;
/// The longest text the phone may send (§8).
pub(crate) const PHONE_TEXT_MAX: usize = 64 * 1024;
/// The longest id (§2).
pub(crate) const ID_MAX: usize = 128;
/// The longest cursor (§2).
pub(crate) const CURSOR_MAX: usize = 512;
/// The largest history `limit` (§10).
pub(crate) const HISTORY_LIMIT_MAX: usize = 200;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_oracles_constants_match_the_sdks() {
        use durable_types::constants as sdk;
        assert_eq!((WIRE_VERSION, WIRE_VERSION), (u64::from(sdk::WIRE_MIN), u64::from(sdk::WIRE_MAX)));
        assert_eq!(SDK_NAME, sdk::SDK_NAME);
        assert_eq!(CAP_NAMES, durable_types::CAP_NAMES);
        assert_eq!(ASK_HASH_EXCLUDED, durable_types::ASK_HASH_EXCLUDED);
        assert_eq!(BODY_MAX, sdk::BODY_MAX);
        assert_eq!(PHONE_TEXT_MAX, sdk::PHONE_TEXT_MAX);
        assert_eq!(ID_MAX, sdk::ID_MAX);
        assert_eq!(CURSOR_MAX, sdk::CURSOR_MAX);
        assert_eq!(HISTORY_LIMIT_MAX, sdk::HISTORY_LIMIT_MAX);
    }
}
