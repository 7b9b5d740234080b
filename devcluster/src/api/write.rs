//! POST, PUT, PATCH, DELETE and deletecollection: HTTP parameters in, `ops` out.

use axum::response::Response;
use http::header;
use serde_json::Value;

use super::read::object_bytes;
use super::request::{Ctx, Target};
use super::respond::{bytes_response, error, json_response};
use crate::cluster::Cluster;
use crate::ops::{self, Body, DeleteOpts, Propagation, Reply, Subresource, Validation, WriteOpts};
use crate::patch::Format;
use crate::registry::ResourceInfo;
use crate::selector::{FieldSelector, LabelSelector};
use crate::status::{ApiError, ApiResult};
use crate::{builtin, webhook};

/// `dryRun`: absent, or `All`; anything else is refused before the request is looked at, as
/// the real server's `Validate{Create,Update,Patch,Delete}Options` refuse it (422 naming the
/// options kind, with Go's `%#v` of the values).
pub(super) fn dry_run<'a>(options: &str, values: impl IntoIterator<Item = &'a str>) -> ApiResult<bool> {
    let values: Vec<&str> = values.into_iter().collect();
    if values.iter().all(|v| *v == "All") {
        return Ok(!values.is_empty());
    }
    let shown: Vec<String> = values.iter().map(|v| format!("{v:?}")).collect();
    let cause = crate::status::Cause::new(
        "FieldValueNotSupported",
        format!("Unsupported value: []string{{{}}}: supported values: \"All\"", shown.join(", ")),
        "dryRun",
    );
    Err(ApiError::invalid(&format!("{options}.meta.k8s.io"), "meta.k8s.io", options, "", vec![cause]))
}

pub(super) fn write_opts(ctx: &Ctx, options: &str) -> ApiResult<WriteOpts> {
    let dry_run = dry_run(options, ctx.values("dryRun"))?;
    let mut given = serde_json::Map::new();
    if dry_run {
        given.insert("dryRun".into(), serde_json::json!(["All"]));
    }
    for k in ["fieldManager", "fieldValidation"] {
        if let Some(v) = ctx.q(k) {
            given.insert(k.into(), serde_json::json!(v));
        }
    }
    Ok(WriteOpts {
        dry_run,
        manager: ctx.manager(),
        validation: Validation::parse(ctx.q("fieldValidation"))?,
        force: ctx.flag("force"),
        manager_explicit: ctx.q("fieldManager").is_some(),
        admission: admission(ctx, dry_run, given),
    })
}

/// The admission context of a client's write (none without a user: not a client's request).
fn admission(ctx: &Ctx, dry_run: bool, options: serde_json::Map<String, Value>) -> Option<webhook::Context> {
    let user = ctx.user.as_ref()?;
    Some(webhook::Context { caller: user.into(), dry_run, options })
}

fn sub(t: &Target) -> Subresource {
    match t.sub.as_deref() {
        Some("status") => Subresource::Status,
        Some("ephemeralcontainers") => Subresource::EphemeralContainers,
        _ => Subresource::Main,
    }
}

fn reply(info: &ResourceInfo, r: ApiResult<Reply>) -> Response {
    match r {
        Err(e) => error(&e),
        Ok(Reply { code, body: Body::Obj(obj), warnings }) => bytes_response(code, object_bytes(info, &obj), &warnings),
        Ok(Reply { code, body: Body::Value(v), warnings }) => {
            let v = if info.is_events_v1() && v["kind"] == "Event" && v["apiVersion"] == "v1" { builtin::event_from_core(&v) } else { v };
            json_response(code, &v, &warnings)
        }
    }
}

/// POST.
pub fn create(cluster: &Cluster, t: &Target, ctx: &Ctx, raw: &[u8]) -> Response {
    let r = (|| {
        let opts = write_opts(ctx, "CreateOptions")?;
        let body = ops::parse_body(&t.info, raw)?;
        let dup = ops::check_duplicates(&t.info, raw, opts.validation)?;
        ops::create(cluster, &t.info, t.namespace.as_deref().unwrap_or(""), body, &opts).map(|mut r| {
            r.warnings.extend(dup);
            r
        })
    })();
    reply(&t.info, r)
}

/// PUT.
pub fn update(cluster: &Cluster, t: &Target, ctx: &Ctx, raw: &[u8]) -> Response {
    let r = (|| {
        let opts = write_opts(ctx, "UpdateOptions")?;
        let body = ops::parse_body(&t.info, raw)?;
        ops::check_duplicates(&t.info, raw, opts.validation)?;
        if t.sub.as_deref() == Some("finalize") {
            return ops::update(cluster, ops::Object { ns: "", ..t.object(Subresource::Main) }, body, &opts);
        }
        ops::update(cluster, t.object(sub(t)), body, &opts)
    })();
    reply(&t.info, r)
}

/// PATCH.
pub fn patch(cluster: &Cluster, t: &Target, ctx: &Ctx, raw: &[u8]) -> Response {
    let r = (|| {
        let ct = ctx.headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("");
        let format = Format::from_content_type(ct).ok_or_else(ApiError::unsupported_media_type)?;
        let opts = write_opts(ctx, "PatchOptions")?;
        ops::patch(cluster, t.object(sub(t)), format, raw, &opts)
    })();
    reply(&t.info, r)
}

fn delete_opts(ctx: &Ctx, raw: &[u8]) -> ApiResult<DeleteOpts> {
    let body: Value = if raw.iter().all(u8::is_ascii_whitespace) {
        Value::Null
    } else {
        serde_json::from_slice(raw).map_err(|e| ApiError::bad_request(format!("error decoding DeleteOptions: {e}")))?
    };
    let mut opts = delete_opts_from(Some(ctx), &body)?;
    // the DeleteOptions a webhook is shown: the body's, with the query's parameters
    let mut given: serde_json::Map<String, Value> = body.as_object().cloned().unwrap_or_default();
    given.remove("kind");
    given.remove("apiVersion");
    if opts.dry_run {
        given.insert("dryRun".into(), serde_json::json!(["All"]));
    }
    if let Some(p) = ctx.q("propagationPolicy") {
        given.insert("propagationPolicy".into(), serde_json::json!(p));
    }
    if let Some(s) = ctx.q("gracePeriodSeconds").and_then(|s| s.parse::<i64>().ok()) {
        given.insert("gracePeriodSeconds".into(), serde_json::json!(s));
    }
    opts.admission = admission(ctx, opts.dry_run, given);
    Ok(opts)
}

/// DeleteOptions from a body (a DELETE's, or an Eviction's `deleteOptions`) and, for a
/// DELETE, the query parameters, which win.
pub(super) fn delete_opts_from(query: Option<&Ctx>, body: &Value) -> ApiResult<DeleteOpts> {
    let q = |k: &str| query.and_then(|c| c.q(k));
    let query_dry_run = query.map(|c| c.values("dryRun")).unwrap_or_default();
    let policy =
        q("propagationPolicy").map(String::from).or_else(|| body.get("propagationPolicy").and_then(Value::as_str).map(String::from));
    let mut propagation = policy.as_deref().filter(|p| !p.is_empty()).map(Propagation::parse).transpose()?;
    let orphan = query.and_then(|c| c.flag_given("orphanDependents")).or_else(|| body.get("orphanDependents").and_then(Value::as_bool));
    if propagation.is_none() {
        propagation = match orphan {
            Some(true) => Some(Propagation::Orphan),
            Some(false) => Some(Propagation::Background),
            None => None,
        };
    }
    let in_body = body.get("dryRun").and_then(Value::as_array).map(|a| a.iter().map(|d| d.as_str().unwrap_or("")).collect::<Vec<_>>());
    let dry = dry_run("DeleteOptions", query_dry_run.into_iter().chain(in_body.into_iter().flatten()))?;
    Ok(DeleteOpts {
        dry_run: dry,
        propagation,
        uid: body.get("preconditions").and_then(|v| v.get("uid")).and_then(Value::as_str).map(String::from),
        resource_version: body.get("preconditions").and_then(|v| v.get("resourceVersion")).and_then(Value::as_str).map(String::from),
        admission: None,
    })
}

/// DELETE one object.
pub fn delete(cluster: &Cluster, t: &Target, ctx: &Ctx, raw: &[u8]) -> Response {
    let r = (|| {
        let opts = delete_opts(ctx, raw)?;
        ops::delete(cluster, &t.info, t.namespace.as_deref().unwrap_or(""), t.name.as_deref().unwrap_or(""), &opts)
    })();
    reply(&t.info, r)
}

/// DELETE a collection.
pub fn delete_collection(cluster: &Cluster, t: &Target, ctx: &Ctx, raw: &[u8]) -> Response {
    let r = (|| {
        let opts = delete_opts(ctx, raw)?;
        let labels = LabelSelector::parse(ctx.q("labelSelector").unwrap_or("")).map_err(|e| ApiError::bad_request(e.to_string()))?;
        let fields = FieldSelector::parse(ctx.q("fieldSelector").unwrap_or(""), t.info.field_selectors())
            .map_err(|e| ApiError::bad_request(e.to_string()))?;
        ops::delete_collection(cluster, &t.info, t.namespace.as_deref(), &labels, &fields, &opts)
    })();
    match r {
        Ok(v) => json_response(200, &v, &[]),
        Err(e) => error(&e),
    }
}
