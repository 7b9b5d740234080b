//! The `scale` subresource of Deployments and of custom resources whose CRD asks for one
//! (`kubectl scale`, the HPA): an `autoscaling/v1` Scale view of the replicas, readable with
//! GET and writable with PUT and PATCH, as the real server's `ScaleREST`s answer. A write sets
//! only the spec replicas, honours a `resourceVersion` in the Scale as a precondition, and is
//! recorded in managedFields under the subresource `scale`.

use axum::response::Response;
use http::{Method, header};
use serde_json::{Map, Value, json};

use super::request::{Ctx, Target};
use super::respond::{error, json_response};
use super::write::write_opts;
use crate::cluster::Cluster;
use crate::ops::commit::{Fields, commit};
use crate::ops::{self, Object, Subresource};
use crate::patch::{self, Format};
use crate::registry::{ResourceInfo, ScalePaths, ScaleSelector};
use crate::selector::selector_string;
use crate::status::{ApiError, ApiResult, Cause};

/// What the real server puts in a Scale whose object has no spec replicas, before the
/// client's change (`invalidSpecReplicas`, the smallest int32).
const NOT_SET: i64 = i32::MIN as i64;

/// GET, PUT or PATCH `/scale`.
pub fn handle(cluster: &Cluster, t: &Target, ctx: &Ctx, method: &Method, raw: &[u8]) -> Response {
    let Some(paths) = &t.info.scale else {
        return error(&ApiError::not_found(&t.info, t.name.as_deref().unwrap_or("")));
    };
    let r = match *method {
        Method::GET => get(cluster, t, paths),
        Method::PUT | Method::PATCH => write(cluster, t, paths, ctx, method, raw),
        _ => Err(ApiError::method_not_allowed(method.as_str(), &t.info)),
    };
    match r {
        Ok(v) => json_response(200, &v, &[]),
        Err(e) => error(&e),
    }
}

fn get(cluster: &Cluster, t: &Target, paths: &ScalePaths) -> ApiResult<Value> {
    let (ns, name) = (t.namespace.as_deref().unwrap_or(""), t.name.as_deref().unwrap_or(""));
    let current = cluster.table(&t.info).get(ns, name).ok_or_else(|| ApiError::not_found(&t.info, name))?;
    let (scale, found) = scale_of(&t.info, paths, &current.value).map_err(ApiError::unknown)?;
    if !found {
        return Err(ApiError::internal_error(format!("the spec replicas field {:?} does not exist", paths.spec_replicas.as_str())));
    }
    Ok(scale)
}

fn write(cluster: &Cluster, t: &Target, paths: &ScalePaths, ctx: &Ctx, method: &Method, raw: &[u8]) -> ApiResult<Value> {
    let info = &t.info;
    let (ns, name) = (t.namespace.as_deref().unwrap_or(""), t.name.as_deref().unwrap_or(""));
    let opts = write_opts(ctx, if *method == Method::PUT { "UpdateOptions" } else { "PatchOptions" })?;
    let change = if *method == Method::PUT {
        Change::Replace(parse_scale(raw)?)
    } else {
        let ct = ctx.headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("");
        let format = Format::from_content_type(ct).ok_or_else(ApiError::unsupported_media_type)?;
        if format == Format::Strategic && !info.builtin {
            // custom resources' endpoints, /scale included, take no strategic merge patches
            return Err(ApiError::unsupported_media_type());
        }
        Change::Patch(format, patch::parse(format, raw)?)
    };
    let reply = commit(cluster, Object { info, ns, name, sub: Subresource::Scale }, &opts, Fields::Recorded, |current| {
        let (mut scale, found) = scale_of(info, paths, current).map_err(ApiError::unknown)?;
        if !found {
            scale["spec"]["replicas"] = json!(NOT_SET);
        }
        let wanted = match &change {
            Change::Replace(body) => body.clone(),
            Change::Patch(format, p) => {
                patch::apply(*format, &mut scale, p)?;
                scale
            }
        };
        let replicas = replicas_of(&wanted)?;
        let meta = |k: &str| wanted.get("metadata").and_then(|m| m.get(k)).and_then(Value::as_str).unwrap_or("").to_string();
        let body_name = meta("name");
        if !body_name.is_empty() && body_name != name {
            return Err(ApiError::bad_request(format!("the name of the object ({body_name}) does not match the name on the URL ({name})")));
        }
        if info.builtin {
            check_builtin(info, name, replicas, &meta("uid"), current)?;
        } else if replicas == NOT_SET {
            return Err(ApiError::bad_request(format!("the spec replicas field {:?} cannot be empty", paths.spec_replicas.as_str())));
        }
        let mut new = current.clone();
        paths.spec_replicas.set(&mut new, json!(replicas)).map_err(ApiError::unknown)?;
        let rv = meta("resourceVersion");
        if !rv.is_empty() {
            ops::meta_mut(&mut new).insert("resourceVersion".into(), json!(rv));
        }
        Ok(new)
    })?;
    let obj = match reply.body {
        ops::Body::Obj(o) => o.value.clone(),
        ops::Body::Value(v) => v,
    };
    scale_of(info, paths, &obj).map(|(scale, _)| scale).map_err(ApiError::bad_request)
}

/// What a write asks for: a whole Scale (PUT) or a patch of the current one.
enum Change {
    Replace(Value),
    Patch(Format, Value),
}

/// A Deployment's Scale is validated as a Scale (the custom resource's own validation checks
/// its replicas field), and a `uid` in it is a precondition.
fn check_builtin(info: &ResourceInfo, name: &str, replicas: i64, uid: &str, current: &Value) -> ApiResult<()> {
    if replicas < 0 {
        let cause =
            Cause::new("FieldValueInvalid", format!("Invalid value: {replicas}: must be greater than or equal to 0"), "spec.replicas");
        return Err(ApiError::invalid("Scale.autoscaling", "autoscaling", "Scale", name, vec![cause]));
    }
    let current_uid = current.get("metadata").and_then(|m| m.get("uid")).and_then(Value::as_str).unwrap_or("");
    if !uid.is_empty() && uid != current_uid {
        let resource = format!("{}/scale", info.plural);
        let mut e = ApiError::conflict_msg(info, name, "");
        e.message = format!(
            "Operation cannot be fulfilled on {} \"{name}\": Precondition failed: UID in precondition: {uid}, UID in object meta: {current_uid}",
            crate::registry::qualified(&info.group, &resource)
        );
        e.details = Some(Box::new(json!({"name": name, "group": info.group, "kind": resource})));
        return Err(e);
    }
    Ok(())
}

/// A PUT body: a JSON object.
fn parse_scale(raw: &[u8]) -> ApiResult<Value> {
    match serde_json::from_slice::<Value>(raw) {
        Ok(v @ Value::Object(_)) => Ok(v),
        Ok(_) => Err(ApiError::bad_request(
            "the object provided is unrecognized (must be of type Scale): couldn't get version/kind; json parse error: json: cannot unmarshal into Go value of type struct",
        )),
        Err(e) => Err(ApiError::bad_request(format!(
            "the object provided is unrecognized (must be of type Scale): couldn't get version/kind; json parse error: {e}"
        ))),
    }
}

/// `spec.replicas` of a requested Scale, an int32 (absent is 0, as Go decodes it).
fn replicas_of(scale: &Value) -> ApiResult<i64> {
    let v = scale.get("spec").and_then(|s| s.get("replicas")).unwrap_or(&Value::Null);
    match v {
        Value::Null => Ok(0),
        Value::Number(n) if n.as_i64().is_some_and(|i| i32::try_from(i).is_ok()) => Ok(n.as_i64().unwrap_or(0)),
        other => Err(ApiError::cannot_decode("Scale", "v1", "ScaleSpec.spec.replicas", "int32", other)),
    }
}

/// The Scale of `obj` and whether its spec replicas were found (`scaleFromCustomResource`;
/// a Deployment's replicas default to 1). The error is the real server's plain error text.
fn scale_of(info: &ResourceInfo, paths: &ScalePaths, obj: &Value) -> Result<(Value, bool), String> {
    let spec = paths.spec_replicas.int(obj)?;
    let (spec, found) = match spec {
        Some(n) => (n, true),
        None if info.builtin => (1, true),
        None => (0, false),
    };
    let status = paths.status_replicas.int(obj)?.unwrap_or(0);
    let selector = match &paths.selector {
        ScaleSelector::None => String::new(),
        ScaleSelector::Text(p) => p.string(obj)?.unwrap_or("").to_string(),
        ScaleSelector::LabelSelector(p) => p.get(obj)?.and_then(selector_string).unwrap_or_default(),
    };
    let m = obj.get("metadata").cloned().unwrap_or_default();
    let mut meta = Map::new();
    for k in ["name", "namespace", "uid", "resourceVersion", "creationTimestamp"] {
        if let Some(v) = m.get(k).filter(|v| v.as_str().is_some_and(|s| !s.is_empty())) {
            meta.insert(k.into(), v.clone());
        }
    }
    // int32 fields: spec.replicas is omitted when 0, status.replicas always written
    let mut spec_obj = Map::new();
    if spec != 0 {
        spec_obj.insert("replicas".into(), json!(spec as i32));
    }
    let mut status_obj = Map::new();
    status_obj.insert("replicas".into(), json!(status as i32));
    if !selector.is_empty() {
        status_obj.insert("selector".into(), json!(selector));
    }
    let scale = json!({"kind": "Scale", "apiVersion": "autoscaling/v1", "metadata": meta, "spec": spec_obj, "status": status_obj});
    Ok((scale, found))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_selectors_are_written_as_the_real_selector_string() {
        let cases = [
            (json!({}), ""),
            (json!({"matchLabels": {"b": "2", "a": "1"}}), "a=1,b=2"),
            (
                json!({"matchLabels": {"app": "x"}, "matchExpressions": [
                    {"key": "tier", "operator": "In", "values": ["web", "api"]},
                    {"key": "env", "operator": "NotIn", "values": ["dev"]},
                    {"key": "zz", "operator": "Exists"},
                    {"key": "canary", "operator": "DoesNotExist"}
                ]}),
                "app=x,!canary,env notin (dev),tier in (api,web),zz",
            ),
        ];
        for (sel, want) in cases {
            assert_eq!(selector_string(&sel).unwrap_or_default(), want, "{sel}");
        }
    }

    #[test]
    fn requested_replicas_are_int32s() {
        let cases: &[(Value, Result<i64, &str>)] = &[
            (json!({"spec": {"replicas": 3}}), Ok(3)),
            (json!({"spec": {}}), Ok(0)),
            (json!({}), Ok(0)),
            (json!({"spec": {"replicas": -2}}), Ok(-2)),
            (json!({"spec": {"replicas": "3"}}), Err("string")),
            (json!({"spec": {"replicas": 1.5}}), Err("number 1.5")),
            (json!({"spec": {"replicas": 3_000_000_000u64}}), Err("number 3000000000")),
        ];
        for (scale, want) in cases {
            let got = replicas_of(scale).map_err(|e| e.message);
            let want = want.map_err(|w| {
                format!("Scale in version \"v1\" cannot be handled as a Scale: json: cannot unmarshal {w} into Go struct field ScaleSpec.spec.replicas of type int32")
            });
            assert_eq!(got, want, "{scale}");
        }
    }
}
