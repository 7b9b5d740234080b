//! Owned objects (Kopf's `kopf.adopt` plus the create): a handler returns objects, and the
//! controller creates (or server-side applies, field manager `bosun`) and adopts them — an
//! owner reference to the handled object (controller, blockOwnerDeletion), its namespace, a
//! name derived from the owner's unless given, its labels if asked. Names are deterministic,
//! so a re-run handler (retry, restart) finds its children instead of duplicating them.

use bosun_proto::v1 as pb;
use serde_json::{Value, json};

use crate::cluster::discovery::Kinds;
use crate::cluster::{Api, content};
use crate::object;

/// Why owned objects could not be created.
#[derive(Debug, thiserror::Error)]
pub enum AdoptError {
    /// Not JSON.
    #[error("an owned object is not valid JSON: {0}")]
    NotJson(#[from] serde_json::Error),
    /// JSON, but no object.
    #[error("an owned object is not a JSON object")]
    NotAnObject,
    /// No `apiVersion` or `kind`.
    #[error("an owned object has no {0}")]
    Missing(&'static str),
    /// The API server does not serve the kind.
    #[error("the API server serves no {kind} in {api_version}")]
    NotServed {
        /// The kind.
        kind: String,
        /// Its apiVersion.
        api_version: String,
    },
    /// An object of that name exists and belongs to someone else.
    #[error("{kind} {namespace}/{name} exists and is not owned by this object")]
    NotOurs {
        /// The kind.
        kind: String,
        /// The namespace.
        namespace: String,
        /// The name.
        name: String,
    },
    /// The API server refused.
    #[error(transparent)]
    Api(#[from] crate::cluster::Error),
}

/// Makes `child` an adopted child of `owner`; `index` tells apart unnamed children of a kind.
pub fn prepare(owner: &Value, mut child: Value, index: usize, copy_labels: bool) -> Result<Value, AdoptError> {
    if !child.is_object() {
        return Err(AdoptError::NotAnObject);
    }
    for key in ["apiVersion", "kind"] {
        if !child[key].is_string() {
            return Err(AdoptError::Missing(key));
        }
    }
    if !child["metadata"].is_object() {
        child["metadata"] = json!({});
    }
    let meta = &mut child["metadata"];
    if meta["namespace"].as_str().is_none_or(str::is_empty) && !object::meta_str(owner, "namespace").is_empty() {
        meta["namespace"] = json!(object::meta_str(owner, "namespace"));
    }
    if meta["name"].as_str().is_none_or(str::is_empty) {
        let kind = child["kind"].as_str().unwrap_or_default().to_lowercase();
        let suffix = if index == 0 { String::new() } else { format!("-{index}") };
        child["metadata"]["name"] = json!(format!("{}-{kind}{suffix}", object::meta_str(owner, "name")));
        if let Some(m) = child["metadata"].as_object_mut() {
            m.remove("generateName");
        }
    }
    if copy_labels && let Some(labels) = object::meta(owner, "labels").and_then(Value::as_object) {
        for (k, v) in labels {
            let m = &mut child["metadata"];
            if m["labels"].get(k).is_none() {
                m["labels"][k] = v.clone();
            }
        }
    }
    let reference = json!({
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": object::meta_str(owner, "name"),
        "uid": object::meta_str(owner, "uid"),
        "controller": true,
        "blockOwnerDeletion": true,
    });
    let refs = child["metadata"]["ownerReferences"].as_array().cloned().unwrap_or_default();
    let mut refs: Vec<Value> = refs.into_iter().filter(|r| r["uid"] != reference["uid"]).collect();
    refs.push(reference);
    child["metadata"]["ownerReferences"] = Value::Array(refs);
    Ok(child)
}

/// A 404 for a kind that discovery found: its CRD went away or changed; look it up again.
fn forget_on_404(kinds: &Kinds, e: &crate::cluster::Error, selector: &pb::ResourceSelector) {
    if e.code() == Some(404) {
        kinds.forget(selector);
    }
}

/// Creates or applies the objects `owner` owns, each of a kind resolved with `kinds`; returns
/// their UIDs, or why it failed.
pub async fn adopt(api: &dyn Api, kinds: &Kinds, owner: &Value, owned: &[pb::OwnedObject]) -> Result<Vec<String>, AdoptError> {
    let mut uids = Vec::new();
    let mut per_kind: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    for o in owned {
        let raw: Value = serde_json::from_slice(&o.object)?;
        let kind_key = format!("{}/{}", raw["apiVersion"].as_str().unwrap_or(""), raw["kind"].as_str().unwrap_or(""));
        let index = *per_kind.entry(kind_key).and_modify(|n| *n += 1).or_insert(0);
        let child = prepare(owner, raw, index, o.copy_labels)?;
        let api_version = child["apiVersion"].as_str().unwrap_or_default();
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        let kind = child["kind"].as_str().unwrap_or_default();
        let selector = pb::ResourceSelector { group: group.into(), version: version.into(), name: kind.into() };
        let resource = kinds
            .resolve(api, &selector)
            .await?
            .ok_or_else(|| AdoptError::NotServed { kind: kind.into(), api_version: api_version.into() })?;
        let (ns, name) = (object::meta_str(&child, "namespace").to_string(), object::meta_str(&child, "name").to_string());
        let path = resource.object_path(&ns, &name);
        let created = if o.apply {
            let apply_path = format!("{path}?fieldManager=bosun&force=true");
            api.patch(&apply_path, content::APPLY, &child).await.inspect_err(|e| forget_on_404(kinds, e, &selector))?
        } else {
            match api.create(&resource.collection_path(Some(&ns)), &child).await {
                Ok(v) => v,
                Err(e) if e.code() == Some(409) => {
                    let existing = api.get(&path).await?;
                    let ours = existing["metadata"]["ownerReferences"]
                        .as_array()
                        .is_some_and(|refs| refs.iter().any(|r| r["uid"].as_str() == Some(object::meta_str(owner, "uid"))));
                    if !ours {
                        return Err(AdoptError::NotOurs { kind: kind.into(), namespace: ns, name });
                    }
                    existing
                }
                Err(e) => {
                    forget_on_404(kinds, &e, &selector);
                    return Err(e.into());
                }
            }
        };
        uids.push(object::meta_str(&created, "uid").to_string());
    }
    Ok(uids)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owner() -> Value {
        json!({"apiVersion": "kopf.dev/v1", "kind": "KopfExample", "metadata": {"name": "ex", "namespace": "ns", "uid": "u1", "labels": {"app": "a"}}})
    }

    #[test]
    fn children_get_namespace_name_labels_and_an_owner_reference() {
        let cases = [
            (json!({"apiVersion": "v1", "kind": "Pod"}), 0, false, "ns", "ex-pod", None),
            (json!({"apiVersion": "v1", "kind": "Pod"}), 2, true, "ns", "ex-pod-2", Some("a")),
            (
                json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "given", "namespace": "other", "labels": {"app": "mine"}}}),
                0,
                true,
                "other",
                "given",
                Some("mine"),
            ),
            (json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"generateName": "x-"}}), 0, false, "ns", "ex-pod", None),
        ];
        for (child, index, copy, ns, name, label) in cases {
            let got = prepare(&owner(), child.clone(), index, copy).unwrap();
            assert_eq!(got["metadata"]["namespace"], ns, "{child}");
            assert_eq!(got["metadata"]["name"], name, "{child}");
            assert_eq!(got["metadata"]["labels"]["app"].as_str(), label, "{child}");
            assert!(got["metadata"].get("generateName").is_none());
            let refs = got["metadata"]["ownerReferences"].as_array().unwrap();
            assert_eq!(refs.len(), 1);
            assert_eq!(
                refs[0],
                json!({"apiVersion": "kopf.dev/v1", "kind": "KopfExample", "name": "ex", "uid": "u1", "controller": true, "blockOwnerDeletion": true})
            );
        }
    }

    #[test]
    fn malformed_children_are_refused_with_a_reason() {
        let cases = [
            (json!([1]), "an owned object is not a JSON object"),
            (json!({"kind": "Pod"}), "an owned object has no apiVersion"),
            (json!({"apiVersion": "v1"}), "an owned object has no kind"),
        ];
        for (child, want) in cases {
            assert_eq!(prepare(&owner(), child, 0, false).unwrap_err().to_string(), want);
        }
    }
}
