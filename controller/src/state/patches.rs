//! Merge patches (RFC 7386): composing the patches of one cycle (handlers' patches, results,
//! the controller's state) into one main-resource write and one status write, and placing a
//! patch's parts where the resource keeps them.
//!
//! Merge patches are not closed under composition: `{"a": null}` then `{"a": {"b": 1}}` leaves
//! `a` equal to `{"b": 1}`, which no single merge patch can say without knowing what `a` held.
//! So composition takes the document the patches will apply to (the body the cycle saw) and
//! spells out the removals; the result applies exactly like the sequence on that document.

use serde_json::{Map, Value};

/// Composes merge patch `next` onto `acc`, so that applying `acc` to `base` equals applying
/// the old `acc` and then `next` to `base`. `null`s are kept: they delete on the server.
pub fn compose_over(base: &Value, acc: &mut Value, next: &Value) {
    let Some(n) = next.as_object() else {
        *acc = next.clone();
        return;
    };
    match acc.as_object_mut() {
        Some(a) => {
            for (k, v) in n {
                let b = base.get(k).unwrap_or(&Value::Null);
                match a.get_mut(k) {
                    Some(existing) => compose_over(b, existing, v),
                    None => {
                        a.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        None => {
            // `acc` replaced (or removed) the value wholesale; `next` then merges into an empty
            // object. Say so against the base: remove what the base has and the result lacks.
            let mut result = Value::Object(Map::new());
            json_patch::merge(&mut result, next);
            *acc = diff(base, &result);
        }
    }
}

/// Composes `next` onto `acc` for a base with nothing at the patched places (new keys only).
pub fn compose(acc: &mut Value, next: &Value) {
    compose_over(&Value::Null, acc, next)
}

/// The merge patch that turns `from` into `to` (`to` must hold no `null`s inside objects,
/// as the result of applying a merge patch never does).
pub fn diff(from: &Value, to: &Value) -> Value {
    match (from.as_object(), to.as_object()) {
        (Some(f), Some(t)) => {
            let mut out = Map::new();
            for k in f.keys().filter(|k| !t.contains_key(*k)) {
                out.insert(k.clone(), Value::Null);
            }
            for (k, v) in t {
                match f.get(k) {
                    Some(old) if old == v => {}
                    Some(old) => {
                        out.insert(k.clone(), diff(old, v));
                    }
                    None => {
                        out.insert(k.clone(), v.clone());
                    }
                }
            }
            Value::Object(out)
        }
        _ => to.clone(),
    }
}

/// Splits a handler's merge patch into its `status` part and the rest.
pub fn split_status(patch: &Value) -> (Option<Value>, Option<Value>) {
    let Some(obj) = patch.as_object() else { return (None, None) };
    let mut rest = obj.clone();
    let status = rest.remove("status");
    let rest = if rest.is_empty() { None } else { Some(Value::Object(rest)) };
    let status = status.map(|s| {
        let mut m = Map::new();
        m.insert("status".into(), s);
        Value::Object(m)
    });
    (status, rest)
}

/// A merge patch the controller cannot combine with its own writes.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum UnusablePatch {
    /// Not an object.
    #[error("the merge patch is not a JSON object")]
    NotAnObject,
    /// `metadata`, `status`, `metadata.labels` or `metadata.annotations` set to a non-object.
    #[error("the merge patch sets `{field}` to {value}, not an object")]
    FieldNotAnObject {
        /// The field.
        field: &'static str,
        /// Its value, as JSON.
        value: String,
    },
}

/// Why a handler's merge patch cannot be combined with the controller's writes.
pub fn check_merge_patch(patch: &Value) -> Result<(), UnusablePatch> {
    let Some(obj) = patch.as_object() else { return Err(UnusablePatch::NotAnObject) };
    let must_be_object = |v: Option<&Value>, field: &'static str| match v {
        None | Some(Value::Object(_)) => Ok(()),
        Some(other) => Err(UnusablePatch::FieldNotAnObject { field, value: other.to_string() }),
    };
    must_be_object(obj.get("metadata"), "metadata")?;
    must_be_object(obj.get("status"), "status")?;
    if let Some(meta) = obj.get("metadata").and_then(Value::as_object) {
        for key in ["labels", "annotations"] {
            match meta.get(key) {
                None | Some(Value::Object(_)) => {}
                Some(other) => {
                    let field = if key == "labels" { "metadata.labels" } else { "metadata.annotations" };
                    return Err(UnusablePatch::FieldNotAnObject { field, value: other.to_string() });
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn composed_patches_apply_like_the_sequence_on_every_base() {
        let bases = [
            json!({}),
            json!({"a": {"x": 1, "b": 0}, "s": 1}),
            json!({"a": 5, "k": [1, 2]}),
            json!({"a": {"b": {"c": 1, "d": 2}}, "e": null}),
            json!({"a": [1], "b": {"c": {"d": 1}}}),
        ];
        let pairs = [
            (json!({"a": 1}), json!({"b": 2})),
            (json!({"a": {"b": 1}}), json!({"a": {"c": 2}})),
            (json!({"a": {"b": 1}}), json!({"a": null})),
            (json!({"a": null}), json!({"a": {"b": 1}})),
            (json!({"a": null}), json!({"a": {"b": {"c": null, "e": 3}}})),
            (json!({"a": 7}), json!({"a": {"b": 1}})),
            (json!({"a": [1]}), json!({"a": [2]})),
            (json!({"a": {"b": null}}), json!({"a": {"b": {"c": 1}}})),
            (json!({"b": {"c": {"d": null}}}), json!({"b": {"c": 3}})),
            (json!({"a": 1}), json!({"b": {"c": null}})),
            (json!({"k": null}), json!({"k": {"z": 1}})),
        ];
        for base in &bases {
            for (p1, p2) in &pairs {
                let mut seq = base.clone();
                json_patch::merge(&mut seq, p1);
                json_patch::merge(&mut seq, p2);
                let mut acc = json!({});
                compose_over(base, &mut acc, p1);
                compose_over(base, &mut acc, p2);
                let mut once = base.clone();
                json_patch::merge(&mut once, &acc);
                assert_eq!(once, seq, "base {base}, {p1} then {p2}: composed {acc}");
            }
        }
    }

    #[test]
    fn a_removal_followed_by_an_object_removes_what_the_base_had() {
        let base = json!({"a": {"x": 1, "b": 0}});
        let mut acc = json!({});
        compose_over(&base, &mut acc, &json!({"a": null}));
        compose_over(&base, &mut acc, &json!({"a": {"b": 1}}));
        assert_eq!(acc, json!({"a": {"x": null, "b": 1}}));
    }

    #[test]
    fn diffs_turn_one_document_into_the_other() {
        let cases = [
            (json!({"a": 1, "b": 2}), json!({"a": 1, "c": 3}), json!({"b": null, "c": 3})),
            (json!({"a": {"x": 1}}), json!({"a": {"x": 2}}), json!({"a": {"x": 2}})),
            (json!(5), json!({"a": 1}), json!({"a": 1})),
            (json!({"a": 1}), json!([1]), json!([1])),
        ];
        for (from, to, want) in cases {
            assert_eq!(diff(&from, &to), want);
            let mut applied = from.clone();
            json_patch::merge(&mut applied, &want);
            assert_eq!(applied, to);
        }
    }

    #[test]
    fn split_status_separates_the_subresource_part() {
        let cases = [
            (json!({"status": {"a": 1}, "spec": {"b": 2}}), Some(json!({"status": {"a": 1}})), Some(json!({"spec": {"b": 2}}))),
            (json!({"spec": {}}), None, Some(json!({"spec": {}}))),
            (json!({"status": null}), Some(json!({"status": null})), None),
            (json!([1]), None, None),
        ];
        for (p, s, r) in cases {
            assert_eq!(split_status(&p), (s, r));
        }
    }

    #[test]
    fn merge_patches_that_would_clash_with_the_controllers_writes_are_refused() {
        let cases = [
            (json!({"spec": {"a": 1}}), true),
            (json!({"status": {"a": 1}, "metadata": {"labels": {"x": "1"}}}), true),
            (json!({"metadata": {"annotations": null}}), false),
            (json!({"status": "x"}), false),
            (json!({"status": null}), false),
            (json!({"metadata": 5}), false),
            (json!([1]), false),
        ];
        for (p, ok) in cases {
            assert_eq!(check_merge_patch(&p).is_ok(), ok, "{p}");
        }
    }
}
