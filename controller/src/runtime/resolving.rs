//! From the handlers' spellings of resources to the resources they name. One resource may be
//! spelled many ways (`kopfexamples`, `kex`, `kopfexamples.kopf.dev`, `kopf.dev/v1/kopfexamples`,
//! a group and version given apart), by one handler server or several; Kopf serves it once,
//! and so must the controller: two jobs for one resource would each add and remove the
//! finalizer for their own handlers, and one would skip the other's delete handlers. So the
//! handlers are grouped by the resource their spelling resolves to (group, version, plural),
//! which only discovery can tell: a spelling that does not resolve yet (its CRD is not there)
//! is looked up again in the background until it does, and its handlers join their resource
//! then.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;

use crate::cluster::discovery::{self, Normalized, ResolvedResource};
use crate::cluster::{Cluster, Error};
use crate::logs::Logger;
use crate::state::registry::Handler;
use bosun_proto::v1 as pb;

/// A resource as the API server serves it: (group, version, plural).
pub(super) type ResourceKey = (String, String, String);

/// A spelling that resolved in the background, with the resource it names.
pub(super) type Found = (Normalized, ResolvedResource);

/// The key of a resolved resource.
pub(super) fn key_of(r: &ResolvedResource) -> ResourceKey {
    (r.group.clone(), r.version.clone(), r.plural.clone())
}

/// How long one spelling's first resolution may take before it goes on in the background.
const FIRST_TRY: Duration = Duration::from_secs(30);

/// The handlers of one resource, in registration order.
#[derive(Debug)]
pub(super) struct Group {
    /// The resource.
    pub key: ResourceKey,
    /// As resolved.
    pub resource: ResolvedResource,
    /// Its name in log lines: the spelling of its first handler.
    pub name: String,
    /// Its handlers.
    pub handlers: Vec<Arc<Handler>>,
}

/// The handlers that watch resources (not activities, not admission handlers, which are
/// served by `endpoints::admission`), grouped by the resource their spelling resolves to, in
/// registration order; those whose spelling is not resolved are left out.
pub(super) fn by_resource(handlers: &[Handler], resolved: &HashMap<Normalized, ResolvedResource>) -> Vec<Group> {
    let mut groups: Vec<Group> = Vec::new();
    for h in handlers.iter().filter(|h| watches(h)) {
        let Some(resource) = resolved.get(&discovery::normalize(&h.resource)) else { continue };
        let key = key_of(resource);
        match groups.iter_mut().find(|g| g.key == key) {
            Some(g) => g.handlers.push(Arc::new(h.clone())),
            None => {
                groups.push(Group { key, resource: resource.clone(), name: h.resource.name.clone(), handlers: vec![Arc::new(h.clone())] })
            }
        }
    }
    groups
}

/// Whether a handler is served by watching its resource.
pub(super) fn watches(h: &Handler) -> bool {
    !h.is_activity() && !h.is_admission()
}

/// Every spelling of a resource that needs resolving: the watching handlers' and those of
/// the servers' resource settings (ignored fields), once each, in order.
pub(super) fn spellings(handlers: &[Handler], described: &[pb::DescribeResponse]) -> Vec<(Normalized, pb::ResourceSelector)> {
    let of_handlers = handlers.iter().filter(|h| watches(h)).map(|h| h.resource.clone());
    let of_settings = described.iter().flat_map(|d| &d.resources).filter_map(|r| r.resource.clone());
    let mut out: Vec<(Normalized, pb::ResourceSelector)> = Vec::new();
    for sel in of_handlers.chain(of_settings) {
        let n = discovery::normalize(&sel);
        if !out.iter().any(|(have, _)| *have == n) {
            out.push((n, sel));
        }
    }
    out
}

/// Resolves `sel` once, within [`FIRST_TRY`].
pub(super) async fn resolve_once(cluster: &Cluster, sel: &pb::ResourceSelector) -> Result<Option<ResolvedResource>, String> {
    match tokio::time::timeout(FIRST_TRY, discovery::resolve(cluster, sel)).await {
        Ok(r) => r.map_err(|e: Error| e.to_string()),
        Err(_) => Err(format!("discovery did not answer within {FIRST_TRY:?}")),
    }
}

/// Says why `name` is not served yet, and when it is looked up again.
pub(super) fn say_unresolved(log: &Logger, name: &str, attempt: &Result<Option<ResolvedResource>, String>, delay: Duration) {
    match attempt {
        Ok(Some(_)) => {}
        Ok(None) => log.warn(None, &format!("Resource '{name}' is not served by the API server (yet); retrying in {delay:?}.")),
        Err(e) => log.warn(None, &format!("Resource '{name}' could not be resolved: {e}; retrying in {delay:?}.")),
    }
}

/// A spelling looked up in the background until it resolves; stops when dropped.
pub(super) struct Resolver(tokio::task::JoinHandle<()>);

impl Drop for Resolver {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl Resolver {
    /// Looks `sel` up every `1, 2, 4 … 30 s` from now, and sends it with what it names to
    /// `found` once it resolves.
    pub(super) fn start(
        cluster: Cluster,
        spelling: Normalized,
        sel: pb::ResourceSelector,
        log: Logger,
        found: mpsc::UnboundedSender<Found>,
    ) -> Resolver {
        Resolver(tokio::spawn(async move {
            let mut delay = Duration::from_secs(1);
            loop {
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_secs(30));
                match resolve_once(&cluster, &sel).await {
                    Ok(Some(r)) => {
                        let _ = found.send((spelling, r));
                        return;
                    }
                    attempt => say_unresolved(&log, &sel.name, &attempt, delay),
                }
            }
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn handler(id: &str, kind: pb::HandlerKind, group: &str, version: &str, name: &str) -> Handler {
        let spec = pb::HandlerSpec {
            id: id.into(),
            kind: kind as i32,
            resource: Some(pb::ResourceSelector { group: group.into(), version: version.into(), name: name.into() }),
            ..Default::default()
        };
        Handler::from_spec(&spec, 0).unwrap()
    }

    fn resource(group: &str, version: &str, plural: &str) -> ResolvedResource {
        ResolvedResource {
            group: group.into(),
            version: version.into(),
            plural: plural.into(),
            kind: String::new(),
            namespaced: true,
            has_status: true,
            status_keeps_unknown: true,
        }
    }

    #[test]
    fn handlers_of_one_resource_spelled_many_ways_are_one_group_in_registration_order() {
        use pb::HandlerKind::*;
        let handlers = [
            handler("create_fn", Create, "", "", "kopfexamples"),
            handler("pods_fn", Event, "", "v1", "pods"),
            handler("delete_fn", Delete, "kopf.dev", "v1", "kopfexamples"),
            handler("update_fn", Update, "", "", "kex"),
            handler("field_fn", Create, "", "", "kopf.dev/v1/kopfexamples"),
            handler("old_fn", Create, "kopf.dev", "v1beta1", "kopfexamples"),
            handler("later_fn", Create, "", "", "notyet"),
        ];
        let kex = resource("kopf.dev", "v1", "kopfexamples");
        let spelled = |h: &Handler| discovery::normalize(&h.resource);
        let mut resolved: HashMap<Normalized, ResolvedResource> = HashMap::new();
        for i in [0, 2, 3, 4] {
            resolved.insert(spelled(&handlers[i]), kex.clone());
        }
        resolved.insert(spelled(&handlers[1]), resource("", "v1", "pods"));
        resolved.insert(spelled(&handlers[5]), resource("kopf.dev", "v1beta1", "kopfexamples"));
        let groups = by_resource(&handlers, &resolved);
        let got: Vec<(String, Vec<&str>)> =
            groups.iter().map(|g| (g.name.clone(), g.handlers.iter().map(|h| h.id.as_str()).collect())).collect();
        let want: Vec<(String, Vec<&str>)> = vec![
            ("kopfexamples".into(), vec!["create_fn", "delete_fn", "update_fn", "field_fn"]),
            ("pods".into(), vec!["pods_fn"]),
            ("kopfexamples".into(), vec!["old_fn"]),
        ];
        assert_eq!(got, want, "one group per (group, version, plural); `notyet` waits for its resolution");
        assert_eq!(groups[0].key, ("kopf.dev".into(), "v1".into(), "kopfexamples".into()));
    }

    #[test]
    fn every_spelling_is_resolved_once_with_those_of_the_resource_settings() {
        use pb::HandlerKind::*;
        let handlers = [
            handler("a", Create, "", "", "kopfexamples"),
            handler("b", Delete, "", "", "kopfexamples"),
            handler("c", Create, "kopf.dev", "", "kopfexamples"),
            handler("d", Startup, "", "", ""),
        ];
        let settings = pb::ResourceSettings {
            resource: Some(pb::ResourceSelector { group: String::new(), version: String::new(), name: "kopfexamples.kopf.dev".into() }),
            ..Default::default()
        };
        let described = [pb::DescribeResponse { resources: vec![settings], ..Default::default() }];
        let got: Vec<Normalized> = spellings(&handlers, &described).into_iter().map(|(n, _)| n).collect();
        assert_eq!(
            got,
            vec![(None, None, "kopfexamples".into()), (Some("kopf.dev".into()), None, "kopfexamples".into())],
            "`kopfexamples.kopf.dev` is spelled as `kopf.dev` + `kopfexamples`; the startup handler watches nothing"
        );
    }
}
