//! The "essence" of an object: the part whose changes are worth handlers' attention.
//!
//! As in Kopf: the body without `apiVersion`, `kind`, `metadata` and `status`, but with
//! labels and annotations (minus the controller's own keys and kubectl's last-applied
//! configuration); paths of field handlers on `status.*` are added back; ignored fields
//! are dropped. The stored diffbase is this essence as compact JSON plus a newline.

use serde_json::{Map, Value};

const KUBECTL_LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// What the essence keeps and drops besides the fixed rules.
#[derive(Debug, Clone, Default)]
pub struct EssenceRules {
    /// Annotation key prefixes owned by operators (`bosun.dev/`, `kopf.zalando.org/`): dropped.
    pub own_prefixes: Vec<String>,
    /// Dotted paths added back from outside the default essence (for example `status.phase`).
    pub extra_fields: Vec<Vec<String>>,
    /// Dotted paths dropped from the essence.
    pub ignored_fields: Vec<Vec<String>>,
}

/// Splits a dotted path (`spec.x.y`) into keys.
pub fn parse_path(path: &str) -> Vec<String> {
    path.split('.').filter(|s| !s.is_empty()).map(String::from).collect()
}

/// Reads the value at a key path.
pub fn get_path<'a>(value: &'a Value, path: &[String]) -> Option<&'a Value> {
    path.iter().try_fold(value, |v, k| v.get(k.as_str()))
}

fn set_path(root: &mut Map<String, Value>, path: &[String], value: Value) {
    let Some((last, parents)) = path.split_last() else { return };
    let mut cur = root;
    for k in parents {
        let entry = cur.entry(k.clone()).or_insert_with(|| Value::Object(Map::new()));
        if !entry.is_object() {
            *entry = Value::Object(Map::new());
        }
        cur = entry.as_object_mut().expect("just made an object");
    }
    cur.insert(last.clone(), value);
}

fn remove_path(root: &mut Map<String, Value>, path: &[String]) {
    let Some((last, parents)) = path.split_last() else { return };
    let mut cur = root;
    for k in parents {
        match cur.get_mut(k).and_then(Value::as_object_mut) {
            Some(next) => cur = next,
            None => return,
        }
    }
    cur.remove(last);
}

/// Computes the essence of `body`.
pub fn essence(body: &Value, rules: &EssenceRules) -> Value {
    let mut out = Map::new();
    if let Some(obj) = body.as_object() {
        for (k, v) in obj {
            if !matches!(k.as_str(), "apiVersion" | "kind" | "metadata" | "status") {
                out.insert(k.clone(), v.clone());
            }
        }
    }
    let mut meta = Map::new();
    if let Some(labels) = body.pointer("/metadata/labels").and_then(Value::as_object).filter(|m| !m.is_empty()) {
        meta.insert("labels".into(), Value::Object(labels.clone()));
    }
    if let Some(annotations) = body.pointer("/metadata/annotations").and_then(Value::as_object) {
        let kept: Map<String, Value> = annotations
            .iter()
            .filter(|(k, _)| k.as_str() != KUBECTL_LAST_APPLIED && !rules.own_prefixes.iter().any(|p| k.starts_with(p.as_str())))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if !kept.is_empty() {
            meta.insert("annotations".into(), Value::Object(kept));
        }
    }
    if !meta.is_empty() {
        out.insert("metadata".into(), Value::Object(meta));
    }
    for path in &rules.extra_fields {
        if let Some(v) = get_path(body, path) {
            set_path(&mut out, path, v.clone());
        }
    }
    for path in &rules.ignored_fields {
        remove_path(&mut out, path);
    }
    Value::Object(out)
}

/// Encodes an essence as the stored diffbase: compact JSON and a newline (Kopf's format).
pub fn encode_diffbase(essence: &Value) -> String {
    let mut s = serde_json::to_string(essence).expect("JSON values always serialize");
    s.push('\n');
    s
}

/// Decodes a stored diffbase; `None` when it is not valid JSON (then the object counts as new).
pub fn decode_diffbase(text: &str) -> Option<Value> {
    serde_json::from_str(text.trim_end()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rules() -> EssenceRules {
        EssenceRules { own_prefixes: vec!["bosun.dev/".into(), "kopf.zalando.org/".into()], ..Default::default() }
    }

    #[test]
    fn essence_keeps_spec_labels_and_foreign_annotations_only() {
        let cases = vec![
            (
                json!({"apiVersion": "v1", "kind": "K", "metadata": {"name": "n", "uid": "u"}, "spec": {"a": 1}, "status": {"s": 1}}),
                json!({"spec": {"a": 1}}),
            ),
            (
                json!({"metadata": {"labels": {"l": "1"}, "annotations": {"x": "1", "bosun.dev/h": "p", "kopf.zalando.org/h": "p",
                     "kubectl.kubernetes.io/last-applied-configuration": "{}"}}, "spec": {}}),
                json!({"metadata": {"labels": {"l": "1"}, "annotations": {"x": "1"}}, "spec": {}}),
            ),
            (
                json!({"metadata": {"labels": {}, "annotations": {"bosun.dev/last-handled-configuration": "{}"}}, "data": {"k": "v"}}),
                json!({"data": {"k": "v"}}),
            ),
            (json!("not an object"), json!({})),
        ];
        for (body, want) in cases {
            assert_eq!(essence(&body, &rules()), want, "{body}");
        }
    }

    #[test]
    fn essence_adds_extra_fields_and_drops_ignored_ones() {
        let mut r = rules();
        r.extra_fields = vec![parse_path("status.phase"), parse_path("status.missing")];
        r.ignored_fields = vec![parse_path("spec.replicas"), parse_path("spec.nothing.here")];
        let body = json!({"spec": {"replicas": 3, "image": "x"}, "status": {"phase": "Up", "other": 1}});
        assert_eq!(essence(&body, &r), json!({"spec": {"image": "x"}, "status": {"phase": "Up"}}));
    }

    #[test]
    fn diffbase_round_trips_and_garbage_decodes_to_none() {
        let e = json!({"spec": {"a": [1, 2]}});
        let text = encode_diffbase(&e);
        assert_eq!(text, "{\"spec\":{\"a\":[1,2]}}\n");
        assert_eq!(decode_diffbase(&text), Some(e));
        assert_eq!(decode_diffbase("{not json"), None);
    }
}
