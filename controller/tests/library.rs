//! The controller library's tests, without the `bosun` binary.
//!
//! One test binary for many test files: each file is a module here, as it was a binary of
//! its own (`#[path]` keeps its `mod support;` where it was). One link and one copy of the
//! generic code instead of one per file made CI's build minutes shorter.

// Several files declare the same `support` module: each keeps its own copy, as in its own binary.
#![allow(clippy::duplicate_mod)]

#[path = "admission.rs"]
mod admission;
#[path = "handler_calls.rs"]
mod handler_calls;
#[path = "rbac.rs"]
mod rbac;
#[path = "stalls.rs"]
mod stalls;
