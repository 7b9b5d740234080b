//! Printers of the core/v1 kinds, Leases and both shapes of Events.

use serde_json::{Value, json};

use super::cells::{Row, age, age_col, first_three, int, items, len, name, name_col, or_none, phase, s, text, wide};

const DATA_DESC: &str = "Data contains the configuration data. Each key must consist of alphanumeric characters, '-', '_' or '.'. Values with non-UTF-8 byte sequences must use the BinaryData field. The keys stored in Data must not overlap with the keys in the BinaryData field, this is enforced during validation process.";
const ADDRESSES_DESC: &str = "List of addresses reachable to the node. Queried from cloud provider, if available. More info: https://kubernetes.io/docs/reference/node/node-status/#addresses Note: This field is declared as mergeable, but the merge key is not sufficiently unique, which can cause data corruption when it is merged. Callers should instead use a full-replacement patch. See https://pr.k8s.io/79391 for an example. Consumers should assume that addresses can change during the lifetime of a Node. However, there are some exceptions where this may not be possible, such as Pods that inherit a Node's address in its own status or consumers of the downward API (status.hostIP).";
const ACCESS_MODES_DESC: &str = "accessModes contains all ways the volume can be mounted. More info: https://kubernetes.io/docs/concepts/storage/persistent-volumes#access-modes";
const STORAGE_CLASS_ANNOTATION: &str = "volume.beta.kubernetes.io/storage-class";

pub(super) fn columns(group: &str, plural: &str) -> Option<(Vec<Value>, Row)> {
    Some(match (group, plural) {
        ("", "configmaps") => (vec![name_col(), text("Data", DATA_DESC), age_col()], |v| {
            vec![name(v), json!(len(v, "/data") + len(v, "/binaryData")), age(v)]
        }),
        ("", "secrets") => (
            vec![
                name_col(),
                text("Type", "Used to facilitate programmatic handling of secret data."),
                text("Data", "Data contains the secret data."),
                age_col(),
            ],
            |v| vec![name(v), json!(s(v, "/type")), json!(len(v, "/data")), age(v)],
        ),
        ("", "namespaces") => (vec![name_col(), text("Status", "The status of the namespace"), age_col()], |v| {
            vec![name(v), json!(s(v, "/status/phase")), age(v)]
        }),
        ("", "pods") => pods(),
        ("", "services") => services(),
        ("", "nodes") => nodes(),
        ("", "persistentvolumes") => persistent_volumes(),
        ("", "persistentvolumeclaims") => persistent_volume_claims(),
        ("", "endpoints") => (
            vec![
                name_col(),
                text(
                    "Endpoints",
                    "The set of all endpoints is the union of all subsets. Addresses are placed into subsets according to the IPs they share. A single address with multiple ports, some of which are ready and some of which are not (because they come from different containers) will result in the address being displayed in different subsets for the different ports. No address will appear in both Addresses and NotReadyAddresses in the same subset. Sets of addresses and ports that comprise a service.",
                ),
                age_col(),
            ],
            |v| vec![name(v), json!(endpoints(v)), age(v)],
        ),
        ("coordination.k8s.io", "leases") => (vec![name_col(), text("Holder", "The holder of the lease"), age_col()], |v| {
            vec![name(v), json!(s(v, "/spec/holderIdentity")), age(v)]
        }),
        ("", "events") | ("events.k8s.io", "events") => events(),
        _ => return None,
    })
}

fn pods() -> (Vec<Value>, Row) {
    (
        vec![
            name_col(),
            text("Ready", "The aggregate readiness state of this pod for accepting traffic."),
            text("Status", "The aggregate status of the containers in this pod."),
            text(
                "Restarts",
                "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted.",
            ),
            age_col(),
            wide("IP", "The IP address assigned to the pod"),
            wide("Node", "The name of the node assigned to the pod"),
        ],
        |v| {
            vec![
                name(v),
                json!(format!("0/{}", len(v, "/spec/containers"))),
                json!(phase(v, "/status/phase")),
                json!("0"),
                age(v),
                json!(or_none(s(v, "/status/podIP"))),
                json!(or_none(s(v, "/spec/nodeName"))),
            ]
        },
    )
}

fn services() -> (Vec<Value>, Row) {
    (
        vec![
            name_col(),
            text("Type", "The type of the service."),
            text("Cluster-IP", "The IP address of the service."),
            text("External-IP", "The external IP address of the service."),
            text("Port(s)", "The port(s) of the service."),
            age_col(),
        ],
        |v| {
            let ports: Vec<String> =
                items(v, "/spec/ports").iter().map(|p| format!("{}/{}", p["port"], p["protocol"].as_str().unwrap_or("TCP"))).collect();
            vec![
                name(v),
                json!(s(v, "/spec/type")),
                json!(s(v, "/spec/clusterIP")),
                json!("<none>"),
                json!(or_none(&ports.join(","))),
                age(v),
            ]
        },
    )
}

fn nodes() -> (Vec<Value>, Row) {
    (
        vec![
            name_col(),
            text("Status", "The status of the node"),
            text("Roles", "The roles of the node"),
            super::cells::age_col(),
            text("Version", "Kubelet Version reported by the node."),
            wide("Internal-IP", ADDRESSES_DESC),
            wide("External-IP", ADDRESSES_DESC),
            wide("OS-Image", "OS Image reported by the node from /etc/os-release (e.g. Debian GNU/Linux 7 (wheezy))."),
            wide("Kernel-Version", "Kernel Version reported by the node from 'uname -r' (e.g. 3.16.0-0.bpo.4-amd64)."),
            wide(
                "Container-Runtime",
                "ContainerRuntime Version reported by the node through runtime remote API (e.g. containerd://1.4.2).",
            ),
        ],
        |v| {
            let mut status: Vec<&str> = items(v, "/status/conditions")
                .iter()
                .filter(|c| s(c, "/type") == "Ready")
                .map(|c| if s(c, "/status") == "True" { "Ready" } else { "NotReady" })
                .take(1)
                .collect();
            if status.is_empty() {
                status.push("Unknown");
            }
            if v.pointer("/spec/unschedulable").and_then(Value::as_bool) == Some(true) {
                status.push("SchedulingDisabled");
            }
            let address = |kind: &str| {
                items(v, "/status/addresses")
                    .iter()
                    .find(|a| s(a, "/type") == kind)
                    .map_or("<none>".to_string(), |a| s(a, "/address").into())
            };
            let info = |field: &str| {
                let x = s(v, &format!("/status/nodeInfo/{field}"));
                if x.is_empty() { "<unknown>".to_string() } else { x.to_string() }
            };
            vec![
                name(v),
                json!(status.join(",")),
                json!(or_none(&node_roles(v).join(","))),
                age(v),
                json!(s(v, "/status/nodeInfo/kubeletVersion")),
                json!(address("InternalIP")),
                json!(address("ExternalIP")),
                json!(info("osImage")),
                json!(info("kernelVersion")),
                json!(info("containerRuntimeVersion")),
            ]
        },
    )
}

/// `findNodeRoles`: the roles named by `node-role.kubernetes.io/<role>` and
/// `kubernetes.io/role` labels, sorted and without duplicates.
fn node_roles(v: &Value) -> Vec<String> {
    let mut roles = std::collections::BTreeSet::new();
    for (k, val) in v.pointer("/metadata/labels").and_then(Value::as_object).into_iter().flatten() {
        if let Some(role) = k.strip_prefix("node-role.kubernetes.io/").filter(|r| !r.is_empty()) {
            roles.insert(role.to_string());
        } else if k == "kubernetes.io/role"
            && let Some(role) = val.as_str().filter(|r| !r.is_empty())
        {
            roles.insert(role.to_string());
        }
    }
    roles.into_iter().collect()
}

/// The storage class of a volume or claim: the beta annotation, else `spec.storageClassName`.
fn storage_class(v: &Value) -> String {
    match v.pointer("/metadata/annotations").and_then(|a| a.get(STORAGE_CLASS_ANNOTATION)).and_then(Value::as_str) {
        Some(class) => class.into(),
        None => s(v, "/spec/storageClassName").into(),
    }
}

/// The string at `p`, or `<unset>` when absent (or empty where `empty_unset`).
fn unset(v: &Value, p: &str, empty_unset: bool) -> String {
    match v.pointer(p).and_then(Value::as_str) {
        Some(x) if !(empty_unset && x.is_empty()) => x.into(),
        _ => "<unset>".into(),
    }
}

fn persistent_volumes() -> (Vec<Value>, Row) {
    (
        vec![
            name_col(),
            text(
                "Capacity",
                "capacity is the description of the persistent volume's resources and capacity. More info: https://kubernetes.io/docs/concepts/storage/persistent-volumes#capacity",
            ),
            text("Access Modes", ACCESS_MODES_DESC),
            text(
                "Reclaim Policy",
                "persistentVolumeReclaimPolicy defines what happens to a persistent volume when released from its claim. Valid options are Retain (default for manually created PersistentVolumes), Delete (default for dynamically provisioned PersistentVolumes), and Recycle (deprecated). Recycle must be supported by the volume plugin underlying this PersistentVolume. More info: https://kubernetes.io/docs/concepts/storage/persistent-volumes#reclaiming",
            ),
            text(
                "Status",
                "phase indicates if a volume is available, bound to a claim, or released by a claim. More info: https://kubernetes.io/docs/concepts/storage/persistent-volumes#phase",
            ),
            text(
                "Claim",
                "claimRef is part of a bi-directional binding between PersistentVolume and PersistentVolumeClaim. Expected to be non-nil when bound. claim.VolumeName is the authoritative bind between PV and PVC. More info: https://kubernetes.io/docs/concepts/storage/persistent-volumes#binding",
            ),
            text("StorageClass", "StorageClass of the pv"),
            text("VolumeAttributesClass", "VolumeAttributesClass of the pv"),
            text(
                "Reason",
                "reason is a brief CamelCase string that describes any failure and is meant for machine parsing and tidy display in the CLI.",
            ),
            age_col(),
            wide(
                "VolumeMode",
                "volumeMode defines if a volume is intended to be used with a formatted filesystem or to remain in raw block state. Value of Filesystem is implied when not included in spec.",
            ),
        ],
        |v| {
            let claim = match v.pointer("/spec/claimRef") {
                Some(c) if c.is_object() => format!("{}/{}", s(c, "/namespace"), s(c, "/name")),
                _ => String::new(),
            };
            vec![
                name(v),
                json!(quantity(v, "/spec/capacity/storage")),
                json!(super::cells::access_modes(v, "/spec/accessModes")),
                json!(s(v, "/spec/persistentVolumeReclaimPolicy")),
                json!(phase(v, "/status/phase")),
                json!(claim),
                json!(storage_class(v)),
                json!(unset(v, "/spec/volumeAttributesClassName", false)),
                json!(s(v, "/status/reason")),
                age(v),
                json!(unset(v, "/spec/volumeMode", false)),
            ]
        },
    )
}

/// A resource quantity as stored, `0` when absent.
fn quantity(v: &Value, p: &str) -> String {
    match v.pointer(p) {
        Some(Value::String(q)) => q.clone(),
        Some(Value::Number(n)) => n.to_string(),
        _ => "0".into(),
    }
}

fn persistent_volume_claims() -> (Vec<Value>, Row) {
    (
        vec![
            name_col(),
            text("Status", "phase represents the current phase of PersistentVolumeClaim."),
            text("Volume", "volumeName is the binding reference to the PersistentVolume backing this claim."),
            text("Capacity", "capacity represents the actual resources of the underlying volume."),
            text(
                "Access Modes",
                "accessModes contains the actual access modes the volume backing the PVC has. More info: https://kubernetes.io/docs/concepts/storage/persistent-volumes#access-modes-1",
            ),
            text("StorageClass", "StorageClass of the pvc"),
            text("VolumeAttributesClass", "VolumeAttributesClass of the pvc"),
            age_col(),
            wide(
                "VolumeMode",
                "volumeMode defines what type of volume is required by the claim. Value of Filesystem is implied when not included in claim spec.",
            ),
        ],
        |v| {
            let bound = !s(v, "/spec/volumeName").is_empty();
            let (capacity, modes) = if bound {
                (quantity(v, "/status/capacity/storage"), super::cells::access_modes(v, "/status/accessModes"))
            } else {
                (String::new(), String::new())
            };
            vec![
                name(v),
                json!(phase(v, "/status/phase")),
                json!(s(v, "/spec/volumeName")),
                json!(capacity),
                json!(modes),
                json!(storage_class(v)),
                json!(unset(v, "/spec/volumeAttributesClassName", true)),
                age(v),
                json!(unset(v, "/spec/volumeMode", false)),
            ]
        },
    )
}

/// `formatEndpoints`: `ip:port` for every address and port (addresses alone where a subset
/// has no ports), the first three and how many more; `<none>` without subsets.
fn endpoints(v: &Value) -> String {
    let subsets = items(v, "/subsets");
    if subsets.is_empty() {
        return "<none>".into();
    }
    let mut list = Vec::new();
    for subset in subsets {
        let ips: Vec<&str> = items(subset, "/addresses").iter().map(|a| s(a, "/ip")).collect();
        let ports = items(subset, "/ports");
        if ports.is_empty() {
            list.extend(ips.iter().map(|ip| ip.to_string()));
        }
        for port in ports {
            let port = int(port, "/port");
            list.extend(ips.iter().map(|ip| if ip.contains(':') { format!("[{ip}]:{port}") } else { format!("{ip}:{port}") }));
        }
    }
    first_three(list, "")
}

fn events() -> (Vec<Value>, Row) {
    (
        vec![
            text("Last Seen", "Time when this Event was last observed"),
            text("Type", "Type of this event (Normal, Warning), new types could be added in the future."),
            text(
                "Reason",
                "This should be a short, machine understandable string that gives the reason for the transition into the object's current status.",
            ),
            text("Object", "The object that this event is about."),
            text("Message", "A human-readable description of the status of this operation."),
            name_col(),
        ],
        |v| {
            let obj = format!("{}/{}", s(v, "/involvedObject/kind").to_lowercase(), s(v, "/involvedObject/name"));
            vec![age(v), json!(s(v, "/type")), json!(s(v, "/reason")), json!(obj), json!(s(v, "/message")), name(v)]
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_print_ip_port_pairs_and_how_many_more() {
        let table = [
            (json!({}), "<none>"),
            (json!({"subsets": [{"addresses": [{"ip": "10.0.0.1"}], "ports": [{"port": 80}]}]}), "10.0.0.1:80"),
            (json!({"subsets": [{"addresses": [{"ip": "10.0.0.1"}, {"ip": "fd00::1"}]}]}), "10.0.0.1,fd00::1"),
            (
                json!({"subsets": [{"addresses": [{"ip": "fd00::1"}, {"ip": "10.0.0.2"}], "ports": [{"port": 80}, {"port": 443}]}]}),
                "[fd00::1]:80,10.0.0.2:80,[fd00::1]:443 + 1 more...",
            ),
        ];
        for (ep, want) in table {
            assert_eq!(endpoints(&ep), want, "{ep}");
        }
    }

    #[test]
    fn node_roles_come_from_role_labels() {
        let node = json!({"metadata": {"labels": {"node-role.kubernetes.io/worker": "", "node-role.kubernetes.io/control-plane": "",
            "kubernetes.io/role": "worker", "other": "x"}}});
        assert_eq!(node_roles(&node), ["control-plane", "worker"]);
    }
}
