//! One trace from the controller into a handler server and back: the real `bosun` binary
//! exports its spans over OTLP (`OTEL_EXPORTER_OTLP_ENDPOINT`) to an OTLP receiver in this
//! process; the handler server, written with the Rust SDK and also in this process, exports its
//! spans there too. The SDK's handler span is a child of the controller's handler-call span
//! (the W3C `traceparent` travelled in the gRPC metadata), and the controller's cycle, call and
//! write spans and the SDK's span share one trace id; a daemon's run is a span too, continued
//! by the SDK's daemon span, with the write of its patch under it. Its own test binary: the handler server's
//! tracing subscriber is global to the process. And a collector that cannot be reached.

mod support;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::WithExportConfig as _;
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{TraceService, TraceServiceServer};
use opentelemetry_proto::tonic::collector::trace::v1::{ExportTraceServiceRequest, ExportTraceServiceResponse};
use parking_lot::Mutex;
use serde_json::json;
use support::Bosun;
use tracing_subscriber::Layer as _;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

/// One exported span, as the receiver got it.
#[derive(Debug, Clone)]
struct Got {
    service: String,
    name: String,
    trace: String,
    id: String,
    parent: String,
    attributes: HashMap<String, String>,
}

#[derive(Default, Clone)]
struct Receiver {
    spans: Arc<Mutex<Vec<Got>>>,
}

#[tonic::async_trait]
impl TraceService for Receiver {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
        let text = |v: &Option<opentelemetry_proto::tonic::common::v1::AnyValue>| {
            use opentelemetry_proto::tonic::common::v1::any_value::Value;
            match v.as_ref().and_then(|v| v.value.as_ref()) {
                Some(Value::StringValue(s)) => s.clone(),
                Some(other) => format!("{other:?}"),
                None => String::new(),
            }
        };
        for rs in request.into_inner().resource_spans {
            let service = rs
                .resource
                .iter()
                .flat_map(|r| r.attributes.iter())
                .find(|kv| kv.key == "service.name")
                .map(|kv| text(&kv.value))
                .unwrap_or_default();
            for span in rs.scope_spans.into_iter().flat_map(|s| s.spans) {
                self.spans.lock().push(Got {
                    service: service.clone(),
                    name: span.name.clone(),
                    trace: hex(&span.trace_id),
                    id: hex(&span.span_id),
                    parent: hex(&span.parent_span_id),
                    attributes: span.attributes.iter().map(|kv| (kv.key.clone(), text(&kv.value))).collect(),
                });
            }
        }
        Ok(tonic::Response::new(ExportTraceServiceResponse::default()))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_trace_runs_from_the_controllers_cycle_through_the_handler_server_to_the_write() {
    // The OTLP receiver.
    let receiver = Receiver::default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    let service = TraceServiceServer::new(receiver.clone());
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(service)
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
    );

    // The handler server's spans go there too (what `bosun_sdk::init_logging` sets up from
    // OTEL_EXPORTER_OTLP_ENDPOINT, with the endpoint given here instead of in the environment).
    let exporter = opentelemetry_otlp::SpanExporter::builder().with_tonic().with_endpoint(&endpoint).build().unwrap();
    // A batch exporter (its own thread; a simple one would block a runtime thread on tonic),
    // exporting every 100 ms.
    let config = opentelemetry_sdk::trace::BatchConfigBuilder::default().with_scheduled_delay(Duration::from_millis(100)).build();
    let batches = opentelemetry_sdk::trace::BatchSpanProcessor::builder(exporter).with_batch_config(config).build();
    let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder()
        .with_span_processor(batches)
        .with_resource(opentelemetry_sdk::Resource::builder().with_service_name("handlers").build())
        .build();
    // This process is also the dev cluster's client: only the SDK's spans are the handler server's.
    let sdk_only = tracing_subscriber::filter::filter_fn(|m| m.target().starts_with("bosun_sdk"));
    tracing_subscriber::registry().with(tracing_opentelemetry::layer().with_tracer(provider.tracer("test")).with_filter(sdk_only)).init();
    // create_fn succeeds; the daemon watch_fn patches its object once and exits.
    let server = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let handlers = format!("http://{}", server.local_addr().unwrap());
    let op = bosun_sdk::Operator::new()
        .on_create("kopf.dev/v1/kopfexamples", |_: bosun_sdk::Cause| async { Ok::<_, bosun_sdk::HandlerError>(json!({"done": true})) })
        .id("create_fn")
        .on_daemon("kopf.dev/v1/kopfexamples", |cause: bosun_sdk::Cause| async move {
            cause.patch().set(["status", "watched"], true);
            Ok::<_, bosun_sdk::HandlerError>(serde_json::Value::Null)
        })
        .id("watch_fn");
    tokio::spawn(op.serve_with_listener(server, std::future::pending()));

    let dir = tempfile::tempdir().unwrap();
    let crd = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/crd.yaml");
    let (_cluster, api, kubeconfig) = support::dev_cluster(dir.path(), &[crd]).await;
    let mut bosun = Bosun::start_with_env(
        dir.path(),
        &["run", "--kubeconfig", &kubeconfig, "--handler", &handlers, "--standalone", "--log-format", "json"],
        &[("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()), ("OTEL_BSP_SCHEDULE_DELAY", "100")],
    );
    bosun.wait_line("Handler server").await;
    let obj = json!({"apiVersion": "kopf.dev/v1", "kind": "KopfExample", "metadata": {"name": "traced"}, "spec": {}});
    api.create("/apis/kopf.dev/v1/namespaces/default/kopfexamples", &obj).await.unwrap();
    let succeeded = bosun.wait_line("Handler 'create_fn' succeeded.").await;

    // The controller's spans: the cycle of `traced`, its call of create_fn, its write; and
    // the handler server's span of that call, in the same trace.
    let deadline = Instant::now() + Duration::from_secs(30);
    let (cycle, call, sdk, write) = loop {
        let spans = receiver.spans.lock().clone();
        let cycle = spans.iter().find(|s| s.service == "bosun" && s.name == "create default/traced").cloned();
        let found = cycle.and_then(|cycle| {
            let same = |s: &&Got| s.trace == cycle.trace;
            let call = spans.iter().filter(same).find(|s| s.service == "bosun" && s.name == "handler create_fn")?.clone();
            let sdk = spans.iter().filter(same).find(|s| s.service == "handlers")?.clone();
            let write = spans.iter().filter(same).find(|s| s.service == "bosun" && s.name == "write")?.clone();
            Some((cycle.clone(), call, sdk, write))
        });
        if let Some(found) = found {
            break found;
        }
        assert!(Instant::now() < deadline, "no whole trace within 30 s; spans: {spans:#?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(call.parent, cycle.id, "the call is the cycle's child");
    assert_eq!(sdk.parent, call.id, "the handler server's span continues the controller's call");
    assert_eq!(sdk.name, "Handle create_fn");
    assert_eq!(write.parent, cycle.id, "the write is the cycle's child");
    assert_eq!(cycle.attributes.get("cause").map(String::as_str), Some("create"));
    assert_eq!(cycle.attributes.get("name").map(String::as_str), Some("traced"));
    // The daemon's run: a span of its own, continued by the handler server's `Daemon watch_fn`,
    // the write of its patch a child of it.
    let deadline = Instant::now() + Duration::from_secs(30);
    let (daemon, sdk_daemon, daemon_write) = loop {
        let spans = receiver.spans.lock().clone();
        let daemon = spans.iter().find(|s| s.service == "bosun" && s.name == "daemon watch_fn default/traced").cloned();
        let found = daemon.and_then(|daemon| {
            let sdk = spans.iter().find(|s| s.service == "handlers" && s.parent == daemon.id)?.clone();
            let write = spans.iter().find(|s| s.service == "bosun" && s.name == "write" && s.parent == daemon.id)?.clone();
            Some((daemon.clone(), sdk, write))
        });
        if let Some(found) = found {
            break found;
        }
        assert!(Instant::now() < deadline, "no daemon trace within 30 s; spans: {spans:#?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(sdk_daemon.name, "Daemon watch_fn");
    assert_eq!((sdk_daemon.trace.as_str(), daemon_write.trace.as_str()), (daemon.trace.as_str(), daemon.trace.as_str()));
    assert_eq!(daemon.attributes.get("handler").map(String::as_str), Some("watch_fn"));
    // The log line of the call carries the same trace id.
    let line: serde_json::Value = serde_json::from_str(&succeeded).unwrap();
    assert_eq!(line["trace_id"], cycle.trace.as_str(), "{line}");
    assert!(bosun.interrupt().await.success());
}

/// A collector that cannot be reached costs the traces, nothing else: objects are handled and
/// bosun stops promptly on Ctrl-C (its last export is bounded).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_collector_loses_the_traces_and_nothing_else() {
    let handlers = support::succeeding_server().await;
    // A port nobody listens on: bound, then closed.
    let closed = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap().local_addr().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let crd = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/crd.yaml");
    let (_cluster, api, kubeconfig) = support::dev_cluster(dir.path(), &[crd]).await;
    let endpoint = format!("http://{closed}");
    let mut bosun = Bosun::start_with_env(
        dir.path(),
        &["run", "--kubeconfig", &kubeconfig, "--handler", &handlers, "--standalone"],
        &[("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()), ("OTEL_BSP_SCHEDULE_DELAY", "100")],
    );
    bosun.wait_line("Handler server").await;
    let obj = json!({"apiVersion": "kopf.dev/v1", "kind": "KopfExample", "metadata": {"name": "untraced"}, "spec": {}});
    api.create("/apis/kopf.dev/v1/namespaces/default/kopfexamples", &obj).await.unwrap();
    bosun.wait_line("[default/untraced] Creation is processed: 1 succeeded; 0 failed.").await;
    let asked = Instant::now();
    assert!(bosun.interrupt().await.success());
    assert!(asked.elapsed() < Duration::from_secs(10), "stopping took {:?}", asked.elapsed());
}
