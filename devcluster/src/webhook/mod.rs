//! Admission webhooks, called as kube-apiserver calls them: on a create, update, patch or
//! delete, the matching mutating webhooks one after another (configurations by name, then
//! webhooks in their order), each one's JSONPatch applied before the next is called; then,
//! once defaults and validation have run, the matching validating webhooks at once. Their
//! denials, failures and warnings reach the client worded as the real server words them.
//!
//! The writes (`ops`) run on blocking threads and call [`mutate`] and [`validate`], which
//! block until the webhooks answered. Writes the dev cluster makes itself (garbage
//! collection, namespace cleanup) carry no [`Context`] and call no webhook; nor does a write
//! of the webhook configurations themselves, as on a real server.
//!
//! The parts: [`attributes`] holds the types they share (`Attributes`, `Context`,
//! `Operation`), [`rules`] decides which webhooks a request calls (pure), [`review`] builds the
//! AdmissionReview and reads the answer (pure), [`call`] is the HTTPS client.

pub mod attributes;
pub mod call;
pub mod review;
pub mod rules;

pub use attributes::{Attributes, Caller, Context, Operation};

use std::time::Duration;

use base64::Engine;
use serde_json::{Value, json};

use crate::cluster::Cluster;
use crate::status::{ApiError, ApiResult};

/// The group whose objects (the webhook configurations among them) are never sent to webhooks.
const EXEMPT_GROUP: &str = "admissionregistration.k8s.io";

/// A webhook of a configuration, with the version it is called at.
#[derive(Debug, Clone)]
struct Hook {
    value: Value,
    name: String,
    version: String,
}

impl Hook {
    fn str(&self, k: &str) -> Option<&str> {
        self.value.get(k).and_then(Value::as_str)
    }

    fn ignores_failures(&self) -> bool {
        self.str("failurePolicy") == Some("Ignore")
    }
}

/// Call the matching mutating webhooks on `object`, applying their patches. Returns their
/// warnings.
pub fn mutate(cluster: &Cluster, attrs: &Attributes, object: &mut Value, old: Option<&Value>) -> ApiResult<Vec<String>> {
    // a delete's mutating webhooks see no object, and their patches have none to change
    let present = !object.is_null();
    let hooks = matching(cluster, attrs, "mutatingwebhookconfigurations", present.then_some(&*object), old)?;
    if hooks.is_empty() {
        return Ok(Vec::new());
    }
    let mut warnings = Vec::new();
    let outcome = blocking(async {
        // `reinvocationPolicy: IfNeeded`: a webhook called before a later one changed the
        // object is called once more after the others, as the real server's second round
        let (mut invoked, mut again) = (Vec::new(), Vec::new());
        for (i, hook) in hooks.iter().enumerate() {
            if call_mutating(hook, attrs, object, present, old, &mut warnings).await? {
                again.append(&mut invoked);
            }
            if hook.str("reinvocationPolicy") == Some("IfNeeded") {
                invoked.push(i);
            }
        }
        again.sort_unstable();
        for i in again {
            call_mutating(&hooks[i], attrs, object, present, old, &mut warnings).await?;
        }
        Ok(())
    })
    .and_then(|r| r);
    finish(outcome, warnings)
}

/// Call one mutating webhook and apply its patch; whether the object changed.
async fn call_mutating(
    hook: &Hook,
    attrs: &Attributes<'_>,
    object: &mut Value,
    present: bool,
    old: Option<&Value>,
    warnings: &mut Vec<String>,
) -> ApiResult<bool> {
    let Some(answer) = invoke(hook, attrs, present.then_some(&*object), old, true).await? else { return Ok(false) };
    warnings.extend(answer.warnings.iter().cloned());
    if !answer.allowed {
        return Err(review::denial(&hook.name, answer.status.as_ref()));
    }
    let Some(patch) = answer.patch.as_deref() else { return Ok(false) };
    let ops = match decode_patch(patch) {
        Ok(ops) => ops,
        Err(why) => {
            failed::<()>(hook, format!("received undecodable patch in webhook response: {why}"))?;
            return Ok(false);
        }
    };
    if ops.0.is_empty() {
        return Ok(false);
    }
    if !present {
        return Err(ApiError::internal_error(format!(
            "admission webhook {:?} attempted to modify the object, which is not supported for this operation",
            hook.name
        )));
    }
    let before = object.clone();
    apply_patch(object, &ops)?;
    Ok(*object != before)
}

/// Call the matching validating webhooks (at once) on the object about to be stored
/// (`object`, none on a delete) and the stored one (`old`, none on a create). Returns their
/// warnings, or the first refusal in webhook order.
pub fn validate(cluster: &Cluster, attrs: &Attributes, object: Option<&Value>, old: Option<&Value>) -> ApiResult<Vec<String>> {
    let hooks = matching(cluster, attrs, "validatingwebhookconfigurations", object, old)?;
    if hooks.is_empty() {
        return Ok(Vec::new());
    }
    let results = blocking(futures::future::join_all(hooks.iter().map(|hook| invoke(hook, attrs, object, old, false))))?;
    let mut warnings = Vec::new();
    let mut refusal = None;
    for (hook, result) in hooks.iter().zip(results) {
        let e = match result {
            Ok(None) => continue,
            Ok(Some(answer)) => {
                warnings.extend(answer.warnings.iter().cloned());
                if answer.allowed {
                    continue;
                }
                review::denial(&hook.name, answer.status.as_ref())
            }
            Err(e) => e,
        };
        refusal.get_or_insert(e);
    }
    finish(refusal.map_or(Ok(()), Err), warnings)
}

/// The webhooks' warnings, each once (as the real server's warning recorder keeps them), with
/// the outcome: on a refusal they go with the error.
fn finish(outcome: ApiResult<()>, mut warnings: Vec<String>) -> ApiResult<Vec<String>> {
    let mut seen = std::collections::HashSet::new();
    warnings.retain(|w| seen.insert(w.clone()));
    match outcome {
        Ok(()) => Ok(warnings),
        Err(mut e) => {
            e.warnings.splice(0..0, warnings);
            Err(e)
        }
    }
}

/// A mutating webhook's JSONPatch, or why it is none (in the words of Go's decoder for a
/// JSON value of the wrong type).
fn decode_patch(patch: &[u8]) -> Result<json_patch::Patch, String> {
    let value: Value = serde_json::from_slice(patch).map_err(|e| e.to_string())?;
    let go_type = match &value {
        Value::Array(_) => return serde_json::from_value(value).map_err(|e| e.to_string()),
        Value::Object(_) => "object",
        Value::String(_) => "string",
        Value::Number(_) => "number",
        Value::Bool(_) => "bool",
        Value::Null => return Ok(json_patch::Patch(Vec::new())),
    };
    Err(format!("json: cannot unmarshal {go_type} into Go value of type jsonpatch.Patch"))
}

/// Apply a mutating webhook's JSONPatch, as the real server does: a patch that does not apply
/// is an internal error.
fn apply_patch(object: &mut Value, ops: &json_patch::Patch) -> ApiResult<()> {
    let api_version = object.get("apiVersion").cloned();
    json_patch::patch(object, ops).map_err(|e| ApiError::internal_error(e.to_string()))?;
    if !object.is_object() {
        return Err(ApiError::internal_error("the patched object is not an object"));
    }
    // the object was sent at the webhook's version; the dev cluster converts by renaming
    if let Some(av) = api_version {
        object["apiVersion"] = av;
    }
    Ok(())
}

/// The webhooks of the configurations in `table` that `attrs` calls, in the order the real
/// server calls them (configurations by name, webhooks in their order).
fn matching(cluster: &Cluster, attrs: &Attributes, table: &str, object: Option<&Value>, old: Option<&Value>) -> ApiResult<Vec<Hook>> {
    if attrs.info.group == EXEMPT_GROUP {
        return Ok(Vec::new());
    }
    let Some(info) = cluster.registry.get(EXEMPT_GROUP, "v1", table) else { return Ok(Vec::new()) };
    let (mut configs, _) = cluster.table(&info).list(None);
    if configs.is_empty() {
        return Ok(Vec::new());
    }
    configs.sort_by(|a, b| a.name().cmp(b.name()));
    let Some(namespace_labels) = namespace_labels(cluster, attrs, object, old) else {
        // refused before any webhook, as the real server's NamespaceLifecycle plugin does
        return Ok(Vec::new());
    };
    let versions: Vec<String> = cluster
        .registry
        .all()
        .iter()
        .filter(|i| i.group == attrs.info.group && i.plural == attrs.info.plural && i.version != attrs.info.version)
        .map(|i| i.version.clone())
        .collect();
    let mut hooks = Vec::new();
    for config in configs {
        for hook in config.value.get("webhooks").and_then(Value::as_array).into_iter().flatten() {
            let name = hook.get("name").and_then(Value::as_str).unwrap_or("").to_string();
            let target = |version: &'_ str| -> bool {
                let t = rules::Target {
                    operation: attrs.operation,
                    group: &attrs.info.group,
                    version,
                    resource: &attrs.info.plural,
                    subresource: attrs.subresource,
                    namespace: attrs.namespace,
                };
                rules::rules_match(hook, &t)
            };
            let version = if target(&attrs.info.version) {
                Some(attrs.info.version.clone())
            } else if hook.get("matchPolicy").and_then(Value::as_str) != Some("Exact") {
                versions.iter().find(|v| target(v)).cloned()
            } else {
                None
            };
            // a selector that cannot be read fails only the requests the rules match
            let selected = || -> Result<bool, String> {
                Ok(rules::namespace_matches(hook, namespace_labels.as_ref())? && rules::object_matches(hook, object, old)?)
            };
            if version.is_some() && !selected().map_err(ApiError::internal_error)? {
                continue;
            }
            if let Some(version) = version {
                hooks.push(Hook { value: hook.clone(), name, version });
            }
        }
    }
    Ok(hooks)
}

/// The labels a `namespaceSelector` looks at: the request's namespace's, a Namespace's own
/// (the old object's on a delete), none for other cluster-scoped objects (`Some(None)`).
/// `None` when the write is refused before any webhook is called: its namespace does not
/// exist, or is being terminated and the write is a create.
fn namespace_labels(cluster: &Cluster, attrs: &Attributes, object: Option<&Value>, old: Option<&Value>) -> Option<Option<Value>> {
    let labels = |o: &Value| o.pointer("/metadata/labels").cloned().unwrap_or_else(|| json!({}));
    if attributes::is_namespace(attrs.info) && attrs.subresource.is_empty() {
        let own = if attrs.operation == Operation::Delete { old } else { object.or(old) };
        return Some(Some(own.map(labels).unwrap_or_else(|| json!({}))));
    }
    if attrs.namespace.is_empty() {
        return Some(None);
    }
    let namespace = cluster.namespace(attrs.namespace)?;
    if attrs.operation == Operation::Create && crate::registry::terminating(&namespace) {
        return None;
    }
    Some(Some(labels(&namespace)))
}

/// Call one webhook: `Ok(None)` when its failure is ignored, the refusal otherwise.
async fn invoke(
    hook: &Hook,
    attrs: &Attributes<'_>,
    object: Option<&Value>,
    old: Option<&Value>,
    mutating: bool,
) -> ApiResult<Option<review::Answer>> {
    if attrs.context.dry_run {
        match hook.str("sideEffects") {
            Some("None" | "NoneOnDryRun") => {}
            None => return failed(hook, "Webhook SideEffects is nil".into()),
            Some(_) => return Err(ApiError::bad_request(format!("admission webhook {:?} does not support dry run", hook.name))),
        }
    }
    let versions: Vec<&str> =
        hook.value.get("admissionReviewVersions").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect();
    let Some(review_version) = ["v1", "v1beta1"].into_iter().find(|v| versions.contains(v)) else {
        return failed(hook, "could not create admission objects: webhook does not accept known AdmissionReview versions".into());
    };
    let uid = uuid::Uuid::new_v4().to_string();
    let sent = review::request(attrs, &hook.version, &uid, review_version, object, old);
    let timeout = Duration::from_secs(hook.value.get("timeoutSeconds").and_then(Value::as_u64).unwrap_or(10).clamp(1, 30));
    let (url, ca) = match target(hook, timeout) {
        Ok(t) => t,
        Err(why) => return failed(hook, why),
    };
    let body = serde_json::to_vec(&sent).unwrap_or_default();
    let reply = match call::post(&url, ca.as_deref(), body, timeout).await {
        Ok(r) => r,
        Err(why) => return failed(hook, format!("failed to call webhook: {why}")),
    };
    if !(200..300).contains(&reply.code) {
        return failed(hook, format!("failed to call webhook: {}", call::status_error(reply.code, &reply.body)));
    }
    match review::read_answer(&reply.body, &uid, mutating, review_version) {
        Ok(answer) => Ok(Some(answer)),
        Err(invalid) => failed(hook, invalid.reason()),
    }
}

/// Where to send a webhook's reviews: its URL with `?timeout=`, and its CA bundle (PEM).
fn target(hook: &Hook, timeout: Duration) -> Result<(String, Option<Vec<u8>>), String> {
    let config = hook.value.get("clientConfig").cloned().unwrap_or(Value::Null);
    let ca = match config.get("caBundle").and_then(Value::as_str).filter(|s| !s.is_empty()) {
        None => None,
        Some(b64) => {
            let pem = base64::engine::general_purpose::STANDARD.decode(b64.trim()).unwrap_or_default();
            if !String::from_utf8_lossy(&pem).contains("-----BEGIN CERTIFICATE-----") {
                return Err("could not get REST client: unable to load root certificates: unable to parse bytes as PEM block".into());
            }
            Some(pem)
        }
    };
    if let Some(url) = config.get("url").and_then(Value::as_str) {
        return Ok((call::with_timeout(url, timeout), ca));
    }
    if let Some(service) = config.get("service").filter(|s| s.is_object()) {
        let s = |k: &str| service.get(k).and_then(Value::as_str).unwrap_or("");
        let port = service.get("port").and_then(Value::as_u64).unwrap_or(443);
        let path = if s("path").is_empty() { "/" } else { s("path") };
        let url = call::with_timeout(&format!("https://{}.{}.svc:{port}{path}", s("name"), s("namespace")), timeout);
        // The dev cluster runs no pods: a service has no endpoints to send the review to.
        return Err(format!("failed to call webhook: Post {url:?}: no endpoints available for service {:?}", s("name")));
    }
    Err("could not get REST client: webhook clientConfig has neither url nor service".into())
}

/// A failed call (`ErrCallingWebhook`): ignored under `failurePolicy: Ignore`, a 500
/// otherwise.
fn failed<T>(hook: &Hook, reason: String) -> ApiResult<Option<T>> {
    let text = format!("failed calling webhook {:?}: {reason}", hook.name);
    if hook.ignores_failures() {
        tracing::warn!("Failed calling webhook, failing open {}: {text}", hook.name);
        return Ok(None);
    }
    tracing::warn!("Failed calling webhook, failing closed {}: {text}", hook.name);
    Err(ApiError::internal_error(text))
}

/// Run `fut` to completion from the blocking thread of a write, on a runtime of its own (the
/// write may be on any thread, inside a runtime or not).
fn blocking<T: Send>(fut: impl std::future::Future<Output = T> + Send) -> ApiResult<T> {
    std::thread::scope(|s| {
        s.spawn(|| {
            let rt =
                tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| ApiError::internal_error(e.to_string()))?;
            Ok(rt.block_on(fut))
        })
        .join()
        .unwrap_or_else(|_| Err(ApiError::internal_error("calling webhooks failed")))
    })
}
