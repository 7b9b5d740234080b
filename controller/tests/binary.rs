//! The `bosun` binary's tests: each runs it as a user does.
//!
//! One test binary for many test files: each file is a module here, as it was a binary of
//! its own (`#[path]` keeps its `mod support;` where it was). One link and one copy of the
//! generic code instead of one per file made CI's build minutes shorter.

// Several files declare the same `support` module: each keeps its own copy, as in its own binary.
#![allow(clippy::duplicate_mod)]

#[path = "cli.rs"]
mod cli;
#[path = "diffbase.rs"]
mod diffbase;
#[path = "handler_crash.rs"]
mod handler_crash;
#[path = "hostile.rs"]
mod hostile;
#[path = "observability.rs"]
mod observability;
#[path = "replicas.rs"]
mod replicas;
