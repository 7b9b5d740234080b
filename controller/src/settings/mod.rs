//! The controller's settings ([`Settings`]), as the command line builds them, and how those
//! the handler servers hold or their startup handlers set are applied over them
//! ([`from_servers`]).

pub mod checks;
pub mod from_servers;

use std::time::Duration;

use crate::logs::LogSink;
use crate::{clock, cluster, coordination, endpoints, state};

/// Which namespaces the controller serves.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Namespaces {
    /// Every namespace (`-A`), and cluster-scoped resources.
    #[default]
    All,
    /// Namespaces matching these Kopf-style patterns: globs, `!` negation (`-n NS ...`).
    Patterns(Vec<String>),
}

impl Namespaces {
    /// The namespaces by name when the patterns are plain names (each watched on its own);
    /// `None` for all namespaces and for globs (one watch over all namespaces, filtered).
    pub fn plain_names(&self) -> Option<&[String]> {
        match self {
            Namespaces::Patterns(p) if plain_names(p) => Some(p),
            _ => None,
        }
    }
}

/// Where the controller keeps handlers' progress on objects.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum StorageMode {
    /// In `status.<prefix>` when the resource's status subresource keeps unknown fields
    /// (a retry's progress travels with the results), else in annotations.
    #[default]
    Auto,
    /// Always in annotations.
    Annotations,
    /// In status where possible (same as auto).
    Status,
}

/// Everything `run` needs besides the Kubernetes client.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Handler server endpoints: `http://host:port` or `unix:///path`.
    pub handlers: Vec<String>,
    /// Which namespaces to serve.
    pub namespaces: Namespaces,
    /// Prefix of the annotations and finalizer the controller writes (`bosun.dev`).
    pub prefix: String,
    /// Write Kopf's exact annotation keys and finalizer (in annotations).
    pub kopf_compat: bool,
    /// Where progress is kept.
    pub storage: StorageMode,
    /// Keep the diffbase in status where the status keeps unknown fields (Kopf's
    /// `StatusDiffBaseStorage`; one write fewer per handled cause that has results, but a lost
    /// status re-runs the create handlers), instead of its annotation.
    pub diffbase_in_status: bool,
    /// Run without peering.
    pub standalone: bool,
    /// How to take part in peering, unless `standalone`.
    pub peering: coordination::PeeringSetup,
    /// This controller's identity to its peers and in Leases (detected when none: the pod's
    /// name from `POD_ID`/`POD_NAME`, else `user@host/time/random`).
    pub identity: Option<String>,
    /// How replicas share the objects: each all, a leader, or shards.
    pub replicas: coordination::Replicas,
    /// How many objects are processed at once (64 by default, as many as API requests in
    /// flight: more cycles would only wait for those while holding their memory).
    pub max_workers: usize,
    /// The server-side timeout of each watch request (`timeoutSeconds`): the API server ends
    /// the watch after this long and it resumes from its last resourceVersion (no relist, no
    /// event delivered again); a connection that brings nothing, not even a bookmark, for this
    /// long plus 5 s is taken for stuck and reopened the same way. 60 s by default, so that a
    /// dead watch is noticed within 65 s, whether the server sends bookmarks or not.
    pub inactivity_timeout: Duration,
    /// Where log lines are copied to, besides `tracing`.
    pub log_sink: Option<LogSink>,
    /// Serve the liveness endpoint (with probe results) at this URL, e.g. `http://0.0.0.0:8080/healthz`.
    pub liveness: Option<String>,
    /// Serve `/metrics`, `/healthz` and `/readyz` on this address, e.g. `0.0.0.0:9090`.
    pub metrics_listen: Option<String>,
    /// How admission webhooks are served and configured, when validating or mutating
    /// handlers are registered.
    pub admission: endpoints::admission::Setup,
    /// How events are posted about objects.
    pub posting: cluster::posting::Posting,
    /// What startup handlers (or an embedder) chose over the default naming and place of the
    /// controller's marks on objects (`prefix`, `kopf_compat`, `storage`).
    pub persistence: state::storage::Persistence,
    /// The settings given explicitly (a flag or its `BOSUN_*` variable), by their flag
    /// (`--max-workers`): startup handlers' settings do not override them.
    pub explicit: std::collections::BTreeSet<String>,
    /// The wall clock the runtime and coordination read (Lease times, timers' and retries'
    /// wall deadlines): [`clock::Clock::Wall`], or one that follows tokio's paused clock with
    /// a skew of its own (the replica simulation in `tests/src/sim`).
    pub clock: clock::Clock,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            handlers: Vec::new(),
            namespaces: Namespaces::All,
            prefix: "bosun.dev".into(),
            kopf_compat: false,
            storage: StorageMode::Auto,
            diffbase_in_status: false,
            standalone: true,
            peering: coordination::PeeringSetup::default(),
            identity: None,
            replicas: coordination::Replicas::Each,
            max_workers: 64,
            inactivity_timeout: cluster::watching::WATCH_TIMEOUT,
            log_sink: None,
            liveness: None,
            metrics_listen: None,
            admission: endpoints::admission::Setup::default(),
            posting: cluster::posting::Posting::default(),
            persistence: state::storage::Persistence::default(),
            explicit: std::collections::BTreeSet::new(),
            clock: clock::Clock::Wall,
        }
    }
}

/// Whether namespace patterns are plain names (each can be watched on its own).
pub fn plain_names(patterns: &[String]) -> bool {
    !patterns.is_empty() && patterns.iter().all(|p| !p.is_empty() && !p.contains(['*', '?', '!', '[']))
}
