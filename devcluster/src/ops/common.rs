//! What the verbs do alike to the objects they write: check a body's type and shape, drop
//! unknown fields, fill in generated names, order the keys, record the manager's fields.
//! Under every verb; imports none of them.

use serde_json::{Map, Value, json};

use super::types::Validation;
use crate::meta::meta_mut;
use crate::registry::ResourceInfo;
use crate::schema;
use crate::status::{ApiError, ApiResult};

/// The Status a POST to an action subresource (eviction, binding) answers with 201.
pub fn created_success() -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201})
}

/// A random suffix for generateName.
pub fn random_suffix() -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let u = uuid::Uuid::new_v4();
    u.as_bytes().iter().take(5).map(|b| ALPHABET[*b as usize % ALPHABET.len()] as char).collect()
}

/// Whether objects of the resource carry `metadata.generation` (the real server's create
/// strategy sets it to 1 and its update strategy raises it when the spec changes).
pub fn has_generation(info: &ResourceInfo) -> bool {
    !info.builtin
        || matches!(
            (info.group.as_str(), info.plural.as_str()),
            ("", "pods")
                | ("apps", _)
                | ("batch", _)
                | ("policy", "poddisruptionbudgets")
                | ("networking.k8s.io", _)
                | ("discovery.k8s.io", "endpointslices")
                | ("admissionregistration.k8s.io", _)
                | ("apiextensions.k8s.io", "customresourcedefinitions")
        )
}

/// Parse a request body as JSON, with the real server's error for malformed input.
pub fn parse_body(info: &ResourceInfo, raw: &[u8]) -> ApiResult<Value> {
    match crate::depth::from_slice(raw) {
        Ok(v @ Value::Object(_)) => Ok(v),
        Ok(_) => Err(ApiError::bad_request(format!(
            "the object provided is unrecognized (must be of type {}): couldn't get version/kind; json parse error: json: cannot unmarshal into Go value of type struct",
            info.kind
        ))),
        Err(e) => {
            let snippet: String = String::from_utf8_lossy(raw).chars().take(30).collect();
            let why = match e {
                crate::depth::Unread::Json(e) if e.is_eof() => "unexpected end of JSON input".to_string(),
                e => e.to_string(),
            };
            Err(ApiError::bad_request(format!(
                "the object provided is unrecognized (must be of type {}): couldn't get version/kind; json parse error: {why} ({snippet} ...)",
                info.kind
            )))
        }
    }
}

/// Refuse a body whose values do not fit the kind's Go types, as the real server's decoder
/// does: 400 `ConfigMap in version "v1" cannot be handled as a ConfigMap: json: cannot
/// unmarshal ...`.
pub fn check_shape(info: &ResourceInfo, obj: &Value) -> ApiResult<()> {
    crate::shape::check(info, obj).map_err(|e| {
        ApiError::bad_request(format!("{} in version \"{}\" cannot be handled as a {}: {e}", info.kind, info.version, info.kind))
    })
}

/// Refuse a patched object whose values do not fit the kind's Go types, as the real server
/// does after applying a JSON, merge or strategic patch: 422 with the patched object quoted.
pub fn check_patched_shape(info: &ResourceInfo, obj: &Value) -> ApiResult<()> {
    let Err(why) = crate::shape::check(info, obj) else { return Ok(()) };
    let patched = serde_json::to_string(obj).unwrap_or_default();
    let cause = format!("Invalid value: {patched:?}: {why}");
    let mut e = ApiError::invalid_plain(format!(" \"\" is invalid: patch: {cause}"));
    e.details = Some(Box::new(json!({"causes": [{"reason": "FieldValueInvalid", "message": cause, "field": "patch"}]})));
    Err(e)
}

/// What a custom resource's validation says of an object about to be stored: its schema,
/// then its `scale` fields (empty for built-ins).
pub fn custom_causes(info: &ResourceInfo, obj: &Value) -> Vec<crate::status::Cause> {
    let mut causes = info.schema.as_ref().map(|s| s.validate(obj)).unwrap_or_default();
    causes.extend(crate::crd::scale_field_causes(info, obj));
    causes
}

/// Check (and fill in) `apiVersion` and `kind` of a body sent to `info`'s endpoint.
pub fn check_type(info: &ResourceInfo, obj: &mut Value) -> ApiResult<()> {
    let api_version = info.api_version();
    let map = obj.as_object_mut().ok_or_else(|| ApiError::bad_request("expected an object"))?;
    let kind = map.get("kind").and_then(Value::as_str).unwrap_or("").to_string();
    let av = map.get("apiVersion").and_then(Value::as_str).unwrap_or("").to_string();
    if !kind.is_empty() && kind != info.kind {
        if info.builtin {
            let v = av.rsplit('/').next().unwrap_or("v1");
            return Err(ApiError::bad_request(format!(
                "{kind} in version \"{v}\" cannot be handled as a {}: converting ({v}.{kind}) to (core.{}): unknown conversion",
                info.kind, info.kind
            )));
        }
        return Err(ApiError::bad_request(format!("invalid object type: {av}, Kind={kind}")));
    }
    if !av.is_empty() && av != api_version {
        let mut e =
            ApiError::bad_request(format!("the API version in the data ({av}) does not match the expected API version ({api_version})"));
        if !info.builtin {
            // the real server decodes with an unknown schema first: every field is unknown
            e.warnings = map
                .keys()
                .filter(|k| !matches!(k.as_str(), "kind" | "apiVersion" | "metadata"))
                .map(|k| format!("unknown field \"{k}\""))
                .collect();
        }
        return Err(e);
    }
    map.insert("kind".into(), json!(info.kind));
    map.insert("apiVersion".into(), json!(api_version));
    if !map.get("metadata").is_some_and(Value::is_object) {
        map.insert("metadata".into(), json!({}));
    }
    Ok(())
}

/// Top-level fields a built-in kind knows (besides kind, apiVersion, metadata).
fn builtin_fields(info: &ResourceInfo) -> &'static [&'static str] {
    match (info.group.as_str(), info.plural.as_str()) {
        ("", "configmaps") => &["data", "binaryData", "immutable"],
        ("", "secrets") => &["data", "stringData", "type", "immutable"],
        ("", "serviceaccounts") => &["secrets", "imagePullSecrets", "automountServiceAccountToken"],
        ("", "events") => &[
            "involvedObject",
            "reason",
            "message",
            "source",
            "firstTimestamp",
            "lastTimestamp",
            "count",
            "type",
            "eventTime",
            "series",
            "action",
            "related",
            "reportingComponent",
            "reportingInstance",
        ],
        ("events.k8s.io", "events") => &[
            "eventTime",
            "series",
            "reportingController",
            "reportingInstance",
            "action",
            "reason",
            "regarding",
            "related",
            "note",
            "type",
            "deprecatedSource",
            "deprecatedFirstTimestamp",
            "deprecatedLastTimestamp",
            "deprecatedCount",
        ],
        ("", "endpoints") => &["subsets"],
        ("discovery.k8s.io", "endpointslices") => &["addressType", "endpoints", "ports"],
        ("rbac.authorization.k8s.io", "roles") => &["rules"],
        ("rbac.authorization.k8s.io", "clusterroles") => &["rules", "aggregationRule"],
        ("rbac.authorization.k8s.io", "rolebindings" | "clusterrolebindings") => &["subjects", "roleRef"],
        ("admissionregistration.k8s.io", _) => &["webhooks"],
        ("networking.k8s.io", "ingressclasses" | "networkpolicies") => &["spec"],
        _ => &["spec", "status"],
    }
}

/// Drop unknown fields (per `fieldValidation`); returns the warnings to send.
pub fn prune_unknown(info: &ResourceInfo, obj: &mut Value, validation: Validation) -> ApiResult<Vec<String>> {
    if info.is_events_v1() && obj["apiVersion"] == "v1" {
        return Ok(Vec::new());
    }
    let mut unknown = schema::unknown_meta_fields(obj);
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        for u in &unknown {
            meta.remove(u.trim_start_matches("metadata."));
        }
    }
    if let Some(s) = &info.schema {
        unknown.extend(s.prune(obj));
    } else if info.builtin {
        let known = builtin_fields(info);
        if let Some(map) = obj.as_object_mut() {
            let extra: Vec<String> = map
                .keys()
                .filter(|k| !matches!(k.as_str(), "kind" | "apiVersion" | "metadata") && !known.contains(&k.as_str()))
                .cloned()
                .collect();
            for k in extra {
                map.remove(&k);
                unknown.push(k);
            }
        }
    }
    if unknown.is_empty() {
        return Ok(Vec::new());
    }
    let texts: Vec<String> = unknown.iter().map(|u| format!("unknown field \"{u}\"")).collect();
    match validation {
        Validation::Strict => Err(ApiError::bad_request(format!(
            "{} in version \"{}\" cannot be handled as a {}: strict decoding error: {}",
            info.kind,
            info.version,
            info.kind,
            texts.join(", ")
        ))),
        Validation::Warn => Ok(texts),
        Validation::Ignore => Ok(Vec::new()),
    }
}

/// Put keys in the order the real server writes them (kind, apiVersion, metadata first).
pub fn normalize_order(obj: Value) -> Value {
    let Value::Object(mut map) = obj else {
        return obj;
    };
    let mut out = Map::with_capacity(map.len());
    for k in ["kind", "apiVersion"] {
        if let Some(v) = map.remove(k) {
            out.insert(k.into(), v);
        }
    }
    if let Some(Value::Object(mut meta)) = map.remove("metadata") {
        let mut m = Map::with_capacity(meta.len());
        for k in schema::META_FIELDS {
            if let Some(v) = meta.remove(*k) {
                m.insert((*k).into(), v);
            }
        }
        m.extend(meta);
        out.insert("metadata".into(), Value::Object(m));
    }
    out.extend(map);
    Value::Object(out)
}

/// `obj` without metadata and status: what a generation bump looks at.
pub fn spec_part(obj: &Value) -> Map<String, Value> {
    obj.as_object()
        .map(|m| m.iter().filter(|(k, _)| !matches!(k.as_str(), "metadata" | "status")).map(|(k, v)| (k.clone(), v.clone())).collect())
        .unwrap_or_default()
}

/// Record an Update by the request's field manager in managedFields. An Event written through
/// events.k8s.io/v1 is stored in the core shape, but its fields are recorded as the real
/// server records them: in the group's version, with the group's field names (`f:note`).
pub(crate) fn record_update(info: &ResourceInfo, obj: &mut Value, old: Option<&Value>, manager: Option<&str>, sub: Option<&str>) {
    if !(info.is_events_v1() && obj["apiVersion"] == "v1") {
        return crate::managed::record_update(info, obj, old, manager, sub);
    }
    let without_nulls = |v: Value| match v {
        Value::Object(m) => Value::Object(m.into_iter().filter(|(_, x)| !x.is_null()).collect()),
        v => v,
    };
    let mut view = without_nulls(crate::builtin::event_from_core(obj));
    let old_view = old.map(|o| without_nulls(crate::builtin::event_from_core(o)));
    crate::managed::record_update(info, &mut view, old_view.as_ref(), manager, sub);
    match view.get_mut("metadata").and_then(|m| m.get_mut("managedFields")).map(Value::take) {
        Some(fields) => meta_mut(obj).insert("managedFields".into(), fields),
        None => meta_mut(obj).remove("managedFields"),
    };
}

/// The first duplicate key in a JSON document, as `path.key` (for strict field validation).
pub fn find_duplicate(raw: &[u8]) -> Option<String> {
    use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
    use std::cell::RefCell;

    struct Seed<'a> {
        path: String,
        found: &'a RefCell<Option<String>>,
    }
    impl<'de> DeserializeSeed<'de> for Seed<'_> {
        type Value = ();
        fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
            d.deserialize_any(self)
        }
    }
    impl<'de> Visitor<'de> for Seed<'_> {
        type Value = ();
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("any JSON")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
            let mut seen = std::collections::HashSet::new();
            while let Some(key) = map.next_key::<String>()? {
                let path = if self.path.is_empty() { key.clone() } else { format!("{}.{key}", self.path) };
                if !seen.insert(key) && self.found.borrow().is_none() {
                    *self.found.borrow_mut() = Some(path.clone());
                }
                map.next_value_seed(Seed { path, found: self.found })?;
            }
            Ok(())
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
            while seq.next_element_seed(Seed { path: self.path.clone(), found: self.found })?.is_some() {}
            Ok(())
        }
        fn visit_bool<E>(self, _: bool) -> Result<(), E> {
            Ok(())
        }
        fn visit_i64<E>(self, _: i64) -> Result<(), E> {
            Ok(())
        }
        fn visit_u64<E>(self, _: u64) -> Result<(), E> {
            Ok(())
        }
        fn visit_f64<E>(self, _: f64) -> Result<(), E> {
            Ok(())
        }
        fn visit_str<E>(self, _: &str) -> Result<(), E> {
            Ok(())
        }
        fn visit_unit<E>(self) -> Result<(), E> {
            Ok(())
        }
    }
    let found = RefCell::new(None);
    let mut de = serde_json::Deserializer::from_slice(raw);
    let _ = Seed { path: String::new(), found: &found }.deserialize(&mut de);
    let _ = IgnoredAny;
    found.into_inner()
}

/// Reject duplicate fields under `fieldValidation=Strict` (warn under Warn).
pub fn check_duplicates(info: &ResourceInfo, raw: &[u8], validation: Validation) -> ApiResult<Vec<String>> {
    let Some(path) = find_duplicate(raw) else {
        return Ok(Vec::new());
    };
    match validation {
        Validation::Strict => Err(ApiError::bad_request(format!(
            "{} in version \"{}\" cannot be handled as a {}: strict decoding error: duplicate field \"{path}\"",
            info.kind, info.version, info.kind
        ))),
        Validation::Warn => Ok(vec![format!("duplicate field \"{path}\"")]),
        Validation::Ignore => Ok(Vec::new()),
    }
}
