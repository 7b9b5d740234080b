//! `pods/NAME/binding`: what a scheduler posts to put a pod on a node. As the real
//! `BindingREST`, it sets `spec.nodeName` of a pod that has none, adds the binding's
//! annotations and the `PodScheduled` condition, and writes the storage directly (no
//! managedFields entry, no generation bump).

use serde_json::{Value, json};

use super::common::created_success;
use crate::cluster::Cluster;
use crate::meta::meta_mut;
use crate::status::{ApiError, ApiResult};
use crate::store::Write;

/// Bind the pod `ns/name` as the `binding` (a `v1` Binding whose name was checked) asks.
pub fn bind(cluster: &Cluster, ns: &str, name: &str, binding: &Value, dry_run: bool) -> ApiResult<Value> {
    let target_kind = binding.pointer("/target/kind").and_then(Value::as_str).unwrap_or("");
    let node = binding.pointer("/target/name").and_then(Value::as_str).unwrap_or("").to_string();
    let mut problems = Vec::new();
    if !target_kind.is_empty() && target_kind != "Node" {
        problems.push(format!("target.kind: Unsupported value: {target_kind:?}: supported values: \"Node\", \"<empty>\""));
    }
    if node.is_empty() {
        problems.push("target.name: Required value".to_string());
    }
    if !problems.is_empty() {
        // ValidatePodBinding's errors reach the client as a plain error: 500
        let text = if problems.len() == 1 { problems.remove(0) } else { format!("[{}]", problems.join(", ")) };
        return Err(ApiError::unknown(text));
    }
    let meta = |k: &str| binding.pointer(&format!("/metadata/{k}")).and_then(Value::as_str).unwrap_or("").to_string();
    let (uid, rv) = (meta("uid"), meta("resourceVersion"));
    let annotations = binding.pointer("/metadata/annotations").and_then(Value::as_object).cloned().unwrap_or_default();
    let pods = cluster.core("pods");
    let refused = |why: String| {
        let mut e = ApiError::conflict_msg(&pods, name, &why);
        e.message = format!("Operation cannot be fulfilled on pods/binding \"{name}\": {why}");
        e.details = Some(Box::new(json!({"name": name, "kind": "pods/binding"})));
        e
    };
    cluster.table(&pods).write(ns, name, |current| {
        let Some(current) = current else {
            return Err(ApiError::not_found(&pods, name));
        };
        let pod = &current.value;
        let text = |p: &str| pod.pointer(p).and_then(Value::as_str).unwrap_or("").to_string();
        if !uid.is_empty() && uid != text("/metadata/uid") {
            let what = format!("UID in precondition: {uid}, UID in object meta: {}", text("/metadata/uid"));
            return Err(ApiError::storage_precondition(&pods, ns, name, &what));
        }
        if !rv.is_empty() && rv != text("/metadata/resourceVersion") {
            let what =
                format!("ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}", text("/metadata/resourceVersion"));
            return Err(ApiError::storage_precondition(&pods, ns, name, &what));
        }
        if pod.pointer("/metadata/deletionTimestamp").is_some_and(|t| !t.is_null()) {
            return Err(refused(format!("pod {name} is being deleted, cannot be assigned to a host")));
        }
        let bound = text("/spec/nodeName");
        if !bound.is_empty() {
            return Err(refused(format!("pod {name} is already assigned to node {bound:?}")));
        }
        if pod.pointer("/spec/schedulingGates").and_then(Value::as_array).is_some_and(|g| !g.is_empty()) {
            return Err(refused(format!("pod {name} has non-empty .spec.schedulingGates")));
        }
        if dry_run {
            return Ok((Write::Keep, ()));
        }
        let mut new = pod.clone();
        new["spec"]["nodeName"] = json!(node);
        if !annotations.is_empty() {
            let meta = meta_mut(&mut new);
            let all = meta.entry("annotations").or_insert_with(|| json!({}));
            for (k, v) in &annotations {
                all[k] = v.clone();
            }
        }
        crate::builtin::set_pod_condition(&mut new, "PodScheduled", "", "");
        Ok((Write::Put(new), ()))
    })?;
    Ok(created_success())
}
