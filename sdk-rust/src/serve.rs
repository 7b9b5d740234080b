//! Serving an [`Operator`] over gRPC: where to listen (`BOSUN_LISTEN`: `host:port` or
//! `unix:///path`), `grpc.health.v1` reporting SERVING, and graceful shutdown on SIGINT or
//! SIGTERM (in-flight calls finish, new ones are refused).
//!
//! [`Operator::serve_with_listener`] takes its listener and shutdown future from the caller,
//! so tests bind `127.0.0.1:0`.

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;

use bosun_proto::v1::handler_server_server::HandlerServerServer;
use tokio::net::TcpListener;
use tokio_stream::wrappers::TcpListenerStream;
use tonic::transport::Server;

use crate::dispatch::Dispatcher;
use crate::operator::Operator;
use crate::registry;

/// The environment variable that says where a handler server listens.
pub const LISTEN_ENV: &str = "BOSUN_LISTEN";
/// Where a handler server listens when `BOSUN_LISTEN` is not set.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:50051";

/// Why serving failed.
///
/// Its `Debug` shows the message and its sources, so that `main` returning this error prints
/// something a person can read.
#[derive(thiserror::Error)]
pub enum Error {
    /// The handlers' registrations are invalid.
    #[error("cannot serve the handlers: {0}")]
    Registry(#[from] registry::Error),
    /// The listen address is malformed.
    #[error("invalid listen address {0:?}: expected `host:port`, `http://host:port` or `unix:///path`")]
    InvalidAddress(String),
    /// The address cannot be bound.
    #[error("cannot listen on {address}: {source}")]
    Bind {
        /// The address.
        address: String,
        /// The system's complaint.
        #[source]
        source: std::io::Error,
    },
    /// The gRPC server failed.
    #[error("the gRPC server failed: {0}")]
    Transport(#[from] tonic::transport::Error),
}

impl std::fmt::Debug for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{self}")?;
        let mut source = std::error::Error::source(self);
        while let Some(s) = source {
            write!(f, "\n  caused by: {s}")?;
            source = s.source();
        }
        Ok(())
    }
}

/// Where to listen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListenAddr {
    /// A TCP `host:port` (the host may be a name).
    Tcp(String),
    /// A Unix domain socket at this path.
    Unix(PathBuf),
}

impl ListenAddr {
    /// Parses `host:port`, `http://host:port` or `unix:///path`.
    pub fn parse(s: &str) -> Result<Self, Error> {
        let invalid = || Error::InvalidAddress(s.to_string());
        let s_trim = s.trim();
        if let Some(path) = s_trim.strip_prefix("unix://").or_else(|| s_trim.strip_prefix("unix:")) {
            return if path.is_empty() { Err(invalid()) } else { Ok(ListenAddr::Unix(path.into())) };
        }
        let hostport = s_trim.strip_prefix("http://").unwrap_or(s_trim).trim_end_matches('/');
        let (host, port) = hostport.rsplit_once(':').ok_or_else(invalid)?;
        if host.is_empty() || port.parse::<u16>().is_err() || hostport.contains('/') {
            return Err(invalid());
        }
        Ok(ListenAddr::Tcp(hostport.to_string()))
    }

    /// `BOSUN_LISTEN`, or `127.0.0.1:50051` when it is unset or empty.
    pub fn from_env() -> Result<Self, Error> {
        match std::env::var(LISTEN_ENV) {
            Ok(value) if !value.trim().is_empty() => Self::parse(&value),
            _ => Self::parse(DEFAULT_LISTEN),
        }
    }
}

impl std::fmt::Display for ListenAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ListenAddr::Tcp(hostport) => write!(f, "{hostport}"),
            ListenAddr::Unix(path) => write!(f, "unix://{}", path.display()),
        }
    }
}

impl Operator {
    /// Validates the registrations and returns the gRPC service, to add to a tonic server of
    /// your own (add `grpc.health.v1` too: the controller waits for SERVING).
    pub fn into_service(self) -> Result<HandlerServerServer<Dispatcher>, registry::Error> {
        Ok(HandlerServerServer::new(self.into_dispatcher()?))
    }

    /// Validates the registrations and returns the dispatcher, for calling handlers in-process.
    pub fn into_dispatcher(self) -> Result<Dispatcher, registry::Error> {
        Ok(Dispatcher::new(self.build()?))
    }

    /// Serves where `BOSUN_LISTEN` says (`host:port` or `unix:///path`; default
    /// `127.0.0.1:50051`) until SIGINT or SIGTERM. Sets up logging to stderr (`RUST_LOG`,
    /// default `info`) unless the program already did.
    pub async fn serve_default(self) -> Result<(), Error> {
        init_logging();
        let served = self.serve_on(ListenAddr::from_env()?, shutdown_signal()).await;
        crate::telemetry::flush_traces();
        served
    }

    /// Serves on `address` (`host:port`, `http://host:port` or `unix:///path`) until SIGINT or
    /// SIGTERM. Sets up logging like [`serve_default`](Self::serve_default).
    pub async fn serve(self, address: &str) -> Result<(), Error> {
        init_logging();
        let served = self.serve_on(ListenAddr::parse(address)?, shutdown_signal()).await;
        crate::telemetry::flush_traces();
        served
    }

    /// Serves on `address` (`host:port`, `http://host:port` or `unix:///path`) until `shutdown`
    /// resolves: for embedding and tests. Does not touch logging or signals.
    /// The address is parsed at once, so the returned future borrows nothing (spawn it).
    pub fn serve_until<S: Future<Output = ()> + Send>(
        self,
        address: &str,
        shutdown: S,
    ) -> impl Future<Output = Result<(), Error>> + use<S> {
        let address = ListenAddr::parse(address);
        async move { self.serve_on(address?, shutdown).await }
    }

    async fn serve_on(self, address: ListenAddr, shutdown: impl Future<Output = ()> + Send) -> Result<(), Error> {
        let dispatcher = self.into_dispatcher()?;
        let bind_error = |source| Error::Bind { address: address.to_string(), source };
        match &address {
            ListenAddr::Tcp(hostport) => {
                let listener = TcpListener::bind(hostport).await.map_err(bind_error)?;
                let local = listener.local_addr().map_err(bind_error)?;
                announce(&dispatcher, &local.to_string());
                let incoming = TcpListenerStream::new(listener);
                run(dispatcher, incoming, shutdown).await
            }
            ListenAddr::Unix(path) => serve_unix(dispatcher, path, bind_error, shutdown).await,
        }
    }

    /// Serves on a listener of yours until `shutdown` resolves: for tests (bind
    /// `127.0.0.1:0`) and embedding. Does not touch logging or signals.
    pub async fn serve_with_listener(self, listener: TcpListener, shutdown: impl Future<Output = ()> + Send) -> Result<(), Error> {
        serve_dispatcher(self.into_dispatcher()?, listener, shutdown).await
    }
}

/// Serves an already validated dispatcher on a listener until `shutdown` resolves.
pub(crate) async fn serve_dispatcher(
    dispatcher: Dispatcher,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), Error> {
    let local: Option<SocketAddr> = listener.local_addr().ok();
    announce(&dispatcher, &local.map(|a| a.to_string()).unwrap_or_default());
    run(dispatcher, TcpListenerStream::new(listener), shutdown).await
}

#[cfg(unix)]
async fn serve_unix(
    dispatcher: Dispatcher,
    path: &std::path::Path,
    bind_error: impl Fn(std::io::Error) -> Error,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), Error> {
    use std::os::unix::fs::FileTypeExt;
    // A socket file left by a previous run would make bind fail: remove it (only a socket).
    if std::fs::metadata(path).is_ok_and(|m| m.file_type().is_socket()) {
        std::fs::remove_file(path).map_err(&bind_error)?;
    }
    let listener = tokio::net::UnixListener::bind(path).map_err(&bind_error)?;
    announce(&dispatcher, &format!("unix://{}", path.display()));
    let incoming = tokio_stream::wrappers::UnixListenerStream::new(listener);
    let result = run(dispatcher, incoming, shutdown).await;
    let _ = std::fs::remove_file(path);
    result
}

#[cfg(not(unix))]
async fn serve_unix(
    _: Dispatcher,
    path: &std::path::Path,
    _: impl Fn(std::io::Error) -> Error,
    _: impl Future<Output = ()> + Send,
) -> Result<(), Error> {
    Err(Error::InvalidAddress(format!("unix://{} (Unix sockets need a Unix system)", path.display())))
}

fn announce(dispatcher: &Dispatcher, address: &str) {
    let n = dispatcher.len();
    tracing::info!("Serving {n} handler{} on {address}", if n == 1 { "" } else { "s" });
}

async fn run<I, IO, IE>(dispatcher: Dispatcher, incoming: I, shutdown: impl Future<Output = ()>) -> Result<(), Error>
where
    I: tokio_stream::Stream<Item = Result<IO, IE>>,
    IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + tonic::transport::server::Connected + Unpin + Send + 'static,
    IE: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let (reporter, health) = tonic_health::server::health_reporter();
    reporter.set_serving::<HandlerServerServer<Dispatcher>>().await;
    Server::builder()
        .add_service(health)
        .add_service(HandlerServerServer::new(dispatcher))
        .serve_with_incoming_shutdown(incoming, async {
            shutdown.await;
            tracing::info!("Stopping: in-flight calls finish, new ones are refused.");
        })
        .await?;
    Ok(())
}

/// Resolves on SIGINT (Ctrl-C) or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        if tokio::signal::ctrl_c().await.is_err() {
            futures::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => futures::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = futures::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => tracing::info!("Signal SIGINT is received."),
        () = term => tracing::info!("Signal SIGTERM is received."),
    }
}

/// Logs to stderr with `RUST_LOG` (default `info`), unless a subscriber is already set.
///
/// With `OTEL_EXPORTER_OTLP_ENDPOINT` set (feature `otlp`), handler spans are exported too,
/// continuing the controller's traces (see [`crate::telemetry`]).
pub fn init_logging() {
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let fmt = tracing_subscriber::fmt::layer().with_ansi(ansi).with_writer(std::io::stderr);
    let registry = tracing_subscriber::registry().with(filter).with(fmt);
    #[cfg(feature = "otlp")]
    let registry = registry.with(crate::telemetry::otlp_layer());
    let _ = registry.try_init();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listen_addresses_parse_in_every_documented_form() {
        let table = [
            ("127.0.0.1:50051", ListenAddr::Tcp("127.0.0.1:50051".into())),
            ("http://127.0.0.1:50051", ListenAddr::Tcp("127.0.0.1:50051".into())),
            ("localhost:8080", ListenAddr::Tcp("localhost:8080".into())),
            ("[::1]:50051", ListenAddr::Tcp("[::1]:50051".into())),
            ("unix:///tmp/bosun.sock", ListenAddr::Unix("/tmp/bosun.sock".into())),
            ("unix:relative.sock", ListenAddr::Unix("relative.sock".into())),
        ];
        for (input, expected) in table {
            assert_eq!(ListenAddr::parse(input).unwrap(), expected, "{input}");
        }
    }

    #[test]
    fn malformed_listen_addresses_are_rejected() {
        for input in ["", "50051", ":50051", "host:", "host:port", "host:99999", "unix://", "http://h:1/x"] {
            assert!(matches!(ListenAddr::parse(input), Err(Error::InvalidAddress(_))), "{input}");
        }
    }
}
