//! Engines that do the controller's outward work besides the API server: dispatching
//! causes to handler servers.

pub mod dispatch;
