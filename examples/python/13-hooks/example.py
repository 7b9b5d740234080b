import asyncio
import random

import bosun

LOCK: asyncio.Lock  # requires a loop on creation
STOPPERS: dict[str, dict[str, asyncio.Event]] = {}  # [namespace][name]


@bosun.on.startup()
async def startup_fn_simple(logger, **kwargs):
    logger.info("Initialising the task-lock...")
    global LOCK
    LOCK = asyncio.Lock()  # in the current asyncio loop


@bosun.on.startup()
async def startup_fn_retried(retry, logger, **kwargs):
    if retry < 3:
        raise bosun.TemporaryError(f"Going to succeed in {3-retry}s", delay=1)
    else:
        logger.info("Starting retried...")
        # raise bosun.PermanentError("Unable to start!")


@bosun.on.cleanup()
async def cleanup_fn(logger, **kwargs):
    logger.info("Cleaning up...")
    for namespace in STOPPERS.keys():
        for name, flag in STOPPERS[namespace].items():
            flag.set()
    logger.info("All pod-tasks are requested to stop...")


@bosun.on.probe()
async def tasks_count(**kwargs):
    return sum(len(flags) for flags in STOPPERS.values())


@bosun.on.probe()
async def monitored_objects(**kwargs):
    return {namespace: sorted(name for name in STOPPERS[namespace]) for namespace in STOPPERS}


@bosun.on.event('pods')
async def pod_task(namespace, name, logger, **_):
    async with LOCK:
        if namespace not in STOPPERS or name not in STOPPERS[namespace]:
            flag = asyncio.Event()
            STOPPERS.setdefault(namespace, {}).setdefault(name, flag)
            asyncio.create_task(_task_fn(logger, shouldstop=flag))


async def _task_fn(logger, shouldstop: asyncio.Event):
    while not shouldstop.is_set():
        await asyncio.sleep(random.randint(1, 10))
        logger.info("Served by the background task.")
    logger.info("Serving is finished by request.")
