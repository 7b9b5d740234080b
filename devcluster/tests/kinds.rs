//! The kinds operators' manifests hold beyond the basics: RBAC, the other
//! workloads, Nodes and volumes, networking, PodDisruptionBudgets, CronJobs and webhook
//! configurations — stored, not run — each over real HTTP with its discovery entry, the
//! columns `kubectl get` shows, its defaults and its verbs; and the repository's own `deploy/`
//! manifests applied with kube-rs and with `kubectl`.

#[path = "support/kinds_cases.rs"]
mod cases;
#[path = "support/kubectl.rs"]
mod support;

use std::path::Path;

use bosun_devcluster::DevCluster;
use cases::cases;
use http_body_util::BodyExt;
use serde_json::{Value, json};
use support::{kubectl, kubectl_ok, with_kubectl};

const TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";

/// One answer: status, content type, `Warning` texts and the body (JSON, or a string).
struct Answer {
    code: u16,
    content_type: String,
    warnings: Vec<String>,
    body: Value,
}

/// Sends one request with the given Accept header and an optional JSON body.
async fn send(dc: &DevCluster, method: &str, path: &str, accept: &str, content_type: Option<&str>, body: Option<Value>) -> Answer {
    let client = dc.client();
    let mut req = http::Request::builder().method(method).uri(path).header("accept", accept);
    if let Some(ct) = content_type {
        req = req.header("content-type", ct);
    }
    let body = body.map(|b| serde_json::to_vec(&b).unwrap()).unwrap_or_default();
    let resp = client.send(req.body(body).unwrap().map(Into::into)).await.unwrap();
    let code = resp.status().as_u16();
    let header = |name: &str| resp.headers().get_all(name).iter().map(|v| v.to_str().unwrap_or("").to_string()).collect::<Vec<_>>();
    let content_type = header("content-type").join(",");
    let warnings = header("warning");
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    let body = serde_json::from_slice(&bytes).unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
    Answer { code, content_type, warnings, body }
}

async fn json(dc: &DevCluster, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
    let ct = body.as_ref().map(|_| "application/json");
    let a = send(dc, method, path, "application/json", ct, body).await;
    (a.code, a.body)
}

const MERGE: &str = "application/merge-patch+json";
const STRATEGIC: &str = "application/strategic-merge-patch+json";

/// PATCHes `path` with `patch` of the given content type.
async fn patch(dc: &DevCluster, path: &str, content_type: &str, patch: Value) -> Answer {
    send(dc, "PATCH", path, "application/json", Some(content_type), Some(patch)).await
}

/// The cells of a Table row with Age cells (`5s`) and Created At dates made comparable.
fn comparable_cells(columns: &[Value], cells: &[Value]) -> Vec<Value> {
    columns
        .iter()
        .zip(cells)
        .map(|(c, cell)| match (c["name"].as_str(), c["type"].as_str()) {
            (Some("Age"), _) if cell.as_str().is_some_and(|a| a.ends_with('s') && a[..a.len() - 1].parse::<u32>().is_ok()) => {
                json!("<age>")
            }
            (_, Some("date")) if cell.as_str().is_some_and(|d| chrono::DateTime::parse_from_rfc3339(d).is_ok()) => json!("<date>"),
            _ => cell.clone(),
        })
        .collect()
}

#[tokio::test]
async fn every_new_kind_is_created_read_listed_as_a_table_updated_and_deleted() {
    let dc = DevCluster::start_local().await.unwrap();
    for case in cases() {
        let name = case.object["metadata"]["name"].as_str().unwrap();
        let item = format!("{}/{}", case.collection, name.replace(':', "%3A"));
        let (code, created) = json(&dc, "POST", case.collection, Some(case.object.clone())).await;
        assert_eq!(code, 201, "create {}: {created}", case.collection);
        assert_eq!(created["kind"], case.object["kind"]);
        let (code, got) = json(&dc, "GET", &item, None).await;
        assert_eq!((code, &got["metadata"]["uid"]), (200, &created["metadata"]["uid"]), "get {item}");

        let table = send(&dc, "GET", case.collection, TABLE, None, None).await;
        assert_eq!((table.code, table.body["kind"].as_str()), (200, Some("Table")), "{item}: {}", table.body);
        let columns = table.body["columnDefinitions"].as_array().unwrap();
        let names: Vec<&str> = columns.iter().map(|c| c["name"].as_str().unwrap()).collect();
        assert_eq!(names, case.columns, "columns of {}", case.collection);
        let rows = table.body["rows"].as_array().unwrap();
        let row = rows.iter().find(|r| r["object"]["metadata"]["name"] == name).unwrap_or_else(|| panic!("{name} in {rows:?}"));
        assert_eq!(json!(comparable_cells(columns, row["cells"].as_array().unwrap())), case.cells, "row of {item}");

        let mut changed = got.clone();
        changed["metadata"]["labels"]["touched"] = json!("yes");
        let (code, updated) = json(&dc, "PUT", &item, Some(changed)).await;
        assert_eq!(code, 200, "update {item}: {updated}");
        assert_eq!(updated["metadata"]["labels"]["touched"], "yes");
        assert_ne!(updated["metadata"]["resourceVersion"], got["metadata"]["resourceVersion"]);

        let (code, status) = json(&dc, "DELETE", &item, None).await;
        assert_eq!(code, 200, "delete {item}: {status}");
        let (code, _) = json(&dc, "GET", &item, None).await;
        assert_eq!(code, 404, "{item} is gone");
    }
    dc.shutdown().await;
}

#[tokio::test]
async fn discovery_lists_each_new_kind_with_its_names_categories_and_subresources() {
    let dc = DevCluster::start_local().await.unwrap();
    let entry = |list: &Value, name: &str| -> Value {
        list["resources"].as_array().unwrap().iter().find(|r| r["name"] == name).cloned().unwrap_or_else(|| panic!("{name} in {list}"))
    };
    let (_, core) = json(&dc, "GET", "/api/v1", None).await;
    for (name, namespaced, short) in
        [("nodes", false, "no"), ("persistentvolumes", false, "pv"), ("persistentvolumeclaims", true, "pvc"), ("endpoints", true, "ep")]
    {
        let r = entry(&core, name);
        assert_eq!((r["namespaced"].as_bool(), r["shortNames"][0].as_str()), (Some(namespaced), Some(short)), "{r}");
    }
    assert_eq!(entry(&core, "endpoints")["singularName"], "endpoints");
    assert_eq!(entry(&core, "nodes/status")["verbs"], json!(["get", "patch", "update"]));
    let (_, apps) = json(&dc, "GET", "/apis/apps/v1", None).await;
    for (name, short) in [("statefulsets", "sts"), ("daemonsets", "ds"), ("replicasets", "rs")] {
        let r = entry(&apps, name);
        assert_eq!((&r["shortNames"], &r["categories"]), (&json!([short]), &json!(["all"])), "{r}");
        assert_eq!(entry(&apps, &format!("{name}/status"))["kind"], r["kind"]);
    }
    for scaled in ["statefulsets/scale", "replicasets/scale"] {
        let r = entry(&apps, scaled);
        assert_eq!((r["group"].as_str(), r["version"].as_str(), r["kind"].as_str()), (Some("autoscaling"), Some("v1"), Some("Scale")));
    }
    assert!(apps["resources"].as_array().unwrap().iter().all(|r| r["name"] != "daemonsets/scale"));
    let checks = [
        ("/apis/batch/v1", "cronjobs", json!(["cj"]), json!(["all"])),
        ("/apis/policy/v1", "poddisruptionbudgets", json!(["pdb"]), Value::Null),
        ("/apis/networking.k8s.io/v1", "ingresses", json!(["ing"]), Value::Null),
        ("/apis/networking.k8s.io/v1", "networkpolicies", json!(["netpol"]), Value::Null),
        ("/apis/rbac.authorization.k8s.io/v1", "clusterrolebindings", Value::Null, Value::Null),
        ("/apis/admissionregistration.k8s.io/v1", "validatingwebhookconfigurations", Value::Null, json!(["api-extensions"])),
    ];
    for (gv, name, short, categories) in checks {
        let (code, list) = json(&dc, "GET", gv, None).await;
        assert_eq!(code, 200, "{gv}");
        let r = entry(&list, name);
        assert_eq!((&r["shortNames"], &r["categories"]), (&short, &categories), "{r}");
    }
    let (_, groups) = json(&dc, "GET", "/apis", None).await;
    let names: Vec<&str> = groups["groups"].as_array().unwrap().iter().filter_map(|g| g["name"].as_str()).collect();
    for g in ["rbac.authorization.k8s.io", "policy", "networking.k8s.io", "discovery.k8s.io", "admissionregistration.k8s.io"] {
        assert!(names.contains(&g), "{g} in {names:?}");
    }
    dc.shutdown().await;
}

#[tokio::test]
async fn new_objects_get_the_defaults_and_generation_the_real_server_gives_them() {
    let dc = DevCluster::start_local().await.unwrap();
    let mut created = Vec::new();
    for case in cases() {
        let (code, obj) = json(&dc, "POST", case.collection, Some(case.object)).await;
        assert_eq!(code, 201, "{obj}");
        created.push(obj);
    }
    let by_kind = |kind: &str| created.iter().find(|o| o["kind"] == kind).unwrap().clone();
    let sts = by_kind("StatefulSet");
    assert_eq!(sts["metadata"]["generation"], 1);
    assert_eq!(sts["spec"]["podManagementPolicy"], "OrderedReady");
    assert_eq!(sts["spec"]["updateStrategy"], json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 0}}));
    assert_eq!(sts["spec"]["persistentVolumeClaimRetentionPolicy"], json!({"whenDeleted": "Retain", "whenScaled": "Retain"}));
    assert_eq!(sts["spec"]["template"]["spec"]["restartPolicy"], "Always");
    assert_eq!(sts["status"], json!({"replicas": 0, "availableReplicas": 0}));
    let ds = by_kind("DaemonSet");
    assert_eq!(ds["metadata"]["annotations"]["deprecated.daemonset.template.generation"], "1");
    assert_eq!(ds["spec"]["updateStrategy"], json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}}));
    let cj = by_kind("CronJob");
    assert_eq!(
        (
            &cj["spec"]["concurrencyPolicy"],
            &cj["spec"]["suspend"],
            &cj["spec"]["successfulJobsHistoryLimit"],
            &cj["spec"]["failedJobsHistoryLimit"]
        ),
        (&json!("Allow"), &json!(false), &json!(3), &json!(1))
    );
    assert_eq!(cj["spec"]["jobTemplate"]["spec"]["template"]["spec"]["dnsPolicy"], "ClusterFirst");
    assert_eq!(by_kind("PodDisruptionBudget")["status"]["disruptionsAllowed"], 0);
    assert_eq!(by_kind("Ingress")["status"], json!({"loadBalancer": {}}));
    assert_eq!(by_kind("NetworkPolicy")["spec"]["policyTypes"], json!(["Ingress"]));
    assert_eq!(by_kind("EndpointSlice")["ports"], json!([{"name": "http", "port": 80, "protocol": "TCP"}]));
    assert_eq!(by_kind("Endpoints")["subsets"][0]["ports"][0]["protocol"], "TCP");
    assert_eq!(by_kind("Node")["status"]["nodeInfo"]["kubeletVersion"], "v1.36.2", "a Node keeps the status it is registered with");
    assert!(by_kind("Node")["metadata"].get("generation").is_none());
    let pv = by_kind("PersistentVolume");
    assert_eq!((&pv["spec"]["persistentVolumeReclaimPolicy"], &pv["spec"]["volumeMode"]), (&json!("Retain"), &json!("Filesystem")));
    assert_eq!(pv["status"]["phase"], "Pending");
    assert!(pv["status"]["lastPhaseTransitionTime"].is_string());
    assert_eq!(by_kind("PersistentVolumeClaim")["status"], json!({"phase": "Pending"}));
    let rb = by_kind("RoleBinding");
    assert_eq!(rb["roleRef"]["apiGroup"], "rbac.authorization.k8s.io");
    assert_eq!(rb["subjects"][0]["apiGroup"], "rbac.authorization.k8s.io");
    let hook = &by_kind("ValidatingWebhookConfiguration")["webhooks"][0];
    assert_eq!(
        (&hook["failurePolicy"], &hook["matchPolicy"], &hook["timeoutSeconds"], &hook["namespaceSelector"], &hook["rules"][0]["scope"]),
        (&json!("Fail"), &json!("Equivalent"), &json!(10), &json!({}), &json!("*"))
    );
    assert_eq!(hook["clientConfig"]["service"]["port"], 443);
    assert_eq!(by_kind("MutatingWebhookConfiguration")["webhooks"][0]["reinvocationPolicy"], "Never");

    // The DaemonSet's template generation follows changes of its template alone.
    let ds_path = "/apis/apps/v1/namespaces/default/daemonsets/agent";
    let template = json!({"spec": {"template": {"spec": {"containers": [{"name": "agent", "image": "busybox:2"}]}}}});
    let a = patch(&dc, ds_path, STRATEGIC, template).await;
    assert_eq!(a.code, 200, "{}", a.body);
    assert_eq!(a.body["metadata"]["annotations"]["deprecated.daemonset.template.generation"], "2");
    assert_eq!(a.body["metadata"]["generation"], 2);
    let a = patch(&dc, ds_path, MERGE, json!({"spec": {"minReadySeconds": 5}})).await;
    assert_eq!(a.body["metadata"]["annotations"]["deprecated.daemonset.template.generation"], "2");
    assert_eq!(a.body["metadata"]["generation"], 3);
    dc.shutdown().await;
}

#[tokio::test]
async fn rbac_bindings_keep_their_role_ref_and_roles_need_verbs() {
    let dc = DevCluster::start_local().await.unwrap();
    let rbs = "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings";
    let rb = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "read"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "reader"}, "subjects": [{"kind": "User", "name": "jane"}]});
    assert_eq!(json(&dc, "POST", rbs, Some(rb)).await.0, 201);
    let a = patch(&dc, &format!("{rbs}/read"), MERGE, json!({"roleRef": {"name": "writer"}})).await;
    assert_eq!(a.code, 422, "{}", a.body);
    assert_eq!(
        a.body["message"],
        "RoleBinding.rbac.authorization.k8s.io \"read\" is invalid: roleRef: Invalid value: rbac.RoleRef{APIGroup:\"rbac.authorization.k8s.io\", Kind:\"Role\", Name:\"writer\"}: cannot change roleRef"
    );
    assert_eq!(a.body["details"]["causes"][0]["field"], "roleRef");
    // Changing the subjects is fine.
    let a = patch(&dc, &format!("{rbs}/read"), MERGE, json!({"subjects": [{"kind": "Group", "name": "devs"}]})).await;
    assert_eq!((a.code, &a.body["subjects"][0]["apiGroup"]), (200, &json!("rbac.authorization.k8s.io")), "{}", a.body);

    let crb = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "wrong"},
        "roleRef": {"kind": "Role", "name": "reader"}});
    let (code, status) = json(&dc, "POST", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", Some(crb)).await;
    assert_eq!(code, 422, "{status}");
    assert_eq!(
        status["message"],
        "ClusterRoleBinding.rbac.authorization.k8s.io \"wrong\" is invalid: roleRef.kind: Unsupported value: \"Role\": supported values: \"ClusterRole\""
    );
    let role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "empty"},
        "rules": [{"apiGroups": [""], "resources": ["pods"]}]});
    let (code, status) = json(&dc, "POST", "/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles", Some(role)).await;
    assert_eq!(code, 422, "{status}");
    assert_eq!(
        status["message"],
        "Role.rbac.authorization.k8s.io \"empty\" is invalid: rules[0].verbs: Required value: verbs must contain at least one value"
    );
    let bad_name = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "a/b"}});
    let (code, status) = json(&dc, "POST", "/apis/rbac.authorization.k8s.io/v1/clusterroles", Some(bad_name)).await;
    assert_eq!(code, 422, "{status}");
    assert_eq!(status["details"]["causes"][0]["message"], "Invalid value: \"a/b\": may not contain '/'");
    dc.shutdown().await;
}

#[tokio::test]
async fn strategic_merge_uses_the_pod_template_keys_and_replaces_atomic_lists() {
    let dc = DevCluster::start_local().await.unwrap();
    let strategic = |path: &'static str, body: Value| patch(&dc, path, STRATEGIC, body);
    let mut sts = cases().remove(0).object;
    sts["spec"]["template"]["spec"]["containers"] = json!([{"name": "web", "image": "nginx:1"}, {"name": "log", "image": "fluent:1"}]);
    assert_eq!(json(&dc, "POST", "/apis/apps/v1/namespaces/default/statefulsets", Some(sts)).await.0, 201);
    let a = strategic(
        "/apis/apps/v1/namespaces/default/statefulsets/web",
        json!({"spec": {"template": {"spec": {"containers": [{"name": "web", "image": "nginx:2"}]}}}}),
    )
    .await;
    let images: Vec<&str> =
        a.body["spec"]["template"]["spec"]["containers"].as_array().unwrap().iter().map(|c| c["image"].as_str().unwrap()).collect();
    assert_eq!(images, ["nginx:2", "fluent:1"], "containers merge by name");

    let role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "r"},
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}, {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]});
    assert_eq!(json(&dc, "POST", "/apis/rbac.authorization.k8s.io/v1/clusterroles", Some(role)).await.0, 201);
    let only = json!([{"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["list"]}]);
    let a = strategic("/apis/rbac.authorization.k8s.io/v1/clusterroles/r", json!({"rules": only})).await;
    assert_eq!(a.body["rules"], only, "rules are atomic");

    let hooks = cases().into_iter().find(|c| c.object["kind"] == "MutatingWebhookConfiguration").unwrap().object;
    assert_eq!(json(&dc, "POST", "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations", Some(hooks)).await.0, 201);
    let a = strategic(
        "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/mutate",
        json!({"webhooks": [{"name": "b.bosun.dev", "timeoutSeconds": 3}]}),
    )
    .await;
    let timeouts: Vec<i64> = a.body["webhooks"].as_array().unwrap().iter().map(|w| w["timeoutSeconds"].as_i64().unwrap()).collect();
    assert_eq!(timeouts, [10, 3], "webhooks merge by name");
    dc.shutdown().await;
}

#[tokio::test]
async fn stateful_sets_and_replica_sets_scale_through_their_scale_subresource() {
    let dc = DevCluster::start_local().await.unwrap();
    for case in cases().into_iter().filter(|c| matches!(c.object["kind"].as_str(), Some("StatefulSet" | "ReplicaSet"))) {
        let (code, obj) = json(&dc, "POST", case.collection, Some(case.object)).await;
        assert_eq!(code, 201, "{obj}");
        let scale = format!("{}/{}/scale", case.collection, obj["metadata"]["name"].as_str().unwrap());
        let (code, got) = json(&dc, "GET", &scale, None).await;
        assert_eq!((code, got["kind"].as_str(), &got["spec"]["replicas"]), (200, Some("Scale"), &obj["spec"]["replicas"]), "{got}");
        let a = patch(&dc, &scale, MERGE, json!({"spec": {"replicas": 5}})).await;
        assert_eq!((a.code, &a.body["spec"]["replicas"]), (200, &json!(5)), "{}", a.body);
    }
    let (code, _) = json(&dc, "GET", "/apis/apps/v1/namespaces/default/daemonsets/none/scale", None).await;
    assert_eq!(code, 404, "DaemonSets have no scale subresource");
    dc.shutdown().await;
}

#[tokio::test]
async fn every_answer_about_core_endpoints_warns_that_they_are_deprecated() {
    let dc = DevCluster::start_local().await.unwrap();
    let want = "299 - \"v1 Endpoints is deprecated in v1.33+; use discovery.k8s.io/v1 EndpointSlice\"";
    let a = send(&dc, "GET", "/api/v1/namespaces/default/endpoints", "application/json", None, None).await;
    assert_eq!((a.code, a.warnings.as_slice()), (200, [want.to_string()].as_slice()));
    let a = send(&dc, "GET", "/api/v1/namespaces/default/endpoints/missing", "application/json", None, None).await;
    assert_eq!((a.code, a.warnings.as_slice()), (404, [want.to_string()].as_slice()));
    let slices = send(&dc, "GET", "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices", "application/json", None, None).await;
    assert!(slices.warnings.is_empty(), "{:?}", slices.warnings);
    assert!(a.content_type.starts_with("application/json"));
    dc.shutdown().await;
}

/// The YAML documents of `deploy/base` in kustomization order, namespaced objects put in the
/// kustomization's namespace (what `kubectl apply -k` sends).
fn deploy_base() -> Vec<Value> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/base");
    let kustomization: Value = serde_yaml::from_str(&std::fs::read_to_string(dir.join("kustomization.yaml")).unwrap()).unwrap();
    let mut out = Vec::new();
    for file in kustomization["resources"].as_array().unwrap() {
        let text = std::fs::read_to_string(dir.join(file.as_str().unwrap())).unwrap();
        for doc in serde_yaml::Deserializer::from_str(&text) {
            let v: Value = serde::Deserialize::deserialize(doc).unwrap();
            if v.is_object() {
                out.push(v);
            }
        }
    }
    assert!(out.iter().any(|o| o["kind"] == "ClusterRole") && out.iter().any(|o| o["kind"] == "ClusterRoleBinding"), "{out:?}");
    out
}

#[tokio::test]
async fn the_deploy_manifests_apply_over_http_with_kube_rs() {
    use kube::api::{Api, DynamicObject, Patch, PatchParams};
    use kube::discovery::{Discovery, Scope};

    let dc = DevCluster::start_local().await.unwrap();
    let client = dc.client();
    let discovery = Discovery::new(client.clone()).run().await.unwrap();
    let namespace = "bosun-system";
    for doc in deploy_base() {
        let (group, version) = doc["apiVersion"].as_str().unwrap().rsplit_once('/').unwrap_or(("", doc["apiVersion"].as_str().unwrap()));
        let gvk = kube::api::GroupVersionKind::gvk(group, version, doc["kind"].as_str().unwrap());
        let (resource, caps) = discovery.resolve_gvk(&gvk).unwrap_or_else(|| panic!("{gvk:?} is served"));
        let api: Api<DynamicObject> = match caps.scope {
            Scope::Namespaced => Api::namespaced_with(client.clone(), namespace, &resource),
            Scope::Cluster => Api::all_with(client.clone(), &resource),
        };
        let name = doc["metadata"]["name"].as_str().unwrap();
        let params = PatchParams::apply("bosun-test").force();
        let applied = api.patch(name, &params, &Patch::Apply(&doc)).await.unwrap_or_else(|e| panic!("apply {gvk:?} {name}: {e}"));
        assert!(applied.metadata.uid.is_some());
        // a second apply of the same document changes nothing
        let again = api.patch(name, &params, &Patch::Apply(&doc)).await.unwrap();
        assert_eq!(again.metadata.resource_version, applied.metadata.resource_version, "{gvk:?} {name}");
    }
    let (_, crb) = json(&dc, "GET", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/bosun", None).await;
    assert_eq!(crb["subjects"][0], json!({"kind": "ServiceAccount", "name": "bosun", "namespace": "bosun-system"}));
    let (_, cr) = json(&dc, "GET", "/apis/rbac.authorization.k8s.io/v1/clusterroles/bosun", None).await;
    let rules = cr["rules"].as_array().unwrap();
    assert!(rules.iter().any(|r| r["resources"] == json!(["kopfexamples/status"]) && r["verbs"] == json!(["patch"])), "{cr}");
    dc.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_applies_the_deploy_kustomization_and_prints_the_new_kinds() {
    let base = Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/base");
    with_kubectl(move |kc| {
        let run = |args: &[&str], stdin: Option<&str>| kubectl_ok(kc, args, stdin);
        let applied = run(&["apply", "-k", base.to_str().unwrap()], None);
        for line in [
            "namespace/bosun-system created",
            "serviceaccount/bosun created",
            "clusterrole.rbac.authorization.k8s.io/bosun created",
            "clusterrolebinding.rbac.authorization.k8s.io/bosun created",
            "deployment.apps/bosun created",
        ] {
            assert!(applied.contains(line), "{line} in {applied}");
        }
        let again = run(&["apply", "-k", base.to_str().unwrap()], None);
        assert!(again.contains("clusterrolebinding.rbac.authorization.k8s.io/bosun unchanged"), "{again}");
        let bindings = run(&["get", "clusterrolebinding", "bosun", "-o", "wide"], None);
        let lines: Vec<Vec<&str>> = bindings.lines().map(|l| l.split_whitespace().collect()).collect();
        assert_eq!(lines[0], ["NAME", "ROLE", "AGE", "USERS", "GROUPS", "SERVICEACCOUNTS"], "{bindings}");
        assert_eq!((lines[1][0], lines[1][1], lines[1][3]), ("bosun", "ClusterRole/bosun", "bosun-system/bosun"), "{bindings}");
        let roles = run(&["get", "clusterroles"], None);
        assert!(roles.starts_with("NAME") && roles.contains("CREATED AT") && roles.contains("\nbosun "), "{roles}");

        let sts = r#"{"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db", "namespace": "bosun-system"},
            "spec": {"replicas": 2, "serviceName": "db", "selector": {"matchLabels": {"app": "db"}},
            "template": {"metadata": {"labels": {"app": "db"}}, "spec": {"containers": [{"name": "db", "image": "postgres:17"}]}}}}"#;
        run(&["apply", "-f", "-"], Some(sts));
        let table = run(&["get", "sts", "-n", "bosun-system"], None);
        let lines: Vec<Vec<&str>> = table.lines().map(|l| l.split_whitespace().collect()).collect();
        assert_eq!((lines[0].as_slice(), &lines[1][..2]), (["NAME", "READY", "AGE"].as_slice(), ["db", "0/2"].as_slice()), "{table}");
        run(&["scale", "sts", "db", "-n", "bosun-system", "--replicas=4"], None);
        assert_eq!(run(&["get", "statefulset", "db", "-n", "bosun-system", "-o", "jsonpath={.spec.replicas}"], None).trim(), "4");
        run(&["delete", "clusterrolebinding", "bosun"], None);
        let (ok, out) = kubectl(kc, &["get", "clusterrolebinding", "bosun"], None);
        assert!(!ok && out.contains("NotFound"), "{out}");
    })
    .await;
}

const AGGREGATED: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";

const WIDGETS: &str = r#"{"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.example.com"},
    "spec": {"group": "example.com", "scope": "Namespaced",
        "names": {"kind": "Widget", "plural": "widgets", "singular": "widget", "shortNames": ["wd"], "categories": ["all"]},
        "versions": [
            {"name": "v1beta1", "served": true, "storage": false, "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}},
            {"name": "v1", "served": true, "storage": true, "subresources": {"status": {}},
             "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}}"#;

/// Names of a legacy resource list's entries, subresources included (`deployments/scale`).
fn legacy_names(list: &Value) -> Vec<String> {
    let mut names: Vec<String> = list["resources"].as_array().unwrap().iter().map(|r| r["name"].as_str().unwrap().to_string()).collect();
    names.sort();
    names
}

/// The same names read from an aggregated version entry.
fn aggregated_names(version: &Value) -> Vec<String> {
    let mut names = Vec::new();
    for r in version["resources"].as_array().unwrap() {
        let plural = r["resource"].as_str().unwrap();
        names.push(plural.to_string());
        for sub in r["subresources"].as_array().into_iter().flatten() {
            names.push(format!("{plural}/{}", sub["subresource"].as_str().unwrap()));
        }
    }
    names.sort();
    names
}

#[tokio::test]
async fn aggregated_discovery_answers_what_the_legacy_lists_answer_in_one_document() {
    let dc = DevCluster::start_local().await.unwrap();
    assert_eq!(
        json(&dc, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", Some(serde_json::from_str(WIDGETS).unwrap())).await.0,
        201
    );

    let apis = send(&dc, "GET", "/apis", AGGREGATED, None, None).await;
    assert_eq!(apis.code, 200);
    assert_eq!(apis.content_type, "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList");
    assert_eq!(
        (apis.body["kind"].as_str(), apis.body["apiVersion"].as_str()),
        (Some("APIGroupDiscoveryList"), Some("apidiscovery.k8s.io/v2"))
    );
    let groups = apis.body["items"].as_array().unwrap();
    let (_, legacy_groups) = json(&dc, "GET", "/apis", None).await;
    let names = |gs: &[Value], key: &str| gs.iter().map(|g| g.pointer(key).unwrap().clone()).collect::<Vec<_>>();
    assert_eq!(names(groups, "/metadata/name"), names(legacy_groups["groups"].as_array().unwrap(), "/name"));
    for g in groups {
        let name = g["metadata"]["name"].as_str().unwrap();
        let versions: Vec<&str> = g["versions"].as_array().unwrap().iter().map(|v| v["version"].as_str().unwrap()).collect();
        let (_, legacy) = json(&dc, "GET", &format!("/apis/{name}"), None).await;
        assert_eq!(versions[0], legacy["preferredVersion"]["version"], "{name}: the preferred version first");
        for v in g["versions"].as_array().unwrap() {
            assert_eq!(v["freshness"], "Current");
            let (_, list) = json(&dc, "GET", &format!("/apis/{name}/{}", v["version"].as_str().unwrap()), None).await;
            assert_eq!(aggregated_names(v), legacy_names(&list), "{name}/{}", v["version"]);
        }
    }
    let group = |name: &str| groups.iter().find(|g| g["metadata"]["name"] == name).unwrap().clone();
    let apps = group("apps");
    let deployments = apps["versions"][0]["resources"].as_array().unwrap().iter().find(|r| r["resource"] == "deployments").unwrap().clone();
    assert_eq!(
        deployments,
        json!({"resource": "deployments", "responseKind": {"group": "", "version": "", "kind": "Deployment"}, "scope": "Namespaced",
            "singularResource": "deployment", "verbs": ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"],
            "shortNames": ["deploy"], "categories": ["all"],
            "subresources": [
                {"subresource": "scale", "responseKind": {"group": "autoscaling", "version": "v1", "kind": "Scale"}, "verbs": ["get", "patch", "update"]},
                {"subresource": "status", "responseKind": {"group": "", "version": "", "kind": "Deployment"}, "verbs": ["get", "patch", "update"]}]})
    );
    let widgets = group("example.com");
    let versions: Vec<&str> = widgets["versions"].as_array().unwrap().iter().map(|v| v["version"].as_str().unwrap()).collect();
    assert_eq!(versions, ["v1", "v1beta1"]);
    let widget = &widgets["versions"][0]["resources"][0];
    assert_eq!(widget["responseKind"], json!({"group": "example.com", "version": "v1", "kind": "Widget"}));
    assert_eq!((&widget["shortNames"], &widget["categories"], &widget["scope"]), (&json!(["wd"]), &json!(["all"]), &json!("Namespaced")));
    assert_eq!(widget["subresources"][0]["subresource"], "status");
    assert!(widgets["versions"][1]["resources"][0].get("subresources").is_none());

    let core = send(&dc, "GET", "/api", AGGREGATED, None, None).await;
    assert_eq!(core.content_type, "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList");
    let items = core.body["items"].as_array().unwrap();
    assert_eq!(items.len(), 1);
    assert!(items[0]["metadata"].get("name").is_none(), "the core group has no name");
    let (_, legacy_core) = json(&dc, "GET", "/api/v1", None).await;
    assert_eq!(aggregated_names(&items[0]["versions"][0]), legacy_names(&legacy_core));
    let namespaces =
        items[0]["versions"][0]["resources"].as_array().unwrap().iter().find(|r| r["resource"] == "namespaces").unwrap().clone();
    assert_eq!(namespaces["scope"], "Cluster");
    assert_eq!(
        namespaces["subresources"][0],
        json!({"subresource": "finalize", "responseKind": {"group": "", "version": "", "kind": "Namespace"}, "verbs": ["update"]})
    );
    dc.shutdown().await;
}

#[tokio::test]
async fn v2beta1_alone_gets_the_same_document_and_no_aggregated_accept_the_legacy_one() {
    let dc = DevCluster::start_local().await.unwrap();
    let v2 = send(&dc, "GET", "/apis", AGGREGATED, None, None).await;
    let beta = send(&dc, "GET", "/apis", "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList", None, None).await;
    assert_eq!(beta.content_type, "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList");
    assert_eq!(beta.body["apiVersion"], "apidiscovery.k8s.io/v2beta1");
    assert_eq!(beta.body["items"], v2.body["items"]);
    for (path, kind) in [("/apis", "APIGroupList"), ("/api", "APIVersions")] {
        let legacy = send(&dc, "GET", path, "application/json", None, None).await;
        assert_eq!((legacy.content_type.as_str(), legacy.body["kind"].as_str()), ("application/json", Some(kind)), "{path}");
        let table = send(&dc, "GET", path, TABLE, None, None).await;
        assert_eq!(table.body["kind"], kind, "{path}: a conversion discovery cannot do falls back to the legacy answer");
    }
    dc.shutdown().await;
}

#[tokio::test]
async fn kube_rs_aggregated_discovery_finds_what_its_legacy_discovery_finds() {
    use kube::discovery::{Discovery, verbs};

    let dc = DevCluster::start_local().await.unwrap();
    assert_eq!(
        json(&dc, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", Some(serde_json::from_str(WIDGETS).unwrap())).await.0,
        201
    );
    let client = dc.client();
    let aggregated = Discovery::new(client.clone()).run_aggregated().await.unwrap();
    let legacy = Discovery::new(client).run().await.unwrap();
    let summary = |d: &Discovery| {
        let mut out = Vec::new();
        for g in d.groups() {
            for (ar, caps) in g.recommended_resources() {
                let mut subs: Vec<String> = caps.subresources.iter().map(|(s, _)| s.plural.clone()).collect();
                subs.sort();
                out.push(format!("{} {} {:?} {:?} {subs:?}", ar.api_version, ar.plural, caps.scope, caps.operations));
            }
        }
        out.sort();
        out
    };
    assert_eq!(summary(&aggregated), summary(&legacy));
    let gvk = kube::api::GroupVersionKind::gvk("apps", "v1", "StatefulSet");
    let (ar, caps) = aggregated.resolve_gvk(&gvk).expect("StatefulSets in aggregated discovery");
    assert_eq!(ar.plural, "statefulsets");
    assert!(caps.supports_operation(verbs::PATCH));
    let subs: Vec<&str> = caps.subresources.iter().map(|(s, _)| s.plural.as_str()).collect();
    assert_eq!(subs, ["scale", "status"]);
    assert!(aggregated.has_group("example.com"));
    dc.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_api_resources_reads_aggregated_discovery_alone() {
    with_kubectl(|kc| {
        let cache = kc.with_file_name("cache");
        let out = kubectl_ok(kc, &["--cache-dir", cache.to_str().unwrap(), "-v=6", "api-resources", "-o", "wide"], None);
        let row = |name: &str| -> Vec<&str> {
            out.lines()
                .map(|l| l.split_whitespace().collect::<Vec<_>>())
                .find(|w| w.first() == Some(&name))
                .unwrap_or_else(|| panic!("{name} in {out}"))
        };
        assert_eq!(&row("statefulsets")[..5], ["statefulsets", "sts", "apps/v1", "true", "StatefulSet"]);
        assert_eq!(
            &row("clusterrolebindings")[..4],
            ["clusterrolebindings", "rbac.authorization.k8s.io/v1", "false", "ClusterRoleBinding"]
        );
        assert_eq!(row("nodes")[5], "create,delete,deletecollection,get,list,patch,update,watch", "{out}");
        assert_eq!(row("deployments")[6], "all", "{out}");
        let requests: Vec<&str> = out.lines().filter(|l| l.contains("GET http")).collect();
        assert!(requests.iter().any(|l| l.contains("/apis?")), "{requests:?}");
        assert!(!requests.iter().any(|l| l.contains("/apis/apps/v1")), "no per-group-version requests: {requests:?}");
    })
    .await;
}

/// The Endpoints and EndpointSlice `default/kubernetes` must name `port` on loopback.
async fn assert_kubernetes_endpoints(dc: &DevCluster, port: u16) -> (Value, Value) {
    let a = send(dc, "GET", "/api/v1/namespaces/default/endpoints/kubernetes", "application/json", None, None).await;
    assert_eq!(a.code, 200, "{}", a.body);
    assert_eq!(a.body["metadata"]["labels"], json!({"endpointslice.kubernetes.io/skip-mirror": "true"}));
    assert_eq!(
        a.body["subsets"],
        json!([{"addresses": [{"ip": "127.0.0.1"}], "ports": [{"name": "https", "port": port, "protocol": "TCP"}]}])
    );
    let (code, slice) = json(dc, "GET", "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices/kubernetes", None).await;
    assert_eq!(code, 200, "{slice}");
    assert_eq!(slice["metadata"]["labels"], json!({"kubernetes.io/service-name": "kubernetes"}));
    assert_eq!(slice["addressType"], "IPv4");
    assert_eq!(slice["endpoints"], json!([{"addresses": ["127.0.0.1"], "conditions": {"ready": true}}]));
    assert_eq!(slice["ports"], json!([{"name": "https", "port": port, "protocol": "TCP"}]));
    (a.body, slice)
}

fn port_of(dc: &DevCluster) -> u16 {
    dc.url().rsplit(':').next().unwrap().parse().unwrap()
}

#[tokio::test]
async fn the_kubernetes_service_has_endpoints_and_an_endpoint_slice_naming_the_server() {
    let dc = DevCluster::start_local().await.unwrap();
    assert_kubernetes_endpoints(&dc, port_of(&dc)).await;
    let table = send(&dc, "GET", "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices", TABLE, None, None).await;
    let cells = &table.body["rows"][0]["cells"];
    assert_eq!(
        (&cells[0], &cells[1], &cells[2], &cells[3]),
        (&json!("kubernetes"), &json!("IPv4"), &json!(port_of(&dc).to_string()), &json!("127.0.0.1"))
    );
    dc.shutdown().await;
}

#[tokio::test]
async fn a_restart_on_another_port_updates_the_kubernetes_endpoints_in_the_data_dir() {
    let dir = tempfile::tempdir().unwrap();
    let start = || async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let config = bosun_devcluster::Config { data_dir: Some(dir.path().to_path_buf()), ..Default::default() };
        DevCluster::start(listener, config).await.unwrap()
    };
    let first = start().await;
    let (endpoints, slice) = assert_kubernetes_endpoints(&first, port_of(&first)).await;
    first.shutdown().await;
    let second = start().await;
    let (moved, moved_slice) = assert_kubernetes_endpoints(&second, port_of(&second)).await;
    assert_eq!(moved["metadata"]["uid"], endpoints["metadata"]["uid"], "updated, not recreated");
    assert_eq!(moved_slice["metadata"]["uid"], slice["metadata"]["uid"]);
    second.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_create_commands_for_the_new_kinds_send_protobuf_that_is_understood() {
    with_kubectl(move |kc| {
        let run = |args: &[&str]| kubectl_ok(kc, args, None);
        let get = |what: &[&str]| -> Value { serde_json::from_str(&run(&[what, &["-o", "json"]].concat())).unwrap() };
        run(&["create", "role", "reader", "--verb=get,list", "--resource=pods,deployments.apps"]);
        let role = get(&["get", "role", "reader"]);
        assert_eq!(
            role["rules"],
            json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]},
            {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get", "list"]}])
        );
        run(&["create", "clusterrole", "agg", "--aggregation-rule=team=a"]);
        assert_eq!(
            get(&["get", "clusterrole", "agg"])["aggregationRule"],
            json!({"clusterRoleSelectors": [{"matchLabels": {"team": "a"}}]})
        );
        run(&["create", "rolebinding", "read", "--role=reader", "--serviceaccount=default:robot", "--user=jane"]);
        let rb = get(&["get", "rolebinding", "read"]);
        assert_eq!(rb["roleRef"], json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "reader"}));
        assert_eq!(
            rb["subjects"],
            json!([{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "jane"},
            {"kind": "ServiceAccount", "name": "robot", "namespace": "default"}])
        );
        run(&["create", "clusterrolebinding", "view-all", "--clusterrole=view", "--group=devs"]);
        assert_eq!(get(&["get", "clusterrolebinding", "view-all"])["roleRef"]["name"], "view");
        run(&["create", "cronjob", "tick", "--image=busybox", "--schedule=*/5 * * * *"]);
        let cj = get(&["get", "cronjob", "tick"]);
        assert_eq!(cj["spec"]["schedule"], "*/5 * * * *");
        assert_eq!(cj["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["image"], "busybox");
        run(&["create", "poddisruptionbudget", "web", "--selector=app=web", "--min-available=0"]);
        let pdb = get(&["get", "pdb", "web"]);
        assert_eq!((&pdb["spec"]["minAvailable"], &pdb["spec"]["selector"]), (&json!(0), &json!({"matchLabels": {"app": "web"}})));
        run(&["create", "ingress", "web", "--class=nginx", "--rule=a.com/api*=web:80,tls=web-tls"]);
        let ing = get(&["get", "ingress", "web"]);
        assert_eq!(ing["spec"]["ingressClassName"], "nginx");
        assert_eq!(ing["spec"]["tls"], json!([{"hosts": ["a.com"], "secretName": "web-tls"}]));
        assert_eq!(
            ing["spec"]["rules"],
            json!([{"host": "a.com", "http": {"paths": [{"path": "/api", "pathType": "Prefix",
                "backend": {"service": {"name": "web", "port": {"number": 80}}}}]}}])
        );
    })
    .await;
}
