//! RBAC over real HTTP: a request with a service account token the dev cluster issued may do
//! what the stored Roles, ClusterRoles and bindings grant that account, and nothing more; a
//! denial is the real server's 403 `Status`, byte for byte. The admin (the cluster's token, or
//! no token when none is required) may do anything, and may act as someone else with
//! `Impersonate-*` headers (`kubectl --as`). The kubectl test fails under CI and is skipped
//! elsewhere when `kubectl` is missing.

#[path = "support/kubectl.rs"]
mod kubectl_support;

use bosun_devcluster::{Config, DevCluster};
use http_body_util::BodyExt;
use kubectl_support::{kubectl, kubectl_ok, with_kubectl};
use serde_json::{Value, json};

/// The admin's token of the clusters these tests start.
const ADMIN: &str = "admin-secret";

/// What the tests' service account is called by RBAC.
const ROBOT: &str = "system:serviceaccount:default:robot";

async fn start(token: Option<&str>) -> DevCluster {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    DevCluster::start(listener, Config { token: token.map(String::from), ..Default::default() }).await.unwrap()
}

/// Sends one request with `Authorization: Bearer TOKEN` (none without a token) and `headers`;
/// the status and the body. A PATCH is a merge patch, anything else with a body JSON.
async fn send(
    dc: &DevCluster,
    token: Option<&str>,
    method: &str,
    path: &str,
    body: Option<Value>,
    headers: &[(&str, &str)],
) -> (u16, String) {
    let mut config = kube::Config::new(dc.url().parse().unwrap());
    config.default_retry = false;
    let client = kube::Client::try_from(config).unwrap();
    let content_type = if method == "PATCH" { "application/merge-patch+json" } else { "application/json" };
    let mut req =
        http::Request::builder().method(method).uri(path).header("accept", "application/json").header("content-type", content_type);
    if let Some(t) = token {
        req = req.header("authorization", format!("Bearer {t}"));
    }
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let body = body.map(|b| serde_json::to_vec(&b).unwrap()).unwrap_or_default();
    let resp = client.send(req.body(body).unwrap().map(Into::into)).await.unwrap();
    let code = resp.status().as_u16();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    (code, String::from_utf8_lossy(&bytes).into_owned())
}

/// `send` as the admin, which must succeed; the answer.
async fn admin(dc: &DevCluster, method: &str, path: &str, body: Value) -> Value {
    let (code, text) = send(dc, Some(ADMIN), method, path, Some(body), &[]).await;
    assert!((200..300).contains(&code), "{method} {path}: {code} {text}");
    serde_json::from_str(&text).unwrap()
}

/// The real server's 403 for `message`, byte for byte; `details` as JSON text.
fn forbidden(message: &str, details: &str) -> String {
    let message = serde_json::to_string(message).unwrap();
    format!(
        r#"{{"kind":"Status","apiVersion":"v1","metadata":{{}},"status":"Failure","message":{message},"reason":"Forbidden","details":{details},"code":403}}"#
    )
}

/// Creates the ServiceAccount `default/robot` and the ConfigMaps `default/settings` and
/// `kube-system/other`; the token `serviceaccounts/robot/token` answers.
async fn robot(dc: &DevCluster) -> String {
    admin(dc, "POST", "/api/v1/namespaces/default/serviceaccounts", json!({"metadata": {"name": "robot"}})).await;
    for (ns, name) in [("default", "settings"), ("kube-system", "other")] {
        let cm = json!({"metadata": {"name": name}, "data": {"a": "1"}});
        admin(dc, "POST", &format!("/api/v1/namespaces/{ns}/configmaps"), cm).await;
    }
    let request = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}});
    let answer = admin(dc, "POST", "/api/v1/namespaces/default/serviceaccounts/robot/token", request).await;
    answer["status"]["token"].as_str().unwrap().to_string()
}

/// A Role (or ClusterRole, without a namespace) with `rules`, bound to the robot by a RoleBinding
/// (ClusterRoleBinding) of the same name.
async fn grant(dc: &DevCluster, namespace: Option<&str>, name: &str, rules: Value) {
    let rbac = "/apis/rbac.authorization.k8s.io/v1";
    let (scope, kind) = match namespace {
        Some(ns) => (format!("{rbac}/namespaces/{ns}"), "Role"),
        None => (rbac.to_string(), "ClusterRole"),
    };
    admin(dc, "POST", &format!("{scope}/{}s", kind.to_lowercase()), json!({"metadata": {"name": name}, "rules": rules})).await;
    let binding = json!({"metadata": {"name": name}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": "robot", "namespace": "default"}]});
    admin(dc, "POST", &format!("{scope}/{}bindings", kind.to_lowercase()), binding).await;
}

#[tokio::test]
async fn a_service_account_may_do_what_its_bindings_grant_and_is_refused_the_rest_as_the_real_server_refuses_it() {
    let dc = start(Some(ADMIN)).await;
    let token = robot(&dc).await;
    let robot = Some(token.as_str());
    let configmaps = "/api/v1/namespaces/default/configmaps";

    // nothing granted yet
    let (code, body) = send(&dc, robot, "GET", configmaps, None, &[]).await;
    let message = r#"configmaps is forbidden: User "system:serviceaccount:default:robot" cannot list resource "configmaps" in API group "" in the namespace "default""#;
    assert_eq!((code, body), (403, forbidden(message, r#"{"kind":"configmaps"}"#)));

    // read ConfigMaps in its own namespace: list and watch there, nowhere else, and no patch
    grant(
        &dc,
        Some("default"),
        "configmap-reader",
        json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch"]}]),
    )
    .await;
    let (code, body) = send(&dc, robot, "GET", configmaps, None, &[]).await;
    assert_eq!(code, 200, "{body}");
    assert!(body.contains(r#""name":"settings""#), "{body}");
    let (code, body) = send(&dc, robot, "GET", &format!("{configmaps}?watch=1&timeoutSeconds=1"), None, &[]).await;
    assert_eq!(code, 200, "{body}");
    assert!(body.contains(r#""type":"ADDED""#) && body.contains(r#""name":"settings""#), "{body}");
    let (code, body) = send(&dc, robot, "GET", "/api/v1/namespaces/kube-system/configmaps", None, &[]).await;
    let message = r#"configmaps is forbidden: User "system:serviceaccount:default:robot" cannot list resource "configmaps" in API group "" in the namespace "kube-system""#;
    assert_eq!((code, body), (403, forbidden(message, r#"{"kind":"configmaps"}"#)));
    let (code, body) = send(&dc, robot, "PATCH", &format!("{configmaps}/settings"), Some(json!({"data": {"a": "2"}})), &[]).await;
    let message = r#"configmaps "settings" is forbidden: User "system:serviceaccount:default:robot" cannot patch resource "configmaps" in API group "" in the namespace "default""#;
    assert_eq!((code, body), (403, forbidden(message, r#"{"name":"settings","kind":"configmaps"}"#)));

    // a cluster-scoped resource takes a ClusterRole and a ClusterRoleBinding
    let (code, body) = send(&dc, robot, "GET", "/api/v1/namespaces", None, &[]).await;
    let message = r#"namespaces is forbidden: User "system:serviceaccount:default:robot" cannot list resource "namespaces" in API group "" at the cluster scope"#;
    assert_eq!((code, body), (403, forbidden(message, r#"{"kind":"namespaces"}"#)));
    grant(&dc, None, "namespace-reader", json!([{"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get", "list"]}])).await;
    let (code, body) = send(&dc, robot, "GET", "/api/v1/namespaces", None, &[]).await;
    assert_eq!(code, 200, "{body}");
    let (code, body) = send(&dc, robot, "GET", "/api/v1/namespaces/kube-system", None, &[]).await;
    assert_eq!(code, 200, "{body}");

    // a named object of a group, at the cluster scope
    let crd = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.example.dev";
    let (code, body) = send(&dc, robot, "GET", crd, None, &[]).await;
    let message = r#"customresourcedefinitions.apiextensions.k8s.io "widgets.example.dev" is forbidden: User "system:serviceaccount:default:robot" cannot get resource "customresourcedefinitions" in API group "apiextensions.k8s.io" at the cluster scope"#;
    let details = r#"{"name":"widgets.example.dev","group":"apiextensions.k8s.io","kind":"customresourcedefinitions"}"#;
    assert_eq!((code, body), (403, forbidden(message, details)));

    // discovery and the version are every authenticated caller's; other paths are not
    for path in ["/api", "/api/v1", "/apis", "/apis/apps/v1", "/version", "/openapi/v3"] {
        let (code, body) = send(&dc, robot, "GET", path, None, &[]).await;
        assert_eq!(code, 200, "{path}: {body}");
    }
    let (code, body) = send(&dc, robot, "GET", "/metrics", None, &[]).await;
    let message = r#"forbidden: User "system:serviceaccount:default:robot" cannot get path "/metrics""#;
    assert_eq!((code, body), (403, forbidden(message, "{}")));

    // a binding to a role that does not exist is the reason given
    let dangling = json!({"metadata": {"name": "dangling"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "not-there"},
        "subjects": [{"kind": "ServiceAccount", "name": "robot"}]});
    admin(&dc, "POST", "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings", dangling).await;
    let (code, body) = send(&dc, robot, "DELETE", &format!("{configmaps}/settings"), None, &[]).await;
    let message = r#"configmaps "settings" is forbidden: User "system:serviceaccount:default:robot" cannot delete resource "configmaps" in API group "" in the namespace "default": RBAC: clusterrole.rbac.authorization.k8s.io "not-there" not found"#;
    assert_eq!((code, body), (403, forbidden(message, r#"{"name":"settings","kind":"configmaps"}"#)));

    // the admin is not bound by any of it; health checks need no token at all
    let (code, _) = send(&dc, Some(ADMIN), "PATCH", &format!("{configmaps}/settings"), Some(json!({"data": {"a": "2"}})), &[]).await;
    assert_eq!(code, 200);
    let (code, _) = send(&dc, Some(ADMIN), "GET", "/metrics", None, &[]).await;
    assert_eq!(code, 200);
    let (code, _) = send(&dc, None, "GET", "/readyz", None, &[]).await;
    assert_eq!(code, 200);
}

#[tokio::test]
async fn rules_with_resource_names_aggregation_and_subresources_are_enforced_over_http() {
    let dc = start(Some(ADMIN)).await;
    let token = robot(&dc).await;
    let robot = Some(token.as_str());
    let rules = json!([{"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["settings"], "verbs": ["get", "list", "patch"]}]);
    grant(&dc, Some("default"), "one-configmap", rules).await;
    let configmaps = "/api/v1/namespaces/default/configmaps";
    let (code, body) = send(&dc, robot, "GET", &format!("{configmaps}/settings"), None, &[]).await;
    assert_eq!(code, 200, "{body}");
    let (code, body) = send(&dc, robot, "PATCH", &format!("{configmaps}/settings"), Some(json!({"data": {"a": "2"}})), &[]).await;
    assert_eq!(code, 200, "{body}");
    // a list is allowed by a rule with names only when a field selector pins one of them
    let (code, body) = send(&dc, robot, "GET", &format!("{configmaps}?fieldSelector=metadata.name%3Dsettings"), None, &[]).await;
    assert_eq!(code, 200, "{body}");
    let (code, body) = send(&dc, robot, "GET", configmaps, None, &[]).await;
    let message =
        format!(r#"configmaps is forbidden: User "{ROBOT}" cannot list resource "configmaps" in API group "" in the namespace "default""#);
    assert_eq!((code, body), (403, forbidden(&message, r#"{"kind":"configmaps"}"#)));

    // an aggregated ClusterRole grants the rules of the ClusterRoles its selector matches
    let labelled = json!({"metadata": {"name": "deployment-scaler", "labels": {"bosun.dev/aggregate-to-robot": "true"}},
        "rules": [{"apiGroups": ["apps"], "resources": ["deployments/scale"], "verbs": ["get"]}]});
    admin(&dc, "POST", "/apis/rbac.authorization.k8s.io/v1/clusterroles", labelled).await;
    let aggregate = json!({"metadata": {"name": "robot-aggregate"},
        "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"bosun.dev/aggregate-to-robot": "true"}}]}});
    admin(&dc, "POST", "/apis/rbac.authorization.k8s.io/v1/clusterroles", aggregate).await;
    let binding = json!({"metadata": {"name": "robot-aggregate"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "robot-aggregate"},
        "subjects": [{"kind": "ServiceAccount", "name": "robot", "namespace": "default"}]});
    admin(&dc, "POST", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", binding).await;
    let deployments = "/apis/apps/v1/namespaces/default/deployments";
    // allowed: the answer is the server's own (404, no such deployment), not a 403
    let (code, body) = send(&dc, robot, "GET", &format!("{deployments}/web/scale"), None, &[]).await;
    assert_eq!(code, 404, "{body}");
    let (code, body) = send(&dc, robot, "GET", &format!("{deployments}/web"), None, &[]).await;
    let message = format!(
        r#"deployments.apps "web" is forbidden: User "{ROBOT}" cannot get resource "deployments" in API group "apps" in the namespace "default""#
    );
    assert_eq!((code, body), (403, forbidden(&message, r#"{"name":"web","group":"apps","kind":"deployments"}"#)));
    let (code, body) = send(&dc, robot, "PATCH", &format!("{deployments}/web/scale"), Some(json!({"spec": {"replicas": 2}})), &[]).await;
    let message = format!(
        r#"deployments.apps "web" is forbidden: User "{ROBOT}" cannot patch resource "deployments/scale" in API group "apps" in the namespace "default""#
    );
    assert_eq!((code, body), (403, forbidden(&message, r#"{"name":"web","group":"apps","kind":"deployments"}"#)));
}

#[tokio::test]
async fn the_admin_acts_as_whoever_it_impersonates_and_a_service_account_only_if_allowed_to() {
    let dc = start(Some(ADMIN)).await;
    let token = robot(&dc).await;
    grant(&dc, Some("default"), "configmap-reader", json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list"]}])).await;
    let as_robot = [("Impersonate-User", ROBOT)];
    let (code, body) = send(&dc, Some(ADMIN), "GET", "/api/v1/namespaces/default/configmaps", None, &as_robot).await;
    assert_eq!(code, 200, "{body}");
    let (code, body) = send(&dc, Some(ADMIN), "GET", "/api/v1/namespaces/kube-system/configmaps", None, &as_robot).await;
    let message = format!(
        r#"configmaps is forbidden: User "{ROBOT}" cannot list resource "configmaps" in API group "" in the namespace "kube-system""#
    );
    assert_eq!((code, body), (403, forbidden(&message, r#"{"kind":"configmaps"}"#)));
    let as_master = [("Impersonate-User", "alice"), ("Impersonate-Group", "system:masters")];
    let (code, body) = send(&dc, Some(ADMIN), "GET", "/api/v1/namespaces/kube-system/configmaps", None, &as_master).await;
    assert_eq!(code, 200, "{body}");

    // the service account itself may not impersonate until RBAC lets it
    let (code, body) =
        send(&dc, Some(&token), "GET", "/api/v1/namespaces/default/configmaps", None, &[("Impersonate-User", "alice")]).await;
    let message =
        format!(r#"users "alice" is forbidden: User "{ROBOT}" cannot impersonate resource "users" in API group "" at the cluster scope"#);
    assert_eq!((code, body), (403, forbidden(&message, r#"{"name":"alice","kind":"users"}"#)));
    grant(
        &dc,
        None,
        "impersonator",
        json!([{"apiGroups": [""], "resources": ["users"], "verbs": ["impersonate"], "resourceNames": ["alice"]}]),
    )
    .await;
    let (code, body) =
        send(&dc, Some(&token), "GET", "/api/v1/namespaces/default/configmaps", None, &[("Impersonate-User", "alice")]).await;
    let message = r#"configmaps is forbidden: User "alice" cannot list resource "configmaps" in API group "" in the namespace "default""#;
    assert_eq!((code, body), (403, forbidden(message, r#"{"kind":"configmaps"}"#)), "alice herself has no binding");

    // groups without a user: the real server's plain-text 500
    let (code, body) = send(&dc, Some(ADMIN), "GET", "/api/v1/namespaces", None, &[("Impersonate-Group", "ops")]).await;
    assert_eq!(
        (code, body.as_str()),
        (500, "Internal Server Error: &#34;/api/v1/namespaces&#34;: requested [{Group  ops    }] without impersonating a user\n")
    );
}

#[tokio::test]
async fn without_a_required_token_the_tokenless_stay_admin_and_service_accounts_are_still_authorized() {
    let dc = start(None).await;
    let request = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}});
    let (code, body) = send(&dc, None, "POST", "/api/v1/namespaces/default/serviceaccounts/default/token", Some(request), &[]).await;
    assert_eq!(code, 201, "{body}");
    let token: Value = serde_json::from_str(&body).unwrap();
    let token = token["status"]["token"].as_str().unwrap();
    assert_eq!(send(&dc, None, "GET", "/api/v1/namespaces/kube-system/secrets", None, &[]).await.0, 200);
    assert_eq!(send(&dc, Some("not-a-token-we-know"), "GET", "/api/v1/namespaces/kube-system/secrets", None, &[]).await.0, 200);
    let (code, body) = send(&dc, Some(token), "GET", "/api/v1/namespaces/kube-system/secrets", None, &[]).await;
    let message = r#"secrets is forbidden: User "system:serviceaccount:default:default" cannot list resource "secrets" in API group "" in the namespace "kube-system""#;
    assert_eq!((code, body), (403, forbidden(message, r#"{"kind":"secrets"}"#)));
    // one of the cluster's own tokens whose account is gone is refused, not taken for the admin
    let (code, _) = send(&dc, None, "DELETE", "/api/v1/namespaces/default/serviceaccounts/default", None, &[]).await;
    assert_eq!(code, 200);
    assert_eq!(send(&dc, Some(token), "GET", "/api/v1/namespaces/kube-system/secrets", None, &[]).await.0, 401);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_acting_as_a_service_account_meets_the_real_servers_forbidden_errors() {
    with_kubectl(|kubeconfig| {
        let ok = |args: &[&str]| kubectl_ok(kubeconfig, args, None);
        ok(&["create", "serviceaccount", "robot"]);
        ok(&["create", "configmap", "settings", "--from-literal=a=1"]);
        ok(&["create", "role", "configmap-reader", "--verb=get,list,watch", "--resource=configmaps"]);
        ok(&["create", "rolebinding", "robot-reads", "--role=configmap-reader", "--serviceaccount=default:robot"]);
        // kubectl sends a token only over TLS: it acts as the robot with `--as`
        let as_robot = format!("--as={ROBOT}");
        let out = ok(&[&as_robot, "get", "configmaps", "-o", "name"]);
        assert_eq!(out.trim(), "configmap/settings");
        let (done, out) = kubectl(kubeconfig, &[&as_robot, "get", "configmaps", "-n", "kube-system"], None);
        let want = format!(
            r#"Error from server (Forbidden): configmaps is forbidden: User "{ROBOT}" cannot list resource "configmaps" in API group "" in the namespace "kube-system""#
        );
        assert!(!done && out.contains(&want), "{out}");
        let (done, out) = kubectl(kubeconfig, &[&as_robot, "patch", "configmap", "settings", "-p", r#"{"data":{"a":"2"}}"#], None);
        let want = format!(
            r#"Error from server (Forbidden): configmaps "settings" is forbidden: User "{ROBOT}" cannot patch resource "configmaps" in API group "" in the namespace "default""#
        );
        assert!(!done && out.contains(&want), "{out}");
        assert_eq!(ok(&["get", "configmap", "settings", "-o", "jsonpath={.data.a}"]), "1", "unchanged");
    })
    .await;
}
