//! The controllers a real cluster runs in kube-controller-manager, reduced to what the API's
//! clients observe: the garbage collector (dependents whose owners are gone are deleted,
//! `orphan` and `foregroundDeletion` finalizers are honoured), the namespace controller
//! (a terminating namespace is emptied, then removed) and CRD cleanup (a deleted CRD's
//! objects are deleted, then the CRD). It runs in the background, woken by deletes.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use crate::cluster::Cluster;
use crate::ops::{self, DeleteOpts, Propagation, Subresource, WriteOpts, finalizers};
use crate::registry::{ResourceInfo, terminating};
use crate::store::Obj;

/// Run the controllers until the task is dropped.
pub async fn run(cluster: Arc<Cluster>) {
    loop {
        let c = cluster.clone();
        let busy = tokio::task::spawn_blocking(move || {
            c.store.compact_log(false);
            pass(&c)
        })
        .await
        .unwrap_or(true);
        // debounce: writes made by the pass itself wake us again
        tokio::time::sleep(Duration::from_millis(20)).await;
        let wait = if busy { Duration::from_millis(50) } else { Duration::from_secs(2) };
        tokio::select! {
            _ = cluster.gc.notified() => {}
            _ = tokio::time::sleep(wait) => {}
        }
    }
}

struct Entry {
    info: Arc<ResourceInfo>,
    obj: Arc<Obj>,
}

fn uid(v: &Value) -> &str {
    v.get("metadata").and_then(|v| v.get("uid")).and_then(Value::as_str).unwrap_or("")
}

fn owner_refs(v: &Value) -> Vec<Value> {
    v.get("metadata").and_then(|v| v.get("ownerReferences")).and_then(Value::as_array).cloned().unwrap_or_default()
}

/// Storage tables with one representative info each (events once).
fn tables(cluster: &Cluster) -> Vec<Arc<ResourceInfo>> {
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for info in cluster.registry.all() {
        if info.is_events_v1() || !seen.insert(info.storage.clone()) {
            continue;
        }
        out.push(info);
    }
    out
}

/// One pass over everything; returns whether work is still pending.
pub fn pass(cluster: &Cluster) -> bool {
    let mut all: Vec<Entry> = Vec::new();
    for info in tables(cluster) {
        let (items, _) = cluster.table(&info).list(None);
        all.extend(items.into_iter().map(|obj| Entry { info: info.clone(), obj }));
    }
    let by_uid: HashMap<&str, &Entry> = all.iter().map(|e| (uid(&e.obj.value), e)).collect();
    let mut pending = false;
    let sys = WriteOpts { manager: None, ..Default::default() };

    // dependents of each owner uid
    let mut dependents: HashMap<String, Vec<&Entry>> = HashMap::new();
    for e in &all {
        for r in owner_refs(&e.obj.value) {
            if let Some(u) = r.get("uid").and_then(Value::as_str) {
                dependents.entry(u.to_string()).or_default().push(e);
            }
        }
    }

    for e in &all {
        let v = &e.obj.value;
        let refs = owner_refs(v);
        if refs.is_empty() || terminating(v) {
            continue;
        }
        let ns = e.obj.namespace();
        let alive: Vec<&Value> = refs
            .iter()
            .filter(|r| {
                let u = r.get("uid").and_then(Value::as_str).unwrap_or("");
                by_uid.get(u).is_some_and(|o| {
                    let ons = o.obj.namespace();
                    ons.is_empty() || ons == ns
                })
            })
            .collect();
        if alive.is_empty() {
            let _ = ops::delete(
                cluster,
                &e.info,
                ns,
                e.obj.name(),
                &DeleteOpts { propagation: Some(Propagation::Background), ..Default::default() },
            );
            pending = true;
            continue;
        }
        if alive.len() < refs.len() {
            let keep: Vec<Value> = alive.iter().map(|r| (*r).clone()).collect();
            let patch = json!({"metadata": {"ownerReferences": keep}});
            let _ = merge(cluster, &e.info, ns, e.obj.name(), &patch, &sys);
            pending = true;
        }
        // an owner being deleted in the foreground takes its dependents with it
        let fg_owner = alive.iter().any(|r| {
            let u = r.get("uid").and_then(Value::as_str).unwrap_or("");
            by_uid.get(u).is_some_and(|o| terminating(&o.obj.value) && finalizers(&o.obj.value).iter().any(|f| f == "foregroundDeletion"))
        });
        if fg_owner {
            let _ = ops::delete(
                cluster,
                &e.info,
                ns,
                e.obj.name(),
                &DeleteOpts { propagation: Some(Propagation::Foreground), ..Default::default() },
            );
            pending = true;
        }
    }

    for e in &all {
        let v = &e.obj.value;
        if !terminating(v) {
            continue;
        }
        let fins = finalizers(v);
        let my_uid = uid(v).to_string();
        let deps = dependents.get(&my_uid).cloned().unwrap_or_default();
        if fins.iter().any(|f| f == "orphan") {
            for d in &deps {
                let keep: Vec<Value> = owner_refs(&d.obj.value).into_iter().filter(|r| r["uid"] != my_uid.as_str()).collect();
                let patch = json!({"metadata": {"ownerReferences": if keep.is_empty() { Value::Null } else { json!(keep) }}});
                let _ = merge(cluster, &d.info, d.obj.namespace(), d.obj.name(), &patch, &sys);
            }
            remove_finalizer(cluster, e, "orphan", &sys);
            pending = true;
        } else if fins.iter().any(|f| f == "foregroundDeletion") {
            let blocking = deps
                .iter()
                .any(|d| owner_refs(&d.obj.value).iter().any(|r| r["uid"] == my_uid.as_str() && r["blockOwnerDeletion"] == json!(true)));
            if !blocking {
                remove_finalizer(cluster, e, "foregroundDeletion", &sys);
            }
            pending = true;
        }
        if e.info.builtin && e.info.plural == "namespaces" {
            pending |= namespace(cluster, e, &sys);
        }
        if e.info.builtin && e.info.plural == "customresourcedefinitions" && fins.iter().any(|f| f == crate::crd::CLEANUP_FINALIZER) {
            pending |= crd_cleanup(cluster, e, &sys);
        }
    }
    pending
}

fn merge(
    cluster: &Cluster,
    info: &ResourceInfo,
    ns: &str,
    name: &str,
    patch: &Value,
    opts: &WriteOpts,
) -> Result<(), crate::status::ApiError> {
    let raw = serde_json::to_vec(patch).unwrap_or_default();
    ops::patch(cluster, ops::Object { info, ns, name, sub: Subresource::Main }, crate::patch::Format::Merge, &raw, opts).map(|_| ())
}

fn remove_finalizer(cluster: &Cluster, e: &Entry, f: &str, opts: &WriteOpts) {
    let keep: Vec<String> = finalizers(&e.obj.value).into_iter().filter(|x| x != f).collect();
    let patch = json!({"metadata": {"finalizers": if keep.is_empty() { Value::Null } else { json!(keep) }}});
    let _ = merge(cluster, &e.info, e.obj.namespace(), e.obj.name(), &patch, opts);
}

/// Empty a terminating namespace, then remove it; returns whether work remains.
fn namespace(cluster: &Cluster, e: &Entry, opts: &WriteOpts) -> bool {
    let ns = e.obj.name().to_string();
    let mut remaining = 0usize;
    let mut finalizers_left: HashMap<String, usize> = HashMap::new();
    let mut resources_left: Vec<(String, usize)> = Vec::new();
    for info in tables(cluster) {
        if !info.namespaced {
            continue;
        }
        let table = cluster.table(&info);
        let (items, _) = table.list(Some(&ns));
        if items.is_empty() {
            continue;
        }
        remaining += items.len();
        resources_left.push((info.qualified(), items.len()));
        for obj in items {
            for f in finalizers(&obj.value) {
                *finalizers_left.entry(f).or_default() += 1;
            }
            if !terminating(&obj.value) {
                let _ = ops::delete(
                    cluster,
                    &info,
                    &ns,
                    obj.name(),
                    &DeleteOpts { propagation: Some(Propagation::Background), ..Default::default() },
                );
            }
        }
    }
    let ts = e.obj.value.get("metadata").and_then(|v| v.get("deletionTimestamp")).cloned().unwrap_or(Value::Null);
    let info = cluster.core("namespaces");
    if remaining > 0 {
        let mut conditions = vec![];
        if !resources_left.is_empty() {
            let text: Vec<String> = resources_left.iter().map(|(r, n)| format!("{r} has {n} resource instances")).collect();
            conditions.push(json!({"type": "NamespaceContentRemaining", "status": "True", "lastTransitionTime": ts, "reason": "SomeResourcesRemain", "message": format!("Some resources are remaining: {}", text.join(", "))}));
        }
        if !finalizers_left.is_empty() {
            let mut text: Vec<String> = finalizers_left.iter().map(|(f, n)| format!("{f} in {n} resource instances")).collect();
            text.sort();
            conditions.push(json!({"type": "NamespaceFinalizersRemain", "status": "True", "lastTransitionTime": ts, "reason": "SomeFinalizersRemain", "message": format!("Some content in the namespace has finalizers remaining: {}", text.join(", "))}));
        }
        let status = json!({"status": {"phase": "Terminating", "conditions": conditions}});
        if e.obj.value.get("status") != status.get("status") {
            let raw = serde_json::to_vec(&status).unwrap_or_default();
            let _ = ops::patch(
                cluster,
                ops::Object { info: &info, ns: "", name: &ns, sub: Subresource::Status },
                crate::patch::Format::Merge,
                &raw,
                opts,
            );
        }
        return true;
    }
    // content gone: drop the spec finalizer, then the namespace itself
    let _ = ops::delete_namespace_finally(cluster, &info, &ns);
    true
}

/// Delete the objects of a deleted CRD, then release the CRD.
fn crd_cleanup(cluster: &Cluster, e: &Entry, opts: &WriteOpts) -> bool {
    let group = e.obj.value.get("spec").and_then(|v| v.get("group")).and_then(Value::as_str).unwrap_or("");
    let plural = e.obj.value.get("spec").and_then(|v| v.get("names")).and_then(|v| v.get("plural")).and_then(Value::as_str).unwrap_or("");
    let infos: Vec<_> = cluster.registry.all().into_iter().filter(|i| !i.builtin && i.group == group && i.plural == plural).collect();
    let mut remaining = 0;
    if let Some(info) = infos.first() {
        let (items, _) = cluster.table(info).list(None);
        remaining = items.len();
        for obj in items {
            if !terminating(&obj.value) {
                let _ = ops::delete(cluster, info, obj.namespace(), obj.name(), &DeleteOpts::default());
            }
        }
    }
    if remaining == 0 {
        remove_finalizer(cluster, e, crate::crd::CLEANUP_FINALIZER, opts);
    }
    true
}
