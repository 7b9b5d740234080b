"""Most of the features at once, as one operator: a playground for trying things out.

Startup settings, a creation handler with a child and events, a field handler whose work is
split into sub-handlers, an update handler, a deletion handler (so a finalizer), an index of
the children, a timer that reads it, a daemon, a probe and a cleanup handler."""

import asyncio

import bosun


@bosun.on.startup()
def configure(settings, logger, **_):
    settings.posting.level = 20  # post events of INFO and above (logging.INFO)
    settings.persistence.finalizer = "examples.bosun.dev/all-at-once"
    logger.info("Configured: events from INFO, our own finalizer.")


@bosun.on.create("kopfexamples")
def open_account(name, body, spec, logger, **_):
    bosun.own({"apiVersion": "v1", "kind": "ConfigMap", "data": {"field": str(spec.get("field"))}})
    bosun.info(body, reason="Opened", message=f"account of {name} is open")
    logger.info(f"Opening the account of {name}.")  # posted as an event too (settings.posting)
    return {"opened": True}


@bosun.on.field("kopfexamples", field="spec.items")
def resync_items(old, new, **_):
    for item in sorted(set(old or []) ^ set(new or [])):

        @bosun.subhandler(id=f"sync-{item}")
        def sync(logger, item=item, **_):
            logger.info(f"Synced the item {item}.")


@bosun.on.update("kopfexamples")
def audit(diff, logger, **_):
    logger.info(f"Audited: {[(op, '.'.join(path), old, new) for op, path, old, new in diff]}")


@bosun.on.delete("kopfexamples")
def close_account(name, logger, **_):
    logger.info(f"Closing the account of {name}.")


@bosun.index("configmaps")
def accounts(meta, name, **_):
    owners = [ref["name"] for ref in meta.get("ownerReferences", []) if ref.get("kind") == "KopfExample"]
    return {owner: name for owner in owners} or None


@bosun.timer("kopfexamples", interval=2)
def check_the_account(name, accounts, logger, **_):
    logger.info(f"{name} has the config maps {sorted(accounts.get(name, []))}.")


@bosun.daemon("kopfexamples", cancellation_timeout=2)
async def keep_alive(name, logger, **_):
    while True:
        logger.info(f"{name} is alive.")
        await asyncio.sleep(2)


@bosun.on.probe()
def accounts_open(accounts, **_):
    return len(accounts)


@bosun.on.cleanup()
def say_goodbye(logger, **_):
    logger.info("The operator of accounts stops.")
