//! Engines that do the controller's outward work besides the API server: dispatching causes
//! to handler servers, and the liveness endpoint.

pub mod dispatch;
pub mod liveness;
