//! RBAC as k8s.io/kubernetes' `RBACAuthorizer` evaluates it over the stored objects: the
//! ClusterRoleBindings (granting everywhere) and the RoleBindings of the request's namespace
//! (granting there) whose subjects name the user, the rules of the Role or ClusterRole each
//! refers to — an aggregated ClusterRole's being those of the ClusterRoles its selectors match,
//! as the aggregation controller fills them in.

use std::sync::Arc;

use serde_json::Value;

use super::attributes::Attributes;
use super::user::{Denied, User, service_account_name};
use crate::selector::LabelSelector;
use crate::store::Obj;

/// The stored RBAC objects an authorization reads.
pub trait Objects {
    /// Every ClusterRoleBinding.
    fn cluster_role_bindings(&self) -> Vec<Arc<Obj>>;
    /// The RoleBindings of `namespace`.
    fn role_bindings(&self, namespace: &str) -> Vec<Arc<Obj>>;
    /// The Role `namespace/name`.
    fn role(&self, namespace: &str, name: &str) -> Option<Arc<Obj>>;
    /// Every ClusterRole.
    fn cluster_roles(&self) -> Vec<Arc<Obj>>;
}

/// One rule of a Role or ClusterRole (`PolicyRule`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rule {
    /// `verbs` (`*`: all).
    pub verbs: Vec<String>,
    /// `apiGroups` (`*`: all).
    pub api_groups: Vec<String>,
    /// `resources`: `res`, `res/sub`, `*` (all, subresources included) or `*/sub`.
    pub resources: Vec<String>,
    /// `resourceNames` (empty: any, and no name at all).
    pub resource_names: Vec<String>,
    /// `nonResourceURLs`: exact, `*`, or a prefix ending in `*`.
    pub non_resource_urls: Vec<String>,
}

impl Rule {
    /// The rule as a Role's `rules[i]` holds it.
    pub fn from_value(rule: &Value) -> Rule {
        let list = |k: &str| -> Vec<String> {
            rule.get(k).and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).map(String::from).collect()
        };
        Rule {
            verbs: list("verbs"),
            api_groups: list("apiGroups"),
            resources: list("resources"),
            resource_names: list("resourceNames"),
            non_resource_urls: list("nonResourceURLs"),
        }
    }

    /// Whether the rule allows the request (`RuleAllows`).
    pub fn allows(&self, attrs: &Attributes) -> bool {
        let verb = |v: &str| self.verbs.iter().any(|x| x == "*" || x == v);
        match attrs {
            Attributes::NonResource { verb: v, path } => verb(v) && self.non_resource_urls.iter().any(|u| url_matches(u, path)),
            Attributes::Resource(r) => {
                let combined = if r.subresource.is_empty() { r.resource.clone() } else { format!("{}/{}", r.resource, r.subresource) };
                verb(&r.verb)
                    && self.api_groups.iter().any(|g| g == "*" || *g == r.group)
                    && self.resources.iter().any(|res| resource_matches(res, &combined, &r.subresource))
                    && (self.resource_names.is_empty() || self.resource_names.contains(&r.name))
            }
        }
    }
}

/// `ResourceMatches`: `*`, the exact `res` or `res/sub`, or `*/sub` for a request of that
/// subresource. (There is no `res/*`: such a rule grants nothing the server ever asks about.)
fn resource_matches(rule: &str, combined: &str, subresource: &str) -> bool {
    rule == "*" || rule == combined || (!subresource.is_empty() && rule.strip_prefix("*/") == Some(subresource))
}

/// `NonResourceURLMatches`: `*`, the exact path, or a prefix when the rule ends in `*`.
fn url_matches(rule: &str, path: &str) -> bool {
    rule == "*" || rule == path || (rule.ends_with('*') && path.starts_with(rule.trim_end_matches('*')))
}

/// RBAC's decision from the stored bindings (`RBACAuthorizer.Authorize`): allowed by the first
/// rule that allows it; denied otherwise, with the roles that could not be found as the reason.
pub(super) fn authorize(objects: &impl Objects, user: &User, attrs: &Attributes) -> Result<(), Denied> {
    let mut errors: Vec<String> = Vec::new();
    let namespace = attrs.namespace();
    let namespaced = if namespace.is_empty() { Vec::new() } else { objects.role_bindings(namespace) };
    let bindings = objects.cluster_role_bindings().into_iter().map(|b| (b, "")).chain(namespaced.into_iter().map(|b| (b, namespace)));
    for (binding, namespace) in bindings {
        if !applies(&binding.value, user, namespace) {
            continue;
        }
        match role_rules(objects, &binding.value["roleRef"], namespace) {
            Ok(rules) if rules.iter().any(|r| r.allows(attrs)) => return Ok(()),
            Ok(_) => {}
            Err(e) if errors.contains(&e) => {}
            Err(e) => errors.push(e),
        }
    }
    let reason = match errors.as_slice() {
        [] => String::new(),
        [one] => format!("RBAC: {one}"),
        many => format!("RBAC: [{}]", many.join(", ")),
    };
    Err(Denied { reason })
}

/// Whether one of a binding's subjects is the user (`appliesToUser`); a ServiceAccount subject
/// without a namespace is of the RoleBinding's `namespace`.
fn applies(binding: &Value, user: &User, namespace: &str) -> bool {
    let subjects = binding.get("subjects").and_then(Value::as_array).into_iter().flatten();
    subjects.into_iter().any(|s| {
        let text = |k: &str| s.get(k).and_then(Value::as_str).unwrap_or("");
        match text("kind") {
            "User" => user.name == text("name"),
            "Group" => user.groups.iter().any(|g| g == text("name")),
            "ServiceAccount" => {
                let ns = if text("namespace").is_empty() { namespace } else { text("namespace") };
                !ns.is_empty() && user.name == service_account_name(ns, text("name"))
            }
            _ => false,
        }
    })
}

/// The rules of the role a binding refers to (`GetRoleReferenceRules`), or why there are none,
/// as the real listers word it.
fn role_rules(objects: &impl Objects, role_ref: &Value, namespace: &str) -> Result<Vec<Rule>, String> {
    let name = role_ref.get("name").and_then(Value::as_str).unwrap_or("");
    match role_ref.get("kind").and_then(Value::as_str).unwrap_or("") {
        "Role" => match objects.role(namespace, name) {
            Some(role) => Ok(rules_of(&role.value)),
            None => Err(format!("role.rbac.authorization.k8s.io \"{name}\" not found")),
        },
        "ClusterRole" => {
            let all = objects.cluster_roles();
            match all.iter().find(|r| r.name() == name) {
                Some(role) => Ok(cluster_role_rules(&all, role, &mut Vec::new())),
                None => Err(format!("clusterrole.rbac.authorization.k8s.io \"{name}\" not found")),
            }
        }
        other => Err(format!("unsupported role reference kind: \"{other}\"")),
    }
}

/// The rules a role object holds.
fn rules_of(role: &Value) -> Vec<Rule> {
    role.get("rules").and_then(Value::as_array).into_iter().flatten().map(Rule::from_value).collect()
}

/// A ClusterRole's rules as the aggregation controller leaves them: with an `aggregationRule`,
/// those of every other ClusterRole one of its `clusterRoleSelectors` matches (themselves
/// aggregated first; a cycle stops where it closes), without repeats, in place of its own.
fn cluster_role_rules(all: &[Arc<Obj>], role: &Obj, visiting: &mut Vec<String>) -> Vec<Rule> {
    let Some(aggregation) = role.value.get("aggregationRule").filter(|a| a.is_object()) else {
        return rules_of(&role.value);
    };
    visiting.push(role.name().to_string());
    let mut sorted: Vec<&Arc<Obj>> = all.iter().collect();
    sorted.sort_by(|a, b| a.name().cmp(b.name()));
    let mut rules: Vec<Rule> = Vec::new();
    for selector in aggregation.get("clusterRoleSelectors").and_then(Value::as_array).into_iter().flatten() {
        let selector = LabelSelector::from_object(selector);
        for other in &sorted {
            if visiting.iter().any(|v| v == other.name()) || !selector.matches(other.value.pointer("/metadata/labels")) {
                continue;
            }
            for rule in cluster_role_rules(all, other, visiting) {
                if !rules.contains(&rule) {
                    rules.push(rule);
                }
            }
        }
    }
    visiting.pop();
    rules
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::ResourceAttributes;
    use super::super::tests::Fixture;
    use super::*;

    fn rule(value: Value) -> Rule {
        Rule::from_value(&value)
    }

    /// verb, group, namespace, resource, subresource, name
    fn request(fields: [&str; 6]) -> Attributes {
        let [verb, group, namespace, resource, subresource, name] = fields.map(String::from);
        Attributes::Resource(ResourceAttributes { verb, group, version: "v1".into(), namespace, resource, subresource, name })
    }

    fn path(verb: &str, path: &str) -> Attributes {
        Attributes::NonResource { verb: verb.into(), path: path.into() }
    }

    #[test]
    fn rules_match_verbs_groups_resources_and_names_as_rbac_does() {
        let table = [
            // verbs
            (json!({"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}), ["get", "", "ns", "pods", "", "p"], true),
            (json!({"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}), ["list", "", "ns", "pods", "", ""], false),
            (json!({"verbs": ["*"], "apiGroups": [""], "resources": ["pods"]}), ["deletecollection", "", "ns", "pods", "", ""], true),
            // groups
            (
                json!({"verbs": ["get"], "apiGroups": ["apps"], "resources": ["deployments"]}),
                ["get", "", "ns", "deployments", "", "d"],
                false,
            ),
            (
                json!({"verbs": ["get"], "apiGroups": ["*"], "resources": ["deployments"]}),
                ["get", "apps", "ns", "deployments", "", "d"],
                true,
            ),
            (
                json!({"verbs": ["get"], "apiGroups": ["", "apps"], "resources": ["deployments"]}),
                ["get", "apps", "", "deployments", "", ""],
                true,
            ),
            // resources and subresources
            (json!({"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}), ["get", "", "ns", "pods", "log", "p"], false),
            (json!({"verbs": ["get"], "apiGroups": [""], "resources": ["pods/log"]}), ["get", "", "ns", "pods", "log", "p"], true),
            (json!({"verbs": ["get"], "apiGroups": [""], "resources": ["pods/log"]}), ["get", "", "ns", "pods", "", "p"], false),
            (json!({"verbs": ["get"], "apiGroups": [""], "resources": ["*"]}), ["get", "", "ns", "pods", "log", "p"], true),
            (json!({"verbs": ["get"], "apiGroups": [""], "resources": ["*/log"]}), ["get", "", "ns", "pods", "log", "p"], true),
            (json!({"verbs": ["get"], "apiGroups": [""], "resources": ["*/log"]}), ["get", "", "ns", "pods", "exec", "p"], false),
            (json!({"verbs": ["get"], "apiGroups": [""], "resources": ["*/log"]}), ["get", "", "ns", "pods", "", "p"], false),
            // `res/*` is not a pattern to RBAC: it matches no request
            (json!({"verbs": ["get"], "apiGroups": [""], "resources": ["pods/*"]}), ["get", "", "ns", "pods", "log", "p"], false),
            (json!({"verbs": ["get"], "apiGroups": [""], "resources": ["pods/*"]}), ["get", "", "ns", "pods", "", "p"], false),
            // resource names: only requests that name one
            (
                json!({"verbs": ["*"], "apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["a"]}),
                ["get", "", "ns", "configmaps", "", "a"],
                true,
            ),
            (
                json!({"verbs": ["*"], "apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["a"]}),
                ["get", "", "ns", "configmaps", "", "b"],
                false,
            ),
            (
                json!({"verbs": ["*"], "apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["a"]}),
                ["list", "", "ns", "configmaps", "", ""],
                false,
            ),
            (
                json!({"verbs": ["*"], "apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["a"]}),
                ["watch", "", "ns", "configmaps", "", ""],
                false,
            ),
            (
                json!({"verbs": ["*"], "apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["a"]}),
                ["create", "", "ns", "configmaps", "", ""],
                false,
            ),
            (
                json!({"verbs": ["*"], "apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["a"]}),
                ["deletecollection", "", "ns", "configmaps", "", ""],
                false,
            ),
            // a list pinned to a name by its field selector carries the name
            (
                json!({"verbs": ["list"], "apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["a"]}),
                ["list", "", "ns", "configmaps", "", "a"],
                true,
            ),
            // a non-resource rule grants no resource
            (json!({"verbs": ["*"], "nonResourceURLs": ["*"]}), ["get", "", "ns", "pods", "", "p"], false),
        ];
        for (r, attrs, want) in table {
            assert_eq!(rule(r.clone()).allows(&request(attrs)), want, "{r} {attrs:?}");
        }
    }

    #[test]
    fn non_resource_urls_match_exactly_or_by_a_starred_prefix() {
        let table = [
            (json!({"verbs": ["get"], "nonResourceURLs": ["/healthz"]}), path("get", "/healthz"), true),
            (json!({"verbs": ["get"], "nonResourceURLs": ["/healthz"]}), path("get", "/healthz/etcd"), false),
            (json!({"verbs": ["get"], "nonResourceURLs": ["/healthz/*"]}), path("get", "/healthz/etcd"), true),
            (json!({"verbs": ["get"], "nonResourceURLs": ["/healthz/*"]}), path("get", "/healthz"), false),
            (json!({"verbs": ["get"], "nonResourceURLs": ["/api*"]}), path("get", "/apis/apps"), true),
            (json!({"verbs": ["get"], "nonResourceURLs": ["*"]}), path("get", "/anything"), true),
            (json!({"verbs": ["get"], "nonResourceURLs": ["/metrics"]}), path("post", "/metrics"), false),
            (json!({"verbs": ["*"], "nonResourceURLs": ["/metrics"]}), path("post", "/metrics"), true),
            // a resource rule grants no path
            (json!({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}), path("get", "/metrics"), false),
        ];
        for (r, attrs, want) in table {
            assert_eq!(rule(r.clone()).allows(&attrs), want, "{r} {attrs:?}");
        }
    }

    fn role(kind: &str, ns: &str, name: &str, rules: Value) -> Value {
        json!({"kind": kind, "metadata": {"name": name, "namespace": ns}, "rules": rules})
    }

    fn binding(kind: &str, ns: &str, name: &str, role_kind: &str, role: &str, subjects: Value) -> Value {
        json!({"kind": kind, "metadata": {"name": name, "namespace": ns}, "roleRef": {"kind": role_kind, "name": role}, "subjects": subjects})
    }

    fn read_configmaps() -> Value {
        json!([{"verbs": ["get", "list", "watch"], "apiGroups": [""], "resources": ["configmaps"]}])
    }

    /// A ClusterRole that reads ConfigMaps, bound cluster-wide to `subjects`.
    fn cluster_readers(subjects: Value) -> Vec<Value> {
        vec![role("ClusterRole", "", "c", read_configmaps()), binding("ClusterRoleBinding", "", "b", "ClusterRole", "c", subjects)]
    }

    #[test]
    fn bindings_grant_their_roles_rules_where_they_apply() {
        let robot = User::service_account("team", "robot");
        let sa = |ns: &str| json!([{"kind": "ServiceAccount", "name": "robot", "namespace": ns}]);
        let list = |ns: &str| request(["list", "", ns, "configmaps", "", ""]);
        let nodes = request(["list", "", "", "nodes", "", ""]);
        let table: Vec<(&str, Vec<Value>, Attributes, bool)> = vec![
            ("nothing bound", vec![], list("team"), false),
            (
                "a Role bound in its namespace",
                vec![role("Role", "team", "r", read_configmaps()), binding("RoleBinding", "team", "b", "Role", "r", sa("team"))],
                list("team"),
                true,
            ),
            (
                "... grants nothing elsewhere",
                vec![role("Role", "team", "r", read_configmaps()), binding("RoleBinding", "team", "b", "Role", "r", sa("team"))],
                list("other"),
                false,
            ),
            (
                "... nor across namespaces when listing all",
                vec![role("Role", "team", "r", read_configmaps()), binding("RoleBinding", "team", "b", "Role", "r", sa("team"))],
                list(""),
                false,
            ),
            (
                "a RoleBinding's ServiceAccount without a namespace is of the binding's",
                vec![
                    role("Role", "team", "r", read_configmaps()),
                    binding("RoleBinding", "team", "b", "Role", "r", json!([{"kind": "ServiceAccount", "name": "robot"}])),
                ],
                list("team"),
                true,
            ),
            (
                "a ServiceAccount of another namespace is someone else",
                vec![role("Role", "team", "r", read_configmaps()), binding("RoleBinding", "team", "b", "Role", "r", sa("other"))],
                list("team"),
                false,
            ),
            (
                "a RoleBinding refers to a Role of its own namespace",
                vec![role("Role", "other", "r", read_configmaps()), binding("RoleBinding", "team", "b", "Role", "r", sa("team"))],
                list("team"),
                false,
            ),
            (
                "a ClusterRole bound by a RoleBinding grants in that namespace",
                vec![role("ClusterRole", "", "c", read_configmaps()), binding("RoleBinding", "team", "b", "ClusterRole", "c", sa("team"))],
                list("team"),
                true,
            ),
            (
                "... and not at the cluster scope",
                vec![role("ClusterRole", "", "c", read_configmaps()), binding("RoleBinding", "team", "b", "ClusterRole", "c", sa("team"))],
                list(""),
                false,
            ),
            ("a ClusterRoleBinding grants in every namespace", cluster_readers(sa("team")), list("other"), true),
            ("... and across all of them", cluster_readers(sa("team")), list(""), true),
            (
                "a cluster-scoped resource through a ClusterRoleBinding",
                vec![
                    role("ClusterRole", "", "c", json!([{"verbs": ["list"], "apiGroups": [""], "resources": ["nodes"]}])),
                    binding("ClusterRoleBinding", "", "b", "ClusterRole", "c", sa("team")),
                ],
                nodes.clone(),
                true,
            ),
            (
                "a cluster-scoped resource is not granted by a RoleBinding",
                vec![
                    role("ClusterRole", "", "c", json!([{"verbs": ["list"], "apiGroups": [""], "resources": ["nodes"]}])),
                    binding("RoleBinding", "team", "b", "ClusterRole", "c", sa("team")),
                ],
                nodes.clone(),
                false,
            ),
            (
                "a User subject by name",
                cluster_readers(json!([{"kind": "User", "name": "system:serviceaccount:team:robot"}])),
                list("team"),
                true,
            ),
            (
                "a Group subject: all service accounts of a namespace",
                cluster_readers(json!([{"kind": "Group", "name": "system:serviceaccounts:team"}])),
                list("team"),
                true,
            ),
            (
                "a Group the user is not in",
                cluster_readers(json!([{"kind": "Group", "name": "system:serviceaccounts:other"}])),
                list("team"),
                false,
            ),
            (
                "nonResourceURLs of a ClusterRole through a ClusterRoleBinding",
                vec![
                    role("ClusterRole", "", "c", json!([{"verbs": ["get"], "nonResourceURLs": ["/metrics"]}])),
                    binding("ClusterRoleBinding", "", "b", "ClusterRole", "c", sa("team")),
                ],
                path("get", "/metrics"),
                true,
            ),
            (
                "... but not through a RoleBinding",
                vec![
                    role("ClusterRole", "", "c", json!([{"verbs": ["get"], "nonResourceURLs": ["/metrics"]}])),
                    binding("RoleBinding", "team", "b", "ClusterRole", "c", sa("team")),
                ],
                path("get", "/metrics"),
                false,
            ),
        ];
        for (what, objects, attrs, want) in table {
            assert_eq!(authorize(&Fixture(objects), &robot, &attrs).is_ok(), want, "{what}");
        }
    }

    #[test]
    fn missing_roles_are_the_reason_of_a_denial() {
        let robot = User::service_account("team", "robot");
        let sa = json!([{"kind": "ServiceAccount", "name": "robot", "namespace": "team"}]);
        let someone = json!([{"kind": "User", "name": "someone"}]);
        let objects = Fixture(vec![
            binding("ClusterRoleBinding", "", "a", "ClusterRole", "gone", sa.clone()),
            binding("ClusterRoleBinding", "", "b", "ClusterRole", "gone", sa.clone()),
            binding("ClusterRoleBinding", "", "c", "ClusterRole", "not-mine", someone),
            binding("RoleBinding", "team", "d", "Role", "missing", sa.clone()),
        ]);
        let denied = authorize(&objects, &robot, &request(["list", "", "team", "configmaps", "", ""])).unwrap_err();
        assert_eq!(
            denied.reason,
            "RBAC: [clusterrole.rbac.authorization.k8s.io \"gone\" not found, role.rbac.authorization.k8s.io \"missing\" not found]"
        );
        let denied = authorize(&objects, &robot, &request(["list", "", "", "nodes", "", ""])).unwrap_err();
        assert_eq!(
            denied.reason, "RBAC: clusterrole.rbac.authorization.k8s.io \"gone\" not found",
            "RoleBindings only count in their namespace"
        );
        let granted = Fixture(vec![
            binding("ClusterRoleBinding", "", "a", "ClusterRole", "gone", sa.clone()),
            role("ClusterRole", "", "c", read_configmaps()),
            binding("ClusterRoleBinding", "", "z", "ClusterRole", "c", sa),
        ]);
        assert_eq!(authorize(&granted, &robot, &request(["list", "", "team", "configmaps", "", ""])), Ok(()));
    }

    #[test]
    fn an_aggregated_cluster_role_has_the_rules_of_the_roles_its_selectors_match() {
        let robot = User::service_account("team", "robot");
        let labelled = |name: &str, labels: Value, rules: Value| json!({"kind": "ClusterRole", "metadata": {"name": name, "labels": labels}, "rules": rules});
        let aggregated = |name: &str, labels: Value, selectors: Value| {
            json!({"kind": "ClusterRole", "metadata": {"name": name, "labels": labels}, "aggregationRule": {"clusterRoleSelectors": selectors},
                "rules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["secrets"]}]})
        };
        let objects = Fixture(vec![
            labelled("cm", json!({"agg": "view"}), read_configmaps()),
            labelled("pods", json!({"agg": "edit"}), json!([{"verbs": ["delete"], "apiGroups": [""], "resources": ["pods"]}])),
            labelled("nodes", json!({}), json!([{"verbs": ["list"], "apiGroups": [""], "resources": ["nodes"]}])),
            aggregated("view", json!({"agg": "edit"}), json!([{"matchLabels": {"agg": "view"}}])),
            aggregated("edit", json!({}), json!([{"matchExpressions": [{"key": "agg", "operator": "In", "values": ["edit"]}]}])),
            aggregated("loop", json!({"agg": "loop"}), json!([{"matchLabels": {"agg": "loop"}}])),
            binding(
                "ClusterRoleBinding",
                "",
                "b1",
                "ClusterRole",
                "edit",
                json!([{"kind": "ServiceAccount", "name": "robot", "namespace": "team"}]),
            ),
            binding(
                "ClusterRoleBinding",
                "",
                "b2",
                "ClusterRole",
                "loop",
                json!([{"kind": "ServiceAccount", "name": "robot", "namespace": "team"}]),
            ),
        ]);
        let table = [
            ("a matched role's rule", request(["delete", "", "team", "pods", "", "p"]), true),
            ("an aggregated role's aggregated rule", request(["list", "", "team", "configmaps", "", ""]), true),
            ("an unmatched role's rule", request(["list", "", "", "nodes", "", ""]), false),
            ("the aggregated roles' own rules, which the controller replaces", request(["get", "", "team", "secrets", "", "s"]), false),
        ];
        for (what, attrs, want) in table {
            assert_eq!(authorize(&objects, &robot, &attrs).is_ok(), want, "{what}");
        }
    }
}
