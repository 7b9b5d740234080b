//! Why the controller could not run.

use crate::{coordination, endpoints, handlers, runtime, state};

/// Why the controller could not run.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A handler server address or call failed at startup.
    #[error(transparent)]
    Dispatch(#[from] handlers::dispatch::Error),
    /// The handler servers registered something invalid.
    #[error("invalid handler registry: {0}")]
    Registry(#[from] state::registry::Error),
    /// The admission webhook server could not start.
    #[error(transparent)]
    Webhooks(#[from] endpoints::webhooks::Error),
    /// A startup handler failed for good: the controller does not start watching.
    #[error(transparent)]
    Startup(#[from] runtime::activities::StartupFailed),
    /// The liveness endpoint could not be served.
    #[error("cannot serve the liveness endpoint: {0}")]
    Liveness(#[from] crate::endpoints::liveness::BadUrl),
    /// The liveness endpoint's address cannot be listened on.
    #[error("cannot listen for the liveness endpoint on {addr}: {error}")]
    LivenessListen {
        /// The address.
        addr: String,
        /// Why.
        #[source]
        error: std::io::Error,
    },
    /// The metrics endpoint's address cannot be listened on.
    #[error("cannot listen for the metrics endpoint on {addr}: {error}")]
    MetricsListen {
        /// The address.
        addr: String,
        /// Why.
        #[source]
        error: std::io::Error,
    },
    /// Peering or Leases could not start.
    #[error(transparent)]
    Coordination(#[from] Box<coordination::Error>),
    /// No handler server was given.
    #[error("no handler server given: pass --handler ADDR (or a command after `--` with `bosun dev`)")]
    NoHandlers,
}
