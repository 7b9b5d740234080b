//! Admission reviews (Kopf's validating and mutating handlers), decided without I/O: which
//! handlers review a request, and how their answers make the one response the API server
//! gets. As in Kopf, every matching handler is asked; any denial denies, the first one's
//! message and code shown; the mutating handlers' merge patches, applied in their order,
//! become one JSON patch (base64 in the review, as the API server expects). A handler that
//! cannot answer (unreachable, slow, garbage) denies when it is `fail_closed`, and is
//! otherwise skipped with a warning.

use base64::Engine as _;
use bosun_proto::v1 as pb;
use serde_json::{Map, Value, json};

use super::registry::Handler;

/// Why an AdmissionReview cannot be reviewed at all (the webhook call's own error, not a
/// denial of the request under review).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadReview {
    /// Not a JSON object with a `request`.
    #[error("not an AdmissionReview with a request")]
    NoRequest,
    /// A field the API server always sends is missing.
    #[error("the AdmissionReview request has no {0}")]
    Missing(&'static str),
}

/// What an AdmissionReview request asks about: the fields that choose the handlers.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// The request's uid, repeated in the response.
    pub uid: String,
    /// The resource: group ("" for the core group), version and plural.
    pub group: String,
    /// The version.
    pub version: String,
    /// The plural.
    pub resource: String,
    /// The subresource ("" for the main resource).
    pub sub_resource: String,
    /// `CREATE`, `UPDATE`, `DELETE` or `CONNECT`.
    pub operation: String,
    /// Whether the request is a dry run.
    pub dry_run: bool,
    /// The object after the operation (none for DELETE), else before it.
    pub object: Option<Value>,
}

impl Request {
    /// Reads the request out of a whole AdmissionReview.
    pub fn parse(review: &Value) -> Result<Request, BadReview> {
        let r = review.get("request").filter(|r| r.is_object()).ok_or(BadReview::NoRequest)?;
        let text = |v: Option<&Value>| v.and_then(Value::as_str).unwrap_or_default().to_string();
        let needed = |k: &'static str, v: Option<&Value>| v.and_then(Value::as_str).map(String::from).ok_or(BadReview::Missing(k));
        let uid = needed("uid", r.get("uid"))?;
        let resource = r.get("resource").ok_or(BadReview::Missing("resource"))?;
        let present = |k: &str| r.get(k).filter(|v| v.is_object()).cloned();
        Ok(Request {
            uid,
            group: text(resource.get("group")),
            version: needed("resource.version", resource.get("version"))?,
            resource: needed("resource.resource", resource.get("resource"))?,
            sub_resource: text(r.get("subResource")),
            operation: needed("operation", r.get("operation"))?,
            dry_run: r.get("dryRun").and_then(Value::as_bool).unwrap_or(false),
            object: present("object").or_else(|| present("oldObject")),
        })
    }
}

/// Whether handler `h`, whose resource resolved to `(group, version, plural)`, reviews `req`
/// as a mutating (else validating) webhook.
pub fn reviews(h: &Handler, resolved: (&str, &str, &str), mutating: bool, req: &Request) -> bool {
    let kind = if mutating { pb::HandlerKind::Mutate } else { pb::HandlerKind::Validate };
    let a = &h.admission;
    h.kind == kind
        && resolved == (req.group.as_str(), req.version.as_str(), req.resource.as_str())
        && (a.operations.is_empty() || a.operations.contains(&req.operation))
        && reviews_subresource(&a.subresources, &req.sub_resource)
        && req.object.as_ref().is_none_or(|o| h.matches_object(o))
}

/// Whether a handler registered for `subresources` (none: the main resource) reviews a request
/// about `sub` ("" for the main resource). As in Kopf, `*` matches any subresource and the
/// main resource alike; its webhook rule (`plural/*`) is what limits the requests sent.
fn reviews_subresource(subresources: &[String], sub: &str) -> bool {
    if subresources.iter().any(|s| s == "*") {
        return true;
    }
    if sub.is_empty() { subresources.is_empty() } else { subresources.iter().any(|s| s == sub) }
}

/// One handler's answer to a review.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// What the handler said.
    Said(pb::AdmitResponse),
    /// No usable answer: the handler server is unreachable or too slow, or the call failed.
    Failed(String),
}

/// The AdmissionReview sent back for `review` (its request `req`), given each matching
/// handler's answer, in the handlers' order.
pub fn respond(review: &Value, req: &Request, answers: &[(&Handler, Answer)]) -> Value {
    let mut denial: Option<(i32, String)> = None;
    let mut failure: Option<String> = None;
    let mut warnings: Vec<String> = Vec::new();
    let mut mutated = req.object.clone();
    for (h, answer) in answers {
        let broken = match answer {
            Answer::Said(said) => {
                warnings.extend(said.warnings.iter().cloned());
                if !said.allowed {
                    let code = if (400..=599).contains(&said.code) { said.code } else { 400 };
                    denial.get_or_insert_with(|| (code, said.message.clone()));
                    continue;
                }
                match (h.kind, said.merge_patch.is_empty(), mutated.as_mut()) {
                    (pb::HandlerKind::Mutate, false, Some(object)) => match crate::json::from_slice(&said.merge_patch) {
                        Ok(patch) if patch.is_object() => {
                            json_patch::merge(object, &patch);
                            continue;
                        }
                        Ok(_) => "its patch is not a JSON object".to_string(),
                        Err(e) => format!("its patch is not JSON: {e}"),
                    },
                    _ => continue,
                }
            }
            Answer::Failed(why) => why.clone(),
        };
        if h.admission.fail_closed {
            failure.get_or_insert_with(|| format!("Handler '{}' failed: {broken}", h.id));
        } else {
            warnings.push(format!("Handler '{}' was skipped: {broken}", h.id));
        }
    }
    let mut response = Map::new();
    response.insert("uid".into(), json!(req.uid));
    // The handlers' own denials first (Kopf prefers its AdmissionError to other errors).
    let denied = denial.or_else(|| failure.map(|message| (500, message)));
    response.insert("allowed".into(), json!(denied.is_none()));
    match denied {
        Some((code, message)) => {
            response.insert("status".into(), json!({"code": code, "message": message}));
        }
        None => {
            if let (Some(before), Some(after)) = (&req.object, &mutated)
                && before != after
            {
                let patch = serde_json::to_vec(&json_patch::diff(before, after)).expect("a JSON patch serializes");
                response.insert("patch".into(), json!(base64::engine::general_purpose::STANDARD.encode(patch)));
                response.insert("patchType".into(), json!("JSONPatch"));
            }
        }
    }
    if !warnings.is_empty() {
        response.insert("warnings".into(), json!(warnings));
    }
    json!({
        "apiVersion": review.get("apiVersion").and_then(Value::as_str).unwrap_or("admission.k8s.io/v1"),
        "kind": "AdmissionReview",
        "response": response,
    })
}

/// Where the API server reaches the controller's admission endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// A URL (`https://127.0.0.1:9443`): the dev cluster, or a controller outside the cluster.
    Url(String),
    /// A Service in the cluster (`--admission-service NS/NAME`).
    Service {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// Its port.
        port: u16,
    },
}

/// The longest webhook timeout the API server accepts.
pub const MAX_TIMEOUT_SECONDS: u64 = 30;

/// The `timeoutSeconds` of a handler's webhook: its call timeout, within what the API
/// server accepts.
pub fn timeout_seconds(h: &Handler) -> u64 {
    h.call_timeout.as_secs().clamp(1, MAX_TIMEOUT_SECONDS)
}

/// How long the controller waits for a handler's review: a little less than the webhook's
/// timeout, so that the API server gets the controller's answer (a denial when the handler
/// is fail-closed) rather than its own timeout.
pub fn call_deadline(h: &Handler) -> std::time::Duration {
    let timeout = std::time::Duration::from_secs(timeout_seconds(h));
    timeout.saturating_sub(std::time::Duration::from_millis(500)).max(std::time::Duration::from_millis(500)).min(h.call_timeout)
}

/// A webhook's name: the handler id made a DNS subdomain (`/` → `.`, `_` → `-`, other
/// characters hex-encoded, lower case), then `.suffix`; the API server wants at least three
/// dot-separated parts.
pub fn webhook_name(id: &str, suffix: &str) -> String {
    let mut name = String::new();
    for c in id.chars() {
        match c {
            '/' => name.push('.'),
            '_' => name.push('-'),
            c if c.is_ascii_alphanumeric() || c == '-' || c == '.' => name.push(c.to_ascii_lowercase()),
            c => {
                let mut buf = [0u8; 4];
                for b in c.encode_utf8(&mut buf).bytes() {
                    name.push_str(&format!("{b:02x}"));
                }
            }
        }
    }
    if suffix.is_empty() { name } else { format!("{name}.{suffix}") }
}

/// The path of a handler's endpoint: `/` and its id, percent-encoded.
pub fn webhook_path(id: &str) -> String {
    let mut path = String::from("/");
    for b in id.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b'/' => path.push(b as char),
            b => path.push_str(&format!("%{b:02X}")),
        }
    }
    path
}

/// The label selector of a handler's label filters that the API server can check itself.
fn object_selector(h: &Handler) -> Value {
    use super::registry::ValueCheck;
    let expressions: Vec<Value> = h
        .filters
        .labels
        .iter()
        .filter_map(|(key, check)| match check {
            ValueCheck::Present => Some(json!({"key": key, "operator": "Exists"})),
            ValueCheck::Absent => Some(json!({"key": key, "operator": "DoesNotExist"})),
            ValueCheck::Equals(Value::String(v)) => Some(json!({"key": key, "operator": "In", "values": [v]})),
            ValueCheck::Equals(_) => None,
        })
        .collect();
    if expressions.is_empty() { json!({}) } else { json!({"matchExpressions": expressions}) }
}

/// The `webhooks` of the controller's Validating- (or `mutating`: Mutating-)
/// WebhookConfiguration: one per handler of that kind, each with its own path, so that the
/// API server applies each handler's failure policy and timeout on its own (as Kopf does).
/// `handlers` come with their resources resolved to (group, version, plural); `ca_bundle`
/// is the PEM of the CA that signed the serving certificate; requests in
/// `own_namespace` (the controller's) are not reviewed, so a broken webhook cannot lock
/// the controller out of its own namespace.
pub fn webhooks(
    handlers: &[(&Handler, (&str, &str, &str))],
    mutating: bool,
    endpoint: &Endpoint,
    ca_bundle: &str,
    suffix: &str,
    own_namespace: Option<&str>,
) -> Vec<Value> {
    let kind = if mutating { pb::HandlerKind::Mutate } else { pb::HandlerKind::Validate };
    let ca = base64::engine::general_purpose::STANDARD.encode(ca_bundle);
    handlers
        .iter()
        .filter(|(h, _)| h.kind == kind)
        .map(|(h, (group, version, plural))| {
            let a = &h.admission;
            let path = webhook_path(&h.id);
            let client = match endpoint {
                Endpoint::Url(url) => json!({"url": format!("{}{path}", url.trim_end_matches('/')), "caBundle": ca}),
                Endpoint::Service { namespace, name, port } => {
                    json!({"service": {"namespace": namespace, "name": name, "port": port, "path": path}, "caBundle": ca})
                }
            };
            let resources: Vec<String> = if a.subresources.is_empty() {
                vec![plural.to_string()]
            } else {
                a.subresources.iter().map(|s| format!("{plural}/{s}")).collect()
            };
            let operations: Vec<&str> = if a.operations.is_empty() { vec!["*"] } else { a.operations.iter().map(String::as_str).collect() };
            let namespaces = match own_namespace {
                Some(ns) => json!({"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": [ns]}]}),
                None => json!({}),
            };
            let timeout = timeout_seconds(h);
            let mut hook = json!({
                "name": webhook_name(&h.id, suffix),
                "clientConfig": client,
                "rules": [{
                    "apiGroups": [group],
                    "apiVersions": [version],
                    "resources": resources,
                    "operations": operations,
                    "scope": "*",
                }],
                "sideEffects": if a.side_effects { "NoneOnDryRun" } else { "None" },
                "failurePolicy": if a.fail_closed { "Fail" } else { "Ignore" },
                "matchPolicy": "Equivalent",
                "namespaceSelector": namespaces,
                "objectSelector": object_selector(h),
                "timeoutSeconds": timeout,
                "admissionReviewVersions": ["v1"],
            });
            if mutating {
                hook["reinvocationPolicy"] = json!("Never");
            }
            hook
        })
        .collect()
}

/// The label of the webhook configurations a `bosun dev` made on a cluster others use.
pub const DEV_RUN_LABEL: &str = "bosun.dev/dev-run";

/// The longest `timeoutSeconds` of a `bosun dev`'s webhooks on a cluster others use.
pub const DEV_TIMEOUT_SECONDS: u64 = 5;

/// The whole webhook configuration object named `name`; `dev`: a `bosun dev`'s on a cluster
/// others use, whose webhooks fail open whatever their handlers say ([`for_setup`] shortened
/// their timeouts), labelled [`DEV_RUN_LABEL`].
pub fn configuration(name: &str, mutating: bool, mut webhooks: Vec<Value>, dev: bool) -> Value {
    let kind = if mutating { "MutatingWebhookConfiguration" } else { "ValidatingWebhookConfiguration" };
    let mut labels = json!({"app.kubernetes.io/managed-by": "bosun"});
    if dev {
        labels[DEV_RUN_LABEL] = json!("true");
        for hook in &mut webhooks {
            hook["failurePolicy"] = json!("Ignore");
        }
    }
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": kind,
        "metadata": {"name": name, "labels": labels},
        "webhooks": webhooks,
    })
}

/// The admission handler `h` as a controller set up so reviews it (`dev`: a `bosun dev`'s on a
/// cluster others use): its call timeout, and so its webhook's, at most
/// [`DEV_TIMEOUT_SECONDS`] in dev, so that a `bosun dev` stopped at a breakpoint holds
/// others' writes for no longer.
pub fn for_setup(h: &Handler, dev: bool) -> Handler {
    let mut h = h.clone();
    if dev {
        h.call_timeout = h.call_timeout.min(std::time::Duration::from_secs(DEV_TIMEOUT_SECONDS));
    }
    h
}

/// Whether a stored webhook configuration is one a `bosun dev` made ([`DEV_RUN_LABEL`]): left
/// by a run that is gone when the next run starts, removed then.
pub fn is_dev_run(stored: &Value) -> bool {
    stored.pointer("/metadata/labels").and_then(|l| l.get(DEV_RUN_LABEL)).and_then(Value::as_str) == Some("true")
}

/// The API path of the configuration named `name`.
pub fn configuration_path(name: &str, mutating: bool) -> String {
    let plural = if mutating { "mutatingwebhookconfigurations" } else { "validatingwebhookconfigurations" };
    format!("/apis/admissionregistration.k8s.io/v1/{plural}/{name}")
}

/// What to write to make the stored configuration (`existing`) the `desired` one.
#[derive(Debug, Clone, PartialEq)]
pub enum Write {
    /// It is as desired, or absent and not needed.
    Nothing,
    /// Absent: create it.
    Create(Value),
    /// There: a merge patch of its labels and webhooks (the list replaced whole).
    Patch(Value),
    /// There, and no handler of its kind is left: remove it.
    Delete,
}

/// The write that makes `existing` the `desired` configuration (from [`configuration`]). A
/// configuration without webhooks is not kept: the API server would call nothing anyway.
pub fn write_for(existing: Option<&Value>, desired: Value) -> Write {
    let empty = desired.get("webhooks").and_then(Value::as_array).is_none_or(Vec::is_empty);
    match (existing, empty) {
        (None, true) => Write::Nothing,
        (None, false) => Write::Create(desired),
        (Some(_), true) => Write::Delete,
        (Some(found), false) => {
            let mut labels = desired.pointer("/metadata/labels").cloned().unwrap_or_else(|| json!({}));
            let stored_labels = found.pointer("/metadata/labels").cloned().unwrap_or_else(|| json!({}));
            // A controller that is no dev run takes the label of one off: the next `bosun dev`
            // would remove the configuration as a dead run's.
            if is_dev_run(found) && !is_dev_run(&desired) {
                labels[DEV_RUN_LABEL] = Value::Null;
            }
            let has_labels = labels.as_object().into_iter().flatten().all(|(k, v)| stored_labels.get(k).unwrap_or(&Value::Null) == v);
            // The API server fills defaults into what it stores: the same webhooks compare
            // equal when every field given is stored as given.
            let same_hooks = match (found.get("webhooks").and_then(Value::as_array), desired["webhooks"].as_array()) {
                (Some(stored), Some(wanted)) => stored.len() == wanted.len() && stored.iter().zip(wanted).all(|(s, w)| contains(s, w)),
                _ => false,
            };
            if has_labels && same_hooks {
                Write::Nothing
            } else {
                Write::Patch(json!({"metadata": {"labels": labels}, "webhooks": desired["webhooks"]}))
            }
        }
    }
}

/// Whether `stored` has every field of `given`, with the same values (objects recursively;
/// lists and scalars exactly).
fn contains(stored: &Value, given: &Value) -> bool {
    match (stored, given) {
        (Value::Object(s), Value::Object(g)) => g.iter().all(|(k, v)| s.get(k).is_some_and(|sv| contains(sv, v))),
        (Value::Array(s), Value::Array(g)) => s.len() == g.len() && s.iter().zip(g).all(|(a, b)| contains(a, b)),
        _ => stored == given,
    }
}

#[cfg(test)]
#[path = "admission_tests.rs"]
mod tests;
