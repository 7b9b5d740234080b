//! What a request asks to do, read from its method, path and query as k8s.io/apiserver's
//! `RequestInfoFactory` reads it — before routing, so a path the server does not serve is
//! authorized like any other: resource requests (`/api/v1/...`, `/apis/GROUP/VERSION/...`)
//! give a verb, group, namespace, resource, subresource and name; every other path is a
//! non-resource request whose verb is the lowercase method.

use std::collections::HashMap;

/// A request as authorization sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Attributes {
    /// A request for an API resource.
    Resource(ResourceAttributes),
    /// Any other path (`/version`, `/api`, `/apis/apps`, `/metrics`).
    NonResource {
        /// The lowercase HTTP method (`get`, `post`, ...).
        verb: String,
        /// The request's path.
        path: String,
    },
}

/// The attributes of a resource request; empty strings where the request has none.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResourceAttributes {
    /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`, `deletecollection`,
    /// `proxy`, or `impersonate` for an impersonation check.
    pub verb: String,
    /// The API group (empty: core).
    pub group: String,
    /// The API version.
    pub version: String,
    /// The namespace (empty: cluster scope; a Namespace's own name for `namespaces/NAME`).
    pub namespace: String,
    /// The resource (plural).
    pub resource: String,
    /// The subresource (`status`, `scale`, ...).
    pub subresource: String,
    /// The object's name, from the path or from a `metadata.name` field selector.
    pub name: String,
}

/// A resource path that names a verb (`watch`, `proxy`) and nothing after it: the real server
/// cannot tell what it is for and answers 500.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("unable to determine kind and namespace from url")]
pub struct Unresolvable;

impl Attributes {
    /// The attributes of a request with this method, path and query (each parameter's first
    /// value).
    pub fn of_request(method: &str, path: &str, query: &HashMap<String, String>) -> Result<Attributes, Unresolvable> {
        let non_resource = || Attributes::NonResource { verb: method.to_ascii_lowercase(), path: path.to_string() };
        let parts: Vec<&str> = match path.trim_matches('/') {
            "" => Vec::new(),
            trimmed => trimmed.split('/').collect(),
        };
        if parts.len() < 3 || !matches!(parts[0], "api" | "apis") {
            return Ok(non_resource());
        }
        let mut rest = &parts[1..];
        let mut group = "";
        if parts[0] == "apis" {
            if rest.len() < 3 {
                return Ok(non_resource());
            }
            group = rest[0];
            rest = &rest[1..];
        }
        let version = rest[0];
        rest = &rest[1..];
        let mut verb = if matches!(rest[0], "watch" | "proxy") {
            if rest.len() < 2 {
                return Err(Unresolvable);
            }
            let verb = rest[0];
            rest = &rest[1..];
            verb
        } else {
            match method {
                "POST" => "create",
                "GET" | "HEAD" => "get",
                "PUT" => "update",
                "PATCH" => "patch",
                "DELETE" => "delete",
                _ => "",
            }
        };
        let mut namespace = "";
        if rest[0] == "namespaces" && rest.len() > 1 {
            namespace = rest[1];
            // `namespaces/NAME/status` and `/finalize` are the Namespace's own subresources
            if rest.len() > 2 && !matches!(rest[2], "status" | "finalize") {
                rest = &rest[2..];
            }
        }
        let resource = rest[0];
        let name = rest.get(1).copied().unwrap_or("");
        let subresource = if verb == "proxy" { "" } else { rest.get(2).copied().unwrap_or("") };
        let mut name = name.to_string();
        if name.is_empty() && verb == "get" {
            let (watch, pinned) = list_options(query);
            verb = if watch { "watch" } else { "list" };
            if let Some(pinned) = pinned.filter(|n| crate::validate::path_segment(n).is_ok()) {
                name = pinned;
            }
        }
        if name.is_empty() && verb == "delete" {
            verb = "deletecollection";
        }
        Ok(Attributes::Resource(ResourceAttributes {
            verb: verb.into(),
            group: group.into(),
            version: version.into(),
            namespace: namespace.into(),
            resource: resource.into(),
            subresource: subresource.into(),
            name,
        }))
    }

    /// The verb.
    pub fn verb(&self) -> &str {
        match self {
            Attributes::Resource(r) => &r.verb,
            Attributes::NonResource { verb, .. } => verb,
        }
    }

    /// The namespace of a resource request (empty for anything else).
    pub fn namespace(&self) -> &str {
        match self {
            Attributes::Resource(r) => &r.namespace,
            Attributes::NonResource { .. } => "",
        }
    }
}

/// What a collection GET's list options say to authorization: whether it watches, and the name
/// a `metadata.name=X` field selector pins. When the options do not decode (a malformed
/// selector or number) the real server still reads `watch` but pins no name.
fn list_options(query: &HashMap<String, String>) -> (bool, Option<String>) {
    let watch = query.get("watch").is_some_and(|v| !(v == "0" || v.eq_ignore_ascii_case("false")));
    let numbers_decode = ["limit", "timeoutSeconds"].iter().all(|k| query.get(*k).is_none_or(|v| v.parse::<i64>().is_ok()));
    let labels_decode = query.get("labelSelector").is_none_or(|s| crate::selector::LabelSelector::parse(s).is_ok());
    let pinned = match query.get("fieldSelector").map(|s| pinned_name(s)) {
        Some(Ok(pinned)) if numbers_decode && labels_decode => pinned,
        _ => None,
    };
    (watch, pinned)
}

/// The name a field selector requires (`fields.Selector.RequiresExactMatch("metadata.name")`):
/// the value of its first `metadata.name=` or `==` term, terms sorted as the real parser sorts
/// them; an error when the selector does not parse (`fields.ParseSelector`).
fn pinned_name(selector: &str) -> Result<Option<String>, ()> {
    let mut terms = split_terms(selector);
    terms.sort_unstable();
    let mut pinned = None;
    for term in terms.into_iter().filter(|t| !t.is_empty()) {
        // the first place where an operator starts, trying `!=`, `==`, `=` at each
        let (field, op, value) = (0..term.len())
            .filter(|i| term.is_char_boundary(*i))
            .find_map(|i| {
                ["!=", "==", "="].into_iter().find(|op| term[i..].starts_with(op)).map(|op| (&term[..i], op, &term[i + op.len()..]))
            })
            .ok_or(())?;
        let value = unescape(value)?;
        if field == "metadata.name" && op != "!=" && pinned.is_none() {
            pinned = Some(value);
        }
    }
    Ok(pinned)
}

/// Split on commas that no backslash escapes.
fn split_terms(selector: &str) -> Vec<&str> {
    if selector.is_empty() {
        return Vec::new();
    }
    let (mut terms, mut start, mut escaped) = (Vec::new(), 0, false);
    for (i, c) in selector.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            ',' => {
                terms.push(&selector[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    terms.push(&selector[start..]);
    terms
}

/// A field selector value with `\\`, `\,` and `\=` unescaped (`fields.UnescapeValue`); an
/// unescaped `,` or `=` or any other escape is an error.
fn unescape(value: &str) -> Result<String, ()> {
    let (mut out, mut escaped) = (String::with_capacity(value.len()), false);
    for c in value.chars() {
        match c {
            '\\' | ',' | '=' if escaped => {
                out.push(c);
                escaped = false;
            }
            _ if escaped => return Err(()),
            '\\' => escaped = true,
            ',' | '=' => return Err(()),
            _ => out.push(c),
        }
    }
    if escaped { Err(()) } else { Ok(out) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attrs(method: &str, target: &str) -> Result<Attributes, Unresolvable> {
        let (path, query) = target.split_once('?').unwrap_or((target, ""));
        let mut params = HashMap::new();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            params.entry(k.to_string()).or_insert_with(|| v.to_string());
        }
        Attributes::of_request(method, path, &params)
    }

    /// verb, group, namespace, resource, subresource, name
    fn resource(fields: [&str; 6]) -> Result<Attributes, Unresolvable> {
        let [verb, group, namespace, resource, subresource, name] = fields.map(String::from);
        let version = "v1".to_string();
        Ok(Attributes::Resource(ResourceAttributes { verb, group, version, namespace, resource, subresource, name }))
    }

    fn non_resource(verb: &str, path: &str) -> Result<Attributes, Unresolvable> {
        Ok(Attributes::NonResource { verb: verb.into(), path: path.into() })
    }

    #[test]
    fn resource_requests_get_their_verb_from_the_method_and_the_path() {
        let table = [
            ("GET", "/api/v1/namespaces/ns/configmaps/c", resource(["get", "", "ns", "configmaps", "", "c"])),
            ("HEAD", "/api/v1/namespaces/ns/configmaps/c", resource(["get", "", "ns", "configmaps", "", "c"])),
            ("GET", "/api/v1/namespaces/ns/configmaps", resource(["list", "", "ns", "configmaps", "", ""])),
            ("GET", "/api/v1/configmaps", resource(["list", "", "", "configmaps", "", ""])),
            ("GET", "/api/v1/namespaces/ns/configmaps?watch=true", resource(["watch", "", "ns", "configmaps", "", ""])),
            ("GET", "/api/v1/namespaces/ns/configmaps?watch=1", resource(["watch", "", "ns", "configmaps", "", ""])),
            ("GET", "/api/v1/namespaces/ns/configmaps?watch=false", resource(["list", "", "ns", "configmaps", "", ""])),
            ("GET", "/api/v1/namespaces/ns/configmaps?watch=0", resource(["list", "", "ns", "configmaps", "", ""])),
            ("GET", "/api/v1/watch/namespaces/ns/configmaps", resource(["watch", "", "ns", "configmaps", "", ""])),
            ("GET", "/api/v1/watch/namespaces/ns/configmaps/c", resource(["watch", "", "ns", "configmaps", "", "c"])),
            ("GET", "/apis/apps/v1/watch/deployments", resource(["watch", "apps", "", "deployments", "", ""])),
            ("POST", "/api/v1/namespaces/ns/configmaps", resource(["create", "", "ns", "configmaps", "", ""])),
            ("PUT", "/api/v1/namespaces/ns/configmaps/c", resource(["update", "", "ns", "configmaps", "", "c"])),
            ("PATCH", "/api/v1/namespaces/ns/configmaps/c", resource(["patch", "", "ns", "configmaps", "", "c"])),
            ("DELETE", "/api/v1/namespaces/ns/configmaps/c", resource(["delete", "", "ns", "configmaps", "", "c"])),
            ("DELETE", "/api/v1/namespaces/ns/configmaps", resource(["deletecollection", "", "ns", "configmaps", "", ""])),
            ("OPTIONS", "/api/v1/namespaces/ns/configmaps/c", resource(["", "", "ns", "configmaps", "", "c"])),
            ("PATCH", "/apis/apps/v1/namespaces/ns/deployments/d/scale", resource(["patch", "apps", "ns", "deployments", "scale", "d"])),
            ("PUT", "/apis/g.dev/v1/widgets/w/status", resource(["update", "g.dev", "", "widgets", "status", "w"])),
            ("POST", "/api/v1/namespaces/ns/serviceaccounts/sa/token", resource(["create", "", "ns", "serviceaccounts", "token", "sa"])),
            ("GET", "/api/v1/namespaces/ns/pods/p/proxy/some/path", resource(["get", "", "ns", "pods", "proxy", "p"])),
            ("GET", "/api/v1/proxy/namespaces/ns/pods/p/x", resource(["proxy", "", "ns", "pods", "", "p"])),
            // a Namespace is in its own namespace; its status and finalize are its subresources
            ("GET", "/api/v1/namespaces", resource(["list", "", "", "namespaces", "", ""])),
            ("GET", "/api/v1/namespaces/ns", resource(["get", "", "ns", "namespaces", "", "ns"])),
            ("PUT", "/api/v1/namespaces/ns/finalize", resource(["update", "", "ns", "namespaces", "finalize", "ns"])),
            ("PATCH", "/api/v1/namespaces/ns/status", resource(["patch", "", "ns", "namespaces", "status", "ns"])),
            // unknown resources are still resources: authorization comes before routing
            ("GET", "/apis/nothing.dev/v1/things", resource(["list", "nothing.dev", "", "things", "", ""])),
        ];
        for (method, path, want) in table {
            assert_eq!(attrs(method, path), want, "{method} {path}");
        }
    }

    #[test]
    fn a_metadata_name_field_selector_names_the_listed_object() {
        let table = [
            ("?fieldSelector=metadata.name=c", "list", "c"),
            ("?fieldSelector=metadata.name==c&watch=1", "watch", "c"),
            ("?fieldSelector=metadata.name!=c", "list", ""),
            ("?fieldSelector=metadata.namespace=ns,metadata.name=c", "list", "c"),
            ("?fieldSelector=metadata.name=b,metadata.name=a", "list", "a"),
            ("?fieldSelector=metadata.name=a\\,b", "list", "a,b"),
            // not a path segment name: no name
            ("?fieldSelector=metadata.name=..", "list", ""),
            // the options do not decode: no name, but watch is still read
            ("?fieldSelector=metadata.name=a=b", "list", ""),
            ("?fieldSelector=metadata.name=c,nonsense&watch=true", "watch", ""),
            ("?fieldSelector=metadata.name=c&limit=x", "list", ""),
            ("?fieldSelector=metadata.name=c&labelSelector=a%20in%20b", "list", ""),
        ];
        for (query, verb, name) in table {
            let query = query.replace("%20", " ");
            let got = attrs("GET", &format!("/api/v1/namespaces/ns/configmaps{query}"));
            assert_eq!(got, resource([verb, "", "ns", "configmaps", "", name]), "{query}");
        }
        let named = attrs("DELETE", "/api/v1/namespaces/ns/configmaps?fieldSelector=metadata.name=c");
        assert_eq!(named, resource(["deletecollection", "", "ns", "configmaps", "", ""]), "only a collection GET reads the selector");
    }

    #[test]
    fn every_other_path_is_a_non_resource_request_with_the_lowercase_method_as_verb() {
        let table = [
            ("GET", "/", non_resource("get", "/")),
            ("GET", "/api", non_resource("get", "/api")),
            ("GET", "/api/v1", non_resource("get", "/api/v1")),
            ("GET", "/apis", non_resource("get", "/apis")),
            ("GET", "/apis/apps", non_resource("get", "/apis/apps")),
            ("GET", "/apis/apps/v1", non_resource("get", "/apis/apps/v1")),
            ("GET", "/version", non_resource("get", "/version")),
            ("GET", "/openapi/v3/apis/apps/v1", non_resource("get", "/openapi/v3/apis/apps/v1")),
            ("POST", "/metrics", non_resource("post", "/metrics")),
            ("PUT", "/healthz/x", non_resource("put", "/healthz/x")),
            ("DELETE", "/logs/a/b/c", non_resource("delete", "/logs/a/b/c")),
        ];
        for (method, path, want) in table {
            assert_eq!(attrs(method, path), want, "{method} {path}");
        }
        assert_eq!(attrs("GET", "/api/v1/watch"), Err(Unresolvable));
        assert_eq!(attrs("GET", "/apis/apps/v1/proxy"), Err(Unresolvable));
    }
}
