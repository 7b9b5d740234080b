//! The dev cluster's tests, each file a part of its API over real HTTP.
//!
//! One test binary for many test files: each file is a module here, as it was a binary of
//! its own (`#[path]` keeps its `mod support;` where it was). One link and one copy of the
//! generic code instead of one per file made CI's build minutes shorter.

// Several files declare the same `support` module: each keeps its own copy, as in its own binary.
#![allow(clippy::duplicate_mod)]

#[path = "admission.rs"]
mod admission;
#[path = "authz.rs"]
mod authz;
#[path = "crud.rs"]
mod crud;
#[path = "faults.rs"]
mod faults;
#[path = "fidelity.rs"]
mod fidelity;
#[path = "golden.rs"]
mod golden;
#[path = "hostile.rs"]
mod hostile;
#[path = "kinds.rs"]
mod kinds;
#[path = "kubectl.rs"]
mod kubectl;
#[path = "lifecycle.rs"]
mod lifecycle;
#[path = "python.rs"]
mod python;
#[path = "server.rs"]
mod server;
#[path = "subresources.rs"]
mod subresources;
#[path = "tls.rs"]
mod tls;
#[path = "watch.rs"]
mod watch;
