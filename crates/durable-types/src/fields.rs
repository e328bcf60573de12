//! Strict reading of request bodies: each field of the right JSON type, or
//! an error sentence for a `400 bad-request`. Unknown fields are ignored;
//! a field given twice counts with its last value.
//!
//! Why borrowed: a body is read as its top-level object's keys and the raw
//! text of each value, and only the fields a request has are parsed, into
//! their own types. Reading it as a `serde_json::Value` first made every
//! object a map of owned strings (SipHashed, with `preserve_order`), then
//! dropped it all: most of what parsing an answer cost
//! (`docs/benchmarks.md`). An ignored field is skipped without recursion,
//! however deep.

use std::borrow::Cow;
use std::fmt;

use serde::de::IgnoredAny;
use serde::de::{self, Deserialize, Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;

use crate::Id;

/// A JSON object read from a body: each key with its value's raw text.
pub(crate) struct Fields<'a> {
    entries: Vec<(Cow<'a, str>, &'a RawValue)>,
}

impl<'a> Fields<'a> {
    /// The raw value of `key` (its last, if given twice).
    pub(crate) fn get(&self, key: &str) -> Option<&'a RawValue> {
        self.entries.iter().rev().find(|(k, _)| k == key).map(|&(_, v)| v)
    }

    /// The value of `key` parsed as a `T`: `None` when absent, `Err` with
    /// `wrong` when it is not a `T`. A value JSON cannot hold as a value
    /// (a number out of range, a lone surrogate, nesting past 128 levels)
    /// makes the body not valid JSON, as it did when the body was read
    /// whole.
    pub(crate) fn parsed<T: Deserialize<'a>>(
        &self,
        key: &str,
        wrong: impl FnOnce() -> String,
    ) -> Result<Option<T>, String> {
        match self.get(key) {
            None => Ok(None),
            Some(raw) => serde_json::from_str(raw.get())
                .map(Some)
                .map_err(|e| if e.is_syntax() { "the body is not valid JSON".to_owned() } else { wrong() }),
        }
    }
}

impl<'de> Deserialize<'de> for Fields<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(ObjectVisitor)
    }
}

struct ObjectVisitor;

impl<'de> Visitor<'de> for ObjectVisitor {
    type Value = Fields<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Fields<'de>, A::Error> {
        let mut entries = Vec::with_capacity(map.size_hint().unwrap_or(4));
        while let Some(Key(key)) = map.next_key()? {
            entries.push((key, map.next_value()?));
        }
        Ok(Fields { entries })
    }
}

/// A key, borrowed from the body unless it holds an escape.
struct Key<'a>(Cow<'a, str>);

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v)))
            }
        }
        deserializer.deserialize_str(KeyVisitor)
    }
}

/// Parses a body as a JSON object.
pub(crate) fn object(body: &[u8]) -> Result<Fields<'_>, String> {
    match serde_json::from_slice::<Fields<'_>>(body) {
        Ok(o) => Ok(o),
        // Valid JSON of another type; a body that is not JSON at all may
        // also stop at its first character, so it is read through first.
        Err(e) if e.is_data() && serde_json::from_slice::<IgnoredAny>(body).is_ok() => {
            Err("the body must be a JSON object".into())
        }
        Err(_) => Err("the body is not valid JSON".into()),
    }
}

/// A nested object field: `None` when absent.
pub(crate) fn opt_object<'a>(obj: &Fields<'a>, key: &str) -> Result<Option<Fields<'a>>, String> {
    obj.parsed(key, || format!("{key} must be an object"))
}

/// The `requestId` field: present and following the ID rule.
pub(crate) fn request_id(obj: &Fields<'_>) -> Result<Id, String> {
    match obj.parsed::<String>("requestId", || "requestId must be a string".into())? {
        Some(s) => Id::new(s).map_err(|e| format!("requestId: {e}")),
        None => Err("requestId is missing".into()),
    }
}

/// A required string field.
pub(crate) fn string(obj: &Fields<'_>, key: &str) -> Result<String, String> {
    obj.parsed(key, || format!("{key} must be a string"))?.ok_or_else(|| format!("{key} is missing"))
}

/// An optional string field (`null` counts as absent).
pub(crate) fn opt_string(obj: &Fields<'_>, key: &str) -> Result<Option<String>, String> {
    Ok(obj.parsed::<Option<String>>(key, || format!("{key} must be a string"))?.flatten())
}

/// An optional field that may be `null`: `None` when absent,
/// `Some(None)` for `null`, `Some(Some(s))` for a string.
pub(crate) fn nullable_string(obj: &Fields<'_>, key: &str) -> Result<Option<Option<String>>, String> {
    obj.parsed(key, || format!("{key} must be a string or null"))
}

/// A required id field.
pub(crate) fn id(obj: &Fields<'_>, key: &str) -> Result<Id, String> {
    Id::new(string(obj, key)?).map_err(|e| format!("{key}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_that_is_not_an_object_says_whether_it_is_json() {
        for (body, says) in [
            (&b"[1, 2]"[..], "the body must be a JSON object"),
            (b"\"text\"", "the body must be a JSON object"),
            (b"null", "the body must be a JSON object"),
            (b"[1, }", "the body is not valid JSON"),
            (b"{\"a\": 1", "the body is not valid JSON"),
            (b"{\"a\": 1} x", "the body is not valid JSON"),
            (b"", "the body is not valid JSON"),
        ] {
            assert_eq!(object(body).err().as_deref(), Some(says), "{}", String::from_utf8_lossy(body));
        }
    }

    #[test]
    fn the_last_of_a_key_given_twice_counts_and_escaped_keys_are_read() {
        let o = object(br#"{"text": "a", "t\u0065xt": "b", "n": 1}"#).unwrap();
        assert_eq!(string(&o, "text").unwrap(), "b");
        assert_eq!(string(&o, "n").unwrap_err(), "n must be a string");
        assert_eq!(string(&o, "gone").unwrap_err(), "gone is missing");
    }

    #[test]
    fn null_is_absent_for_an_optional_string_and_a_value_for_a_nullable_one() {
        let o = object(br#"{"a": null, "b": "x", "c": 5}"#).unwrap();
        assert_eq!(opt_string(&o, "a").unwrap(), None);
        assert_eq!(opt_string(&o, "b").unwrap().as_deref(), Some("x"));
        assert_eq!(opt_string(&o, "c").unwrap_err(), "c must be a string");
        assert_eq!(nullable_string(&o, "a").unwrap(), Some(None));
        assert_eq!(nullable_string(&o, "z").unwrap(), None);
        assert_eq!(nullable_string(&o, "c").unwrap_err(), "c must be a string or null");
        assert_eq!(string(&o, "a").unwrap_err(), "a must be a string");
    }

    #[test]
    fn a_field_that_cannot_be_read_as_json_makes_the_body_not_valid_json() {
        let deep = format!(r#"{{"values": {}1{}}}"#, "[".repeat(200), "]".repeat(200));
        for body in [r#"{"text": "\ud800"}"#, r#"{"text": 1e400}"#, deep.as_str()] {
            let o = object(body.as_bytes()).unwrap();
            let key = if body.contains("values") { "values" } else { "text" };
            assert_eq!(
                o.parsed::<serde_json::Value>(key, || "wrong type".into()).unwrap_err(),
                "the body is not valid JSON",
                "{body}"
            );
        }
        let o = object(br#"{"text": "\ud800", "n": 5}"#).unwrap();
        assert_eq!(string(&o, "text").unwrap_err(), "the body is not valid JSON");
        assert_eq!(string(&o, "n").unwrap_err(), "n must be a string");
    }

    #[test]
    fn an_ignored_field_is_skipped_however_deep() {
        let deep = format!(r#"{{"requestId": "r-1", "x": {}1{}}}"#, "[".repeat(100_000), "]".repeat(100_000));
        let o = object(deep.as_bytes()).unwrap();
        assert_eq!(request_id(&o).unwrap().as_str(), "r-1");
    }
}
