//! HTTPS for Bosun's servers: a self-signed CA and serving certificate kept on disk ([`tls`]),
//! the accept loop with its limits ([`serve`]), and owner-only files ([`private`]). Shared by
//! the controller's admission endpoint and the dev cluster, so that neither depends on the
//! other for it.

pub mod private;
pub mod serve;
pub mod tls;
