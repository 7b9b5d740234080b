//! The SDK as the controller sees it: a real tonic client talking to a handler server served
//! in-process on 127.0.0.1:0.

use std::time::Duration;

use bosun_sdk::proto::handler_server_client::HandlerServerClient;
use bosun_sdk::proto::{self as pb, HandleRequest, HandleResponse, Outcome};
use bosun_sdk::{Cause, ErrorsMode, HandlerError, Operator, PermanentError, TemporaryError};
use serde_json::{Value, json};
use tokio::sync::oneshot;
use tonic::transport::Channel;

const KEX: &str = "kopf.dev/v1/kopfexamples";

/// A served operator: its client, and the way to stop it.
struct Served {
    client: HandlerServerClient<Channel>,
    endpoint: String,
    stop: oneshot::Sender<()>,
    server: tokio::task::JoinHandle<Result<(), bosun_sdk::ServeError>>,
}

async fn serve(operator: Operator) -> Served {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    let (stop, stopped) = oneshot::channel::<()>();
    let server = tokio::spawn(operator.serve_with_listener(listener, async {
        let _ = stopped.await;
    }));
    // The listener is bound before spawning, so connecting cannot race the server's start.
    let client = HandlerServerClient::connect(endpoint.clone()).await.unwrap();
    Served { client, endpoint, stop, server }
}

fn object() -> Value {
    json!({
        "apiVersion": "kopf.dev/v1",
        "kind": "KopfExample",
        "metadata": {"name": "kopf-example-1", "namespace": "default", "labels": {"somelabel": "somevalue"}},
        "spec": {"duration": "1m", "field": "value", "items": ["item1", "item2"]},
    })
}

fn request(id: &str) -> HandleRequest {
    HandleRequest {
        handler_id: id.into(),
        reason: pb::Reason::Create.into(),
        object: serde_json::to_vec(&object()).unwrap(),
        ..Default::default()
    }
}

async fn handle(served: &mut Served, request: HandleRequest) -> HandleResponse {
    served.client.handle(request).await.unwrap().into_inner()
}

fn json_of(bytes: &[u8]) -> Value {
    serde_json::from_slice(bytes).unwrap()
}

async fn create_fn(cause: Cause) -> Result<Value, HandlerError> {
    cause.info(format!("Creating {}", cause.name()));
    cause.patch().status("phase", "Created").label("handled", "yes");
    cause.info_event("SomeReason", "Some message");
    Ok(json!({"message": "hello world"}))
}

fn outcomes_operator() -> Operator {
    Operator::new()
        .on_create(KEX, |_| async { Err::<(), _>(TemporaryError::new("Expected recoverable error.").delay(Duration::from_secs(1)).into()) })
        .id("temporary")
        .on_create(KEX, |_| async { Err::<(), _>(PermanentError::new("Fail once and for all.").into()) })
        .id("permanent")
        .on_create(KEX, |_| async {
            std::fs::read("/definitely/not/here")?;
            Ok(())
        })
        .id("unexpected")
        .errors(ErrorsMode::Permanent)
        .on_create(KEX, |cause: Cause| async move {
            cause.info("about to panic");
            if cause.retry() < 100 {
                panic!("the handler lost its way");
            }
            Ok(())
        })
        .id("panicking")
        .on_create(KEX, |_| async { Ok(json!({"never": "called"})) })
        .id("skipped")
        .when(|cause| cause.label("somelabel") == Some("othervalue"))
        .on_create(KEX, |_| async { Ok(json!({"called": true})) })
        .id("matched")
        .when(|cause| cause.label("somelabel") == Some("somevalue"))
        .on_create(KEX, |_| async { Ok(()) })
        .id("returns_unit")
}

#[tokio::test]
async fn describe_lists_handlers_in_registration_order_with_their_options() {
    let mut served = serve(
        Operator::new()
            .server_name("test-server")
            .on_create(KEX, create_fn)
            .retries(3)
            .on_field(KEX, "spec.field", |_| async { Ok(()) })
            .on_delete(KEX, |_| async { Ok(()) })
            .when(|_| true),
    )
    .await;
    let described = served.client.describe(pb::DescribeRequest::default()).await.unwrap().into_inner();
    let listed: Vec<(&str, pb::HandlerKind)> = described.handlers.iter().map(|h| (h.id.as_str(), h.kind())).collect();
    assert_eq!(
        listed,
        [
            ("create_fn", pb::HandlerKind::Create),
            ("field_fn/spec.field", pb::HandlerKind::Field),
            ("delete_fn", pb::HandlerKind::Delete),
        ]
    );
    assert_eq!(described.server_name, "test-server");
    assert_eq!(described.handlers[0].options.unwrap().retries, Some(3));
    assert_eq!(described.handlers[1].field, "spec.field");
    assert!(described.handlers[2].filters.as_ref().unwrap().has_when);
}

#[tokio::test]
async fn handle_sends_back_the_result_patch_events_and_logs() {
    let mut served = serve(Operator::new().on_create(KEX, create_fn)).await;
    let response = handle(&mut served, request("create_fn")).await;
    assert_eq!(response.outcome(), Outcome::Success);
    assert_eq!(json_of(&response.result), json!({"message": "hello world"}));
    assert_eq!(
        json_of(&response.merge_patch),
        json!({"status": {"phase": "Created"}, "metadata": {"labels": {"handled": "yes"}}})
    );
    assert!(response.json_patch.is_empty());
    let events: Vec<_> = response.events.iter().map(|e| (e.r#type.as_str(), e.reason.as_str(), e.message.as_str())).collect();
    assert_eq!(events, [("Normal", "SomeReason", "Some message")]);
    let logs: Vec<_> = response.logs.iter().map(|l| (l.level(), l.message.as_str())).collect();
    assert_eq!(logs, [(pb::log_line::Level::Info, "Creating kopf-example-1")]);
}

#[tokio::test]
async fn every_way_a_handler_ends_becomes_its_outcome() {
    let mut served = serve(outcomes_operator()).await;
    let table: [(&str, Outcome, &str, Option<f64>, &str); 7] = [
        ("temporary", Outcome::TemporaryError, "Expected recoverable error.", Some(1.0), ""),
        ("permanent", Outcome::PermanentError, "Fail once and for all.", None, ""),
        ("unexpected", Outcome::UnexpectedError, "No such file or directory (os error 2)", None, ""),
        ("panicking", Outcome::UnexpectedError, "the handler panicked: the handler lost its way", None, ""),
        ("skipped", Outcome::Skipped, "", None, ""),
        ("matched", Outcome::Success, "", None, r#"{"called":true}"#),
        ("returns_unit", Outcome::Success, "", None, ""),
    ];
    for (id, outcome, message, delay, result) in table {
        let response = handle(&mut served, request(id)).await;
        assert_eq!(
            (response.outcome(), response.message.as_str(), response.delay_seconds, String::from_utf8(response.result).unwrap().as_str()),
            (outcome, message, delay, result),
            "handler {id}"
        );
    }
}

#[tokio::test]
async fn a_panicking_handler_keeps_its_logs_and_the_server_alive() {
    let mut served = serve(outcomes_operator()).await;
    let first = handle(&mut served, request("panicking")).await;
    assert_eq!(first.logs[0].message, "about to panic");
    let after = handle(&mut served, request("returns_unit")).await;
    assert_eq!(after.outcome(), Outcome::Success);
}

#[tokio::test]
async fn an_unknown_handler_id_is_not_found_with_the_known_ids() {
    let mut served = serve(Operator::new().on_create(KEX, create_fn).on_delete(KEX, |_| async { Ok(()) })).await;
    let status = served.client.handle(request("nope")).await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::NotFound);
    assert!(status.message().contains(r#"has no handler "nope"; it has: create_fn, delete_fn"#), "{}", status.message());
}

#[tokio::test]
async fn an_object_that_is_not_json_is_an_invalid_argument() {
    let mut served = serve(Operator::new().on_create(KEX, create_fn)).await;
    let status = served
        .client
        .handle(HandleRequest { object: b"{oops".to_vec(), ..request("create_fn") })
        .await
        .unwrap_err();
    assert_eq!(status.code(), tonic::Code::InvalidArgument);
    assert!(status.message().contains("field `object`"), "{}", status.message());
}

#[tokio::test]
async fn field_handlers_get_the_fields_old_and_new_values() {
    let operator = Operator::new().on_field(KEX, "spec.field", |cause: Cause| async move {
        Ok(format!("{} -> {}", cause.old().unwrap(), cause.new().unwrap()))
    });
    let mut served = serve(operator).await;
    let response = handle(
        &mut served,
        HandleRequest {
            reason: pb::Reason::Update.into(),
            old: br#""value""#.to_vec(),
            new: br#""newvalue""#.to_vec(),
            ..request("field_fn/spec.field")
        },
    )
    .await;
    assert_eq!(json_of(&response.result), json!(r#""value" -> "newvalue""#));
}

#[tokio::test]
async fn health_reports_serving_for_the_server_and_the_contract() {
    use tonic_health::pb::health_client::HealthClient;
    use tonic_health::pb::{HealthCheckRequest, health_check_response::ServingStatus};
    let served = serve(Operator::new().on_create(KEX, create_fn)).await;
    let channel = Channel::from_shared(served.endpoint.clone()).unwrap().connect().await.unwrap();
    let mut health = HealthClient::new(channel);
    for service in ["", "bosun.v1.HandlerServer"] {
        let status = health
            .check(HealthCheckRequest { service: service.into() })
            .await
            .unwrap()
            .into_inner()
            .status();
        assert_eq!(status, ServingStatus::Serving, "service {service:?}");
    }
}

#[tokio::test]
async fn the_server_stops_cleanly_when_asked() {
    let served = serve(Operator::new().on_create(KEX, create_fn)).await;
    served.stop.send(()).unwrap();
    served.server.await.unwrap().unwrap();
}

#[tokio::test]
async fn invalid_registrations_fail_before_listening() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let result = Operator::new().id("x").serve_with_listener(listener, async {}).await;
    let error = result.unwrap_err().to_string();
    assert!(error.contains("`.id()` was called before any handler was registered"), "{error}");
}
