//! Authorization as kube-apiserver decides it, for the callers the dev cluster does not treat
//! as its admin: service accounts presenting a token the cluster issued, and whoever the
//! admin impersonates. It is pure — the request's attributes, the user and the stored RBAC
//! objects in, a decision out — so that the HTTP layer only has to gather those and write the
//! answer, and so that every rule of RBAC can be checked by a table.
//!
//! The parts, each following the real code it names:
//! - [`Attributes`]: what a request asks to do (`RequestInfoFactory`);
//! - [`impersonation`]: who a request acts as when it carries `Impersonate-*` headers
//!   (`WithImpersonation`);
//! - [`authorize`]: the authorizer chain of a kubeadm cluster — the privileged group
//!   `system:masters`, then RBAC over the stored objects and the bootstrap policy's bindings
//!   that concern every caller (`RBACAuthorizer`);
//! - [`forbidden`]: the 403 a denial is answered with (`responsewriters.Forbidden`).

mod attributes;
mod bootstrap;
mod impersonation;
mod rbac;
mod user;

pub use attributes::{Attributes, ResourceAttributes, Unresolvable};
pub use impersonation::{Impersonation, ImpersonationError, impersonation};
pub use rbac::{Objects, Rule};
pub use user::{AUTHENTICATED, Denied, PRIVILEGED, SERVICE_ACCOUNTS, UNAUTHENTICATED, User};

use crate::status::ApiError;

/// Whether `user` may do what `attrs` ask, as the real authorizer chain decides: members of
/// `system:masters` may do anything; everyone else what a binding of theirs grants — a
/// ClusterRoleBinding anywhere, a RoleBinding in the request's namespace, or one of the
/// bootstrap policy's bindings (discovery, `/version`, self reviews).
pub fn authorize(objects: &impl Objects, user: &User, attrs: &Attributes) -> Result<(), Denied> {
    if user.is_privileged() || bootstrap::allows(user, attrs) {
        return Ok(());
    }
    rbac::authorize(objects, user, attrs)
}

/// The 403 of a denial, worded as `responsewriters.Forbidden` words it: `configmaps "x" is
/// forbidden: User "U" cannot get resource "configmaps" in API group "" in the namespace
/// "default"`, then `: REASON` when there is one.
pub fn forbidden(user: &User, attrs: &Attributes, denied: &Denied) -> ApiError {
    let what = match attrs {
        Attributes::NonResource { verb, path } => format!("User {:?} cannot {verb} path {path:?}", user.name),
        Attributes::Resource(r) => {
            let resource = if r.subresource.is_empty() { r.resource.clone() } else { format!("{}/{}", r.resource, r.subresource) };
            let scope =
                if r.namespace.is_empty() { "at the cluster scope".to_string() } else { format!("in the namespace {:?}", r.namespace) };
            format!("User {:?} cannot {} resource {resource:?} in API group {:?} {scope}", user.name, r.verb, r.group)
        }
    };
    let why = if denied.reason.is_empty() { what } else { format!("{what}: {}", denied.reason) };
    match attrs {
        Attributes::NonResource { .. } => ApiError::forbidden_request("", "", "", &why),
        Attributes::Resource(r) => ApiError::forbidden_request(&r.group, &r.resource, &r.name, &why),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::{Value, json};

    use super::*;
    use crate::store::Obj;

    /// RBAC objects in memory, told apart by `kind`.
    pub(super) struct Fixture(pub Vec<Value>);

    impl Fixture {
        fn of_kind(&self, kind: &str, namespace: Option<&str>) -> Vec<Arc<Obj>> {
            let in_namespace = |o: &&Value| namespace.is_none_or(|ns| o["metadata"]["namespace"] == ns);
            self.0.iter().filter(|o| o["kind"] == kind).filter(in_namespace).map(|o| Obj::new(o.clone(), 1, false)).collect()
        }
    }

    impl Objects for Fixture {
        fn cluster_role_bindings(&self) -> Vec<Arc<Obj>> {
            self.of_kind("ClusterRoleBinding", None)
        }
        fn role_bindings(&self, namespace: &str) -> Vec<Arc<Obj>> {
            self.of_kind("RoleBinding", Some(namespace))
        }
        fn role(&self, namespace: &str, name: &str) -> Option<Arc<Obj>> {
            self.of_kind("Role", Some(namespace)).into_iter().find(|o| o.name() == name)
        }
        fn cluster_roles(&self) -> Vec<Arc<Obj>> {
            self.of_kind("ClusterRole", None)
        }
    }

    fn get(ns: &str, resource: &str, name: &str) -> Attributes {
        let verb = if name.is_empty() { "list" } else { "get" };
        Attributes::Resource(ResourceAttributes {
            verb: verb.into(),
            version: "v1".into(),
            namespace: ns.into(),
            resource: resource.into(),
            name: name.into(),
            ..Default::default()
        })
    }

    #[test]
    fn a_service_accounts_user_is_named_and_grouped_as_the_real_servers() {
        let user = User::service_account("team", "robot");
        assert_eq!(user.name, "system:serviceaccount:team:robot");
        assert_eq!(user.groups, ["system:serviceaccounts", "system:serviceaccounts:team", "system:authenticated"]);
        assert!(!user.is_privileged());
        assert!(User::admin().is_privileged());
    }

    #[test]
    fn the_privileged_group_may_do_anything_and_everyone_else_what_is_bound() {
        let nothing = Fixture(vec![]);
        let secret = get("kube-system", "secrets", "token");
        assert_eq!(authorize(&nothing, &User::admin(), &secret), Ok(()));
        let master = User { name: "someone".into(), groups: vec![PRIVILEGED.into()] };
        assert_eq!(authorize(&nothing, &master, &secret), Ok(()));
        assert_eq!(authorize(&nothing, &User::service_account("default", "robot"), &secret), Err(Denied::default()));
    }

    #[test]
    fn denials_are_worded_as_the_real_servers_forbidden_answers() {
        let robot = User::service_account("default", "robot");
        let resource = |verb: &str, group: &str, ns: &str, resource: &str, sub: &str, name: &str| {
            Attributes::Resource(ResourceAttributes {
                verb: verb.into(),
                group: group.into(),
                version: "v1".into(),
                namespace: ns.into(),
                resource: resource.into(),
                subresource: sub.into(),
                name: name.into(),
            })
        };
        let who = "User \"system:serviceaccount:default:robot\"";
        let table = [
            (
                resource("list", "", "default", "configmaps", "", ""),
                "",
                format!(
                    "configmaps is forbidden: {who} cannot list resource \"configmaps\" in API group \"\" in the namespace \"default\""
                ),
                json!({"kind": "configmaps"}),
            ),
            (
                resource("patch", "apps", "team", "deployments", "scale", "web"),
                "",
                format!(
                    "deployments.apps \"web\" is forbidden: {who} cannot patch resource \"deployments/scale\" in API group \"apps\" in the namespace \"team\""
                ),
                json!({"name": "web", "group": "apps", "kind": "deployments"}),
            ),
            (
                resource("get", "", "", "nodes", "", "n1"),
                "RBAC: clusterrole.rbac.authorization.k8s.io \"gone\" not found",
                format!(
                    "nodes \"n1\" is forbidden: {who} cannot get resource \"nodes\" in API group \"\" at the cluster scope: RBAC: clusterrole.rbac.authorization.k8s.io \"gone\" not found"
                ),
                json!({"name": "n1", "kind": "nodes"}),
            ),
            (
                Attributes::NonResource { verb: "get".into(), path: "/metrics".into() },
                "",
                format!("forbidden: {who} cannot get path \"/metrics\""),
                json!({}),
            ),
        ];
        for (attrs, reason, message, details) in table {
            let status = forbidden(&robot, &attrs, &Denied { reason: reason.into() }).to_status();
            let want = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
                "reason": "Forbidden", "details": details, "code": 403});
            assert_eq!(serde_json::to_string(&status).unwrap(), serde_json::to_string(&want).unwrap(), "{attrs:?}");
        }
    }
}
