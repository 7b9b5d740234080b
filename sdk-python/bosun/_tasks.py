"""Kopf's `spawn_tasks` and `run_tasks`, for programs that orchestrate the operator's tasks
themselves (Kopf's "Embedding" documentation):

    tasks = await bosun.spawn_tasks(clusterwide=True)
    await bosun.run_tasks(tasks)

Kopf spawns its reactor's tasks; here the one task is `bosun.operator()` (the handlers served
from this process, the controller as a child), given the same arguments. `run_tasks` waits until
a task ends, stops the others and raises what failed, as Kopf's does; cancelling it stops the
operator. Tasks that run alongside and were not spawned here are left alone (Kopf cancels every
task it finds that started after the operator; `ignored=` is accepted for that reason)."""

from __future__ import annotations

import asyncio
from typing import Any, Collection, List, Optional


async def spawn_tasks(*, lifecycle: Any = None, indexers: Any = None, registry: Any = None, settings: Any = None,
                      memories: Any = None, insights: Any = None, identity: Any = None,
                      standalone: Optional[bool] = None, priority: Optional[int] = None,
                      peering_name: Optional[str] = None, liveness_endpoint: Optional[str] = None,
                      clusterwide: bool = False, namespaces: Collection[Any] = (), namespace: Any = None,
                      stop_flag: Any = None, ready_flag: Any = None, vault: Any = None, memo: Any = None,
                      _command: Any = None) -> Collection["asyncio.Task[Any]"]:
    """The operator's tasks, started: one task running `bosun.operator()` with these
    arguments (Kopf's parameters, passed on as they are)."""
    from ._embedded import operator

    if namespaces and namespace:
        raise TypeError("Either namespaces= or namespace= can be passed. Got both.")
    kwargs = dict(lifecycle=lifecycle, indexers=indexers, registry=registry, settings=settings, memories=memories,
                  insights=insights, identity=identity, priority=priority, peering_name=peering_name,
                  liveness_endpoint=liveness_endpoint, clusterwide=clusterwide,
                  namespaces=list(namespaces) + ([namespace] if namespace else []), stop_flag=stop_flag,
                  ready_flag=ready_flag, vault=vault, memo=memo)
    if standalone is not None:
        kwargs["standalone"] = standalone
    task = asyncio.ensure_future(operator(**{k: v for k, v in kwargs.items() if v is not None}))
    return [task]


async def _stop(tasks: Collection["asyncio.Future[Any]"]) -> None:
    for task in tasks:
        task.cancel()
    if tasks:
        await asyncio.wait(tasks)


async def run_tasks(root_tasks: Collection["asyncio.Future[Any]"], *, ignored: Collection[Any] = frozenset(),
                    return_when: Any = None) -> None:
    """Runs the tasks until one of them ends, then stops the others and raises the first
    failure among them. Cancelled, it cancels them all. `return_when` is accepted because
    Kopf's documentation shows it (Kopf's own `run_tasks` refuses it); the tasks stop at the
    first that ends either way."""
    tasks: List["asyncio.Future[Any]"] = list(root_tasks)
    if not tasks:
        return
    try:
        done, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:
        await _stop(tasks)
        raise
    await _stop(pending)
    for task in tasks:
        if task.done() and not task.cancelled() and task.exception() is not None:
            raise task.exception()  # type: ignore[misc]
