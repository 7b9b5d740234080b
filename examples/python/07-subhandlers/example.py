"""Sub-handlers: handlers a handler declares while it runs, one per piece of its work.

Each sub-handler is tracked on its own (`provision/item1`, `provision/item2`): one that fails
is retried alone, the ones that succeeded are not called again, and `provision` succeeds once
all of them have. Here the pieces are the object's `spec.items`."""

import bosun as kopf


@kopf.on.create("kopfexamples")
def provision(spec, **_):
    for item in spec.get("items", []):

        @kopf.subhandler(id=item)
        def provision_item(logger, item=item, **_):
            logger.info(f"Provisioned {item}.")
