//! Who a request acts as ([`User`]), the groups the real server gives callers, and why a
//! request was denied ([`Denied`]).

/// The group whose members may do anything (the real server's privileged group).
pub const PRIVILEGED: &str = "system:masters";
/// The group of every authenticated caller.
pub const AUTHENTICATED: &str = "system:authenticated";
/// The group of unauthenticated callers (`system:anonymous`).
pub const UNAUTHENTICATED: &str = "system:unauthenticated";
/// The group of every service account.
pub const SERVICE_ACCOUNTS: &str = "system:serviceaccounts";
/// What a service account's user name starts with.
pub(super) const SERVICE_ACCOUNT_PREFIX: &str = "system:serviceaccount:";

/// Who a request acts as: a user name and its groups.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    /// `system:serviceaccount:NS:NAME`, or any user name.
    pub name: String,
    /// The groups, `system:authenticated` among them.
    pub groups: Vec<String>,
}

impl User {
    /// The user of a service account's token: `system:serviceaccount:NS:NAME` in the groups
    /// `system:serviceaccounts`, `system:serviceaccounts:NS` and `system:authenticated`.
    pub fn service_account(namespace: &str, name: &str) -> User {
        let mut groups = service_account_groups(namespace);
        groups.push(AUTHENTICATED.into());
        User { name: service_account_name(namespace, name), groups }
    }

    /// The dev cluster's admin (its own token, or no token when none is required): a member of
    /// `system:masters`, as kubeadm's `kubernetes-admin` was.
    pub fn admin() -> User {
        User { name: "kubernetes-admin".into(), groups: vec![PRIVILEGED.into(), AUTHENTICATED.into()] }
    }

    /// Whether the user may do anything without RBAC being asked (a `system:masters` member).
    pub fn is_privileged(&self) -> bool {
        self.groups.iter().any(|g| g == PRIVILEGED)
    }
}

/// `system:serviceaccount:NS:NAME`.
pub(super) fn service_account_name(namespace: &str, name: &str) -> String {
    format!("{SERVICE_ACCOUNT_PREFIX}{namespace}:{name}")
}

/// The groups a service account of `namespace` is in, before `system:authenticated`.
pub(super) fn service_account_groups(namespace: &str) -> Vec<String> {
    vec![SERVICE_ACCOUNTS.into(), format!("{SERVICE_ACCOUNTS}:{namespace}")]
}

/// Why a request was not allowed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Denied {
    /// What RBAC found wrong on the way (`RBAC: clusterrole... "x" not found`), or empty: the
    /// text the real server appends to its message.
    pub reason: String,
}
