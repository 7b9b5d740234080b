//! Discovery and meta endpoints: `/version`, `/api`, `/apis`, group and group-version
//! resource lists in the legacy format (the aggregated one is `aggregated.rs`, built from the
//! same registry entries), and a minimal OpenAPI answer.

use axum::response::Response;
use serde_json::{Value, json};

use super::request::Ctx;
use super::respond::{error, json_response};
use crate::cluster::Cluster;
use crate::status::ApiError;

/// `/`: the list of paths.
pub fn root_paths() -> Value {
    json!({"paths": ["/api", "/api/v1", "/apis", "/healthz", "/livez", "/metrics", "/openapi/v2", "/readyz", "/version"]})
}

/// `/version`.
pub fn version() -> Value {
    json!({
        "major": "1", "minor": "36", "emulationMajor": "1", "emulationMinor": "36",
        "minCompatibilityMajor": "1", "minCompatibilityMinor": "35",
        "gitVersion": "v1.36.2-bosun", "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean", "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "go1.25.0", "compiler": "gc", "platform": "linux/amd64"
    })
}

/// `/api`.
pub fn core_versions(ctx: &Ctx) -> Value {
    let host = ctx.headers.get(http::header::HOST).and_then(|h| h.to_str().ok()).unwrap_or("127.0.0.1");
    json!({"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": host}]})
}

/// `/api/v1` or `/apis/G/V`.
pub fn resource_list(cluster: &Cluster, group: &str, version: &str) -> Value {
    let mut resources = Vec::new();
    for info in cluster.registry.group_version(group, version) {
        let mut r = json!({
            "name": info.plural, "singularName": info.singular, "namespaced": info.namespaced,
            "kind": info.kind, "verbs": info.verbs,
        });
        if !info.short_names.is_empty() {
            r["shortNames"] = json!(info.short_names);
        }
        if !info.categories.is_empty() {
            r["categories"] = json!(info.categories);
        }
        if info.builtin {
            r["storageVersionHash"] = json!("");
        }
        resources.push(r);
        for sub in info.subresources() {
            let mut r = json!({"name": format!("{}/{}", info.plural, sub.name), "singularName": "", "namespaced": info.namespaced});
            if let Some((g, v)) = sub.group_version {
                r["group"] = json!(g);
                r["version"] = json!(v);
            }
            r["kind"] = json!(sub.kind);
            r["verbs"] = json!(sub.verbs);
            resources.push(r);
        }
    }
    resources.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
    let gv = if group.is_empty() { version.to_string() } else { format!("{group}/{version}") };
    if group.is_empty() {
        json!({"kind": "APIResourceList", "groupVersion": gv, "resources": resources})
    } else {
        json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources})
    }
}

fn group_json(name: &str, versions: &[String]) -> Value {
    let vs: Vec<Value> = versions.iter().map(|v| json!({"groupVersion": format!("{name}/{v}"), "version": v})).collect();
    json!({"name": name, "versions": vs, "preferredVersion": vs[0]})
}

/// `/apis`.
pub fn groups(cluster: &Cluster, _ctx: &Ctx) -> Response {
    let groups: Vec<Value> = cluster.registry.groups().iter().map(|(g, vs)| group_json(g, vs)).collect();
    json_response(200, &json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}), &[])
}

/// `/apis/G`.
pub fn group(cluster: &Cluster, name: &str) -> Response {
    match cluster.registry.groups().get(name) {
        Some(vs) => {
            let mut g = group_json(name, vs);
            g["kind"] = json!("APIGroup");
            g["apiVersion"] = json!("v1");
            json_response(200, &g, &[])
        }
        None => error(&ApiError::page_not_found()),
    }
}

/// `/openapi/v3` and `/openapi/v3/<group-version>`: the minimum kubectl reads — the index
/// of group versions, and per group version the PATCH operations with their
/// `x-kubernetes-group-version-kind` and the `fieldValidation` parameter, from which kubectl
/// learns that the server validates fields itself. `/openapi/v2` is not served.
pub fn openapi(cluster: &Cluster, rest: &[&str]) -> Response {
    match rest {
        ["v3"] => {
            let mut paths = serde_json::Map::new();
            paths.insert("api/v1".into(), json!({"serverRelativeURL": "/openapi/v3/api/v1?hash=0"}));
            for (g, vs) in cluster.registry.groups() {
                for v in vs {
                    paths.insert(format!("apis/{g}/{v}"), json!({"serverRelativeURL": format!("/openapi/v3/apis/{g}/{v}?hash=0")}));
                }
            }
            json_response(200, &json!({"paths": paths}), &[])
        }
        ["v3", "api", "v1"] => json_response(200, &gv_doc(cluster, "", "v1"), &[]),
        ["v3", "apis", g, v] if cluster.registry.has_group(g, Some(v)) => json_response(200, &gv_doc(cluster, g, v), &[]),
        _ => error(&ApiError::page_not_found()),
    }
}

fn gv_doc(cluster: &Cluster, group: &str, version: &str) -> Value {
    let prefix = if group.is_empty() { format!("/api/{version}") } else { format!("/apis/{group}/{version}") };
    let params = json!([
        {"name": "dryRun", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
        {"name": "fieldManager", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
        {"name": "fieldValidation", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
        {"name": "force", "in": "query", "schema": {"type": "boolean", "uniqueItems": true}}
    ]);
    let mut paths = serde_json::Map::new();
    for info in cluster.registry.group_version(group, version) {
        let gvk = json!({"group": info.group, "version": info.version, "kind": info.kind});
        let item = if info.namespaced {
            format!("{prefix}/namespaces/{{namespace}}/{}/{{name}}", info.plural)
        } else {
            format!("{prefix}/{}/{{name}}", info.plural)
        };
        let op = |action: &str| json!({"x-kubernetes-action": action, "x-kubernetes-group-version-kind": gvk, "parameters": params, "responses": {"200": {"description": "OK"}}});
        paths.insert(item, json!({"get": op("get"), "put": op("put"), "patch": op("patch"), "delete": op("delete")}));
    }
    json!({"openapi": "3.0.0", "info": {"title": "Kubernetes", "version": "v1.36.2"}, "paths": paths, "components": {"schemas": {}}})
}
