//! The subresources that only take a POST and act on their object: `pods/NAME/eviction`,
//! `pods/NAME/binding` and `serviceaccounts/NAME/token`. Each reads its body kind (`policy/v1`
//! Eviction, `v1` Binding, `authentication.k8s.io/v1` TokenRequest) and answers 201.

use axum::response::Response;
use serde_json::Value;

use super::request::{Ctx, Target};
use super::respond::{error, json_response};
use super::write::{delete_opts_from, dry_run};
use crate::cluster::Cluster;
use crate::ops;
use crate::status::{ApiError, ApiResult};

/// POST to `/eviction`, `/binding` or `/token`.
pub fn handle(cluster: &Cluster, t: &Target, ctx: &Ctx, raw: &[u8]) -> Response {
    let ns = t.namespace.as_deref().unwrap_or("");
    let name = t.name.as_deref().unwrap_or("");
    let r = dry_run("CreateOptions", ctx.values("dryRun")).and_then(|dry_run| match t.sub.as_deref() {
        Some("eviction") => body_of(raw, "Eviction", ns).and_then(|body| {
            check_name(&body, name, "Eviction")?;
            let mut opts = delete_opts_from(None, body.get("deleteOptions").unwrap_or(&Value::Null))?;
            opts.dry_run |= dry_run;
            ops::evict(cluster, ns, name, opts, ctx.manager())
        }),
        Some("binding") => body_of(raw, "Binding", ns).and_then(|body| {
            check_name(&body, name, "Binding")?;
            ops::bind(cluster, ns, name, &body, dry_run)
        }),
        Some("token") => body_of(raw, "TokenRequest", ns).and_then(|body| ops::token_request::request(cluster, ns, name, &body)),
        _ => Err(ApiError::method_not_allowed("POST", &t.info)),
    });
    match r {
        Ok(v) => json_response(201, &v, &[]),
        Err(e) => error(&e),
    }
}

/// The body: a JSON object of `kind` (when it names one) for namespace `ns` (when it names one).
fn body_of(raw: &[u8], kind: &str, ns: &str) -> ApiResult<Value> {
    let unrecognized = |why: String| {
        ApiError::bad_request(format!(
            "the object provided is unrecognized (must be of type {kind}): couldn't get version/kind; json parse error: {why}"
        ))
    };
    let body = match serde_json::from_slice::<Value>(raw) {
        Ok(v @ Value::Object(_)) => v,
        Ok(_) => return Err(unrecognized("json: cannot unmarshal into Go value of type struct".into())),
        Err(e) => return Err(unrecognized(e.to_string())),
    };
    let sent = body.get("kind").and_then(Value::as_str).unwrap_or("");
    if !sent.is_empty() && sent != kind {
        let version = body.get("apiVersion").and_then(Value::as_str).unwrap_or("").rsplit('/').next().unwrap_or("").to_string();
        return Err(ApiError::bad_request(format!(
            "{sent} in version \"{version}\" cannot be handled as a {kind}: no kind \"{sent}\" is registered for version \"{version}\""
        )));
    }
    let body_ns = body.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or("");
    if !body_ns.is_empty() && body_ns != ns {
        return Err(ApiError::bad_request("the namespace of the provided object does not match the namespace sent on the request"));
    }
    Ok(body)
}

/// Evictions and bindings must name the pod of the URL.
fn check_name(body: &Value, name: &str, kind: &str) -> ApiResult<()> {
    if body.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("") != name {
        return Err(ApiError::bad_request(format!("name in URL does not match name in {kind} object")));
    }
    Ok(())
}
