//! The `scale` subresource of Deployments (`kubectl scale`): an `autoscaling/v1` Scale view
//! of `spec.replicas`, readable and writable with GET, PUT and PATCH.

use axum::response::Response;
use http::header;
use serde_json::{Value, json};

use super::{Ctx, Target, error, json_response};
use crate::cluster::Cluster;
use crate::ops::{self, Subresource, WriteOpts};
use crate::patch::{self, Format};
use crate::status::{ApiError, ApiResult};

fn scale_of(obj: &Value) -> Value {
    let meta = &obj["metadata"];
    let selector = obj
        .get("spec")
        .and_then(|v| v.get("selector"))
        .and_then(|v| v.get("matchLabels"))
        .and_then(Value::as_object)
        .map(|m| m.iter().map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or(""))).collect::<Vec<_>>().join(","))
        .unwrap_or_default();
    json!({
        "kind": "Scale", "apiVersion": "autoscaling/v1",
        "metadata": {"name": meta["name"], "namespace": meta["namespace"], "uid": meta["uid"], "resourceVersion": meta["resourceVersion"], "creationTimestamp": meta["creationTimestamp"]},
        "spec": {"replicas": obj.get("spec").and_then(|v| v.get("replicas")).cloned().unwrap_or(json!(1))},
        "status": {"replicas": obj.get("status").and_then(|v| v.get("replicas")).cloned().unwrap_or(json!(0)), "selector": selector},
    })
}

/// GET, PUT or PATCH `/scale`.
pub fn handle(cluster: &Cluster, t: &Target, ctx: &Ctx, method: &http::Method, raw: &[u8]) -> Response {
    let r = (|| -> ApiResult<Value> {
        let ns = t.namespace.as_deref().unwrap_or("");
        let name = t.name.as_deref().unwrap_or("");
        let current = cluster.table(&t.info).get(ns, name).ok_or_else(|| ApiError::not_found(&t.info, name))?;
        let mut scale = scale_of(&current.value);
        match *method {
            http::Method::GET => return Ok(scale),
            http::Method::PUT => scale = serde_json::from_slice(raw).map_err(|e| ApiError::bad_request(e.to_string()))?,
            http::Method::PATCH => {
                let ct = ctx.headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("");
                let format = Format::from_content_type(ct).ok_or_else(ApiError::unsupported_media_type)?;
                let p = patch::parse(format, raw)?;
                patch::apply(format, &mut scale, &p)?;
            }
            _ => return Err(ApiError::method_not_allowed(method.as_str(), &t.info)),
        }
        let replicas = scale.get("spec").and_then(|v| v.get("replicas")).cloned().unwrap_or(json!(1));
        let body = serde_json::to_vec(&json!({"spec": {"replicas": replicas}})).unwrap_or_default();
        let opts = WriteOpts { manager: ctx.manager(), ..Default::default() };
        let reply = ops::patch(cluster, &t.info, ns, name, Subresource::Main, Format::Merge, &body, &opts)?;
        let obj = match reply.body {
            ops::Body::Obj(o) => o.value.clone(),
            ops::Body::Value(v) => v,
        };
        Ok(scale_of(&obj))
    })();
    match r {
        Ok(v) => json_response(200, &v, &[]),
        Err(e) => error(&e),
    }
}
