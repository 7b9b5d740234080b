//! Which resources the server serves: the built-in kinds and the resources defined by
//! established CustomResourceDefinitions, with everything discovery, routing and storage
//! need to know about each (names, scope, verbs, subresources, schema, printer columns).

use std::collections::BTreeMap;
use std::sync::Arc;

use parking_lot::RwLock;
use serde_json::Value;

use crate::jsonpath::SimplePath;
use crate::schema::Schema;

/// The verbs of a regular namespaced or cluster-scoped resource.
pub const ALL_VERBS: &[&str] = &["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"];
const NAMESPACE_VERBS: &[&str] = &["create", "delete", "get", "list", "patch", "update", "watch"];
const GET_PATCH_UPDATE: &[&str] = &["get", "patch", "update"];

/// Where the `scale` subresource reads and writes the replicas and the selector.
#[derive(Debug, Clone)]
pub struct ScalePaths {
    /// `specReplicasPath`: what a write to `/scale` sets.
    pub spec_replicas: SimplePath,
    /// `statusReplicasPath`.
    pub status_replicas: SimplePath,
    /// Where `status.selector` comes from.
    pub selector: ScaleSelector,
}

/// The source of a Scale's `status.selector`.
#[derive(Debug, Clone)]
pub enum ScaleSelector {
    /// None: the selector is empty.
    None,
    /// `labelSelectorPath` of a CRD: a string field, copied as it is.
    Text(SimplePath),
    /// A `metav1.LabelSelector` object (a Deployment's `spec.selector`), written as text.
    LabelSelector(SimplePath),
}

impl ScalePaths {
    /// A Deployment's, StatefulSet's or ReplicaSet's: `spec.replicas`, `status.replicas` and
    /// `spec.selector`.
    fn replicas_of_a_workload() -> Self {
        let path = |p: &str| SimplePath::parse(p).expect("a valid path");
        ScalePaths {
            spec_replicas: path(".spec.replicas"),
            status_replicas: path(".status.replicas"),
            selector: ScaleSelector::LabelSelector(path(".spec.selector")),
        }
    }
}

/// A subresource a resource serves, as discovery lists it and routing accepts it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServedSubresource {
    /// The path segment after the object's name (`status`, `scale`).
    pub name: &'static str,
    /// Group and version of its kind when they differ from the resource's (Scale is
    /// `autoscaling/v1`).
    pub group_version: Option<(&'static str, &'static str)>,
    /// The kind it reads and writes.
    pub kind: String,
    /// Its verbs, as discovery lists them.
    pub verbs: &'static [&'static str],
}

/// An additional printer column of a CRD version.
#[derive(Debug, Clone)]
pub struct PrinterColumn {
    /// Column header.
    pub name: String,
    /// OpenAPI type (`string`, `integer`, `date`, ...).
    pub type_: String,
    /// OpenAPI format.
    pub format: String,
    /// Column description.
    pub description: String,
    /// Priority (0 = shown by default).
    pub priority: i64,
    /// Simple JSONPath, e.g. `.spec.size`.
    pub json_path: String,
}

/// Everything the server knows about one served resource at one version.
#[derive(Debug, Clone)]
pub struct ResourceInfo {
    /// API group ("" for core).
    pub group: String,
    /// Version, e.g. `v1`.
    pub version: String,
    /// Plural resource name (URL segment).
    pub plural: String,
    /// Singular name.
    pub singular: String,
    /// Kind.
    pub kind: String,
    /// Namespaced or cluster-scoped.
    pub namespaced: bool,
    /// Short names for kubectl.
    pub short_names: Vec<String>,
    /// Categories (e.g. `all`).
    pub categories: Vec<String>,
    /// Verbs listed in discovery.
    pub verbs: &'static [&'static str],
    /// Whether the `status` subresource exists (and the main endpoint ignores status).
    pub status_subresource: bool,
    /// Whether this is a built-in kind (list items carry no kind/apiVersion; strategic merge).
    pub builtin: bool,
    /// Storage table key; different versions and shapes of one resource share it.
    pub storage: String,
    /// Structural schema of a custom resource version (pruning, defaults, validation).
    pub schema: Option<Arc<Schema>>,
    /// Printer columns of a custom resource version.
    pub columns: Vec<PrinterColumn>,
    /// Whether a custom resource's whole object keeps unknown fields.
    pub preserve_unknown: bool,
    /// The `scale` subresource, if the resource has one.
    pub scale: Option<ScalePaths>,
}

impl ResourceInfo {
    /// `group/version` or `version` for core.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() { self.version.clone() } else { format!("{}/{}", self.group, self.version) }
    }

    /// `plural` or `plural.group`.
    pub fn qualified(&self) -> String {
        qualified(&self.group, &self.plural)
    }

    /// `Kind` or `Kind.group`, as the first word of 422 messages.
    pub fn kind_label(&self) -> String {
        if self.group.is_empty() || self.is_events_v1() { self.kind.clone() } else { format!("{}.{}", self.kind, self.group) }
    }

    /// Whether this is the events.k8s.io shape of Events.
    pub fn is_events_v1(&self) -> bool {
        self.group == "events.k8s.io"
    }

    /// The subresources this resource serves: the one list that both routing and discovery
    /// read, so that they cannot disagree.
    pub fn subresources(&self) -> Vec<ServedSubresource> {
        let own = |name, verbs| ServedSubresource { name, group_version: None, kind: self.kind.clone(), verbs };
        let mut out = Vec::new();
        if self.status_subresource {
            out.push(own("status", GET_PATCH_UPDATE));
        }
        if self.scale.is_some() {
            out.push(ServedSubresource {
                name: "scale",
                group_version: Some(("autoscaling", "v1")),
                kind: "Scale".into(),
                verbs: GET_PATCH_UPDATE,
            });
        }
        if self.builtin && self.group.is_empty() {
            self.core_subresources(&mut out);
        }
        // by name, as both forms of discovery list them
        out.sort_by_key(|s| s.name);
        out
    }

    /// The subresources of core/v1 built-ins beyond status and scale.
    fn core_subresources(&self, out: &mut Vec<ServedSubresource>) {
        let own = |name, verbs| ServedSubresource { name, group_version: None, kind: self.kind.clone(), verbs };
        let other = |name, group, version, kind: &str| ServedSubresource {
            name,
            group_version: Some((group, version)),
            kind: kind.into(),
            verbs: &["create"],
        };
        match self.plural.as_str() {
            "namespaces" => out.push(own("finalize", &["update"])),
            "pods" => {
                out.push(ServedSubresource { group_version: None, ..other("binding", "", "", "Binding") });
                out.push(own("ephemeralcontainers", GET_PATCH_UPDATE));
                out.push(other("eviction", "policy", "v1", "Eviction"));
            }
            "serviceaccounts" => out.push(other("token", "authentication.k8s.io", "v1", "TokenRequest")),
            _ => {}
        }
    }

    /// The served subresource `name`, if any.
    pub fn subresource(&self, name: &str) -> Option<ServedSubresource> {
        self.subresources().into_iter().find(|s| s.name == name)
    }

    /// The kind of the list answer.
    pub fn list_kind(&self) -> String {
        format!("{}List", self.kind)
    }

    /// The field selectors (besides metadata.name/namespace) this resource supports.
    pub fn field_selectors(&self) -> &'static [&'static str] {
        match (self.group.as_str(), self.plural.as_str()) {
            ("", "pods") => &[
                "spec.nodeName",
                "spec.restartPolicy",
                "spec.schedulerName",
                "spec.serviceAccountName",
                "status.phase",
                "status.podIP",
                "status.nominatedNodeName",
            ],
            ("", "secrets") => &["type"],
            ("", "namespaces") => &["status.phase"],
            ("", "events") => &[
                "involvedObject.kind",
                "involvedObject.namespace",
                "involvedObject.name",
                "involvedObject.uid",
                "involvedObject.apiVersion",
                "involvedObject.resourceVersion",
                "involvedObject.fieldPath",
                "reason",
                "reportingComponent",
                "source",
                "type",
            ],
            ("events.k8s.io", "events") => &["regarding.kind", "regarding.namespace", "regarding.name", "regarding.uid", "reason", "type"],
            ("batch", "jobs") => &["status.successful"],
            ("", "nodes") => &["spec.unschedulable"],
            ("apps", "replicasets") => &["status.replicas"],
            _ => &[],
        }
    }

    /// The `Warning` the real server sends with every answer about a deprecated kind.
    pub fn deprecation(&self) -> Option<&'static str> {
        match (self.builtin, self.group.as_str(), self.plural.as_str()) {
            (true, "", "endpoints") => Some("v1 Endpoints is deprecated in v1.33+; use discovery.k8s.io/v1 EndpointSlice"),
            _ => None,
        }
    }
}

/// A built-in kind: group (version `v1`), plural, kind (the singular is its lower case),
/// namespaced, short names, categories and (status, scale) subresources, as the real
/// server's discovery lists them.
type Builtin = (&'static str, &'static str, &'static str, bool, &'static [&'static str], &'static [&'static str], (bool, bool));

const NS: bool = true;
const CLUSTER: bool = false;
const NONE: (bool, bool) = (false, false);
const STATUS: (bool, bool) = (true, false);
const STATUS_SCALE: (bool, bool) = (true, true);
const ALL: &[&str] = &["all"];
const EXT: &[&str] = &["api-extensions"];

#[rustfmt::skip]
const BUILTINS: &[Builtin] = &[
    ("", "namespaces", "Namespace", CLUSTER, &["ns"], &[], STATUS),
    ("", "configmaps", "ConfigMap", NS, &["cm"], &[], NONE),
    ("", "secrets", "Secret", NS, &[], &[], NONE),
    ("", "pods", "Pod", NS, &["po"], ALL, STATUS),
    ("", "services", "Service", NS, &["svc"], ALL, STATUS),
    ("", "serviceaccounts", "ServiceAccount", NS, &["sa"], &[], NONE),
    ("", "events", "Event", NS, &["ev"], &[], NONE),
    ("", "nodes", "Node", CLUSTER, &["no"], &[], STATUS),
    ("", "persistentvolumes", "PersistentVolume", CLUSTER, &["pv"], &[], STATUS),
    ("", "persistentvolumeclaims", "PersistentVolumeClaim", NS, &["pvc"], &[], STATUS),
    ("", "endpoints", "Endpoints", NS, &["ep"], &[], NONE),
    ("events.k8s.io", "events", "Event", NS, &["ev"], &[], NONE),
    ("coordination.k8s.io", "leases", "Lease", NS, &[], &[], NONE),
    ("apps", "deployments", "Deployment", NS, &["deploy"], ALL, STATUS_SCALE),
    ("apps", "statefulsets", "StatefulSet", NS, &["sts"], ALL, STATUS_SCALE),
    ("apps", "daemonsets", "DaemonSet", NS, &["ds"], ALL, STATUS),
    ("apps", "replicasets", "ReplicaSet", NS, &["rs"], ALL, STATUS_SCALE),
    ("batch", "jobs", "Job", NS, &[], ALL, STATUS),
    ("batch", "cronjobs", "CronJob", NS, &["cj"], ALL, STATUS),
    ("policy", "poddisruptionbudgets", "PodDisruptionBudget", NS, &["pdb"], &[], STATUS),
    ("networking.k8s.io", "ingresses", "Ingress", NS, &["ing"], &[], STATUS),
    ("networking.k8s.io", "ingressclasses", "IngressClass", CLUSTER, &[], &[], NONE),
    ("networking.k8s.io", "networkpolicies", "NetworkPolicy", NS, &["netpol"], &[], NONE),
    ("discovery.k8s.io", "endpointslices", "EndpointSlice", NS, &[], &[], NONE),
    ("rbac.authorization.k8s.io", "roles", "Role", NS, &[], &[], NONE),
    ("rbac.authorization.k8s.io", "clusterroles", "ClusterRole", CLUSTER, &[], &[], NONE),
    ("rbac.authorization.k8s.io", "rolebindings", "RoleBinding", NS, &[], &[], NONE),
    ("rbac.authorization.k8s.io", "clusterrolebindings", "ClusterRoleBinding", CLUSTER, &[], &[], NONE),
    ("admissionregistration.k8s.io", "validatingwebhookconfigurations", "ValidatingWebhookConfiguration", CLUSTER, &[], EXT, NONE),
    ("admissionregistration.k8s.io", "mutatingwebhookconfigurations", "MutatingWebhookConfiguration", CLUSTER, &[], EXT, NONE),
    ("apiextensions.k8s.io", "customresourcedefinitions", "CustomResourceDefinition", CLUSTER, &["crd", "crds"], EXT, STATUS),
];

/// Storage key of the core Event table (shared by both Event shapes).
pub const EVENTS_STORAGE: &str = "/events";

/// The set of served resources; cheap to read, rebuilt on CRD changes.
#[derive(Default)]
pub struct Registry {
    // (group, version, plural) -> info
    inner: RwLock<BTreeMap<(String, String, String), Arc<ResourceInfo>>>,
}

impl Registry {
    /// A registry with the built-in kinds.
    pub fn with_builtins() -> Self {
        let reg = Registry::default();
        {
            let mut m = reg.inner.write();
            for &(group, plural, kind, namespaced, short, categories, (status, scale)) in BUILTINS {
                let info = ResourceInfo {
                    group: group.into(),
                    version: "v1".into(),
                    plural: plural.into(),
                    singular: kind.to_lowercase(),
                    kind: kind.into(),
                    namespaced,
                    short_names: short.iter().map(|s| s.to_string()).collect(),
                    categories: categories.iter().map(|s| s.to_string()).collect(),
                    verbs: if plural == "namespaces" { NAMESPACE_VERBS } else { ALL_VERBS },
                    status_subresource: status,
                    builtin: true,
                    storage: if plural == "events" { EVENTS_STORAGE.into() } else { format!("{group}/{plural}") },
                    schema: None,
                    columns: Vec::new(),
                    preserve_unknown: false,
                    scale: scale.then(ScalePaths::replicas_of_a_workload),
                };
                m.insert((group.into(), "v1".into(), plural.into()), Arc::new(info));
            }
        }
        reg
    }

    /// Look a resource up by group, version and plural.
    pub fn get(&self, group: &str, version: &str, plural: &str) -> Option<Arc<ResourceInfo>> {
        self.inner.read().get(&(group.to_string(), version.to_string(), plural.to_string())).cloned()
    }

    /// Whether any resource is served in the group (and version, if given).
    pub fn has_group(&self, group: &str, version: Option<&str>) -> bool {
        self.inner.read().keys().any(|(g, v, _)| g == group && version.is_none_or(|x| x == v))
    }

    /// All resources of one group version, sorted by plural.
    pub fn group_version(&self, group: &str, version: &str) -> Vec<Arc<ResourceInfo>> {
        self.inner.read().iter().filter(|((g, v, _), _)| g == group && v == version).map(|(_, i)| i.clone()).collect()
    }

    /// All served resources.
    pub fn all(&self) -> Vec<Arc<ResourceInfo>> {
        self.inner.read().values().cloned().collect()
    }

    /// Group names with their versions (in CRD order of preference), excluding core.
    pub fn groups(&self) -> BTreeMap<String, Vec<String>> {
        let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (g, v, _) in self.inner.read().keys() {
            if g.is_empty() {
                continue;
            }
            let vs = out.entry(g.clone()).or_default();
            if !vs.contains(v) {
                vs.push(v.clone());
            }
        }
        for vs in out.values_mut() {
            vs.sort_by_key(|v| std::cmp::Reverse(version_priority(v)));
        }
        out
    }

    /// Replace all resources of a CRD (identified by group and plural) with `infos`.
    pub fn set_crd(&self, group: &str, plural: &str, infos: Vec<ResourceInfo>) {
        let mut m = self.inner.write();
        m.retain(|(g, _, p), i| !(g == group && p == plural && !i.builtin));
        for info in infos {
            m.insert((info.group.clone(), info.version.clone(), info.plural.clone()), Arc::new(info));
        }
    }

    /// Whether any served resource is stored under `storage`.
    pub fn serves_storage(&self, storage: &str) -> bool {
        self.inner.read().values().any(|i| i.storage == storage)
    }

    /// Remove all resources of a CRD.
    pub fn remove_crd(&self, group: &str, plural: &str) {
        self.set_crd(group, plural, Vec::new());
    }
}

/// Kubernetes version priority: GA > beta > alpha, higher numbers first.
pub fn version_priority(v: &str) -> (u8, u64, u64) {
    let rest = v.strip_prefix('v').unwrap_or("");
    let digits: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
    let major = digits.parse::<u64>().unwrap_or(0);
    let tail = &rest[digits.len()..];
    if digits.is_empty() {
        return (0, 0, 0);
    }
    if tail.is_empty() {
        return (3, major, 0);
    }
    if let Some(n) = tail.strip_prefix("beta") {
        return (2, major, n.parse().unwrap_or(0));
    }
    if let Some(n) = tail.strip_prefix("alpha") {
        return (1, major, n.parse().unwrap_or(0));
    }
    (0, 0, 0)
}

/// Whether an object is being deleted (`metadata.deletionTimestamp` is set).
pub fn terminating(obj: &Value) -> bool {
    obj.get("metadata").and_then(|v| v.get("deletionTimestamp")).is_some_and(|t| !t.is_null())
}

/// Read `metadata.name` of an object.
pub fn name_of(obj: &Value) -> &str {
    obj.get("metadata").and_then(|v| v.get("name")).and_then(Value::as_str).unwrap_or("")
}

/// Read `metadata.namespace` of an object.
pub fn namespace_of(obj: &Value) -> &str {
    obj.get("metadata").and_then(|v| v.get("namespace")).and_then(Value::as_str).unwrap_or("")
}

/// `plural` or `plural.group`, as used in messages.
pub fn qualified(group: &str, plural: &str) -> String {
    if group.is_empty() { plural.to_string() } else { format!("{plural}.{group}") }
}
