//! The controller benchmark (`cargo run --release -p bosun-tests --bin bench`): see
//! `tests/BENCHMARKS.md`.

pub mod bars;
pub mod cluster;
pub mod ops;
pub mod procs;
pub mod replicas;
pub mod report;
pub mod workloads;
