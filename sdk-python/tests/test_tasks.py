"""Kopf's `spawn_tasks`/`run_tasks` on top of `bosun.operator()`: the arguments reach it, the
first task to end stops the rest, failures are raised, cancellation stops everything."""

import asyncio

import pytest

import bosun
from bosun import _embedded


@pytest.fixture
def operator(monkeypatch):
    """`bosun.operator()` replaced by one that records its arguments and runs until stopped."""
    calls = []

    async def fake(**kwargs):
        calls.append(kwargs)
        await asyncio.Event().wait()

    monkeypatch.setattr(_embedded, "operator", fake)
    return calls


def test_spawned_tasks_run_the_operator_with_kopfs_arguments(operator):
    async def main():
        tasks = await bosun.spawn_tasks(clusterwide=True, namespace="ns1", standalone=True, priority=5,
                                        liveness_endpoint="http://0.0.0.0:8080/healthz")
        await asyncio.sleep(0)
        for task in tasks:
            task.cancel()
        await asyncio.wait(tasks)
        return tasks

    tasks = asyncio.run(main())
    assert len(tasks) == 1
    assert operator == [{"clusterwide": True, "namespaces": ["ns1"], "standalone": True, "priority": 5,
                         "liveness_endpoint": "http://0.0.0.0:8080/healthz"}]


def test_namespace_and_namespaces_together_are_refused(operator):
    with pytest.raises(TypeError):
        asyncio.run(bosun.spawn_tasks(namespace="a", namespaces=["b"]))


def test_run_tasks_stops_the_rest_when_one_ends_and_raises_its_failure():
    async def main():
        async def fails():
            raise RuntimeError("the controller exited")

        forever = asyncio.ensure_future(asyncio.Event().wait())
        with pytest.raises(RuntimeError, match="the controller exited"):
            await bosun.run_tasks([asyncio.ensure_future(fails()), forever], return_when=asyncio.FIRST_COMPLETED)
        return forever

    assert asyncio.run(main()).cancelled()


def test_cancelling_run_tasks_cancels_the_tasks():
    async def main():
        forever = asyncio.ensure_future(asyncio.Event().wait())
        runner = asyncio.ensure_future(bosun.run_tasks([forever]))
        await asyncio.sleep(0)
        runner.cancel()
        with pytest.raises(asyncio.CancelledError):
            await runner
        return forever

    assert asyncio.run(main()).cancelled()


def test_run_tasks_returns_when_a_task_ends_cleanly():
    async def main():
        async def done():
            return 0

        await bosun.run_tasks([asyncio.ensure_future(done())])
        return True

    assert asyncio.run(main())
