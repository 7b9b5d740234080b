//! Reading an object's JSON body: its metadata fields, looked up in one place (`Value::pointer`
//! would do, but it allocates to unescape each segment, and these run for every event), and
//! the names the controller knows an object by.

use serde_json::Value;

use crate::logs::ObjectRef;

/// A field of the object's metadata, if there is one.
pub fn meta<'a>(body: &'a Value, key: &str) -> Option<&'a Value> {
    body.get("metadata")?.get(key)
}

/// A string field of the object's metadata ("" when absent or not a string).
pub fn meta_str<'a>(body: &'a Value, key: &str) -> &'a str {
    meta(body, key).and_then(Value::as_str).unwrap_or("")
}

/// The object's `[namespace/name]`, for log lines.
pub fn object_ref(body: &Value) -> ObjectRef {
    ObjectRef { namespace: meta_str(body, "namespace").to_string(), name: meta_str(body, "name").to_string() }
}

/// The object's `namespace/name`, the key of its queue and tasks.
pub fn object_key(body: &Value) -> String {
    format!("{}/{}", meta_str(body, "namespace"), meta_str(body, "name"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn metadata_fields_are_read_or_absent() {
        let body = json!({"metadata": {"name": "a", "generation": 2}, "spec": {"name": "b"}});
        let cases: [(&Value, &str, Option<Value>, &str); 5] = [
            (&body, "name", Some(json!("a")), "a"),
            (&body, "generation", Some(json!(2)), ""),
            (&body, "uid", None, ""),
            (&json!({"spec": {}}), "name", None, ""),
            (&json!("text"), "name", None, ""),
        ];
        for (body, key, field, text) in cases {
            assert_eq!(meta(body, key), field.as_ref(), "{key} of {body}");
            assert_eq!(meta_str(body, key), text, "{key} of {body}");
        }
    }
}
