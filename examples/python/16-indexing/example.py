"""Indices: in-memory views of many objects, kept up to date from their watch events and given
to any handler as a kwarg of the index's name.

An index function returns `{key: value}` for one object (or None to leave it out); the index
gathers, per key, the values of all the objects (a `kopf.Store`). Here Pods are indexed by
their `app` label; a timer of each KopfExample writes the pods of the app its `spec.field`
names, and a probe reports how many apps there are."""

import bosun as kopf


@kopf.index("pods", labels={"app": kopf.PRESENT})
def pods_by_app(labels, namespace, name, **_):
    return {labels["app"]: f"{namespace}/{name}"}


@kopf.timer("kopfexamples", interval=1)
def list_the_apps_pods(spec, pods_by_app, patch, **_):
    patch.status["pods"] = sorted(pods_by_app.get(spec.get("field"), []))


@kopf.on.probe()
def apps(pods_by_app, **_):
    return len(pods_by_app)
