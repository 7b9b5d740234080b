//! What can go wrong in a test run.

use std::time::Duration;

use crate::{registry, resource, serve};

/// What went wrong in a test run.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The operator's registrations are invalid.
    #[error("invalid handlers: {0}")]
    Registry(#[from] registry::Error),
    /// The dev cluster did not start.
    #[error("cannot start the dev cluster: {0}")]
    Cluster(#[from] bosun_devcluster::Error),
    /// A local listener could not be bound.
    #[error("cannot listen for the handler server: {0}")]
    Listen(#[source] std::io::Error),
    /// The handler server failed.
    #[error("the handler server failed: {0}")]
    Serve(#[from] serve::Error),
    /// The controller stopped with an error.
    #[error("the controller failed: {0}")]
    Controller(#[from] bosun_controller::Error),
    /// The controller exited while the test was waiting for something.
    #[error("the controller exited while waiting for {0}")]
    ControllerExited(String),
    /// A YAML file cannot be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// The system's complaint.
        #[source]
        source: std::io::Error,
    },
    /// YAML that does not parse.
    #[error("invalid YAML: {0}")]
    Yaml(#[source] serde_yaml::Error),
    /// A document that is not a Kubernetes object.
    #[error("invalid object: {0}")]
    InvalidDocument(String),
    /// A resource name or target that does not parse.
    #[error(transparent)]
    Selector(#[from] resource::Error),
    /// A target without a name.
    #[error("invalid target {0:?}: expected `resource/name`, for example `kex/kopf-example-1`")]
    InvalidTarget(String),
    /// No served resource has this name.
    #[error("no resource named {0} is served")]
    UnknownResource(String),
    /// A call to the API server failed.
    #[error("cannot {action}: {source}")]
    Api {
        /// What was being done.
        action: String,
        /// The client's error.
        #[source]
        source: kube::Error,
    },
    /// A part did not stop cleanly (it panicked, or hung and was aborted).
    #[error("the {part} did not stop cleanly: {message}")]
    Stop {
        /// `controller` or `handler server`.
        part: &'static str,
        /// What happened.
        message: String,
    },
    /// A condition did not come true in time.
    #[error("timed out after {timeout:?} waiting for {what}; last seen: {last}")]
    Timeout {
        /// What was awaited.
        what: String,
        /// How long.
        timeout: Duration,
        /// What was seen last (the object, or the log's tail).
        last: String,
    },
}
