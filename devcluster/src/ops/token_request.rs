//! `serviceaccounts/NAME/token` (`kubectl create token`): a TokenRequest answered with a
//! signed token for the service account, optionally bound to a Pod or Secret, as the real
//! `TokenREST` answers it; and the check that lets such a token authenticate requests, as its
//! service account, while that account (and the bound object) still exist.

use serde_json::{Map, Value, json};

use crate::cluster::Cluster;
use crate::status::{ApiError, ApiResult, Cause};
use crate::token::{ISSUER, TokenError};

/// The default of `spec.expirationSeconds` (one hour).
const DEFAULT_EXPIRATION: i64 = 3600;

/// Answer the TokenRequest `body` for the service account `ns/name`.
pub fn request(cluster: &Cluster, ns: &str, name: &str, body: &Value) -> ApiResult<Value> {
    let invalid = |field: &str, value: &str, why: &str, obj: &str| {
        let cause = Cause::new("FieldValueInvalid", format!("Invalid value: {value:?}: {why}"), field);
        ApiError::invalid("TokenRequest.authentication.k8s.io", "authentication.k8s.io", "TokenRequest", obj, vec![cause])
    };
    let meta = |k: &str| body.pointer(&format!("/metadata/{k}")).and_then(Value::as_str).unwrap_or("");
    if !meta("name").is_empty() && meta("name") != name {
        return Err(invalid("metadata.name", meta("name"), "must match the service account name if specified", name));
    }
    if !meta("namespace").is_empty() && meta("namespace") != ns {
        return Err(invalid("metadata.namespace", meta("namespace"), "must match the service account namespace if specified", name));
    }
    let accounts = cluster.core("serviceaccounts");
    let account = cluster.table(&accounts).get(ns, name).ok_or_else(|| ApiError::not_found(&accounts, name))?.value.clone();
    let mut audiences: Vec<Value> = body.pointer("/spec/audiences").and_then(Value::as_array).cloned().unwrap_or_default();
    if audiences.is_empty() {
        audiences.push(json!(ISSUER));
    }
    let expiration = match body.pointer("/spec/expirationSeconds") {
        None | Some(Value::Null) => DEFAULT_EXPIRATION,
        Some(v) => v
            .as_i64()
            .ok_or_else(|| ApiError::cannot_decode("TokenRequest", "v1", "TokenRequestSpec.spec.expirationSeconds", "int64", v))?,
    };
    let bound_ref = body.pointer("/spec/boundObjectRef").filter(|r| !r.is_null()).cloned();
    let mut kube = Map::new();
    kube.insert("namespace".into(), json!(ns));
    kube.insert("serviceaccount".into(), json!({"name": name, "uid": account["metadata"]["uid"]}));
    if let Some(r) = &bound_ref {
        let (claim, bound) = bound_object(cluster, ns, name, r)?;
        kube.insert(claim.into(), bound);
    }
    let why = if expiration < 600 {
        Some("may not specify a duration less than 10 minutes")
    } else if expiration > 1 << 32 {
        Some("may not specify a duration larger than 2^32 seconds")
    } else {
        None
    };
    if let Some(why) = why {
        let cause = Cause::new("FieldValueInvalid", format!("Invalid value: {expiration}: {why}"), "spec.expirationSeconds");
        return Err(ApiError::invalid("TokenRequest.authentication.k8s.io", "authentication.k8s.io", "TokenRequest", "", vec![cause]));
    }
    let now = chrono::Utc::now();
    let expires = now + chrono::Duration::seconds(expiration);
    let claims = json!({
        "aud": audiences, "exp": expires.timestamp(), "iat": now.timestamp(), "iss": ISSUER,
        "jti": uuid::Uuid::new_v4().to_string(), "kubernetes.io": kube, "nbf": now.timestamp(),
        "sub": format!("system:serviceaccount:{ns}:{name}"),
    });
    let stamp = |t: chrono::DateTime<chrono::Utc>| t.format("%Y-%m-%dT%H:%M:%SZ").to_string();
    Ok(json!({
        "kind": "TokenRequest", "apiVersion": "authentication.k8s.io/v1",
        "metadata": {"name": name, "namespace": ns, "creationTimestamp": stamp(now)},
        "spec": {"audiences": audiences, "expirationSeconds": expiration, "boundObjectRef": bound_ref},
        "status": {"token": cluster.token_key.sign(&claims), "expirationTimestamp": stamp(expires)},
    }))
}

/// The claim (`pod`, `secret`) naming the object a token is bound to, after checking it exists
/// (with the uid the reference gives) and, for a pod, runs as the service account.
fn bound_object(cluster: &Cluster, ns: &str, account: &str, r: &Value) -> ApiResult<(&'static str, Value)> {
    let text = |k: &str| r.get(k).and_then(Value::as_str).unwrap_or("");
    let (api_version, kind, name) = (text("apiVersion"), text("kind"), text("name"));
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let (claim, plural) = match (group, kind) {
        ("", "Pod") => ("pod", "pods"),
        ("", "Secret") => ("secret", "secrets"),
        ("", "Node") => return Err(ApiError::not_found_raw("", "nodes", name)), // no nodes here
        _ => return Err(ApiError::bad_request(format!("cannot bind token to object of type {group}/{version}, Kind={kind}"))),
    };
    let info = cluster.core(plural);
    let obj = cluster.table(&info).get(ns, name).ok_or_else(|| ApiError::not_found(&info, name))?.value.clone();
    if claim == "pod" {
        let runs_as = obj.pointer("/spec/serviceAccountName").and_then(Value::as_str).filter(|s| !s.is_empty()).unwrap_or("default");
        if runs_as != account {
            return Err(ApiError::bad_request(format!(
                "cannot bind token for serviceaccount \"{account}\" to pod running with different serviceaccount name."
            )));
        }
    }
    let uid = obj.pointer("/metadata/uid").and_then(Value::as_str).unwrap_or("").to_string();
    let wanted = text("uid");
    if !wanted.is_empty() && wanted != uid {
        let mut e = ApiError::conflict_msg(&info, name, "");
        e.message = format!(
            "Operation cannot be fulfilled on {kind} \"{name}\": the UID in the bound object reference ({wanted}) does not match the UID in record. The object might have been deleted and then recreated"
        );
        e.details = Some(Box::new(json!({"name": name, "kind": kind})));
        return Err(e);
    }
    Ok((claim, json!({"name": name, "uid": uid})))
}

/// What a bearer token is to this cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Bearer {
    /// Not a token this cluster signs (not a JWT, or another issuer's).
    Foreign,
    /// One of this cluster's tokens that is no longer valid: expired, tampered with, for
    /// another audience, or its service account (or bound object) is gone.
    Invalid,
    /// A valid token of the service account `namespace/name`.
    ServiceAccount {
        /// The service account's namespace.
        namespace: String,
        /// The service account's name.
        name: String,
    },
}

/// Reads `token`: a service account token this cluster issued is valid while it is signed
/// here, not expired, for the API server, and its service account and bound object still exist
/// with the uids it names.
pub fn authenticate(cluster: &Cluster, token: &str) -> Bearer {
    let claims = match cluster.token_key.verify(token, chrono::Utc::now().timestamp()) {
        Ok(claims) => claims,
        Err(TokenError::Malformed | TokenError::Foreign) => return Bearer::Foreign,
        Err(_) => return Bearer::Invalid,
    };
    let kube = &claims["kubernetes.io"];
    let ns = kube["namespace"].as_str().unwrap_or("");
    let still_there = |plural: &str, named: &Value| {
        let (Some(name), Some(uid)) = (named["name"].as_str(), named["uid"].as_str()) else {
            return false;
        };
        cluster
            .table(&cluster.core(plural))
            .get(ns, name)
            .is_some_and(|o| o.value.pointer("/metadata/uid").and_then(Value::as_str) == Some(uid))
    };
    let valid = still_there("serviceaccounts", &kube["serviceaccount"])
        && [("pod", "pods"), ("secret", "secrets")].iter().all(|(claim, plural)| kube.get(*claim).is_none_or(|b| still_there(plural, b)));
    match kube["serviceaccount"]["name"].as_str() {
        Some(name) if valid => Bearer::ServiceAccount { namespace: ns.to_string(), name: name.to_string() },
        _ => Bearer::Invalid,
    }
}
