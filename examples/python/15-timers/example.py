"""Timers: a function called every `interval` seconds for each object, sync or async.

`initial_delay` holds back the first call; `idle` calls the timer only once the object has
not changed for that long (any change restarts the wait, so a timer with `idle` should not
write to its own object)."""

import bosun as kopf


@kopf.timer("kopfexamples", interval=1, initial_delay=1)
def tick(name, spec, logger, **_):
    logger.info(f"Tick for {name}: field={spec.get('field')!r}")


@kopf.timer("kopfexamples", interval=2, idle=3)
async def settled(name, logger, **_):
    logger.info(f"{name} has not changed for 3 s or more.")
