//! Aggregated discovery (`apidiscovery.k8s.io/v2`, and `v2beta1`): `/api` and `/apis` answer
//! every group, version and resource in one `APIGroupDiscoveryList` when the client's
//! `Accept` asks for it, as kubectl, client-go and kube-rs do first. It is built from the same
//! registry entries and subresource list as the legacy per-group-version lists
//! (`discovery.rs`), so the two forms agree.

use axum::response::Response;
use http::{HeaderValue, header};
use serde_json::{Value, json};

use super::negotiate::media_ranges;
use super::respond::json_response;
use crate::cluster::Cluster;
use crate::registry::ResourceInfo;

const GROUP: &str = "apidiscovery.k8s.io";
const KIND: &str = "APIGroupDiscoveryList";

/// The aggregated discovery version an `Accept` header asks for (`v2` or `v2beta1`), or
/// `None` for the legacy answers: the first of its [`media_ranges`] this endpoint can answer.
/// A range asking for a conversion other than `APIGroupDiscoveryList` cannot be answered here
/// and is passed over. Only JSON is answered, so ranges of other media types are passed over
/// too.
pub fn asked(accept: Option<&str>) -> Option<&'static str> {
    for r in media_ranges(accept.unwrap_or("")) {
        let json = matches!(r.media.as_str(), "application/json" | "application/*" | "*/*");
        match (json, r.group, r.version, r.kind) {
            (false, ..) => {}
            (true, None, None, None) => return None,
            (true, Some(GROUP), Some("v2"), Some(KIND)) => return Some("v2"),
            (true, Some(GROUP), Some("v2beta1"), Some(KIND)) => return Some("v2beta1"),
            _ => {}
        }
    }
    None
}

/// `/api` (`core`) or `/apis` as an `APIGroupDiscoveryList` of `version`.
pub fn answer(cluster: &Cluster, core: bool, version: &str) -> Response {
    let items: Vec<Value> = if core {
        vec![group(cluster, None, &["v1".to_string()])]
    } else {
        cluster.registry.groups().iter().map(|(name, versions)| group(cluster, Some(name), versions)).collect()
    };
    let list = json!({"kind": KIND, "apiVersion": format!("{GROUP}/{version}"), "metadata": {}, "items": items});
    let mut response = json_response(200, &list, &[]);
    if let Ok(ct) = HeaderValue::from_str(&format!("application/json;g={GROUP};v={version};as={KIND}")) {
        response.headers_mut().insert(header::CONTENT_TYPE, ct);
    }
    response
}

/// One `APIGroupDiscovery`: the group (unnamed for core) and its versions, preferred first.
fn group(cluster: &Cluster, name: Option<&str>, versions: &[String]) -> Value {
    let mut metadata = json!({"creationTimestamp": null});
    if let Some(name) = name {
        metadata = json!({"name": name, "creationTimestamp": null});
    }
    let versions: Vec<Value> = versions
        .iter()
        .map(|v| {
            let resources: Vec<Value> = cluster.registry.group_version(name.unwrap_or(""), v).iter().map(|i| resource(i)).collect();
            json!({"version": v, "resources": resources, "freshness": "Current"})
        })
        .collect();
    json!({"metadata": metadata, "versions": versions})
}

/// The kind a resource answers with: built-ins leave group and version empty (they are the
/// group version's own), custom resources name them.
fn own_kind(info: &ResourceInfo) -> Value {
    if info.builtin {
        json!({"group": "", "version": "", "kind": info.kind})
    } else {
        json!({"group": info.group, "version": info.version, "kind": info.kind})
    }
}

/// One `APIResourceDiscovery` with its subresources.
fn resource(info: &ResourceInfo) -> Value {
    let mut r = json!({
        "resource": info.plural,
        "responseKind": own_kind(info),
        "scope": if info.namespaced { "Namespaced" } else { "Cluster" },
        "singularResource": info.singular,
        "verbs": info.verbs,
    });
    if !info.short_names.is_empty() {
        r["shortNames"] = json!(info.short_names);
    }
    if !info.categories.is_empty() {
        r["categories"] = json!(info.categories);
    }
    let subresources: Vec<Value> = info
        .subresources()
        .iter()
        .map(|sub| {
            let kind = match sub.group_version {
                Some((group, version)) => json!({"group": group, "version": version, "kind": sub.kind}),
                None => own_kind(info),
            };
            json!({"subresource": sub.name, "responseKind": kind, "verbs": sub.verbs})
        })
        .collect();
    if !subresources.is_empty() {
        r["subresources"] = json!(subresources);
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_accept_header_chooses_the_form_of_discovery() {
        let v2 = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";
        let v2beta1 = "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList";
        let table = [
            (None, None),
            (Some("application/json"), None),
            (Some("*/*"), None),
            (Some(v2), Some("v2")),
            (Some(v2beta1), Some("v2beta1")),
            // kubectl, client-go and kube-rs
            (Some(&*format!("{v2},{v2beta1},application/json")), Some("v2")),
            // parameters in another order, spaces after the commas
            (Some("application/json; as=APIGroupDiscoveryList; v=v2; g=apidiscovery.k8s.io, application/json"), Some("v2")),
            // quality decides, not order
            (Some(&*format!("application/json;q=0.9,{v2}")), Some("v2")),
            (Some(&*format!("{v2};q=0.5,application/json")), None),
            // a wildcard comes after a specific range of the same quality
            (Some(&*format!("*/*,{v2beta1}")), Some("v2beta1")),
            // a conversion the endpoint cannot do is passed over
            (Some("application/json;as=Table;v=v1;g=meta.k8s.io,application/json"), None),
            (Some(&*format!("application/json;as=Table;v=v1;g=meta.k8s.io,{v2}")), Some("v2")),
            (Some("application/json;g=apidiscovery.k8s.io;v=v3;as=APIGroupDiscoveryList"), None),
            // only JSON is answered: a protobuf range is passed over
            (
                Some(&*format!("application/vnd.kubernetes.protobuf;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,{v2beta1}")),
                Some("v2beta1"),
            ),
            (Some("garbage"), None),
        ];
        for (accept, want) in table {
            assert_eq!(asked(accept), want, "{accept:?}");
        }
    }
}
