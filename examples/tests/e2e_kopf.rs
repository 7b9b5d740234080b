//! Kopf's end-to-end tests over the ported examples.
//!
//! One test binary for many test files: each file is a module here, as it was a binary of
//! its own (`#[path]` keeps its `mod support;` where it was). One link and one copy of the
//! generic code instead of one per file made CI's build minutes shorter.

// Several files declare the same `support` module: each keeps its own copy, as in its own binary.
#![allow(clippy::duplicate_mod)]

#[path = "e2e_kopf_admission.rs"]
mod e2e_kopf_admission;
#[path = "e2e_kopf_basics.rs"]
mod e2e_kopf_basics;
#[path = "e2e_kopf_features.rs"]
mod e2e_kopf_features;
#[path = "e2e_kopf_rbac.rs"]
mod e2e_kopf_rbac;
