//! What the controller serves: the admission webhooks' endpoint ([`admission`]) and its
//! HTTPS server and certificate ([`webhooks`]), and the liveness endpoint ([`liveness`]).

pub mod admission;
pub mod liveness;
pub mod webhooks;
