//! A write as admission sees it: who makes it ([`Caller`], [`Context`]), the operation, the
//! resource and object written ([`Attributes`]). The types the rest of `webhook/` (and the
//! verbs that call it) share; they import nothing of it.

use serde_json::{Map, Value};

use crate::authz::User;
use crate::registry::ResourceInfo;

/// Who makes a request, as a webhook is told in `userInfo`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Caller {
    /// The user name.
    pub username: String,
    /// The user's uid, if the authenticator knows one.
    pub uid: Option<String>,
    /// The groups.
    pub groups: Vec<String>,
}

impl From<&User> for Caller {
    fn from(user: &User) -> Self {
        Caller { username: user.name.clone(), uid: None, groups: user.groups.clone() }
    }
}

/// What admission needs to know of a client's write beyond the objects: who asked, whether
/// it is a dry run, and the request's options (`fieldManager`, `propagationPolicy`, ...), which
/// `review.rs` turns into a review's `options`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Context {
    /// The caller.
    pub caller: Caller,
    /// `dryRun=All`.
    pub dry_run: bool,
    /// The options the client gave, by their JSON names.
    pub options: Map<String, Value>,
}

/// An admission operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    /// A create (or an apply that creates).
    Create,
    /// An update or patch, of the object or a subresource.
    Update,
    /// A delete.
    Delete,
    /// A connect (exec, proxy): the dev cluster has none.
    Connect,
}

impl Operation {
    /// The name in rules and reviews.
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Create => "CREATE",
            Operation::Update => "UPDATE",
            Operation::Delete => "DELETE",
            Operation::Connect => "CONNECT",
        }
    }
}

/// One write, as admission sees it.
#[derive(Debug, Clone, Copy)]
pub struct Attributes<'a> {
    /// The resource written.
    pub info: &'a ResourceInfo,
    /// The subresource ("" for the object itself).
    pub subresource: &'a str,
    /// The operation.
    pub operation: Operation,
    /// The namespace ("" for cluster-scoped objects; a Namespace's own name for a write of a
    /// Namespace, as the real server sets it).
    pub namespace: &'a str,
    /// The object's name ("" on a create with `generateName`).
    pub name: &'a str,
    /// Who asks, and how.
    pub context: &'a Context,
}

impl<'a> Attributes<'a> {
    /// The attributes of a write of `name` in `ns` through `subresource`.
    pub fn new(
        info: &'a ResourceInfo,
        ns: &'a str,
        name: &'a str,
        subresource: &'a str,
        operation: Operation,
        context: &'a Context,
    ) -> Self {
        let namespace = if is_namespace(info) { name } else { ns };
        Attributes { info, subresource, operation, namespace, name, context }
    }
}

/// Whether `info` is the built-in Namespace resource (whose own name is a write's namespace).
pub(super) fn is_namespace(info: &ResourceInfo) -> bool {
    info.builtin && info.group.is_empty() && info.plural == "namespaces"
}
