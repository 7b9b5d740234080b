//! The handler servers, as the controller calls them: the gRPC client that dispatches causes
//! ([`dispatch`]), how a failed call reads ([`failures`]), which servers are down and when
//! they are back ([`outages`]), the in-memory transport the simulation uses ([`memory`]), Handle calls on one stream
//! for servers that ask for it ([`stream`]), and
//! the trace context that travels with each call ([`trace_context`]).

pub mod dispatch;
pub mod failures;
pub mod memory;
pub mod outages;
#[cfg(test)]
pub(crate) mod recording;
pub mod stream;
#[cfg(test)]
mod stream_tests;
pub mod trace_context;
