//! `metadata.managedFields`: which field manager set which fields. Update operations record
//! the fields of the object they wrote; server-side apply (see `apply`) records the fields
//! of the applied configuration and uses the sets to detect conflicts.

use serde_json::{Map, Value, json};

use crate::registry::ResourceInfo;

/// Server-owned metadata keys that never appear in field sets.
const SERVER_META: &[&str] = &[
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "managedFields",
    "selfLink",
];

/// The fieldsV1 set of every field present in `obj` (metadata server fields left out).
pub fn field_set(obj: &Value, skip_status: bool) -> Value {
    let mut out = Map::new();
    if let Some(m) = obj.as_object() {
        for (k, v) in m {
            match k.as_str() {
                "kind" | "apiVersion" => continue,
                "status" if skip_status => continue,
                "metadata" => {
                    let mut meta = Map::new();
                    if let Some(mm) = v.as_object() {
                        for (mk, mv) in mm {
                            if !SERVER_META.contains(&mk.as_str()) {
                                meta.insert(format!("f:{mk}"), fields_of(mv));
                            }
                        }
                    }
                    if !meta.is_empty() {
                        out.insert("f:metadata".into(), Value::Object(meta));
                    }
                }
                _ => {
                    out.insert(format!("f:{k}"), fields_of(v));
                }
            }
        }
    }
    Value::Object(out)
}

fn fields_of(v: &Value) -> Value {
    match v {
        Value::Object(m) if !m.is_empty() => {
            let mut out = Map::new();
            out.insert(".".into(), json!({}));
            for (k, c) in m {
                out.insert(format!("f:{k}"), fields_of(c));
            }
            Value::Object(out)
        }
        Value::Array(items) if !items.is_empty() => {
            let mut out = Map::new();
            out.insert(".".into(), json!({}));
            for item in items {
                match item {
                    Value::Object(o) if o.get("name").is_some_and(Value::is_string) => {
                        let key = format!("k:{}", json!({"name": o["name"]}));
                        let mut inner = fields_of(item);
                        if let Some(m) = inner.as_object_mut() {
                            m.insert(".".into(), json!({}));
                        }
                        out.insert(key, inner);
                    }
                    Value::String(_) | Value::Number(_) | Value::Bool(_) => {
                        out.insert(format!("v:{item}"), json!({}));
                    }
                    _ => return json!({}),
                }
            }
            Value::Object(out)
        }
        _ => json!({}),
    }
}

/// Record an Update operation by `manager` on `obj` (old state `old`, `subresource` e.g. status):
/// the manager gains the fields that changed (all fields on create), other managers lose them.
pub fn record_update(info: &ResourceInfo, obj: &mut Value, old: Option<&Value>, manager: Option<&str>, subresource: Option<&str>) {
    let Some(manager) = manager else { return };
    let mut entries: Vec<Value> = old
        .and_then(|o| o.get("metadata").and_then(|v| v.get("managedFields")))
        .or_else(|| obj.get("metadata").and_then(|v| v.get("managedFields")))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let full = || {
        if subresource == Some("status") {
            json!({"f:status": fields_of(obj.get("status").unwrap_or(&json!({})))})
        } else {
            field_set(obj, info.status_subresource)
        }
    };
    let mine =
        |e: &Value| e["manager"] == manager && e["operation"] == "Update" && e.get("subresource").and_then(Value::as_str) == subresource;
    let set = match old {
        None => full(),
        Some(old) => {
            let mut changed = Vec::new();
            let skip_status = subresource != Some("status") && info.status_subresource;
            for (k, v) in obj.as_object().into_iter().flatten() {
                let relevant = match k.as_str() {
                    "kind" | "apiVersion" => false,
                    "status" => subresource == Some("status") || !skip_status,
                    _ => subresource != Some("status"),
                };
                if !relevant {
                    continue;
                }
                if k == "metadata" {
                    for (mk, mv) in v.as_object().into_iter().flatten() {
                        if !SERVER_META.contains(&mk.as_str()) {
                            diff_paths(
                                old.get("metadata").and_then(|m| m.get(mk)),
                                mv,
                                &mut vec!["f:metadata".into(), format!("f:{mk}")],
                                &mut changed,
                            );
                        }
                    }
                } else {
                    diff_paths(old.get(k), v, &mut vec![format!("f:{k}")], &mut changed);
                }
            }

            for e in entries.iter_mut().filter(|e| !mine(e)) {
                for p in &changed {
                    remove_path(&mut e["fieldsV1"], p);
                }
            }
            let mut set = entries.iter().find(|e| mine(e)).map(|e| e["fieldsV1"].clone()).unwrap_or(json!({}));
            for p in &changed {
                insert_path(&mut set, p, old);
            }
            // forget fields that no longer exist
            for p in leaf_paths(&set) {
                if value_at(obj, &p).is_none() {
                    remove_path(&mut set, &p);
                }
            }
            set
        }
    };
    entries.retain(|e| !mine(e) && e["fieldsV1"].as_object().is_some_and(|m| !m.is_empty()));
    if set.as_object().is_some_and(|m| !m.is_empty()) {
        let mut entry = Map::new();
        entry.insert("manager".into(), json!(manager));
        entry.insert("operation".into(), json!("Update"));
        entry.insert("apiVersion".into(), json!(info.api_version()));
        entry.insert("time".into(), json!(crate::meta::now()));
        entry.insert("fieldsType".into(), json!("FieldsV1"));
        entry.insert("fieldsV1".into(), set);
        if let Some(s) = subresource {
            entry.insert("subresource".into(), json!(s));
        }
        entries.push(Value::Object(entry));
    }
    set_entries(obj, entries);
}

fn set_entries(obj: &mut Value, entries: Vec<Value>) {
    let meta = crate::meta::meta_mut(obj);
    if entries.is_empty() {
        meta.remove("managedFields");
    } else {
        meta.insert("managedFields".into(), Value::Array(entries));
    }
}

/// Paths (in field-set form) where `new` differs from `old`.
fn diff_paths(old: Option<&Value>, new: &Value, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    if old == Some(new) {
        return;
    }
    match (old, new) {
        (Some(Value::Object(o)), Value::Object(n)) if !n.is_empty() => {
            for (k, v) in n {
                prefix.push(format!("f:{k}"));
                diff_paths(o.get(k), v, prefix, out);
                prefix.pop();
            }
        }
        (None, Value::Object(n)) if !n.is_empty() => {
            for (k, v) in n {
                prefix.push(format!("f:{k}"));
                diff_paths(None, v, prefix, out);
                prefix.pop();
            }
        }
        (_, Value::Array(items)) if !items.is_empty() && items.iter().all(|i| i.get("name").is_some_and(Value::is_string)) => {
            for item in items {
                let key = format!("k:{}", json!({"name": item["name"]}));
                let before = old.and_then(Value::as_array).and_then(|a| a.iter().find(|x| x.get("name") == item.get("name")));
                prefix.push(key);
                diff_paths(before, item, prefix, out);
                prefix.pop();
            }
        }
        (_, Value::Array(items))
            if !items.is_empty()
                && items.iter().all(|i| !i.is_object() && !i.is_array())
                && prefix.last().is_some_and(|p| p == "f:finalizers") =>
        {
            for item in items {
                prefix.push(format!("v:{item}"));
                out.push(prefix.clone());
                prefix.pop();
            }
        }
        _ => out.push(prefix.clone()),
    }
}

/// The field set of an applied configuration (no `.` markers; lists without names are atomic).
pub fn apply_set(config: &Value) -> Value {
    fn walk(v: &Value) -> Value {
        match v {
            Value::Object(m) if !m.is_empty() => Value::Object(m.iter().map(|(k, c)| (format!("f:{k}"), walk(c))).collect()),
            Value::Array(items) if !items.is_empty() && items.iter().all(|i| i.get("name").is_some_and(Value::is_string)) => Value::Object(
                items
                    .iter()
                    .map(|i| {
                        let mut inner = walk(i);
                        if let Some(m) = inner.as_object_mut() {
                            m.insert(".".into(), json!({}));
                        }
                        (format!("k:{}", json!({"name": i["name"]})), inner)
                    })
                    .collect(),
            ),
            _ => json!({}),
        }
    }
    let mut out = Map::new();
    if let Some(m) = config.as_object() {
        for (k, v) in m {
            match k.as_str() {
                "kind" | "apiVersion" => {}
                "metadata" => {
                    let mut meta = Map::new();
                    for (mk, mv) in v.as_object().into_iter().flatten() {
                        if !SERVER_META.contains(&mk.as_str()) {
                            meta.insert(format!("f:{mk}"), walk(mv));
                        }
                    }
                    if !meta.is_empty() {
                        out.insert("f:metadata".into(), Value::Object(meta));
                    }
                }
                _ => {
                    out.insert(format!("f:{k}"), walk(v));
                }
            }
        }
    }
    Value::Object(out)
}

/// Paths of the owned fields in a set (leaves and nodes marked with `.`).
pub fn leaf_paths(set: &Value) -> Vec<Vec<String>> {
    fn walk(v: &Value, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
        let Some(m) = v.as_object() else { return };
        let children: Vec<_> = m.iter().filter(|(k, _)| k.as_str() != ".").collect();
        if children.is_empty() {
            if !prefix.is_empty() {
                out.push(prefix.clone());
            }
            return;
        }
        for (k, c) in children {
            prefix.push(k.clone());
            walk(c, prefix, out);
            prefix.pop();
        }
    }
    let mut out = Vec::new();
    walk(set, &mut Vec::new(), &mut out);
    out
}

/// Whether a set owns `path`.
pub fn contains(set: &Value, path: &[String]) -> bool {
    let mut cur = set;
    for seg in path {
        match cur.get(seg) {
            Some(c) => cur = c,
            None => return false,
        }
    }
    true
}

fn insert_path(set: &mut Value, path: &[String], old: &Value) {
    let mut cur = set;
    let last = path.len().saturating_sub(1);
    for (i, seg) in path.iter().enumerate() {
        if !cur.is_object() {
            *cur = json!({});
        }
        let fresh = !cur.as_object().is_some_and(|m| m.contains_key(seg));
        cur = cur.as_object_mut().expect("object").entry(seg.clone()).or_insert_with(|| json!({}));
        if fresh && i < last && seg != "f:metadata" && value_at(old, &path[..=i]).is_none() {
            cur.as_object_mut().expect("object").insert(".".into(), json!({}));
        }
    }
}

fn remove_path(set: &mut Value, path: &[String]) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    if let Some(m) = parents.iter().try_fold(&mut *set, |cur, seg| cur.get_mut(seg)).and_then(Value::as_object_mut) {
        m.remove(last);
    }
    // drop emptied parents
    for depth in (1..path.len()).rev() {
        let prefix = &path[..depth];
        let empty =
            prefix.iter().try_fold(&*set, |cur, seg| cur.get(seg)).and_then(Value::as_object).is_some_and(|m| m.keys().all(|k| k == "."));
        if empty {
            remove_path_only(set, prefix);
        }
    }
}

fn remove_path_only(set: &mut Value, path: &[String]) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    if let Some(m) = parents.iter().try_fold(&mut *set, |cur, seg| cur.get_mut(seg)).and_then(Value::as_object_mut) {
        m.remove(last);
    }
}

fn step<'a>(v: &'a Value, seg: &str) -> Option<&'a Value> {
    if let Some(k) = seg.strip_prefix("f:") {
        return v.get(k);
    }
    if let Some(key) = seg.strip_prefix("k:") {
        let want: Value = serde_json::from_str(key).ok()?;
        return v.as_array()?.iter().find(|item| want.as_object().is_some_and(|w| w.iter().all(|(wk, wv)| item.get(wk) == Some(wv))));
    }
    if let Some(val) = seg.strip_prefix("v:") {
        let want: Value = serde_json::from_str(val).ok()?;
        return v.as_array()?.iter().find(|i| **i == want);
    }
    None
}

/// The value of an object at a field-set path.
pub fn value_at<'a>(obj: &'a Value, path: &[String]) -> Option<&'a Value> {
    path.iter().try_fold(obj, |cur, seg| step(cur, seg))
}

/// Remove the field at a field-set path from an object.
pub fn remove_at(obj: &mut Value, path: &[String]) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut cur = obj;
    for seg in parents {
        let next = if let Some(k) = seg.strip_prefix("f:") {
            cur.get_mut(k)
        } else if let Some(key) = seg.strip_prefix("k:") {
            let want: Value = serde_json::from_str(key).unwrap_or(Value::Null);
            cur.as_array_mut()
                .and_then(|a| a.iter_mut().find(|item| want.as_object().is_some_and(|w| w.iter().all(|(wk, wv)| item.get(wk) == Some(wv)))))
        } else {
            None
        };
        match next {
            Some(n) => cur = n,
            None => return,
        }
    }
    if let Some(k) = last.strip_prefix("f:") {
        if let Some(m) = cur.as_object_mut() {
            m.remove(k);
        }
    } else if let Some(key) = last.strip_prefix("k:") {
        let want: Value = serde_json::from_str(key).unwrap_or(Value::Null);
        if let Some(a) = cur.as_array_mut() {
            a.retain(|item| !want.as_object().is_some_and(|w| w.iter().all(|(wk, wv)| item.get(wk) == Some(wv))));
        }
    }
}

/// A path as the real server prints it in conflicts: `.spec.size`, `.spec.containers[name="a"]`.
pub fn path_text(path: &[String]) -> String {
    let mut out = String::new();
    for seg in path {
        if let Some(k) = seg.strip_prefix("f:") {
            out.push('.');
            out.push_str(k);
        } else if let Some(k) = seg.strip_prefix("k:") {
            let v: Value = serde_json::from_str(k).unwrap_or(Value::Null);
            let parts: Vec<String> = v.as_object().into_iter().flatten().map(|(a, b)| format!("{a}={b}")).collect();
            out.push_str(&format!("[{}]", parts.join(",")));
        } else if let Some(k) = seg.strip_prefix("v:") {
            out.push_str(&format!("[{k}]"));
        }
    }
    out
}

/// Work out conflicts of an apply by `manager`; with `force`, take the fields over.
/// Returns the other managers' entries (updated) and the conflicts (who, field).
pub fn take_over(
    entries: &[Value],
    manager: &str,
    applied: &Value,
    current: &Value,
    config: &Value,
    force: bool,
) -> (Vec<Value>, Vec<(String, String)>) {
    let mut kept = Vec::new();
    let mut conflicts = Vec::new();
    let paths = leaf_paths(applied);
    for e in entries {
        if e["manager"] == manager && e["operation"] == "Apply" {
            continue;
        }
        let mut e = e.clone();
        if e["manager"] != manager {
            for p in &paths {
                if contains(&e["fieldsV1"], p) && value_at(current, p) != value_at(config, p) {
                    if force {
                        remove_path(&mut e["fieldsV1"], p);
                    } else {
                        let who = e["manager"].as_str().unwrap_or("");
                        let mut text = format!("conflict with \"{who}\"");
                        if let Some(s) = e.get("subresource").and_then(Value::as_str) {
                            text.push_str(&format!(" with subresource \"{s}\""));
                        }
                        if e["operation"] == "Update" {
                            text.push_str(&format!(" using {}", e["apiVersion"].as_str().unwrap_or("")));
                        }
                        conflicts.push((text, path_text(p)));
                    }
                }
            }
        }
        if e["fieldsV1"].as_object().is_some_and(|m| !m.is_empty()) {
            kept.push(e);
        }
    }
    (kept, conflicts)
}
