//! Dispatch to handler servers: one gRPC channel per server (HTTP/2, multiplexed, so the
//! number of connections stays bounded whatever the backlog), health waiting, deadlines.

use std::time::Duration;

use bosun_proto::v1 as pb;
use pb::handler_server_client::HandlerServerClient;
use tonic::transport::{Channel, Endpoint};
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;

use crate::logs::Logger;
use crate::state::outcomes::Answer;
use futures::future::BoxFuture;

/// A failure to talk to a handler server.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The address is neither `http://host:port` nor `unix:///path`.
    #[error("invalid handler server address '{0}': use http://host:port or unix:///path")]
    BadAddress(String),
    /// `https://`: TLS to handler servers is not supported.
    #[error(
        "handler server address '{0}': TLS to handler servers is not supported; run the handler server beside the controller \
         (a sidecar on loopback, http://127.0.0.1:PORT, or a Unix socket, unix:///path) and secure the pod instead"
    )]
    TlsUnsupported(String),
    /// Describe failed.
    #[error("handler server {addr} did not answer Describe: {status}")]
    Describe {
        /// The server.
        addr: String,
        /// What gRPC said.
        #[source]
        status: tonic::Status,
    },
}

/// How a call to a handler server failed without an answer from the handler.
#[derive(Debug, Clone, PartialEq)]
pub enum CallFailure {
    /// The server could not be reached (connection refused or lost, `UNAVAILABLE`): nothing
    /// ran; the call is retried once the server is back.
    Unreachable(String),
    /// The handler did not answer within its deadline (`call_timeout_seconds`): the handler's
    /// unexpected error, so its retries and timeout apply.
    TimedOut(Duration),
    /// The server answered with a gRPC error (what Python and Go servers answer for an
    /// uncaught exception): the handler's unexpected error.
    Failed {
        /// The gRPC status code.
        code: tonic::Code,
        /// Its message.
        message: String,
    },
}

impl std::fmt::Display for CallFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallFailure::Unreachable(why) => write!(f, "the handler server is unreachable ({why})"),
            CallFailure::TimedOut(d) => write!(f, "did not answer in {}", crate::engines::human(*d)),
            CallFailure::Failed { code, message } if message.is_empty() => write!(f, "failed with {}", code_name(*code)),
            CallFailure::Failed { code, message } => write!(f, "failed with {}: {message}", code_name(*code)),
        }
    }
}

impl CallFailure {
    /// What the failure means for the handler.
    pub fn answer(&self) -> Answer {
        match self {
            CallFailure::Unreachable(_) => Answer::Unreachable(self.to_string()),
            _ => Answer::Broken(self.to_string()),
        }
    }
}

/// A gRPC status code as the gRPC docs spell it (`UNKNOWN`, `DEADLINE_EXCEEDED`).
pub fn code_name(code: tonic::Code) -> &'static str {
    use tonic::Code;
    match code {
        Code::Ok => "OK",
        Code::Cancelled => "CANCELLED",
        Code::Unknown => "UNKNOWN",
        Code::InvalidArgument => "INVALID_ARGUMENT",
        Code::DeadlineExceeded => "DEADLINE_EXCEEDED",
        Code::NotFound => "NOT_FOUND",
        Code::AlreadyExists => "ALREADY_EXISTS",
        Code::PermissionDenied => "PERMISSION_DENIED",
        Code::ResourceExhausted => "RESOURCE_EXHAUSTED",
        Code::FailedPrecondition => "FAILED_PRECONDITION",
        Code::Aborted => "ABORTED",
        Code::OutOfRange => "OUT_OF_RANGE",
        Code::Unimplemented => "UNIMPLEMENTED",
        Code::Internal => "INTERNAL",
        Code::Unavailable => "UNAVAILABLE",
        Code::DataLoss => "DATA_LOSS",
        Code::Unauthenticated => "UNAUTHENTICATED",
    }
}

/// A daemon's stream of messages.
pub type DaemonStream = futures::stream::BoxStream<'static, Result<pb::DaemonMessage, CallFailure>>;

/// The calls the runtime makes to a handler server, behind a trait so the runtime can be
/// tested without one. [`Server`] is the real one.
pub trait HandlerClient: Send + Sync {
    /// The server's address, for log lines.
    fn addr(&self) -> &str;
    /// Runs one handler attempt with a deadline.
    fn handle(&self, req: pb::HandleRequest, deadline: Duration) -> BoxFuture<'_, Result<pb::HandleResponse, CallFailure>>;
    /// Opens a daemon's stream; dropping it cancels the daemon.
    fn daemon(&self, req: pb::DaemonRequest) -> BoxFuture<'_, Result<DaemonStream, CallFailure>>;
    /// Runs one activity attempt (startup, cleanup, probe) with a deadline.
    fn activity(&self, req: pb::ActivityRequest, deadline: Duration) -> BoxFuture<'_, Result<pb::ActivityResponse, CallFailure>>;
    /// Asks a validating or mutating handler to review an admission request, with a deadline.
    fn admit(&self, req: pb::AdmitRequest, deadline: Duration) -> BoxFuture<'_, Result<pb::AdmitResponse, CallFailure>>;
    /// Asks the server to stop a running daemon whose stream stays open, with a deadline
    /// (`StopDaemon`). A server without it answers UNIMPLEMENTED, as this default does: its
    /// daemons stop when their stream is cancelled.
    fn stop_daemon(&self, req: pb::StopDaemonRequest, deadline: Duration) -> BoxFuture<'_, Result<pb::StopDaemonResponse, CallFailure>> {
        let _ = (req, deadline);
        Box::pin(async { Err(CallFailure::Failed { code: tonic::Code::Unimplemented, message: String::new() }) })
    }
}

/// Which handler servers are down, so that an outage is logged once per server (with how
/// many objects it held up), not once per object and retry; and a signal that wakes the
/// objects waiting for a server the moment it is back.
#[derive(Debug)]
pub struct Outages {
    down: parking_lot::Mutex<std::collections::HashMap<String, std::collections::HashSet<String>>>,
    revivals: tokio::sync::watch::Sender<u64>,
}

impl Default for Outages {
    fn default() -> Outages {
        Outages { down: Default::default(), revivals: tokio::sync::watch::Sender::new(0) }
    }
}

impl Outages {
    /// Notes that `object` could not reach `addr`; `true` when this starts an outage.
    pub fn down(&self, addr: &str, object: &str) -> bool {
        let mut down = self.down.lock();
        let starts = !down.contains_key(addr);
        down.entry(addr.to_string()).or_default().insert(object.to_string());
        if starts {
            server_up(addr, false);
        }
        starts
    }

    /// Notes that the connection to `addr` is lost, before any object noticed.
    pub fn lost(&self, addr: &str) {
        self.down.lock().entry(addr.to_string()).or_default();
        server_up(addr, false);
    }

    /// Notes that `addr` answered; `Some(n)` when this ends an outage that held up `n`
    /// objects, which are woken.
    pub fn up(&self, addr: &str) -> Option<usize> {
        let mut down = self.down.lock();
        if down.is_empty() {
            return None;
        }
        let ended = down.remove(addr).map(|objects| objects.len());
        if ended.is_some() {
            self.revivals.send_modify(|n| *n += 1);
            server_up(addr, true);
        }
        ended
    }

    /// Changes each time an outage ends: objects that wait for a server wait on it too.
    pub fn revivals(&self) -> tokio::sync::watch::Receiver<u64> {
        self.revivals.subscribe()
    }
}

/// Sets `bosun_handler_server_up` of `addr`.
fn server_up(addr: &str, up: bool) {
    crate::metrics::global().server_up.get_or_create(&crate::metrics::ServerLabels { server: addr.to_string() }).set(i64::from(up));
}

/// The handler servers of one controller, by index (`Handler::server`).
pub type Servers = std::sync::Arc<Vec<std::sync::Arc<dyn HandlerClient>>>;

/// One handler server.
#[derive(Debug, Clone)]
pub struct Server {
    /// The address as given.
    pub addr: String,
    channel: Channel,
    connections: std::sync::Arc<tokio::sync::watch::Sender<u64>>,
}

/// A lazily connecting channel to `addr` whose connector counts the connections it opens
/// in `connections`: a new connection may reach a new (restarted) server.
fn endpoint(addr: &str, connections: std::sync::Arc<tokio::sync::watch::Sender<u64>>) -> Result<Channel, Error> {
    let opened = move || {
        connections.send_modify(|n| *n += 1);
    };
    if let Some(path) = addr.strip_prefix("unix://") {
        let path = path.to_string();
        let ep = Endpoint::from_static("http://handler.local");
        return Ok(ep.connect_with_connector_lazy(tower::service_fn(move |_: http::Uri| {
            let (path, opened) = (path.clone(), opened.clone());
            async move {
                let stream = tokio::net::UnixStream::connect(path).await?;
                opened();
                Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(stream))
            }
        })));
    }
    if addr.starts_with("https://") {
        return Err(Error::TlsUnsupported(addr.into()));
    }
    if !addr.starts_with("http://") {
        return Err(Error::BadAddress(addr.into()));
    }
    let ep = Endpoint::from_shared(addr.to_string()).map_err(|_| Error::BadAddress(addr.into()))?;
    let ep = ep.connect_timeout(Duration::from_secs(5)).http2_keep_alive_interval(Duration::from_secs(30)).keep_alive_while_idle(true);
    Ok(ep.connect_with_connector_lazy(tower::service_fn(move |uri: http::Uri| {
        let opened = opened.clone();
        async move {
            let host = uri.host().unwrap_or("localhost").to_string();
            let stream = tokio::net::TcpStream::connect(format!("{host}:{}", uri.port_u16().unwrap_or(80))).await?;
            stream.set_nodelay(true)?;
            opened();
            Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(stream))
        }
    })))
}

impl Server {
    /// Prepares a lazily connecting channel to `addr`.
    pub fn new(addr: &str) -> Result<Server, Error> {
        let connections = std::sync::Arc::new(tokio::sync::watch::Sender::new(0));
        Ok(Server { addr: addr.to_string(), channel: endpoint(addr, connections.clone())?, connections })
    }

    /// Changes each time a new connection to the server is opened.
    pub fn connections(&self) -> tokio::sync::watch::Receiver<u64> {
        self.connections.subscribe()
    }

    /// Waits until the server's gRPC health says SERVING, logging while it does not.
    pub async fn wait_ready(&self, log: &Logger) {
        let mut delay = Duration::from_millis(50);
        let since = std::time::Instant::now();
        let mut warned = false;
        loop {
            match self.health_check().await {
                Ok(ServingStatus::Serving) => {
                    log.info(None, &format!("Handler server {} is serving.", self.addr));
                    server_up(&self.addr, true);
                    return;
                }
                other => {
                    // A server that starts together with the controller gets a second of grace.
                    if since.elapsed() >= Duration::from_secs(1) && (!warned || delay >= Duration::from_secs(5)) {
                        let why = match other {
                            Ok(status) => format!("health status {}", status as i32),
                            Err(s) => s.message().to_string(),
                        };
                        log.warn(None, &format!("Waiting for handler server {} to be ready: {why}", self.addr));
                        warned = true;
                    }
                }
            }
            tokio::time::sleep(delay).await;
            delay = (delay * 2).min(Duration::from_secs(5));
        }
    }

    /// Asks the server's `grpc.health.v1` Check once (unknown statuses read as UNKNOWN).
    pub async fn health_check(&self) -> Result<ServingStatus, tonic::Status> {
        let mut health = HealthClient::new(self.channel.clone());
        let call = health.check(HealthCheckRequest { service: String::new() });
        match tokio::time::timeout(Duration::from_secs(5), call).await {
            Ok(r) => r.map(|r| ServingStatus::try_from(r.get_ref().status).unwrap_or(ServingStatus::Unknown)),
            Err(_) => Err(tonic::Status::unavailable("health check timed out")),
        }
    }

    /// Asks for the server's registry.
    pub async fn describe(&self) -> Result<pb::DescribeResponse, Error> {
        let mut client = HandlerServerClient::new(self.channel.clone());
        let req = pb::DescribeRequest { controller_version: env!("CARGO_PKG_VERSION").into() };
        client.describe(req).await.map(tonic::Response::into_inner).map_err(|status| Error::Describe { addr: self.addr.clone(), status })
    }
}

impl HandlerClient for Server {
    fn addr(&self) -> &str {
        &self.addr
    }

    fn handle(&self, req: pb::HandleRequest, deadline: Duration) -> BoxFuture<'_, Result<pb::HandleResponse, CallFailure>> {
        Box::pin(async move {
            let mut client = HandlerServerClient::new(self.channel.clone())
                .max_decoding_message_size(64 * 1024 * 1024)
                .max_encoding_message_size(64 * 1024 * 1024);
            let resource = req.resource.as_ref().map(|r| crate::metrics::resource_label(&r.group, &r.plural)).unwrap_or_default();
            let id = req.handler_id.clone();
            if req.retry > 0 {
                let labels = crate::metrics::RetryLabels { resource: resource.clone(), handler: id.clone() };
                crate::metrics::global().handler_retries.get_or_create(&labels).inc();
            }
            let started = std::time::Instant::now();
            let answer = with_deadline(deadline, |r| client.handle(r), req).await;
            let outcome = metrics_outcome(answer.as_ref().map(|a| a.outcome));
            crate::metrics::global().handler_call(resource, &id, outcome, started.elapsed());
            answer
        })
    }

    fn daemon(&self, req: pb::DaemonRequest) -> BoxFuture<'_, Result<DaemonStream, CallFailure>> {
        use futures::StreamExt;
        Box::pin(async move {
            let mut client = HandlerServerClient::new(self.channel.clone());
            let mut request = tonic::Request::new(req);
            super::trace_context::inject(request.metadata_mut());
            let stream = client.daemon(request).await.map(tonic::Response::into_inner).map_err(|s| classify(&s, Duration::ZERO))?;
            Ok(stream.map(|m| m.map_err(|s| classify(&s, Duration::ZERO))).boxed())
        })
    }

    fn admit(&self, req: pb::AdmitRequest, deadline: Duration) -> BoxFuture<'_, Result<pb::AdmitResponse, CallFailure>> {
        Box::pin(async move {
            let mut client = HandlerServerClient::new(self.channel.clone())
                .max_decoding_message_size(64 * 1024 * 1024)
                .max_encoding_message_size(64 * 1024 * 1024);
            with_deadline(deadline, |r| client.admit(r), req).await
        })
    }

    fn stop_daemon(&self, req: pb::StopDaemonRequest, deadline: Duration) -> BoxFuture<'_, Result<pb::StopDaemonResponse, CallFailure>> {
        Box::pin(async move {
            let mut client = HandlerServerClient::new(self.channel.clone());
            with_deadline(deadline, |r| client.stop_daemon(r), req).await
        })
    }

    fn activity(&self, req: pb::ActivityRequest, deadline: Duration) -> BoxFuture<'_, Result<pb::ActivityResponse, CallFailure>> {
        Box::pin(async move {
            let mut client = HandlerServerClient::new(self.channel.clone());
            let id = req.handler_id.clone();
            let started = std::time::Instant::now();
            let answer = with_deadline(deadline, |r| client.activity(r), req).await;
            let outcome = metrics_outcome(answer.as_ref().map(|a| a.outcome));
            // Activities (startup, cleanup, probes) belong to no resource.
            crate::metrics::global().handler_call(String::new(), &id, outcome, started.elapsed());
            answer
        })
    }
}

/// The `outcome` label of a call: the handler's outcome, or how the call failed.
pub fn metrics_outcome(answer: Result<i32, &CallFailure>) -> &'static str {
    match answer {
        Ok(o) => match pb::Outcome::try_from(o).unwrap_or_default() {
            pb::Outcome::Success => "success",
            pb::Outcome::TemporaryError => "temporary_error",
            pb::Outcome::PermanentError => "permanent_error",
            pb::Outcome::Skipped => "skipped",
            pb::Outcome::UnexpectedError => "unexpected_error",
        },
        Err(CallFailure::TimedOut(_)) => "timeout",
        Err(CallFailure::Unreachable(_)) => "unreachable",
        Err(CallFailure::Failed { .. }) => "failed",
    }
}

/// Makes one unary call with `deadline`, sent to the server (`grpc-timeout`) and enforced here.
async fn with_deadline<Req, Res, Fut>(
    deadline: Duration,
    call: impl FnOnce(tonic::Request<Req>) -> Fut,
    req: Req,
) -> Result<Res, CallFailure>
where
    Fut: std::future::Future<Output = Result<tonic::Response<Res>, tonic::Status>>,
{
    let mut request = tonic::Request::new(req);
    request.set_timeout(deadline);
    super::trace_context::inject(request.metadata_mut());
    match tokio::time::timeout(deadline, call(request)).await {
        Err(_) => Err(CallFailure::TimedOut(deadline)),
        Ok(Ok(r)) => Ok(r.into_inner()),
        Ok(Err(s)) => Err(classify(&s, deadline)),
    }
}

/// Sorts a gRPC error: the server could not be reached (`UNAVAILABLE`, or an error of the
/// connection itself, which tonic reports with its cause attached), the handler ran out of
/// time (`DEADLINE_EXCEEDED`), or the handler failed (every status the server sent).
pub fn classify(s: &tonic::Status, deadline: Duration) -> CallFailure {
    use tonic::Code;
    match s.code() {
        Code::DeadlineExceeded => CallFailure::TimedOut(deadline),
        Code::Unavailable => CallFailure::Unreachable(if s.message().is_empty() { "UNAVAILABLE".into() } else { s.message().to_string() }),
        _ if std::error::Error::source(s).is_some() => CallFailure::Unreachable(format!("{}: {}", code_name(s.code()), s.message())),
        code => CallFailure::Failed { code, message: s.message().to_string() },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn addresses_must_be_http_or_unix() {
        let cases = [
            ("http://127.0.0.1:1", true),
            ("unix:///tmp/x.sock", true),
            ("127.0.0.1:1", false),
            ("grpc://x", false),
            ("https://handlers.example:443", false),
        ];
        for (addr, ok) in cases {
            assert_eq!(Server::new(addr).is_ok(), ok, "{addr}");
        }
        let tls = Server::new("https://h:1").unwrap_err().to_string();
        assert!(tls.contains("TLS to handler servers is not supported"), "{tls}");
    }

    #[test]
    fn an_outage_starts_once_and_ends_with_the_number_of_objects_it_held_up() {
        let o = Outages::default();
        assert_eq!(o.up("a"), None);
        assert!(o.down("a", "ns/x"));
        assert!(!o.down("a", "ns/y"));
        assert!(!o.down("a", "ns/x"));
        assert!(o.down("b", "ns/x"));
        assert_eq!(o.up("a"), Some(2));
        assert_eq!(o.up("a"), None);
        assert!(o.down("a", "ns/z"), "a new outage");
    }

    #[test]
    fn the_end_of_an_outage_is_signalled_once() {
        let o = Outages::default();
        let mut revivals = o.revivals();
        assert_eq!(o.up("a"), None);
        assert!(!revivals.has_changed().unwrap(), "no outage, no revival");
        o.lost("a");
        assert!(!o.down("a", "ns/x"), "the outage began when the connection was lost");
        assert_eq!(o.up("a"), Some(1));
        assert!(revivals.has_changed().unwrap());
        revivals.borrow_and_update();
        assert_eq!(o.up("a"), None);
        assert!(!revivals.has_changed().unwrap());
    }

    #[test]
    fn only_unreachable_servers_are_unreachable_and_handler_errors_say_what_happened() {
        use tonic::{Code, Status};
        let d = Duration::from_secs(3);
        let cases = [
            (Status::new(Code::Unavailable, "connection refused"), "the handler server is unreachable (connection refused)", true),
            (Status::new(Code::DeadlineExceeded, "x"), "did not answer in 3s", false),
            (
                Status::new(Code::Unknown, "Exception calling application: boom"),
                "failed with UNKNOWN: Exception calling application: boom",
                false,
            ),
            (Status::new(Code::Internal, ""), "failed with INTERNAL", false),
            (Status::new(Code::Unimplemented, "no Handle"), "failed with UNIMPLEMENTED: no Handle", false),
            (Status::from_error(Box::new(std::io::Error::other("reset"))), "the handler server is unreachable", true),
        ];
        for (status, text, unreachable) in cases {
            let got = classify(&status, d);
            assert!(got.to_string().starts_with(text), "{status:?}: {got}");
            assert_eq!(matches!(got.answer(), Answer::Unreachable(_)), unreachable, "{status:?}");
        }
    }
}
