//! The one read-modify-write that update, patch and server-side apply (and the dev cluster's
//! own status writes: eviction, scale) all end in: the current object through `compute`, then
//! admission, the real server's update rules (preconditions, what a subresource may change,
//! metadata kept, finalizers of a terminating object, generation), no-op detection,
//! managedFields, and removal once the last finalizer is gone.

use serde_json::{Value, json};

use super::common::{check_type, custom_causes, has_generation, normalize_order, prune_unknown, record_update, spec_part};
use super::types::{Body, Object, Reply, Subresource, WriteOpts};
use crate::cluster::Cluster;
use crate::meta::{finalizers, meta_mut};
use crate::registry::ResourceInfo;
use crate::status::{ApiError, ApiResult, Cause};
use crate::store::{Write, Written};
use crate::webhook::{self, Attributes, Operation};
use crate::{builtin, crd};

/// Who writes the managedFields of a commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fields {
    /// The commit records an `Update` entry for `opts.manager` (update, patch, the dev
    /// cluster's own writes).
    Recorded,
    /// `compute` wrote them (server-side apply's `Apply` entry): they count as a change.
    Applied,
}

/// The shared read-modify-write of update, patch and apply: `compute` turns the current
/// object into the object the client wants.
pub(crate) fn commit(
    cluster: &Cluster,
    at: Object<'_>,
    opts: &WriteOpts,
    fields: Fields,
    compute: impl Fn(&Value) -> ApiResult<Value>,
) -> ApiResult<Reply> {
    let Object { info, ns, name, sub } = at;
    let table = cluster.table(info);
    let mut warnings = Vec::new();
    let mut changed = false;
    let (written, response) = table.write(ns, name, |cur| {
        let Some(cur) = cur else {
            return Err(ApiError::not_found(info, name));
        };
        let old = &cur.value;
        let mut wanted = compute(old)?;
        // An events.k8s.io/v1 write computes the stored core shape; its own shape was
        // checked before the conversion.
        if !(info.is_events_v1() && wanted["apiVersion"] == "v1") {
            check_type(info, &mut wanted)?;
        }
        // a scale write's object is not the Scale a webhook would expect: not sent
        let admission = opts.admission.as_ref().filter(|_| sub != Subresource::Scale);
        let sub_name = sub.field_manager_name().unwrap_or("");
        let mut hook_warnings = Vec::new();
        if let Some(ctx) = admission {
            let attrs = Attributes::new(info, ns, name, sub_name, Operation::Update, ctx);
            // a real server defaults a custom resource as it decodes it, before admission
            if let Some(schema) = &info.schema {
                schema.apply_defaults(&mut wanted);
            }
            hook_warnings = webhook::mutate(cluster, &attrs, &mut wanted, Some(old))?;
            if !(info.is_events_v1() && wanted["apiVersion"] == "v1") {
                check_type(info, &mut wanted)?;
            }
        }
        let applied_fields =
            (fields == Fields::Applied).then(|| wanted.get("metadata").and_then(|v| v.get("managedFields")).cloned()).flatten();
        let (mut new, w) = reconcile(info, ns, name, sub, old, wanted, opts)?;
        if let Some(ctx) = admission {
            let attrs = Attributes::new(info, ns, name, sub_name, Operation::Update, ctx);
            hook_warnings.extend(webhook::validate(cluster, &attrs, Some(&new), Some(old))?);
        }
        warnings = w;
        warnings.extend(hook_warnings);
        if let Some(mf) = applied_fields {
            meta_mut(&mut new).insert("managedFields".into(), mf);
            if same_content(&new, old) && same_fields(&new, old) {
                return Ok((Write::Keep, None));
            }
        } else if same_content(&new, old) {
            return Ok((Write::Keep, None));
        }
        record_update(info, &mut new, Some(old), opts.manager.as_deref(), sub.field_manager_name());
        let new = normalize_order(new);
        if opts.dry_run {
            return Ok((Write::Keep, Some(new)));
        }
        let terminating = crate::registry::terminating(&new);
        if terminating && finalizers(&new).is_empty() {
            return Ok((Write::Delete, Some(new)));
        }
        changed = true;
        Ok((Write::Put(new), None))
    })?;
    let body = match (written, response) {
        (Some(Written::Deleted(_)), Some(v)) => {
            cluster.kick();
            crd::after_delete(cluster, info, name);
            Body::Value(v)
        }
        (_, Some(v)) => Body::Value(v),
        (Some(Written::Stored(obj)), None) => {
            if changed
                && (obj.value.get("metadata").and_then(|v| v.get("ownerReferences")).is_some()
                    || obj.value.get("metadata").and_then(|v| v.get("deletionTimestamp")).is_some())
            {
                cluster.kick();
            }
            crd::after_write(cluster, info, &obj.value);
            Body::Obj(obj)
        }
        _ => return Err(ApiError::not_found(info, name)),
    };
    Ok(Reply { code: 200, body, warnings })
}

/// Whether two objects have the same managedFields apart from their times.
fn same_fields(a: &Value, b: &Value) -> bool {
    let strip = |v: &Value| -> Vec<Value> {
        v.get("metadata")
            .and_then(|v| v.get("managedFields"))
            .and_then(Value::as_array)
            .map(|a| {
                let mut out: Vec<Value> = a
                    .iter()
                    .map(|e| {
                        let mut e = e.clone();
                        if let Some(m) = e.as_object_mut() {
                            m.remove("time");
                        }
                        e
                    })
                    .collect();
                out.sort_by_key(|e| e.to_string());
                out
            })
            .unwrap_or_default()
    };
    strip(a) == strip(b)
}

/// Whether two objects are equal apart from resourceVersion and managedFields (which do
/// not make a write a change).
fn same_content(a: &Value, b: &Value) -> bool {
    let (Some(am), Some(bm)) = (a.as_object(), b.as_object()) else {
        return a == b;
    };
    if am.len() != bm.len() {
        return false;
    }
    am.iter().all(|(k, v)| {
        let Some(w) = bm.get(k) else { return false };
        if k != "metadata" {
            return v == w;
        }
        let (Some(vm), Some(wm)) = (v.as_object(), w.as_object()) else {
            return v == w;
        };
        let volatile = |k: &String| k == "resourceVersion" || k == "managedFields";
        vm.iter().filter(|(k, _)| !volatile(k)).count() == wm.iter().filter(|(k, _)| !volatile(k)).count()
            && vm.iter().filter(|(k, _)| !volatile(k)).all(|(k, x)| wm.get(k) == Some(x))
    })
}

/// Turn the object a client sent into the object to store, as the real server would.
fn reconcile(
    info: &ResourceInfo,
    ns: &str,
    name: &str,
    sub: Subresource,
    old: &Value,
    mut wanted: Value,
    opts: &WriteOpts,
) -> ApiResult<(Value, Vec<String>)> {
    let body_name = wanted.get("metadata").and_then(|v| v.get("name")).and_then(Value::as_str).unwrap_or("");
    if !body_name.is_empty() && body_name != name {
        return Err(ApiError::bad_request(format!("the name of the object ({body_name}) does not match the name on the URL ({name})")));
    }
    let body_ns = wanted.get("metadata").and_then(|v| v.get("namespace")).and_then(Value::as_str).unwrap_or("");
    if info.namespaced && !body_ns.is_empty() && body_ns != ns {
        return Err(ApiError::bad_request("the namespace of the provided object does not match the namespace sent on the request"));
    }
    let cur_rv = old.get("metadata").and_then(|v| v.get("resourceVersion")).and_then(Value::as_str).unwrap_or("");
    if let Some(rv) = wanted.get("metadata").and_then(|v| v.get("resourceVersion")).and_then(Value::as_str)
        && !rv.is_empty()
        && rv != cur_rv
    {
        return Err(ApiError::conflict(info, name));
    }
    let cur_uid = old.get("metadata").and_then(|v| v.get("uid")).and_then(Value::as_str).unwrap_or("");
    if let Some(uid) = wanted.get("metadata").and_then(|v| v.get("uid")).and_then(Value::as_str)
        && !uid.is_empty()
        && uid != cur_uid
    {
        return Err(ApiError::storage_precondition(info, ns, name, &format!("UID in precondition: {uid}, UID in object meta: {cur_uid}")));
    }
    let warnings = prune_unknown(info, &mut wanted, opts.validation)?;
    let mut new = match sub {
        Subresource::Status => {
            let mut n = old.clone();
            match wanted.get("status") {
                Some(s) => n["status"] = s.clone(),
                None => {
                    if let Some(m) = n.as_object_mut() {
                        m.remove("status");
                    }
                }
            }
            n
        }
        Subresource::EphemeralContainers => {
            // the real strategy keeps the old pod and takes only its ephemeral containers
            let mut n = old.clone();
            match wanted.get("spec").and_then(|s| s.get("ephemeralContainers")) {
                Some(ec) if !ec.is_null() => n["spec"]["ephemeralContainers"] = ec.clone(),
                _ => {
                    if let Some(spec) = n.get_mut("spec").and_then(Value::as_object_mut) {
                        spec.remove("ephemeralContainers");
                    }
                }
            }
            n
        }
        Subresource::Main | Subresource::Scale => {
            if info.status_subresource {
                match old.get("status") {
                    Some(s) => wanted["status"] = s.clone(),
                    None => {
                        if let Some(m) = wanted.as_object_mut() {
                            m.remove("status");
                        }
                    }
                }
            }
            wanted
        }
    };
    {
        let old_meta = old.get("metadata").and_then(Value::as_object).cloned().unwrap_or_default();
        let meta = meta_mut(&mut new);
        for k in [
            "name",
            "namespace",
            "uid",
            "creationTimestamp",
            "generation",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "managedFields",
            "resourceVersion",
        ] {
            match old_meta.get(k) {
                Some(v) => meta.insert(k.into(), v.clone()),
                None => meta.remove(k),
            };
        }
        meta.remove("selfLink");
        for k in ["labels", "annotations", "finalizers", "ownerReferences"] {
            if meta
                .get(k)
                .is_some_and(|v| v.is_null() || v.as_object().is_some_and(|m| m.is_empty()) || v.as_array().is_some_and(|a| a.is_empty()))
            {
                meta.remove(k);
            }
        }
    }
    let mut causes = crate::validate::metadata(&new, crate::validate::name_rule(info));
    if crate::registry::terminating(old) {
        let before = finalizers(old);
        let added: Vec<String> = finalizers(&new).into_iter().filter(|f| !before.contains(f)).collect();
        if !added.is_empty() {
            let list = added.iter().map(|f| format!("{f:?}")).collect::<Vec<_>>().join(", ");
            let msg = format!(
                "Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{{{list}}}"
            );
            causes.push(Cause::new("FieldValueForbidden", msg.clone(), "metadata.finalizers"));
            causes.push(Cause::new("FieldValueForbidden", msg, "metadata.finalizers"));
        }
    }
    if !causes.is_empty() {
        return Err(ApiError::invalid_object(info, name, causes));
    }
    builtin::prepare(info, &mut new, Some(old))?;
    if sub == Subresource::EphemeralContainers {
        let causes = builtin::ephemeral_container_causes(&new, old);
        if !causes.is_empty() {
            return Err(ApiError::invalid_object(info, name, causes));
        }
    }
    crd::prepare_update(info, &mut new)?;
    if let Some(schema) = &info.schema {
        schema.apply_defaults(&mut new);
    }
    let causes = custom_causes(info, &new);
    if !causes.is_empty() {
        return Err(ApiError::invalid_object(info, name, causes));
    }
    if has_generation(info) && spec_part(&new) != spec_part(old) {
        let g = old.get("metadata").and_then(|v| v.get("generation")).and_then(Value::as_i64).unwrap_or(0);
        meta_mut(&mut new).insert("generation".into(), json!(g + 1));
    }
    Ok((new, warnings))
}
