//! RBAC from the registry: the least-privilege rules a controller needs for the handlers its
//! servers register and for the way it runs (namespaces, peering, leader election, shards), as
//! `bosun rbac` prints them. Pure: the resources come resolved through discovery; nothing is
//! asked of the API server here.
//!
//! Every rule answers a request the controller makes (see the callers named in [`Needs`]); a
//! request it does not make gets no rule. Where a name is known in advance (the peering object,
//! the leader's Lease, a CRD), `get`/`patch`/`update` are limited to it with `resourceNames`;
//! `list`, `watch` and `create` cannot be, as Kubernetes authorizes them without a name.

use std::collections::{BTreeMap, BTreeSet};

pub mod servers;

use bosun_proto::v1 as pb;
use serde_json::{Value, json};

use crate::Namespaces;
use crate::cluster::discovery::ResolvedResource;
use crate::coordination::Replicas;
use crate::coordination::peering::Family;

/// What the controller does with one resource that handlers are registered for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Handled {
    /// The resource.
    pub resource: ResolvedResource,
    /// Whether any of its handlers keeps state on the objects (all kinds but event and index
    /// handlers): the controller then reads objects back (`get`), patches them (finalizer,
    /// progress, diffbase, the handlers' patches) and their `/status` (the handlers' results).
    pub writes: bool,
}

impl Handled {
    /// Whether a handler of `kind` makes the controller write to its objects.
    pub fn kind_writes(kind: pb::HandlerKind) -> bool {
        use pb::HandlerKind as K;
        matches!(kind, K::Create | K::Update | K::Delete | K::Resume | K::Field | K::Timer | K::Daemon)
    }
}

/// Everything that decides the controller's permissions.
#[derive(Debug, Clone)]
pub struct Needs {
    /// The handled resources (`runtime`: list and watch; the cycle: get and patch).
    pub handled: Vec<Handled>,
    /// The kinds handlers create as owned children (`runtime::owned`: create, or server-side
    /// apply = patch, and get when a create finds the object there).
    pub owned: Vec<ResolvedResource>,
    /// The namespaces served.
    pub namespaces: Namespaces,
    /// The peering (family and object name), unless standalone (`coordination::peering`:
    /// get, list and watch by name, patch of the object and its status).
    pub peering: Option<(Family, String)>,
    /// Leader election (`coordination::leader`: its Lease's get, create, update) or shards
    /// (`coordination::shards`: a Lease per replica, listed by label; get, list, create,
    /// update, and delete of its own and dead members' Leases).
    pub replicas: Replicas,
    /// The webhook configurations' name, when the controller keeps them for its admission
    /// handlers (`endpoints::admission`: get, create, patch, and delete on a clean exit).
    pub admission: Option<String>,
}

/// Where a rule applies: everywhere (a ClusterRole) or in one namespace (a Role).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Scope {
    /// Cluster-wide.
    Cluster,
    /// One namespace.
    Namespace(String),
}

/// The verbs, in the order rules list them.
const VERBS: [&str; 8] = ["get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"];

/// One RBAC rule.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Rule {
    /// The API group (one per rule; empty for core).
    pub group: String,
    /// The resources (`plural` or `plural/status`).
    pub resources: BTreeSet<String>,
    /// The verbs, in [`VERBS`] order.
    pub verbs: Vec<&'static str>,
    /// `resourceNames`, when limited to named objects.
    pub names: Vec<String>,
}

impl Rule {
    /// The rule as Kubernetes spells it.
    pub fn to_json(&self) -> Value {
        let mut rule = json!({"apiGroups": [self.group], "resources": self.resources, "verbs": self.verbs});
        if !self.names.is_empty() {
            rule["resourceNames"] = json!(self.names);
        }
        rule
    }
}

/// The rules per scope.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Grants {
    /// Scope → rules, in a stable order.
    pub rules: BTreeMap<Scope, Vec<Rule>>,
}

/// What rules of one resource list share: scope, group, verbs and names.
type RuleKey = (Scope, String, Vec<&'static str>, Vec<String>);

/// Collects grants and merges those that differ only in their resources.
#[derive(Default)]
struct Collector {
    /// (scope, group, verbs, names) → resources.
    by: BTreeMap<RuleKey, BTreeSet<String>>,
}

impl Collector {
    fn grant(&mut self, scope: &Scope, group: &str, resource: &str, verbs: &[&'static str], names: &[String]) {
        let verbs: Vec<&'static str> = VERBS.iter().copied().filter(|v| verbs.contains(v)).collect();
        let key = (scope.clone(), group.to_string(), verbs, names.to_vec());
        self.by.entry(key).or_default().insert(resource.to_string());
    }

    fn grants(self) -> Grants {
        let mut rules: BTreeMap<Scope, Vec<Rule>> = BTreeMap::new();
        for ((scope, group, verbs, names), resources) in self.by {
            rules.entry(scope).or_default().push(Rule { group, resources, verbs, names });
        }
        Grants { rules }
    }
}

/// The scopes a resource's requests go to: its namespaces when the controller serves plain
/// namespace names (one watch each), else cluster-wide (all namespaces, or globs: one watch
/// over all namespaces, filtered here).
fn scopes(namespaces: &Namespaces, namespaced: bool) -> Vec<Scope> {
    match namespaces.plain_names() {
        Some(names) if namespaced => names.iter().map(|ns| Scope::Namespace(ns.clone())).collect(),
        _ => vec![Scope::Cluster],
    }
}

/// The rules for `needs`.
pub fn grants(needs: &Needs) -> Grants {
    let mut c = Collector::default();
    // `cluster::discovery` reads the CRD of a resource of a named group, to see whether its
    // status keeps unknown fields (then state travels in status): one rule names them all.
    let mut crds = BTreeSet::new();
    let mut crd = |r: &ResolvedResource| {
        if !r.group.is_empty() {
            crds.insert(format!("{}.{}", r.plural, r.group));
        }
    };
    for h in &needs.handled {
        let r = &h.resource;
        for scope in scopes(&needs.namespaces, r.namespaced) {
            if h.writes {
                c.grant(&scope, &r.group, &r.plural, &["get", "list", "watch", "patch"], &[]);
                if r.has_status {
                    c.grant(&scope, &r.group, &format!("{}/status", r.plural), &["patch"], &[]);
                }
            } else {
                c.grant(&scope, &r.group, &r.plural, &["list", "watch"], &[]);
            }
        }
        crd(r);
    }
    // Events about the handled objects (`cluster::events`): in the object's namespace, in
    // `default` for cluster-scoped ones.
    let mut event_scopes = BTreeSet::new();
    for h in &needs.handled {
        let found = match (h.resource.namespaced, needs.namespaces.plain_names()) {
            (false, Some(_)) => vec![Scope::Namespace("default".into())],
            (namespaced, _) => scopes(&needs.namespaces, namespaced),
        };
        event_scopes.extend(found);
    }
    for scope in &event_scopes {
        c.grant(scope, "", "events", &["create"], &[]);
    }
    for r in &needs.owned {
        for scope in scopes(&needs.namespaces, r.namespaced) {
            c.grant(&scope, &r.group, &r.plural, &["get", "create", "patch"], &[]);
        }
        crd(r);
    }
    if let Some((family, name)) = &needs.peering {
        let names = [name.clone()];
        for scope in scopes(&needs.namespaces, true) {
            let namespace = match &scope {
                Scope::Cluster => None,
                Scope::Namespace(ns) => Some(ns.as_str()),
            };
            let (group, plural) = family.group_and_plural(namespace);
            c.grant(&scope, group, plural, &["get", "patch"], &names);
            c.grant(&scope, group, &format!("{plural}/status"), &["patch"], &names);
            // Watched by a field selector on the name, which RBAC cannot limit by name.
            c.grant(&scope, group, plural, &["list", "watch"], &[]);
        }
    }
    if !crds.is_empty() {
        c.grant(&Scope::Cluster, "apiextensions.k8s.io", "customresourcedefinitions", &["get"], &crds.into_iter().collect::<Vec<_>>());
    }
    if let Some(name) = &needs.admission {
        for plural in ["mutatingwebhookconfigurations", "validatingwebhookconfigurations"] {
            c.grant(&Scope::Cluster, "admissionregistration.k8s.io", plural, &["get", "patch", "delete"], std::slice::from_ref(name));
            // A create names no object yet: RBAC cannot limit it by name.
            c.grant(&Scope::Cluster, "admissionregistration.k8s.io", plural, &["create"], &[]);
        }
    }
    match &needs.replicas {
        Replicas::Each => {}
        Replicas::LeaderElection(lease) => {
            let scope = Scope::Namespace(lease.namespace.clone());
            c.grant(&scope, "coordination.k8s.io", "leases", &["get", "update"], std::slice::from_ref(&lease.name));
            c.grant(&scope, "coordination.k8s.io", "leases", &["create"], &[]);
        }
        Replicas::Shards(lease) => {
            let scope = Scope::Namespace(lease.namespace.clone());
            c.grant(&scope, "coordination.k8s.io", "leases", &["get", "list", "create", "update", "delete"], &[]);
        }
    }
    c.grants()
}

/// The ClusterRole and Roles of `grants`, each with its binding to the service account
/// `account` (`namespace/name`), named `name`.
pub fn manifests(grants: &Grants, name: &str, account: (&str, &str)) -> Vec<Value> {
    let subjects = json!([{"kind": "ServiceAccount", "name": account.1, "namespace": account.0}]);
    let mut docs = Vec::new();
    for (scope, rules) in &grants.rules {
        let rules: Vec<Value> = rules.iter().map(Rule::to_json).collect();
        let (role, binding, metadata) = match scope {
            Scope::Cluster => ("ClusterRole", "ClusterRoleBinding", json!({"name": name})),
            Scope::Namespace(ns) => ("Role", "RoleBinding", json!({"name": name, "namespace": ns})),
        };
        docs.push(json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": role, "metadata": metadata, "rules": rules}));
        docs.push(json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": binding,
            "metadata": metadata,
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role, "name": name},
            "subjects": subjects,
        }));
    }
    docs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn res(group: &str, plural: &str, namespaced: bool, has_status: bool) -> ResolvedResource {
        ResolvedResource {
            group: group.into(),
            version: "v1".into(),
            plural: plural.into(),
            kind: String::new(),
            namespaced,
            has_status,
            status_keeps_unknown: false,
        }
    }

    fn needs() -> Needs {
        Needs {
            handled: vec![Handled { resource: res("kopf.dev", "kopfexamples", true, true), writes: true }],
            owned: vec![],
            namespaces: Namespaces::All,
            peering: None,
            replicas: Replicas::Each,
            admission: None,
        }
    }

    fn lease(namespace: &str, name: &str) -> crate::coordination::LeaseSetup {
        crate::coordination::LeaseSetup { name: name.into(), namespace: namespace.into(), duration: std::time::Duration::from_secs(15) }
    }

    /// The rules as `scope group resources verbs [names]` lines.
    fn lines(grants: &Grants) -> Vec<String> {
        let mut out = Vec::new();
        for (scope, rules) in &grants.rules {
            let scope = match scope {
                Scope::Cluster => "*".to_string(),
                Scope::Namespace(ns) => ns.clone(),
            };
            for r in rules {
                let resources: Vec<&str> = r.resources.iter().map(String::as_str).collect();
                let mut line =
                    format!("{scope} {} {} {}", if r.group.is_empty() { "core" } else { &r.group }, resources.join(","), r.verbs.join(","));
                if !r.names.is_empty() {
                    line.push_str(&format!(" [{}]", r.names.join(",")));
                }
                out.push(line);
            }
        }
        out
    }

    #[test]
    fn each_need_gets_exactly_the_rules_of_the_requests_it_makes() {
        type Change = fn(&mut Needs);
        let cases: Vec<(&str, Change, Vec<&str>)> = vec![
            (
                "changing handlers on a CRD with status, all namespaces",
                |_| {},
                vec![
                    "* apiextensions.k8s.io customresourcedefinitions get [kopfexamples.kopf.dev]",
                    "* core events create",
                    "* kopf.dev kopfexamples get,list,watch,patch",
                    "* kopf.dev kopfexamples/status patch",
                ],
            ),
            (
                "only event and index handlers: list and watch, no writes",
                |n| n.handled[0].writes = false,
                vec![
                    "* apiextensions.k8s.io customresourcedefinitions get [kopfexamples.kopf.dev]",
                    "* core events create",
                    "* kopf.dev kopfexamples list,watch",
                ],
            ),
            (
                "a core resource without status: no CRD, no /status",
                |n| n.handled[0].resource = res("", "configmaps", true, false),
                vec!["* core configmaps get,list,watch,patch", "* core events create"],
            ),
            (
                "admission handlers: the webhook configurations of that name",
                |n| n.admission = Some("auto.bosun.dev".into()),
                vec![
                    "* admissionregistration.k8s.io mutatingwebhookconfigurations,validatingwebhookconfigurations create",
                    "* admissionregistration.k8s.io mutatingwebhookconfigurations,validatingwebhookconfigurations get,patch,delete [auto.bosun.dev]",
                    "* apiextensions.k8s.io customresourcedefinitions get [kopfexamples.kopf.dev]",
                    "* core events create",
                    "* kopf.dev kopfexamples get,list,watch,patch",
                    "* kopf.dev kopfexamples/status patch",
                ],
            ),
            (
                "plain namespace names: a Role in each",
                |n| n.namespaces = Namespaces::Patterns(vec!["ns1".into(), "ns2".into()]),
                vec![
                    "* apiextensions.k8s.io customresourcedefinitions get [kopfexamples.kopf.dev]",
                    "ns1 core events create",
                    "ns1 kopf.dev kopfexamples get,list,watch,patch",
                    "ns1 kopf.dev kopfexamples/status patch",
                    "ns2 core events create",
                    "ns2 kopf.dev kopfexamples get,list,watch,patch",
                    "ns2 kopf.dev kopfexamples/status patch",
                ],
            ),
            (
                "globs: one watch over all namespaces, so cluster-wide",
                |n| n.namespaces = Namespaces::Patterns(vec!["team-*".into()]),
                vec![
                    "* apiextensions.k8s.io customresourcedefinitions get [kopfexamples.kopf.dev]",
                    "* core events create",
                    "* kopf.dev kopfexamples get,list,watch,patch",
                    "* kopf.dev kopfexamples/status patch",
                ],
            ),
            (
                "a cluster-scoped resource under plain names: cluster-wide, its events in default",
                |n| {
                    n.handled[0].resource = res("", "namespaces", false, true);
                    n.namespaces = Namespaces::Patterns(vec!["ns1".into()]);
                },
                vec!["* core namespaces get,list,watch,patch", "* core namespaces/status patch", "default core events create"],
            ),
            (
                "owned kinds: get, create, patch where the handled objects are",
                |n| {
                    n.owned = vec![res("", "pods", true, true), res("apps", "deployments", true, true)];
                    n.namespaces = Namespaces::Patterns(vec!["ns1".into()]);
                },
                vec![
                    "* apiextensions.k8s.io customresourcedefinitions get [deployments.apps,kopfexamples.kopf.dev]",
                    "ns1 apps deployments get,create,patch",
                    "ns1 core events create",
                    "ns1 core pods get,create,patch",
                    "ns1 kopf.dev kopfexamples get,list,watch,patch",
                    "ns1 kopf.dev kopfexamples/status patch",
                ],
            ),
            (
                "cluster peering: by name where RBAC can limit it",
                |n| n.peering = Some((Family::Bosun, "default".into())),
                vec![
                    "* apiextensions.k8s.io customresourcedefinitions get [kopfexamples.kopf.dev]",
                    "* bosun.dev clusterbosunpeerings list,watch",
                    "* bosun.dev clusterbosunpeerings get,patch [default]",
                    "* bosun.dev clusterbosunpeerings/status patch [default]",
                    "* core events create",
                    "* kopf.dev kopfexamples get,list,watch,patch",
                    "* kopf.dev kopfexamples/status patch",
                ],
            ),
            (
                "Kopf's namespaced peering under plain names",
                |n| {
                    n.peering = Some((Family::Kopf, "main".into()));
                    n.namespaces = Namespaces::Patterns(vec!["ns1".into()]);
                    n.handled.clear();
                },
                vec![
                    "ns1 kopf.dev kopfpeerings list,watch",
                    "ns1 kopf.dev kopfpeerings get,patch [main]",
                    "ns1 kopf.dev kopfpeerings/status patch [main]",
                ],
            ),
            (
                "leader election: its Lease by name, create unnamed",
                |n| {
                    n.handled.clear();
                    n.replicas = Replicas::LeaderElection(lease("bosun-system", "bosun"));
                },
                vec!["bosun-system coordination.k8s.io leases create", "bosun-system coordination.k8s.io leases get,update [bosun]"],
            ),
            (
                "shards: a Lease per replica, listed, and dead ones deleted",
                |n| {
                    n.handled.clear();
                    n.replicas = Replicas::Shards(lease("ops", "bosun"));
                },
                vec!["ops coordination.k8s.io leases get,list,create,update,delete"],
            ),
        ];
        for (name, change, want) in cases {
            let mut n = needs();
            change(&mut n);
            let mut got = lines(&grants(&n));
            got.sort();
            let mut want: Vec<String> = want.into_iter().map(String::from).collect();
            want.sort();
            assert_eq!(got, want, "{name}");
        }
    }

    #[test]
    fn manifests_bind_each_role_to_the_service_account() {
        let mut n = needs();
        n.replicas = Replicas::LeaderElection(lease("bosun-system", "bosun"));
        let docs = manifests(&grants(&n), "bosun", ("bosun-system", "bosun"));
        let kinds: Vec<(&str, &str)> =
            docs.iter().map(|d| (d["kind"].as_str().unwrap(), d["metadata"]["namespace"].as_str().unwrap_or("-"))).collect();
        assert_eq!(kinds, [("ClusterRole", "-"), ("ClusterRoleBinding", "-"), ("Role", "bosun-system"), ("RoleBinding", "bosun-system")]);
        assert_eq!(docs[1]["roleRef"], json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "bosun"}));
        assert_eq!(docs[3]["subjects"], json!([{"kind": "ServiceAccount", "name": "bosun", "namespace": "bosun-system"}]));
        assert_eq!(
            docs[2]["rules"][1],
            json!({"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "update"], "resourceNames": ["bosun"]})
        );
    }

    #[test]
    fn only_kinds_that_keep_state_write() {
        use pb::HandlerKind as K;
        let writes: Vec<K> = [K::Create, K::Update, K::Delete, K::Resume, K::Field, K::Event, K::Timer, K::Daemon, K::Index, K::Validate]
            .into_iter()
            .filter(|k| Handled::kind_writes(*k))
            .collect();
        assert_eq!(writes, [K::Create, K::Update, K::Delete, K::Resume, K::Field, K::Timer, K::Daemon]);
    }
}
