//! The admission endpoint end to end: AdmissionReviews sent over HTTPS (verified against the
//! controller's self-signed CA) to the controller's routes, reviewed by a real Rust SDK
//! handler server over real gRPC: allow, deny with the handler's message, mutate as one JSON
//! patch, and a handler server that is down, fail-closed and fail-open.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use bosun_controller::endpoints::admission::{Reviewer, Reviewers, router};
use bosun_controller::endpoints::webhooks::{self, Certificate};
use bosun_controller::handlers::dispatch::{CallFailure, DaemonStream, HandlerClient, Server};
use bosun_controller::logs::Logger;
use bosun_controller::state::registry::Handler;
use bosun_proto::v1 as pb;
use bosun_sdk::{Cause, HandlerError, Operator, PermanentError};
use futures::future::BoxFuture;
use serde_json::{Value, json};

/// A handler server with Kopf's example 17 in small: `check` denies odd `spec.field`,
/// `defaults` fills `spec.default`.
async fn handler_server() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = format!("http://{}", listener.local_addr().unwrap());
    let op = Operator::new()
        .on_validate("kopf.dev/v1/kopfexamples", |cause: Cause| async move {
            match cause.spec().get("field").and_then(Value::as_i64) {
                Some(n) if n % 2 == 1 => Err(HandlerError::Permanent(PermanentError::new("spec.field must be even"))),
                _ => Ok(Value::Null),
            }
        })
        .id("check")
        .operations(["CREATE", "UPDATE"])
        .on_mutate("kopf.dev/v1/kopfexamples", |cause: Cause| async move {
            cause.patch().spec("default", "filled");
            Ok::<_, HandlerError>(Value::Null)
        })
        .id("defaults");
    tokio::spawn(op.serve_with_listener(listener, std::future::pending()));
    addr
}

fn review(operation: &str, spec: Value) -> Value {
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
            "kind": {"group": "kopf.dev", "version": "v1", "kind": "KopfExample"},
            "resource": {"group": "kopf.dev", "version": "v1", "resource": "kopfexamples"},
            "requestKind": {"group": "kopf.dev", "version": "v1", "kind": "KopfExample"},
            "requestResource": {"group": "kopf.dev", "version": "v1", "resource": "kopfexamples"},
            "name": "kopf-example-1",
            "namespace": "default",
            "operation": operation,
            "userInfo": {"username": "admin", "groups": ["system:authenticated"]},
            "object": {"apiVersion": "kopf.dev/v1", "kind": "KopfExample", "metadata": {"name": "kopf-example-1", "namespace": "default"}, "spec": spec},
            "oldObject": null,
            "dryRun": false,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"},
        }
    })
}

/// The endpoint served over HTTPS for `handlers` on `servers`; a client trusting its CA only.
async fn endpoint(handlers: Vec<Handler>, servers: Vec<Arc<dyn HandlerClient>>) -> (kube::Client, tokio::sync::watch::Sender<bool>) {
    let resolved = ("kopf.dev".to_string(), "v1".to_string(), "kopfexamples".to_string());
    let reviewer = Reviewer::new(handlers.into_iter().map(|h| (h, resolved.clone())).collect(), Arc::new(servers), Logger::default());
    let loaded = webhooks::load(&Certificate::SelfSigned, None, &[]).unwrap();
    let ca = loaded.ca_bundle.borrow().clone();
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let local = webhooks::serve("127.0.0.1:0", router(Reviewers::new(reviewer)), loaded, Logger::default(), stopped).await.unwrap();
    let mut config = kube::Config::new(format!("https://{local}").parse().unwrap());
    use tokio_rustls::rustls::pki_types::{CertificateDer, pem::PemObject as _};
    config.root_cert = Some(vec![CertificateDer::from_pem_slice(ca.as_bytes()).unwrap().to_vec()]);
    (kube::Client::try_from(config).unwrap(), stop)
}

/// POSTs `body` to `path`: the status and the body as JSON (or text).
async fn post(client: &kube::Client, path: &str, body: Vec<u8>) -> (u16, Value) {
    let req = http::Request::post(path).header("content-type", "application/json").body(kube::client::Body::from(body)).unwrap();
    let res = client.send(req).await.expect("the endpoint answers over verified TLS");
    let status = res.status().as_u16();
    let bytes = res.into_body().collect_bytes().await.unwrap();
    (status, serde_json::from_slice(&bytes).unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into())))
}

fn patch_of(answer: &Value) -> Option<Value> {
    let text = answer["response"]["patch"].as_str()?;
    serde_json::from_slice(&base64::engine::general_purpose::STANDARD.decode(text).unwrap()).ok()
}

async fn described(addr: &str) -> (Arc<dyn HandlerClient>, Vec<Handler>) {
    let server = Server::new(addr).unwrap();
    let described = server.describe().await.unwrap();
    let handlers = described.handlers.iter().map(|s| Handler::from_spec(s, 0).unwrap()).collect();
    (Arc::new(server), handlers)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reviews_are_allowed_denied_and_mutated_by_a_real_handler_server() {
    let (server, handlers) = described(&handler_server().await).await;
    let (client, _stop) = endpoint(handlers, vec![server]).await;

    let (status, allowed) = post(&client, "/check", serde_json::to_vec(&review("CREATE", json!({"field": 2}))).unwrap()).await;
    assert_eq!(status, 200, "{allowed}");
    assert_eq!(allowed["kind"], "AdmissionReview");
    assert_eq!(allowed["response"]["uid"], "705ab4f5-6393-11e8-b7cc-42010a800002");
    assert_eq!(allowed["response"]["allowed"], true, "{allowed}");
    assert!(allowed["response"].get("patch").is_none());

    let (_, denied) = post(&client, "/check", serde_json::to_vec(&review("CREATE", json!({"field": 3}))).unwrap()).await;
    assert_eq!(denied["response"]["allowed"], false, "{denied}");
    assert_eq!(denied["response"]["status"], json!({"code": 400, "message": "spec.field must be even"}));

    // `check` reviews CREATE and UPDATE only: a DELETE reaching it is allowed unasked.
    let mut delete = review("DELETE", json!({"field": 3}));
    delete["request"]["oldObject"] = delete["request"]["object"].take();
    let (_, other_op) = post(&client, "/check", serde_json::to_vec(&delete).unwrap()).await;
    assert_eq!(other_op["response"]["allowed"], true, "{other_op}");

    let (_, mutated) = post(&client, "/defaults", serde_json::to_vec(&review("CREATE", json!({"field": 3}))).unwrap()).await;
    assert_eq!(mutated["response"]["allowed"], true, "{mutated}");
    assert_eq!(mutated["response"]["patchType"], "JSONPatch");
    assert_eq!(patch_of(&mutated), Some(json!([{"op": "add", "path": "/spec/default", "value": "filled"}])));

    let (status, text) = post(&client, "/nobody", serde_json::to_vec(&review("CREATE", json!({}))).unwrap()).await;
    assert_eq!((status, text), (404, json!("no admission handler is served at /nobody")));
    let (status, text) = post(&client, "/check", b"{\"request\": {}}".to_vec()).await;
    assert_eq!((status, text), (400, json!("the AdmissionReview request has no uid")));
    let (status, _) = post(&client, "/check", b"not json".to_vec()).await;
    assert_eq!(status, 400);
}

/// Allows every review and keeps the headers each came with.
#[derive(Default)]
struct Headers(std::sync::Mutex<Vec<HashMap<String, String>>>);

impl HandlerClient for Headers {
    fn addr(&self) -> &str {
        "headers://handlers"
    }
    fn handle(&self, _: pb::HandleRequest, _: Duration) -> BoxFuture<'_, Result<pb::HandleResponse, CallFailure>> {
        Box::pin(async { Err(CallFailure::Unreachable("reviews only".into())) })
    }
    fn daemon(&self, _: pb::DaemonRequest) -> BoxFuture<'_, Result<DaemonStream, CallFailure>> {
        Box::pin(async { Err(CallFailure::Unreachable("reviews only".into())) })
    }
    fn activity(&self, _: pb::ActivityRequest, _: Duration) -> BoxFuture<'_, Result<pb::ActivityResponse, CallFailure>> {
        Box::pin(async { Err(CallFailure::Unreachable("reviews only".into())) })
    }
    fn admit(&self, req: pb::AdmitRequest, _: Duration) -> BoxFuture<'_, Result<pb::AdmitResponse, CallFailure>> {
        self.0.lock().unwrap().push(req.headers);
        Box::pin(async { Ok(pb::AdmitResponse { allowed: true, ..Default::default() }) })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handlers_get_the_webhook_requests_headers_but_not_its_authorization() {
    let spec = pb::HandlerSpec {
        id: "check".into(),
        kind: pb::HandlerKind::Validate as i32,
        resource: Some(pb::ResourceSelector { name: "kopfexamples".into(), ..Default::default() }),
        ..Default::default()
    };
    let server = Arc::new(Headers::default());
    let (client, _stop) = endpoint(vec![Handler::from_spec(&spec, 0).unwrap()], vec![server.clone()]).await;
    let body = serde_json::to_vec(&review("CREATE", json!({}))).unwrap();
    let req = http::Request::post("/check")
        .header("content-type", "application/json")
        .header("X-Request-Id", "req-1")
        .header("Authorization", "Bearer secret")
        .body(kube::client::Body::from(body))
        .unwrap();
    let res = client.send(req).await.expect("the endpoint answers over verified TLS");
    assert_eq!(res.status().as_u16(), 200);
    let seen = server.0.lock().unwrap().clone();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].get("x-request-id").map(String::as_str), Some("req-1"), "{seen:?}");
    assert_eq!(seen[0].get("content-type").map(String::as_str), Some("application/json"), "{seen:?}");
    assert!(!seen[0].contains_key("authorization"), "{seen:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_server_that_is_down_denies_when_fail_closed_and_is_skipped_otherwise() {
    // Nothing listens there: connection refused.
    let dead: Arc<dyn HandlerClient> = Arc::new(Server::new("http://127.0.0.1:1").unwrap());
    let spec = |id: &str, fail_closed: bool| pb::HandlerSpec {
        id: id.into(),
        kind: pb::HandlerKind::Validate as i32,
        resource: Some(pb::ResourceSelector { name: "kopf.dev/v1/kopfexamples".into(), ..Default::default() }),
        admission: Some(pb::AdmissionOptions { fail_closed, ..Default::default() }),
        options: Some(pb::HandlerOptions { call_timeout_seconds: Some(2.0), ..Default::default() }),
        ..Default::default()
    };
    let handlers = vec![Handler::from_spec(&spec("strict", true), 0).unwrap(), Handler::from_spec(&spec("lenient", false), 0).unwrap()];
    let (client, _stop) = endpoint(handlers, vec![dead]).await;
    let body = serde_json::to_vec(&review("CREATE", json!({"field": 2}))).unwrap();

    let (status, strict) = post(&client, "/strict", body.clone()).await;
    assert_eq!(status, 200);
    assert_eq!(strict["response"]["allowed"], false, "{strict}");
    assert_eq!(strict["response"]["status"]["code"], 500);
    let message = strict["response"]["status"]["message"].as_str().unwrap();
    assert!(message.starts_with("Handler 'strict' failed: ") && message.contains("unreachable"), "{message}");

    let (_, lenient) = post(&client, "/lenient", body).await;
    assert_eq!(lenient["response"]["allowed"], true, "{lenient}");
    let warning = lenient["response"]["warnings"][0].as_str().unwrap();
    assert!(warning.starts_with("Handler 'lenient' was skipped: "), "{warning}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_slower_than_the_webhook_timeout_is_answered_in_time_by_its_failure_policy() {
    // A real handler server whose handlers never answer, with a 1 s call timeout (so the
    // webhook's `timeoutSeconds` is 1): the endpoint must answer before the API server's
    // timeout, denying for the fail-closed handler and allowing for the other.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = format!("http://{}", listener.local_addr().unwrap());
    let op = Operator::new()
        .on_validate("kopf.dev/v1/kopfexamples", |_cause: Cause| std::future::pending::<Result<Value, HandlerError>>())
        .id("stuck")
        .call_timeout(Duration::from_secs(1))
        .fail_closed()
        .on_validate("kopf.dev/v1/kopfexamples", |_cause: Cause| std::future::pending::<Result<Value, HandlerError>>())
        .id("stuck-open")
        .call_timeout(Duration::from_secs(1));
    tokio::spawn(op.serve_with_listener(listener, std::future::pending()));
    let (server, handlers) = described(&addr).await;
    let (client, _stop) = endpoint(handlers, vec![server]).await;
    let body = serde_json::to_vec(&review("CREATE", json!({"field": 2}))).unwrap();

    for (path, allowed) in [("/stuck", false), ("/stuck-open", true)] {
        let started = std::time::Instant::now();
        let (status, answer) = post(&client, path, body.clone()).await;
        let took = started.elapsed();
        assert_eq!(status, 200, "{answer}");
        assert_eq!(answer["response"]["allowed"], allowed, "{path}: {answer}");
        assert!(took < Duration::from_secs(1), "{path}: answered within the webhook's 1 s timeout, in {took:?}");
        if !allowed {
            let message = answer["response"]["status"]["message"].as_str().unwrap();
            assert!(message.starts_with("Handler 'stuck' failed: "), "{message}");
        }
    }
}
