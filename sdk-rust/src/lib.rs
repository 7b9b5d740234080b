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
//! - Kinds: `on_create`, `on_update`, `on_delete`, `on_resume`, `on_field`, `on_event` (spies),
//!   `on_timer`, and the activities `on_startup`, `on_cleanup`, `on_probe`; sub-handlers
//!   ([`Cause::subhandler`] + [`Operator::subhandlers`]), children ([`Cause::adopt`]),
//!   admission (`on_validate`, `on_mutate`), daemons (`on_daemon`, with [`Cause::stopped`])
//!   and in-memory indices (`index`, read with [`Cause::index`]).
//! - Calls are at-least-once: after a crash of either side, an attempt may be repeated, so
//!   handlers must be idempotent.
//! - [`testing`] (feature `testing`): dev cluster, controller and handler server in one test.
//!
//! A handler function can also be tested alone, with a cause built by hand:
//!
//! ```
//! # use bosun_sdk::{Cause, HandlerError};
//! # use serde_json::{json, Value};
//! async fn create_fn(cause: Cause) -> Result<Value, HandlerError> {
//!     cause.patch().label("seen", "yes");
//!     Ok(json!({"size": cause.spec()["size"]}))
//! }
//!
//! # tokio_test_block_on(async {
//! let cause = Cause::from_body(json!({"spec": {"size": 3}})).with_retry(0);
//! assert_eq!(create_fn(cause.clone()).await.unwrap(), json!({"size": 3}));
//! assert_eq!(cause.patched().merge_patch(), json!({"metadata": {"labels": {"seen": "yes"}}}));
//! # });
//! # fn tokio_test_block_on(f: impl std::future::Future<Output = ()>) {
//! #     tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(f)
//! # }
//! ```

#![deny(missing_docs)]

mod admission;
mod cause;
mod daemon;
mod dispatch;
mod error;
mod filters;
mod index;
mod json;
mod live;
mod operator;
mod outputs;
mod patch;
mod ran;
mod recording;
mod registry;
mod resource;
mod running;
mod serve;
mod stopped;
pub mod telemetry;
#[cfg(feature = "testing")]
pub mod testing;

pub use cause::{Cause, Change, Error as CauseError, Operation, Reason, Resource};
pub use dispatch::Dispatcher;
#[cfg(feature = "anyhow")]
pub use error::from_anyhow;
pub use error::{BoxError, HandlerError, PermanentError, ResultExt, TemporaryError};
pub use index::{FLAT as FLAT_INDEX_KEY, Index};
pub use live::DaemonStream;
pub use operator::Operator;
pub use outputs::{EventRecord, Level, LogRecord, OwnedRecord, SubhandlerRecord};
pub use patch::{Patch, PatchRef};
pub use registry::{Error as RegistryError, ErrorsMode, Match};
pub use resource::{Error as SelectorError, Selector};
pub use serve::{DEFAULT_LISTEN, Error as ServeError, LISTEN_ENV, ListenAddr, init_logging, shutdown_signal};
pub use stopped::Stopped;

/// The generated contract types, for tests and advanced uses.
pub use bosun_proto::v1 as proto;
