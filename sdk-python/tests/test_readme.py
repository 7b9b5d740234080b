"""The README's Python handler server, as it is written: its code registers what the README
says it does, and the handler answers as described."""

from __future__ import annotations

import json
import pathlib
import re

import bosun
from bosun.v1 import handler_pb2 as pb
from sdk_support import request

README = pathlib.Path(__file__).resolve().parents[2] / "README.md"


def test_the_readme_python_snippet_registers_a_create_and_a_filtered_field_handler(serve):
    text = README.read_text()
    section = text[text.index("## Writing a handler server in Python"):]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    registry, saved = bosun.Registry(), bosun.get_default_registry()
    bosun.set_default_registry(registry)
    try:
        exec(compile(code, "README.md", "exec"), {})
    finally:
        bosun.set_default_registry(saved)

    described = serve(registry).stub.Describe(pb.DescribeRequest())
    assert [(h.id, h.kind) for h in described.handlers] == [
        ("create_fn", pb.HANDLER_KIND_CREATE), ("field_fn/spec.field", pb.HANDLER_KIND_FIELD)]
    assert json.loads(described.handlers[1].filters.labels["app"].equals) == "web"

    server = serve(registry)
    answer = server.stub.Handle(request("create_fn"))
    assert (answer.outcome, json.loads(answer.result)) == (pb.OUTCOME_SUCCESS, {"message": "hello world"})
    assert [line.message for line in answer.logs] == ["Creating with {'field': 'value', 'items': ['item1', 'item2']}"]
    body = {"metadata": {"name": "k", "namespace": "default", "uid": "u"}, "spec": {}}
    waiting = server.stub.Handle(request("create_fn", body=body))
    assert (waiting.outcome, waiting.message, waiting.delay_seconds) == (pb.OUTCOME_TEMPORARY_ERROR, "no field yet", 10.0)
    field = server.stub.Handle(request("field_fn/spec.field", reason=pb.REASON_UPDATE, old=b'"a"', new=b'"b"'))
    assert json.loads(field.merge_patch) == {"status": {"field-was": "a"}}
