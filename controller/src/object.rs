//! Reading an object's JSON body: its metadata fields, looked up in one place (`Value::pointer`
//! would do, but it allocates to unescape each segment, and these run for every event), and
//! the names the controller knows an object by.

use std::cmp::Ordering;

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

/// The order of two resourceVersions of one resource, as Kubernetes defines it since v1.35
/// (KEP-5504, client-go's `CompareResourceVersion`): both positive integers in decimal without
/// leading zeros, of any length, compared by length and then digit by digit. `None` when either
/// is not of that form (an aggregated API server's opaque versions): equality is all a client
/// may know of those.
pub fn compare_versions(a: &str, b: &str) -> Option<Ordering> {
    fn comparable(v: &str) -> bool {
        !v.is_empty() && !v.starts_with('0') && v.bytes().all(|c| c.is_ascii_digit())
    }
    (comparable(a) && comparable(b)).then(|| a.len().cmp(&b.len()).then_with(|| a.cmp(b)))
}

/// The object's resourceVersion, if it has one.
pub fn version(body: &Value) -> Option<&str> {
    meta(body, "resourceVersion").and_then(Value::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    #[test]
    fn resource_versions_compare_as_kubernetes_says_and_opaque_ones_not_at_all() {
        use Ordering::*;
        let cases = [
            ("5", "7", Some(Less)),
            ("7", "7", Some(Equal)),
            ("10", "9", Some(Greater)),
            ("123456789012345678901234567890", "99", Some(Greater)),
            ("0", "1", None),
            ("07", "7", None),
            ("", "1", None),
            ("1", "abc", None),
            ("-1", "1", None),
            ("MTIz", "MTIz", None),
        ];
        for (a, b, want) in cases {
            assert_eq!(compare_versions(a, b), want, "{a} vs {b}");
        }
    }

    proptest! {
        #[test]
        fn comparable_versions_order_as_their_numbers(a in 1u64.., b in 1u64..) {
            prop_assert_eq!(compare_versions(&a.to_string(), &b.to_string()), Some(a.cmp(&b)));
        }

        #[test]
        fn any_two_strings_compare_without_panic_and_antisymmetrically(a in ".{0,12}", b in "[0-9]{0,12}") {
            let there = compare_versions(&a, &b);
            prop_assert_eq!(there.map(Ordering::reverse), compare_versions(&b, &a));
        }
    }

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
