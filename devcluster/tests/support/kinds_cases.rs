//! One object of each kind beyond the basics, with the Table `kubectl get` shows for it.

use serde_json::{Value, json};

/// A kind under test: the collection it is created in, an object, and the Table columns and
/// cells `kubectl get` shows for it (date and age cells are checked apart).
pub struct Case {
    /// Where objects of the kind are created (namespace `default` for namespaced kinds).
    pub collection: &'static str,
    /// The object.
    pub object: Value,
    /// The Table's column names.
    pub columns: &'static [&'static str],
    /// The object's row, `<age>` and `<date>` standing for its Age and Created At cells.
    pub cells: Value,
}

fn pod_template(app: &str, image: &str) -> Value {
    json!({"metadata": {"labels": {"app": app}}, "spec": {"containers": [{"name": app, "image": image}]}})
}

/// One case per kind.
pub fn cases() -> Vec<Case> {
    vec![
        Case {
            collection: "/apis/apps/v1/namespaces/default/statefulsets",
            object: json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "web"},
                "spec": {"replicas": 3, "serviceName": "web", "selector": {"matchLabels": {"app": "web"}}, "template": pod_template("web", "nginx:1.27")}}),
            columns: &["Name", "Ready", "Age", "Containers", "Images"],
            cells: json!(["web", "0/3", "<age>", "web", "nginx:1.27"]),
        },
        Case {
            collection: "/apis/apps/v1/namespaces/default/daemonsets",
            object: json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent"},
                "spec": {"selector": {"matchLabels": {"app": "agent"}}, "template": {"metadata": {"labels": {"app": "agent"}},
                    "spec": {"nodeSelector": {"kubernetes.io/os": "linux"}, "containers": [{"name": "agent", "image": "busybox"}]}}}}),
            columns: &[
                "Name",
                "Desired",
                "Current",
                "Ready",
                "Up-to-date",
                "Available",
                "Node Selector",
                "Age",
                "Containers",
                "Images",
                "Selector",
            ],
            cells: json!(["agent", 0, 0, 0, 0, 0, "kubernetes.io/os=linux", "<age>", "agent", "busybox", "app=agent"]),
        },
        Case {
            collection: "/apis/apps/v1/namespaces/default/replicasets",
            object: json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "rs"},
                "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "rs"}}, "template": pod_template("rs", "img:1")}}),
            columns: &["Name", "Desired", "Current", "Ready", "Age", "Containers", "Images", "Selector"],
            cells: json!(["rs", 2, 0, 0, "<age>", "rs", "img:1", "app=rs"]),
        },
        Case {
            collection: "/apis/batch/v1/namespaces/default/cronjobs",
            object: json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "tick"},
                "spec": {"schedule": "*/5 * * * *", "jobTemplate": {"spec": {"template": {"spec": {"restartPolicy": "OnFailure",
                    "containers": [{"name": "tick", "image": "busybox"}]}}}}}}),
            columns: &["Name", "Schedule", "Timezone", "Suspend", "Active", "Last Schedule", "Age", "Containers", "Images", "Selector"],
            cells: json!(["tick", "*/5 * * * *", "<none>", "False", 0, "<none>", "<age>", "tick", "busybox", "<none>"]),
        },
        Case {
            collection: "/apis/policy/v1/namespaces/default/poddisruptionbudgets",
            object: json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "web"},
                "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}}),
            columns: &["Name", "Min Available", "Max Unavailable", "Allowed Disruptions", "Age"],
            cells: json!(["web", "1", "N/A", 0, "<age>"]),
        },
        Case {
            collection: "/apis/networking.k8s.io/v1/namespaces/default/ingresses",
            object: json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": {"name": "web"},
                "spec": {"ingressClassName": "nginx", "rules": [{"host": "example.com", "http": {"paths": [{"path": "/", "pathType": "Prefix",
                    "backend": {"service": {"name": "web", "port": {"number": 80}}}}]}}]}}),
            columns: &["Name", "Class", "Hosts", "Address", "Ports", "Age"],
            cells: json!(["web", "nginx", "example.com", "", "80", "<age>"]),
        },
        Case {
            collection: "/apis/networking.k8s.io/v1/ingressclasses",
            object: json!({"apiVersion": "networking.k8s.io/v1", "kind": "IngressClass", "metadata": {"name": "nginx"},
                "spec": {"controller": "k8s.io/ingress-nginx"}}),
            columns: &["Name", "Controller", "Parameters", "Age"],
            cells: json!(["nginx", "k8s.io/ingress-nginx", "<none>", "<age>"]),
        },
        Case {
            collection: "/apis/networking.k8s.io/v1/namespaces/default/networkpolicies",
            object: json!({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": {"name": "deny"},
                "spec": {"podSelector": {"matchLabels": {"app": "web"}}}}),
            columns: &["Name", "Pod-Selector", "Age"],
            cells: json!(["deny", "app=web", "<age>"]),
        },
        Case {
            collection: "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices",
            object: json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "metadata": {"name": "web-abc"},
                "addressType": "IPv4", "endpoints": [{"addresses": ["10.0.0.1"]}], "ports": [{"name": "http", "port": 80}]}),
            columns: &["Name", "AddressType", "Ports", "Endpoints", "Age"],
            cells: json!(["web-abc", "IPv4", "80", "10.0.0.1", "<age>"]),
        },
        Case {
            collection: "/api/v1/namespaces/default/endpoints",
            object: json!({"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "web"},
                "subsets": [{"addresses": [{"ip": "10.0.0.1"}], "ports": [{"name": "http", "port": 80}]}]}),
            columns: &["Name", "Endpoints", "Age"],
            cells: json!(["web", "10.0.0.1:80", "<age>"]),
        },
        Case {
            collection: "/api/v1/nodes",
            object: json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-1", "labels": {"node-role.kubernetes.io/worker": ""}},
                "status": {"conditions": [{"type": "Ready", "status": "True"}], "addresses": [{"type": "InternalIP", "address": "10.0.0.5"}],
                    "nodeInfo": {"kubeletVersion": "v1.36.2"}}}),
            columns: &[
                "Name",
                "Status",
                "Roles",
                "Age",
                "Version",
                "Internal-IP",
                "External-IP",
                "OS-Image",
                "Kernel-Version",
                "Container-Runtime",
            ],
            cells: json!(["node-1", "Ready", "worker", "<age>", "v1.36.2", "10.0.0.5", "<none>", "<unknown>", "<unknown>", "<unknown>"]),
        },
        Case {
            collection: "/api/v1/persistentvolumes",
            object: json!({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv1"},
                "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": "standard", "hostPath": {"path": "/data"}}}),
            columns: &[
                "Name",
                "Capacity",
                "Access Modes",
                "Reclaim Policy",
                "Status",
                "Claim",
                "StorageClass",
                "VolumeAttributesClass",
                "Reason",
                "Age",
                "VolumeMode",
            ],
            cells: json!(["pv1", "1Gi", "RWO", "Retain", "Pending", "", "standard", "<unset>", "", "<age>", "Filesystem"]),
        },
        Case {
            collection: "/api/v1/namespaces/default/persistentvolumeclaims",
            object: json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data"},
                "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "standard", "resources": {"requests": {"storage": "1Gi"}}}}),
            columns: &[
                "Name",
                "Status",
                "Volume",
                "Capacity",
                "Access Modes",
                "StorageClass",
                "VolumeAttributesClass",
                "Age",
                "VolumeMode",
            ],
            cells: json!(["data", "Pending", "", "", "", "standard", "<unset>", "<age>", "Filesystem"]),
        },
        Case {
            collection: "/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles",
            object: json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "reader"},
                "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}]}),
            columns: &["Name", "Created At"],
            cells: json!(["reader", "<date>"]),
        },
        Case {
            collection: "/apis/rbac.authorization.k8s.io/v1/clusterroles",
            object: json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "system:bosun:reader"},
                "rules": [{"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get"]}, {"nonResourceURLs": ["/healthz"], "verbs": ["get"]}]}),
            columns: &["Name", "Created At"],
            cells: json!(["system:bosun:reader", "<date>"]),
        },
        Case {
            collection: "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings",
            object: json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "read"},
                "roleRef": {"kind": "Role", "name": "reader"},
                "subjects": [{"kind": "User", "name": "jane"}, {"kind": "ServiceAccount", "name": "robot", "namespace": "default"}]}),
            columns: &["Name", "Role", "Age", "Users", "Groups", "ServiceAccounts"],
            cells: json!(["read", "Role/reader", "<age>", "jane", "", "default/robot"]),
        },
        Case {
            collection: "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
            object: json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "readers"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:bosun:reader"},
                "subjects": [{"kind": "Group", "name": "devs"}, {"kind": "ServiceAccount", "name": "bosun", "namespace": "bosun-system"}]}),
            columns: &["Name", "Role", "Age", "Users", "Groups", "ServiceAccounts"],
            cells: json!(["readers", "ClusterRole/system:bosun:reader", "<age>", "", "devs", "bosun-system/bosun"]),
        },
        Case {
            collection: "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
            object: json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration", "metadata": {"name": "check"},
                "webhooks": [{"name": "check.bosun.dev", "sideEffects": "None", "admissionReviewVersions": ["v1"],
                    "clientConfig": {"service": {"namespace": "bosun-system", "name": "bosun"}},
                    "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}]}]}),
            columns: &["Name", "Webhooks", "Age"],
            cells: json!(["check", 1, "<age>"]),
        },
        Case {
            collection: "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations",
            object: json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration", "metadata": {"name": "mutate"},
                "webhooks": [{"name": "a.bosun.dev", "sideEffects": "None", "admissionReviewVersions": ["v1"], "clientConfig": {"url": "https://a.example"}},
                    {"name": "b.bosun.dev", "sideEffects": "None", "admissionReviewVersions": ["v1"], "clientConfig": {"url": "https://b.example"}}]}),
            columns: &["Name", "Webhooks", "Age"],
            cells: json!(["mutate", 2, "<age>"]),
        },
    ]
}
