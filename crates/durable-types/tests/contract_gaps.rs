//! Rules of the contract (`docs/wire.md`) that no other test
//! checked, found by the coverage audit. Each test names its rule.

use std::time::Duration;

use durable_types::*;

/// §11 "Limits and constants (exported by `durable-types`)": every constant
/// has the contract's value. (Other tests use the constants, so they would
/// still pass if a value drifted; this one pins them.)
#[test]
fn constants_rule_section_11_values_are_exported_as_the_contract_says() {
    assert_eq!((WIRE_MIN, WIRE_MAX), (1, 1));
    assert_eq!(RECEIPTS_PER_GROUP, 1000);
    assert_eq!(TAIL_LIMIT, 500);
    assert_eq!(VIEW_LIMIT, 2000);
    assert_eq!(TITLE_MAX, 256);
    assert_eq!(HARNESS_MAX, 64);
    assert_eq!(ID_MAX, 128);
    assert_eq!(CURSOR_MAX, 512);
    assert_eq!(REASON_MAX, 2048);
    assert_eq!(PUSH_TITLE_MAX, 60);
    assert_eq!(PUSH_LINE_MAX, 120);
    assert_eq!(SOCKET_PATH_MAX, 103);
    assert_eq!(TOKEN_MIN, 32);
    assert_eq!(BODY_MAX, 1024 * 1024);
    assert_eq!(PARTIAL_MIN_INTERVAL, Duration::from_millis(250));
    assert_eq!(HOLD_MS, 600_000);
    assert_eq!(
        ICON_NAMES,
        [
            "play", "pause", "check", "x", "refresh", "archive", "flag", "star", "send", "note", "search",
            "more"
        ]
    );
    assert_eq!(
        CAP_NAMES,
        [
            "asks", "starters", "send", "steer", "abort", "rename", "close", "actions", "history", "reopen",
            "terminal"
        ]
    );
    // §9 [decided]: evicted ids are remembered for 10 × RECEIPTS_PER_GROUP.
    assert_eq!(EVICTED_MEMORY_FACTOR, 10);
    // §2 [decided]: a write waits 5 s for its pane's lock before `409 busy`.
    assert_eq!(BUSY_MS, 5_000);
    // §5 [decided]: the state poll remembers at least 10,000 sequence numbers.
    assert!(std::hint::black_box(STATE_SEQ_MEMORY) >= 10_000, "{STATE_SEQ_MEMORY}");
}
