//! Who this controller is to its peers and in Leases, as Kopf names an operator: the pod's
//! name when the Deployment passes it (`POD_ID`, Kopf's variable, or `POD_NAME`), else
//! `user@host` for a person's manual command (`bosun freeze`) or `user@host/time/random` for a
//! controller run by hand, so that two on one machine differ.
//!
//! A configured identity (`--identity`, `BOSUN_IDENTITY`) gets a random suffix ([`unique`]),
//! as controller-runtime appends `_` and a UUID: a Deployment template that sets one value
//! for every replica must not make them all the holder of one Lease.

use chrono::Utc;
use rand::Rng as _;

/// This process's identity; `manual` for one-off commands (`bosun freeze`, `bosun resume`).
pub fn detect(manual: bool) -> String {
    from_env(manual, |var| std::env::var(var).ok())
}

/// This controller's identity: detected when none is configured; a configured one as given
/// for peering alone (Kopf shows peers by it), made [`unique`] with Leases, where two replicas
/// of one Deployment template holding one identity would both hold the Lease.
pub fn of(configured: Option<&str>, leases: bool) -> String {
    match configured {
        None => detect(false),
        Some(configured) if !leases => configured.to_string(),
        Some(configured) => unique(configured),
    }
}

/// A configured identity made unique to this process: `{configured}_{random}` (the
/// configured part stays first, readable in logs and Leases).
pub fn unique(configured: &str) -> String {
    let mut rng = rand::rng();
    let random: String = (0..8).map(|_| char::from(b"abcdefghijklmnopqrstuvwxyz0123456789"[rng.random_range(0..36)])).collect();
    format!("{}_{random}", configured.trim())
}

/// [`detect`] with the environment given.
fn from_env(manual: bool, env: impl Fn(&str) -> Option<String>) -> String {
    for var in ["POD_ID", "POD_NAME"] {
        if let Some(pod) = env(var)
            && !pod.trim().is_empty()
        {
            return pod.trim().to_string();
        }
    }
    let user = ["USER", "LOGNAME"].iter().find_map(|v| env(v).filter(|u| !u.is_empty())).unwrap_or_else(|| "bosun".into());
    let host = hostname::get().ok().and_then(|h| h.into_string().ok()).filter(|h| !h.is_empty()).unwrap_or_else(|| "localhost".into());
    if manual {
        return format!("{user}@{host}");
    }
    let now = Utc::now().format("%Y%m%d%H%M%S");
    let mut rng = rand::rng();
    let random: String = (0..3).map(|_| char::from(b"abcdefhijklmnopqrstuvwxyz0123456789"[rng.random_range(0..35)])).collect();
    format!("{user}@{host}/{now}/{random}")
}

#[cfg(test)]
mod tests {
    use super::{from_env, of, unique};

    #[test]
    fn a_configured_identity_is_made_unique_with_leases_and_kept_for_peering() {
        assert_eq!(of(Some("deployed"), false), "deployed");
        assert!(of(Some("deployed"), true).starts_with("deployed_"));
        assert_ne!(of(Some("deployed"), true), of(Some("deployed"), true));
        assert!(of(None, true).contains('@') || std::env::var("POD_ID").is_ok() || std::env::var("POD_NAME").is_ok());
    }

    #[test]
    fn a_configured_identity_gets_a_random_suffix_so_that_two_replicas_differ() {
        let (a, b) = (unique("operator"), unique("operator"));
        assert_ne!(a, b, "one template, two replicas, one identity");
        for id in [&a, &b] {
            let (head, tail) = id.split_once('_').expect("a suffix");
            assert_eq!(head, "operator");
            assert_eq!(tail.len(), 8);
        }
    }

    #[test]
    fn identities_come_from_the_pod_or_the_user_and_two_runs_by_hand_differ() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |var: &str| pairs.iter().find(|(k, _)| *k == var).map(|(_, v)| v.to_string())
        };
        type Vars = &'static [(&'static str, &'static str)];
        let cases: [(Vars, bool, &str); 5] = [
            (&[("POD_ID", "op-7d9f-abc"), ("POD_NAME", "other"), ("USER", "ann")], false, "op-7d9f-abc"),
            (&[("POD_NAME", "op-7d9f-xyz"), ("USER", "ann")], true, "op-7d9f-xyz"),
            (&[("POD_ID", " "), ("USER", "ann")], true, "ann@"),
            (&[("LOGNAME", "bob")], true, "bob@"),
            (&[], true, "bosun@"),
        ];
        for (vars, manual, want) in cases {
            let id = from_env(manual, env(vars));
            assert!(if want.ends_with('@') { id.starts_with(want) && !id.contains('/') } else { id == want }, "{vars:?}: {id}");
        }
        let by_hand = |_: &str| Some("ann".to_string()).filter(|_| false);
        let (a, b) = (from_env(false, by_hand), from_env(false, by_hand));
        assert_ne!(a, b, "two runs by hand got one identity");
        assert!(a.starts_with(&from_env(true, by_hand)) && a.matches('/').count() == 2, "{a}");
    }
}
