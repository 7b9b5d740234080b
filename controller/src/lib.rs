//! Bosun's controller: watches Kubernetes, detects causes, dispatches them to handler servers
//! over the `bosun.v1` gRPC contract, and records progress on the objects themselves, so a
//! restarted or replaced controller continues where the last one stopped.
//!
//! Layers, outer to inner: [`runtime`] (watchers, per-object queues, the cycle), [`coordination`]
//! (which objects are ours), [`handlers`] (the handler servers, as the controller calls them)
//! and [`endpoints`] (what it serves: admission, liveness), [`state`] (pure logic), [`cluster`]
//! (the only module that talks to the API server), and [`settings`] at the ground floor. The command line (`bosun run`, `bosun dev`: flags, log output, the supervised
//! handler command) lives in the `bosun` binary, behind the default `cli` feature.
#![warn(missing_docs)]

pub mod clock;
pub mod cluster;
pub mod coordination;
pub mod endpoints;
pub mod handlers;
pub mod json;
pub mod logs;
pub mod metrics;
pub mod object;
pub mod rbac;
pub mod runtime;
pub mod settings;
pub mod state;

mod error;

pub use error::Error;
pub use logs::LogSink;
pub use runtime::run;
pub use settings::{Namespaces, Settings, StorageMode};
