//! POST: create an object (generateName, namespace checks, defaults, validation, dryRun).

use serde_json::{Value, json};

use super::common::{check_shape, check_type, custom_causes, has_generation, normalize_order, prune_unknown, random_suffix, record_update};
use super::types::{Body, Reply, Validation, WriteOpts};
use crate::cluster::Cluster;
use crate::meta::{meta_mut, now};
use crate::registry::ResourceInfo;
use crate::status::{ApiError, ApiResult};
use crate::store::{Write, Written};
use crate::webhook::{self, Attributes, Operation};
use crate::{builtin, crd, validate};

/// Create `body` in namespace `ns` ("" for cluster-scoped resources).
pub fn create(cluster: &Cluster, info: &ResourceInfo, ns: &str, mut body: Value, opts: &WriteOpts) -> ApiResult<Reply> {
    check_type(info, &mut body)?;
    check_shape(info, &body)?;
    let mut warnings = Vec::new();
    if info.is_events_v1() {
        warnings = prune_unknown(info, &mut body, opts.validation)?;
        body = builtin::event_to_core(info, body)?;
    }
    {
        let meta = meta_mut(&mut body);
        match meta.get("namespace").and_then(Value::as_str) {
            Some(n) if !n.is_empty() && info.namespaced && n != ns => {
                return Err(ApiError::bad_request("the namespace of the provided object does not match the namespace sent on the request"));
            }
            _ => {}
        }
        if info.namespaced {
            meta.insert("namespace".into(), json!(ns));
        } else {
            meta.remove("namespace");
        }
        if meta.get("resourceVersion").and_then(Value::as_str).is_some_and(|s| !s.is_empty()) {
            return Err(ApiError::internal("resourceVersion should not be set on objects to be created"));
        }
    }
    if !info.is_events_v1() {
        warnings = prune_unknown(info, &mut body, opts.validation)?;
    }
    // the name the request names: "" when the server is to generate it
    let request_name = crate::registry::name_of(&body).to_string();
    if let Some(ctx) = &opts.admission {
        let attrs = Attributes::new(info, ns, &request_name, "", Operation::Create, ctx);
        // a real server defaults a custom resource as it decodes it, before admission
        if let Some(schema) = &info.schema {
            schema.apply_defaults(&mut body);
        }
        warnings.extend(webhook::mutate(cluster, &attrs, &mut body, None)?);
        // what a webhook added that the kind does not know is dropped, as on a real server (an
        // events.k8s.io/v1 Event is in the stored core shape by now)
        if !info.is_events_v1() {
            check_type(info, &mut body)?;
            prune_unknown(info, &mut body, Validation::Ignore)?;
        }
    }
    {
        let meta = meta_mut(&mut body);
        let name = meta.get("name").and_then(Value::as_str).unwrap_or("");
        let gen_name = meta.get("generateName").and_then(Value::as_str).unwrap_or("");
        if name.is_empty() && !gen_name.is_empty() {
            let base: String = gen_name.chars().take(58).collect();
            meta.insert("name".into(), json!(format!("{base}{}", random_suffix())));
        }
    }
    let causes = validate::metadata(&body, validate::name_rule(info));
    if !causes.is_empty() {
        let name = crate::registry::name_of(&body).to_string();
        return Err(ApiError::invalid_object(info, &name, causes));
    }
    if info.status_subresource
        // a kubelet registers its Node with its status
        && !(info.builtin && matches!(info.plural.as_str(), "namespaces" | "customresourcedefinitions" | "nodes"))
        && let Some(m) = body.as_object_mut()
    {
        m.remove("status");
    }
    builtin::prepare(info, &mut body, None)?;
    crd::prepare(info, &mut body)?;
    if let Some(schema) = &info.schema {
        schema.apply_defaults(&mut body);
    }
    let causes = custom_causes(info, &body);
    if !causes.is_empty() {
        return Err(ApiError::invalid_object(info, crate::registry::name_of(&body), causes));
    }
    if info.namespaced {
        match cluster.namespace(ns) {
            None => return Err(ApiError::not_found_raw("", "namespaces", ns)),
            Some(n) if crate::registry::terminating(&n) => {
                let name = crate::registry::name_of(&body).to_string();
                let mut e = ApiError::forbidden(
                    info,
                    &name,
                    format!(
                        "{} \"{name}\" is forbidden: unable to create new content in namespace {ns} because it is being terminated",
                        info.qualified()
                    ),
                );
                if let Some(d) = e.details.as_mut() {
                    d["causes"] = json!([{"reason": "NamespaceTerminating", "message": format!("namespace {ns} is being terminated"), "field": "metadata.namespace"}]);
                }
                return Err(e);
            }
            Some(_) => {}
        }
    }
    {
        let ts = now();
        let meta = meta_mut(&mut body);
        meta.insert("uid".into(), json!(cluster.uids.next()));
        meta.insert("creationTimestamp".into(), json!(ts));
        meta.remove("deletionTimestamp");
        meta.remove("deletionGracePeriodSeconds");
        meta.remove("selfLink");
        if has_generation(info) {
            meta.insert("generation".into(), json!(1));
        } else {
            meta.remove("generation");
        }
    }
    record_update(info, &mut body, None, opts.manager.as_deref(), None);
    let body = normalize_order(body);
    let name = crate::registry::name_of(&body).to_string();
    if let Some(ctx) = &opts.admission {
        let attrs = Attributes::new(info, ns, &request_name, "", Operation::Create, ctx);
        warnings.extend(webhook::validate(cluster, &attrs, Some(&body), None)?);
    }
    if opts.dry_run {
        let mut body = body;
        if let Some(m) = body.get_mut("metadata").and_then(Value::as_object_mut) {
            m.remove("resourceVersion");
        }
        return Ok(Reply { code: 201, body: Body::Value(body), warnings });
    }
    let table = cluster.table(info);
    let (written, ()) = table.write(ns, &name, |cur| {
        if cur.is_some() {
            return Err(ApiError::already_exists(info, &name));
        }
        Ok((Write::Put(body.clone()), ()))
    })?;
    let Some(Written::Stored(obj)) = written else {
        return Err(ApiError::internal("object was not stored"));
    };
    if obj.value.get("metadata").and_then(|v| v.get("ownerReferences")).is_some() {
        cluster.kick();
    }
    crd::after_write(cluster, info, &obj.value);
    if info.builtin && info.plural == "namespaces" {
        cluster.furnish_namespace(&name);
    }
    Ok(Reply { code: 201, body: Body::Obj(obj), warnings })
}
