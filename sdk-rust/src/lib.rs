//! Write Bosun handler servers in Rust, as lightly as Kopf's decorators.
//!
//! A handler server registers async functions per resource and cause, and answers the
//! controller's `bosun.v1` gRPC calls: the controller watches Kubernetes, detects causes,
//! records progress on the objects and calls the handlers here; handlers only compute.
//!
//! ```no_run
//! use bosun_sdk::{Cause, HandlerError, Operator};
//! use serde_json::{json, Value};
//!
//! async fn create_fn(cause: Cause) -> Result<Value, HandlerError> {
//!     cause.info(format!("And here we are! Creating: {}", cause.spec()));
//!     Ok(json!({"message": "hello world"})) // stored at status.create_fn
//! }
//!
//! #[tokio::main]
//! async fn main() -> Result<(), bosun_sdk::ServeError> {
//!     Operator::new()
//!         .on_create("kopf.dev/v1/kopfexamples", create_fn)
//!         .serve_default() // where BOSUN_LISTEN says; default 127.0.0.1:50051
//!         .await
//! }
//! ```
//!
//! - Handlers: `async fn(Cause) -> Result<T, HandlerError>` (or closures), `T: Serialize`;
//!   a non-null `T` is stored at `status.<handler-id>`.
//! - Failures: [`TemporaryError`] (retried, optionally after a delay), [`PermanentError`], any
//!   other error through `?` (unexpected: the handler's [`ErrorsMode`] decides), and panics
//!   (reported as unexpected errors; the server keeps running).
//! - Calls are at-least-once: after a crash of either side, an attempt may be repeated, so
//!   handlers must be idempotent.
//! - [`testing`] (feature `testing`): dev cluster, controller and handler server in one test.

#![deny(missing_docs)]

mod cause;
mod dispatch;
mod error;
mod patch;
mod registry;
mod resource;
mod serve;
#[cfg(feature = "testing")]
pub mod testing;

pub use cause::{Cause, Change, Error as CauseError, EventRecord, Level, LogRecord, Operation, Reason, Resource};
pub use dispatch::Dispatcher;
#[cfg(feature = "anyhow")]
pub use error::from_anyhow;
pub use error::{BoxError, HandlerError, PermanentError, ResultExt, TemporaryError};
pub use patch::{Patch, PatchRef};
pub use registry::{Error as RegistryError, ErrorsMode, Match, Operator};
pub use resource::{Error as SelectorError, Selector};
pub use serve::{DEFAULT_LISTEN, Error as ServeError, LISTEN_ENV, ListenAddr, init_logging, shutdown_signal};

/// The generated contract types, for tests and advanced uses.
pub use bosun_proto::v1 as proto;
