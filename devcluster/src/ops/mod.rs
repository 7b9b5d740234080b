//! The write verbs (create, update, patch, delete), independent of HTTP: each takes the
//! resource, the request's body and options, and answers the object or Status the real
//! server would, committing through one locked read-modify-write on the object's table.
//!
//! This file only names the parts. Bottom to top: `types.rs` (`WriteOpts`, `Reply`,
//! `Subresource`, ...) and `common.rs` (what every verb does to a body), which import no
//! verb; `commit.rs`, the one read-modify-write that update, patch and server-side apply end
//! in; the verbs (`create.rs`, `update.rs`, `delete.rs`, `eviction.rs`, `binding.rs`,
//! `token_request.rs`); and `bootstrap.rs`, the cluster's own objects written through them.

mod binding;
mod bootstrap;
pub(crate) mod commit;
mod common;
mod create;
mod delete;
mod eviction;
pub mod token_request;
mod types;
mod update;

pub use binding::bind;
pub use common::{
    check_duplicates, check_patched_shape, check_shape, check_type, created_success, custom_causes, find_duplicate, has_generation,
    normalize_order, parse_body, prune_unknown, random_suffix, spec_part,
};
pub use create::create;
pub use delete::{DeleteOpts, Propagation, delete, delete_collection, delete_namespace_finally};
pub use eviction::evict;
pub use types::{Body, Object, Reply, Subresource, Validation, WriteOpts};
pub use update::{PatchKind, patch, update};

/// The metadata helpers and the clock, whose home is the ground floor (`meta.rs`); also
/// named here, where the verbs' users found them.
pub use crate::meta::{finalizers, meta_mut, now};
