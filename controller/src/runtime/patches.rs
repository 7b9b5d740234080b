//! Composing merge patches: the patches of all handlers of one cycle, the results and the
//! controller's state become one main-resource write and one status write.

use serde_json::{Map, Value};

/// Composes merge patch `next` onto `acc` so that applying the result equals applying `acc`
/// then `next`. Unlike applying a patch, `null`s are kept: they delete on the server.
pub fn compose(acc: &mut Value, next: &Value) {
    match (acc.as_object_mut(), next.as_object()) {
        (Some(a), Some(n)) => {
            for (k, v) in n {
                match (a.get_mut(k), v) {
                    (Some(existing), Value::Object(_)) if existing.is_object() => compose(existing, v),
                    _ => {
                        a.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        _ => *acc = next.clone(),
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn compose_keeps_nulls_and_merges_nested_objects() {
        let cases = [
            (json!({}), json!({"a": 1}), json!({"a": 1})),
            (json!({"a": {"b": 1}}), json!({"a": {"c": 2}}), json!({"a": {"b": 1, "c": 2}})),
            (json!({"a": {"b": 1}}), json!({"a": null}), json!({"a": null})),
            (json!({"a": null}), json!({"a": {"b": 1}}), json!({"a": {"b": 1}})),
            (json!({"a": [1]}), json!({"a": [2]}), json!({"a": [2]})),
            (json!({"a": 1}), json!({"b": {"c": null}}), json!({"a": 1, "b": {"c": null}})),
        ];
        for (mut acc, next, want) in cases {
            compose(&mut acc, &next);
            assert_eq!(acc, want);
        }
    }

    #[test]
    fn composed_patch_applies_like_the_sequence() {
        let doc = json!({"spec": {"a": 1, "b": {"c": 1, "d": 2}}, "x": 1});
        let p1 = json!({"spec": {"b": {"c": null}}, "x": null});
        let p2 = json!({"spec": {"b": {"e": 5}}, "y": 2});
        let mut seq = doc.clone();
        json_patch::merge(&mut seq, &p1);
        json_patch::merge(&mut seq, &p2);
        let mut acc = json!({});
        compose(&mut acc, &p1);
        compose(&mut acc, &p2);
        let mut once = doc.clone();
        json_patch::merge(&mut once, &acc);
        assert_eq!(once, seq);
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
}
