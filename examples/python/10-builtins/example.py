"""Handlers of built-in resources: the same decorators take `pods` (or `v1/pods`,
`deployments.apps`, …) as they take custom resources.

Every Pod outside the `kube-*` namespaces gets the label `examples.bosun.dev/seen`, set by
returning nothing and writing to `patch` (written with the handler's outcome in one request); a
deletion handler (so a finalizer on each such Pod) reports the pod's last phase. The `when=`
filter keeps the system's own Pods out: their handlers are never called."""

import bosun as kopf


def outside_the_system(namespace, **_):
    return not namespace.startswith("kube-")


@kopf.on.create("pods", when=outside_the_system)
def mark_seen(patch, name, logger, **_):
    patch.metadata.labels["examples.bosun.dev/seen"] = "yes"
    logger.info(f"Pod {name} is marked as seen.")


@kopf.on.delete("pods", when=outside_the_system)
def report_gone(name, status, logger, **_):
    logger.info(f"Pod {name} is gone in phase {status.get('phase', 'unknown')}.")
