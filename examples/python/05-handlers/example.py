"""An object's whole life, handler by handler: creation, resumption (the operator started
again and finds the object already there), updates of the whole object and of one field, and
deletion. Handlers of one cause run one after the other, in the order they are declared.

A deletion handler makes the operator put a finalizer on the object, so that Kubernetes waits
for the handlers before the object goes."""

import bosun as kopf

reserved = set()  # names of the objects this handler server has reserved resources for


@kopf.on.create("kopfexamples")
def reserve(name, **_):
    reserved.add(name)
    print(f"1/2 reserving resources for {name}")


@kopf.on.create("kopfexamples")
def announce(name, spec, logger, **_):
    logger.info(f"2/2 announcing {name} with {len(spec.get('items', []))} item(s)")


@kopf.on.resume("kopfexamples")
def reattach(name, **_):
    reserved.add(name)
    print(f"reattaching to {name} after a restart")


@kopf.on.update("kopfexamples")
def reconcile(diff, **_):
    changes = [(op, ".".join(path)) for op, path, _, _ in diff]
    print(f"reconciling {len(changes)} change(s): {changes}")


@kopf.on.field("kopfexamples", field="spec.field")
def follow_field(old, new, **_):
    print(f"spec.field went from {old!r} to {new!r}")


@kopf.on.delete("kopfexamples")
def release(name, **_):
    if name in reserved:
        reserved.remove(name)
    print(f"releasing resources of {name}; still reserved: {sorted(reserved)}")


@kopf.on.delete("kopfexamples")
def farewell(name, meta, logger, **_):
    logger.info(f"farewell, {name}, created at {meta.get('creationTimestamp')}")
