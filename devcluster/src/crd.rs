//! CustomResourceDefinitions: what a CRD object turns into (served resources at each served
//! version, with schema and printer columns), its status (names accepted, established), and
//! un-serving its resources once it is gone.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::cluster::Cluster;
use crate::jsonpath::SimplePath;
use crate::registry::{ALL_VERBS, PrinterColumn, ResourceInfo, ScalePaths, ScaleSelector};
use crate::schema::Schema;
use crate::status::{ApiError, ApiResult, Cause};
use crate::store::Write;

/// The finalizer that holds a deleted CRD until its objects are gone.
pub const CLEANUP_FINALIZER: &str = "customresourcecleanup.apiextensions.k8s.io";

fn is_crd(info: &ResourceInfo) -> bool {
    info.builtin && info.plural == "customresourcedefinitions"
}

/// Validate and default a CRD on create.
pub fn prepare(info: &ResourceInfo, obj: &mut Value) -> ApiResult<()> {
    if !is_crd(info) {
        return Ok(());
    }
    let name = crate::registry::name_of(obj).to_string();
    let group = obj.get("spec").and_then(|v| v.get("group")).and_then(Value::as_str).unwrap_or("").to_string();
    let plural =
        obj.get("spec").and_then(|v| v.get("names")).and_then(|v| v.get("plural")).and_then(Value::as_str).unwrap_or("").to_string();
    let mut causes = Vec::new();
    if name != format!("{plural}.{group}") {
        causes.push(Cause::new(
            "FieldValueInvalid",
            format!("Invalid value: \"{name}\": must be spec.names.plural+\".\"+spec.group"),
            "metadata.name",
        ));
    }
    if obj.get("spec").and_then(|v| v.get("names")).and_then(|v| v.get("kind")).and_then(Value::as_str).unwrap_or("").is_empty() {
        causes.push(Cause::new("FieldValueRequired", "Required value", "spec.names.kind"));
    }
    let versions = obj.get("spec").and_then(|v| v.get("versions")).and_then(Value::as_array).cloned().unwrap_or_default();
    if versions.is_empty() {
        causes.push(Cause::new(
            "FieldValueRequired",
            "Required value: must have exactly one version marked as storage version",
            "spec.versions",
        ));
    }
    causes.extend(invalid_schema_patterns(&versions));
    causes.extend(scale_path_causes(&versions));
    if !causes.is_empty() {
        return Err(ApiError::invalid_object(info, &name, causes));
    }
    let spec = obj["spec"].as_object_mut().expect("spec object");
    spec.entry("conversion").or_insert_with(|| json!({"strategy": "None"}));
    if let Some(names) = spec.get_mut("names").and_then(Value::as_object_mut) {
        let kind = names.get("kind").and_then(Value::as_str).unwrap_or("").to_string();
        names.entry("singular").or_insert_with(|| json!(kind.to_lowercase()));
        names.entry("listKind").or_insert_with(|| json!(format!("{kind}List")));
    }
    let storage: Vec<Value> = versions
        .iter()
        .filter(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
        .filter_map(|v| v.get("name").cloned())
        .collect();
    if obj.get("status").is_none_or(|s| s.get("acceptedNames").is_none()) {
        obj["status"] = json!({"conditions": null, "acceptedNames": {"plural": "", "kind": ""}, "storedVersions": storage});
    }
    Ok(())
}

/// The `pattern`s of the versions' schemas that are not regular expressions.
fn invalid_schema_patterns(versions: &[Value]) -> Vec<Cause> {
    let mut causes = Vec::new();
    for (i, v) in versions.iter().enumerate() {
        if let Some(schema) = v.get("schema").and_then(|s| s.get("openAPIV3Schema")) {
            causes.extend(crate::schema::invalid_patterns(schema, &format!("spec.versions[{i}].schema.openAPIV3Schema")));
        }
    }
    causes
}

/// Keep CRD defaults on update, and check what `prepare` checks of the versions (patterns
/// that are not regular expressions, scale paths).
pub fn prepare_update(info: &ResourceInfo, obj: &mut Value) -> ApiResult<()> {
    if !is_crd(info) {
        return Ok(());
    }
    let versions = obj.get("spec").and_then(|v| v.get("versions")).and_then(Value::as_array).cloned().unwrap_or_default();
    let mut causes = invalid_schema_patterns(&versions);
    causes.extend(scale_path_causes(&versions));
    if !causes.is_empty() {
        return Err(ApiError::invalid_object(info, crate::registry::name_of(obj), causes));
    }
    if let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) {
        spec.entry("conversion").or_insert_with(|| json!({"strategy": "None"}));
    }
    Ok(())
}

/// What the real server's `ValidateCustomResourceDefinitionSubresources` says of each
/// version's `subresources.scale` paths.
fn scale_path_causes(versions: &[Value]) -> Vec<Cause> {
    let mut causes = Vec::new();
    for (i, version) in versions.iter().enumerate() {
        let Some(scale) = version.get("subresources").and_then(|v| v.get("scale")).filter(|s| !s.is_null()) else {
            continue;
        };
        let field = |name: &str| format!("spec.versions[{i}].subresources.scale.{name}");
        let text = |name: &str| scale.get(name).and_then(Value::as_str).unwrap_or("").to_string();
        let mut check = |name: &str, under: &[&str], wording: &str, optional: bool| {
            let path = text(name);
            if path.is_empty() {
                if !optional {
                    causes.push(Cause::new("FieldValueRequired", "Required value", field(name)));
                }
                return;
            }
            match SimplePath::parse(&path) {
                Err(why) => causes.push(Cause::new("FieldValueInvalid", format!("Invalid value: {path:?}: {why}"), field(name))),
                Ok(p) if !under.iter().any(|u| p.is_under(u)) => causes.push(Cause::new(
                    "FieldValueInvalid",
                    format!("Invalid value: {path:?}: should be a json path under {wording}"),
                    field(name),
                )),
                Ok(_) => {}
            }
        };
        check("specReplicasPath", &[".spec."], ".spec", false);
        check("statusReplicasPath", &[".status."], ".status", false);
        check("labelSelectorPath", &[".spec.", ".status."], "either .spec or .status", true);
    }
    causes
}

/// The `scale` subresource of a CRD version, if it has one with valid paths.
fn scale_paths(version: &Value) -> Option<ScalePaths> {
    let scale = version.get("subresources")?.get("scale").filter(|s| s.is_object())?;
    let path = |name: &str| scale.get(name).and_then(Value::as_str).filter(|s| !s.is_empty()).map(SimplePath::parse);
    let selector = match path("labelSelectorPath") {
        None => ScaleSelector::None,
        Some(p) => ScaleSelector::Text(p.ok()?),
    };
    Some(ScalePaths { spec_replicas: path("specReplicasPath")?.ok()?, status_replicas: path("statusReplicasPath")?.ok()?, selector })
}

/// What the real server's `ValidateScaleSpec` and `ValidateScaleStatus` say of a custom
/// resource with a `scale` subresource: the replicas are int32s that are not negative, the
/// selector is a string.
pub fn scale_field_causes(info: &ResourceInfo, obj: &Value) -> Vec<Cause> {
    let Some(scale) = info.scale.as_ref().filter(|_| !info.builtin) else {
        return Vec::new();
    };
    let mut causes = Vec::new();
    for path in [&scale.spec_replicas, &scale.status_replicas] {
        let why = match path.int(obj) {
            Err(e) => Some((0, e)),
            Ok(Some(n)) if n < 0 => Some((n, "should be a non-negative integer".to_string())),
            Ok(Some(n)) if n > i64::from(i32::MAX) => Some((n, format!("should be less than or equal to {}", i32::MAX))),
            Ok(_) => None,
        };
        if let Some((value, why)) = why {
            causes.push(Cause::new("FieldValueInvalid", format!("Invalid value: {value}: {why}"), path.as_str()));
        }
    }
    if let ScaleSelector::Text(path) = &scale.selector
        && let Err(e) = path.string(obj)
    {
        causes.push(Cause::new("FieldValueInvalid", format!("Invalid value: \"\": {e}"), path.as_str()));
    }
    causes
}

/// The served resources of a CRD object.
pub fn resources(crd: &Value) -> Vec<ResourceInfo> {
    let spec = &crd["spec"];
    let group = spec["group"].as_str().unwrap_or("").to_string();
    let names = &spec["names"];
    let plural = names["plural"].as_str().unwrap_or("").to_string();
    let kind = names["kind"].as_str().unwrap_or("").to_string();
    let strings = |v: &Value| -> Vec<String> {
        v.as_array().map(|a| a.iter().filter_map(|s| s.as_str().map(String::from)).collect()).unwrap_or_default()
    };
    let mut out = Vec::new();
    for v in spec["versions"].as_array().into_iter().flatten() {
        if v.get("served").and_then(Value::as_bool) != Some(true) {
            continue;
        }
        let schema_value = v.get("schema").and_then(|v| v.get("openAPIV3Schema")).cloned();
        let schema = schema_value.map(|s| Arc::new(Schema::new(s)));
        let columns = v["additionalPrinterColumns"]
            .as_array()
            .map(|cols| {
                cols.iter()
                    .map(|c| PrinterColumn {
                        name: c["name"].as_str().unwrap_or("").into(),
                        type_: c["type"].as_str().unwrap_or("string").into(),
                        format: c["format"].as_str().unwrap_or("").into(),
                        description: c["description"].as_str().map(String::from).unwrap_or_else(|| {
                            format!("Custom resource definition column (in JSONPath format): {}", c["jsonPath"].as_str().unwrap_or(""))
                        }),
                        priority: c["priority"].as_i64().unwrap_or(0),
                        json_path: c["jsonPath"].as_str().unwrap_or("").into(),
                    })
                    .collect()
            })
            .unwrap_or_default();
        out.push(ResourceInfo {
            group: group.clone(),
            version: v["name"].as_str().unwrap_or("").into(),
            plural: plural.clone(),
            singular: names["singular"].as_str().map(String::from).unwrap_or_else(|| kind.to_lowercase()),
            kind: kind.clone(),
            namespaced: spec["scope"].as_str() != Some("Cluster"),
            short_names: strings(&names["shortNames"]),
            categories: strings(&names["categories"]),
            verbs: ALL_VERBS,
            status_subresource: v.get("subresources").and_then(|v| v.get("status")).is_some(),
            builtin: false,
            storage: format!("{group}/{plural}"),
            preserve_unknown: schema.as_ref().is_none_or(|s| s.preserves_unknown_at_root()),
            schema,
            columns,
            scale: scale_paths(v),
        });
    }
    out
}

/// After a CRD was written: serve its resources and mark it established.
pub fn after_write(cluster: &Cluster, info: &ResourceInfo, crd: &Value) {
    if !is_crd(info) {
        return;
    }
    let group = crd.get("spec").and_then(|v| v.get("group")).and_then(Value::as_str).unwrap_or("");
    let plural = crd.get("spec").and_then(|v| v.get("names")).and_then(|v| v.get("plural")).and_then(Value::as_str).unwrap_or("");
    cluster.registry.set_crd(group, plural, resources(crd));
    let established = crd
        .get("status")
        .and_then(|v| v.get("conditions"))
        .and_then(Value::as_array)
        .is_some_and(|c| c.iter().any(|c| c["type"] == "Established"));
    if established {
        return;
    }
    let name = crate::registry::name_of(crd).to_string();
    let table = cluster.table(info);
    let _ = table.write("", &name, |cur| {
        let Some(cur) = cur else { return Ok((Write::Keep, ())) };
        let mut new = cur.value.clone();
        let ts = crate::meta::now();
        let names = new["spec"]["names"].clone();
        new["status"]["acceptedNames"] = names;
        new["status"]["conditions"] = json!([
            {"type": "NamesAccepted", "status": "True", "lastTransitionTime": ts, "reason": "NoConflicts", "message": "no conflicts found"},
            {"type": "Established", "status": "True", "lastTransitionTime": ts, "reason": "InitialNamesAccepted", "message": "the initial names have been accepted"}
        ]);
        Ok((Write::Put(new), ()))
    });
}

/// After a delete: a CRD that is gone stops being served.
pub fn after_delete(cluster: &Cluster, info: &ResourceInfo, name: &str) {
    if !is_crd(info) {
        return;
    }
    if cluster.table(info).get("", name).is_some() {
        return;
    }
    if let Some((plural, group)) = name.split_once('.') {
        cluster.registry.remove_crd(group, plural);
        cluster.store.drop_table(&format!("{group}/{plural}"));
    }
}

/// Re-register the resources of every stored CRD (after loading from disk).
pub fn restore(cluster: &Cluster) {
    let info = cluster.registry.get("apiextensions.k8s.io", "v1", "customresourcedefinitions").expect("built-in");
    let (crds, _) = cluster.table(&info).list(None);
    for crd in crds {
        let group = crd.value.get("spec").and_then(|v| v.get("group")).and_then(Value::as_str).unwrap_or("");
        let plural = crd.value.get("spec").and_then(|v| v.get("names")).and_then(|v| v.get("plural")).and_then(Value::as_str).unwrap_or("");
        cluster.registry.set_crd(group, plural, resources(&crd.value));
    }
}
