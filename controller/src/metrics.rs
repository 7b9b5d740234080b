//! The controller's Prometheus metrics, and the endpoint that serves them with `/healthz` and
//! `/readyz` (`--metrics-listen`). One registry per process, as controller-runtime's: the
//! parts of the controller record into [`global()`]; the families are encoded by the
//! `prometheus-client` crate (the Prometheus project's own Rust client), not by hand.
//!
//! Names and labels follow Prometheus' conventions: `bosun_` prefix, `_total` counters,
//! `_seconds` histograms, labels in snake case. What is counted where:
//! - handler calls (`handlers::dispatch`), by resource, handler id and outcome, with their
//!   latency; causes of cycles (`runtime::cycle`); retries scheduled and objects throttled
//!   (`runtime::worker`);
//! - API requests (`cluster::metered`, a layer of the kube client, so watches and lists count
//!   too, and every attempt of a retried request), by verb, resource and code, with their
//!   latency (to the response's headers);
//! - watch errors and relists (`cluster::watching`, `runtime`); objects in flight and waiting
//!   (`runtime::worker`); timers and daemons running (`runtime::background`);
//! - handler servers up or down (`runtime::servers`); paused, leading, shard members and the
//!   objects this replica owns (`coordination`, `runtime`).

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use axum::http::StatusCode;
use axum::response::IntoResponse;
use parking_lot::Mutex;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// Labels of a handler call.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct HandlerLabels {
    /// `plural.group` of the object's resource (`kopfexamples.kopf.dev`; `pods` for core).
    pub resource: String,
    /// The handler's id.
    pub handler: String,
    /// `success`, `temporary_error`, `permanent_error`, `unexpected_error`, `skipped`, or how
    /// the call failed: `timeout`, `unreachable`, `lost` (the connection went during the call),
    /// `failed` (the server answered a gRPC error).
    pub outcome: &'static str,
}

/// Labels of a cycle's cause.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CauseLabels {
    /// The resource.
    pub resource: String,
    /// `create`, `update`, `delete`, `resume`.
    pub cause: &'static str,
}

/// Labels of an API request.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ApiLabels {
    /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`, `deletecollection`.
    pub verb: &'static str,
    /// `plural.group` and `/subresource`, as in [`HandlerLabels::resource`]; `other` for
    /// discovery and non-resource paths.
    pub resource: String,
    /// The HTTP status code, `timeout` when no answer came within the request timeout, or
    /// `error` when none came at all (connection refused or lost).
    pub code: String,
}

/// Labels of the API request latency (without the code: it would multiply the buckets).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct VerbLabels {
    /// As in [`ApiLabels`].
    pub verb: &'static str,
    /// As in [`ApiLabels`].
    pub resource: String,
}

/// A label set of one resource.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResourceLabels {
    /// The resource.
    pub resource: String,
}

/// Labels of watch troubles.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WatchLabels {
    /// The resource.
    pub resource: String,
    /// For restarts: `error`, `expired` (410), `gone` (404). For relists: `expired` (the watch
    /// could not resume), `ownership` (objects became this controller's).
    pub reason: &'static str,
}

/// Labels of a handler server.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ServerLabels {
    /// Its address as given with `--handler`.
    pub server: String,
}

/// Labels of background work.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct BackgroundLabels {
    /// The resource.
    pub resource: String,
    /// `timer` or `daemon`.
    pub kind: &'static str,
}

/// Labels of a handler's retries.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RetryLabels {
    /// The resource.
    pub resource: String,
    /// The handler's id.
    pub handler: String,
}

/// Every family.
pub struct Metrics {
    registry: Registry,
    /// Handler calls.
    pub handler_calls: Family<HandlerLabels, Counter>,
    /// Their latency.
    pub handler_call_seconds: Family<HandlerLabels, Histogram>,
    /// Handler calls that retry an attempt that failed (their `retry` is above 0).
    pub handler_retries: Family<RetryLabels, Counter>,
    /// Causes of cycles.
    pub causes: Family<CauseLabels, Counter>,
    /// Cycles running now.
    pub cycles_in_flight: Family<ResourceLabels, Gauge>,
    /// Objects whose events wait for their worker (a cycle of theirs runs, or a permit).
    pub objects_waiting: Family<ResourceLabels, Gauge>,
    /// Objects throttled now (framework-level failures in a row).
    pub objects_throttled: Family<ResourceLabels, Gauge>,
    /// Times an object was throttled.
    pub throttles: Family<ResourceLabels, Counter>,
    /// API requests.
    pub api_requests: Family<ApiLabels, Counter>,
    /// Their latency to the response's headers.
    pub api_request_seconds: Family<VerbLabels, Histogram>,
    /// API requests in flight.
    pub api_in_flight: Gauge,
    /// Watch errors and expiries (the watch goes on, resumed or restarted).
    pub watch_restarts: Family<WatchLabels, Counter>,
    /// Full listings after the first.
    pub relists: Family<WatchLabels, Counter>,
    /// Watches that have not listed yet.
    pub watches_listing: Gauge,
    /// Handler servers up (1) or down (0).
    pub server_up: Family<ServerLabels, Gauge>,
    /// Timers and daemons running.
    pub background: Family<BackgroundLabels, Gauge>,
    /// Paused by peering (1) or not (0).
    pub paused: Gauge,
    /// With leader election: leading (1) or following (0).
    pub leader: Gauge,
    /// With shards: the live members of the shard group.
    pub shard_members: Gauge,
    /// Objects seen and the share of them this controller handles now (all, or its shard's):
    /// set when scraped.
    pub objects: Family<ObjectLabels, Gauge>,
    /// Called before each scrape, to set what is computed then.
    refreshers: Mutex<Vec<(u64, Refresher)>>,
    next_refresher: AtomicUsize,
    ready: AtomicBool,
    /// Until when this replica may act on the Lease it holds (leader or shard member), as its
    /// coordination loop last set it; none while it holds none.
    holding_until: Mutex<Option<tokio::time::Instant>>,
}

/// Labels of the object counts.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ObjectLabels {
    /// The resource.
    pub resource: String,
    /// `seen` (handled by this process at least once, or found idle) or `owned` (of those,
    /// the ones this replica handles now: all, its shard's, none while paused).
    pub state: &'static str,
}

type Refresher = Arc<dyn Fn(&Metrics) + Send + Sync>;

/// Buckets from 1 ms to ~65 s.
fn latency_buckets() -> impl Iterator<Item = f64> {
    exponential_buckets(0.001, 2.0, 17)
}

impl Metrics {
    fn new() -> Metrics {
        let mut m = Metrics {
            registry: Registry::default(),
            handler_calls: Family::default(),
            handler_call_seconds: Family::new_with_constructor(|| Histogram::new(latency_buckets())),
            handler_retries: Family::default(),
            causes: Family::default(),
            cycles_in_flight: Family::default(),
            objects_waiting: Family::default(),
            objects_throttled: Family::default(),
            throttles: Family::default(),
            api_requests: Family::default(),
            api_request_seconds: Family::new_with_constructor(|| Histogram::new(latency_buckets())),
            api_in_flight: Gauge::default(),
            watch_restarts: Family::default(),
            relists: Family::default(),
            watches_listing: Gauge::default(),
            server_up: Family::default(),
            background: Family::default(),
            paused: Gauge::default(),
            leader: Gauge::default(),
            shard_members: Gauge::default(),
            objects: Family::default(),
            refreshers: Mutex::default(),
            next_refresher: AtomicUsize::new(0),
            ready: AtomicBool::new(false),
            holding_until: Mutex::new(None),
        };
        let r = &mut m.registry;
        r.register("bosun_handler_calls", "Handler calls, by resource, handler id and outcome.", m.handler_calls.clone());
        r.register(
            "bosun_handler_call_duration_seconds",
            "Handler call latency as the controller sees it, by resource, handler id and outcome.",
            m.handler_call_seconds.clone(),
        );
        r.register(
            "bosun_handler_retries",
            "Handler calls that retry a failed attempt (temporary errors, timeouts, exceptions).",
            m.handler_retries.clone(),
        );
        r.register("bosun_causes", "Cycles by the cause they handle (create, update, delete, resume).", m.causes.clone());
        r.register("bosun_cycles_in_flight", "Cycles running now.", m.cycles_in_flight.clone());
        r.register("bosun_objects_waiting", "Objects with events waiting for their worker.", m.objects_waiting.clone());
        r.register("bosun_objects_throttled", "Objects throttled now after framework-level failures.", m.objects_throttled.clone());
        r.register("bosun_throttles", "Times an object was throttled.", m.throttles.clone());
        r.register(
            "bosun_api_requests",
            "API requests sent (each attempt), by verb, resource and HTTP code (`timeout`, `error`: no answer).",
            m.api_requests.clone(),
        );
        r.register(
            "bosun_api_request_duration_seconds",
            "API request latency to the response's headers, by verb and resource.",
            m.api_request_seconds.clone(),
        );
        r.register("bosun_api_requests_in_flight", "API requests in flight.", m.api_in_flight.clone());
        r.register(
            "bosun_watch_restarts",
            "Watch errors and expiries, after which the watch resumes or restarts.",
            m.watch_restarts.clone(),
        );
        r.register("bosun_relists", "Full listings after a watch's first (expired watches, objects that became ours).", m.relists.clone());
        r.register("bosun_watches_listing", "Watches that have not finished their first listing.", m.watches_listing.clone());
        r.register("bosun_handler_server_up", "Whether a handler server is reachable (1) or not (0).", m.server_up.clone());
        r.register("bosun_background_running", "Timers and daemons running.", m.background.clone());
        r.register("bosun_paused", "Whether peering paused this controller (1) or not (0).", m.paused.clone());
        r.register("bosun_leader", "With --leader-election: whether this controller leads (1) or follows (0).", m.leader.clone());
        r.register("bosun_shard_members", "With --shards: the live members of the shard group.", m.shard_members.clone());
        r.register("bosun_objects", "Objects seen by this controller, and those of them it handles now (its shard's).", m.objects.clone());
        m
    }

    /// The families in Prometheus' text format (after running the refreshers).
    pub fn encode(&self) -> String {
        let refreshers: Vec<Refresher> = self.refreshers.lock().iter().map(|(_, f)| f.clone()).collect();
        for f in refreshers {
            f(self);
        }
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry).expect("writing to a String does not fail");
        out
    }

    /// Runs `f` before every scrape until the returned guard is dropped.
    pub fn on_scrape(&'static self, f: impl Fn(&Metrics) + Send + Sync + 'static) -> ScrapeHook {
        let id = self.next_refresher.fetch_add(1, Ordering::Relaxed) as u64;
        self.refreshers.lock().push((id, Arc::new(f)));
        ScrapeHook { metrics: self, id }
    }

    /// Records one handler call.
    pub fn handler_call(&self, resource: String, handler: &str, outcome: &'static str, took: Duration) {
        let labels = HandlerLabels { resource, handler: handler.to_string(), outcome };
        self.handler_call_seconds.get_or_create(&labels).observe(took.as_secs_f64());
        self.handler_calls.get_or_create(&labels).inc();
    }

    /// Says that the controller has started its watches (before that, it is not ready).
    pub fn set_ready(&self, ready: bool) {
        self.ready.store(ready, Ordering::Relaxed);
    }

    /// Records until when this replica may act on its Lease (none: it holds none now).
    pub fn set_holding_until(&self, until: Option<tokio::time::Instant>) {
        *self.holding_until.lock() = until;
    }

    /// Live unless this replica still believes it holds its Lease past its renew deadline
    /// (its coordination loop is wedged): then why not.
    pub fn liveness(&self) -> Result<(), String> {
        let until = *self.holding_until.lock();
        liveness(until, tokio::time::Instant::now())
    }

    /// Ready: the watches are started and every one has listed.
    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Relaxed) && self.watches_listing.get() == 0
    }

    /// Counts a watch as listing until the returned guard says it listed or is dropped.
    pub fn watch_listing(&'static self) -> Listing {
        self.watches_listing.inc();
        Listing { metrics: self, done: AtomicBool::new(false) }
    }
}

/// Ends a scrape hook when dropped.
pub struct ScrapeHook {
    metrics: &'static Metrics,
    id: u64,
}

impl Drop for ScrapeHook {
    fn drop(&mut self) {
        self.metrics.refreshers.lock().retain(|(id, _)| *id != self.id);
    }
}

/// A watch that has not listed yet; see [`Metrics::watch_listing`].
pub struct Listing {
    metrics: &'static Metrics,
    done: AtomicBool,
}

impl Listing {
    /// The watch has listed.
    pub fn listed(&self) {
        if !self.done.swap(true, Ordering::Relaxed) {
            self.metrics.watches_listing.dec();
        }
    }
}

impl Drop for Listing {
    fn drop(&mut self) {
        self.listed();
    }
}

/// Adds one to a gauge until dropped (a cycle in flight, a running timer).
#[derive(Debug)]
pub struct Up(Gauge<i64, AtomicI64>);

impl Up {
    /// Adds one to `gauge`.
    pub fn new(gauge: Gauge<i64, AtomicI64>) -> Up {
        gauge.inc();
        Up(gauge)
    }
}

impl Drop for Up {
    fn drop(&mut self) {
        self.0.dec();
    }
}

static GLOBAL: LazyLock<Metrics> = LazyLock::new(Metrics::new);

/// The process' metrics.
pub fn global() -> &'static Metrics {
    &GLOBAL
}

/// The metrics label of a resource: `plural.group`, or `plural` for the core group.
pub fn resource_label(group: &str, plural: &str) -> String {
    if group.is_empty() { plural.to_string() } else { format!("{plural}.{group}") }
}

/// How long past its renew deadline a replica may still believe it holds its Lease before it
/// is not live: the local timer drops ownership at the deadline itself, so only a wedged
/// coordination loop is ever this late.
pub const LIVENESS_GRACE: Duration = Duration::from_secs(2);

/// The liveness decision: failing with the reason when the Lease was believed held until
/// `holding_until` and that is more than [`LIVENESS_GRACE`] before `now`.
pub fn liveness(holding_until: Option<tokio::time::Instant>, now: tokio::time::Instant) -> Result<(), String> {
    match holding_until {
        Some(until) if now > until + LIVENESS_GRACE => Err(format!(
            "this replica still believes it holds its Lease {:.1}s past its renew deadline (its coordination loop is stuck)\n",
            (now - until).as_secs_f64()
        )),
        _ => Ok(()),
    }
}

/// Serves `/metrics`, `/healthz` (200 while the process runs and does not believe it holds a
/// Lease past its renew deadline, else 500) and `/readyz` (200 once every watch has listed,
/// else 503) on `listener` until `shutdown` resolves.
pub async fn serve(
    listener: tokio::net::TcpListener,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    async fn metrics() -> impl IntoResponse {
        ([(axum::http::header::CONTENT_TYPE, "application/openmetrics-text; version=1.0.0; charset=utf-8")], global().encode())
    }
    async fn readyz() -> impl IntoResponse {
        if global().is_ready() { (StatusCode::OK, "ok\n") } else { (StatusCode::SERVICE_UNAVAILABLE, "the watches have not listed yet\n") }
    }
    async fn healthz() -> impl IntoResponse {
        match global().liveness() {
            Ok(()) => (StatusCode::OK, "ok\n".to_string()),
            Err(why) => (StatusCode::INTERNAL_SERVER_ERROR, why),
        }
    }
    let app = axum::Router::new()
        .route("/metrics", axum::routing::get(metrics))
        .route("/healthz", axum::routing::get(healthz))
        .route("/readyz", axum::routing::get(readyz));
    axum::serve(listener, app).with_graceful_shutdown(shutdown).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_are_named_as_prometheus_says() {
        let m = Metrics::new();
        m.handler_call("kopfexamples.kopf.dev".into(), "create_fn", "success", Duration::from_millis(3));
        m.handler_call("kopfexamples.kopf.dev".into(), "create_fn", "success", Duration::from_millis(300));
        m.handler_call("kopfexamples.kopf.dev".into(), "create_fn", "temporary_error", Duration::from_millis(3));
        m.api_requests.get_or_create(&ApiLabels { verb: "patch", resource: "pods".into(), code: "200".into() }).inc();
        let text = m.encode();
        let has = |line: &str| assert!(text.lines().any(|l| l == line), "no line {line:?} in:\n{text}");
        has(r#"bosun_handler_calls_total{resource="kopfexamples.kopf.dev",handler="create_fn",outcome="success"} 2"#);
        has(r#"bosun_handler_calls_total{resource="kopfexamples.kopf.dev",handler="create_fn",outcome="temporary_error"} 1"#);
        has(r#"bosun_handler_call_duration_seconds_count{resource="kopfexamples.kopf.dev",handler="create_fn",outcome="success"} 2"#);
        has(
            r#"bosun_handler_call_duration_seconds_bucket{le="0.004",resource="kopfexamples.kopf.dev",handler="create_fn",outcome="success"} 1"#,
        );
        has(r#"bosun_api_requests_total{verb="patch",resource="pods",code="200"} 1"#);
        has("# TYPE bosun_handler_call_duration_seconds histogram");
        has("# EOF");
    }

    #[tokio::test(start_paused = true)]
    async fn a_replica_that_believes_it_holds_its_lease_past_the_deadline_is_not_live() {
        let t0 = tokio::time::Instant::now();
        let s = Duration::from_secs;
        let cases = [
            ("holds none", None, t0 + s(100), true),
            ("within its deadline", Some(t0 + s(10)), t0 + s(5), true),
            ("just past it: the timer is about to fire", Some(t0 + s(10)), t0 + s(11), true),
            ("long past it: the loop is stuck", Some(t0 + s(10)), t0 + s(13), false),
        ];
        for (name, until, now, live) in cases {
            let got = liveness(until, now);
            assert_eq!(got.is_ok(), live, "{name}: {got:?}");
            if let Err(why) = got {
                assert!(why.contains("past its renew deadline"), "{why}");
            }
        }
    }

    #[test]
    fn resources_are_labelled_plural_dot_group() {
        let cases =
            [("kopf.dev", "kopfexamples", "kopfexamples.kopf.dev"), ("", "pods", "pods"), ("apps", "deployments", "deployments.apps")];
        for (group, plural, want) in cases {
            assert_eq!(resource_label(group, plural), want);
        }
    }
}
