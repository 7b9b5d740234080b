//! CustomResourceDefinitions: what a CRD object turns into (served resources at each served
//! version, with schema and printer columns), its status (names accepted, established), and
//! un-serving its resources once it is gone.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::cluster::Cluster;
use crate::registry::{ALL_VERBS, PrinterColumn, ResourceInfo};
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

/// Keep CRD defaults on update.
pub fn prepare_update(info: &ResourceInfo, obj: &mut Value) -> ApiResult<()> {
    if !is_crd(info) {
        return Ok(());
    }
    if let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) {
        spec.entry("conversion").or_insert_with(|| json!({"strategy": "None"}));
    }
    Ok(())
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
            scale_subresource: false,
            builtin: false,
            storage: format!("{group}/{plural}"),
            preserve_unknown: schema.as_ref().is_none_or(|s| s.preserves_unknown_at_root()),
            schema,
            columns,
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
        let ts = crate::ops::now();
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
