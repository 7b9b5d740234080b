"""Kopf's filter vocabulary: `PRESENT`/`ABSENT` tokens and the `all_`/`any_`/`none_`/`not_`
combinators of `when=`-style callbacks, also as the handler server evaluates them."""

import pytest

import bosun
from bosun.v1 import handler_pb2 as pb

from sdk_support import request

RED = lambda spec, **_: spec.get("colour") == "red"  # noqa: E731
BIG = lambda spec, **_: spec.get("size", 0) > 10  # noqa: E731
NAMED = lambda name: name == "kex1"  # noqa: E731  (takes only what it needs, as Bosun allows)


@pytest.mark.parametrize("combined, spec, holds", [
    (bosun.all_([RED, BIG]), {"colour": "red", "size": 11}, True),
    (bosun.all_([RED, BIG]), {"colour": "red", "size": 1}, False),
    (bosun.all_([]), {}, True),
    (bosun.any_([RED, BIG]), {"colour": "blue", "size": 11}, True),
    (bosun.any_([RED, BIG]), {"colour": "blue", "size": 1}, False),
    (bosun.any_([]), {}, False),
    (bosun.none_([RED, BIG]), {"colour": "blue", "size": 1}, True),
    (bosun.none_([RED, BIG]), {"colour": "red"}, False),
    (bosun.not_(RED), {"colour": "red"}, False),
    (bosun.not_(RED), {"colour": "blue"}, True),
    (bosun.all_([bosun.not_(RED), bosun.any_([BIG, NAMED])]), {"colour": "blue"}, True),
    (bosun.all_([bosun.not_(RED), bosun.any_([BIG, NAMED])]), {"colour": "red", "size": 99}, False),
])
def test_combinators_combine_callbacks_taking_kwargs(combined, spec, holds):
    assert combined(spec=spec, name="kex1", logger=None) is holds


def test_combinators_pass_positional_values_on():
    starts = lambda value, **_: value.startswith("a")  # noqa: E731
    ends = lambda value, **_: value.endswith("z")  # noqa: E731
    assert bosun.all_([starts, ends])("abcz") and not bosun.any_([starts, ends])("bcd")


def test_combinators_stop_early_as_kopfs_do():
    called = []

    def spy(**_):
        called.append(1)
        return True

    assert bosun.any_([spy, spy])() and called == [1]


@pytest.mark.parametrize("token, name", [(bosun.PRESENT, "PRESENT"), (bosun.ABSENT, "ABSENT")])
def test_tokens_are_kopfs_enum(token, name):
    assert type(token).__name__ == "MetaFilterToken" and token.name == name and not callable(token)


@pytest.mark.parametrize("when, skipped", [
    (bosun.all_([RED, NAMED]), True),
    (bosun.any_([RED, NAMED]), False),
    (bosun.none_([RED]), False),
    (bosun.not_(NAMED), True),
])
def test_the_server_evaluates_combined_when_filters(registry, serve, when, skipped):
    @bosun.on.create("kopfexamples", when=when, registry=registry)
    def create_fn(**_):
        return "ran"

    answer = serve(registry).stub.Handle(request("create_fn"))
    assert (answer.outcome == pb.OUTCOME_SKIPPED) is skipped, answer.message
