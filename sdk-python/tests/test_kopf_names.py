"""Kopf's smaller names with a behaviour of their own: the errors' hierarchy, lifecycles,
object loggers, the daemon's stop reason, the reason kwarg's enum."""

import asyncio
import logging
import types
import typing

import pytest

import bosun


@pytest.mark.parametrize("error, bases", [
    (bosun.HandlerTimeoutError("t"), (bosun.PermanentError,)),
    (bosun.HandlerRetriesError("r"), (bosun.PermanentError,)),
    (bosun.AdmissionError("a", code=403), (bosun.PermanentError,)),
    (bosun.TemporaryError("t", delay=5), (Exception,)),
])
def test_errors_are_caught_by_kopfs_bases(error, bases):
    assert isinstance(error, bases)
    with pytest.raises(bases):
        raise error


def handler(id, retries):
    return types.SimpleNamespace(id=id, retries=retries)


STATE = {"a": handler("a", 2), "b": handler("b", 0), "c": handler("c", 1)}
HANDLERS = [STATE["a"], STATE["b"], STATE["c"]]


@pytest.mark.parametrize("lifecycle, expected", [
    (bosun.lifecycles.all_at_once, ["a", "b", "c"]),
    (bosun.lifecycles.one_by_one, ["a"]),
    (bosun.lifecycles.asap, ["b"]),
])
def test_lifecycles_pick_as_kopfs_do(lifecycle, expected):
    assert [h.id for h in lifecycle(HANDLERS, state=STATE)] == expected


@pytest.mark.parametrize("lifecycle, count", [(bosun.lifecycles.randomized, 1), (bosun.lifecycles.shuffled, 3)])
def test_random_lifecycles_pick_among_the_handlers(lifecycle, count):
    picked = lifecycle(HANDLERS)
    assert len(picked) == count and set(h.id for h in picked) <= {"a", "b", "c"}
    assert list(lifecycle([])) == []


def test_the_default_lifecycle_is_kept_as_set():
    assert bosun.get_default_lifecycle() is bosun.lifecycles.asap
    try:
        bosun.set_default_lifecycle(bosun.lifecycles.one_by_one)
        assert bosun.get_default_lifecycle() is bosun.lifecycles.one_by_one
    finally:
        bosun.set_default_lifecycle(None)
    assert bosun.get_default_lifecycle() is bosun.lifecycles.asap


@pytest.mark.parametrize("cls, skipped", [(bosun.ObjectLogger, False), (bosun.LocalObjectLogger, True)])
def test_object_loggers_prefix_the_object(caplog, cls, skipped):
    body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns", "uid": "u"}}
    logger = cls(body=body, settings=bosun.OperatorSettings())
    with caplog.at_level(logging.INFO, logger="bosun.objects"):
        logger.info("hello %s", "there")
    [record] = caplog.records
    assert record.getMessage() == "[ns/p] hello there"
    assert record.k8s_ref["uid"] == "u" and record.k8s_skip is skipped
    assert isinstance(logger, logging.LoggerAdapter)


def test_a_stopped_daemon_says_why():
    async def main():
        stopped = bosun.DaemonStopped(asyncio.get_running_loop())
        before = (bool(stopped), stopped.reason)
        stopped.set()
        stopped.set(bosun.DaemonStoppingReason.RESOURCE_DELETED)
        return before, stopped

    (was, reason_before), stopped = asyncio.run(main())
    assert (was, reason_before) == (False, None) and bool(stopped)
    assert bosun.DaemonStoppingReason.DAEMON_SIGNALLED in stopped.reason
    assert bosun.DaemonStoppingReason.RESOURCE_DELETED in stopped.reason


@pytest.mark.parametrize("member, text", [(bosun.Reason.CREATE, "create"), (bosun.Reason.RESUME, "resume"),
                                          (bosun.Reason.GONE, "gone")])
def test_reasons_read_as_kopfs_strings(member, text):
    assert member == text and str(member) == text and f"{member}" == text


def test_kopfs_types_are_usable_in_annotations():
    for hint in (bosun.Body, bosun.Spec, bosun.Labels, bosun.Annotations, bosun.Logger, bosun.Resource, bosun.Diff,
                 bosun.Patch, bosun.Reason, bosun.OperatorSettings, bosun.RawEvent, bosun.Memo, bosun.DaemonStopped):
        assert typing.Optional[hint] is not None
    assert bosun.Index[typing.Tuple[str, str], typing.List[bool]] is not None
    assert bosun.Store[int] is not None


def test_an_aiohttp_session_is_accepted():
    session = bosun.AiohttpSession(server="https://k:6443", aiohttp_session=object())
    assert session.priority == 0 and session.server == "https://k:6443"
