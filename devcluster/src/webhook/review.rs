//! The AdmissionReview a webhook is sent, and what its answer means, as the real server's
//! `request.CreateAdmissionObjects` / `VerifyAdmissionResponse` and `webhookerrors.ToStatusErr`
//! build and read them. Pure: no I/O.

use base64::Engine;
use serde_json::{Map, Value, json};

use super::attributes::{Attributes, Context, Operation};
use crate::status::ApiError;

/// The `request` of an AdmissionReview for `attrs`, with this `uid`, in the version the
/// webhook accepts (`admission.k8s.io/v1` or `v1beta1`, which have the same shape).
pub fn request(
    attrs: &Attributes,
    kind_version: &str,
    uid: &str,
    review_version: &str,
    object: Option<&Value>,
    old: Option<&Value>,
) -> Value {
    let gvk = json!({"group": attrs.info.group, "version": kind_version, "kind": attrs.info.kind});
    let gvr = json!({"group": attrs.info.group, "version": kind_version, "resource": attrs.info.plural});
    let mut req = Map::new();
    req.insert("uid".into(), json!(uid));
    req.insert("kind".into(), gvk);
    req.insert("resource".into(), gvr);
    if !attrs.subresource.is_empty() {
        req.insert("subResource".into(), json!(attrs.subresource));
    }
    req.insert("requestKind".into(), json!({"group": attrs.info.group, "version": attrs.info.version, "kind": attrs.info.kind}));
    req.insert("requestResource".into(), json!({"group": attrs.info.group, "version": attrs.info.version, "resource": attrs.info.plural}));
    if !attrs.subresource.is_empty() {
        req.insert("requestSubResource".into(), json!(attrs.subresource));
    }
    if !attrs.name.is_empty() {
        req.insert("name".into(), json!(attrs.name));
    }
    if !attrs.namespace.is_empty() {
        req.insert("namespace".into(), json!(attrs.namespace));
    }
    req.insert("operation".into(), json!(attrs.operation.as_str()));
    let mut user = Map::new();
    user.insert("username".into(), json!(attrs.context.caller.username));
    if let Some(uid) = &attrs.context.caller.uid {
        user.insert("uid".into(), json!(uid));
    }
    if !attrs.context.caller.groups.is_empty() {
        user.insert("groups".into(), json!(attrs.context.caller.groups));
    }
    req.insert("userInfo".into(), Value::Object(user));
    let at_version = |o: &Value| {
        let mut o = o.clone();
        if kind_version != attrs.info.version {
            o["apiVersion"] = json!(match attrs.info.group.as_str() {
                "" => kind_version.to_string(),
                g => format!("{g}/{}", kind_version),
            });
        }
        o
    };
    req.insert("object".into(), object.map(at_version).unwrap_or(Value::Null));
    req.insert("oldObject".into(), old.map(at_version).unwrap_or(Value::Null));
    req.insert("dryRun".into(), json!(attrs.context.dry_run));
    req.insert("options".into(), attrs.context.options(attrs.operation));
    json!({"kind": "AdmissionReview", "apiVersion": format!("admission.k8s.io/{review_version}"), "request": req})
}

/// What a webhook answered.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    /// `response.allowed`.
    pub allowed: bool,
    /// `response.status`, when the webhook gave one.
    pub status: Option<Value>,
    /// The decoded JSONPatch (`patchType: JSONPatch`), if any.
    pub patch: Option<Vec<u8>>,
    /// `response.warnings`.
    pub warnings: Vec<String>,
}

/// Read a webhook's answer to the review `uid`, or say why it is not a valid one (the text
/// after `received invalid webhook response: `, or, for an undecodable body, the reason the
/// call failed).
pub fn read_answer(body: &[u8], uid: &str, mutating: bool, review_version: &str) -> Result<Answer, Invalid> {
    let review: Value =
        serde_json::from_slice(body).map_err(|e| Invalid::Undecodable(format!("couldn't get version/kind; json parse error: {e}")))?;
    let Some(review) = review.as_object() else {
        return Err(Invalid::Undecodable("json: cannot unmarshal into Go value of type v1.AdmissionReview".into()));
    };
    let response = match review.get("response") {
        Some(r @ Value::Object(_)) => r,
        _ => return Err(Invalid::Response("webhook response was absent".into())),
    };
    let got_uid = response.get("uid").and_then(Value::as_str).unwrap_or("");
    if got_uid != uid {
        return Err(Invalid::Response(format!("expected response.uid={uid:?}, got {got_uid:?}")));
    }
    let api_version = review.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    let kind = review.get("kind").and_then(Value::as_str).unwrap_or("");
    let want = format!("admission.k8s.io/{review_version}");
    if api_version != want || kind != "AdmissionReview" {
        return Err(Invalid::Response(format!(
            "expected webhook response of {want}, Kind=AdmissionReview, got {}",
            gvk_string(api_version, kind)
        )));
    }
    let patch = match response.get("patch").and_then(Value::as_str).filter(|p| !p.is_empty()) {
        None => None,
        Some(text) => {
            if !mutating {
                return Err(Invalid::Response("validating webhooks may not return patches".into()));
            }
            match response.get("patchType").and_then(Value::as_str) {
                None => return Err(Invalid::Response("webhook returned response.patch but not response.patchType".into())),
                Some("JSONPatch") => {}
                Some(other) => return Err(Invalid::Response(format!("webhook returned invalid response.patchType of {other:?}"))),
            }
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(text)
                .map_err(|e| Invalid::Undecodable(format!("illegal base64 data in response.patch: {e}")))?;
            Some(bytes)
        }
    };
    Ok(Answer {
        allowed: response.get("allowed").and_then(Value::as_bool).unwrap_or(false),
        status: response.get("status").filter(|s| s.is_object()).cloned(),
        patch,
        warnings: response
            .get("warnings")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).map(String::from).collect())
            .unwrap_or_default(),
    })
}

/// Go's `schema.GroupVersionKind.String()`.
fn gvk_string(api_version: &str, kind: &str) -> String {
    match api_version.split_once('/') {
        Some((g, v)) => format!("{g}/{v}, Kind={kind}"),
        None => format!("/{api_version}, Kind={kind}"),
    }
}

/// Why a webhook's answer was not used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Invalid {
    /// The body is not an AdmissionReview at all (the client's decoding failed).
    Undecodable(String),
    /// An AdmissionReview that breaks the protocol.
    Response(String),
}

impl Invalid {
    /// The reason the call counts as failed, as `ErrCallingWebhook` words it after the name.
    pub fn reason(&self) -> String {
        match self {
            Invalid::Undecodable(why) => format!("failed to call webhook: {why}"),
            Invalid::Response(why) => format!("received invalid webhook response: {why}"),
        }
    }
}

/// The error a denial is answered with (`webhookerrors.ToStatusErr`): the webhook's status
/// with its message prefixed, a code of at least 400, and status `Failure`.
pub fn denial(webhook: &str, status: Option<&Value>) -> ApiError {
    let status = status.cloned().unwrap_or(Value::Null);
    let denied_by = format!("admission webhook {webhook:?} denied the request");
    let text = |k: &str| status.get(k).and_then(Value::as_str).filter(|s| !s.is_empty()).map(String::from);
    let message = match (text("message"), text("reason")) {
        (Some(m), _) => format!("{denied_by}: {m}"),
        (None, Some(r)) => format!("{denied_by}: {r}"),
        (None, None) => format!("{denied_by} without explanation"),
    };
    let code = status.get("code").and_then(Value::as_u64).filter(|c| (400..=599).contains(c)).unwrap_or(400) as u16;
    let mut e = ApiError::internal(message);
    e.code = code;
    e.reason = reason_static(text("reason").as_deref());
    e.details = status.get("details").filter(|d| d.is_object()).map(|d| Box::new(d.clone()));
    e
}

/// A webhook's `status.reason`, kept when it is one of the API's reasons (the dev cluster's
/// errors carry static reasons; any other text is left out of the Status).
fn reason_static(reason: Option<&str>) -> &'static str {
    const REASONS: &[&str] = &[
        "Unauthorized",
        "Forbidden",
        "NotFound",
        "AlreadyExists",
        "Conflict",
        "Gone",
        "Invalid",
        "ServerTimeout",
        "StoreReadError",
        "Timeout",
        "TooManyRequests",
        "BadRequest",
        "MethodNotAllowed",
        "NotAcceptable",
        "RequestEntityTooLarge",
        "UnsupportedMediaType",
        "InternalError",
        "Expired",
        "ServiceUnavailable",
    ];
    reason.and_then(|r| REASONS.iter().find(|x| **x == r).copied()).unwrap_or("")
}

impl Context {
    /// The review's `options`: `CreateOptions`, `UpdateOptions` (a PATCH's too, as the real
    /// server converts them) or `DeleteOptions`.
    pub fn options(&self, op: Operation) -> Value {
        match op {
            Operation::Create => options("CreateOptions", &self.options),
            Operation::Update => options("UpdateOptions", &self.options),
            Operation::Delete => options("DeleteOptions", &self.options),
            Operation::Connect => Value::Null,
        }
    }
}

/// `options` of a review: the request's options object, converted to the operation's kind.
pub fn options(kind: &str, fields: &Map<String, Value>) -> Value {
    let mut out = Map::new();
    out.insert("kind".into(), json!(kind));
    out.insert("apiVersion".into(), json!("meta.k8s.io/v1"));
    for (k, v) in fields {
        let keep = match kind {
            "DeleteOptions" => {
                matches!(k.as_str(), "dryRun" | "gracePeriodSeconds" | "preconditions" | "orphanDependents" | "propagationPolicy")
            }
            _ => matches!(k.as_str(), "dryRun" | "fieldManager" | "fieldValidation"),
        };
        if keep {
            out.insert(k.clone(), v.clone());
        }
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn review(response: Value) -> Vec<u8> {
        serde_json::to_vec(&json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response})).unwrap()
    }

    #[test]
    fn answers_are_read_or_refused_as_the_real_server_reads_them() {
        let patch = base64::engine::general_purpose::STANDARD.encode(br#"[{"op":"add","path":"/x","value":1}]"#);
        let ok = |r: Value, mutating: bool| read_answer(&review(r), "u1", mutating, "v1");
        type Case = (Result<Answer, Invalid>, Result<bool, &'static str>);
        let cases: Vec<Case> = vec![
            (ok(json!({"uid": "u1", "allowed": true}), false), Ok(true)),
            (ok(json!({"uid": "u1", "allowed": false}), false), Ok(false)),
            (ok(json!({"uid": "u1"}), false), Ok(false)),
            (
                ok(json!({"uid": "u2", "allowed": true}), false),
                Err(r#"received invalid webhook response: expected response.uid="u1", got "u2""#),
            ),
            (ok(json!(null), false), Err("received invalid webhook response: webhook response was absent")),
            (
                ok(json!({"uid": "u1", "allowed": true, "patch": patch, "patchType": "JSONPatch"}), false),
                Err("received invalid webhook response: validating webhooks may not return patches"),
            ),
            (
                ok(json!({"uid": "u1", "allowed": true, "patch": patch}), true),
                Err("received invalid webhook response: webhook returned response.patch but not response.patchType"),
            ),
            (
                ok(json!({"uid": "u1", "allowed": true, "patch": patch, "patchType": "Merge"}), true),
                Err(r#"received invalid webhook response: webhook returned invalid response.patchType of "Merge""#),
            ),
            (ok(json!({"uid": "u1", "allowed": true, "patch": patch, "patchType": "JSONPatch"}), true), Ok(true)),
            (
                read_answer(b"not json", "u1", false, "v1"),
                Err("failed to call webhook: couldn't get version/kind; json parse error: expected ident at line 1 column 2"),
            ),
            (
                read_answer(br#"{"apiVersion":"v1","kind":"Status","response":{"uid":"u1"}}"#, "u1", false, "v1"),
                Err(
                    "received invalid webhook response: expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got /v1, Kind=Status",
                ),
            ),
        ];
        for (got, want) in cases {
            match (got, want) {
                (Ok(a), Ok(allowed)) => assert_eq!(a.allowed, allowed),
                (Err(e), Err(text)) => assert_eq!(e.reason(), text),
                (got, want) => panic!("{got:?} is not {want:?}"),
            }
        }
        let a = ok(json!({"uid": "u1", "allowed": true, "patch": patch, "patchType": "JSONPatch", "warnings": ["careful"]}), true).unwrap();
        assert_eq!(a.patch.as_deref(), Some(&br#"[{"op":"add","path":"/x","value":1}]"#[..]));
        assert_eq!(a.warnings, vec!["careful".to_string()]);
    }

    #[test]
    fn a_denial_keeps_the_webhooks_code_and_reason_and_prefixes_its_message() {
        let cases: Vec<(Option<Value>, u16, &str, &str)> = vec![
            (Some(json!({"code": 403, "message": "no"})), 403, "", r#"admission webhook "w" denied the request: no"#),
            (Some(json!({"code": 422, "reason": "Invalid"})), 422, "Invalid", r#"admission webhook "w" denied the request: Invalid"#),
            (Some(json!({"code": 200, "message": "m"})), 400, "", r#"admission webhook "w" denied the request: m"#),
            (Some(json!({})), 400, "", r#"admission webhook "w" denied the request without explanation"#),
            (None, 400, "", r#"admission webhook "w" denied the request without explanation"#),
            (Some(json!({"code": "x", "message": 7})), 400, "", r#"admission webhook "w" denied the request without explanation"#),
        ];
        for (status, code, reason, message) in cases {
            let e = denial("w", status.as_ref());
            assert_eq!((e.code, e.reason, e.message.as_str()), (code, reason, message), "{status:?}");
            assert_eq!(e.to_status()["status"], "Failure");
        }
    }

    #[test]
    fn requests_name_the_resource_the_caller_the_objects_and_the_options() {
        use crate::webhook::{Attributes, Caller, Context, Operation};
        let registry = crate::registry::Registry::with_builtins();
        let (configmaps, namespaces) = (registry.get("", "v1", "configmaps").unwrap(), registry.get("", "v1", "namespaces").unwrap());
        let caller = Caller { username: "system:serviceaccount:ns:sa".into(), uid: None, groups: vec!["system:serviceaccounts".into()] };
        let options: Map<String, Value> = serde_json::from_value(json!({"fieldManager": "m", "dryRun": ["All"]})).unwrap();
        let ctx = Context { caller, dry_run: true, options };
        let obj = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"generateName": "c-"}});
        let create = Attributes::new(&configmaps, "ns", "", "", Operation::Create, &ctx);
        let r = request(&create, "v1", "u", "v1", Some(&obj), None);
        assert_eq!(r["apiVersion"], "admission.k8s.io/v1");
        let q = &r["request"];
        assert_eq!(q["kind"], json!({"group": "", "version": "v1", "kind": "ConfigMap"}));
        assert_eq!(q["resource"], json!({"group": "", "version": "v1", "resource": "configmaps"}));
        assert_eq!((q.get("name"), q["namespace"].as_str(), q["operation"].as_str()), (None, Some("ns"), Some("CREATE")));
        assert_eq!(q["userInfo"], json!({"username": "system:serviceaccount:ns:sa", "groups": ["system:serviceaccounts"]}));
        assert_eq!((q["object"].clone(), q["oldObject"].clone(), q["dryRun"].clone()), (obj.clone(), Value::Null, json!(true)));
        assert_eq!(q["options"], json!({"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1", "fieldManager": "m", "dryRun": ["All"]}));
        let delete = Attributes::new(&namespaces, "", "team", "", Operation::Delete, &ctx);
        let q = request(&delete, "v1", "u", "v1beta1", None, Some(&obj));
        assert_eq!(q["apiVersion"], "admission.k8s.io/v1beta1");
        assert_eq!(
            (q["request"]["namespace"].as_str(), q["request"]["name"].as_str()),
            (Some("team"), Some("team")),
            "a Namespace's own name"
        );
        assert_eq!((q["request"]["object"].is_null(), q["request"]["options"]["kind"].as_str()), (true, Some("DeleteOptions")));
    }

    #[test]
    fn options_carry_the_operations_kind_and_its_own_fields() {
        let fields: Map<String, Value> =
            serde_json::from_value(json!({"fieldManager": "kubectl", "dryRun": ["All"], "propagationPolicy": "Background", "force": true}))
                .unwrap();
        assert_eq!(
            options("CreateOptions", &fields),
            json!({"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1", "fieldManager": "kubectl", "dryRun": ["All"]})
        );
        assert_eq!(
            options("DeleteOptions", &fields),
            json!({"kind": "DeleteOptions", "apiVersion": "meta.k8s.io/v1", "dryRun": ["All"], "propagationPolicy": "Background"})
        );
        assert_eq!(options("UpdateOptions", &fields).get("force"), None);
    }
}
