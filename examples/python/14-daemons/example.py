"""Daemons: a function that runs for as long as its object exists, one per object.

A sync daemon runs in a thread and must look at `stopped` (`stopped.wait(seconds)` sleeps
until it is time to stop); an async one is cancelled instead. A daemon that raises is started
again (after `backoff` seconds, or the TemporaryError's delay), and its `patch` is written to the
object as it goes. Deleting the object stops its daemons and waits for them."""

import asyncio

import bosun as kopf


@kopf.daemon("kopfexamples", backoff=1)
def heartbeat(stopped, name, retry, patch, logger, **_):
    if retry < 2:
        raise kopf.TemporaryError(f"not ready to beat yet (attempt {retry})", delay=1)
    beats = 0
    while not stopped:
        beats += 1
        logger.info(f"Heartbeat {beats} of {name}.")
        stopped.wait(1)
    patch.status["heartbeats"] = beats
    logger.info(f"Heartbeat of {name} stops after {beats} beat(s).")


@kopf.daemon("kopfexamples", cancellation_timeout=2, annotations={"someannotation": kopf.PRESENT})
async def pulse(spec, logger, **_):
    try:
        while True:
            logger.info(f"Pulse: field={spec.get('field')!r}")
            await asyncio.sleep(1)
    except asyncio.CancelledError:
        logger.info("Pulse is cancelled.")
        raise
