//! Dispatch to handler servers: one gRPC channel per server (HTTP/2, multiplexed, so the
//! number of connections stays bounded whatever the backlog), health waiting, deadlines.
//!
//! A call's deadline runs from when its request goes out on a connection (tonic's own
//! `grpc-timeout` enforcement), not while the connection is being made: a call that could
//! not connect is "unreachable" (nothing ran), one that connected and then ran out of time
//! is a timeout (it may have run). Connecting has a bound of its own, [`CONNECT_TIMEOUT`].

use std::time::Duration;

use bosun_proto::v1 as pb;
use pb::handler_server_client::HandlerServerClient;
use tonic::transport::{Channel, Endpoint};
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;

use crate::logs::Logger;
use futures::future::BoxFuture;

pub use super::failures::{CallFailure, classify, code_name};
use super::outages::server_up;
pub use super::outages::{Outages, Revival};
use super::stream::HandleStream;

/// How long making a TCP connection to a handler server may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// A failure to talk to a handler server.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The address is neither `http://host:port` nor `unix:///path` (nor the in-process
    /// `mem://NAME` of simulations and tests).
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

/// The handler servers of one controller, by index (`Handler::server`).
pub type Servers = std::sync::Arc<Vec<std::sync::Arc<dyn HandlerClient>>>;

/// One handler server.
#[derive(Debug, Clone)]
pub struct Server {
    /// The address as given.
    pub addr: String,
    channel: Channel,
    connections: std::sync::Arc<tokio::sync::watch::Sender<u64>>,
    /// Its Handle calls go on `HandleStream` (the server said so when last described).
    streams: std::sync::Arc<std::sync::atomic::AtomicBool>,
    stream: std::sync::Arc<HandleStream>,
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
                let connect = tokio::net::UnixStream::connect(path);
                let stream = tokio::time::timeout(CONNECT_TIMEOUT, connect)
                    .await
                    .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "connecting timed out"))??;
                opened();
                Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(stream))
            }
        })));
    }
    if let Some(name) = addr.strip_prefix("mem://") {
        let name = name.to_string();
        let ep = Endpoint::from_static("http://handler.local");
        return Ok(ep.connect_with_connector_lazy(tower::service_fn(move |_: http::Uri| {
            let (name, opened) = (name.clone(), opened.clone());
            async move {
                let stream = super::memory::connect(&name)?;
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
    let ep = ep.http2_keep_alive_interval(Duration::from_secs(30)).keep_alive_while_idle(true);
    // The connect timeout is the connector's own (not the endpoint's, which tonic puts around
    // its connector), so that tonic reports it as a `ConnectError`, as every failure to connect.
    Ok(ep.connect_with_connector_lazy(tower::service_fn(move |uri: http::Uri| {
        let opened = opened.clone();
        async move {
            let host = uri.host().unwrap_or("localhost").to_string();
            let connect = tokio::net::TcpStream::connect(format!("{host}:{}", uri.port_u16().unwrap_or(80)));
            let stream = tokio::time::timeout(CONNECT_TIMEOUT, connect)
                .await
                .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "connecting timed out"))??;
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
        let channel = endpoint(addr, connections.clone())?;
        // Connecting and the server's headers: twice the connect bound.
        let stream = std::sync::Arc::new(HandleStream::new(channel.clone(), 2 * CONNECT_TIMEOUT));
        Ok(Server { addr: addr.to_string(), channel, connections, streams: Default::default(), stream })
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
        let described = client
            .describe(req)
            .await
            .map(tonic::Response::into_inner)
            .map_err(|status| Error::Describe { addr: self.addr.clone(), status })?;
        self.streams.store(described.handle_stream, std::sync::atomic::Ordering::Relaxed);
        Ok(described)
    }

    /// One Handle call, on the server's `HandleStream` when it serves one, else unary. A
    /// server that no longer has the stream (it was replaced by one without it and not
    /// described again yet) gets the call unary.
    async fn handle_once(&self, req: pb::HandleRequest, deadline: Duration) -> Result<pb::HandleResponse, CallFailure> {
        use std::sync::atomic::Ordering::Relaxed;
        if self.streams.load(Relaxed) {
            let answer = self.stream.call(req.clone(), deadline, super::trace_context::traceparent()).await;
            if !matches!(answer, Err(CallFailure::Failed { code: tonic::Code::Unimplemented, .. })) {
                return answer;
            }
            self.streams.store(false, Relaxed);
        }
        let mut client = HandlerServerClient::new(self.channel.clone())
            .max_decoding_message_size(64 * 1024 * 1024)
            .max_encoding_message_size(64 * 1024 * 1024);
        with_deadline(deadline, |r| client.handle(r), req).await
    }
}

impl HandlerClient for Server {
    fn addr(&self) -> &str {
        &self.addr
    }

    fn handle(&self, req: pb::HandleRequest, deadline: Duration) -> BoxFuture<'_, Result<pb::HandleResponse, CallFailure>> {
        Box::pin(async move {
            let resource = req.resource.as_ref().map(|r| crate::metrics::resource_label(&r.group, &r.plural)).unwrap_or_default();
            let id = req.handler_id.clone();
            if req.retry > 0 {
                let labels = crate::metrics::RetryLabels { resource: resource.clone(), handler: id.clone() };
                crate::metrics::global().handler_retries.get_or_create(&labels).inc();
            }
            let started = std::time::Instant::now();
            let answer = self.handle_once(req, deadline).await;
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
            let stream = client.daemon(request).await.map(tonic::Response::into_inner).map_err(daemon_failure)?;
            Ok(stream.map(|m| m.map_err(daemon_failure)).boxed())
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

/// How a daemon's stream failed. A daemon's stream stays open for as long as it runs, so a
/// lost connection is mostly its server restarting: the daemon is started again once the
/// server is back, as when it could not be reached, not counted as its error.
fn daemon_failure(s: tonic::Status) -> CallFailure {
    match classify(&s, Duration::ZERO) {
        CallFailure::Lost(why) => CallFailure::Unreachable(why),
        other => other,
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
        Err(CallFailure::Lost(_)) => "lost",
        Err(CallFailure::Failed { .. }) => "failed",
    }
}

/// Makes one unary call with `deadline`, sent to the server (`grpc-timeout`) and enforced by
/// tonic from when the request goes out; the whole call is bounded here too, with the time
/// connecting may take on top.
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
    let started = tokio::time::Instant::now();
    match tokio::time::timeout(deadline.saturating_add(CONNECT_TIMEOUT), call(request)).await {
        Err(_) => Err(CallFailure::TimedOut(deadline)),
        Ok(Ok(r)) => Ok(r.into_inner()),
        Ok(Err(s)) => Err(past_deadline(classify(&s, deadline), started.elapsed(), deadline)),
    }
}

/// A failure that came once the call's own deadline had passed is its timeout, whatever the
/// status says (a server may reset the stream, or answer `CANCELLED`, when its deadline
/// passes); a call that never reached the server stays unreachable.
pub fn past_deadline(failure: CallFailure, elapsed: Duration, deadline: Duration) -> CallFailure {
    match failure {
        CallFailure::Lost(_) | CallFailure::Failed { .. } if elapsed >= deadline => CallFailure::TimedOut(deadline),
        other => other,
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
            ("mem://sim-0", true),
        ];
        for (addr, ok) in cases {
            assert_eq!(Server::new(addr).is_ok(), ok, "{addr}");
        }
        let tls = Server::new("https://h:1").unwrap_err().to_string();
        assert!(tls.contains("TLS to handler servers is not supported"), "{tls}");
    }

    #[test]
    fn a_failure_after_the_calls_deadline_is_its_timeout_unless_the_call_never_went_out() {
        let d = Duration::from_secs(3);
        let lost = || CallFailure::Lost("UNKNOWN: transport error: connection reset by peer".into());
        let cancelled = || CallFailure::Failed { code: tonic::Code::Cancelled, message: String::new() };
        let away = || CallFailure::Unreachable("UNAVAILABLE: connection refused".into());
        let cases = [
            (lost(), 3_000, CallFailure::TimedOut(d)),
            (lost(), 2_999, lost()),
            (cancelled(), 3_500, CallFailure::TimedOut(d)),
            (cancelled(), 10, cancelled()),
            (away(), 4_000, away()),
            (CallFailure::TimedOut(d), 3_000, CallFailure::TimedOut(d)),
        ];
        for (failure, ms, want) in cases {
            assert_eq!(past_deadline(failure.clone(), Duration::from_millis(ms), d), want, "{failure:?} after {ms} ms");
        }
    }
}
