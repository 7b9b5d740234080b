//! A request the API server forbade (403), said in RBAC's words: the verb, the resource and
//! the namespace the controller's account lacks, and the `bosun rbac` flag that adds them to
//! the roles it prints. Pure: read from the request alone, as the API server's authorizer
//! reads it (`k8s.io/apiserver/pkg/endpoints/request.RequestInfo`).

use http::Method;

/// One permission, as RBAC rules name it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Missing {
    /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`, `deletecollection`.
    pub verb: &'static str,
    /// The API group (empty: core).
    pub group: String,
    /// The resource's plural, with `/subresource` when there is one.
    pub resource: String,
    /// The namespace (`None`: cluster-wide or all namespaces).
    pub namespace: Option<String>,
    /// The request made an object (a create, or a server-side apply): what handlers' owned
    /// children need.
    pub makes: bool,
}

impl Missing {
    /// The permission a request to `path` (with its query) by `method` needs (`applies`: a
    /// server-side apply); `None` for a path that is no resource's (discovery, `/version`).
    pub fn of(method: &Method, path: &str, applies: bool) -> Option<Missing> {
        let (path, query) = path.split_once('?').unwrap_or((path, ""));
        let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
        let (group, rest) = match parts.as_slice() {
            ["api", _version, rest @ ..] => ("", rest),
            ["apis", group, _version, rest @ ..] => (*group, rest),
            _ => return None,
        };
        let (namespace, rest) = match rest {
            ["namespaces", ns, rest @ ..] if !rest.is_empty() => (Some(ns.to_string()), rest),
            rest => (None, rest),
        };
        let (resource, named) = match rest {
            [plural] => (plural.to_string(), false),
            [plural, _name] => (plural.to_string(), true),
            [plural, _name, sub] => (format!("{plural}/{sub}"), true),
            _ => return None,
        };
        let watch = query.split('&').any(|kv| kv == "watch=true" || kv == "watch=1");
        let verb = match (method.as_str(), named) {
            ("GET", _) if watch => "watch",
            ("GET", true) => "get",
            ("GET", false) => "list",
            ("POST", _) => "create",
            ("PUT", _) => "update",
            ("PATCH", _) => "patch",
            ("DELETE", true) => "delete",
            ("DELETE", false) => "deletecollection",
            _ => return None,
        };
        let makes = verb == "create" || (verb == "patch" && applies);
        Some(Missing { verb, group: group.to_string(), resource, namespace, makes })
    }

    /// What `bosun rbac` needs to be told to print a role with it.
    pub fn hint(&self) -> String {
        let plural = self.resource.split('/').next().unwrap_or_default();
        let named = if self.group.is_empty() { plural.to_string() } else { format!("{plural}.{}", self.group) };
        match (self.group.as_str(), plural) {
            ("coordination.k8s.io", "leases") => "`bosun rbac` with this run's --leader-election or --shards flags prints it".into(),
            ("admissionregistration.k8s.io", _) => "`bosun rbac` with this run's handler servers (its admission handlers) prints it".into(),
            ("kopf.dev" | "bosun.dev", "kopfpeerings" | "clusterkopfpeerings" | "bosunpeerings" | "clusterbosunpeerings") => {
                "`bosun rbac` with this run's peering flags prints it".into()
            }
            (_, "events") => "every role `bosun rbac` prints has it".into(),
            _ if self.makes => format!(
                "if handlers create {named} (own, adopt), `bosun rbac --owns {named}` prints it (or declare it in the handler server: `owns`)"
            ),
            _ => "`bosun rbac` with this run's flags and handler servers prints it".into(),
        }
    }

    /// The line said once per missing permission.
    pub fn line(&self) -> String {
        let group = if self.group.is_empty() { "the core API group".to_string() } else { format!("API group \"{}\"", self.group) };
        let place = match &self.namespace {
            Some(ns) => format!("in namespace \"{ns}\""),
            None => "cluster-wide".to_string(),
        };
        format!("Forbidden: the controller's account may not {} \"{}\" in {group} {place}; {}.", self.verb, self.resource, self.hint())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_forbidden_request_names_the_permission_it_needs() {
        type Case = (&'static str, Method, &'static str, Option<(&'static str, &'static str, &'static str, Option<&'static str>)>);
        let cases: [Case; 12] = [
            ("create a pod", Method::POST, "/api/v1/namespaces/default/pods", Some(("create", "", "pods", Some("default")))),
            (
                "apply a child",
                Method::PATCH,
                "/apis/apps/v1/namespaces/ns/deployments/x?fieldManager=bosun",
                Some(("patch", "apps", "deployments", Some("ns"))),
            ),
            (
                "patch status",
                Method::PATCH,
                "/apis/kopf.dev/v1/namespaces/d/kopfexamples/a/status",
                Some(("patch", "kopf.dev", "kopfexamples/status", Some("d"))),
            ),
            ("get one", Method::GET, "/api/v1/namespaces/d/configmaps/c", Some(("get", "", "configmaps", Some("d")))),
            ("list all", Method::GET, "/apis/kopf.dev/v1/kopfexamples?limit=500", Some(("list", "kopf.dev", "kopfexamples", None))),
            (
                "watch",
                Method::GET,
                "/apis/kopf.dev/v1/kopfexamples?watch=true&resourceVersion=1",
                Some(("watch", "kopf.dev", "kopfexamples", None)),
            ),
            ("a namespace itself", Method::GET, "/api/v1/namespaces/d", Some(("get", "", "namespaces", None))),
            (
                "cluster-wide",
                Method::DELETE,
                "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/a",
                Some(("delete", "admissionregistration.k8s.io", "validatingwebhookconfigurations", None)),
            ),
            (
                "replace",
                Method::PUT,
                "/apis/coordination.k8s.io/v1/namespaces/n/leases/l",
                Some(("update", "coordination.k8s.io", "leases", Some("n"))),
            ),
            ("delete all", Method::DELETE, "/api/v1/namespaces/n/pods", Some(("deletecollection", "", "pods", Some("n")))),
            ("discovery", Method::GET, "/apis", None),
            ("not the API", Method::GET, "/version", None),
        ];
        for (name, method, path, want) in cases {
            let got = Missing::of(&method, path, false);
            let got = got.as_ref().map(|m| (m.verb, m.group.as_str(), m.resource.as_str(), m.namespace.as_deref()));
            assert_eq!(got, want, "{name}");
        }
    }

    #[test]
    fn the_line_names_the_flag_that_adds_it() {
        let (apply, merge) = (true, false);
        let cases = [
            (
                "/api/v1/namespaces/default/pods",
                Method::POST,
                false,
                "may not create \"pods\" in the core API group in namespace \"default\"; if handlers create pods (own, adopt), `bosun rbac --owns pods` prints it",
            ),
            ("/apis/apps/v1/namespaces/d/deployments/x", Method::PATCH, apply, "`bosun rbac --owns deployments.apps` prints it"),
            (
                "/apis/kopf.dev/v1/namespaces/d/kopfexamples/x/status",
                Method::PATCH,
                merge,
                "may not patch \"kopfexamples/status\" in API group \"kopf.dev\" in namespace \"d\"; `bosun rbac` with this run's flags and handler servers prints it.",
            ),
            ("/apis/coordination.k8s.io/v1/namespaces/n/leases/l", Method::PUT, false, "--leader-election or --shards"),
            ("/api/v1/namespaces/n/events", Method::POST, false, "every role `bosun rbac` prints has it"),
            (
                "/apis/kopf.dev/v1/kopfexamples?watch=true",
                Method::GET,
                false,
                "may not watch \"kopfexamples\" in API group \"kopf.dev\" cluster-wide; `bosun rbac` with this run's flags and handler servers prints it",
            ),
            ("/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations", Method::POST, false, "its admission handlers"),
        ];
        for (path, method, applies, want) in cases {
            let line = Missing::of(&method, path, applies).unwrap().line();
            assert!(line.contains(want), "{path}: {line}");
        }
    }
}
