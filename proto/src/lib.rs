//! Bosun's gRPC contract: the `bosun.v1` proto package, generated from
//! `proto/bosun/v1/handler.proto` (the reference for handler authors in every language).
#![allow(missing_docs, clippy::all)]

/// Version 1 of the contract. Grows only additively.
pub mod v1 {
    tonic::include_proto!("bosun.v1");
}

/// The `.proto` source of the contract, for tools that want to ship or print it.
pub const HANDLER_PROTO: &str = include_str!("../bosun/v1/handler.proto");

/// The well-known types (`Timestamp`, `Duration`) used by the contract.
pub use prost_types;
