//! DELETE and deletecollection: preconditions, propagation policies (which become the
//! `foregroundDeletion` / `orphan` finalizers the garbage collector acts on), finalizers
//! keeping an object with a deletionTimestamp, and the answers the real server gives
//! (a Status when the object went at once, the object when it stays).

use serde_json::{Value, json};

use super::common::{has_generation, normalize_order};
use super::types::{Body, Reply};
use crate::cluster::Cluster;
use crate::meta::{finalizers, meta_mut, now};
use crate::registry::ResourceInfo;
use crate::selector::{FieldSelector, LabelSelector};
use crate::status::{ApiError, ApiResult, Cause, success_status};
use crate::store::{Write, Written};
use crate::webhook::{self, Attributes, Operation};

/// `propagationPolicy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Propagation {
    /// Dependents are deleted by the garbage collector after the owner is gone.
    Background,
    /// The owner stays (finalizer `foregroundDeletion`) until blocking dependents are gone.
    Foreground,
    /// Dependents lose their owner reference (finalizer `orphan`).
    Orphan,
}

impl Propagation {
    /// Parse the query/body value.
    pub fn parse(s: &str) -> ApiResult<Self> {
        match s {
            "Background" => Ok(Propagation::Background),
            "Foreground" => Ok(Propagation::Foreground),
            "Orphan" => Ok(Propagation::Orphan),
            other => {
                let msg = format!("Unsupported value: \"{other}\": supported values: \"Foreground\", \"Background\", \"Orphan\", \"nil\"");
                Err(ApiError::invalid(
                    "DeleteOptions.meta.k8s.io",
                    "meta.k8s.io",
                    "DeleteOptions",
                    "",
                    vec![Cause::new("FieldValueNotSupported", msg, "propagationPolicy")],
                ))
            }
        }
    }
}

/// Options of a delete.
#[derive(Debug, Clone, Default)]
pub struct DeleteOpts {
    /// `dryRun=All`.
    pub dry_run: bool,
    /// `propagationPolicy` (or `orphanDependents`).
    pub propagation: Option<Propagation>,
    /// `preconditions.uid`.
    pub uid: Option<String>,
    /// `preconditions.resourceVersion`.
    pub resource_version: Option<String>,
    /// A client's request, which admission webhooks are called for (none for the dev
    /// cluster's own deletes).
    pub admission: Option<crate::webhook::Context>,
}

/// Delete one object.
pub fn delete(cluster: &Cluster, info: &ResourceInfo, ns: &str, name: &str, opts: &DeleteOpts) -> ApiResult<Reply> {
    if info.plural == "namespaces" && matches!(name, "default" | "kube-system" | "kube-public") {
        return Err(ApiError::forbidden(info, name, format!("namespaces \"{name}\" is forbidden: this namespace may not be deleted")));
    }
    let table = cluster.table(info);
    let label = info.kind_label();
    let mut warnings = Vec::new();
    let (written, dry) = table.write(ns, name, |cur| {
        let Some(cur) = cur else { return Err(ApiError::not_found(info, name)) };
        let old = &cur.value;
        check_preconditions(info, &label, name, old, opts)?;
        if let Some(ctx) = &opts.admission {
            let attrs = Attributes::new(info, ns, name, "", Operation::Delete, ctx);
            warnings = webhook::mutate(cluster, &attrs, &mut Value::Null, Some(old))?;
            warnings.extend(webhook::validate(cluster, &attrs, None, Some(old))?);
        }
        let uid = old.get("metadata").and_then(|v| v.get("uid")).and_then(Value::as_str).unwrap_or("");
        let mut fins = finalizers(old);
        let policy = opts.propagation.unwrap_or(if info.plural == "jobs" { Propagation::Orphan } else { Propagation::Background });
        let extra = match policy {
            Propagation::Foreground => Some("foregroundDeletion"),
            Propagation::Orphan if opts.propagation.is_some() || info.plural == "jobs" => Some("orphan"),
            _ => None,
        };
        let terminating = crate::registry::terminating(old);
        if let Some(f) = extra
            && !fins.iter().any(|x| x == f) {
                fins.push(f.to_string());
            }
        let is_crd = info.builtin && info.plural == "customresourcedefinitions";
        if is_crd && !terminating {
            fins.push(crate::crd::CLEANUP_FINALIZER.to_string());
        }
        if info.plural == "namespaces" {
            return namespace_delete(old, terminating, opts.dry_run);
        }
        let is_pod = info.builtin && info.plural == "pods";
        if fins.is_empty() && !is_pod {
            if opts.dry_run {
                return Ok((Write::Keep, Some(success_status(info, name, uid))));
            }
            return Ok((Write::Delete, None));
        }
        if terminating && fins == finalizers(old) {
            return Ok((Write::Keep, None));
        }
        let mut new = old.clone();
        {
            let meta = meta_mut(&mut new);
            if !terminating {
                meta.insert("deletionTimestamp".into(), json!(now()));
                if !is_crd {
                    meta.insert("deletionGracePeriodSeconds".into(), json!(0));
                }
            }
            if fins.is_empty() {
                meta.remove("finalizers");
            } else {
                meta.insert("finalizers".into(), json!(fins));
            }
        }
        if is_crd && !terminating
            && let Some(c) = new.pointer_mut("/status/conditions").and_then(Value::as_array_mut) {
                c.push(json!({"type": "Terminating", "status": "True", "lastTransitionTime": now(), "reason": "InstanceDeletionPending", "message": "CustomResourceDefinition marked for deletion; CustomResource deletion will begin soon"}));
            }
        if has_generation(info) && !terminating && !is_crd {
            let g = old.get("metadata").and_then(|v| v.get("generation")).and_then(Value::as_i64).unwrap_or(0);
            meta_mut(&mut new).insert("generation".into(), json!(g + 1));
        }
        let new = normalize_order(new);
        if opts.dry_run {
            return Ok((Write::Keep, Some(new)));
        }
        if fins.is_empty() {
            // an unscheduled pod goes at once, but the answer is the object
            return Ok((Write::Delete, Some(new)));
        }
        Ok((Write::Put(new), None))
    })?;
    cluster.kick();
    let body = match (written, dry) {
        (Some(Written::Deleted(obj)), Some(mut v)) => {
            crate::meta::set_rv(&mut v, obj.rv);
            Body::Value(v)
        }
        (_, Some(v)) => Body::Value(v),
        (Some(Written::Deleted(obj)), None) => {
            let uid = obj.value.get("metadata").and_then(|v| v.get("uid")).and_then(Value::as_str).unwrap_or("").to_string();
            if info.builtin && info.plural == "namespaces" { Body::Obj(obj) } else { Body::Value(success_status(info, name, &uid)) }
        }
        (Some(Written::Stored(obj)), None) => Body::Obj(obj),
        (None, None) => return Err(ApiError::not_found(info, name)),
    };
    crate::crd::after_delete(cluster, info, name);
    if info.builtin && matches!((info.plural.as_str(), name), ("serviceaccounts", "default") | ("configmaps", "kube-root-ca.crt")) {
        cluster.refurnish_namespace(ns);
    }
    Ok(Reply { code: 200, body, warnings })
}

/// The uid and resourceVersion preconditions of a delete (409 with the real wording).
pub(crate) fn check_preconditions(info: &ResourceInfo, label: &str, name: &str, old: &Value, opts: &DeleteOpts) -> ApiResult<()> {
    let meta = |k: &str| old.get("metadata").and_then(|v| v.get(k)).and_then(Value::as_str).unwrap_or("").to_string();
    let checks = [
        ("UID", &opts.uid, meta("uid"), "deleted and then recreated"),
        ("ResourceVersion", &opts.resource_version, meta("resourceVersion"), "modified"),
    ];
    for (what, want, have, how) in checks {
        if let Some(want) = want
            && *want != have
        {
            let why = format!(
                "the {what} in the precondition ({want}) does not match the {what} in record ({have}). The object might have been {how}"
            );
            return Err(precondition(info, label, name, why));
        }
    }
    Ok(())
}

fn precondition(info: &ResourceInfo, label: &str, name: &str, why: String) -> ApiError {
    let mut e = ApiError::conflict_msg(info, name, &why);
    e.message = format!("Operation cannot be fulfilled on {label} \"{name}\": {why}");
    e.details = Some(Box::new(if info.group.is_empty() {
        json!({"name": name, "kind": info.kind})
    } else {
        json!({"name": name, "group": info.group, "kind": info.kind})
    }));
    e
}

fn namespace_delete(old: &Value, terminating: bool, dry_run: bool) -> ApiResult<(Write, Option<Value>)> {
    if terminating {
        return Ok((Write::Keep, None));
    }
    let mut new = old.clone();
    meta_mut(&mut new).insert("deletionTimestamp".into(), json!(now()));
    new["status"] = json!({"phase": "Terminating"});
    if dry_run {
        return Ok((Write::Keep, Some(new)));
    }
    Ok((Write::Put(new), None))
}

/// Delete every object matching the selectors; answers the list of deleted objects.
pub fn delete_collection(
    cluster: &Cluster,
    info: &ResourceInfo,
    ns: Option<&str>,
    labels: &LabelSelector,
    fields: &FieldSelector,
    opts: &DeleteOpts,
) -> ApiResult<Value> {
    let table = cluster.table(info);
    let (items, rv) = table.list(ns);
    let mut deleted = Vec::new();
    for obj in items {
        if !labels.matches(obj.value.get("metadata").and_then(|v| v.get("labels"))) || !fields.matches(&obj.value) {
            continue;
        }
        match delete(cluster, info, obj.namespace(), obj.name(), opts) {
            Ok(_) => deleted.push(obj.value.clone()),
            Err(e) if e.code == 404 => {}
            Err(e) => return Err(e),
        }
    }
    let items: Vec<Value> = deleted
        .into_iter()
        .map(|mut v| {
            if info.builtin
                && let Some(m) = v.as_object_mut()
            {
                m.remove("kind");
                m.remove("apiVersion");
            }
            v
        })
        .collect();
    let mut meta = json!({"resourceVersion": rv.to_string()});
    if !info.builtin {
        meta["continue"] = json!("");
    }
    Ok(json!({"kind": info.list_kind(), "apiVersion": info.api_version(), "metadata": meta, "items": items}))
}

/// The namespace controller's last step: release the `kubernetes` finalizer and remove the
/// namespace once nothing else holds it.
pub fn delete_namespace_finally(cluster: &Cluster, info: &ResourceInfo, name: &str) -> ApiResult<()> {
    let table = cluster.table(info);
    table.write("", name, |cur| {
        let Some(cur) = cur else {
            return Ok((Write::Keep, ()));
        };
        if finalizers(&cur.value).is_empty() {
            return Ok((Write::Delete, ()));
        }
        let mut new = cur.value.clone();
        if new.get("spec").and_then(|v| v.get("finalizers")).and_then(Value::as_array).is_some_and(|a| a.is_empty()) {
            return Ok((Write::Keep, ()));
        }
        new["spec"] = json!({});
        Ok((Write::Put(new), ()))
    })?;
    Ok(())
}
