//! The cluster state shared by the HTTP layer and the background controllers: the store,
//! the registry of served resources, metrics and the wake-up of the garbage collector. The
//! objects a fresh cluster holds are written through the verbs, in `ops/bootstrap.rs`.

use std::sync::Arc;

use serde_json::Value;
use tokio::sync::Notify;

use crate::metrics::Metrics;
use crate::registry::{Registry, ResourceInfo};
use crate::store::{Store, Table};
use crate::token::TokenKey;

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
    /// With TLS, the CA certificate (PEM) every namespace's `kube-root-ca.crt` carries.
    pub ca_pem: Option<String>,
    /// Signs and checks the service account tokens the cluster issues.
    pub token_key: TokenKey,
    /// Set to true when the server stops: open watches end.
    pub stopping: tokio::sync::watch::Sender<bool>,
    /// Where new objects' uids come from.
    pub uids: Uids,
}

/// Where new objects' uids come from: random (v4), or a sequence drawn from a seed, so that a
/// simulation that replays a run gets the same uids (and the same shards) again.
#[derive(Debug, Default)]
pub struct Uids(parking_lot::Mutex<Option<(u64, u64)>>);

impl Uids {
    /// From now on, uids follow this seed.
    pub fn seed(&self, seed: u64) {
        *self.0.lock() = Some((seed, 0));
    }

    /// The next uid.
    pub fn next(&self) -> String {
        match &mut *self.0.lock() {
            None => uuid::Uuid::new_v4().to_string(),
            Some((seed, n)) => {
                *n += 1;
                // splitmix64, twice: spread like random uids (the shards' ring hashes them).
                let mix = |mut z: u64| {
                    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
                    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
                    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
                    z ^ (z >> 31)
                };
                let hi = mix(*seed ^ n.rotate_left(32));
                uuid::Builder::from_random_bytes(((u128::from(hi) << 64) | u128::from(mix(hi ^ *n))).to_be_bytes()).into_uuid().to_string()
            }
        }
    }
}

impl Cluster {
    /// A cluster over `store` with the built-in resources.
    pub fn new(store: Store, token: Option<String>, ca_pem: Option<String>) -> Arc<Self> {
        Arc::new(Cluster {
            store,
            registry: Registry::with_builtins(),
            metrics: Metrics::default(),
            gc: Notify::new(),
            token,
            ca_pem,
            token_key: TokenKey::new(),
            stopping: tokio::sync::watch::channel(false).0,
            uids: Uids::default(),
        })
    }

    /// The table of a resource. A custom resource's table is not brought back once its CRD
    /// is gone (a request that raced the deletion gets a dropped table: its watch ends).
    pub fn table(&self, info: &ResourceInfo) -> Arc<Table> {
        if info.builtin {
            return self.store.table(&info.storage, true);
        }
        self.store.table_if(&info.storage, false, || self.registry.serves_storage(&info.storage))
    }

    /// The info of a built-in core/v1 resource.
    pub fn core(&self, plural: &str) -> Arc<ResourceInfo> {
        self.registry.get("", "v1", plural).expect("built-in resource")
    }

    /// The namespace object, if it exists.
    pub fn namespace(&self, name: &str) -> Option<Value> {
        self.table(&self.core("namespaces")).get("", name).map(|o| o.value.clone())
    }

    /// Wake the background controllers.
    pub fn kick(&self) {
        self.gc.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::store::Store;

    #[test]
    fn a_request_that_raced_a_crds_deletion_does_not_bring_its_table_back() {
        let cluster = Cluster::new(Store::new(1, 10, None), None, None);
        let crd = json!({"spec": {"group": "g.dev", "scope": "Namespaced", "names": {"kind": "W", "plural": "ws"},
            "versions": [{"name": "v1", "served": true, "storage": true}]}});
        cluster.registry.set_crd("g.dev", "ws", crate::crd::resources(&crd));
        let stale = cluster.registry.get("g.dev", "v1", "ws").unwrap();
        let before = cluster.table(&stale);
        assert!(!before.is_dropped());
        // The CRD goes, as crd::after_delete does it.
        cluster.registry.remove_crd("g.dev", "ws");
        cluster.store.drop_table("g.dev/ws");
        assert!(before.is_dropped(), "watches of the old table end");
        let late = cluster.table(&stale);
        assert!(late.is_dropped(), "a late request's watch ends too");
        // A new CRD of the same name gets a table of its own at once.
        cluster.registry.set_crd("g.dev", "ws", crate::crd::resources(&crd));
        let fresh = cluster.table(&cluster.registry.get("g.dev", "v1", "ws").unwrap());
        assert!(!fresh.is_dropped());
        assert!(!Arc::ptr_eq(&fresh, &late));
    }
}
