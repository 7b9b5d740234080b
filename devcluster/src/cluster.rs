//! The cluster state shared by the HTTP layer and the background controllers: the store,
//! the registry of served resources, metrics and the wake-up of the garbage collector.

use std::sync::Arc;

use serde_json::{Value, json};
use tokio::sync::Notify;

use crate::metrics::Metrics;
use crate::registry::{Registry, ResourceInfo};
use crate::store::{Store, Table};

/// Everything the server serves from.
pub struct Cluster {
    /// Objects and watch history.
    pub store: Store,
    /// Served resources.
    pub registry: Registry,
    /// Request counters.
    pub metrics: Metrics,
    /// Wakes the garbage collector / namespace and CRD controllers.
    pub gc: Notify,
    /// The required bearer token, if any.
    pub token: Option<String>,
    /// Set to true when the server stops: open watches end.
    pub stopping: tokio::sync::watch::Sender<bool>,
}

impl Cluster {
    /// A cluster over `store` with the built-in resources.
    pub fn new(store: Store, token: Option<String>) -> Arc<Self> {
        Arc::new(Cluster {
            store,
            registry: Registry::with_builtins(),
            metrics: Metrics::default(),
            gc: Notify::new(),
            token,
            stopping: tokio::sync::watch::channel(false).0,
        })
    }

    /// The table of a resource.
    pub fn table(&self, info: &ResourceInfo) -> Arc<Table> {
        self.store.table(&info.storage, info.builtin)
    }

    /// The info of a built-in core/v1 resource.
    pub fn core(&self, plural: &str) -> Arc<ResourceInfo> {
        self.registry.get("", "v1", plural).expect("built-in resource")
    }

    /// The namespace object, if it exists.
    pub fn namespace(&self, name: &str) -> Option<Value> {
        self.table(&self.core("namespaces")).get("", name).map(|o| o.value.clone())
    }

    /// Create the namespaces a fresh cluster has.
    pub fn seed(&self) {
        let info = self.core("namespaces");
        for name in ["default", "kube-system", "kube-public", "kube-node-lease"] {
            if self.namespace(name).is_some() {
                continue;
            }
            let body = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
            let opts = crate::ops::WriteOpts { manager: None, ..Default::default() };
            if let Err(e) = crate::ops::create(self, &info, "", body, &opts) {
                tracing::error!("cannot create namespace {name}: {}", e.message);
            }
        }
    }

    /// Wake the background controllers.
    pub fn kick(&self) {
        self.gc.notify_one();
    }
}
