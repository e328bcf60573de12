//! Ask ids and the ask hash (contract §7): SHA-256, written as lowercase hex.
//!
//! - [`ask_id_for`]: the ask id derived from the pane and the tool call, so
//!   that the same call raised again after a restart gets the same id.
//! - [`canonical_json`]: compact JSON with object keys sorted at every level.
//!   The workspace enables `serde_json`'s `preserve_order`, so the keys are
//!   sorted here explicitly rather than left to the map.
//! - [`ask_hash`]: the hash of the question itself, which changes exactly
//!   when the question changes.

use serde_json::Value;

use crate::canonical::Omit;
use sha2::{Digest, Sha256};

/// The top-level fields of a wire ask that the ask hash leaves out: who and
/// when, not what is asked (contract §7, **hash**).
pub const ASK_HASH_EXCLUDED: [&str; 9] =
    ["id", "pane", "hash", "createdAt", "expiresAt", "readable", "cleaned", "itemId", "toolCallId"];

/// Hex characters in an ask id: the first half of a SHA-256.
const ASK_ID_HEX: usize = 32;

pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let digest = Sha256::digest(bytes);
    let mut out = String::with_capacity(digest.len() * 2);
    for b in digest {
        out.push(char::from(HEX[usize::from(b >> 4)]));
        out.push(char::from(HEX[usize::from(b & 0x0f)]));
    }
    out
}

/// The ask id for a tool call: the first 32 lowercase hex characters of
/// SHA-256 over `pane_id`, one `0x00` byte, then `tool_call_id` (the seed's
/// `askIdFor`).
///
/// ```
/// assert_eq!(durable_sdk::ask_id_for("ticket-1", "call-1"), "970f8a0b30368fbbcab73013d31d2d51");
/// ```
pub fn ask_id_for(pane_id: &str, tool_call_id: &str) -> String {
    let mut input = Vec::with_capacity(pane_id.len() + 1 + tool_call_id.len());
    input.extend_from_slice(pane_id.as_bytes());
    input.push(0);
    input.extend_from_slice(tool_call_id.as_bytes());
    let mut hex = sha256_hex(&input);
    hex.truncate(ASK_ID_HEX);
    hex
}

/// Compact JSON with object keys sorted at every level.
///
/// No insignificant white space; strings escaped as `serde_json` escapes them
/// (non-ASCII stays UTF-8); numbers as `serde_json` writes them. Keys are
/// sorted by `str` order, which is Unicode code point order (the order of
/// their UTF-8 bytes). Array order is kept. `null` values are kept: the ask
/// hash drops them itself ([`ask_hash_input`]).
///
/// ```
/// let v = durable_sdk::json!({"b": 1, "a": {"d": [true, null], "c": "é"}});
/// assert_eq!(durable_sdk::asks::canonical_json(&v), r#"{"a":{"c":"é","d":[true,null]},"b":1}"#);
/// ```
pub fn canonical_json(v: &Value) -> String {
    into_text(crate::canonical::write(v, Omit { nulls: false, top: &[] }))
}

/// What the ask hash leaves out of the wire ask.
const HASH_OMITS: Omit = Omit { nulls: true, top: &ASK_HASH_EXCLUDED };

/// The canonical bytes as text: serde_json writes UTF-8 only, and a `Value`
/// (string keys only) is always written.
fn into_text(bytes: Result<Vec<u8>, crate::canonical::Error>) -> String {
    bytes.ok().and_then(|b| String::from_utf8(b).ok()).unwrap_or_default()
}

/// The exact text the ask hash is computed over: [`canonical_json`] of the
/// wire ask without the fields of [`ASK_HASH_EXCLUDED`], and with every
/// `null`-valued field left out, at every level (an absent optional field is
/// never `null` in the hash input).
///
/// A value that is not an object is canonicalized as it is.
pub fn ask_hash_input(ask_wire_object: &Value) -> String {
    into_text(crate::canonical::write(ask_wire_object, HASH_OMITS))
}

/// The ask hash of any value serialized as the wire ask is: its canonical
/// bytes written straight from it (`canonical.rs`). A value that cannot be
/// written (a map key that is not a string) hashes as `null`, as its
/// `Value` would.
pub(crate) fn ask_hash_of<T: serde::Serialize + ?Sized>(ask: &T) -> String {
    let input = crate::canonical::write(ask, HASH_OMITS).unwrap_or_else(|_| b"null".to_vec());
    sha256_hex(&input)
}

/// The ask hash: SHA-256 (64 lowercase hex characters) of
/// [`ask_hash_input`] of the ask as it is sent on the wire.
///
/// ```
/// use durable_sdk::asks::{ask_hash, is_hash};
/// let ask = durable_sdk::json!({"id": "x", "kind": "text", "title": "Name?"});
/// assert!(is_hash(&ask_hash(&ask)));
/// ```
pub fn ask_hash(ask_wire_object: &Value) -> String {
    ask_hash_of(ask_wire_object)
}

/// Whether `s` has the shape of an ask hash as the agent writes it: exactly
/// 64 lowercase hex characters.
pub fn is_hash(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// Whether `s` has the shape of an ask hash as a request may give it:
/// exactly 64 hex characters, of either case (compare it lowercased; see
/// the wire's *Decisions of this SDK*:
/// [`durable_sdk::wire`](https://docs.rs/durable-sdk/latest/durable_sdk/wire/index.html)).
///
/// ```
/// let h = "CB8B64234D06250D254D479DCDD28C57083CAE57BA257F035C7F409BE9DE57CE";
/// assert!(durable_sdk::asks::is_hash_any_case(h));
/// assert!(!durable_sdk::asks::is_hash(h));
/// ```
pub fn is_hash_any_case(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const VECTOR_INPUT: &str = r#"{"kind":"choice","options":[{"id":"allow","label":"Allow"},{"id":"deny","label":"Deny"}],"push":{"title":"refund needs a yes"},"title":"refund wants to run","tool":{"args":[["order","\"5521\""],["amount","40"]],"call":"refund(order: \"5521\", amount: 40)","name":"refund"}}"#;
    const VECTOR_HASH: &str = "cb8b64234d06250d254d479dcdd28c57083cae57ba257f035c7f409be9de57ce";

    /// The wire ask `require_approval("refund", {"order":"5521","amount":40})`
    /// raises on `ticket-1` for `call-1`, fields in wire (not sorted) order.
    fn refund_ask_as_sent() -> Value {
        let text = r#"{"id":"970f8a0b30368fbbcab73013d31d2d51","pane":"ticket-1","kind":"choice",
            "title":"refund wants to run","itemId":"call-1","toolCallId":"call-1",
            "tool":{"name":"refund","call":"refund(order: \"5521\", amount: 40)",
                    "args":[["order","\"5521\""],["amount","40"]]},
            "push":{"title":"refund needs a yes"},
            "options":[{"id":"allow","label":"Allow"},{"id":"deny","label":"Deny"}],
            "createdAt":"2026-11-30T05:00:00.000Z","readable":true,"cleaned":false,
            "hash":"0000000000000000000000000000000000000000000000000000000000000000"}"#;
        serde_json::from_str(text).unwrap()
    }

    #[test]
    fn ask_id_rule_matches_the_contract_vectors() {
        assert_eq!(ask_id_for("ticket-1", "call-1"), "970f8a0b30368fbbcab73013d31d2d51");
        assert_eq!(ask_id_for("deploy", "deploy-1"), "f5286b923e30e7081ee2a5464db467ec");
    }

    #[test]
    fn ask_id_rule_separates_pane_and_call_with_a_zero_byte() {
        // Without the separator these two would collide.
        assert_ne!(ask_id_for("ab", "c"), ask_id_for("a", "bc"));
        let id = ask_id_for("ticket-1", "call-1");
        assert_eq!(id.len(), 32);
        assert!(id.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()));
    }

    #[test]
    fn ask_hash_rule_matches_the_contract_vector() {
        let ask = refund_ask_as_sent();
        assert_eq!(ask_hash_input(&ask), VECTOR_INPUT);
        assert_eq!(ask_hash(&ask), VECTOR_HASH);
        assert_eq!(sha256_hex(VECTOR_INPUT.as_bytes()), VECTOR_HASH);
    }

    #[test]
    fn ask_hash_rule_leaves_out_who_and_when() {
        let base = ask_hash(&refund_ask_as_sent());
        let mut ask = refund_ask_as_sent();
        let obj = ask.as_object_mut().unwrap();
        obj.insert("expiresAt".into(), json!("2026-11-30T05:10:00.000Z"));
        obj.insert("createdAt".into(), json!("2027-01-01T00:00:00.000Z"));
        obj.insert("pane".into(), json!("other"));
        obj.insert("readable".into(), json!(false));
        obj.insert("cleaned".into(), json!(true));
        assert_eq!(ask_hash(&ask), base);
    }

    #[test]
    fn ask_hash_rule_changes_when_the_question_changes() {
        let base = ask_hash(&refund_ask_as_sent());
        let mut ask = refund_ask_as_sent();
        ask["title"] = json!("refund wants to run again");
        assert_ne!(ask_hash(&ask), base);
        let mut ask = refund_ask_as_sent();
        ask["options"][1]["style"] = json!("danger");
        assert_ne!(ask_hash(&ask), base);
    }

    #[test]
    fn ask_hash_rule_omits_null_fields() {
        let mut ask = refund_ask_as_sent();
        ask["reason"] = Value::Null;
        ask["push"]["line"] = Value::Null;
        ask["expiresAt"] = Value::Null;
        assert_eq!(ask_hash_input(&ask), VECTOR_INPUT);
        assert_eq!(ask_hash(&ask), VECTOR_HASH);
    }

    #[test]
    fn ask_hash_rule_excludes_fields_only_at_the_top_level() {
        // An option whose id is "id" stays: only the ask's own `id` is left out.
        let ask = json!({"kind": "choice", "options": [{"id": "allow", "label": "Allow"}]});
        assert_eq!(ask_hash_input(&ask), r#"{"kind":"choice","options":[{"id":"allow","label":"Allow"}]}"#);
    }

    #[test]
    fn canonical_json_sorts_keys_at_every_level() {
        let v: Value = serde_json::from_str(r#"{"b":{"z":1,"a":[{"y":0,"x":0}]},"a":null}"#).unwrap();
        assert_eq!(canonical_json(&v), r#"{"a":null,"b":{"a":[{"x":0,"y":0}],"z":1}}"#);
    }

    #[test]
    fn canonical_json_is_compact_utf8_with_serde_json_numbers() {
        let v: Value = serde_json::from_str(
            r#"{ "t" : "Zoë \u2713 \"q\"\n\u0001", "n" : [1.0, -0, 1e3, 12345678901234567890] }"#,
        )
        .unwrap();
        assert_eq!(
            canonical_json(&v),
            "{\"n\":[1.0,-0.0,1000.0,12345678901234567890],\"t\":\"Zoë ✓ \\\"q\\\"\\n\\u0001\"}"
        );
        assert_eq!(canonical_json(&v), {
            // Same bytes as serde_json's own writer on a key-sorted value.
            let mut sorted = serde_json::Map::new();
            sorted.insert("n".into(), v["n"].clone());
            sorted.insert("t".into(), v["t"].clone());
            serde_json::to_string(&sorted).unwrap()
        });
    }

    #[test]
    fn canonical_json_sorts_keys_by_code_point() {
        let v = json!({"é": 1, "z": 2, "Z": 3, "": 4});
        assert_eq!(canonical_json(&v), r#"{"":4,"Z":3,"z":2,"é":1}"#);
    }

    #[test]
    fn hash_rule_is_64_lowercase_hex() {
        assert!(is_hash(VECTOR_HASH));
        assert!(!is_hash(&VECTOR_HASH.to_uppercase()));
        assert!(!is_hash(&VECTOR_HASH[..63]));
        assert!(!is_hash(&format!("{VECTOR_HASH}0")));
        assert!(!is_hash(&VECTOR_HASH.replacen('c', "g", 1)));
        assert!(!is_hash(""));
    }

    #[test]
    fn hash_rule_in_a_request_is_64_hex_of_either_case() {
        assert!(is_hash_any_case(VECTOR_HASH));
        assert!(is_hash_any_case(&VECTOR_HASH.to_uppercase()));
        assert!(!is_hash_any_case(&VECTOR_HASH[..63]));
        assert!(!is_hash_any_case(&format!("{VECTOR_HASH}0")));
        assert!(!is_hash_any_case(&VECTOR_HASH.replacen('c', "g", 1)));
        assert!(!is_hash_any_case(""));
    }
}
