//! The cluster state shared by the HTTP layer and the background controllers: the store,
//! the registry of served resources, metrics and the wake-up of the garbage collector; and
//! the objects a fresh cluster holds.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use serde_json::{Value, json};
use tokio::sync::Notify;

use crate::metrics::Metrics;
use crate::registry::{Registry, ResourceInfo, terminating};
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

    /// Create what a fresh cluster has: its namespaces (each with what
    /// [`Cluster::furnish_namespace`] adds), the Service `default/kubernetes` through which
    /// pods reach the API server, and its Endpoints and EndpointSlice naming `listen` (see
    /// [`Cluster::publish_address`]). Each only where it is missing (a data dir may hold it).
    pub fn seed(&self, listen: SocketAddr) {
        for name in ["default", "kube-system", "kube-public", "kube-node-lease"] {
            let body = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
            self.create_missing("namespaces", "", name, body, None);
        }
        // Every namespace, also those of a data dir restored without what they should have
        // (a data dir written before, or without --tls).
        let (namespaces, _) = self.table(&self.core("namespaces")).list(None);
        for ns in namespaces.iter().filter(|ns| !terminating(&ns.value)) {
            self.furnish_namespace(ns.name());
        }
        let service = json!({
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "kubernetes", "namespace": "default", "labels": {"component": "apiserver", "provider": "kubernetes"}},
            "spec": {
                "clusterIP": "10.96.0.1",
                "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": 6443}],
                "sessionAffinity": "None",
                "type": "ClusterIP",
            },
        });
        self.create_missing("services", "default", "kubernetes", service, Some("kube-apiserver"));
        self.publish_address(listen);
    }

    /// The Endpoints and the EndpointSlice `default/kubernetes`: where the API server listens
    /// (loopback when it listens on every address), as the real server's endpoint reconciler
    /// keeps them — written again when they name another address (a data dir from an
    /// earlier run on another port).
    pub fn publish_address(&self, listen: SocketAddr) {
        let ip = match listen.ip() {
            IpAddr::V4(ip) if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
            IpAddr::V6(ip) if ip.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
            ip => ip,
        };
        let port = json!({"name": "https", "port": listen.port(), "protocol": "TCP"});
        let endpoints = json!({
            "apiVersion": "v1",
            "kind": "Endpoints",
            "metadata": {"name": "kubernetes", "namespace": "default", "labels": {"endpointslice.kubernetes.io/skip-mirror": "true"}},
            "subsets": [{"addresses": [{"ip": ip.to_string()}], "ports": [port]}],
        });
        self.create_or_update(&self.core("endpoints"), "default", "kubernetes", endpoints);
        let slice = json!({
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {"name": "kubernetes", "namespace": "default", "labels": {"kubernetes.io/service-name": "kubernetes"}},
            "addressType": if ip.is_ipv4() { "IPv4" } else { "IPv6" },
            "endpoints": [{"addresses": [ip.to_string()], "conditions": {"ready": true}}],
            "ports": [port],
        });
        let info = self.registry.get("discovery.k8s.io", "v1", "endpointslices").expect("built-in resource");
        self.create_or_update(&info, "default", "kubernetes", slice);
    }

    /// What the real cluster's controllers add to every namespace once it exists: the
    /// ServiceAccount `default` (the service account controller's work) and, with TLS, the
    /// ConfigMap `kube-root-ca.crt` with the CA pods trust the API server by (the root CA
    /// certificate publisher's). Called when a namespace is created, here at once rather than
    /// a moment later.
    pub fn furnish_namespace(&self, ns: &str) {
        let body = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default", "namespace": ns}});
        self.create_missing("serviceaccounts", ns, "default", body, Some("kube-controller-manager"));
        if let Some(ca) = &self.ca_pem {
            let body = json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "kube-root-ca.crt", "namespace": ns,
                    "annotations": {"kubernetes.io/description": "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes clusters."}},
                "data": {"ca.crt": ca},
            });
            self.create_missing("configmaps", ns, "kube-root-ca.crt", body, Some("kube-controller-manager"));
        }
    }

    /// What the real cluster's controllers do when the ServiceAccount `default` or the
    /// ConfigMap `kube-root-ca.crt` of a live namespace is deleted: create it again.
    pub fn refurnish_namespace(&self, ns: &str) {
        let live = self.namespace(ns).is_some_and(|n| !terminating(&n));
        if live {
            self.furnish_namespace(ns);
        }
    }

    /// Creates the core/v1 object `ns/name` unless it exists.
    fn create_missing(&self, plural: &str, ns: &str, name: &str, body: Value, manager: Option<&str>) {
        let info = self.core(plural);
        if self.table(&info).get(ns, name).is_some() {
            return;
        }
        let opts = crate::ops::WriteOpts { manager: manager.map(String::from), ..Default::default() };
        match crate::ops::create(self, &info, ns, body, &opts) {
            Ok(_) => {}
            Err(e) if e.code == 409 => {} // created meanwhile
            Err(e) => tracing::error!("cannot create {plural} {ns}/{name}: {}", e.message),
        }
    }

    /// Creates the API server's own object `ns/name`, or replaces it with `body` (a no-op
    /// when it already says the same).
    fn create_or_update(&self, info: &ResourceInfo, ns: &str, name: &str, body: Value) {
        let opts = crate::ops::WriteOpts { manager: Some("kube-apiserver".into()), ..Default::default() };
        let written = match self.table(info).get(ns, name) {
            None => crate::ops::create(self, info, ns, body, &opts),
            Some(_) => crate::ops::update(self, info, ns, name, crate::ops::Subresource::Main, body, &opts),
        };
        if let Err(e) = written {
            tracing::error!("cannot write {} {ns}/{name}: {}", info.plural, e.message);
        }
    }

    /// Wake the background controllers.
    pub fn kick(&self) {
        self.gc.notify_one();
    }
}

#[cfg(test)]
mod tests {
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
