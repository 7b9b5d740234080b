"""Operator-level handlers, called for the operator as a whole rather than for an object:

- `@kopf.on.login`: the credentials the handlers' own clients use (the controller has its own);
- `@kopf.on.startup`: before anything is watched (retried like any handler: watching waits);
- `@kopf.on.probe`: each result is one key of the liveness endpoint's JSON (`--liveness URL`);
- `@kopf.on.cleanup`: when the operator stops.

Between startup and cleanup a background task of the handler server reports the inventory of
Pods that the event handler keeps."""

import asyncio
import time

import bosun as kopf

started = time.monotonic()
inventory: dict = {}  # "namespace/name" -> phase, of every Pod seen
reporter = None  # the background task


@kopf.on.login()
def login(logger, **kwargs):
    logger.info("Logging in with the kubeconfig's current context.")
    return kopf.login_with_kubeconfig(**kwargs)


@kopf.on.startup()
async def start_reporting(logger, **_):
    global reporter
    reporter = asyncio.create_task(report_every_second(logger))


@kopf.on.startup()
def wait_for_a_dependency(retry, logger, **_):
    if retry < 2:
        raise kopf.TemporaryError(f"the dependency is not up yet (attempt {retry})", delay=1)
    logger.info("The dependency is up.")


@kopf.on.event("pods")
def take_stock(event, namespace, name, status, **_):
    key = f"{namespace}/{name}"
    if event["type"] == "DELETED":
        inventory.pop(key, None)
    else:
        inventory[key] = status.get("phase", "Unknown")


@kopf.on.probe(id="pods")
def count_pods(**_):
    return len(inventory)


@kopf.on.probe()
def uptime(**_):
    return round(time.monotonic() - started)


@kopf.on.cleanup()
async def stop_reporting(logger, **_):
    reporter.cancel()
    logger.info(f"Stopped reporting; {len(inventory)} pod(s) in the inventory at the end.")


async def report_every_second(logger):
    while True:
        logger.info(f"The inventory has {len(inventory)} pod(s): {sorted(inventory)}")
        await asyncio.sleep(1)
