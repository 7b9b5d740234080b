//! An object's metadata as the store keeps it: the ground floor, under the store and the log.

use serde_json::Value;

/// `metadata.resourceVersion` as a number (0 if absent or not a number).
pub fn rv_of(value: &Value) -> u64 {
    value.get("metadata").and_then(|v| v.get("resourceVersion")).and_then(Value::as_str).and_then(|s| s.parse().ok()).unwrap_or(0)
}

/// Write `metadata.resourceVersion`.
pub fn set_rv(value: &mut Value, rv: u64) {
    if let Some(meta) = value.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.insert("resourceVersion".into(), Value::String(rv.to_string()));
    }
}
