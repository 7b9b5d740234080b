//! The "essence" of an object: the part whose changes are worth handlers' attention.
//!
//! As in Kopf: the body without `apiVersion`, `kind`, `metadata` and `status`, but with
//! labels and annotations (minus the controller's own keys, those of other operators that mark
//! their prefix as Kopf does, and kubectl's last-applied configuration); paths of field
//! handlers on `status.*` are added back; ignored fields are dropped. The stored diffbase is
//! this essence as compact JSON plus a newline, written as Kopf writes it.

use crate::object;
use serde_json::{Map, Value};

mod kopf_json;

const KUBECTL_LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// The annotation (`<prefix>/kopf-managed: yes`) by which operators of Kopf's convention mark
/// the prefix of their state annotations, so that other operators leave those out of their
/// essence: else each one's state write would be a change to the other, back and forth.
pub const PREFIX_MARKER: &str = "kopf-managed";

/// Kopf's own prefix, marked without a marker (also as a subdomain's suffix).
const KOPF_PREFIX: &str = "kopf.zalando.org";

/// The annotation prefixes of other operators' state on an object (Kopf's
/// `_detect_marked_prefixes`): those with a marker, and Kopf's own.
fn marked_prefixes(annotations: &Map<String, Value>) -> Vec<&str> {
    let mut out: Vec<&str> = Vec::new();
    for (prefix, name) in annotations.keys().filter_map(|k| k.split_once('/')) {
        let marked = name == PREFIX_MARKER || prefix == KOPF_PREFIX || prefix.strip_suffix(KOPF_PREFIX).is_some_and(|p| p.ends_with('.'));
        if marked && !out.contains(&prefix) {
            out.push(prefix);
        }
    }
    out
}

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

/// Whether the essence keeps the annotation `key`: not kubectl's last-applied configuration,
/// not an operator's own (ours, or under a `marked` prefix).
fn kept_annotation(key: &str, rules: &EssenceRules, marked: &[&str]) -> bool {
    key != KUBECTL_LAST_APPLIED
        && !rules.own_prefixes.iter().any(|p| key.starts_with(p.as_str()))
        && !marked.iter().any(|p| key.strip_prefix(p).is_some_and(|rest| rest.starts_with('/')))
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
    if let Some(labels) = object::meta(body, "labels").and_then(Value::as_object).filter(|m| !m.is_empty()) {
        meta.insert("labels".into(), Value::Object(labels.clone()));
    }
    if let Some(annotations) = object::meta(body, "annotations").and_then(Value::as_object) {
        let marked = marked_prefixes(annotations);
        let kept: Map<String, Value> =
            annotations.iter().filter(|(k, _)| kept_annotation(k, rules, &marked)).map(|(k, v)| (k.clone(), v.clone())).collect();
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

/// Whether `essence(body, rules) == *stored`, found in one walk over the body without building
/// the essence: the noop decision of a relist, for every object, should not copy each one.
/// Rules with extra or ignored fields (rare) build the essence.
pub fn matches(body: &Value, rules: &EssenceRules, stored: &Value) -> bool {
    if !rules.extra_fields.is_empty() || !rules.ignored_fields.is_empty() {
        return essence(body, rules) == *stored;
    }
    let Some(stored) = stored.as_object() else { return false };
    // Keys the essence would have; it must have no others.
    let mut keys = 0;
    for (k, v) in body.as_object().into_iter().flatten() {
        if matches!(k.as_str(), "apiVersion" | "kind" | "metadata" | "status") {
            continue;
        }
        keys += 1;
        if stored.get(k) != Some(v) {
            return false;
        }
    }
    let labels = object::meta(body, "labels").and_then(Value::as_object).filter(|m| !m.is_empty());
    let annotations = object::meta(body, "annotations").and_then(Value::as_object);
    let marked = annotations.map(marked_prefixes).unwrap_or_default();
    let kept = |k: &String| kept_annotation(k, rules, &marked);
    let kept_annotations = annotations.map_or(0, |a| a.keys().filter(|k| kept(k)).count());
    if labels.is_some() || kept_annotations > 0 {
        keys += 1;
        let Some(meta) = stored.get("metadata").and_then(Value::as_object) else { return false };
        if meta.len() != usize::from(labels.is_some()) + usize::from(kept_annotations > 0) {
            return false;
        }
        if let Some(labels) = labels
            && meta.get("labels").and_then(Value::as_object) != Some(labels)
        {
            return false;
        }
        if let Some(annotations) = annotations.filter(|_| kept_annotations > 0) {
            let Some(theirs) = meta.get("annotations").and_then(Value::as_object) else { return false };
            if theirs.len() != kept_annotations || annotations.iter().any(|(k, v)| kept(k) && theirs.get(k) != Some(v)) {
                return false;
            }
        }
    }
    stored.len() == keys
}

/// Encodes an essence as the stored diffbase: compact JSON and a newline, as Kopf writes it.
pub fn encode_diffbase(essence: &Value) -> String {
    let mut s = kopf_json::to_string(essence);
    s.push('\n');
    s
}

/// Decodes a stored diffbase; `None` when it is not valid JSON (then the object counts as new).
/// As deep as the objects the controller reads, or their essence could not be read back.
pub fn decode_diffbase(text: &str) -> Option<Value> {
    crate::json::from_str(text.trim_end()).ok()
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
            // Other operators' state, under prefixes they mark as Kopf does (or Kopf's own).
            (
                json!({"metadata": {"annotations": {"other.op/kopf-managed": "yes", "other.op/last-handled-configuration": "{}",
                     "other.op2/x": "kept", "my.kopf.zalando.org/y": "1", "notkopf.zalando.org/z": "kept", "other.op": "kept"}}}),
                json!({"metadata": {"annotations": {"other.op2/x": "kept", "notkopf.zalando.org/z": "kept", "other.op": "kept"}}}),
            ),
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
    fn matching_a_stored_essence_agrees_with_building_the_essence() {
        let bodies = [
            json!({"apiVersion": "v1", "kind": "K", "metadata": {"name": "n"}, "spec": {"a": 1}, "status": {"s": 1}}),
            json!({"metadata": {"labels": {"l": "1"}, "annotations": {"x": "1", "bosun.dev/h": "p"}}, "spec": {"a": [1, 2]}}),
            json!({"metadata": {"labels": {}, "annotations": {"bosun.dev/last-handled-configuration": "{}"}}, "data": {"k": "v"}}),
            json!({"metadata": {"annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}", "y": "2"}}}),
            json!({"metadata": {"labels": {"l": "2"}}, "spec": null, "extra": "e"}),
            json!({"metadata": {"name": "n"}}),
            json!({"metadata": {"annotations": {"y": "2", "op.example/kopf-managed": "yes", "op.example/s": "1"}}}),
            json!("not an object"),
        ];
        let stored = [
            json!({"spec": {"a": 1}}),
            json!({"spec": {"a": 2}}),
            json!({"spec": {"a": 1}, "data": 1}),
            json!({"metadata": {"labels": {"l": "1"}, "annotations": {"x": "1"}}, "spec": {"a": [1, 2]}}),
            json!({"metadata": {"labels": {"l": "1"}}, "spec": {"a": [1, 2]}}),
            json!({"metadata": {"labels": {"l": "1"}, "annotations": {"x": "1", "z": "3"}}, "spec": {"a": [1, 2]}}),
            json!({"metadata": {"labels": {"l": "1"}, "annotations": {"x": "1"}, "other": 1}, "spec": {"a": [1, 2]}}),
            json!({"data": {"k": "v"}}),
            json!({"metadata": {"annotations": {"y": "2"}}}),
            json!({"metadata": {}, "data": {"k": "v"}}),
            json!({"metadata": {"labels": {"l": "2"}}, "spec": null, "extra": "e"}),
            json!({"metadata": {"labels": {"l": "2"}}, "extra": "e"}),
            json!({}),
            json!([]),
        ];
        let mut with_fields = rules();
        with_fields.extra_fields = vec![parse_path("status.s")];
        let mut agreed = 0;
        for r in [rules(), with_fields] {
            for body in &bodies {
                // Each body's own essence matches; every other stored value as building it says.
                let own = essence(body, &r);
                assert!(matches(body, &r, &own), "{body} should match its own essence {own}");
                for old in &stored {
                    assert_eq!(matches(body, &r, old), essence(body, &r) == *old, "{body} against {old}");
                    agreed += usize::from(matches(body, &r, old));
                }
            }
        }
        assert!(agreed >= 6, "the cases should include matches ({agreed})");
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
