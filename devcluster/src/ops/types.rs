//! The verbs' own types, under every verb and under the helpers the verbs call (server-side
//! apply, the dev cluster's own writes): a write's options, its answer, and the endpoint it
//! goes to. Imports nothing of the verbs.

use std::sync::Arc;

use serde_json::Value;

use crate::registry::ResourceInfo;
use crate::status::{ApiError, ApiResult};
use crate::store::Obj;
use crate::webhook::Context;

/// How unknown fields are treated (`fieldValidation`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Validation {
    /// Reject with 400.
    Strict,
    /// Drop and warn (the server's default).
    #[default]
    Warn,
    /// Drop silently.
    Ignore,
}

impl Validation {
    /// Parse the query parameter.
    pub fn parse(s: Option<&str>) -> ApiResult<Self> {
        match s {
            None | Some("") | Some("Warn") => Ok(Validation::Warn),
            Some("Strict") => Ok(Validation::Strict),
            Some("Ignore") => Ok(Validation::Ignore),
            Some(other) => {
                Err(ApiError::bad_request(format!("fieldValidation parameter unsupported: {other}, must be one of Strict, Warn, Ignore")))
            }
        }
    }
}

/// Options of a write request.
#[derive(Debug, Clone, Default)]
pub struct WriteOpts {
    /// `dryRun=All`.
    pub dry_run: bool,
    /// The field manager (from `fieldManager` or the user agent).
    pub manager: Option<String>,
    /// `fieldValidation`.
    pub validation: Validation,
    /// `force` (server-side apply).
    pub force: bool,
    /// Whether `fieldManager` was given explicitly (apply requires it).
    pub manager_explicit: bool,
    /// A client's request, which admission webhooks are called for (none for the dev
    /// cluster's own writes).
    pub admission: Option<Context>,
}

/// A write's answer.
#[derive(Debug)]
pub struct Reply {
    /// HTTP status code.
    pub code: u16,
    /// The object or Status to send.
    pub body: Body,
    /// `Warning` header texts.
    pub warnings: Vec<String>,
}

/// The body of a reply.
#[derive(Debug)]
pub enum Body {
    /// A stored object (bytes ready).
    Obj(Arc<Obj>),
    /// Any other JSON (dry runs, Status, lists).
    Value(Value),
}

/// Which endpoint a write goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Subresource {
    /// The object itself.
    Main,
    /// `/status`.
    Status,
    /// `/scale`: the object as the main resource writes it (the scale handler changes only
    /// the replicas), recorded in managedFields under the subresource `scale`.
    Scale,
    /// A Pod's `/ephemeralcontainers`: only `spec.ephemeralContainers` changes, and existing
    /// ephemeral containers may be neither removed nor changed.
    EphemeralContainers,
}

impl Subresource {
    /// The `subresource` of the managedFields entries of writes through it.
    pub fn field_manager_name(self) -> Option<&'static str> {
        match self {
            Subresource::Main => None,
            Subresource::Status => Some("status"),
            Subresource::Scale => Some("scale"),
            Subresource::EphemeralContainers => Some("ephemeralcontainers"),
        }
    }
}

/// The object a write goes to: its resource, namespace (empty at cluster scope), name, and the
/// part written (the object, its status, its scale).
#[derive(Clone, Copy)]
pub struct Object<'a> {
    /// The resource.
    pub info: &'a ResourceInfo,
    /// The namespace; empty for a cluster-scoped object.
    pub ns: &'a str,
    /// The object's name.
    pub name: &'a str,
    /// The part written.
    pub sub: Subresource,
}
