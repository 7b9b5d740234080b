//! Admission webhooks against a real HTTPS webhook server (with its own CA, trusted through
//! the configurations' `caBundle`): mutating patches stored, validating denials answered with
//! the real server's Status, the reviews' fields, subresources, deletes, failure policies for
//! a refused and a hanging webhook, dry runs and side effects, namespace and object
//! selectors, and kubectl's message for a denial.

#[path = "support/kubectl.rs"]
mod support;

use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::{StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use base64::Engine;
use bosun_devcluster::{DevCluster, serve, tls::Tls};
use http_body_util::BodyExt;
use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio::sync::watch;

type Reviews = Arc<Mutex<Vec<(String, Value)>>>;

/// A webhook server on 127.0.0.1 whose answers depend on the path it is called at.
struct Webhook {
    url: String,
    ca_bundle: String,
    reviews: Reviews,
    _stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Webhook {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Webhook {
    async fn start() -> Webhook {
        let tls = Tls::generate_for("webhook-ca", "webhook", &["127.0.0.1".to_string()]).unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("https://{}", listener.local_addr().unwrap());
        let reviews: Reviews = Arc::default();
        let app = axum::Router::new().route("/{*path}", post(answer)).with_state(reviews.clone());
        let (stop, stopped) = watch::channel(false);
        let limits = serve::Limits { header_read_timeout: Duration::from_secs(32), max_connections: 100 };
        let task = tokio::spawn(serve::serve(listener, app, Some(tls.acceptor().unwrap()), limits, stopped));
        let ca_bundle = base64::engine::general_purpose::STANDARD.encode(&tls.ca_pem);
        Webhook { url, ca_bundle, reviews, _stop: stop, task }
    }

    /// The `request`s of the reviews sent to `path`.
    fn sent_to(&self, path: &str) -> Vec<Value> {
        self.reviews.lock().iter().filter(|(p, _)| p == path).map(|(_, r)| r["request"].clone()).collect()
    }

    /// A webhook of a configuration, called at `path` for `rules`, `extra` merged in.
    fn hook(&self, name: &str, path: &str, rules: Value, extra: Value) -> Value {
        let mut hook = json!({
            "name": name,
            "clientConfig": {"url": format!("{}{path}", self.url), "caBundle": self.ca_bundle},
            "rules": rules,
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
        });
        for (k, v) in extra.as_object().unwrap() {
            hook[k] = v.clone();
        }
        hook
    }
}

/// `/mutate` adds `spec.mutatedBy` (with a warning); `/validate` denies an object (the old one
/// on a delete) with `spec.forbidden` or the label `protect`; `/deny` denies without a
/// status; `/slow` never answers; `/garbage`, `/error`, `/wrong-uid`, `/bad-patch` and
/// `/unapplicable-patch` answer what their names say; anything else allows.
async fn answer(State(reviews): State<Reviews>, uri: Uri, axum::Json(review): axum::Json<Value>) -> Response {
    let path = uri.path().to_string();
    reviews.lock().push((path.clone(), review.clone()));
    let req = &review["request"];
    let uid = req["uid"].clone();
    let allow = json!({"uid": uid, "allowed": true});
    let response = match path.as_str() {
        "/slow" => std::future::pending().await,
        "/mutate" => {
            let patch = base64::engine::general_purpose::STANDARD.encode(br#"[{"op":"add","path":"/spec/mutatedBy","value":"webhook"}]"#);
            json!({"uid": uid, "allowed": true, "patchType": "JSONPatch", "patch": patch, "warnings": ["mutated by the test webhook"]})
        }
        "/validate" => {
            let obj = if req["operation"] == "DELETE" { &req["oldObject"] } else { &req["object"] };
            if obj["spec"]["forbidden"] == true || obj["metadata"]["labels"]["protect"] == "yes" {
                json!({"uid": uid, "allowed": false, "status": {"code": 403, "message": "this widget is protected"}})
            } else {
                allow
            }
        }
        "/deny" => json!({"uid": uid, "allowed": false}),
        "/garbage" => return "not json".into_response(),
        "/error" => return (StatusCode::INTERNAL_SERVER_ERROR, "boom").into_response(),
        "/wrong-uid" => json!({"uid": "nope", "allowed": true}),
        "/bad-patch" => {
            let patch = base64::engine::general_purpose::STANDARD.encode(br#"{"op":"add"}"#);
            json!({"uid": uid, "allowed": true, "patchType": "JSONPatch", "patch": patch})
        }
        "/unapplicable-patch" => {
            let patch = base64::engine::general_purpose::STANDARD.encode(br#"[{"op":"remove","path":"/spec/nope"}]"#);
            json!({"uid": uid, "allowed": true, "patchType": "JSONPatch", "patch": patch})
        }
        _ => allow,
    };
    axum::Json(json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response})).into_response()
}

const CRD: &str = r#"{
  "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
  "metadata": {"name": "widgets.example.com"},
  "spec": {"group": "example.com", "scope": "Namespaced",
    "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
    "versions": [{"name": "v1", "served": true, "storage": true, "subresources": {"status": {}},
      "schema": {"openAPIV3Schema": {"type": "object", "properties": {
        "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
        "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}}]}
}"#;

/// One request; the status, the `Warning` headers and the body as JSON.
async fn send(dc: &DevCluster, method: &str, path: &str, content_type: &str, body: Option<Value>) -> (u16, Vec<String>, Value) {
    let mut config = dc.kube_config();
    config.default_retry = false;
    let client = kube::Client::try_from(config).unwrap();
    let req = http::Request::builder().method(method).uri(path).header("accept", "application/json").header("content-type", content_type);
    let body = body.map(|b| serde_json::to_vec(&b).unwrap()).unwrap_or_default();
    let resp = client.send(req.body(body).unwrap().map(Into::into)).await.unwrap();
    let code = resp.status().as_u16();
    let warnings = resp.headers().get_all("warning").iter().map(|v| v.to_str().unwrap().to_string()).collect();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    (code, warnings, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

const WIDGETS: &str = "/apis/example.com/v1/namespaces/default/widgets";

fn widget(name: &str, labels: Value, spec: Value) -> Value {
    json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": name, "labels": labels}, "spec": spec})
}

fn rules(operations: Value, resources: Value) -> Value {
    json!([{"operations": operations, "apiGroups": ["example.com"], "apiVersions": ["v1"], "resources": resources}])
}

/// A dev cluster with the Widget CRD and these webhook configurations.
async fn cluster(mutating: Vec<Value>, validating: Vec<Value>) -> DevCluster {
    let dc = DevCluster::start_local().await.unwrap();
    let crd: Value = serde_json::from_str(CRD).unwrap();
    let (code, _, body) = send(&dc, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", "application/json", Some(crd)).await;
    assert_eq!(code, 201, "{body}");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while send(&dc, "GET", WIDGETS, "application/json", None).await.0 != 200 {
        assert!(tokio::time::Instant::now() < deadline, "the CRD is served in time");
        tokio::task::yield_now().await;
    }
    for (kind, plural, hooks) in [
        ("MutatingWebhookConfiguration", "mutatingwebhookconfigurations", mutating),
        ("ValidatingWebhookConfiguration", "validatingwebhookconfigurations", validating),
    ] {
        if hooks.is_empty() {
            continue;
        }
        let config =
            json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind, "metadata": {"name": "test-hooks"}, "webhooks": hooks});
        let (code, _, body) =
            send(&dc, "POST", &format!("/apis/admissionregistration.k8s.io/v1/{plural}"), "application/json", Some(config)).await;
        assert_eq!(code, 201, "{body}");
    }
    dc
}

#[tokio::test]
async fn webhooks_mutate_then_validate_and_are_shown_what_a_real_server_shows_them() {
    let wh = Webhook::start().await;
    let mutate = wh.hook("mutate.example.com", "/mutate", rules(json!(["CREATE", "UPDATE"]), json!(["widgets"])), json!({}));
    let validate = wh.hook("validate.example.com", "/validate", rules(json!(["*"]), json!(["widgets", "widgets/status"])), json!({}));
    let dc = cluster(vec![mutate], vec![validate]).await;

    // An allowed create is stored with the mutating webhook's patch; its warning reaches the client.
    let (code, warnings, body) =
        send(&dc, "POST", &format!("{WIDGETS}?fieldManager=tester"), "application/json", Some(widget("w1", json!({}), json!({"size": 1}))))
            .await;
    assert_eq!(code, 201, "{body}");
    assert_eq!(body["spec"], json!({"size": 1, "mutatedBy": "webhook"}));
    assert_eq!(warnings, vec![r#"299 - "mutated by the test webhook""#.to_string()]);
    let (_, _, stored) = send(&dc, "GET", &format!("{WIDGETS}/w1"), "application/json", None).await;
    assert_eq!(stored["spec"]["mutatedBy"], "webhook");

    let m = wh.sent_to("/mutate").pop().expect("the mutating webhook was called");
    assert_eq!(m["operation"], "CREATE");
    assert_eq!(m["kind"], json!({"group": "example.com", "version": "v1", "kind": "Widget"}));
    assert_eq!(m["resource"], json!({"group": "example.com", "version": "v1", "resource": "widgets"}));
    assert_eq!(m["requestKind"], m["kind"]);
    assert_eq!(m["requestResource"], m["resource"]);
    assert_eq!((m["name"].as_str(), m["namespace"].as_str()), (Some("w1"), Some("default")));
    assert_eq!(m["userInfo"], json!({"username": "kubernetes-admin", "groups": ["system:masters", "system:authenticated"]}));
    assert_eq!(m["object"]["spec"], json!({"size": 1}), "the object before any patch");
    assert_eq!(m["oldObject"], Value::Null);
    assert_eq!(m["dryRun"], false);
    assert_eq!(m["options"], json!({"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1", "fieldManager": "tester"}));
    assert!(m.get("subResource").is_none());
    let v = wh.sent_to("/validate").pop().expect("the validating webhook was called");
    assert_eq!(v["object"]["spec"]["mutatedBy"], "webhook", "validation sees the mutated object");
    assert!(v["object"]["metadata"]["uid"].is_string(), "and the object as it is stored");
    assert_ne!(v["uid"], m["uid"]);

    // A validating denial: the webhook's code, its message prefixed; nothing stored.
    let (code, _, status) = send(&dc, "POST", WIDGETS, "application/json", Some(widget("w2", json!({}), json!({"forbidden": true})))).await;
    assert_eq!(code, 403);
    assert_eq!(
        status,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
               "message": "admission webhook \"validate.example.com\" denied the request: this widget is protected", "code": 403})
    );
    assert_eq!(send(&dc, "GET", &format!("{WIDGETS}/w2"), "application/json", None).await.0, 404);

    // UPDATE carries the old object; a PATCH is reviewed as an UPDATE with UpdateOptions.
    let mut changed = stored.clone();
    changed["spec"]["size"] = json!(2);
    let (code, _, body) = send(&dc, "PUT", &format!("{WIDGETS}/w1"), "application/json", Some(changed)).await;
    assert_eq!(code, 200, "{body}");
    let u = wh.sent_to("/validate").pop().unwrap();
    assert_eq!(
        (u["operation"].as_str(), u["oldObject"]["spec"]["size"].as_i64(), u["object"]["spec"]["size"].as_i64()),
        (Some("UPDATE"), Some(1), Some(2))
    );
    assert_eq!(u["options"], json!({"kind": "UpdateOptions", "apiVersion": "meta.k8s.io/v1"}));
    let (code, _, _) =
        send(&dc, "PATCH", &format!("{WIDGETS}/w1"), "application/merge-patch+json", Some(json!({"spec": {"size": 3}}))).await;
    assert_eq!(code, 200);
    assert_eq!(wh.sent_to("/validate").pop().unwrap()["options"]["kind"], "UpdateOptions");

    // The status subresource: reviewed by the webhook whose rules name widgets/status only.
    let mutations = wh.sent_to("/mutate").len();
    let (code, _, body) =
        send(&dc, "PATCH", &format!("{WIDGETS}/w1/status"), "application/merge-patch+json", Some(json!({"status": {"ready": true}}))).await;
    assert_eq!(code, 200, "{body}");
    let s = wh.sent_to("/validate").pop().unwrap();
    assert_eq!((s["subResource"].as_str(), s["requestSubResource"].as_str()), (Some("status"), Some("status")));
    assert_eq!(s["object"]["status"], json!({"ready": true}));
    assert_eq!(wh.sent_to("/mutate").len(), mutations, "the mutating webhook's rules do not name the subresource");

    // A denied DELETE keeps the object; the review has the old object and DeleteOptions.
    let (code, _, body) = send(&dc, "POST", WIDGETS, "application/json", Some(widget("w3", json!({"protect": "yes"}), json!({})))).await;
    assert_eq!(code, 403, "{body}");
    let (code, _, _) = send(&dc, "POST", WIDGETS, "application/json", Some(widget("w3", json!({}), json!({})))).await;
    assert_eq!(code, 201);
    let (code, _, _) =
        send(&dc, "PATCH", &format!("{WIDGETS}/w3"), "application/merge-patch+json", Some(json!({"spec": {"forbidden": true}}))).await;
    assert_eq!(code, 403, "the update is denied too");
    let (code, _, status) =
        send(&dc, "DELETE", &format!("{WIDGETS}/w1"), "application/json", Some(json!({"propagationPolicy": "Background"}))).await;
    assert_eq!(code, 200, "{status}");
    let d = wh.sent_to("/validate").pop().unwrap();
    assert_eq!((d["operation"].as_str(), d["name"].as_str()), (Some("DELETE"), Some("w1")));
    assert_eq!(d["object"], Value::Null);
    assert_eq!(d["oldObject"]["spec"]["size"], 3);
    assert_eq!(d["options"], json!({"kind": "DeleteOptions", "apiVersion": "meta.k8s.io/v1", "propagationPolicy": "Background"}));

    // generateName: the review names no object, as on a real server.
    let generated = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"generateName": "gen-"}, "spec": {}});
    let (code, _, body) = send(&dc, "POST", WIDGETS, "application/json", Some(generated)).await;
    assert_eq!(code, 201, "{body}");
    let g = wh.sent_to("/mutate").pop().unwrap();
    assert!(g.get("name").is_none(), "{g}");
    assert_eq!(g["object"]["metadata"]["generateName"], "gen-");
}

#[tokio::test]
async fn a_denied_delete_keeps_the_object() {
    let wh = Webhook::start().await;
    let validate = wh.hook("validate.example.com", "/validate", rules(json!(["DELETE"]), json!(["widgets"])), json!({}));
    let selected = json!({"objectSelector": {"matchLabels": {"case": "patched"}}});
    let mutate = wh.hook("mutate.example.com", "/mutate", rules(json!(["DELETE"]), json!(["widgets"])), selected);
    let dc = cluster(vec![mutate], vec![validate]).await;
    let (code, _, _) = send(&dc, "POST", WIDGETS, "application/json", Some(widget("keep", json!({"protect": "yes"}), json!({})))).await;
    assert_eq!(code, 201, "a create is not a delete");
    let (code, _, status) = send(&dc, "DELETE", &format!("{WIDGETS}/keep"), "application/json", None).await;
    assert_eq!(code, 403, "{status}");
    assert_eq!(status["message"], "admission webhook \"validate.example.com\" denied the request: this widget is protected");
    assert_eq!(send(&dc, "GET", &format!("{WIDGETS}/keep"), "application/json", None).await.0, 200);
    let d = wh.sent_to("/validate").pop().unwrap();
    assert_eq!((d["operation"].as_str(), d["object"].is_null()), (Some("DELETE"), true));

    // A mutating webhook's patch on a delete has no object to change.
    let (code, _, _) = send(&dc, "POST", WIDGETS, "application/json", Some(widget("patched", json!({"case": "patched"}), json!({})))).await;
    assert_eq!(code, 201);
    let (code, _, status) = send(&dc, "DELETE", &format!("{WIDGETS}/patched"), "application/json", None).await;
    assert_eq!(code, 500);
    assert_eq!(
        status["message"],
        "Internal error occurred: admission webhook \"mutate.example.com\" attempted to modify the object, which is not supported for this operation"
    );
}

/// A port nothing listens on.
fn refused_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

#[tokio::test]
async fn failure_policies_decide_what_a_refused_or_hanging_webhook_means() {
    let wh = Webhook::start().await;
    let port = refused_port();
    let on = |case: &str| json!({"objectSelector": {"matchLabels": {"case": case}}});
    let all = || rules(json!(["CREATE"]), json!(["widgets"]));
    let mut refused = wh.hook("refused.example.com", "/x", all(), on("refused"));
    refused["clientConfig"]["url"] = json!(format!("https://127.0.0.1:{port}/x"));
    let mut ignored = refused.clone();
    ignored["name"] = json!("ignored.example.com");
    ignored["failurePolicy"] = json!("Ignore");
    ignored["objectSelector"] = on("ignored")["objectSelector"].clone();
    let slow = wh.hook("slow.example.com", "/slow", all(), json!({"timeoutSeconds": 1, "objectSelector": on("slow")["objectSelector"]}));
    let mut untrusted = wh.hook("untrusted.example.com", "/allow", all(), on("untrusted"));
    untrusted["clientConfig"]["caBundle"] =
        json!(base64::engine::general_purpose::STANDARD.encode(&Tls::generate_for("other", "x", &[]).unwrap().ca_pem));
    let mut service = wh.hook("service.example.com", "/allow", all(), on("service"));
    service["clientConfig"] = json!({"service": {"namespace": "default", "name": "hooks", "path": "/validate"}});
    let dc = cluster(vec![], vec![refused, ignored, slow, untrusted, service]).await;

    let create = |name: &str, case: &str| widget(name, json!({"case": case}), json!({}));
    let (code, _, status) = send(&dc, "POST", WIDGETS, "application/json", Some(create("a", "refused"))).await;
    let why = format!(
        "failed calling webhook \"refused.example.com\": failed to call webhook: Post \"https://127.0.0.1:{port}/x?timeout=10s\": dial tcp 127.0.0.1:{port}: connect: connection refused"
    );
    assert_eq!(code, 500);
    assert_eq!(
        status,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": format!("Internal error occurred: {why}"),
               "reason": "InternalError", "details": {"causes": [{"message": why}]}, "code": 500})
    );
    assert_eq!(send(&dc, "POST", WIDGETS, "application/json", Some(create("b", "ignored"))).await.0, 201, "Ignore lets it through");
    assert_eq!(send(&dc, "GET", &format!("{WIDGETS}/b"), "application/json", None).await.0, 200);

    let (code, _, status) = send(&dc, "POST", WIDGETS, "application/json", Some(create("c", "slow"))).await;
    assert_eq!(code, 500);
    let slow_url = format!("{}/slow?timeout=1s", wh.url);
    assert_eq!(
        status["message"],
        format!(
            "Internal error occurred: failed calling webhook \"slow.example.com\": failed to call webhook: Post \"{slow_url}\": context deadline exceeded"
        )
    );
    assert_eq!(wh.sent_to("/slow").len(), 1, "the review reached the webhook, which never answered");

    let (code, _, status) = send(&dc, "POST", WIDGETS, "application/json", Some(create("d", "untrusted"))).await;
    assert_eq!(code, 500);
    let message = status["message"].as_str().unwrap();
    assert!(message.ends_with("tls: failed to verify certificate: x509: certificate signed by unknown authority"), "{message}");

    let (code, _, status) = send(&dc, "POST", WIDGETS, "application/json", Some(create("e", "service"))).await;
    assert_eq!(code, 500);
    assert_eq!(
        status["message"],
        "Internal error occurred: failed calling webhook \"service.example.com\": failed to call webhook: Post \"https://hooks.default.svc:443/validate?timeout=10s\": no endpoints available for service \"hooks\""
    );
    for name in ["a", "c", "d", "e"] {
        assert_eq!(send(&dc, "GET", &format!("{WIDGETS}/{name}"), "application/json", None).await.0, 404, "{name} was not stored");
    }
}

#[tokio::test]
async fn dry_runs_call_only_webhooks_without_side_effects_and_store_nothing() {
    let wh = Webhook::start().await;
    let all = || rules(json!(["CREATE"]), json!(["widgets"]));
    let unknown = wh.hook(
        "unknown.example.com",
        "/allow",
        all(),
        json!({"sideEffects": "Unknown", "objectSelector": {"matchLabels": {"case": "unknown"}}}),
    );
    let none = wh.hook("none.example.com", "/none", all(), json!({"objectSelector": {"matchLabels": {"case": "none"}}}));
    let dc = cluster(vec![], vec![unknown, none]).await;

    let (code, _, status) =
        send(&dc, "POST", &format!("{WIDGETS}?dryRun=All"), "application/json", Some(widget("u", json!({"case": "unknown"}), json!({}))))
            .await;
    assert_eq!(code, 400);
    assert_eq!(
        status,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
               "message": "admission webhook \"unknown.example.com\" does not support dry run", "reason": "BadRequest", "code": 400})
    );
    assert!(wh.sent_to("/allow").is_empty());

    let (code, _, body) =
        send(&dc, "POST", &format!("{WIDGETS}?dryRun=All"), "application/json", Some(widget("n", json!({"case": "none"}), json!({}))))
            .await;
    assert_eq!(code, 201, "{body}");
    let r = wh.sent_to("/none").pop().expect("a webhook without side effects is called");
    assert_eq!(r["dryRun"], true);
    assert_eq!(r["options"], json!({"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1", "dryRun": ["All"]}));
    assert_eq!(send(&dc, "GET", &format!("{WIDGETS}/n"), "application/json", None).await.0, 404, "nothing stored");
}

#[tokio::test]
async fn namespace_selectors_pick_namespaces_by_their_labels() {
    let wh = Webhook::start().await;
    let selector = json!({"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "guarded"}}});
    let deny = wh.hook("deny.example.com", "/deny", rules(json!(["CREATE"]), json!(["widgets"])), selector);
    let dc = cluster(vec![], vec![deny]).await;
    assert_eq!(send(&dc, "POST", WIDGETS, "application/json", Some(widget("free", json!({}), json!({})))).await.0, 201);
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "guarded"}});
    assert_eq!(send(&dc, "POST", "/api/v1/namespaces", "application/json", Some(ns)).await.0, 201);
    let (code, _, status) = send(
        &dc,
        "POST",
        "/apis/example.com/v1/namespaces/guarded/widgets",
        "application/json",
        Some(widget("held", json!({}), json!({}))),
    )
    .await;
    assert_eq!(code, 400);
    assert_eq!(status["message"], "admission webhook \"deny.example.com\" denied the request without explanation");
    assert_eq!(wh.sent_to("/deny").len(), 1, "only the guarded namespace's create was reviewed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_prints_the_webhooks_denial() {
    let wh = Webhook::start().await;
    let validate = wh.hook("validate.example.com", "/validate", rules(json!(["*"]), json!(["widgets"])), json!({}));
    let config = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
                        "metadata": {"name": "test-hooks"}, "webhooks": [validate]})
    .to_string();
    let mutate = wh.hook("mutate.example.com", "/mutate", rules(json!(["CREATE"]), json!(["widgets"])), json!({}));
    let mutating = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
                          "metadata": {"name": "test-hooks"}, "webhooks": [mutate]})
    .to_string();
    let port = refused_port();
    let down = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": "down"},
        "webhooks": [{"name": "down.example.com", "clientConfig": {"url": format!("https://127.0.0.1:{port}/m")},
            "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}],
            "sideEffects": "None", "admissionReviewVersions": ["v1"]}]})
    .to_string();
    // A webhook that never answers within its 1 s (secrets), and one with unknown side
    // effects, which a dry run may not call (service accounts).
    let core = |resource: &str| json!([{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": [resource]}]);
    let hanging = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "hanging"}, "webhooks": [wh.hook("slow.example.com", "/slow", core("secrets"), json!({"timeoutSeconds": 1}))]})
    .to_string();
    let effects = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "effects"},
        "webhooks": [wh.hook("effects.example.com", "/allow", core("serviceaccounts"), json!({"sideEffects": "Unknown"}))]})
    .to_string();
    let slow_url = format!("{}/slow?timeout=1s", wh.url);
    support::with_kubectl(move |kc| {
        support::kubectl_ok(kc, &["apply", "-f", "-"], Some(CRD));
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !support::kubectl(kc, &["get", "widgets"], None).0 {
            assert!(std::time::Instant::now() < deadline, "the CRD is served in time");
        }
        support::kubectl_ok(kc, &["apply", "-f", "-"], Some(&config));
        support::kubectl_ok(kc, &["apply", "-f", "-"], Some(&down));
        support::kubectl_ok(kc, &["apply", "-f", "-"], Some(&mutating));
        let allowed = r#"{"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "ok"}, "spec": {}}"#;
        let out = support::kubectl_ok(kc, &["apply", "-f", "-"], Some(allowed));
        // stdout, then stderr
        assert_eq!(out.trim(), "widget.example.com/ok created\nWarning: mutated by the test webhook", "{out}");
        let denied = r#"{"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"forbidden": true}}"#;
        let (ok, out) = support::kubectl(kc, &["apply", "-f", "-"], Some(denied));
        assert!(!ok);
        println!("kubectl denial output: {out}");
        assert_eq!(
            out.trim(),
            r#"Error from server: error when creating "STDIN": admission webhook "validate.example.com" denied the request: this widget is protected"#
        );
        let (ok, out) = support::kubectl(kc, &["create", "configmap", "c", "--from-literal=a=b"], None);
        assert!(!ok);
        assert_eq!(
            out.trim(),
            format!(
                "error: failed to create configmap: Internal error occurred: failed calling webhook \"down.example.com\": failed to call webhook: Post \"https://127.0.0.1:{port}/m?timeout=10s\": dial tcp 127.0.0.1:{port}: connect: connection refused"
            )
        );
        println!("kubectl unreachable webhook output: {out}");

        support::kubectl_ok(kc, &["apply", "-f", "-"], Some(&hanging));
        let (ok, out) = support::kubectl(kc, &["create", "secret", "generic", "s", "--from-literal=a=b"], None);
        assert!(!ok);
        assert_eq!(
            out.trim(),
            format!(
                "error: failed to create secret Internal error occurred: failed calling webhook \"slow.example.com\": failed to call webhook: Post \"{slow_url}\": context deadline exceeded"
            )
        );
        println!("kubectl timed-out webhook output: {out}");

        support::kubectl_ok(kc, &["apply", "-f", "-"], Some(&effects));
        let (ok, out) = support::kubectl(kc, &["create", "serviceaccount", "sa", "--dry-run=server"], None);
        assert!(!ok);
        assert!(out.contains(r#"admission webhook "effects.example.com" does not support dry run"#), "{out}");
        println!("kubectl dry run, side effects Unknown: {out}");
        // Without the dry run it is called, and allows.
        support::kubectl_ok(kc, &["create", "serviceaccount", "sa"], None);
    })
    .await;
}

#[tokio::test]
async fn garbage_in_configurations_or_answers_fails_only_that_request() {
    let wh = Webhook::start().await;
    let on = |case: &str| json!({"objectSelector": {"matchLabels": {"case": case}}});
    let all = || rules(json!(["CREATE"]), json!(["widgets"]));
    let mut bad_config = wh.hook("bad-config.example.com", "/allow", all(), on("bad-config"));
    bad_config["clientConfig"] = json!({"url": "::nonsense", "caBundle": "!!!"});
    let validating = vec![
        wh.hook("garbage.example.com", "/garbage", all(), on("garbage")),
        wh.hook("error.example.com", "/error", all(), on("error")),
        wh.hook("wrong-uid.example.com", "/wrong-uid", all(), on("wrong-uid")),
        bad_config,
    ];
    let mutating = vec![
        wh.hook("bad-patch.example.com", "/bad-patch", all(), on("bad-patch")),
        wh.hook("unapplicable.example.com", "/unapplicable-patch", all(), on("unapplicable")),
    ];
    let dc = cluster(mutating, validating).await;
    let nonsense = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "nonsense"}, "webhooks": [{"name": "n.example.com", "rules": "x", "clientConfig": 7, "timeoutSeconds": "x"}]});
    let (code, _, body) =
        send(&dc, "POST", "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations", "application/json", Some(nonsense))
            .await;
    assert!(code == 201 || code == 400, "stored or refused, never a crash: {code} {body}");

    let cases = [
        ("garbage", "failed calling webhook \"garbage.example.com\": failed to call webhook: "),
        (
            "error",
            "failed calling webhook \"error.example.com\": failed to call webhook: an error on the server (\"boom\") has prevented the request from succeeding",
        ),
        ("wrong-uid", "failed calling webhook \"wrong-uid.example.com\": received invalid webhook response: expected response.uid="),
        ("bad-config", "failed calling webhook \"bad-config.example.com\": could not get REST client: unable to load root certificates"),
        (
            "bad-patch",
            "failed calling webhook \"bad-patch.example.com\": received undecodable patch in webhook response: json: cannot unmarshal object into Go value of type jsonpatch.Patch",
        ),
        ("unapplicable", ""),
    ];
    for (case, why) in cases {
        let (code, _, status) = send(&dc, "POST", WIDGETS, "application/json", Some(widget(case, json!({"case": case}), json!({})))).await;
        assert_eq!((code, status["reason"].as_str()), (500, Some("InternalError")), "{case}: {status}");
        let message = status["message"].as_str().unwrap();
        assert!(message.starts_with(&format!("Internal error occurred: {why}")), "{case}: {message}");
        println!("{case}: {message}");
    }
    let (code, _, body) = send(&dc, "POST", WIDGETS, "application/json", Some(widget("fine", json!({}), json!({})))).await;
    assert_eq!(code, 201, "other requests go on: {body}");
}

const GADGETS: &str = r#"{
  "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
  "metadata": {"name": "gadgets.example.com"},
  "spec": {"group": "example.com", "scope": "Namespaced",
    "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
    "versions": [
      {"name": "v1", "served": true, "storage": true,
       "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}},
      {"name": "v2", "served": true, "storage": false,
       "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}
}"#;

#[tokio::test]
async fn an_equivalent_match_policy_reviews_another_version_at_the_webhooks_version() {
    let wh = Webhook::start().await;
    let v1_rules = || json!([{"operations": ["CREATE"], "apiGroups": ["example.com"], "apiVersions": ["v1"], "resources": ["gadgets"]}]);
    let equivalent = wh.hook("equivalent.example.com", "/equivalent", v1_rules(), json!({}));
    let exact = wh.hook("exact.example.com", "/exact", v1_rules(), json!({"matchPolicy": "Exact"}));
    let dc = cluster(vec![], vec![equivalent, exact]).await;
    let crd: Value = serde_json::from_str(GADGETS).unwrap();
    assert_eq!(send(&dc, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", "application/json", Some(crd)).await.0, 201);
    let v2 = "/apis/example.com/v2/namespaces/default/gadgets";
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while send(&dc, "GET", v2, "application/json", None).await.0 != 200 {
        assert!(tokio::time::Instant::now() < deadline, "the CRD is served in time");
        tokio::task::yield_now().await;
    }
    let gadget = json!({"apiVersion": "example.com/v2", "kind": "Gadget", "metadata": {"name": "g"}, "spec": {}});
    let (code, _, body) = send(&dc, "POST", v2, "application/json", Some(gadget)).await;
    assert_eq!(code, 201, "{body}");
    let r = wh.sent_to("/equivalent").pop().expect("an Equivalent webhook is called for another version");
    assert_eq!(r["kind"], json!({"group": "example.com", "version": "v1", "kind": "Gadget"}));
    assert_eq!(r["resource"], json!({"group": "example.com", "version": "v1", "resource": "gadgets"}));
    assert_eq!(r["requestKind"], json!({"group": "example.com", "version": "v2", "kind": "Gadget"}));
    assert_eq!(r["requestResource"], json!({"group": "example.com", "version": "v2", "resource": "gadgets"}));
    assert_eq!(r["object"]["apiVersion"], "example.com/v1", "the object at the webhook's version");
    assert!(wh.sent_to("/exact").is_empty(), "an Exact webhook is not");
}

#[tokio::test]
async fn a_webhook_asking_for_reinvocation_is_called_again_after_a_later_one_changed_the_object() {
    let wh = Webhook::start().await;
    let create = || rules(json!(["CREATE"]), json!(["widgets"]));
    let dc = cluster(
        vec![
            wh.hook("first.example.com", "/first", create(), json!({"reinvocationPolicy": "IfNeeded"})),
            wh.hook("never.example.com", "/never", create(), json!({})),
            wh.hook("mutate.example.com", "/mutate", create(), json!({})),
            wh.hook("after.example.com", "/after", create(), json!({"reinvocationPolicy": "IfNeeded"})),
        ],
        vec![],
    )
    .await;
    let (code, _, body) = send(&dc, "POST", WIDGETS, "application/json", Some(widget("r", json!({}), json!({})))).await;
    assert_eq!(code, 201, "{body}");
    let first = wh.sent_to("/first");
    assert_eq!(first.len(), 2, "called again: the object changed after its call");
    assert_eq!((first[0]["object"]["spec"].clone(), first[1]["object"]["spec"].clone()), (json!({}), json!({"mutatedBy": "webhook"})));
    assert_eq!(wh.sent_to("/never").len(), 1, "reinvocationPolicy Never");
    assert_eq!(wh.sent_to("/after").len(), 1, "nothing changed the object after its call");
    assert_eq!(wh.sent_to("/mutate").len(), 1, "a webhook is not called again for its own change");
}
