//! The diff between two essences: what was added, changed or removed, and where.
//!
//! Same rules as Kopf's `diff`: `null` counts as absent, mappings are walked key by key,
//! anything else (lists, scalars, type changes) is one change at its path.

use serde_json::Value;

/// What happened at a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiffOp {
    /// The path did not exist (or was null) and now has a value.
    Add,
    /// The value at the path changed.
    Change,
    /// The path had a value and now does not (or is null).
    Remove,
}

/// One change between two JSON values.
#[derive(Debug, Clone, PartialEq)]
pub struct DiffItem {
    /// What happened.
    pub op: DiffOp,
    /// Where, as a list of keys from the root.
    pub path: Vec<String>,
    /// The value before (absent for `Add`).
    pub old: Option<Value>,
    /// The value after (absent for `Remove`).
    pub new: Option<Value>,
}

/// Lists the changes from `old` to `new`, added keys first, then removed, then changed.
pub fn diff(old: Option<&Value>, new: Option<&Value>) -> Vec<DiffItem> {
    let mut out = Vec::new();
    walk(old, new, &mut Vec::new(), &mut out);
    out
}

fn present(v: Option<&Value>) -> Option<&Value> {
    v.filter(|v| !v.is_null())
}

fn walk(old: Option<&Value>, new: Option<&Value>, path: &mut Vec<String>, out: &mut Vec<DiffItem>) {
    let (old, new) = (present(old), present(new));
    let item = |op, old: Option<&Value>, new: Option<&Value>, path: &Vec<String>| DiffItem {
        op,
        path: path.clone(),
        old: old.cloned(),
        new: new.cloned(),
    };
    match (old, new) {
        (None, None) => {}
        (a, b) if a == b => {}
        (None, Some(b)) => out.push(item(DiffOp::Add, None, Some(b), path)),
        (Some(a), None) => out.push(item(DiffOp::Remove, Some(a), None, path)),
        (Some(Value::Object(a)), Some(Value::Object(b))) => {
            for (k, v) in b.iter().filter(|(k, _)| !a.contains_key(*k)) {
                path.push(k.clone());
                walk(None, Some(v), path, out);
                path.pop();
            }
            for (k, v) in a.iter().filter(|(k, _)| !b.contains_key(*k)) {
                path.push(k.clone());
                walk(Some(v), None, path, out);
                path.pop();
            }
            for (k, v) in a.iter() {
                if let Some(w) = b.get(k) {
                    path.push(k.clone());
                    walk(Some(v), Some(w), path, out);
                    path.pop();
                }
            }
        }
        (Some(a), Some(b)) => out.push(item(DiffOp::Change, Some(a), Some(b), path)),
    }
}

/// Whether any change in `items` touches `field` (a path prefix, or a path under it).
pub fn touches(items: &[DiffItem], field: &[String]) -> bool {
    items.iter().any(|d| {
        let n = d.path.len().min(field.len());
        d.path[..n] == field[..n]
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn p(s: &str) -> Vec<String> {
        if s.is_empty() { vec![] } else { s.split('.').map(String::from).collect() }
    }

    #[test]
    #[allow(clippy::type_complexity)]
    fn diff_lists_adds_changes_and_removes_by_path() {
        let cases: Vec<(Option<Value>, Option<Value>, Vec<(DiffOp, &str)>)> = vec![
            (None, None, vec![]),
            (Some(json!({"a": 1})), Some(json!({"a": 1})), vec![]),
            (None, Some(json!({"a": 1})), vec![(DiffOp::Add, "")]),
            (Some(json!({"a": 1})), None, vec![(DiffOp::Remove, "")]),
            (Some(json!({"a": 1})), Some(json!({"a": 2})), vec![(DiffOp::Change, "a")]),
            (Some(json!({"a": 1})), Some(json!({"a": 1, "b": {"c": 2}})), vec![(DiffOp::Add, "b")]),
            (Some(json!({"a": 1, "b": 2})), Some(json!({"a": 1})), vec![(DiffOp::Remove, "b")]),
            (Some(json!({"a": null})), Some(json!({})), vec![]),
            (Some(json!({"a": {"b": 1}})), Some(json!({"a": {"b": 1, "c": 2}})), vec![(DiffOp::Add, "a.c")]),
            (Some(json!({"a": [1, 2]})), Some(json!({"a": [1, 3]})), vec![(DiffOp::Change, "a")]),
            (Some(json!({"a": 1})), Some(json!({"a": "1"})), vec![(DiffOp::Change, "a")]),
            (Some(json!({"a": {"b": 1}})), Some(json!({"a": 5})), vec![(DiffOp::Change, "a")]),
            (
                Some(json!({"x": 1, "y": 1, "z": 1})),
                Some(json!({"w": 1, "y": 2, "z": 1})),
                vec![(DiffOp::Add, "w"), (DiffOp::Remove, "x"), (DiffOp::Change, "y")],
            ),
        ];
        for (old, new, want) in cases {
            let got: Vec<(DiffOp, Vec<String>)> = diff(old.as_ref(), new.as_ref()).into_iter().map(|d| (d.op, d.path)).collect();
            let want: Vec<(DiffOp, Vec<String>)> = want.into_iter().map(|(o, s)| (o, p(s))).collect();
            assert_eq!(got, want, "diff({old:?}, {new:?})");
        }
    }

    #[test]
    fn touches_matches_parents_and_children_of_the_field() {
        let items = diff(Some(&json!({"spec": {"a": {"b": 1}}})), Some(&json!({"spec": {"a": {"b": 2}}})));
        let cases = [("spec", true), ("spec.a", true), ("spec.a.b", true), ("spec.a.b.c", true), ("spec.x", false), ("metadata", false)];
        for (field, want) in cases {
            assert_eq!(touches(&items, &p(field)), want, "{field}");
        }
    }
}
