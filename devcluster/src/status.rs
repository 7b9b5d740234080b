//! API errors as the real server writes them: `Status` objects with a reason, a code and a
//! message whose wording follows kube-apiserver, so clients that match on reasons (kube-rs,
//! client-go, Kopf) and humans reading messages see the same thing as on a real cluster.

use serde_json::{Map, Value, json};

pub use crate::causes::{Cause, shown};
use crate::registry::{ResourceInfo, qualified};

/// An error answer of the API: either a `Status` object or a plain-text 404.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    /// HTTP status code.
    pub code: u16,
    /// `Status.reason` (empty for internal errors, which the real server leaves out).
    pub reason: &'static str,
    /// `Status.message`.
    pub message: String,
    /// `Status.details`, when the real server sends them.
    pub details: Option<Box<Value>>,
    /// Answer `text/plain` `404 page not found` instead of a Status (unknown paths).
    pub plain: bool,
    /// `Warning` headers sent with the error.
    pub warnings: Vec<String>,
}

/// Result type of API operations.
pub type ApiResult<T> = Result<T, ApiError>;

impl ApiError {
    fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        ApiError { code, reason, message: message.into(), details: None, plain: false, warnings: Vec::new() }
    }

    fn with_details(mut self, details: Value) -> Self {
        self.details = Some(Box::new(details));
        self
    }

    /// `404 page not found` in plain text, as for unknown groups and paths.
    pub fn page_not_found() -> Self {
        ApiError { plain: true, ..Self::new(404, "NotFound", "404 page not found") }
    }

    /// 404 NotFound for `resource "name"`.
    pub fn not_found(info: &ResourceInfo, name: &str) -> Self {
        Self::not_found_raw(&info.group, &info.plural, name)
    }

    /// 404 NotFound from group and plural.
    pub fn not_found_raw(group: &str, plural: &str, name: &str) -> Self {
        Self::new(404, "NotFound", format!("{} \"{name}\" not found", qualified(group, plural))).with_details(details(name, group, plural))
    }

    /// 409 AlreadyExists.
    pub fn already_exists(info: &ResourceInfo, name: &str) -> Self {
        Self::new(409, "AlreadyExists", format!("{} \"{name}\" already exists", info.qualified())).with_details(details(
            name,
            &info.group,
            &info.plural,
        ))
    }

    /// 409 Conflict: stale resourceVersion.
    pub fn conflict(info: &ResourceInfo, name: &str) -> Self {
        Self::conflict_msg(info, name, "the object has been modified; please apply your changes to the latest version and try again")
    }

    /// 409 Conflict with a given explanation.
    pub fn conflict_msg(info: &ResourceInfo, name: &str, why: &str) -> Self {
        Self::new(409, "Conflict", format!("Operation cannot be fulfilled on {} \"{name}\": {why}", info.qualified()))
            .with_details(details(name, &info.group, &info.plural))
    }

    /// 409 Conflict for a storage precondition that failed (`what` follows "Precondition
    /// failed: "), worded as the real storage layer's error.
    pub fn storage_precondition(info: &ResourceInfo, ns: &str, name: &str, what: &str) -> Self {
        let group = if info.group.is_empty() { String::new() } else { format!("{}/", info.group) };
        let ns = if ns.is_empty() { String::new() } else { format!("{ns}/") };
        let why = format!(
            "StorageError: invalid object, Code: 4, Key: /registry/{group}{}/{ns}{name}, ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: {what}",
            info.plural
        );
        Self::conflict_msg(info, name, &why)
    }

    /// 400 for a body field Go's JSON decoder cannot take (`field` as Go names it, e.g.
    /// `ScaleSpec.spec.replicas`, of Go type `go_type`).
    pub fn cannot_decode(kind: &str, version: &str, field: &str, go_type: &str, value: &Value) -> Self {
        let what = match value {
            Value::Number(n) => format!("number {n}"),
            Value::String(_) => "string".into(),
            Value::Bool(_) => "bool".into(),
            Value::Array(_) => "array".into(),
            Value::Object(_) => "object".into(),
            Value::Null => "null".into(),
        };
        Self::bad_request(format!(
            "{kind} in version \"{version}\" cannot be handled as a {kind}: json: cannot unmarshal {what} into Go struct field {field} of type {go_type}"
        ))
    }

    /// 400 BadRequest.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    /// 500 without a reason (the real server's answer for some malformed inputs).
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(500, "", message)
    }

    /// 500 InternalError, as `apierrors.NewInternalError` writes it.
    pub fn internal_error(why: impl Into<String>) -> Self {
        let why = why.into();
        Self::new(500, "InternalError", format!("Internal error occurred: {why}")).with_details(json!({"causes": [{"message": why}]}))
    }

    /// 500 with reason `Unknown`: what the real server answers for an error its storage
    /// returned without a Status (a plain Go error).
    pub fn unknown(message: impl Into<String>) -> Self {
        Self::new(500, "Unknown", message)
    }

    /// 429 TooManyRequests with one cause (`reason`, `message`) and, when not 0, the seconds
    /// after which to retry.
    pub fn too_many_requests(message: &str, cause_reason: &str, cause_message: String, retry_after: u32) -> Self {
        let mut details = json!({"causes": [{"reason": cause_reason, "message": cause_message}]});
        if retry_after > 0 {
            details["retryAfterSeconds"] = json!(retry_after);
        }
        Self::new(429, "TooManyRequests", message).with_details(details)
    }

    /// 405 MethodNotAllowed.
    pub fn method_not_allowed(verb: &str, info: &ResourceInfo) -> Self {
        Self::new(405, "MethodNotAllowed", format!("{verb} is not supported on resources of kind \"{}\"", info.qualified()))
            .with_details(json!({"group": info.group, "kind": info.plural}))
    }

    /// 406 NotAcceptable: the answer cannot take the shape the client asked for.
    pub fn not_acceptable(message: impl Into<String>) -> Self {
        Self::new(406, "NotAcceptable", message)
    }

    /// 415: a body or patch format the endpoint does not take.
    pub fn unsupported_media_type() -> Self {
        Self::new(
            415,
            "UnsupportedMediaType",
            "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml",
        )
    }

    /// 413 RequestEntityTooLarge: `Request entity too large: <why>`, as the real server words it
    /// (`limit is 3145728` for a body over the limit).
    pub fn too_large(why: &str) -> Self {
        Self::new(413, "RequestEntityTooLarge", format!("Request entity too large: {why}"))
    }

    /// The answer of a write whose object is larger than etcd takes (a 500 without a reason,
    /// etcd's own words, as the real server passes them on).
    pub fn object_too_large() -> Self {
        Self::internal("etcdserver: request is too large")
    }

    /// 422 for an object that a write would make deeper than [`crate::depth::MAX_DEPTH`].
    pub fn too_deep() -> Self {
        Self::invalid_plain(format!(
            "the object would be nested more than {} levels deep: {}",
            crate::depth::MAX_DEPTH,
            crate::depth::TOO_DEEP
        ))
    }

    /// 401 Unauthorized.
    pub fn unauthorized() -> Self {
        Self::new(401, "Unauthorized", "Unauthorized")
    }

    /// 403 Forbidden with a message.
    pub fn forbidden(info: &ResourceInfo, name: &str, message: impl Into<String>) -> Self {
        Self::new(403, "Forbidden", message).with_details(details(name, &info.group, &info.plural))
    }

    /// 403 Forbidden as `apierrors.NewForbidden` writes it: `resource.group "name" is
    /// forbidden: WHY` (no name when `name` is empty; `forbidden: WHY` alone when group and
    /// resource are, for a non-resource path), with details that leave out what is empty.
    pub fn forbidden_request(group: &str, resource: &str, name: &str, why: &str) -> Self {
        let message = match (group.is_empty() && resource.is_empty(), name.is_empty()) {
            (true, _) => format!("forbidden: {why}"),
            (false, true) => format!("{} is forbidden: {why}", qualified(group, resource)),
            (false, false) => format!("{} \"{name}\" is forbidden: {why}", qualified(group, resource)),
        };
        let details = if group.is_empty() && resource.is_empty() { json!({}) } else { details(name, group, resource) };
        Self::new(403, "Forbidden", message).with_details(details)
    }

    /// 410 Gone / Expired (for watches and continue tokens).
    pub fn expired(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }

    /// 422 Invalid with causes; `kind` is the Kind (built-ins) or the plural (some CR paths).
    pub fn invalid(kind_label: &str, group: &str, details_kind: &str, name: &str, causes: Vec<Cause>) -> Self {
        let mut parts: Vec<String> = Vec::new();
        for c in &causes {
            let p = format!("{}: {}", c.field, c.message);
            if !parts.contains(&p) {
                parts.push(p);
            }
        }
        let joined = if parts.len() == 1 { parts[0].clone() } else { format!("[{}]", parts.join(", ")) };
        let message = format!("{kind_label} \"{name}\" is invalid: {joined}");
        let mut d = Map::new();
        if !name.is_empty() {
            d.insert("name".into(), json!(name));
        }
        if !group.is_empty() {
            d.insert("group".into(), json!(group));
        }
        d.insert("kind".into(), json!(details_kind));
        d.insert(
            "causes".into(),
            Value::Array(causes.iter().map(|c| json!({"reason": c.reason, "message": c.message, "field": c.field})).collect()),
        );
        Self::new(422, "Invalid", message).with_details(Value::Object(d))
    }

    /// 422 Invalid for an object of `info` (the label is `Kind` or `Kind.group`).
    pub fn invalid_object(info: &ResourceInfo, name: &str, causes: Vec<Cause>) -> Self {
        let group = if info.is_events_v1() { "" } else { info.group.as_str() };
        Self::invalid(&info.kind_label(), group, &info.kind, name, causes)
    }

    /// The bare 422 the real server answers for failed JSON patches and similar.
    pub fn invalid_plain(message: impl Into<String>) -> Self {
        Self::new(422, "Invalid", message)
    }

    /// The `Status` object for this error.
    pub fn to_status(&self) -> Value {
        let mut m = Map::new();
        m.insert("kind".into(), json!("Status"));
        m.insert("apiVersion".into(), json!("v1"));
        m.insert("metadata".into(), json!({}));
        m.insert("status".into(), json!("Failure"));
        m.insert("message".into(), json!(self.message));
        if !self.reason.is_empty() {
            m.insert("reason".into(), json!(self.reason));
        }
        if let Some(d) = &self.details {
            m.insert("details".into(), (**d).clone());
        }
        m.insert("code".into(), json!(self.code));
        Value::Object(m)
    }
}

fn details(name: &str, group: &str, plural: &str) -> Value {
    let mut d = Map::new();
    if !name.is_empty() {
        d.insert("name".into(), json!(name));
    }
    if !group.is_empty() {
        d.insert("group".into(), json!(group));
    }
    d.insert("kind".into(), json!(plural));
    Value::Object(d)
}

/// A successful delete's `Status` answer.
pub fn success_status(info: &ResourceInfo, name: &str, uid: &str) -> Value {
    let mut d = Map::new();
    d.insert("name".into(), json!(name));
    if !info.group.is_empty() {
        d.insert("group".into(), json!(info.group));
    }
    d.insert("kind".into(), json!(info.plural));
    d.insert("uid".into(), json!(uid));
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": Value::Object(d)})
}
