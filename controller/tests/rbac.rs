//! RBAC from the registry, enforced: `bosun rbac` prints for Kopf's example 01 with the
//! Deployment's flags exactly what `deploy/base/rbac.yaml` holds; `kubectl apply -k
//! deploy/base` installs it on the dev cluster; the controller then runs as the service account
//! `bosun-system/bosun` — whose requests the dev cluster authorizes as a real API server does —
//! with the roles printed for a server with more needs (a delete handler, owned ConfigMaps,
//! leader election, peering), handles its objects and is never forbidden anything; with the
//! `/status` rule taken out, its status writes are forbidden.

mod support;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bosun_controller::cluster::Api as _;
use bosun_sdk::{Cause, HandlerError, Operator};
use serde_json::{Value, json};
use support::{Bosun, get, kubectl, samples};

const KEX: &str = "kopf.dev/v1/kopfexamples";
/// The Deployment's flags (deploy/base/deployment.yaml; its POD_NAMESPACE is bosun-system).
const DEPLOY_FLAGS: [&str; 4] = ["-A", "--leader-election", "--lease-namespace", "bosun-system"];

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Runs `bosun ARGS` to its end; its stdout, or a panic with its stderr.
async fn bosun_output(dir: &Path, args: &[&str]) -> String {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_bosun")).args(args).current_dir(dir).output().await.unwrap();
    assert!(out.status.success(), "bosun {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// Runs kubectl with `stdin`; its stdout, or a panic with its stderr.
fn kubectl_raw(kubeconfig: &str, args: &[&str], stdin: Option<&str>) -> String {
    use std::io::Write as _;
    let mut child = std::process::Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("kubectl runs");
    child.stdin.take().unwrap().write_all(stdin.unwrap_or("").as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "kubectl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// A handler server with more needs than example 01: a delete handler (a finalizer), an owned
/// ConfigMap per object (declared with `owns`); its address.
async fn server_with_children() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = format!("http://{}", listener.local_addr().unwrap());
    let op = Operator::new()
        .owns(KEX, ["configmaps"])
        .on_create(KEX, |cause: Cause| async move {
            cause.adopt(json!({"apiVersion": "v1", "kind": "ConfigMap", "data": {"from": cause.name()}}));
            Ok::<_, HandlerError>(json!({"done": true}))
        })
        .id("create_fn")
        .on_delete(KEX, |_: Cause| async { Ok::<_, HandlerError>(Value::Null) })
        .id("delete_fn");
    tokio::spawn(op.serve_with_listener(listener, std::future::pending()));
    addr
}

/// `GET path` with a bearer token over plain HTTP/1.0 to `url` (`http://host:port`): the
/// status code and the body. (kubectl sends no token over plain HTTP.)
async fn get_as(url: &str, token: &str, path: &str) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let host = url.trim_start_matches("http://").trim_end_matches('/');
    let mut conn = tokio::net::TcpStream::connect(host).await.unwrap();
    let request = format!("GET {path} HTTP/1.0\r\nHost: {host}\r\nAuthorization: Bearer {token}\r\n\r\n");
    conn.write_all(request.as_bytes()).await.unwrap();
    let mut raw = String::new();
    conn.read_to_string(&mut raw).await.unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
    (head.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0), body.to_string())
}

/// The metrics endpoint's address from bosun's log.
async fn metrics_addr(bosun: &mut Bosun) -> String {
    let line = bosun.wait_line("Serving metrics at http://").await;
    line.split("http://").nth(1).unwrap().split('/').next().unwrap().to_string()
}

/// Every API request sample of a scrape that answered `code`.
async fn requests_answered(addr: &str, code: &str) -> Vec<String> {
    let (status, text) = get(addr, "/metrics").await;
    assert_eq!(status, 200);
    samples(&text).into_keys().filter(|k| k.starts_with("bosun_api_requests_total{") && k.contains(&format!("code=\"{code}\""))).collect()
}

fn kopf_example(name: &str) -> Value {
    json!({"apiVersion": "kopf.dev/v1", "kind": "KopfExample", "metadata": {"name": name}, "spec": {}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_printed_roles_are_deploys_and_all_the_controller_needs_run_as_its_service_account() {
    let dir = tempfile::tempdir().unwrap();
    let (cluster, api, admin) = support::dev_cluster(dir.path(), &[repo().join("examples/crd.yaml")]).await;

    // Example 01's registry (create_fn on kopfexamples) with the Deployment's flags: exactly
    // deploy/base/rbac.yaml, which `kubectl apply -k` then installs.
    let example01 = support::succeeding_server().await;
    let mut args = vec!["rbac", "--kubeconfig", &admin, "--handler", &example01];
    args.extend(DEPLOY_FLAGS);
    let printed = bosun_output(dir.path(), &args).await;
    let deployed = std::fs::read_to_string(repo().join("deploy/base/rbac.yaml")).unwrap();
    assert_eq!(
        printed,
        deployed,
        "deploy/base/rbac.yaml is what `bosun rbac --handler ADDR {}` prints for example 01: regenerate it",
        DEPLOY_FLAGS.join(" ")
    );
    let applied = kubectl_raw(&admin, &["apply", "-k", repo().join("deploy/base").to_str().unwrap()], None);
    for made in ["namespace/bosun-system", "serviceaccount/bosun", "clusterrole.rbac.authorization.k8s.io/bosun", "deployment.apps/bosun"] {
        assert!(applied.contains(&format!("{made} created")), "kubectl apply -k deploy/base printed:\n{applied}");
    }
    let role = kubectl(&admin, &["get", "clusterrole", "bosun"]);
    assert!(role["rules"].as_array().is_some_and(|r| r.iter().any(|r| r["resources"] == json!(["kopfexamples/status"]))), "{role}");

    // The controller as the service account: a token from the API server, a kubeconfig with it.
    let token = kubectl_raw(&admin, &["create", "token", "bosun", "-n", "bosun-system"], None).trim().to_string();
    let account = dir.path().join("account.kubeconfig");
    let config = json!({
        "apiVersion": "v1", "kind": "Config", "current-context": "sa",
        "clusters": [{"name": "dev", "cluster": {"server": cluster.url()}}],
        "users": [{"name": "sa", "user": {"token": token}}],
        "contexts": [{"name": "sa", "context": {"cluster": "dev", "user": "sa"}}],
    });
    std::fs::write(&account, serde_json::to_string(&config).unwrap()).unwrap();
    let account = account.display().to_string();
    let (code, body) = get_as(&cluster.url(), &token, "/api/v1/namespaces/default/pods").await;
    assert_eq!(code, 403, "pods are none of the controller's business: {body}");
    let (code, _) = get_as(&cluster.url(), &token, "/api").await;
    assert_eq!(code, 200, "discovery is open to every account");

    // A server with more needs: its printed roles (same names) replace deploy's; with them the
    // controller handles, adopts, finalizes and deletes, and is never forbidden a request.
    let children = server_with_children().await;
    let mut args = vec!["rbac", "--kubeconfig", &admin, "--handler", &children];
    args.extend(DEPLOY_FLAGS);
    let printed = bosun_output(dir.path(), &args).await;
    let docs: Vec<Value> = printed.split("---\n").filter(|d| d.contains("kind:")).map(|d| serde_yaml::from_str(d).unwrap()).collect();
    let cluster_role = docs.iter().find(|d| d["kind"] == "ClusterRole").unwrap();
    let configmaps = json!({"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "create", "patch"]});
    assert!(cluster_role["rules"].as_array().unwrap().contains(&configmaps), "owned ConfigMaps: {cluster_role}");
    kubectl_raw(&admin, &["apply", "-f", "-"], Some(&printed));

    let mut args = vec!["run", "--kubeconfig", &account, "--handler", &children, "--metrics-listen", "127.0.0.1:0"];
    args.extend(DEPLOY_FLAGS);
    let mut bosun = Bosun::start(dir.path(), &args);
    let metrics = metrics_addr(&mut bosun).await;
    api.create("/apis/kopf.dev/v1/namespaces/default/kopfexamples", &kopf_example("granted")).await.unwrap();
    bosun.wait_line("[default/granted] Handler 'create_fn' succeeded.").await;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let all = kubectl(&admin, &["get", "configmaps", "-n", "default"]);
        if all["items"].as_array().unwrap().iter().any(|c| c["metadata"]["ownerReferences"][0]["name"] == "granted") {
            break;
        }
        assert!(Instant::now() < deadline, "no ConfigMap owned by `granted` within 30 s: {all}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    api.request(http::Method::DELETE, "/apis/kopf.dev/v1/namespaces/default/kopfexamples/granted", None, None).await.unwrap();
    bosun.wait_line("[default/granted] Handler 'delete_fn' succeeded.").await;
    let deadline = Instant::now() + Duration::from_secs(30);
    while api.get("/apis/kopf.dev/v1/namespaces/default/kopfexamples/granted").await.is_ok() {
        assert!(Instant::now() < deadline, "the finalizer was not released within 30 s");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let denied = requests_answered(&metrics, "403").await;
    assert!(denied.is_empty(), "requests forbidden to the controller: {denied:?}\n{}", bosun.seen.join("\n"));
    assert!(!requests_answered(&metrics, "200").await.is_empty(), "the controller's requests were counted");
    assert!(bosun.interrupt().await.success());

    // Without the /status rule, the results cannot be written: the dev cluster says why, as a
    // real API server would.
    let mut without = cluster_role.clone();
    without["rules"].as_array_mut().unwrap().retain(|r| r["resources"] != json!(["kopfexamples/status"]));
    kubectl_raw(&admin, &["apply", "-f", "-"], Some(&serde_json::to_string(&without).unwrap()));
    let mut bosun = Bosun::start(dir.path(), &args);
    let metrics = metrics_addr(&mut bosun).await;
    api.create("/apis/kopf.dev/v1/namespaces/default/kopfexamples", &kopf_example("denied")).await.unwrap();
    bosun
        .wait_line(r#"is forbidden: User "system:serviceaccount:bosun-system:bosun" cannot patch resource "kopfexamples/status" in API group "kopf.dev" in the namespace "default""#)
        .await;
    // Said once, in RBAC's words, with what prints the rule.
    let said = r#"Forbidden: the controller's account may not patch "kopfexamples/status" in API group "kopf.dev" in namespace "default"; `bosun rbac` with this run's flags and handler servers prints it."#;
    bosun.wait_line(said).await;
    let denied = requests_answered(&metrics, "403").await;
    assert!(denied.iter().any(|k| k.contains(r#"verb="patch""#)), "the status patch counted as forbidden: {denied:?}");
    assert_eq!(bosun.count("Forbidden: the controller's account may not"), 1, "{}", bosun.seen.join("\n"));
    assert!(bosun.interrupt().await.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bosun_rbac_prints_the_same_roles_offline_and_says_whom_they_bind() {
    let dir = tempfile::tempdir().unwrap();
    let example01 = support::succeeding_server().await;
    let crd = repo().join("examples/crd.yaml");
    let deployed = std::fs::read_to_string(repo().join("deploy/base/rbac.yaml")).unwrap();
    // No kubeconfig, no in-cluster account: offline by itself, and says so.
    let mut args = vec!["rbac", "--apply", crd.to_str().unwrap(), "--handler", &example01];
    args.extend(DEPLOY_FLAGS);
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_bosun"))
        .args(&args)
        .current_dir(dir.path())
        .env_remove("KUBECONFIG")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env("HOME", dir.path())
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("resolving resources offline"), "{stderr}");
    assert!(stderr.contains("the bindings are for the service account bosun-system/bosun"), "{stderr}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), deployed, "offline, the same roles as deploy/base/rbac.yaml");
    assert!(deployed.contains("# Bound to the service account bosun-system/bosun"), "the YAML says whom it binds");

    // --offline with another account: the bindings name it; without the CRD, a clear error.
    let printed = bosun_output(
        dir.path(),
        &["rbac", "--offline", "--apply", crd.to_str().unwrap(), "--handler", &example01, "--service-account", "ops/op"],
    )
    .await;
    assert!(printed.contains("# Bound to the service account ops/op"), "{printed}");
    let binding = printed.split("---\n").find(|d| d.contains("kind: ClusterRoleBinding")).expect("a binding");
    let binding: Value = serde_yaml::from_str(binding).unwrap();
    assert_eq!(binding["subjects"], json!([{"kind": "ServiceAccount", "name": "op", "namespace": "ops"}]), "{binding}");
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_bosun"))
        .args(["rbac", "--offline", "--handler", &example01])
        .current_dir(dir.path())
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("kopfexamples`: apply its CRD first (offline: --apply CRD.yaml)"), "{stderr}");
}
