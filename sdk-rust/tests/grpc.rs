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
        [("create_fn", pb::HandlerKind::Create), ("field_fn/spec.field", pb::HandlerKind::Field), ("delete_fn", pb::HandlerKind::Delete),]
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
    assert_eq!(json_of(&response.merge_patch), json!({"status": {"phase": "Created"}, "metadata": {"labels": {"handled": "yes"}}}));
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
    let status = served.client.handle(HandleRequest { object: b"{oops".to_vec(), ..request("create_fn") }).await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::InvalidArgument);
    assert!(status.message().contains("field `object`"), "{}", status.message());
}

#[tokio::test]
async fn field_handlers_get_the_fields_old_and_new_values() {
    let operator = Operator::new()
        .on_field(KEX, "spec.field", |cause: Cause| async move { Ok(format!("{} -> {}", cause.old().unwrap(), cause.new().unwrap())) });
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
        let status = health.check(HealthCheckRequest { service: service.into() }).await.unwrap().into_inner().status();
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

#[tokio::test]
async fn sub_handlers_are_declared_by_the_parent_and_routed_to_its_subhandlers_function() {
    let operator = Operator::new()
        .on_create(KEX, |cause: Cause| async move {
            for item in cause.spec()["items"].as_array().into_iter().flatten() {
                cause.subhandler(item.as_str().unwrap(), json!({"item": item}));
            }
            Ok(())
        })
        .id("create_fn")
        .subhandlers(|cause: Cause| async move { Ok(format!("{} got {}", cause.subhandler_id().unwrap(), cause.param().unwrap()["item"])) })
        .on_field(KEX, "spec.field", |_| async { Ok(()) })
        .subhandlers(|cause: Cause| async move { Ok(cause.handler_id().to_string()) });
    let mut served = serve(operator).await;

    let parent = handle(&mut served, request("create_fn")).await;
    let declared: Vec<(&str, Value)> = parent.subhandlers.iter().map(|s| (s.id.as_str(), json_of(&s.param))).collect();
    assert_eq!(declared, [("item1", json!({"item": "item1"})), ("item2", json!({"item": "item2"}))]);

    let table = [
        ("create_fn/item1", br#"{"item":"item1"}"#.as_slice(), json!("item1 got \"item1\"")),
        ("field_fn/spec.field/x/y", b"{}".as_slice(), json!("field_fn/spec.field/x/y")),
    ];
    for (id, param, expected) in table {
        let response = handle(&mut served, HandleRequest { param: param.to_vec(), ..request(id) }).await;
        assert_eq!(json_of(&response.result), expected, "{id}");
    }
}

#[tokio::test]
async fn a_sub_handler_call_for_a_parent_without_a_subhandlers_function_is_not_found() {
    let mut served = serve(Operator::new().on_create(KEX, create_fn)).await;
    let status = served.client.handle(request("create_fn/item1")).await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::NotFound);
    assert!(status.message().contains("has no `.subhandlers(...)` function"), "{}", status.message());
}

#[tokio::test]
async fn adopted_objects_travel_back_as_owned_with_the_owners_labels() {
    let operator = Operator::new().on_create(KEX, |cause: Cause| async move {
        cause.adopt(json!({"apiVersion": "v1", "kind": "Pod", "spec": {}}));
        cause.adopt_applied(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}));
        Ok(())
    });
    let mut served = serve(operator).await;
    let response = handle(&mut served, request("create_fn")).await;
    let owned: Vec<(Value, bool, bool)> =
        response.owned.iter().map(|o| (json_of(&o.object)["kind"].clone(), o.apply, o.copy_labels)).collect();
    assert_eq!(owned, [(json!("Pod"), false, true), (json!("ConfigMap"), true, true)]);
}

#[tokio::test]
async fn when_predicates_and_callback_filters_must_all_hold() {
    let ok = |_: Cause| async { Ok(()) };
    let operator = Operator::new()
        .on_create(KEX, ok)
        .id("label_matches")
        .label_when("somelabel", |value, _| value == Some("somevalue"))
        .on_create(KEX, ok)
        .id("label_absent")
        .label_when("nonexistent", |value, _| value.is_none())
        .on_create(KEX, ok)
        .id("all_hold")
        .label_when("somelabel", |value, _| value.is_some())
        .when(|cause| cause.spec()["field"] == "value")
        .on_create(KEX, ok)
        .id("one_fails")
        .when(|_| true)
        .annotation_when("someannotation", |value, _| value == Some("not-this-value"));
    let mut served = serve(operator).await;
    let table = [
        ("label_matches", Outcome::Success),
        ("label_absent", Outcome::Success),
        ("all_hold", Outcome::Success),
        ("one_fails", Outcome::Skipped),
    ];
    for (id, outcome) in table {
        assert_eq!(handle(&mut served, request(id)).await.outcome(), outcome, "{id}");
    }
}

#[cfg(unix)]
#[tokio::test]
async fn a_server_on_a_unix_socket_answers_and_removes_its_socket_when_stopped() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("handlers.sock");
    let (stop, stopped) = oneshot::channel::<()>();
    let server = tokio::spawn(Operator::new().on_create(KEX, create_fn).serve_until(&format!("unix://{}", path.display()), async {
        let _ = stopped.await;
    }));
    // The socket appears once the server listens; nothing else tells when that is.
    while !path.exists() {
        tokio::task::yield_now().await;
    }
    let socket = path.clone();
    let channel = tonic::transport::Endpoint::from_static("http://localhost")
        .connect_with_connector(tower::service_fn(move |_| {
            let socket = socket.clone();
            async move { Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(tokio::net::UnixStream::connect(socket).await?)) }
        }))
        .await
        .unwrap();
    let response = HandlerServerClient::new(channel).handle(request("create_fn")).await.unwrap().into_inner();
    assert_eq!(json_of(&response.result), json!({"message": "hello world"}));

    stop.send(()).unwrap();
    server.await.unwrap().unwrap();
    assert!(!path.exists());
}

#[tokio::test]
async fn activities_answer_with_their_outcome_result_and_logs() {
    let operator = Operator::new()
        .on_startup(|cause: Cause| async move {
            cause.info("Initialising the task-lock...");
            if cause.retry() < 1 {
                Err(TemporaryError::new("Going to succeed soon").delay(Duration::from_secs(1)))?
            }
            Ok(())
        })
        .id("startup_fn")
        .on_probe(|_| async { Ok(json!({"healthy": true})) })
        .id("probe_fn")
        .on_create(KEX, create_fn);
    let mut served = serve(operator).await;
    let activity = |id: &str, retry| pb::ActivityRequest { handler_id: id.into(), retry, ..Default::default() };

    let first = served.client.activity(activity("startup_fn", 0)).await.unwrap().into_inner();
    assert_eq!(
        (first.outcome(), first.message.as_str(), first.delay_seconds),
        (Outcome::TemporaryError, "Going to succeed soon", Some(1.0))
    );
    assert_eq!(first.logs[0].message, "Initialising the task-lock...");
    let second = served.client.activity(activity("startup_fn", 1)).await.unwrap().into_inner();
    assert_eq!(second.outcome(), Outcome::Success);
    let probe = served.client.activity(activity("probe_fn", 0)).await.unwrap().into_inner();
    assert_eq!(json_of(&probe.result), json!({"healthy": true}));

    let described = served.client.describe(pb::DescribeRequest::default()).await.unwrap().into_inner();
    assert_eq!(described.handlers[0].kind(), pb::HandlerKind::Startup);
    assert_eq!(described.handlers[0].resource, None);
}

#[tokio::test]
async fn activities_and_handlers_are_not_called_through_each_others_rpc() {
    let operator =
        Operator::new().on_startup(|_| async { Ok(()) }).id("startup_fn").on_daemon(KEX, |_| async { Ok(()) }).on_create(KEX, create_fn);
    let mut served = serve(operator).await;
    for (id, rpc) in [("startup_fn", "Activity"), ("daemon_fn", "Daemon")] {
        let status = served.client.handle(request(id)).await.unwrap_err();
        assert_eq!(status.code(), tonic::Code::InvalidArgument, "{}", status.message());
        assert!(status.message().contains(&format!("called through {rpc}, not Handle")), "{}", status.message());
    }
    let status = served.client.activity(pb::ActivityRequest { handler_id: "create_fn".into(), ..Default::default() }).await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::NotFound);
    assert!(status.message().contains(r#"has no activity "create_fn"; it has: startup_fn"#), "{}", status.message());
}

#[tokio::test]
async fn timers_describe_their_schedule() {
    let operator = Operator::new()
        .on_timer(KEX, Duration::from_secs(10), |_| async { Ok(()) })
        .idle(Duration::from_secs(5))
        .initial_delay(Duration::from_millis(500))
        .sharp();
    let mut served = serve(operator).await;
    let described = served.client.describe(pb::DescribeRequest::default()).await.unwrap().into_inner();
    let timer = &described.handlers[0];
    assert_eq!((timer.id.as_str(), timer.kind()), ("timer_fn", pb::HandlerKind::Timer));
    assert_eq!(timer.timer, Some(pb::TimerOptions { interval_seconds: 10.0, idle_seconds: 5.0, initial_delay_seconds: 0.5, sharp: true }));
}

#[tokio::test]
async fn admission_handlers_allow_deny_and_mutate() {
    let operator = Operator::new()
        .on_validate(KEX, |cause: Cause| async move {
            if cause.spec()["field"] == "forbidden" {
                Err(PermanentError::new("spec.field must not be forbidden"))?
            }
            Ok(())
        })
        .id("check_field")
        .operations(["CREATE", "UPDATE"])
        .fail_closed()
        .on_mutate(KEX, |cause: Cause| async move {
            let operation = cause.admission_request().unwrap()["operation"].clone();
            cause.patch().label("reviewed", operation.as_str().unwrap_or_default());
            Ok(())
        })
        .id("label_it");
    let mut served = serve(operator).await;
    let review = |operation: &str, field: &str| {
        let object = json!({"metadata": {"name": "x"}, "spec": {"field": field}});
        let (object, old) = if operation == "DELETE" { (Value::Null, object) } else { (object, Value::Null) };
        json!({"operation": operation, "object": object, "oldObject": old})
    };
    let admit = |id: &str, review: Value| pb::AdmitRequest {
        handler_id: id.into(),
        request: serde_json::to_vec(&review).unwrap(),
        ..Default::default()
    };

    let table = [
        ("check_field", review("CREATE", "value"), true, "", Value::Null),
        ("check_field", review("CREATE", "forbidden"), false, "spec.field must not be forbidden", Value::Null),
        ("check_field", review("DELETE", "forbidden"), false, "spec.field must not be forbidden", Value::Null),
        ("label_it", review("UPDATE", "value"), true, "", json!({"metadata": {"labels": {"reviewed": "UPDATE"}}})),
    ];
    for (id, review, allowed, message, patch) in table {
        let response = served.client.admit(admit(id, review.clone())).await.unwrap().into_inner();
        let patch_seen = if response.merge_patch.is_empty() { Value::Null } else { json_of(&response.merge_patch) };
        assert_eq!((response.allowed, response.message.as_str(), patch_seen), (allowed, message, patch), "{id} {review}");
    }

    let described = served.client.describe(pb::DescribeRequest::default()).await.unwrap().into_inner();
    let admission = described.handlers[0].admission.clone().unwrap();
    assert_eq!((admission.operations, admission.fail_closed), (vec!["CREATE".to_string(), "UPDATE".to_string()], true));
    let status = served.client.admit(admit("nope", json!({}))).await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::NotFound);
}

async fn daemon_messages(served: &mut Served, id: &str) -> tonic::Streaming<pb::DaemonMessage> {
    let request = pb::DaemonRequest { handler_id: id.into(), object: serde_json::to_vec(&object()).unwrap(), ..Default::default() };
    served.client.daemon(request).await.unwrap().into_inner()
}

#[tokio::test]
async fn a_daemon_streams_what_it_records_at_once_and_then_its_exit() {
    use pb::daemon_message::Message;
    let operator = Operator::new()
        .on_daemon(KEX, |cause: Cause| async move {
            cause.info(format!("Serving {}", cause.name()));
            cause.patch().status("phase", "Running");
            cause.warn_event("SomeReason", "Some message");
            Err::<(), _>(TemporaryError::new("restart me").delay(Duration::from_secs(2)).into())
        })
        .id("daemon_fn")
        .cancellation_timeout(Duration::from_secs(5));
    let mut served = serve(operator).await;
    let mut stream = daemon_messages(&mut served, "daemon_fn").await;
    let mut seen = Vec::new();
    while let Some(message) = stream.message().await.unwrap() {
        seen.push(match message.message.unwrap() {
            Message::Log(line) => format!("log {}", line.message),
            Message::MergePatch(patch) => format!("patch {}", json_of(&patch)),
            Message::JsonPatch(ops) => format!("json-patch {}", json_of(&ops)),
            Message::Event(event) => format!("event {} {}", event.r#type, event.message),
            Message::Exit(exit) => format!("exit {:?} {} {:?}", exit.outcome(), exit.message, exit.delay_seconds),
        });
    }
    assert_eq!(
        seen,
        [
            "log Serving kopf-example-1",
            r#"patch {"status":{"phase":"Running"}}"#,
            "event Warning Some message",
            "exit TemporaryError restart me Some(2.0)",
        ]
    );
    let described = served.client.describe(pb::DescribeRequest::default()).await.unwrap().into_inner();
    assert_eq!(described.handlers[0].daemon.unwrap().cancellation_timeout_seconds, 5.0);
}

#[tokio::test]
async fn cancelling_a_daemons_call_asks_it_to_stop() {
    let (saw_stop, mut stops) = tokio::sync::mpsc::unbounded_channel::<bool>();
    let operator = Operator::new().on_daemon(KEX, move |cause: Cause| {
        let saw_stop = saw_stop.clone();
        async move {
            cause.info("running");
            cause.stopped().wait().await;
            let _ = saw_stop.send(cause.stopped().is_stopped());
            Ok(())
        }
    });
    let mut served = serve(operator).await;
    let mut stream = daemon_messages(&mut served, "daemon_fn").await;
    assert!(stream.message().await.unwrap().is_some(), "the daemon runs");
    drop(stream);
    let stopped = tokio::time::timeout(Duration::from_secs(10), stops.recv()).await.expect("the daemon was asked to stop");
    assert_eq!(stopped, Some(true));
}

#[tokio::test]
async fn stop_daemon_asks_a_running_daemon_to_stop_and_its_stream_ends_with_what_it_did_then_and_its_exit() {
    use pb::daemon_message::Message;
    let operator = Operator::new().on_daemon(KEX, |cause: Cause| async move {
        cause.info("running");
        cause.stopped().wait().await;
        cause.info("cleaning up");
        Ok(())
    });
    let mut served = serve(operator).await;
    let mut body = object();
    body["metadata"]["uid"] = json!("uid-1");
    let request = pb::DaemonRequest { handler_id: "daemon_fn".into(), object: serde_json::to_vec(&body).unwrap(), ..Default::default() };
    let mut stream = served.client.daemon(request).await.unwrap().into_inner();
    assert!(stream.message().await.unwrap().is_some(), "the daemon runs");

    let stop = |uid: &str| pb::StopDaemonRequest { handler_id: "daemon_fn".into(), uid: uid.into(), ..Default::default() };
    let other = served.client.stop_daemon(stop("uid-2")).await.unwrap().into_inner();
    assert!(!other.stopping, "no daemon of that object runs");
    let said = served.client.stop_daemon(stop("uid-1")).await.unwrap().into_inner();
    assert!(said.stopping);
    let mut rest = Vec::new();
    while let Some(message) = tokio::time::timeout(Duration::from_secs(10), stream.message()).await.expect("the stream ends").unwrap() {
        rest.push(match message.message.unwrap() {
            Message::Log(line) => format!("log {}", line.message),
            Message::Exit(exit) => format!("exit {:?}", exit.outcome()),
            other => format!("{other:?}"),
        });
    }
    assert_eq!(rest, ["log cleaning up", "exit Success"]);
    let after = served.client.stop_daemon(stop("uid-1")).await.unwrap().into_inner();
    assert!(!after.stopping, "an ended daemon is forgotten");
}

/// The exit is the daemon's real end: sent only once the function has returned, even when it
/// takes a while to after its stop, and it says whether it was stopped.
#[tokio::test]
async fn a_stopped_daemons_exit_comes_only_after_its_function_returned_and_says_it_was_stopped() {
    use pb::daemon_message::Message;
    use std::sync::atomic::{AtomicBool, Ordering};
    let returned = std::sync::Arc::new(AtomicBool::new(false));
    let seen = returned.clone();
    let operator = Operator::new().on_daemon(KEX, move |cause: Cause| {
        let returned = returned.clone();
        async move {
            cause.info("running");
            if cause.name() == "kopf-example-1" {
                cause.stopped().wait().await;
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
            returned.store(true, Ordering::SeqCst);
            Ok(())
        }
    });
    let mut served = serve(operator).await;
    let mut stream = daemon_messages(&mut served, "daemon_fn").await;
    assert!(stream.message().await.unwrap().is_some(), "the daemon runs");
    // The object has no uid: the daemon is known by its handler and the empty uid.
    let stop = pb::StopDaemonRequest { handler_id: "daemon_fn".into(), ..Default::default() };
    assert!(served.client.stop_daemon(stop).await.unwrap().into_inner().stopping);
    assert!(!seen.load(Ordering::SeqCst), "still winding down");
    let exit = loop {
        let message = tokio::time::timeout(Duration::from_secs(10), stream.message()).await.expect("the exit comes").unwrap();
        if let Some(Message::Exit(exit)) = message.expect("an exit before the end").message {
            break exit;
        }
    };
    assert!(seen.load(Ordering::SeqCst), "the exit comes after the function returned");
    assert!(exit.stopped, "it was stopped");

    // One that ends on its own says it was not stopped.
    let mut other = object();
    other["metadata"]["name"] = json!("kopf-example-2");
    let request = pb::DaemonRequest { handler_id: "daemon_fn".into(), object: serde_json::to_vec(&other).unwrap(), ..Default::default() };
    let mut stream = served.client.daemon(request).await.unwrap().into_inner();
    let mut last = None;
    while let Some(message) = stream.message().await.unwrap() {
        last = message.message;
    }
    assert!(matches!(last, Some(Message::Exit(pb::DaemonExit { stopped: false, .. }))), "{last:?}");
}
