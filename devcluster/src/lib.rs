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
pub mod builtin;
pub mod cluster;
pub mod crd;
pub mod gc;
pub mod managed;
pub mod metrics;
pub mod ops;
pub mod patch;
pub mod persist;
pub mod protobuf;
pub mod registry;
pub mod schema;
pub mod selector;
pub mod status;
pub mod store;
pub mod validate;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

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
}

/// How to run the dev cluster.
#[derive(Debug, Clone)]
pub struct Config {
    /// Require this bearer token on every request (401 otherwise).
    pub token: Option<String>,
    /// Keep objects in this directory across restarts.
    pub data_dir: Option<PathBuf>,
    /// Watch events kept per resource for watches resuming from a resourceVersion.
    pub watch_history: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config { token: None, data_dir: None, watch_history: 10_000 }
    }
}

/// A running dev cluster; dropping it stops the server.
pub struct DevCluster {
    addr: std::net::SocketAddr,
    token: Option<String>,
    cluster: Arc<Cluster>,
    stop: watch::Sender<bool>,
    server: Option<JoinHandle<()>>,
    gc: JoinHandle<()>,
}

impl DevCluster {
    /// Serve on a listener the caller bound (tests bind 127.0.0.1:0).
    pub async fn start(listener: TcpListener, config: Config) -> Result<DevCluster, Error> {
        let addr = listener.local_addr().map_err(Error::Listen)?;
        let (log, loaded) = match &config.data_dir {
            Some(dir) => {
                let (log, loaded) = persist::Log::open(dir)?;
                (Some(Arc::new(log)), loaded)
            }
            None => (None, Default::default()),
        };
        let store = Store::new(1, config.watch_history.max(1), log);
        let cluster = Cluster::new(store, config.token.clone());
        let builtin_keys: std::collections::HashSet<String> =
            cluster.registry.all().iter().filter(|i| i.builtin).map(|i| i.storage.clone()).collect();
        let mut max_rv = loaded.last_rv.max(1);
        for ((table, _, _), value) in loaded.objects {
            let rv = value
                .get("metadata")
                .and_then(|v| v.get("resourceVersion"))
                .and_then(|v| v.as_str())
                .and_then(|s| s.parse().ok())
                .unwrap_or(0);
            max_rv = max_rv.max(rv);
            cluster.store.table(&table, builtin_keys.contains(&table)).load(value);
        }
        cluster.store.bump_to(max_rv);
        crd::restore(&cluster);
        cluster.seed(addr);
        let stop = cluster.stopping.clone();
        let mut stop_rx = stop.subscribe();
        let app = api::router(cluster.clone());
        let server = tokio::spawn(async move {
            let shutdown = async move {
                let _ = stop_rx.wait_for(|s| *s).await;
            };
            if let Err(e) = axum::serve(listener, app).with_graceful_shutdown(shutdown).await {
                tracing::error!("dev cluster server failed: {e}");
            }
        });
        let gc = tokio::spawn(gc::run(cluster.clone()));
        Ok(DevCluster { addr, token: config.token, cluster, stop, server: Some(server), gc })
    }

    /// Convenience: bind 127.0.0.1:0 with `Config::default()`.
    pub async fn start_local() -> Result<DevCluster, Error> {
        let listener = TcpListener::bind("127.0.0.1:0").await.map_err(Error::Listen)?;
        Self::start(listener, Config::default()).await
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
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
        let cfg = json!({
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "bosun-dev", "cluster": {"server": self.url()}}],
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
        if let Some(t) = &self.token
            && let Ok(auth) = serde_json::from_value(json!({"token": t}))
        {
            config.auth_info = auth;
        }
        config
    }

    /// A kube client for this cluster.
    pub fn client(&self) -> kube::Client {
        kube::Client::try_from(self.kube_config()).expect("client for a plain-http cluster")
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
