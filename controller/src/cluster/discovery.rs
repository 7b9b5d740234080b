//! Resolves resource selectors (plural, singular, kind, short name, category, with or
//! without group and version) to served resources, as `kubectl get NAME` does.

use serde_json::Value;

use super::{Api, Error};
use bosun_proto::v1::ResourceSelector;

/// A resource the API server serves.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ResolvedResource {
    /// API group; empty for core.
    pub group: String,
    /// API version.
    pub version: String,
    /// Plural name (the URL segment).
    pub plural: String,
    /// Kind.
    pub kind: String,
    /// Namespaced or cluster-scoped.
    pub namespaced: bool,
    /// Has a `/status` subresource.
    pub has_status: bool,
    /// Its status keeps unknown fields (so controller state may live there).
    pub status_keeps_unknown: bool,
}

impl ResolvedResource {
    /// `group/version`, or `version` for core.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() { self.version.clone() } else { format!("{}/{}", self.group, self.version) }
    }

    fn base(&self) -> String {
        if self.group.is_empty() { format!("/api/{}", self.version) } else { format!("/apis/{}/{}", self.group, self.version) }
    }

    /// The collection URL in a namespace (or cluster-wide when `None` or cluster-scoped).
    pub fn collection_path(&self, namespace: Option<&str>) -> String {
        match namespace.filter(|ns| self.namespaced && !ns.is_empty()) {
            Some(ns) => format!("{}/namespaces/{ns}/{}", self.base(), self.plural),
            None => format!("{}/{}", self.base(), self.plural),
        }
    }

    /// The object's URL.
    pub fn object_path(&self, namespace: &str, name: &str) -> String {
        format!("{}/{name}", self.collection_path(Some(namespace)))
    }

    /// A short name for logs: `kopfexamples.v1.kopf.dev`.
    pub fn display(&self) -> String {
        if self.group.is_empty() {
            format!("{}.{}", self.plural, self.version)
        } else {
            format!("{}.{}.{}", self.plural, self.version, self.group)
        }
    }

    /// Its `resource` label in the metrics: `kopfexamples.kopf.dev`, `pods`.
    pub fn metrics_label(&self) -> String {
        crate::metrics::resource_label(&self.group, &self.plural)
    }

    /// kube-rs' description of it, for watchers.
    pub fn api_resource(&self) -> kube::discovery::ApiResource {
        kube::discovery::ApiResource {
            group: self.group.clone(),
            version: self.version.clone(),
            api_version: self.api_version(),
            kind: self.kind.clone(),
            plural: self.plural.clone(),
        }
    }
}

/// A selector as (group, version, name); `None` where it leaves the choice open.
pub type Normalized = (Option<String>, Option<String>, String);

/// Splits a selector into (group, version, name), accepting `plural.group`, `group/version/plural`
/// and `version/plural` spellings in the name.
pub fn normalize(sel: &ResourceSelector) -> Normalized {
    let group = Some(sel.group.clone()).filter(|g| !g.is_empty());
    let version = Some(sel.version.clone()).filter(|v| !v.is_empty());
    let parts: Vec<&str> = sel.name.split('/').collect();
    match parts.as_slice() {
        [g, v, n] => (Some(g.to_string()), Some(v.to_string()), n.to_string()),
        [v, n] => (Some(String::new()), Some(v.to_string()), n.to_string()),
        _ if group.is_none() && sel.name.contains('.') => {
            let (n, g) = sel.name.split_once('.').expect("contains a dot");
            (Some(g.to_string()), version, n.to_string())
        }
        _ => (group, version, sel.name.clone()),
    }
}

/// Whether an APIResource entry is named by `name` (plural, singular, kind, short name, category).
pub fn names_match(r: &Value, name: &str) -> bool {
    let s = |k: &str| r.get(k).and_then(Value::as_str).unwrap_or("");
    let in_list = |k: &str| r.get(k).and_then(Value::as_array).is_some_and(|a| a.iter().any(|v| v.as_str() == Some(name)));
    s("name") == name || s("singularName") == name || s("kind").eq_ignore_ascii_case(name) || in_list("shortNames") || in_list("categories")
}

/// Resolves a selector through discovery. `Ok(None)` when nothing serves it (yet).
pub async fn resolve(cluster: &dyn Api, sel: &ResourceSelector) -> Result<Option<ResolvedResource>, Error> {
    let (group, version, name) = normalize(sel);
    let mut candidates: Vec<(String, String)> = Vec::new(); // (group, version)
    let groups = cluster.get("/apis").await?;
    let group_list = groups.get("groups").and_then(Value::as_array).cloned().unwrap_or_default();
    let preferred = |g: &str| -> Option<String> {
        group_list
            .iter()
            .find(|x| x.get("name").and_then(Value::as_str) == Some(g))
            .and_then(|x| x.pointer("/preferredVersion/version"))
            .and_then(Value::as_str)
            .map(String::from)
    };
    match group.as_deref() {
        Some("") => candidates.push((String::new(), version.clone().unwrap_or_else(|| "v1".into()))),
        Some(g) => {
            if let Some(v) = version.clone().or_else(|| preferred(g)) {
                candidates.push((g.to_string(), v));
            }
        }
        None => {
            candidates.push((String::new(), "v1".into()));
            for g in &group_list {
                if let (Some(n), Some(v)) =
                    (g.get("name").and_then(Value::as_str), g.pointer("/preferredVersion/version").and_then(Value::as_str))
                {
                    candidates.push((n.to_string(), v.to_string()));
                }
            }
        }
    }
    for (g, v) in candidates {
        let path = if g.is_empty() { format!("/api/{v}") } else { format!("/apis/{g}/{v}") };
        let list = match cluster.get(&path).await {
            Ok(l) => l,
            Err(e) if e.code() == Some(404) => continue,
            Err(e) => return Err(e),
        };
        let resources = list.get("resources").and_then(Value::as_array).cloned().unwrap_or_default();
        let Some(r) = resources.iter().find(|r| !r["name"].as_str().unwrap_or("").contains('/') && names_match(r, &name)) else {
            continue;
        };
        let plural = r["name"].as_str().unwrap_or_default().to_string();
        let has_status = resources.iter().any(|x| x["name"].as_str() == Some(&format!("{plural}/status")));
        let mut resolved = ResolvedResource {
            group: g.clone(),
            version: v.clone(),
            plural: plural.clone(),
            kind: r["kind"].as_str().unwrap_or_default().to_string(),
            namespaced: r["namespaced"].as_bool().unwrap_or(true),
            has_status,
            status_keeps_unknown: false,
        };
        if !g.is_empty() {
            resolved.status_keeps_unknown = status_keeps_unknown(cluster, &resolved).await;
        }
        return Ok(Some(resolved));
    }
    Ok(None)
}

/// Resolved resources, kept: owned objects name their kind on every call, and resolving one
/// takes two to four requests. Only found resources are kept (one not served yet is looked up
/// again next time); [`Kinds::forget`] drops one whose requests answered 404 (its CRD went
/// away or changed).
#[derive(Debug, Default)]
pub struct Kinds {
    known: parking_lot::Mutex<std::collections::HashMap<Normalized, ResolvedResource>>,
}

impl Kinds {
    /// [`resolve`], answered from what is kept when it can be.
    pub async fn resolve(&self, api: &dyn Api, sel: &ResourceSelector) -> Result<Option<ResolvedResource>, Error> {
        let key = normalize(sel);
        if let Some(r) = self.known.lock().get(&key) {
            return Ok(Some(r.clone()));
        }
        let found = resolve(api, sel).await?;
        if let Some(r) = &found {
            self.known.lock().insert(key, r.clone());
        }
        Ok(found)
    }

    /// Looks `sel` up afresh next time.
    pub fn forget(&self, sel: &ResourceSelector) {
        self.known.lock().remove(&normalize(sel));
    }
}

async fn status_keeps_unknown(cluster: &dyn Api, r: &ResolvedResource) -> bool {
    let path = format!("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{}.{}", r.plural, r.group);
    let Ok(crd) = cluster.get(&path).await else { return false };
    crd.pointer("/spec/versions")
        .and_then(Value::as_array)
        .and_then(|vs| vs.iter().find(|v| v["name"].as_str() == Some(&r.version)))
        .and_then(|v| v.pointer("/schema/openAPIV3Schema"))
        .is_some_and(schema_keeps_unknown_status)
}

/// Whether a CRD version's `openAPIV3Schema` lets the API server keep fields it does not
/// declare under `status`: a declared `status` must say `x-kubernetes-preserve-unknown-fields`
/// itself; without one, the root's says it for the whole object (the usual Kopf operator's CRD,
/// `{type: object, x-kubernetes-preserve-unknown-fields: true}`). Nothing else counts: a declared
/// `status` without it is pruned to what it declares, whatever the root says.
pub fn schema_keeps_unknown_status(schema: &Value) -> bool {
    let preserves = |v: &Value| v.get("x-kubernetes-preserve-unknown-fields").and_then(Value::as_bool) == Some(true);
    match schema.get("properties").and_then(|p| p.get("status")) {
        Some(status) => preserves(status),
        None => preserves(schema),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sel(group: &str, version: &str, name: &str) -> ResourceSelector {
        ResourceSelector { group: group.into(), version: version.into(), name: name.into() }
    }

    /// An API server that serves ConfigMaps and counts the requests.
    #[derive(Default)]
    struct Served {
        requests: parking_lot::Mutex<Vec<String>>,
    }

    impl Api for Served {
        fn request<'a>(
            &'a self,
            method: http::Method,
            path: &'a str,
            _ct: Option<&'a str>,
            _body: Option<Vec<u8>>,
        ) -> futures::future::BoxFuture<'a, Result<Value, Error>> {
            self.requests.lock().push(path.to_string());
            Box::pin(async move {
                match path {
                    "/apis" => Ok(json!({"groups": []})),
                    "/api/v1" => Ok(json!({"resources": [{"name": "configmaps", "kind": "ConfigMap", "namespaced": true}]})),
                    _ => Err(Error::Api { method, path: path.into(), code: 404, reason: "NotFound".into(), message: String::new() }),
                }
            })
        }
    }

    #[tokio::test]
    async fn kinds_are_looked_up_once_and_again_after_forget_and_unserved_ones_every_time() {
        let api = Served::default();
        let kinds = Kinds::default();
        let cm = sel("", "v1", "ConfigMap");
        for _ in 0..3 {
            assert_eq!(kinds.resolve(&api, &cm).await.unwrap().unwrap().plural, "configmaps");
        }
        assert_eq!(api.requests.lock().len(), 2, "/apis and /api/v1, once: {:?}", api.requests.lock());
        kinds.forget(&cm);
        kinds.resolve(&api, &cm).await.unwrap();
        assert_eq!(api.requests.lock().len(), 4);
        let missing = sel("", "v1", "Secret");
        assert!(kinds.resolve(&api, &missing).await.unwrap().is_none());
        assert!(kinds.resolve(&api, &missing).await.unwrap().is_none());
        assert_eq!(api.requests.lock().len(), 8, "not served: asked each time");
    }

    #[test]
    fn selectors_accept_kubectl_spellings() {
        let s = |x: &str| Some(x.to_string());
        let cases = [
            (sel("", "", "kex"), (None, None, "kex")),
            (sel("kopf.dev", "", "kopfexamples"), (s("kopf.dev"), None, "kopfexamples")),
            (sel("", "", "kopfexamples.kopf.dev"), (s("kopf.dev"), None, "kopfexamples")),
            (sel("", "", "kopf.dev/v1/kopfexamples"), (s("kopf.dev"), s("v1"), "kopfexamples")),
            (sel("", "", "v1/pods"), (s(""), s("v1"), "pods")),
        ];
        for (input, (g, v, n)) in cases {
            assert_eq!(normalize(&input), (g, v, n.to_string()), "{input:?}");
        }
    }

    #[test]
    fn names_match_plural_singular_kind_short_names_and_categories() {
        let r = json!({"name": "kopfexamples", "singularName": "kopfexample", "kind": "KopfExample", "shortNames": ["kex"], "categories": ["all"]});
        for (name, want) in [
            ("kopfexamples", true),
            ("kopfexample", true),
            ("KopfExample", true),
            ("kopfExample", true),
            ("kex", true),
            ("all", true),
            ("pods", false),
        ] {
            assert_eq!(names_match(&r, name), want, "{name}");
        }
    }

    #[test]
    fn status_keeps_unknown_fields_where_it_or_an_undeclared_status_under_a_preserving_root_says_so() {
        let preserve = json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true});
        let declared = json!({"type": "object", "properties": {"phase": {"type": "string"}}});
        let cases = [
            // The usual Kopf operator's CRD: the whole object keeps what it is given.
            (json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}), true),
            (json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true, "properties": {"spec": declared.clone()}}), true),
            // A declared status decides for itself.
            (json!({"type": "object", "properties": {"status": preserve.clone()}}), true),
            (json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true, "properties": {"status": declared.clone()}}), false),
            (json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true, "properties": {"status": preserve.clone()}}), true),
            (json!({"type": "object", "properties": {"status": declared}}), false),
            // Nothing preserved: pruned.
            (json!({"type": "object", "properties": {"spec": preserve}}), false),
            (json!({"type": "object"}), false),
            (json!({"type": "object", "x-kubernetes-preserve-unknown-fields": false}), false),
            (json!({"type": "object", "properties": {"status": {"x-kubernetes-preserve-unknown-fields": "yes"}}}), false),
        ];
        for (schema, want) in cases {
            assert_eq!(schema_keeps_unknown_status(&schema), want, "{schema}");
        }
    }

    #[test]
    fn paths_follow_scope_and_group() {
        let mut r = ResolvedResource {
            group: "kopf.dev".into(),
            version: "v1".into(),
            plural: "kopfexamples".into(),
            kind: "KopfExample".into(),
            namespaced: true,
            has_status: true,
            status_keeps_unknown: true,
        };
        assert_eq!(r.object_path("default", "x"), "/apis/kopf.dev/v1/namespaces/default/kopfexamples/x");
        assert_eq!(r.collection_path(None), "/apis/kopf.dev/v1/kopfexamples");
        r.namespaced = false;
        assert_eq!(r.object_path("", "x"), "/apis/kopf.dev/v1/kopfexamples/x");
        let core = ResolvedResource { group: String::new(), version: "v1".into(), plural: "pods".into(), ..r };
        assert_eq!(core.collection_path(Some("ns")), "/api/v1/pods");
    }
}
