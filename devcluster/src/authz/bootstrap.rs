//! The bootstrap policy's ClusterRoles and ClusterRoleBindings that concern every caller the
//! dev cluster authorizes (`plugin/pkg/auth/authorizer/rbac/bootstrappolicy`): discovery,
//! `/version` and the health paths, the self reviews, and the service account issuer's
//! discovery documents. A real cluster stores them; the dev cluster keeps them here instead,
//! since storing them would change what `kubectl get clusterroles` lists.

use std::sync::LazyLock;

use super::attributes::Attributes;
use super::rbac::Rule;
use super::user::{AUTHENTICATED, SERVICE_ACCOUNTS, UNAUTHENTICATED, User};

impl Rule {
    /// A non-resource rule allowing `get` on `urls`.
    fn get_urls(urls: &[&str]) -> Rule {
        Rule { verbs: vec!["get".into()], non_resource_urls: urls.iter().map(|u| u.to_string()).collect(), ..Default::default() }
    }

    /// A rule allowing `create` on `resources` of `group`.
    fn create(group: &str, resources: &[&str]) -> Rule {
        Rule {
            verbs: vec!["create".into()],
            api_groups: vec![group.into()],
            resources: resources.iter().map(|r| r.to_string()).collect(),
            ..Default::default()
        }
    }
}

/// The bootstrap policy's ClusterRoles bound to groups every service account (and any
/// impersonated user) is in: their rules and the groups their ClusterRoleBindings name.
static BOOTSTRAP: LazyLock<Vec<(Rule, &'static [&'static str])>> = LazyLock::new(|| {
    vec![
        // system:discovery
        (
            Rule::get_urls(&[
                "/livez",
                "/readyz",
                "/healthz",
                "/version",
                "/version/",
                "/openapi",
                "/openapi/*",
                "/api",
                "/api/*",
                "/apis",
                "/apis/*",
            ]),
            &[AUTHENTICATED],
        ),
        // system:public-info-viewer
        (Rule::get_urls(&["/livez", "/readyz", "/healthz", "/version", "/version/"]), &[AUTHENTICATED, UNAUTHENTICATED]),
        // system:basic-user
        (Rule::create("authorization.k8s.io", &["selfsubjectaccessreviews", "selfsubjectrulesreviews"]), &[AUTHENTICATED]),
        (Rule::create("authentication.k8s.io", &["selfsubjectreviews"]), &[AUTHENTICATED]),
        // system:service-account-issuer-discovery
        (
            Rule::get_urls(&[
                "/.well-known/openid-configuration",
                "/.well-known/openid-configuration/",
                "/openid/v1/jwks",
                "/openid/v1/jwks/",
            ]),
            &[SERVICE_ACCOUNTS],
        ),
    ]
});

/// Whether a bootstrap ClusterRoleBinding grants the request.
pub(super) fn allows(user: &User, attrs: &Attributes) -> bool {
    BOOTSTRAP.iter().any(|(rule, groups)| groups.iter().any(|g| user.groups.iter().any(|u| u == g)) && rule.allows(attrs))
}

#[cfg(test)]
mod tests {
    use super::super::ResourceAttributes;
    use super::*;

    fn path(verb: &str, path: &str) -> Attributes {
        Attributes::NonResource { verb: verb.into(), path: path.into() }
    }

    /// verb, group, namespace, resource, subresource, name
    fn request(fields: [&str; 6]) -> Attributes {
        let [verb, group, namespace, resource, subresource, name] = fields.map(String::from);
        Attributes::Resource(ResourceAttributes { verb, group, version: "v1".into(), namespace, resource, subresource, name })
    }

    #[test]
    fn the_bootstrap_policy_lets_every_authenticated_caller_discover_and_review_itself() {
        let robot = User::service_account("team", "robot");
        let anonymous = User { name: "system:anonymous".into(), groups: vec![UNAUTHENTICATED.into()] };
        let create = |group: &str, resource: &str| request(["create", group, "", resource, "", ""]);
        let table = [
            (path("get", "/api"), true, false),
            (path("get", "/api/v1"), true, false),
            (path("get", "/apis"), true, false),
            (path("get", "/apis/apps/v1"), true, false),
            (path("get", "/openapi/v3"), true, false),
            (path("get", "/openapi"), true, false),
            (path("get", "/version"), true, true),
            (path("get", "/version/"), true, true),
            (path("get", "/healthz"), true, true),
            (path("get", "/livez"), true, true),
            (path("get", "/readyz"), true, true),
            (path("get", "/healthz/etcd"), false, false),
            (path("get", "/metrics"), false, false),
            (path("get", "/"), false, false),
            (path("post", "/api"), false, false),
            (path("get", "/.well-known/openid-configuration"), true, false),
            (path("get", "/openid/v1/jwks"), true, false),
            (create("authorization.k8s.io", "selfsubjectaccessreviews"), true, false),
            (create("authorization.k8s.io", "selfsubjectrulesreviews"), true, false),
            (create("authentication.k8s.io", "selfsubjectreviews"), true, false),
            (create("authorization.k8s.io", "subjectaccessreviews"), false, false),
            (request(["get", "authorization.k8s.io", "", "selfsubjectaccessreviews", "", "x"]), false, false),
        ];
        for (attrs, for_robot, for_anonymous) in table {
            assert_eq!(allows(&robot, &attrs), for_robot, "{attrs:?}");
            assert_eq!(allows(&anonymous, &attrs), for_anonymous, "anonymous: {attrs:?}");
        }
    }
}
