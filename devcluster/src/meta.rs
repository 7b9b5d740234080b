//! An object's metadata as the store keeps it, and the clock its timestamps are read from: the
//! ground floor, under the store, the log, the built-in kinds and the verbs.

use serde_json::{Map, Value, json};

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

/// The metadata object (created if missing).
pub fn meta_mut(obj: &mut Value) -> &mut Map<String, Value> {
    if !obj.get("metadata").is_some_and(Value::is_object) {
        obj["metadata"] = json!({});
    }
    obj["metadata"].as_object_mut().expect("metadata is an object")
}

/// The finalizers of an object.
pub fn finalizers(obj: &Value) -> Vec<String> {
    obj.get("metadata")
        .and_then(|v| v.get("finalizers"))
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(|f| f.as_str().map(String::from)).collect())
        .unwrap_or_default()
}

/// The current time as RFC 3339 with seconds.
pub fn now() -> String {
    chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ").to_string()
}
