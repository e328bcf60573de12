//! Strict reading of request bodies: each field of the right JSON type, or
//! an error sentence for a `400 bad-request`. Unknown fields are ignored.

use serde_json::{Map, Value};

use crate::Id;

/// Parses a body as a JSON object.
pub(crate) fn object(body: &[u8]) -> Result<Map<String, Value>, String> {
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(_) => Err("the body must be a JSON object".into()),
        Err(_) => Err("the body is not valid JSON".into()),
    }
}

/// The `requestId` field: present and following the ID rule.
pub(crate) fn request_id(obj: &Map<String, Value>) -> Result<Id, String> {
    match obj.get("requestId") {
        Some(Value::String(s)) => Id::new(s.as_str()).map_err(|e| format!("requestId: {e}")),
        Some(_) => Err("requestId must be a string".into()),
        None => Err("requestId is missing".into()),
    }
}

/// A required string field.
pub(crate) fn string(obj: &Map<String, Value>, key: &str) -> Result<String, String> {
    match obj.get(key) {
        Some(Value::String(s)) => Ok(s.clone()),
        Some(_) => Err(format!("{key} must be a string")),
        None => Err(format!("{key} is missing")),
    }
}

/// An optional string field (`null` counts as absent).
pub(crate) fn opt_string(obj: &Map<String, Value>, key: &str) -> Result<Option<String>, String> {
    match obj.get(key) {
        Some(Value::String(s)) => Ok(Some(s.clone())),
        None | Some(Value::Null) => Ok(None),
        Some(_) => Err(format!("{key} must be a string")),
    }
}

/// An optional field that may be `null`: `None` when absent,
/// `Some(None)` for `null`, `Some(Some(s))` for a string.
pub(crate) fn nullable_string(obj: &Map<String, Value>, key: &str) -> Result<Option<Option<String>>, String> {
    match obj.get(key) {
        None => Ok(None),
        Some(Value::Null) => Ok(Some(None)),
        Some(Value::String(s)) => Ok(Some(Some(s.clone()))),
        Some(_) => Err(format!("{key} must be a string or null")),
    }
}

/// A required id field.
pub(crate) fn id(obj: &Map<String, Value>, key: &str) -> Result<Id, String> {
    Id::new(string(obj, key)?).map_err(|e| format!("{key}: {e}"))
}
