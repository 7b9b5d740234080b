//! `bosun-devcluster`: an in-memory Kubernetes API server that real clients (kubectl,
//! kube-rs, the Python client, Kopf) accept unchanged. It serves discovery, the common
//! built-in kinds and CRD-defined resources with Kubernetes' semantics — resourceVersions,
//! watches with bookmarks and 410 Gone, conflicts, finalizers, garbage collection — from
//! memory, optionally persisted to a directory.
//!
//! ```no_run
//! # async fn demo() -> Result<(), bosun_devcluster::Error> {
//! let cluster = bosun_devcluster::DevCluster::start_local().await?;
//! let client = cluster.client();
//! # let _ = client;
//! cluster.shutdown().await;
//! # Ok(()) }
//! ```
#![warn(missing_docs)]

pub mod api;
pub mod apply;
pub mod authz;
pub mod builtin;
pub mod causes;
pub mod cluster;
pub mod crd;
pub mod depth;
pub mod gc;
pub mod jsonpath;
pub mod managed;
pub mod meta;
pub mod metrics;
pub mod ops;
pub mod patch;
pub mod persist;
pub mod protobuf;
pub mod registry;
pub mod schema;
pub mod selector;
pub mod shape;
pub mod status;
pub mod store;
pub mod token;
pub mod validate;
pub mod webhook;

pub use bosun_https::{serve, tls};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use serde_json::json;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::cluster::Cluster;
use crate::store::Store;

/// Errors of starting the dev cluster.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Binding or inspecting the listener failed.
    #[error("cannot listen: {0}")]
    Listen(#[source] std::io::Error),
    /// The data directory could not be opened or replayed.
    #[error("cannot open the data directory: {0}")]
    Persist(#[from] persist::Error),
    /// `--tls`: the certificates could not be made, kept or used.
    #[error(transparent)]
    Tls(#[from] tls::Error),
}

/// How to run the dev cluster.
#[derive(Debug, Clone)]
pub struct Config {
    /// Require this bearer token, or a service account token the cluster issued, on every
    /// request (401 otherwise).
    pub token: Option<String>,
    /// Keep objects in this directory across restarts.
    pub data_dir: Option<PathBuf>,
    /// Watch events kept per resource for watches resuming from a resourceVersion.
    pub watch_history: usize,
    /// Serve HTTPS with a CA and serving certificate of the dev cluster's own (kept in the
    /// data dir, if any); the kubeconfig carries the CA.
    pub tls: bool,
    /// Time a client has to send a request's headers, from when the server waits for them
    /// (a kept-alive HTTP/1.1 connection that sends nothing more is closed after it too). The
    /// real server's `ReadHeaderTimeout`: 32 s.
    pub header_read_timeout: Duration,
    /// Connections served at once; more wait in the listen backlog until one closes.
    pub max_connections: usize,
    /// A watch whose reader falls this many bytes of events behind is ended (cleanly, as the
    /// real server ends a watcher it cannot keep up with; the client watches again).
    pub watch_lag_limit: u64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            token: None,
            data_dir: None,
            watch_history: 10_000,
            tls: false,
            header_read_timeout: Duration::from_secs(32),
            max_connections: 1000,
            watch_lag_limit: store::WATCH_LAG_LIMIT,
        }
    }
}

/// A running dev cluster; dropping it stops the server.
pub struct DevCluster {
    addr: std::net::SocketAddr,
    token: Option<String>,
    tls: Option<tls::Tls>,
    cluster: Arc<Cluster>,
    stop: watch::Sender<bool>,
    server: Option<JoinHandle<()>>,
    gc: JoinHandle<()>,
}

impl DevCluster {
    /// Serve on a listener the caller bound (tests bind 127.0.0.1:0).
    pub async fn start(listener: TcpListener, config: Config) -> Result<DevCluster, Error> {
        let addr = listener.local_addr().map_err(Error::Listen)?;
        let tls = match config.tls {
            true => Some(tls::Tls::load_or_generate(config.data_dir.as_deref(), &tls::serving_names(addr))?),
            false => None,
        };
        let acceptor = tls.as_ref().map(tls::Tls::acceptor).transpose()?;
        let (log, loaded) = match &config.data_dir {
            Some(dir) => {
                let (log, loaded) = persist::Log::open(dir)?;
                (Some(Arc::new(log)), loaded)
            }
            None => (None, Default::default()),
        };
        // The restored resourceVersion is where every table's watch history starts: a watch
        // from an older version cannot be served (the events before the restart are not kept)
        // and is answered 410 Gone, as a real server answers one its watch cache cannot serve.
        let restored_rv = loaded.objects.values().map(meta::rv_of).fold(loaded.last_rv.max(1), u64::max);
        let store = Store::new(restored_rv, config.watch_history.max(1), log).with_watch_lag_limit(config.watch_lag_limit);
        let cluster = Cluster::new(store, config.token.clone(), tls.as_ref().map(|t| t.ca_pem.clone()));
        let builtin_keys: std::collections::HashSet<String> =
            cluster.registry.all().iter().filter(|i| i.builtin).map(|i| i.storage.clone()).collect();
        for ((table, _, _), value) in loaded.objects {
            cluster.store.table(&table, builtin_keys.contains(&table)).load(value);
        }
        crd::restore(&cluster);
        cluster.seed(addr);
        let stop = cluster.stopping.clone();
        let limits = serve::Limits { header_read_timeout: config.header_read_timeout, max_connections: config.max_connections };
        let server = tokio::spawn(serve::serve(listener, api::router(cluster.clone()), acceptor, limits, stop.subscribe()));
        let gc = tokio::spawn(gc::run(cluster.clone()));
        Ok(DevCluster { addr, token: config.token, tls, cluster, stop, server: Some(server), gc })
    }

    /// Convenience: bind 127.0.0.1:0 with `Config::default()`.
    pub async fn start_local() -> Result<DevCluster, Error> {
        let listener = TcpListener::bind("127.0.0.1:0").await.map_err(Error::Listen)?;
        Self::start(listener, Config::default()).await
    }

    /// `http://127.0.0.1:PORT`, or `https://` with TLS.
    pub fn url(&self) -> String {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        format!("{scheme}://{}", self.addr)
    }

    /// The CA certificate (PEM) that signed the serving certificate, with TLS.
    pub fn ca_pem(&self) -> Option<&str> {
        self.tls.as_ref().map(|t| t.ca_pem.as_str())
    }

    /// The shared cluster state (for in-process inspection).
    pub fn cluster(&self) -> &Arc<Cluster> {
        &self.cluster
    }

    /// A complete kubeconfig: cluster, user (with the token, if any), context, current-context.
    pub fn kubeconfig_yaml(&self) -> String {
        let user = match &self.token {
            Some(t) => json!({"name": "bosun-dev", "user": {"token": t}}),
            None => json!({"name": "bosun-dev", "user": {}}),
        };
        let mut cluster = json!({"server": self.url()});
        if let Some(ca) = self.ca_pem() {
            cluster["certificate-authority-data"] = json!(base64::engine::general_purpose::STANDARD.encode(ca));
        }
        let cfg = json!({
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "bosun-dev", "cluster": cluster}],
            "users": [user],
            "contexts": [{"name": "bosun-dev", "context": {"cluster": "bosun-dev", "user": "bosun-dev", "namespace": "default"}}],
            "current-context": "bosun-dev",
            "preferences": {},
        });
        serde_yaml::to_string(&cfg).unwrap_or_default()
    }

    /// Write the kubeconfig to `path`, readable by its owner alone (it may hold the token).
    pub fn write_kubeconfig(&self, path: &Path) -> std::io::Result<()> {
        persist::write_private(path, self.kubeconfig_yaml().as_bytes())
    }

    /// A `kube::Config` for this cluster.
    pub fn kube_config(&self) -> kube::Config {
        let mut config = kube::Config::new(self.url().parse().expect("valid url"));
        config.default_namespace = "default".into();
        config.root_cert = self.tls.as_ref().map(|t| vec![t.ca_der()]);
        if let Some(t) = &self.token
            && let Ok(auth) = serde_json::from_value(json!({"token": t}))
        {
            config.auth_info = auth;
        }
        config
    }

    /// A kube client for this cluster.
    pub fn client(&self) -> kube::Client {
        kube::Client::try_from(self.kube_config()).expect("a client for the dev cluster's own address and CA")
    }

    /// Stop serving: open watches are closed and in-flight requests finish.
    pub async fn shutdown(mut self) {
        let _ = self.stop.send(true);
        if let Some(server) = self.server.take() {
            let abort = server.abort_handle();
            if tokio::time::timeout(Duration::from_secs(2), server).await.is_err() {
                abort.abort();
            }
        }
        self.gc.abort();
    }
}

impl Drop for DevCluster {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
        if let Some(server) = self.server.take() {
            server.abort();
        }
        self.gc.abort();
    }
}

/// A dev cluster served in-process without a listener: its [`api::router`] is a tower
/// Service that a `kube::Client` can be built on directly (`kube::Client::new`), so tests
/// and simulations reach it with no socket, on tokio's (possibly paused) clock. Dropping it
/// stops its garbage collector.
pub struct InMemory {
    /// The shared cluster state.
    pub cluster: Arc<Cluster>,
    /// The API, as a tower Service.
    pub router: axum::Router,
    gc: JoinHandle<()>,
}

impl DevCluster {
    /// An empty dev cluster (default namespaces and built-in objects seeded) served in-process
    /// with the default configuration; its garbage collector runs as a task.
    pub fn in_memory() -> InMemory {
        let config = Config::default();
        let store = Store::new(1, config.watch_history, None).with_watch_lag_limit(config.watch_lag_limit);
        let cluster = Cluster::new(store, None, None);
        cluster.seed(std::net::SocketAddr::from(([127, 0, 0, 1], 443)));
        let gc = tokio::spawn(gc::run(cluster.clone()));
        InMemory { router: api::router(cluster.clone()), cluster, gc }
    }
}

impl Drop for InMemory {
    fn drop(&mut self) {
        self.gc.abort();
    }
}
