//! Patch formats: JSON merge patch (RFC 7386), JSON patch (RFC 6902, with `test`) and
//! strategic merge patch for built-in kinds (lists merged by their merge keys, such as
//! containers by name; `$patch: delete|replace` and `$retainKeys` directives).

use serde_json::{Map, Value};

use crate::status::{ApiError, ApiResult};

/// The patch formats the server accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `application/merge-patch+json`.
    Merge,
    /// `application/json-patch+json`.
    Json,
    /// `application/strategic-merge-patch+json`.
    Strategic,
    /// `application/apply-patch+yaml`.
    Apply,
}

impl Format {
    /// From a Content-Type header value.
    pub fn from_content_type(ct: &str) -> Option<Format> {
        match ct.split(';').next().unwrap_or("").trim() {
            "application/merge-patch+json" => Some(Format::Merge),
            "application/json-patch+json" => Some(Format::Json),
            "application/strategic-merge-patch+json" => Some(Format::Strategic),
            "application/apply-patch+yaml" | "application/apply-patch+json" => Some(Format::Apply),
            _ => None,
        }
    }
}

fn decode(raw: &[u8]) -> ApiResult<Value> {
    crate::depth::from_slice(raw).map_err(|e| {
        let why = match e {
            crate::depth::Unread::Json(e) if e.is_eof() => "unexpected end of JSON input".to_string(),
            e => e.to_string(),
        };
        ApiError::bad_request(format!("error decoding patch: {why}"))
    })
}

fn rejected() -> ApiError {
    let mut e = ApiError::invalid_plain("the server rejected our request due to an error in our request");
    e.details = Some(Box::new(Value::Object(Map::new())));
    e
}

/// Parse a patch body of the given format (apply bodies are YAML or JSON).
pub fn parse(format: Format, raw: &[u8]) -> ApiResult<Value> {
    match format {
        Format::Apply => {
            match crate::depth::from_slice(raw) {
                Ok(v) => return Ok(v),
                Err(crate::depth::Unread::TooDeep) => {
                    return Err(ApiError::bad_request(format!("error decoding patch: {}", crate::depth::TOO_DEEP)));
                }
                Err(crate::depth::Unread::Json(_)) => {}
            }
            serde_yaml::from_slice::<Value>(raw).map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))
        }
        Format::Json => {
            let v = decode(raw)?;
            if !v.is_array() {
                let t = if v.is_object() { "object" } else { "value" };
                return Err(ApiError::bad_request(format!(
                    "error decoding patch: json: cannot unmarshal {t} into Go value of type []handlers.jsonPatchOp"
                )));
            }
            Ok(v)
        }
        _ => {
            let v = decode(raw)?;
            if !v.is_object() {
                return Err(ApiError::bad_request(
                    "error decoding patch: json: cannot unmarshal array into Go value of type map[string]interface {}",
                ));
            }
            Ok(v)
        }
    }
}

/// Apply a parsed patch to `target`.
pub fn apply(format: Format, target: &mut Value, patch: &Value) -> ApiResult<()> {
    match format {
        Format::Merge => {
            json_patch::merge(target, patch);
            Ok(())
        }
        Format::Json => {
            let ops: json_patch::Patch =
                serde_json::from_value(patch.clone()).map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?;
            json_patch_bounded(target, &ops.0)
        }
        Format::Strategic => {
            strategic(target, patch, "");
            Ok(())
        }
        Format::Apply => {
            json_patch::merge(target, patch);
            Ok(())
        }
    }
}

/// Most operations a JSON patch may hold (the real server's `maxJSONPatchOperations`).
pub const MAX_JSON_PATCH_OPERATIONS: usize = 10_000;

/// Most bytes the `copy` operations of one JSON patch may add, together (the real server's
/// `JSONPatchMaxCopyBytes`): other operations add no more than the patch body holds, but each
/// copy can double the object.
pub const MAX_JSON_PATCH_COPY_BYTES: usize = 3 * 1024 * 1024;

/// Apply JSON patch operations one at a time, as the real server does, with its bounds: too
/// many operations is a 413, and copies adding more than [`MAX_JSON_PATCH_COPY_BYTES`] stop
/// the patch (a bare 422) before the object grows further. `target` is left half-patched on
/// error; callers patch a copy.
fn json_patch_bounded(target: &mut Value, ops: &[json_patch::PatchOperation]) -> ApiResult<()> {
    if ops.len() > MAX_JSON_PATCH_OPERATIONS {
        return Err(ApiError::too_large(&format!(
            "The allowed maximum operations in a JSON patch is {MAX_JSON_PATCH_OPERATIONS}, got {}",
            ops.len()
        )));
    }
    let mut copied = 0usize;
    for op in ops {
        if let json_patch::PatchOperation::Copy(copy) = op {
            copied += target.pointer(copy.from.as_str()).map_or(0, crate::store::encoded_len);
            if copied > MAX_JSON_PATCH_COPY_BYTES {
                return Err(rejected());
            }
        }
        if missing_null_test(target, op) {
            continue;
        }
        json_patch::patch_unsafe(target, std::slice::from_ref(op)).map_err(|_| rejected())?;
    }
    Ok(())
}

/// Whether `op` tests a missing member of an existing object for `null`, which the real
/// server's JSON patch (evanphx/json-patch) lets pass, as a missing member is null there:
/// kube-rs's `finalizer` adds the first finalizer with exactly this test. RFC 6902 would fail
/// it; the `json_patch` crate does.
fn missing_null_test(target: &Value, op: &json_patch::PatchOperation) -> bool {
    let json_patch::PatchOperation::Test(test) = op else { return false };
    let path = test.path.as_str();
    let Some(slash) = path.rfind('/') else { return false };
    test.value.is_null() && target.pointer(path).is_none() && target.pointer(&path[..slash]).is_some_and(Value::is_object)
}

/// The merge key of a list at `path` (dotted, without indices) in built-in kinds. Pod
/// templates (Deployments, StatefulSets, DaemonSets, ReplicaSets, Jobs, CronJobs) share the
/// Pod's keys wherever they sit; lists not named here (RBAC `rules`, binding `subjects`,
/// Endpoints `subsets`, EndpointSlice `endpoints` and `ports`) are atomic and replaced.
fn merge_key(path: &str) -> Option<&'static str> {
    let mut segments = path.rsplit('.');
    let last = segments.next().unwrap_or("");
    let parent = segments.next().unwrap_or("");
    match last {
        "containers" | "initContainers" | "ephemeralContainers" | "volumes" | "env" | "imagePullSecrets" | "secrets" | "webhooks" => {
            Some("name")
        }
        "volumeMounts" => Some("mountPath"),
        "volumeDevices" => Some("devicePath"),
        "ports" if parent.ends_with("ontainers") => Some("containerPort"),
        "ports" if path == "spec.ports" => Some("port"),
        "addresses" if path == "status.addresses" => Some("type"),
        "conditions" => Some("type"),
        "ownerReferences" => Some("uid"),
        _ => None,
    }
}

/// Strategic merge of `patch` into `target`.
pub fn strategic(target: &mut Value, patch: &Value, path: &str) {
    let Some(pmap) = patch.as_object() else {
        *target = patch.clone();
        return;
    };
    if pmap.get("$patch").and_then(Value::as_str) == Some("replace") {
        let mut p = pmap.clone();
        p.remove("$patch");
        *target = Value::Object(p);
        return;
    }
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let tmap = target.as_object_mut().expect("object");
    if let Some(keep) = pmap.get("$retainKeys").and_then(Value::as_array) {
        tmap.retain(|k, _| keep.iter().any(|x| x.as_str() == Some(k)));
    }
    for (k, pv) in pmap {
        if let Some(list) = k.strip_prefix("$deleteFromPrimitiveList/") {
            if let (Some(Value::Array(items)), Some(del)) = (tmap.get_mut(list), pv.as_array()) {
                items.retain(|i| !del.contains(i));
            }
            continue;
        }
        if k.starts_with('$') {
            continue;
        }
        let child_path = if path.is_empty() { k.clone() } else { format!("{path}.{k}") };
        match pv {
            Value::Null => {
                tmap.remove(k);
            }
            Value::Object(_) => {
                let t = tmap.entry(k.clone()).or_insert(Value::Null);
                strategic(t, pv, &child_path);
            }
            Value::Array(items) if child_path == "metadata.finalizers" => {
                // a primitive list with patchStrategy "merge": union, order kept
                let t = tmap.entry(k.clone()).or_insert_with(|| Value::Array(Vec::new()));
                if let Some(list) = t.as_array_mut() {
                    for item in items {
                        if !list.contains(item) {
                            list.push(item.clone());
                        }
                    }
                }
            }
            Value::Array(items) => match merge_key(&child_path) {
                Some(key) => {
                    let t = tmap.entry(k.clone()).or_insert_with(|| Value::Array(Vec::new()));
                    if !t.is_array() {
                        *t = Value::Array(Vec::new());
                    }
                    let list = t.as_array_mut().expect("array");
                    for item in items {
                        let id = item.get(key).cloned();
                        let directive = item.get("$patch").and_then(Value::as_str);
                        let pos = id.as_ref().and_then(|id| list.iter().position(|e| e.get(key) == Some(id)));
                        match (pos, directive) {
                            (Some(i), Some("delete")) => {
                                list.remove(i);
                            }
                            (None, Some("delete")) => {}
                            (Some(i), _) => strategic(&mut list[i], item, &child_path),
                            (None, _) => {
                                let mut fresh = Value::Null;
                                strategic(&mut fresh, item, &child_path);
                                list.push(fresh);
                            }
                        }
                    }
                }
                None => {
                    tmap.insert(k.clone(), pv.clone());
                }
            },
            other => {
                tmap.insert(k.clone(), other.clone());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn strategic_merge_merges_containers_by_name() {
        let mut pod = json!({"spec": {"containers": [{"name": "a", "image": "x"}, {"name": "b", "image": "y"}]}});
        strategic(&mut pod, &json!({"spec": {"containers": [{"name": "b", "image": "z"}]}}), "");
        assert_eq!(pod["spec"]["containers"], json!([{"name": "a", "image": "x"}, {"name": "b", "image": "z"}]));
    }

    #[test]
    fn strategic_merge_unions_finalizers_and_honours_delete_from_primitive_list() {
        let mut obj = json!({"metadata": {"finalizers": ["a", "b"]}});
        strategic(&mut obj, &json!({"metadata": {"finalizers": ["c"]}}), "");
        assert_eq!(obj["metadata"]["finalizers"], json!(["a", "b", "c"]));
        strategic(&mut obj, &json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]}}), "");
        assert_eq!(obj["metadata"]["finalizers"], json!(["b", "c"]));
    }

    #[test]
    fn strategic_merge_deletes_with_null_and_directive() {
        let mut cm = json!({"data": {"a": "1", "b": "2"}, "spec": {"containers": [{"name": "a"}]}});
        strategic(&mut cm, &json!({"data": {"b": null, "c": "3"}, "spec": {"containers": [{"name": "a", "$patch": "delete"}]}}), "");
        assert_eq!(cm, json!({"data": {"a": "1", "c": "3"}, "spec": {"containers": []}}));
    }

    #[test]
    fn merge_keys_follow_the_kind_of_list() {
        let table = [
            ("spec.template.spec.containers", Some("name")),
            ("spec.jobTemplate.spec.template.spec.initContainers", Some("name")),
            ("spec.template.spec.containers.ports", Some("containerPort")),
            ("spec.template.spec.initContainers.ports", Some("containerPort")),
            ("spec.ports", Some("port")),
            ("ports", None),
            ("webhooks", Some("name")),
            ("rules", None),
            ("subjects", None),
            ("status.addresses", Some("type")),
        ];
        for (path, want) in table {
            assert_eq!(merge_key(path), want, "{path}");
        }
    }

    #[test]
    fn failed_json_patch_test_is_a_bare_422() {
        let mut v = json!({"spec": {"size": 1}});
        let p = parse(Format::Json, br#"[{"op":"test","path":"/spec/size","value":2}]"#).unwrap();
        let err = apply(Format::Json, &mut v, &p).unwrap_err();
        assert_eq!(err.code, 422);
        assert_eq!(err.message, "the server rejected our request due to an error in our request");
    }

    #[test]
    fn a_null_test_passes_on_a_missing_member_as_on_the_real_server() {
        // (patch, passes): kube-rs's finalizer adds the first one after testing for null.
        let cases = [
            (
                r#"[{"op":"test","path":"/metadata/finalizers","value":null},{"op":"add","path":"/metadata/finalizers","value":["f"]}]"#,
                true,
            ),
            (r#"[{"op":"test","path":"/metadata/labels","value":null}]"#, true),
            (r#"[{"op":"test","path":"/metadata/name","value":null}]"#, false),
            (r#"[{"op":"test","path":"/metadata/finalizers","value":[]}]"#, false),
            (r#"[{"op":"test","path":"/nothing/here","value":null}]"#, false),
            (r#"[{"op":"test","path":"/metadata/name/x","value":null}]"#, false),
            (r#"[{"op":"test","path":"/spec/list/5","value":null}]"#, false),
        ];
        for (patch, passes) in cases {
            let mut v = json!({"metadata": {"name": "n"}, "spec": {"list": [1]}});
            let p = parse(Format::Json, patch.as_bytes()).unwrap();
            assert_eq!(apply(Format::Json, &mut v, &p).is_ok(), passes, "{patch}");
            if patch.contains(r#""op":"add""#) {
                assert_eq!(v["metadata"]["finalizers"], json!(["f"]));
            }
        }
    }

    #[test]
    fn json_patches_are_bounded_in_operations_and_in_what_copies_add() {
        // 24 copies of the object into itself would make it 16 million times larger
        let doubling: Vec<Value> =
            (0..24).map(|i| serde_json::json!({"op": "copy", "from": "/spec", "path": format!("/spec/c{i}")})).collect();
        let mut v = serde_json::json!({"spec": {"text": "x".repeat(1024)}});
        let err = apply(Format::Json, &mut v, &Value::Array(doubling)).unwrap_err();
        assert_eq!((err.code, err.message.as_str()), (422, "the server rejected our request due to an error in our request"));
        assert!(crate::store::encoded_len(&v) < 2 * MAX_JSON_PATCH_COPY_BYTES, "stopped before growing further");

        let many: Vec<Value> =
            (0..=MAX_JSON_PATCH_OPERATIONS).map(|_| serde_json::json!({"op": "test", "path": "/a", "value": 1})).collect();
        let err = apply(Format::Json, &mut serde_json::json!({"a": 1}), &Value::Array(many)).unwrap_err();
        assert_eq!(err.code, 413);
        assert_eq!(err.message, "Request entity too large: The allowed maximum operations in a JSON patch is 10000, got 10001");

        let mut v = serde_json::json!({"spec": {"a": 1}});
        let ok = serde_json::json!([{"op": "copy", "from": "/spec/a", "path": "/spec/b"}, {"op": "test", "path": "/spec/b", "value": 1}]);
        apply(Format::Json, &mut v, &ok).unwrap();
        assert_eq!(v, serde_json::json!({"spec": {"a": 1, "b": 1}}));
    }
}
