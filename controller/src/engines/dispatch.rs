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

/// A failure to talk to a handler server.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The address is neither `http://host:port` nor `unix:///path`.
    #[error("invalid handler server address '{0}': use http://host:port or unix:///path")]
    BadAddress(String),
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

/// How a Handle call failed without an answer from the handler.
#[derive(Debug, Clone, PartialEq)]
pub enum CallFailure {
    /// The server is unreachable, too slow or crashed mid-call: retry the cause later.
    Unreachable(String),
    /// The server answered with a gRPC error: the handler failed unexpectedly.
    Rejected(String),
}

/// One handler server.
#[derive(Debug, Clone)]
pub struct Server {
    /// The address as given.
    pub addr: String,
    channel: Channel,
}

fn endpoint(addr: &str) -> Result<Channel, Error> {
    if let Some(path) = addr.strip_prefix("unix://") {
        let path = path.to_string();
        let ep = Endpoint::from_static("http://handler.local");
        return Ok(ep.connect_with_connector_lazy(tower::service_fn(move |_: http::Uri| {
            let path = path.clone();
            async move {
                let stream = tokio::net::UnixStream::connect(path).await?;
                Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(stream))
            }
        })));
    }
    if !(addr.starts_with("http://") || addr.starts_with("https://")) {
        return Err(Error::BadAddress(addr.into()));
    }
    let ep = Endpoint::from_shared(addr.to_string()).map_err(|_| Error::BadAddress(addr.into()))?;
    Ok(ep
        .connect_timeout(Duration::from_secs(5))
        .tcp_nodelay(true)
        .http2_keep_alive_interval(Duration::from_secs(30))
        .keep_alive_while_idle(true)
        .connect_lazy())
}

impl Server {
    /// Prepares a lazily connecting channel to `addr`.
    pub fn new(addr: &str) -> Result<Server, Error> {
        Ok(Server { addr: addr.to_string(), channel: endpoint(addr)? })
    }

    /// Waits until the server's gRPC health says SERVING, logging while it does not.
    pub async fn wait_ready(&self, log: &Logger) {
        let mut delay = Duration::from_millis(50);
        let since = std::time::Instant::now();
        let mut warned = false;
        loop {
            let mut health = HealthClient::new(self.channel.clone());
            let answer = tokio::time::timeout(Duration::from_secs(5), health.check(HealthCheckRequest { service: String::new() })).await;
            match answer {
                Ok(Ok(r)) if r.get_ref().status == ServingStatus::Serving as i32 => {
                    log.info(None, &format!("Handler server {} is serving.", self.addr));
                    return;
                }
                other => {
                    // A server that starts together with the controller gets a second of grace.
                    if since.elapsed() >= Duration::from_secs(1) && (!warned || delay >= Duration::from_secs(5)) {
                        let why = match other {
                            Ok(Ok(r)) => format!("health status {}", r.get_ref().status),
                            Ok(Err(s)) => s.message().to_string(),
                            Err(_) => "health check timed out".into(),
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

    /// Asks for the server's registry.
    pub async fn describe(&self) -> Result<pb::DescribeResponse, Error> {
        let mut client = HandlerServerClient::new(self.channel.clone());
        let req = pb::DescribeRequest { controller_version: env!("CARGO_PKG_VERSION").into() };
        client.describe(req).await.map(tonic::Response::into_inner).map_err(|status| Error::Describe { addr: self.addr.clone(), status })
    }

    /// Runs one handler attempt with a deadline.
    pub async fn handle(&self, req: pb::HandleRequest, deadline: Duration) -> Result<pb::HandleResponse, CallFailure> {
        let mut client = HandlerServerClient::new(self.channel.clone())
            .max_decoding_message_size(64 * 1024 * 1024)
            .max_encoding_message_size(64 * 1024 * 1024);
        let mut request = tonic::Request::new(req);
        request.set_timeout(deadline);
        match tokio::time::timeout(deadline + Duration::from_secs(1), client.handle(request)).await {
            Err(_) => Err(CallFailure::Unreachable(format!("no answer within {deadline:?}"))),
            Ok(Ok(r)) => Ok(r.into_inner()),
            Ok(Err(s)) => Err(classify(&s)),
        }
    }
}

impl Server {
    /// Opens a daemon's stream (no deadline: it lives until cancelled by dropping it).
    pub async fn daemon(&self, req: pb::DaemonRequest) -> Result<tonic::Streaming<pb::DaemonMessage>, CallFailure> {
        let mut client = HandlerServerClient::new(self.channel.clone());
        client.daemon(req).await.map(tonic::Response::into_inner).map_err(|s| classify(&s))
    }

    /// Runs one activity attempt (startup, cleanup, probe) with a deadline.
    pub async fn activity(&self, req: pb::ActivityRequest, deadline: Duration) -> Result<pb::ActivityResponse, CallFailure> {
        let mut client = HandlerServerClient::new(self.channel.clone());
        let mut request = tonic::Request::new(req);
        request.set_timeout(deadline);
        match tokio::time::timeout(deadline + Duration::from_secs(1), client.activity(request)).await {
            Err(_) => Err(CallFailure::Unreachable(format!("no answer within {deadline:?}"))),
            Ok(Ok(r)) => Ok(r.into_inner()),
            Ok(Err(s)) => Err(classify(&s)),
        }
    }
}

/// Sorts a gRPC error into "try again later" and "the handler failed".
pub fn classify(s: &tonic::Status) -> CallFailure {
    use tonic::Code;
    let text = if s.message().is_empty() { format!("{:?}", s.code()) } else { format!("{:?}: {}", s.code(), s.message()) };
    match s.code() {
        Code::Unavailable | Code::DeadlineExceeded | Code::Cancelled | Code::Unknown | Code::ResourceExhausted | Code::Aborted => {
            CallFailure::Unreachable(text)
        }
        _ => CallFailure::Rejected(text),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn addresses_must_be_http_or_unix() {
        let cases = [("http://127.0.0.1:1", true), ("unix:///tmp/x.sock", true), ("127.0.0.1:1", false), ("grpc://x", false)];
        for (addr, ok) in cases {
            assert_eq!(Server::new(addr).is_ok(), ok, "{addr}");
        }
    }

    #[test]
    fn grpc_errors_split_into_unreachable_and_rejected() {
        use tonic::{Code, Status};
        let cases = [
            (Code::Unavailable, true),
            (Code::DeadlineExceeded, true),
            (Code::Unknown, true),
            (Code::NotFound, false),
            (Code::InvalidArgument, false),
            (Code::Internal, false),
        ];
        for (code, unreachable) in cases {
            let got = classify(&Status::new(code, "x"));
            assert_eq!(matches!(got, CallFailure::Unreachable(_)), unreachable, "{code:?}");
        }
    }
}
