//! The Go types of the built-in kinds, reduced to what decoding checks: a real API server
//! decodes a body into its Go struct before anything else, so a value of the wrong JSON type
//! (`data: [1]` in a ConfigMap) is refused with encoding/json's message, naming the innermost
//! struct, the field path and the Go type. Fields not listed here are not checked (unknown
//! fields are `fieldValidation`'s business, in `ops`).

use serde_json::Value;

use crate::registry::ResourceInfo;

/// A Go type, as far as decoding JSON into it goes.
#[derive(Debug)]
enum Go {
    /// A string type, with its Go name (`string`, `types.UID`, `v1.SecretType`); also
    /// `metav1.Time`, whose decoder reads a string first.
    Str(&'static str),
    /// `bool`.
    Bool,
    /// `int32`.
    Int32,
    /// `int64`.
    Int64,
    /// `[]byte`: a base64 string (the decoding of it is checked in `builtin`).
    Bytes,
    /// `map[string]T`.
    Map(&'static Go),
    /// `[]T`.
    Slice(&'static Go),
    /// A struct.
    Struct(&'static Struct),
    /// Anything (custom decoders, `interface{}`): not checked.
    Any,
}

/// A Go struct: its name, its qualified type name and the JSON names of its fields.
#[derive(Debug)]
struct Struct {
    name: &'static str,
    go: &'static str,
    fields: &'static [(&'static str, Go)],
}

const STRING: Go = Go::Str("string");
const TIME: Go = Go::Str("string");

static OWNER_REFERENCE: Struct = Struct {
    name: "OwnerReference",
    go: "v1.OwnerReference",
    fields: &[
        ("apiVersion", STRING),
        ("kind", STRING),
        ("name", STRING),
        ("uid", Go::Str("types.UID")),
        ("controller", Go::Bool),
        ("blockOwnerDeletion", Go::Bool),
    ],
};

static MANAGED_FIELDS_ENTRY: Struct = Struct {
    name: "ManagedFieldsEntry",
    go: "v1.ManagedFieldsEntry",
    fields: &[
        ("manager", STRING),
        ("operation", Go::Str("v1.ManagedFieldsOperationType")),
        ("apiVersion", STRING),
        ("time", TIME),
        ("fieldsType", STRING),
        ("fieldsV1", Go::Any),
        ("subresource", STRING),
    ],
};

static OBJECT_META: Struct = Struct {
    name: "ObjectMeta",
    go: "v1.ObjectMeta",
    fields: &[
        ("name", STRING),
        ("generateName", STRING),
        ("namespace", STRING),
        ("selfLink", STRING),
        ("uid", Go::Str("types.UID")),
        ("resourceVersion", STRING),
        ("generation", Go::Int64),
        ("creationTimestamp", TIME),
        ("deletionTimestamp", TIME),
        ("deletionGracePeriodSeconds", Go::Int64),
        ("labels", Go::Map(&STRING)),
        ("annotations", Go::Map(&STRING)),
        ("ownerReferences", Go::Slice(&Go::Struct(&OWNER_REFERENCE))),
        ("finalizers", Go::Slice(&STRING)),
        ("managedFields", Go::Slice(&Go::Struct(&MANAGED_FIELDS_ENTRY))),
    ],
};

const META: Go = Go::Struct(&OBJECT_META);

static OBJECT_REFERENCE: Struct = Struct {
    name: "ObjectReference",
    go: "v1.ObjectReference",
    fields: &[
        ("kind", STRING),
        ("namespace", STRING),
        ("name", STRING),
        ("uid", Go::Str("types.UID")),
        ("apiVersion", STRING),
        ("resourceVersion", STRING),
        ("fieldPath", STRING),
    ],
};

static LOCAL_OBJECT_REFERENCE: Struct = Struct { name: "LocalObjectReference", go: "v1.LocalObjectReference", fields: &[("name", STRING)] };

static LABEL_SELECTOR: Struct = Struct {
    name: "LabelSelector",
    go: "v1.LabelSelector",
    fields: &[("matchLabels", Go::Map(&STRING)), ("matchExpressions", Go::Slice(&Go::Any))],
};

static ENV_VAR: Struct = Struct { name: "EnvVar", go: "v1.EnvVar", fields: &[("name", STRING), ("value", STRING), ("valueFrom", Go::Any)] };

static CONTAINER_PORT: Struct = Struct {
    name: "ContainerPort",
    go: "v1.ContainerPort",
    fields: &[
        ("name", STRING),
        ("hostPort", Go::Int32),
        ("containerPort", Go::Int32),
        ("protocol", Go::Str("v1.Protocol")),
        ("hostIP", STRING),
    ],
};

static CONTAINER: Struct = Struct {
    name: "Container",
    go: "v1.Container",
    fields: &[
        ("name", STRING),
        ("image", STRING),
        ("command", Go::Slice(&STRING)),
        ("args", Go::Slice(&STRING)),
        ("workingDir", STRING),
        ("ports", Go::Slice(&Go::Struct(&CONTAINER_PORT))),
        ("env", Go::Slice(&Go::Struct(&ENV_VAR))),
        ("imagePullPolicy", Go::Str("v1.PullPolicy")),
        ("stdin", Go::Bool),
        ("tty", Go::Bool),
    ],
};

static POD_SPEC: Struct = Struct {
    name: "PodSpec",
    go: "v1.PodSpec",
    fields: &[
        ("containers", Go::Slice(&Go::Struct(&CONTAINER))),
        ("initContainers", Go::Slice(&Go::Struct(&CONTAINER))),
        ("restartPolicy", Go::Str("v1.RestartPolicy")),
        ("terminationGracePeriodSeconds", Go::Int64),
        ("activeDeadlineSeconds", Go::Int64),
        ("nodeSelector", Go::Map(&STRING)),
        ("serviceAccountName", STRING),
        ("nodeName", STRING),
        ("hostNetwork", Go::Bool),
        ("imagePullSecrets", Go::Slice(&Go::Struct(&LOCAL_OBJECT_REFERENCE))),
        ("hostname", STRING),
        ("subdomain", STRING),
        ("priority", Go::Int32),
    ],
};

static POD_TEMPLATE_SPEC: Struct =
    Struct { name: "PodTemplateSpec", go: "v1.PodTemplateSpec", fields: &[("metadata", META), ("spec", Go::Struct(&POD_SPEC))] };

static SERVICE_PORT: Struct = Struct {
    name: "ServicePort",
    go: "v1.ServicePort",
    fields: &[
        ("name", STRING),
        ("protocol", Go::Str("v1.Protocol")),
        ("port", Go::Int32),
        ("targetPort", Go::Any),
        ("nodePort", Go::Int32),
    ],
};

static SERVICE_SPEC: Struct = Struct {
    name: "ServiceSpec",
    go: "v1.ServiceSpec",
    fields: &[
        ("ports", Go::Slice(&Go::Struct(&SERVICE_PORT))),
        ("selector", Go::Map(&STRING)),
        ("clusterIP", STRING),
        ("clusterIPs", Go::Slice(&STRING)),
        ("type", Go::Str("v1.ServiceType")),
        ("externalName", STRING),
        ("sessionAffinity", Go::Str("v1.ServiceAffinity")),
    ],
};

static DEPLOYMENT_SPEC: Struct = Struct {
    name: "DeploymentSpec",
    go: "v1.DeploymentSpec",
    fields: &[
        ("replicas", Go::Int32),
        ("selector", Go::Struct(&LABEL_SELECTOR)),
        ("template", Go::Struct(&POD_TEMPLATE_SPEC)),
        ("minReadySeconds", Go::Int32),
        ("revisionHistoryLimit", Go::Int32),
        ("paused", Go::Bool),
        ("progressDeadlineSeconds", Go::Int32),
    ],
};

static JOB_SPEC: Struct = Struct {
    name: "JobSpec",
    go: "v1.JobSpec",
    fields: &[
        ("parallelism", Go::Int32),
        ("completions", Go::Int32),
        ("activeDeadlineSeconds", Go::Int64),
        ("backoffLimit", Go::Int32),
        ("selector", Go::Struct(&LABEL_SELECTOR)),
        ("manualSelector", Go::Bool),
        ("template", Go::Struct(&POD_TEMPLATE_SPEC)),
        ("ttlSecondsAfterFinished", Go::Int32),
        ("suspend", Go::Bool),
    ],
};

static LEASE_SPEC: Struct = Struct {
    name: "LeaseSpec",
    go: "v1.LeaseSpec",
    fields: &[
        ("holderIdentity", STRING),
        ("leaseDurationSeconds", Go::Int32),
        ("acquireTime", TIME),
        ("renewTime", TIME),
        ("leaseTransitions", Go::Int32),
        ("strategy", Go::Str("v1.CoordinatedLeaseStrategy")),
        ("preferredHolder", STRING),
    ],
};

static EVENT_SOURCE: Struct = Struct { name: "EventSource", go: "v1.EventSource", fields: &[("component", STRING), ("host", STRING)] };

static EVENT_SERIES: Struct =
    Struct { name: "EventSeries", go: "v1.EventSeries", fields: &[("count", Go::Int32), ("lastObservedTime", TIME)] };

static CRD_NAMES: Struct = Struct {
    name: "CustomResourceDefinitionNames",
    go: "v1.CustomResourceDefinitionNames",
    fields: &[
        ("plural", STRING),
        ("singular", STRING),
        ("shortNames", Go::Slice(&STRING)),
        ("kind", STRING),
        ("listKind", STRING),
        ("categories", Go::Slice(&STRING)),
    ],
};

static CRD_VERSION: Struct = Struct {
    name: "CustomResourceDefinitionVersion",
    go: "v1.CustomResourceDefinitionVersion",
    fields: &[("name", STRING), ("served", Go::Bool), ("storage", Go::Bool), ("deprecated", Go::Bool), ("deprecationWarning", STRING)],
};

static CRD_SPEC: Struct = Struct {
    name: "CustomResourceDefinitionSpec",
    go: "v1.CustomResourceDefinitionSpec",
    fields: &[
        ("group", STRING),
        ("names", Go::Struct(&CRD_NAMES)),
        ("scope", Go::Str("v1.ResourceScope")),
        ("versions", Go::Slice(&Go::Struct(&CRD_VERSION))),
        ("preserveUnknownFields", Go::Bool),
    ],
};

/// A struct whose fields are not checked (only that it is an object).
macro_rules! opaque {
    ($name:literal) => {
        Struct { name: $name, go: concat!("v1.", $name), fields: &[] }
    };
}

static POD_STATUS: Struct = opaque!("PodStatus");
static SERVICE_STATUS: Struct = opaque!("ServiceStatus");
static DEPLOYMENT_STATUS: Struct = opaque!("DeploymentStatus");
static JOB_STATUS: Struct = opaque!("JobStatus");
static CRD_STATUS: Struct = opaque!("CustomResourceDefinitionStatus");
static NAMESPACE_STATUS: Struct = opaque!("NamespaceStatus");
static NAMESPACE_SPEC: Struct =
    Struct { name: "NamespaceSpec", go: "v1.NamespaceSpec", fields: &[("finalizers", Go::Slice(&Go::Str("v1.FinalizerName")))] };

static CONFIG_MAP: Struct = Struct {
    name: "ConfigMap",
    go: "v1.ConfigMap",
    fields: &[("metadata", META), ("data", Go::Map(&STRING)), ("binaryData", Go::Map(&Go::Bytes)), ("immutable", Go::Bool)],
};

static SECRET: Struct = Struct {
    name: "Secret",
    go: "v1.Secret",
    fields: &[
        ("metadata", META),
        ("data", Go::Map(&Go::Bytes)),
        ("stringData", Go::Map(&STRING)),
        ("type", Go::Str("v1.SecretType")),
        ("immutable", Go::Bool),
    ],
};

static SERVICE_ACCOUNT: Struct = Struct {
    name: "ServiceAccount",
    go: "v1.ServiceAccount",
    fields: &[
        ("metadata", META),
        ("secrets", Go::Slice(&Go::Struct(&OBJECT_REFERENCE))),
        ("imagePullSecrets", Go::Slice(&Go::Struct(&LOCAL_OBJECT_REFERENCE))),
        ("automountServiceAccountToken", Go::Bool),
    ],
};

static NAMESPACE: Struct = Struct {
    name: "Namespace",
    go: "v1.Namespace",
    fields: &[("metadata", META), ("spec", Go::Struct(&NAMESPACE_SPEC)), ("status", Go::Struct(&NAMESPACE_STATUS))],
};

static POD: Struct = Struct {
    name: "Pod",
    go: "v1.Pod",
    fields: &[("metadata", META), ("spec", Go::Struct(&POD_SPEC)), ("status", Go::Struct(&POD_STATUS))],
};

static SERVICE: Struct = Struct {
    name: "Service",
    go: "v1.Service",
    fields: &[("metadata", META), ("spec", Go::Struct(&SERVICE_SPEC)), ("status", Go::Struct(&SERVICE_STATUS))],
};

static DEPLOYMENT: Struct = Struct {
    name: "Deployment",
    go: "v1.Deployment",
    fields: &[("metadata", META), ("spec", Go::Struct(&DEPLOYMENT_SPEC)), ("status", Go::Struct(&DEPLOYMENT_STATUS))],
};

static JOB: Struct = Struct {
    name: "Job",
    go: "v1.Job",
    fields: &[("metadata", META), ("spec", Go::Struct(&JOB_SPEC)), ("status", Go::Struct(&JOB_STATUS))],
};

static LEASE: Struct = Struct { name: "Lease", go: "v1.Lease", fields: &[("metadata", META), ("spec", Go::Struct(&LEASE_SPEC))] };

static EVENT: Struct = Struct {
    name: "Event",
    go: "v1.Event",
    fields: &[
        ("metadata", META),
        ("involvedObject", Go::Struct(&OBJECT_REFERENCE)),
        ("reason", STRING),
        ("message", STRING),
        ("source", Go::Struct(&EVENT_SOURCE)),
        ("firstTimestamp", TIME),
        ("lastTimestamp", TIME),
        ("count", Go::Int32),
        ("type", STRING),
        ("eventTime", TIME),
        ("series", Go::Struct(&EVENT_SERIES)),
        ("action", STRING),
        ("related", Go::Struct(&OBJECT_REFERENCE)),
        ("reportingComponent", STRING),
        ("reportingInstance", STRING),
    ],
};

static EVENT_V1: Struct = Struct {
    name: "Event",
    go: "v1.Event",
    fields: &[
        ("metadata", META),
        ("eventTime", TIME),
        ("series", Go::Struct(&EVENT_SERIES)),
        ("reportingController", STRING),
        ("reportingInstance", STRING),
        ("action", STRING),
        ("reason", STRING),
        ("regarding", Go::Struct(&OBJECT_REFERENCE)),
        ("related", Go::Struct(&OBJECT_REFERENCE)),
        ("note", STRING),
        ("type", STRING),
        ("deprecatedSource", Go::Struct(&EVENT_SOURCE)),
        ("deprecatedFirstTimestamp", TIME),
        ("deprecatedLastTimestamp", TIME),
        ("deprecatedCount", Go::Int32),
    ],
};

static CRD: Struct = Struct {
    name: "CustomResourceDefinition",
    go: "v1.CustomResourceDefinition",
    fields: &[("metadata", META), ("spec", Go::Struct(&CRD_SPEC)), ("status", Go::Struct(&CRD_STATUS))],
};

/// The Go struct a built-in resource decodes into.
fn kind_struct(info: &ResourceInfo) -> Option<&'static Struct> {
    if !info.builtin {
        return None;
    }
    Some(match (info.group.as_str(), info.plural.as_str()) {
        ("", "configmaps") => &CONFIG_MAP,
        ("", "secrets") => &SECRET,
        ("", "serviceaccounts") => &SERVICE_ACCOUNT,
        ("", "namespaces") => &NAMESPACE,
        ("", "pods") => &POD,
        ("", "services") => &SERVICE,
        ("", "events") => &EVENT,
        ("events.k8s.io", "events") => &EVENT_V1,
        ("apps", "deployments") => &DEPLOYMENT,
        ("batch", "jobs") => &JOB,
        ("coordination.k8s.io", "leases") => &LEASE,
        ("apiextensions.k8s.io", "customresourcedefinitions") => &CRD,
        _ => return None,
    })
}

/// Decode `obj` as the real server decodes a body of `info`'s kind: the first value of the
/// wrong JSON type, as encoding/json reports it (`json: cannot unmarshal array into Go struct
/// field ConfigMap.data of type map[string]string`). Custom resources are not checked here
/// (their schema is).
pub fn check(info: &ResourceInfo, obj: &Value) -> Result<(), String> {
    let Some(root) = kind_struct(info) else { return Ok(()) };
    let mut path = Vec::new();
    check_struct(root, obj, &mut path)
}

fn check_struct<'a>(s: &'static Struct, v: &'a Value, path: &mut Vec<&'a str>) -> Result<(), String> {
    let Some(map) = v.as_object() else { return Ok(()) };
    for (key, value) in map {
        let Some((_, go)) = s.fields.iter().find(|(name, _)| name == key) else { continue };
        path.push(key);
        check_value(s, go, value, path)?;
        path.pop();
    }
    Ok(())
}

/// Check `v` against `go`, the type of a field of `owner` at `path`.
fn check_value<'a>(owner: &'static Struct, go: &'static Go, v: &'a Value, path: &mut Vec<&'a str>) -> Result<(), String> {
    if v.is_null() {
        return Ok(()); // null leaves a Go value as it is
    }
    let fits = match go {
        Go::Any => true,
        Go::Str(_) | Go::Bytes => v.is_string(),
        Go::Bool => v.is_boolean(),
        Go::Int32 | Go::Int64 => {
            let Some(n) = v.as_number() else { return Err(mismatch(owner, path, json_kind(v), go)) };
            let fits = match go {
                Go::Int32 => n.as_i64().is_some_and(|i| i32::try_from(i).is_ok()),
                _ => n.as_i64().is_some(),
            };
            if !fits {
                return Err(mismatch(owner, path, &format!("number {n}"), go));
            }
            true
        }
        Go::Map(elem) => {
            let Some(map) = v.as_object() else { return Err(mismatch(owner, path, json_kind(v), go)) };
            return map.values().try_for_each(|e| check_value(owner, elem, e, path));
        }
        Go::Slice(elem) => {
            let Some(items) = v.as_array() else { return Err(mismatch(owner, path, json_kind(v), go)) };
            return items.iter().try_for_each(|e| check_value(owner, elem, e, path));
        }
        Go::Struct(s) => {
            if !v.is_object() {
                return Err(mismatch(owner, path, json_kind(v), go));
            }
            return check_struct(s, v, path);
        }
    };
    if fits { Ok(()) } else { Err(mismatch(owner, path, json_kind(v), go)) }
}

fn mismatch(owner: &Struct, path: &[&str], value: &str, go: &Go) -> String {
    format!("json: cannot unmarshal {value} into Go struct field {}.{} of type {}", owner.name, path.join("."), type_name(go))
}

/// What encoding/json calls a JSON value in its errors.
fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// The Go type's name as `reflect.Type.String()` writes it.
fn type_name(go: &Go) -> String {
    match go {
        Go::Str(name) => (*name).to_string(),
        Go::Bool => "bool".into(),
        Go::Int32 => "int32".into(),
        Go::Int64 => "int64".into(),
        Go::Bytes => "[]uint8".into(),
        Go::Map(elem) => format!("map[string]{}", type_name(elem)),
        Go::Slice(elem) => format!("[]{}", type_name(elem)),
        Go::Struct(s) => s.go.to_string(),
        Go::Any => "interface {}".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn info(group: &str, plural: &str) -> std::sync::Arc<ResourceInfo> {
        crate::registry::Registry::with_builtins().get(group, "v1", plural).expect("built-in")
    }

    #[test]
    fn values_of_the_wrong_json_type_read_as_encoding_json_reports_them() {
        let cm = info("", "configmaps");
        let deploy = info("apps", "deployments");
        let cases: &[(&ResourceInfo, Value, Option<&str>)] = &[
            (&cm, json!({"data": {"a": "1"}, "metadata": {"labels": {"x": "y"}}}), None),
            (&cm, json!({"data": null, "immutable": null}), None),
            (&cm, json!({"data": [1]}), Some("json: cannot unmarshal array into Go struct field ConfigMap.data of type map[string]string")),
            (&cm, json!({"data": {"a": 1}}), Some("json: cannot unmarshal number into Go struct field ConfigMap.data of type string")),
            (&cm, json!({"immutable": "yes"}), Some("json: cannot unmarshal string into Go struct field ConfigMap.immutable of type bool")),
            (
                &cm,
                json!({"binaryData": {"a": 1}}),
                Some("json: cannot unmarshal number into Go struct field ConfigMap.binaryData of type []uint8"),
            ),
            (
                &cm,
                json!({"metadata": {"labels": {"a": true}}}),
                Some("json: cannot unmarshal bool into Go struct field ObjectMeta.metadata.labels of type string"),
            ),
            (
                &cm,
                json!({"metadata": "x"}),
                Some("json: cannot unmarshal string into Go struct field ConfigMap.metadata of type v1.ObjectMeta"),
            ),
            (
                &cm,
                json!({"metadata": {"ownerReferences": [{"uid": 5}]}}),
                Some("json: cannot unmarshal number into Go struct field OwnerReference.metadata.ownerReferences.uid of type types.UID"),
            ),
            (
                &deploy,
                json!({"spec": {"replicas": "3"}}),
                Some("json: cannot unmarshal string into Go struct field DeploymentSpec.spec.replicas of type int32"),
            ),
            (
                &deploy,
                json!({"spec": {"replicas": 1.5}}),
                Some("json: cannot unmarshal number 1.5 into Go struct field DeploymentSpec.spec.replicas of type int32"),
            ),
            (
                &deploy,
                json!({"spec": {"template": {"spec": {"containers": [{"name": "a", "ports": [{"containerPort": "80"}]}]}}}}),
                Some(
                    "json: cannot unmarshal string into Go struct field ContainerPort.spec.template.spec.containers.ports.containerPort of type int32",
                ),
            ),
            // the first problem in the document's order is the one reported
            (
                &cm,
                json!({"immutable": 1, "data": 2}),
                Some("json: cannot unmarshal number into Go struct field ConfigMap.immutable of type bool"),
            ),
        ];
        for (info, obj, want) in cases {
            assert_eq!(check(info, obj).err().as_deref(), *want, "{obj}");
        }
    }
}
