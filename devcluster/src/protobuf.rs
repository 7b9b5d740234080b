//! Decoding of Kubernetes protobuf request bodies (`application/vnd.kubernetes.protobuf`),
//! which kubectl's typed commands (`kubectl create deployment|job|namespace|secret|role|
//! clusterrolebinding|cronjob|pdb|ingress|...`) send. The envelope (`k8s\0` + `runtime.Unknown`) names the kind; the object is decoded
//! to JSON with a built-in table of field numbers for the kinds and fields those commands
//! use (and the TokenRequest, Eviction and Binding that `kubectl create token` and clients
//! post). Fields not in the table are skipped (nested messages we do not know become `{}`).

use base64::Engine;
use serde_json::{Map, Value, json};

/// Why a protobuf body could not be decoded.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Error {
    /// Not the `k8s\0` envelope or a truncated message.
    #[error("malformed protobuf: {0}")]
    Malformed(&'static str),
    /// A kind this decoder has no table for.
    #[error("protobuf bodies of kind {0} are not supported; send JSON")]
    UnsupportedKind(String),
}

#[derive(Clone, Copy)]
enum K {
    Str,
    Bool,
    Int,
    Time,
    IntOrStr,
    Msg(&'static [F]),
    MapStr,
    MapBytes,
    MapQuantity,
    Opaque,
    /// An embedded message whose fields JSON writes in the parent (`json:",inline"`).
    Inline(&'static [F]),
}

/// (field number, JSON name, kind, repeated)
type F = (u32, &'static str, K, bool);

const TIME: K = K::Time;
/// Optional (pointer) integer fields, where 0 is a value and not "unset".
const POINTER_INTS: &[&str] = &[
    "replicas",
    "parallelism",
    "completions",
    "backoffLimit",
    "terminationGracePeriodSeconds",
    "revisionHistoryLimit",
    "ttlSecondsAfterFinished",
    "activeDeadlineSeconds",
    "expirationSeconds",
    "gracePeriodSeconds",
    "successfulJobsHistoryLimit",
    "failedJobsHistoryLimit",
    "startingDeadlineSeconds",
    "minAvailable",
    "maxUnavailable",
    "maxSurge",
];
const OWNER_REF: &[F] = &[
    (1, "kind", K::Str, false),
    (3, "name", K::Str, false),
    (4, "uid", K::Str, false),
    (5, "apiVersion", K::Str, false),
    (6, "controller", K::Bool, false),
    (7, "blockOwnerDeletion", K::Bool, false),
];
const META: &[F] = &[
    (1, "name", K::Str, false),
    (2, "generateName", K::Str, false),
    (3, "namespace", K::Str, false),
    (5, "uid", K::Str, false),
    (6, "resourceVersion", K::Str, false),
    (7, "generation", K::Int, false),
    (8, "creationTimestamp", TIME, false),
    (11, "labels", K::MapStr, false),
    (12, "annotations", K::MapStr, false),
    (13, "ownerReferences", K::Msg(OWNER_REF), true),
    (14, "finalizers", K::Str, true),
];
const REQUIREMENT: &[F] = &[(1, "key", K::Str, false), (2, "operator", K::Str, false), (3, "values", K::Str, true)];
const SELECTOR: &[F] = &[(1, "matchLabels", K::MapStr, false), (2, "matchExpressions", K::Msg(REQUIREMENT), true)];
const LOCAL_REF: &[F] = &[(1, "name", K::Str, false)];
const OBJECT_REF: &[F] = &[
    (1, "kind", K::Str, false),
    (2, "namespace", K::Str, false),
    (3, "name", K::Str, false),
    (4, "uid", K::Str, false),
    (5, "apiVersion", K::Str, false),
    (6, "resourceVersion", K::Str, false),
    (7, "fieldPath", K::Str, false),
];
const PORT: &[F] = &[
    (1, "name", K::Str, false),
    (2, "hostPort", K::Int, false),
    (3, "containerPort", K::Int, false),
    (4, "protocol", K::Str, false),
    (5, "hostIP", K::Str, false),
];
const ENV: &[F] = &[(1, "name", K::Str, false), (2, "value", K::Str, false), (3, "valueFrom", K::Opaque, false)];
const RESOURCES: &[F] = &[(1, "limits", K::MapQuantity, false), (2, "requests", K::MapQuantity, false)];
const CONTAINER: &[F] = &[
    (1, "name", K::Str, false),
    (2, "image", K::Str, false),
    (3, "command", K::Str, true),
    (4, "args", K::Str, true),
    (5, "workingDir", K::Str, false),
    (6, "ports", K::Msg(PORT), true),
    (7, "env", K::Msg(ENV), true),
    (8, "resources", K::Msg(RESOURCES), false),
    (13, "terminationMessagePath", K::Str, false),
    (14, "imagePullPolicy", K::Str, false),
    (16, "stdin", K::Bool, false),
    (17, "stdinOnce", K::Bool, false),
    (18, "tty", K::Bool, false),
    (20, "terminationMessagePolicy", K::Str, false),
];
const POD_SPEC: &[F] = &[
    (2, "containers", K::Msg(CONTAINER), true),
    (3, "restartPolicy", K::Str, false),
    (4, "terminationGracePeriodSeconds", K::Int, false),
    (5, "activeDeadlineSeconds", K::Int, false),
    (6, "dnsPolicy", K::Str, false),
    (7, "nodeSelector", K::MapStr, false),
    (8, "serviceAccountName", K::Str, false),
    (10, "nodeName", K::Str, false),
    (14, "securityContext", K::Opaque, false),
    (15, "imagePullSecrets", K::Msg(LOCAL_REF), true),
    (16, "hostname", K::Str, false),
    (19, "schedulerName", K::Str, false),
    (20, "initContainers", K::Msg(CONTAINER), true),
    (21, "automountServiceAccountToken", K::Bool, false),
    (24, "priorityClassName", K::Str, false),
];
const TEMPLATE: &[F] = &[(1, "metadata", K::Msg(META), false), (2, "spec", K::Msg(POD_SPEC), false)];
const ROLLING: &[F] = &[(1, "maxUnavailable", K::IntOrStr, false), (2, "maxSurge", K::IntOrStr, false)];
const STRATEGY: &[F] = &[(1, "type", K::Str, false), (2, "rollingUpdate", K::Msg(ROLLING), false)];
const DEPLOYMENT_SPEC: &[F] = &[
    (1, "replicas", K::Int, false),
    (2, "selector", K::Msg(SELECTOR), false),
    (3, "template", K::Msg(TEMPLATE), false),
    (4, "strategy", K::Msg(STRATEGY), false),
    (5, "minReadySeconds", K::Int, false),
    (6, "revisionHistoryLimit", K::Int, false),
    (7, "paused", K::Bool, false),
    (9, "progressDeadlineSeconds", K::Int, false),
];
const JOB_SPEC: &[F] = &[
    (1, "parallelism", K::Int, false),
    (2, "completions", K::Int, false),
    (3, "activeDeadlineSeconds", K::Int, false),
    (4, "selector", K::Msg(SELECTOR), false),
    (5, "manualSelector", K::Bool, false),
    (6, "template", K::Msg(TEMPLATE), false),
    (7, "backoffLimit", K::Int, false),
    (8, "ttlSecondsAfterFinished", K::Int, false),
    (9, "completionMode", K::Str, false),
    (10, "suspend", K::Bool, false),
];
const SERVICE_PORT: &[F] = &[
    (1, "name", K::Str, false),
    (2, "protocol", K::Str, false),
    (3, "port", K::Int, false),
    (4, "targetPort", K::IntOrStr, false),
    (5, "nodePort", K::Int, false),
    (6, "appProtocol", K::Str, false),
];
const SERVICE_SPEC: &[F] = &[
    (1, "ports", K::Msg(SERVICE_PORT), true),
    (2, "selector", K::MapStr, false),
    (3, "clusterIP", K::Str, false),
    (4, "type", K::Str, false),
    (5, "externalIPs", K::Str, true),
    (7, "sessionAffinity", K::Str, false),
    (10, "externalName", K::Str, false),
    (18, "clusterIPs", K::Str, true),
    (19, "ipFamilies", K::Str, true),
    (17, "ipFamilyPolicy", K::Str, false),
    (22, "internalTrafficPolicy", K::Str, false),
];
const NS_SPEC: &[F] = &[(1, "finalizers", K::Str, true)];
const BOUND_REF: &[F] =
    &[(1, "kind", K::Str, false), (2, "apiVersion", K::Str, false), (3, "name", K::Str, false), (4, "uid", K::Str, false)];
const TOKEN_REQUEST_SPEC: &[F] =
    &[(1, "audiences", K::Str, true), (3, "boundObjectRef", K::Msg(BOUND_REF), false), (4, "expirationSeconds", K::Int, false)];
const PRECONDITIONS: &[F] = &[(1, "uid", K::Str, false), (2, "resourceVersion", K::Str, false)];
const DELETE_OPTIONS: &[F] = &[
    (1, "gracePeriodSeconds", K::Int, false),
    (2, "preconditions", K::Msg(PRECONDITIONS), false),
    (3, "orphanDependents", K::Bool, false),
    (4, "propagationPolicy", K::Str, false),
    (5, "dryRun", K::Str, true),
];
const CRON_JOB_SPEC: &[F] = &[
    (1, "schedule", K::Str, false),
    (2, "startingDeadlineSeconds", K::Int, false),
    (3, "concurrencyPolicy", K::Str, false),
    (4, "suspend", K::Bool, false),
    (5, "jobTemplate", K::Msg(&[(1, "metadata", K::Msg(META), false), (2, "spec", K::Msg(JOB_SPEC), false)]), false),
    (6, "successfulJobsHistoryLimit", K::Int, false),
    (7, "failedJobsHistoryLimit", K::Int, false),
    (8, "timeZone", K::Str, false),
];
const PDB_SPEC: &[F] = &[
    (1, "minAvailable", K::IntOrStr, false),
    (2, "selector", K::Msg(SELECTOR), false),
    (3, "maxUnavailable", K::IntOrStr, false),
    (4, "unhealthyPodEvictionPolicy", K::Str, false),
];
const INGRESS_BACKEND: &[F] = &[
    (3, "resource", K::Msg(&[(1, "apiGroup", K::Str, false), (2, "kind", K::Str, false), (3, "name", K::Str, false)]), false),
    (
        4,
        "service",
        K::Msg(&[(1, "name", K::Str, false), (2, "port", K::Msg(&[(1, "name", K::Str, false), (2, "number", K::Int, false)]), false)]),
        false,
    ),
];
const INGRESS_PATH: &[F] = &[(1, "path", K::Str, false), (2, "backend", K::Msg(INGRESS_BACKEND), false), (3, "pathType", K::Str, false)];
const INGRESS_RULE: &[F] = &[
    (1, "host", K::Str, false),
    (2, "ingressRuleValue", K::Inline(&[(1, "http", K::Msg(&[(1, "paths", K::Msg(INGRESS_PATH), true)]), false)]), false),
];
const INGRESS_SPEC: &[F] = &[
    (1, "defaultBackend", K::Msg(INGRESS_BACKEND), false),
    (2, "tls", K::Msg(&[(1, "hosts", K::Str, true), (2, "secretName", K::Str, false)]), true),
    (3, "rules", K::Msg(INGRESS_RULE), true),
    (4, "ingressClassName", K::Str, false),
];
const POLICY_RULE: &[F] = &[
    (1, "verbs", K::Str, true),
    (2, "apiGroups", K::Str, true),
    (3, "resources", K::Str, true),
    (4, "resourceNames", K::Str, true),
    (5, "nonResourceURLs", K::Str, true),
];
const SUBJECT: &[F] =
    &[(1, "kind", K::Str, false), (2, "apiGroup", K::Str, false), (3, "name", K::Str, false), (4, "namespace", K::Str, false)];
const ROLE_REF: &[F] = &[(1, "apiGroup", K::Str, false), (2, "kind", K::Str, false), (3, "name", K::Str, false)];

/// The top-level fields of each supported kind.
fn kind_fields(kind: &str) -> Option<&'static [F]> {
    const fn top(spec: &'static [F]) -> [F; 2] {
        [(1, "metadata", K::Msg(META), false), (2, "spec", K::Msg(spec), false)]
    }
    static DEPLOYMENT: [F; 2] = top(DEPLOYMENT_SPEC);
    static JOB: [F; 2] = top(JOB_SPEC);
    static SERVICE: [F; 2] = top(SERVICE_SPEC);
    static NAMESPACE: [F; 2] = top(NS_SPEC);
    static POD: [F; 2] = top(POD_SPEC);
    static CONFIGMAP: [F; 4] = [
        (1, "metadata", K::Msg(META), false),
        (2, "data", K::MapStr, false),
        (3, "binaryData", K::MapBytes, false),
        (4, "immutable", K::Bool, false),
    ];
    static SECRET: [F; 5] = [
        (1, "metadata", K::Msg(META), false),
        (2, "data", K::MapBytes, false),
        (3, "type", K::Str, false),
        (4, "stringData", K::MapStr, false),
        (5, "immutable", K::Bool, false),
    ];
    static CRON_JOB: [F; 2] = top(CRON_JOB_SPEC);
    static PDB: [F; 2] = top(PDB_SPEC);
    static INGRESS: [F; 2] = top(INGRESS_SPEC);
    static ROLE: [F; 3] = [
        (1, "metadata", K::Msg(META), false),
        (2, "rules", K::Msg(POLICY_RULE), true),
        (3, "aggregationRule", K::Msg(&[(1, "clusterRoleSelectors", K::Msg(SELECTOR), true)]), false),
    ];
    static ROLE_BINDING: [F; 3] =
        [(1, "metadata", K::Msg(META), false), (2, "subjects", K::Msg(SUBJECT), true), (3, "roleRef", K::Msg(ROLE_REF), false)];
    static SA: [F; 4] = [
        (1, "metadata", K::Msg(META), false),
        (2, "secrets", K::Msg(OBJECT_REF), true),
        (3, "imagePullSecrets", K::Msg(LOCAL_REF), true),
        (4, "automountServiceAccountToken", K::Bool, false),
    ];
    static TOKEN_REQUEST: [F; 2] = top(TOKEN_REQUEST_SPEC);
    static EVICTION: [F; 2] = [(1, "metadata", K::Msg(META), false), (2, "deleteOptions", K::Msg(DELETE_OPTIONS), false)];
    static BINDING: [F; 2] = [(1, "metadata", K::Msg(META), false), (2, "target", K::Msg(OBJECT_REF), false)];
    Some(match kind {
        "TokenRequest" => &TOKEN_REQUEST,
        "Eviction" => &EVICTION,
        "Binding" => &BINDING,
        "Deployment" => &DEPLOYMENT,
        "Job" => &JOB,
        "Service" => &SERVICE,
        "Namespace" => &NAMESPACE,
        "Pod" => &POD,
        "ConfigMap" => &CONFIGMAP,
        "Secret" => &SECRET,
        "ServiceAccount" => &SA,
        "CronJob" => &CRON_JOB,
        "PodDisruptionBudget" => &PDB,
        "Ingress" => &INGRESS,
        "Role" | "ClusterRole" => &ROLE,
        "RoleBinding" | "ClusterRoleBinding" => &ROLE_BINDING,
        _ => return None,
    })
}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn varint(&mut self) -> Result<u64, Error> {
        let mut out = 0u64;
        for shift in (0..64).step_by(7) {
            let b = *self.buf.get(self.pos).ok_or(Error::Malformed("truncated varint"))?;
            self.pos += 1;
            out |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(out);
            }
        }
        Err(Error::Malformed("varint too long"))
    }

    fn bytes(&mut self) -> Result<&'a [u8], Error> {
        let len = self.varint()? as usize;
        let end = self.pos.checked_add(len).filter(|e| *e <= self.buf.len()).ok_or(Error::Malformed("truncated field"))?;
        let out = &self.buf[self.pos..end];
        self.pos = end;
        Ok(out)
    }

    /// Next (field number, wire type); None at the end.
    fn key(&mut self) -> Result<Option<(u32, u8)>, Error> {
        if self.pos >= self.buf.len() {
            return Ok(None);
        }
        let k = self.varint()?;
        Ok(Some(((k >> 3) as u32, (k & 7) as u8)))
    }

    fn skip(&mut self, wire: u8) -> Result<(), Error> {
        match wire {
            0 => self.varint().map(|_| ()),
            1 => {
                self.pos += 8;
                Ok(())
            }
            2 => self.bytes().map(|_| ()),
            5 => {
                self.pos += 4;
                Ok(())
            }
            _ => Err(Error::Malformed("unsupported wire type")),
        }
    }
}

fn text(b: &[u8]) -> Value {
    Value::String(String::from_utf8_lossy(b).into_owned())
}

fn map_entry(b: &[u8], value: impl Fn(&[u8]) -> Result<Value, Error>) -> Result<(String, Value), Error> {
    let mut r = Reader { buf: b, pos: 0 };
    let (mut key, mut val) = (String::new(), Value::Null);
    while let Some((num, wire)) = r.key()? {
        match (num, wire) {
            (1, 2) => key = String::from_utf8_lossy(r.bytes()?).into_owned(),
            (2, 2) => val = value(r.bytes()?)?,
            (_, w) => r.skip(w)?,
        }
    }
    Ok((key, val))
}

fn message(buf: &[u8], fields: &[F]) -> Result<Value, Error> {
    let mut r = Reader { buf, pos: 0 };
    let mut out = Map::new();
    while let Some((num, wire)) = r.key()? {
        let Some(&(_, name, kind, repeated)) = fields.iter().find(|f| f.0 == num) else {
            r.skip(wire)?;
            continue;
        };
        let value = match (kind, wire) {
            (K::Int, 0) => json!(r.varint()? as i64),
            (K::Bool, 0) => json!(r.varint()? != 0),
            (_, w) if w != 2 => {
                r.skip(w)?;
                continue;
            }
            (K::Int | K::Bool, _) => {
                r.skip(wire)?;
                continue;
            }
            (K::Str, _) => text(r.bytes()?),
            (K::Msg(sub), _) => message(r.bytes()?, sub)?,
            (K::Inline(sub), _) => {
                if let Value::Object(m) = message(r.bytes()?, sub)? {
                    out.extend(m);
                }
                continue;
            }
            (K::Opaque, _) => {
                r.bytes()?;
                json!({})
            }
            (K::Time, _) => {
                let mut t = Reader { buf: r.bytes()?, pos: 0 };
                let mut secs = 0i64;
                while let Some((n, w)) = t.key()? {
                    if n == 1 && w == 0 {
                        secs = t.varint()? as i64;
                    } else {
                        t.skip(w)?;
                    }
                }
                if secs == 0 {
                    Value::Null
                } else {
                    chrono::DateTime::from_timestamp(secs, 0).map_or(Value::Null, |d| json!(d.format("%Y-%m-%dT%H:%M:%SZ").to_string()))
                }
            }
            (K::IntOrStr, _) => {
                let v = message(r.bytes()?, &[(1, "type", K::Int, false), (2, "intVal", K::Int, false), (3, "strVal", K::Str, false)])?;
                if v["type"] == 1 { v.get("strVal").cloned().unwrap_or(json!("")) } else { v.get("intVal").cloned().unwrap_or(json!(0)) }
            }
            (K::MapStr | K::MapBytes | K::MapQuantity, _) => {
                let (k, v) = map_entry(r.bytes()?, |b| {
                    Ok(match kind {
                        K::MapBytes => json!(base64::engine::general_purpose::STANDARD.encode(b)),
                        K::MapQuantity => message(b, &[(1, "string", K::Str, false)])?.get("string").cloned().unwrap_or(Value::Null),
                        _ => text(b),
                    })
                })?;
                let m = out.entry(name).or_insert_with(|| json!({}));
                if let Some(m) = m.as_object_mut() {
                    m.insert(k, v);
                }
                continue;
            }
        };
        // Go writes every non-pointer field, zero or not; JSON leaves zero values out
        let zero = match &value {
            Value::String(s) => s.is_empty(),
            Value::Bool(b) => !b,
            Value::Number(n) => n.as_i64() == Some(0) && !POINTER_INTS.contains(&name),
            Value::Object(m) => m.is_empty() && matches!(kind, K::Msg(_) | K::Opaque) && name != "resources",
            Value::Null => true,
            _ => false,
        };
        if zero && !repeated {
            continue;
        }
        if repeated {
            let list = out.entry(name).or_insert_with(|| json!([]));
            if let Some(l) = list.as_array_mut() {
                l.push(value);
            }
        } else {
            out.insert(name.to_string(), value);
        }
    }
    Ok(Value::Object(out))
}

/// Decode a protobuf request body into the JSON object it stands for.
pub fn decode(raw: &[u8]) -> Result<Value, Error> {
    let body = raw.strip_prefix(b"k8s\x00").ok_or(Error::Malformed("missing k8s envelope"))?;
    let mut r = Reader { buf: body, pos: 0 };
    let (mut api_version, mut kind, mut object) = (String::new(), String::new(), &[][..]);
    while let Some((num, wire)) = r.key()? {
        match (num, wire) {
            (1, 2) => {
                let tm = message(r.bytes()?, &[(1, "apiVersion", K::Str, false), (2, "kind", K::Str, false)])?;
                api_version = tm["apiVersion"].as_str().unwrap_or("").to_string();
                kind = tm["kind"].as_str().unwrap_or("").to_string();
            }
            (2, 2) => object = r.bytes()?,
            (_, w) => r.skip(w)?,
        }
    }
    let fields = kind_fields(&kind).ok_or_else(|| Error::UnsupportedKind(kind.clone()))?;
    let mut v = message(object, fields)?;
    if let Some(m) = v.as_object_mut() {
        m.insert("apiVersion".into(), json!(api_version));
        m.insert("kind".into(), json!(kind));
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(num: u32, payload: &[u8]) -> Vec<u8> {
        let mut out = vec![(num << 3 | 2) as u8, payload.len() as u8];
        out.extend_from_slice(payload);
        out
    }

    #[test]
    fn a_protobuf_configmap_decodes_to_json() {
        let meta = field(1, b"cm1");
        let entry = [field(1, b"a"), field(2, b"1")].concat();
        let object = [field(1, &meta), field(2, &entry)].concat();
        let type_meta = [field(1, b"v1"), field(2, b"ConfigMap")].concat();
        let raw = [b"k8s\x00".to_vec(), field(1, &type_meta), field(2, &object)].concat();
        let v = decode(&raw).unwrap();
        assert_eq!(v, json!({"metadata": {"name": "cm1"}, "data": {"a": "1"}, "apiVersion": "v1", "kind": "ConfigMap"}));
    }

    #[test]
    fn an_ingress_rule_writes_its_inline_rule_value_in_place() {
        let backend = field(4, &[field(1, b"svc"), vec![2 << 3 | 2, 2, 2 << 3, 80]].concat());
        let path = [field(1, b"/"), field(2, &backend), field(3, b"Prefix")].concat();
        let rule = [field(1, b"a.com"), field(2, &field(1, &field(1, &path)))].concat();
        let object = [field(1, &field(1, b"web")), field(2, &field(3, &rule))].concat();
        let type_meta = [field(1, b"networking.k8s.io/v1"), field(2, b"Ingress")].concat();
        let raw = [b"k8s\x00".to_vec(), field(1, &type_meta), field(2, &object)].concat();
        let v = decode(&raw).unwrap();
        assert_eq!(
            v["spec"]["rules"],
            json!([{"host": "a.com", "http": {"paths": [{"path": "/", "pathType": "Prefix",
                "backend": {"service": {"name": "svc", "port": {"number": 80}}}}]}}])
        );
    }
}
