//! Server-side apply (`application/apply-patch+yaml`): creates a missing object, merges the
//! applied configuration into an existing one, and records the manager's fields as an
//! `Apply` entry in managedFields; fields set by other managers to different values conflict
//! (409) unless `force` is set, which takes them over. A merge into an existing object is
//! written by the verbs' one commit (`ops/commit.rs`), as update and patch are.

use serde_json::{Map, Value, json};

use crate::cluster::Cluster;
use crate::managed;
use crate::meta::{meta_mut, now};
use crate::ops::commit::{Fields, commit};
use crate::ops::{Object, Reply, Subresource, WriteOpts, check_type, create};
use crate::registry::ResourceInfo;
use crate::status::{ApiError, ApiResult, Cause};

/// Apply `config` as `opts.manager`.
pub fn apply(
    cluster: &Cluster,
    info: &ResourceInfo,
    ns: &str,
    name: &str,
    sub: Subresource,
    mut config: Value,
    opts: &WriteOpts,
) -> ApiResult<Reply> {
    let Some(manager) = opts.manager.clone().filter(|m| !m.is_empty() && opts.manager_explicit) else {
        return Err(ApiError::invalid(
            "PatchOptions.meta.k8s.io",
            "meta.k8s.io",
            "PatchOptions",
            "",
            vec![Cause::new("FieldValueRequired", "Required value: is required for apply patch", "fieldManager")],
        ));
    };
    if !config.is_object() {
        return Err(ApiError::bad_request("error decoding YAML: expected an object"));
    }
    check_type(info, &mut config)?;
    let table = cluster.table(info);
    if table.get(ns, name).is_none() {
        let mut body = config.clone();
        if let Some(m) = body.get_mut("metadata").and_then(Value::as_object_mut) {
            m.insert("name".into(), json!(name));
        }
        let create_opts = WriteOpts { manager: None, ..opts.clone() };
        let mut set = managed::apply_set(&config);
        let entry = entry(info, &manager, std::mem::take(&mut set), sub);
        meta_mut(&mut body).insert("managedFields".into(), json!([entry]));
        return create(cluster, info, ns, body, &create_opts);
    }
    let force = opts.force;
    let update_opts = WriteOpts { manager: None, ..opts.clone() };
    commit(cluster, Object { info, ns, name, sub }, &update_opts, Fields::Applied, move |current| {
        let mut target = current.clone();
        let applied = managed::apply_set(&config);
        let entries = current.get("metadata").and_then(|v| v.get("managedFields")).and_then(Value::as_array).cloned().unwrap_or_default();
        let (mut kept, conflicts) = managed::take_over(&entries, &manager, &applied, current, &config, force);
        if !conflicts.is_empty() {
            return Err(conflict_error(conflicts));
        }
        // fields this manager applied before but not now are removed if nobody else owns them
        let before = entries
            .iter()
            .find(|e| e["manager"] == manager.as_str() && e["operation"] == "Apply")
            .map(|e| e["fieldsV1"].clone())
            .unwrap_or(json!({}));
        for path in managed::leaf_paths(&before) {
            if !managed::contains(&applied, &path) && !kept.iter().any(|e| managed::contains(&e["fieldsV1"], &path)) {
                managed::remove_at(&mut target, &path);
            }
        }
        merge_config(&mut target, &config);
        let mut e = entry(info, &manager, applied, sub);
        let strip = |v: &Value| {
            let mut v = v.clone();
            if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
                m.remove("managedFields");
                m.remove("resourceVersion");
            }
            v
        };
        if strip(&target) == strip(current)
            && let Some(m) = e.as_object_mut()
        {
            m.remove("time");
        }
        kept.push(e);
        meta_mut(&mut target).insert("managedFields".into(), Value::Array(kept));
        Ok(target)
    })
}

fn entry(info: &ResourceInfo, manager: &str, set: Value, sub: Subresource) -> Value {
    let mut e = Map::new();
    e.insert("manager".into(), json!(manager));
    e.insert("operation".into(), json!("Apply"));
    e.insert("apiVersion".into(), json!(info.api_version()));
    e.insert("time".into(), json!(now()));
    e.insert("fieldsType".into(), json!("FieldsV1"));
    e.insert("fieldsV1".into(), set);
    if let Some(name) = sub.field_manager_name() {
        e.insert("subresource".into(), json!(name));
    }
    Value::Object(e)
}

fn conflict_error(conflicts: Vec<(String, String)>) -> ApiError {
    let n = conflicts.len();
    let message = if n == 1 {
        format!("Apply failed with 1 conflict: {}: {}", conflicts[0].0, conflicts[0].1)
    } else {
        let lines: Vec<String> = conflicts.iter().map(|(who, f)| format!("{who}: {f}")).collect();
        format!("Apply failed with {n} conflicts: {}", lines.join("\n"))
    };
    let causes: Vec<Value> =
        conflicts.iter().map(|(who, f)| json!({"reason": "FieldManagerConflict", "message": who, "field": f})).collect();
    ApiError {
        code: 409,
        reason: "Conflict",
        message,
        details: Some(Box::new(json!({"causes": causes}))),
        plain: false,
        warnings: Vec::new(),
    }
}

/// Merge an applied configuration: maps recursively, lists with names by name, others replaced.
fn merge_config(target: &mut Value, config: &Value) {
    match (target, config) {
        (Value::Object(t), Value::Object(c)) => {
            for (k, v) in c {
                match t.get_mut(k) {
                    Some(existing) if existing.is_object() && v.is_object() => merge_config(existing, v),
                    Some(existing) if keyed(existing) && keyed(v) => merge_config(existing, v),
                    _ => {
                        t.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        (Value::Array(t), Value::Array(c)) if c.iter().all(|i| i.get("name").is_some()) => {
            for item in c {
                match t.iter_mut().find(|e| e.get("name") == item.get("name")) {
                    Some(e) => merge_config(e, item),
                    None => t.push(item.clone()),
                }
            }
        }
        (t, c) => *t = c.clone(),
    }
}

fn keyed(v: &Value) -> bool {
    v.as_array().is_some_and(|a| !a.is_empty() && a.iter().all(|i| i.get("name").is_some_and(Value::is_string)))
}
