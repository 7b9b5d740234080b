//! The end-to-end tests of the controller, the dev cluster and the SDKs together
//! (the conformance suite and the simulation are binaries of their own).
//!
//! One test binary for many test files: each file is a module here, as it was a binary of
//! its own (`#[path]` keeps its `mod support;` where it was). One link and one copy of the
//! generic code instead of one per file made CI's build minutes shorter.

#[path = "admission_replicas.rs"]
mod admission_replicas;
#[path = "api_faults.rs"]
mod api_faults;
#[path = "background_bodies.rs"]
mod background_bodies;
#[path = "cycle.rs"]
mod cycle;
#[path = "kopf_compat.rs"]
mod kopf_compat;
#[path = "layers.rs"]
mod layers;
#[path = "readme_sdk.rs"]
mod readme_sdk;
#[path = "servers.rs"]
mod servers;
#[path = "spellings.rs"]
mod spellings;
#[path = "startup_settings.rs"]
mod startup_settings;
#[path = "versions.rs"]
mod versions;
#[path = "watching.rs"]
mod watching;
