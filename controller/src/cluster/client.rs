//! The kube client the controller talks through, built layer by layer instead of with kube's
//! default stack, because that stack is wrong for a controller in three ways:
//!
//! - kube retries 429/503/504 up to 15 times inside every request (`Config::default_retry`),
//!   under the controller's own retries ([`super::Cluster::call`]): during a degraded API
//!   server one status patch took from 25 minutes to hours, and each of the hidden attempts
//!   went uncounted. Here the only retry layer is the controller's.
//! - no request has a time limit, and a half-open connection hangs its request forever: here
//!   every request must bring its response headers within [`Networking::request_timeout`],
//!   and every request but a watch its whole body too ([`super::deadline`]; a watch is bounded
//!   by the watcher's own silence deadline);
//! - the connections have no TCP keepalive, so a peer that vanished is not noticed on an idle
//!   (watching) connection: here the kernel probes it.
//!
//! The rest is kube's: TLS from the kubeconfig (rustls), authentication (tokens, exec plugins,
//! client certificates), extra headers and impersonation, the cluster's base URL. The metrics
//! layer is outermost, so it counts every request actually sent.

use std::time::Duration;

use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use kube::client::ConfigExt;
use tower::{BoxError, ServiceBuilder};

use super::{deadline, metered};

/// How the controller's requests are bounded (the `--request-timeout` flag).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Networking {
    /// Every request's limit: to its response headers for watches, to the end of the
    /// response's body for all others.
    pub request_timeout: Duration,
    /// Idle time before the first TCP keepalive probe of a connection.
    pub keepalive: Duration,
}

/// The default request timeout. The API server ends every non-watch request itself after
/// its own `--request-timeout` (60 s by default, answered 504); 90 s leaves room for a slow
/// network and notices a connection that lost its peer well before Kopf's 5 minutes.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(90);

impl Default for Networking {
    fn default() -> Self {
        Networking { request_timeout: REQUEST_TIMEOUT, keepalive: Duration::from_secs(30) }
    }
}

/// Why no client could be built from a configuration.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The kubeconfig's TLS or authentication settings are unusable.
    #[error("cannot build a client for the cluster: {0}")]
    Config(#[from] kube::Error),
    /// A proxy is configured (`proxy-url`); the controller connects directly.
    #[error("the kubeconfig names a proxy ({0}), which the controller does not support: connect to the API server directly")]
    Proxy(http::Uri),
}

/// A kube client for `config` with the controller's stack: metrics, time limits, keepalive,
/// and no retries of its own.
pub fn build(config: kube::Config, networking: &Networking) -> Result<kube::Client, Error> {
    if let Some(proxy) = &config.proxy_url {
        return Err(Error::Proxy(proxy.clone()));
    }
    let mut connector = HttpConnector::new();
    connector.enforce_http(false);
    connector.set_connect_timeout(config.connect_timeout);
    connector.set_keepalive(Some(networking.keepalive));
    connector.set_keepalive_interval(Some(networking.keepalive / 3));
    connector.set_keepalive_retries(Some(3));
    connector.set_nodelay(true);
    // A cluster over plain HTTP (`kubectl proxy`, the dev cluster) is reached without TLS: the
    // TLS connector would load the system's trust store, and the image (`scratch`) has none.
    if config.cluster_url.scheme() == Some(&http::uri::Scheme::HTTP) {
        let http = hyper_util::client::legacy::Client::builder(TokioExecutor::new()).build(connector);
        return layered(config, networking, http);
    }
    let https = config.rustls_https_connector_with_connector(connector)?;
    let http = hyper_util::client::legacy::Client::builder(TokioExecutor::new()).build(https);
    layered(config, networking, http)
}

/// The controller's layers over a hyper client.
fn layered<C>(
    config: kube::Config,
    networking: &Networking,
    http: hyper_util::client::legacy::Client<C, kube::client::Body>,
) -> Result<kube::Client, Error>
where
    C: hyper_util::client::legacy::connect::Connect + Clone + Send + Sync + 'static,
{
    let service = ServiceBuilder::new()
        .layer(metered::Layer)
        .layer(deadline::Layer::new(networking.request_timeout))
        .layer(config.base_uri_layer())
        .option_layer(config.auth_layer()?)
        .layer(config.extra_headers_layer()?)
        .map_err(BoxError::from)
        .service(http);
    Ok(kube::Client::new(service, config.default_namespace))
}
