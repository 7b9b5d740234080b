//! Objects for tests, the way `kubectl` handles them: YAML documents applied or deleted,
//! resources named by plural, singular, kind or short name and resolved through discovery.

use std::time::Duration;

use kube::Client;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde::Deserialize;
use serde_json::Value;
use tokio::time::Instant;

use super::error::Error;
use crate::resource::Selector;

/// How long a freshly applied CRD may take to be served.
const CRD_READY_TIMEOUT: Duration = Duration::from_secs(10);
/// How often conditions on the cluster are checked while waiting.
pub(crate) const POLL: Duration = Duration::from_millis(25);

/// A resolved resource.
#[derive(Debug, Clone)]
pub(crate) struct Found {
    pub(crate) api: ApiResource,
    pub(crate) namespaced: bool,
}

impl Found {
    pub(crate) fn api(&self, client: &Client, namespace: Option<&str>) -> Api<DynamicObject> {
        match (self.namespaced, namespace) {
            (true, ns) => Api::namespaced_with(client.clone(), ns.unwrap_or("default"), &self.api),
            (false, _) => Api::all_with(client.clone(), &self.api),
        }
    }
}

/// Finds the resource a selector names, as `kubectl get NAME` would: the core group first,
/// then every group; the preferred version unless one is given.
pub(crate) async fn resolve(client: &Client, selector: &Selector) -> Result<Option<Found>, Error> {
    let api_error = |source| Error::Api { action: format!("discover {selector}"), source };
    let mut candidates: Vec<(String, String)> = Vec::new();
    if selector.group.is_empty() {
        let core = client.list_core_api_versions().await.map_err(api_error)?;
        for version in core.versions {
            if selector.version.is_empty() || selector.version == version {
                candidates.push((String::new(), version));
            }
        }
    }
    if !selector.group.is_empty() || selector.version.is_empty() {
        for group in client.list_api_groups().await.map_err(api_error)?.groups {
            if !selector.group.is_empty() && selector.group != group.name {
                continue;
            }
            let version = if selector.version.is_empty() {
                group.preferred_version.map(|v| v.version).or_else(|| group.versions.first().map(|v| v.version.clone()))
            } else {
                group.versions.iter().find(|v| v.version == selector.version).map(|v| v.version.clone())
            };
            if let Some(version) = version {
                candidates.push((group.name, version));
            }
        }
    }
    for (group, version) in candidates {
        let list = if group.is_empty() {
            client.list_core_api_resources(&version).await
        } else {
            client.list_api_group_resources(&format!("{group}/{version}")).await
        };
        let Ok(list) = list else { continue };
        let name = selector.name.as_str();
        let matching = list.resources.into_iter().find(|r| {
            !r.name.contains('/')
                && (r.name == name
                    || r.singular_name == name
                    || r.kind.eq_ignore_ascii_case(name)
                    || r.short_names.as_ref().is_some_and(|s| s.iter().any(|s| s == name)))
        });
        if let Some(r) = matching {
            let gvk = GroupVersionKind::gvk(&group, &version, &r.kind);
            return Ok(Some(Found { api: ApiResource::from_gvk_with_plural(&gvk, &r.name), namespaced: r.namespaced }));
        }
    }
    Ok(None)
}

/// Resolves, or fails with a clear error.
pub(crate) async fn resolve_or_fail(client: &Client, selector: &Selector) -> Result<Found, Error> {
    resolve(client, selector).await?.ok_or_else(|| Error::UnknownResource(selector.to_string()))
}

/// The documents of a YAML stream, `List`s flattened, empty documents skipped.
pub(crate) fn documents(yaml: &str) -> Result<Vec<Value>, Error> {
    let mut docs = Vec::new();
    for document in serde_yaml::Deserializer::from_str(yaml) {
        let value = Value::deserialize(document).map_err(Error::Yaml)?;
        match value {
            Value::Null => {}
            Value::Object(ref map) if map.get("kind").and_then(Value::as_str) == Some("List") => {
                docs.extend(map.get("items").and_then(Value::as_array).cloned().unwrap_or_default());
            }
            other => docs.push(other),
        }
    }
    Ok(docs)
}

/// The resource, namespace and name of a document.
async fn locate(client: &Client, doc: &Value) -> Result<(Found, Option<String>, String), Error> {
    let api_version = doc["apiVersion"].as_str().unwrap_or_default();
    let kind = doc["kind"].as_str().unwrap_or_default();
    let name = doc["metadata"]["name"].as_str().unwrap_or_default();
    if api_version.is_empty() || kind.is_empty() || name.is_empty() {
        return Err(Error::InvalidDocument(format!(
            "every document needs apiVersion, kind and metadata.name; got apiVersion={api_version:?} kind={kind:?} name={name:?}"
        )));
    }
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let selector = Selector { group: group.into(), version: version.into(), name: kind.into() };
    let found = resolve_or_fail(client, &selector).await?;
    let namespace = doc["metadata"]["namespace"].as_str().map(String::from);
    Ok((found, namespace, name.to_string()))
}

/// Creates the object, or merge-patches it when it exists (so that what the controller wrote on
/// it, like finalizers and annotations, stays). Waits for a CRD to be served.
pub(crate) async fn apply(client: &Client, doc: Value) -> Result<Value, Error> {
    let (found, namespace, name) = locate(client, &doc).await?;
    let api = found.api(client, namespace.as_deref());
    let object: DynamicObject = serde_json::from_value(doc.clone()).map_err(|e| Error::InvalidDocument(e.to_string()))?;
    let applied = match api.create(&PostParams::default(), &object).await {
        Ok(created) => created,
        Err(kube::Error::Api(status)) if status.code == 409 => api
            .patch(&name, &PatchParams::default(), &Patch::Merge(&doc))
            .await
            .map_err(|source| Error::Api { action: format!("patch {} {name}", found.api.plural), source })?,
        Err(source) => return Err(Error::Api { action: format!("create {} {name}", found.api.plural), source }),
    };
    if found.api.kind == "CustomResourceDefinition" {
        wait_until_served(client, &doc).await?;
    }
    Ok(serde_json::to_value(applied).expect("objects always serialize"))
}

/// Deletes the object a document names; an absent object is fine.
pub(crate) async fn delete(client: &Client, doc: &Value) -> Result<(), Error> {
    let (found, namespace, name) = locate(client, doc).await?;
    let api = found.api(client, namespace.as_deref());
    match api.delete(&name, &DeleteParams::default()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
        Err(source) => Err(Error::Api { action: format!("delete {} {name}", found.api.plural), source }),
    }
}

async fn wait_until_served(client: &Client, crd: &Value) -> Result<(), Error> {
    let spec = &crd["spec"];
    let selector = Selector {
        group: spec["group"].as_str().unwrap_or_default().into(),
        version: spec["versions"][0]["name"].as_str().unwrap_or_default().into(),
        name: spec["names"]["plural"].as_str().unwrap_or_default().into(),
    };
    let deadline = Instant::now() + CRD_READY_TIMEOUT;
    loop {
        if resolve(client, &selector).await?.is_some() {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(Error::UnknownResource(format!("{selector} (its CRD was applied, but it is not served)")));
        }
        tokio::time::sleep(POLL).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn yaml_streams_become_documents_with_lists_flattened() {
        let yaml = "---\na: 1\n---\n---\nkind: List\nitems:\n- b: 2\n- c: 3\n";
        assert_eq!(documents(yaml).unwrap(), [json!({"a": 1}), json!({"b": 2}), json!({"c": 3})]);
    }
}
