"""Kubernetes events about the handled object (`kubectl describe kex kopf-example-1` lists
them): `kopf.info` (type Normal), `kopf.warn` (Warning), `kopf.exception` (Error, the
exception's text appended to the message) and `kopf.event` with a type of its own. They are
posted in the background: a handler does not wait for them."""

import bosun as kopf


@kopf.on.create("kopfexamples")
def report(body, spec, **_):
    kopf.info(body, reason="Inspected", message=f"{len(spec.get('items', []))} item(s) to serve")
    if "deadline" not in spec:
        kopf.warn(body, reason="NoDeadline", message="spec.deadline is not set; serving without one")
    try:
        int(spec.get("duration", ""))
    except ValueError:
        kopf.exception(body, reason="Unparsed", message="spec.duration is not a number of seconds:")
    kopf.event(body, type="Audit", reason="Reported", message="all checks are done")
